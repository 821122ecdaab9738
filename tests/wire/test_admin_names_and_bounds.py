"""Admin requests refused with Kafka's specific codes, not UNKNOWN_SERVER_ERROR: a name no
topic can have, a topic queued for deletion, and kemu's replica bounds applied to a whole
CreateTopics request and to the cluster (docs/limits.md). Through kemu's own admin client
over the wire, against an in-process cluster with its listeners."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cluster.kafka.client import KafkaAdminClient
from protocol import zkdata
from protocol.errors import ErrorCode
from protocol.ids import BrokerId, TopicName
from protocol.kafka_api import (
    ConfigResource,
    ConfigResourceType,
    CreatableTopic,
    CreatePartitionsTopic,
    PartitionAssignment,
)
from tests.support.hosting import hosted_fixture
from tests.support.topics_harness import Harness, running_harness

pytestmark = pytest.mark.asyncio

BAD_NAMES = ["a/b", "..", ".", "", "x" * 250, "café"]


@hosted_fixture()
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    """Three brokers on the embedded store; at most 10 replicas per request and 12 in the
    cluster, so that small requests meet the bounds."""
    config = {"kemu.max.replicas.per.request": "10", "kemu.max.replicas.per.cluster": "12"}
    async for running in running_harness(tmp_path, None, config=config):
        yield running


def topic(name: str, partitions: int, rf: int = 3) -> CreatableTopic:
    return CreatableTopic(name=TopicName(name), num_partitions=partitions, replication_factor=rf)


@pytest.mark.parametrize("name", BAD_NAMES)
async def test_describe_configs_of_an_illegal_name_is_invalid_topic(
    harness: Harness, name: str
) -> None:
    """DescribeConfigs runs ``Topic.validate`` first: an illegal name is
    INVALID_TOPIC_EXCEPTION with Kafka's message, not an error of the store path."""
    async with KafkaAdminClient(harness.bootstrap) as client:
        results = await client.describe_configs(
            [ConfigResource(resource_type=ConfigResourceType.TOPIC, resource_name=name)]
        )
    result = results[(ConfigResourceType.TOPIC, name)]
    assert result.error_code is ErrorCode.INVALID_TOPIC_EXCEPTION
    assert result.error_message is not None
    assert "Topic name" in result.error_message


async def test_describe_configs_of_a_missing_topic_is_unknown_topic_without_a_message(
    harness: Harness,
) -> None:
    """A legal name no topic has: UNKNOWN_TOPIC_OR_PARTITION with a null message and no
    entries (``AdminManager.describeConfigs`` sets only the code)."""
    async with KafkaAdminClient(harness.bootstrap) as client:
        results = await client.describe_configs(
            [ConfigResource(resource_type=ConfigResourceType.TOPIC, resource_name="absent")]
        )
    missing = results[(ConfigResourceType.TOPIC, "absent")]
    assert missing.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert missing.error_message is None
    assert missing.configs == ()


@pytest.mark.parametrize("name", BAD_NAMES)
async def test_create_partitions_of_an_illegal_name_is_unknown_topic(
    harness: Harness, name: str
) -> None:
    """No topic can have an illegal name: CreatePartitions answers
    UNKNOWN_TOPIC_OR_PARTITION with Kafka's message, and writes nothing."""
    before = await harness.snapshot()
    async with KafkaAdminClient(harness.bootstrap) as client:
        (result,) = await client.create_partitions(
            [CreatePartitionsTopic(name=TopicName(name), count=3)]
        )
    assert result.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert result.error_message == f"The topic '{name}' does not exist."
    assert await harness.snapshot() == before


async def test_create_partitions_of_a_topic_queued_for_deletion_is_refused_at_once(
    harness: Harness,
) -> None:
    """A topic whose deletion marker is written gets INVALID_TOPIC_EXCEPTION "The topic is
    queued for deletion." at once (``KafkaApis.handleCreatePartitionsRequest``), instead
    of waiting out the request's timeout."""
    async with KafkaAdminClient(harness.bootstrap) as client:
        (created,) = await client.create_topics([topic("doomed", 1, 1)])
        assert created.error_code is ErrorCode.NONE
        session = await harness.session()
        # The marker alone, as a deletion the controller has not finished (or cannot).
        await session.create(zkdata.delete_topic_path(TopicName("doomed")), b"")
        (result,) = await client.create_partitions(
            [CreatePartitionsTopic(name=TopicName("doomed"), count=2)]
        )
    assert result.error_code is ErrorCode.INVALID_TOPIC_EXCEPTION
    assert result.error_message == "The topic is queued for deletion."


async def test_a_create_topics_request_over_the_bound_is_refused_whole(
    harness: Harness,
) -> None:
    """Two topics of 6 replicas each are within the bound one by one but not together:
    every topic of the request gets POLICY_VIOLATION naming the limit, nothing is written."""
    before = await harness.snapshot()
    async with KafkaAdminClient(harness.bootstrap) as client:
        results = await client.create_topics([topic("one", 2), topic("two", 2)])
    assert [r.error_code for r in results] == [ErrorCode.POLICY_VIOLATION] * 2
    assert all("kemu.max.replicas.per.request" in (r.error_message or "") for r in results)
    assert await harness.snapshot() == before


async def test_manual_assignments_count_toward_the_bound(harness: Harness) -> None:
    """Manual replica lists count by their lengths: 4 partitions x 3 replicas given by
    hand are 12 replicas, over a bound of 10."""
    manual = CreatableTopic(
        name=TopicName("manual"),
        num_partitions=-1,
        replication_factor=-1,
        assignments=tuple(
            PartitionAssignment(partition=p, broker_ids=(BrokerId(0), BrokerId(1), BrokerId(2)))
            for p in range(4)
        ),
    )
    async with KafkaAdminClient(harness.bootstrap) as client:
        (result,) = await client.create_topics([manual])
    assert result.error_code is ErrorCode.POLICY_VIOLATION


async def test_the_cluster_bound_counts_what_the_cluster_holds(harness: Harness) -> None:
    """With 9 replicas held, a topic of 6 more passes the per-request bound (10) but not
    the per-cluster one (12); adding partitions past it is refused the same way, and what
    fits is still created."""
    async with KafkaAdminClient(harness.bootstrap) as client:
        (first,) = await client.create_topics([topic("held", 3)])
        assert first.error_code is ErrorCode.NONE
        (over,) = await client.create_topics([topic("more", 2)])
        assert over.error_code is ErrorCode.POLICY_VIOLATION
        assert "kemu.max.replicas.per.cluster" in (over.error_message or "")
        (grow,) = await client.create_partitions(
            [CreatePartitionsTopic(name=TopicName("held"), count=5)]
        )
        assert grow.error_code is ErrorCode.POLICY_VIOLATION
        assert "kemu.max.replicas.per.cluster" in (grow.error_message or "")
        (fits,) = await client.create_topics([topic("fits", 1)])
        assert fits.error_code is ErrorCode.NONE
