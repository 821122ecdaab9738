"""Message formats v0 and v1 (Kafka's legacy message sets) and their conversion to and from
the record batches (message format v2) kemu's logs hold.

A message set is entries back to back: the offset (int64), the message's size (int32), then
the message: its CRC32 (of everything after it), the magic (0 or 1), the attributes (bits
0-2 the codec; in v1 bit 3 LogAppendTime), the timestamp (v1 only, int64), the key and the
value (int32 length, -1 for null, then the bytes). A compressed message is a wrapper whose
value is a compressed message set of inner messages; in v1 the inner offsets are relative
(0..n-1) and the wrapper's offset is the last inner one's.

* ``up_convert``: a Produce v0-v2's records made one v2 batch, as a 2.7 broker with
  ``log.message.format.version`` 2.7 does on append (``LogValidator.
  convertAndAssignOffsetsNonCompressed`` / ``validateMessagesAndAssignOffsetsCompressed``):
  every message checked (CRC32, magic, attributes, the wrapper's structure), the records
  kept with their keys, values and (v1) timestamps, the wrapper's codec kept. The log then
  assigns offsets as for any batch.
* ``down_convert``: v2 batches made messages of an older magic (``RecordsUtil.
  downConvert``): offsets kept, headers dropped, a compressed batch one wrapper of the
  same codec; ``fetch_down_convert`` sizes a Fetch v0-v3's answer as
  ``LazyDownConversionRecords`` does.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from crc32c import crc32c

from actors.log.batch_codec import ProducerRecord, encode_records, seal_batch
from actors.log.compression import CompressionError, compress, decompress
from actors.log.records import CompressionType, TimestampType, batch_headers
from cluster.kafka.records import RecordsError, batch_records
from protocol.errors import ErrorCode, KafkaApiError, KemuError

__all__ = [
    "LegacyMessage",
    "LegacyRecordsError",
    "down_convert",
    "fetch_down_convert",
    "read_message_set",
    "up_convert",
    "write_message",
]

LOG_OVERHEAD: Final = 12  # offset + size (``Records.LOG_OVERHEAD``)
RECORD_OVERHEAD_V0: Final = 14  # crc, magic, attributes, key and value lengths
RECORD_OVERHEAD_V1: Final = 22  # ... and the timestamp
_MAGIC_AT: Final = 16  # in an entry: after the offset, the size and the CRC (or epoch)
_LOG_APPEND_TIME: Final = 0x08
_CODEC_MASK: Final = 0x07
_NO_TIMESTAMP: Final = -1
_ENTRY = struct.Struct(">qi")
_V2_CRC_FROM: Final = 21


class LegacyRecordsError(KemuError):
    """Records a 2.7 broker refuses, with the code it answers."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class LegacyMessage:
    """One message of format v0 or v1, as read (``LegacyRecord``)."""

    offset: int
    magic: int
    attributes: int
    timestamp: int
    """The stored timestamp (v1), -1 in v0."""
    key: bytes | None
    value: bytes | None
    stored_crc: int
    computed_crc: int

    @property
    def codec(self) -> int:
        return self.attributes & _CODEC_MASK

    @property
    def log_append_time(self) -> bool:
        return self.magic > 0 and bool(self.attributes & _LOG_APPEND_TIME)

    @property
    def valid(self) -> bool:
        """``LegacyRecord.isValid``: the stored CRC32 is the computed one."""
        return self.stored_crc == self.computed_crc


def _corrupt(message: str) -> LegacyRecordsError:
    return LegacyRecordsError(ErrorCode.CORRUPT_MESSAGE, message)


def _invalid(message: str) -> LegacyRecordsError:
    return LegacyRecordsError(ErrorCode.INVALID_RECORD, message)


def _entries(data: bytes | memoryview) -> Iterator[tuple[int, int, int]]:
    """``(position, size, magic)`` of each whole entry, as ``ByteBufferLogInputStream.
    nextBatch`` cuts them: a size below the v0 overhead or a magic past 2 is corrupt; a
    partial entry at the end is left out."""
    position = 0
    while len(data) - position >= LOG_OVERHEAD:
        _, size = _ENTRY.unpack_from(data, position)
        if size < RECORD_OVERHEAD_V0:
            raise _corrupt(
                f"Record size {size} is less than the minimum record overhead "
                f"({RECORD_OVERHEAD_V0})"
            )
        if len(data) - position < LOG_OVERHEAD + size:
            return
        magic = struct.unpack_from(">b", data, position + _MAGIC_AT)[0]
        if magic < 0 or magic > 2:
            raise _corrupt(f"Invalid magic found in record: {magic}")
        yield position, LOG_OVERHEAD + size, magic
        position += LOG_OVERHEAD + size


