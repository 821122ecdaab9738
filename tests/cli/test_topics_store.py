"""``kemu topics --zookeeper`` against a running cluster, on a real ZooKeeper and on the
embedded store: the znodes it writes are Kafka's, the controller acts on them, and the
output is Kafka's line for line."""

from __future__ import annotations

import json
import random

import pytest

from actors.admin import BrokerMetadata, assign_replicas
from protocol.ids import BrokerId
from tests.support.topics_harness import STORE, Harness, Result
from tests.support.waiting import eventually

pytestmark = pytest.mark.asyncio

ERR = "Error while executing topic command : "


def assignment_json(partitions: dict[int, list[int]]) -> bytes:
    body = ",".join(f'"{p}":[{",".join(map(str, r))}]' for p, r in sorted(partitions.items()))
    return (
        f'{{"version":2,"partitions":{{{body}}},"adding_replicas":{{}},"removing_replicas":{{}}}}'
    ).encode()


def partition_line(topic: str, p: int, replicas: list[int], suffix: str = "") -> str:
    r = ",".join(map(str, replicas))
    return (
        f"\tTopic: {topic}\tPartition: {p}\tLeader: {replicas[0]}\tReplicas: {r}\tIsr: {r}{suffix}"
    )


async def describe_until(harness: Harness, expected: list[str], *argv: str) -> Result:
    """Describe until the controller has elected what ``expected`` shows."""

    async def probe() -> Result:
        return await harness.topics("--describe", *argv, via=STORE)

    return await eventually(probe, until=lambda r: r.lines == expected)


async def test_create_with_automatic_assignment_writes_kafkas_znodes(
    store_cluster: Harness,
) -> None:
    """An automatic creation stores the rack-unaware assignment of §9 (start drawn from the
    command's RNG), an empty config, and describes with a leader per partition."""
    result = await store_cluster.topics(
        "--create", "--topic", "auto", "--partitions", "3", "--replication-factor", "2", via=STORE
    )
    assert result == Result(0, "Created topic auto.\n", "")
    brokers = [BrokerMetadata(BrokerId(b)) for b in range(3)]
    expected = assign_replicas(brokers, 3, 2, rng=random.Random(store_cluster.seed))
    plan = {p: list(map(int, r)) for p, r in expected.items()}
    assert await store_cluster.read("/brokers/topics/auto") == assignment_json(plan)
    assert await store_cluster.read("/config/topics/auto") == b'{"version":1,"config":{}}'
    assert sorted(r[0] for r in plan.values()) == [0, 1, 2]  # one leader per broker
    await describe_until(
        store_cluster,
        [
            "Topic: auto\tPartitionCount: 3\tReplicationFactor: 2\tConfigs: ",
            *(partition_line("auto", p, plan[p]) for p in range(3)),
        ],
    )


async def test_create_with_manual_assignment_and_configs(store_cluster: Harness) -> None:
    """A manual assignment is stored as given, the configs in Properties' order, and the
    describe output shows them with the leaders the controller elected."""
    result = await store_cluster.topics(
        "--create",
        "--topic",
        "manual",
        "--replica-assignment",
        "1:2, 2:0",
        "--config",
        "retention.ms=1000",
        "--config",
        "cleanup.policy = compact",
        via=STORE,
    )
    assert result == Result(0, "Created topic manual.\n", "")
    assert await store_cluster.read("/brokers/topics/manual") == assignment_json(
        {0: [1, 2], 1: [2, 0]}
    )
    config = json.loads(await store_cluster.read("/config/topics/manual"))
    assert config == {
        "version": 1,
        "config": {"retention.ms": "1000", "cleanup.policy": "compact"},
    }
    await describe_until(
        store_cluster,
        [
            "Topic: manual\tPartitionCount: 2\tReplicationFactor: 2"
            "\tConfigs: cleanup.policy=compact,retention.ms=1000",
            partition_line("manual", 0, [1, 2]),
            partition_line("manual", 1, [2, 0]),
        ],
        "--topic",
        "manual",
    )
    overrides = await store_cluster.topics("--describe", "--topics-with-overrides", via=STORE)
    assert overrides.lines == [
        "Topic: manual\tPartitionCount: 2\tReplicationFactor: 2"
        "\tConfigs: cleanup.policy=compact,retention.ms=1000"
    ]


