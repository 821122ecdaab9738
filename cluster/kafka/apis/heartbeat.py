"""Heartbeat (API key 12): a group member says it is alive
(``GroupCoordinator.handleHeartbeat``). kemu serves Kafka 2.7's v0-v4 (v3 adds the group
instance id, v4 is flexible)."""

from __future__ import annotations

from typing import Any

from cluster.kafka.apis.api_codec import ApiCodec, Values
from cluster.kafka.codec import as_error_code, as_millis
from cluster.kafka.framing import KafkaRequest
from protocol.errors import ErrorCode
from protocol.group import HeartbeatRequestData, HeartbeatResponseData
from protocol.kafka_api import ClientApiKey


def request_data(body: Any, version: int) -> HeartbeatRequestData:
    del version
    return HeartbeatRequestData(
        group_id=body.group_id,
        generation_id=int(body.generation_id),
        member_id=body.member_id,
        group_instance_id=getattr(body, "group_instance_id", None),
    )


def response_values(data: HeartbeatResponseData, request: KafkaRequest) -> Values:
    del request
    return {"throttle_time": data.throttle_time_ms, "error_code": data.error_code}


def error_answer(
    data: HeartbeatRequestData, code: ErrorCode, message: str | None
) -> HeartbeatResponseData:
    del data, message
    return HeartbeatResponseData(error_code=code)


def request_values(data: HeartbeatRequestData) -> Values:
    return {
        "group_id": data.group_id,
        "generation_id": data.generation_id,
        "member_id": data.member_id,
        "group_instance_id": data.group_instance_id,
    }


def response_data(body: Any) -> HeartbeatResponseData:
    return HeartbeatResponseData(
        throttle_time_ms=as_millis(getattr(body, "throttle_time", 0)),
        error_code=as_error_code(body.error_code),
    )


CODEC = ApiCodec(
    api_key=ClientApiKey.HEARTBEAT,
    versions=(0, 4),
    client_version=4,
    request_type=HeartbeatRequestData,
    response_type=HeartbeatResponseData,
    request_data=request_data,
    response_values=response_values,
    error_answer=error_answer,
    request_values=request_values,
    response_data=response_data,
)
