"""``kemu reassign-partitions --bootstrap-server``: 2.7's admin-client path against a running
3-broker cluster on each store (a real ZooKeeper, the embedded store): ``--generate``,
``--execute`` with ``--throttle`` (the throttle configs written where 2.7 writes them, read
back by kafka-python), ``--verify`` (states, then the throttles removed), a reassignment held
in flight by a stopped target broker (``--verify`` says in progress, ``--execute`` refuses
without ``--additional``, ``--cancel`` reverts it), and bad input (Kafka's one line, exit
1, nothing changed)."""

from __future__ import annotations

import io
import json
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from actors.zk import kafka_zk
from cluster.cli.reassign import CANNOT_EXECUTE_BECAUSE_OF_EXISTING, run_reassign_command
from cluster.kafka.client import KafkaAdminClient
from protocol import zkdata
from protocol.errors import ErrorCode
from protocol.ids import BrokerId, TopicName
from tests.support.hosting import hosted_fixture
from tests.support.topics_harness import STORE, Harness, Result, running_harness
from tests.support.waiting import eventually, in_threads
from tests.support.zookeeper import STORES

pytestmark = pytest.mark.asyncio

REASSIGN = zkdata.REASSIGN_PARTITIONS_PATH
WAIT = 30.0
in_thread = in_threads(WAIT)


@hosted_fixture(params=STORES)
async def zk_or_embedded(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Harness]:
    """A 3-broker cluster on the embedded store, then on a real ZooKeeper."""
    server = request.getfixturevalue("zookeeper_server") if request.param == "zookeeper" else None
    async for harness in running_harness(
        tmp_path, server, config={"auto.leader.rebalance.enable": "false"}
    ):
        yield harness


async def reassign(harness: Harness, *argv: str, seed: int = 3) -> Result:
    """``kemu reassign-partitions ARGV --bootstrap-server <the cluster>``."""
    out, err = io.StringIO(), io.StringIO()
    rc = await run_reassign_command(
        [*argv, "--bootstrap-server", harness.bootstrap],
        out=out,
        err=err,
        rng=random.Random(seed),
    )
    return Result(rc, out.getvalue(), err.getvalue())


def json_file(tmp_path: Path, content: dict[str, Any], name: str = "r.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(content))
    return str(path)


def partitions_file(tmp_path: Path, assignment: dict[int, list[int]], topic: str = "t") -> str:
    return json_file(
        tmp_path,
        {
            "version": 1,
            "partitions": [
                {"topic": topic, "partition": p, "replicas": r} for p, r in assignment.items()
            ],
        },
    )


async def create(harness: Harness, topic: str, assignment: str) -> None:
    """Create ``topic`` through the store and wait until the brokers' metadata has it
    with a leader for every partition."""
    result = await harness.topics(
        "--create", "--topic", topic, "--replica-assignment", assignment, via=STORE
    )
    assert result.rc == 0, result

    async def led() -> bool:
        async with KafkaAdminClient(harness.bootstrap) as client:
            (found,) = (await client.metadata([topic])).topics
        return found.error_code is ErrorCode.NONE and all(p.leader >= 0 for p in found.partitions)

    await eventually(led, timeout=WAIT)


async def stored_config(harness: Harness, entity: str) -> dict[str, str]:
    if not await harness.exists(f"/config/{entity}"):
        return {}
    return dict(zkdata.EntityConfig.decode(await harness.read(f"/config/{entity}")).config)


async def assignment_of(harness: Harness, topic: str) -> dict[int, tuple[int, ...]]:
    data = zkdata.TopicAssignment.decode(await harness.read(f"/brokers/topics/{topic}"))
    return {p: tuple(a.replicas) for p, a in data.partitions.items()}


def kafka_python_throttles(bootstrap: str, topic: str) -> dict[str, str]:
    """What kafka-python's DescribeConfigs says of the topic's throttled-replica lists."""
    from kafka.admin import (  # type: ignore[import-untyped]
        ConfigResource,
        ConfigResourceType,
        KafkaAdminClient,
    )

    client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20_000)
    try:
        described = client.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    finally:
        client.close()
    configs = described["topic"][topic]
    return {name: entry["value"] for name, entry in configs.items() if "throttled" in name}


