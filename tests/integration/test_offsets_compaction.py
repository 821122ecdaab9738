"""``__consumer_offsets`` compacted, then loaded by the next coordinator: a group commits
the same partitions' offsets over and over (each commit supersedes the one before, key by
key), every replica's log cleaner compacts the group's partition of ``__consumer_offsets``
(``offsets.topic.segment.bytes`` small, ``log.cleaner.min.cleanable.ratio`` near 0, a
round every 100 ms), then the coordinator's broker stops: the partition's new leader
loads the cleaned log (``GroupMetadataManager.loadGroupsAndOffsets``) and answers the
last commits, and a real consumer of the group (confluent-kafka, ``subscribe``) resumes
from them.

The last commits of the consumed topic are followed by commits of another topic, so that
they sit in cleaned segments, not only in the active one.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import NewTopic as CkNewTopic  # type: ignore[attr-defined]

from actors.broker.broker import broker_ref
from actors.group.records import partition_for
from protocol.errors import ErrorCode
from protocol.group import FindCoordinatorRequestData, FindCoordinatorResponseData
from protocol.trace import TraceEvent
from tests.support.creation import Harness, running_cluster
from tests.support.hosting import hosted_fixture
from tests.support.waiting import eventually, in_threads

pytestmark = [pytest.mark.slow, pytest.mark.asyncio, pytest.mark.timeout(240)]

WAIT = 90.0
PARTITIONS = 3
PER_PARTITION = 12
ROUNDS = 30
FINAL = {0: 5, 1: 7, 2: 9}
CONFIG = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.segment.bytes": "1024",
    "log.cleaner.min.cleanable.ratio": "0.01",
    "log.cleaner.backoff.ms": "100",
}
in_thread = in_threads(WAIT)


@hosted_fixture()
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    async with running_cluster(tmp_path / "logs", config=CONFIG) as h:
        yield h


def bootstrap(h: Harness) -> str:
    return ",".join(f"127.0.0.1:{port}" for _, port in sorted(h.cluster.ports.items()))


def create_and_fill(servers: str, topics: list[str]) -> None:
    """Each topic: three partitions on all three brokers, PER_PARTITION records each."""
    admin = AdminClient({"bootstrap.servers": servers})
    futures = admin.create_topics(
        [CkNewTopic(t, PARTITIONS, 3) for t in topics], operation_timeout=30
    )
    for topic in topics:
        futures[topic].result(timeout=60)
    producer = Producer({"bootstrap.servers": servers, "acks": "all"})
    for topic in topics:
        for p in range(PARTITIONS):
            for i in range(PER_PARTITION):
                producer.produce(topic, value=f"{p}-{i}".encode(), partition=p)
    assert producer.flush(60) == 0


def commit_over_and_over(servers: str, group: str, topic: str, other: str) -> None:
    """ROUNDS commits of every partition of ``topic`` (a consumer with assigned partitions:
    generation -1, as Kafka's simple consumers commit), then FINAL, then ROUNDS commits
    of ``other``'s partitions, all in the group's ``__consumer_offsets`` partition."""
    consumer = Consumer(
        {"bootstrap.servers": servers, "group.id": group, "enable.auto.commit": False}
    )
    try:
        for rounds, name, last in ((ROUNDS, topic, FINAL), (ROUNDS, other, None)):
            for i in range(rounds):
                offsets = [TopicPartition(name, p, (i + p) % PER_PARTITION) for p in range(3)]
                consumer.commit(offsets=offsets, asynchronous=False)
            if last is not None:
                final = [TopicPartition(name, p, o) for p, o in last.items()]
                consumer.commit(offsets=final, asynchronous=False)
    finally:
        consumer.close()


def committed(servers: str, group: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": servers, "group.id": group})
    try:
        parts = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        return {tp.partition: tp.offset for tp in consumer.committed(parts, timeout=30)}
    finally:
        consumer.close()


def resume(servers: str, group: str, topic: str) -> dict[int, int]:
    """A member of the group (``subscribe``): the first offset it reads of each partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    first: dict[int, int] = {}
    try:
        while len(first) < PARTITIONS:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            partition, offset = msg.partition(), msg.offset()
            assert partition is not None
            assert offset is not None
            first.setdefault(partition, offset)
    finally:
        consumer.close()
    return first


async def coordinator(h: Harness, group: str, asked: int) -> int:
    async def find() -> FindCoordinatorResponseData:
        reply = await h.client.ask(broker_ref(asked), FindCoordinatorRequestData(key=group))
        assert isinstance(reply, FindCoordinatorResponseData)
        return reply

    found = await eventually(find, until=lambda r: r.error_code is ErrorCode.NONE, timeout=60)
    return found.node_id


def cleans(h: Harness, partition: int) -> list[TraceEvent]:
    return [
        e
        for e in h.sink.events
        if e.kind == "log_dir"
        and e.type == "clean"
        and e.fields.get("topic") == "__consumer_offsets"
        and e.fields.get("partition") == partition
        and e.fields.get("result") == "ok"
    ]


async def test_compacted_offsets_are_loaded_by_the_next_coordinator(harness: Harness) -> None:
    servers = bootstrap(harness)
    group = f"g-{uuid.uuid4().hex[:8]}"
    topic, other = f"resumed-{uuid.uuid4().hex[:8]}", f"other-{uuid.uuid4().hex[:8]}"
    partition = partition_for(group, 50)
    await in_thread(create_and_fill, servers, [topic, other])
    await in_thread(commit_over_and_over, servers, group, topic, other)
    assert await in_thread(committed, servers, group, topic) == FINAL

    # Every replica's cleaner compacts its own copy of the partition, past the last
    # commits of ``topic`` (made before ROUNDS commits of ``other``).
    def compacted(events: list[TraceEvent]) -> set[str]:
        return {
            e.node
            for e in events
            if e.fields["end_offset"] > (ROUNDS + 1) * PARTITIONS
            and e.fields["records_retained"] < e.fields["records_read"]
        }

    nodes = {f"broker-{b}" for b in range(3)}
    await eventually(
        lambda: _now(compacted(cleans(harness, partition))),
        until=lambda seen: seen == nodes,
        timeout=WAIT,
    )

    node = await coordinator(harness, group, 0)
    harness.cluster.stop_broker(node)
    assert await harness.cluster.wait_stopped(node, timeout=30)
    successor = await coordinator(harness, group, (node + 1) % 3)
    assert successor != node
    live = ",".join(
        f"127.0.0.1:{port}" for b, port in sorted(harness.cluster.ports.items()) if b != node
    )
    loaded = await eventually(
        lambda: in_thread(committed, live, group, topic), until=lambda c: c == FINAL, timeout=WAIT
    )
    assert loaded == FINAL
    assert await in_thread(committed, live, group, other) == {
        p: (ROUNDS - 1 + p) % PER_PARTITION for p in range(PARTITIONS)
    }
    assert await in_thread(resume, live, group, topic) == FINAL


async def _now(value: set[str]) -> set[str]:
    return value
