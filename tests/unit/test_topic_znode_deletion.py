"""``kafka_zk.delete_topics_fenced``: the end of many topics' deletions in one pipelined
batch. Each topic's znodes go in one guarded multi, in the order Kafka's
``completeDeleteTopic`` deletes them (its marker last); a topic whose znodes are not those
the controller knows is deleted znode by znode instead; a stale controller epoch deletes
nothing. Run on the embedded store, whose trace shows every request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest
import pytest_asyncio

from actors.runtime.tracer import MemorySink, Tracer
from actors.zk import kafka_zk
from actors.zk.kafka_zk import ControllerMovedError
from actors.zk.store import StoreSession
from cluster.store.embedded import EmbeddedStore
from protocol import zkdata
from protocol.ids import TopicName

pytestmark = pytest.mark.asyncio


async def make_topic(session: StoreSession, topic: str, partitions: Sequence[int]) -> None:
    """The znodes of a created topic whose deletion is under way."""
    name = TopicName(topic)
    await session.create(zkdata.topic_path(name), b"{}", make_parents=True)
    await session.create(zkdata.topic_config_path(name), b"{}", make_parents=True)
    await session.create(zkdata.topic_partitions_path(name))
    for p in partitions:
        await session.create(zkdata.partition_path(name, p))
        await session.create(zkdata.partition_state_path(name, p), b"{}")
    await session.create(zkdata.delete_topic_path(name), make_parents=True)


async def topic_znodes(session: StoreSession, topic: str) -> list[str]:
    name = TopicName(topic)
    paths = [zkdata.topic_path(name), zkdata.topic_config_path(name)]
    paths.append(zkdata.delete_topic_path(name))
    return [p for p in paths if await session.exists(p) is not None]


@pytest_asyncio.fixture
async def store() -> AsyncIterator[tuple[StoreSession, MemorySink, int]]:
    """A controller's session on a traced embedded store, and its epoch's zkVersion."""
    sink = MemorySink()
    tracer = Tracer()
    tracer.add_sink(sink)
    embedded = EmbeddedStore(tracer=tracer)
    try:
        session = await embedded.open_session(name="controller")
        _, epoch_zk_version = await kafka_zk.read_or_create_controller_epoch(session)
        yield session, sink, epoch_zk_version
    finally:
        await embedded.aclose()


async def test_each_topic_goes_in_one_multi_its_marker_last(
    store: tuple[StoreSession, MemorySink, int],
) -> None:
    session, sink, version = store
    await make_topic(session, "a", range(12))
    await make_topic(session, "b", [0])
    before = len(sink.events)
    await kafka_zk.delete_topics_fenced(
        session, version, {TopicName("a"): range(12), TopicName("b"): [0]}
    )
    writes = [e for e in sink.events[before:] if e.type in ("multi", "delete")]
    # One guarded multi per topic, not one per znode (2 x 12 + 4 for "a").
    assert [(e.type, e.fields["result"]) for e in writes] == [("multi", "ok"), ("multi", "ok")]
    assert await topic_znodes(session, "a") == []
    assert await topic_znodes(session, "b") == []
    assert await session.children(zkdata.TOPICS_PATH) == ()
    assert await session.children(zkdata.DELETE_TOPICS_PATH) == ()


async def test_a_topic_with_znodes_the_controller_does_not_know_is_deleted_one_by_one(
    store: tuple[StoreSession, MemorySink, int],
) -> None:
    """Partition 3 exists in the store but not in what the controller passes: the topic's
    multi fails and changes nothing, then the topic is deleted znode by znode (children
    read from the store), its marker last; the other topic's multi is unaffected."""
    session, sink, version = store
    await make_topic(session, "odd", [0, 1, 3])
    await make_topic(session, "even", [0, 1])
    before = len(sink.events)
    await kafka_zk.delete_topics_fenced(
        session, version, {TopicName("odd"): [0, 1], TopicName("even"): [0, 1]}
    )
    assert await topic_znodes(session, "odd") == []
    assert await topic_znodes(session, "even") == []
    multis = [e for e in sink.events[before:] if e.type == "multi"]
    assert multis[0].fields["result"] != "ok"  # odd's batch: NotEmpty, nothing deleted
    assert multis[1].fields["result"] == "ok"  # even's
    # Then odd alone, one fenced multi (guard + delete) per znode: 3 x 2 + 4.
    assert [e.fields["result"] for e in multis[2:]] == ["ok"] * 10


async def test_a_stale_controller_deletes_nothing(
    store: tuple[StoreSession, MemorySink, int],
) -> None:
    session, _, version = store
    await make_topic(session, "t", [0, 1])
    with pytest.raises(ControllerMovedError):
        await kafka_zk.delete_topics_fenced(session, version + 1, {TopicName("t"): [0, 1]})
    assert len(await topic_znodes(session, "t")) == 3