async def test_generate_execute_throttle_verify(zk_or_embedded: Harness, tmp_path: Path) -> None:
    """--generate prints the current and a candidate assignment over the named brokers;
    --execute --throttle prints the rollback JSON, the throttle lines and the started
    partitions, and writes 2.7's throttle configs; --verify reports each partition and,
    nothing being in flight, deletes them."""
    h = zk_or_embedded
    await create(h, "t", "0:1,1:2")
    topics = json_file(tmp_path, {"version": 1, "topics": [{"topic": "t"}]}, "topics.json")
    generated = await reassign(h, "--generate", "--topics-to-move-json-file", topics,
                               "--broker-list", "1,2")  # fmt: skip
    assert generated.rc == 0, generated
    current = (
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[0,1],'
        '"log_dirs":["any","any"]},{"topic":"t","partition":1,"replicas":[1,2],'
        '"log_dirs":["any","any"]}]}'
    )
    lines = generated.lines
    assert lines[:4] == [
        "Current partition replica assignment",
        current,
        "",
        "Proposed partition reassignment configuration",
    ]
    proposed = json.loads(lines[4])
    assert len(lines) == 5
    assert [(p["topic"], p["partition"]) for p in proposed["partitions"]] == [("t", 0), ("t", 1)]
    assert all(sorted(p["replicas"]) == [1, 2] for p in proposed["partitions"])
    assert {p["replicas"][0] for p in proposed["partitions"]} == {1, 2}

    target = partitions_file(tmp_path, {0: [2, 1], 1: [1, 2]})
    started = await reassign(h, "--execute", "--reassignment-json-file", target,
                             "--throttle", "5000000")  # fmt: skip
    assert started == Result(
        0,
        "Current partition replica assignment\n\n"
        f"{current}\n\n"
        "Save this to use as the --reassignment-json-file option during rollback\n"
        "Warning: You must run --verify periodically, until the reassignment completes, to"
        " ensure the throttle is removed.\n"
        "The inter-broker throttle limit was set to 5000000 B/s\n"
        "Successfully started partition reassignments for t-0,t-1\n",
        "",
    )
    # calculateProposedMoveMap: t-0 moves 0,1 -> 2,1 (data read from 0 and 1, copied to 2);
    # t-1 keeps 1,2 (read from both, copied nowhere).
    assert await stored_config(h, "topics/t") == {
        "leader.replication.throttled.replicas": "0:0,0:1,1:1,1:2",
        "follower.replication.throttled.replicas": "0:2",
    }
    for broker in (0, 1, 2):
        assert await stored_config(h, f"brokers/{broker}") == {
            "leader.replication.throttled.rate": "5000000",
            "follower.replication.throttled.rate": "5000000",
        }
    assert await in_thread(kafka_python_throttles, h.bootstrap, "t") == {
        "leader.replication.throttled.replicas": "0:0,0:1,1:1,1:2",
        "follower.replication.throttled.replicas": "0:2",
    }

    async def settled() -> bool:
        return await assignment_of(h, "t") == {0: (2, 1), 1: (1, 2)}

    await eventually(settled, timeout=WAIT)
    verify = await eventually(
        lambda: reassign(h, "--verify", "--reassignment-json-file", target),
        until=lambda r: "still in progress" not in r.out,
        timeout=WAIT,
    )
    assert verify == Result(
        0,
        "Status of partition reassignment:\n"
        "Reassignment of partition t-0 is complete.\n"
        "Reassignment of partition t-1 is complete.\n"
        "\n"
        "Clearing broker-level throttles on brokers 0,1,2\n"
        "Clearing topic-level throttles on topic t\n",
        "",
    )
    assert await stored_config(h, "topics/t") == {}
    for broker in (0, 1, 2):
        assert await stored_config(h, f"brokers/{broker}") == {}


