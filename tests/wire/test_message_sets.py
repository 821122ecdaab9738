"""Message formats v0 and v1 (``cluster.kafka.message_sets``) against two other
implementations: kafka-python's ``LegacyRecordBatchBuilder`` writes the legacy messages a
0.8-0.10 producer sends and its ``MemoryRecords`` reads what kemu down-converts; aiokafka
builds the v2 batches and reads back what kemu up-converts (gzip included)."""

from __future__ import annotations

import struct

import pytest
from aiokafka.record.memory_records import (  # type: ignore[import-untyped]
    MemoryRecords as V2Records,
)
from kafka.record.legacy_records import LegacyRecordBatchBuilder  # type: ignore[import-untyped]
from kafka.record.memory_records import MemoryRecords  # type: ignore[import-untyped]

from actors.log.compression import compress, decompress, xxh32
from actors.log.records import CompressionType
from cluster.kafka.message_sets import (
    LegacyRecordsError,
    down_convert,
    fetch_down_convert,
    read_message_set,
    up_convert,
    write_message,
)
from protocol.errors import ErrorCode
from tests.support.record_batches import client_batch, set_field

T0 = 1_600_000_000_000
RECORDS = [(b"k0", b"v0", T0), (None, b"v1", T0 + 5), (b"k2", None, T0 + 2)]


def legacy(
    magic: int, codec: int = 0, records: list[tuple[bytes | None, bytes | None, int]] = RECORDS
) -> bytes:
    """A message set as kafka-python's producer builds it for a 0.8-0.10 broker."""
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for offset, (key, value, timestamp) in enumerate(records):
        builder.append(offset, timestamp=timestamp, key=key, value=value)
    return bytes(builder.build())


def v2_rows(data: bytes) -> list[tuple[int, int, bytes | None, bytes | None, int]]:
    """(batch codec, offset, key, value, timestamp) of every record, read by aiokafka."""
    rows = []
    records = V2Records(data)
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        rows += [(batch.compression_type, r.offset, r.key, r.value, r.timestamp) for r in batch]
    return rows


def legacy_rows(data: bytes) -> list[tuple[int, int, bytes | None, bytes | None, int | None]]:
    """(magic, offset, key, value, timestamp) of every message, read by kafka-python."""
    rows = []
    records = MemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        rows += [(batch.magic, r.offset, r.key, r.value, r.timestamp) for r in batch]
    return rows


def refused(records: bytes) -> ErrorCode:
    with pytest.raises(LegacyRecordsError) as caught:
        up_convert(records)
    return caught.value.code


# ------------------------------------------------------------------------ up-conversion


@pytest.mark.parametrize("codec", [0, 1])
@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_messages_become_one_v2_batch(magic: int, codec: int) -> None:
    """Every message (or a wrapper's inner ones) becomes a record of one v2 batch with its
    key and value, offset deltas 0..n-1, the v1 timestamps (-1 for v0), the codec kept."""
    batch = up_convert(legacy(magic, codec))
    stamps = [t if magic else -1 for _, _, t in RECORDS]
    assert v2_rows(batch) == [
        (codec, i, k, v, stamp)
        for i, ((k, v, _), stamp) in enumerate(zip(RECORDS, stamps, strict=True))
    ]
    assert struct.unpack_from(">qi", batch, 0)[0] == 0  # the log assigns the offsets


def test_several_uncompressed_message_sets_join_one_batch() -> None:
    """Uncompressed messages sent one after the other (kafka-python's separate sets)."""
    batch = up_convert(legacy(1, records=RECORDS[:1]) + legacy(1, records=RECORDS[1:]))
    assert [(o, v) for _, o, _, v, _ in v2_rows(batch)] == [(0, b"v0"), (1, b"v1"), (2, None)]


def test_v2_batches_pass_unchanged_and_nothing_whole_is_nothing() -> None:
    batch = client_batch([b"a"])
    assert up_convert(batch) == batch
    assert up_convert(b"") == b""
    assert up_convert(legacy(1, records=RECORDS[:1])[:-1]) == b""  # a partial one is none


def test_a_bad_crc_is_corrupt_message() -> None:
    """``LegacyRecord.isValid`` for a shallow message; ``ensureValid`` for an inner one."""
    data = bytearray(legacy(1))
    data[-1] ^= 0xFF
    assert refused(bytes(data)) is ErrorCode.CORRUPT_MESSAGE
    inner = bytearray()
    write_message(inner, 0, 1, key=b"k", value=b"v", timestamp=T0)
    inner[-1] ^= 0xFF
    wrapper = bytearray()
    write_message(
        wrapper, 0, 1, key=None, value=compress(1, bytes(inner)), timestamp=T0, attributes=1
    )
    assert refused(bytes(wrapper)) is ErrorCode.CORRUPT_MESSAGE


