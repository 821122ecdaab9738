"""A replicated compacted topic: each replica's log cleaner compacts its own log, as
Kafka's do, and a follower fetches on across what its leader cleaned away.

A topic of one partition on three brokers (``segment.bytes=100``: one batch per
segment; ``min.cleanable.dirty.ratio=0.01``; a cleaner round every 100 ms) gets keyed
records from a real producer (confluent-kafka). One follower stops; the keys are written
twice more (acks=1) and the leader's cleaner removes the batches the stopped follower
would fetch next. The follower restarts and fetches from its log end, an offset no
longer in the leader's log: the leader answers the next batch there (``Log.read``), the
follower appends it at its own offsets (``Log.appendAsFollower`` takes a gap) and
catches up. Until its own cleaner runs, it holds records its leader cleaned away; at
every offset both hold they hold the same record, which is what the chaos invariant
``follower_logs_match`` checks of a compacted topic (docs/chaos.md); once its cleaner
ran, its log holds the leader's records.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import NewTopic as CkNewTopic  # type: ignore[attr-defined]

from actors.broker.broker import broker_ref
from actors.invariants.data import replica_log_violations
from actors.zk import kafka_zk
from cluster.kafka.records import batch_records, read_batches
from protocol.control import TopicPartition
from protocol.errors import ErrorCode
from protocol.ids import TopicName
from protocol.kafka_data import FetchPartition, FetchRequestData, FetchResponseData, FetchTopic
from tests.support.creation import Harness, running_cluster
from tests.support.hosting import hosted_fixture
from tests.support.waiting import eventually, in_threads

pytestmark = [pytest.mark.slow, pytest.mark.asyncio, pytest.mark.timeout(240)]

WAIT = 90.0
KEYS = 5
CONFIG = {"log.cleaner.backoff.ms": "100", "group.initial.rebalance.delay.ms": "0"}
in_thread = in_threads(WAIT)

Row = tuple[int, bytes | None, bytes | None]  # offset, key, value


@hosted_fixture()
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    async with running_cluster(tmp_path / "logs", config=CONFIG) as h:
        yield h


def bootstrap(h: Harness, without: int | None = None) -> str:
    ports = sorted(h.cluster.ports.items())
    return ",".join(f"127.0.0.1:{port}" for b, port in ports if b != without)


def create(servers: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": servers})
    configs = {
        "cleanup.policy": "compact",
        "segment.bytes": "100",
        "min.cleanable.dirty.ratio": "0.01",
    }
    futures = admin.create_topics([CkNewTopic(topic, 1, 3, config=configs)], operation_timeout=30)
    futures[topic].result(timeout=60)


def produce(servers: str, topic: str, pairs: list[tuple[bytes, bytes]], acks: str) -> None:
    """Each record alone in its batch (and so its segment)."""
    producer = Producer({"bootstrap.servers": servers, "acks": acks, "linger.ms": 0})
    for key, value in pairs:
        producer.produce(topic, key=key, value=value, partition=0)
        assert producer.flush(60) == 0


def version(n: int) -> list[tuple[bytes, bytes]]:
    return [(f"k{i}".encode(), f"v{n}".encode()) for i in range(KEYS)]


async def replica_log(h: Harness, broker: int, topic: str) -> tuple[list[Row], int]:
    """Every record of ``broker``'s replica, leader or follower (a debugging fetch,
    replica id -2: its whole log), and its log end."""
    rows: list[Row] = []
    offset = 0
    while True:
        reply = await h.client.ask(
            broker_ref(broker),
            FetchRequestData(
                max_wait_ms=0,
                min_bytes=0,
                replica_id=-2,
                topics=(
                    FetchTopic(
                        topic=TopicName(topic),
                        partitions=(
                            FetchPartition(
                                partition=0, fetch_offset=offset, partition_max_bytes=1 << 20
                            ),
                        ),
                    ),
                ),
            ),
            timeout=30,
        )
        assert isinstance(reply, FetchResponseData)
        data = reply.responses[0].partitions[0]
        assert data.error_code is ErrorCode.NONE, data.error_code
        records = data.records or b""
        before = offset
        for header in read_batches(records):
            rows += [(r.offset, r.key, r.value) for r in batch_records(records, header)]
            offset = header.base_offset + header.last_offset_delta + 1
        if offset == before:
            return rows, offset


async def leadership(h: Harness, topic: str) -> tuple[int, tuple[int, ...]]:
    state = await kafka_zk.get_partition_state(h.probe, TopicPartition(TopicName(topic), 0))
    assert state is not None
    return int(state.state.leader), tuple(int(r) for r in state.state.isr)


def invariant_fields(
    topic: str, leader: int, isr: tuple[int, ...], logs: dict[int, tuple[list[Row], int]]
) -> dict[str, object]:
    """A ``replica_logs_read`` event's fields over these logs, a record's identity its
    key and value."""
    return {
        "topic": topic,
        "partition": 0,
        "leader": leader,
        "isr": list(isr),
        "replicas": [0, 1, 2],
        "caught_up": True,
        "logs": [
            {
                "broker": broker,
                "log_end_offset": end,
                "records": [[o, f"{k!r}={v!r}"] for o, k, v in rows],
            }
            for broker, (rows, end) in sorted(logs.items())
        ],
    }


async def test_a_follower_fetches_on_across_its_leaders_cleaning(harness: Harness) -> None:
    topic = f"cmp-{uuid.uuid4().hex[:8]}"
    await in_thread(create, bootstrap(harness), topic)
    await in_thread(produce, bootstrap(harness), topic, version(0), "all")  # offsets 0-4
    leader, isr = await eventually(
        lambda: leadership(harness, topic), until=lambda s: len(s[1]) == 3, timeout=WAIT
    )
    follower = next(b for b in isr if b != leader)
    assert (await replica_log(harness, follower, topic))[1] == KEYS

    harness.cluster.stop_broker(follower)
    assert await harness.cluster.wait_stopped(follower, timeout=30)
    servers = bootstrap(harness, without=follower)
    # offsets 5-9 and 10-14, then one more (the leader's active segment, never cleaned)
    await in_thread(produce, servers, topic, version(1) + version(2) + [(b"end", b"x")], "1")
    kept: list[Row] = [(10 + i, k, v) for i, (k, v) in enumerate(version(2))]
    kept.append((15, b"end", b"x"))

    # the leader's cleaner removes offsets 0-9: the stopped follower's next fetch offset,
    # 5, is gone from the leader's log
    leaders_log = await eventually(
        lambda: replica_log(harness, leader, topic), until=lambda log: log[0] == kept, timeout=WAIT
    )
    assert leaders_log == (kept, 16)

    await harness.cluster.start_broker(follower)

    async def caught_up() -> tuple[tuple[list[Row], int], tuple[int, ...]]:
        return await replica_log(harness, follower, topic), (await leadership(harness, topic))[1]

    (rows, end), isr = await eventually(
        caught_up, until=lambda got: got[0][1] == 16 and follower in got[1], timeout=WAIT
    )
    # it neither truncated nor failed: it fetched at 5 and got the batch at 10. It holds
    # nothing of 5-9, the leader's records from 10 on; below 5 what it had, or what its
    # own cleaner left of it
    assert not [
        e
        for e in harness.sink.events
        if e.type in ("replica_truncated", "replica_fetch_failed")
        and e.fields.get("topic") == topic
    ]
    assert [r for r in rows if r[0] >= KEYS] == kept
    assert all(r in [(i, k, v) for i, (k, v) in enumerate(version(0))] for r in rows if r[0] < KEYS)
    fields = invariant_fields(topic, leader, isr, {leader: leaders_log, follower: (rows, end)})
    assert replica_log_violations({**fields, "compacted": True}) == []

    # its own cleaner removes its superseded records in turn: the leader's log
    cleaned = await eventually(
        lambda: replica_log(harness, follower, topic),
        until=lambda log: log[0] == kept,
        timeout=WAIT,
    )
    assert cleaned == (kept, 16)
