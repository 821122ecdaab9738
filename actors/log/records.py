"""Record batches of message format v2, as clients send them and as the log stores them.

Kafka's ``DefaultRecordBatch`` (the header, read in place), the checks of
``Log.analyzeAndValidateRecords`` and ``LogValidator.validateMessagesAndAssignOffsets``
(leader) and the offset assignment they end with. A batch is never decoded into objects:
the 61-byte header is unpacked from the buffer, the payload stays where it is, and what
goes to the segment is a new header prefix followed by a view of the client's bytes. The
layout (big-endian)::

    0  baseOffset int64          12 partitionLeaderEpoch int32   16 magic int8
    8  batchLength int32         17 crc uint32 (CRC-32C of bytes 21..end)
    21 attributes int16          23 lastOffsetDelta int32        27 firstTimestamp int64
    35 maxTimestamp int64        43 producerId int64             51 producerEpoch int16
    53 baseSequence int32        57 recordsCount int32           61 records

Uncompressed records are read in full (``DefaultRecord.readFrom``'s structure: lengths,
varints, headers): a large batch a field at a time across its records
(``actors.log.record_scan``), any other one record by record. A leader reads a
compressed one's records too, decompressed, for its max timestamp and the record checks
(``RecordChecks``), and stores its compressed bytes as sent unless their offset deltas
are not 0..n-1, when it rebuilds the batch (docs/log-format.md says what Kafka does that
we do not). Every rejection is a ``KafkaApiError`` carrying the code Kafka
answers with; a record refused is a ``RecordValidationError`` naming each one.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple, NoReturn

import numpy as np
from crc32c import crc32c

from actors.log import record_scan
from actors.log.compression import (
    CompressionError,
    StreamEnd,
    compress,
    decompress,
    decompress_stream,
)
from protocol.errors import ErrorCode, KafkaApiError, RecordValidationError

__all__ = [
    "LOG_OVERHEAD",
    "LONG_MAX",
    "NO_TIMESTAMP",
    "RECORD_BATCH_OVERHEAD",
    "BatchHeader",
    "CompressionType",
    "RecordChecks",
    "TimestampType",
    "ValidatedRecords",
    "assign_offsets",
    "batch_headers",
    "check_follower_batches",
    "check_stored_batch",
    "last_offset_at",
    "read_header",
    "record_timestamps",
    "stored_record_timestamps",
    "whole_batches_end",
    "write_varint",
]

LOG_OVERHEAD = 12
"""Bytes before a batch's length is known: base offset and batch length (``Records``)."""
RECORD_BATCH_OVERHEAD = 61
"""A v2 batch's header (``DefaultRecordBatch.RECORD_BATCH_OVERHEAD``)."""
NO_TIMESTAMP = -1
"""``RecordBatch.NO_TIMESTAMP``."""
LONG_MAX = (1 << 63) - 1
"""``Long.MaxValue``: ``message.timestamp.difference.max.ms``'s default, no bound."""

_CRC_OFFSET = 17
_ATTRIBUTES_OFFSET = 21
_HEADER = struct.Struct(">qiibIhiqqqhii")
_LENGTH = struct.Struct(">qi")
_PREFIX = struct.Struct(">qiib")  # base offset, batch length, leader epoch, magic
_ATTRIBUTES = struct.Struct(">h")
_MAX_TIMESTAMP = struct.Struct(">q")
_MAX_TIMESTAMP_OFFSET = 35
_LAST_OFFSET = struct.Struct(">qi11xi")  # base offset, length, last offset delta
_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_MASK = 0x08
_TRANSACTIONAL_MASK = 0x10
_CONTROL_MASK = 0x20


