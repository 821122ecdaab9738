"""Compression and decompression of the record batch codecs a client may use, for a
leader's record checks (``actors.log.records``: Kafka's ``LogValidator`` reads every record
of a compressed batch), the batches it rebuilds, the log cleaner, the conversions between
message formats (``cluster.kafka.message_sets``) and the tools that print records
(``kemu console-consumer``, ``kemu dump-log``). gzip goes through the standard library,
zstd through the ``zstandard`` library (Python 3.11 has no zstd of its own), snappy and lz4
blocks through ``cramjam`` (Rust builds of the reference codecs: the pure-Python decoders
kemu had read about 25 MB of records a second, cramjam 1.5-2.8 GB), in the framings Kafka's
clients write:

* snappy: a raw snappy block, or the xerial framing Kafka's Java client writes
  (``SnappyOutputStream``: the magic ``\\x82SNAPPY\\x00``, two version ints, then blocks
  each preceded by its length), read as snappy-java's ``SnappyInputStream`` reads it: fewer
  than the 16 header bytes are a raw block, a block length cut short ends the stream, and
  another header (of version 1 or more) where a length belongs starts a stream appended
  to this one;
* lz4: the LZ4 frame format (``KafkaLZ4BlockOutputStream``, librdkafka's ``LZ4F``), its
  header checked as ``KafkaLZ4BlockInputStream.readHeader`` checks it (no reserved bit,
  no dictionary id, independent blocks, version 1, a block size id of 4-7), read by
  cramjam up to its end mark. A frame cramjam refuses, or whose blocks are not all there
  and within the maximum block size, is read by this module's own frame reader, which
  checks the blocks' checksums, the header checksum only in ``decompress_stream`` (message
  format v0's frames carry the checksum Kafka computed over the magic too, which
  ``KafkaLZ4BlockInputStream`` skips for v0 only), and never the content checksum (nor
  does Kafka's reader);
* zstd: zstd frames (``ZstdOutputStream``, librdkafka's ``ZSTD_compressStream``), with or
  without their content size, one after the other. A frame cut short is malformed, as
  zstd-jni's ``ZstdInputStream`` (which Kafka reads them with) throws an ``IOException``
  for a truncated source once it needs bytes past the cut.

Anything malformed raises ``CompressionError``, except that ``decompress_stream`` hands out
what a stream reader meets before a snappy block, lz4 block or zstd block that is cut short
or does not decompress, or a zstd checksum that does not match (``StreamEnd.TRUNCATED``),
as Kafka's readers do.

``compress`` writes what a rebuilt batch or a conversion carries: gzip at zlib's default
level, snappy in the xerial framing (32 KiB blocks, as ``SnappyOutputStream``), lz4 as an
LZ4 frame of 64 KiB independent blocks with no checksums but the header's, as
``KafkaLZ4BlockOutputStream`` writes it (a block that would not shrink is stored as it is;
``broken_lz4_checksum`` for message format v0), zstd at the library's default level.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from enum import Enum
from typing import Final

import cramjam
import zstandard

from protocol.errors import KemuError

__all__ = [
    "CompressionError",
    "StreamEnd",
    "compress",
    "decompress",
    "decompress_stream",
    "xxh32",
]

_XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = 16  # the magic, then version and compatible version (int32 each)
_LZ4_MAGIC: Final = 0x184D2204
_GZIP, _SNAPPY, _LZ4, _ZSTD = 1, 2, 3, 4


class CompressionError(KemuError):
    """Compressed records that cannot be decompressed here."""


class StreamEnd(Enum):
    """How a decompressed stream ends, for a reader that meets it record by record
    (``DefaultRecordBatch``'s stream iterator)."""

    WHOLE = "whole"
    """It ends where it should."""
    EOF = "eof"
    """Cut short, and a read past the cut is an ``EOFException`` (gzip's
    ``GZIPInputStream``), which the iterator calls a premature EOF."""
    TRUNCATED = "truncated"
    """Cut short, or broken after its first blocks, and a read past them is a plain
    ``IOException`` (zstd-jni's ``ZstdInputStream``: "truncated source"; snappy-java's
    ``SnappyInputStream``: "failed to read chunk"; ``KafkaLZ4BlockInputStream``: "Stream
    ended prematurely"), which the iterator makes a ``KafkaException``."""


_Read = tuple[bytes, str | None]
"""What a stream decompresses block by block, and why it stops early (``None`` if it ends
where it should)."""

_ERRORS: Final = (
    IndexError,
    struct.error,
    zlib.error,
    zstandard.ZstdError,
    cramjam.DecompressionError,
)


def decompress(codec: int, data: bytes, *, header_checksum: bool = False) -> bytes:
    """The records of a batch compressed with ``codec`` (attribute bits 0-2);
    ``header_checksum``: an lz4 frame's is checked (``KafkaLZ4BlockInputStream`` skips it
    for message format v0 only)."""
    try:
        if codec == _GZIP:
            return zlib.decompress(data, 16 + zlib.MAX_WBITS)
        read = _read(codec, data, header_checksum=header_checksum)
    except _ERRORS as exc:
        raise CompressionError(f"a batch of codec {codec} does not decompress: {exc}") from None
    if read is None:
        raise CompressionError(f"cannot decompress codec {codec}: no such compression type")
    out, stop = read
    if stop is not None:
        raise CompressionError(f"a batch of codec {codec} does not decompress: {stop}")
    return out


def _read(codec: int, data: bytes, *, header_checksum: bool = False) -> _Read | None:
    """A snappy, lz4 or zstd stream read block by block (``None`` for another codec);
    ``header_checksum``: an lz4 frame's is checked."""
    if codec == _SNAPPY:
        return _snappy(data)
    if codec == _LZ4:
        return _lz4_frame(data, header_checksum=header_checksum)
    if codec == _ZSTD:
        return _zstd_frames(data)
    return None


def _zstd_frames(data: bytes) -> _Read:
    """The zstd frames of ``data`` one after the other, decompressed as far as they go (a
    frame cut short gives what its complete blocks hold, as ``ZstdInputStream`` hands them
    out before it meets the cut)."""
    out = []
    rest = data
    while rest:
        frame = zstandard.ZstdDecompressor().decompressobj()
        try:
            out.append(frame.decompress(rest))
        except zstandard.ZstdError as exc:
            out.append(_zstd_blocks_before_the_error(rest))
            return b"".join(out), str(exc)
        if not frame.eof:
            return b"".join(out), "truncated source"
        rest = frame.unused_data
    return b"".join(out), None


_ZSTD_MAGIC: Final = 0xFD2FB528


def _zstd_blocks_before_the_error(data: bytes) -> bytes:
    """What the zstd frame at the start of ``data``, which does not decompress, holds in
    its blocks before the one that fails (or before a checksum that does not match):
    ``ZstdInputStream`` hands those out before its ``IOException``. The frame is fed to
    the decompressor a block at a time."""
    frame = zstandard.ZstdDecompressor().decompressobj()
    out = []
    try:
        for piece in _zstd_pieces(data):
            out.append(frame.decompress(piece))
    except zstandard.ZstdError:
        pass
    return b"".join(out)


def _zstd_pieces(data: bytes) -> Iterator[bytes]:
    """The zstd frame at the start of ``data`` cut where its blocks end: the frame header
    with its first block, each later block, then whatever follows the last block (its
    checksum); all of ``data`` at once if the header is not a zstd frame's."""
    if len(data) < 5 or struct.unpack_from("<I", data)[0] != _ZSTD_MAGIC:
        yield data
        return
    descriptor = data[4]
    single_segment = descriptor >> 5 & 1
    content_size = (1 if single_segment else 0, 2, 4, 8)[descriptor >> 6]
    position = 5 + (1 - single_segment) + (0, 1, 2, 4)[descriptor & 3] + content_size
    start = 0
    while position + 3 <= len(data):
        (header,) = struct.unpack_from("<I", data[position : position + 3] + b"\0")
        size = 1 if header >> 1 & 3 == 1 else header >> 3  # an RLE block holds one byte
        position += 3 + size
        yield data[start:position]
        start = position
        if header & 1:  # the last block
            break
    if start < len(data):
        yield data[start:]


def decompress_stream(codec: int, data: bytes | memoryview) -> tuple[bytes, StreamEnd]:
    """The records of a batch compressed with ``codec`` as a stream reader meets them:
    what decompresses, and how the stream ends (``StreamEnd``). A gzip stream cut short
    gives what came before the cut (Java's ``GZIPInputStream`` reads it up to there, then
    throws ``EOFException``); a snappy, lz4 or zstd stream cut short, or with a later
    block that does not decompress, what its blocks before that hold (their readers hand
    those out, then throw an ``IOException``); anything else malformed raises
    ``CompressionError``, as ``decompress``. For message format v2, whose batches these
    are, an lz4 frame's header checksum must match (``KafkaLZ4BlockInputStream`` skips it
    for v0 only: "Stream frame descriptor corrupted")."""
    try:
        if codec == _GZIP:
            reader = zlib.decompressobj(16 + zlib.MAX_WBITS)
            payload = reader.decompress(data)
            return payload, StreamEnd.WHOLE if reader.eof else StreamEnd.EOF
        read = _read(codec, bytes(data), header_checksum=True)
    except _ERRORS as exc:
        raise CompressionError(f"a batch of codec {codec} does not decompress: {exc}") from None
    if read is None:
        raise CompressionError(f"cannot decompress codec {codec}: no such compression type")
    payload, stop = read
    return payload, StreamEnd.WHOLE if stop is None else StreamEnd.TRUNCATED


def compress(codec: int, data: bytes, *, broken_lz4_checksum: bool = False) -> bytes:
    """``data`` compressed with ``codec`` (gzip, snappy, lz4 or zstd; see above)."""
    if codec == _ZSTD:
        return zstandard.ZstdCompressor().compress(data)
    if codec == _GZIP:
        compressor = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
        return compressor.compress(data) + compressor.flush()
    if codec == _SNAPPY:
        return _snappy_xerial(data)
    if codec == _LZ4:
        return _lz4_block_frame(data, broken_checksum=broken_lz4_checksum)
    raise CompressionError(f"cannot compress with codec {codec}")


# ------------------------------------------------------------------------ snappy

_XERIAL_BLOCK: Final = 32 * 1024  # SnappyOutputStream's default block size


def _snappy_xerial(data: bytes) -> bytes:
    """The xerial framing (magic, version 1, compatible version 1) around raw snappy
    blocks, one per 32 KiB of ``data``."""
    out = bytearray(_XERIAL_MAGIC + struct.pack(">ii", 1, 1))
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK])
        out += struct.pack(">i", len(block)) + bytes(block)
    return bytes(out)


