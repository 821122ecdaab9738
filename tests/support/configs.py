"""Helpers of the config tests (``tests/wire/test_*configs.py``) over a running cluster's
``Harness``: what the store holds for a broker's dynamic configs, a topic created by
kafka-python, a partition's state in the store, an acks=all Produce."""

from __future__ import annotations

import json
from typing import Any

from kafka.admin import KafkaAdminClient, NewTopic  # type: ignore[import-untyped]

from actors.broker.broker import broker_ref
from protocol import zkdata
from protocol.errors import ErrorCode, NoNodeError
from protocol.ids import TopicName
from protocol.kafka_data import (
    ProducePartitionData,
    ProduceRequestData,
    ProduceResponseData,
    ProduceTopicData,
)
from tests.support.creation import Harness
from tests.support.record_batches import client_batch

__all__ = ["create_topic", "partition_state", "produce_all", "stored"]


async def stored(h: Harness, entity: str) -> dict[str, Any] | None:
    """``/config/brokers/<entity>`` as JSON (``entity``: a broker id or ``<default>``),
    or None when the node does not exist."""
    try:
        data, _ = await h.probe.get(f"/config/brokers/{entity}")
    except NoNodeError:
        return None
    parsed: dict[str, Any] = json.loads(data)
    return parsed


def create_topic(h: Harness, name: str) -> None:
    """One partition on brokers 0 (leader) and 1, created by kafka-python."""
    client = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{h.cluster.ports[0]}")
    try:
        client.create_topics([NewTopic(name, -1, -1, replica_assignments={0: [0, 1]})])
    finally:
        client.close()


async def partition_state(h: Harness, topic: str) -> zkdata.LeaderIsrAndControllerEpoch:
    """Partition 0's leader, ISR and epochs as the store has them."""
    data, _ = await h.probe.get(zkdata.partition_state_path(TopicName(topic), 0))
    return zkdata.LeaderIsrAndControllerEpoch.decode(data)


async def produce_all(h: Harness, topic: str) -> ErrorCode:
    """An acks=all Produce of one record to partition 0, on broker 0 (its leader)."""
    request = ProduceRequestData(
        acks=-1,
        timeout_ms=10_000,
        topic_data=(
            ProduceTopicData(
                name=TopicName(topic),
                partition_data=(ProducePartitionData(index=0, records=client_batch([b"v"])),),
            ),
        ),
    )
    reply = await h.client.ask(broker_ref(0), request, timeout=30)
    assert isinstance(reply, ProduceResponseData)
    return reply.responses[0].partition_responses[0].error_code
