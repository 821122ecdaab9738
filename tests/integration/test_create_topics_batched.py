"""The broker writes a CreateTopics request's topics all at once (``kafka_zk.write_topics``)
and keeps Kafka's per-topic outcomes: a topic created by someone else between the check
and the write answers TOPIC_ALREADY_EXISTS while the rest are created; a topic checked
earlier in the request counts as existing for a later one; ``write_topics`` reports one
outcome per topic, sets a config that is already there and makes missing parents.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import anyio
import pytest

from actors.broker.broker import broker_ref
from actors.zk import kafka_zk
from cluster.store.embedded import EmbeddedStore
from protocol import zkdata
from protocol.errors import ErrorCode, NodeExistsError
from protocol.ids import BrokerId, TopicName
from protocol.kafka_api import (
    CreatableTopic,
    CreateTopicResult,
    CreateTopicsRequestData,
    CreateTopicsResponseData,
)
from protocol.store import CreateOp, StoreOp
from tests.support.creation import Harness, running_cluster, wait_until_complete
from tests.support.hooked_store import HookedSession
from tests.support.hosting import hosted_fixture

pytestmark = pytest.mark.asyncio


@hosted_fixture()
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    async with running_cluster(tmp_path / "logs") as h:
        yield h


def topic(name: str) -> CreatableTopic:
    return CreatableTopic(name=TopicName(name), num_partitions=2, replication_factor=2)


async def create(h: Harness, names: Sequence[str]) -> dict[str, CreateTopicResult]:
    controller = await h.cluster.controller_id()
    request = CreateTopicsRequestData(topics=tuple(topic(n) for n in names), timeout_ms=20_000)
    reply = await h.client.ask(broker_ref(controller), request, timeout=30)
    assert isinstance(reply, CreateTopicsResponseData)
    assert [r.name for r in reply.topics] == list(names)
    return {r.name: r for r in reply.topics}


async def test_a_topic_created_between_check_and_write_is_topic_already_exists(
    harness: Harness,
) -> None:
    """A topic whose assignment znode appears after the broker checked the request (its
    write then fails NODEEXISTS) answers TOPIC_ALREADY_EXISTS with Kafka's message; its
    neighbours in the request are created."""
    h = harness
    raced_config = zkdata.topic_config_path(TopicName("raced"))
    held = anyio.Event()
    writer: list[HookedSession] = []

    def hold_after_raced_config(session: HookedSession, ops: Sequence[StoreOp]) -> None:
        if any(isinstance(op, CreateOp) and op.path == raced_config for op in ops):
            h.store.multi_hooks.remove(hold_after_raced_config)
            session.pause()
            writer.append(session)
            held.set()

    h.store.multi_hooks.append(hold_after_raced_config)
    outcome: dict[str, dict[str, CreateTopicResult]] = {}

    async def request() -> None:
        outcome["results"] = await create(h, ["before", "raced", "after"])

    async with anyio.create_task_group() as tg:
        tg.start_soon(request)
        with anyio.fail_after(10):
            await held.wait()
        other = zkdata.TopicAssignment(
            partitions={0: zkdata.ReplicaAssignment(replicas=(BrokerId(0),))}
        )
        await h.probe.create(zkdata.topic_path(TopicName("raced")), other.encode())
        writer[0].resume()
    results = outcome["results"]
    assert {n: r.error_code for n, r in results.items()} == {
        "before": ErrorCode.NONE,
        "raced": ErrorCode.TOPIC_ALREADY_EXISTS,
        "after": ErrorCode.NONE,
    }
    assert results["raced"].error_message == "Topic 'raced' already exists."
    assert (results["raced"].num_partitions, results["raced"].configs) == (-1, None)
    data, _ = await h.probe.get(zkdata.topic_path(TopicName("raced")))
    assert zkdata.TopicAssignment.decode(data) == other  # the other writer's, untouched
    traced = {e.fields["topic"] for e in h.sink.of("event", "topic_written")}
    assert traced == {"before", "after"}
    await wait_until_complete(h, [0, 1, 2])


async def test_a_topic_earlier_in_the_request_counts_as_existing(harness: Harness) -> None:
    """``a.b`` then ``a_b`` in one request: the second collides with the first, which is
    created, exactly as when the topics were written one after the other."""
    h = harness
    results = await create(h, ["a.b", "a_b"])
    assert results["a.b"].error_code is ErrorCode.NONE
    assert results["a_b"].error_code is ErrorCode.INVALID_TOPIC_EXCEPTION
    assert results["a_b"].error_message == "Topic 'a_b' collides with existing topics: a.b"
    assert await h.probe.children(zkdata.TOPICS_PATH) == ("a.b",)


async def test_write_topics_reports_one_outcome_per_topic() -> None:
    """An existing assignment is NodeExistsError (its config is still rewritten, as
    Kafka's createOrSet does), an existing config is overwritten, missing parents are
    made; the others are written."""
    store = EmbeddedStore()
    try:
        session = await store.open_session(name="t")
        taken = TopicName("taken")
        await session.create(zkdata.topic_path(taken), b"{}", make_parents=True)
        await session.create(
            zkdata.topic_config_path(TopicName("old-config")),
            zkdata.EntityConfig(config={"retention.ms": "1"}).encode(),
            make_parents=True,
        )
        writes = [
            kafka_zk.TopicWrite(TopicName("new"), {0: [1, 2]}, {}),
            kafka_zk.TopicWrite(taken, {0: [1]}, {"cleanup.policy": "compact"}),
            kafka_zk.TopicWrite(TopicName("old-config"), {0: [2], 1: [1]}, {"retention.ms": "2"}),
        ]
        outcomes = await kafka_zk.write_topics(session, writes)
        assert outcomes[0] is None
        assert outcomes[2] is None
        assert isinstance(outcomes[1], NodeExistsError)
        assert await session.children(zkdata.TOPICS_PATH) == ("new", "old-config", "taken")
        for name, config in [
            ("new", {}),
            ("taken", {"cleanup.policy": "compact"}),
            ("old-config", {"retention.ms": "2"}),
        ]:
            assert await kafka_zk.get_topic_config(session, TopicName(name)) == config
        assigned = await kafka_zk.get_assignments(session, [TopicName("old-config")])
        assert {p: a.replicas for p, a in assigned[TopicName("old-config")].items()} == {
            0: (2,),
            1: (1,),
        }
        data, _ = await session.get(zkdata.topic_path(taken))
        assert data == b"{}"
    finally:
        await store.aclose()


async def test_write_topics_makes_missing_parents() -> None:
    """On a store without ``/config/topics`` and ``/brokers/topics`` (their creates fail
    NONODE), each topic is written alone with its parents made."""
    store = EmbeddedStore()
    try:
        session = await store.open_session(name="t")
        writes = [
            kafka_zk.TopicWrite(TopicName(name), {0: [1]}, {"retention.ms": "5"})
            for name in ("x", "y")
        ]
        assert await kafka_zk.write_topics(session, writes) == [None, None]
        assert await session.children(zkdata.TOPICS_PATH) == ("x", "y")
        assert await kafka_zk.get_topic_config(session, TopicName("y")) == {"retention.ms": "5"}
    finally:
        await store.aclose()
