"""Retention against ``kemu up`` with a real client (kafka-python): records produced with
CreateTime an hour old go at the first retention check, the log start offset moves, the
client's ListOffsets earliest follows, and consuming from the beginning starts there.

Topics have one replica (a follower appends whole fetches, so its segments need not be
the leader's). The cluster checks retention every half second from start-up
(``log.retention.check.interval.ms``, ``log.initial.task.delay.ms``); the test waits for
each condition with a deadline.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from kafka import KafkaConsumer, KafkaProducer  # type: ignore[import-untyped]
from kafka import TopicPartition as KpTopicPartition

from tests.support.kemu_commands import KemuUp, kemu
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.processes, pytest.mark.slow, pytest.mark.timeout(180)]

CONFIG = (
    "log.retention.check.interval.ms=500",
    "log.initial.task.delay.ms=0",
    "log.segment.delete.delay.ms=0",
)
WAIT = 30.0
HOUR_MS = 3_600_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KemuUp]:
    extra: list[str] = []
    for setting in CONFIG:
        extra += ["--config", setting]
    up = KemuUp(tmp_path_factory.mktemp("retention"), *extra)
    try:
        up.start()
        yield up
    finally:
        up.kill()


def new_topic(cluster: KemuUp, *configs: str, replicas: int = 1) -> str:
    name = f"ret-{uuid.uuid4().hex[:8]}"
    args = ["--config", "segment.bytes=100"]
    for setting in configs:
        args += ["--config", setting]
    created = kemu(
        "topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", name,
        "--partitions", "1", "--replication-factor", str(replicas), *args,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    return name


def produce(cluster: KemuUp, topic: str, timestamps: list[int]) -> None:
    """One batch per record (each sent alone): one segment each at segment.bytes=100."""
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", linger_ms=0)
    try:
        for i, ts in enumerate(timestamps):
            producer.send(topic, value=b"v%d" % i, timestamp_ms=ts).get(timeout=WAIT)
    finally:
        producer.close()


def log_files(cluster: KemuUp, topic: str) -> list[str]:
    logs = cluster.cluster_file.parent / "logs"
    return sorted(p.name for p in logs.glob(f"*/{topic}-0/*.log"))


def consume_from_beginning(cluster: KemuUp, topic: str, expect: int) -> list[tuple[int, bytes]]:
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap, enable_auto_commit=False, group_id=None,
        consumer_timeout_ms=2000,
    )  # fmt: skip
    tp = KpTopicPartition(topic, 0)
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning()
        rows: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + WAIT
        while len(rows) < expect and time.monotonic() < deadline:
            rows += [(m.offset, m.value) for m in consumer]
        return rows
    finally:
        consumer.close()


def earliest(cluster: KemuUp, topic: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id=None)
    try:
        tp = KpTopicPartition(topic, 0)
        return int(consumer.beginning_offsets([tp])[tp])
    finally:
        consumer.close()


def test_retention_ms_deletes_old_segments_and_a_consumer_starts_after_them(
    cluster: KemuUp,
) -> None:
    topic = new_topic(cluster, f"retention.ms={HOUR_MS // 2}")
    now_ms = int(time.time() * 1000)
    produce(cluster, topic, [now_ms - HOUR_MS] * 3 + [now_ms] * 2)
    assert wait_until(lambda: earliest(cluster, topic), lambda start: start == 3, WAIT) == 3
    files = wait_until(
        lambda: log_files(cluster, topic),
        lambda names: bool(names) and all(n >= f"{3:020d}.log" for n in names),
        WAIT,
    )
    assert files == [f"{3:020d}.log", f"{4:020d}.log"]  # the new ones stay
    assert consume_from_beginning(cluster, topic, 2) == [(3, b"v3"), (4, b"v4")]


def test_retention_bytes_keeps_the_newest_segments(cluster: KemuUp) -> None:
    topic = new_topic(cluster)
    now_ms = int(time.time() * 1000)
    produce(cluster, topic, [now_ms] * 4)
    logs = cluster.cluster_file.parent / "logs"
    size = next(logs.glob(f"*/{topic}-0/{3:020d}.log")).stat().st_size
    altered = kemu(
        "configs", "--bootstrap-server", cluster.bootstrap, "--entity-type", "topics",
        "--entity-name", topic, "--alter", "--add-config", f"retention.bytes={2 * size}",
    )  # fmt: skip
    assert altered.returncode == 0, altered.stderr
    assert wait_until(lambda: earliest(cluster, topic), lambda start: start == 2, WAIT) == 2
    assert consume_from_beginning(cluster, topic, 2) == [(2, b"v2"), (3, b"v3")]


def test_a_dynamic_broker_default_retention_applies_to_topics_without_their_own(
    cluster: KemuUp,
) -> None:
    """``log.retention.ms`` altered as the cluster-wide broker default reaches the logs of
    a topic with no ``retention.ms`` of its own; the old segments' files are removed."""
    topic = new_topic(cluster)
    now_ms = int(time.time() * 1000)
    produce(cluster, topic, [now_ms - 2 * HOUR_MS] * 2 + [now_ms])
    assert earliest(cluster, topic) == 0
    altered = kemu(
        "configs", "--bootstrap-server", cluster.bootstrap, "--entity-type", "brokers",
        "--entity-default", "--alter", "--add-config", f"log.retention.ms={HOUR_MS}",
    )  # fmt: skip
    assert altered.returncode == 0, altered.stderr
    try:
        assert wait_until(lambda: earliest(cluster, topic), lambda start: start == 2, WAIT) == 2
        logs = cluster.cluster_file.parent / "logs"
        wait_until(
            lambda: sorted(p.name for p in logs.glob(f"*/{topic}-0/*.deleted")),
            lambda names: names == [],
            WAIT,
        )
        assert log_files(cluster, topic) == [f"{2:020d}.log"]
    finally:
        kemu(
            "configs", "--bootstrap-server", cluster.bootstrap, "--entity-type", "brokers",
            "--entity-default", "--alter", "--delete-config", "log.retention.ms",
        )  # fmt: skip


def replica_log_files(cluster: KemuUp, topic: str) -> list[list[str]]:
    """Each replica's segment files (one list per broker's log dir holding the topic)."""
    logs = cluster.cluster_file.parent / "logs"
    return [sorted(p.name for p in d.glob("*.log")) for d in sorted(logs.glob(f"*/{topic}-0"))]


def test_a_topic_s_own_retention_reaches_its_followers_logs(cluster: KemuUp) -> None:
    """A topic keeping records forever (``retention.ms=-1``; the broker's 168 hours would
    delete them) keeps them on every replica: each broker reads a topic's configs when
    LeaderAndIsr makes it a replica, as ``Partition.createLogIfNotExists`` does, not at
    its first Produce, which followers never serve. A witness topic without the override,
    with the same records, loses them on every replica: retention did run there."""
    kept = new_topic(cluster, "retention.ms=-1", replicas=3)
    witness = new_topic(cluster, replicas=3)
    week_old = int(time.time() * 1000) - 8 * 24 * HOUR_MS
    for topic in (kept, witness):
        produce(cluster, topic, [week_old] * 4)
    emptied = wait_until(
        lambda: replica_log_files(cluster, witness),
        lambda replicas: (
            len(replicas) == 3 and all(names == [f"{4:020d}.log"] for names in replicas)
        ),
        WAIT,
    )
    assert emptied == [[f"{4:020d}.log"]] * 3
    for names in replica_log_files(cluster, kept):
        assert names[0] == f"{0:020d}.log", names