def test_broken_structures_get_kafka_codes() -> None:
    """Sizes and magics (``ByteBufferLogInputStream``), the wrapper rules
    (``DeepRecordsIterator``, ``LogValidator``), LogAppendTime from a producer."""
    small = struct.pack(">qi", 0, 13) + bytes(13)
    assert refused(small) is ErrorCode.CORRUPT_MESSAGE
    bad_magic = bytearray(legacy(1))
    bad_magic[16] = 3
    assert refused(bytes(bad_magic)) is ErrorCode.CORRUPT_MESSAGE
    assert refused(legacy(1, 1) + legacy(1, 1)) is ErrorCode.INVALID_RECORD  # two wrappers
    assert refused(legacy(0) + legacy(1)) is ErrorCode.INVALID_RECORD  # magics differ
    assert refused(legacy(1) + client_batch([b"x"])) is ErrorCode.INVALID_RECORD
    appended = bytearray()
    write_message(appended, 0, 1, key=None, value=b"v", timestamp=T0, attributes=0x08)
    assert refused(bytes(appended)) is ErrorCode.INVALID_TIMESTAMP
    unknown = bytearray()
    write_message(unknown, 0, 1, key=None, value=b"v", timestamp=T0, attributes=5)
    assert refused(bytes(unknown)) is ErrorCode.UNKNOWN_SERVER_ERROR
    for value in (None, compress(1, b"")):  # no value; no inner message
        empty = bytearray()
        write_message(empty, 0, 1, key=None, value=value, timestamp=T0, attributes=1)
        assert refused(bytes(empty)) is ErrorCode.INVALID_RECORD
    nested = bytearray()
    write_message(
        nested, 0, 1, key=None, value=compress(1, legacy(1, 1)), timestamp=T0, attributes=1
    )
    assert refused(bytes(nested)) is ErrorCode.INVALID_RECORD  # a compressed inner message


def test_messages_read_back_as_written() -> None:
    data = legacy(1)
    messages = read_message_set(data)
    assert [(m.offset, m.key, m.value, m.timestamp) for m in messages] == [
        (i, k, v, t) for i, (k, v, t) in enumerate(RECORDS)
    ]
    assert all(m.valid for m in messages)


# ------------------------------------------------------------------------ down-conversion


@pytest.mark.parametrize("magic", [0, 1])
def test_an_uncompressed_batch_becomes_one_message_per_record_from_the_fetch_offset(
    magic: int,
) -> None:
    batch = set_field(
        client_batch([b"a", b"b", b"c"], timestamps=[T0, T0 + 9, T0 + 4]), "base_offset", 40
    )
    converted = down_convert(batch, magic, first_offset=41)
    assert legacy_rows(converted) == [
        (magic, 41, b"key", b"b", T0 + 9 if magic else None),
        (magic, 42, b"key", b"c", T0 + 4 if magic else None),
    ]


@pytest.mark.parametrize("magic", [0, 1])
def test_a_compressed_batch_becomes_one_wrapper_of_its_codec(magic: int) -> None:
    """Every record, even below the fetch offset; v1 inner offsets relative, the wrapper
    at the last offset with the batch's max timestamp."""
    batch = set_field(
        client_batch([b"a", b"b"], timestamps=[T0 + 3, T0], codec=1), "base_offset", 7
    )
    converted = down_convert(batch, magic, first_offset=8)
    assert legacy_rows(converted) == [
        (magic, 7, b"key", b"a", T0 + 3 if magic else None),
        (magic, 8, b"key", b"b", T0 if magic else None),
    ]
    (wrapper,) = read_message_set(converted)
    assert (wrapper.offset, wrapper.codec, wrapper.key) == (8, 1, None)
    assert wrapper.timestamp == (T0 + 3 if magic else -1)
    inner = read_message_set(decompress(1, wrapper.value or b""))
    assert [m.offset for m in inner] == ([0, 1] if magic else [7, 8])


def test_zstd_does_not_down_convert_and_partial_batches_are_left_out() -> None:
    batch = client_batch([b"a"])
    zstd = set_field(client_batch([b"z"], codec=1), "attributes", 4)
    with pytest.raises(LegacyRecordsError) as caught:
        down_convert(zstd, 1, 0)
    assert caught.value.code is ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert legacy_rows(down_convert(batch + batch[:30], 1, 0)) == [(1, 0, b"key", b"a", T0)]


