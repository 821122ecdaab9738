"""``kemu reassign-partitions --generate|--execute|--verify`` on the ZooKeeper path: against
a running cluster (a real ZooKeeper, the embedded store in-process, and the embedded store
over TCP) whose controller carries the reassignment out, on a store with no controller
(what the tool writes and reports stays as it is, throttles included), through the cluster
file, and with bad input (one line, exit 1, nothing written)."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from actors.zk import kafka_zk
from cluster.cli.reassign import CANNOT_EXECUTE_BECAUSE_OF_EXISTING, run_reassign_command
from cluster.launch.connect import BrokerEntry, ClusterFile
from protocol import zkdata
from protocol.ids import BrokerId, TopicName
from tests.support.topics_harness import STORE, Harness, Result
from tests.support.waiting import eventually

pytestmark = pytest.mark.asyncio

REASSIGN = zkdata.REASSIGN_PARTITIONS_PATH
ZK_WARNING = "Warning: --zookeeper is deprecated, and will be removed in a future version of Kafka."
VERIFY_WARNING = (
    "Warning: because you are using the deprecated --zookeeper option, the results may be"
    " incomplete.  Use --bootstrap-server instead for more accurate results."
)


async def reassign(harness: Harness, *argv: str, where: bool = True) -> Result:
    """``kemu reassign-partitions ARGV`` on the harness's store (``--zookeeper`` appended
    unless ``where`` is False)."""
    out, err = io.StringIO(), io.StringIO()
    full = list(argv)
    store = None
    if where:
        if harness.zookeeper is not None:
            full += ["--zookeeper", harness.zookeeper]
        else:
            full += ["--zookeeper", "embedded://in-process"]
            store = harness.store
    rc = await run_reassign_command(full, out=out, err=err, store=store)
    return Result(rc, out.getvalue(), err.getvalue())


def json_file(tmp_path: Path, partitions: list[dict[str, object]], name: str = "r.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"version": 1, "partitions": partitions}))
    return str(path)


async def create(harness: Harness, topic: str, assignment: str) -> None:
    result = await harness.topics(
        "--create", "--topic", topic, "--replica-assignment", assignment, via=STORE
    )
    assert result.rc == 0, result


async def register_brokers(harness: Harness, *broker_ids: int) -> None:
    """Broker registrations on a bare store (the tool checks the target brokers exist)."""
    session = await harness.session()
    await kafka_zk.create_top_level_paths(session)
    for b in broker_ids:
        await kafka_zk.register_broker(
            session,
            BrokerId(b),
            zkdata.BrokerRegistration(endpoints=(), timestamp=0),
        )


async def test_execute_then_verify_on_a_running_cluster(
    store_cluster: Harness, tmp_path: Path
) -> None:
    """--execute prints the current assignment to roll back with and starts the
    reassignment; the controller completes it (topic znode updated, path removed); --verify
    then reports it complete and clears the throttles."""
    await create(store_cluster, "t", "0:1,1:2")
    f = json_file(
        tmp_path,
        [
            {"topic": "t", "partition": 0, "replicas": [2, 1]},
            {"topic": "t", "partition": 1, "replicas": [1, 2]},
        ],
    )
    result = await reassign(store_cluster, "--execute", "--reassignment-json-file", f)
    assert result == Result(
        0,
        f"{ZK_WARNING}\n"
        "Current partition replica assignment\n\n"
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[0,1],'
        '"log_dirs":["any","any"]},{"topic":"t","partition":1,"replicas":[1,2],'
        '"log_dirs":["any","any"]}]}\n\n'
        "Save this to use as the --reassignment-json-file option during rollback\n"
        "Successfully started partition reassignments for t-0,t-1\n",
        "",
    )

    async def settled() -> bool:
        return not await store_cluster.exists(REASSIGN)

    await eventually(settled, timeout=30)
    assignment = zkdata.TopicAssignment.decode(await store_cluster.read("/brokers/topics/t"))
    assert {p: a.replicas for p, a in assignment.partitions.items()} == {0: (2, 1), 1: (1, 2)}
    assert all(
        not a.adding_replicas and not a.removing_replicas for a in assignment.partitions.values()
    )
    verified = await reassign(store_cluster, "--verify", "--reassignment-json-file", f)
    assert verified == Result(
        0,
        f"{ZK_WARNING}\n{VERIFY_WARNING}\n"
        "Status of partition reassignment:\n"
        "Reassignment of partition t-0 is complete.\n"
        "Reassignment of partition t-1 is complete.\n"
        "Clearing broker-level throttles on brokers 0,1,2\n"
        "Clearing topic-level throttles on topic t\n",
        "",
    )


async def test_verify_reports_each_partition_state(bare_store: Harness, tmp_path: Path) -> None:
    """With no controller the path stays: --verify says "still in progress" for what it
    lists, "complete" where the replicas are the target, and the replica set otherwise;
    nothing is cleared while a reassignment is in progress. Throttles set on the topic are
    removed once it is done (and a config change is notified)."""
    await register_brokers(bare_store, 0, 1, 2)
    await kafka_zk.write_topic(
        await bare_store.session(), TopicName("t"), {0: [0, 1], 1: [1, 2], 2: [2]}, {}
    )
    f = json_file(tmp_path, [{"topic": "t", "partition": 0, "replicas": [2, 1]}])
    started = await reassign(bare_store, "--execute", "--reassignment-json-file", f)
    assert started.rc == 0
    assert started.lines[-1] == "Successfully started partition reassignment for t-0"
    assert zkdata.PartitionReassignment.decode(await bare_store.read(REASSIGN)) == (
        zkdata.PartitionReassignment(
            partitions=(
                zkdata.PartitionReplicas(
                    topic=TopicName("t"), partition=0, replicas=(BrokerId(2), BrokerId(1))
                ),
            )
        )
    )
    check = json_file(
        tmp_path,
        [
            {"topic": "t", "partition": 0, "replicas": [2, 1]},
            {"topic": "t", "partition": 1, "replicas": [1, 2]},
            {"topic": "t", "partition": 2, "replicas": [0]},
        ],
        "check.json",
    )
    before = await bare_store.snapshot()
    verified = await reassign(bare_store, "--verify", "--reassignment-json-file", check)
    assert verified.lines[2:] == [
        "Status of partition reassignment:",
        "Reassignment of partition t-0 is still in progress.",
        "Reassignment of partition t-1 is complete.",
        "There is no active reassignment of partition t-2, but replica set is 2 rather than 0.",
    ]
    assert await bare_store.snapshot() == before

    session = await bare_store.session()
    await session.delete(REASSIGN)
    await session.set(
        "/config/topics/t",
        zkdata.EntityConfig(
            config={"leader.replication.throttled.replicas": "*", "retention.ms": "5"}
        ).encode(),
    )
    notified = len(await bare_store.children("/config/changes"))
    done = await reassign(bare_store, "--verify", "--reassignment-json-file", f)
    assert done.lines[-4:] == [
        "Status of partition reassignment:",
        "There is no active reassignment of partition t-0, but replica set is 0,1 rather than 2,1.",
        "Clearing broker-level throttles on brokers 0,1,2",
        "Clearing topic-level throttles on topic t",
    ]
    config = zkdata.EntityConfig.decode(await bare_store.read("/config/topics/t")).config
    assert config == {"retention.ms": "5"}
    assert len(await bare_store.children("/config/changes")) == notified + 1


async def test_generate_and_throttle_on_the_store(bare_store: Harness, tmp_path: Path) -> None:
    """--generate prints the current and a candidate assignment over the registered brokers
    of the list; --execute --throttle writes the throttled-replica lists on the topic and
    both rates on every broker data moves from or to, each with a change notification, as
    2.7's AdminZkClient writes them; --verify, once nothing is in flight, removes them."""
    await register_brokers(bare_store, 0, 1, 2)
    session = await bare_store.session()
    await kafka_zk.write_topic(session, TopicName("t"), {0: [0, 1], 1: [1, 2]}, {})
    topics = tmp_path / "topics.json"
    topics.write_text('{"version": 1, "topics": [{"topic": "t"}, {"topic": "absent"}]}')
    generated = await reassign(
        bare_store, "--generate", "--topics-to-move-json-file", str(topics),
        "--broker-list", "2,1,9",
    )  # fmt: skip
    assert generated.rc == 0, generated
    assert generated.lines[1:5] == [
        "Current partition replica assignment",
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[0,1],'
        '"log_dirs":["any","any"]},{"topic":"t","partition":1,"replicas":[1,2],'
        '"log_dirs":["any","any"]}]}',
        "",
        "Proposed partition reassignment configuration",
    ]
    proposed = json.loads(generated.lines[5])["partitions"]
    assert sorted(sorted(p["replicas"]) for p in proposed) == [[1, 2], [1, 2]]
    assert sorted(p["replicas"][0] for p in proposed) == [1, 2]

    notified = len(await bare_store.children("/config/changes"))
    f = json_file(tmp_path, [{"topic": "t", "partition": 0, "replicas": [2, 1]}])
    started = await reassign(
        bare_store, "--execute", "--reassignment-json-file", f, "--throttle", "1000"
    )
    assert started.lines[6:] == [
        "Warning: You must run --verify periodically, until the reassignment completes, to"
        " ensure the throttle is removed.",
        "The inter-broker throttle limit was set to 1000 B/s",
        "Successfully started partition reassignment for t-0",
    ]
    config = zkdata.EntityConfig.decode(await bare_store.read("/config/topics/t")).config
    assert config == {
        "leader.replication.throttled.replicas": "0:0,0:1",
        "follower.replication.throttled.replicas": "0:2",
    }
    for broker in (0, 1, 2):
        rates = zkdata.EntityConfig.decode(await bare_store.read(f"/config/brokers/{broker}"))
        assert rates.config == {
            "leader.replication.throttled.rate": "1000",
            "follower.replication.throttled.rate": "1000",
        }
    assert len(await bare_store.children("/config/changes")) == notified + 4

    await session.delete(REASSIGN)  # as the controller does once the move is done
    done = await reassign(bare_store, "--verify", "--reassignment-json-file", f)
    assert done.lines[-2:] == [
        "Clearing broker-level throttles on brokers 0,1,2",
        "Clearing topic-level throttles on topic t",
    ]
    assert zkdata.EntityConfig.decode(await bare_store.read("/config/topics/t")).config == {}
    assert zkdata.EntityConfig.decode(await bare_store.read("/config/brokers/2")).config == {}


