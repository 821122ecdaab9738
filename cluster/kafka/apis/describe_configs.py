"""DescribeConfigs (API key 32): the configs of topics and brokers, with synonyms (v1+) and
documentation (v3+) when asked (``KafkaApis.handleDescribeConfigsRequest``). Before v1 an
entry said only whether it was a default, a flag Kafka 2.7.2 leaves false
(``AdminManager.describeConfigs`` sets the source, never ``isDefault``)."""

from __future__ import annotations

from typing import Any

from cluster.kafka.apis.api_codec import ApiCodec, Values
from cluster.kafka.codec import as_config_source, as_error_code, as_millis
from cluster.kafka.framing import KafkaRequest
from protocol.errors import ErrorCode
from protocol.kafka_api import (
    ClientApiKey,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ConfigSynonym,
    ConfigValueType,
    DescribeConfigsRequestData,
    DescribeConfigsResponseData,
    DescribeConfigsResult,
)


def request_data(body: Any, version: int) -> DescribeConfigsRequestData:
    del version  # fields a version lacks take their defaults
    return DescribeConfigsRequestData(
        resources=tuple(
            ConfigResource(
                resource_type=int(r.resource_type),
                resource_name=r.resource_name,
                configuration_keys=(
                    None if r.configuration_keys is None else tuple(r.configuration_keys)
                ),
            )
            for r in body.resources
        ),
        include_synonyms=bool(getattr(body, "include_synonyms", False)),
        include_documentation=bool(getattr(body, "include_documentation", False)),
    )


def response_values(data: DescribeConfigsResponseData, request: KafkaRequest) -> Values:
    asked = request_data(request.body, request.api_version)
    return {
        "throttle_time": data.throttle_time_ms,
        "results": [
            {
                "error_code": r.error_code,
                "error_message": r.error_message,
                "resource_type": r.resource_type,
                "resource_name": r.resource_name,
                "configs": [_config_values(c, asked) for c in r.configs],
            }
            for r in data.results
        ],
    }


def _config_values(entry: ConfigEntry, asked: DescribeConfigsRequestData) -> Values:
    synonyms: tuple[ConfigSynonym, ...] = entry.synonyms if asked.include_synonyms else ()
    return {
        "name": entry.name,
        "value": entry.value,
        "read_only": entry.read_only,
        "is_default": False,  # v0: Kafka 2.7.2's AdminManager never sets it
        "config_source": entry.source,
        "is_sensitive": entry.is_sensitive,
        "synonyms": [{"name": s.name, "value": s.value, "source": s.source} for s in synonyms],
        "config_type": entry.value_type,
        "documentation": entry.documentation if asked.include_documentation else None,
    }


def error_answer(
    data: DescribeConfigsRequestData, code: ErrorCode, message: str | None
) -> DescribeConfigsResponseData:
    return DescribeConfigsResponseData(
        results=tuple(
            DescribeConfigsResult(
                resource_type=r.resource_type,
                resource_name=r.resource_name,
                error_code=code,
                error_message=message,
            )
            for r in data.resources
        )
    )


def request_values(data: DescribeConfigsRequestData) -> Values:
    return {
        "resources": [
            {
                "resource_type": r.resource_type,
                "resource_name": r.resource_name,
                "configuration_keys": r.configuration_keys,
            }
            for r in data.resources
        ],
        "include_synonyms": data.include_synonyms,
        "include_documentation": data.include_documentation,
    }


def response_data(body: Any) -> DescribeConfigsResponseData:
    return DescribeConfigsResponseData(
        results=tuple(
            DescribeConfigsResult(
                resource_type=int(r.resource_type),
                resource_name=r.resource_name,
                error_code=as_error_code(r.error_code),
                error_message=r.error_message,
                configs=tuple(_config_entry(c) for c in r.configs),
            )
            for r in body.results
        ),
        throttle_time_ms=as_millis(getattr(body, "throttle_time", 0)),
    )


def _config_entry(entry: Any) -> ConfigEntry:
    """One DescribeConfigs entry. Before v1 there was no source, only ``is_default``."""
    if hasattr(entry, "config_source"):
        source = as_config_source(entry.config_source)
    elif getattr(entry, "is_default", False):
        source = ConfigSource.DEFAULT_CONFIG
    else:
        source = ConfigSource.UNKNOWN
    try:
        value_type = ConfigValueType(int(getattr(entry, "config_type", 0)))
    except ValueError:
        value_type = ConfigValueType.UNKNOWN
    return ConfigEntry(
        name=entry.name,
        value=entry.value,
        read_only=bool(entry.read_only),
        source=source,
        is_sensitive=bool(entry.is_sensitive),
        synonyms=tuple(
            ConfigSynonym(name=s.name, value=s.value, source=as_config_source(s.source))
            for s in getattr(entry, "synonyms", ())
        ),
        value_type=value_type,
        documentation=getattr(entry, "documentation", None),
    )


CODEC = ApiCodec(
    api_key=ClientApiKey.DESCRIBE_CONFIGS,
    versions=(0, 3),
    client_version=3,
    request_type=DescribeConfigsRequestData,
    response_type=DescribeConfigsResponseData,
    request_data=request_data,
    response_values=response_values,
    error_answer=error_answer,
    request_values=request_values,
    response_data=response_data,
)
