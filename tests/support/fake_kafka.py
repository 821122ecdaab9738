"""A fake cluster behind real Kafka listeners, for the wire adapter's tests.

Three ``KafkaWireServer``s on free loopback ports share one tiny in-memory "cluster": the
brokers they advertise are each other, broker 2 is the controller (so clients bootstrapping
from broker 1 must reach a second listener), and topics live in a dict. Each admin API is
implemented trivially, enough for real clients to see the answers they expect; the
broker's real rules live elsewhere.
"""

from __future__ import annotations

import struct
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio

from actors.runtime.tracer import MemorySink, Tracer
from cluster.kafka.listener import (
    DEFAULT_MAX_FRAME_BYTES,
    KafkaRequest,
    KafkaWireServer,
    build_response,
    request_data,
)
from protocol.errors import ErrorCode
from protocol.ids import BrokerId, TopicName
from protocol.kafka_api import (
    BrokerEndpoint,
    ConfigEntry,
    ConfigResourceType,
    ConfigSource,
    CreatableTopic,
    CreatePartitionsRequestData,
    CreatePartitionsResponseData,
    CreateTopicResult,
    CreateTopicsRequestData,
    CreateTopicsResponseData,
    DeleteTopicResult,
    DeleteTopicsRequestData,
    DeleteTopicsResponseData,
    DescribeConfigsRequestData,
    DescribeConfigsResponseData,
    DescribeConfigsResult,
    KafkaApiResponseData,
    MetadataRequestData,
    MetadataResponseData,
    PartitionMetadata,
    TopicErrorResult,
    TopicMetadata,
)

HOST = "127.0.0.1"
CLUSTER_ID = "WvVkBy7lTxCaNcNI2HbUbw"  # 22 characters of URL-safe base64, like Kafka's
SUPPORTED: Mapping[int, tuple[int, int]] = {
    0: (3, 8),  # Produce (answered by the tests' own handlers)
    3: (0, 9),  # Metadata
    19: (0, 6),  # CreateTopics
    20: (0, 5),  # DeleteTopics
    32: (0, 3),  # DescribeConfigs
    37: (0, 3),  # CreatePartitions
}
TOPIC_DEFAULTS = {"cleanup.policy": "delete", "retention.ms": "604800000"}
BROKER_CONFIGS = {"num.partitions": "1", "default.replication.factor": "1"}
CONTROLLER = BrokerId(2)
WAIT = 20.0  # seconds any one client call may take before a test fails


@dataclass
class FakeTopic:
    replicas: list[tuple[BrokerId, ...]]
    configs: dict[str, str]


@dataclass
class FakeCluster:
    """The shared state of the three fake brokers."""

    brokers: list[BrokerEndpoint] = field(default_factory=list)
    controller_id: BrokerId = CONTROLLER
    topics: dict[TopicName, FakeTopic] = field(default_factory=dict)
    servers: list[KafkaWireServer] = field(default_factory=list)
    sink: MemorySink = field(default_factory=MemorySink)

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.brokers[0].port}"

    def assign(self, first: int, count: int, replication: int) -> list[tuple[BrokerId, ...]]:
        ids = [b.broker_id for b in self.brokers]
        return [
            tuple(ids[(first + p + r) % len(ids)] for r in range(replication)) for p in range(count)
        ]