@pytest.mark.parametrize(
    ("broker_list", "topics", "message"),
    [
        ("1,x", '{"topics": [{"topic": "t"}]}', 'Error: For input string: "x"'),
        ("1,2,1", '{"topics": [{"topic": "t"}]}',
         "Error: Broker list contains duplicate entries: 1"),
        ("1", '{"topics": [{"topic": "t"}, {"topic": "t"}]}',
         "Error: List of topics to reassign contains duplicate entries: t"),
        ("1", '{"topics": [{"name": "t"}]}', "Error: No such field exists: `topic`"),
        ("1", "[", "Error: The input string is not a valid JSON"),
        ("1", '{"version": 2, "topics": []}', "Error: Not supported version field value 2"),
        ("1", '{"topics": [{"topic": "t"}]}',
         "Error: Replication factor: 2 larger than available brokers: 1."),
    ],
)  # fmt: skip
async def test_bad_generate_input(
    bare_store: Harness, tmp_path: Path, broker_list: str, topics: str, message: str
) -> None:
    """--generate's bad input: Kafka's message, exit 1, nothing written."""
    await register_brokers(bare_store, 0, 1, 2)
    await kafka_zk.write_topic(await bare_store.session(), TopicName("t"), {0: [0, 1]}, {})
    path = tmp_path / "topics.json"
    path.write_text(topics)
    before = await bare_store.snapshot()
    result = await reassign(
        bare_store, "--generate", "--topics-to-move-json-file", str(path),
        "--broker-list", broker_list,
    )  # fmt: skip
    assert result == Result(1, f"{ZK_WARNING}\n{message}\n", "")
    assert await bare_store.snapshot() == before


