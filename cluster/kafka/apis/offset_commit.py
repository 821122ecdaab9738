"""OffsetCommit (API key 8): a group's consumed positions
(``GroupCoordinator.handleCommitOffsets``). Kafka 2.7 serves v0-v8; v0 (offsets in
ZooKeeper) and v1 are not in the wire codec kemu uses, so kemu serves v2-v8: v2-v4
carry a retention time, v6 the committed leader epoch, v7 the group instance id, v8 is
flexible."""

from __future__ import annotations

from typing import Any

from cluster.kafka.apis.api_codec import ApiCodec, Values
from cluster.kafka.codec import as_error_code, as_millis
from cluster.kafka.framing import KafkaRequest
from protocol.errors import ErrorCode
from protocol.group import (
    OffsetCommitPartition,
    OffsetCommitPartitionResponse,
    OffsetCommitRequestData,
    OffsetCommitResponseData,
    OffsetCommitTopic,
    OffsetCommitTopicResponse,
)
from protocol.ids import TopicName
from protocol.kafka_api import ClientApiKey


def request_data(body: Any, version: int) -> OffsetCommitRequestData:
    del version
    return OffsetCommitRequestData(
        group_id=body.group_id,
        generation_id=int(body.generation_id_or_member_epoch),
        member_id=body.member_id,
        group_instance_id=getattr(body, "group_instance_id", None),
        retention_time_ms=as_millis(getattr(body, "retention_time", -1)),
        topics=tuple(
            OffsetCommitTopic(
                name=TopicName(t.name),
                partitions=tuple(
                    OffsetCommitPartition(
                        partition_index=int(p.partition_index),
                        committed_offset=int(p.committed_offset),
                        committed_leader_epoch=int(getattr(p, "committed_leader_epoch", -1)),
                        committed_metadata=p.committed_metadata,
                    )
                    for p in t.partitions
                ),
            )
            for t in body.topics
        ),
    )


def response_values(data: OffsetCommitResponseData, request: KafkaRequest) -> Values:
    del request
    return {
        "throttle_time": data.throttle_time_ms,
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {"partition_index": p.partition_index, "error_code": p.error_code}
                    for p in t.partitions
                ],
            }
            for t in data.topics
        ],
    }


def error_answer(
    data: OffsetCommitRequestData, code: ErrorCode, message: str | None
) -> OffsetCommitResponseData:
    """``OffsetCommitRequest.getErrorResponse``: every partition fails with the code."""
    del message
    return OffsetCommitResponseData(
        topics=tuple(
            OffsetCommitTopicResponse(
                name=t.name,
                partitions=tuple(
                    OffsetCommitPartitionResponse(
                        partition_index=p.partition_index, error_code=code
                    )
                    for p in t.partitions
                ),
            )
            for t in data.topics
        )
    )


def request_values(data: OffsetCommitRequestData) -> Values:
    return {
        "group_id": data.group_id,
        "generation_id_or_member_epoch": data.generation_id,
        "member_id": data.member_id,
        "group_instance_id": data.group_instance_id,
        "retention_time": data.retention_time_ms,
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "committed_offset": p.committed_offset,
                        "committed_leader_epoch": p.committed_leader_epoch,
                        "committed_metadata": p.committed_metadata,
                    }
                    for p in t.partitions
                ],
            }
            for t in data.topics
        ],
    }


def partition_results(topics: Any) -> tuple[OffsetCommitTopicResponse, ...]:
    """Each topic's partitions with their codes, as OffsetCommit and OffsetDelete answer
    them."""
    return tuple(
        OffsetCommitTopicResponse(
            name=TopicName(t.name),
            partitions=tuple(
                OffsetCommitPartitionResponse(
                    partition_index=int(p.partition_index),
                    error_code=as_error_code(p.error_code),
                )
                for p in t.partitions
            ),
        )
        for t in topics
    )


def response_data(body: Any) -> OffsetCommitResponseData:
    return OffsetCommitResponseData(
        throttle_time_ms=as_millis(getattr(body, "throttle_time", 0)),
        topics=partition_results(body.topics),
    )


CODEC = ApiCodec(
    api_key=ClientApiKey.OFFSET_COMMIT,
    versions=(2, 8),
    client_version=8,
    request_type=OffsetCommitRequestData,
    response_type=OffsetCommitResponseData,
    request_data=request_data,
    response_values=response_values,
    error_answer=error_answer,
    request_values=request_values,
    response_data=response_data,
)