class CompressionType(IntEnum):
    """Attribute bits 0-2 (``CompressionType``)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(IntEnum):
    """Attribute bit 3, and a topic's ``message.timestamp.type`` (``TimestampType``)."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class BatchHeader(NamedTuple):
    """A v2 batch's header as it is in the buffer at ``position`` (``DefaultRecordBatch``
    accessors). Nothing here is checked: see ``assign_offsets`` and
    ``check_follower_batches``. (A named tuple: one is made per batch appended, several
    times cheaper than a frozen dataclass.)"""

    position: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """The whole batch's bytes (``sizeInBytes``)."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> int:
        """The codec id (an unknown one is returned as is; ``CompressionType`` names 0-4)."""
        return self.attributes & _COMPRESSION_MASK

    @property
    def timestamp_type(self) -> TimestampType:
        if self.attributes & _TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0


def read_header(
    buffer: bytes | memoryview, position: int = 0, *, located_at: int | None = None
) -> BatchHeader:
    """The header at ``position``; the buffer must hold its 61 bytes. ``located_at``: the
    position to record instead (where the buffer was read from in a file)."""
    at = position if located_at is None else located_at
    return BatchHeader(at, *_HEADER.unpack_from(buffer, position))


def last_offset_at(buffer: bytes | memoryview, position: int) -> tuple[int, int]:
    """``(last offset, size)`` of the batch at ``position`` from its first 27 bytes: what a
    scan for an offset needs (``FileLogInputStream``'s lazy batch)."""
    base, length, delta = _LAST_OFFSET.unpack_from(buffer, position)
    return base + delta, length + LOG_OVERHEAD


def batch_headers(buffer: bytes | memoryview, start: int = 0) -> Iterator[BatchHeader]:
    """The headers of the whole batches from ``start``, stopping at a torn tail (fewer
    bytes than a header, or than the batch's stated size) as Kafka's
    ``ByteBufferLogInputStream`` does. Sizes below a header raise CORRUPT_MESSAGE."""
    end = len(buffer)
    position = start
    while end - position >= RECORD_BATCH_OVERHEAD:
        _, length = _LENGTH.unpack_from(buffer, position)
        size = length + LOG_OVERHEAD
        if size < RECORD_BATCH_OVERHEAD:
            raise KafkaApiError(
                ErrorCode.CORRUPT_MESSAGE,
                f"Record batch size {size} at position {position} is less than the "
                f"minimum record batch overhead ({RECORD_BATCH_OVERHEAD})",
            )
        if size > end - position:
            return
        yield read_header(buffer, position)
        position += size


def whole_batches_end(buffer: bytes | memoryview) -> int:
    """Where the whole batches at the start of ``buffer`` end (lengths only: what a read
    returns, cut before a batch that does not fit)."""
    end = len(buffer)
    position = 0
    while end - position >= LOG_OVERHEAD:
        _, length = _LENGTH.unpack_from(buffer, position)
        if length + LOG_OVERHEAD > end - position or length < 0:
            break
        position += length + LOG_OVERHEAD
    return position


def _check_batch(buffer: bytes | memoryview, header: BatchHeader, max_message_bytes: int) -> None:
    """What every append checks of each batch, leader or follower, in Kafka's order:
    the size against ``max.message.bytes``, the magic, the CRC."""
    if header.size > max_message_bytes:
        raise KafkaApiError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"The record batch at offset {header.base_offset} is {header.size} bytes, "
            f"larger than the maximum allowed ({max_message_bytes})",
        )
    if header.magic != 2:
        if header.magic in (0, 1):
            raise KafkaApiError(
                ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
                f"Message format v{header.magic} is not supported: kemu stores v2 batches only",
            )
        raise KafkaApiError(ErrorCode.CORRUPT_MESSAGE, f"Invalid magic found: {header.magic}")
    start = header.position
    # Through a view: slicing the bytes themselves would copy the batch first.
    covered = memoryview(buffer)[start + _ATTRIBUTES_OFFSET : start + header.size]
    if crc32c(covered) != header.crc:
        raise KafkaApiError(
            ErrorCode.CORRUPT_MESSAGE,
            f"Record batch at position {start} is corrupt (stored crc = {header.crc})",
        )
    if header.compression > CompressionType.ZSTD:
        # CompressionType.forId's IllegalArgumentException: Kafka answers it as unknown.
        raise KafkaApiError(
            ErrorCode.UNKNOWN_SERVER_ERROR, f"Unknown compression type id: {header.compression}"
        )


def check_stored_batch(data: bytes, *, located_at: int = 0) -> BatchHeader:
    """The header of one batch read back from a segment (``data`` is the whole batch),
    checked as recovery checks it (``DefaultRecordBatch.ensureValid``): v2, at least a
    header long, and its CRC. CORRUPT_MESSAGE otherwise."""
    if len(data) < RECORD_BATCH_OVERHEAD:
        raise KafkaApiError(ErrorCode.CORRUPT_MESSAGE, "Record batch is shorter than its header")
    header = read_header(data)
    if header.magic != 2 or header.size != len(data):
        raise KafkaApiError(
            ErrorCode.CORRUPT_MESSAGE, f"Invalid stored batch (magic {header.magic})"
        )
    if crc32c(data[_ATTRIBUTES_OFFSET:]) != header.crc:
        raise KafkaApiError(ErrorCode.CORRUPT_MESSAGE, "Record batch is corrupt")
    return read_header(data, located_at=located_at)


def _whole_batches(buffer: bytes | memoryview, max_message_bytes: int) -> list[BatchHeader]:
    """Every batch of a produce's records, checked; the records must be whole batches."""
    headers, end = check_follower_batches(buffer, max_message_bytes)
    if end != len(buffer):
        raise KafkaApiError(
            ErrorCode.CORRUPT_MESSAGE,
            f"{len(buffer) - end} bytes at position {end} are not a whole record batch",
        )
    if not headers:
        raise KafkaApiError(
            ErrorCode.INVALID_RECORD, "An append must have at least one record batch"
        )
    return headers


