"""Replica assignment is Kafka 2.7's ``AdminUtils.assignReplicasToBrokers``.

Exact lists come from the spec's worked examples (§9.4, each checked against Kafka's
tests) and seed 003's example; the distribution checks are those of Kafka's
``AdminRackAwareTest``/``RackAwareTest``; Hypothesis checks the invariants over many
broker sets, rack layouts and seeds.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.admin import (
    NOT_ALL_RACKS_CLI_MESSAGE,
    NOT_ALL_RACKS_MESSAGE,
    AdminOperationError,
    BrokerMetadata,
    RackMode,
    add_partitions_assignment,
    assign_replicas,
    broker_metadatas,
    check_partition_addition,
    partition_addition_start_index,
    rack_alternated_brokers,
)
from protocol import jvm
from protocol.errors import ErrorCode, KafkaApiError, error_code_for
from protocol.ids import BrokerId

B = BrokerId


def unracked(*ids: int) -> list[BrokerMetadata]:
    return [BrokerMetadata(B(i)) for i in ids]


def racked(racks: Mapping[int, str]) -> list[BrokerMetadata]:
    return [BrokerMetadata(B(i), rack) for i, rack in sorted(racks.items())]


def as_lists(assignment: Mapping[int, Sequence[int]]) -> dict[int, list[int]]:
    return {p: list(r) for p, r in assignment.items()}


def check_distribution(
    assignment: Mapping[int, Sequence[int]],
    racks: Mapping[int, str],
    n_partitions: int,
    replication_factor: int,
    *,
    rack_aware: bool = True,
    leaders_even: bool = True,
    replicas_even: bool = True,
) -> None:
    """Kafka's ``RackAwareTest.checkReplicaDistribution``: no broker twice in a partition;
    optionally one rack per replica, equal leader counts and equal replica counts."""
    for replicas in assignment.values():
        assert len(set(replicas)) == len(replicas)
    if rack_aware:
        for replicas in assignment.values():
            assert len({racks[b] for b in replicas}) == replication_factor
    if leaders_even:
        leaders = Counter(replicas[0] for replicas in assignment.values())
        assert sorted(leaders.values()) == [n_partitions // len(racks)] * len(racks)
    if replicas_even:
        counts = Counter(b for replicas in assignment.values() for b in replicas)
        per_broker = n_partitions * replication_factor // len(racks)
        assert sorted(counts.values()) == [per_broker] * len(racks)


SPEC_RACKS = {0: "r1", 1: "r3", 2: "r3", 3: "r2", 4: "r2", 5: "r1"}
KAFKA_RACKS = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}


# ----------------------------------------------------------------- worked examples (§9.4)


def test_rack_unaware_ten_partitions_match_spec_example() -> None:
    """Five brokers, 10 partitions, RF 3, fixed start 0: the shift grows at partition 5."""
    assignment = assign_replicas(unracked(0, 1, 2, 3, 4), 10, 3, start_index=0, shift=0)
    assert as_lists(assignment) == {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }


def test_partition_addition_with_rf4_matches_spec_example() -> None:
    """Growing [2,3,0,1] to 7 partitions starts at broker 2's index with shift 2."""
    assignment = add_partitions_assignment(unracked(0, 1, 2, 3), {0: [2, 3, 0, 1]}, 7, topic="t")
    assert as_lists(assignment) == {
        1: [3, 2, 0, 1],
        2: [0, 3, 1, 2],
        3: [1, 0, 2, 3],
        4: [2, 3, 0, 1],
        5: [3, 0, 1, 2],
        6: [0, 1, 2, 3],
    }


def test_partition_addition_with_rf2_matches_spec_example() -> None:
    """Growing [1,2] to 3 partitions on brokers 0..3 gives [2,0] and [3,1]."""
    assignment = add_partitions_assignment(unracked(0, 1, 2, 3), {0: [1, 2]}, 3, topic="t")
    assert as_lists(assignment) == {1: [2, 0], 2: [3, 1]}


