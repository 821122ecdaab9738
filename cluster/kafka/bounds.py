"""Length checks a frame passes before the codec decodes it.

Where the codec allocates from the wire: kio's native reader (``_kio_native``, Rust) makes
room for an array before it reads the items, ``Vec::with_capacity(n)`` in
``schema::read_field``, with ``n`` the length as sent: an unsigned varint of up to five
bytes for a compact array (flexible versions), an int32 for a classic one. A 22-byte
Metadata v9 request whose topic array claims 4,294,967,294 items asks for 32 GiB; the
allocation fails and Rust aborts the process (``handle_alloc_error``), which no Python
``except`` can catch, and one process holds every broker of a cluster. Strings and bytes
are sliced only after a bounds check in kio, and tagged fields allocate nothing sized by
the wire, so arrays are the one place.

Kafka's generated readers refuse an array longer than the bytes that remain ("Tried to
allocate a collection of size ..., but there are only ... bytes remaining", in every
``*Data.read``) and ``SocketServer`` closes that connection. ``check_lengths`` does the
same before kio runs: it walks the entity's schema as kio will read it (the same field
classification, ``kio.serial._introspect``; request headers read ``client_id`` as a classic
nullable string in every version, as kio does) and checks every length prefix, arrays,
strings, bytes, records, nullable entities and tagged fields, nested entities included,
against the bytes that remain. It also refuses a null array where the version does not
allow one, which kio would let through to code that iterates it. A frame that passes
makes kio reserve at most eight bytes (one pointer) per remaining byte for any array. The
walk is pure Python but cheap: runs of fixed-width fields are skipped as one step, and
arrays of fixed-width items in one step.

Tagged fields the schema does not know are another matter: Kafka's generated readers keep
them aside (``readUnknownTaggedField``) and read on, while kio refuses them.
``without_unknown_tags`` runs the same walk over a whole frame and gives it back without
them (librdkafka's Metadata v9 request carries one), so that the codec reads what Kafka
reads.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import struct
from collections.abc import Callable, Mapping
from typing import Any, Final

from kio.serial._introspect import (  # the classification kio's native reader uses
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

from protocol.errors import FrameError

__all__ = ["check_lengths", "without_unknown_tags"]

_WIDTHS: Final[Mapping[str, int]] = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
"""Bytes taken by each fixed-width Kafka type."""

_VARIABLE: Final = frozenset({"string", "bytes", "records"})
_MAX_VARINT_BYTES: Final = 5  # kio reads unsigned varints of at most five bytes
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")

Walk = Callable[[bytes, int], int]
"""Checks one value starting at an offset of a frame; returns the offset after it."""

Edit = tuple[int, int, bytes]
"""Bytes ``[start, end)`` of a frame to be replaced by the given bytes."""

_EDITS: contextvars.ContextVar[list[Edit] | None] = contextvars.ContextVar(
    "kemu_unknown_tag_edits", default=None
)
"""Where a walk run by ``without_unknown_tags`` notes the unknown tagged fields it skips."""


def check_lengths(entity: type, frame: bytes, offset: int = 0) -> int:
    """The offset after the ``entity`` (a kio schema class) that starts at ``offset`` of
    ``frame``. Raises ``FrameError`` for a length prefix longer than what remains (or
    negative, or a varint too long), so that kio never sees it."""
    walk, _width = _entity(entity, nullable=False)
    return walk(frame, offset)


def without_unknown_tags(entity: type, frame: bytes) -> bytes:
    """``frame`` (``entity``'s header, then the entity), its lengths checked as
    ``check_lengths`` does, without the tagged fields the schemas do not know, anywhere in
    it. Raises ``FrameError`` as ``check_lengths`` does."""
    edits: list[Edit] = []
    token = _EDITS.set(edits)
    try:
        header: type = entity.__header_schema__  # type: ignore[attr-defined]
        check_lengths(entity, frame, check_lengths(header, frame))
    finally:
        _EDITS.reset(token)
    if not edits:
        return frame
    out = bytearray()
    position = 0
    for start, end, replacement in sorted(edits):
        out += frame[position:start]
        out += replacement
        position = end
    out += frame[position:]
    return bytes(out)


def _uvarint_bytes(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _underflow(what: str, wanted: int, frame: bytes, offset: int) -> FrameError:
    return FrameError(
        f"{what} of {wanted} at byte {offset}, but only {len(frame) - offset} bytes remain"
    )


def _uvarint(frame: bytes, offset: int) -> tuple[int, int]:
    """An unsigned varint as kio reads it: its value and the offset after it."""
    value = shift = 0
    for index in range(_MAX_VARINT_BYTES):
        if offset + index >= len(frame):
            raise _underflow("a varint", index + 1, frame, offset)
        byte = frame[offset + index]
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, offset + index + 1
    raise FrameError(f"a varint at byte {offset} is longer than {_MAX_VARINT_BYTES} bytes")


def _fixed(width: int) -> Walk:
    def walk(frame: bytes, offset: int) -> int:
        end = offset + width
        if end > len(frame):
            raise _underflow("a field", width, frame, offset)
        return end

    return walk


def _signed(prefix: struct.Struct, frame: bytes, offset: int) -> tuple[int, int]:
    if offset + prefix.size > len(frame):
        raise _underflow("a length", prefix.size, frame, offset)
    return prefix.unpack_from(frame, offset)[0], offset + prefix.size


def _sized(length: int, start: int, frame: bytes, what: str) -> int:
    """The end of ``length`` bytes of ``what`` starting at ``start``."""
    if length > len(frame) - start:
        raise _underflow(what, length, frame, start)
    return start + length


def _compact_bytes(frame: bytes, offset: int) -> int:
    """A compact string or bytes: length + 1 as a varint, 0 for null."""
    value, start = _uvarint(frame, offset)
    return start if value == 0 else _sized(value - 1, start, frame, "a string or bytes")


def _classic_string(frame: bytes, offset: int) -> int:
    """An int16 length (-1: null), then the bytes."""
    length, start = _signed(_INT16, frame, offset)
    if length < -1:
        raise FrameError(f"a string at byte {offset} has a negative length: {length}")
    return start if length == -1 else _sized(length, start, frame, "a string")


def _classic_bytes(frame: bytes, offset: int) -> int:
    """An int32 length (-1: null), then the bytes."""
    length, start = _signed(_INT32, frame, offset)
    if length < -1:
        raise FrameError(f"bytes at byte {offset} have a negative length: {length}")
    return start if length == -1 else _sized(length, start, frame, "bytes")


def _array(item: Walk, item_width: int | None, *, compact: bool, null: str | None) -> Walk:
    """An array: its length (compact: n + 1 as a varint, 0 for null; classic: an int32,
    -1 for null), refused when longer than the bytes that remain, then its items. ``null``
    names the field when the version does not allow it to be null: kio would read a null
    there anyway, Kafka's generated readers refuse it ("non-nullable field ... was
    serialized as null")."""

    def walk(frame: bytes, offset: int) -> int:
        if compact:
            value, start = _uvarint(frame, offset)
            count = value - 1
        else:
            count, start = _signed(_INT32, frame, offset)
            if count < -1:
                raise FrameError(f"an array at byte {offset} has a negative length: {count}")
        if count == -1:
            if null is not None:
                raise FrameError(f"non-nullable field {null} was serialized as null")
            return start
        remaining = len(frame) - start
        if count > remaining:
            raise FrameError(
                f"an array at byte {offset} claims {count} items, but only {remaining} bytes remain"
            )
        if item_width is not None:
            return _sized(count * item_width, start, frame, f"{count} items")
        for _ in range(count):
            start = item(frame, start)
        return start

    return walk


def _primitive(kafka_type: str, flexible: bool) -> tuple[Walk, int | None]:
    """The walk of one primitive value and its width (None: variable)."""
    width = _WIDTHS.get(kafka_type)
    if width is not None:
        return _fixed(width), width
    if kafka_type not in _VARIABLE:
        raise FrameError(f"no length rule for the Kafka type {kafka_type!r}")
    if flexible:
        return _compact_bytes, None
    return (_classic_string if kafka_type == "string" else _classic_bytes), None


def _field_walk(
    owner: type, field: dataclasses.Field[Any], *, flexible: bool
) -> tuple[Walk, int | None]:
    """The walk of one field as kio's ``build_field_schema`` reads it, and its width."""
    if owner.__name__ == "RequestHeader" and field.name == "client_id":
        return _classic_string, None  # a classic string even in header v2
    kind = classify_field(field)
    if isinstance(kind, EntityField):
        return _entity(kind.type_, nullable=is_optional(field))
    null = None if is_optional(field) else field.name
    if isinstance(kind, EntityTupleField):
        item, item_width = _entity(kind.type_, nullable=False)
        return _array(item, item_width, compact=flexible, null=null), None
    walk, width = _primitive(get_schema_field_type(field), flexible)
    if isinstance(kind, PrimitiveTupleField):
        return _array(walk, width, compact=flexible, null=null), None
    return walk, width


@functools.cache
def _entity(entity: type, *, nullable: bool) -> tuple[Walk, int | None]:
    """An entity: an int8 marker if nullable (-1: null), its fields in order (runs of
    fixed-width fields in one step), then, in flexible versions, its tagged fields. Its
    width when that is fixed (a classic entity of fixed-width fields only)."""
    flexible = bool(getattr(entity, "__flexible__", False))
    steps: list[Walk] = []
    tagged: dict[int, Walk] = {}
    run = total = 0
    fixed = True
    for field in dataclasses.fields(entity):
        walk, width = _field_walk(entity, field, flexible=flexible)
        tag = get_field_tag(field)
        if tag is not None:
            tagged[int(tag)] = walk
        elif width is not None:
            run += width
            total += width
        else:
            fixed = False
            if run:
                steps.append(_fixed(run))
                run = 0
            steps.append(walk)
    if run:
        steps.append(_fixed(run))
    if fixed and not flexible and not nullable:
        return _fixed(total), total
    fields_walk = _sequence(tuple(steps))
    body = _with_tagged_fields(fields_walk, tagged) if flexible else fields_walk
    return (_nullable(body) if nullable else body), None


def _sequence(steps: tuple[Walk, ...]) -> Walk:
    def walk(frame: bytes, offset: int) -> int:
        for step in steps:
            offset = step(frame, offset)
        return offset

    return walk


def _with_tagged_fields(fields_walk: Walk, tagged: Mapping[int, Walk]) -> Walk:
    """Tagged fields: a count, then (tag, size, value) each. kio reads a known tag's value
    by its schema whatever the size says, so that is what is checked; an unknown one is
    skipped by its size (kio refuses it, having allocated nothing), and noted for
    ``without_unknown_tags`` with the count that remains without it."""

    def walk(frame: bytes, offset: int) -> int:
        offset = fields_walk(frame, offset)
        count_at = offset
        count, offset = _uvarint(frame, offset)
        count_end = offset
        unknown: list[Edit] = []
        for _ in range(count):
            start = offset
            tag, offset = _uvarint(frame, offset)
            size, offset = _uvarint(frame, offset)
            known = tagged.get(tag)
            if known is None:
                offset = _sized(size, offset, frame, f"tagged field {tag}")
                unknown.append((start, offset, b""))
            else:
                offset = known(frame, offset)
        edits = _EDITS.get()
        if unknown and edits is not None:
            edits.append((count_at, count_end, _uvarint_bytes(count - len(unknown))))
            edits.extend(unknown)
        return offset

    return walk


def _nullable(body: Walk) -> Walk:
    def walk(frame: bytes, offset: int) -> int:
        if offset >= len(frame):
            raise _underflow("a null marker", 1, frame, offset)
        if frame[offset] == 0xFF:  # int8 -1
            return offset + 1
        return body(frame, offset + 1)

    return walk
