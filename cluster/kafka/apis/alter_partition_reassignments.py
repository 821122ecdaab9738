"""AlterPartitionReassignments (API key 45): start or cancel reassignments through the
controller (``KafkaApis.handleAlterPartitionReassignmentsRequest``). kemu serves Kafka
2.7's only version, v0 (flexible)."""

from __future__ import annotations

from typing import Any

from cluster.kafka.apis.api_codec import ApiCodec, Values
from cluster.kafka.codec import as_error_code, as_millis
from cluster.kafka.framing import KafkaRequest
from protocol.errors import ErrorCode
from protocol.ids import BrokerId, TopicName
from protocol.kafka_api import (
    AlterPartitionReassignmentsRequestData,
    AlterPartitionReassignmentsResponseData,
    ClientApiKey,
    ReassignablePartition,
    ReassignablePartitionResponse,
    ReassignableTopic,
    ReassignableTopicResponse,
)


def request_data(body: Any, version: int) -> AlterPartitionReassignmentsRequestData:
    del version
    return AlterPartitionReassignmentsRequestData(
        topics=tuple(
            ReassignableTopic(
                name=TopicName(t.name),
                partitions=tuple(
                    ReassignablePartition(
                        partition_index=int(p.partition_index),
                        replicas=(
                            None
                            if p.replicas is None
                            else tuple(BrokerId(int(r)) for r in p.replicas)
                        ),
                    )
                    for p in t.partitions
                ),
            )
            for t in body.topics
        ),
        timeout_ms=as_millis(body.timeout),
    )


def response_values(data: AlterPartitionReassignmentsResponseData, request: KafkaRequest) -> Values:
    del request
    return {
        "throttle_time": data.throttle_time_ms,
        "error_code": data.error_code,
        "error_message": data.error_message,
        "responses": [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": p.error_code,
                        "error_message": p.error_message,
                    }
                    for p in t.partitions
                ],
            }
            for t in data.responses
        ],
    }


def error_answer(
    data: AlterPartitionReassignmentsRequestData, code: ErrorCode, message: str | None
) -> AlterPartitionReassignmentsResponseData:
    """``AlterPartitionReassignmentsRequest.getErrorResponse``: the code at the top level and
    on every partition asked for."""
    return AlterPartitionReassignmentsResponseData(
        error_code=code,
        error_message=message,
        responses=tuple(
            ReassignableTopicResponse(
                name=t.name,
                partitions=tuple(
                    ReassignablePartitionResponse(
                        partition_index=p.partition_index, error_code=code, error_message=message
                    )
                    for p in t.partitions
                ),
            )
            for t in data.topics
        ),
    )


def request_values(data: AlterPartitionReassignmentsRequestData) -> Values:
    return {
        "timeout": data.timeout_ms,
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "replicas": None if p.replicas is None else list(p.replicas),
                    }
                    for p in t.partitions
                ],
            }
            for t in data.topics
        ],
    }


def response_data(body: Any) -> AlterPartitionReassignmentsResponseData:
    return AlterPartitionReassignmentsResponseData(
        throttle_time_ms=as_millis(body.throttle_time),
        error_code=as_error_code(body.error_code),
        error_message=body.error_message,
        responses=tuple(
            ReassignableTopicResponse(
                name=TopicName(t.name),
                partitions=tuple(
                    ReassignablePartitionResponse(
                        partition_index=int(p.partition_index),
                        error_code=as_error_code(p.error_code),
                        error_message=p.error_message,
                    )
                    for p in t.partitions
                ),
            )
            for t in body.responses
        ),
    )


CODEC = ApiCodec(
    api_key=ClientApiKey.ALTER_PARTITION_REASSIGNMENTS,
    versions=(0, 0),
    client_version=0,
    request_type=AlterPartitionReassignmentsRequestData,
    response_type=AlterPartitionReassignmentsResponseData,
    request_data=request_data,
    response_values=response_values,
    error_answer=error_answer,
    request_values=request_values,
    response_data=response_data,
)
