"""The create/alter/describe/list scenarios of Kafka's TopicCommandWithZKClientTest,
TopicCommandWithAdminClientTest and AdminZkClientTest that the other CLI tests leave out:
default counts over the wire, more bad input on both paths (with nothing written),
--exclude-internal and --if-exists over the wire, configs kept across a partition
increase, rack-aware creation and growth on six racked brokers, and two concurrent
creators of one topic."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
import pytest_asyncio

from tests.support.hosting import hosted_fixture
from tests.support.topics_harness import STORE, WIRE, Harness, Result, running_harness
from tests.support.waiting import eventually
from tests.support.zookeeper import STORES, ZooKeeperServer

pytestmark = pytest.mark.asyncio

ERR = "Error while executing topic command : "
WARN_PARTITIONS = (
    "WARNING: If partitions are increased for a topic that has a key, the partition logic or"
    " ordering of the messages will be affected\n"
)
# AdminRackAwareTest / TopicCommandWithZKClientTest's rack layout.
RACKS = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack1", 4: "rack3", 5: "rack3"}


def assignment_of(raw: bytes) -> dict[int, list[int]]:
    partitions = json.loads(raw)["partitions"]
    return {int(p): replicas for p, replicas in partitions.items()}


# ------------------------------------------------------------------ defaults over the wire


async def test_wire_creation_takes_the_broker_default_of_what_is_not_given(
    embedded_cluster: Harness,
) -> None:
    """testCreateWithDefaultReplication / testCreateWithDefaultPartitions: only
    --partitions, or only --replication-factor, leaves the other to the broker's
    num.partitions and default.replication.factor (both 1)."""
    h = embedded_cluster
    assert await h.topics("--create", "--topic", "parts", "--partitions", "2", via=WIRE) == (
        Result(0, "Created topic parts.\n", "")
    )
    created = await h.topics("--create", "--topic", "rf", "--replication-factor", "2", via=WIRE)
    assert created == Result(0, "Created topic rf.\n", "")
    parts = assignment_of(await h.read("/brokers/topics/parts"))
    assert (len(parts), {len(r) for r in parts.values()}) == (2, {1})
    rf = assignment_of(await h.read("/brokers/topics/rf"))
    assert (len(rf), {len(r) for r in rf.values()}) == (1, {2})


# ------------------------------------------------------------------ more bad input

BAD_INPUT = [
    # (id, argv, via, Kafka's output)
    (
        "w-partitions-neg",
        ["--create", "--topic", "p", "--partitions", "-1", "--replication-factor", "1"],
        WIRE,
        ERR + "The partitions must be greater than 0\n",
    ),
    (
        "w-rf-neg",
        ["--create", "--topic", "r", "--partitions", "1", "--replication-factor", "-1"],
        WIRE,
        ERR + "The replication factor must be between 1 and 32767 inclusive\n",
    ),
    (
        "w-bad-config-value",
        ["--create", "--topic", "c", "--config", "retention.ms=abc"],
        WIRE,
        ERR + "Invalid value abc for configuration retention.ms: Not a number of type LONG\n",
    ),
    (
        "w-alter-neg",
        ["--alter", "--topic", "existing", "--partitions", "-1"],
        WIRE,
        ERR + "Topic currently has 2 partitions, which is higher than the requested -1.\n",
    ),
    (
        "w-too-many-groups",
        [
            "--alter",
            "--topic",
            "existing",
            "--partitions",
            "3",
            "--replica-assignment",
            "0:1,1:2,2:0,0:2",
        ],
        WIRE,
        ERR + "Increasing the number of partitions by 1 but 2 assignments provided.\n",
    ),
    (
        "w-alter-if-exists",
        ["--alter", "--topic", "nope", "--partitions", "3", "--if-exists"],
        WIRE,
        "",
    ),
    ("w-describe-if-exists", ["--describe", "--topic", "nope", "--if-exists"], WIRE, ""),
    (
        "alter-neg",
        ["--alter", "--topic", "existing", "--partitions", "-1"],
        STORE,
        WARN_PARTITIONS + ERR + "The number of partitions for a topic can only be increased."
        " Topic existing currently has 2 partitions, -1 would not be an increase.\n",
    ),
]


@hosted_fixture(scope="module", loop_scope="module")
async def shared(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Harness]:
    """One embedded cluster for the bad-input cases (each checks it changed nothing),
    with the 2-partition topic ``existing``."""
    async for harness in running_harness(tmp_path_factory.mktemp("more-bad-input"), None):
        created = await harness.topics(
            "--create", "--topic", "existing", "--replica-assignment", "0:1,1:2", via=STORE
        )
        assert created.rc == 0, created
        yield harness


@pytest.mark.asyncio(loop_scope="module")  # the loop of the module's shared cluster
@pytest.mark.parametrize(
    ("argv", "via", "out"), [c[1:] for c in BAD_INPUT], ids=[c[0] for c in BAD_INPUT]
)
async def test_more_bad_input_gets_kafkas_message_and_writes_nothing(
    shared: Harness, argv: list[str], via: str, out: str
) -> None:
    """Each case prints exactly Kafka's output and exits 1 (0 with --if-exists, silently),
    and no znode changes."""
    h = shared
    before = await h.snapshot()
    result = await h.topics(*argv, via=via)
    assert result == Result(1 if out else 0, out, "")
    assert await h.snapshot() == before


# ------------------------------------------------------------------ list and describe


async def test_exclude_internal_over_the_wire(embedded_cluster: Harness) -> None:
    """testListTopicsWithExcludeInternal / testDescribeWithExcludeInternal over the wire:
    __consumer_offsets is listed and described unless --exclude-internal is given."""
    h = embedded_cluster
    for name in ("__consumer_offsets", "plain"):
        result = await h.topics("--create", "--topic", name, "--replica-assignment", "1", via=WIRE)
        assert result.rc == 0, result
    assert (await h.topics("--list", via=WIRE)).lines == ["__consumer_offsets", "plain"]
    assert await h.topics("--list", "--exclude-internal", via=WIRE) == Result(0, "plain\n", "")

    async def described(*extra: str) -> list[str]:
        result = await h.topics("--describe", *extra, via=WIRE)
        return sorted(line.split("\t")[0] for line in result.lines if line.startswith("Topic:"))

    assert await described() == ["Topic: __consumer_offsets", "Topic: plain"]
    assert await described("--exclude-internal") == ["Topic: plain"]


@pytest.mark.parametrize("via", [STORE, WIRE])
async def test_configs_are_kept_when_partitions_are_added(
    embedded_cluster: Harness, via: str
) -> None:
    """testConfigPreservationAcrossPartitionAlteration: a topic's overrides survive a
    partition increase, in the store and in describe."""
    h = embedded_cluster
    created = await h.topics(
        "--create", "--topic", "kept", "--partitions", "1", "--replication-factor", "1",
        "--config", "cleanup.policy=compact", "--config", "retention.ms=1000", via=via,
    )  # fmt: skip
    assert created.rc == 0, created
    config = await h.read("/config/topics/kept")
    grown = await h.topics("--alter", "--topic", "kept", "--partitions", "3", via=via)
    assert grown.rc == 0, grown
    assert await h.read("/config/topics/kept") == config
    assert len(assignment_of(await h.read("/brokers/topics/kept"))) == 3

    async def header() -> str:
        return (await h.topics("--describe", "--topic", "kept", via=via)).lines[0]

    line = await eventually(header, until=lambda text: "PartitionCount: 3" in text)
    assert line.endswith("Configs: cleanup.policy=compact,retention.ms=1000")


async def test_altered_configs_show_in_describe(store_cluster: Harness) -> None:
    """testAlterConfigs (ZooKeeper path): an added override shows in describe and in
    --topics-with-overrides; a deleted one leaves both."""
    h = store_cluster
    await h.topics(
        "--create", "--topic", "conf", "--partitions", "1", "--replication-factor", "1",
        "--config", "segment.ms=2000", via=STORE,
    )  # fmt: skip
    altered = await h.topics(
        "--alter", "--topic", "conf", "--config", "cleanup.policy=compact",
        "--delete-config", "segment.ms", via=STORE,
    )  # fmt: skip
    assert altered.rc == 0, altered
    described = await h.topics("--describe", "--topic", "conf", via=STORE)
    assert described.lines[0] == (
        "Topic: conf\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: cleanup.policy=compact"
    )
    overrides = await h.topics("--describe", "--topics-with-overrides", via=STORE)
    assert overrides.lines == [described.lines[0]]


# ------------------------------------------------------------------ rack-aware


@hosted_fixture()
async def racked_cluster(tmp_path: Path) -> AsyncIterator[Harness]:
    """Six brokers on three racks (Kafka's test layout), on the embedded store."""
    async for harness in running_harness(tmp_path, None, RACKS, brokers=6):
        yield harness


def rack_distribution_problems(assignment: dict[int, list[int]], rf: int) -> list[str]:
    """AdminRackAwareTest's checkReplicaDistribution: each partition on ``rf`` distinct
    racks, every broker with as many replicas and as many leaderships as the others."""
    problems = [
        f"partition {p} racks {[RACKS[b] for b in replicas]}"
        for p, replicas in assignment.items()
        if len({RACKS[b] for b in replicas}) != rf
    ]
    replicas = Counter(b for r in assignment.values() for b in r)
    leaders = Counter(r[0] for r in assignment.values())
    if set(replicas) != set(RACKS) or len(set(replicas.values())) != 1:
        problems.append(f"replicas per broker {dict(replicas)}")
    if set(leaders) != set(RACKS) or len(set(leaders.values())) != 1:
        problems.append(f"leaders per broker {dict(leaders)}")
    return problems


@pytest.mark.parametrize("via", [STORE, WIRE])
async def test_rack_aware_creation_and_growth_keep_the_racks_even(
    racked_cluster: Harness, via: str
) -> None:
    """testCreateWithRackAware... / testAlterWithRackAware...: 18 partitions RF 3 over six
    brokers on three racks put each partition on three racks and give every broker the
    same share of replicas and leaders; growing to 36 keeps it so."""
    h = racked_cluster
    created = await h.topics(
        "--create", "--topic", "racked", "--partitions", "18", "--replication-factor", "3",
        via=via,
    )  # fmt: skip
    assert created.rc == 0, created
    assignment = assignment_of(await h.read("/brokers/topics/racked"))
    assert len(assignment) == 18
    assert rack_distribution_problems(assignment, 3) == []
    grown = await h.topics("--alter", "--topic", "racked", "--partitions", "36", via=via)
    assert grown.rc == 0, grown
    grown_assignment = assignment_of(await h.read("/brokers/topics/racked"))
    assert {p: grown_assignment[p] for p in range(18)} == assignment
    assert len(grown_assignment) == 36
    assert rack_distribution_problems(grown_assignment, 3) == []


# ------------------------------------------------------------------ concurrent creators


@pytest_asyncio.fixture(params=STORES)
async def bare(request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    """Brokers registered on a store with nobody acting on topics: what the commands write
    stays as written."""
    from actors.zk import kafka_zk
    from cluster.store.embedded import EmbeddedStore
    from tests.support.fake_brokers import registration

    if request.param == "zookeeper":
        from cluster.store.zookeeper import ZooKeeperStore

        server: ZooKeeperServer = request.getfixturevalue("zookeeper_server")
        chroot = f"/kemu-{uuid.uuid4().hex}"
        store: EmbeddedStore | ZooKeeperStore = ZooKeeperStore(server.hosts, chroot=chroot)
        harness = Harness(store, f"{server.hosts}{chroot}")
    else:
        store = EmbeddedStore()
        harness = Harness(store, None)
    try:
        session = await harness.session()
        await kafka_zk.create_top_level_paths(session)
        for broker in range(3):
            await kafka_zk.register_broker(session, broker, registration(broker, 0))  # type: ignore[arg-type]
        yield harness
    finally:
        await harness.close()
        await store.aclose()


async def test_two_concurrent_creators_of_one_topic_one_wins(bare: Harness) -> None:
    """AdminZkClientTest testConcurrentTopicCreation: two `--create` of the same topic (3
    partitions, RF 1, min.insync.replicas=2) at once: one prints "Created topic", the
    other Kafka's TopicExists error, and either way the topic is stored as asked."""
    results: list[Result] = []

    async def creator() -> None:
        argv = ["--create", "--topic", "race", "--partitions", "3", "--replication-factor", "1"]
        results.append(await bare.topics(*argv, "--config", "min.insync.replicas=2", via=STORE))
        assignment = assignment_of(await bare.read("/brokers/topics/race"))
        assert (len(assignment), {len(r) for r in assignment.values()}) == (3, {1})
        config = json.loads(await bare.read("/config/topics/race"))["config"]
        assert config == {"min.insync.replicas": "2"}

    async with anyio.create_task_group() as tg:
        tg.start_soon(creator)
        tg.start_soon(creator)
    assert sorted(results, key=lambda r: r.rc) == [
        Result(0, "Created topic race.\n", ""),
        Result(1, ERR + "Topic 'race' already exists.\n", ""),
    ]
