"""Real clients, in a few blocking lines, for the tests of the Python API and its pytest
plugin: kafka-python produces and consumes, confluent-kafka produces, consumes and says what
its metadata shows (each call a fresh Metadata request)."""

from __future__ import annotations

import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, KafkaProducer  # type: ignore[import-untyped]
from kafka import TopicPartition as KpTopicPartition

CLIENT_WAIT = 30.0  # seconds a client may take to produce or consume everything


def kafka_python_produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    """Send every value with acks=all and wait for each offset."""
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", request_timeout_ms=int(CLIENT_WAIT * 1000)
    )
    try:
        for future in [producer.send(topic, value=v) for v in values]:
            assert future.get(timeout=CLIENT_WAIT).offset >= 0
    finally:
        producer.close()


def kafka_python_consume(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """``count`` values read from the beginning of every partition of ``topic``."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    try:
        partitions = consumer.partitions_for_topic(topic) or set()
        assignment = [KpTopicPartition(topic, p) for p in sorted(partitions)]
        consumer.assign(assignment)
        consumer.seek_to_beginning(*assignment)
        values: list[bytes] = []
        deadline = time.monotonic() + CLIENT_WAIT
        while len(values) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(r.value for r in records)
        return values
    finally:
        consumer.close()


def confluent_produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    failures: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for value in values:
        producer.produce(
            topic,
            value=value,
            on_delivery=lambda error, _message: failures.append(error) if error else None,
        )
    assert producer.flush(CLIENT_WAIT) == 0
    assert failures == []


def confluent_consume(bootstrap: str, topic: str, partitions: int, count: int) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        values: list[bytes] = []
        deadline = time.monotonic() + CLIENT_WAIT
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue  # errors here are the group coordinator's, which kemu lacks
            value = message.value()
            assert value is not None
            values.append(value)
        return values
    finally:
        consumer.close()


def confluent_brokers(bootstrap: str) -> set[int]:
    """The brokers confluent-kafka's Metadata names."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return set(metadata.brokers)


def confluent_leaders(bootstrap: str, topic: str) -> dict[int, int]:
    """``{partition: leader}`` of ``topic`` as confluent-kafka's Metadata says."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return {p: m.leader for p, m in metadata.topics[topic].partitions.items()}
