"""``kemu log-dirs``, Kafka 2.7's ``kafka-log-dirs.sh``, and the DescribeLogDirs it sends:
against a one-broker cluster with two log dirs (on either store), one of them failed,
what the tool prints (the JSON of ``LogDirsCommand.formatAsJson``) and what
kafka-python's ``describe_log_dirs`` reads; the sizes are those of the segment files on
disk."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from kafka.admin import KafkaAdminClient as PythonAdmin  # type: ignore[import-untyped]

from actors.log.disk import DiskOp, FaultyDisk
from actors.runtime.tracer import MemorySink, Tracer
from cluster.cli.log_dirs import main
from cluster.kafka.client import KafkaAdminClient
from cluster.launch.cluster import Cluster, ClusterSpec
from protocol.errors import ErrorCode
from protocol.ids import TopicName
from protocol.kafka_api import CreatableTopic
from protocol.kafka_data import (
    ProducePartitionData,
    ProduceRequestData,
    ProduceResponseData,
    ProduceTopicData,
)
from tests.support.hosting import hosted_fixture
from tests.support.record_batches import client_batch
from tests.support.waiting import in_threads
from tests.support.zookeeper import STORES

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120)]

in_thread = in_threads(within=60)
STORAGE_EXCEPTION = "org.apache.kafka.common.errors.KafkaStorageException"


@dataclass
class OneBroker:
    bootstrap: str
    healthy: Path  # the log dir holding "kept"
    failed: Path  # the log dir that failed creating "lost"


@hosted_fixture(params=STORES)
async def one_broker(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[OneBroker]:
    """One broker, on the embedded store or a real ZooKeeper, with two log dirs: ``kept``
    (three records) in the first; the second failed while creating ``lost``'s log
    (nextLogDirs picked it: it had fewer logs)."""
    tracer = Tracer()
    tracer.add_sink(MemorySink())
    server = request.getfixturevalue("zookeeper_server") if request.param == "zookeeper" else None
    spec = ClusterSpec(
        brokers=1,
        base_port=0,
        log_dir=tmp_path / "logs",
        log_dirs_per_broker=2,
        zookeeper=None if server is None else f"{server.hosts}/kemu-{uuid.uuid4().hex}",
    )
    disk = FaultyDisk()
    healthy, failed = tmp_path / "logs" / "broker-0", tmp_path / "logs" / "broker-0.1"
    async with anyio.create_task_group() as tg:
        cluster: Cluster = await tg.start(Cluster(spec, tracer=tracer, disks={0: disk}).run)
        bootstrap = f"127.0.0.1:{cluster.ports[0]}"
        async with KafkaAdminClient(bootstrap) as client:
            (kept,) = await client.create_topics(
                [CreatableTopic(name=TopicName("kept"), num_partitions=1, replication_factor=1)]
            )
            assert kept.error_code is ErrorCode.NONE
            produced = await client.request_broker(
                ("127.0.0.1", cluster.ports[0]),
                ProduceRequestData(
                    acks=1,
                    timeout_ms=10_000,
                    topic_data=(
                        ProduceTopicData(
                            name=TopicName("kept"),
                            partition_data=(
                                ProducePartitionData(
                                    index=0, records=client_batch([b"a", b"bb", b"ccc"])
                                ),
                            ),
                        ),
                    ),
                ),
                timeout=15,
            )
            assert isinstance(produced, ProduceResponseData)
            assert produced.responses[0].partition_responses[0].error_code is ErrorCode.NONE
            disk.fail(failed, [DiskOp.MKDIR, DiskOp.WRITE_FILE])
            await client.create_topics(
                [CreatableTopic(name=TopicName("lost"), num_partitions=1, replication_factor=1)]
            )
        yield OneBroker(bootstrap, healthy, failed)
        tg.cancel_scope.cancel()


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), out=out, err=err)
    return status, out.getvalue(), err.getvalue()


def segment_bytes(partition_dir: Path) -> int:
    return sum(f.stat().st_size for f in partition_dir.glob("*.log"))


async def test_describe_prints_each_dir_with_its_partitions_sizes(one_broker: OneBroker) -> None:
    """The two lines, then the JSON: the healthy dir with ``kept-0`` at the size of its
    segment files, the failed dir with KafkaStorageException and no partitions."""
    status, out, err = await in_thread(
        run, "--describe", "--bootstrap-server", one_broker.bootstrap
    )
    assert (status, err) == (0, "")
    querying, received, document, tail = out.split("\n")
    assert querying == "Querying brokers for log directories information"
    assert received == "Received log directory information from brokers 0"
    assert tail == ""
    (broker,) = json.loads(document)["brokers"]
    healthy, failed = broker["logDirs"]
    assert broker["broker"] == 0
    assert failed == {
        "logDir": str(one_broker.failed),
        "error": STORAGE_EXCEPTION,
        "partitions": [],
    }
    assert (healthy["logDir"], healthy["error"]) == (str(one_broker.healthy), None)
    # lost-0 may be there too: after the notification the controller's LeaderAndIsr has
    # the broker create it again, in the dir still online, as Kafka's would
    assert {p["partition"] for p in healthy["partitions"]} <= {"kept-0", "lost-0"}
    for partition in healthy["partitions"]:
        assert partition == {
            "partition": partition["partition"],
            "size": segment_bytes(one_broker.healthy / partition["partition"]),
            "offsetLag": 0,
            "isFuture": False,
        }
    assert healthy["partitions"][0]["partition"] == "kept-0"
    assert segment_bytes(one_broker.healthy / "kept-0") > 0
    assert document.startswith('{"version":1,"brokers":[{"broker":0,"logDirs":[{"logDir":')


async def test_the_topic_and_broker_lists_narrow_the_answer(one_broker: OneBroker) -> None:
    """``--topic-list`` keeps other topics' partitions out; ``--broker-list 0`` asks broker
    0; a broker the cluster lacks, or a list that is not numbers, is one line, exit 1."""
    status, out, _ = await in_thread(
        run,
        "--describe",
        "--bootstrap-server",
        one_broker.bootstrap,
        "--broker-list",
        "0",
        "--topic-list",
        "other,",
    )
    assert status == 0
    (broker,) = json.loads(out.split("\n")[2])["brokers"]
    assert [d["partitions"] for d in broker["logDirs"]] == [[], []]

    status, out, err = await in_thread(
        run, "--describe", "--bootstrap-server", one_broker.bootstrap, "--broker-list", "0,7"
    )
    assert status == 1
    assert err.count("\n") == 1
    assert "No broker 7 in the cluster (brokers 0)" in err
    status, _, err = await in_thread(
        run, "--describe", "--bootstrap-server", one_broker.bootstrap, "--broker-list", "x"
    )
    assert (status, err.count("\n")) == (1, 1)
    assert 'For input string: "x"' in err


async def test_missing_required_options_are_usage_errors() -> None:
    status, out, err = await in_thread(run, "--bootstrap-server", "127.0.0.1:1")
    assert (status, out) == (1, "")
    assert err.startswith('Missing required argument "[describe]"')


async def test_kafka_python_reads_the_answer(one_broker: OneBroker) -> None:
    """A real client's ``describe_log_dirs`` (its own decoding of DescribeLogDirs) sees
    the same two dirs: the failed one with error code 56."""

    def describe() -> list[dict[str, Any]]:
        admin = PythonAdmin(bootstrap_servers=one_broker.bootstrap)
        try:
            return list(admin.describe_log_dirs())
        finally:
            admin.close()

    (answer,) = await in_thread(describe)
    assert answer["broker"] == 0
    by_dir = {d["log_dir"]: d for d in answer["log_dirs"]}
    assert set(by_dir) == {str(one_broker.healthy), str(one_broker.failed)}
    assert by_dir[str(one_broker.failed)]["error_code"] == 56  # KAFKA_STORAGE_ERROR
    assert by_dir[str(one_broker.failed)]["topics"] == []
    healthy = by_dir[str(one_broker.healthy)]
    assert healthy["error_code"] == 0
    sizes = {
        (t["name"], p["partition_index"]): p["partition_size"]
        for t in healthy["topics"]
        for p in t["partitions"]
    }
    assert sizes[("kept", 0)] == segment_bytes(one_broker.healthy / "kept-0")
