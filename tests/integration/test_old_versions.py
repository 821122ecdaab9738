"""Clients of Kafka's oldest data-plane versions against ``kemu up``: kafka-python forced
to a 0.8.2 / 0.9 / 0.10 broker (``api_version``) asks ListOffsets v0, and what it reads
agrees with what a modern client wrote.

One three-broker cluster (every broker in one process) serves the module; each test makes
topics of its own (one partition, three replicas).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from kafka import KafkaConsumer  # type: ignore[import-untyped]
from kafka import TopicPartition as KpTopicPartition

from tests.support.kemu_commands import KemuUp, kemu

pytestmark = [pytest.mark.processes, pytest.mark.slow, pytest.mark.timeout(180)]

CLIENT_WAIT = 30.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KemuUp]:
    up = KemuUp(tmp_path_factory.mktemp("old"))
    try:
        up.start()
        yield up
    finally:
        up.kill()


def new_topic(cluster: KemuUp, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    created = kemu(
        "topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", name,
        "--partitions", "1", "--replication-factor", "3",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    return name


def produce_modern(cluster: KemuUp, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    """confluent-kafka (Produce v7+, magic-v2 batches), acks=all."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    failures: list[object] = []
    for key, value in records:
        producer.produce(topic, key=key, value=value, on_delivery=lambda e, _m: failures.append(e))
    assert producer.flush(CLIENT_WAIT) == 0
    assert failures == [None] * len(records)


def old_consumer(cluster: KemuUp, api_version: tuple[int, ...]) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=cluster.bootstrap, api_version=api_version, group_id=None,
        enable_auto_commit=False, consumer_timeout_ms=3000,
        request_timeout_ms=int(CLIENT_WAIT * 1000),
    )  # fmt: skip


def test_list_offsets_v0_answers_the_earliest_and_latest_offsets(cluster: KemuUp) -> None:
    """kafka-python as a 0.9 client (ListOffsets v0, ``max_num_offsets`` 1) reads the log
    start and the high watermark of records a modern producer wrote."""
    topic = new_topic(cluster, "lo0")
    produce_modern(cluster, topic, [(b"k%d" % i, b"v%d" % i) for i in range(7)])
    consumer = old_consumer(cluster, (0, 9))
    try:
        tp = KpTopicPartition(topic, 0)
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 7}
    finally:
        consumer.close()