async def test_a_reassignment_in_flight(zk_or_embedded: Harness, tmp_path: Path) -> None:
    """r-0 on [a] reassigned to [a, b] with b stopped stays in flight: --verify says so and
    leaves the throttles; --execute refuses without --additional; --cancel reverts it,
    says so and clears the throttles; --list then finds nothing."""
    h = zk_or_embedded
    assert h.cluster is not None
    c = await h.cluster.controller_id()
    a, b = (c + 1) % 3, (c + 2) % 3
    await create(h, "r", str(a))
    h.cluster.stop_broker(b)
    assert await h.cluster.wait_stopped(b, timeout=WAIT)
    session = await h.session()
    await kafka_zk.create_partition_reassignment(
        session,
        zkdata.PartitionReassignment(
            partitions=(
                zkdata.PartitionReplicas(
                    topic=TopicName("r"), partition=0, replicas=(BrokerId(a), BrokerId(b))
                ),
            )
        ),
    )
    await eventually(lambda: reassign(h, "--list"), until=lambda r: "r-0" in r.out, timeout=WAIT)
    await session.set(
        "/config/topics/r",
        zkdata.EntityConfig(config={"leader.replication.throttled.replicas": "*"}).encode(),
    )
    target = partitions_file(tmp_path, {0: [a, b]}, topic="r")
    verify = await reassign(h, "--verify", "--reassignment-json-file", target)
    assert verify == Result(
        0,
        "Status of partition reassignment:\n"
        "Reassignment of partition r-0 is still in progress.\n\n",
        "",
    )
    assert await stored_config(h, "topics/r") == {"leader.replication.throttled.replicas": "*"}
    again = await reassign(h, "--execute", "--reassignment-json-file", target)
    assert again == Result(1, CANNOT_EXECUTE_BECAUSE_OF_EXISTING + "\n", "")
    listed = await reassign(h, "--list")
    assert listed.out == f"Current partition reassignments:\nr-0: replicas: {a},{b}. adding: {b}.\n"

    cancelled = await reassign(
        h, "--cancel", "--reassignment-json-file", target, "--preserve-throttles"
    )
    assert cancelled == Result(
        0,
        "Successfully cancelled partition reassignment for: r-0\n"
        "None of the specified partition moves are active.\n",
        "",
    )
    await eventually(lambda: assignment_of(h, "r"), until=lambda r: r == {0: (a,)}, timeout=WAIT)
    assert (await reassign(h, "--list")).out == "No partition reassignments found.\n"
    # Clearing the throttles of broker b, which is down: the call has no node to go to
    # (Kafka's client waits out default.api.timeout.ms for one; kemu's fails at once).
    unreachable = await reassign(h, "--cancel", "--reassignment-json-file", target)
    assert unreachable.lines[:2] == [
        "None of the specified partition reassignments are active.",
        "None of the specified partition moves are active.",
    ]
    assert unreachable.lines[3:] == [
        "Error: org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node"
        " assignment. Call: incrementalAlterConfigs"
    ]
    assert unreachable.rc == 1
    await h.cluster.start_broker(b)
    done = await eventually(
        lambda: reassign(h, "--verify", "--reassignment-json-file", target),
        until=lambda r: r.rc == 0,
        timeout=WAIT,
    )
    assert done.lines[:3] == [
        "Status of partition reassignment:",
        f"There is no active reassignment of partition r-0, but replica set is {a} rather"
        f" than {a},{b}.",
        "",
    ]
    assert done.lines[4:] == ["Clearing topic-level throttles on topic r"]
    assert await stored_config(h, "topics/r") == {}


BAD_EXECUTES: list[tuple[dict[str, Any] | str, str]] = [
    ("{not json", "Error: The input string is not a valid JSON"),
    (
        {"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2, 1]}]},
        "Error: Partition replica lists may not contain duplicate entries: t-0 contains"
        " multiple entries for 1",
    ),
    (
        {"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 7]}]},
        "Error: Unknown broker id 7",
    ),
    (
        {"partitions": [{"topic": "nope", "partition": 0, "replicas": [1]}]},
        "Error: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: This server"
        " does not host this topic-partition.",
    ),
    (
        {"partitions": [{"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["/d"]}]},
        'Error: kemu serves no AlterReplicaLogDirs: give every replica the log dir "any"',
    ),
]


async def test_bad_input_changes_nothing(zk_or_embedded: Harness, tmp_path: Path) -> None:
    """Each bad --execute: Kafka's line, exit 1, no reassignment, no config written; a
    partition the topic lacks is refused by the controller, per partition."""
    h = zk_or_embedded
    await create(h, "t", "0")
    before = (await assignment_of(h, "t"), await h.children("/config/changes"))
    for content, message in BAD_EXECUTES:
        path = tmp_path / "bad.json"
        path.write_text(content if isinstance(content, str) else json.dumps(content))
        result = await reassign(h, "--execute", "--reassignment-json-file", str(path),
                                "--throttle", "100")  # fmt: skip
        assert result == Result(1, message + "\n", ""), content
    missing = partitions_file(tmp_path, {0: [1], 5: [1]})
    refused = await reassign(h, "--execute", "--reassignment-json-file", missing)
    assert refused.rc == 1
    assert refused.lines[-2:] == [
        "Error reassigning partition(s):",
        "t-5: The partition does not exist.",
    ]
    await eventually(lambda: assignment_of(h, "t"), until=lambda a: a == {0: (1,)}, timeout=WAIT)
    generated = await reassign(h, "--generate", "--topics-to-move-json-file", missing,
                               "--broker-list", "1,x")  # fmt: skip
    assert generated == Result(1, 'Error: For input string: "x"\n', "")
    unknown = json_file(tmp_path, {"topics": [{"topic": "nope"}]}, "unknown.json")
    generated = await reassign(h, "--generate", "--topics-to-move-json-file", unknown,
                               "--broker-list", "0,1")  # fmt: skip
    assert generated == Result(
        1,
        "Error: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: This server"
        " does not host this topic-partition.\n",
        "",
    )
    elsewhere = partitions_file(tmp_path, {0: [1]}, topic="nope")
    verified = await reassign(h, "--verify", "--reassignment-json-file", elsewhere,
                              "--preserve-throttles")  # fmt: skip
    assert verified == Result(
        0,
        "Status of partition reassignment:\n"
        "There is no active reassignment of partition nope-0, but replica set is  rather"
        " than 1.\n\n",
        "",
    )
    assert not await h.exists(REASSIGN)
    assert (await h.children("/config/changes")) == before[1]
