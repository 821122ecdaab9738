"""SyncGroup (API key 14): the leader hands out the assignment, every member gets its
own (``GroupCoordinator.handleSyncGroup``). kemu serves Kafka 2.7's v0-v5 (v3 adds the
group instance id, v4 is flexible, v5 the protocol type and name both ways)."""

from __future__ import annotations

from typing import Any

from cluster.kafka.apis.api_codec import ApiCodec, Values
from cluster.kafka.codec import as_error_code, as_millis
from cluster.kafka.framing import KafkaRequest
from protocol.errors import ErrorCode
from protocol.group import SyncGroupAssignment, SyncGroupRequestData, SyncGroupResponseData
from protocol.kafka_api import ClientApiKey


def request_data(body: Any, version: int) -> SyncGroupRequestData:
    del version
    return SyncGroupRequestData(
        group_id=body.group_id,
        generation_id=int(body.generation_id),
        member_id=body.member_id,
        group_instance_id=getattr(body, "group_instance_id", None),
        protocol_type=getattr(body, "protocol_type", None),
        protocol_name=getattr(body, "protocol_name", None),
        assignments=tuple(
            SyncGroupAssignment(member_id=a.member_id, assignment=bytes(a.assignment))
            for a in body.assignments
        ),
    )


def response_values(data: SyncGroupResponseData, request: KafkaRequest) -> Values:
    del request
    return {
        "throttle_time": data.throttle_time_ms,
        "error_code": data.error_code,
        "protocol_type": data.protocol_type,
        "protocol_name": data.protocol_name,
        "assignment": data.assignment,
    }


def error_answer(
    data: SyncGroupRequestData, code: ErrorCode, message: str | None
) -> SyncGroupResponseData:
    del data, message
    return SyncGroupResponseData(error_code=code)


def request_values(data: SyncGroupRequestData) -> Values:
    return {
        "group_id": data.group_id,
        "generation_id": data.generation_id,
        "member_id": data.member_id,
        "group_instance_id": data.group_instance_id,
        "protocol_type": data.protocol_type,
        "protocol_name": data.protocol_name,
        "assignments": [
            {"member_id": a.member_id, "assignment": a.assignment} for a in data.assignments
        ],
    }


def response_data(body: Any) -> SyncGroupResponseData:
    return SyncGroupResponseData(
        throttle_time_ms=as_millis(getattr(body, "throttle_time", 0)),
        error_code=as_error_code(body.error_code),
        protocol_type=getattr(body, "protocol_type", None),
        protocol_name=getattr(body, "protocol_name", None),
        assignment=bytes(body.assignment),
    )


CODEC = ApiCodec(
    api_key=ClientApiKey.SYNC_GROUP,
    versions=(0, 5),
    client_version=5,
    request_type=SyncGroupRequestData,
    response_type=SyncGroupResponseData,
    request_data=request_data,
    response_values=response_values,
    error_answer=error_answer,
    request_values=request_values,
    response_data=response_data,
)
