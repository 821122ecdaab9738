"""Produce (API key 0): records for partitions, answered by each partition's leader
(``KafkaApis.handleProduceRequest``), v0-v8. From v3 every partition carries exactly one
magic-v2 batch (``protocol.kafka_data.validate_records``) and the records pass through as
the bytes the client sent; v0-v2 (``cluster.kafka.legacy``'s schemas) carry message sets of
formats v0/v1, which the listener up-converts to one v2 batch first (``up_converted``). A
request with ``acks`` 0 gets no response at all (the listener's business)."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from typing import Any

from cluster.kafka.apis.api_codec import ApiCodec, Values
from cluster.kafka.codec import as_error_code, as_millis
from cluster.kafka.framing import KafkaRequest
from cluster.kafka.message_sets import LegacyRecordsError, up_convert
from protocol.errors import ErrorCode
from protocol.ids import TopicName
from protocol.kafka_api import ClientApiKey
from protocol.kafka_data import (
    ProducePartitionData,
    ProducePartitionResponse,
    ProduceRequestData,
    ProduceResponseData,
    ProduceTopicData,
    ProduceTopicResponse,
    RecordError,
    validate_records,
)

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def request_data(body: Any, version: int) -> ProduceRequestData:
    return ProduceRequestData(
        acks=int(body.acks),
        timeout_ms=as_millis(body.timeout),
        transactional_id=getattr(body, "transactional_id", None),
        topic_data=tuple(
            ProduceTopicData(
                name=TopicName(t.name),
                partition_data=tuple(
                    ProducePartitionData(index=int(p.index), records=p.records)
                    for p in t.partition_data
                ),
            )
            for t in body.topic_data
        ),
        version=version,
    )


def _append_time(ms: int) -> datetime.datetime | None:
    """``log_append_time`` is a timestamp in the codec; -1 (CreateTime) is its null."""
    return None if ms < 0 else _EPOCH + datetime.timedelta(milliseconds=ms)


def _append_time_ms(value: Any) -> int:
    if value is None:
        return -1
    if isinstance(value, datetime.datetime):
        return (value - _EPOCH) // datetime.timedelta(milliseconds=1)
    return int(value)


def response_values(data: ProduceResponseData, request: KafkaRequest) -> Values:
    del request  # what a version lacks is dropped by ``build``
    return {
        "throttle_time": data.throttle_time_ms,
        "responses": [
            {
                "name": t.name,
                "partition_responses": [
                    {
                        "index": p.index,
                        "error_code": p.error_code,
                        "base_offset": p.base_offset,
                        "log_append_time": _append_time(p.log_append_time_ms),
                        "log_start_offset": p.log_start_offset,
                        "record_errors": [
                            {
                                "batch_index": e.batch_index,
                                "batch_index_error_message": e.batch_index_error_message,
                            }
                            for e in p.record_errors
                        ],
                        "error_message": p.error_message,
                    }
                    for p in t.partition_responses
                ],
            }
            for t in data.responses
        ],
    }


def error_answer(
    data: ProduceRequestData, code: ErrorCode, message: str | None
) -> ProduceResponseData:
    """``ProduceRequest.getErrorResponse``: every partition fails with the code."""
    return ProduceResponseData(
        responses=tuple(
            ProduceTopicResponse(
                name=t.name,
                partition_responses=tuple(
                    ProducePartitionResponse(index=p.index, error_code=code, error_message=message)
                    for p in t.partition_data
                ),
            )
            for t in data.topic_data
        )
    )


def request_values(data: ProduceRequestData) -> Values:
    return {
        "transactional_id": data.transactional_id,
        "acks": data.acks,
        "timeout": data.timeout_ms,
        "topic_data": [
            {
                "name": t.name,
                "partition_data": [
                    {"index": p.index, "records": p.records} for p in t.partition_data
                ],
            }
            for t in data.topic_data
        ],
    }


def response_data(body: Any) -> ProduceResponseData:
    return ProduceResponseData(
        responses=tuple(
            ProduceTopicResponse(
                name=TopicName(t.name),
                partition_responses=tuple(
                    ProducePartitionResponse(
                        index=int(p.index),
                        error_code=as_error_code(p.error_code),
                        base_offset=int(p.base_offset),
                        log_append_time_ms=_append_time_ms(getattr(p, "log_append_time", None)),
                        log_start_offset=int(getattr(p, "log_start_offset", -1)),
                        record_errors=tuple(
                            RecordError(
                                batch_index=int(e.batch_index),
                                batch_index_error_message=e.batch_index_error_message,
                            )
                            for e in getattr(p, "record_errors", ())
                        ),
                        error_message=getattr(p, "error_message", None),
                    )
                    for p in t.partition_responses
                ),
            )
            for t in body.responses
        ),
        throttle_time_ms=as_millis(getattr(body, "throttle_time", 0)),
    )


def invalid_partitions(body: Any, version: int) -> dict[tuple[str, int], ErrorCode]:
    """The partitions of a decoded Produce whose records Kafka's
    ``ProduceRequest.validateRecords`` refuses (``validate_records``), with their codes."""
    found: dict[tuple[str, int], ErrorCode] = {}
    for topic in body.topic_data:
        for partition in topic.partition_data:
            code = validate_records(partition.records, version)
            if code is not ErrorCode.NONE:
                found[(str(topic.name), int(partition.index))] = code
    return found


def up_converted(body: Any) -> tuple[Any, dict[tuple[str, int], ErrorCode]]:
    """A decoded Produce v0-v2 with each partition's legacy messages made one v2 batch
    (``message_sets.up_convert``; records already v2 as sent, a partition without a whole
    message empty), and the partitions whose records a 2.7 broker refuses, with its codes
    (they keep their records here: ``without_partitions`` drops them)."""
    refused: dict[tuple[str, int], ErrorCode] = {}
    topics = []
    for topic in body.topic_data:
        partitions = []
        for partition in topic.partition_data:
            try:
                converted = up_convert(bytes(partition.records or b""))
            except LegacyRecordsError as exc:
                refused[(str(topic.name), int(partition.index))] = exc.code
                converted = b""
            partitions.append(dataclasses.replace(partition, records=converted))
        topics.append(dataclasses.replace(topic, partition_data=tuple(partitions)))
    return dataclasses.replace(body, topic_data=tuple(topics)), refused


def without_partitions(body: Any, dropped: Mapping[tuple[str, int], ErrorCode]) -> Any | None:
    """The decoded Produce without the ``dropped`` partitions (and topics left with none);
    ``None`` when nothing is left."""
    topics = []
    for topic in body.topic_data:
        kept = tuple(
            p for p in topic.partition_data if (str(topic.name), int(p.index)) not in dropped
        )
        if kept:
            topics.append(dataclasses.replace(topic, partition_data=kept))
    return dataclasses.replace(body, topic_data=tuple(topics)) if topics else None


def with_refused(
    data: ProduceResponseData | None, refused: Mapping[tuple[str, int], ErrorCode]
) -> ProduceResponseData:
    """The broker's answer (``None``: it was asked nothing) with the ``refused``
    partitions' codes added, topic by topic."""
    topics = {t.name: list(t.partition_responses) for t in (data.responses if data else ())}
    for (name, index), code in refused.items():
        topics.setdefault(TopicName(name), []).append(
            ProducePartitionResponse(index=index, error_code=code)
        )
    return ProduceResponseData(
        responses=tuple(
            ProduceTopicResponse(name=name, partition_responses=tuple(answers))
            for name, answers in topics.items()
        ),
        throttle_time_ms=data.throttle_time_ms if data else 0,
    )


CODEC = ApiCodec(
    api_key=ClientApiKey.PRODUCE,
    versions=(0, 8),
    client_version=8,
    request_type=ProduceRequestData,
    response_type=ProduceResponseData,
    request_data=request_data,
    response_values=response_values,
    error_answer=error_answer,
    request_values=request_values,
    response_data=response_data,
)
