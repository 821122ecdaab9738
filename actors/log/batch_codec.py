"""The records inside a v2 batch, written and read: Kafka's ``MemoryRecordsBuilder`` and
``DefaultRecord.writeTo`` on the way out, ``DefaultRecord.readFrom`` on the way in.

The log itself never decodes records (``actors.log.records`` reads batch headers in
place); this is for those that make or read records: the group coordinator's
``__consumer_offsets`` records (``actors.group``), and kemu's console tools through
``cluster.kafka.records``, which adds compression on top."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from actors.log.records import (
    BatchHeader,
    CompressionType,
    TimestampType,
    sealed_batch,
    write_varint,
)
from protocol.errors import KemuError

__all__ = [
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "ConsumedRecord",
    "ProducerRecord",
    "RecordsError",
    "decode_records",
    "encode_records",
    "read_bytes",
    "read_varint",
    "seal_batch",
    "write_bytes",
]

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1


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


def read_varint(data: bytes | memoryview, position: int) -> tuple[int, int]:
    """``(value, next position)`` of a zig-zag varlong."""
    if position < len(data):  # one byte, most of a record's varints: no loop
        byte = data[position]
        if not byte & 0x80:
            return (byte >> 1) ^ -(byte & 1), position + 1
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


def write_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        write_varint(out, -1)
    else:
        write_varint(out, len(value))
        out += value


def read_bytes(data: bytes | memoryview, position: int) -> tuple[bytes | None, int]:
    length, position = read_varint(data, position)
    if length < 0:
        return None, position
    end = position + length
    if end > len(data):
        raise RecordsError("a record field runs past its record")
    return bytes(data[position:end]), end


def encode_records(records: Sequence[ProducerRecord]) -> bytes:
    """The uncompressed payload of a batch of ``records``: offset deltas 0..n-1,
    timestamp deltas from the first record's."""
    if not records:
        raise ValueError("a batch holds at least one record")
    first = records[0].timestamp_ms
    body = bytearray()
    for delta, record in enumerate(records):
        one = bytearray(b"\x00")  # attributes: unused
        write_varint(one, record.timestamp_ms - first)
        write_varint(one, delta)
        write_bytes(one, record.key)
        write_bytes(one, record.value)
        write_varint(one, len(record.headers))
        for name, value in record.headers:
            write_bytes(one, name.encode())
            write_bytes(one, value)
        write_varint(body, len(one))
        body += one
    return bytes(body)


def seal_batch(
    records: Sequence[ProducerRecord],
    payload: bytes,
    *,
    compression: CompressionType = CompressionType.NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
) -> bytes:
    """The whole batch of ``records`` around ``payload`` (their encoding, compressed
    with ``compression``): base offset 0, CreateTime, partition leader epoch -1 (the
    log assigns both), its CRC."""
    first = records[0].timestamp_ms
    return sealed_batch(
        payload,
        base_offset=0,
        leader_epoch=-1,
        attributes=int(compression),
        last_offset_delta=len(records) - 1,
        first_timestamp=first,
        max_timestamp=max(r.timestamp_ms for r in records),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records_count=len(records),
    )


def decode_records(payload: bytes | memoryview, header: BatchHeader) -> list[ConsumedRecord]:
    """The records of one batch from its uncompressed ``payload``."""
    out: list[ConsumedRecord] = []
    position = 0
    for _ in range(header.records_count):
        length, position = read_varint(payload, position)
        end = position + length
        if length < 0 or end > len(payload):
            raise RecordsError("a record runs past its batch")
        record = payload[position:end]
        at = 1  # attributes: unused
        timestamp_delta, at = read_varint(record, at)
        offset_delta, at = read_varint(record, at)
        key, at = read_bytes(record, at)
        value, at = read_bytes(record, at)
        count, at = read_varint(record, at)
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(count):
            name, at = read_bytes(record, at)
            header_value, at = read_bytes(record, at)
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
