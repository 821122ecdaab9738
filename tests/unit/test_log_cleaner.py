"""The log cleaner on real partition directories (``actors.log.cleaner``: Kafka's
``LogCleanerManager.grabFilthiestCompactedLog`` and ``Cleaner.clean``, with
``Log.replaceSegments`` and the ``.swap`` completion of ``Log.loadSegments``).

Each test writes client batches with repeated keys and tombstones into a compacted log,
one segment per append, cleans it, and reads every record back through ``Log.read``,
checking the batches (CRC included) and the offsets the records kept.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest

from actors.log import cleaner
from actors.log.batch_codec import RecordsError, decode_records
from actors.log.channel import LogFiles
from actors.log.cleaner import clean, cleaning, filthiest_log, log_to_clean
from actors.log.compression import decompress
from actors.log.disk import Disk
from actors.log.partition_log import Log, LogConfig
from actors.log.records import RECORD_BATCH_OVERHEAD, batch_headers, check_stored_batch
from protocol.errors import ErrorCode
from protocol.ids import TopicName
from protocol.log import (
    AdvanceLogStart,
    AppendRecords,
    AppendToLogs,
    CleanCompactedLogs,
    CleanupLogs,
    DeleteLog,
    DeleteLogs,
    HighWatermark,
    LogConfigOverrides,
    LogsAppended,
    LogsDeleted,
    LogsRead,
    LogStartsAdvanced,
    ReadFromLogs,
    ReadRecords,
    RecordHighWatermarks,
    TruncateLog,
)
from tests.support.log_manager import Harness, log_dirs, run_broker, sim
from tests.support.record_batches import client_batch

DAY_MS = 86_400_000


class Clock:
    def __init__(self) -> None:
        self.ms = 1_700_000_000_000

    def __call__(self) -> int:
        return self.ms


def compacted(**overrides: object) -> LogConfig:
    settings: dict[str, object] = {"compact": True, "delete": False, "segment_bytes": 4096}
    settings.update(overrides)
    return LogConfig(**settings)  # type: ignore[arg-type]


def open_log(directory: Path, clock: Clock, config: LogConfig, **kwargs: object) -> Log:
    return Log(directory, config, now_ms=clock, **kwargs)  # type: ignore[arg-type]


def batch_of(pairs: list[tuple[bytes, bytes | None]], codec: int = 0) -> bytes:
    """A client's batch of ``pairs`` (key, value; a null value is a tombstone)."""
    values = cast("list[bytes]", [v for _, v in pairs])
    return client_batch(values, keys=[k for k, _ in pairs], codec=codec)


def write(log: Log, pairs: list[tuple[bytes, bytes | None]], *, codec: int = 0) -> None:
    """One batch of ``pairs`` (key, value), then a roll: one segment per call."""
    log.append_as_leader(batch_of(pairs, codec), leader_epoch=0)
    log.roll()


def records(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record of the log, (offset, key, value), every batch's CRC checked."""
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).records
        if not data:
            break
        for header in batch_headers(data):
            batch = data[header.position : header.position + header.size]
            check_stored_batch(batch)
            payload = batch[RECORD_BATCH_OVERHEAD:]
            if header.compression:
                payload = decompress(header.compression, payload)
            decoded = decode_records(payload, header)
            assert len(decoded) == header.records_count
            out += [(r.offset, r.key, r.value) for r in decoded]
            offset = header.last_offset + 1
    return out


def latest(written: list[tuple[int, bytes, bytes | None]]) -> dict[bytes, tuple[int, bytes | None]]:
    last: dict[bytes, tuple[int, bytes | None]] = {}
    for offset, key, value in written:
        last[key] = (offset, value)
    return last


HISTORY: list[list[tuple[bytes, bytes | None]]] = [
    [(b"a", b"a0"), (b"b", b"b0"), (b"c", b"c0")],
    [(b"a", b"a1"), (b"d", b"d0")],
    [(b"b", None), (b"c", b"c1")],  # b deleted
    [(b"a", b"a2"), (b"e", b"e0")],
    [(b"f", b"f0")],  # the active segment's data, never cleaned
]


def fill(log: Log, *, codec: int = 0) -> list[tuple[int, bytes, bytes | None]]:
    written = []
    offset = log.log_end_offset
    for i, pairs in enumerate(HISTORY):
        if i < len(HISTORY) - 1:
            write(log, pairs, codec=codec)
        else:
            log.append_as_leader(batch_of(pairs, codec), leader_epoch=0)
        written += [(offset + j, k, v) for j, (k, v) in enumerate(pairs)]
        offset += len(pairs)
    return written


