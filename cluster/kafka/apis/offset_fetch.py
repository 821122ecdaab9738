"""OffsetFetch (API key 9): a group's committed positions
(``GroupCoordinator.handleFetchOffsets``). Kafka 2.7 serves v0-v7; v0 (offsets in
ZooKeeper) is not in the wire codec kemu uses, so kemu serves v1-v7: v2 adds null topics
(every committed offset) and the top-level error, v5 the committed leader epoch, v6 is
flexible, v7 adds RequireStable."""

from __future__ import annotations

from typing import Any

from cluster.kafka.apis.api_codec import ApiCodec, Values
from cluster.kafka.codec import as_error_code, as_millis
from cluster.kafka.framing import KafkaRequest
from protocol.errors import ErrorCode
from protocol.group import (
    OffsetFetchPartitionResponse,
    OffsetFetchRequestData,
    OffsetFetchResponseData,
    OffsetFetchTopic,
    OffsetFetchTopicResponse,
)
from protocol.ids import TopicName
from protocol.kafka_api import ClientApiKey


def request_data(body: Any, version: int) -> OffsetFetchRequestData:
    del version
    topics = body.topics
    return OffsetFetchRequestData(
        group_id=body.group_id,
        topics=None
        if topics is None
        else tuple(
            OffsetFetchTopic(
                name=TopicName(t.name), partition_indexes=tuple(int(p) for p in t.partition_indexes)
            )
            for t in topics
        ),
        require_stable=bool(getattr(body, "require_stable", False)),
    )


def response_values(data: OffsetFetchResponseData, request: KafkaRequest) -> Values:
    del request
    return {
        "throttle_time": data.throttle_time_ms,
        "error_code": data.error_code,
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "committed_offset": p.committed_offset,
                        "committed_leader_epoch": p.committed_leader_epoch,
                        "metadata": p.metadata,
                        "error_code": p.error_code,
                    }
                    for p in t.partitions
                ],
            }
            for t in data.topics
        ],
    }


def error_answer(
    data: OffsetFetchRequestData, code: ErrorCode, message: str | None
) -> OffsetFetchResponseData:
    """``OffsetFetchRequest.getErrorResponse``: the top-level code, and every partition
    asked (v0-v1 have only those)."""
    del message
    return OffsetFetchResponseData(
        error_code=code,
        topics=tuple(
            OffsetFetchTopicResponse(
                name=t.name,
                partitions=tuple(
                    OffsetFetchPartitionResponse(partition_index=p, error_code=code)
                    for p in t.partition_indexes
                ),
            )
            for t in data.topics or ()
        ),
    )


def request_values(data: OffsetFetchRequestData) -> Values:
    return {
        "group_id": data.group_id,
        "require_stable": data.require_stable,
        "topics": None
        if data.topics is None
        else [
            {"name": t.name, "partition_indexes": list(t.partition_indexes)} for t in data.topics
        ],
    }


def response_data(body: Any) -> OffsetFetchResponseData:
    return OffsetFetchResponseData(
        throttle_time_ms=as_millis(getattr(body, "throttle_time", 0)),
        error_code=as_error_code(getattr(body, "error_code", 0)),
        topics=tuple(
            OffsetFetchTopicResponse(
                name=TopicName(t.name),
                partitions=tuple(
                    OffsetFetchPartitionResponse(
                        partition_index=int(p.partition_index),
                        committed_offset=int(p.committed_offset),
                        committed_leader_epoch=int(getattr(p, "committed_leader_epoch", -1)),
                        metadata=p.metadata,
                        error_code=as_error_code(p.error_code),
                    )
                    for p in t.partitions
                ),
            )
            for t in body.topics
        ),
    )


CODEC = ApiCodec(
    api_key=ClientApiKey.OFFSET_FETCH,
    versions=(1, 7),
    client_version=7,
    request_type=OffsetFetchRequestData,
    response_type=OffsetFetchResponseData,
    request_data=request_data,
    response_values=response_values,
    error_answer=error_answer,
    request_values=request_values,
    response_data=response_data,
)
