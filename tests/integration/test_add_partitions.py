"""Kafka's AddPartitionsTest end to end: CreatePartitions at the controller's broker of a
four-broker cluster (embedded store, in one process) adds partitions where Kafka would
place them, the controller gives them leaders (epoch 0), every broker's metadata shows
them and every replica gets its log directory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from actors.broker.broker import broker_ref
from actors.zk import kafka_zk
from protocol.control import TopicPartition
from protocol.errors import ErrorCode
from protocol.ids import BrokerId, TopicName
from protocol.kafka_api import (
    CreatePartitionsRequestData,
    CreatePartitionsResponseData,
    CreatePartitionsTopic,
)
from tests.support.creation import Assignment, Harness, running_cluster, wait_until_complete
from tests.support.hosting import hosted_fixture

pytestmark = pytest.mark.asyncio

BROKERS = (0, 1, 2, 3)


@hosted_fixture()
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    async with running_cluster(tmp_path / "logs", brokers=len(BROKERS)) as h:
        yield h


async def create_topic(h: Harness, topic: str, assignment: Assignment) -> None:
    """The topic as AddPartitionsTest's setUp makes it, complete on every broker."""
    await kafka_zk.write_topic(h.probe, TopicName(topic), assignment, {})
    h.topics[topic] = assignment
    await wait_until_complete(h, list(BROKERS))


async def add_partitions(
    h: Harness, topic: str, count: int, assignments: list[list[int]] | None = None
) -> Assignment:
    """CreatePartitions to the controller; answered NONE; the stored assignment after."""
    controller = await h.cluster.controller_id()
    request = CreatePartitionsRequestData(
        topics=(
            CreatePartitionsTopic(
                name=TopicName(topic),
                count=count,
                assignments=None
                if assignments is None
                else tuple(tuple(BrokerId(b) for b in a) for a in assignments),
            ),
        ),
        timeout_ms=20_000,
    )
    reply = await h.client.ask(broker_ref(controller), request, timeout=30)
    assert isinstance(reply, CreatePartitionsResponseData)
    assert [(r.name, r.error_code) for r in reply.results] == [(topic, ErrorCode.NONE)]
    return await stored_assignment(h, topic)


async def stored_assignment(h: Harness, topic: str) -> Assignment:
    stored = await kafka_zk.get_topic_assignment(h.probe, TopicName(topic))
    assert stored is not None
    return {p: [int(b) for b in a.replicas] for p, a in stored.items()}


async def leaderships(h: Harness, topic: str, partitions: range) -> dict[int, tuple[int, int]]:
    """(leader, leader epoch) of each partition's state znode."""
    found = {}
    for p in partitions:
        state = await kafka_zk.get_partition_state(h.probe, TopicPartition(TopicName(topic), p))
        assert state is not None
        found[p] = (int(state.state.leader), int(state.state.leader_epoch))
    return found


async def test_increment_partitions(harness: Harness) -> None:
    """testIncrementPartitions: 1 -> 3 partitions; the new ones lead on their first
    replica at epoch 0 and show in every broker's metadata."""
    h = harness
    await create_topic(h, "new-topic", {0: [0, 1]})
    grown = await add_partitions(h, "new-topic", 3)
    assert len(grown) == 3
    assert grown[0] == [0, 1]
    h.topics["new-topic"] = grown
    await wait_until_complete(h, list(BROKERS))
    assert await leaderships(h, "new-topic", range(1, 3)) == {
        p: (grown[p][0], 0) for p in range(1, 3)
    }


async def test_manual_assignment_of_replicas(harness: Harness) -> None:
    """testManualAssignmentOfReplicas: the replica lists given for the new partitions are
    stored and honoured (leader = the first of each)."""
    h = harness
    await create_topic(h, "manual-topic", {0: [0, 1]})
    grown = await add_partitions(h, "manual-topic", 3, [[0, 1], [2, 3]])
    assert grown == {0: [0, 1], 1: [0, 1], 2: [2, 3]}
    h.topics["manual-topic"] = grown
    await wait_until_complete(h, list(BROKERS))
    assert await leaderships(h, "manual-topic", range(1, 3)) == {1: (0, 0), 2: (2, 0)}


async def test_replica_placement_on_all_and_on_some_servers(harness: Harness) -> None:
    """testReplicaPlacementAllServers / PartialServers: automatic placement of the new
    partitions continues from partition 0's first replica as §9.4's examples say."""
    h = harness
    await create_topic(h, "all-servers", {0: [2, 3, 0, 1]})
    await create_topic(h, "partial-servers", {0: [1, 2]})
    assert await add_partitions(h, "all-servers", 7) == {
        0: [2, 3, 0, 1],
        1: [3, 2, 0, 1],
        2: [0, 3, 1, 2],
        3: [1, 0, 2, 3],
        4: [2, 3, 0, 1],
        5: [3, 0, 1, 2],
        6: [0, 1, 2, 3],
    }
    assert await add_partitions(h, "partial-servers", 3) == {0: [1, 2], 1: [2, 0], 2: [3, 1]}
    for topic in h.topics:
        h.topics[topic] = await stored_assignment(h, topic)
    await wait_until_complete(h, list(BROKERS))
