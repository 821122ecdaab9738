"""DeleteTopics (API key 20): topics by name, or from v6 by name or id; answered by the
controller (``KafkaApis.handleDeleteTopicsRequest``). The codec has no v0 (Kafka 4 dropped
it)."""

from __future__ import annotations

from typing import Any

from cluster.kafka.apis.api_codec import ApiCodec, Values
from cluster.kafka.codec import as_error_code, as_millis, as_topic_id
from cluster.kafka.framing import KafkaRequest
from protocol.errors import ErrorCode
from protocol.ids import TopicName
from protocol.kafka_api import (
    ClientApiKey,
    DeleteTopicResult,
    DeleteTopicsRequestData,
    DeleteTopicsResponseData,
    TopicRef,
)


def request_data(body: Any, version: int) -> DeleteTopicsRequestData:
    del version  # v6+ is told by its ``topics`` field
    if hasattr(body, "topics"):  # v6+: by name or by id
        refs = tuple(
            TopicRef(
                name=None if t.name is None else TopicName(t.name),
                topic_id=as_topic_id(t.topic_id),
            )
            for t in body.topics
        )
    else:
        refs = tuple(TopicRef(name=TopicName(n)) for n in body.topic_names)
    return DeleteTopicsRequestData(topics=refs, timeout_ms=as_millis(body.timeout))


def response_values(data: DeleteTopicsResponseData, request: KafkaRequest) -> Values:
    return {
        "throttle_time": data.throttle_time_ms,
        "responses": [
            {
                "name": t.name,
                "topic_id": t.topic_id,
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
            DeleteTopicResult(
                name=t.name, topic_id=t.topic_id, error_code=code, error_message=message
            )
            for t in data.topics
        )
    )


def request_values(data: DeleteTopicsRequestData) -> Values:
    return {
        "topic_names": data.names,
        "topics": [{"name": t.name, "topic_id": t.topic_id} for t in data.topics],
        "timeout": data.timeout_ms,
    }


def response_data(body: Any) -> DeleteTopicsResponseData:
    return DeleteTopicsResponseData(
        topics=tuple(
            DeleteTopicResult(
                name=None if r.name is None else TopicName(r.name),
                topic_id=as_topic_id(getattr(r, "topic_id", None)),
                error_code=as_error_code(r.error_code),
                error_message=getattr(r, "error_message", None),
            )
            for r in body.responses
        ),
        throttle_time_ms=as_millis(getattr(body, "throttle_time", 0)),
    )


CODEC = ApiCodec(
    api_key=ClientApiKey.DELETE_TOPICS,
    versions=(1, 6),
    client_version=5,
    request_type=DeleteTopicsRequestData,
    response_type=DeleteTopicsResponseData,
    request_data=request_data,
    response_values=response_values,
    error_answer=error_answer,
    request_values=request_values,
    response_data=response_data,
)