async def test_the_cluster_file_finds_the_store(embedded_cluster: Harness, tmp_path: Path) -> None:
    """Without --zookeeper the store of the running `kemu up` in the cluster file is used
    (no deprecation warning: the user gave no ZooKeeper)."""
    served = embedded_cluster
    assert served.cluster is not None
    await create(served, "t", "0")
    # The embedded store of this in-process cluster is not served over TCP: hand a cluster
    # file whose store is the in-process one (run_reassign_command's store=).
    cluster_file = tmp_path / "cluster.json"
    ClusterFile(
        store="embedded://in-process",
        brokers=(BrokerEntry(id=0, host="127.0.0.1", port=1, pid=os.getpid(), log_dir="x"),),
        controller=0,
        cluster_id="c",
        pid=os.getpid(),
    ).write(cluster_file)
    f = json_file(tmp_path, [{"topic": "t", "partition": 0, "replicas": [1]}])
    out, err = io.StringIO(), io.StringIO()
    rc = await run_reassign_command(
        ["--execute", "--reassignment-json-file", f, "--cluster-file", str(cluster_file)],
        out=out,
        err=err,
        store=served.store,
    )
    assert (rc, err.getvalue()) == (0, "")
    assert out.getvalue().splitlines()[0] == "Current partition replica assignment"

    async def moved() -> bool:
        data = await served.read("/brokers/topics/t")
        return zkdata.TopicAssignment.decode(data).partitions[0].replicas == (1,)

    await eventually(moved, timeout=30)
    missing = tmp_path / "nowhere.json"
    out, err = io.StringIO(), io.StringIO()
    rc = await run_reassign_command(
        ["--verify", "--reassignment-json-file", f, "--cluster-file", str(missing)],
        out=out,
        err=err,
    )
    assert rc == 1
    assert err.getvalue().startswith(f"no cluster file at {missing}")