def check_follower_batches(
    buffer: bytes | memoryview, max_message_bytes: int
) -> tuple[list[BatchHeader], int]:
    """The whole batches of a follower's fetched records, each checked as the leader's
    are on the way in (size, magic, CRC); a torn tail is left out (Kafka's
    ``Log.trimInvalidBytes``). Returns the headers and the bytes they cover."""
    headers = []
    end = 0
    for header in batch_headers(buffer):
        _check_batch(buffer, header, max_message_bytes)
        headers.append(header)
        end = header.position + header.size
    return headers, end


def _invalid(message: str) -> KafkaApiError:
    return KafkaApiError(ErrorCode.INVALID_RECORD, message)


def _check_client_batch(header: BatchHeader) -> None:
    """``LogValidator.validateBatch`` for a client's v2 batch, and the base offset rule of
    ``Log.analyzeAndValidateRecords``."""
    if header.base_offset != 0:
        raise _invalid(
            f"The baseOffset of the record batch in the append should be 0, "
            f"but it is {header.base_offset}"
        )
    if header.last_offset_delta < 0:
        raise _invalid(
            f"Batch has an invalid offset range: [{header.base_offset}, {header.last_offset}]"
        )
    if header.records_count <= 0:
        raise _invalid(f"Invalid reported count for record batch: {header.records_count}")
    if header.records_count != header.last_offset_delta + 1:
        raise _invalid(
            f"Inconsistent batch offset range [{header.base_offset}, {header.last_offset}] "
            f"and count of records {header.records_count}"
        )
    if header.is_control:
        raise _invalid("Clients are not allowed to write control records")
    if header.has_producer_id and header.base_sequence < 0:
        raise _invalid(
            f"Invalid sequence number {header.base_sequence} in record batch "
            f"with producerId {header.producer_id}"
        )
    if header.is_transactional and not header.has_producer_id:
        raise _invalid("A transactional record batch must have a producer id")


class _Malformed(Exception):
    """A record's structure is broken (turned into INVALID_RECORD by the caller)."""


def _varint(buffer: bytes | memoryview, position: int, end: int, bits: int) -> tuple[int, int]:
    """A zig-zag varint (``ByteUtils.readVarint``/``readVarlong``: ``bits`` 35 or 70 bounds
    its length to 5 or 10 bytes) and the position after it."""
    if position < end:  # the common case, a value below 64 in magnitude: one byte
        byte = buffer[position]
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), position + 1
    raw = 0
    shift = 0
    while True:
        if position >= end:
            raise _Malformed("a varint runs past the record")
        byte = buffer[position]
        position += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (raw >> 1) ^ -(raw & 1), position
        shift += 7
        if shift >= bits:
            raise _Malformed("a varint is too long")


def record_timestamps(
    buffer: bytes | memoryview, header: BatchHeader, *, at: int | None = None
) -> Iterator[tuple[int, int]]:
    """``(offset delta, timestamp)`` of each record of an uncompressed batch, checking the
    structure as ``DefaultRecord.readFrom`` does; INVALID_RECORD where it is broken. The
    batch is at ``header.position`` in ``buffer``, or at ``at``."""
    for delta, timestamp, _, _ in _records(buffer, header, header.position if at is None else at):
        yield delta, timestamp


def stored_record_timestamps(batch: bytes, header: BatchHeader) -> Iterator[tuple[int, int]]:
    """``(offset, timestamp)`` of each record of a stored batch, ``batch`` its bytes alone,
    as iterating Kafka's ``RecordBatch`` gives them: a compressed batch's records
    decompressed, and under LogAppendTime every record's timestamp the batch's max
    timestamp (``DefaultRecordBatch`` reads its records with ``logAppendTime``). A broken
    record is INVALID_RECORD (``InvalidRecordException``), a payload that does not
    decompress UNKNOWN_SERVER_ERROR (the stream's ``KafkaException``)."""
    if header.compression == CompressionType.NONE:
        payload, start = batch, RECORD_BATCH_OVERHEAD
    else:
        try:
            payload = decompress(header.compression, batch[RECORD_BATCH_OVERHEAD : header.size])
        except CompressionError as exc:
            raise KafkaApiError(
                ErrorCode.UNKNOWN_SERVER_ERROR, f"Failed to decompress record stream: {exc}"
            ) from None
        start = 0
    append_time = header.timestamp_type is TimestampType.LOG_APPEND_TIME
    try:
        for delta, timestamp, _, _ in _walk_records(payload, start, len(payload), header):
            yield header.base_offset + delta, header.max_timestamp if append_time else timestamp
    except _Malformed as exc:
        raise _invalid(f"Found invalid record structure: {exc}") from None