def test_rack_aware_seven_partitions_match_spec_example() -> None:
    """Rack-aware, 7 partitions, RF 3, start 0: the rack-alternated list, then a shift of
    one rack round at partition 6."""
    assignment = assign_replicas(racked(SPEC_RACKS), 7, 3, start_index=0, shift=0)
    assert as_lists(assignment) == {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],
    }


def test_seed_003_example_and_its_partition_addition() -> None:
    """Seed 003: three brokers, start index 1 and shift 2, then partition 3 added."""
    assignment = assign_replicas(unracked(0, 1, 2), 3, 3, start_index=1, shift=2)
    assert as_lists(assignment) == {0: [1, 2, 0], 1: [2, 0, 1], 2: [0, 1, 2]}
    added = add_partitions_assignment(unracked(0, 1, 2), assignment, 4, topic="t")
    assert as_lists(added) == {3: [1, 2, 0]}


def test_rack_alternated_list_matches_spec_and_kafka_doc_examples() -> None:
    """Racks in name order, round-robin over them, ids ascending within a rack."""
    assert rack_alternated_brokers({B(k): v for k, v in SPEC_RACKS.items()}) == [0, 3, 1, 5, 4, 2]
    nine = {B(i): f"rack{i // 3 + 1}" for i in range(9)}
    assert rack_alternated_brokers(nine) == [0, 3, 6, 1, 4, 7, 2, 5, 8]
    uneven = {B(0): "a", B(1): "a", B(2): "a", B(7): "b"}
    assert rack_alternated_brokers(uneven) == [0, 7, 1, 2]


def test_racks_sort_in_java_string_order() -> None:
    """Rack names compare by UTF-16 code unit, as Java sorts them, not by code point."""
    racks = {B(0): "\U0001f600", B(1): "\uff21"}  # a surrogate pair sorts before U+FF21
    assert rack_alternated_brokers(racks) == [0, 1]


def test_start_index_and_shift_can_differ() -> None:
    """The start index moves the leaders; the shift moves only the followers."""
    assignment = assign_replicas(unracked(0, 1, 2, 3), 2, 2, start_index=1, shift=0)
    assert as_lists(assignment) == {0: [1, 2], 1: [2, 3]}
    assignment = assign_replicas(unracked(0, 1, 2, 3), 2, 2, start_index=1, shift=1)
    assert as_lists(assignment) == {0: [1, 3], 1: [2, 0]}


def test_broker_order_is_used_as_given_without_rack_mode() -> None:
    """The CreateTopics path hands the brokers over in its own order; the ZooKeeper paths
    sort them by id (``rack_mode`` set)."""
    brokers = unracked(5, 3, 9)
    assert as_lists(assign_replicas(brokers, 1, 1, start_index=0, shift=0)) == {0: [5]}
    sorted_first = assign_replicas(
        brokers, 1, 1, start_index=0, shift=0, rack_mode=RackMode.DISABLED
    )
    assert as_lists(sorted_first) == {0: [3]}


def test_start_partition_id_continues_the_numbering_and_shift_schedule() -> None:
    """Partitions are numbered from ``start_partition_id``; the shift grows by one at each
    partition id that is a multiple of the broker count, counted from the shift given."""
    whole = assign_replicas(unracked(0, 1, 2, 3, 4), 10, 3, start_index=0, shift=0)
    tail = assign_replicas(
        unracked(0, 1, 2, 3, 4), 5, 3, start_index=0, shift=0, start_partition_id=5
    )
    assert tail == {p: whole[p] for p in range(5, 10)}
    unshifted = assign_replicas(
        unracked(0, 1, 2, 3, 4), 1, 3, start_index=0, shift=0, start_partition_id=6
    )
    assert unshifted == {6: whole[1]}  # the shift only grows at multiples of 5
    negative = assign_replicas(unracked(0, 1), 1, 1, start_index=0, shift=0, start_partition_id=-1)
    assert list(negative) == [0]