def _bytes_at(message: bytes | memoryview, position: int) -> tuple[bytes | None, int]:
    if position + 4 > len(message):
        raise _corrupt("a message ends inside a length")
    (length,) = struct.unpack_from(">i", message, position)
    position += 4
    if length < 0:
        return None, position
    if position + length > len(message):
        raise _corrupt(f"a message field of {length} bytes runs past its message")
    return bytes(message[position : position + length]), position + length


def parse_message(offset: int, message: bytes | memoryview) -> LegacyMessage:
    """One message (the bytes after its offset and size). Its CRC is computed, not
    checked; a message whose lengths run past its end is corrupt."""
    if len(message) < RECORD_OVERHEAD_V0:
        raise _corrupt(f"Record is corrupt (size = {len(message)})")
    stored_crc, magic, attributes = struct.unpack_from(">Ibb", message, 0)
    computed_crc = zlib.crc32(message[4:])
    position = 6
    timestamp = _NO_TIMESTAMP
    if magic == 1:
        if len(message) < RECORD_OVERHEAD_V1:
            raise _corrupt(f"Record is corrupt (size = {len(message)})")
        (timestamp,) = struct.unpack_from(">q", message, position)
        position += 8
    key, position = _bytes_at(message, position)
    value, position = _bytes_at(message, position)
    return LegacyMessage(
        offset=offset,
        magic=magic,
        attributes=attributes & 0xFF,
        timestamp=timestamp,
        key=key,
        value=value,
        stored_crc=stored_crc,
        computed_crc=computed_crc,
    )


def read_message_set(data: bytes | memoryview) -> list[LegacyMessage]:
    """The messages of a (shallow) message set, not checked beyond their structure."""
    return [
        parse_message(
            _ENTRY.unpack_from(data, position)[0], data[position + LOG_OVERHEAD : position + size]
        )
        for position, size, _ in _entries(data)
    ]


def write_message(
    out: bytearray,
    offset: int,
    magic: int,
    *,
    key: bytes | None,
    value: bytes | None,
    timestamp: int = _NO_TIMESTAMP,
    attributes: int = 0,
) -> None:
    """One entry appended to ``out`` (``LegacyRecord.write`` behind the offset and size)."""
    body = bytearray(struct.pack(">bb", magic, attributes))
    if magic > 0:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        if field is None:
            body += struct.pack(">i", -1)
        else:
            body += struct.pack(">i", len(field)) + field
    out += _ENTRY.pack(offset, 4 + len(body))
    out += struct.pack(">I", zlib.crc32(body)) + body


# ------------------------------------------------------------------------ up-conversion


def up_convert(records: bytes) -> bytes:
    """A Produce v0-v2 partition's records as the log appends them: legacy messages made
    one v2 batch (base offset 0, offset deltas 0..n-1, the messages' timestamps under
    CreateTime, -1 for v0, the wrapper's codec); records already in format v2 unchanged;
    no whole entry at all: empty (Kafka appends nothing and answers offset -1).
    ``LegacyRecordsError`` with Kafka's code when a 2.7 broker refuses them."""
    entries = list(_entries(records))
    if not entries:
        return b""
    if all(magic == 2 for _, _, magic in entries):
        return records  # the log checks them as any v2 batch
    first_magic = entries[0][2]
    messages: list[LegacyMessage] = []
    source_codec = 0
    for position, size, magic in entries:  # Log.analyzeAndValidateRecords, per entry
        if magic == 2:
            if (
                crc32c(records[position + _V2_CRC_FROM : position + size])
                != struct.unpack_from(">I", records, position + 17)[0]
            ):
                raise _corrupt(f"Record batch at position {position} is corrupt")
            continue
        (offset,) = struct.unpack_from(">q", records, position)
        message = parse_message(
            offset, memoryview(records)[position + LOG_OVERHEAD : position + size]
        )
        if not message.valid:
            raise _corrupt(f"Record is corrupt (stored crc = {message.stored_crc})")
        if message.codec > CompressionType.ZSTD:
            # CompressionType.forId's IllegalArgumentException, answered as unknown
            raise LegacyRecordsError(
                ErrorCode.UNKNOWN_SERVER_ERROR, f"Unknown compression type id: {message.codec}"
            )
        if message.codec:
            source_codec = message.codec
        messages.append(message)
    if any(magic != first_magic for _, _, magic in entries):
        other = next(magic for _, _, magic in entries if magic != first_magic)
        raise _invalid(
            f"Batch magic {other} is not the same as the first batch'es magic byte {first_magic}"
        )
    if source_codec == 0:
        return _v2_batch([_record(m, m) for m in messages], CompressionType.NONE)
    if len(messages) > 1:
        raise _invalid("Compressed outer record has more than one batch")
    wrapper = messages[0]
    return _v2_batch([_record(inner, wrapper) for inner in _inner_messages(wrapper)], source_codec)


