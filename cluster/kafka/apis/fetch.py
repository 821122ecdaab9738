"""Fetch (API key 1): records from partitions, for consumers (``replica_id`` -1) and for
followers (their broker id), answered by the leader (``KafkaApis.handleFetchRequest``),
v0-v12 (v12 is flexible and carries the tagged ``diverging_epoch`` and ``current_leader``).
From v4 records go out as the log holds them; v0-v3 (``cluster.kafka.legacy``'s schemas)
read message formats v0 (v0-v1) and v1 (v2-v3), to which each partition's v2 batches are
down-converted here (``message_sets.fetch_down_convert``, ``KafkaApis.
maybeConvertFetchedData``). kemu opens no fetch sessions: the answer's ``session_id`` is
0, as Kafka's when it creates none."""

from __future__ import annotations

from typing import Any

import msgspec

from cluster.kafka.apis.api_codec import ApiCodec, Values
from cluster.kafka.codec import as_error_code, as_millis
from cluster.kafka.framing import KafkaRequest
from cluster.kafka.message_sets import LegacyRecordsError, fetch_down_convert
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
    return FetchRequestData(
        version=version,
        replica_id=int(body.replica_id),
        max_wait_ms=as_millis(body.max_wait),
        min_bytes=int(body.min_bytes),
        max_bytes=int(getattr(body, "max_bytes", 0x7FFFFFFF)),
        isolation_level=int(getattr(body, "isolation_level", 0)),
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
    if request.api_version < 4 and request.body is not None:
        data = down_converted(data, request.api_version, request.body)
    return {
        "throttle_time": data.throttle_time_ms,
        "error_code": data.error_code,
        "session_id": data.session_id,
        "responses": [
            {"topic": t.topic, "partitions": [_partition_values(p) for p in t.partitions]}
            for t in data.responses
        ],
    }


def down_converted(data: FetchResponseData, version: int, body: Any) -> FetchResponseData:
    """The answer to a Fetch v0-v3 (``body``) with each partition's records in the message
    format the version reads: v0 for Fetch v0-v1, v1 for v2-v3. A partition whose first
    batch cannot be down-converted (zstd) is UNSUPPORTED_COMPRESSION_TYPE, without offsets
    or records, as ``KafkaApis``' ``errorResponse``."""
    magic = 0 if version <= 1 else 1
    offsets = {
        (str(t.topic), int(p.partition)): int(p.fetch_offset)
        for t in body.topics
        for p in t.partitions
    }
    topics = []
    for topic in data.responses:
        partitions = []
        for p in topic.partitions:
            first_offset = offsets.get((str(topic.topic), p.partition_index), 0)
            try:
                records = fetch_down_convert(p.records, magic, first_offset)
            except LegacyRecordsError as exc:
                p = FetchPartitionData(partition_index=p.partition_index, error_code=exc.code)
                records = b""
            partitions.append(msgspec.structs.replace(p, records=records))
        topics.append(msgspec.structs.replace(topic, partitions=tuple(partitions)))
    return msgspec.structs.replace(data, responses=tuple(topics))


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
    versions=(0, 12),
    client_version=12,
    request_type=FetchRequestData,
    response_type=FetchResponseData,
    request_data=request_data,
    response_values=response_values,
    error_answer=error_answer,
    request_values=request_values,
    response_data=response_data,
)