# ------------------------------------------------------------------------------ randomness


def test_random_start_and_shift_are_drawn_independently_from_the_given_rng() -> None:
    """With neither given, the start index then the shift are drawn from ``rng``."""
    brokers = unracked(0, 1, 2, 3, 4, 5, 6)
    for seed in range(30):
        expected_rng = random.Random(seed)
        start, shift = expected_rng.randrange(7), expected_rng.randrange(7)
        drawn = assign_replicas(brokers, 9, 3, rng=random.Random(seed))
        assert drawn == assign_replicas(brokers, 9, 3, start_index=start, shift=shift)


def test_only_the_missing_one_is_drawn() -> None:
    """A given start index is kept and only the shift is drawn, and vice versa."""
    brokers = unracked(0, 1, 2, 3)
    shift = random.Random(5).randrange(4)
    assert assign_replicas(brokers, 4, 3, start_index=2, rng=random.Random(5)) == assign_replicas(
        brokers, 4, 3, start_index=2, shift=shift
    )
    start = random.Random(5).randrange(4)
    assert assign_replicas(brokers, 4, 3, shift=3, rng=random.Random(5)) == assign_replicas(
        brokers, 4, 3, start_index=start, shift=3
    )


def test_the_global_random_is_never_used() -> None:
    """The assignment depends only on the seed given, and leaves the global RNG alone."""
    brokers = racked(SPEC_RACKS)
    random.seed(1)
    state = random.getstate()
    first = assign_replicas(brokers, 12, 3, rng=random.Random(42))
    assert random.getstate() == state
    random.seed(2)
    assert assign_replicas(brokers, 12, 3, rng=random.Random(42)) == first


def test_a_draw_without_rng_is_a_programming_error() -> None:
    """Nothing falls back to the global RNG: a missing ``rng`` is refused."""
    with pytest.raises(ValueError, match="rng"):
        assign_replicas(unracked(0, 1), 1, 1)
    with pytest.raises(ValueError, match="rng"):
        assign_replicas(unracked(0, 1), 1, 1, start_index=0)


def test_negative_start_or_shift_is_refused() -> None:
    """Kafka's -1 means "random"; here that is None, and negatives are errors."""
    with pytest.raises(ValueError, match="start_index"):
        assign_replicas(unracked(0, 1), 1, 1, start_index=-1, shift=0)
    with pytest.raises(ValueError, match="shift"):
        assign_replicas(unracked(0, 1), 1, 1, start_index=0, shift=-1)


# ---------------------------------------------------------------------------------- errors


def api_error(excinfo: pytest.ExceptionInfo[KafkaApiError]) -> tuple[ErrorCode, str | None]:
    return excinfo.value.code, excinfo.value.detail


@pytest.mark.parametrize("n_partitions", [0, -1, -2])
def test_partitions_must_be_positive(n_partitions: int) -> None:
    """No partitions -> INVALID_PARTITIONS with Kafka's message."""
    with pytest.raises(KafkaApiError) as excinfo:
        assign_replicas(unracked(0, 1), n_partitions, 1, start_index=0, shift=0)
    assert api_error(excinfo) == (
        ErrorCode.INVALID_PARTITIONS,
        "Number of partitions must be larger than 0.",
    )


@pytest.mark.parametrize("replication_factor", [0, -1])
def test_replication_factor_must_be_positive(replication_factor: int) -> None:
    """RF <= 0 -> INVALID_REPLICATION_FACTOR with Kafka's message."""
    with pytest.raises(KafkaApiError) as excinfo:
        assign_replicas(unracked(0, 1, 2, 3, 4), 10, replication_factor, start_index=0, shift=0)
    assert api_error(excinfo) == (
        ErrorCode.INVALID_REPLICATION_FACTOR,
        "Replication factor must be larger than 0.",
    )


