"""``kemu topics --bootstrap-server`` against a running cluster: creation, listing,
describing (with the report filters), partition addition and its refusals, all over the
Kafka wire through kemu's admin client, with Kafka's output."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from confluent_kafka import Producer

from cluster.network.faults import Drop, Match
from protocol.kafka_data import FetchRequestData
from tests.support.hosting import hosted_fixture
from tests.support.topics_harness import STORE, WIRE, Harness, Result, running_harness
from tests.support.waiting import eventually

pytestmark = pytest.mark.asyncio

ERR = "Error while executing topic command : "


def line(topic: str, p: int, leader: int | str, replicas: str, isr: str) -> str:
    return f"\tTopic: {topic}\tPartition: {p}\tLeader: {leader}\tReplicas: {replicas}\tIsr: {isr}"


async def test_create_list_and_describe_over_the_wire(embedded_cluster: Harness) -> None:
    """Creations with explicit counts, broker defaults and a manual assignment with configs
    succeed; list is sorted; describe prints Kafka's lines with the overrides only."""
    h = embedded_cluster
    assert await h.topics(
        "--create", "--topic", "explicit", "--partitions", "2", "--replication-factor", "3",
        via=WIRE,
    ) == Result(0, "Created topic explicit.\n", "")  # fmt: skip
    assert await h.topics("--create", "--topic", "defaults", via=WIRE) == Result(
        0, "Created topic defaults.\n", ""
    )
    created = await h.topics(
        "--create", "--topic", "manual", "--replica-assignment", "2:1,0:2",
        "--config", "retention.ms=1000", via=WIRE,
    )  # fmt: skip
    assert created == Result(0, "Created topic manual.\n", "")
    assert await h.read("/brokers/topics/manual") == (
        b'{"version":2,"partitions":{"0":[2,1],"1":[0,2]},"adding_replicas":{},'
        b'"removing_replicas":{}}'
    )
    assert json.loads(await h.read("/config/topics/manual"))["config"] == {"retention.ms": "1000"}
    assert await h.topics("--list", via=WIRE) == Result(0, "defaults\nexplicit\nmanual\n", "")
    assert (await h.topics("--list", "--topic", "m.*", via=WIRE)).out == "manual\n"
    described = await h.topics("--describe", "--topic", "manual", via=WIRE)
    assert described.lines == [
        "Topic: manual\tPartitionCount: 2\tReplicationFactor: 2\tConfigs: retention.ms=1000",
        line("manual", 0, 2, "2,1", "2,1"),
        line("manual", 1, 0, "0,2", "0,2"),
    ]
    defaults = await h.topics("--describe", "--topic", "defaults", via=WIRE)
    assert defaults.lines[0] == (
        "Topic: defaults\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: "
    )
    overrides = await h.topics("--describe", "--topics-with-overrides", via=WIRE)
    assert overrides.lines == [
        "Topic: manual\tPartitionCount: 2\tReplicationFactor: 2\tConfigs: retention.ms=1000"
    ]


async def test_empty_list_prints_one_empty_line(embedded_cluster: Harness) -> None:
    """With no topics, the wire list prints Kafka's println of nothing; the store list
    prints nothing at all."""
    assert await embedded_cluster.topics("--list", via=WIRE) == Result(0, "\n", "")
    assert await embedded_cluster.topics("--list", via=STORE) == Result(0, "", "")


async def test_describe_orders_topics_as_the_admin_clients_hash_map(
    embedded_cluster: Harness,
) -> None:
    """Over the wire, describe lists topics in the order of DescribeTopicsResult.all()'s
    HashMap (not sorted), as Kafka 2.7 does."""
    for name in ("a.b", "c", "d"):
        await embedded_cluster.topics("--create", "--topic", name, via=WIRE)
    described = await embedded_cluster.topics("--describe", via=WIRE)
    topic_lines = [line.split("\t")[0] for line in described.lines if line.startswith("Topic:")]
    assert topic_lines == ["Topic: a.b", "Topic: d", "Topic: c"]


async def test_alter_adds_partitions_and_refuses_a_decrease_with_invalid_partitions(
    embedded_cluster: Harness,
) -> None:
    """CreatePartitions adds partitions (no output), a manual assignment places the new
    ones, and a decrease fails with the broker's INVALID_PARTITIONS message."""
    h = embedded_cluster
    await h.topics("--create", "--topic", "grow", "--replica-assignment", "0:1,1:2", via=WIRE)
    assert await h.topics(
        "--alter", "--topic", "grow", "--partitions", "3", "--replica-assignment",
        "0:1,1:2,2:0", via=WIRE,
    ) == Result(0, "", "")  # fmt: skip
    assert await h.topics("--alter", "--topic", "grow", "--partitions", "4", via=WIRE) == Result(
        0, "", ""
    )
    assignment = json.loads(await h.read("/brokers/topics/grow"))["partitions"]
    assert assignment["2"] == [2, 0]
    assert len(assignment) == 4
    before = await h.snapshot()
    shrink = await h.topics("--alter", "--topic", "grow", "--partitions", "2", via=WIRE)
    assert shrink == Result(
        1,
        ERR + "Topic currently has 4 partitions, which is higher than the requested 2.\n",
        "",
    )
    assert await h.snapshot() == before