async def test_name_of_249_characters_is_created_and_250_refused(store_cluster: Harness) -> None:
    """Topic names may be 249 characters long, not 250 (and nothing is written for it)."""
    name = "n" * 249
    ok = await store_cluster.topics(
        "--create", "--topic", name, "--partitions", "1", "--replication-factor", "1", via=STORE
    )
    assert ok == Result(0, f"Created topic {name}.\n", "")
    before = await store_cluster.snapshot()
    refused = await store_cluster.topics(
        "--create",
        "--topic",
        name + "n",
        "--partitions",
        "1",
        "--replication-factor",
        "1",
        via=STORE,
    )
    assert refused.rc == 1
    assert refused.out.startswith(ERR + "Topic name is illegal, it can't be longer than 249")
    assert await store_cluster.snapshot() == before


async def test_collision_warning_then_refusal(store_cluster: Harness) -> None:
    """A name with '.' or '_' warns; one colliding with an existing topic is refused."""
    first = await store_cluster.topics(
        "--create", "--topic", "a.b", "--partitions", "1", "--replication-factor", "1", via=STORE
    )
    warning = (
        "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore"
        " ('_') could collide. To avoid issues it is best to use either, but not both."
    )
    assert first.lines == [warning, "Created topic a.b."]
    second = await store_cluster.topics(
        "--create", "--topic", "a_b", "--partitions", "1", "--replication-factor", "1", via=STORE
    )
    assert (second.rc, second.lines) == (
        1,
        [warning, ERR + "Topic 'a_b' collides with existing topics: a.b"],
    )
    assert not await store_cluster.exists("/brokers/topics/a_b")


async def test_alter_increases_partitions_and_refuses_a_decrease(store_cluster: Harness) -> None:
    """Adding partitions extends the assignment as §9.3 places them; a decrease is refused
    with Kafka's message and changes nothing."""
    await store_cluster.topics(
        "--create", "--topic", "grow", "--replica-assignment", "1:2,2:0", via=STORE
    )
    grown = await store_cluster.topics("--alter", "--topic", "grow", "--partitions", "4", via=STORE)
    assert grown.lines == [
        "WARNING: If partitions are increased for a topic that has a key, the partition logic"
        " or ordering of the messages will be affected",
        "Adding partitions succeeded!",
    ]
    # partition 0 = [1, 2]: start index and shift 1 (§9.3); the shift grows at p3
    assert await store_cluster.read("/brokers/topics/grow") == assignment_json(
        {0: [1, 2], 1: [2, 0], 2: [0, 2], 3: [1, 2]}
    )
    before = await store_cluster.snapshot()
    shrunk = await store_cluster.topics(
        "--alter", "--topic", "grow", "--partitions", "2", via=STORE
    )
    assert shrunk.rc == 1
    assert shrunk.lines[-1] == (
        ERR + "The number of partitions for a topic can only be increased. Topic grow currently"
        " has 4 partitions, 2 would not be an increase."
    )
    assert await store_cluster.snapshot() == before
    await describe_until(
        store_cluster,
        [
            "Topic: grow\tPartitionCount: 4\tReplicationFactor: 2\tConfigs: ",
            partition_line("grow", 0, [1, 2]),
            partition_line("grow", 1, [2, 0]),
            partition_line("grow", 2, [0, 2]),
            partition_line("grow", 3, [1, 2]),
        ],
        "--topic",
        "grow",
    )


async def test_alter_with_a_replica_assignment_uses_the_groups_past_the_current_count(
    store_cluster: Harness,
) -> None:
    """--replica-assignment on alter lists every partition; the existing ones are skipped."""
    await store_cluster.topics(
        "--create", "--topic", "placed", "--replica-assignment", "0:1,1:2", via=STORE
    )
    result = await store_cluster.topics(
        "--alter", "--topic", "placed", "--partitions", "3", "--replica-assignment",
        "9:8,8:7,2:0", via=STORE,
    )  # fmt: skip
    assert result.rc == 0, result
    assert await store_cluster.read("/brokers/topics/placed") == assignment_json(
        {0: [0, 1], 1: [1, 2], 2: [2, 0]}
    )


