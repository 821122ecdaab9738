"""kemu's bound on the replicas of one admin request (docs/limits.md): a CreateTopics or
CreatePartitions asking for more than ``kemu.max.replicas.per.request`` is refused with
POLICY_VIOLATION naming the limit, after Kafka's own checks of the counts and before any
assignment is built; requests as big as the benches' pass; and the assignment of a big
legal request, which repeats every n(n-1) partitions, is the one Kafka computes
partition by partition.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.admin import (
    DEFAULT_MAX_REPLICAS_PER_CLUSTER,
    DEFAULT_MAX_REPLICAS_PER_REQUEST,
    BrokerConfig,
    BrokerMetadata,
    ConfigError,
    RequestedTopic,
    assign_replicas,
    check_cluster_replicas,
    check_request_replicas,
    check_topic_replicas,
    plan_create_topic,
    validate_create_partitions,
)
from protocol.errors import ErrorCode, KafkaApiError
from protocol.ids import BrokerId
from protocol.zkdata import ReplicaAssignment

B = BrokerId
HUGE = 2**31 - 1
LIMIT_NAME = "kemu.max.replicas.per.request"


def unracked(n: int) -> list[BrokerMetadata]:
    return [BrokerMetadata(B(i)) for i in range(n)]


def refusal(exc: pytest.ExceptionInfo[KafkaApiError]) -> tuple[ErrorCode, str]:
    return exc.value.code, str(exc.value)


def plan(name: str, config: BrokerConfig | None = None, **request: object) -> object:
    rng = random.Random(3)
    return plan_create_topic(
        name,
        metadata_topics=(),
        existing_topics=(),
        alive_brokers=unracked(3),
        broker_config=config or BrokerConfig(),
        rng=rng,
        **request,  # type: ignore[arg-type]
    )


def existing(assignment: Mapping[int, Sequence[int]]) -> dict[int, ReplicaAssignment]:
    return {p: ReplicaAssignment(replicas=tuple(B(b) for b in r)) for p, r in assignment.items()}


# ----------------------------------------------------------------------------- the bound


def test_the_bound_is_inclusive_and_its_refusal_names_the_limit() -> None:
    """Exactly the limit passes; one replica more is POLICY_VIOLATION, whose message says
    how many were asked for, the limit and the config that sets it."""
    check_topic_replicas(10, 3, 30)
    with pytest.raises(KafkaApiError) as exc:
        check_topic_replicas(31, 1, 30)
    assert refusal(exc) == (
        ErrorCode.POLICY_VIOLATION,
        f"Excessively large number of replicas per request: 31 requested, kemu's limit is"
        f" 30 ({LIMIT_NAME}).",
    )


def test_the_defaults_leave_room_for_the_benches() -> None:
    """The benches' one request of 1,000 topics x 100 partitions x RF 3 (300,000 replicas)
    is well within the per-request default, and its cluster within the per-cluster one."""
    bench = [RequestedTopic(100, 3)] * 1000
    total = check_request_replicas(
        bench, num_partitions=1, replication_factor=1, limit=DEFAULT_MAX_REPLICAS_PER_REQUEST
    )
    assert total == 300_000
    assert DEFAULT_MAX_REPLICAS_PER_REQUEST >= 3 * 300_000
    check_cluster_replicas(0, 300_000, DEFAULT_MAX_REPLICAS_PER_CLUSTER)
    assert DEFAULT_MAX_REPLICAS_PER_CLUSTER >= 2 * DEFAULT_MAX_REPLICAS_PER_REQUEST


def test_a_whole_request_counts_every_topic_defaults_and_manual_lists() -> None:
    """The request total adds each topic's partitions x RF (-1 read as the broker's
    default), or the sizes of its manual lists; counts that are not positive add nothing
    (their own checks refuse them); over the limit, the refusal gives the whole total."""
    topics = [
        RequestedTopic(10, 3),  # 30
        RequestedTopic(-1, -1),  # 4 x 2 = 8
        RequestedTopic(-1, -1, manual=(3, 3)),  # 6, whatever the counts say
        RequestedTopic(0, 3),  # refused on its own: nothing here
        RequestedTopic(5, -7),
    ]
    assert check_request_replicas(topics, num_partitions=4, replication_factor=2, limit=44) == 44
    with pytest.raises(KafkaApiError) as exc:
        check_request_replicas(
            [*topics, RequestedTopic(1, 1)], num_partitions=4, replication_factor=2, limit=44
        )
    assert refusal(exc)[0] is ErrorCode.POLICY_VIOLATION
    assert "45 requested, kemu's limit is 44" in refusal(exc)[1]


def test_the_cluster_bound_counts_what_is_there_already() -> None:
    """Adding to a cluster is refused once what it holds plus what is added passes the
    per-cluster limit; the message names that config."""
    check_cluster_replicas(90, 10, 100)
    with pytest.raises(KafkaApiError) as exc:
        check_cluster_replicas(90, 11, 100)
    code, message = refusal(exc)
    assert code is ErrorCode.POLICY_VIOLATION
    assert "in the cluster (90 already, 11 more): 101 requested" in message
    assert "kemu.max.replicas.per.cluster" in message


def test_the_limits_are_broker_configs() -> None:
    """Both limits are broker configs with kemu's names; a limit below 1 is refused as
    Kafka refuses a value out of its range."""
    config = BrokerConfig.from_overrides({LIMIT_NAME: "50", "kemu.max.replicas.per.cluster": "500"})
    assert (config.kemu_max_replicas_per_request, config.kemu_max_replicas_per_cluster) == (
        50,
        500,
    )
    assert BrokerConfig().kemu_max_replicas_per_request == DEFAULT_MAX_REPLICAS_PER_REQUEST
    with pytest.raises(ConfigError, match=LIMIT_NAME):
        BrokerConfig.from_overrides({LIMIT_NAME: "0"})


# ----------------------------------------------------------------------------- CreateTopics


def test_two_billion_partitions_are_refused_before_any_assignment() -> None:
    """CreateTopics of 2^31-1 partitions is refused at once, and nothing was drawn from
    the RNG: the assignment was never started."""
    rng = random.Random(3)
    before = rng.getstate()
    with pytest.raises(KafkaApiError) as exc:
        plan_create_topic(
            "dos",
            num_partitions=HUGE,
            replication_factor=1,
            metadata_topics=(),
            existing_topics=(),
            alive_brokers=unracked(3),
            broker_config=BrokerConfig(),
            rng=rng,
        )
    code, message = refusal(exc)
    assert code is ErrorCode.POLICY_VIOLATION
    assert f"{HUGE} requested, kemu's limit is {DEFAULT_MAX_REPLICAS_PER_REQUEST}" in message
    assert rng.getstate() == before


def test_kafkas_own_checks_of_the_counts_come_first() -> None:
    """A count Kafka itself refuses gets Kafka's error, even when the request is also
    too big: no partitions, or more replicas per partition than brokers."""
    with pytest.raises(KafkaApiError) as exc:
        plan("t", num_partitions=HUGE, replication_factor=4)
    assert refusal(exc)[0] is ErrorCode.INVALID_REPLICATION_FACTOR
    with pytest.raises(KafkaApiError) as exc:
        plan("t", num_partitions=0, replication_factor=HUGE)
    assert refusal(exc)[0] is ErrorCode.INVALID_PARTITIONS


def test_the_configured_limit_bounds_automatic_and_manual_assignments() -> None:
    """With ``kemu.max.replicas.per.request`` at 6: 2 x 3 and a manual 3 x 2 pass,
    7 replicas either way are refused; the broker's defaults count as asked for."""
    config = BrokerConfig.from_overrides({LIMIT_NAME: "6", "num.partitions": "7"})
    plan("a", config, num_partitions=2, replication_factor=3)
    plan("b", config, assignment={0: [0, 1], 1: [1, 2], 2: [2, 0]})
    for request in (
        {"num_partitions": 7, "replication_factor": 1},
        {"assignment": {0: [0, 1, 2], 1: [1, 2, 0], 2: [2]}},
        {},  # num.partitions 7, default.replication.factor 1
    ):
        with pytest.raises(KafkaApiError) as exc:
            plan("c", config, **request)
        assert refusal(exc)[0] is ErrorCode.POLICY_VIOLATION, request
        assert "7 requested, kemu's limit is 6" in refusal(exc)[1]


