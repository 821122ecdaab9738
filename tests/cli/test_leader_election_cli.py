"""``kemu leader-election --election-type preferred`` on the ZooKeeper path: a running
cluster (auto rebalance off) gets its preferred leader back after a broker bounce; on a
store with no controller, what it writes and prints (Kafka's Set/HashSet orders); bad
input is one line, exit 1, and nothing written."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from actors.zk import kafka_zk
from cluster.cli.leader_election import run_leader_election_command
from protocol import jvm, zkdata
from protocol.control import TopicPartition
from protocol.ids import TopicName
from protocol.jvm import java_string_hash, scala_hash_set_order
from tests.support.hosting import hosted_fixture
from tests.support.topics_harness import STORE, Harness, Result, running_harness
from tests.support.waiting import eventually
from tests.support.zookeeper import STORES, ZooKeeperServer

pytestmark = pytest.mark.asyncio

PREFERRED = zkdata.PREFERRED_REPLICA_ELECTION_PATH
WARNINGS = (
    "Warning: --zookeeper is deprecated and will be removed in a future version of Kafka.\n"
    "Use --bootstrap-server instead to specify a broker to connect to.\n"
)


async def elect(harness: Harness, *argv: str) -> Result:
    out, err = io.StringIO(), io.StringIO()
    full = [*argv, "--zookeeper", harness.zookeeper or "embedded://in-process"]
    store = harness.store if harness.zookeeper is None else None
    rc = await run_leader_election_command(full, out=out, err=err, store=store)
    return Result(rc, out.getvalue(), err.getvalue())


@hosted_fixture(params=STORES)
async def quiet_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Harness]:
    """3 brokers without auto leader rebalance: only an election asked for moves leaders."""
    server: ZooKeeperServer | None = (
        request.getfixturevalue("zookeeper_server") if request.param == "zookeeper" else None
    )
    quiet = {"auto.leader.rebalance.enable": "false"}
    async for harness in running_harness(tmp_path, server, config=quiet):
        yield harness


async def leader_and_isr(harness: Harness, topic: str, partition: int) -> tuple[int, set[int]]:
    state = await kafka_zk.get_partition_state(
        await harness.session(), TopicPartition(TopicName(topic), partition)
    )
    if state is None:
        return -1, set()
    return state.state.leader, set(state.state.isr)


async def bounce_the_preferred_leader(harness: Harness) -> None:
    """t-0 on [1, 0]; broker 1 stops (0 leads) and starts again (back in the ISR)."""
    cluster = harness.cluster
    assert cluster is not None
    created = await harness.topics(
        "--create", "--topic", "t", "--replica-assignment", "1:0", via=STORE
    )
    assert created.rc == 0
    await eventually(lambda: leader_and_isr(harness, "t", 0), until=lambda s: s[0] == 1)
    cluster.stop_broker(1)
    assert await cluster.wait_stopped(1, timeout=30)
    await eventually(lambda: leader_and_isr(harness, "t", 0), until=lambda s: s[0] == 0)
    await cluster.start_broker(1)
    await eventually(lambda: leader_and_isr(harness, "t", 0), until=lambda s: s == (0, {0, 1}))


async def test_the_preferred_leader_comes_back_on_request(quiet_cluster: Harness) -> None:
    """Broker 1 (preferred for t-0 = [1, 0]) stops cleanly (its leadership moves to 0) and
    starts again (it rejoins the ISR); the command writes the election path, the controller
    elects broker 1 and removes the path."""
    await bounce_the_preferred_leader(quiet_cluster)
    result = await elect(quiet_cluster, "--election-type", "preferred", "--topic", "t",
                         "--partition", "0")  # fmt: skip
    assert result == Result(
        0,
        WARNINGS + "Created preferred replica election path with t-0\n"
        "Successfully started preferred replica election for partitions Set(t-0)\n",
        "",
    )
    await eventually(lambda: leader_and_isr(quiet_cluster, "t", 0), until=lambda s: s[0] == 1)

    async def path_gone() -> bool:
        return not await quiet_cluster.exists(PREFERRED)

    await eventually(path_gone)


async def elect_via_brokers(harness: Harness, *argv: str) -> Result:
    out, err = io.StringIO(), io.StringIO()
    full = [*argv, "--bootstrap-server", harness.bootstrap]
    rc = await run_leader_election_command(full, out=out, err=err)
    return Result(rc, out.getvalue(), err.getvalue())


async def test_the_bootstrap_path_elects_through_the_controller(quiet_cluster: Harness) -> None:
    """--bootstrap-server (ElectLeaders): with broker 1 (preferred for t-0 = [1, 0])
    bounced, a preferred election of t-0 prints 2.7's success line and broker 1 leads;
    asked again, "Valid replica already elected" with the (empty) elected set, as 2.7's
    tool prints it; an unknown partition is an error line, exit 1 with the exception's
    first line on stderr; an unclean election of a partition with a live leader needs
    none; --all-topic-partitions with nothing to elect prints nothing."""
    await bounce_the_preferred_leader(quiet_cluster)
    first = await elect_via_brokers(quiet_cluster, "--election-type", "preferred", "--topic",
                                    "t", "--partition", "0")  # fmt: skip
    assert first == Result(
        0, "Successfully completed leader election (PREFERRED) for partitions t-0\n", ""
    )
    assert (await leader_and_isr(quiet_cluster, "t", 0))[0] == 1

    again = await elect_via_brokers(quiet_cluster, "--election-type", "PREFERRED", "--topic",
                                    "t", "--partition", "0")  # fmt: skip
    assert again == Result(0, "Valid replica already elected for partitions \n", "")

    unknown = await elect_via_brokers(quiet_cluster, "--election-type", "preferred", "--topic",
                                      "nope", "--partition", "3")  # fmt: skip
    assert unknown == Result(
        1,
        "Error completing leader election (PREFERRED) for partition: nope-3:"
        " org.apache.kafka.common.errors.UnknownTopicOrPartitionException: The partition does"
        " not exist.\n",
        'Exception in thread "main" kafka.common.AdminCommandFailedException: 1 replica(s)'
        " could not be elected\n",
    )
    unclean = await elect_via_brokers(quiet_cluster, "--election-type", "unclean", "--topic",
                                      "t", "--partition", "0")  # fmt: skip
    assert unclean == Result(0, "Valid replica already elected for partitions \n", "")
    everything = await elect_via_brokers(quiet_cluster, "--election-type", "preferred",
                                         "--all-topic-partitions")  # fmt: skip
    assert everything == Result(0, "", "")


async def test_what_is_written_and_printed(bare_store: Harness, tmp_path: Path) -> None:
    """Up to four partitions: a Set in file order, in the message and the znode. Five or
    more: a HashSet, printed in TopicPartition hash order, written in the order of the
    {topic, partition} maps' hashes; unknown partitions are reported and left out."""
    session = await bare_store.session()
    await kafka_zk.write_topic(session, TopicName("t"), {p: [0] for p in range(6)}, {})
    small = tmp_path / "small.json"
    small.write_text(json.dumps({"partitions": [{"topic": "t", "partition": p} for p in (3, 1)]}))
    first = await elect(bare_store, "--election-type", "PREFERRED", "--path-to-json-file",
                        str(small))  # fmt: skip
    assert first == Result(
        0,
        WARNINGS + "Created preferred replica election path with t-3,t-1\n"
        "Successfully started preferred replica election for partitions Set(t-3, t-1)\n",
        "",
    )
    assert await bare_store.read(PREFERRED) == (
        b'{"version":1,"partitions":[{"topic":"t","partition":3},{"topic":"t","partition":1}]}'
    )
    await session.delete(PREFERRED)

    wanted = [TopicPartition(TopicName("t"), p) for p in (5, 0, 4, 1, 3, 2)]
    big = tmp_path / "big.json"
    entries = [{"topic": tp.topic, "partition": tp.partition} for tp in wanted]
    big.write_text(json.dumps({"partitions": [*entries, {"topic": "t", "partition": 9}]}))
    second = await elect(bare_store, "--election-type", "preferred", "--path-to-json-file",
                         str(big))  # fmt: skip
    assert second.rc == 0
    by_hash = {jvm.java_topic_partition_hash(tp.topic, tp.partition): tp for tp in wanted}
    printed = [str(by_hash[h]) for h in scala_hash_set_order(list(by_hash))]
    assert second.lines[2:] == [
        "Created preferred replica election path with " + ",".join(printed),
        "Successfully started preferred replica election for partitions HashSet("
        + ", ".join(printed)
        + ")",
        "Skipping preferred replica leader election for partition t-9 since it doesn't exist.",
    ]
    written = zkdata.PreferredReplicaElection.decode(await bare_store.read(PREFERRED))
    map_hash = {
        jvm.signed32(
            (java_string_hash("topic") ^ java_string_hash(tp.topic))
            + (java_string_hash("partition") ^ tp.partition)
        ): tp
        for tp in wanted
    }
    assert list(written.partitions) == [map_hash[h] for h in scala_hash_set_order(list(map_hash))]

    before = await bare_store.snapshot()
    pending = await elect(bare_store, "--election-type", "preferred", "--all-topic-partitions")
    assert pending.rc == 1
    assert pending.lines[-1].startswith(
        "Error: Preferred replica leader election currently in progress for "
    )
    assert pending.lines[-1].endswith(". Aborting operation")
    assert await bare_store.snapshot() == before


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--topic", "t", "--partition", "0"], "Missing required option(s): election-type"),
        (["--election-type", "preferred"],
         "One and only one of the following options is required: topic, all-topic-partitions,"
         " path-to-json-file"),
        (["--election-type", "preferred", "--topic", "t", "--all-topic-partitions"],
         "One and only one of the following options is required: topic, all-topic-partitions,"
         " path-to-json-file"),
        (["--election-type", "preferred", "--topic", "t"], "Missing required option(s): partition"),
        (["--election-type", "preferred", "--all-topic-partitions", "--partition", "1"],
         "Option partition is only allowed if topic is used"),
        (["--election-type", "sideways", "--all-topic-partitions"],
         "Value [sideways] is not one of [PREFERRED|UNCLEAN]"),
        (["--election-type", "unclean", "--all-topic-partitions"],
         "An unclean election needs --bootstrap-server (the ElectLeaders API);"
         " /admin/preferred_replica_election only holds preferred elections"),
        (["--election-type", "preferred", "--all-topic-partitions", "--bootstrap-server", "h:1",
          "--zookeeper", "z:2181"],
         'Option "[bootstrap-server]" can\'t be used with option "[zookeeper]"'),
        (["--election-type", "preferred", "--topic", "t", "--partition", "x"],
         "Cannot parse argument 'x' of option partition"),
        (["--election-type"], "Option election-type requires an argument"),
        (["--election-type", "preferred", "--every"], "every is not a recognized option"),
    ],
)  # fmt: skip
async def test_bad_options_are_one_line_on_stderr(argv: list[str], message: str) -> None:
    """Option mistakes: Kafka's or jopt's message on stderr, exit 1, nothing run."""
    out, err = io.StringIO(), io.StringIO()
    rc = await run_leader_election_command(argv, out=out, err=err)
    assert (rc, out.getvalue(), err.getvalue()) == (1, "", message + "\n")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("nonsense", "Error: Replica election data is empty"),
        ('{"version": 1}', 'Error: Replica election data is missing "partitions" field'),
        ('{"partitions": [{"topic": "t"}]}', "Error: No such field exists: `partition`"),
        (
            '{"partitions": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 0}]}',
            "Error: Replica election data contains duplicate partitions: t-0",
        ),
    ],
)
async def test_bad_files_write_nothing(
    bare_store: Harness, tmp_path: Path, content: str, message: str
) -> None:
    """A bad election file: "Error: <Kafka's message>", exit 1, the store untouched."""
    await kafka_zk.write_topic(await bare_store.session(), TopicName("t"), {0: [0]}, {})
    path = tmp_path / "e.json"
    path.write_text(content)
    before = await bare_store.snapshot()
    result = await elect(bare_store, "--election-type", "preferred", "--path-to-json-file",
                         str(path))  # fmt: skip
    assert result == Result(1, WARNINGS + message + "\n", "")
    assert await bare_store.snapshot() == before