async def test_unavailable_and_under_replicated_reports(embedded_cluster: Harness) -> None:
    """After a broker stops, its RF-1 partition shows "Leader: none" under
    --unavailable-partitions, and shrunken ISRs under --under-replicated-partitions."""
    h = embedded_cluster
    assert h.cluster is not None
    await h.topics("--create", "--topic", "solo", "--replica-assignment", "2", via=WIRE)
    await h.topics("--create", "--topic", "pair", "--replica-assignment", "2:0", via=WIRE)
    healthy = await h.topics("--describe", "--under-replicated-partitions", via=WIRE)
    assert healthy == Result(0, "", "")
    h.cluster.stop_broker(2)

    async def unavailable() -> Result:
        return await h.topics("--describe", "--unavailable-partitions", via=WIRE)

    report = await eventually(unavailable, until=lambda r: r.out.count("\n") == 1)
    assert report.lines == [line("solo", 0, "none", "2", "2")]

    async def under_replicated() -> Result:
        return await h.topics("--describe", "--under-replicated-partitions", via=WIRE)

    shrunk = await eventually(under_replicated, until=lambda r: "pair" in r.out)
    assert line("pair", 0, 0, "2,0", "0") in shrunk.lines
    store_view = await h.topics("--describe", "--unavailable-partitions", via=STORE)
    assert store_view.lines == report.lines  # leader -1 in ZooKeeper, the last ISR kept


async def test_min_isr_reports(embedded_cluster: Harness) -> None:
    """--at-min-isr-partitions and --under-min-isr-partitions compare the ISR with the
    topic's min.insync.replicas (only over the wire)."""
    h = embedded_cluster
    await h.topics(
        "--create", "--topic", "strict", "--replica-assignment", "0:1",
        "--config", "min.insync.replicas=2", via=WIRE,
    )  # fmt: skip
    await h.topics("--create", "--topic", "loose", "--replica-assignment", "1:2", via=WIRE)
    at_min = await h.topics("--describe", "--at-min-isr-partitions", via=WIRE)
    assert at_min.lines == [line("strict", 0, 0, "0,1", "0,1")]
    under = await h.topics("--describe", "--under-min-isr-partitions", via=WIRE)
    assert under == Result(0, "", "")


@hosted_fixture()
async def lagging_cluster(tmp_path: Path) -> AsyncIterator[Harness]:
    """3 brokers whose leaders drop a silent follower from the ISR after 1.5 s."""
    config = {"replica.lag.time.max.ms": "1500", "replica.fetch.wait.max.ms": "200"}
    async for harness in running_harness(tmp_path, None, config=config):
        yield harness


def produce_one(port: int, topic: str) -> None:
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "acks": "1"})
    producer.produce(topic, b"v", partition=0)
    assert producer.flush(20) == 0


@pytest.mark.slow
async def test_reports_follow_the_isr_with_a_broker_down_and_a_silent_follower(
    lagging_cluster: Harness,
) -> None:
    """The reports read the ISR the leaders keep (TopicCommand.PartitionDescription):
    with broker 1 down, "strict" (0,1; min.insync.replicas 2) is under-replicated and
    under its min ISR, "loose" (1,2) under-replicated and at its min ISR, and none is
    unavailable (both have live leaders); a follower that is alive but stops fetching
    while records come leaves the ISR by its leader's AlterIsr and is reported
    under-replicated too."""
    h = lagging_cluster
    assert h.cluster is not None
    await h.topics(
        "--create", "--topic", "strict", "--replica-assignment", "0:1",
        "--config", "min.insync.replicas=2", via=WIRE,
    )  # fmt: skip
    await h.topics("--create", "--topic", "loose", "--replica-assignment", "1:2", via=WIRE)
    await h.topics("--create", "--topic", "quiet", "--replica-assignment", "0:2", via=WIRE)
    for name in ("under-replicated", "under-min-isr", "unavailable"):
        healthy = await h.topics("--describe", f"--{name}-partitions", via=WIRE)
        assert healthy == Result(0, "", ""), name
    at_min = await h.topics("--describe", "--at-min-isr-partitions", via=WIRE)
    assert at_min.lines == [line("strict", 0, 0, "0,1", "0,1")]  # 2 in sync, 2 needed
    h.cluster.stop_broker(1)
    assert await h.cluster.wait_stopped(1, timeout=30)

    async def report(name: str) -> list[str]:
        return (await h.topics("--describe", f"--{name}-partitions", via=WIRE)).lines

    strict, loose = line("strict", 0, 0, "0,1", "0"), line("loose", 0, 2, "1,2", "2")
    await eventually(lambda: report("under-replicated"), until=lambda r: r == [loose, strict])
    assert await report("under-min-isr") == [strict]
    assert await report("at-min-isr") == [loose]
    assert await report("unavailable") == []

    assert h.cluster.network is not None
    h.cluster.network.add_rule(
        Drop(match=Match.where(src="broker-2", dst="broker-0", types=(FetchRequestData,)))
    )
    await anyio.to_thread.run_sync(produce_one, h.cluster.ports[0], "quiet")
    quiet = line("quiet", 0, 0, "0,2", "0")
    shrunk = await eventually(
        lambda: report("under-replicated"), until=lambda r: quiet in r, timeout=20
    )
    assert sorted(shrunk) == sorted([loose, strict, quiet])
    assert await report("unavailable") == []
