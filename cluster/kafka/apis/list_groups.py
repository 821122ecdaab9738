"""ListGroups (API key 16): the groups a broker coordinates
(``GroupCoordinator.handleListGroups``). kemu serves Kafka 2.7's v0-v4 (v1 adds the
throttle time, v3 is flexible, v4 filters by state and answers each group's state)."""

from __future__ import annotations

from typing import Any

from cluster.kafka.apis.api_codec import ApiCodec, Values
from cluster.kafka.codec import as_error_code, as_millis
from cluster.kafka.framing import KafkaRequest
from protocol.errors import ErrorCode
from protocol.group import ListedGroup, ListGroupsRequestData, ListGroupsResponseData
from protocol.kafka_api import ClientApiKey


def request_data(body: Any, version: int) -> ListGroupsRequestData:
    del version
    return ListGroupsRequestData(states_filter=tuple(getattr(body, "states_filter", ())))


def response_values(data: ListGroupsResponseData, request: KafkaRequest) -> Values:
    del request
    return {
        "throttle_time": data.throttle_time_ms,
        "error_code": data.error_code,
        "groups": [
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type,
                "group_state": g.group_state,
            }
            for g in data.groups
        ],
    }


def error_answer(
    data: ListGroupsRequestData, code: ErrorCode, message: str | None
) -> ListGroupsResponseData:
    del data, message
    return ListGroupsResponseData(error_code=code)


def request_values(data: ListGroupsRequestData) -> Values:
    return {"states_filter": list(data.states_filter)}


def response_data(body: Any) -> ListGroupsResponseData:
    return ListGroupsResponseData(
        throttle_time_ms=as_millis(getattr(body, "throttle_time", 0)),
        error_code=as_error_code(body.error_code),
        groups=tuple(
            ListedGroup(
                group_id=g.group_id,
                protocol_type=g.protocol_type,
                group_state=getattr(g, "group_state", ""),
            )
            for g in body.groups
        ),
    )


CODEC = ApiCodec(
    api_key=ClientApiKey.LIST_GROUPS,
    versions=(0, 4),
    client_version=4,
    request_type=ListGroupsRequestData,
    response_type=ListGroupsResponseData,
    request_data=request_data,
    response_values=response_values,
    error_answer=error_answer,
    request_values=request_values,
    response_data=response_data,
)
