"""TopicCommandWithAdminClientTest's "does not retry THROTTLING_QUOTA_EXCEEDED" cases: a
controller that answers CreateTopics or CreatePartitions with that error makes
``kemu topics`` fail at once with Kafka's message, after exactly one request. The broker
is a fake behind a real ``KafkaWireServer``."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from cluster.cli.topics import run_topic_command
from cluster.kafka.listener import KafkaRequest, KafkaWireServer, request_data
from protocol.errors import ErrorCode
from protocol.ids import BrokerId, TopicName
from protocol.kafka_api import (
    BrokerEndpoint,
    CreatePartitionsRequestData,
    CreatePartitionsResponseData,
    CreateTopicResult,
    CreateTopicsRequestData,
    CreateTopicsResponseData,
    MetadataRequestData,
    MetadataResponseData,
    PartitionMetadata,
    TopicErrorResult,
    TopicMetadata,
)
from tests.support.hosting import hosted_fixture

pytestmark = pytest.mark.asyncio

ERR = "Error while executing topic command : "
QUOTA = ErrorCode.THROTTLING_QUOTA_EXCEEDED


@dataclass
class ThrottlingBroker:
    """Broker 0, its own controller, holding topic ``t`` (1 partition): every CreateTopics
    and CreatePartitions is over the quota."""

    port: int = 0
    received: list[str] = field(default_factory=list)

    @property
    def supported(self) -> Mapping[int, tuple[int, int]]:
        return {3: (0, 9), 19: (0, 6), 37: (0, 3)}

    async def handle(self, request: KafkaRequest) -> Any:
        data = request_data(request)
        self.received.append(type(data).__name__)
        if isinstance(data, MetadataRequestData):
            partition = PartitionMetadata(
                partition=0, leader=BrokerId(0), replicas=(BrokerId(0),), isr=(BrokerId(0),)
            )
            return MetadataResponseData(
                brokers=(BrokerEndpoint(broker_id=BrokerId(0), host="127.0.0.1", port=self.port),),
                cluster_id="quota",
                controller_id=BrokerId(0),
                topics=(TopicMetadata(name=TopicName("t"), partitions=(partition,)),),
            )
        if isinstance(data, CreateTopicsRequestData):
            return CreateTopicsResponseData(
                topics=tuple(CreateTopicResult(name=t.name, error_code=QUOTA) for t in data.topics)
            )
        if isinstance(data, CreatePartitionsRequestData):
            return CreatePartitionsResponseData(
                results=tuple(TopicErrorResult(name=t.name, error_code=QUOTA) for t in data.topics)
            )
        return None


@hosted_fixture()
async def broker() -> AsyncIterator[ThrottlingBroker]:
    fake = ThrottlingBroker()
    async with anyio.create_task_group() as tg:
        fake.port = await tg.start(KafkaWireServer(fake, node="throttling").serve)
        yield fake
        tg.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("argv", "request_type"),
    [
        (["--create", "--topic", "new"], "CreateTopicsRequestData"),
        (["--alter", "--topic", "t", "--partitions", "2"], "CreatePartitionsRequestData"),
    ],
    ids=["create", "alter"],
)
async def test_throttling_quota_exceeded_is_not_retried(
    broker: ThrottlingBroker, argv: list[str], request_type: str
) -> None:
    """The command fails with "The throttling quota has been exceeded." after one request."""
    out, err = io.StringIO(), io.StringIO()
    with anyio.fail_after(10):
        rc = await run_topic_command(
            [*argv, "--bootstrap-server", f"127.0.0.1:{broker.port}"], out=out, err=err
        )
    assert (rc, out.getvalue(), err.getvalue()) == (
        1,
        ERR + "The throttling quota has been exceeded.\n",
        "",
    )
    assert broker.received.count(request_type) == 1
