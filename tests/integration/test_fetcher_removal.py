"""StopReplica and the replica fetchers, through real brokers (in-process cluster, embedded
store, virtual clock). Kafka's ``ReplicaManager.stopReplicas`` calls
``removeFetcherForPartitions`` before it deletes the logs, and that call waits for the
fetcher's partition-map lock, which the fetcher holds for all its local log work: no
fetcher ever reaches a log StopReplica deleted. Here the broker waits for the fetchers'
answer the same way, and since a fetcher leaves its mailbox free while its requests to the
leader are out, two brokers whose fetchers fetch from each other never wait on each other."""

from __future__ import annotations

from pathlib import Path

import anyio

from actors.broker.broker import broker_ref
from actors.runtime.actor import Node
from actors.runtime.clock import VirtualClock
from actors.runtime.tracer import MemorySink
from actors.zk import kafka_zk
from cluster.bench.scale import bulk_create_request
from cluster.launch.cluster import Cluster
from protocol import zkdata
from protocol.errors import ErrorCode
from protocol.ids import TopicName
from protocol.kafka_api import (
    CreateTopicsResponseData,
    DeleteTopicsRequestData,
    DeleteTopicsResponseData,
)
from protocol.kafka_data import (
    ProducePartitionData,
    ProduceRequestData,
    ProduceResponseData,
    ProduceTopicData,
)
from tests.support.record_batches import client_batch
from tests.support.virtual_cluster import Body, run_with_client

FAILED_FETCH = "replica_fetch_failed"


def run(tmp_path: Path, brokers: int, body: Body) -> None:
    """``body`` against a cluster of ``brokers`` brokers that remove deleted logs at once."""
    config = {"log.segment.delete.delay.ms": "0", "log.initial.task.delay.ms": "0"}
    run_with_client(tmp_path, body, brokers=brokers, config=config)


async def delete_all(
    cluster: Cluster, client: Node, clock: VirtualClock, topics: list[str], within: float
) -> None:
    """Delete ``topics`` with one DeleteTopics and wait until no topic znode is left, for
    at most ``within`` virtual seconds."""
    controller = await cluster.controller_id()
    names = tuple(TopicName(t) for t in topics)
    reply = await client.ask(
        broker_ref(controller), DeleteTopicsRequestData(topics=names, timeout_ms=60_000), timeout=70
    )
    assert isinstance(reply, DeleteTopicsResponseData)
    assert {t.error_code for t in reply.topics} == {ErrorCode.NONE}
    assert cluster.store is not None
    session = await cluster.store.open_session(name="probe")
    try:
        with anyio.fail_after(within):
            while await session.children(zkdata.TOPICS_PATH):
                await clock.sleep(0.1)
    finally:
        await session.close()


def failed_fetches(sink: MemorySink) -> list[str]:
    return [
        f"{e.node} {e.fields.get('topic')}-{e.fields.get('partition')}: {e.fields.get('reason')}"
        for e in sink.events
        if e.type == FAILED_FETCH
    ]


def test_a_bulk_deletion_right_after_creation_fails_no_fetch(tmp_path: Path) -> None:
    """Topics deleted as soon as CreateTopics answered, while every follower's fetcher is
    in its first rounds over the new partitions: StopReplica waits for the fetchers to let
    go of them before their logs go, so no fetcher asks for a deleted log (before, several
    of partitions were marked failed with UNKNOWN_TOPIC_OR_PARTITION)."""

    async def body(cluster: Cluster, client: Node, clock: VirtualClock, sink: MemorySink) -> None:
        controller = await cluster.controller_id()
        created = await client.ask(
            broker_ref(controller), bulk_create_request("bulk", 12, 6, 3, 60), timeout=70
        )
        assert isinstance(created, CreateTopicsResponseData)
        assert {t.error_code for t in created.topics} == {ErrorCode.NONE}
        await delete_all(cluster, client, clock, [f"bulk-{i}" for i in range(12)], within=60)
        assert failed_fetches(sink) == []

    run(tmp_path, 3, body)


def test_two_brokers_fetching_from_each_other_both_stop_their_replicas(
    tmp_path: Path,
) -> None:
    """Broker 0 leads ``a`` and follows ``b``, broker 1 the other way round, records
    flowing both ways; both topics deleted at once, so each broker handles its
    StopReplicas (and waits for its fetcher) while its fetcher's Fetch to the other is
    out. Neither waits on the other: the deletion ends well within
    replica.socket.timeout.ms (30 s, the bound of a mutual wait), no fetch failed."""

    async def body(cluster: Cluster, client: Node, clock: VirtualClock, sink: MemorySink) -> None:
        assert cluster.store is not None
        admin = await cluster.store.open_session(name="admin")
        await kafka_zk.write_topic(admin, TopicName("a"), {p: [0, 1] for p in range(4)}, {})
        await kafka_zk.write_topic(admin, TopicName("b"), {p: [1, 0] for p in range(4)}, {})
        await admin.close()

        async def produce(topic: str, leader: int, value: bytes) -> bool:
            request = ProduceRequestData(
                acks=1,
                timeout_ms=5_000,
                topic_data=(
                    ProduceTopicData(
                        name=TopicName(topic),
                        partition_data=tuple(
                            ProducePartitionData(index=p, records=client_batch([value]))
                            for p in range(4)
                        ),
                    ),
                ),
            )
            reply = await client.ask(broker_ref(leader), request, timeout=10)
            assert isinstance(reply, ProduceResponseData)
            return all(
                r.error_code is ErrorCode.NONE
                for t in reply.responses
                for r in t.partition_responses
            )

        with anyio.fail_after(30):  # both led, both followed
            while not (await produce("a", 0, b"x") and await produce("b", 1, b"y")):
                await clock.sleep(0.1)
        for i in range(20):  # records in flight both ways when the deletion starts
            assert await produce("a", 0, b"a%d" % i)
            assert await produce("b", 1, b"b%d" % i)
        started = clock.now()
        await delete_all(cluster, client, clock, ["a", "b"], within=25)
        assert clock.now() - started < 25
        assert failed_fetches(sink) == []

    run(tmp_path, 2, body)
