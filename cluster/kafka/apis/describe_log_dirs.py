"""DescribeLogDirs (API key 35): each log directory of the broker with the size of the
logs asked about (``KafkaApis.handleDescribeLogDirsRequest``,
``ReplicaManager.describeLogDirs``). Kafka 2.7 serves v0-v2 (v2 flexible); the codec has
v1 on, v0 is v1's schema (``cluster.kafka.legacy``)."""

from __future__ import annotations

from typing import Any

from cluster.kafka.apis.api_codec import ApiCodec, Values
from cluster.kafka.codec import as_error_code, as_millis
from cluster.kafka.framing import KafkaRequest
from protocol.errors import ErrorCode
from protocol.ids import TopicName
from protocol.kafka_api import (
    ClientApiKey,
    DescribableLogDirTopic,
    DescribeLogDirsPartition,
    DescribeLogDirsRequestData,
    DescribeLogDirsResponseData,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)


def request_data(body: Any, version: int) -> DescribeLogDirsRequestData:
    del version
    return DescribeLogDirsRequestData(
        topics=(
            None
            if body.topics is None
            else tuple(
                DescribableLogDirTopic(
                    topic=TopicName(t.topic), partitions=tuple(int(p) for p in t.partitions)
                )
                for t in body.topics
            )
        )
    )


def response_values(data: DescribeLogDirsResponseData, request: KafkaRequest) -> Values:
    del request
    return {
        "throttle_time": data.throttle_time_ms,
        "results": [
            {
                "error_code": r.error_code,
                "log_dir": r.log_dir,
                "topics": [
                    {
                        "name": t.name,
                        "partitions": [
                            {
                                "partition_index": p.partition_index,
                                "partition_size": p.partition_size,
                                "offset_lag": p.offset_lag,
                                "is_future_key": p.is_future_key,
                            }
                            for p in t.partitions
                        ],
                    }
                    for t in r.topics
                ],
            }
            for r in data.results
        ],
    }


def error_answer(
    data: DescribeLogDirsRequestData, code: ErrorCode, message: str | None
) -> DescribeLogDirsResponseData:
    """``DescribeLogDirsRequest.getErrorResponse``: no result at all (the response has no
    error code of its own)."""
    del data, code, message
    return DescribeLogDirsResponseData()


def request_values(data: DescribeLogDirsRequestData) -> Values:
    return {
        "topics": (
            None
            if data.topics is None
            else [{"topic": t.topic, "partitions": list(t.partitions)} for t in data.topics]
        )
    }


def response_data(body: Any) -> DescribeLogDirsResponseData:
    return DescribeLogDirsResponseData(
        throttle_time_ms=as_millis(body.throttle_time),
        results=tuple(
            DescribeLogDirsResult(
                error_code=as_error_code(r.error_code),
                log_dir=r.log_dir,
                topics=tuple(
                    DescribeLogDirsTopic(
                        name=TopicName(t.name),
                        partitions=tuple(
                            DescribeLogDirsPartition(
                                partition_index=int(p.partition_index),
                                partition_size=int(p.partition_size),
                                offset_lag=int(p.offset_lag),
                                is_future_key=bool(p.is_future_key),
                            )
                            for p in t.partitions
                        ),
                    )
                    for t in r.topics
                ),
            )
            for r in body.results
        ),
    )


CODEC = ApiCodec(
    api_key=ClientApiKey.DESCRIBE_LOG_DIRS,
    versions=(0, 2),
    client_version=2,
    request_type=DescribeLogDirsRequestData,
    response_type=DescribeLogDirsResponseData,
    request_data=request_data,
    response_values=response_values,
    error_answer=error_answer,
    request_values=request_values,
    response_data=response_data,
)
