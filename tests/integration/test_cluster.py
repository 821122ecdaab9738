"""A whole cluster in one process: election, registration, creation through real Kafka
clients, znodes as Kafka writes them, log directories, and controller failover; on the
embedded store and a real ZooKeeper, over in-process queues and TCP between brokers."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from actors.broker.broker import broker_ref
from actors.zk.store import MetadataStore
from cluster.launch.cluster import Cluster, ClusterSpec
from protocol import zkdata
from protocol.ids import TopicName
from protocol.kafka_api import (
    CreatableTopic,
    CreateTopicsRequestData,
    CreateTopicsResponseData,
    PartitionAssignment,
)
from tests.support.hosting import hosted_fixture
from tests.support.waiting import eventually
from tests.support.zookeeper import ZooKeeperServer

BACKENDS = [
    ("embedded", "inproc"),
    ("embedded", "tcp"),
    pytest.param(("zookeeper", "inproc"), marks=pytest.mark.zookeeper, id="zookeeper-inproc"),
]


@hosted_fixture(params=BACKENDS, ids=lambda p: "-".join(p) if isinstance(p, tuple) else p)
async def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Cluster]:
    """A running 3-broker cluster on the backend and transport of the parameter."""
    store_kind, transport = request.param
    zookeeper = None
    if store_kind == "zookeeper":
        server: ZooKeeperServer = request.getfixturevalue("zookeeper_server")
        zookeeper = f"{server.hosts}/kemu-{uuid.uuid4().hex}"
    spec = ClusterSpec(
        brokers=3,
        base_port=0,
        log_dir=tmp_path / "logs",
        zookeeper=zookeeper,
        transport=transport,
        config={"zookeeper.session.timeout.ms": "2000"},
    )
    async with anyio.create_task_group() as tg:
        running: Cluster = await tg.start(Cluster(spec).run)
        yield running
        tg.cancel_scope.cancel()


async def _session(cluster: Cluster) -> MetadataStore:
    assert cluster.store is not None
    return cluster.store


async def _read(cluster: Cluster, path: str) -> bytes:
    store = await _session(cluster)
    session = await store.open_session(timeout=10.0, name="probe")
    try:
        data, _ = await session.get(path)
        return data
    finally:
        await session.close()
        session.events.close()


async def _create(cluster: Cluster, via: int, topic: CreatableTopic) -> None:
    reply = await cluster.nodes[via].ask(
        broker_ref(via), CreateTopicsRequestData(topics=(topic,), timeout_ms=10_000), timeout=15
    )
    assert isinstance(reply, CreateTopicsResponseData)
    assert reply.topics[0].error_code == 0, reply


@pytest.mark.asyncio
async def test_brokers_register_and_the_first_controller_gets_epoch_one(cluster: Cluster) -> None:
    """Every broker registers a v5 znode, one controller is elected with epoch 1, and
    /controller_epoch holds "1"."""
    controller = await cluster.controller_id()
    assert controller in (0, 1, 2)
    assert await _read(cluster, zkdata.CONTROLLER_EPOCH_PATH) == b"1"
    registration = json.loads(await _read(cluster, zkdata.CONTROLLER_PATH))
    assert registration["brokerid"] == controller
    for broker_id in range(3):
        data = json.loads(await _read(cluster, f"/brokers/ids/{broker_id}"))
        assert data["version"] == 5
        assert data["endpoints"] == [f"PLAINTEXT://127.0.0.1:{cluster.ports[broker_id]}"]


@pytest.mark.asyncio
async def test_create_topics_writes_kafka_znodes_elects_leaders_and_makes_log_dirs(
    cluster: Cluster, tmp_path: Path
) -> None:
    """CreateTopics (sent to a non-controller broker, forwarded) writes the v2 assignment
    and the config znode, every partition gets leader = first live replica, epoch 0,
    ISR = replicas, and each replica has its log directory."""
    assignment = (
        PartitionAssignment(partition=0, broker_ids=(1, 2)),  # type: ignore[arg-type]
        PartitionAssignment(partition=1, broker_ids=(2, 0)),  # type: ignore[arg-type]
    )
    controller = await cluster.controller_id()
    non_controller = next(b for b in range(3) if b != controller)
    await _create(
        cluster,
        non_controller,
        CreatableTopic(
            name=TopicName("manual"),
            num_partitions=-1,
            replication_factor=-1,
            assignments=assignment,
        ),
    )
    assert await _read(cluster, "/brokers/topics/manual") == (
        b'{"version":2,"partitions":{"0":[1,2],"1":[2,0]},"adding_replicas":{},"removing_replicas":{}}'
    )
    assert await _read(cluster, "/config/topics/manual") == b'{"version":1,"config":{}}'
    state = json.loads(await _read(cluster, "/brokers/topics/manual/partitions/1/state"))
    assert (state["leader"], state["leader_epoch"], state["isr"]) == (2, 0, [2, 0])

    def dirs() -> set[str]:
        return {f"{p.parent.name}/{p.name}" for p in (tmp_path / "logs").glob("broker-*/manual-*")}

    async def probe() -> set[str]:
        return dirs()

    expected = {"broker-1/manual-0", "broker-2/manual-0", "broker-2/manual-1", "broker-0/manual-1"}
    assert await eventually(probe, until=lambda d: d == expected)
    assert (tmp_path / "logs/broker-1/manual-0/00000000000000000000.log").is_file()


@pytest.mark.slow  # waits out the crashed controller's session
@pytest.mark.asyncio
async def test_a_new_controller_takes_over_after_the_controller_crashes(cluster: Cluster) -> None:
    """Crashing the controller's broker elects another with epoch 2 once its session
    expires (2 s here); the new controller serves creations and every live broker learns
    of it."""
    old = await cluster.controller_id()
    await _create(
        cluster,
        old,
        CreatableTopic(name=TopicName("before"), num_partitions=3, replication_factor=2),
    )
    await cluster.crash_broker(old)
    survivors = [b for b in range(3) if b != old]

    async def controller() -> int:
        ids = {getattr(await cluster.status(b), "controller_id", -1) for b in survivors}
        return next(iter(ids)) if len(ids) == 1 else -1

    new = await eventually(controller, until=lambda c: c in survivors, timeout=30)
    assert await _read(cluster, zkdata.CONTROLLER_EPOCH_PATH) == b"2"
    await _create(
        cluster,
        survivors[0],
        CreatableTopic(name=TopicName("after"), num_partitions=2, replication_factor=2),
    )
    assert new != old


@hosted_fixture()
async def small_cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    """One embedded, in-process 3-broker cluster (real Kafka listeners on free ports)."""
    spec = ClusterSpec(brokers=3, base_port=0, log_dir=tmp_path / "logs")
    async with anyio.create_task_group() as tg:
        running: Cluster = await tg.start(Cluster(spec).run)
        yield running
        tg.cancel_scope.cancel()


@pytest.mark.asyncio
async def test_real_kafka_clients_create_alter_and_describe_topics(small_cluster: Cluster) -> None:
    """confluent-kafka, kafka-python and aiokafka create topics and add partitions through
    any broker (aiokafka's validate_only grows nothing), aiokafka describes the cluster, and
    kcat -L sees the leaders, replicas and ISRs the controller chose."""
    cluster = small_cluster
    bootstrap = f"127.0.0.1:{cluster.ports[1]}"

    def with_sync_clients() -> None:
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
        from kafka.admin import KafkaAdminClient, NewPartitions  # type: ignore[import-untyped]

        confluent = AdminClient({"bootstrap.servers": bootstrap})
        for future in confluent.create_topics([NewTopic("ck", 4, 3)], request_timeout=10).values():
            assert future.result(timeout=20) is None
        kp = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20_000)
        try:
            kp.create_topics([kafka_new_topic("kp")])
            kp.create_partitions({"ck": NewPartitions(6)})
            described = {
                t.get("name", t.get("topic")): len(t["partitions"])
                for t in kp.describe_topics(["ck", "kp"])
            }
            assert described == {"ck": 6, "kp": 2}
        finally:
            kp.close()

    with anyio.fail_after(60):
        await anyio.to_thread.run_sync(with_sync_clients)

    from aiokafka.admin import AIOKafkaAdminClient  # type: ignore[import-untyped]
    from aiokafka.admin import NewPartitions as AioNewPartitions
    from aiokafka.admin import NewTopic as AioNewTopic

    aio = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await aio.start()
    try:
        await aio.create_topics([AioNewTopic("aio", num_partitions=1, replication_factor=2)])
        grown = await aio.create_partitions({"aio": AioNewPartitions(3)})
        described = await aio.describe_cluster()
        refused = await aio.create_partitions(
            {"aio": AioNewPartitions(5)}, validate_only=True
        )  # checked, not done
    finally:
        await aio.close()
    assert [tuple(error) for error in grown.topic_errors] == [("aio", 0, None)]
    assert [tuple(error) for error in refused.topic_errors] == [("aio", 0, None)]
    assert described["controller_id"] == await cluster.controller_id()
    assert sorted(b["node_id"] for b in described["brokers"]) == [0, 1, 2]

    async def kcat() -> dict[str, object]:
        out = await anyio.run_process(["kcat", "-L", "-J", "-b", bootstrap])
        listing: dict[str, object] = json.loads(out.stdout)
        return listing

    def complete(listing: dict[str, object]) -> bool:
        topics = {t["topic"]: t for t in listing["topics"]}  # type: ignore[attr-defined]
        return (
            {"ck", "kp", "aio"} <= set(topics)
            and len(topics["ck"]["partitions"]) == 6
            and len(topics["aio"]["partitions"]) == 3
        )

    listing = await eventually(kcat, until=complete, timeout=20)
    topics = {t["topic"]: t for t in listing["topics"]}  # type: ignore[attr-defined]
    assert listing["controllerid"] == await cluster.controller_id()
    for partition in topics["ck"]["partitions"]:
        assert partition["leader"] == partition["replicas"][0]["id"]
        assert sorted(r["id"] for r in partition["replicas"]) == [0, 1, 2]
        assert sorted(i["id"] for i in partition["isrs"]) == [0, 1, 2]


def kafka_new_topic(name: str) -> object:
    from kafka.admin import NewTopic

    return NewTopic(name, num_partitions=2, replication_factor=2)
