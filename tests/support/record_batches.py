"""Record batches as real clients build them, and a reader for what the log gives back.

Batches are built by aiokafka's ``DefaultRecordBatchBuilder`` (the client's own code);
what the log stores or returns is decoded by kio's ``read_batch``, an implementation
independent of ``actors.log.records``. Only gzip among the codecs has its library in
aiokafka here: ``recompressed`` makes a gzip batch a snappy, lz4 or zstd one, ``relabel``
only marks it so (gzip bytes under another codec id: a batch that does not decompress).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import zstandard
from aiokafka.record.default_records import (  # type: ignore[import-untyped]
    DefaultRecordBatchBuilder,
)
from crc32c import crc32c
from kio.records.readers import read_batch
from kio.records.schema import RecordBatch

from actors.log.compression import compress

__all__ = [
    "DecodedBatch",
    "client_batch",
    "decode_batches",
    "fix_crc",
    "get_field",
    "recompressed",
    "relabel",
    "set_field",
]

_FIELDS = {  # offset and struct format of each header field
    "base_offset": (0, ">q"),
    "batch_length": (8, ">i"),
    "partition_leader_epoch": (12, ">i"),
    "magic": (16, ">b"),
    "crc": (17, ">I"),
    "attributes": (21, ">h"),
    "last_offset_delta": (23, ">i"),
    "first_timestamp": (27, ">q"),
    "max_timestamp": (35, ">q"),
    "producer_id": (43, ">q"),
    "producer_epoch": (51, ">h"),
    "base_sequence": (53, ">i"),
    "records_count": (57, ">i"),
}


def client_batch(
    values: Sequence[bytes],
    *,
    timestamps: Sequence[int] | None = None,
    codec: int = 0,
    key: bytes | None = b"key",
    keys: Sequence[bytes | None] | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    offsets: Sequence[int] | None = None,
    headers: Sequence[tuple[str, bytes]] = (),
) -> bytes:
    """One v2 batch of ``values`` as a producer sends it: base offset 0, partition leader
    epoch -1; timestamps one millisecond apart by default; every record's key ``key``,
    or each its own of ``keys``; offset deltas 0..n-1, or ``offsets`` (the last is the
    batch's last offset delta); every record with ``headers``."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    stamps = (
        timestamps
        if timestamps is not None
        else [1_600_000_000_000 + i for i in range(len(values))]
    )
    record_keys = keys if keys is not None else [key] * len(values)
    deltas = offsets if offsets is not None else range(len(values))
    for delta, value, stamp, k in zip(deltas, values, stamps, record_keys, strict=True):
        builder.append(delta, timestamp=stamp, key=k, value=value, headers=list(headers))
    return bytes(builder.build())


def set_field(batch: bytes, name: str, value: int, *, at: int = 0) -> bytes:
    """``batch`` with one header field changed (the CRC is not fixed: see ``fix_crc``)."""
    offset, fmt = _FIELDS[name]
    out = bytearray(batch)
    struct.pack_into(fmt, out, at + offset, value)
    return bytes(out)


def get_field(batch: bytes, name: str, *, at: int = 0) -> int:
    offset, fmt = _FIELDS[name]
    value: int = struct.unpack_from(fmt, batch, at + offset)[0]
    return value


def fix_crc(batch: bytes) -> bytes:
    """``batch`` with its CRC-32C computed again over attributes..end."""
    return set_field(batch, "crc", crc32c(batch[21:]))


def relabel(batch: bytes, codec: int) -> bytes:
    """A compressed batch marked with another codec id (bits 0-2), CRC fixed."""
    attributes = get_field(batch, "attributes")
    return fix_crc(set_field(batch, "attributes", (attributes & ~0x07) | codec))


def recompressed(batch: bytes, codec: int) -> bytes:
    """A gzip batch's records compressed with ``codec`` instead (zstd by the zstandard
    library, snappy and lz4 in the framing Kafka's clients write, by kemu's writer), the
    batch length, attributes and CRC to match."""
    records = zlib.decompress(batch[61:], 16 + zlib.MAX_WBITS)
    if codec == 4:
        payload = zstandard.ZstdCompressor().compress(records)
    else:
        payload = compress(codec, records)
    out = set_field(batch[:61] + payload, "batch_length", 49 + len(payload))
    attributes = get_field(batch, "attributes")
    return fix_crc(set_field(out, "attributes", (attributes & ~0x07) | codec))


@dataclass(frozen=True)
class DecodedBatch:
    """A batch read back by kio, with where it was in the buffer."""

    position: int
    size: int
    batch: RecordBatch

    @property
    def values(self) -> list[bytes | None]:
        return [r.value for r in self.batch.records]

    @property
    def offsets(self) -> list[int]:
        return [r.offset for r in self.batch.records]


def decode_batches(data: bytes) -> list[DecodedBatch]:
    """Every batch of ``data`` through kio's reader (which checks each CRC); ``data`` must
    be whole uncompressed batches."""
    out = []
    position = 0
    while position < len(data):
        batch, size = read_batch(data, position)
        out.append(DecodedBatch(position, size, batch))
        position += size
    return out