@pytest.mark.parametrize("codec", [0, 1], ids=["none", "gzip"])
def test_a_clean_keeps_each_keys_latest_record_at_its_offset(tmp_path: Path, codec: int) -> None:
    """Five segments, the last active: the dirty ratio is 1, the map covers offsets 0-8,
    every older record of a key goes (the first batch wholly), the tombstone stays (it
    is younger than ``delete.retention.ms``), the active segment is untouched; batches
    that lost records keep their base offset and last offset delta, with a new count and
    CRC."""
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock, compacted())
    written = fill(log, codec=codec)
    candidate = log_to_clean(log, None, clock())
    assert (candidate.first_dirty_offset, candidate.first_uncleanable_offset) == (0, 9)
    assert candidate.cleanable_ratio == 1.0
    assert filthiest_log([candidate]) is candidate
    result = clean(candidate)
    assert result.end_offset == 9
    assert (result.records_read, result.records_retained) == (9, 5)
    expected = sorted((o, k, v) for k, (o, v) in latest(written).items())
    assert records(log) == expected
    assert [o for o, _, _ in records(log)] == [4, 5, 6, 7, 8, 9]
    first = log.read(0, 1 << 20).records
    header = next(batch_headers(first))
    assert (header.base_offset, header.last_offset_delta, header.records_count) == (3, 1, 1)
    # one cleaned segment replaced the four: its files are Kafka's names, the old .deleted
    names = sorted(os.listdir(tmp_path / "t-0"))
    assert "00000000000000000000.log" in names
    assert "00000000000000000003.log.deleted" in names
    assert not [n for n in names if n.endswith((".cleaned", ".swap"))]
    assert [s.base_offset for s in log.segments] == [0, 9]
    # a restart reads the same
    log.close()
    again = open_log(tmp_path / "t-0", clock, compacted(), had_clean_shutdown=False)
    assert records(again) == expected


def test_tombstones_go_once_older_than_delete_retention_past_the_clean_point(
    tmp_path: Path,
) -> None:
    """A tombstone goes when its segment was last written more than
    ``delete.retention.ms`` before the last clean segment below the first dirty offset
    (``Cleaner.clean``'s delete horizon): kept by the first clean, and by the second,
    whose last clean segment is as old as the tombstone's; dropped by the third, once a
    segment written a day later is clean. Segments small enough not to be grouped."""
    clock = Clock()
    config = compacted(segment_bytes=150)
    log = open_log(tmp_path / "t-0", clock, config)
    fill(log)
    first = clean(log_to_clean(log, None, clock()))
    assert (5, b"b", None) in records(log)
    clock.ms += DAY_MS + 1
    write(log, [(b"g", b"g0")])  # the old active segment, now dirty, written a day later
    log.append_as_leader(client_batch([b"h0"], keys=[b"h"]), leader_epoch=0)
    second = log_to_clean(log, first.end_offset, clock())
    assert (second.first_dirty_offset, second.first_uncleanable_offset) == (9, 11)
    end = clean(second).end_offset
    assert (5, b"b", None) in records(log)
    write(log, [(b"i", b"i0")])
    log.append_as_leader(client_batch([b"j0"], keys=[b"j"]), leader_epoch=0)
    clean(log_to_clean(log, end, clock()))
    assert (5, b"b", None) not in records(log)
    assert [o for o, _, _ in records(log)] == [4, 6, 7, 8, 9, 10, 11, 12, 13]


def test_min_compaction_lag_and_the_dirty_ratio_hold_a_log_back(tmp_path: Path) -> None:
    """A segment holding a record younger than ``min.compaction.lag.ms`` is not
    cleanable, nor what follows it; a dirty ratio at or below
    ``min.cleanable.dirty.ratio`` is not chosen."""
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock, compacted(min_compaction_lag_ms=60_000))
    write(log, [(b"a", b"old")], codec=0)
    log.append_as_leader(
        client_batch([b"new"], keys=[b"a"], timestamps=[clock() + 10]), leader_epoch=0
    )
    log.roll()
    stamps = [s.max_timestamp_so_far for s in log.segments]
    assert stamps[1] == clock() + 10
    lagging = log_to_clean(log, None, clock())
    # client_batch's default timestamps are in 2020: the first segment is old enough
    assert lagging.first_uncleanable_offset == 1
    clock.ms += 120_000
    assert log_to_clean(log, None, clock()).first_uncleanable_offset == 2
    ratio_bound = open_log(tmp_path / "u-0", clock, compacted(min_cleanable_ratio=1.0))
    write(ratio_bound, [(b"a", b"x")])
    assert filthiest_log([log_to_clean(ratio_bound, None, clock())]) is None


def test_a_segment_older_than_max_compaction_lag_is_cleaned_below_the_ratio(
    tmp_path: Path,
) -> None:
    """``max.compaction.lag.ms``: a dirty segment whose first batch is older than the lag
    makes the log cleanable now, whatever its dirty ratio (``needCompactionNow``)."""
    clock = Clock()
    config = compacted(min_cleanable_ratio=1.0)
    log = open_log(tmp_path / "t-0", clock, config)
    fill(log)
    assert filthiest_log([log_to_clean(log, None, clock())]) is None  # ratio 1.0 is not > 1.0
    lagging = open_log(
        tmp_path / "u-0", clock, compacted(min_cleanable_ratio=1.0, max_compaction_lag_ms=DAY_MS)
    )
    fill(lagging)
    overdue = log_to_clean(lagging, None, clock())  # client_batch stamps records in 2020
    assert overdue.need_compaction_now
    assert filthiest_log([overdue]) is overdue
    clock.ms = 1_600_000_000_000 + DAY_MS // 2  # half a day after the records: not yet
    assert not log_to_clean(lagging, None, clock()).need_compaction_now


