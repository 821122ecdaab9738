"""kemu's console tools without a cluster: the key partitioner (Kafka's murmur2), record
batches written and read back, ``dump-log`` on segment and index files, and bad command
lines refused in one line with exit status 1 before anything is sent. Against a running
cluster: tests/integration/test_data_clients.py."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2  # type: ignore[import-untyped]
from kio.records.readers import read_batch

from actors.log.compression import CompressionError, decompress
from actors.log.records import CompressionType
from cluster.cli import console_consumer, console_producer, dump_log, get_offsets
from cluster.cli.console_producer import murmur2 as kemu_murmur2
from cluster.cli.console_producer import partition_for_key, producer_props
from cluster.cli.jopt import parse
from cluster.kafka.records import (
    ProducerRecord,
    RecordsError,
    batch_records,
    encode_batch,
    read_batches,
    split_records,
)
from tests.support.record_batches import client_batch, relabel, set_field

# ---------------------------------------------------------------------- partitioning


def test_murmur2_matches_kafkas_test_vectors() -> None:
    """``Utils.murmur2`` of the strings Kafka's own UtilsTest checks."""
    assert [
        kemu_murmur2(s)
        for s in (
            b"21",
            b"foobar",
            b"a-little-bit-long-string",
            b"a-little-bit-longer-string",
            b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
        )
    ] == [-973932308, -790332482, -985981536, -1486304829, -58897971]


@given(key=st.binary(max_size=40), partitions=st.integers(1, 50))
def test_keys_go_where_kafka_python_sends_them(key: bytes, partitions: int) -> None:
    """A keyed record's partition is the one kafka-python's DefaultPartitioner picks, from
    its own murmur2 (a second implementation of Kafka's, unsigned)."""
    assert kemu_murmur2(key) % 2**32 == murmur2(key)
    assert partition_for_key(key, partitions) == (murmur2(key) & 0x7FFFFFFF) % partitions


# ---------------------------------------------------------------------- batches