def test_replication_factor_cannot_exceed_brokers() -> None:
    """RF 6 over 5 brokers -> INVALID_REPLICATION_FACTOR naming both numbers."""
    with pytest.raises(KafkaApiError) as excinfo:
        assign_replicas(unracked(0, 1, 2, 3, 4), 10, 6, start_index=0, shift=0)
    assert api_error(excinfo) == (
        ErrorCode.INVALID_REPLICATION_FACTOR,
        "Replication factor: 6 larger than available brokers: 5.",
    )


def test_no_brokers_fails_on_the_replication_factor() -> None:
    """With no live broker any RF is larger than the brokers available."""
    with pytest.raises(KafkaApiError) as excinfo:
        assign_replicas([], 1, 1, rng=random.Random(0))
    assert api_error(excinfo) == (
        ErrorCode.INVALID_REPLICATION_FACTOR,
        "Replication factor: 1 larger than available brokers: 0.",
    )


def test_preconditions_are_checked_in_kafkas_order() -> None:
    """Partitions before RF, RF before the rack check."""
    mixed = [BrokerMetadata(B(0), "a"), BrokerMetadata(B(1))]
    with pytest.raises(KafkaApiError) as excinfo:
        assign_replicas(mixed, 0, 0, start_index=0, shift=0)
    assert excinfo.value.code is ErrorCode.INVALID_PARTITIONS
    with pytest.raises(KafkaApiError) as excinfo:
        assign_replicas(mixed, 1, 3, start_index=0, shift=0)
    assert excinfo.value.code is ErrorCode.INVALID_REPLICATION_FACTOR


def test_mixed_racks_fail_with_the_api_message() -> None:
    """As the CreateTopics API calls it, partly racked brokers are an admin error that
    is answered with UNKNOWN_SERVER_ERROR."""
    mixed = [BrokerMetadata(B(0), "a"), BrokerMetadata(B(1)), BrokerMetadata(B(2), "b")]
    with pytest.raises(AdminOperationError) as excinfo:
        assign_replicas(mixed, 3, 2, rng=random.Random(0))
    assert str(excinfo.value) == NOT_ALL_RACKS_MESSAGE
    assert NOT_ALL_RACKS_MESSAGE == (
        "Not all brokers have rack information for replica rack aware assignment."
    )
    assert error_code_for(excinfo.value) is ErrorCode.UNKNOWN_SERVER_ERROR


def test_enforced_mode_fails_with_the_cli_message_before_anything_else() -> None:
    """Enforced mode (CLI, CreatePartitions) refuses partly racked brokers with the
    ``--disable-rack-aware`` hint, even when the counts are also wrong."""
    mixed = [BrokerMetadata(B(0), "a"), BrokerMetadata(B(1))]
    with pytest.raises(AdminOperationError) as excinfo:
        assign_replicas(mixed, 0, 5, start_index=0, shift=0, rack_mode=RackMode.ENFORCED)
    assert str(excinfo.value) == NOT_ALL_RACKS_CLI_MESSAGE
    assert NOT_ALL_RACKS_CLI_MESSAGE == (
        "Not all brokers have rack information. Add --disable-rack-aware in command line"
        " to make replica assignment without rack information."
    )


def test_safe_and_disabled_modes_ignore_partial_or_all_racks() -> None:
    """Safe drops racks unless every broker has one; Disabled always drops them."""
    mixed = [BrokerMetadata(B(1), "a"), BrokerMetadata(B(0))]
    assert broker_metadatas(mixed, RackMode.SAFE) == unracked(0, 1)
    full = racked(SPEC_RACKS)
    assert broker_metadatas(full, RackMode.SAFE) == full
    assert broker_metadatas(full, RackMode.DISABLED) == unracked(*SPEC_RACKS)
    assert broker_metadatas(full, RackMode.ENFORCED) == full
    assert broker_metadatas(unracked(2, 0), RackMode.ENFORCED) == unracked(0, 2)
    unaware = assign_replicas(full, 6, 3, start_index=0, shift=0, rack_mode=RackMode.DISABLED)
    assert unaware == assign_replicas(unracked(*SPEC_RACKS), 6, 3, start_index=0, shift=0)