# ------------------------------------------------------------------ bad input

BAD_FILES: list[tuple[str, str]] = [
    ("{not json", "Error: The input string is not a valid JSON"),
    ('{"version": 2, "partitions": []}', "Error: Not supported version field value 2"),
    ('{"version": 1, "partitions": []}', "Error: Partition reassignment list cannot be empty"),
    ('{"version": 1}', "Error: Partition reassignment list cannot be empty"),
    (
        '{"partitions": [{"topic": "t", "partition": 0, "replicas": []}]}',
        "Error: Partition replica list cannot be empty",
    ),
    (
        '{"partitions": [{"topic": "t", "partition": 0, "replicas": [1]},'
        ' {"topic": "t", "partition": 0, "replicas": [2]}]}',
        "Error: Partition reassignment contains duplicate topic partitions: t-0",
    ),
    (
        '{"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2, 1]}]}',
        "Error: Partition replica lists may not contain duplicate entries: t-0 contains"
        " multiple entries for 1",
    ),
    (
        '{"partitions": [{"topic": "t", "replicas": [1]}]}',
        "Error: No such field exists: `partition`",
    ),
    (
        '{"partitions": [{"topic": "t", "partition": "0", "replicas": [1]}]}',
        'Error: Int expected, received "0"',
    ),
    (
        '{"partitions": [{"topic": "t", "partition": 0, "replicas": [1],'
        ' "log_dirs": ["any", "any"]}]}',
        "Error: Size of replicas list List(1) is different from size of log dirs list"
        " List(any, any) for partition t-0",
    ),
    (
        '{"partitions": [{"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["/data"]}]}',
        "Error: bootstrap-server needs to be provided when replica reassignments are present.",
    ),
    (
        '{"partitions": [{"topic": "t", "partition": 5, "replicas": [1]},'
        ' {"topic": "nope", "partition": 0, "replicas": [1]}]}',
        "Error: The proposed assignment contains non-existent partitions: List(t-5, nope-0)",
    ),
    (
        '{"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 7, 9]}]}',
        "Error: The proposed assignment contains non-existent brokerIDs: 7,9",
    ),
]


