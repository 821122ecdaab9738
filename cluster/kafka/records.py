"""Record batches (message format v2) as a client writes and reads them: what
``kemu console-producer`` sends, and what ``kemu console-consumer`` and ``kemu dump-log``
print. Kafka's ``MemoryRecordsBuilder`` / ``DefaultRecord.writeTo`` on the way out,
``DefaultRecordBatch`` / ``DefaultRecord.readFrom`` on the way in. The batch headers are
read by the log's own reader (``actors.log.records.batch_headers``); the records inside
are decoded here, compressed ones through ``cluster.kafka.compression`` (gzip, snappy, lz4,
zstd; what does not decompress raises ``RecordsError``)."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from crc32c import crc32c

from actors.log.records import (
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    CompressionType,
    TimestampType,
    batch_headers,
)
from cluster.kafka.compression import CompressionError, decompress
from protocol.errors import KafkaApiError, KemuError

__all__ = [
    "ConsumedRecord",
    "ProducerRecord",
    "RecordsError",
    "batch_records",
    "batch_valid",
    "encode_batch",
    "read_batches",
]

_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC_FROM = 21  # the CRC covers attributes .. end
_NO_PRODUCER_ID = -1
_NO_SEQUENCE = -1


class RecordsError(KemuError):
    """Records that cannot be read: a broken batch or record, or an unknown codec."""


@dataclass(frozen=True, slots=True)
class ProducerRecord:
    """One record to send: key and value (``None`` is null), headers, CreateTime in ms."""

    value: bytes | None
    key: bytes | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp_ms: int = 0


@dataclass(frozen=True, slots=True)
class ConsumedRecord:
    """One record read back, with its offset and timestamp."""

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = field(default=())
    sequence: int = -1


# ------------------------------------------------------------------------ varints


def _zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def _write_varint(out: bytearray, value: int) -> None:
    """A signed varlong, zig-zag encoded (``ByteUtils.writeVarlong``)."""
    number = _zigzag(value) & 0xFFFFFFFFFFFFFFFF
    while number >= 0x80:
        out.append((number & 0x7F) | 0x80)
        number >>= 7
    out.append(number)


def _read_varint(data: bytes | memoryview, position: int) -> tuple[int, int]:
    """``(value, next position)`` of a zig-zag varlong."""
    result = shift = 0
    while True:
        if position >= len(data) or shift > 63:
            raise RecordsError("a record ends inside a varint")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), position
        shift += 7


def _write_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        _write_varint(out, -1)
    else:
        _write_varint(out, len(value))
        out += value


def _read_bytes(data: bytes | memoryview, position: int) -> tuple[bytes | None, int]:
    length, position = _read_varint(data, position)
    if length < 0:
        return None, position
    end = position + length
    if end > len(data):
        raise RecordsError("a record field runs past its record")
    return bytes(data[position:end]), end


# ------------------------------------------------------------------------ writing


def encode_batch(
    records: Sequence[ProducerRecord],
    *,
    compression: CompressionType = CompressionType.NONE,
    producer_id: int = _NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = _NO_SEQUENCE,
) -> bytes:
    """One v2 batch of ``records`` as a producer sends it: base offset 0, offset deltas
    0..n-1, CreateTime, partition leader epoch -1. Only NONE and GZIP compress here."""
    if not records:
        raise ValueError("a batch holds at least one record")
    first = records[0].timestamp_ms
    body = bytearray()
    for delta, record in enumerate(records):
        one = bytearray(b"\x00")  # attributes: unused
        _write_varint(one, record.timestamp_ms - first)
        _write_varint(one, delta)
        _write_bytes(one, record.key)
        _write_bytes(one, record.value)
        _write_varint(one, len(record.headers))
        for name, value in record.headers:
            _write_bytes(one, name.encode())
            _write_bytes(one, value)
        _write_varint(body, len(one))
        body += one
    if compression is CompressionType.GZIP:
        compressor = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
        payload = compressor.compress(bytes(body)) + compressor.flush()
    elif compression is CompressionType.NONE:
        payload = bytes(body)
    else:
        raise ValueError(f"kemu's producer cannot compress with {compression.name}")
    header = _HEADER.pack(
        0,
        RECORD_BATCH_OVERHEAD - 12 + len(payload),
        -1,
        2,
        0,
        int(compression),
        len(records) - 1,
        first,
        max(r.timestamp_ms for r in records),
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    batch = bytearray(header + payload)
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[_CRC_FROM:])))
    return bytes(batch)


# ------------------------------------------------------------------------ reading


def read_batches(data: bytes | memoryview) -> Iterator[BatchHeader]:
    """The whole batches of ``data`` (a partial one at the end is left out, as Kafka's
    readers do). Raises ``RecordsError`` for a size below a batch header."""
    try:
        yield from batch_headers(data)
    except KafkaApiError as exc:
        raise RecordsError(str(exc)) from None


def batch_valid(data: bytes | memoryview, header: BatchHeader) -> bool:
    """Whether the batch's CRC matches (``DefaultRecordBatch.isValid``)."""
    start = header.position + _CRC_FROM
    return crc32c(bytes(data[start : header.position + header.size])) == header.crc


def _payload(data: bytes | memoryview, header: BatchHeader) -> bytes | memoryview:
    raw = data[header.position + RECORD_BATCH_OVERHEAD : header.position + header.size]
    if header.compression == CompressionType.NONE:
        return raw
    try:
        return decompress(header.compression, bytes(raw))
    except CompressionError as exc:
        raise RecordsError(str(exc)) from None


def batch_records(data: bytes | memoryview, header: BatchHeader) -> list[ConsumedRecord]:
    """The records of one batch (``DefaultRecord.readFrom`` for each)."""
    payload = _payload(data, header)
    out: list[ConsumedRecord] = []
    position = 0
    for _ in range(header.records_count):
        length, position = _read_varint(payload, position)
        end = position + length
        if length < 0 or end > len(payload):
            raise RecordsError("a record runs past its batch")
        record = payload[position:end]
        at = 1  # attributes: unused
        timestamp_delta, at = _read_varint(record, at)
        offset_delta, at = _read_varint(record, at)
        key, at = _read_bytes(record, at)
        value, at = _read_bytes(record, at)
        count, at = _read_varint(record, at)
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(count):
            name, at = _read_bytes(record, at)
            header_value, at = _read_bytes(record, at)
            headers.append(((name or b"").decode(errors="replace"), header_value))
        sequence = -1 if header.base_sequence < 0 else header.base_sequence + offset_delta
        timestamp = (
            header.max_timestamp
            if header.timestamp_type is TimestampType.LOG_APPEND_TIME
            else header.first_timestamp + timestamp_delta
        )
        out.append(
            ConsumedRecord(
                offset=header.base_offset + offset_delta,
                timestamp_ms=timestamp,
                key=key,
                value=value,
                headers=tuple(headers),
                sequence=sequence,
            )
        )
        position = end
    return out
