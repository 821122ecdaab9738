"""Controller failover in the middle of a topic creation, on the embedded store and a real
ZooKeeper, with real brokers (log managers, metadata caches) in one process.

The old controller is stopped at an exact point of its TopicChange: right after it
created the k-th partition state znode, before the rest and before any LeaderAndIsr went
out (a hook on the store runs in the controller's own task, see
tests/support/hooked_store.py). Whatever stops it (its broker crashes, its store session
expires, or ``/controller`` is deleted and another broker takes over), the next
controller completes the creation: every partition gets a state znode whose leader is a
live broker in the ISR, every replica its log directory, every broker the same metadata;
and the caller of CreateTopics gets the answer Kafka gives.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from actors.broker.broker import broker_node_id, broker_ref
from actors.zk import kafka_zk
from cluster.kafka.client import AdminClientConfig, KafkaAdminClient
from protocol import zkdata
from protocol.control import TopicPartition
from protocol.errors import ErrorCode
from protocol.ids import TopicName
from protocol.kafka_api import CreateTopicResult, CreateTopicsRequestData, CreateTopicsResponseData
from tests.support.creation import (
    STATE_PATH,
    Harness,
    creatable,
    log_dirs,
    running_cluster,
    spread,
    state_znodes,
    stop_after_states,
    wait_for_new_controller,
    wait_until_complete,
    write_topics_as_zookeeper_path,
)
from tests.support.hosting import hosted_fixture
from tests.support.zookeeper import STORES

BROKERS = (0, 1, 2)
STOP_AFTER = 5  # state znodes the old controller writes before it is stopped


@hosted_fixture(params=STORES)
async def harness(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Harness]:
    """Three brokers on a hooked embedded store or real ZooKeeper."""
    server = request.getfixturevalue("zookeeper_server") if request.param == "zookeeper" else None
    async with running_cluster(tmp_path / "logs", server) as harness:
        yield harness


# ------------------------------------------------------------------ the controller crashes


@pytest.mark.asyncio
@pytest.mark.parametrize("via", ["zookeeper-path", "create-topics"])
async def test_a_crashed_controller_s_half_done_creation_is_completed_by_the_next_one(
    harness: Harness, via: str
) -> None:
    """Three topics x 12 partitions: the controller's broker crashes right after the 5th
    state znode, before any LeaderAndIsr; once its session expires another broker becomes
    controller and brings every partition online (the five with their state as written,
    the rest from New), and the restarted broker gets its replicas' log directories. A
    CreateTopics caller (a Kafka client talking to the controller, as clients do) sees
    the connection drop, retries at the new controller and is told which topics exist."""
    h = harness
    h.topics = {f"crash-{i}": spread(i, 12) for i in range(3)}
    old = await h.cluster.controller_id()
    status = await h.cluster.status(old)
    assert status is not None
    point = stop_after_states(h, old, "crash", list(h.topics), STOP_AFTER)
    answers: list[tuple[CreateTopicResult, ...]] = []

    async def create_with_a_kafka_client() -> None:
        bootstrap = [("127.0.0.1", h.cluster.ports[b]) for b in BROKERS]
        config = AdminClientConfig(request_timeout_ms=20_000, default_api_timeout_ms=40_000)
        async with KafkaAdminClient(bootstrap, config) as client:
            answers.append(
                await client.create_topics([creatable(t, a) for t, a in h.topics.items()])
            )

    async with anyio.create_task_group() as tg:
        if via == "zookeeper-path":
            await write_topics_as_zookeeper_path(h, h.topics)
        else:
            tg.start_soon(create_with_a_kafka_client)
        with anyio.fail_after(20):
            await point.reached.wait()
        # What the old controller left behind: some state znodes, no LeaderAndIsr.
        assert await state_znodes(h) == sorted(point.states)
        assert len(point.states) == STOP_AFTER
        assert log_dirs(h) == []
        # A dead client's session expires on the server's own time; here, now.
        await h.cluster.crash_broker(old)
        await h.store.expire_session(status.session_id)
        survivors = [b for b in BROKERS if b != old]
        new = await wait_for_new_controller(h, old, survivors)
        await wait_until_complete(h, survivors)

    if via == "create-topics":
        # The retry reached the new controller: the topics written before the crash
        # exist already; any not written yet were created by the retry.
        assert len(answers) == 1
        codes = {r.name: r.error_code for r in answers[0]}
        assert set(codes) == set(h.topics)
        assert set(codes.values()) <= {ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS}, codes
    assert new in survivors
    assert (await h.probe.get(zkdata.CONTROLLER_EPOCH_PATH))[0] == b"2"
    # The five partitions keep the state the old controller wrote (leader epoch 0,
    # controller epoch 1) unless the crashed broker is one of their replicas: the new
    # controller's replica start-up took it out of the ISR (leader epoch +1), and if it
    # led, the election then moved leadership (+1 again), as Kafka's controller does.
    # The other partitions were initialised by the new controller.
    for path in point.states:
        match = STATE_PATH.match(path)
        assert match is not None
        replicas = h.topics[match.group(1)][int(match.group(2))]
        state = await kafka_zk.get_partition_state(
            h.probe, TopicPartition(TopicName(match.group(1)), int(match.group(2)))
        )
        assert state is not None
        written = state.state
        live = [r for r in replicas if r != old]
        if old not in replicas:
            expected = (replicas[0], 0, tuple(replicas), 1)
        elif replicas[0] != old:
            expected = (replicas[0], 1, tuple(live), 2)
        else:
            expected = (live[0], 2, tuple(live), 2)
        assert (written.leader, written.leader_epoch, written.isr, written.controller_epoch) == (
            expected
        ), path
    await h.cluster.start_broker(old)
    await h.cluster.wait_ready()
    await wait_until_complete(h, list(BROKERS))


# ------------------------------------------------------------------ the session expires


@pytest.mark.asyncio
async def test_a_controller_whose_session_expires_mid_creation_still_answers_its_caller(
    harness: Harness,
) -> None:
    """CreateTopics of 30 partitions at the controller's broker; after 5 state znodes the
    controller's session expires. Its remaining writes fail, it resigns, a controller is
    elected (epoch 2) and finishes the creation; the broker, alive all along, answers its
    caller with success once its metadata cache has every leader."""
    h = harness
    h.topics = {"expire": spread(0, 30)}
    old = await h.cluster.controller_id()
    status = await h.cluster.status(old)
    assert status is not None
    point = stop_after_states(h, old, "pause", list(h.topics), STOP_AFTER)
    request = CreateTopicsRequestData(
        topics=tuple(creatable(t, a) for t, a in h.topics.items()), timeout_ms=20_000
    )
    replies: list[object] = []

    async def caller() -> None:
        replies.append(await h.client.ask(broker_ref(old), request, timeout=30))

    async with anyio.create_task_group() as tg:
        tg.start_soon(caller)
        with anyio.fail_after(20):
            await point.reached.wait()
        assert await state_znodes(h) == sorted(point.states)
        assert log_dirs(h) == []
        await h.store.expire_session(status.session_id)
        paused = h.store.session_of(status.session_id)
        paused.resume()
        await h.sink.wait_for(
            lambda e: e.node == broker_node_id(old) and e.type == "controller_resigned", 20
        )
        await wait_until_complete(h, list(BROKERS))

    assert len(replies) == 1
    reply = replies[0]
    assert isinstance(reply, CreateTopicsResponseData)
    assert [(r.name, r.error_code) for r in reply.topics] == [("expire", ErrorCode.NONE)]
    assert (await h.probe.get(zkdata.CONTROLLER_EPOCH_PATH))[0] == b"2"
    # The old controller's failed writes were refused by the store, not retried by it.
    failed = [
        e
        for e in h.sink.of("error", "state_change_failed")
        if e.node == broker_node_id(old) and e.fields["controller_epoch"] == 1
    ]
    assert failed
    assert all("SessionExpired" in str(e.fields["detail"]) for e in failed)


# ------------------------------------------------------------------ another controller


async def state_contents(h: Harness) -> dict[str, tuple[bytes, int]]:
    """Each existing state znode of the harness's topics: its data and zkVersion."""
    contents = {}
    for path in await state_znodes(h):
        data, stat = await h.probe.get(path)
        contents[path] = (data, stat.version)
    return contents