_XERIAL_HEAD: Final = struct.unpack(">i", _XERIAL_MAGIC[:4])[0]


def _snappy(data: bytes) -> _Read:
    """A snappy batch as ``SnappyInputStream`` reads it: fewer bytes than the xerial
    header, or no magic, a raw snappy block (all or nothing); else the blocks one after
    the other up to the first that is cut short or does not decompress. Fewer than four
    bytes where a block's length belongs end the stream (the reader finds no next chunk);
    the magic there starts an appended stream's header (cut short: "insufficient header
    size"; not the whole magic, the end of the stream; a version below 1, "incompatible
    codec version", where the read stops as at a cut: snappy-java checks the version of
    an appended header only). snappy-java 1.1.7.7, which Kafka 2.7 uses, has no maximum
    chunk size."""
    if len(data) < _XERIAL_HEADER or not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data)), None
    out = bytearray()
    position = _XERIAL_HEADER
    while len(data) - position >= 4:
        (size,) = struct.unpack_from(">i", data, position)
        if size == _XERIAL_HEAD:
            header = data[position : position + _XERIAL_HEADER]
            if len(header) < _XERIAL_HEADER:
                return bytes(out), "insufficient header size in a concatenated block"
            if not header.startswith(_XERIAL_MAGIC):
                break
            (version,) = struct.unpack_from(">i", header, len(_XERIAL_MAGIC))
            if version < 1:  # SnappyInputStream.isValidHeader: SnappyCodec's minimum
                return bytes(out), f"Compressed with an incompatible codec version {version}"
            position += _XERIAL_HEADER
            continue
        position += 4
        if size < 0 or position + size > len(data):
            # a negative size is not read either (NegativeArraySizeException for the
            # first chunk's buffer), nor one past the end ("failed to read chunk")
            return bytes(out), f"failed to read a chunk of {size} bytes at {position}"
        try:
            out += cramjam.snappy.decompress_raw(data[position : position + size])
        except cramjam.DecompressionError as exc:
            return bytes(out), f"a chunk at {position} does not decompress: {exc}"
        position += size
    return bytes(out), None