def _record(message: LegacyMessage, batch: LegacyMessage) -> ProducerRecord:
    """``LogValidator.validateRecord``'s timestamp rule, then the record the builder gets:
    a producer may not set LogAppendTime (``batch`` is the wrapper, or the message)."""
    if batch.log_append_time:
        raise LegacyRecordsError(
            ErrorCode.INVALID_TIMESTAMP,
            "Invalid timestamp type in message. Producer should not set timestamp type to "
            "LogAppendTime.",
        )
    return ProducerRecord(value=message.value, key=message.key, timestamp_ms=message.timestamp)


def _inner_messages(wrapper: LegacyMessage) -> list[LegacyMessage]:
    """The wrapper's inner messages, checked as ``AbstractLegacyRecordBatch.
    DeepRecordsIterator`` and ``LogValidator.validateMessagesAndAssignOffsetsCompressed``
    check them."""
    if wrapper.codec == CompressionType.ZSTD:
        raise _invalid(
            f"Invalid wrapper compressionType found in legacy deep record iterator {wrapper.magic}"
        )
    if wrapper.value is None:
        raise _invalid(
            f"Found invalid compressed record set with null value (magic = {wrapper.magic})"
        )
    try:
        # an lz4 frame's header checksum is checked from format v1 on (v0's writers
        # computed it wrongly: KafkaLZ4BlockInputStream's ignoreFlagDescriptorChecksum)
        payload = decompress(wrapper.codec, wrapper.value, header_checksum=wrapper.magic > 0)
    except CompressionError as exc:  # the KafkaException its stream throws: unknown
        raise LegacyRecordsError(ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)) from None
    inner: list[LegacyMessage] = []
    position = 0
    while len(payload) - position >= LOG_OVERHEAD:  # DataLogInputStream.nextBatch
        offset, size = _ENTRY.unpack_from(payload, position)
        if size < RECORD_OVERHEAD_V0:
            raise _corrupt(
                f"Record size is less than the minimum record overhead ({RECORD_OVERHEAD_V0})"
            )
        if len(payload) - position < LOG_OVERHEAD + size:
            break
        inner.append(
            parse_message(offset, payload[position + LOG_OVERHEAD : position + LOG_OVERHEAD + size])
        )
        position += LOG_OVERHEAD + size
    if not inner:
        raise _invalid("Found invalid compressed record set with no inner records")
    if wrapper.magic == 1 and wrapper.offset != 0 and wrapper.offset < inner[-1].offset:
        raise _invalid(
            f"Found invalid wrapper offset in compressed v1 message set, wrapper offset "
            f"'{wrapper.offset}' is less than the last inner message offset "
            f"'{inner[-1].offset}' and it is not zero."
        )
    invalid: list[str] = []
    for message in inner:
        if message.codec:
            invalid.append(
                "Compressed outer record should not have an inner record with a compression "
                "attribute set"
            )
            continue
        if message.magic != wrapper.magic:
            invalid.append(f"Record's magic does not match outer magic {wrapper.magic}")
            continue
        if not message.valid:
            raise _corrupt(
                f"Record is corrupt (stored crc = {message.stored_crc}, computed crc = "
                f"{message.computed_crc})"
            )
    if invalid:
        raise _invalid(invalid[0])
    return inner


def _v2_batch(records: list[ProducerRecord], codec: int) -> bytes:
    """One v2 batch of ``records`` as ``MemoryRecordsBuilder`` writes it for the leader
    (base offset and leader epoch are the log's to set)."""
    body = encode_records(records)
    payload = body if codec == CompressionType.NONE else compress(codec, body)
    return seal_batch(records, payload, compression=CompressionType(codec))