_Record = tuple[int, int, int, int]
"""A record as the walk reads it: offset delta, timestamp, key size, value size (a
negative size is a null key or value)."""


def _records(buffer: bytes | memoryview, header: BatchHeader, start: int) -> Iterator[_Record]:
    """Each record of the uncompressed batch at ``start``; INVALID_RECORD where the
    structure is broken."""
    data = buffer if isinstance(buffer, bytes) else bytes(buffer)
    position = start + RECORD_BATCH_OVERHEAD
    walk = _walk_records(data, position, start + header.size, header)
    try:
        yield from walk
    except _Malformed as exc:
        raise _invalid(f"Found invalid record structure: {exc}") from None


def _walk_records(data: bytes, position: int, end: int, header: BatchHeader) -> Iterator[_Record]:
    """The ``header.records_count`` records in ``data[position:end]``, which they must
    fill exactly (``_Malformed`` otherwise)."""
    # The produce path's hottest loop (every record of every batch a leader appends): the
    # varints of one and two bytes are read inline (offset deltas from 64 to 8191 take two,
    # as do most records of a linger's batch); the others through _varint, which also
    # reports what is malformed.
    first = header.first_timestamp
    varint = _varint
    key_size = 0
    for _ in range(header.records_count):
        # A record's length: one byte below 64 bytes, two below 8 KiB.
        byte = data[position] if position < end else 0x80
        if byte < 0x80:
            length, position = (byte >> 1) ^ -(byte & 1), position + 1
        elif position + 1 < end and data[position + 1] < 0x80:
            raw = (byte & 0x7F) | (data[position + 1] << 7)
            length, position = (raw >> 1) ^ -(raw & 1), position + 2
        else:
            length, position = varint(data, position, end, 35)
        record_end = position + length
        if length < 1 or record_end > end:
            raise _Malformed(f"record size {length} does not fit the batch")
        position += 1  # attributes, unused
        byte = data[position] if position < record_end else 0x80
        if byte < 0x80:
            delta, position = (byte >> 1) ^ -(byte & 1), position + 1
        elif position + 1 < record_end and data[position + 1] < 0x80:
            raw = (byte & 0x7F) | (data[position + 1] << 7)
            delta, position = (raw >> 1) ^ -(raw & 1), position + 2
        else:
            delta, position = varint(data, position, record_end, 70)
        byte = data[position] if position < record_end else 0x80
        if byte < 0x80:
            offset_delta, position = (byte >> 1) ^ -(byte & 1), position + 1
        elif position + 1 < record_end and data[position + 1] < 0x80:
            raw = (byte & 0x7F) | (data[position + 1] << 7)
            offset_delta, position = (raw >> 1) ^ -(raw & 1), position + 2
        else:
            offset_delta, position = varint(data, position, record_end, 35)
        for field in range(2):  # key, value: a negative size is null
            byte = data[position] if position < record_end else 0x80
            if byte < 0x80:
                size, position = (byte >> 1) ^ -(byte & 1), position + 1
            elif position + 1 < record_end and data[position + 1] < 0x80:
                raw = (byte & 0x7F) | (data[position + 1] << 7)
                size, position = (raw >> 1) ^ -(raw & 1), position + 2
            else:
                size, position = varint(data, position, record_end, 35)
            if size > 0:
                position += size
            if field == 0:
                key_size = size
        value_size = size
        byte = data[position] if position < record_end else 0x80
        if byte < 0x80:
            headers, position = (byte >> 1) ^ -(byte & 1), position + 1
        else:
            headers, position = varint(data, position, record_end, 35)
        if headers < 0:
            raise _Malformed(f"invalid number of record headers {headers}")
        for _header in range(headers):
            size, position = varint(data, position, record_end, 35)
            if size < 0:
                raise _Malformed(f"invalid negative header key size {size}")
            position += size
            size, position = varint(data, position, record_end, 35)
            if size > 0:
                position += size
        if position != record_end:
            raise _Malformed(
                f"expected to read {length} bytes in the record payload, "
                f"read {length + position - record_end}"
            )
        yield offset_delta, first + delta, key_size, value_size
    if position != end:
        raise _Malformed("incorrect declared batch size, records still remaining")


