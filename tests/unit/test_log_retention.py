"""Retention on the log manager's timer (``LogManager.cleanupLogs``, ``Log.deleteOldSegments``).

Each test runs the ``tests.support.log_manager`` harness (a node with a ``LogManager`` on
the virtual clock, real log directories), writes real batches into a topic whose
``segment.bytes`` makes one segment per batch, reports a high watermark as the broker
does, and lets the virtual clock reach the retention checks.
"""

from __future__ import annotations

from pathlib import Path

from protocol.errors import ErrorCode
from protocol.ids import TopicName
from protocol.log import (
    AppendOutcome,
    AppendRecords,
    AppendToLogs,
    GetOrCreateLog,
    GetOrCreateLogs,
    HighWatermark,
    LogConfigOverrides,
    LogQueried,
    LogsAppended,
    LogsCreated,
    LogsRead,
    QueryLog,
    ReadFromLogs,
    ReadOutcome,
    ReadRecords,
    RecordHighWatermarks,
)
from tests.support.log_manager import Harness, log_dirs, run_broker, sim
from tests.support.record_batches import client_batch, decode_batches

T = TopicName("orders")
HOUR_MS = 3_600_000
CHECK = 10.0  # seconds between retention checks in these tests
DELAY = 5.0  # file.delete.delay.ms of these tests, in seconds


async def create(b: Harness) -> None:
    reply = await b.node.ask(
        b.lm.ref, GetOrCreateLogs(logs=(GetOrCreateLog(topic=T, partition=0, is_new=True),))
    )
    assert isinstance(reply, LogsCreated)


async def append(b: Harness, records: bytes) -> AppendOutcome:
    one = AppendRecords(topic=T, partition=0, records=records, leader_epoch=0)
    reply = await b.node.ask(b.lm.ref, AppendToLogs(appends=(one,)))
    assert isinstance(reply, LogsAppended)
    return reply.results[0]


async def read_at(b: Harness, offset: int) -> ReadOutcome:
    reads = (ReadRecords(topic=T, partition=0, offset=offset, max_bytes=1 << 20),)
    reply = await b.node.ask(b.lm.ref, ReadFromLogs(reads=reads, max_bytes=1 << 20))
    assert isinstance(reply, LogsRead)
    return reply.results[0]


def segment_files(log: Path) -> list[str]:
    return sorted(p.name for p in log.iterdir() if p.name[0].isdigit())


async def configure(b: Harness, **configs: str) -> None:
    pairs = (("segment.bytes", "100"), *((k.replace("_", "."), v) for k, v in configs.items()))
    await b.node.ask(b.lm.ref, LogConfigOverrides(topic=T, configs=tuple(sorted(pairs))))


def report_high_watermark(b: Harness, high_watermark: int) -> None:
    b.lm.tell(
        b.lm.ref,
        RecordHighWatermarks(
            high_watermarks=(HighWatermark(topic=T, partition=0, high_watermark=high_watermark),)
        ),
    )


async def earliest(b: Harness) -> int:
    """The log start offset, which ListOffsets earliest answers."""
    found = await b.node.ask(b.lm.ref, QueryLog(topic=T, partition=0))
    assert isinstance(found, LogQueried)
    return found.log_start_offset


async def write(b: Harness, timestamps: list[int]) -> None:
    for i, ts in enumerate(timestamps):
        outcome = await append(b, client_batch([b"v%d" % i], timestamps=[ts]))
        assert outcome.error_code is ErrorCode.NONE


def run(tmp_path: Path, body: object) -> None:
    sim(
        lambda: run_broker(
            log_dirs(tmp_path, 1),
            body,  # type: ignore[arg-type]
            initial_task_delay=CHECK,
            retention_check_interval=CHECK,
            segment_delete_delay=DELAY,
        )
    )


