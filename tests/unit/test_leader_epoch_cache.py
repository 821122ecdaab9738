"""The leader epoch cache and its ``leader-epoch-checkpoint``: Kafka's assign,
truncation and OffsetForLeaderEpoch answers, the checkpoint's bytes, when it is written
(a failing disk proves a no-op writes nothing), and a malformed file refused.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from actors.log.channel import LogFiles
from actors.log.disk import DiskOp, FaultyDisk
from actors.log.leader_epoch import (
    LEADER_EPOCH_CHECKPOINT,
    CheckpointError,
    LeaderEpochFileCache,
)
from actors.log.partition_log import Log


class Cache:
    """A cache over a real file, a log end offset the test sets, and a disk that can be
    told to fail its writes."""

    def __init__(self, tmp_path: Path) -> None:
        self.disk = FaultyDisk()
        self.path = tmp_path / LEADER_EPOCH_CHECKPOINT
        self.log_end = 0
        self.cache = LeaderEpochFileCache(self.path, LogFiles(self.disk), lambda: self.log_end)

    def file(self) -> bytes:
        return self.path.read_bytes()

    def writes_fail(self) -> None:
        self.disk.fail(self.path.parent, [DiskOp.WRITE_FILE], err=errno.EIO)


def entries(c: Cache) -> tuple[tuple[int, int], ...]:
    return c.cache.entries


@pytest.fixture
def c(tmp_path: Path) -> Cache:
    return Cache(tmp_path)


def test_a_missing_checkpoint_is_created_empty(c: Cache) -> None:
    """A new cache is empty and its file exists, empty, as Kafka's CheckpointFile makes it."""
    assert entries(c) == ()
    assert c.file() == b""


def test_assign_appends_and_writes_the_whole_cache(c: Cache) -> None:
    """Each new epoch is appended and the file rewritten: version, count, then lines."""
    c.cache.assign(0, 0)
    c.cache.assign(3, 10)
    assert entries(c) == ((0, 0), (3, 10))
    assert c.file() == b"0\n2\n0 0\n3 10\n"
    assert not (c.path.parent / f"{LEADER_EPOCH_CHECKPOINT}.tmp").exists()


def test_assign_of_the_latest_epoch_at_a_later_offset_writes_nothing(c: Cache) -> None:
    """Re-assigning the latest epoch at the same or a later offset is a no-op: not even a
    write (the failing disk would raise)."""
    c.cache.assign(2, 5)
    c.writes_fail()
    c.cache.assign(2, 5)
    c.cache.assign(2, 9)
    assert entries(c) == ((2, 5),)


def test_assign_drops_the_entries_it_contradicts(c: Cache) -> None:
    """An entry with an older epoch, or an earlier offset, than the trailing ones replaces
    them (a new leader's epoch at its log end after a truncation)."""
    for epoch, offset in ((0, 0), (1, 10), (2, 20), (3, 30)):
        c.cache.assign(epoch, offset)
    c.cache.assign(4, 15)
    assert entries(c) == ((0, 0), (1, 10), (4, 15))
    c.cache.assign(1, 12)  # epoch 1 is not newer than 1 or 4: both go
    assert entries(c) == ((0, 0), (1, 12))
    c.cache.assign(1, 5)
    assert entries(c) == ((0, 0), (1, 5))
    with pytest.raises(ValueError, match="invalid"):
        c.cache.assign(-1, 0)


def test_end_offset_for_answers_as_offset_for_leader_epoch(c: Cache) -> None:
    """endOffsetFor: undefined or newer epochs and an empty cache give (-1, -1); the latest
    epoch the log end; an older one the next epoch's start, with the floor epoch, or the
    requested one itself below the first."""
    assert c.cache.end_offset_for(3) == (-1, -1)
    for epoch, offset in ((2, 0), (4, 10), (7, 25)):
        c.cache.assign(epoch, offset)
    c.log_end = 40
    assert c.cache.end_offset_for(-1) == (-1, -1)
    assert c.cache.end_offset_for(7) == (7, 40)
    assert c.cache.end_offset_for(8) == (-1, -1)
    assert c.cache.end_offset_for(1) == (1, 0)
    assert c.cache.end_offset_for(2) == (2, 10)
    assert c.cache.end_offset_for(5) == (4, 25)
    assert c.cache.end_offset_for(6) == (4, 25)


def test_truncate_from_end_and_from_start(c: Cache) -> None:
    """truncateFromEnd drops entries starting at or after the offset; truncateFromStart
    drops those at or before it, keeping the last one rebased to the offset."""
    for epoch, offset in ((1, 0), (2, 10), (3, 20), (5, 30)):
        c.cache.assign(epoch, offset)
    c.writes_fail()
    c.cache.truncate_from_end(31)  # nothing starts at 31 or later: no write
    c.disk.heal()
    c.cache.truncate_from_end(20)
    assert entries(c) == ((1, 0), (2, 10))
    c.cache.truncate_from_start(12)
    assert entries(c) == ((2, 12),)
    assert c.file() == b"0\n1\n2 12\n"
    c.cache.clear_and_flush()
    assert c.file() == b"0\n0\n"


def test_truncate_from_start_at_the_first_entry_s_start_writes_nothing(c: Cache) -> None:
    """truncateFromStart at the start the first entry already has changes nothing and
    writes nothing (every open of a log calls it: a log reopened in turn must not cost a
    checkpoint write each time)."""
    c.cache.assign(3, 10)
    c.writes_fail()
    c.cache.truncate_from_start(10)  # a write would raise: nothing was written
    c.cache.truncate_from_start(5)  # below the first entry: nothing to drop
    assert entries(c) == ((3, 10),)
    c.disk.heal()
    assert c.file() == b"0\n1\n3 10\n"


def test_a_failing_checkpoint_write_is_an_os_error(c: Cache) -> None:
    """A checkpoint that cannot be written raises OSError (what the log manager turns
    into an offline log directory), not something swallowed."""
    c.writes_fail()
    with pytest.raises(OSError, match="injected fault"):
        c.cache.assign(1, 0)


@pytest.mark.parametrize(
    "content",
    [b"1\n0\n", b"0\n2\n1 0\n", b"0\n1\n1\n", b"0\n1\nx 0\n", b"zero\n", b"0\n"],
)
def test_a_malformed_checkpoint_is_refused(tmp_path: Path, content: bytes) -> None:
    """A wrong version, a count that does not match, a malformed line: CheckpointError
    (an OSError, so the log directory goes offline as in Kafka), also from a Log."""
    directory = tmp_path / "t-0"
    directory.mkdir()
    (directory / LEADER_EPOCH_CHECKPOINT).write_bytes(content)
    with pytest.raises(CheckpointError):
        Log(directory, now_ms=lambda: 0)
    assert isinstance(CheckpointError("x"), OSError)
