"""JoinGroup (API key 11): a member joins a group's next generation
(``GroupCoordinator.handleJoinGroup``). kemu serves Kafka 2.7's v0-v7: v1 adds the
rebalance timeout (v0's is the session timeout), v4 the MEMBER_ID_REQUIRED round trip,
v5 the group instance id, v6 is flexible, v7 answers the protocol type."""

from __future__ import annotations

from typing import Any

import msgspec

from cluster.kafka.apis.api_codec import ApiCodec, Values
from cluster.kafka.codec import as_error_code, as_millis
from cluster.kafka.framing import KafkaRequest
from protocol.errors import ErrorCode
from protocol.group import (
    JoinGroupMember,
    JoinGroupProtocol,
    JoinGroupRequestData,
    JoinGroupResponseData,
)
from protocol.kafka_api import ClientApiKey

_NULLABLE_PROTOCOL_VERSION = 7


def request_data(body: Any, version: int) -> JoinGroupRequestData:
    session = as_millis(body.session_timeout)
    return JoinGroupRequestData(
        group_id=body.group_id,
        session_timeout_ms=session,
        rebalance_timeout_ms=as_millis(getattr(body, "rebalance_timeout", session)),
        member_id=body.member_id,
        group_instance_id=getattr(body, "group_instance_id", None),
        protocol_type=body.protocol_type,
        protocols=tuple(
            JoinGroupProtocol(name=p.name, metadata=bytes(p.metadata)) for p in body.protocols
        ),
        api_version=version,
    )


def with_client(data: JoinGroupRequestData, client_id: str, host: str) -> JoinGroupRequestData:
    return msgspec.structs.replace(data, client_id=client_id, client_host=host)


def response_values(data: JoinGroupResponseData, request: KafkaRequest) -> Values:
    """The protocol name is nullable from v7; before, no protocol is ""
    (``GroupCoordinator.NoProtocol``), as ``KafkaApis.handleJoinGroupRequest`` sends it."""
    protocol_name = data.protocol_name
    if request.api_version < _NULLABLE_PROTOCOL_VERSION and protocol_name is None:
        protocol_name = ""
    return {
        "throttle_time": data.throttle_time_ms,
        "error_code": data.error_code,
        "generation_id": data.generation_id,
        "protocol_type": data.protocol_type,
        "protocol_name": protocol_name,
        "leader": data.leader,
        "member_id": data.member_id,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "metadata": m.metadata,
            }
            for m in data.members
        ],
    }


def error_answer(
    data: JoinGroupRequestData, code: ErrorCode, message: str | None
) -> JoinGroupResponseData:
    """``JoinGroupRequest.getErrorResponse``: the code, generation -1, the member id."""
    del message
    return JoinGroupResponseData(error_code=code, member_id=data.member_id)


def request_values(data: JoinGroupRequestData) -> Values:
    return {
        "group_id": data.group_id,
        "session_timeout": data.session_timeout_ms,
        "rebalance_timeout": data.rebalance_timeout_ms,
        "member_id": data.member_id,
        "group_instance_id": data.group_instance_id,
        "protocol_type": data.protocol_type,
        "protocols": [{"name": p.name, "metadata": p.metadata} for p in data.protocols],
    }


def response_data(body: Any) -> JoinGroupResponseData:
    return JoinGroupResponseData(
        throttle_time_ms=as_millis(getattr(body, "throttle_time", 0)),
        error_code=as_error_code(body.error_code),
        generation_id=int(body.generation_id),
        protocol_type=getattr(body, "protocol_type", None),
        protocol_name=body.protocol_name,
        leader=body.leader,
        member_id=body.member_id,
        members=tuple(
            JoinGroupMember(
                member_id=m.member_id,
                group_instance_id=getattr(m, "group_instance_id", None),
                metadata=bytes(m.metadata),
            )
            for m in body.members
        ),
    )


CODEC = ApiCodec(
    api_key=ClientApiKey.JOIN_GROUP,
    versions=(0, 7),
    client_version=7,
    request_type=JoinGroupRequestData,
    response_type=JoinGroupResponseData,
    request_data=request_data,
    response_values=response_values,
    error_answer=error_answer,
    request_values=request_values,
    response_data=response_data,
    with_client=with_client,
)