def test_segments_older_than_retention_ms_go_below_the_high_watermark(tmp_path: Path) -> None:
    """Three batches an hour old and two new ones, one segment each: the first check
    renames the old segments ``.deleted`` (only those wholly below the high watermark),
    the log start moves to the first kept segment, ListOffsets earliest follows, a read
    below it is OFFSET_OUT_OF_RANGE; ``file.delete.delay.ms`` later the files are gone."""
    log = log_dirs(tmp_path, 1)[0] / "orders-0"

    async def body(b: Harness) -> None:
        await create(b)
        await configure(b, retention_ms=str(HOUR_MS // 2))
        now_ms = b.node.clock.wall_ms()
        await write(b, [now_ms - HOUR_MS] * 3 + [now_ms] * 2)
        assert segment_files(log)[::3] == [f"{i:020d}.index" for i in range(5)]
        report_high_watermark(b, 2)  # offsets 2.. not replicated yet: segment 2 stays
        await b.sleep_until(CHECK + 1)
        assert [n for n in segment_files(log) if n.endswith(".log")] == [
            f"{i:020d}.log" for i in range(2, 5)
        ]
        assert f"{0:020d}.log.deleted" in segment_files(log)
        assert await earliest(b) == 2
        report_high_watermark(b, 5)
        await b.sleep_until(2 * CHECK + 1)
        names = segment_files(log)
        assert [n for n in names if n.endswith(".log")] == [f"{i:020d}.log" for i in (3, 4)]
        assert await earliest(b) == 3
        below = await read_at(b, 1)
        assert below.error_code is ErrorCode.OFFSET_OUT_OF_RANGE
        kept = await read_at(b, 3)
        assert [d.values for d in decode_batches(kept.records)] == [[b"v3"]]  # one segment
        assert (kept.log_start_offset, kept.log_end_offset) == (3, 5)
        # The first files were renamed at the first check, DELAY ago: removed at the second.
        assert not any(n.startswith(f"{0:020d}") for n in names)
        assert any(n.endswith(".deleted") for n in names)
        await b.sleep_until(3 * CHECK + 1)
        assert not any(n.endswith(".deleted") for n in segment_files(log))

    run(tmp_path, body)
    # Kafka checkpoints a log start only past its first segment's base: here they are equal.
    assert (log.parent / "log-start-offset-checkpoint").read_text() == "0\n0\n"


def test_a_topics_file_delete_delay_holds_its_deleted_segment_files(tmp_path: Path) -> None:
    """A topic's ``file.delete.delay.ms`` (15 s here, the broker's 5 s) is how long its
    retention's ``.deleted`` files wait (Kafka's ``Log.deleteSegmentFiles`` reads the log's
    own config): renamed at the first check, still there at the second (the broker's delay
    alone would have removed them), gone at the third."""
    log = log_dirs(tmp_path, 1)[0] / "orders-0"

    async def body(b: Harness) -> None:
        await create(b)
        await configure(b, retention_ms=str(HOUR_MS // 2), file_delete_delay_ms="15000")
        now_ms = b.node.clock.wall_ms()
        await write(b, [now_ms - HOUR_MS] * 2 + [now_ms])
        report_high_watermark(b, 3)
        await b.sleep_until(CHECK + 1)
        assert f"{0:020d}.log.deleted" in segment_files(log)
        await b.sleep_until(2 * CHECK + 1)  # 10 s after the rename: not due yet
        assert f"{0:020d}.log.deleted" in segment_files(log)
        await b.sleep_until(3 * CHECK + 1)
        assert not any(n.endswith(".deleted") for n in segment_files(log))

    run(tmp_path, body)


def test_retention_bytes_keeps_the_newest_segments_and_the_active_one(tmp_path: Path) -> None:
    """``retention.bytes`` deletes from the oldest while what is left stays at or above
    it; when every segment is expired the active one is rolled first and the log starts
    empty at its end; an empty active segment is never deleted."""
    log = log_dirs(tmp_path, 1)[0] / "orders-0"

    async def body(b: Harness) -> None:
        await create(b)
        await configure(b)
        now_ms = b.node.clock.wall_ms()
        await write(b, [now_ms] * 4)
        size = (log / f"{3:020d}.log").stat().st_size
        await configure(b, retention_bytes=str(2 * size))
        report_high_watermark(b, 4)
        await b.sleep_until(CHECK + 1)
        assert [n for n in segment_files(log) if n.endswith(".log")] == [
            f"{i:020d}.log" for i in (2, 3)
        ]
        assert await earliest(b) == 2
        await configure(b, retention_ms="1000")
        await b.sleep_until(2 * CHECK + 1)  # all expired: rolled, then deleted
        assert [n for n in segment_files(log) if n.endswith(".log")] == [f"{4:020d}.log"]
        assert await earliest(b) == 4
        await b.sleep_until(3 * CHECK + 1)  # the empty active segment stays
        assert [n for n in segment_files(log) if n.endswith(".log")] == [f"{4:020d}.log"]
        assert (await append(b, client_batch([b"new"]))).first_offset == 4

    run(tmp_path, body)


def test_compacted_topics_and_unlimited_retention_keep_everything(tmp_path: Path) -> None:
    """``cleanup.policy=compact`` and ``retention.ms=-1`` (with no ``retention.bytes``)
    delete nothing, however old the records."""
    log = log_dirs(tmp_path, 1)[0] / "orders-0"

    async def body(b: Harness) -> None:
        await create(b)
        await configure(b, retention_ms="1000", cleanup_policy="compact")
        await write(b, [0, 0, 0])
        report_high_watermark(b, 3)
        await b.sleep_until(CHECK + 1)
        assert len([n for n in segment_files(log) if n.endswith(".log")]) == 3
        await configure(b, retention_ms="-1")
        await b.sleep_until(2 * CHECK + 1)
        assert len([n for n in segment_files(log) if n.endswith(".log")]) == 3
        await configure(b, retention_ms="1000")
        await b.sleep_until(3 * CHECK + 1)
        # every segment expired: the active one was rolled first, the log starts at its end
        assert [n for n in segment_files(log) if n.endswith(".log")] == [f"{3:020d}.log"]
        assert await earliest(b) == 3

    run(tmp_path, body)