class CrashingDisk(Disk):
    """A disk whose ``crash_at``-th rename fails: the process dies there."""

    def __init__(self, crash_at: int) -> None:
        self.crash_at = crash_at
        self.renames = 0

    def rename(self, src: Path | str, dst: Path | str) -> None:
        self.renames += 1
        if self.renames == self.crash_at:
            raise OSError(5, "crashed here", str(src))
        super().rename(src, dst)


RENAMES = 3 + 4 * 3 + 3  # cleaned -> swap, the four old segments -> deleted, swap -> final


@pytest.mark.parametrize("crash_at", range(1, RENAMES + 1))
def test_a_crash_at_any_rename_of_the_swap_loses_nothing(tmp_path: Path, crash_at: int) -> None:
    """The process dies at each rename of ``replaceSegments`` in turn; the log reopened
    after the crash (unclean: recovery runs) holds every key's latest record at its
    offset and the active segment's, no ``.cleaned`` or ``.swap`` file is left, and once
    the ``.swap`` existed the swap was completed (the cleaned segment is the log's)."""
    clock = Clock()
    disk = CrashingDisk(crash_at)
    directory = tmp_path / "t-0"
    log = open_log(directory, clock, compacted(), files=LogFiles(disk))
    written = fill(log)
    before = records(log)
    with pytest.raises(OSError, match="crashed here"):
        clean(log_to_clean(log, None, clock()))
    log.close_handlers()  # killed: nothing more is written
    disk.crash_at = 0
    again = open_log(directory, clock, compacted(), files=LogFiles(disk), had_clean_shutdown=False)
    names = os.listdir(directory)
    assert not [n for n in names if n.endswith((".cleaned", ".swap"))]
    after = records(again)
    expected = sorted((o, k, v) for k, (o, v) in latest(written).items())
    assert set(expected) <= set(after)
    assert after == sorted(set(after))
    if crash_at > 1:  # the .log.swap was in place: the swap completes
        assert after == expected
    else:
        assert after == before
    assert again.log_end_offset == 10
    # and it cleans again to the same result
    clean(log_to_clean(again, None, clock()))
    assert records(again) == expected


# -- the log manager's cleaner (its timer on the virtual clock, the checkpoint file)

T = TopicName("changelog")
BACKOFF = 15.0  # log.cleaner.backoff.ms's default, in seconds


async def _append(b: Harness, batch: bytes) -> None:
    one = AppendRecords(topic=T, partition=0, records=batch, leader_epoch=0)
    reply = await b.node.ask(b.lm.ref, AppendToLogs(appends=(one,)))
    assert isinstance(reply, LogsAppended)
    assert reply.results[0].error_code is ErrorCode.NONE


CHANGELOG: list[tuple[bytes, bytes | None]] = [
    (b"k1", b"a"), (b"k2", b"b"), (b"k1", b"c"), (b"k2", None), (b"k3", b"d"), (b"k1", b"e"),
]  # fmt: skip


async def _changelog(b: Harness) -> None:
    """The compacted topic ``changelog`` (``segment.bytes=100``) with CHANGELOG's
    records, one batch (and segment) each: offsets 0-5."""
    await b.create("changelog")
    configs = (("cleanup.policy", "compact"), ("segment.bytes", "100"))
    await b.node.ask(b.lm.ref, LogConfigOverrides(topic=T, configs=configs))
    for key, value in CHANGELOG:
        await _append(b, batch_of([(key, value)]))


async def _read_all(b: Harness, offset: int = 0) -> list[tuple[int, bytes | None, bytes | None]]:
    out: list[tuple[int, bytes | None, bytes | None]] = []
    while True:
        reads = (ReadRecords(topic=T, partition=0, offset=offset, max_bytes=1 << 20),)
        reply = await b.node.ask(b.lm.ref, ReadFromLogs(reads=reads, max_bytes=1 << 20))
        assert isinstance(reply, LogsRead)
        data = reply.results[0].records
        if not data:
            return out
        for header in batch_headers(data):
            batch = data[header.position : header.position + header.size]
            check_stored_batch(batch)
            out += [
                (r.offset, r.key, r.value)
                for r in decode_records(batch[RECORD_BATCH_OVERHEAD:], header)
            ]
            offset = header.last_offset + 1


