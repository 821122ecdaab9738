"""CreatePartitions (API key 37): a topic's new partition count, with or without the new
partitions' assignments; answered by the controller
(``KafkaApis.handleCreatePartitionsRequest``)."""

from __future__ import annotations

from typing import Any

from cluster.kafka.apis.api_codec import ApiCodec, Values
from cluster.kafka.codec import as_broker_ids, as_error_code, as_millis
from cluster.kafka.framing import KafkaRequest
from protocol.errors import ErrorCode
from protocol.ids import TopicName
from protocol.kafka_api import (
    ClientApiKey,
    CreatePartitionsRequestData,
    CreatePartitionsResponseData,
    CreatePartitionsTopic,
    TopicErrorResult,
)


def request_data(body: Any, version: int) -> CreatePartitionsRequestData:
    del version  # the fields are the same in every version
    return CreatePartitionsRequestData(
        topics=tuple(
            CreatePartitionsTopic(
                name=TopicName(t.name),
                count=int(t.count),
                assignments=(
                    None
                    if t.assignments is None
                    else tuple(as_broker_ids(a.broker_ids) for a in t.assignments)
                ),
            )
            for t in body.topics
        ),
        timeout_ms=as_millis(body.timeout),
        validate_only=bool(body.validate_only),
    )


def response_values(data: CreatePartitionsResponseData, request: KafkaRequest) -> Values:
    del request  # one description serves every version
    return {
        "throttle_time": data.throttle_time_ms,
        "results": [
            {"name": r.name, "error_code": r.error_code, "error_message": r.error_message}
            for r in data.results
        ],
    }


def error_answer(
    data: CreatePartitionsRequestData, code: ErrorCode, message: str | None
) -> CreatePartitionsResponseData:
    return CreatePartitionsResponseData(
        results=tuple(
            TopicErrorResult(name=t.name, error_code=code, error_message=message)
            for t in data.topics
        )
    )


def request_values(data: CreatePartitionsRequestData) -> Values:
    return {
        "topics": [
            {
                "name": t.name,
                "count": t.count,
                "assignments": (
                    None if t.assignments is None else [{"broker_ids": a} for a in t.assignments]
                ),
            }
            for t in data.topics
        ],
        "timeout": data.timeout_ms,
        "validate_only": data.validate_only,
    }


def response_data(body: Any) -> CreatePartitionsResponseData:
    return CreatePartitionsResponseData(
        results=tuple(
            TopicErrorResult(
                name=TopicName(r.name),
                error_code=as_error_code(r.error_code),
                error_message=getattr(r, "error_message", None),
            )
            for r in body.results
        ),
        throttle_time_ms=as_millis(getattr(body, "throttle_time", 0)),
    )


CODEC = ApiCodec(
    api_key=ClientApiKey.CREATE_PARTITIONS,
    versions=(0, 3),
    client_version=3,
    request_type=CreatePartitionsRequestData,
    response_type=CreatePartitionsResponseData,
    request_data=request_data,
    response_values=response_values,
    error_answer=error_answer,
    request_values=request_values,
    response_data=response_data,
)