def test_partition_addition_start_index() -> None:
    """The first broker (id order) whose id is >= partition 0's first replica, else 0."""
    assert partition_addition_start_index([0, 1, 2, 3], 2) == 2
    assert partition_addition_start_index([1, 3, 5], 2) == 1
    assert partition_addition_start_index([1, 3, 5], 0) == 0
    assert partition_addition_start_index([1, 3, 5], 9) == 0
    assert partition_addition_start_index([], 1) == 0


def test_partition_addition_needs_partition_zero() -> None:
    """An assignment without partition 0 is an admin error (Kafka's AddPartitionsTest
    ``testMissingPartition0``)."""
    with pytest.raises(AdminOperationError) as excinfo:
        add_partitions_assignment(unracked(0, 1, 2), {1: [0, 1], 2: [1, 2]}, 5, topic="t")
    assert str(excinfo.value) == (
        "Unexpected existing replica assignment for topic 't', partition id 0 is missing. "
        "Assignment: Map(1 -> ReplicaAssignment(replicas=0,1, addingReplicas=,"
        " removingReplicas=), 2 -> ReplicaAssignment(replicas=1,2, addingReplicas=,"
        " removingReplicas=))"
    )


@pytest.mark.parametrize("num_partitions", [2, 1, -1])
def test_partition_addition_must_increase(num_partitions: int) -> None:
    """Asking for no more partitions than now is INVALID_PARTITIONS."""
    with pytest.raises(KafkaApiError) as excinfo:
        check_partition_addition("t", {0: [0], 1: [1]}, num_partitions)
    assert api_error(excinfo) == (
        ErrorCode.INVALID_PARTITIONS,
        "The number of partitions for a topic can only be increased. "
        f"Topic t currently has 2 partitions, {num_partitions} would not be an increase.",
    )


def test_partition_addition_enforces_racks_before_looking_at_the_topic() -> None:
    """With Enforced mode the rack check comes first, as Kafka reads the brokers first."""
    mixed = [BrokerMetadata(B(0), "a"), BrokerMetadata(B(1))]
    with pytest.raises(AdminOperationError, match="disable-rack-aware"):
        add_partitions_assignment(mixed, {}, 3, topic="t", rack_mode=RackMode.ENFORCED)


def test_partition_addition_rack_aware_expansion_keeps_racks_distinct() -> None:
    """Adding partitions on racked brokers keeps one rack per replica."""
    existing = assign_replicas(racked(KAFKA_RACKS), 18, 3, start_index=0, shift=0)
    added = add_partitions_assignment(racked(KAFKA_RACKS), existing, 36, topic="t")
    assert sorted(added) == list(range(18, 36))
    check_distribution(added, KAFKA_RACKS, 18, 3)


# --------------------------------------------------- Kafka's AdminRackAwareTest scenarios


