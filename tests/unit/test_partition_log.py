"""A partition log on real files in a temporary directory: the bytes of its files, offsets
assigned as a leader, segment rolls, lookups, reads as Fetch makes them, truncation,
the log start offset, and what a follower appends.

Batches are built by a real client's code and read back by kio's reader
(``tests.support.record_batches``); index files are decoded here by hand, per Kafka's
format. Time is a list the test moves.
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import pytest

from actors.log.batch_codec import decode_records
from actors.log.channel import LogFiles
from actors.log.compression import decompress
from actors.log.leader_epoch import LEADER_EPOCH_CHECKPOINT
from actors.log.manager import SEGMENT_FILES, log_config
from actors.log.partition_log import (
    CLEAN_SHUTDOWN_FILE,
    Log,
    LogConfig,
    had_clean_shutdown,
    mark_clean_shutdown,
)
from actors.log.records import TimestampType, check_stored_batch
from protocol.errors import ErrorCode, KafkaApiError, RecordValidationError
from tests.support.open_logs import OPENED, close_opened_logs  # noqa: F401 - autouse
from tests.support.record_batches import (
    client_batch,
    decode_batches,
    fix_crc,
    get_field,
    recompressed,
    set_field,
)

T0 = 1_600_000_000_000


class Clock:
    """Milliseconds the test sets; the log reads them through ``now``."""

    def __init__(self, ms: int = T0) -> None:
        self.ms = ms

    def now(self) -> int:
        return self.ms


def open_log(directory: Path, clock: Clock | None = None, /, **config: int) -> Log:
    return OPENED.keep(Log(directory, LogConfig(**config), now_ms=(clock or Clock()).now))  # type: ignore[arg-type]


def values(count: int, size: int = 100, tag: str = "v") -> list[bytes]:
    return [f"{tag}{i}".encode().ljust(size, b".") for i in range(count)]


def index_entries(path: Path) -> list[tuple[int, int]]:
    """``.index`` by hand: 4-byte relative offset, 4-byte position, big-endian."""
    return list(struct.iter_unpack(">ii", path.read_bytes()))


def time_index_entries(path: Path) -> list[tuple[int, int]]:
    """``.timeindex`` by hand: 8-byte timestamp, 4-byte relative offset, big-endian."""
    return list(struct.iter_unpack(">qi", path.read_bytes()))


def files_of(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


# ------------------------------------------------------------------ formats and offsets


def test_a_leader_append_keeps_the_batch_but_its_base_offset_and_epoch(tmp_path: Path) -> None:
    """The .log holds the client's batch byte for byte except base offset and leader
    epoch, which the leader sets; kio reads it back with the offsets assigned."""
    log = open_log(tmp_path / "t-0")
    first = client_batch(values(3))
    second = client_batch(values(2, tag="w"))
    info1 = log.append_as_leader(first, leader_epoch=4)
    info2 = log.append_as_leader(second, leader_epoch=5)
    log.close()

    assert (info1.first_offset, info1.last_offset) == (0, 2)
    assert (info2.first_offset, info2.last_offset) == (3, 4)
    assert log.log_end_offset == 5
    assert files_of(tmp_path / "t-0") == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
        "leader-epoch-checkpoint",
    ]
    stored = (tmp_path / "t-0" / "00000000000000000000.log").read_bytes()
    assert stored == (
        set_field(set_field(first, "partition_leader_epoch", 4), "base_offset", 0)
        + set_field(set_field(second, "partition_leader_epoch", 5), "base_offset", 3)
    )
    decoded = decode_batches(stored)
    assert [d.offsets for d in decoded] == [[0, 1, 2], [3, 4]]
    assert [d.values for d in decoded] == [values(3), values(2, tag="w")]
    assert [d.batch.partition_leader_epoch for d in decoded] == [4, 5]
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_bytes() == b"0\n2\n4 0\n5 3\n"


def test_the_offset_index_gets_an_entry_per_index_interval(tmp_path: Path) -> None:
    """An append is indexed (its last offset -> its start position) when more than
    index.interval.bytes were written since the last entry; the first never is."""
    log = open_log(tmp_path / "t-0", index_interval_bytes=300)
    sizes = []
    for n in (1, 2, 1, 3, 1, 1, 2):
        batch = client_batch(values(n))
        sizes.append((n, len(batch)))
        log.append_as_leader(batch, leader_epoch=0)
    log.close()

    expected = []
    position = offset = since = 0
    for n, size in sizes:
        if since > 300:
            expected.append((offset + n - 1, position))
            since = 0
        since += size
        position += size
        offset += n
    assert expected, "the test should index at least one append"
    assert index_entries(tmp_path / "t-0" / "00000000000000000000.index") == expected


def test_the_time_index_records_where_the_max_timestamp_grew(tmp_path: Path) -> None:
    """.timeindex entries (timestamp, relative offset) are written with offset entries when
    the max timestamp grew, plus one at close; lookups by timestamp use them."""
    log = open_log(tmp_path / "t-0", index_interval_bytes=0)
    stamps = [T0 + 10, T0 + 5, T0 + 30, T0 + 20, T0 + 40]
    for i, stamp in enumerate(stamps):
        log.append_as_leader(client_batch([b"x" * 50], timestamps=[stamp]), leader_epoch=0)
        assert log.log_end_offset == i + 1
    assert log.fetch_offset_by_timestamp(T0 + 6) == (T0 + 10, 0, 0)
    assert log.fetch_offset_by_timestamp(T0 + 25) == (T0 + 30, 2, 0)
    assert log.fetch_offset_by_timestamp(T0 + 31) == (T0 + 40, 4, 0)
    assert log.fetch_offset_by_timestamp(T0 + 41) is None
    log.close()
    # appends 2..5 are indexed (more than 0 bytes since the last entry); the max
    # timestamp grew at appends 3 and 5, and the entry at close repeats the last.
    assert time_index_entries(tmp_path / "t-0" / "00000000000000000000.timeindex") == [
        (T0 + 10, 0),
        (T0 + 30, 2),
        (T0 + 40, 4),
    ]


def test_a_new_segment_preallocates_its_indexes_and_a_roll_trims_them(tmp_path: Path) -> None:
    """Index files are created at segment.index.bytes rounded down to whole entries and cut
    to their entries when the segment is rolled; the new active one is preallocated."""
    directory = tmp_path / "t-0"
    log = open_log(directory, max_index_size=1000, index_interval_bytes=0, segment_bytes=700)
    assert (directory / "00000000000000000000.index").stat().st_size == 1000 // 8 * 8
    assert (directory / "00000000000000000000.timeindex").stat().st_size == 1000 // 12 * 12
    while len(log.segments) < 2:
        log.append_as_leader(client_batch(values(1)), leader_epoch=0)
    second = log.segments[1].base_offset
    old = log.segments[0]
    assert (directory / "00000000000000000000.index").stat().st_size == 8 * old.offset_index.entries
    assert (
        directory / "00000000000000000000.timeindex"
    ).stat().st_size == 12 * old.time_index.entries
    assert (directory / f"{second:020d}.index").stat().st_size == 1000 // 8 * 8
    log.close()
    assert (directory / f"{second:020d}.index").stat().st_size == 0


# ----------------------------------------------------------------------------- rolling


def test_the_log_rolls_at_segment_bytes(tmp_path: Path) -> None:
    """A segment never grows past segment.bytes: the append that would not fit starts a
    new segment named after the log end offset, and the old one is flushed."""
    directory = tmp_path / "t-0"
    log = open_log(directory, segment_bytes=1000)
    batch = client_batch(values(2))
    for _ in range(10):
        log.append_as_leader(batch, leader_epoch=0)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 1
    assert all(s.size <= 1000 for s in log.segments)
    per_segment = 1000 // len(batch)
    assert bases == list(range(0, 20, 2 * per_segment))
    assert log.recovery_point == bases[-1]
    for base in bases:
        assert (directory / f"{base:020d}.log").exists()


def test_the_log_rolls_when_record_time_passes_segment_ms(tmp_path: Path) -> None:
    """segment.ms counts from the first batch's max timestamp to the incoming one (record
    time, not the broker's clock)."""
    log = open_log(tmp_path / "t-0", segment_ms=1000)
    log.append_as_leader(client_batch([b"a"], timestamps=[T0]), leader_epoch=0)
    log.append_as_leader(client_batch([b"b"], timestamps=[T0 + 1000]), leader_epoch=0)
    assert [s.base_offset for s in log.segments] == [0]
    log.append_as_leader(client_batch([b"c"], timestamps=[T0 + 1001]), leader_epoch=0)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_without_timestamps_segment_ms_counts_from_the_segment_creation(tmp_path: Path) -> None:
    """A segment whose first batch has no timestamp (-1) ages by the injected clock from
    its creation."""
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock, segment_ms=1000)
    log.append_as_leader(client_batch([b"a"], timestamps=[-1]), leader_epoch=0)
    clock.ms += 1000
    log.append_as_leader(client_batch([b"b"], timestamps=[-1]), leader_epoch=0)
    assert len(log.segments) == 1
    clock.ms += 1
    log.append_as_leader(client_batch([b"c"], timestamps=[-1]), leader_epoch=0)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_the_log_rolls_when_an_index_is_full(tmp_path: Path) -> None:
    """With room for few index entries, the segment rolls once an index is full, and no
    index file ever holds more entries than fit segment.index.bytes."""
    directory = tmp_path / "t-0"
    log = open_log(directory, max_index_size=24, index_interval_bytes=0)
    for i in range(12):
        log.append_as_leader(client_batch([b"x"], timestamps=[T0 + i]), leader_epoch=0)
    log.close()
    assert len(log.segments) > 1
    for segment in log.segments:
        assert len(index_entries(segment.index_path)) <= 3
        assert len(time_index_entries(segment.time_index_path)) <= 2
    offsets = [d.offsets[0] for s in log.segments for d in decode_batches(s.log_path.read_bytes())]
    assert offsets == list(range(12))


