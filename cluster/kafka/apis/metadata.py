"""Metadata (API key 3): the brokers, the controller and the asked topics' partitions.

Kafka's ``KafkaApis.handleTopicMetadataRequest``; v0 asks for every topic with an empty
array (null from v1), v4 adds allow-auto-topic-creation, v8 the authorized operations."""

from __future__ import annotations

from typing import Any

from cluster.kafka.apis.api_codec import ApiCodec, Values
from cluster.kafka.codec import as_broker_ids, as_error_code, as_millis
from cluster.kafka.framing import KafkaRequest
from protocol.errors import ErrorCode
from protocol.ids import BrokerId, TopicName
from protocol.kafka_api import (
    NO_AUTHORIZED_OPERATIONS,
    BrokerEndpoint,
    ClientApiKey,
    MetadataRequestData,
    MetadataResponseData,
    PartitionMetadata,
    TopicMetadata,
)


def request_data(body: Any, version: int) -> MetadataRequestData:
    topics: tuple[TopicName, ...] | None
    if body.topics is None or (version == 0 and not body.topics):
        topics = None  # every topic
    else:
        topics = tuple(TopicName(t.name) for t in body.topics)
    return MetadataRequestData(
        topics=topics,
        allow_auto_topic_creation=bool(getattr(body, "allow_auto_topic_creation", True)),
        include_cluster_authorized_operations=bool(
            getattr(body, "include_cluster_authorized_operations", False)
        ),
        include_topic_authorized_operations=bool(
            getattr(body, "include_topic_authorized_operations", False)
        ),
    )


def response_values(data: MetadataResponseData, request: KafkaRequest) -> Values:
    return {
        "throttle_time": data.throttle_time_ms,
        "brokers": [_broker_values(b) for b in data.brokers],
        "cluster_id": data.cluster_id,
        "controller_id": data.controller_id,
        "topics": [
            {
                "error_code": t.error_code,
                "name": t.name,
                "is_internal": t.is_internal,
                "partitions": [
                    {
                        "error_code": p.error_code,
                        "partition_index": p.partition,
                        "leader_id": p.leader,
                        "leader_epoch": p.leader_epoch,
                        "replica_nodes": p.replicas,
                        "isr_nodes": p.isr,
                        "offline_replicas": p.offline_replicas,
                    }
                    for p in t.partitions
                ],
                "topic_authorized_operations": t.authorized_operations,
            }
            for t in data.topics
        ],
        "cluster_authorized_operations": data.cluster_authorized_operations,
    }


def _broker_values(broker: BrokerEndpoint) -> Values:
    return {
        "node_id": broker.broker_id,
        "host": broker.host,
        "port": broker.port,
        "rack": broker.rack,
    }


def error_answer(
    data: MetadataRequestData, code: ErrorCode, message: str | None
) -> MetadataResponseData:
    del message  # Metadata's topics carry no message
    topics = tuple(TopicMetadata(name=name, error_code=code) for name in data.topics or ())
    return MetadataResponseData(
        brokers=(), cluster_id="", controller_id=BrokerId(-1), topics=topics
    )


def request_values(data: MetadataRequestData) -> Values:
    return {
        "topics": None if data.topics is None else [{"name": name} for name in data.topics],
        "allow_auto_topic_creation": data.allow_auto_topic_creation,
        "include_cluster_authorized_operations": data.include_cluster_authorized_operations,
        "include_topic_authorized_operations": data.include_topic_authorized_operations,
    }


def response_data(body: Any) -> MetadataResponseData:
    return MetadataResponseData(
        brokers=tuple(_broker_endpoint(b) for b in body.brokers),
        cluster_id=getattr(body, "cluster_id", None) or "",
        controller_id=BrokerId(int(getattr(body, "controller_id", -1))),
        topics=tuple(_topic_metadata(t) for t in body.topics),
        throttle_time_ms=as_millis(getattr(body, "throttle_time", 0)),
    )


def _broker_endpoint(broker: Any) -> BrokerEndpoint:
    return BrokerEndpoint(
        broker_id=BrokerId(int(broker.node_id)),
        host=broker.host,
        port=int(broker.port),
        rack=getattr(broker, "rack", None),
    )


def _topic_metadata(topic: Any) -> TopicMetadata:
    return TopicMetadata(
        name=TopicName(topic.name or ""),
        error_code=as_error_code(topic.error_code),
        is_internal=bool(getattr(topic, "is_internal", False)),
        partitions=tuple(
            PartitionMetadata(
                partition=int(p.partition_index),
                leader=BrokerId(int(p.leader_id)),
                leader_epoch=int(getattr(p, "leader_epoch", -1)),
                replicas=as_broker_ids(p.replica_nodes),
                isr=as_broker_ids(p.isr_nodes),
                offline_replicas=as_broker_ids(getattr(p, "offline_replicas", ())),
                error_code=as_error_code(p.error_code),
            )
            for p in topic.partitions
        ),
        authorized_operations=int(
            getattr(topic, "topic_authorized_operations", NO_AUTHORIZED_OPERATIONS)
        ),
    )


CODEC = ApiCodec(
    api_key=ClientApiKey.METADATA,
    versions=(0, 9),
    client_version=9,
    request_type=MetadataRequestData,
    response_type=MetadataResponseData,
    request_data=request_data,
    response_values=response_values,
    error_answer=error_answer,
    request_values=request_values,
    response_data=response_data,
)