def test_the_log_managers_cleaner_compacts_on_its_timer_and_checkpoints(tmp_path: Path) -> None:
    """A compacted topic with one batch per segment: nothing happens before
    ``log.cleaner.backoff.ms``; at the cleaner's round the log is cleaned (traced as
    ``log_dir`` ``clean``), ``cleaner-offset-checkpoint`` holds its clean point in Kafka's
    checkpoint format, the replaced files wait renamed ``.deleted`` (removed by a retention
    check past ``file.delete.delay.ms``); a restart reads the same records and the same clean point;
    deleting the log takes it out of the checkpoint (Kafka's testDeleteTopicWithCleaner)."""
    dirs = log_dirs(tmp_path, 1)
    log = dirs[0] / "changelog-0"
    expected: list[tuple[int, bytes, bytes | None]] = []  # filled by body

    async def body(b: Harness) -> None:
        await _changelog(b)
        assert len(list(log.glob("*.log"))) == 6
        await b.sleep_until(BACKOFF - 1)
        assert not b.log_dir_events("clean")
        event = await b.sink.wait_for(lambda e: e.kind == "log_dir" and e.type == "clean", 60.0)
        assert event.ts == pytest.approx(BACKOFF)
        fields = event.fields
        assert (fields["first_dirty_offset"], fields["end_offset"]) == (0, 5)
        # k1's offset 5 is in the active segment, out of the map: its offset 2 stays
        assert (fields["records_read"], fields["records_retained"]) == (5, 3)
        expected[:] = [(2, b"k1", b"c"), (3, b"k2", None), (4, b"k3", b"d"), (5, b"k1", b"e")]
        assert await _read_all(b) == expected
        assert (dirs[0] / "cleaner-offset-checkpoint").read_text() == "0\n1\nchangelog 0 5\n"
        assert any(p.name.endswith(".log.deleted") for p in log.iterdir())
        await b.sleep_until(2 * BACKOFF + 1)  # nothing new is dirty: no second clean
        assert len(b.log_dir_events("clean")) == 1

    async def restarted(b: Harness) -> None:
        assert await _read_all(b) == expected
        assert not any(p.name.endswith((".cleaned", ".swap")) for p in log.iterdir())
        await b.sleep_until(BACKOFF + 1)
        assert not b.log_dir_events("clean")  # the clean point was read back
        await b.delete("changelog")  # a deleted log leaves the checkpoint
        assert (dirs[0] / "cleaner-offset-checkpoint").read_text() == "0\n0\n"

    sim(lambda: run_broker(dirs, body, cleaner_backoff=BACKOFF))
    sim(lambda: run_broker(dirs, restarted, cleaner_backoff=BACKOFF))


def test_one_deletion_of_cleaned_logs_rewrites_the_cleaner_checkpoint_once(
    tmp_path: Path,
) -> None:
    """``DeleteLogs`` (Kafka's ``asyncDelete`` of a set) of two compacted logs with clean
    points and a plain one: every log renamed, ``cleaner-offset-checkpoint`` rewritten once
    for the batch (``LogCleanerManager.updateCheckpoints`` per dir), before the dir's
    recovery points, and left without their rows; a log not hosted is answered as none."""
    dirs = log_dirs(tmp_path, 1)
    written: list[str] = []

    class Recording(Disk):
        def write_file(self, path: Path | str, data: bytes) -> None:
            written.append(Path(path).name)
            super().write_file(path, data)

    async def body(b: Harness) -> None:
        await _changelog(b)
        await b.create("changelog", 1)
        await b.create("plain")
        for key, value in CHANGELOG:
            one = AppendRecords(
                topic=T, partition=1, records=batch_of([(key, value)]), leader_epoch=0
            )
            await b.node.ask(b.lm.ref, AppendToLogs(appends=(one,)))
        await b.sink.wait_for(
            lambda e: e.kind == "log_dir" and e.type == "clean" and e.fields["partition"] == 1,
            600.0,
        )
        checkpoint = dirs[0] / "cleaner-offset-checkpoint"
        assert checkpoint.read_text() == "0\n2\nchangelog 0 5\nchangelog 1 5\n"
        written.clear()
        names = [("changelog", 0), ("changelog", 1), ("plain", 0), ("absent", 0)]
        reply = await b.node.ask(
            b.lm.ref,
            DeleteLogs(logs=tuple(DeleteLog(topic=TopicName(t), partition=p) for t, p in names)),
        )
        assert isinstance(reply, LogsDeleted)
        assert [(r.topic, r.partition, r.renamed_to is not None) for r in reply.results] == [
            (t, p, (t, p) != ("absent", 0)) for t, p in names
        ]
        assert checkpoint.read_text() == "0\n0\n"
        assert written.count("cleaner-offset-checkpoint") == 1
        assert written.index("cleaner-offset-checkpoint") < written.index(
            "recovery-point-offset-checkpoint"
        )
        assert (dirs[0] / "recovery-point-offset-checkpoint").read_text() == "0\n0\n"

    sim(lambda: run_broker(dirs, body, cleaner_backoff=BACKOFF, disk=Recording()))


