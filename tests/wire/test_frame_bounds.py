"""``cluster.kafka.bounds``: the length walk agrees with the codec on every schema it has,
and refuses what would make the codec allocate past the frame."""

from __future__ import annotations

import dataclasses
import datetime
import io
import uuid
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_schema_field_type,
)

from cluster.kafka.bounds import check_lengths
from protocol.errors import FrameError

SAMPLES: dict[str, Any] = {
    "string": "ab",
    "bytes": b"ab",
    "records": b"abc",
    "uuid": uuid.UUID(int=7),
    "bool": True,
    "error_code": ErrorCode.none,
    "timedelta_i32": datetime.timedelta(milliseconds=5),
    "timedelta_i64": datetime.timedelta(milliseconds=5),
    "datetime_i64": datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC),
    "float64": 1.5,
}


def sample(entity: type) -> Any:
    """An entity with every field set, tagged ones included, and two items per array."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(entity):
        kind = classify_field(field)
        if isinstance(kind, EntityField):
            values[field.name] = sample(kind.type_)
        elif isinstance(kind, EntityTupleField):
            values[field.name] = (sample(kind.type_), sample(kind.type_))
        else:
            value = SAMPLES.get(get_schema_field_type(field), 1)
            values[field.name] = (value, value) if isinstance(kind, PrimitiveTupleField) else value
    return entity(**values)


def every_schema() -> list[Any]:
    schemas = []
    for key, name in sorted(api_key_map.items()):
        for version in sorted(schema_name_map[name]):
            for load in (load_request_schema, load_response_schema):
                cls = load(key, version)
                schemas.append(pytest.param(cls, id=f"{cls.__name__}-v{version}"))
                header = cls.__header_schema__
                schemas.append(pytest.param(header, id=f"{cls.__name__}-v{version}-header"))
    return schemas


def encoded(entity: type) -> bytes:
    buffer = io.BytesIO()
    entity_writer(entity)(buffer, sample(entity))
    return buffer.getvalue()


@pytest.mark.parametrize("entity", every_schema())
def test_the_walk_ends_where_the_codec_does(entity: type) -> None:
    """For every request, response and header schema of the codec, the walk over a full
    encoding ends at the byte where the codec's own reader stops, and a prefix cut one byte
    short is refused (for a schema that encodes to anything)."""
    data = encoded(entity)
    used: int = entity_reader(entity)(data, 0)[1]
    assert check_lengths(entity, data) == used == len(data)
    if data:
        with pytest.raises(FrameError):
            check_lengths(entity, data[:-1])


def test_an_array_longer_than_the_rest_of_the_frame_is_refused() -> None:
    """Metadata v9 topics claiming 2^32 - 2 items, and a classic v1 array claiming 2^31 - 1,
    are refused with the claim and what remains; an array that fits passes."""
    v9 = load_request_schema(3, 9)
    with pytest.raises(FrameError, match="claims 4294967294 items, but only 0 bytes remain"):
        check_lengths(v9, b"\xff\xff\xff\xff\x0f")
    v1 = load_request_schema(3, 1)
    with pytest.raises(FrameError, match="claims 2147483647 items"):
        check_lengths(v1, b"\x7f\xff\xff\xff")
    assert check_lengths(v1, b"\x00\x00\x00\x01\x00\x01t") == 7


def test_a_varint_longer_than_five_bytes_is_refused() -> None:
    """A compact length whose fifth byte still says "more" is refused, as the codec does."""
    with pytest.raises(FrameError, match="longer than 5 bytes"):
        check_lengths(load_request_schema(3, 9), b"\xff\xff\xff\xff\xff\x01")


def test_records_longer_than_the_rest_of_the_frame_are_refused() -> None:
    """A Produce whose records claim more bytes than the frame holds is refused before the
    codec reads it; the same request with its records whole passes to the end."""
    produce = load_request_schema(0, 8)
    head = (
        b"\xff\xff"  # transactional_id: null
        + b"\xff\xff"  # acks -1
        + b"\x00\x00\x05\xdc"  # timeout 1500
        + b"\x00\x00\x00\x01\x00\x01t"  # one topic "t"
        + b"\x00\x00\x00\x01\x00\x00\x00\x00"  # one partition, index 0
    )
    whole = head + b"\x00\x00\x00\x03abc"
    assert check_lengths(produce, whole) == len(whole)
    with pytest.raises(FrameError):
        check_lengths(produce, head + b"\x7f\xff\xff\xffabc")
