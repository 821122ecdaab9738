"""The snappy and lz4 framings kemu reads and writes (actors/log/compression.py): real
compressed blocks both ways, message format v0's lz4 header checksum, malformed input."""

from __future__ import annotations

import cramjam
import pytest
import zstandard

from actors.log.compression import (
    CompressionError,
    StreamEnd,
    compress,
    decompress,
    decompress_stream,
    xxh32,
)

SNAPPY, LZ4, ZSTD = 2, 3, 4
RECORDS = b"".join(b"key-%06d value-%s;" % (i, b"abc" * (i % 7)) for i in range(20_000))


@pytest.mark.parametrize("codec", [1, SNAPPY, LZ4, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_records_compress_and_come_back(codec: int) -> None:
    """What kemu writes is compressed (not stored), spans several blocks, and reads back."""
    packed = compress(codec, RECORDS)
    assert len(packed) < len(RECORDS) // 3
    assert decompress(codec, packed) == RECORDS


def test_snappy_is_framed_as_kafkas_java_client_frames_it() -> None:
    """The xerial framing: magic, versions 1 and 1, then 32 KiB blocks each after its
    length; a raw block (librdkafka's) reads too."""
    packed = compress(SNAPPY, RECORDS)
    assert packed.startswith(b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01")
    first = int.from_bytes(packed[16:20], "big")
    assert bytes(cramjam.snappy.decompress_raw(packed[20 : 20 + first])) == RECORDS[: 32 * 1024]
    assert decompress(SNAPPY, bytes(cramjam.snappy.compress_raw(RECORDS))) == RECORDS


def test_an_lz4_frame_of_another_writer_reads_if_its_blocks_are_independent() -> None:
    """A frame of the reference lz4 library's writer (linked blocks, content checksum) is
    refused, as ``KafkaLZ4BlockInputStream``'s header check refuses it ("Dependent block
    stream is unsupported", though cramjam reads it); with its flag for independent
    blocks set (and its header checksum to match), its one block reads."""
    records = RECORDS[: 60 * 1024]
    frame = bytearray(cramjam.lz4.compress(records))
    assert not frame[4] & 0x20
    with pytest.raises(CompressionError, match="Dependent block stream is unsupported"):
        decompress(LZ4, bytes(frame))
    frame[4] |= 0x20
    end = 7 + (8 if frame[4] & 0x08 else 0)
    frame[end - 1] = xxh32(bytes(frame[4 : end - 1])) >> 8 & 0xFF
    assert decompress_stream(LZ4, bytes(frame)) == (records, StreamEnd.WHOLE)


def test_message_format_v0s_lz4_checksum_reads_though_the_library_refuses_it() -> None:
    """Kafka computed a v0 frame's header checksum over the magic too: cramjam refuses
    such a frame, kemu's own reader (checksums skipped) reads its compressed blocks."""
    broken = compress(LZ4, RECORDS, broken_lz4_checksum=True)
    assert broken[6] == xxh32(broken[:6]) >> 8 & 0xFF
    with pytest.raises(cramjam.DecompressionError):
        cramjam.lz4.decompress(broken)
    assert decompress(LZ4, broken) == RECORDS


@pytest.mark.parametrize(
    ("codec", "cut"),
    [(SNAPPY, 40), (LZ4, 40), (ZSTD, 40), (ZSTD, -1), (ZSTD, -4)],
    ids=["snappy", "lz4", "zstd", "zstd-last-byte", "zstd-last-4-bytes"],
)
def test_a_cut_stream_is_a_compression_error(codec: int, cut: int) -> None:
    """A stream cut anywhere before its end does not decompress: a zstd frame missing
    even its last byte is refused (zstd-jni's truncated source)."""
    packed = compress(codec, RECORDS)
    with pytest.raises(CompressionError):
        decompress(codec, packed[:cut])


def test_zstd_frames_one_after_the_other_read_as_one_stream() -> None:
    """Two whole zstd frames back to back decompress to both payloads, as
    ``ZstdInputStream`` reads across frames."""
    packed = compress(ZSTD, RECORDS) + compress(ZSTD, b"more")
    assert decompress(ZSTD, packed) == RECORDS + b"more"


def test_a_cut_zstd_stream_reads_as_far_as_its_whole_blocks() -> None:
    """``decompress_stream`` reads a zstd stream cut inside its last block up to the
    blocks before the cut and says it was truncated (``ZstdInputStream`` hands those out
    before its ``IOException``); a whole stream, and a gzip stream cut short (an
    ``EOFException``), end as they did."""
    squeezer = zstandard.ZstdCompressor(write_checksum=True).compressobj()
    first = squeezer.compress(RECORDS[:1000]) + squeezer.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
    packed = first + squeezer.compress(RECORDS[1000:2000]) + squeezer.flush()
    assert decompress_stream(ZSTD, packed) == (RECORDS[:2000], StreamEnd.WHOLE)
    assert decompress_stream(ZSTD, packed[:-2]) == (RECORDS[:2000], StreamEnd.TRUNCATED)
    assert decompress_stream(ZSTD, packed[: len(first) + 5]) == (
        RECORDS[:1000],
        StreamEnd.TRUNCATED,
    )
    gzip = compress(1, RECORDS)
    payload, end = decompress_stream(1, gzip[:-20])
    assert end is StreamEnd.EOF
    assert RECORDS.startswith(payload)
    with pytest.raises(CompressionError):
        decompress(ZSTD, packed[:-2])


def test_a_cut_snappy_or_lz4_stream_reads_as_far_as_its_whole_blocks() -> None:
    """``decompress_stream`` reads snappy's xerial chunks and lz4's frame blocks as their
    Java readers do: the blocks before a cut, then truncated; a snappy stream cut inside
    a chunk's length ends there, whole (``SnappyInputStream`` finds no next chunk); a
    snappy stream shorter than its header is a raw block, which does not decompress;
    ``decompress`` refuses the truncated ones. An lz4 header checksum that does not
    match is refused by ``decompress_stream`` only (it reads v2 batches; Kafka skips the
    check for message format v0)."""
    first, second = RECORDS[:1000], RECORDS[1000:2000]
    snappy = compress(SNAPPY, first) + compress(SNAPPY, second)[16:]  # two chunks
    second_chunk = len(compress(SNAPPY, first))
    assert decompress_stream(SNAPPY, snappy) == (first + second, StreamEnd.WHOLE)
    assert decompress_stream(SNAPPY, snappy[:-1]) == (first, StreamEnd.TRUNCATED)
    assert decompress_stream(SNAPPY, snappy[: second_chunk + 3]) == (first, StreamEnd.WHOLE)
    with pytest.raises(CompressionError):
        decompress_stream(SNAPPY, snappy[:12])
    with pytest.raises(CompressionError):
        decompress(SNAPPY, snappy[:-1])
    lz4 = compress(LZ4, RECORDS[: 64 * 1024] + second)  # two blocks, then the end mark
    assert decompress_stream(LZ4, lz4) == (RECORDS[: 64 * 1024] + second, StreamEnd.WHOLE)
    assert decompress_stream(LZ4, lz4[:-5]) == (RECORDS[: 64 * 1024], StreamEnd.TRUNCATED)
    assert decompress_stream(LZ4, lz4[:-2]) == (
        RECORDS[: 64 * 1024] + second,
        StreamEnd.TRUNCATED,
    )
    with pytest.raises(CompressionError):
        decompress(LZ4, lz4[:-2])
    wrong_header = lz4[:6] + bytes([lz4[6] ^ 1]) + lz4[7:]  # message format v0 writes such
    assert decompress(LZ4, wrong_header) == RECORDS[: 64 * 1024] + second
    with pytest.raises(CompressionError, match="descriptor corrupted"):
        decompress_stream(LZ4, wrong_header)  # a v2 batch's


def test_a_zstd_frame_that_fails_in_a_later_block_reads_as_far_as_the_blocks_before() -> None:
    """``decompress_stream`` feeds a zstd frame that does not decompress a block at a
    time, as ``ZstdInputStream`` meets it: a second block of the reserved type gives the
    first block's records, a checksum that does not match every block's; both truncated.
    ``decompress`` refuses them."""
    squeezer = zstandard.ZstdCompressor(write_checksum=True).compressobj()
    first = squeezer.compress(RECORDS[:1000]) + squeezer.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
    packed = first + squeezer.compress(RECORDS[1000:2000]) + squeezer.flush()
    reserved = bytearray(packed)
    reserved[len(first)] |= 0x06
    mismatch = packed[:-1] + bytes([packed[-1] ^ 0xFF])
    assert decompress_stream(ZSTD, bytes(reserved)) == (RECORDS[:1000], StreamEnd.TRUNCATED)
    assert decompress_stream(ZSTD, mismatch) == (RECORDS[:2000], StreamEnd.TRUNCATED)
    for broken in (bytes(reserved), mismatch):
        with pytest.raises(CompressionError):
            decompress(ZSTD, broken)
