"""Byte-level mutations of a valid input, as hypothesis strategies: bits flipped, bytes
inserted, deleted or overwritten with the integers that break length handling (0, -1,
the extremes, the length of the rest plus or minus one), truncation, and a size prefix
rewritten. Hypothesis draws every choice, so an input replays from its seed and shrinks
towards fewer, smaller mutations."""

from __future__ import annotations

import struct
from typing import Final

from hypothesis import strategies as st

_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")

INTERESTING_INT32: Final = (
    0, 1, -1, 2, 127, 128, 255, 256, 0x7FFF, 0x8000, 0xFFFF, 0x10000,
    0x7FFFFFFF, -0x80000000, -2, 100 * 1024 * 1024, 100 * 1024 * 1024 + 1,
    16 * 1024 * 1024, 16 * 1024 * 1024 + 1,
)  # fmt: skip
"""Lengths and counts that find off-by-ones and overflows (the two frame-size limits)."""

INTERESTING_INT16: Final = (0, 1, -1, -2, 0x7FFF, -0x8000, 0x100)

MAX_MUTATIONS: Final = 4


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` with one to ``MAX_MUTATIONS`` mutations applied in turn."""
    buffer = bytearray(data)
    for _ in range(draw(st.integers(1, MAX_MUTATIONS))):
        buffer = _one_mutation(draw, bytes(buffer))
    return bytes(buffer)


def _one_mutation(draw: st.DrawFn, data: bytes) -> bytearray:
    size = len(data)
    kind = draw(st.integers(0, 9 if size else 5))
    position = draw(st.integers(0, size))
    if kind == 0:
        return _insert(data, position, draw(st.binary(min_size=1, max_size=16)))
    if kind == 1:
        return _truncate(data, position)
    if kind == 2:
        return _varint(data, position, draw(st.integers(0, 2**35)))
    if kind == 3:
        return _write_int(data, position, draw(st.sampled_from(INTERESTING_INT32)), _INT32)
    if kind == 4:
        return _write_int(data, position, draw(st.sampled_from(INTERESTING_INT16)), _INT16)
    if kind == 5:
        return _resize(data, draw(st.sampled_from(INTERESTING_INT32)), draw(st.integers(-8, 8)))
    inside = min(position, size - 1)
    if kind == 6:
        return _flip(data, inside, draw(st.integers(0, 7)))
    if kind == 7:
        return _set_byte(data, inside, draw(st.sampled_from((0, 0x7F, 0x80, 0xFF))))
    if kind == 8:
        return _delete(data, inside, draw(st.integers(1, 16)))
    return _duplicate(data, inside, draw(st.integers(1, 32)))


def _flip(data: bytes, index: int, bit: int) -> bytearray:
    out = bytearray(data)
    out[index] ^= 1 << bit
    return out


def _set_byte(data: bytes, index: int, value: int) -> bytearray:
    out = bytearray(data)
    out[index] = value
    return out


def _insert(data: bytes, index: int, extra: bytes) -> bytearray:
    return bytearray(data[:index] + extra + data[index:])


def _delete(data: bytes, index: int, count: int) -> bytearray:
    return bytearray(data[:index] + data[index + count :])


def _duplicate(data: bytes, index: int, count: int) -> bytearray:
    """A run of the input repeated in place: repeated fields, arrays one item longer."""
    run = data[index : index + count]
    return bytearray(data[:index] + run + data[index:])


def _truncate(data: bytes, index: int) -> bytearray:
    return bytearray(data[:index])


def _write_int(data: bytes, index: int, value: int, form: struct.Struct) -> bytearray:
    """Overwrite (or append, at the end) a big-endian integer: a length or a count."""
    out = bytearray(data)
    packed = form.pack(value)
    out[index : index + len(packed)] = packed
    return out


def _varint(data: bytes, index: int, value: int) -> bytearray:
    """Overwrite with an unsigned varint (a compact length, in flexible versions)."""
    encoded = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            encoded.append(byte | 0x80)
        else:
            encoded.append(byte)
            break
    out = bytearray(data)
    out[index : index + len(encoded)] = encoded
    return out


def _resize(data: bytes, value: int, delta: int) -> bytearray:
    """The 4-byte size prefix rewritten: an interesting value, or the true size off by
    ``delta``."""
    out = bytearray(data)
    true_size = max(len(data) - _INT32.size, 0)
    size = value if delta == 0 else true_size + delta
    out[: _INT32.size] = _INT32.pack(max(min(size, 0x7FFFFFFF), -0x80000000))
    return out