def test_a_clean_in_steps_is_the_clean_at_once_and_can_be_abandoned(tmp_path: Path) -> None:
    """``cleaning`` with a budget of one byte: a step per batch read (the key map's four
    batches, then each batch rewritten), the same records and result as ``clean`` at
    once. Closed between two steps of the rewrite, it leaves no ``.cleaned`` file and
    the log as it was."""
    clock = Clock()
    whole, stepped, abandoned = (
        open_log(tmp_path / f"{name}-0", clock, compacted()) for name in ("a", "b", "c")
    )
    for log in (whole, stepped, abandoned):
        fill(log)
    at_once = clean(log_to_clean(whole, None, clock()))
    steps = cleaning(log_to_clean(stepped, None, clock()), 1)
    count = 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result = done.value
            break
        count += 1
    assert count == 4 + 4  # four batches mapped, the four of the cleaned segments read
    assert (result.end_offset, result.records_read, result.records_retained) == (
        at_once.end_offset,
        at_once.records_read,
        at_once.records_retained,
    )
    assert records(stepped) == records(whole)

    before = records(abandoned)
    steps = cleaning(log_to_clean(abandoned, None, clock()), 1)
    for _ in range(6):  # the map, then two batches into the rewrite
        next(steps)
    assert any(n.endswith(".cleaned") for n in os.listdir(abandoned.directory))
    steps.close()
    assert not [n for n in os.listdir(abandoned.directory) if n.endswith((".cleaned", ".swap"))]
    assert records(abandoned) == before


def test_a_record_whose_value_runs_past_it_fails_the_clean(tmp_path: Path) -> None:
    """The clean reads a dropped record's key and value length only, and still refuses
    a value that runs past its record (damaged on disk): RecordsError, which the log
    manager takes for an uncleanable log; no ``.cleaned`` file is left."""
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock, compacted())
    write(log, [(b"k", b"v")])
    write(log, [(b"k", b"w")])
    log.append_as_leader(batch_of([(b"x", b"y")]), leader_epoch=0)
    record = log.read(0, 1 << 20).records[RECORD_BATCH_OVERHEAD:]
    assert record[5:7] == b"k\x02"  # key "k", then the value's length, 1
    with open(log.directory / f"{0:020d}.log", "r+b") as f:
        f.seek(RECORD_BATCH_OVERHEAD + 6)
        f.write(b"\x7e")  # 63
    with pytest.raises(RecordsError):
        clean(log_to_clean(log, None, clock()))
    assert not [n for n in os.listdir(log.directory) if n.endswith((".cleaned", ".swap"))]