@pytest.mark.asyncio
async def test_a_controller_moved_mid_creation_fails_its_fenced_write_and_resigns(
    harness: Harness,
) -> None:
    """testControllerMoveOnTopicCreation with a real successor: the controller is held
    after 5 state znodes while ``/controller`` is deleted; another broker wins the
    election (epoch 2) and completes the creation. When the old controller goes on, its
    next state write fails the epoch fence: it logs the move, resigns and writes nothing
    more; its broker answers the CreateTopics caller with success."""
    h = harness
    h.topics = {"moved": spread(1, 30)}
    old = await h.cluster.controller_id()
    status = await h.cluster.status(old)
    assert status is not None
    point = stop_after_states(h, old, "pause", list(h.topics), STOP_AFTER)
    request = CreateTopicsRequestData(
        topics=tuple(creatable(t, a) for t, a in h.topics.items()), timeout_ms=20_000
    )
    replies: list[object] = []

    async def caller() -> None:
        replies.append(await h.client.ask(broker_ref(old), request, timeout=30))

    async with anyio.create_task_group() as tg:
        tg.start_soon(caller)
        with anyio.fail_after(20):
            await point.reached.wait()
        await h.probe.delete(zkdata.CONTROLLER_PATH)
        # The held controller cannot run its own Reelect: another broker wins epoch 2.
        others = [b for b in BROKERS if b != old]
        elected = await h.sink.wait_for(
            lambda e: e.type == "controller_ready" and e.fields.get("epoch") == 2, 20
        )
        assert elected.node in {broker_node_id(b) for b in others}
        await wait_until_complete(h, list(BROKERS))
        before = await state_contents(h)
        h.store.session_of(status.session_id).resume()
        await h.sink.wait_for(
            lambda e: e.node == broker_node_id(old) and e.type == "controller_resigned", 20
        )

    moved = [e for e in h.sink.of("event", "controller_moved") if e.node == broker_node_id(old)]
    assert [e.fields["event"] for e in moved] == ["TopicChange"]
    assert await state_contents(h) == before
    await wait_until_complete(h, list(BROKERS))
    assert len(replies) == 1
    reply = replies[0]
    assert isinstance(reply, CreateTopicsResponseData)
    assert [(r.name, r.error_code) for r in reply.topics] == [("moved", ErrorCode.NONE)]