def test_up_then_down_keeps_the_messages() -> None:
    """A 0.10 producer's messages, stored, then fetched by a 0.10 consumer (kafka-python
    reads gzip; snappy and lz4, whose libraries it lacks here, are read by kemu's own)."""
    expected = [(i, k, v, t) for i, (k, v, t) in enumerate(RECORDS)]
    for codec in (0, 1):
        stored = up_convert(legacy(1, codec))
        assert legacy_rows(down_convert(stored, 1, 0)) == [(1, *row) for row in expected]
    for codec in (2, 3):
        stored = up_convert(_wrapped(codec))
        assert {row[0] for row in v2_rows_uncompressed(stored)} == {codec}
        (wrapper,) = read_message_set(down_convert(stored, 1, 0))
        assert (wrapper.offset, wrapper.codec, wrapper.timestamp) == (2, codec, T0 + 5)
        inner = read_message_set(decompress(codec, wrapper.value or b""))
        assert [(m.offset, m.key, m.value, m.timestamp) for m in inner] == expected


def v2_rows_uncompressed(batch: bytes) -> list[tuple[int, int]]:
    """(codec, records count) of a v2 batch from its header alone."""
    attributes, _, _, _, _, _, _, count = struct.unpack_from(">hiqqqhii", batch, 21)
    return [(attributes & 7, count)]


def _wrapped(codec: int) -> bytes:
    """A v1 wrapper of ``codec`` around RECORDS (kafka-python here lacks snappy and lz4)."""
    inner = bytearray()
    for i, (key, value, timestamp) in enumerate(RECORDS):
        write_message(inner, i, 1, key=key, value=value, timestamp=timestamp)
    out = bytearray()
    write_message(
        out, 2, 1, key=None, value=compress(codec, bytes(inner)), timestamp=T0 + 5, attributes=codec
    )
    return bytes(out)


# ------------------------------------------------------------------------ the compressors


def test_compressors_write_what_the_decompressors_read() -> None:
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"abc") == 0x32D153FF
    for codec in (CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4):
        for size in (0, 1, 60, 61, 100_000):
            data = bytes(i % 251 for i in range(size))
            assert decompress(codec, compress(codec, data)) == data
    frame = compress(CompressionType.LZ4, b"x")
    assert frame[4:7] == b"\x60\x40\x82"  # version 1, independent 64 KiB blocks, its checksum
    broken = compress(CompressionType.LZ4, b"x", broken_lz4_checksum=True)
    assert broken[6] == xxh32(broken[:6]) >> 8 & 0xFF


# ------------------------------------------------------------------------ a Fetch's size


def test_a_fetch_answer_is_as_long_as_the_records_read_or_the_first_conversion() -> None:
    """``LazyDownConversionRecords``: the answer's size is the larger of the records read
    and the first batch's conversion; a longer conversion is cut (the consumer drops the
    partial message), a shorter one padded with an overflow entry it drops too."""
    many = client_batch([b"x"] * 40)  # 40 v1 messages are longer than their v2 batch
    first = down_convert(many, 1, 0)
    assert len(first) > 2 * len(many)
    cut = fetch_down_convert(many + set_field(many, "base_offset", 40), 1, 0)
    assert cut == first  # the first batch whole, the second past the size
    assert len(legacy_rows(cut)) == 40
    lone = client_batch([b"y"])
    later = set_field(many, "base_offset", 1)
    records = lone + later
    longer = fetch_down_convert(records, 1, 0)  # cut at the records' size, mid-message
    assert longer == (down_convert(lone, 1, 0) + down_convert(later, 1, 0))[: len(records)]
    assert 1 < len(legacy_rows(longer)) < 41
    one = client_batch([b"y" * 10])  # one v0 message is shorter than its v2 batch
    padded = fetch_down_convert(one + one[:20], 0, 0)
    assert len(padded) == len(one) + 20
    message = down_convert(one, 0, 0)
    assert padded.startswith(message)
    assert struct.unpack_from(">qi", padded, len(message)) == (-1, len(padded) - len(message) + 1)
    assert legacy_rows(padded) == [(0, 0, b"key", b"y" * 10, None)]
    assert fetch_down_convert(b"", 1, 0) == b""


def test_zstd_first_is_an_error_and_later_ends_the_answer() -> None:
    """A zstd batch before anything converted fails the partition; after a converted batch
    the rest of the answer is overflow padding (``LazyDownConversionRecordsSend``)."""
    plain = client_batch([b"a"])
    zstd = set_field(client_batch([b"z"], codec=1), "attributes", 4)
    with pytest.raises(LegacyRecordsError) as caught:
        fetch_down_convert(zstd + plain, 1, 0)
    assert caught.value.code is ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    answer = fetch_down_convert(plain + zstd, 1, 0)
    assert len(answer) == len(plain) + len(zstd)
    assert legacy_rows(answer) == [(1, 0, b"key", b"a", T0)]