def test_the_log_managers_clean_runs_in_steps_between_other_messages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A round runs a step per message (a step per batch read here): a read asked right
    after the round started is answered before the clean swaps its segments in, from the
    log as it was (at once, the read would come after the swap).
    A truncation of the log while its clean is in progress abandons the clean (traced
    ``clean`` ``aborted``, as ``LogCleanerManager.abortAndPauseCleaning``): no
    ``.cleaned`` file is left and the records below the truncation stay; the next round
    cleans the log."""
    monkeypatch.setattr(cleaner, "CLEAN_STEP_BYTES", 1)
    dirs = log_dirs(tmp_path, 1)
    log = dirs[0] / "changelog-0"

    async def body(b: Harness) -> None:
        await _changelog(b)
        b.node.tell(b.lm.ref, CleanCompactedLogs())
        reads = (ReadRecords(topic=T, partition=0, offset=0, max_bytes=1 << 20),)
        reply = await b.node.ask(b.lm.ref, ReadFromLogs(reads=reads, max_bytes=1 << 20))
        # answered between two steps, before the swap: the batch the clean removes
        assert isinstance(reply, LogsRead)
        first = next(batch_headers(reply.results[0].records))
        assert (first.base_offset, first.records_count) == (0, 1)
        event = await b.sink.wait_for(lambda e: e.kind == "log_dir" and e.type == "clean", 60.0)
        assert (event.fields["end_offset"], event.fields["records_retained"]) == (5, 3)
        cleaned = [(2, b"k1", b"c"), (3, b"k2", None), (4, b"k3", b"d"), (5, b"k1", b"e")]
        assert await _read_all(b) == cleaned

        for key, value in [(b"k3", b"f"), (b"k2", b"g"), (b"k3", b"h")]:  # offsets 6-8
            await _append(b, batch_of([(key, value)]))
        b.node.tell(b.lm.ref, CleanCompactedLogs())
        cut = TruncateLog(topic=T, partition=0, offset=8)
        await b.node.ask(b.lm.ref, cut)
        aborted = b.log_dir_events("clean")[1:]
        assert [e.fields["result"] for e in aborted] == ["aborted"]
        assert not [p.name for p in log.iterdir() if p.name.endswith((".cleaned", ".swap"))]
        assert await _read_all(b) == [*cleaned, (6, b"k3", b"f"), (7, b"k2", b"g")]

        b.node.tell(b.lm.ref, CleanCompactedLogs())
        again = await b.sink.wait_for(
            lambda e: (
                e.kind == "log_dir"
                and e.type == "clean"
                and e.fields["result"] == "ok"
                and e.fields["first_dirty_offset"] == 5
            ),
            60.0,
        )
        assert again.fields["end_offset"] == 8  # the truncation left an empty active segment
        assert await _read_all(b) == [(5, b"k1", b"e"), (6, b"k3", b"f"), (7, b"k2", b"g")]

    sim(lambda: run_broker(dirs, body, cleaner_backoff=1000 * BACKOFF))


async def _topic(b: Harness, topic: str, configs: dict[str, str], batches: int) -> None:
    """``topic`` with ``configs`` (and ``segment.bytes=100``), ``batches`` one-record
    batches of key ``k``, one segment each; records about 100 days old."""
    await b.create(topic)
    pairs = tuple(sorted({"segment.bytes": "100", **configs}.items()))
    await b.node.ask(b.lm.ref, LogConfigOverrides(topic=TopicName(topic), configs=pairs))
    for i in range(batches):
        one = AppendRecords(
            topic=TopicName(topic),
            partition=0,
            records=batch_of([(b"k", b"%d" % i)]),
            leader_epoch=0,
        )
        reply = await b.node.ask(b.lm.ref, AppendToLogs(appends=(one,)))
        assert isinstance(reply, LogsAppended)


def test_a_compacted_logs_retention_is_the_cleaners_and_never_abandons_its_clean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``cleanup.policy=compact,delete``: a retention check (``LogManager.cleanupLogs``)
    that comes while the log's clean is in progress retains only the logs that do not
    compact (``pauseCleaningForNonCompactedPartitions``): the clean is not abandoned and
    its segments stay; the cleaner deletes the compacted log's expired segments after
    the clean (``CleanerThread.cleanFilthiestLog``'s ``deletableLogs``), below the high
    watermark, and tells the broker the new log start."""
    monkeypatch.setattr(cleaner, "CLEAN_STEP_BYTES", 1)
    dirs = log_dirs(tmp_path, 1)
    changelog = dirs[0] / "changelog-0"
    # the records are about 100 days old, the segments' last writes (those the clean
    # empties keep) 20 s at the clean
    retention = {"retention.ms": "10000"}

    async def body(b: Harness) -> None:
        await _topic(b, "events", {"cleanup.policy": "delete", **retention}, 3)
        await b.create("changelog")
        configs = {"cleanup.policy": "compact,delete", "segment.bytes": "100", **retention}
        await b.node.ask(
            b.lm.ref, LogConfigOverrides(topic=T, configs=tuple(sorted(configs.items())))
        )
        for key, value in CHANGELOG:
            await _append(b, batch_of([(key, value)]))
        marks = (
            HighWatermark(topic=TopicName("events"), partition=0, high_watermark=3),
            HighWatermark(topic=T, partition=0, high_watermark=5),
        )
        b.node.tell(b.lm.ref, RecordHighWatermarks(high_watermarks=marks))
        await b.sleep_until(20.0)  # before the first retention check, at 30 s
        b.node.tell(b.lm.ref, CleanCompactedLogs())
        b.node.tell(b.lm.ref, CleanupLogs())  # handled after the clean's first step
        await b.sink.wait_for(
            lambda e: e.kind == "log_dir" and e.type == "retention" and e.fields["topic"] == T,
            60.0,
        )
        ops = [
            (e.type, e.fields["topic"], e.fields["result"])
            for e in b.sink.events
            if e.kind == "log_dir" and e.type in ("clean", "retention")
        ]
        assert ops == [
            ("retention", "events", "ok"),  # the check, while changelog's clean ran
            ("clean", T, "ok"),
            ("retention", T, "ok"),  # the cleaner's, after the clean
        ]
        clean_event, changelog_retention = (
            b.log_dir_events("clean")[0],
            b.log_dir_events("retention")[1],
        )
        assert (clean_event.fields["end_offset"], clean_event.fields["records_retained"]) == (5, 3)
        # every segment wholly below the high watermark 5 expired: the log starts at 5
        assert changelog_retention.fields["log_start_offset"] == 5
        assert await _read_all(b, 5) == [(5, b"k1", b"e")]
        assert not [p.name for p in changelog.iterdir() if p.name.endswith(".cleaned")]
        starts = [
            (s.topic, s.log_start_offset)
            for m in b.recorder.seen
            if isinstance(m, LogStartsAdvanced)
            for s in m.starts
        ]
        assert starts == [("events", 3), (T, 5)]

    sim(
        lambda: run_broker(dirs, body, cleaner_backoff=1000 * BACKOFF, retention_check_interval=1e6)
    )


_KILLED_CHILD = """
import os, signal, sys
from pathlib import Path
from actors.log.channel import LogFiles
from actors.log.cleaner import clean, log_to_clean
from actors.log.disk import Disk
from tests.unit.test_log_cleaner import Clock, compacted, fill, open_log

class KillingDisk(Disk):
    renames = 0
    def rename(self, src, dst):
        KillingDisk.renames += 1
        if KillingDisk.renames == int(sys.argv[2]):
            os.kill(os.getpid(), signal.SIGKILL)
        super().rename(src, dst)

clock = Clock()
log = open_log(Path(sys.argv[1]), clock, compacted(), files=LogFiles(KillingDisk()))
fill(log)
clean(log_to_clean(log, None, clock()))
"""


