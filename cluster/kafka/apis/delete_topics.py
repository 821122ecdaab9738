"""DeleteTopics (API key 20): topics by name; answered by the controller
(``KafkaApis.handleDeleteTopicsRequest``). v1 adds the throttle time, v3 the error
TOPIC_DELETION_DISABLED, v5 error messages."""

from __future__ import annotations

from typing import Any

from cluster.kafka.apis.api_codec import ApiCodec, Values
from cluster.kafka.codec import as_error_code, as_millis
from cluster.kafka.framing import KafkaRequest
from protocol.errors import ErrorCode
from protocol.ids import TopicName
from protocol.kafka_api import (
    ClientApiKey,
    DeleteTopicResult,
    DeleteTopicsRequestData,
    DeleteTopicsResponseData,
)


def request_data(body: Any, version: int) -> DeleteTopicsRequestData:
    del version  # versions 0-5 ask alike
    return DeleteTopicsRequestData(
        topics=tuple(TopicName(n) for n in body.topic_names), timeout_ms=as_millis(body.timeout)
    )


def response_values(data: DeleteTopicsResponseData, request: KafkaRequest) -> Values:
    return {
        "throttle_time": data.throttle_time_ms,
        "responses": [
            {
                "name": t.name,
                "error_code": _deletion_error(t.error_code, request.api_version),
                "error_message": t.error_message,
            }
            for t in data.topics
        ],
    }


def _deletion_error(code: ErrorCode, version: int) -> ErrorCode:
    """TOPIC_DELETION_DISABLED came with DeleteTopics v3: Kafka tells older clients
    INVALID_REQUEST instead (``handleDeleteTopicsRequest``)."""
    if code is ErrorCode.TOPIC_DELETION_DISABLED and version < 3:
        return ErrorCode.INVALID_REQUEST
    return code


def error_answer(
    data: DeleteTopicsRequestData, code: ErrorCode, message: str | None
) -> DeleteTopicsResponseData:
    return DeleteTopicsResponseData(
        topics=tuple(
            DeleteTopicResult(name=name, error_code=code, error_message=message)
            for name in data.topics
        )
    )


def request_values(data: DeleteTopicsRequestData) -> Values:
    return {"topic_names": data.topics, "timeout": data.timeout_ms}


def response_data(body: Any) -> DeleteTopicsResponseData:
    return DeleteTopicsResponseData(
        topics=tuple(
            DeleteTopicResult(
                name=TopicName(r.name),
                error_code=as_error_code(r.error_code),
                error_message=getattr(r, "error_message", None),
            )
            for r in body.responses
        ),
        throttle_time_ms=as_millis(getattr(body, "throttle_time", 0)),
    )


CODEC = ApiCodec(
    api_key=ClientApiKey.DELETE_TOPICS,
    versions=(0, 5),
    client_version=5,
    request_type=DeleteTopicsRequestData,
    response_type=DeleteTopicsResponseData,
    request_data=request_data,
    response_values=response_values,
    error_answer=error_answer,
    request_values=request_values,
    response_data=response_data,
)
