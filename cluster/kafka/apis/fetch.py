"""Fetch (API key 1): records from partitions, for consumers (``replica_id`` -1) and for
followers (their broker id), answered by the leader (``KafkaApis.handleFetchRequest``).
The codec has no v0-v3, so kemu serves v4-v12 (v12 is flexible and carries the tagged
``diverging_epoch`` and ``current_leader``). Records go out as the log holds them. kemu
opens no fetch sessions: the answer's ``session_id`` is 0, as Kafka's when it creates
none."""

from __future__ import annotations

from typing import Any

from cluster.kafka.apis.api_codec import ApiCodec, Values
from cluster.kafka.codec import as_error_code, as_millis
from cluster.kafka.framing import KafkaRequest
from protocol.errors import ErrorCode
from protocol.ids import TopicName
from protocol.kafka_api import ClientApiKey
from protocol.kafka_data import (
    AbortedTransaction,
    EpochEndOffset,
    FetchPartition,
    FetchPartitionData,
    FetchRequestData,
    FetchResponseData,
    FetchTopic,
    FetchTopicResponse,
    ForgottenTopic,
    LeaderIdAndEpoch,
)


def request_data(body: Any, version: int) -> FetchRequestData:
    del version  # fields a version lacks have the schema's defaults in the codec
    return FetchRequestData(
        replica_id=int(body.replica_id),
        max_wait_ms=as_millis(body.max_wait),
        min_bytes=int(body.min_bytes),
        max_bytes=int(body.max_bytes),
        isolation_level=int(body.isolation_level),
        session_id=int(getattr(body, "session_id", 0)),
        session_epoch=int(getattr(body, "session_epoch", -1)),
        topics=tuple(
            FetchTopic(
                topic=TopicName(t.topic),
                partitions=tuple(
                    FetchPartition(
                        partition=int(p.partition),
                        current_leader_epoch=int(getattr(p, "current_leader_epoch", -1)),
                        fetch_offset=int(p.fetch_offset),
                        last_fetched_epoch=int(getattr(p, "last_fetched_epoch", -1)),
                        log_start_offset=int(getattr(p, "log_start_offset", -1)),
                        partition_max_bytes=int(p.partition_max_bytes),
                    )
                    for p in t.partitions
                ),
            )
            for t in body.topics
        ),
        forgotten_topics_data=tuple(
            ForgottenTopic(topic=TopicName(f.topic), partitions=tuple(int(i) for i in f.partitions))
            for f in getattr(body, "forgotten_topics_data", ())
        ),
        rack_id=str(getattr(body, "rack_id", "")),
    )


def _partition_values(p: FetchPartitionData) -> Values:
    values: Values = {
        "partition_index": p.partition_index,
        "error_code": p.error_code,
        "high_watermark": p.high_watermark,
        "last_stable_offset": p.last_stable_offset,
        "log_start_offset": p.log_start_offset,
        "aborted_transactions": None
        if p.aborted_transactions is None
        else [
            {"producer_id": a.producer_id, "first_offset": a.first_offset}
            for a in p.aborted_transactions
        ],
        "preferred_read_replica": p.preferred_read_replica,
        "records": p.records,
    }
    if p.diverging_epoch is not None:  # tagged (v12): absent unless set
        values["diverging_epoch"] = {
            "epoch": p.diverging_epoch.epoch,
            "end_offset": p.diverging_epoch.end_offset,
        }
    if p.current_leader is not None:
        values["current_leader"] = {
            "leader_id": p.current_leader.leader_id,
            "leader_epoch": p.current_leader.leader_epoch,
        }
    return values


def response_values(data: FetchResponseData, request: KafkaRequest) -> Values:
    del request
    return {
        "throttle_time": data.throttle_time_ms,
        "error_code": data.error_code,
        "session_id": data.session_id,
        "responses": [
            {"topic": t.topic, "partitions": [_partition_values(p) for p in t.partitions]}
            for t in data.responses
        ],
    }


