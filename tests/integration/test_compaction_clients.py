"""Log compaction against ``kemu up`` with a real client (kafka-python): a compacted
topic with one batch per segment (``segment.bytes=100``) is produced to with repeated keys
and a tombstone, plain and gzip-compressed; the cleaner (every 200 ms here,
``log.cleaner.backoff.ms``) rewrites the segments below the active one; a consumer from
the beginning then gets each key's latest record at its original offset, the tombstone as
a null value, and the active segment's record; ``kemu dump-log`` reads the cleaned
segment; ``cleaner-offset-checkpoint`` holds the clean point in Kafka's format.

The topic has one replica: a follower appends whole fetches, so its segments need not be
the leader's. The test waits for each condition with a deadline.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer  # type: ignore[import-untyped]
from kafka import TopicPartition as KpTopicPartition

from tests.support.kemu_commands import KemuUp, kemu
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.processes, pytest.mark.slow, pytest.mark.timeout(180)]

WAIT = 30.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KemuUp]:
    up = KemuUp(
        tmp_path_factory.mktemp("compaction"),
        "--config", "log.cleaner.backoff.ms=200",
        "--config", "log.segment.delete.delay.ms=0",
    )  # fmt: skip
    try:
        up.start()
        yield up
    finally:
        up.kill()


def new_topic(cluster: KemuUp) -> str:
    name = f"cmp-{uuid.uuid4().hex[:8]}"
    created = kemu(
        "topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", name,
        "--partitions", "1", "--replication-factor", "1",
        "--config", "cleanup.policy=compact", "--config", "segment.bytes=100",
        "--config", "min.cleanable.dirty.ratio=0.01",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    return name


def produce(
    cluster: KemuUp, topic: str, pairs: list[tuple[bytes, bytes | None]], compression: str | None
) -> list[int]:
    """Each record sent alone (one batch, one segment each); their offsets."""
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap, acks="all", linger_ms=0,
        compression_type=compression,
    )  # fmt: skip
    try:
        return [
            producer.send(topic, key=key, value=value).get(timeout=WAIT).offset
            for key, value in pairs
        ]
    finally:
        producer.close()


def consume_all(cluster: KemuUp, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap, enable_auto_commit=False, group_id=None,
        consumer_timeout_ms=1000,
    )  # fmt: skip
    tp = KpTopicPartition(topic, 0)
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning()
        return [(m.offset, m.key, m.value) for m in consumer]
    finally:
        consumer.close()


def partition_dir(cluster: KemuUp, topic: str) -> Path:
    logs = cluster.cluster_file.parent / "logs"
    return next(logs.glob(f"*/{topic}-0"))


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_a_consumer_reads_each_keys_latest_record_after_the_cleaner_ran(
    cluster: KemuUp, compression: str | None
) -> None:
    topic = new_topic(cluster)
    pairs: list[tuple[bytes, bytes | None]] = [
        (b"user-1", b"v1"), (b"user-2", b"v1"), (b"user-1", b"v2"), (b"user-3", b"v1"),
        (b"user-2", None), (b"user-1", b"v3"), (b"user-3", b"v2"), (b"user-4", b"v1"),
    ]  # fmt: skip
    offsets = produce(cluster, topic, pairs, compression)
    assert offsets == list(range(8))
    # offset 7 is in the active segment: the map covers 0-6
    expected = [
        (4, b"user-2", None),
        (5, b"user-1", b"v3"),
        (6, b"user-3", b"v2"),
        (7, b"user-4", b"v1"),
    ]
    got = wait_until(lambda: consume_all(cluster, topic), lambda rows: rows == expected, WAIT)
    assert got == expected
    directory = partition_dir(cluster, topic)
    checkpoint = wait_until(
        lambda: (directory.parent / "cleaner-offset-checkpoint").read_text(),
        lambda text: f"{topic} 0 7\n" in text,
        WAIT,
    )
    lines = checkpoint.splitlines()
    assert lines[0] == "0"
    assert int(lines[1]) == len(lines) - 2
    # the segment now holding offset 4, read by Kafka's tool: offsets 0-3 are gone
    bases = sorted(int(p.stem) for p in directory.glob("*.log"))
    holding = max(b for b in bases if b <= 4)
    dumped = kemu("dump-log", "--files", str(directory / f"{holding:020d}.log"), "--print-data-log")
    assert dumped.returncode == 0, dumped.stderr
    assert "| offset: 4 " in dumped.stdout
    assert "key: user-2" in dumped.stdout
    assert "| offset: 0 " not in dumped.stdout
    # produced again: the next round cleans the new dirty section
    assert produce(cluster, topic, [(b"user-4", b"v2"), (b"user-5", b"v1")], compression) == [8, 9]
    expected_after = [*expected[:3], (8, b"user-4", b"v2"), (9, b"user-5", b"v1")]
    got = wait_until(lambda: consume_all(cluster, topic), lambda rows: rows == expected_after, WAIT)
    assert got == expected_after
