"""Inputs for the Kafka listener, as hypothesis strategies: valid requests of every API
and version a broker advertises (built through the wire codec from values drawn field by
field along the API's schema), the same mutated, random bytes, truncated frames and
frames claiming huge sizes, in pipelined sequences of up to ``MAX_PIPELINED`` frames."""

from __future__ import annotations

import dataclasses
import functools
import struct
import typing
from collections.abc import Mapping
from typing import Any, Final

from crc32c import crc32c
from hypothesis import strategies as st

from cluster.fuzz.mutations import INTERESTING_INT32, mutated
from cluster.kafka.codec import request_schema
from cluster.kafka.framing import request_frame

MAX_PIPELINED: Final = 4
MAX_ITEMS: Final = 3  # items per array of a valid request
TOPIC_NAMES: Final = ("fuzz-0", "fuzz-1", "__consumer_offsets", "", ".", "a" * 250)
_INT64 = struct.Struct(">q")

_RANGES: Final[Mapping[str, tuple[int, int]]] = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}


def kafka_inputs(advertised: Mapping[int, tuple[int, int]]) -> st.SearchStrategy[bytes]:
    """One connection's bytes: up to ``MAX_PIPELINED`` frames, each valid, mutated, or
    not a request at all, for the APIs and versions of ``advertised``."""
    one = st.one_of(
        valid_requests(advertised),
        valid_requests(advertised).flatmap(mutated),
        st.binary(max_size=64),
        _huge_size_frames(),
        _unadvertised_frames(advertised),
    )
    return st.lists(one, min_size=1, max_size=MAX_PIPELINED).map(b"".join)


def valid_requests(advertised: Mapping[int, tuple[int, int]]) -> st.SearchStrategy[bytes]:
    """A whole valid request frame of an advertised API and version."""
    pairs = sorted(
        (key, version)
        for key, (low, high) in advertised.items()
        for version in range(low, high + 1)
    )
    return st.sampled_from(pairs).flatmap(lambda pair: request_frames(*pair))


@functools.cache
def request_frames(api_key: int, api_version: int) -> st.SearchStrategy[bytes]:
    schema = request_schema(api_key, api_version)
    return st.builds(
        request_frame,
        st.just(api_key),
        st.just(api_version),
        st.integers(-(2**31), 2**31 - 1),
        st.one_of(st.none(), st.text(max_size=8)),
        _entity_values(schema),
    )


@functools.cache
def _entity_values(entity: type) -> st.SearchStrategy[dict[str, Any]]:
    """Plain values for every field of a codec entity, keyed by field name (what
    ``cluster.kafka.codec.build`` takes)."""
    return st.fixed_dictionaries(
        {field.name: _field_values(field) for field in dataclasses.fields(entity)}
    )


def _field_values(field: dataclasses.Field[Any]) -> st.SearchStrategy[Any]:
    kafka_type = field.metadata.get("kafka_type")
    args = typing.get_args(field.type)
    nullable = type(None) in args
    inner = next((a for a in args if a is not type(None)), field.type) if nullable else field.type
    repeated = typing.get_origin(inner) is tuple
    item_type = typing.get_args(inner)[0] if repeated else inner
    if kafka_type is None:
        item = _entity_values(typing.cast(type, item_type))
    else:
        item = _primitive_values(kafka_type, field.name)
    values = st.lists(item, max_size=MAX_ITEMS) if repeated else item
    return st.one_of(st.none(), values) if nullable else values


def _primitive_values(kafka_type: str, name: str) -> st.SearchStrategy[Any]:
    if kafka_type == "bool":
        return st.booleans()
    if kafka_type in _RANGES:
        low, high = _RANGES[kafka_type]
        return st.one_of(
            st.integers(-1, 3),
            st.sampled_from([v for v in INTERESTING_INT32 if low <= v <= high]),
            st.integers(low, high),
        )
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        # durations in milliseconds (timeouts, max waits): short, so that valid requests
        # do not park the connection behind a long poll
        return st.integers(-1, 50)
    if kafka_type == "uuid":
        return st.uuids()
    if kafka_type == "float64":
        return st.floats()
    if kafka_type == "string":
        if "topic" in name or name == "name":
            return st.one_of(st.sampled_from(TOPIC_NAMES), st.text(max_size=12))
        return st.text(max_size=12)
    if kafka_type == "records":
        return st.one_of(st.binary(max_size=64), record_batches())
    if kafka_type == "bytes":
        return st.binary(max_size=32)
    raise ValueError(f"no values for the Kafka type {kafka_type!r}")


def record_batches() -> st.SearchStrategy[bytes]:
    """A magic-v2 record batch of one uncompressed record, its CRC right
    (``DefaultRecordBatch``'s layout), mutated or not."""
    batch = st.builds(
        _record_batch,
        st.binary(max_size=16),
        st.integers(-1, 3),
        st.sampled_from((-1, 0, 1000)),
    )
    return st.one_of(batch, batch.flatmap(mutated))


def _record_batch(value: bytes, producer_id: int, base_sequence: int) -> bytes:
    record = (
        b"\x00"  # attributes
        + _zigzag(0)  # timestamp delta
        + _zigzag(0)  # offset delta
        + _zigzag(-1)  # null key
        + _zigzag(len(value))
        + value
        + _zigzag(0)  # no headers
    )
    record = _zigzag(len(record)) + record
    after_crc = (
        struct.pack(">hiqqqhii", 0, 0, 0, 0, producer_id, 0, base_sequence, 1) + record
    )  # attributes .. record count
    crc = crc32c(after_crc)
    header_after_length = struct.pack(">ibI", 0, 2, crc)  # partition leader epoch, magic, crc
    length = len(header_after_length) + len(after_crc)
    return _INT64.pack(0) + struct.pack(">i", length) + header_after_length + after_crc


def _zigzag(value: int) -> bytes:
    encoded = (value << 1) ^ (value >> 63)
    out = bytearray()
    while encoded >= 0x80:
        out.append((encoded & 0x7F) | 0x80)
        encoded >>= 7
    out.append(encoded)
    return bytes(out)


def _huge_size_frames() -> st.SearchStrategy[bytes]:
    """A size prefix far beyond what follows it, or beyond any limit."""
    return st.builds(
        lambda size, rest: struct.pack(">i", size) + rest,
        st.sampled_from(INTERESTING_INT32),
        st.binary(max_size=16),
    )


def _unadvertised_frames(advertised: Mapping[int, tuple[int, int]]) -> st.SearchStrategy[bytes]:
    """A request header naming an API key or version the broker does not advertise."""

    def frame(api_key: int, api_version: int, rest: bytes) -> bytes:
        body = struct.pack(">hhih", api_key, api_version, 1, -1) + rest
        return struct.pack(">i", len(body)) + body

    keys = sorted(advertised)
    return st.one_of(
        st.builds(
            frame, st.integers(-(2**15), 2**15 - 1), st.integers(-5, 20), st.binary(max_size=8)
        ),
        st.sampled_from(keys).flatmap(
            lambda key: st.builds(
                frame, st.just(key), st.just(advertised[key][1] + 1), st.binary(max_size=8)
            )
        ),
    )
