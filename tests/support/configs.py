"""Helpers of the config tests (``tests/wire/test_*configs.py``) over a running cluster's
``Harness``: what the store holds for a broker's dynamic configs, a topic created by
kafka-python or with given replicas by kemu's admin client, a partition's state in the
store, an acks=all Produce, and a partition left
leaderless with only an out-of-sync replica alive (for unclean leader election)."""

from __future__ import annotations

import json
from typing import Any

import anyio
from kafka.admin import KafkaAdminClient, NewTopic  # type: ignore[import-untyped]

from actors.broker.broker import broker_ref
from cluster.kafka.client import KafkaAdminClient as WireAdminClient
from protocol import zkdata
from protocol.errors import ErrorCode, NoNodeError
from protocol.ids import TopicName
from protocol.kafka_data import (
    ProducePartitionData,
    ProducePartitionResponse,
    ProduceRequestData,
    ProduceResponseData,
    ProduceTopicData,
)
from tests.support.creation import Harness, creatable
from tests.support.record_batches import client_batch
from tests.support.waiting import eventually

__all__ = [
    "create_assigned",
    "create_topic",
    "only_out_of_sync_replica_left",
    "partition_state",
    "produce_all",
    "produce_record",
    "stored",
]

WAIT = 20.0  # seconds a broker may take to stop or to become the controller


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


async def create_assigned(h: Harness, name: str, partitions: int, replicas: list[int]) -> None:
    """``partitions`` partitions on ``replicas`` each (the first is the preferred leader),
    created over the wire through broker 0 (answered once they have leaders)."""
    async with WireAdminClient(f"127.0.0.1:{h.cluster.ports[0]}") as client:
        results = await client.create_topics(
            [creatable(name, {p: replicas for p in range(partitions)})]
        )
    assert [r.error_code for r in results] == [ErrorCode.NONE]


async def produce_record(
    h: Harness, topic: str, partition: int, value: bytes, *, leader: int = 0, timeout: float = 30
) -> ProducePartitionResponse:
    """An acks=all Produce of one record to ``partition``, on broker ``leader``."""
    request = ProduceRequestData(
        acks=-1,
        timeout_ms=10_000,
        topic_data=(
            ProduceTopicData(
                name=TopicName(topic),
                partition_data=(
                    ProducePartitionData(index=partition, records=client_batch([value])),
                ),
            ),
        ),
    )
    reply = await h.client.ask(broker_ref(leader), request, timeout=timeout)
    assert isinstance(reply, ProduceResponseData)
    return reply.responses[0].partition_responses[0]


async def produce_all(h: Harness, topic: str) -> ErrorCode:
    """An acks=all Produce of one record to partition 0, on broker 0 (its leader)."""
    return (await produce_record(h, topic, 0, b"v")).error_code


async def only_out_of_sync_replica_left(h: Harness, topic: str) -> None:
    """The setup of an unclean leader election: ``topic`` (created here, one partition on
    brokers 0 and 1) has its ISR shrink to broker 0 while broker 1 is stopped (an acks=all
    Produce succeeds on the leader alone), then broker 0 crashes and broker 1 comes back
    as the only broker and the controller once broker 0's session expired. Asserts the
    partition is left with no leader and the ISR ``(0,)``: broker 1 is out of sync,
    electable only uncleanly. (A crash, not a stop: the last broker's controlled shutdown
    cannot move its leaders anywhere, so a stop spends Kafka's three retries with 5 s
    backoffs, ``controlled.shutdown.max.retries``, before it goes, to the same state.)"""
    await anyio.to_thread.run_sync(create_topic, h, topic)
    h.cluster.stop_broker(1)
    assert await h.cluster.wait_stopped(1, timeout=WAIT)
    await eventually(lambda: produce_all(h, topic), until=lambda c: c is ErrorCode.NONE)
    await h.cluster.crash_broker(0)
    assert await h.cluster.wait_stopped(0, timeout=WAIT)
    await h.cluster.start_broker(1)
    await h.sink.wait_for(
        lambda e: e.type == "controller_ready" and e.node == "broker-1", timeout=WAIT
    )
    state = await partition_state(h, topic)
    assert (state.leader, state.isr) == (-1, (0,))
