"""LeaveGroup (API key 13): members leave a group (``GroupCoordinator.handleLeaveGroup``).
kemu serves Kafka 2.7's v0-v4: v0-v2 name one member and answer one code, v3 names a
batch of members (with instance ids) and answers each, v4 is flexible."""

from __future__ import annotations

from typing import Any

from cluster.kafka.apis.api_codec import ApiCodec, Values
from cluster.kafka.codec import as_error_code, as_millis
from cluster.kafka.framing import KafkaRequest
from protocol.errors import ErrorCode
from protocol.group import (
    LeaveGroupMember,
    LeaveGroupMemberResponse,
    LeaveGroupRequestData,
    LeaveGroupResponseData,
)
from protocol.kafka_api import ClientApiKey

_BATCH_VERSION = 3


def request_data(body: Any, version: int) -> LeaveGroupRequestData:
    if version < _BATCH_VERSION:
        members: tuple[LeaveGroupMember, ...] = (LeaveGroupMember(member_id=body.member_id),)
    else:
        members = tuple(
            LeaveGroupMember(member_id=m.member_id, group_instance_id=m.group_instance_id)
            for m in body.members
        )
    return LeaveGroupRequestData(group_id=body.group_id, members=members)


def response_values(data: LeaveGroupResponseData, request: KafkaRequest) -> Values:
    """v0-v2: the top-level error, else the one member's (``LeaveGroupResponse``'s
    ``getError`` for old versions)."""
    code = data.error_code
    if request.api_version < _BATCH_VERSION and code is ErrorCode.NONE and data.members:
        code = data.members[0].error_code
    return {
        "throttle_time": data.throttle_time_ms,
        "error_code": code,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "error_code": m.error_code,
            }
            for m in data.members
        ],
    }


def error_answer(
    data: LeaveGroupRequestData, code: ErrorCode, message: str | None
) -> LeaveGroupResponseData:
    del data, message
    return LeaveGroupResponseData(error_code=code)


def request_values(data: LeaveGroupRequestData) -> Values:
    return {
        "group_id": data.group_id,
        "member_id": data.members[0].member_id if data.members else "",
        "members": [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id}
            for m in data.members
        ],
    }


def response_data(body: Any) -> LeaveGroupResponseData:
    return LeaveGroupResponseData(
        throttle_time_ms=as_millis(getattr(body, "throttle_time", 0)),
        error_code=as_error_code(body.error_code),
        members=tuple(
            LeaveGroupMemberResponse(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                error_code=as_error_code(m.error_code),
            )
            for m in getattr(body, "members", ())
        ),
    )


CODEC = ApiCodec(
    api_key=ClientApiKey.LEAVE_GROUP,
    versions=(0, 4),
    client_version=4,
    request_type=LeaveGroupRequestData,
    response_type=LeaveGroupResponseData,
    request_data=request_data,
    response_values=response_values,
    error_answer=error_answer,
    request_values=request_values,
    response_data=response_data,
)
