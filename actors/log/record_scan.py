"""The records of a large uncompressed batch checked a field at a time across all of
them (numpy), instead of a record at a time: the produce path's fast lane.

A leader must read every record of an uncompressed v2 batch (``LogValidator.
assignOffsetsNonCompressed`` iterates the batch: ``DefaultRecord.readFrom`` refuses a
broken structure, and the batch's max timestamp is the largest record timestamp). Only
where each record starts is sequential (a record's length says where the next one begins):
``scan`` follows the lengths, checking a guess for a run of records at once where records
are of one size and hopping one at a time where they vary, then decodes each later field
(timestamp delta, offset delta, key, value, header count) for every record at once.

It covers the shape clients send: varints of up to three bytes, record lengths below
8 KiB, no record headers. Anything else, including every broken batch, it declines
(``None``) and ``records.record_timestamps`` walks the batch record by record, which is
also what answers Kafka's error for a malformed one. So ``scan`` accepts exactly the
batches that walk accepts, with the same result, only faster.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["MIN_RECORDS", "scan"]

MIN_RECORDS = 32
"""Below this many records the walk is as fast: numpy's cost per call is paid per field."""

_Positions = npt.NDArray[np.int64]
_Bytes = npt.NDArray[np.uint8]


def scan(
    data: bytes, records_start: int, end: int, count: int
) -> tuple[_Positions, int, _Positions] | None:
    """The timestamp delta of each of the ``count`` records in ``data[records_start:end]``,
    how many have no key and each one's offset delta, if every record is well formed and
    of the common shape; ``None`` to have the batch walked instead."""
    buffer: _Bytes = np.frombuffer(data, dtype=np.uint8)
    record_ends = _record_ends(data, buffer, records_start, end, count) if count > 0 else None
    if record_ends is None:
        return None
    starts = np.empty_like(record_ends)
    starts[0] = records_start
    starts[1:] = record_ends[:-1]
    # The length varints: one byte, or two when the first has the high bit and the second
    # not; positive (zig-zag's low bit clear) and not zero, as the hops took them.
    first = buffer[starts]
    two = first >= 0x80
    position = starts + 1 + two
    top = len(buffer) - 1
    if (
        (first & 1).any()
        or (two & (buffer[np.minimum(starts + 1, top)] >= 0x80)).any()
        or (position >= record_ends).any()
    ):
        return None
    position += 1  # attributes, unused
    timestamp_delta = _varints(buffer, position)
    if timestamp_delta is None:
        return None
    deltas, position = timestamp_delta
    offset_delta = _varints(buffer, position)
    if offset_delta is None:
        return None
    offsets, position = offset_delta
    keyless = 0
    for field in range(2):  # key, value: a negative size is null
        size = _varints(buffer, position)
        if size is None:
            return None
        sizes, position = size
        if field == 0:
            keyless = int(np.count_nonzero(sizes < 0))
        position += np.maximum(sizes, 0)
    # The header count: no headers, one zero byte (a record with headers is walked).
    if (buffer[np.minimum(position, top)] != 0).any():
        return None
    position += 1
    # Every position only grew: a record whose fields end at its end read nothing past it.
    if not np.array_equal(position, record_ends):
        return None
    return deltas, keyless, offsets


_FIRST_RUN = 16
"""Records a first guess at a stride covers; each guess that holds doubles it."""
_LONGEST_RUN = 4096
_HOPS = 64
"""Records hopped one by one after a guess that held for fewer than 8."""


def _record_ends(
    data: bytes, buffer: _Bytes, position: int, end: int, count: int
) -> _Positions | None:
    """Where each record ends, reading the length varints as if each were one or two
    bytes and positive (``scan`` checks that they are); ``None`` unless the last one ends
    exactly at ``end``. Records of one size follow each other in runs (same-sized
    values): the next records are guessed to be as long as the current one and the guess
    is checked for all of them at once; where records vary, they are hopped one by one."""
    pieces: list[_Positions] = []
    run, hops, remaining = _FIRST_RUN, 0, count
    top = len(buffer) - 1
    try:
        while remaining:
            if hops:
                hopped = _hop(data, position, min(hops, remaining))
                pieces.append(np.array(hopped, dtype=np.int64))
                position, remaining, hops = hopped[-1], remaining - len(hopped), 0
                continue
            byte = data[position]
            if byte < 0x80:
                stride = 1 + (byte >> 1)
            else:
                stride = 2 + (((byte & 0x7F) | (data[position + 1] << 7)) >> 1)
            guessed = min(remaining, run, (end - position) // stride)
            if guessed < 1:  # the record runs past the batch
                return None
            starts = position + stride * np.arange(guessed, dtype=np.int64)
            held = np.flatnonzero(_strides(buffer, starts, top) != stride)
            confirmed = int(held[0]) if held.size else guessed
            pieces.append(starts[:confirmed] + stride)
            position += stride * confirmed
            remaining -= confirmed
            if confirmed == guessed:
                run = min(2 * run, _LONGEST_RUN)
            else:
                run, hops = _FIRST_RUN, _HOPS if confirmed < 8 else 0
    except IndexError:  # ran past the buffer: a broken length, for the walk to report
        return None
    # Positions only grew, so ending exactly at ``end`` means no record ran past it.
    return np.concatenate(pieces) if position == end else None


def _hop(data: bytes, position: int, count: int) -> list[int]:
    """The ends of ``count`` records from ``position``, one length at a time (as
    ``_strides`` reads them)."""
    ends: list[int] = []
    append = ends.append
    for _ in range(count):
        byte = data[position]
        if byte < 0x80:
            position += 1 + (byte >> 1)
        else:
            position += 2 + (((byte & 0x7F) | (data[position + 1] << 7)) >> 1)
        append(position)
    return ends


def _strides(buffer: _Bytes, starts: _Positions, top: int) -> _Positions:
    """The bytes each record at ``starts`` takes, its length varint read as one or two
    bytes and positive (a read past the buffer is clamped: such a record cannot end at
    the batch's end)."""
    first = buffer[starts].astype(np.int64)
    second = buffer[np.minimum(starts + 1, top)].astype(np.int64)
    two = first >= 0x80
    return np.where(two, 2 + (((first & 0x7F) | (second << 7)) >> 1), 1 + (first >> 1))


def _varints(buffer: _Bytes, position: _Positions) -> tuple[_Positions, _Positions] | None:
    """The zig-zag varint at each of ``position`` (up to three bytes) and the positions
    after them; ``None`` if any is longer. Reads past the buffer are clamped: such a
    record cannot end where it should, which ``scan`` checks last."""
    top = len(buffer) - 1
    first = buffer[np.minimum(position, top)].astype(np.int64)
    more = first >= 0x80
    if not more.any():
        return (first >> 1) ^ -(first & 1), position + 1
    second = buffer[np.minimum(position + 1, top)].astype(np.int64)
    raw = np.where(more, (first & 0x7F) | (second << 7), first)
    size = 1 + more
    more &= second >= 0x80
    if more.any():
        third = buffer[np.minimum(position + 2, top)].astype(np.int64)
        if (more & (third >= 0x80)).any():
            return None
        raw = np.where(more, (raw & 0x3FFF) | (third << 14), raw)
        size += more
    return (raw >> 1) ^ -(raw & 1), position + size
