"""OffsetForLeaderEpoch (API key 23): where a leader epoch ends in the leader's log, asked
by a follower before it truncates (``ReplicaManager.lastOffsetForLeaderEpoch``) and by
consumers checking for truncation. v1 adds the answer's leader epoch, v2 the request's
current leader epoch (none before: no fencing) and the throttle time, v3 the replica id."""

from __future__ import annotations

from typing import Any

from cluster.kafka.apis.api_codec import ApiCodec, Values
from cluster.kafka.codec import as_error_code, as_millis
from cluster.kafka.framing import KafkaRequest
from protocol.errors import ErrorCode
from protocol.ids import TopicName
from protocol.kafka_api import ClientApiKey
from protocol.kafka_data import (
    DEBUG_REPLICA_ID,
    OffsetForLeaderEpochRequestData,
    OffsetForLeaderEpochResponseData,
    OffsetForLeaderPartition,
    OffsetForLeaderPartitionResult,
    OffsetForLeaderTopic,
    OffsetForLeaderTopicResult,
)


def request_data(body: Any, version: int) -> OffsetForLeaderEpochRequestData:
    del version
    return OffsetForLeaderEpochRequestData(
        replica_id=int(getattr(body, "replica_id", DEBUG_REPLICA_ID)),
        topics=tuple(
            OffsetForLeaderTopic(
                topic=TopicName(t.topic),
                partitions=tuple(
                    OffsetForLeaderPartition(
                        partition=int(p.partition),
                        current_leader_epoch=int(getattr(p, "current_leader_epoch", -1)),
                        leader_epoch=int(p.leader_epoch),
                    )
                    for p in t.partitions
                ),
            )
            for t in body.topics
        ),
    )


def response_values(data: OffsetForLeaderEpochResponseData, request: KafkaRequest) -> Values:
    del request
    return {
        "throttle_time": data.throttle_time_ms,
        "topics": [
            {
                "topic": t.topic,
                "partitions": [
                    {
                        "error_code": p.error_code,
                        "partition": p.partition,
                        "leader_epoch": p.leader_epoch,
                        "end_offset": p.end_offset,
                    }
                    for p in t.partitions
                ],
            }
            for t in data.topics
        ],
    }


def error_answer(
    data: OffsetForLeaderEpochRequestData, code: ErrorCode, message: str | None
) -> OffsetForLeaderEpochResponseData:
    """``OffsetsForLeaderEpochRequest.getErrorResponse``: every partition fails, with the
    undefined epoch and offset."""
    del message
    return OffsetForLeaderEpochResponseData(
        topics=tuple(
            OffsetForLeaderTopicResult(
                topic=t.topic,
                partitions=tuple(
                    OffsetForLeaderPartitionResult(partition=p.partition, error_code=code)
                    for p in t.partitions
                ),
            )
            for t in data.topics
        )
    )


def request_values(data: OffsetForLeaderEpochRequestData) -> Values:
    return {
        "replica_id": data.replica_id,
        "topics": [
            {
                "topic": t.topic,
                "partitions": [
                    {
                        "partition": p.partition,
                        "current_leader_epoch": p.current_leader_epoch,
                        "leader_epoch": p.leader_epoch,
                    }
                    for p in t.partitions
                ],
            }
            for t in data.topics
        ],
    }


def response_data(body: Any) -> OffsetForLeaderEpochResponseData:
    return OffsetForLeaderEpochResponseData(
        throttle_time_ms=as_millis(getattr(body, "throttle_time", 0)),
        topics=tuple(
            OffsetForLeaderTopicResult(
                topic=TopicName(t.topic),
                partitions=tuple(
                    OffsetForLeaderPartitionResult(
                        partition=int(p.partition),
                        error_code=as_error_code(p.error_code),
                        leader_epoch=int(getattr(p, "leader_epoch", -1)),
                        end_offset=int(p.end_offset),
                    )
                    for p in t.partitions
                ),
            )
            for t in body.topics
        ),
    )


CODEC = ApiCodec(
    api_key=ClientApiKey.OFFSET_FOR_LEADER_EPOCH,
    versions=(0, 3),
    client_version=3,
    request_type=OffsetForLeaderEpochRequestData,
    response_type=OffsetForLeaderEpochResponseData,
    request_data=request_data,
    response_values=response_values,
    error_answer=error_answer,
    request_values=request_values,
    response_data=response_data,
)
