"""IncrementalAlterConfigs (API key 44): SET, DELETE, APPEND and SUBTRACT operations on
each resource's current overrides (``KafkaApis.handleIncrementalAlterConfigsRequest``).
v1 is the flexible version of v0."""

from __future__ import annotations

from typing import Any

from cluster.kafka.apis.alter_configs import (
    failed,
    resources,
    resources_values,
    results,
    results_values,
)
from cluster.kafka.apis.api_codec import ApiCodec, Values
from cluster.kafka.codec import as_millis
from cluster.kafka.framing import KafkaRequest
from protocol.errors import ErrorCode
from protocol.kafka_api import (
    ClientApiKey,
    IncrementalAlterConfigsRequestData,
    IncrementalAlterConfigsResponseData,
)


def request_data(body: Any, version: int) -> IncrementalAlterConfigsRequestData:
    del version  # the fields are the same in every version
    return IncrementalAlterConfigsRequestData(
        resources=resources(body), validate_only=bool(body.validate_only)
    )


def response_values(data: IncrementalAlterConfigsResponseData, request: KafkaRequest) -> Values:
    del request  # one description serves every version
    return results_values(data)


def error_answer(
    data: IncrementalAlterConfigsRequestData, code: ErrorCode, message: str | None
) -> IncrementalAlterConfigsResponseData:
    return IncrementalAlterConfigsResponseData(results=failed(data.resources, code, message))


def request_values(data: IncrementalAlterConfigsRequestData) -> Values:
    return resources_values(data.resources, with_ops=True) | {"validate_only": data.validate_only}


def response_data(body: Any) -> IncrementalAlterConfigsResponseData:
    return IncrementalAlterConfigsResponseData(
        results=results(body), throttle_time_ms=as_millis(getattr(body, "throttle_time", 0))
    )


CODEC = ApiCodec(
    api_key=ClientApiKey.INCREMENTAL_ALTER_CONFIGS,
    versions=(0, 1),
    client_version=1,
    request_type=IncrementalAlterConfigsRequestData,
    response_type=IncrementalAlterConfigsResponseData,
    request_data=request_data,
    response_values=response_values,
    error_answer=error_answer,
    request_values=request_values,
    response_data=response_data,
)
