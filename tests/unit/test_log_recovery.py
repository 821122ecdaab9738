"""Opening a partition log after a crash: recovery cuts a torn or corrupt tail to the whole
batches before it, rebuilds missing or broken indexes (identically), and is skipped
after a clean shutdown. Real files in a temporary directory; the crash is simulated by
cutting, flipping or deleting bytes of a closed log's files.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from actors.log.partition_log import Log, LogConfig
from tests.support.open_logs import OPENED, close_opened_logs  # noqa: F401 - autouse
from tests.support.record_batches import client_batch, decode_batches

T0 = 1_600_000_000_000


def now() -> int:
    return T0


def open_log(directory: Path, **kwargs: object) -> Log:
    config = kwargs.pop("config", LogConfig(index_interval_bytes=200))
    return OPENED.keep(Log(directory, config, now_ms=now, **kwargs))  # type: ignore[arg-type]


def write_log(directory: Path, batches: int, **config: int) -> list[int]:
    """A closed log of ``batches`` batches of 2 records (timestamps growing); the byte
    position where each batch starts, and the .log's size last."""
    log = OPENED.keep(Log(directory, LogConfig(**config), now_ms=now))  # type: ignore[arg-type]
    positions = []
    for i in range(batches):
        positions.append(log.active_segment.size)
        stamps = [T0 + 2 * i, T0 + 2 * i + 1]
        log.append_as_leader(client_batch([b"r%d" % i, b"s%d" % i], timestamps=stamps), 1)
    positions.append(log.active_segment.size)
    log.close()
    return positions


SEGMENT = "00000000000000000000"


def test_a_tear_anywhere_in_the_last_batch_leaves_the_batches_before_it(tmp_path: Path) -> None:
    """Cut at every byte of the last batch, the log reopens with exactly the whole batches
    before it, its indexes rebuilt to match, and appends go on at the next offset."""
    original = tmp_path / "original"
    positions = write_log(original, batches=6, index_interval_bytes=100)
    last_start, end = positions[-2], positions[-1]
    for cut in range(last_start, end):
        directory = tmp_path / f"cut-{cut}"
        shutil.copytree(original, directory)
        with open(directory / f"{SEGMENT}.log", "r+b") as f:
            f.truncate(cut)
        log = open_log(directory, config=LogConfig(index_interval_bytes=100))
        assert log.recovered_segments == [0]
        assert log.log_end_offset == 10, cut
        assert (directory / f"{SEGMENT}.log").stat().st_size == last_start
        kept = decode_batches(log.read(0, 10**6).records)
        assert [b.offsets for b in kept] == [[2 * i, 2 * i + 1] for i in range(5)]
        info = log.append_as_leader(client_batch([b"again"]), leader_epoch=2)
        assert info.first_offset == 10
        assert log.leader_epoch_cache.entries == ((1, 0), (2, 10))
        log.close()
        shutil.rmtree(directory)


@pytest.mark.parametrize("region", ["length", "magic_crc", "body"])
def test_a_flipped_byte_in_the_last_batch_cuts_it(tmp_path: Path, region: str) -> None:
    """A flipped byte in the last batch's length, magic, CRC, attributes or records makes
    recovery cut that batch (and only it)."""
    original = tmp_path / "original"
    positions = write_log(original, batches=4)
    last_start, end = positions[-2], positions[-1]
    spans = {"length": (8, 12), "magic_crc": (16, 21), "body": (21, end - last_start)}
    low, high = spans[region]
    for at in range(last_start + low, last_start + high):
        directory = tmp_path / f"flip-{at}"
        shutil.copytree(original, directory)
        with open(directory / f"{SEGMENT}.log", "r+b") as f:
            f.seek(at)
            byte = f.read(1)[0]
            f.seek(at)
            f.write(bytes([byte ^ 0x10]))
        log = open_log(directory)
        assert log.log_end_offset == 6, at
        assert (directory / f"{SEGMENT}.log").stat().st_size == last_start
        log.close()
        shutil.rmtree(directory)


def test_a_flipped_leader_epoch_is_not_detected(tmp_path: Path) -> None:
    """The partition leader epoch is outside the CRC (so a leader can set it): a flipped
    epoch byte survives recovery, as in Kafka."""
    directory = tmp_path / "t-0"
    positions = write_log(directory, batches=3)
    with open(directory / f"{SEGMENT}.log", "r+b") as f:
        f.seek(positions[-2] + 15)
        f.write(b"\x07")
    log = open_log(directory)
    assert log.log_end_offset == 6
    assert decode_batches(log.read(4, 100).records)[0].batch.partition_leader_epoch == 7
    assert log.leader_epoch_cache.entries == ((1, 0), (7, 4))


def test_a_cut_segment_drops_the_later_segments(tmp_path: Path) -> None:
    """Corruption in a segment that is not the last cuts it and deletes every later
    segment (Log.recoverLog)."""
    directory = tmp_path / "t-0"
    log = OPENED.keep(Log(directory, LogConfig(segment_bytes=400), now_ms=now))
    for i in range(20):
        log.append_as_leader(client_batch([b"x%d" % i] * 2), leader_epoch=0)
    bases = [s.base_offset for s in log.segments]
    log.close()
    assert len(bases) > 3
    second = directory / f"{bases[1]:020d}.log"
    data = bytearray(second.read_bytes())
    data[-1] ^= 0xFF
    second.write_bytes(bytes(data))
    reopened = open_log(directory, config=LogConfig(segment_bytes=400))
    assert [s.base_offset for s in reopened.segments] == bases[:2]
    assert not (directory / f"{bases[2]:020d}.log").exists()
    assert reopened.log_end_offset < bases[2]


