"""ListOffsets (API key 2): the earliest, latest or first-at-a-timestamp offset of
partitions, answered by the leader (``KafkaApis.handleListOffsetRequest``), v0-v5. v0
(``cluster.kafka.legacy``'s schema) asks for up to ``max_num_offsets`` offsets before a
time and is answered with their list (``old_style_offsets``)."""

from __future__ import annotations

from typing import Any

from cluster.kafka.apis.api_codec import ApiCodec, Values
from cluster.kafka.codec import as_error_code, as_millis
from cluster.kafka.framing import KafkaRequest
from protocol.errors import ErrorCode
from protocol.ids import TopicName
from protocol.kafka_api import ClientApiKey
from protocol.kafka_data import (
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequestData,
    ListOffsetsResponseData,
    ListOffsetsTopic,
    ListOffsetsTopicResponse,
)


def request_data(body: Any, version: int) -> ListOffsetsRequestData:
    return ListOffsetsRequestData(
        version=version,
        replica_id=int(body.replica_id),
        isolation_level=int(getattr(body, "isolation_level", 0)),
        topics=tuple(
            ListOffsetsTopic(
                name=TopicName(t.name),
                partitions=tuple(
                    ListOffsetsPartition(
                        partition_index=int(p.partition_index),
                        timestamp=int(p.timestamp),
                        current_leader_epoch=int(getattr(p, "current_leader_epoch", -1)),
                        max_num_offsets=int(getattr(p, "max_num_offsets", 1)),
                    )
                    for p in t.partitions
                ),
            )
            for t in body.topics
        ),
    )


def response_values(data: ListOffsetsResponseData, request: KafkaRequest) -> Values:
    del request
    return {
        "throttle_time": data.throttle_time_ms,
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": p.error_code,
                        "timestamp": p.timestamp,
                        "offset": p.offset,
                        "leader_epoch": p.leader_epoch,
                        "old_style_offsets": p.old_style_offsets,
                    }
                    for p in t.partitions
                ],
            }
            for t in data.topics
        ],
    }


def error_answer(
    data: ListOffsetsRequestData, code: ErrorCode, message: str | None
) -> ListOffsetsResponseData:
    """``ListOffsetRequest.getErrorResponse``: every partition fails, offset and timestamp
    -1."""
    del message  # ListOffsets has no error message
    return ListOffsetsResponseData(
        topics=tuple(
            ListOffsetsTopicResponse(
                name=t.name,
                partitions=tuple(
                    ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=code)
                    for p in t.partitions
                ),
            )
            for t in data.topics
        )
    )


def request_values(data: ListOffsetsRequestData) -> Values:
    return {
        "replica_id": data.replica_id,
        "isolation_level": data.isolation_level,
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "current_leader_epoch": p.current_leader_epoch,
                        "timestamp": p.timestamp,
                        "max_num_offsets": p.max_num_offsets,
                    }
                    for p in t.partitions
                ],
            }
            for t in data.topics
        ],
    }


def response_data(body: Any) -> ListOffsetsResponseData:
    return ListOffsetsResponseData(
        throttle_time_ms=as_millis(getattr(body, "throttle_time", 0)),
        topics=tuple(
            ListOffsetsTopicResponse(
                name=TopicName(t.name),
                partitions=tuple(
                    ListOffsetsPartitionResponse(
                        partition_index=int(p.partition_index),
                        error_code=as_error_code(p.error_code),
                        timestamp=int(getattr(p, "timestamp", -1)),
                        offset=int(getattr(p, "offset", -1)),
                        leader_epoch=int(getattr(p, "leader_epoch", -1)),
                        old_style_offsets=tuple(
                            int(o) for o in getattr(p, "old_style_offsets", ())
                        ),
                    )
                    for p in t.partitions
                ),
            )
            for t in body.topics
        ),
    )


CODEC = ApiCodec(
    api_key=ClientApiKey.LIST_OFFSETS,
    versions=(0, 5),
    client_version=5,
    request_type=ListOffsetsRequestData,
    response_type=ListOffsetsResponseData,
    request_data=request_data,
    response_values=response_values,
    error_answer=error_answer,
    request_values=request_values,
    response_data=response_data,
)