# ----------------------------------------------------------------------------- CreatePartitions


def test_adding_two_billion_partitions_is_refused_before_any_assignment() -> None:
    """CreatePartitions taking a 1-partition RF 3 topic to 2^31-1 partitions asks for
    (2^31-2) x 3 new replicas: refused at once, naming the limit."""
    with pytest.raises(KafkaApiError) as exc:
        validate_create_partitions("t", existing({0: [0, 1, 2]}), HUGE, None, unracked(3))
    code, message = refusal(exc)
    assert code is ErrorCode.POLICY_VIOLATION
    assert f"{(HUGE - 1) * 3} requested" in message
    assert LIMIT_NAME in message


def test_partition_addition_limits_count_the_new_replicas_only() -> None:
    """The bound is on what the request adds: a topic already at the limit may grow by
    its limit again; manual lists are counted as given; Kafka's "no increase" comes
    first."""
    topic = existing({p: [p % 3, (p + 1) % 3] for p in range(5)})  # 10 replicas
    added = validate_create_partitions("t", topic, 10, None, unracked(3), max_replicas=10)
    assert sorted(added) == [5, 6, 7, 8, 9]
    with pytest.raises(KafkaApiError) as exc:
        validate_create_partitions("t", topic, 11, None, unracked(3), max_replicas=10)
    assert "12 requested, kemu's limit is 10" in refusal(exc)[1]
    with pytest.raises(KafkaApiError) as exc:
        validate_create_partitions(
            "t", topic, 7, [[0, 1, 2], [1, 2, 0]], unracked(3), max_replicas=5
        )
    assert "6 requested, kemu's limit is 5" in refusal(exc)[1]
    with pytest.raises(KafkaApiError) as exc:
        validate_create_partitions("t", topic, 5, None, unracked(3), max_replicas=1)
    assert refusal(exc)[0] is ErrorCode.INVALID_PARTITIONS


