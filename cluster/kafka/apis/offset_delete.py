"""OffsetDelete (API key 47): a group's committed offsets of some partitions dropped
(``GroupCoordinator.handleDeleteOffsets``). kemu serves Kafka 2.7's v0."""

from __future__ import annotations

from typing import Any

from cluster.kafka.apis.api_codec import ApiCodec, Values
from cluster.kafka.apis.offset_commit import partition_results
from cluster.kafka.codec import as_error_code, as_millis
from cluster.kafka.framing import KafkaRequest
from protocol.errors import ErrorCode
from protocol.group import (
    OffsetDeleteRequestData,
    OffsetDeleteResponseData,
    OffsetFetchTopic,
)
from protocol.ids import TopicName
from protocol.kafka_api import ClientApiKey


def request_data(body: Any, version: int) -> OffsetDeleteRequestData:
    del version
    return OffsetDeleteRequestData(
        group_id=body.group_id,
        topics=tuple(
            OffsetFetchTopic(
                name=TopicName(t.name),
                partition_indexes=tuple(int(p.partition_index) for p in t.partitions),
            )
            for t in body.topics
        ),
    )


def response_values(data: OffsetDeleteResponseData, request: KafkaRequest) -> Values:
    del request
    return {
        "error_code": data.error_code,
        "throttle_time": data.throttle_time_ms,
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {"partition_index": p.partition_index, "error_code": p.error_code}
                    for p in t.partitions
                ],
            }
            for t in data.topics
        ],
    }


def error_answer(
    data: OffsetDeleteRequestData, code: ErrorCode, message: str | None
) -> OffsetDeleteResponseData:
    """``OffsetDeleteRequest.getErrorResponse``: the code alone, no topics."""
    del data, message
    return OffsetDeleteResponseData(error_code=code)


def request_values(data: OffsetDeleteRequestData) -> Values:
    return {
        "group_id": data.group_id,
        "topics": [
            {"name": t.name, "partitions": [{"partition_index": p} for p in t.partition_indexes]}
            for t in data.topics
        ],
    }


def response_data(body: Any) -> OffsetDeleteResponseData:
    return OffsetDeleteResponseData(
        error_code=as_error_code(body.error_code),
        throttle_time_ms=as_millis(body.throttle_time),
        topics=partition_results(body.topics),
    )


CODEC = ApiCodec(
    api_key=ClientApiKey.OFFSET_DELETE,
    versions=(0, 0),
    client_version=0,
    request_type=OffsetDeleteRequestData,
    response_type=OffsetDeleteResponseData,
    request_data=request_data,
    response_values=response_values,
    error_answer=error_answer,
    request_values=request_values,
    response_data=response_data,
)