@pytest.mark.parametrize(("content", "message"), BAD_FILES)
async def test_bad_reassignment_files_write_nothing(
    bare_store: Harness, tmp_path: Path, content: str, message: str
) -> None:
    """Each bad file: Kafka's message as "Error: ..." on stdout, exit 1, store untouched."""
    await create(bare_store, "t", "0")
    await register_brokers(bare_store, 0, 1, 2)
    path = tmp_path / "bad.json"
    path.write_text(content)
    before = await bare_store.snapshot()
    result = await reassign(bare_store, "--execute", "--reassignment-json-file", str(path))
    assert result == Result(1, f"{ZK_WARNING}\n{message}\n", "")
    assert await bare_store.snapshot() == before


async def test_an_existing_reassignment_is_not_overwritten(
    bare_store: Harness, tmp_path: Path
) -> None:
    """A reassignment already pending: Kafka's terse message alone, exit 1; the pending one
    stays as it was. A missing file is reported by its path."""
    await create(bare_store, "t", "0")
    await register_brokers(bare_store, 0, 1)
    first = json_file(tmp_path, [{"topic": "t", "partition": 0, "replicas": [1]}])
    assert (await reassign(bare_store, "--execute", "--reassignment-json-file", first)).rc == 0
    before = await bare_store.snapshot()
    second = json_file(tmp_path, [{"topic": "t", "partition": 0, "replicas": [0]}], "2.json")
    result = await reassign(bare_store, "--execute", "--reassignment-json-file", second)
    assert result == Result(1, f"{ZK_WARNING}\n{CANNOT_EXECUTE_BECAUSE_OF_EXISTING}\n", "")
    gone = str(tmp_path / "gone.json")
    missing = await reassign(bare_store, "--execute", "--reassignment-json-file", gone)
    assert missing == Result(1, f"{ZK_WARNING}\nError: {gone}\n", "")
    assert await bare_store.snapshot() == before


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "Command must include exactly one action: --generate, --execute, --verify,"
             " --cancel, --list"),
        (["--execute", "--verify"], "Command must include exactly one action: --generate,"
         " --execute, --verify, --cancel, --list"),
        (["--execute"], 'Missing required argument "[reassignment-json-file]"'),
        (["--verify", "--reassignment-json-file", "f", "--throttle", "5"],
         'Option "[throttle]" can\'t be used with action "[verify]"'),
        (["--execute", "--reassignment-json-file", "f", "--additional"],
         'You must specify --bootstrap-server when using "[additional]"'),
        (["--execute", "--reassignment-json-file", "f", "--bootstrap-server", "h:1",
          "--cluster-file", "c"],
         'Option "[cluster-file]" can\'t be used with option "[bootstrap-server]"'),
        (["--execute", "--reassignment-json-file", "f", "--throttle", "fast"],
         "Cannot parse argument 'fast' of option throttle"),
        (["--cancel", "--reassignment-json-file", "f"],
         'You must specify --bootstrap-server when using "[cancel]"'),
        (["--list"], 'You must specify --bootstrap-server when using "[list]"'),
        (["--execute", "--reassignment-json-file", "f", "--cluster-file", "c",
          "--zookeeper", "z"],
         'Option "[cluster-file]" can\'t be used with option "[zookeeper]"'),
        (["--execute", "--reassignment-json-file"],
         "Option reassignment-json-file requires an argument"),
        (["--execute", "--frobnicate"], "frobnicate is not a recognized option"),
    ],
)  # fmt: skip
async def test_bad_options_are_one_line_on_stderr(argv: list[str], message: str) -> None:
    """Option mistakes: jopt's or Kafka's message, one line on stderr, exit 1, nothing run."""
    out, err = io.StringIO(), io.StringIO()
    rc = await run_reassign_command(argv or ["--zookeeper", "z"], out=out, err=err)
    assert (rc, out.getvalue(), err.getvalue()) == (1, "", message + "\n")