class FakeHandler:
    """One fake broker: answers every admin API from the shared ``FakeCluster``."""

    def __init__(self, cluster: FakeCluster, broker_id: BrokerId) -> None:
        self.cluster = cluster
        self.broker_id = broker_id
        self.requests: list[KafkaRequest] = []

    @property
    def supported(self) -> Mapping[int, tuple[int, int]]:
        return SUPPORTED

    async def handle(self, request: KafkaRequest) -> Any:
        self.requests.append(request)
        return self.answer(request)  # plain values: the listener builds the response

    def answer(self, request: KafkaRequest) -> KafkaApiResponseData:
        data = request_data(request)
        match data:
            case MetadataRequestData():
                return self.metadata(data)
            case CreateTopicsRequestData():
                return CreateTopicsResponseData(
                    topics=tuple(self.create(t, data.validate_only) for t in data.topics)
                )
            case DeleteTopicsRequestData():
                return self.delete(data)
            case CreatePartitionsRequestData():
                return self.create_partitions(data)
            case DescribeConfigsRequestData():
                return self.describe_configs(data)
            case _:  # the data-plane APIs: the fake cluster keeps no logs
                raise TypeError(f"the fake broker does not answer {type(data).__name__}")

    def metadata(self, data: MetadataRequestData) -> MetadataResponseData:
        topics = self.cluster.topics
        if data.topics is None:
            wanted: list[TopicName] = sorted(topics)
        else:
            wanted = list(data.topics)
        answers = []
        for name in wanted:
            topic = topics.get(name)
            if topic is None:
                answers.append(
                    TopicMetadata(name=name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                )
                continue
            partitions = tuple(
                PartitionMetadata(partition=p, leader=r[0], leader_epoch=0, replicas=r, isr=r)
                for p, r in enumerate(topic.replicas)
            )
            answers.append(TopicMetadata(name=name, partitions=partitions))
        return MetadataResponseData(
            brokers=tuple(self.cluster.brokers),
            cluster_id=CLUSTER_ID,
            controller_id=self.cluster.controller_id,
            topics=tuple(answers),
        )

    def create(self, t: CreatableTopic, validate_only: bool) -> CreateTopicResult:
        if t.name in self.cluster.topics:
            return CreateTopicResult(
                name=t.name,
                error_code=ErrorCode.TOPIC_ALREADY_EXISTS,
                error_message=f"Topic '{t.name}' already exists.",
            )
        if t.assignments:
            replicas = [a.broker_ids for a in sorted(t.assignments, key=lambda a: a.partition)]
        else:
            count = 1 if t.num_partitions == -1 else t.num_partitions
            replication = 1 if t.replication_factor == -1 else t.replication_factor
            if replication > len(self.cluster.brokers):
                return CreateTopicResult(
                    name=t.name,
                    error_code=ErrorCode.INVALID_REPLICATION_FACTOR,
                    error_message=f"Replication factor: {replication} larger than available "
                    f"brokers: {len(self.cluster.brokers)}.",
                )
            replicas = self.cluster.assign(len(self.cluster.topics), count, replication)
        configs = {c.name: c.value or "" for c in t.configs}
        topic = FakeTopic(replicas, configs)
        if not validate_only:
            self.cluster.topics[t.name] = topic
        return CreateTopicResult(
            name=t.name,
            num_partitions=len(replicas),
            replication_factor=len(replicas[0]),
            configs=self.topic_configs(topic),
        )

    def topic_configs(self, topic: FakeTopic) -> tuple[ConfigEntry, ...]:
        merged = {**TOPIC_DEFAULTS, **topic.configs}
        return tuple(
            ConfigEntry(
                name=k,
                value=v,
                source=ConfigSource.TOPIC_CONFIG
                if k in topic.configs
                else ConfigSource.DEFAULT_CONFIG,
            )
            for k, v in sorted(merged.items())
        )

    def delete(self, data: DeleteTopicsRequestData) -> DeleteTopicsResponseData:
        results = []
        for name in data.topics:
            if self.cluster.topics.pop(name, None) is None:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                results.append(DeleteTopicResult(name=name, error_code=code))
            else:
                results.append(DeleteTopicResult(name=name))
        return DeleteTopicsResponseData(topics=tuple(results))

    def create_partitions(self, data: CreatePartitionsRequestData) -> CreatePartitionsResponseData:
        results = []
        for t in data.topics:
            topic = self.cluster.topics.get(t.name)
            if topic is None:
                results.append(
                    TopicErrorResult(
                        name=t.name,
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        error_message=f"The topic '{t.name}' does not exist.",
                    )
                )
                continue
            current = len(topic.replicas)
            if t.count <= current:
                results.append(
                    TopicErrorResult(
                        name=t.name,
                        error_code=ErrorCode.INVALID_PARTITIONS,
                        error_message=f"Topic currently has {current} partitions, which is "
                        f"higher than the requested {t.count}.",
                    )
                )
                continue
            added = (
                list(t.assignments)
                if t.assignments is not None
                else self.cluster.assign(current, t.count - current, len(topic.replicas[0]))
            )
            if not data.validate_only:
                topic.replicas.extend(added)
            results.append(TopicErrorResult(name=t.name))
        return CreatePartitionsResponseData(results=tuple(results))

    def describe_configs(self, data: DescribeConfigsRequestData) -> DescribeConfigsResponseData:
        results = []
        for r in data.resources:
            entries: tuple[ConfigEntry, ...]
            if r.resource_type == ConfigResourceType.TOPIC:
                topic = self.cluster.topics.get(TopicName(r.resource_name))
                if topic is None:
                    results.append(
                        DescribeConfigsResult(
                            resource_type=r.resource_type,
                            resource_name=r.resource_name,
                            error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            error_message=None,
                        )
                    )
                    continue
                entries = self.topic_configs(topic)
            elif r.resource_type == ConfigResourceType.BROKER:
                entries = tuple(
                    ConfigEntry(name=k, value=v, source=ConfigSource.STATIC_BROKER_CONFIG)
                    for k, v in sorted(BROKER_CONFIGS.items())
                )
            else:
                results.append(
                    DescribeConfigsResult(
                        resource_type=r.resource_type,
                        resource_name=r.resource_name,
                        error_code=ErrorCode.INVALID_REQUEST,
                        error_message=f"Unsupported resource type {r.resource_type}",
                    )
                )
                continue
            if r.configuration_keys:
                entries = tuple(e for e in entries if e.name in r.configuration_keys)
            results.append(
                DescribeConfigsResult(
                    resource_type=r.resource_type, resource_name=r.resource_name, configs=entries
                )
            )
        return DescribeConfigsResponseData(results=tuple(results))


class CodecFakeHandler(FakeHandler):
    """Answers with the codec's response objects, built by the handler itself."""

    async def handle(self, request: KafkaRequest) -> Any:
        self.requests.append(request)
        return build_response(request, self.answer(request))


@asynccontextmanager
async def fake_cluster(
    handler_factory: Callable[[FakeCluster, BrokerId], FakeHandler] = FakeHandler,
    *,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
) -> AsyncIterator[FakeCluster]:
    """Three listeners on free ports, serving until the block ends."""
    cluster = FakeCluster()
    tracer = Tracer()
    tracer.add_sink(cluster.sink)
    async with anyio.create_task_group() as tg:
        for broker_id in (BrokerId(1), BrokerId(2), BrokerId(3)):
            server = KafkaWireServer(
                handler_factory(cluster, broker_id),
                node=f"broker-{broker_id}",
                tracer=tracer,
                max_frame_bytes=max_frame_bytes,
            )
            port = await tg.start(server.serve)
            cluster.servers.append(server)
            cluster.brokers.append(BrokerEndpoint(broker_id=broker_id, host=HOST, port=port))
        try:
            yield cluster
        finally:
            tg.cancel_scope.cancel()


# ---------------------------------------------------------------------- an independent codec
# kafka-python's protocol classes encode requests and decode responses in the tests, so that
# the adapter is checked against a second implementation of Kafka's schemas, not itself.


def kp_frame(request: Any, *, correlation_id: int = 1, client_id: str = "wire-test") -> bytes:
    """A kafka-python request object as a whole frame (size prefix included)."""
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(request.encode(header=True, framed=True))


def kp_decode(response_cls: Any, version: int, frame: bytes) -> tuple[int, dict[str, Any]]:
    """A response frame (size prefix included) decoded by kafka-python: the correlation id
    and the body as plain data."""
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    response = response_cls.decode(frame[4:], version=version, header=True)
    return int(response.header.correlation_id), dict(response.to_dict(json=False))
