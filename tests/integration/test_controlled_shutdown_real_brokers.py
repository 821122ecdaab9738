"""Controlled shutdown with real brokers (``KafkaServer.controlledShutdown``): a graceful
stop moves the broker's leaderships before its registration goes, configured by the broker's
``controlled.shutdown.*``; on the embedded store and a real ZooKeeper."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from actors.runtime.tracer import MemorySink, Tracer
from actors.zk import kafka_zk
from cluster.launch.cluster import Cluster, ClusterSpec
from protocol.control import TopicPartition
from protocol.ids import TopicName
from tests.support.hosting import hosted_fixture
from tests.support.waiting import eventually
from tests.support.zookeeper import STORES, ZooKeeperServer

pytestmark = pytest.mark.asyncio


async def _cluster(
    request: pytest.FixtureRequest, tmp_path: Path, config: dict[str, str]
) -> AsyncIterator[tuple[Cluster, MemorySink]]:
    zookeeper = None
    if request.param == "zookeeper":
        server: ZooKeeperServer = request.getfixturevalue("zookeeper_server")
        zookeeper = f"{server.hosts}/kemu-{uuid.uuid4().hex}"
    sink = MemorySink()
    tracer = Tracer()
    tracer.add_sink(sink)
    spec = ClusterSpec(
        brokers=3,
        base_port=0,
        log_dir=tmp_path / "logs",
        zookeeper=zookeeper,
        config={"zookeeper.session.timeout.ms": "6000", **config},
    )
    async with anyio.create_task_group() as tg:
        cluster: Cluster = await tg.start(Cluster(spec, tracer=tracer).run)
        try:
            yield cluster, sink
        finally:
            tg.cancel_scope.cancel()


@hosted_fixture(params=STORES)
async def cluster(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[Cluster, MemorySink]]:
    async for pair in _cluster(request, tmp_path, {"auto.leader.rebalance.enable": "false"}):
        yield pair


@hosted_fixture(params=STORES)
async def impatient_cluster(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[Cluster, MemorySink]]:
    config = {
        "controlled.shutdown.max.retries": "2",
        "controlled.shutdown.retry.backoff.ms": "300",
    }
    async for pair in _cluster(request, tmp_path, config):
        yield pair


async def _state(cluster: Cluster, partition: int = 0) -> tuple[int, int, tuple[int, ...]]:
    assert cluster.store is not None
    session = await cluster.store.open_session(timeout=10.0, name="probe")
    try:
        state = await kafka_zk.get_partition_state(
            session, TopicPartition(TopicName("t"), partition)
        )
    finally:
        await session.close()
        session.events.close()
    if state is None:
        return -1, -1, ()
    return state.state.leader, state.state.leader_epoch, state.state.isr


async def _create(cluster: Cluster, assignment: dict[int, list[int]]) -> None:
    assert cluster.store is not None
    session = await cluster.store.open_session(timeout=10.0, name="admin")
    try:
        await kafka_zk.write_topic(session, TopicName("t"), assignment, {})
    finally:
        await session.close()
        session.events.close()
    await eventually(lambda: _state(cluster), until=lambda s: s[0] == assignment[0][0])


async def test_a_graceful_stop_hands_leadership_over_first(
    cluster: tuple[Cluster, MemorySink],
) -> None:
    """The stopping broker asks the controller, which moves its leadership (epoch 1, the
    ISR without it) while it is still registered; it then stops and closes its session."""
    running, sink = cluster
    await _create(running, {0: [1, 0, 2]})
    controller = f"broker-{await running.controller_id()}"
    running.stop_broker(1)
    assert await running.wait_stopped(1, timeout=30)
    events = [
        (e.type, e.node)
        for e in sink.of("event")
        if e.type in ("controlled_shutdown", "controlled_shutdown_succeeded", "node_stopped")
    ]
    assert events == [
        ("controlled_shutdown", controller),
        ("controlled_shutdown_succeeded", "broker-1"),
        ("node_stopped", "broker-1"),
    ]
    assert await _state(running) == (0, 1, (0, 2))


async def test_a_shutdown_that_cannot_move_leadership_gives_up_after_the_retries(
    impatient_cluster: tuple[Cluster, MemorySink],
) -> None:
    """With its only follower gone the broker keeps its leadership: it tries
    ``controlled.shutdown.max.retries`` times, ``controlled.shutdown.retry.backoff.ms``
    apart, then stops anyway (unclean shutdown)."""
    running, sink = impatient_cluster
    await _create(running, {0: [1, 2]})
    running.stop_broker(2)
    assert await running.wait_stopped(2, timeout=30)
    await eventually(lambda: _state(running), until=lambda s: s[2] == (1,))
    started = anyio.current_time()
    running.stop_broker(1)
    assert await running.wait_stopped(1, timeout=30)
    assert anyio.current_time() - started >= 0.6  # two backoffs of 0.3 s
    attempts = [
        (e.fields["attempt"], e.fields["remaining"])
        for e in sink.of("event", "controlled_shutdown_attempt")
        if e.node == "broker-1"
    ]
    assert attempts == [(1, ["t-0"]), (2, ["t-0"])]
    assert [e.node for e in sink.of("event", "controlled_shutdown_failed")] == ["broker-1"]
    await eventually(lambda: _state(running), until=lambda s: s[0] == -1)
