"""CreateTopics (API key 19): topics by partition count and replication factor or by
explicit assignments, with configs; answered by the controller
(``KafkaApis.handleCreateTopicsRequest``). v1 adds validate-only, v5 answers each topic's
partitions, replication factor and configs."""

from __future__ import annotations

from typing import Any

from cluster.kafka.apis.api_codec import ApiCodec, Values
from cluster.kafka.codec import (
    as_broker_ids,
    as_config_source,
    as_error_code,
    as_millis,
)
from cluster.kafka.framing import KafkaRequest
from protocol.errors import ErrorCode
from protocol.ids import TopicName
from protocol.kafka_api import (
    ClientApiKey,
    ConfigEntry,
    CreatableTopic,
    CreateTopicResult,
    CreateTopicsRequestData,
    CreateTopicsResponseData,
    PartitionAssignment,
    TopicConfig,
)


def request_data(body: Any, version: int) -> CreateTopicsRequestData:
    del version  # every version's fields are read by name
    return CreateTopicsRequestData(
        topics=tuple(_creatable_topic(t) for t in body.topics),
        timeout_ms=as_millis(body.timeout),
        validate_only=bool(getattr(body, "validate_only", False)),
    )


def _creatable_topic(topic: Any) -> CreatableTopic:
    return CreatableTopic(
        name=TopicName(topic.name),
        num_partitions=int(topic.num_partitions),
        replication_factor=int(topic.replication_factor),
        assignments=tuple(
            PartitionAssignment(
                partition=int(a.partition_index), broker_ids=as_broker_ids(a.broker_ids)
            )
            for a in topic.assignments
        ),
        configs=tuple(TopicConfig(name=c.name, value=c.value) for c in topic.configs),
    )


def response_values(data: CreateTopicsResponseData, request: KafkaRequest) -> Values:
    del request  # one description serves every version
    return {
        "throttle_time": data.throttle_time_ms,
        "topics": [_create_topic_values(t) for t in data.topics],
    }


def _create_topic_values(result: CreateTopicResult) -> Values:
    return {
        "name": result.name,
        "error_code": result.error_code,
        "error_message": result.error_message,
        "num_partitions": result.num_partitions,
        "replication_factor": result.replication_factor,
        "configs": (
            None
            if result.configs is None
            else [
                {
                    "name": c.name,
                    "value": c.value,
                    "read_only": c.read_only,
                    "config_source": c.source,
                    "is_sensitive": c.is_sensitive,
                }
                for c in result.configs
            ]
        ),
    }


def error_answer(
    data: CreateTopicsRequestData, code: ErrorCode, message: str | None
) -> CreateTopicsResponseData:
    return CreateTopicsResponseData(
        topics=tuple(
            CreateTopicResult(name=t.name, error_code=code, error_message=message)
            for t in data.topics
        )
    )


def request_values(data: CreateTopicsRequestData) -> Values:
    return {
        "topics": [
            {
                "name": t.name,
                "num_partitions": t.num_partitions,
                "replication_factor": t.replication_factor,
                "assignments": [
                    {"partition_index": a.partition, "broker_ids": a.broker_ids}
                    for a in t.assignments
                ],
                "configs": [{"name": c.name, "value": c.value} for c in t.configs],
            }
            for t in data.topics
        ],
        "timeout": data.timeout_ms,
        "validate_only": data.validate_only,
    }


def response_data(body: Any) -> CreateTopicsResponseData:
    return CreateTopicsResponseData(
        topics=tuple(_create_topic_result(t) for t in body.topics),
        throttle_time_ms=as_millis(getattr(body, "throttle_time", 0)),
    )


def _create_topic_result(result: Any) -> CreateTopicResult:
    configs = getattr(result, "configs", None)
    return CreateTopicResult(
        name=TopicName(result.name),
        error_code=as_error_code(result.error_code),
        error_message=getattr(result, "error_message", None),
        num_partitions=int(getattr(result, "num_partitions", -1)),
        replication_factor=int(getattr(result, "replication_factor", -1)),
        configs=(
            None
            if configs is None
            else tuple(
                ConfigEntry(
                    name=c.name,
                    value=c.value,
                    read_only=bool(c.read_only),
                    source=as_config_source(getattr(c, "config_source", -1)),
                    is_sensitive=bool(c.is_sensitive),
                )
                for c in configs
            )
        ),
    )


CODEC = ApiCodec(
    api_key=ClientApiKey.CREATE_TOPICS,
    versions=(0, 6),
    client_version=6,
    request_type=CreateTopicsRequestData,
    response_type=CreateTopicsResponseData,
    request_data=request_data,
    response_values=response_values,
    error_answer=error_answer,
    request_values=request_values,
    response_data=response_data,
)