# ------------------------------------------------------------------------------ reading


def build(directory: Path, batches: int = 12, per_batch: int = 3, **config: int) -> Log:
    log = open_log(directory, **config)
    for i in range(batches):
        log.append_as_leader(client_batch(values(per_batch, tag=f"b{i}-")), leader_epoch=0)
    return log


def test_a_read_finds_the_batch_holding_any_offset(tmp_path: Path) -> None:
    """read(offset) starts at the batch holding that offset, in whichever segment, through
    the index floor and a scan of batch headers."""
    log = build(tmp_path / "t-0", segment_bytes=1500, index_interval_bytes=200)
    assert len(log.segments) > 2
    for offset in range(log.log_end_offset):
        got = log.read(offset, max_bytes=1)
        (batch,) = decode_batches(got.records)
        assert batch.offsets[0] == offset - offset % 3
        assert offset in batch.offsets


def test_a_read_returns_whole_batches_within_max_bytes_and_the_first_one_always(
    tmp_path: Path,
) -> None:
    """Reads stop at the last whole batch within max_bytes; the first batch is returned
    whole even when larger (minOneMessage), unless the caller asks otherwise."""
    log = build(tmp_path / "t-0")
    size = len(client_batch(values(3, tag="b0-")))
    assert len(decode_batches(log.read(0, 1).records)) == 1
    assert len(decode_batches(log.read(0, size * 2 + size // 2).records)) == 2
    assert log.read(0, size - 1, min_one_message=False).records == b""
    assert len(decode_batches(log.read(0, 10**6).records)) == 12


def test_a_read_stops_at_the_high_watermark(tmp_path: Path) -> None:
    """With max_offset (the high watermark), no batch at or above it is returned, and a
    read at it is empty; a read returns one segment's batches at most, so a consumer
    reading on reaches exactly the high watermark."""
    log = build(tmp_path / "t-0", segment_bytes=1500)
    assert len(log.segments) > 2
    for hw in (3, 9, 15, 30, 36):
        offsets: list[int] = []
        while not offsets or offsets[-1] < hw - 1:
            got = decode_batches(log.read(len(offsets), 10**6, max_offset=hw).records)
            assert got, f"nothing read at {len(offsets)} below the high watermark {hw}"
            offsets += [o for batch in got for o in batch.offsets]
        assert offsets == list(range(hw))
        assert log.read(hw, 10**6, max_offset=hw).records == b""


def test_reads_outside_the_log_are_offset_out_of_range(tmp_path: Path) -> None:
    """An offset above the log end or below the log start is OFFSET_OUT_OF_RANGE; the log
    end itself reads as empty."""
    log = build(tmp_path / "t-0", batches=4)
    assert log.read(12, 100).records == b""
    with pytest.raises(KafkaApiError) as above:
        log.read(13, 100)
    assert above.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    log.maybe_increment_log_start_offset(6)
    with pytest.raises(KafkaApiError) as below:
        log.read(5, 100)
    assert below.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert decode_batches(log.read(6, 1).records)[0].offsets == [6, 7, 8]


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_lookup_by_timestamp_finds_the_record_inside_a_compressed_batch(
    tmp_path: Path, codec: int
) -> None:
    """A timestamp lookup reads a compressed batch's records and answers the first one at
    or after the timestamp, with its own timestamp and its batch's leader epoch
    (``FileRecords.searchForTimestamp``), not the batch's base offset."""
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(client_batch(values(2), timestamps=[T0, T0 + 1]), leader_epoch=3)
    log.append_as_leader(
        client_batch(values(4), timestamps=[T0 + 10, T0 + 30, T0 + 20, T0 + 40], codec=codec),
        leader_epoch=5,
    )
    assert log.fetch_offset_by_timestamp(T0 + 1) == (T0 + 1, 1, 3)
    assert log.fetch_offset_by_timestamp(T0 + 10) == (T0 + 10, 2, 5)
    assert log.fetch_offset_by_timestamp(T0 + 15) == (T0 + 30, 3, 5)
    assert log.fetch_offset_by_timestamp(T0 + 35) == (T0 + 40, 5, 5)
    assert log.fetch_offset_by_timestamp(T0 + 41) is None
    # The log start inside the batch: its records below it are not answered.
    log.maybe_increment_log_start_offset(4)
    assert log.fetch_offset_by_timestamp(T0 + 15) == (T0 + 20, 4, 5)


def test_lookup_by_timestamp_under_log_append_time_answers_the_batch_time(tmp_path: Path) -> None:
    """Under LogAppendTime every record of a batch reads with the batch's max timestamp, so
    a lookup answers the first record of the first batch appended at or after the time,
    whatever its create time (``DefaultRecordBatch``'s ``logAppendTime``)."""
    clock = Clock(T0 + 5000)
    log = open_log(tmp_path / "t-0", clock, timestamp_type=TimestampType.LOG_APPEND_TIME)
    log.append_as_leader(client_batch(values(3), timestamps=[T0 + 1, T0 + 2, T0 + 3]), 0)
    clock.ms = T0 + 6000
    log.append_as_leader(client_batch(values(3), codec=1), leader_epoch=0)
    assert log.fetch_offset_by_timestamp(T0 + 2) == (T0 + 5000, 0, 0)
    assert log.fetch_offset_by_timestamp(T0 + 5001) == (T0 + 6000, 3, 0)


def test_a_stored_compressed_batch_that_does_not_decompress_fails_the_lookup(
    tmp_path: Path,
) -> None:
    """A compressed batch on disk whose payload is garbage fails a lookup that must open it
    with UNKNOWN_SERVER_ERROR (the decompressing stream's ``KafkaException``)."""
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(client_batch(values(3), timestamps=[T0, T0 + 1, T0 + 2], codec=1), 0)
    log.close()
    path = tmp_path / "t-0" / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    data[70:80] = b"\xff" * 10  # inside the gzip payload, the CRC made to match
    path.write_bytes(fix_crc(bytes(data)))
    log = open_log(tmp_path / "t-0")
    with pytest.raises(KafkaApiError) as failed:
        log.fetch_offset_by_timestamp(T0 + 1)
    assert failed.value.code == ErrorCode.UNKNOWN_SERVER_ERROR


# --------------------------------------------------------------------------- truncation


def test_truncate_to_cuts_whole_batches_and_later_segments(tmp_path: Path) -> None:
    """A follower's truncation removes the segments above the target, cuts the one holding
    it at a batch boundary, moves the log end and the recovery point down, and later
    appends continue at the target."""
    directory = tmp_path / "t-0"
    log = build(directory, segment_bytes=1500)
    log.flush()
    bases = [s.base_offset for s in log.segments]
    target = bases[1] + 3
    assert log.truncate_to(target)
    assert [s.base_offset for s in log.segments] == bases[:2]
    for base in bases[2:]:
        assert not (directory / f"{base:020d}.log").exists()
    assert (log.log_end_offset, log.recovery_point) == (target, target)
    info = log.append_as_leader(client_batch([b"after"]), leader_epoch=1)
    assert info.first_offset == target
    last = decode_batches(log.read(target, 100).records)
    assert last[0].offsets == [target]
    assert log.leader_epoch_cache.entries == ((0, 0), (1, target))


def test_truncate_to_at_the_log_end_only_truncates_the_epoch_cache(tmp_path: Path) -> None:
    """Truncating at or past the log end cuts nothing but drops a cached epoch that starts
    at the log end (an epoch a leader assigned and never wrote in)."""
    log = build(tmp_path / "t-0", batches=2)
    log.maybe_assign_epoch_start_offset(3, log.log_end_offset)
    before = log.leader_epoch_cache.entries
    assert not log.truncate_to(6)
    after = log.leader_epoch_cache.entries
    assert (before, after) == (((0, 0), (3, 6)), ((0, 0),))
    assert log.log_end_offset == 6


def test_truncate_fully_and_start_at_leaves_one_empty_segment(tmp_path: Path) -> None:
    """Full truncation deletes every segment, starts an empty one at the new offset,
    empties the epoch cache and moves the log start there."""
    directory = tmp_path / "t-0"
    log = build(directory, segment_bytes=1500)
    log.truncate_fully_and_start_at(100)
    assert [s.base_offset for s in log.segments] == [100]
    assert (log.log_start_offset, log.log_end_offset) == (100, 100)
    assert log.leader_epoch_cache.entries == ()
    assert [n for n in files_of(directory) if n.endswith(".log")] == ["00000000000000000100.log"]
    assert log.append_as_leader(client_batch([b"x"]), leader_epoch=2).first_offset == 100


def test_advancing_the_log_start_deletes_the_segments_below_it(tmp_path: Path) -> None:
    """Advancing the log start deletes the segments wholly below it (never the active one)
    and rebases the epoch cache; above the high watermark it is refused and changes
    nothing."""
    directory = tmp_path / "t-0"
    log = build(directory, segment_bytes=1500)
    bases = [s.base_offset for s in log.segments]
    log.maybe_assign_epoch_start_offset(2, log.log_end_offset)
    with pytest.raises(KafkaApiError) as refused:
        log.maybe_increment_log_start_offset(bases[2], high_watermark=bases[2] - 1)
    assert refused.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert [s.base_offset for s in log.segments] == bases
    assert log.maybe_increment_log_start_offset(bases[2] + 1)
    assert [s.base_offset for s in log.segments] == bases[2:]
    assert not (directory / f"{bases[0]:020d}.log").exists()
    assert log.leader_epoch_cache.entries == ((0, bases[2] + 1), (2, 36))
    assert not log.maybe_increment_log_start_offset(bases[2])


# ------------------------------------------------------------------------------- errors


def append_fails(log: Log, records: bytes, code: ErrorCode) -> None:
    """The append raises ``code`` and leaves the log and its files as they were."""
    before = {n: (log.directory / n).read_bytes() for n in files_of(log.directory)}
    end = log.log_end_offset
    with pytest.raises(KafkaApiError) as raised:
        log.append_as_leader(records, leader_epoch=0)
    assert raised.value.code == code, raised.value
    assert log.log_end_offset == end
    assert {n: (log.directory / n).read_bytes() for n in files_of(log.directory)} == before


@pytest.fixture
def log(tmp_path: Path) -> Log:
    log = open_log(tmp_path / "t-0", max_message_bytes=2000, segment_bytes=5000)
    log.append_as_leader(client_batch(values(2)), leader_epoch=0)
    return log


def test_a_flipped_bit_is_corrupt_message(log: Log) -> None:
    """A batch whose CRC does not match its bytes is CORRUPT_MESSAGE."""
    batch = bytearray(client_batch(values(2)))
    batch[-1] ^= 1
    append_fails(log, bytes(batch), ErrorCode.CORRUPT_MESSAGE)


def test_bad_sizes_are_corrupt_message(log: Log) -> None:
    """A batch length below the header, or records that end mid-batch, are
    CORRUPT_MESSAGE."""
    batch = client_batch(values(2))
    append_fails(log, set_field(batch, "batch_length", 10), ErrorCode.CORRUPT_MESSAGE)
    append_fails(log, batch[:-1], ErrorCode.CORRUPT_MESSAGE)
    append_fails(log, batch + batch[:30], ErrorCode.CORRUPT_MESSAGE)


def test_old_magic_is_unsupported_and_unknown_magic_is_corrupt(log: Log) -> None:
    """Message format v0/v1 is UNSUPPORTED_FOR_MESSAGE_FORMAT (kemu keeps v2 only); a magic
    byte no format has is CORRUPT_MESSAGE."""
    batch = client_batch(values(1))
    append_fails(log, set_field(batch, "magic", 1), ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT)
    append_fails(log, set_field(batch, "magic", 3), ErrorCode.CORRUPT_MESSAGE)


def test_sizes_over_the_limits(log: Log) -> None:
    """A batch over max.message.bytes is MESSAGE_TOO_LARGE; an append over segment.bytes is
    RECORD_LIST_TOO_LARGE."""
    append_fails(log, client_batch([b"x" * 2100]), ErrorCode.MESSAGE_TOO_LARGE)
    batch = client_batch([b"x" * 1800])
    append_fails(log, batch * 3, ErrorCode.RECORD_LIST_TOO_LARGE)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("base_offset", 5),
        ("last_offset_delta", -1),
        ("records_count", 0),
        ("records_count", 3),
        ("attributes", 0x20),  # a control batch
        ("base_sequence", -1),  # with a producer id
    ],
)
def test_batch_header_contradictions_are_invalid_record(log: Log, field: str, value: int) -> None:
    """Header fields a client may not send (a base offset, an offset range that does not
    match the count, a control batch, a producer id without a sequence) are
    INVALID_RECORD, even with a correct CRC."""
    batch = client_batch(values(2), producer_id=7, producer_epoch=0, base_sequence=0)
    append_fails(log, fix_crc(set_field(batch, field, value)), ErrorCode.INVALID_RECORD)


def test_broken_records_in_a_valid_crc_are_invalid_record(log: Log) -> None:
    """An uncompressed batch whose records do not parse (a record length past the batch)
    is INVALID_RECORD though its CRC is right."""
    batch = bytearray(client_batch([b"abc"]))
    batch[61] = 0x7E  # the first record's length varint: 63, past the batch's end
    append_fails(log, fix_crc(bytes(batch)), ErrorCode.INVALID_RECORD)


def test_a_compacted_log_refuses_records_without_a_key(tmp_path: Path) -> None:
    """A log whose topic compacts (``cleanup.policy`` holding ``compact``) refuses a batch
    with a record without a key, INVALID_RECORD, and changes nothing; keyed records go in."""
    log = OPENED.keep(
        Log(tmp_path / "t-0", LogConfig(compact=True, delete=False), now_ms=Clock().now)
    )
    log.append_as_leader(client_batch(values(2)), leader_epoch=0)
    append_fails(log, client_batch(values(2), key=None), ErrorCode.INVALID_RECORD)
    assert log.log_end_offset == 2


def test_cleanup_policy_names_which_of_delete_and_compact_apply() -> None:
    """``cleanup.policy`` as a topic sets it (a list, spaces allowed); a topic without one
    keeps the broker's defaults."""
    default = LogConfig()
    both = log_config({"cleanup.policy": "compact, delete"}, default)
    assert (both.compact, both.delete) == (True, True)
    only = log_config({"cleanup.policy": "compact"}, default)
    assert (only.compact, only.delete) == (True, False)
    unset = log_config({}, LogConfig(compact=True, delete=False))
    assert (unset.compact, unset.delete) == (True, False)


def test_message_timestamp_difference_max_ms_bounds_a_leaders_records(tmp_path: Path) -> None:
    """``message.timestamp.difference.max.ms`` as a topic sets it (else the broker's
    default, Long.MaxValue: unbounded): a record further from the log's clock is
    INVALID_TIMESTAMP under CreateTime, named with the log's partition, and changes
    nothing; within the bound, or once the config is the default again, it goes in."""
    now = 1_700_000_000_000
    bounded = log_config({"message.timestamp.difference.max.ms": "1000"}, LogConfig())
    assert bounded.timestamp_difference_max_ms == 1000
    assert log_config({}, bounded).timestamp_difference_max_ms == 1000
    log = OPENED.keep(Log(tmp_path / "t-0", bounded, now_ms=lambda: now))
    log.append_as_leader(client_batch([b"a"], timestamps=[now + 1000]), leader_epoch=0)
    old = client_batch([b"b", b"c"], timestamps=[now, now - 1001])
    append_fails(log, old, ErrorCode.INVALID_TIMESTAMP)
    with pytest.raises(RecordValidationError) as raised:
        log.append_as_leader(old, leader_epoch=0)
    assert raised.value.record_errors == (
        (
            1,
            f"Timestamp {now - 1001} of message with offset 1 is out of range. "
            f"The timestamp should be within [{now - 1000}, {now + 1000}]",
        ),
    )
    log.config = log_config({}, LogConfig())
    log.append_as_leader(old, leader_epoch=0)
    assert log.log_end_offset == 3


def test_a_compacted_log_names_the_partition_of_a_record_without_a_key(tmp_path: Path) -> None:
    """The key refusal carries Kafka's message, with the partition as ``topic-N``."""
    log = OPENED.keep(Log(tmp_path / "t-3", LogConfig(compact=True), now_ms=Clock().now))
    with pytest.raises(RecordValidationError) as raised:
        log.append_as_leader(client_batch([b"a"], key=None), leader_epoch=0)
    assert raised.value.record_errors == (
        (0, "Compacted topic cannot accept message without key in topic partition t-3."),
    )


def test_an_unknown_codec_and_an_empty_append(log: Log) -> None:
    """Codec id 5 is answered as Kafka does (UNKNOWN_SERVER_ERROR, from CompressionType's
    IllegalArgumentException); an append with no batch is INVALID_RECORD."""
    batch = fix_crc(set_field(client_batch(values(1)), "attributes", 5))
    append_fails(log, batch, ErrorCode.UNKNOWN_SERVER_ERROR)
    append_fails(log, b"", ErrorCode.INVALID_RECORD)


# --------------------------------------------------------------------------- timestamps


def test_log_append_time_stamps_the_batch_and_keeps_its_crc_valid(tmp_path: Path) -> None:
    """Under LogAppendTime the batch's max timestamp becomes the broker's time and its
    timestamp-type bit is set; the CRC is recomputed, so kio still reads it."""
    clock = Clock(T0 + 5000)
    log = OPENED.keep(
        Log(
            tmp_path / "t-0",
            LogConfig(timestamp_type=TimestampType.LOG_APPEND_TIME),
            now_ms=clock.now,
        )
    )
    info = log.append_as_leader(client_batch(values(2)), leader_epoch=0)
    assert (info.log_append_time, info.max_timestamp, info.offset_of_max_timestamp) == (
        T0 + 5000,
        T0 + 5000,
        1,
    )
    stored = log.read(0, 10**6).records
    assert get_field(stored, "max_timestamp") == T0 + 5000
    assert get_field(stored, "attributes") & 0x08
    decode_batches(stored)  # the CRC is checked by kio


def test_a_wrong_max_timestamp_from_a_client_is_rewritten(tmp_path: Path) -> None:
    """Under CreateTime an uncompressed batch's max timestamp becomes its largest record
    timestamp (Kafka's setMaxTimestamp), with a new CRC."""
    log = open_log(tmp_path / "t-0")
    batch = fix_crc(set_field(client_batch(values(2), timestamps=[T0, T0 + 7]), "max_timestamp", 1))
    info = log.append_as_leader(batch, leader_epoch=0)
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (T0 + 7, 1)
    stored = log.read(0, 10**6).records
    assert get_field(stored, "max_timestamp") == T0 + 7
    decode_batches(stored)


# ------------------------------------------------------------------ compressed batches


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_batches_are_stored_as_sent(tmp_path: Path, codec: int) -> None:
    """A gzip, snappy, lz4 or zstd batch is stored byte for byte but its base offset and
    leader epoch, and it takes as many offsets as its records count says."""
    gzip = client_batch(values(4), codec=1)
    batch = gzip if codec == 1 else recompressed(gzip, codec)
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(client_batch([b"first"]), leader_epoch=0)
    info = log.append_as_leader(batch, leader_epoch=2)
    assert (info.first_offset, info.last_offset, info.offset_of_max_timestamp) == (1, 4, 4)
    stored = log.read(1, 10**6).records
    assert stored == set_field(set_field(batch, "base_offset", 1), "partition_leader_epoch", 2)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
@pytest.mark.parametrize("count", [3, 40])
def test_a_compressed_batch_takes_its_records_max_timestamp(
    tmp_path: Path, codec: int, count: int
) -> None:
    """Its max timestamp is its records' largest, whatever the batch says
    (``validateMessagesAndAssignOffsetsCompressed``: ``setMaxTimestamp`` in place, the CRC
    computed again), at its last offset; a small batch walked, a large one scanned."""
    stamps = [T0 + 10 * i for i in range(count)]
    stamps[1] = T0 + 99_999  # not the last record's
    gzip = client_batch(values(count, size=20), timestamps=stamps, codec=1)
    sent = fix_crc(set_field(gzip, "max_timestamp", T0 - 5))
    batch = (
        sent
        if codec == 1
        else fix_crc(set_field(recompressed(gzip, codec), "max_timestamp", T0 - 5))
    )
    log = open_log(tmp_path / "t-0")
    info = log.append_as_leader(batch, leader_epoch=0)
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (T0 + 99_999, count - 1)
    stored = log.read(0, 10**6).records
    assert get_field(stored, "max_timestamp") == T0 + 99_999
    assert stored[61:] == batch[61:]  # the compressed records as sent
    assert stored == fix_crc(
        set_field(set_field(batch, "max_timestamp", T0 + 99_999), "partition_leader_epoch", 0)
    )


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
@pytest.mark.parametrize("count", [3, 40])
def test_misnumbered_compressed_records_are_rebuilt(tmp_path: Path, codec: int, count: int) -> None:
    """Offset deltas other than 0..n-1 inside a compressed batch (here one record's delta
    repeated) make the leader rebuild it as Kafka's ``buildRecordsAndAssignOffsets``: the
    same records, keys and values at consecutive offsets, the codec kept, the max
    timestamp the records' largest, and the next append follows it; a small batch
    walked, a large one scanned."""
    deltas = list(range(count))
    deltas[1] = 0
    sent_values = values(count, size=20)
    stamps = [T0 + 10 * d for d in deltas]
    gzip = client_batch(sent_values, timestamps=stamps, codec=1, offsets=deltas)
    batch = gzip if codec == 1 else recompressed(gzip, codec)
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(client_batch([b"first"]), leader_epoch=0)
    info = log.append_as_leader(batch, leader_epoch=3)
    assert (info.first_offset, info.last_offset) == (1, count)
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (T0 + 10 * (count - 1), count)
    stored = log.read(1, 10**6).records
    header = check_stored_batch(stored)
    assert (header.base_offset, header.partition_leader_epoch, header.compression) == (1, 3, codec)
    assert (header.records_count, header.last_offset_delta) == (count, count - 1)
    assert header.max_timestamp == T0 + 10 * (count - 1)
    read = decode_records(decompress(codec, stored[61:]), header)
    assert [(r.offset, r.value, r.timestamp_ms) for r in read] == [
        (1 + i, v, T0 + 10 * d) for i, (d, v) in enumerate(zip(deltas, sent_values, strict=True))
    ]
    assert log.append_as_leader(client_batch([b"next"]), leader_epoch=3).first_offset == count + 1


def _gzip_records(batch: bytes) -> bytes:
    return zlib.decompress(batch[61:], 16 + zlib.MAX_WBITS)


def _with_payload(batch: bytes, payload: bytes) -> bytes:
    return fix_crc(set_field(batch[:61] + payload, "batch_length", 49 + len(payload)))


def test_compressed_records_that_do_not_read_are_refused(tmp_path: Path) -> None:
    """Kafka reads every record of a compressed batch through the codec's stream: bytes
    that are not gzip (CRC right) are UNKNOWN_SERVER_ERROR, its ``KafkaException``; a
    gzip stream cut inside the records INVALID_RECORD ("premature EOF"), one cut after
    them UNKNOWN_SERVER_ERROR (the check for bytes left meets the cut); records that do
    not fill the stream INVALID_RECORD; nothing is appended."""
    gzip = client_batch(values(4), codec=1)
    records = _gzip_records(gzip)
    log = open_log(tmp_path / "t-0")
    not_gzip = bytearray(gzip)
    not_gzip[61] ^= 0xFF  # the gzip magic
    cut_inside = _with_payload(gzip, _deflated(records)[:-30])
    cut_after = _with_payload(gzip, _deflated(records, flush=zlib.Z_SYNC_FLUSH))
    left_over = _with_payload(gzip, _deflated(records + b"\x02\x00"))
    cases = [
        (fix_crc(bytes(not_gzip)), ErrorCode.UNKNOWN_SERVER_ERROR),
        (cut_inside, ErrorCode.INVALID_RECORD),
        (cut_after, ErrorCode.UNKNOWN_SERVER_ERROR),
        (left_over, ErrorCode.INVALID_RECORD),
    ]
    for batch, code in cases:
        with pytest.raises(KafkaApiError) as refused:
            log.append_as_leader(batch, leader_epoch=0)
        assert refused.value.code is code
    assert log.log_end_offset == 0


def _deflated(data: bytes, flush: int = zlib.Z_FINISH) -> bytes:
    """``data`` as a gzip stream; with ``Z_SYNC_FLUSH`` every byte of it is there but the
    stream does not end (no final block, no trailer)."""
    compressor = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush(flush)


# ---------------------------------------------------------------------------- followers


def test_a_follower_copy_is_byte_identical_to_the_leader(tmp_path: Path) -> None:
    """Replicating by reading the leader and appending as a follower gives the same .log
    bytes, the same offsets and the same epoch cache."""
    leader = open_log(tmp_path / "leader" / "t-0", segment_bytes=2000)
    follower = open_log(tmp_path / "follower" / "t-0", segment_bytes=2000)
    for epoch in (0, 0, 1, 1, 1, 3, 3, 3):
        leader.append_as_leader(client_batch(values(3)), leader_epoch=epoch)
        leader.append_as_leader(client_batch(values(2), codec=1), leader_epoch=epoch)
        while follower.log_end_offset < leader.log_end_offset:
            fetched = leader.read(follower.log_end_offset, 700).records
            assert follower.append_as_follower(fetched) is not None
    assert follower.leader_epoch_cache.entries == leader.leader_epoch_cache.entries
    assert [s.base_offset for s in follower.segments] == [s.base_offset for s in leader.segments]
    for mine, theirs in zip(follower.segments, leader.segments, strict=True):
        assert mine.log_path.read_bytes() == theirs.log_path.read_bytes()


def test_a_follower_refuses_offsets_that_go_back(tmp_path: Path) -> None:
    """Fetched batches below the log end, or out of order, are refused (Kafka answers them
    as unknown errors) and change nothing; a torn tail is left out."""
    leader = build(tmp_path / "leader", batches=3)
    follower = open_log(tmp_path / "follower")
    data = leader.read(0, 10**6).records
    one = len(client_batch(values(3, tag="b0-")))
    info = follower.append_as_follower(data[: one * 2 + 10])
    assert info is not None
    assert (info.first_offset, info.last_offset) == (0, 5)
    for bad in (data[:one], data[one * 2 :] + data[one : one * 2]):
        with pytest.raises(KafkaApiError) as raised:
            follower.append_as_follower(bad)
        assert raised.value.code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert follower.log_end_offset == 6
    assert follower.append_as_follower(data[one * 2 : one * 2 + 30]) is None


# ----------------------------------------------------------------------- clean shutdown


def test_the_clean_shutdown_marker(tmp_path: Path) -> None:
    """The log dir's marker is Kafka's file name, created and removed by the helpers."""
    files = LogFiles()
    assert not had_clean_shutdown(files, tmp_path)
    mark_clean_shutdown(files, tmp_path, present=True)
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).read_bytes() == b""
    assert had_clean_shutdown(files, tmp_path)
    mark_clean_shutdown(files, tmp_path, present=False)
    assert not had_clean_shutdown(files, tmp_path)