def _read_records(records: bytes, header: BatchHeader, base: int) -> tuple[int, int, int]:
    """What ``LogValidator.assignOffsetsNonCompressed`` learns reading every record of an
    uncompressed client batch: the largest record timestamp, the offset its record is
    given (``base`` plus its index: the validator's offset counter, not the record's own
    offset delta), or ``(NO_TIMESTAMP, -1)`` if none is above it; and how many records
    have no key. A broken record raises INVALID_RECORD. A large batch is scanned a field
    at a time (``record_scan``), anything it does not cover is walked."""
    count = header.records_count
    if count >= record_scan.MIN_RECORDS:
        start = header.position + RECORD_BATCH_OVERHEAD
        scanned = record_scan.scan(records, start, header.position + header.size, count)
        if scanned is not None:
            deltas, keyless, _ = scanned
            index = int(deltas.argmax())  # the first of the largest, as a strict ">" keeps
            largest = header.first_timestamp + int(deltas[index])
            if largest > NO_TIMESTAMP:
                return largest, base + index, keyless
            return NO_TIMESTAMP, -1, keyless
    batch_max, batch_max_offset, keyless = NO_TIMESTAMP, -1, 0
    for index, (_, timestamp, key_size, _) in enumerate(_records(records, header, header.position)):
        if timestamp > batch_max:
            batch_max, batch_max_offset = timestamp, base + index
        keyless += key_size < 0
    return batch_max, batch_max_offset, keyless


@dataclass(frozen=True, slots=True)
class RecordChecks:
    """What ``LogValidator.validateRecord`` holds each record of a client's batch to,
    besides a batch's own timestamp type: a key on a compacted topic (``validateKey``),
    and under CreateTime a timestamp within ``max_difference_ms`` of the broker's time
    (``validateTimestamp``; ``LONG_MAX``, the default, bounds nothing).
    ``topic_partition`` names the partition in the messages (``topic-0``)."""

    topic_partition: str = ""
    compacted: bool = False
    max_difference_ms: int = LONG_MAX


def _long(value: int) -> int:
    """``value`` as a Java ``long`` computes it (wrapping at 64 bits)."""
    return ((value + (1 << 63)) & ((1 << 64) - 1)) - (1 << 63)


def _record_error(
    header: BatchHeader, record: _Record, checks: RecordChecks, now_ms: int | None
) -> tuple[ErrorCode, str] | None:
    """``validateKey`` or else ``validateTimestamp`` for one record: its error and why.
    ``now_ms``: the broker's time where timestamps are bounded, else None."""
    offset_delta, timestamp, key_size, value_size = record
    if checks.compacted and key_size < 0:
        return ErrorCode.INVALID_RECORD, (
            f"Compacted topic cannot accept message without key in topic partition "
            f"{checks.topic_partition}."
        )
    offset = header.base_offset + offset_delta
    timestamp = _long(timestamp)
    if now_ms is not None and timestamp != NO_TIMESTAMP:
        now, most = now_ms, checks.max_difference_ms
        difference = _long(timestamp - now)
        if difference != -(1 << 63) and abs(difference) > most:  # Math.abs(MIN_VALUE) < 0
            return ErrorCode.INVALID_TIMESTAMP, (
                f"Timestamp {timestamp} of message with offset {offset} is out of range. "
                f"The timestamp should be within [{_long(now - most)}, {_long(now + most)}]"
            )
    if header.timestamp_type is TimestampType.LOG_APPEND_TIME:
        # The record as Kafka prints it: a compressed batch's records are read without
        # their key and value (PartialDefaultRecord, sizes as stored, -1 for null).
        if header.compression != CompressionType.NONE:
            shown = (
                f"PartialDefaultRecord(offset={offset}, timestamp={timestamp}, "
                f"key={key_size} bytes, value={value_size} bytes)"
            )
        else:
            shown = (
                f"DefaultRecord(offset={offset}, timestamp={timestamp}, "
                f"key={max(key_size, 0)} bytes, value={max(value_size, 0)} bytes)"
            )
        return ErrorCode.INVALID_TIMESTAMP, (
            f"Invalid timestamp type in message {shown}. "
            "Producer should not set timestamp type to LogAppendTime."
        )
    return None


