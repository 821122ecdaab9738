"""ListPartitionReassignments (API key 46): the reassignments in flight, from the
controller's context (``KafkaApis.handleListPartitionReassignmentsRequest``). kemu serves
Kafka 2.7's only version, v0 (flexible)."""

from __future__ import annotations

from typing import Any

from cluster.kafka.apis.api_codec import ApiCodec, Values
from cluster.kafka.codec import as_broker_ids, as_error_code, as_millis
from cluster.kafka.framing import KafkaRequest
from protocol.errors import ErrorCode
from protocol.ids import TopicName
from protocol.kafka_api import (
    ClientApiKey,
    ListPartitionReassignmentsRequestData,
    ListPartitionReassignmentsResponseData,
    ListReassignmentsTopic,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)


def request_data(body: Any, version: int) -> ListPartitionReassignmentsRequestData:
    del version
    return ListPartitionReassignmentsRequestData(
        topics=(
            None
            if body.topics is None
            else tuple(
                ListReassignmentsTopic(
                    name=TopicName(t.name),
                    partition_indexes=tuple(int(p) for p in t.partition_indexes),
                )
                for t in body.topics
            )
        ),
        timeout_ms=as_millis(body.timeout),
    )


def response_values(data: ListPartitionReassignmentsResponseData, request: KafkaRequest) -> Values:
    del request
    return {
        "throttle_time": data.throttle_time_ms,
        "error_code": data.error_code,
        "error_message": data.error_message,
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "replicas": list(p.replicas),
                        "adding_replicas": list(p.adding_replicas),
                        "removing_replicas": list(p.removing_replicas),
                    }
                    for p in t.partitions
                ],
            }
            for t in data.topics
        ],
    }


def error_answer(
    data: ListPartitionReassignmentsRequestData, code: ErrorCode, message: str | None
) -> ListPartitionReassignmentsResponseData:
    """``ListPartitionReassignmentsRequest.getErrorResponse``: the code at the top level."""
    del data
    return ListPartitionReassignmentsResponseData(error_code=code, error_message=message)


def request_values(data: ListPartitionReassignmentsRequestData) -> Values:
    return {
        "timeout": data.timeout_ms,
        "topics": (
            None
            if data.topics is None
            else [
                {"name": t.name, "partition_indexes": list(t.partition_indexes)}
                for t in data.topics
            ]
        ),
    }


def response_data(body: Any) -> ListPartitionReassignmentsResponseData:
    return ListPartitionReassignmentsResponseData(
        throttle_time_ms=as_millis(body.throttle_time),
        error_code=as_error_code(body.error_code),
        error_message=body.error_message,
        topics=tuple(
            OngoingTopicReassignment(
                name=TopicName(t.name),
                partitions=tuple(
                    OngoingPartitionReassignment(
                        partition_index=int(p.partition_index),
                        replicas=as_broker_ids(p.replicas),
                        adding_replicas=as_broker_ids(p.adding_replicas),
                        removing_replicas=as_broker_ids(p.removing_replicas),
                    )
                    for p in t.partitions
                ),
            )
            for t in body.topics
        ),
    )


CODEC = ApiCodec(
    api_key=ClientApiKey.LIST_PARTITION_REASSIGNMENTS,
    versions=(0, 0),
    client_version=0,
    request_type=ListPartitionReassignmentsRequestData,
    response_type=ListPartitionReassignmentsResponseData,
    request_data=request_data,
    response_values=response_values,
    error_answer=error_answer,
    request_values=request_values,
    response_data=response_data,
)