def test_a_follower_append_assigns_each_batch_epoch_as_kafka_does(tmp_path: Path) -> None:
    """Every appended batch's epoch goes through the cache's assign: a newer one is added,
    an older one replaces the entries it contradicts; a batch without an epoch (-1) is
    refused before anything is written."""
    follower = open_log(tmp_path / "follower")
    batch = client_batch([b"a"])

    def stamped(offset: int, epoch: int) -> bytes:
        return fix_crc(
            set_field(set_field(batch, "base_offset", offset), "partition_leader_epoch", epoch)
        )

    follower.append_as_follower(stamped(0, 0) + stamped(1, 5))
    cached = follower.leader_epoch_cache.entries
    follower.append_as_follower(stamped(2, 3))
    assert (cached, follower.leader_epoch_cache.entries) == (((0, 0), (5, 1)), ((0, 0), (3, 2)))
    with pytest.raises(KafkaApiError) as raised:
        follower.append_as_follower(stamped(3, -1))
    assert raised.value.code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert follower.log_end_offset == 3


def test_a_log_made_by_the_log_manager_opens_as_a_partition_log(tmp_path: Path) -> None:
    """The directory the log manager creates today (empty segment files, an empty epoch
    checkpoint) opens as an empty log at offset 0, and appends do not roll it (its empty
    index files are resized to segment.index.bytes)."""
    directory = tmp_path / "t-0"
    directory.mkdir()
    for name, data in manager_new_log_files():
        (directory / name).write_bytes(data)
    log = OPENED.keep(Log(directory, LogConfig(), now_ms=Clock().now, had_clean_shutdown=True))
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    for offset in range(3):
        assert log.append_as_leader(client_batch([b"x"]), leader_epoch=0).first_offset == offset
    assert len(log.segments) == 1


