"""Generic helpers over the wire codec (kio): its schemas by API key and version, entities
built from plain values keyed by the schema's field names, and the small conversions every
API's translation shares (error codes, durations, topic ids, broker ids, config sources)."""

from __future__ import annotations

import dataclasses
import datetime
import functools
import io
import types
import typing
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode as _KioErrorCode
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_writer

from protocol.errors import ErrorCode
from protocol.ids import BrokerId
from protocol.kafka_api import (
    ConfigSource,
)

_NO_THROTTLE = datetime.timedelta(0)


def _codec_versions(api_key: int) -> tuple[int, int] | None:
    name = api_key_map.get(api_key)
    if name is None:
        return None
    versions = sorted(schema_name_map[name])
    return (versions[0], versions[-1]) if versions else None


@functools.cache
def _request_schema(api_key: int, api_version: int) -> Any:
    return load_request_schema(api_key, api_version)


@functools.cache
def _response_schema(api_key: int, api_version: int) -> Any:
    return load_response_schema(api_key, api_version)


def _kio_error(code: int) -> Any:
    return _KioErrorCode(int(code))


def _millis(value: Any) -> int:
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return int(value)


def _nested_entity(field_type: Any) -> Any:
    """The entity class of a field holding one entity or a tuple of them (maybe null)."""
    candidates = [field_type]
    if isinstance(field_type, types.UnionType) or typing.get_origin(field_type) is typing.Union:
        candidates = [a for a in typing.get_args(field_type) if a is not type(None)]
    for candidate in candidates:
        if typing.get_origin(candidate) is tuple:
            candidate = typing.get_args(candidate)[0]
        if dataclasses.is_dataclass(candidate):
            return candidate
    return None


@functools.cache
def _fields(cls: Any) -> tuple[tuple[str, str | None, Any, bool], ...]:
    """(name, kafka type, nested entity class, required) for each field of an entity."""
    return tuple(
        (
            f.name,
            f.metadata.get("kafka_type"),
            _nested_entity(f.type),
            f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
        )
        for f in dataclasses.fields(cls)
    )


def _convert(kafka_type: str | None, nested: Any, value: Any) -> Any:
    if value is None:
        return None
    if nested is not None:
        if isinstance(value, Mapping):
            return _build(nested, value)
        return tuple(_build(nested, item) for item in value)
    if kafka_type == "error_code":
        return _kio_error(value)
    if kafka_type in ("timedelta_i32", "timedelta_i64") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    if isinstance(value, list):
        return tuple(value)
    return value


def _build(cls: Any, values: Mapping[str, Any]) -> Any:
    """An entity of ``cls`` from plain values keyed by the schema's field names. Values for
    fields this version lacks are dropped, which is how one description of a response
    serves every version; a missing required field raises ``TypeError``."""
    kwargs = {
        name: _convert(kafka_type, nested, values[name])
        for name, kafka_type, nested, _required in _fields(cls)
        if name in values
    }
    return cls(**kwargs)


def _has_field(cls: Any, name: str) -> bool:
    return any(f[0] == name for f in _fields(cls))


def _encode_body(response: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(response))(buffer, response)
    return buffer.getvalue()


def _topic_id(value: Any) -> uuid.UUID | None:
    return None if value is None or value.int == 0 else uuid.UUID(int=value.int)


def _broker_ids(ids: Iterable[int]) -> tuple[BrokerId, ...]:
    return tuple(BrokerId(int(b)) for b in ids)


def _error_code(value: Any) -> ErrorCode:
    try:
        return ErrorCode(int(value))
    except ValueError:  # a code newer than our table: what Kafka's clients do with it
        return ErrorCode.UNKNOWN_SERVER_ERROR


def _config_source(value: Any) -> ConfigSource:
    try:
        return ConfigSource(int(value))
    except ValueError:
        return ConfigSource.UNKNOWN