@pytest.mark.parametrize("kill_at", [1, 2, 9, 16, 18])
def test_a_process_killed_mid_swap_loses_nothing(tmp_path: Path, kill_at: int) -> None:
    """A child process writes the log and cleans it, and is killed (SIGKILL: no close,
    no flush, no Python clean-up) at a rename of the swap: the ``.cleaned`` to ``.swap``
    of the ``.log``, of its index, of an old segment to ``.deleted``, of the ``.swap``
    ``.log`` to its name, of the last index. The log reopened after the crash reads
    every key's latest record at its offset, and the active segment's."""
    directory = tmp_path / "t-0"
    child = subprocess.run(
        [sys.executable, "-c", _KILLED_CHILD, str(directory), str(kill_at)],
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        capture_output=True,
        check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()
    clock = Clock()
    again = open_log(directory, clock, compacted(), had_clean_shutdown=False)
    assert not [n for n in os.listdir(directory) if n.endswith((".cleaned", ".swap"))]
    after = records(again)
    expected = [(4, b"d", b"d0"), (5, b"b", None), (6, b"c", b"c1"), (7, b"a", b"a2")]
    expected += [(8, b"e", b"e0"), (9, b"f", b"f0")]
    assert set(expected) <= set(after)
    if kill_at > 1:
        assert after == expected
    assert again.log_end_offset == 10


def _damage_payload(path: Path) -> None:
    """Overwrite the first bytes of the first batch's records, in place (same inode)."""
    with open(path, "r+b") as f:
        f.seek(RECORD_BATCH_OVERHEAD)
        f.write(b"\xff\xff\xff\xff")


def test_a_log_that_cannot_be_cleaned_is_marked_uncleanable(tmp_path: Path) -> None:
    """A gzip batch whose payload no longer decompresses (damaged on disk) fails the
    clean: traced as ``clean`` with the error, no ``.cleaned`` file is left, the log is
    unchanged, and it is not tried again (Kafka's uncleanable partitions); the log
    manager goes on serving it."""
    dirs = log_dirs(tmp_path, 1)
    log = dirs[0] / "changelog-0"

    async def body(b: Harness) -> None:
        await b.create("changelog")
        configs = (("cleanup.policy", "compact"), ("segment.bytes", "100"))
        await b.node.ask(b.lm.ref, LogConfigOverrides(topic=T, configs=configs))
        for value in (b"a", b"b", b"c"):
            await _append(b, batch_of([(b"k", value)], codec=1))
        _damage_payload(log / f"{0:020d}.log")
        before = sorted(p.name for p in log.iterdir())
        event = await b.sink.wait_for(lambda e: e.kind == "log_dir" and e.type == "clean", 60.0)
        assert event.fields["result"] == "CompressionError"
        assert sorted(p.name for p in log.iterdir()) == before
        await b.sleep_until(3 * BACKOFF + 1)
        assert len(b.log_dir_events("clean")) == 1
        reads = (ReadRecords(topic=T, partition=0, offset=1, max_bytes=1 << 20),)
        reply = await b.node.ask(b.lm.ref, ReadFromLogs(reads=reads, max_bytes=1 << 20))
        assert isinstance(reply, LogsRead)
        assert reply.results[0].error_code is ErrorCode.NONE

    sim(lambda: run_broker(dirs, body, cleaner_backoff=BACKOFF))


class CleanedSwapFails(Disk):
    """A disk on which renaming ``changelog-0``'s ``.cleaned`` files fails (an I/O error:
    the log's dir goes offline)."""

    def rename(self, src: Path | str, dst: Path | str) -> None:
        if "changelog-0" in str(src) and str(src).endswith(".cleaned"):
            raise OSError(5, "Input/output error", str(src))
        super().rename(src, dst)


async def _failing_and_expired(b: Harness, *, codec: int) -> None:
    """``changelog`` (compact, in the first log dir) with CHANGELOG's records, the
    filthiest log; ``table`` (compact,delete, ``retention.ms=10000``, in the second) with
    three records about 100 days old, its high watermark 3."""
    await b.create("changelog")
    configs = (("cleanup.policy", "compact"), ("segment.bytes", "100"))
    await b.node.ask(b.lm.ref, LogConfigOverrides(topic=T, configs=configs))
    for key, value in CHANGELOG:
        await _append(b, batch_of([(key, value)], codec=codec))
    await _topic(b, "table", {"cleanup.policy": "compact,delete", "retention.ms": "10000"}, 3)
    marks = (HighWatermark(topic=TopicName("table"), partition=0, high_watermark=3),)
    b.node.tell(b.lm.ref, RecordHighWatermarks(high_watermarks=marks))


def _cleaner_ops(b: Harness) -> list[tuple[str | None, str, str, float]]:
    return [
        (e.type, e.fields["topic"], e.fields["result"], e.ts)
        for e in b.sink.events
        if e.kind == "log_dir" and e.type in ("clean", "retention", "io_error")
    ]


def test_a_clean_cut_by_an_io_error_is_followed_by_retention(tmp_path: Path) -> None:
    """A clean whose log dir goes offline (its swap's rename fails) counts as an attempt,
    as ``CleanerThread.cleanLog`` lets the ``IOException`` go: in the same round the
    compacted logs of the dirs still online are retained (``deletableLogs``); before,
    the round ended there and they waited for the next one."""
    dirs = log_dirs(tmp_path, 2)

    async def body(b: Harness) -> None:
        await _failing_and_expired(b, codec=0)
        await b.sleep_until(2 * BACKOFF - 1)
        assert _cleaner_ops(b) == [
            ("io_error", T, "OSError", BACKOFF),
            ("retention", "table", "ok", BACKOFF),
        ]
        # every segment wholly below the high watermark 3 expired
        assert b.log_dir_events("retention")[0].fields["log_start_offset"] == 3

    sim(lambda: run_broker(dirs, body, cleaner_backoff=BACKOFF, disk=CleanedSwapFails()))


def test_a_log_found_uncleanable_ends_the_round_without_retention(tmp_path: Path) -> None:
    """A clean that fails on the records (a gzip payload damaged on disk) marks the log
    uncleanable and, as ``cleanFilthiestLog``'s ``LogCleaningException``, skips the
    attempt's retention and backs off: the other compacted log is cleaned and retained
    by the next round, ``log.cleaner.backoff.ms`` later; the uncleanable log is never
    retained."""
    dirs = log_dirs(tmp_path, 2)

    async def body(b: Harness) -> None:
        await _failing_and_expired(b, codec=1)
        _damage_payload(dirs[0] / "changelog-0" / f"{0:020d}.log")
        await b.sleep_until(4 * BACKOFF + 1)
        assert _cleaner_ops(b) == [
            ("clean", T, "CompressionError", BACKOFF),
            ("clean", "table", "ok", 2 * BACKOFF),
            ("retention", "table", "ok", 2 * BACKOFF),
        ]

    sim(lambda: run_broker(dirs, body, cleaner_backoff=BACKOFF))


@pytest.mark.parametrize("change", ["truncation", "delete_records", "deletion", "close"])
def test_a_clean_abandoned_from_outside_is_followed_by_retention(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    """A clean abandoned because its log changes other than by an append (a truncation,
    DeleteRecords moving the log start, the log's deletion, the log closed by the
    open-log budget) is, as ``CleanerThread.cleanLog`` lets the
    ``LogCleaningAbortedException`` go, an attempt like any other: in the same round,
    with no backoff, the compacted logs are retained (``table``, ``compact,delete``, in
    the other log dir), then the next filthiest (``third``) cleaned; no ``.cleaned``
    file of the abandoned clean is left. Before, the round ended at the abort and both
    waited for the next round."""
    monkeypatch.setattr(cleaner, "CLEAN_STEP_BYTES", 1)
    dirs = log_dirs(tmp_path, 2)

    async def body(b: Harness) -> None:
        await _failing_and_expired(b, codec=0)
        await _topic(b, "third", {"cleanup.policy": "compact"}, 3)
        await b.create("another")  # created, not open: the changelog is the oldest open
        b.node.tell(b.lm.ref, CleanCompactedLogs())
        match change:
            case "truncation":
                await b.node.ask(b.lm.ref, TruncateLog(topic=T, partition=0, offset=4))
            case "delete_records":
                start = AdvanceLogStart(topic=T, partition=0, offset=2, high_watermark=6)
                await b.node.ask(b.lm.ref, start)
            case "deletion":
                await b.node.ask(b.lm.ref, DeleteLog(topic=T, partition=0))
            case _:  # opening a fourth log closes the least recently used one
                one = AppendRecords(
                    topic=TopicName("another"),
                    partition=0,
                    records=batch_of([(b"k", b"v")]),
                    leader_epoch=0,
                )
                await b.node.ask(b.lm.ref, AppendToLogs(appends=(one,)))
        assert not [
            p.name
            for p in (dirs[0] / "changelog-0").glob("*")
            if p.name.endswith((".cleaned", ".swap"))
        ]
        third = await b.sink.wait_for(
            lambda e: e.kind == "log_dir" and e.type == "clean" and e.fields["topic"] == "third",
            60.0,
        )
        print(
            "OPS",
            _cleaner_ops(b),
            list(b.lm._open) if hasattr(b.lm, "_open") else None,
            [(e.type, e.fields.get("topic")) for e in b.sink.events if e.kind == "log_dir"][-8:],
        )
        assert [op[:3] for op in _cleaner_ops(b)] == [
            ("clean", T, "aborted"),
            ("retention", "table", "ok"),
            ("clean", "third", "ok"),
        ]
        assert third.ts == 0  # the same round, with no backoff

    sim(lambda: run_broker(dirs, body, cleaner_backoff=1000 * BACKOFF, max_open_logs=3))