async def test_alter_config_writes_the_override_and_a_change_notification(
    store_cluster: Harness,
) -> None:
    """Altering configs on the ZooKeeper path warns twice, merges and deletes overrides,
    and notifies the brokers through /config/changes."""
    await store_cluster.topics(
        "--create", "--topic", "conf", "--partitions", "1", "--replication-factor", "1",
        "--config", "retention.ms=1000", "--config", "segment.ms=2000", via=STORE,
    )  # fmt: skip
    before = set(await store_cluster.children("/config/changes"))
    result = await store_cluster.topics(
        "--alter", "--topic", "conf", "--config", "cleanup.policy=compact",
        "--delete-config", "segment.ms", via=STORE,
    )  # fmt: skip
    assert result.lines == [
        "WARNING: Altering topic configuration from this script has been deprecated and may be"
        " removed in future releases.",
        "         Going forward, please use kafka-configs.sh for this functionality",
        "Updated config for topic conf.",
    ]
    config = json.loads(await store_cluster.read("/config/topics/conf"))
    assert config["config"] == {"retention.ms": "1000", "cleanup.policy": "compact"}
    (added,) = set(await store_cluster.children("/config/changes")) - before
    assert added.startswith("config_change_")
    assert await store_cluster.read(f"/config/changes/{added}") == (
        b'{"version":2,"entity_path":"topics/conf"}'
    )


async def test_list_and_describe_select_topics_by_regex(store_cluster: Harness) -> None:
    """--topic is a regular expression for list and describe: 'test.topic' also selects
    'test-topic', the escaped form only the literal name."""
    for name in ("test.topic", "test-topic", "other"):
        await store_cluster.topics(
            "--create", "--topic", name, "--replica-assignment", "0", via=STORE
        )
    listed = await store_cluster.topics("--list", "--topic", "test.topic", via=STORE)
    assert listed == Result(0, "test-topic\ntest.topic\n", "")
    escaped = await store_cluster.topics("--list", "--topic", '"test\\.topic"', via=STORE)
    assert escaped.out == "test.topic\n"
    everything = await store_cluster.topics("--list", via=STORE)
    assert everything.lines == ["other", "test-topic", "test.topic"]
    await describe_until(
        store_cluster,
        [
            "Topic: other\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: ",
            partition_line("other", 0, [0]),
            "Topic: test-topic\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: ",
            partition_line("test-topic", 0, [0]),
        ],
        "--topic",
        "other,test-topic",
    )


async def test_mixed_racks_need_disable_rack_aware(mixed_rack_cluster: Harness) -> None:
    """When only some brokers have a rack, an automatic assignment is refused (Enforced)
    unless --disable-rack-aware is given."""
    before = await mixed_rack_cluster.snapshot()
    argv = ["--create", "--topic", "racks", "--partitions", "2", "--replication-factor", "2"]
    refused = await mixed_rack_cluster.topics(*argv, via=STORE)
    assert refused == Result(
        1,
        ERR + "Not all brokers have rack information. Add --disable-rack-aware in command line"
        " to make replica assignment without rack information.\n",
        "",
    )
    assert await mixed_rack_cluster.snapshot() == before
    created = await mixed_rack_cluster.topics(*argv, "--disable-rack-aware", via=STORE)
    assert created == Result(0, "Created topic racks.\n", "")


async def test_exclude_internal_hides_internal_topics(store_cluster: Harness) -> None:
    """--exclude-internal drops __consumer_offsets from list and describe."""
    for name in ("__consumer_offsets", "plain"):
        await store_cluster.topics(
            "--create", "--topic", name, "--replica-assignment", "1", via=STORE
        )
    assert (await store_cluster.topics("--list", via=STORE)).lines == [
        "__consumer_offsets",
        "plain",
    ]
    assert await store_cluster.topics("--list", "--exclude-internal", via=STORE) == Result(
        0, "plain\n", ""
    )
    described = await store_cluster.topics("--describe", "--exclude-internal", via=STORE)
    assert [line for line in described.lines if line.startswith("Topic:")] == [
        "Topic: plain\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: "
    ]
