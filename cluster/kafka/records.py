"""Record batches (message format v2) as a client writes and reads them: what
``kemu console-producer`` sends, and what ``kemu console-consumer`` and ``kemu dump-log``
print. Kafka's ``MemoryRecordsBuilder`` / ``DefaultRecord.writeTo`` on the way out,
``DefaultRecordBatch`` / ``DefaultRecord.readFrom`` on the way in. The batch headers are
read by the log's own reader (``actors.log.records.batch_headers``), the records by
``actors.log.batch_codec``; compression is added here, through
``actors.log.compression`` (gzip, snappy, lz4, zstd; what does not decompress raises
``RecordsError``)."""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence

from crc32c import crc32c

from actors.log.batch_codec import (
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    ConsumedRecord,
    ProducerRecord,
    RecordsError,
    decode_records,
    encode_records,
    seal_batch,
)
from actors.log.compression import CompressionError, decompress
from actors.log.records import (
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    CompressionType,
    batch_headers,
)
from protocol.errors import KafkaApiError

__all__ = [
    "ConsumedRecord",
    "ProducerRecord",
    "RecordsError",
    "batch_records",
    "batch_valid",
    "encode_batch",
    "read_batches",
    "split_records",
]

_CRC_FROM = 21  # the CRC covers attributes .. end

# ------------------------------------------------------------------------ writing


def encode_batch(
    records: Sequence[ProducerRecord],
    *,
    compression: CompressionType = CompressionType.NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
) -> bytes:
    """One v2 batch of ``records`` as a producer sends it: base offset 0, offset deltas
    0..n-1, CreateTime, partition leader epoch -1. Only NONE and GZIP compress here."""
    body = encode_records(records)
    if compression is CompressionType.GZIP:
        compressor = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
        payload = compressor.compress(body) + compressor.flush()
    elif compression is CompressionType.NONE:
        payload = body
    else:
        raise ValueError(f"kemu's producer cannot compress with {compression.name}")
    return seal_batch(
        records,
        payload,
        compression=compression,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )


def split_records(
    records: Sequence[ProducerRecord], batch_size: int
) -> list[tuple[ProducerRecord, ...]]:
    """``ProducerBatch.split(batchSize)``: ``records`` cut, in order, into batches that
    each take the next record while their uncompressed size stays within ``batch_size``
    (``MemoryRecordsBuilder.hasRoomFor``, each record's size with its offset and timestamp
    deltas in its piece); a new batch always takes its first record, however large. A
    batch that fits whole comes back as one piece."""
    pieces: list[tuple[ProducerRecord, ...]] = []
    piece: list[ProducerRecord] = []
    size = RECORD_BATCH_OVERHEAD
    for record in records:
        if piece:
            grown = size + _record_size(
                record, len(piece), record.timestamp_ms - piece[0].timestamp_ms
            )
            if grown <= batch_size:
                piece.append(record)
                size = grown
                continue
            pieces.append(tuple(piece))
        piece, size = [record], RECORD_BATCH_OVERHEAD + _record_size(record, 0, 0)
    if piece:
        pieces.append(tuple(piece))
    return pieces


def _record_size(record: ProducerRecord, offset_delta: int, timestamp_delta: int) -> int:
    """``DefaultRecord.sizeInBytes``: the record's bytes in a v2 batch at these deltas."""
    body = (
        1  # attributes
        + _varint_size(timestamp_delta)
        + _varint_size(offset_delta)
        + _bytes_size(record.key)
        + _bytes_size(record.value)
        + _varint_size(len(record.headers))
        + sum(_bytes_size(name.encode()) + _bytes_size(value) for name, value in record.headers)
    )
    return _varint_size(body) + body


def _bytes_size(data: bytes | None) -> int:
    return 1 if data is None else _varint_size(len(data)) + len(data)


def _varint_size(value: int) -> int:
    """The bytes of ``value`` as a zigzag varint (``ByteUtils.sizeOfVarlong``)."""
    zigzag = (value << 1) ^ (value >> 63)
    size = 1
    while zigzag >= 0x80:
        zigzag >>= 7
        size += 1
    return size


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
    return decode_records(_payload(data, header), header)