def _read_compressed(records: bytes, header: BatchHeader) -> tuple[bytes, int, int, bool]:
    """What ``LogValidator.validateMessagesAndAssignOffsetsCompressed`` learns reading
    every record of a compressed client batch (``DefaultRecordBatch``'s stream
    iterator): the decompressed records, their largest timestamp (``NO_TIMESTAMP`` if
    none is above it), how many have no key and whether their offset deltas are 0..n-1
    (their offsets as Kafka checks them, the base offset being 0). A payload that does
    not decompress is UNKNOWN_SERVER_ERROR (the ``KafkaException`` its stream throws, which
    ``appendToLocalLog`` answers as unknown); a broken record, or records that do not
    fill the payload, INVALID_RECORD. A gzip stream cut short is read up to the cut:
    records that run past it are INVALID_RECORD (the ``EOFException`` is "premature
    EOF"), records that end right at it UNKNOWN_SERVER_ERROR (the check for bytes left
    over meets the cut as a ``KafkaException``). A snappy, lz4 or zstd stream cut short
    (or broken after its first blocks) is read up to the cut too, and ends as
    ``_read_to_the_cut`` says. A large batch is scanned a field
    at a time (``record_scan``), anything it does not cover walked."""
    start = header.position + RECORD_BATCH_OVERHEAD
    try:
        payload, stream_end = decompress_stream(
            header.compression, memoryview(records)[start : header.position + header.size]
        )
    except CompressionError as exc:
        raise KafkaApiError(
            ErrorCode.UNKNOWN_SERVER_ERROR, f"Failed to decompress record stream: {exc}"
        ) from None
    if stream_end is StreamEnd.TRUNCATED:
        _read_to_the_cut(payload, header)
    count = header.records_count
    scanned = (
        record_scan.scan(payload, 0, len(payload), count)
        if count >= record_scan.MIN_RECORDS
        else None
    )
    if scanned is not None:
        deltas, keyless, offsets = scanned
        largest = max(header.first_timestamp + int(deltas.max()), NO_TIMESTAMP)
        in_order = bool((offsets == np.arange(count)).all())
    else:
        largest, keyless, in_order = NO_TIMESTAMP, 0, True
        walk = _walk_records(payload, 0, len(payload), header)
        try:
            for index, (delta, timestamp, key_size, _) in enumerate(walk):
                largest = max(largest, timestamp)
                keyless += key_size < 0
                in_order &= delta == index
        except _Malformed as exc:
            raise _invalid(f"Found invalid record structure: {exc}") from None
    if stream_end is not StreamEnd.WHOLE:
        raise KafkaApiError(
            ErrorCode.UNKNOWN_SERVER_ERROR,
            "Error checking for remaining bytes after reading batch: the stream ends early",
        )
    return payload, largest, keyless, in_order


def _read_to_the_cut(payload: bytes, header: BatchHeader) -> NoReturn:
    """The records of a stream cut short whose reads past the cut throw a plain
    ``IOException`` (``StreamEnd.TRUNCATED``: zstd-jni's truncated source, snappy-java's
    chunk that fails to read, ``KafkaLZ4BlockInputStream``'s premature end), as
    ``DefaultRecordBatch``'s stream iterator meets them: each record before the cut is
    read whole and a broken one is INVALID_RECORD (``InvalidRecordException``); the first
    record that needs a byte past the cut, or the check for bytes left over once every
    record is read, meets the ``IOException`` as a ``KafkaException``, which
    ``appendToLocalLog`` answers UNKNOWN_SERVER_ERROR. A record-level error before the
    cut (a record without a key on a compacted topic, a timestamp out of range) is never
    reported: the iterator throws before ``LogValidator`` reports them. Raises always.

    A record here is cut when its length varint or its declared body reaches past the
    cut, as ``DefaultRecord.readFrom`` reads the whole body before parsing it.
    (``readPartiallyFrom``, which Kafka uses when the batch keeps its codec, reads a body
    64 bytes at a time, so there a field broken within a record's first bytes before the
    cut can be INVALID_RECORD though the record runs past the cut.)"""
    end = len(payload)
    position = 0
    read = 0  # records before the cut, the last of them perhaps broken
    cut = False
    for _ in range(header.records_count):
        at, raw, shift = position, 0, 0
        while at < end:
            byte = payload[at]
            at += 1
            raw |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80 or shift >= 35:
                break
        else:
            cut = True  # the length itself runs past the cut
            break
        length = (raw >> 1) ^ -(raw & 1)
        if byte >= 0x80 or length < 1:
            read += 1  # broken before the cut: the walk says how
            break
        if at + length > end:
            cut = True
            break
        read += 1
        position = at + length
    limit = position if cut else end
    try:
        for _ in _walk_records(payload, 0, limit, header._replace(records_count=read)):
            pass
    except _Malformed as exc:
        raise _invalid(f"Found invalid record structure: {exc}") from None
    if cut:
        raise KafkaApiError(
            ErrorCode.UNKNOWN_SERVER_ERROR,
            "Failed to decompress record stream: a record runs past the stream's cut",
        )
    raise KafkaApiError(
        ErrorCode.UNKNOWN_SERVER_ERROR,
        "Error checking for remaining bytes after reading batch: the stream ends early",
    )


def write_varint(out: bytearray, value: int) -> None:
    """A signed varlong, zig-zag encoded (``ByteUtils.writeVarlong``)."""
    number = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    while number >= 0x80:
        out.append((number & 0x7F) | 0x80)
        number >>= 7
    out.append(number)


