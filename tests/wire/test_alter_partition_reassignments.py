"""AlterPartitionReassignments v0 on a running 3-broker cluster: a partition moved through
the API ends on its new replica with its records (kafka-python reads them back from it)
and ListPartitionReassignments empties; a reassignment halted through
``/admin/reassign_partitions`` and cancelled with null replicas reverts to the original
replicas, a second cancel says NO_REASSIGNMENT_IN_PROGRESS; partitions reassigned or
cancelled through the API leave the znode; bad targets are refused per partition with
Kafka's messages, changing nothing; a broker whose controller
is not the active one answers NOT_CONTROLLER."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from actors.zk import kafka_zk
from cluster.kafka.client import KafkaAdminClient
from cluster.launch.cluster import Cluster
from protocol import zkdata
from protocol.errors import ErrorCode
from protocol.ids import BrokerId, TopicName
from protocol.kafka_api import (
    AlterPartitionReassignmentsRequestData,
    AlterPartitionReassignmentsResponseData,
    CreatableTopic,
    PartitionAssignment,
    ReassignablePartition,
    ReassignableTopic,
)
from tests.support.hosting import hosted_fixture
from tests.support.quiet_cluster import quiet_three_brokers
from tests.support.waiting import eventually, in_threads
from tests.support.zookeeper import STORES

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]

HOST = "127.0.0.1"
WAIT = 30.0


@hosted_fixture(params=STORES)
async def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Cluster]:
    server = request.getfixturevalue("zookeeper_server") if request.param == "zookeeper" else None
    async for running in quiet_three_brokers(tmp_path, server):
        yield running


in_thread = in_threads(WAIT * 2)


def kafka_python_produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    from kafka import KafkaProducer  # type: ignore[import-untyped]

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for value in values:
            producer.send(topic, value, partition=0).get(timeout=20)
    finally:
        producer.close()


def kafka_python_consume(bootstrap: str, topic: str, count: int) -> list[bytes]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got: list[bytes] = []
        for _ in range(60):
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(r.value for r in records)
            if len(got) >= count:
                break
        return got
    finally:
        consumer.close()


def kafka_python_alter(bootstrap: str, targets: dict[tuple[str, int], list[int] | None]) -> Any:
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient as KpAdminClient  # type: ignore[import-untyped]

    client = KpAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20_000)
    try:
        return client.alter_partition_reassignments(
            {TopicPartition(t, p): replicas for (t, p), replicas in targets.items()}
        )
    finally:
        client.close()


def results(response: AlterPartitionReassignmentsResponseData) -> dict[Any, Any]:
    return {
        (t.name, p.partition_index): (p.error_code, p.error_message)
        for t in response.responses
        for p in t.partitions
    }


async def create_on(client: KafkaAdminClient, names: list[str], broker: int, n: int = 1) -> None:
    created = await client.create_topics(
        [
            CreatableTopic(
                name=TopicName(name),
                num_partitions=-1,
                replication_factor=-1,
                assignments=tuple(
                    PartitionAssignment(partition=p, broker_ids=(BrokerId(broker),))
                    for p in range(n)
                ),
            )
            for name in names
        ]
    )
    assert [t.error_code for t in created] == [ErrorCode.NONE] * len(names)


async def replicas_of(client: KafkaAdminClient, topic: str) -> list[tuple[int, ...]]:
    view = await client.describe_topics([topic])
    partitions = sorted(view[TopicName(topic)].partitions, key=lambda p: p.partition)
    return [tuple(p.replicas) for p in partitions]


async def test_a_partition_moves_with_its_records(cluster: Cluster) -> None:
    c = await cluster.controller_id()
    a, b = (c + 1) % 3, (c + 2) % 3
    bootstrap = f"{HOST}:{cluster.ports[c]}"
    async with KafkaAdminClient(bootstrap) as client:
        await create_on(client, ["m"], a)
    await in_thread(kafka_python_produce, bootstrap, "m", [b"x", b"y", b"z"])
    answered = await in_thread(kafka_python_alter, bootstrap, {("m", 0): [b]})
    assert {(tp.topic, tp.partition): err for tp, err in answered.items()} == {("m", 0): None}
    async with KafkaAdminClient(bootstrap) as client:
        await eventually(
            client.list_partition_reassignments, until=lambda r: not r.topics, timeout=WAIT
        )
        assert await eventually(
            functools.partial(replicas_of, client, "m"), until=lambda r: r == [(b,)], timeout=WAIT
        ) == [(b,)]
    assert await in_thread(kafka_python_consume, bootstrap, "m", 3) == [b"x", b"y", b"z"]


async def halt_through_zookeeper(cluster: Cluster, targets: dict[str, tuple[int, ...]]) -> None:
    assert cluster.store is not None
    session = await cluster.store.open_session(timeout=10.0, name="probe")
    try:
        await kafka_zk.create_partition_reassignment(
            session,
            zkdata.PartitionReassignment(
                partitions=tuple(
                    zkdata.PartitionReplicas(
                        topic=TopicName(topic),
                        partition=0,
                        replicas=tuple(BrokerId(r) for r in replicas),
                    )
                    for topic, replicas in targets.items()
                )
            ),
        )
    finally:
        await session.close()
        session.events.close()


async def zookeeper_reassignment(cluster: Cluster) -> list[tuple[str, int, tuple[int, ...]]]:
    assert cluster.store is not None
    session = await cluster.store.open_session(timeout=10.0, name="probe")
    try:
        pending = await kafka_zk.get_partition_reassignment(session)
    finally:
        await session.close()
        session.events.close()
    if pending is None:
        return []
    return [(p.topic, p.partition, tuple(p.replicas)) for p in pending.partitions]


async def test_cancel_reverts_and_the_api_takes_partitions_from_zookeeper(
    cluster: Cluster,
) -> None:
    """s-0 and zk-0 halted through /admin/reassign_partitions (their new replica b down).
    Cancelling s-0 through the API reverts it to [a] and takes it out of the znode; a second
    cancel: NO_REASSIGNMENT_IN_PROGRESS; zk-0 moved through the API to [c] leaves the znode,
    which, empty, is deleted; the API's target wins."""
    c = await cluster.controller_id()
    a, b = (c + 1) % 3, (c + 2) % 3
    bootstrap = f"{HOST}:{cluster.ports[c]}"
    async with KafkaAdminClient(bootstrap) as client:
        await create_on(client, ["s", "zk"], a)
    cluster.stop_broker(b)
    assert await cluster.wait_stopped(b, timeout=WAIT)
    await halt_through_zookeeper(cluster, {"s": (a, b), "zk": (a, b)})
    async with KafkaAdminClient(bootstrap) as client:
        listed = await eventually(
            client.list_partition_reassignments, until=lambda r: len(r.topics) == 2
        )
        assert [(t.name, p.adding_replicas) for t in listed.topics for p in t.partitions] == [
            ("s", (b,)),
            ("zk", (b,)),
        ]
        cancelled = await client.alter_partition_reassignments({("s", 0): None})
        assert results(cancelled) == {("s", 0): (ErrorCode.NONE, None)}
        assert await zookeeper_reassignment(cluster) == [("zk", 0, (a, b))]
        listed = await client.list_partition_reassignments()
        assert [t.name for t in listed.topics] == ["zk"]
        await eventually(
            functools.partial(replicas_of, client, "s"), until=lambda r: r == [(a,)], timeout=WAIT
        )
        again = await client.alter_partition_reassignments({("s", 0): None})
        assert results(again) == {
            ("s", 0): (
                ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                "No partition reassignment is in progress.",
            )
        }

        moved = await client.alter_partition_reassignments({("zk", 0): [c]})
        assert results(moved) == {("zk", 0): (ErrorCode.NONE, None)}
        assert await zookeeper_reassignment(cluster) == []
        await eventually(
            client.list_partition_reassignments, until=lambda r: not r.topics, timeout=WAIT
        )
        await eventually(
            functools.partial(replicas_of, client, "zk"), until=lambda r: r == [(c,)], timeout=WAIT
        )
    await cluster.start_broker(b)


