"""AlterConfigs (API key 33): each resource's whole new set of config overrides
(``KafkaApis.handleAlterConfigsRequest``). The per-resource values here serve
IncrementalAlterConfigs too (``cluster.kafka.apis.incremental_alter_configs``), whose
entries add an operation."""

from __future__ import annotations

from typing import Any

from cluster.kafka.apis.api_codec import ApiCodec, Values
from cluster.kafka.codec import as_error_code, as_millis
from cluster.kafka.framing import KafkaRequest
from protocol.errors import ErrorCode
from protocol.kafka_api import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsRequestData,
    AlterConfigsResource,
    AlterConfigsResponseData,
    AlterConfigsResult,
    ClientApiKey,
    IncrementalAlterConfigsResponseData,
)


def resources(body: Any) -> tuple[AlterConfigsResource, ...]:
    """The resources of either request; an entry without an operation is a SET."""
    return tuple(
        AlterConfigsResource(
            resource_type=int(r.resource_type),
            resource_name=r.resource_name,
            configs=tuple(
                AlterableConfig(
                    name=c.name,
                    value=c.value,
                    operation=int(getattr(c, "config_operation", AlterConfigOp.SET)),
                )
                for c in r.configs
            ),
        )
        for r in body.resources
    )


def request_data(body: Any, version: int) -> AlterConfigsRequestData:
    del version  # the fields are the same in every version
    return AlterConfigsRequestData(
        resources=resources(body), validate_only=bool(body.validate_only)
    )


def results_values(data: AlterConfigsResponseData | IncrementalAlterConfigsResponseData) -> Values:
    return {
        "throttle_time": data.throttle_time_ms,
        "responses": [
            {
                "error_code": r.error_code,
                "error_message": r.error_message,
                "resource_type": r.resource_type,
                "resource_name": r.resource_name,
            }
            for r in data.results
        ],
    }


def response_values(data: AlterConfigsResponseData, request: KafkaRequest) -> Values:
    del request  # one description serves every version
    return results_values(data)


def failed(
    resources: tuple[AlterConfigsResource, ...], code: ErrorCode, message: str | None
) -> tuple[AlterConfigsResult, ...]:
    return tuple(
        AlterConfigsResult(
            resource_type=r.resource_type,
            resource_name=r.resource_name,
            error_code=code,
            error_message=message,
        )
        for r in resources
    )


def error_answer(
    data: AlterConfigsRequestData, code: ErrorCode, message: str | None
) -> AlterConfigsResponseData:
    return AlterConfigsResponseData(results=failed(data.resources, code, message))


def resources_values(resources: tuple[AlterConfigsResource, ...], *, with_ops: bool) -> Values:
    return {
        "resources": [
            {
                "resource_type": r.resource_type,
                "resource_name": r.resource_name,
                "configs": [
                    {"name": c.name, "value": c.value}
                    | ({"config_operation": c.operation} if with_ops else {})
                    for c in r.configs
                ],
            }
            for r in resources
        ]
    }


def request_values(data: AlterConfigsRequestData) -> Values:
    return resources_values(data.resources, with_ops=False) | {"validate_only": data.validate_only}


def results(body: Any) -> tuple[AlterConfigsResult, ...]:
    return tuple(
        AlterConfigsResult(
            resource_type=int(r.resource_type),
            resource_name=r.resource_name,
            error_code=as_error_code(r.error_code),
            error_message=r.error_message,
        )
        for r in body.responses
    )


def response_data(body: Any) -> AlterConfigsResponseData:
    return AlterConfigsResponseData(
        results=results(body), throttle_time_ms=as_millis(getattr(body, "throttle_time", 0))
    )


CODEC = ApiCodec(
    api_key=ClientApiKey.ALTER_CONFIGS,
    versions=(0, 1),
    client_version=1,
    request_type=AlterConfigsRequestData,
    response_type=AlterConfigsResponseData,
    request_data=request_data,
    response_values=response_values,
    error_answer=error_answer,
    request_values=request_values,
    response_data=response_data,
)