def _rebuilt(
    payload: bytes,
    header: BatchHeader,
    base: int,
    leader_epoch: int,
    max_timestamp: int,
    append_time: bool,
) -> bytes:
    """``LogValidator.buildRecordsAndAssignOffsets`` for a compressed batch whose records'
    offset deltas are not 0..n-1: a new batch of the same codec from ``base`` (offset
    deltas 0..n-1, timestamp deltas from the first record's, record attributes 0; keys,
    values and headers as sent), its producer fields and transactional bit kept, its
    max timestamp ``max_timestamp`` (already the append time under LogAppendTime)."""
    body = bytearray()
    first = NO_TIMESTAMP
    position = 0
    end = len(payload)
    for index in range(header.records_count):  # read whole already: well formed
        length, position = _varint(payload, position, end, 35)
        record_end = position + length
        delta, at = _varint(payload, position + 1, record_end, 70)
        _, at = _varint(payload, at, record_end, 35)  # the offset delta, replaced
        timestamp = header.first_timestamp + delta
        if index == 0:
            first = timestamp
        one = bytearray(b"\x00")
        write_varint(one, timestamp - first)
        write_varint(one, index)
        one += payload[at:record_end]
        write_varint(body, len(one))
        body += one
        position = record_end
    records = compress(header.compression, bytes(body))
    attributes = header.compression | (header.attributes & _TRANSACTIONAL_MASK)
    if append_time:
        attributes |= _TIMESTAMP_TYPE_MASK
    return sealed_batch(
        records,
        base_offset=base,
        leader_epoch=leader_epoch,
        attributes=attributes,
        last_offset_delta=header.records_count - 1,
        first_timestamp=first,
        max_timestamp=max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        records_count=header.records_count,
    )


def sealed_batch(
    records: bytes,
    *,
    base_offset: int,
    leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    first_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    records_count: int,
) -> bytes:
    """A magic v2 batch of the encoded (and compressed, as ``attributes`` say) ``records``
    with these header fields, its length and CRC computed (``DefaultRecordBatch.
    writeHeader``): what every batch kemu builds (a producer's, a rebuilt one, a cleaned
    one) is sealed by."""
    batch = bytearray(
        _HEADER.pack(
            base_offset,
            RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(records),
            leader_epoch,
            2,
            0,
            attributes,
            last_offset_delta,
            first_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            records_count,
        )
    )
    batch += records
    struct.pack_into(">I", batch, _CRC_OFFSET, crc32c(memoryview(batch)[_ATTRIBUTES_OFFSET:]))
    return bytes(batch)


def _validate_records(
    records: bytes,
    header: BatchHeader,
    keyless: int,
    checks: RecordChecks,
    now_ms: int | None,
    payload: bytes | None,
) -> None:
    """``LogValidator.validateRecord`` over every record of a client's batch, then
    ``processRecordErrors``: any record refused refuses the batch, INVALID_TIMESTAMP if
    one of them is a timestamp's, else INVALID_RECORD, with every refused record's index
    and reason. The records are read again only where one could be refused: a compacted
    topic (an uncompressed batch only if ``keyless``, the records without a key, is not
    0; a compressed one is decompressed), timestamps bounded, or a batch claiming
    LogAppendTime. ``now_ms``: the broker's time where timestamps are bounded;
    ``payload``: a compressed batch's records, decompressed (``_read_compressed``)."""
    if not (
        now_ms is not None
        or header.timestamp_type is TimestampType.LOG_APPEND_TIME
        or (checks.compacted and keyless)
    ):
        return
    found = (
        _records(records, header, header.position)
        if payload is None
        else _walk_records(payload, 0, len(payload), header)  # read whole already
    )
    errors: list[tuple[int, str]] = []
    timestamps = False
    for index, record in enumerate(found):
        error = _record_error(header, record, checks, now_ms)
        if error is not None:
            code, why = error
            timestamps |= code is ErrorCode.INVALID_TIMESTAMP
            errors.append((index, why))
    if not errors:
        return
    if timestamps:
        raise RecordValidationError(
            ErrorCode.INVALID_TIMESTAMP,
            "One or more records have been rejected due to invalid timestamp",
            tuple(errors),
        )
    raise RecordValidationError(
        ErrorCode.INVALID_RECORD, "One or more records have been rejected", tuple(errors)
    )


@dataclass(frozen=True, slots=True)
class ValidatedRecords:
    """An append after validation and offset assignment: what to write and what it holds
    (Kafka's ``ValidationAndOffsetAssignResult`` with ``LogAppendInfo``'s counts).

    ``chunks`` are written one after the other: per batch a rewritten header prefix and a
    view of the rest of the batch as sent. ``batches`` are the headers as written."""

    chunks: tuple[bytes | memoryview, ...]
    size: int
    batches: tuple[BatchHeader, ...]
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    source_compression: int