# ------------------------------------------------------------------------ down-conversion


def down_convert(records: bytes, to_magic: int, first_offset: int) -> bytes:
    """The whole v2 batches of ``records`` as messages of ``to_magic`` (0 or 1), as
    ``RecordsUtil.downConvert`` writes them: an uncompressed batch one message per record
    from ``first_offset`` on; a compressed one a wrapper of its codec holding every record
    (v1: relative inner offsets, the wrapper at the last one's offset and the batch's max
    timestamp); LogAppendTime kept (v1); headers dropped; control batches skipped. Raises
    ``LegacyRecordsError`` (UNSUPPORTED_COMPRESSION_TYPE) for a zstd batch."""
    out = bytearray()
    try:
        headers = list(batch_headers(records))
    except KafkaApiError as exc:
        raise _corrupt(str(exc)) from None
    for header in headers:
        if header.magic < 2:  # already old enough (never in kemu's logs)
            if header.magic <= to_magic:
                out += records[header.position : header.position + header.size]
            continue
        if header.is_control:
            continue
        if header.compression == CompressionType.ZSTD:
            raise LegacyRecordsError(
                ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                "Down-conversion of zstandard-compressed batches is not supported",
            )
        try:
            consumed = batch_records(records, header)
        except RecordsError as exc:
            raise _corrupt(str(exc)) from None
        log_append = header.timestamp_type is TimestampType.LOG_APPEND_TIME
        attributes = _LOG_APPEND_TIME if log_append and to_magic > 0 else 0
        if header.compression == CompressionType.NONE:
            for record in consumed:
                if record.offset >= first_offset:
                    write_message(
                        out, record.offset, to_magic, key=record.key, value=record.value,
                        timestamp=record.timestamp_ms, attributes=attributes,
                    )  # fmt: skip
            continue
        if not consumed:
            continue
        base = consumed[0].offset
        inner = bytearray()
        for record in consumed:
            write_message(
                inner, record.offset - base if to_magic > 0 else record.offset, to_magic,
                key=record.key, value=record.value, timestamp=record.timestamp_ms,
                attributes=attributes,
            )  # fmt: skip
        value = compress(header.compression, bytes(inner), broken_lz4_checksum=to_magic == 0)
        write_message(
            out, consumed[-1].offset, to_magic, key=None, value=value,
            timestamp=header.max_timestamp if log_append else max(r.timestamp_ms for r in consumed),
            attributes=attributes | header.compression,
        )  # fmt: skip
    return bytes(out)


_MAX_READ_SIZE: Final = 128 * 1024  # LazyDownConversionRecordsSend.MAX_READ_SIZE
_V2_HEADER: Final = 61  # DefaultRecordBatch.RECORD_BATCH_OVERHEAD


def fetch_down_convert(records: bytes, to_magic: int, first_offset: int) -> bytes:
    """One partition's records of a Fetch v0-v3 answer as a 2.7 broker sends them
    (``LazyDownConversionRecords``, ``LazyDownConversionRecordsSend``): down-converted to
    ``to_magic`` batch by batch (``down_convert``), then exactly as long as the larger of
    the records read and the first batch's conversion: cut there (a consumer drops the
    partial message), or padded with overflow entries (offset -1, a size past the end) that
    a consumer drops too. A zstd batch ends the conversion there (padding follows), or,
    before anything was converted, raises ``LegacyRecordsError``
    (UNSUPPORTED_COMPRESSION_TYPE)."""
    converted = bytearray()
    first = 0
    try:
        headers = list(batch_headers(records))
    except KafkaApiError as exc:
        raise _corrupt(str(exc)) from None
    for header in headers:
        batch = records[header.position : header.position + header.size]
        try:
            part = down_convert(batch, to_magic, first_offset)
        except LegacyRecordsError as exc:
            if exc.code is ErrorCode.UNSUPPORTED_COMPRESSION_TYPE and first:
                break
            raise
        if not first:
            first = len(part)
        converted += part
    if not first:
        return b""
    size = max(len(records), first)
    if len(converted) >= size:
        return bytes(converted[:size])
    while len(converted) < size:
        remaining = size - len(converted)
        overflow = bytearray(max(LOG_OVERHEAD, min(remaining + 1, _MAX_READ_SIZE)))
        struct.pack_into(">qi", overflow, 0, -1, max(remaining + 1, _V2_HEADER))
        converted += overflow[:remaining]
    return bytes(converted)