def manager_new_log_files() -> list[tuple[str, bytes]]:
    """What ``LogManager`` writes for a new log (its SEGMENT_FILES, then the checkpoint)."""
    return [
        *((name, b"") for name in SEGMENT_FILES),
        (LEADER_EPOCH_CHECKPOINT, b""),
    ]


# ------------------------------------------------------------------ ListOffsets v0


def test_offsets_before_a_time_are_segment_starts_by_last_write(tmp_path: Path) -> None:
    """``Log.legacyFetchOffsetsBefore``: each segment's first offset with its last write
    time, and the log end with the time now while the active segment holds data; latest
    (-1) and earliest (-2) take the last and first pair; a timestamp the last pair written
    at or before it; then ``max_num_offsets`` pairs backwards, largest offset first."""
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock, segment_bytes=500)
    assert log.legacy_offsets_before(-1, 5) == [0]  # one empty segment: its base alone
    written: list[int] = []
    while len(log.segments) < 3:
        clock.ms += 1000
        log.append_as_leader(client_batch(values(2, size=80)), leader_epoch=0)
        written.append(clock.ms)
    bases = [s.base_offset for s in log.segments]
    modified = [s.last_modified_ms for s in log.segments]
    assert modified[-1] == written[-1]
    assert modified[0] < modified[1] < modified[2]
    clock.ms += 1000
    end = log.log_end_offset
    assert log.legacy_offsets_before(-1, 10) == [end, *reversed(bases)]
    assert log.legacy_offsets_before(-1, 1) == [end]
    assert log.legacy_offsets_before(-2, 10) == [bases[0]]
    assert log.legacy_offsets_before(modified[1], 10) == [bases[1], bases[0]]
    assert log.legacy_offsets_before(modified[1] - 1, 10) == [bases[0]]
    assert log.legacy_offsets_before(modified[0] - 1, 10) == []
    assert log.legacy_offsets_before(clock.ms, 2) == [end, bases[2]]
    assert log.legacy_offsets_before(-1, 0) == []
    with pytest.raises(ValueError, match="negative"):
        log.legacy_offsets_before(-1, -1)
    log.maybe_increment_log_start_offset(bases[1] + 1)
    assert log.legacy_offsets_before(-2, 10) == [bases[1] + 1]