def test_recovery_starts_at_the_segment_of_the_recovery_point(tmp_path: Path) -> None:
    """Only segments from the one holding the recovery point are recovered; after a clean
    shutdown none is."""
    directory = tmp_path / "t-0"
    log = OPENED.keep(Log(directory, LogConfig(segment_bytes=400), now_ms=now))
    for i in range(12):
        log.append_as_leader(client_batch([b"x%d" % i] * 2), leader_epoch=0)
    bases = [s.base_offset for s in log.segments]
    log.close()
    point = bases[2] + 1
    reopened = open_log(directory, recovery_point=point)
    assert reopened.recovered_segments == bases[2:]
    reopened.close()
    clean = open_log(directory, recovery_point=0, had_clean_shutdown=True)
    assert clean.recovered_segments == []
    assert clean.log_end_offset == 24


def test_a_deleted_index_is_rebuilt_identically(tmp_path: Path) -> None:
    """A rolled segment whose .index and .timeindex were deleted gets them back, byte for
    byte, even when no recovery is due. (Identical when each append is one batch whose
    last record has its largest timestamp: a leader indexes the offset of the record with
    the largest timestamp, recovery the batch's last offset, as in Kafka.)"""
    directory = tmp_path / "t-0"
    log = OPENED.keep(
        Log(directory, LogConfig(segment_bytes=2000, index_interval_bytes=150), now_ms=now)
    )
    for i in range(30):
        stamps = [T0 + 2 * i, T0 + 2 * i + 1]
        log.append_as_leader(client_batch([b"x%d" % i] * 2, timestamps=stamps), 0)
    log.close()
    names = [f"{SEGMENT}.index", f"{SEGMENT}.timeindex"]
    before = {n: (directory / n).read_bytes() for n in names}
    assert all(len(b) > 24 for b in before.values())
    for name in names:
        (directory / name).unlink()
    config = LogConfig(segment_bytes=2000, index_interval_bytes=150)
    reopened = open_log(directory, config=config, had_clean_shutdown=True)
    assert reopened.recovered_segments == [0]
    reopened.close()
    assert {n: (directory / n).read_bytes() for n in names} == before


def test_a_corrupt_index_is_rebuilt(tmp_path: Path) -> None:
    """An index with a partial entry, entries out of order, or garbage (negative
    positions), is rebuilt from the .log; lookups then find every offset again."""
    directory = tmp_path / "t-0"
    write_log(directory, batches=12, index_interval_bytes=100)
    index = directory / f"{SEGMENT}.index"
    good = index.read_bytes()
    for broken in (good + b"\x00\x01", good[8:16] + good[:8] + good[16:], b"\xff" * 16):
        index.write_bytes(broken)
        config = LogConfig(index_interval_bytes=100)
        log = open_log(directory, config=config, had_clean_shutdown=True)
        assert log.recovered_segments == [0]
        for offset in range(24):
            assert offset in decode_batches(log.read(offset, 1).records)[0].offsets
        log.close()
        assert index.read_bytes() == good


def test_a_crash_leaves_preallocated_indexes_that_still_load(tmp_path: Path) -> None:
    """A log copied while open (indexes still preallocated, never trimmed) opens without
    its indexes' zero tail taken for entries, and appends go on at its end."""
    directory = tmp_path / "t-0"
    log = OPENED.keep(Log(directory, LogConfig(index_interval_bytes=100), now_ms=now))
    for i in range(8):
        log.append_as_leader(client_batch([b"x%d" % i]), leader_epoch=0)
    crashed = tmp_path / "crashed"
    shutil.copytree(directory, crashed)
    log.close()
    assert (crashed / f"{SEGMENT}.index").stat().st_size == 10 * 1024 * 1024
    reopened = open_log(crashed, recovery_point=8, had_clean_shutdown=True)
    assert reopened.log_end_offset == 8
    assert reopened.active_segment.offset_index.entries == log.active_segment.offset_index.entries
    assert reopened.append_as_leader(client_batch([b"y"]), leader_epoch=0).first_offset == 8


def test_recovery_rebuilds_the_epoch_cache_from_the_batches(tmp_path: Path) -> None:
    """With its checkpoint lost, recovery assigns each newer epoch found in the batches at
    the base offset of its first batch."""
    directory = tmp_path / "t-0"
    log = OPENED.keep(Log(directory, LogConfig(), now_ms=now))
    for epoch in (0, 0, 2, 2, 5):
        log.append_as_leader(client_batch([b"a", b"b"]), leader_epoch=epoch)
    log.close()
    (directory / "leader-epoch-checkpoint").unlink()
    reopened = open_log(directory)
    assert reopened.leader_epoch_cache.entries == ((0, 0), (2, 4), (5, 8))
    assert (directory / "leader-epoch-checkpoint").read_bytes() == b"0\n3\n0 0\n2 4\n5 8\n"


def test_stale_files_are_removed_at_open(tmp_path: Path) -> None:
    """Leftover .deleted, .cleaned, index .swap and .tmp files, and an index without its
    .log, are deleted when the log is opened (an index .swap with the indexes of its base,
    rebuilt then from the .log; a .log.swap is a swap to complete, test_log_cleaner.py)."""
    directory = tmp_path / "t-0"
    write_log(directory, batches=2)
    leftovers = [
        "00000000000000000000.log.deleted",
        "00000000000000000005.log.cleaned",
        "00000000000000000000.index.swap",
        "leader-epoch-checkpoint.tmp",
        "00000000000000000042.index",
    ]
    for name in leftovers:
        (directory / name).write_bytes(b"junk")
    log = open_log(directory, had_clean_shutdown=True)
    assert log.log_end_offset == 4
    for name in leftovers:
        assert not (directory / name).exists()