def _copy(out: bytearray, offset: int, size: int) -> None:
    """Append ``size`` bytes starting ``offset`` back (they may overlap what is written)."""
    if offset <= 0 or offset > len(out):
        raise CompressionError(f"a match refers {offset} bytes back into {len(out)}")
    start = len(out) - offset
    if offset >= size:
        out += out[start : start + size]
    else:
        for i in range(size):
            out.append(out[start + i])


# ------------------------------------------------------------------------ lz4

_LZ4_BLOCK: Final = 64 * 1024
_LZ4_FLG: Final = 0x60  # version 01, independent blocks, no checksums, no content size
_LZ4_BD: Final = 0x40  # 64 KiB blocks
_STORED: Final = 0x80000000


def _lz4_block_frame(data: bytes, *, broken_checksum: bool) -> bytes:
    """An LZ4 frame of ``data`` in independent 64 KiB blocks, each compressed unless that
    would not make it smaller. The header checksum is the second byte of the xxHash32 of
    the descriptor (FLG, BD), or, ``broken_checksum``, of the magic and the descriptor
    (``KafkaLZ4BlockOutputStream`` for message format v0)."""
    header = struct.pack("<IBB", _LZ4_MAGIC, _LZ4_FLG, _LZ4_BD)
    checksum = xxh32(header if broken_checksum else header[4:]) >> 8 & 0xFF
    out = bytearray(header)
    out.append(checksum)
    for start in range(0, len(data), _LZ4_BLOCK):
        block = data[start : start + _LZ4_BLOCK]
        packed = cramjam.lz4.compress_block(block, store_size=False)
        if len(packed) < len(block):
            out += struct.pack("<I", len(packed)) + bytes(packed)
        else:
            out += struct.pack("<I", _STORED | len(block)) + block
    out += struct.pack("<I", 0)
    return bytes(out)


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_MASK: Final = 0xFFFFFFFF


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _MASK


def xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 of ``data`` (what an LZ4 frame's checksums are)."""
    length = len(data)
    position = 0
    if length >= 16:
        lanes = [
            (seed + _P1 + _P2) & _MASK,
            (seed + _P2) & _MASK,
            seed & _MASK,
            (seed - _P1) & _MASK,
        ]
        while position <= length - 16:
            for i in range(4):
                (word,) = struct.unpack_from("<I", data, position)
                lanes[i] = _rotl((lanes[i] + word * _P2) & _MASK, 13) * _P1 & _MASK
                position += 4
        hashed = (
            _rotl(lanes[0], 1) + _rotl(lanes[1], 7) + _rotl(lanes[2], 12) + _rotl(lanes[3], 18)
        ) & _MASK
    else:
        hashed = (seed + _P5) & _MASK
    hashed = (hashed + length) & _MASK
    while position + 4 <= length:
        (word,) = struct.unpack_from("<I", data, position)
        hashed = _rotl((hashed + word * _P3) & _MASK, 17) * _P4 & _MASK
        position += 4
    while position < length:
        hashed = _rotl((hashed + data[position] * _P5) & _MASK, 11) * _P1 & _MASK
        position += 1
    hashed ^= hashed >> 15
    hashed = hashed * _P2 & _MASK
    hashed ^= hashed >> 13
    hashed = hashed * _P3 & _MASK
    hashed ^= hashed >> 16
    return hashed


_LZ4_CONTENT_SIZE: Final = 0x08
_LZ4_BLOCK_CHECKSUMS: Final = 0x10
_LZ4_CONTENT_CHECKSUM: Final = 0x04


def _lz4_header(data: bytes) -> tuple[int, int, int]:
    """An LZ4 frame's header as ``KafkaLZ4BlockInputStream.readHeader`` reads it: its
    flags, its maximum block size and where its header checksum is. Anything the reader's
    constructor refuses raises: the magic, a reserved bit of FLG or BD set (Kafka's
    ``FLG`` counts bit 0, the frame format's dictionary id flag, as reserved), blocks that
    are not independent, a version other than 1, a block size id outside 4-7, or a header
    cut short."""
    if len(data) < 6:
        raise CompressionError("Stream ended prematurely")
    (magic,) = struct.unpack_from("<I", data, 0)
    if magic != _LZ4_MAGIC:
        raise CompressionError(f"Stream unsupported (invalid magic bytes {magic:#x})")
    flags, descriptor = data[4], data[5]
    if flags & 0x03:
        raise CompressionError("Reserved bits must be 0")
    if not flags & 0x20:
        raise CompressionError("Dependent block stream is unsupported")
    if flags >> 6 != 1:
        raise CompressionError(f"Version {flags >> 6} is unsupported")
    if descriptor & 0x0F:
        raise CompressionError("Reserved2 field must be 0")
    if not 4 <= descriptor >> 4 & 7 <= 7:
        raise CompressionError("Block size value must be between 4 and 7")
    if descriptor & 0x80:
        raise CompressionError("Reserved3 field must be 0")
    position = 6 + (8 if flags & _LZ4_CONTENT_SIZE else 0)
    if position >= len(data):
        raise CompressionError("an lz4 frame header cut short")
    return flags, 1 << (2 * (descriptor >> 4 & 7) + 8), position


def _lz4_frame_end(data: bytes, position: int, flags: int, max_block: int) -> int | None:
    """Where the frame whose first block length is at ``position`` ends, if each of its
    blocks is there whole and no larger than ``max_block`` (``None`` if not): the lengths
    are skimmed, nothing is read."""
    checksum = 4 if flags & _LZ4_BLOCK_CHECKSUMS else 0
    while position + 4 <= len(data):
        (size,) = struct.unpack_from("<I", data, position)
        position += 4
        if size == 0:
            position += 4 if flags & _LZ4_CONTENT_CHECKSUM else 0
            return position if position <= len(data) else None
        size &= 0x7FFFFFFF
        if size > max_block:
            return None
        position += size + checksum
    return None


def _lz4_frame(data: bytes, *, header_checksum: bool = False) -> _Read:
    """An LZ4 frame as ``KafkaLZ4BlockInputStream`` reads it. A header Kafka refuses raises
    first (cramjam reads frames with a dictionary id or dependent blocks, which Kafka
    refuses); a frame whose blocks are all there goes to cramjam, up to its end mark only
    (Kafka's reader stops there; cramjam would read a frame appended to it too); anything
    cramjam refuses, or a frame cut short, is read block by block."""
    flags, max_block, position = _lz4_header(data)
    end = _lz4_frame_end(data, position + 1, flags, max_block)
    if end is not None:
        try:
            return bytes(cramjam.lz4.decompress(data if end == len(data) else data[:end])), None
        except cramjam.DecompressionError:
            pass
    return _lz4_frame_unchecked(data, flags, max_block, position, header_checksum=header_checksum)


def _lz4_frame_unchecked(
    data: bytes, flags: int, max_block: int, position: int, *, header_checksum: bool = False
) -> _Read:
    """An LZ4 frame read block by block as ``KafkaLZ4BlockInputStream`` reads it, from its
    header checksum at ``position`` (checked only if ``header_checksum``, and its content
    checksum never): what cramjam refuses, such as message format v0's header checksum
    over the magic, or a malformed frame. A header checksum that does not match raises
    (the reader's constructor throws); a block cut short (its length, its bytes or its
    checksum), larger than ``max_block`` ("Block size exceeded max"), one that does not
    decompress within the block into at most ``max_block`` bytes, or whose checksum does
    not match stops the read there, and so does an end mark whose content checksum is cut
    short."""
    if header_checksum and data[position] != xxh32(data[4:position]) >> 8 & 0xFF:
        raise CompressionError("Stream frame descriptor corrupted")
    position += 1
    block_checksums = bool(flags & _LZ4_BLOCK_CHECKSUMS)
    out = bytearray()
    while True:
        if position + 4 > len(data):
            return bytes(out), "Stream ended prematurely"
        (size,) = struct.unpack_from("<I", data, position)
        position += 4
        if size == 0:
            if flags & _LZ4_CONTENT_CHECKSUM and position + 4 > len(data):
                return bytes(out), "the content checksum is cut short"
            return bytes(out), None
        stored = bool(size & 0x80000000)
        size &= 0x7FFFFFFF
        if size > max_block:
            return bytes(out), f"Block size {size} exceeded max: {max_block}"
        end = position + size + (4 if block_checksums else 0)
        if end > len(data):
            return bytes(out), "Stream ended prematurely"
        block = data[position : position + size]
        if block_checksums and struct.unpack_from("<I", data, end - 4)[0] != xxh32(block):
            return bytes(out), "Block checksum mismatch"
        position = end
        if stored:
            out += block
            continue
        piece = bytearray()  # independent blocks: a match reaches into its own block only
        try:
            _lz4_block(block, piece)
        except (CompressionError, IndexError) as exc:
            # the reader decompresses a block whole before handing it out
            return bytes(out), f"an lz4 block does not decompress: {exc}"
        if len(piece) > max_block:
            return bytes(out), f"an lz4 block decompresses past the maximum {max_block}"
        out += piece


def _lz4_block(data: bytes, out: bytearray) -> None:
    """One lz4 block appended to ``out`` (a match may reach into earlier blocks)."""
    position = 0
    while position < len(data):
        token = data[position]
        position += 1
        literals, position = _lz4_length(data, position, token >> 4)
        out += data[position : position + literals]
        position += literals
        if position >= len(data):
            return  # the last sequence has literals only
        offset = data[position] | (data[position + 1] << 8)
        position += 2
        size, position = _lz4_length(data, position, token & 15)
        _copy(out, offset, size + 4)


def _lz4_length(data: bytes, position: int, length: int) -> tuple[int, int]:
    """A token's 4-bit length, continued by bytes while they are 255 if it is 15."""
    if length == 15:
        while True:
            byte = data[position]
            position += 1
            length += byte
            if byte != 255:
                break
    return length, position