def assign_offsets(
    records: bytes,
    *,
    next_offset: int,
    leader_epoch: int,
    max_message_bytes: int,
    timestamp_type: TimestampType,
    now_ms: int,
    checks: RecordChecks | None = None,
) -> ValidatedRecords:
    """Check a client's records and give them offsets from ``next_offset``, in place, as
    ``LogValidator.assignOffsetsNonCompressed`` and the in-place branch of
    ``validateMessagesAndAssignOffsetsCompressed`` do for v2: base offset and partition
    leader epoch are rewritten (outside the CRC); the max timestamp and the
    timestamp-type bit become the topic's (``now_ms`` under LogAppendTime, the largest
    record timestamp under CreateTime), and only when they change is the CRC computed
    again. Everything else is kept byte for byte, but for a compressed batch whose
    records' offset deltas are not 0..n-1, which is rebuilt (``_rebuilt``). ``checks``:
    what each record is held to (``RecordChecks``: by default, no key needed and
    timestamps unbounded)."""
    buffer = memoryview(records)
    headers = _whole_batches(records, max_message_bytes)
    chunks: list[bytes | memoryview] = []
    written: list[BatchHeader] = []
    offset = next_offset
    max_timestamp = NO_TIMESTAMP
    offset_of_max = -1
    source = CompressionType.NONE.value
    append_time = timestamp_type is TimestampType.LOG_APPEND_TIME
    checks = checks or RecordChecks()
    bounded = not append_time and checks.max_difference_ms < LONG_MAX
    bounded_now = now_ms if bounded else None
    size = len(records)
    for header in headers:
        _check_client_batch(header)
        base = offset
        inner, in_order = None, True
        if header.compression != CompressionType.NONE:
            source = header.compression
            # Its max timestamp is its records' largest, and stands for its last offset
            # (validateMessagesAndAssignOffsetsCompressed, in place).
            inner, batch_max, keyless, in_order = _read_compressed(records, header)
            batch_max_offset = base + header.last_offset_delta
        else:
            batch_max, batch_max_offset, keyless = _read_records(records, header, base)
        _validate_records(records, header, keyless, checks, bounded_now, inner)
        offset = base + header.last_offset_delta + 1
        if batch_max > max_timestamp:
            max_timestamp, offset_of_max = batch_max, batch_max_offset
        if append_time:
            attributes = header.attributes | _TIMESTAMP_TYPE_MASK
            new_max = now_ms
        else:
            attributes = header.attributes & ~_TIMESTAMP_TYPE_MASK
            new_max = batch_max
        if inner is not None and not in_order:
            batch = _rebuilt(inner, header, base, leader_epoch, new_max, append_time)
            if len(batch) > max_message_bytes:  # Log.append, messageSizeMaybeChanged
                raise KafkaApiError(
                    ErrorCode.MESSAGE_TOO_LARGE,
                    f"Message batch size is {len(batch)} bytes in append to partition "
                    f"{checks.topic_partition} which exceeds the maximum configured size of "
                    f"{max_message_bytes}.",
                )
            chunks.append(batch)
            written.append(read_header(batch))
            size += len(batch) - header.size
            continue
        start, end = header.position, header.position + header.size
        if attributes == header.attributes and new_max == header.max_timestamp:
            crc = header.crc
            chunks.append(_PREFIX.pack(base, header.batch_length, leader_epoch, 2))
            chunks.append(buffer[start + _CRC_OFFSET : end])
        else:  # DefaultRecordBatch.setMaxTimestamp: the CRC covers what changed
            tail = bytearray(buffer[start + _ATTRIBUTES_OFFSET : start + RECORD_BATCH_OVERHEAD])
            _ATTRIBUTES.pack_into(tail, 0, attributes)
            _MAX_TIMESTAMP.pack_into(tail, _MAX_TIMESTAMP_OFFSET - _ATTRIBUTES_OFFSET, new_max)
            payload = buffer[start + RECORD_BATCH_OVERHEAD : end]
            crc = crc32c(payload, crc32c(tail))
            prefix = _PREFIX.pack(base, header.batch_length, leader_epoch, 2)
            chunks.append(prefix + crc.to_bytes(4, "big") + tail)
            chunks.append(payload)
        written.append(
            header._replace(
                base_offset=base,
                partition_leader_epoch=leader_epoch,
                crc=crc,
                attributes=attributes,
                max_timestamp=new_max,
            )
        )
    last_offset = offset - 1
    if append_time:
        max_timestamp, offset_of_max = now_ms, last_offset
    return ValidatedRecords(
        chunks=tuple(chunks),
        size=size,
        batches=tuple(written),
        first_offset=next_offset,
        last_offset=last_offset,
        max_timestamp=max_timestamp,
        offset_of_max_timestamp=offset_of_max,
        log_append_time=now_ms if append_time else NO_TIMESTAMP,
        source_compression=source,
    )
