"""ElectLeaders (API key 43): preferred (v0+) or unclean (v1+) leader elections for the
partitions asked for, or for every partition (null), carried out by the controller
(``KafkaApis.handleElectReplicaLeader``). kemu serves Kafka 2.7's v0-v2 (v2 is
flexible); v0 has no election type (preferred) and no top-level error code."""

from __future__ import annotations

from typing import Any

from cluster.kafka.apis.api_codec import ApiCodec, Values
from cluster.kafka.codec import as_error_code, as_millis
from cluster.kafka.framing import KafkaRequest
from protocol.errors import ErrorCode
from protocol.ids import TopicName
from protocol.kafka_api import (
    ClientApiKey,
    ElectLeadersPartitionResult,
    ElectLeadersRequestData,
    ElectLeadersResponseData,
    ElectLeadersTopic,
    ElectLeadersTopicResult,
    elect_leaders_error,
)


def request_data(body: Any, version: int) -> ElectLeadersRequestData:
    return ElectLeadersRequestData(
        topic_partitions=(
            None
            if body.topic_partitions is None
            else tuple(
                ElectLeadersTopic(
                    topic=TopicName(t.topic), partitions=tuple(int(p) for p in t.partitions)
                )
                for t in body.topic_partitions
            )
        ),
        election_type=int(body.election_type) if version >= 1 else 0,
        timeout_ms=as_millis(body.timeout),
    )


def response_values(data: ElectLeadersResponseData, request: KafkaRequest) -> Values:
    del request  # v0 drops the top-level error code
    return {
        "throttle_time": data.throttle_time_ms,
        "error_code": data.error_code,
        "replica_election_results": [
            {
                "topic": t.topic,
                "partition_result": [
                    {
                        "partition_id": p.partition_id,
                        "error_code": p.error_code,
                        "error_message": p.error_message,
                    }
                    for p in t.partition_results
                ],
            }
            for t in data.results
        ],
    }


def error_answer(
    data: ElectLeadersRequestData, code: ErrorCode, message: str | None
) -> ElectLeadersResponseData:
    return elect_leaders_error(data, code, message)


def request_values(data: ElectLeadersRequestData) -> Values:
    return {
        "election_type": data.election_type,
        "topic_partitions": (
            None
            if data.topic_partitions is None
            else [
                {"topic": t.topic, "partitions": list(t.partitions)} for t in data.topic_partitions
            ]
        ),
        "timeout": data.timeout_ms,
    }


def response_data(body: Any) -> ElectLeadersResponseData:
    return ElectLeadersResponseData(
        throttle_time_ms=as_millis(getattr(body, "throttle_time", 0)),
        error_code=as_error_code(getattr(body, "error_code", 0)),
        results=tuple(
            ElectLeadersTopicResult(
                topic=TopicName(t.topic),
                partition_results=tuple(
                    ElectLeadersPartitionResult(
                        partition_id=int(p.partition_id),
                        error_code=as_error_code(p.error_code),
                        error_message=p.error_message,
                    )
                    for p in t.partition_result
                ),
            )
            for t in body.replica_election_results
        ),
    )


CODEC = ApiCodec(
    api_key=ClientApiKey.ELECT_LEADERS,
    versions=(0, 2),
    client_version=2,
    request_type=ElectLeadersRequestData,
    response_type=ElectLeadersResponseData,
    request_data=request_data,
    response_values=response_values,
    error_answer=error_answer,
    request_values=request_values,
    response_data=response_data,
)
