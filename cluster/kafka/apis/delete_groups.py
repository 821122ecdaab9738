"""DeleteGroups (API key 42): empty groups and their offsets removed
(``GroupCoordinator.handleDeleteGroups``). kemu serves Kafka 2.7's v0-v2 (v2 is
flexible)."""

from __future__ import annotations

from typing import Any

from cluster.kafka.apis.api_codec import ApiCodec, Values
from cluster.kafka.codec import as_error_code, as_millis
from cluster.kafka.framing import KafkaRequest
from protocol.errors import ErrorCode
from protocol.group import DeletableGroupResult, DeleteGroupsRequestData, DeleteGroupsResponseData
from protocol.kafka_api import ClientApiKey


def request_data(body: Any, version: int) -> DeleteGroupsRequestData:
    del version
    return DeleteGroupsRequestData(groups_names=tuple(body.groups_names))


def response_values(data: DeleteGroupsResponseData, request: KafkaRequest) -> Values:
    del request
    return {
        "throttle_time": data.throttle_time_ms,
        "results": [{"group_id": r.group_id, "error_code": r.error_code} for r in data.results],
    }


def error_answer(
    data: DeleteGroupsRequestData, code: ErrorCode, message: str | None
) -> DeleteGroupsResponseData:
    """``DeleteGroupsRequest.getErrorResponse``: every group fails with the code."""
    del message
    return DeleteGroupsResponseData(
        results=tuple(DeletableGroupResult(group_id=g, error_code=code) for g in data.groups_names)
    )


def request_values(data: DeleteGroupsRequestData) -> Values:
    return {"groups_names": list(data.groups_names)}


def response_data(body: Any) -> DeleteGroupsResponseData:
    return DeleteGroupsResponseData(
        throttle_time_ms=as_millis(getattr(body, "throttle_time", 0)),
        results=tuple(
            DeletableGroupResult(group_id=r.group_id, error_code=as_error_code(r.error_code))
            for r in body.results
        ),
    )


CODEC = ApiCodec(
    api_key=ClientApiKey.DELETE_GROUPS,
    versions=(0, 2),
    client_version=2,
    request_type=DeleteGroupsRequestData,
    response_type=DeleteGroupsResponseData,
    request_data=request_data,
    response_values=response_values,
    error_answer=error_answer,
    request_values=request_values,
    response_data=response_data,
)