records = st.lists(
    st.builds(
        ProducerRecord,
        value=st.none() | st.binary(max_size=30),
        key=st.none() | st.binary(max_size=10),
        headers=st.lists(
            st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=2
        ).map(tuple),
        timestamp_ms=st.integers(0, 2**41),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=50)
@given(sent=records, gzip=st.booleans())
def test_batches_read_back_as_written(sent: list[ProducerRecord], gzip: bool) -> None:
    """A batch ``encode_batch`` writes is one valid v2 batch to kio's reader (an
    independent implementation), and ``batch_records`` gives back every record."""
    codec = CompressionType.GZIP if gzip else CompressionType.NONE
    data = encode_batch(sent, compression=codec)
    if not gzip:  # kio reads uncompressed batches only, and checks the CRC
        theirs, size = read_batch(data, 0)
        assert size == len(data)
        assert [(r.key, r.value) for r in theirs.records] == [(r.key, r.value) for r in sent]
    (header,) = read_batches(data)
    assert (header.compression, header.records_count) == (codec, len(sent))
    back = batch_records(data, header)
    assert [(r.offset, r.key, r.value, r.headers) for r in back] == [
        (i, r.key, r.value, r.headers) for i, r in enumerate(sent)
    ]
    assert [r.timestamp_ms for r in back] == [r.timestamp_ms for r in sent]


@settings(max_examples=50)
@given(sent=records, batch_size=st.integers(0, 400))
def test_a_split_keeps_the_records_in_pieces_within_the_batch_size(
    sent: list[ProducerRecord], batch_size: int
) -> None:
    """``split_records`` (``ProducerBatch.split``) gives every record back, in order, in
    pieces that each fit ``batch_size`` as encoded, unless a piece is one record alone;
    each piece but the last could not have taken the next record (the sizes counted are
    the encoded ones, exactly)."""
    pieces = split_records(sent, batch_size)
    assert [r for piece in pieces for r in piece] == sent
    for i, piece in enumerate(pieces):
        assert len(piece) == 1 or len(encode_batch(piece)) <= batch_size
        if i + 1 < len(pieces):
            assert len(encode_batch((*piece, pieces[i + 1][0]))) > batch_size


SNAPPY_BLOCK = bytes([12, 0x08]) + b"abc" + bytes([0x15, 3])  # "abc", then 9 bytes 3 back
XERIAL = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
LZ4_BLOCK = bytes([0x35]) + b"abc" + bytes([3, 0, 0x10]) + b"!"  # "abc", 9 bytes 3 back, "!"
LZ4_HEADER = bytes([0x04, 0x22, 0x4D, 0x18, 0x60, 0x40, 0x00])


def test_snappy_and_lz4_as_kafka_clients_frame_them() -> None:
    """A raw snappy block, the xerial framing of Kafka's Java client (two blocks), and an
    lz4 frame with a stored and a compressed block decompress to what they encode;
    overlapping copies repeat what they overlap (real clients' output: the confluent-kafka
    test in tests/integration/test_data_clients.py)."""
    assert decompress(2, SNAPPY_BLOCK) == b"abc" * 4
    framed = XERIAL + b"".join(struct.pack(">i", len(SNAPPY_BLOCK)) + SNAPPY_BLOCK for _ in "ab")
    assert decompress(2, framed) == b"abc" * 8
    stored = struct.pack("<I", 0x80000002) + b"xy"
    frame = LZ4_HEADER + stored + struct.pack("<I", len(LZ4_BLOCK)) + LZ4_BLOCK + bytes(4)
    assert decompress(3, frame) == b"xy" + b"abc" * 4 + b"!"
    runs = bytes([0xF0, 5]) + b"L" * 20 + bytes([1, 0, 0x1F]) + b"z" + bytes([1, 0, 2, 0x10]) + b"q"
    frame = LZ4_HEADER + struct.pack("<I", len(runs)) + runs + bytes(4)
    # literals 15 + 5 and a match of 4; one literal and a match of 15 + 2 + 4; the last literal
    assert decompress(3, frame) == b"L" * 24 + b"z" * 22 + b"q"


def test_zstd_frames_with_and_without_their_size_one_after_the_other() -> None:
    """zstd as Kafka's clients write it: a frame with its content size, a streamed one
    without, and two frames back to back decompress to what they hold."""
    sized = zstandard.ZstdCompressor().compress(b"abc" * 100)
    streamer = zstandard.ZstdCompressor().compressobj()
    streamed = streamer.compress(b"xyz" * 50) + streamer.flush()
    assert decompress(4, sized) == b"abc" * 100
    assert decompress(4, streamed) == b"xyz" * 50
    assert decompress(4, sized + streamed) == b"abc" * 100 + b"xyz" * 50


def test_undecodable_compressed_batches_are_one_error() -> None:
    """Bytes that are no zstd frame, a copy reaching before the start, a wrong length, a
    frame without lz4's magic, an unknown codec: ``CompressionError``, which the tools
    print as one line."""
    for codec, data in [
        (4, b"anything"),
        (5, b"anything"),
        (2, bytes([12, 0x15, 3])),
        (2, bytes([13]) + SNAPPY_BLOCK[1:]),
        (3, b"\x00" * 12),
    ]:
        with pytest.raises(CompressionError):
            decompress(codec, data)
    zstd = relabel(client_batch([b"x" * 100], codec=1), 4)  # gzip bytes called zstd
    with pytest.raises(RecordsError, match="codec 4 does not decompress"):
        batch_records(zstd, next(read_batches(zstd)))


# ---------------------------------------------------------------------- dump-log


def run(module: object, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = module.main(list(argv), out=out, err=err)  # type: ignore[attr-defined]
    return status, out.getvalue(), err.getvalue()


def test_dump_log_prints_batches_records_and_the_torn_tail(tmp_path: Path) -> None:
    """A segment of two batches (the second gzip, keyed) and 7 stray bytes: a batch line
    each, record lines with --print-data-log, and the stray bytes reported."""
    first = set_field(
        client_batch([b"a", b"bb"], key=None, timestamps=[1000, 1001]), "base_offset", 100
    )
    second = set_field(client_batch([b"ccc"], codec=1, timestamps=[2000]), "base_offset", 102)
    segment = tmp_path / "00000000000000000100.log"
    segment.write_bytes(first + second + b"garbage")
    status, out, err = run(dump_log, "--files", str(segment), "--print-data-log")
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert lines[:2] == [f"Dumping {segment}", "Starting offset: 100"]
    assert lines[2].startswith(
        "baseOffset: 100 lastOffset: 101 count: 2 baseSequence: -1 lastSequence: -1"
        " producerId: -1 producerEpoch: -1 partitionLeaderEpoch: -1 isTransactional: false"
        " isControl: false position: 0 CreateTime: 1001 size: "
    )
    (crc,) = struct.unpack_from(">I", first, 17)
    assert lines[2].endswith(f"magic: 2 compresscodec: NONE crc: {crc} isvalid: true")
    record = "| offset: {} CreateTime: {} keysize: {} valuesize: {} sequence: -1 headerKeys: []"
    assert lines[3:5] == [
        record.format(100, 1000, -1, 1) + " payload: a",
        record.format(101, 1001, -1, 2) + " payload: bb",
    ]
    assert f"position: {len(first)} CreateTime: 2000 size: {len(second)}" in lines[5]
    assert "compresscodec: GZIP" in lines[5]
    assert lines[6:] == [
        record.format(102, 2000, 3, 3) + " key: key payload: ccc",
        f"Found 7 invalid bytes at the end of {segment.name}",
    ]
    shallow = run(dump_log, "--files", str(segment))[1].splitlines()
    assert [line.split(" ")[0] for line in shallow[2:]] == ["baseOffset:", "baseOffset:", "Found"]


def test_dump_log_prints_index_entries_up_to_the_unused_ones(tmp_path: Path) -> None:
    """An offset index and a time index, preallocated with zeros after two entries: each
    entry with its absolute offset, none of the unused ones."""
    index = tmp_path / "00000000000000000050.index"
    index.write_bytes(struct.pack(">iiii", 0, 0, 7, 4096) + bytes(80))
    times = tmp_path / "00000000000000000050.timeindex"
    times.write_bytes(struct.pack(">qiqi", 1000, 3, 2000, 9) + bytes(120))
    status, out, _ = run(dump_log, "--files", f"{index},{times}")
    assert status == 0
    assert out.splitlines() == [
        f"Dumping {index}",
        "offset: 50 position: 0",
        "offset: 57 position: 4096",
        f"Dumping {times}",
        "timestamp: 1000 offset: 53",
        "timestamp: 2000 offset: 59",
    ]


# ---------------------------------------------------------------------- producer properties

MERGED_DEFAULTS = {
    "acks": "1",
    "request.timeout.ms": "1500",
    "retries": "3",
    "retry.backoff.ms": "100",
    "max.block.ms": "60000",
}
MERGED_OPTIONS = {
    "acks": ("--request-required-acks", "all"),
    "request.timeout.ms": ("--request-timeout-ms", "2500"),
    "retries": ("--message-send-max-retries", "7"),
    "retry.backoff.ms": ("--retry-backoff-ms", "20"),
    "max.block.ms": ("--max-block-ms", "9000000000"),
}


def producer_config(*argv: str) -> dict[str, str]:
    return producer_props(parse(["--topic", "t", *argv], console_producer.SPECS))


@pytest.mark.parametrize("key", sorted(MERGED_OPTIONS))
def test_a_merged_option_given_wins_else_a_property_wins_over_its_default(
    key: str, tmp_path: Path
) -> None:
    """``ConsoleProducer.producerProps`` merges each option as
    ``CommandLineUtils.maybeMergeOptions``: the option given on the command line wins over
    ``--producer-property`` and ``--producer.config``; not given, the property given wins
    over the option's default; neither given, the default."""
    option, value = MERGED_OPTIONS[key]
    config = tmp_path / "producer.properties"
    config.write_text(f"{key}=0\n")
    assert producer_config()[key] == MERGED_DEFAULTS[key]
    assert producer_config("--producer-property", f"{key}=0")[key] == "0"
    assert producer_config("--producer.config", str(config))[key] == "0"
    both = ("--producer-property", f"{key}=0", "--producer.config", str(config))
    assert producer_config(option, value, *both)[key] == value
    assert producer_config(*both, option, value)[key] == value
    others = {k: v for k, v in producer_config(option, value).items() if k != key}
    assert others == {k: v for k, v in producer_config().items() if k != key}


def test_the_codec_option_overrides_a_compression_property(tmp_path: Path) -> None:
    """``producerProps`` puts ``compression.type`` from ``--compression-codec`` whatever
    the properties say: ``none`` without the option, ``gzip`` for the option without a
    value; ``client.id`` is ``console-producer`` unless a property names one."""
    config = tmp_path / "producer.properties"
    config.write_text("compression.type=gzip\nclient.id=mine\n")
    gzip_property = ("--producer-property", "compression.type=gzip")
    assert producer_config(*gzip_property)["compression.type"] == "none"
    assert producer_config("--producer.config", str(config))["compression.type"] == "none"
    assert producer_config("--compression-codec", *gzip_property)["compression.type"] == "gzip"
    assert producer_config("--compression-codec", "none")["compression.type"] == "none"
    assert producer_config()["client.id"] == "console-producer"
    assert producer_config("--producer.config", str(config))["client.id"] == "mine"


# ---------------------------------------------------------------------- bad input

TO_NOWHERE = ("--bootstrap-server", "127.0.0.1:1", "--topic", "t")


@pytest.mark.parametrize(
    ("module", "argv", "first_line"),
    [
        (
            console_producer,
            ["--bootstrap-server", "127.0.0.1:1"],
            'Missing required argument "[topic]"',
        ),
        (
            console_producer,
            ["--bootstrap-server", "127.0.0.1:1", "--topic", "t", "--producer-property", "acks=2"],
            "Invalid value 2 for configuration acks: String must be one of: all, -1, 0, 1",
        ),
        (
            console_producer,
            [*TO_NOWHERE, "--request-required-acks", "2", "--producer-property", "acks=1"],
            "Invalid value 2 for configuration acks: String must be one of: all, -1, 0, 1",
        ),
        (
            console_producer,
            [
                *TO_NOWHERE,
                "--compression-codec",
                "lz4",
                "--producer-property",
                "compression.type=gzip",
            ],
            "kemu's console producer compresses with none or gzip, not lz4",
        ),
        (
            console_producer,
            ["--bootstrap-server", "127.0.0.1:1", "--topic", "t", "--request-timeout-ms", "x"],
            "Cannot parse argument 'x' of option request-timeout-ms",
        ),
        (
            console_producer,
            [*TO_NOWHERE, "--max-block-ms", "soon"],
            "Cannot parse argument 'soon' of option max-block-ms",
        ),
        (
            console_producer,
            [*TO_NOWHERE, "--max-block-ms", "9223372036854775808"],
            "Cannot parse argument '9223372036854775808' of option max-block-ms",
        ),
        (
            console_producer,
            [*TO_NOWHERE, "--max-block-ms", "-1"],
            "Invalid value -1 for configuration max.block.ms: Value must be at least 0",
        ),
        (
            console_producer,
            [*TO_NOWHERE, "--producer-property", "max.block.ms=soon"],
            "Invalid value soon for configuration max.block.ms: Not a number of type LONG",
        ),
        (
            console_producer,
            [*TO_NOWHERE, "--producer-property", "delivery.timeout.ms=2000"],
            "delivery.timeout.ms should be equal to or larger than linger.ms + request.timeout.ms",
        ),
        (
            console_producer,
            ["--bootstrap-server", "127.0.0.1:1", "--topic", "t", "--timeout", "5"],
            "timeout is not a recognized option",
        ),
        (
            console_producer,
            ["--bootstrap-server", "127.0.0.1:1", "--topic", "t", "--property", "parse.key"],
            "Invalid command line properties: parse.key (expected key=value)",
        ),
        (
            console_consumer,
            ["--bootstrap-server", "127.0.0.1:1", "--topic", "t", "--offset", "3"],
            "The partition is required when offset is specified.",
        ),
        (
            console_consumer,
            [*TO_NOWHERE, "--partition", "0", "--offset", "3", "--from-beginning"],
            "Options from-beginning and offset cannot be specified together.",
        ),
        (
            console_consumer,
            [
                "--bootstrap-server",
                "127.0.0.1:1",
                "--topic",
                "t",
                "--partition",
                "0",
                "--offset",
                "x",
            ],
            "The provided offset value 'x' is incorrect. Valid values are 'earliest', 'latest',"
            " or a non-negative long.",
        ),
        (
            console_consumer,
            [
                "--bootstrap-server",
                "127.0.0.1:1",
                "--topic",
                "t",
                "--group",
                "g",
                "--partition",
                "0",
            ],
            "Options group and partition cannot be specified together.",
        ),
        (
            console_consumer,
            [*TO_NOWHERE, "--partition", "0", "--consumer-property", "group.id=g"],
            "Options group and partition cannot be specified together.",
        ),
        (
            console_consumer,
            [*TO_NOWHERE, "--group", "g", "--consumer-property", "group.id=h"],
            "The group ids provided in different places (directly using '--group', via"
            " '--consumer-property', or via '--consumer.config') do not match. Detected group"
            " ids: 'g', 'h'",
        ),
        (
            console_consumer,
            [*TO_NOWHERE, "--group", "g", "--consumer-property", "enable.auto.commit=yes"],
            "Invalid value yes for configuration enable.auto.commit: Expected value to be"
            " either true or false",
        ),
        (
            console_consumer,
            [*TO_NOWHERE, "--isolation-level", "read_everything"],
            "Invalid value read_everything for configuration isolation.level: String must be"
            " one of: read_committed, read_uncommitted",
        ),
        (
            console_consumer,
            [*TO_NOWHERE, "--consumer-property", "isolation.level=READ_COMMITTED"],
            "Invalid value READ_COMMITTED for configuration isolation.level: String must be"
            " one of: read_committed, read_uncommitted",
        ),
        (
            console_consumer,
            ["--topic", "t", "--no-such-option"],
            "no-such-option is not a recognized option",
        ),
        (
            get_offsets,
            ["--bootstrap-server", "127.0.0.1:1", "--topic", "t", "--time", "soon"],
            "Cannot parse argument 'soon' of option time",
        ),
        (dump_log, ["--files", "segment.txt"], "Ignoring unknown file segment.txt"),
        (dump_log, [], 'Missing required argument "[files]"'),
    ],
)
def test_bad_command_lines_are_one_line_and_exit_1(
    module: object, argv: list[str], first_line: str
) -> None:
    """A bad option or value is refused with its one line on stderr (then the usage, for a
    usage error) and exit status 1, before any connection is tried (the servers named
    here do not listen)."""
    status, out, err = run(module, *argv)
    assert (status, out) == (1, "")
    assert err.splitlines()[0] == first_line


class Chunks:
    """Stdin that has ``chunks`` arrive one per read, then EOF."""

    def __init__(self, *chunks: bytes) -> None:
        self.chunks = list(chunks)

    def read1(self, size: int = -1, /) -> bytes:
        return self.chunks.pop(0) if self.chunks else b""


@pytest.mark.asyncio
async def test_producer_lines_go_as_they_arrive() -> None:
    """The producer takes the complete lines each read brings (a line split across reads
    waits for its end), and a last line without a newline at EOF."""
    lines = console_producer._Lines(Chunks(b"a\nb", b"c\nd\n", b"e"))
    assert await lines.next_chunk() == [b"a\n"]
    assert await lines.next_chunk() == [b"bc\n", b"d\n"]
    assert await lines.next_chunk() == [b"e"]
    assert await lines.next_chunk() == []
