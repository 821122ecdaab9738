"""DescribeCluster (API key 60): the brokers and the controller, with a top-level error
(``KafkaApis.handleDescribeCluster``; Kafka 2.8's, served by kemu as the newer admin
clients ask it)."""

from __future__ import annotations

from typing import Any

from cluster.kafka.apis.api_codec import ApiCodec, Values
from cluster.kafka.codec import as_error_code, as_millis
from cluster.kafka.framing import KafkaRequest
from protocol.errors import ErrorCode
from protocol.ids import BrokerId
from protocol.kafka_api import (
    BrokerEndpoint,
    ClientApiKey,
    DescribeClusterRequestData,
    DescribeClusterResponseData,
)


def request_data(body: Any, version: int) -> DescribeClusterRequestData:
    del version  # v1's endpoint type defaults for v0
    return DescribeClusterRequestData(
        include_cluster_authorized_operations=bool(body.include_cluster_authorized_operations),
        endpoint_type=int(getattr(body, "endpoint_type", 1)),
    )


def response_values(data: DescribeClusterResponseData, request: KafkaRequest) -> Values:
    del request  # one description serves every version
    return {
        "throttle_time": data.throttle_time_ms,
        "error_code": data.error_code,
        "error_message": data.error_message,
        "endpoint_type": data.endpoint_type,
        "cluster_id": data.cluster_id,
        "controller_id": data.controller_id,
        "brokers": [
            {
                "broker_id": b.broker_id,
                "host": b.host,
                "port": b.port,
                "rack": b.rack,
                "is_fenced": False,
            }
            for b in data.brokers
        ],
        "cluster_authorized_operations": data.cluster_authorized_operations,
    }


def error_answer(
    data: DescribeClusterRequestData, code: ErrorCode, message: str | None
) -> DescribeClusterResponseData:
    return DescribeClusterResponseData(
        cluster_id="",
        controller_id=BrokerId(-1),
        brokers=(),
        error_code=code,
        error_message=message,
        endpoint_type=data.endpoint_type,
    )


def request_values(data: DescribeClusterRequestData) -> Values:
    return {
        "include_cluster_authorized_operations": data.include_cluster_authorized_operations,
        "endpoint_type": data.endpoint_type,
    }


def response_data(body: Any) -> DescribeClusterResponseData:
    return DescribeClusterResponseData(
        cluster_id=body.cluster_id,
        controller_id=BrokerId(int(body.controller_id)),
        brokers=tuple(
            BrokerEndpoint(
                broker_id=BrokerId(int(b.broker_id)),
                host=b.host,
                port=int(b.port),
                rack=b.rack,
            )
            for b in body.brokers
        ),
        error_code=as_error_code(body.error_code),
        error_message=body.error_message,
        endpoint_type=int(getattr(body, "endpoint_type", 1)),
        cluster_authorized_operations=int(body.cluster_authorized_operations),
        throttle_time_ms=as_millis(getattr(body, "throttle_time", 0)),
    )


CODEC = ApiCodec(
    api_key=ClientApiKey.DESCRIBE_CLUSTER,
    versions=(0, 1),
    client_version=0,
    request_type=DescribeClusterRequestData,
    response_type=DescribeClusterResponseData,
    request_data=request_data,
    response_values=response_values,
    error_answer=error_answer,
    request_values=request_values,
    response_data=response_data,
)