async def test_bad_targets_change_nothing(cluster: Cluster) -> None:
    """Each bad target refused on its own partition with Kafka's message; nothing starts;
    a broker whose controller is not the active one: NOT_CONTROLLER."""
    c = await cluster.controller_id()
    a, b = (c + 1) % 3, (c + 2) % 3
    bootstrap = f"{HOST}:{cluster.ports[c]}"
    async with KafkaAdminClient(bootstrap) as client:
        await create_on(client, ["z"], a)
        await create_on(client, ["t"], a, n=3)
    cluster.stop_broker(b)
    assert await cluster.wait_stopped(b, timeout=WAIT)
    live = sorted({c, a})
    async with KafkaAdminClient(bootstrap) as client:
        bad = await client.alter_partition_reassignments(
            {
                ("t", 0): [a, a],
                ("t", 1): [],
                ("t", 2): [-1],
                ("z", 0): [a, b],
                ("t", 3): [a],
            }
        )
        bad_replicas = ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert results(bad) == {
            ("t", 0): (
                bad_replicas,
                f"Duplicate replica ids in partition reassignment replica list: "
                f"ArrayBuffer({a}, {a})",
            ),
            ("t", 1): (bad_replicas, "Empty replica list specified in partition reassignment."),
            ("t", 2): (bad_replicas, "Invalid broker id in replica list: ArrayBuffer(-1)"),
            ("t", 3): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."),
            ("z", 0): (
                bad_replicas,
                f"Replica assignment has brokers that are not alive. Replica list: "
                f"ArrayBuffer({b}), live broker list: Set({live[0]}, {live[1]})",
            ),
        }
        assert (await client.list_partition_reassignments()).topics == ()
        assert await replicas_of(client, "t") == [(a,)] * 3
        assert await replicas_of(client, "z") == [(a,)]

        refused = await client.request_broker(
            (HOST, cluster.ports[a]),
            AlterPartitionReassignmentsRequestData(
                topics=(
                    ReassignableTopic(
                        name=TopicName("z"),
                        partitions=(
                            ReassignablePartition(partition_index=0, replicas=(BrokerId(c),)),
                        ),
                    ),
                )
            ),
            timeout=WAIT,
        )
    assert refused == AlterPartitionReassignmentsResponseData(
        error_code=ErrorCode.NOT_CONTROLLER,
        error_message="This is not the correct controller for this cluster.",
    )
    await cluster.start_broker(b)