@pytest.mark.parametrize(
    ("racks", "n_partitions", "rf", "start", "first_partition", "checks"),
    [
        pytest.param(KAFKA_RACKS, 6, 3, 2, 0, {}, id="rack-aware"),
        pytest.param(KAFKA_RACKS, 6, 3, None, 0, {}, id="random-start"),
        pytest.param(
            KAFKA_RACKS, 13, 3, 0, 0,
            {"leaders_even": False, "replicas_even": False}, id="uneven-replicas",
        ),
        pytest.param(
            {0: "rack1", 1: "rack1", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"},
            12, 3, None, 0, {"replicas_even": False}, id="uneven-racks",
        ),
        pytest.param(KAFKA_RACKS, 12, 2, None, 0, {}, id="rf2"),
        pytest.param(
            {6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack3", 11: "rack1"},
            12, 2, None, 12, {}, id="expansion",
        ),
        pytest.param(KAFKA_RACKS, 6, 2, None, 0, {}, id="rf2-6-partitions"),
        pytest.param({0: "rack1", 1: "rack2", 4: "rack3"}, 3, 2, None, 0, {}, id="3-brokers"),
        pytest.param(
            {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1",
             6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack1", 11: "rack3"},
            96, 3, None, 0, {}, id="96-partitions",
        ),
    ],
)  # fmt: skip
def test_kafka_rack_aware_distributions(
    racks: dict[int, str],
    n_partitions: int,
    rf: int,
    start: int | None,
    first_partition: int,
    checks: dict[str, bool],
) -> None:
    """Each scenario of Kafka's AdminRackAwareTest spreads replicas as Kafka checks it."""
    for seed in range(20 if start is None else 1):
        assignment = assign_replicas(
            racked(racks),
            n_partitions,
            rf,
            start_index=start,
            shift=start,
            start_partition_id=first_partition,
            rng=random.Random(seed),
        )
        assert sorted(assignment) == list(range(first_partition, first_partition + n_partitions))
        check_distribution(assignment, racks, n_partitions, rf, **checks)


def test_more_replicas_than_racks_uses_every_rack() -> None:
    """RF 5 over 3 racks: every partition has a replica in each rack."""
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    for seed in range(20):
        assignment = assign_replicas(racked(racks), 6, 5, rng=random.Random(seed))
        assert all(len(r) == 5 and len({racks[b] for b in r}) == 3 for r in assignment.values())


def test_fewer_replicas_than_racks_use_distinct_racks() -> None:
    """RF 2 over 3 racks: the two replicas are on two racks."""
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    for seed in range(20):
        assignment = assign_replicas(racked(racks), 6, 2, rng=random.Random(seed))
        assert all(len({racks[b] for b in r}) == 2 for r in assignment.values())


def test_single_rack_spreads_leaders_evenly() -> None:
    """One rack: replicas share it, and each broker leads one of six partitions."""
    racks = dict.fromkeys(range(6), "rack1")
    for seed in range(20):
        assignment = assign_replicas(racked(racks), 6, 3, rng=random.Random(seed))
        check_distribution(assignment, racks, 6, 3, rack_aware=False, replicas_even=False)
        assert all({racks[b] for b in r} == {"rack1"} for r in assignment.values())


def test_brokers_already_holding_a_replica_are_skipped() -> None:
    """RF 4 over racks a,b,c with three brokers in a: once every rack has a replica the
    fourth goes to a broker of rack a without one."""
    racks = {0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}
    assignment = assign_replicas(racked(racks), 6, 4, start_index=2, shift=2)
    check_distribution(
        assignment, racks, 6, 4, rack_aware=False, leaders_even=False, replicas_even=False
    )
    assert all(len(r) == 4 for r in assignment.values())


# ---------------------------------------------------------------------------- properties

broker_ids = st.lists(st.integers(0, 2000), min_size=1, max_size=12, unique=True)


@settings(max_examples=300, deadline=None)
@given(ids=broker_ids, data=st.data())
def test_rack_unaware_invariants(ids: list[int], data: st.DataObject) -> None:
    """Rack-unaware: RF distinct registered brokers per partition, consecutive ids, leaders
    within one of each other, and exactly even leaders and replicas over whole rounds."""
    n = len(ids)
    rf = data.draw(st.integers(1, n), label="rf")
    rounds = data.draw(st.integers(1, 6), label="rounds")
    extra = data.draw(st.integers(0, n - 1), label="extra")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    brokers = unracked(*ids)
    n_partitions = rounds * n + extra
    assignment = assign_replicas(brokers, n_partitions, rf, rng=random.Random(seed))

    assert list(assignment) == list(range(n_partitions))
    for replicas in assignment.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        assert set(replicas) <= set(ids)
    leaders = Counter(r[0] for r in assignment.values())
    counts = [leaders.get(B(b), 0) for b in ids]
    assert max(counts) - min(counts) <= 1
    if extra == 0:
        assert counts == [rounds] * n
        replicas_per_broker = Counter(b for r in assignment.values() for b in r)
        assert sorted(replicas_per_broker.values()) == [rounds * rf] * n


rack_layouts = st.dictionaries(
    st.integers(0, 500), st.sampled_from(["a", "b", "c", "d", "e"]), min_size=1, max_size=12
)


@settings(max_examples=300, deadline=None)
@given(racks=rack_layouts, data=st.data())
def test_rack_aware_invariants(racks: dict[int, str], data: st.DataObject) -> None:
    """Rack-aware: RF distinct brokers spanning min(RF, racks) racks per partition, and
    leaders exactly even over whole rounds of the broker list."""
    n = len(racks)
    rf = data.draw(st.integers(1, n), label="rf")
    rounds = data.draw(st.integers(1, 5), label="rounds")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    assignment = assign_replicas(racked(racks), rounds * n, rf, rng=random.Random(seed))

    n_racks = len(set(racks.values()))
    for replicas in assignment.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        assert len({racks[b] for b in replicas}) == min(rf, n_racks)
    leaders = Counter(r[0] for r in assignment.values())
    assert sorted(leaders.values()) == [rounds] * n


@settings(max_examples=200, deadline=None)
@given(ids=broker_ids, data=st.data())
def test_partition_addition_invariants(ids: list[int], data: st.DataObject) -> None:
    """Added partitions continue the ids, keep partition 0's RF and use known brokers;
    the result does not depend on anything random."""
    brokers = unracked(*sorted(ids))
    rf = data.draw(st.integers(1, len(ids)), label="rf")
    current = data.draw(st.integers(1, 20), label="current")
    more = data.draw(st.integers(1, 20), label="more")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    existing = assign_replicas(brokers, current, rf, rng=random.Random(seed))
    added = add_partitions_assignment(brokers, existing, current + more, topic="t")
    assert list(added) == list(range(current, current + more))
    assert all(len(set(r)) == rf and set(r) <= set(ids) for r in added.values())
    assert added == add_partitions_assignment(brokers, existing, current + more, topic="t")


# ------------------------------------------------------------- JVM orders used in messages


def test_scala_set_orders_match_the_scala_repl() -> None:
    """Up to four elements Scala keeps insertion order; from five a CHAMP ``HashSet``,
    which the Scala 2.13 REPL prints as ``HashSet(5, 1, 2, 3, 4)`` for ``Set(1,..,5)``."""
    assert jvm.scala_immutable_order([4, 3, 2, 1]) == [4, 3, 2, 1]
    assert jvm.scala_immutable_order([1, 2, 3, 4, 5]) == [5, 1, 2, 3, 4]
    assert jvm.scala_immutable_order(list(range(1, 11))) == [5, 10, 1, 6, 9, 2, 7, 3, 8, 4]
    shuffled = [7, 3, 10, 1, 9, 2, 8, 6, 5, 4]
    assert jvm.scala_immutable_order(shuffled) == jvm.scala_immutable_order(range_list(1, 11))
    assert jvm.scala_set_after_removal([9, 8, 7, 6], [8]) == [9, 7, 6]
    assert jvm.scala_set_after_removal([1, 2, 3, 4, 5], [2, 3]) == [5, 1, 4]


def range_list(start: int, stop: int) -> list[int]:
    return list(range(start, stop))


def test_scala_mutable_map_order_of_ints_is_by_bucket_then_hash() -> None:
    """A ``mutable.HashMap[Int, _]`` iterates by bucket of ``h ^ (h >>> 16)``."""
    assert jvm.scala_mutable_map_order([3, 1, 2, 17, 16, 0]) == [0, 16, 1, 17, 2, 3]
    assert jvm.scala_mutable_map_order(range_list(0, 20)) == range_list(0, 20)