# ----------------------------------------------------------------------------- big assignments


def one_by_one(
    brokers: Sequence[BrokerMetadata],
    n_partitions: int,
    rf: int,
    start: int,
    shift: int,
    first_partition: int,
) -> dict[int, tuple[BrokerId, ...]]:
    """Kafka's loop, one partition per call: partition p gets the shift that Kafka's loop
    has reached at p (one more at every multiple of the broker count after the first
    partition), computed afresh each time."""
    n = len(brokers)
    out: dict[int, tuple[BrokerId, ...]] = {}
    for p in range(first_partition, first_partition + n_partitions):
        steps = sum(1 for k in range(max(first_partition, 1), p) if k % n == 0)
        (replicas,) = assign_replicas(
            brokers,
            1,
            rf,
            start_index=start,
            shift=shift + steps,
            start_partition_id=p,
        ).values()
        out[p] = replicas
    return out


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 6),
    racks=st.integers(0, 3),
    data=st.data(),
)
def test_a_long_assignment_is_kafkas_partition_by_partition(
    n: int, racks: int, data: st.DataObject
) -> None:
    """Over several periods of n(n-1) partitions, from any first partition, with or
    without racks, the assignment equals Kafka's loop run one partition at a time."""
    brokers = [BrokerMetadata(B(i), None if racks == 0 else f"r{i % racks}") for i in range(n)]
    rf = data.draw(st.integers(1, n))
    start = data.draw(st.integers(0, n - 1))
    shift = data.draw(st.integers(0, n - 1))
    first = data.draw(st.integers(0, 2 * n))
    n_partitions = data.draw(st.integers(1, 3 * max(1, n * (n - 1)) + 2))
    whole = assign_replicas(
        brokers, n_partitions, rf, start_index=start, shift=shift, start_partition_id=first
    )
    assert whole == one_by_one(brokers, n_partitions, rf, start, shift, first)


def test_a_million_replica_assignment_is_planned_quickly() -> None:
    """The largest request the default allows (333,333 partitions x RF 3 on 100 brokers)
    is planned whole, every partition present, each replica list of 3 distinct brokers."""
    assignment = assign_replicas(unracked(100), 333_333, 3, rng=random.Random(1))
    assert len(assignment) == 333_333
    assert list(assignment) == list(range(333_333))
    assert all(len(set(r)) == 3 for r in set(assignment.values()))
