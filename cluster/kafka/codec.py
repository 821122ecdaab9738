"""Generic helpers over the wire codec (kio): its schemas by API key and version, entities
built from plain values keyed by the schema's field names, and the small conversions every
API's translation shares (error codes, durations, broker ids, config sources)."""

from __future__ import annotations

import dataclasses
import datetime
import functools
import io
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode as _KioErrorCode
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_writer

from cluster.kafka import legacy
from protocol.errors import ErrorCode
from protocol.ids import BrokerId
from protocol.kafka_api import (
    ConfigSource,
)

_NO_THROTTLE = datetime.timedelta(0)


def codec_versions(api_key: int) -> tuple[int, int] | None:
    """The versions of an API the codec can encode and decode (None: an unknown key):
    kio's, and the older ones of ``cluster.kafka.legacy``."""
    name = api_key_map.get(api_key)
    if name is None:
        return None
    versions = sorted({*schema_name_map[name], *legacy.legacy_versions(api_key)})
    return (versions[0], versions[-1]) if versions else None


@functools.cache
def request_schema(api_key: int, api_version: int) -> Any:
    """The codec's request class of an API version (its ``__header_schema__`` too)."""
    legacy_schema = legacy.REQUESTS.get((api_key, api_version))
    if legacy_schema is not None:
        return legacy_schema
    return load_request_schema(api_key, api_version)


@functools.cache
def response_schema(api_key: int, api_version: int) -> Any:
    """The codec's response class of an API version."""
    legacy_schema = legacy.RESPONSES.get((api_key, api_version))
    if legacy_schema is not None:
        return legacy_schema
    return load_response_schema(api_key, api_version)


def kio_error(code: int) -> Any:
    return _KioErrorCode(int(code))


def as_millis(value: Any) -> int:
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
            return build(nested, value)
        return tuple(build(nested, item) for item in value)
    if kafka_type == "error_code":
        return kio_error(value)
    if kafka_type in ("timedelta_i32", "timedelta_i64") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    if isinstance(value, list):
        return tuple(value)
    return value


def build(cls: Any, values: Mapping[str, Any]) -> Any:
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


def encode_body(response: Any) -> bytes:
    """An entity's bytes (a body, without size or header)."""
    buffer = io.BytesIO()
    entity_writer(type(response))(buffer, response)
    return buffer.getvalue()


def as_broker_ids(ids: Iterable[int]) -> tuple[BrokerId, ...]:
    return tuple(BrokerId(int(b)) for b in ids)


def as_error_code(value: Any) -> ErrorCode:
    try:
        return ErrorCode(int(value))
    except ValueError:  # a code newer than our table: what Kafka's clients do with it
        return ErrorCode.UNKNOWN_SERVER_ERROR


def as_config_source(value: Any) -> ConfigSource:
    try:
        return ConfigSource(int(value))
    except ValueError:
        return ConfigSource.UNKNOWN


def _neutral(kafka_type: str | None, nested: Any, field_type: Any) -> Any:
    """A neutral value for a required field, or raises ``LookupError``."""
    if typing.get_origin(field_type) is tuple:
        return ()
    if isinstance(field_type, types.UnionType) and type(None) in typing.get_args(field_type):
        return None
    if nested is not None:
        raise LookupError("a required nested entity has no neutral value")
    neutral: dict[str | None, Any] = {
        "bool": False,
        "string": "",
        "uuid": None,
        "timedelta_i32": _NO_THROTTLE,
        "timedelta_i64": _NO_THROTTLE,
    }
    if kafka_type in neutral:
        return neutral[kafka_type]
    if kafka_type is not None and kafka_type.startswith(("int", "uint", "float")):
        return 0
    raise LookupError(f"no neutral value for a {kafka_type} field")


def generic_error_response(cls: Any, code: ErrorCode, message: str | None) -> Any | None:
    """For a response class with a top-level ``error_code`` and nothing else that needs a
    value: the error, and neutral values elsewhere. ``None`` where the schema cannot."""
    if not _has_field(cls, "error_code"):
        return None
    types_by_name = {f.name: f.type for f in dataclasses.fields(cls)}
    values: dict[str, Any] = {"error_code": code, "error_message": message}
    try:
        for name, kafka_type, nested, required in _fields(cls):
            if required and name not in values:
                values[name] = _neutral(kafka_type, nested, types_by_name[name])
    except LookupError:
        return None
    return build(cls, values)
