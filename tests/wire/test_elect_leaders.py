"""ElectLeaders (v0-v2) on a running 3-broker cluster without auto leader rebalance:
a broker stopped and started again gets the leadership of its preferred partition back
when confluent-kafka, kafka-python or kemu's client asks the controller for a preferred
election; the per-partition answers are Kafka 2.7's (ELECTION_NOT_NEEDED,
PREFERRED_LEADER_NOT_AVAILABLE with the controller's message, UNKNOWN_TOPIC_OR_PARTITION);
a request for every partition lists only those that needed an election; a broker whose
controller is not the active one answers NOT_CONTROLLER for each partition and elects
nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from actors.zk import kafka_zk
from cluster.kafka.client import KafkaAdminClient
from cluster.launch.cluster import Cluster
from protocol.control import TopicPartition
from protocol.errors import ErrorCode
from protocol.ids import BrokerId, TopicName
from protocol.kafka_api import (
    CreatableTopic,
    ElectLeadersRequestData,
    ElectLeadersResponseData,
    ElectLeadersTopic,
    PartitionAssignment,
)
from tests.support.hosting import hosted_fixture
from tests.support.quiet_cluster import quiet_three_brokers
from tests.support.waiting import eventually, in_threads
from tests.support.zookeeper import STORES

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]

HOST = "127.0.0.1"
WAIT = 30.0
NOT_NEEDED = "Leader election not needed for topic partition."


class Running:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def bootstrap(self, broker: int) -> str:
        return f"{HOST}:{self.cluster.ports[broker]}"

    async def leader_and_isr(self, topic: str, partition: int) -> tuple[int, set[int]]:
        assert self.cluster.store is not None
        session = await self.cluster.store.open_session(timeout=10.0, name="probe")
        try:
            state = await kafka_zk.get_partition_state(
                session, TopicPartition(TopicName(topic), partition)
            )
        finally:
            await session.close()
            session.events.close()
        return (-1, set()) if state is None else (state.state.leader, set(state.state.isr))

    async def wait_leader(self, topic: str, partition: int, leader: int, isr: set[int]) -> None:
        await eventually(
            lambda: self.leader_and_isr(topic, partition),
            until=lambda s: s == (leader, isr),
            timeout=WAIT,
        )


@hosted_fixture(params=STORES)
async def running(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Running]:
    server = request.getfixturevalue("zookeeper_server") if request.param == "zookeeper" else None
    async for cluster in quiet_three_brokers(tmp_path, server):
        yield Running(cluster)


in_thread = in_threads(WAIT)


def confluent_elect(bootstrap: str, partitions: list[tuple[str, int]]) -> dict[str, Any]:
    """confluent-kafka's elect_leaders (preferred): each partition's None or error code."""
    from confluent_kafka import ElectionType, KafkaException
    from confluent_kafka import TopicPartition as CkPartition
    from confluent_kafka.admin import AdminClient

    client = AdminClient({"bootstrap.servers": bootstrap})
    # confluent-kafka 2.16.1's elect_leaders fails on any keyword argument (SystemError
    # from its C argument parsing): the defaults (socket.timeout.ms, 60 s) it is.
    future = client.elect_leaders(
        ElectionType.PREFERRED, [CkPartition(t, p) for t, p in partitions]
    )
    try:
        answers = future.result(timeout=WAIT)
    except KafkaException as exc:
        return {"error": exc.args[0].code()}
    return {
        f"{tp.topic}-{tp.partition}": (None if err is None else err.code())
        for tp, err in answers.items()
    }


def kafka_python_elect(bootstrap: str, election_type: int, topic: str, partition: int) -> Any:
    """kafka-python's elect_leaders: the raw response's (topic, partition, code, message)."""
    from kafka.admin import KafkaAdminClient as KpAdminClient  # type: ignore[import-untyped]

    client = KpAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20_000)
    try:
        response = client.elect_leaders(
            election_type, {topic: [partition]}, timeout_ms=20_000, raise_errors=False
        )
    finally:
        client.close()
    return [(r[0], p[0], p[1], p[2]) for r in response.replica_election_results for p in r[1]]


async def setup(running: Running) -> tuple[int, int, int]:
    """Topic t: t-0 on [a, b], t-1 on [b, a], where neither a nor b is the controller c;
    a stops and starts again, so b leads both. Returns (c, a, b)."""
    cluster = running.cluster
    c = await cluster.controller_id()
    a, b = (c + 1) % 3, (c + 2) % 3
    async with KafkaAdminClient(running.bootstrap(c)) as client:
        results = await client.create_topics(
            [
                CreatableTopic(
                    name=TopicName("t"),
                    num_partitions=-1,
                    replication_factor=-1,
                    assignments=(
                        PartitionAssignment(partition=0, broker_ids=(BrokerId(a), BrokerId(b))),
                        PartitionAssignment(partition=1, broker_ids=(BrokerId(b), BrokerId(a))),
                    ),
                )
            ]
        )
    assert [r.error_code for r in results] == [ErrorCode.NONE]
    await running.wait_leader("t", 0, a, {a, b})
    cluster.stop_broker(a)
    assert await cluster.wait_stopped(a, timeout=WAIT)
    await running.wait_leader("t", 0, b, {b})
    await cluster.start_broker(a)
    await running.wait_leader("t", 0, b, {a, b})
    await running.wait_leader("t", 1, b, {a, b})
    return c, a, b


async def test_confluent_kafka_moves_the_leadership_back(running: Running) -> None:
    """confluent-kafka's preferred election of t-0 (led by b, preferred a), t-1 (led by
    its preferred b) and an unknown partition: t-0 elected (a leads, as the controller's
    metadata cache showed before the answer), t-1 ELECTION_NOT_NEEDED, the unknown one
    UNKNOWN_TOPIC_OR_PARTITION; asked again, t-0 needs no election."""
    c, a, b = await setup(running)
    answers = await in_thread(
        confluent_elect, running.bootstrap(c), [("t", 0), ("t", 1), ("nope", 0)]
    )
    assert answers == {
        "t-0": None,
        "t-1": ErrorCode.ELECTION_NOT_NEEDED,
        "nope-0": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert await running.leader_and_isr("t", 0) == (a, {a, b})
    assert await running.leader_and_isr("t", 1) == (b, {a, b})
    again = await in_thread(confluent_elect, running.bootstrap(b), [("t", 0)])
    assert again == {"t-0": ErrorCode.ELECTION_NOT_NEEDED}


async def test_answers_of_kemu_and_kafka_python_clients(running: Running) -> None:
    """A non-controller broker answers NOT_CONTROLLER per partition and elects nothing;
    kafka-python's unclean election of a partition with a live leader needs none; a
    preferred election of every partition (kemu's client, v2) lists only t-0, elected;
    with t-0's preferred replica stopped, its preferred election fails with
    PREFERRED_LEADER_NOT_AVAILABLE and the controller's message."""
    c, a, b = await setup(running)
    request = ElectLeadersRequestData(
        topic_partitions=(ElectLeadersTopic(topic=TopicName("t"), partitions=(0,)),),
        timeout_ms=10_000,
    )
    async with KafkaAdminClient(running.bootstrap(a)) as client:
        refused = await client.request_broker(
            (HOST, running.cluster.ports[a]), request, timeout=WAIT
        )
    assert isinstance(refused, ElectLeadersResponseData)
    assert [
        (r.topic, p.partition_id, p.error_code, p.error_message)
        for r in refused.results
        for p in r.partition_results
    ] == [("t", 0, ErrorCode.NOT_CONTROLLER, None)]
    assert await running.leader_and_isr("t", 0) == (b, {a, b})

    unclean = await in_thread(kafka_python_elect, running.bootstrap(b), 1, "t", 0)
    assert unclean == [("t", 0, ErrorCode.ELECTION_NOT_NEEDED, NOT_NEEDED)]

    async with KafkaAdminClient(running.bootstrap(b)) as client:
        everything = await client.elect_leaders(0, None)
    assert everything.error_code is ErrorCode.NONE
    assert [
        (r.topic, p.partition_id, p.error_code, p.error_message)
        for r in everything.results
        for p in r.partition_results
    ] == [("t", 0, ErrorCode.NONE, None)]
    assert await running.leader_and_isr("t", 0) == (a, {a, b})

    running.cluster.stop_broker(a)
    assert await running.cluster.wait_stopped(a, timeout=WAIT)
    await running.wait_leader("t", 0, b, {b})
    async with KafkaAdminClient(running.bootstrap(c)) as client:
        failed = await client.elect_leaders(0, [("t", 0)])
    assert [
        (r.topic, p.partition_id, p.error_code, p.error_message)
        for r in failed.results
        for p in r.partition_results
    ] == [
        (
            "t",
            0,
            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
            "Failed to elect leader for partition t-0 under strategy"
            " PreferredReplicaPartitionLeaderElectionStrategy",
        )
    ]
    assert await running.leader_and_isr("t", 0) == (b, {b})
