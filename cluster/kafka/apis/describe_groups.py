"""DescribeGroups (API key 15): groups' state, protocol and members
(``GroupCoordinator.handleDescribeGroup``). kemu serves Kafka 2.7's v0-v5 (v1 adds the
throttle time, v3 the authorized operations, v4 the members' group instance ids, v5 is
flexible)."""

from __future__ import annotations

from typing import Any

from cluster.kafka.apis.api_codec import ApiCodec, Values
from cluster.kafka.codec import as_error_code, as_millis
from cluster.kafka.framing import KafkaRequest
from protocol.errors import ErrorCode
from protocol.group import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsRequestData,
    DescribeGroupsResponseData,
)
from protocol.kafka_api import ClientApiKey


def request_data(body: Any, version: int) -> DescribeGroupsRequestData:
    del version
    return DescribeGroupsRequestData(
        groups=tuple(body.groups),
        include_authorized_operations=bool(getattr(body, "include_authorized_operations", False)),
    )


def response_values(data: DescribeGroupsResponseData, request: KafkaRequest) -> Values:
    del request
    return {
        "throttle_time": data.throttle_time_ms,
        "groups": [
            {
                "error_code": g.error_code,
                "group_id": g.group_id,
                "group_state": g.group_state,
                "protocol_type": g.protocol_type,
                "protocol_data": g.protocol_data,
                "authorized_operations": g.authorized_operations,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "member_metadata": m.member_metadata,
                        "member_assignment": m.member_assignment,
                    }
                    for m in g.members
                ],
            }
            for g in data.groups
        ],
    }


def error_answer(
    data: DescribeGroupsRequestData, code: ErrorCode, message: str | None
) -> DescribeGroupsResponseData:
    """``DescribeGroupsRequest.getErrorResponse``: every group fails with the code."""
    del message
    return DescribeGroupsResponseData(
        groups=tuple(DescribedGroup(group_id=g, error_code=code) for g in data.groups)
    )


def request_values(data: DescribeGroupsRequestData) -> Values:
    return {
        "groups": list(data.groups),
        "include_authorized_operations": data.include_authorized_operations,
    }


def response_data(body: Any) -> DescribeGroupsResponseData:
    return DescribeGroupsResponseData(
        throttle_time_ms=as_millis(getattr(body, "throttle_time", 0)),
        groups=tuple(
            DescribedGroup(
                group_id=g.group_id,
                error_code=as_error_code(g.error_code),
                group_state=g.group_state,
                protocol_type=g.protocol_type,
                protocol_data=g.protocol_data,
                authorized_operations=int(getattr(g, "authorized_operations", -(2**31))),
                members=tuple(
                    DescribedGroupMember(
                        member_id=m.member_id,
                        group_instance_id=getattr(m, "group_instance_id", None),
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=bytes(m.member_metadata),
                        member_assignment=bytes(m.member_assignment),
                    )
                    for m in g.members
                ),
            )
            for g in body.groups
        ),
    )


CODEC = ApiCodec(
    api_key=ClientApiKey.DESCRIBE_GROUPS,
    versions=(0, 5),
    client_version=5,
    request_type=DescribeGroupsRequestData,
    response_type=DescribeGroupsResponseData,
    request_data=request_data,
    response_values=response_values,
    error_answer=error_answer,
    request_values=request_values,
    response_data=response_data,
)