def error_answer(data: FetchRequestData, code: ErrorCode, message: str | None) -> FetchResponseData:
    """``FetchRequest.getErrorResponse``: the code at the top (v7+) and in every partition
    (older versions have no other place for it), no records, the request's session."""
    del message  # Fetch has no error message
    return FetchResponseData(
        error_code=code,
        session_id=data.session_id,
        responses=tuple(
            FetchTopicResponse(
                topic=t.topic,
                partitions=tuple(
                    FetchPartitionData(partition_index=p.partition, error_code=code)
                    for p in t.partitions
                ),
            )
            for t in data.topics
        ),
    )


def request_values(data: FetchRequestData) -> Values:
    return {
        "replica_id": data.replica_id,
        "max_wait": data.max_wait_ms,
        "min_bytes": data.min_bytes,
        "max_bytes": data.max_bytes,
        "isolation_level": data.isolation_level,
        "session_id": data.session_id,
        "session_epoch": data.session_epoch,
        "topics": [
            {
                "topic": t.topic,
                "partitions": [
                    {
                        "partition": p.partition,
                        "current_leader_epoch": p.current_leader_epoch,
                        "fetch_offset": p.fetch_offset,
                        "last_fetched_epoch": p.last_fetched_epoch,
                        "log_start_offset": p.log_start_offset,
                        "partition_max_bytes": p.partition_max_bytes,
                    }
                    for p in t.partitions
                ],
            }
            for t in data.topics
        ],
        "forgotten_topics_data": [
            {"topic": f.topic, "partitions": f.partitions} for f in data.forgotten_topics_data
        ],
        "rack_id": data.rack_id,
    }


def _tagged_epoch(value: Any) -> EpochEndOffset | None:
    if value is None or (value.epoch == -1 and value.end_offset == -1):
        return None
    return EpochEndOffset(epoch=int(value.epoch), end_offset=int(value.end_offset))


def _tagged_leader(value: Any) -> LeaderIdAndEpoch | None:
    if value is None or (value.leader_id == -1 and value.leader_epoch == -1):
        return None
    return LeaderIdAndEpoch(leader_id=int(value.leader_id), leader_epoch=int(value.leader_epoch))


def _partition_data(p: Any) -> FetchPartitionData:
    aborted = getattr(p, "aborted_transactions", None)
    return FetchPartitionData(
        partition_index=int(p.partition_index),
        error_code=as_error_code(p.error_code),
        high_watermark=int(p.high_watermark),
        last_stable_offset=int(getattr(p, "last_stable_offset", -1)),
        log_start_offset=int(getattr(p, "log_start_offset", -1)),
        diverging_epoch=_tagged_epoch(getattr(p, "diverging_epoch", None)),
        current_leader=_tagged_leader(getattr(p, "current_leader", None)),
        aborted_transactions=None
        if aborted is None
        else tuple(
            AbortedTransaction(producer_id=int(a.producer_id), first_offset=int(a.first_offset))
            for a in aborted
        ),
        preferred_read_replica=int(getattr(p, "preferred_read_replica", -1)),
        records=b"" if p.records is None else p.records,
    )


def response_data(body: Any) -> FetchResponseData:
    return FetchResponseData(
        throttle_time_ms=as_millis(getattr(body, "throttle_time", 0)),
        error_code=as_error_code(getattr(body, "error_code", 0)),
        session_id=int(getattr(body, "session_id", 0)),
        responses=tuple(
            FetchTopicResponse(
                topic=TopicName(t.topic),
                partitions=tuple(_partition_data(p) for p in t.partitions),
            )
            for t in body.responses
        ),
    )


CODEC = ApiCodec(
    api_key=ClientApiKey.FETCH,
    versions=(4, 12),
    client_version=12,
    request_type=FetchRequestData,
    response_type=FetchResponseData,
    request_data=request_data,
    response_values=response_values,
    error_answer=error_answer,
    request_values=request_values,
    response_data=response_data,
)
