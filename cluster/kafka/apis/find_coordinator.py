"""FindCoordinator (API key 10): which broker coordinates a group
(``KafkaApis.handleFindCoordinatorRequest``). kemu serves Kafka 2.7's v0-v3 (v1 adds the
key type, the throttle time and the error message; v3 is flexible)."""

from __future__ import annotations

from typing import Any

from cluster.kafka.apis.api_codec import ApiCodec, Values
from cluster.kafka.codec import as_error_code, as_millis
from cluster.kafka.framing import KafkaRequest
from protocol.errors import ErrorCode
from protocol.group import FindCoordinatorRequestData, FindCoordinatorResponseData
from protocol.kafka_api import ClientApiKey


def request_data(body: Any, version: int) -> FindCoordinatorRequestData:
    del version
    return FindCoordinatorRequestData(key=body.key, key_type=int(getattr(body, "key_type", 0)))


def response_values(data: FindCoordinatorResponseData, request: KafkaRequest) -> Values:
    del request
    return {
        "throttle_time": data.throttle_time_ms,
        "error_code": data.error_code,
        "error_message": data.error_message,
        "node_id": data.node_id,
        "host": data.host,
        "port": data.port,
    }


def error_answer(
    data: FindCoordinatorRequestData, code: ErrorCode, message: str | None
) -> FindCoordinatorResponseData:
    """``FindCoordinatorRequest.getErrorResponse``: the code, no node."""
    del data
    return FindCoordinatorResponseData(error_code=code, error_message=message)


def request_values(data: FindCoordinatorRequestData) -> Values:
    return {"key": data.key, "key_type": data.key_type}


def response_data(body: Any) -> FindCoordinatorResponseData:
    return FindCoordinatorResponseData(
        throttle_time_ms=as_millis(getattr(body, "throttle_time", 0)),
        error_code=as_error_code(body.error_code),
        error_message=getattr(body, "error_message", None),
        node_id=int(body.node_id),
        host=body.host,
        port=int(body.port),
    )


CODEC = ApiCodec(
    api_key=ClientApiKey.FIND_COORDINATOR,
    versions=(0, 3),
    client_version=3,
    request_type=FindCoordinatorRequestData,
    response_type=FindCoordinatorResponseData,
    request_data=request_data,
    response_values=response_values,
    error_answer=error_answer,
    request_values=request_values,
    response_data=response_data,
)
