"""The log manager's partition logs with records, on real temporary directories.

Each test runs the ``tests.unit.test_log_manager`` harness (a node with a ``LogManager``,
the virtual clock) and sends it the per-request batch messages the broker sends for a
Produce, a Fetch and the offset lookups. Batches are built by a real client's code
(``tests.support.record_batches``) and what comes back is decoded by kio's reader.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import cast

from actors.broker.replication import LogManagerFollowerLog
from actors.log.manager import DEFAULT_MAX_OPEN_LOGS, open_logs_budget
from actors.runtime.actor import Actor, Context
from protocol.base import ActorRef, Message
from protocol.control import TopicPartition
from protocol.errors import ErrorCode
from protocol.ids import TopicName
from protocol.log import (
    AppendOutcome,
    AppendRecords,
    AppendToLogs,
    EpochEndOffsetQuery,
    GetOrCreateLog,
    GetOrCreateLogs,
    HighWatermark,
    LogConfigOverrides,
    LogsAppended,
    LogsCreated,
    LogsRead,
    LookupOffsets,
    OffsetsFound,
    OffsetTimestampQuery,
    ReadFromLogs,
    ReadOutcome,
    ReadRecords,
    RecordHighWatermarks,
)
from tests.support.log_manager import Harness, log_dirs, run_broker, sim
from tests.support.record_batches import client_batch, decode_batches, fix_crc, set_field

T = TopicName("orders")


async def append(
    b: Harness, records: bytes, partition: int = 0, epoch: int | None = 0
) -> AppendOutcome:
    reply = await b.node.ask(
        b.lm.ref,
        AppendToLogs(
            appends=(
                AppendRecords(topic=T, partition=partition, records=records, leader_epoch=epoch),
            )
        ),
    )
    assert isinstance(reply, LogsAppended)
    return reply.results[0]


async def read(
    b: Harness, *reads: ReadRecords, max_bytes: int = 1 << 20, min_one: bool = True
) -> tuple[ReadOutcome, ...]:
    reply = await b.node.ask(
        b.lm.ref, ReadFromLogs(reads=reads, max_bytes=max_bytes, min_one_message=min_one)
    )
    assert isinstance(reply, LogsRead)
    return reply.results


async def create(b: Harness, partition: int = 0, epoch: int | None = 0) -> LogsCreated:
    reply = await b.node.ask(
        b.lm.ref,
        GetOrCreateLogs(
            logs=(GetOrCreateLog(topic=T, partition=partition, is_new=True, leader_epoch=epoch),)
        ),
    )
    assert isinstance(reply, LogsCreated)
    return reply


def test_appended_batches_are_read_back_with_their_offsets(tmp_path: Path) -> None:
    """Leader appends get consecutive offsets and the epoch; a read returns them whole
    from the batch holding the offset, and stops below ``max_offset``."""

    async def body(b: Harness) -> None:
        await create(b, epoch=3)
        first = await append(b, client_batch([b"a", b"b"]), epoch=3)
        second = await append(b, client_batch([b"c"]), epoch=3)
        assert (first.first_offset, first.last_offset) == (0, 1)
        assert (second.first_offset, second.last_offset, second.log_end_offset) == (2, 2, 3)
        (got,) = await read(b, ReadRecords(topic=T, partition=0, offset=1, max_bytes=1 << 20))
        batches = decode_batches(got.records)
        assert [(d.batch.base_offset, d.values) for d in batches] == [
            (0, [b"a", b"b"]),
            (2, [b"c"]),
        ]
        assert {d.batch.partition_leader_epoch for d in batches} == {3}
        assert (got.log_start_offset, got.log_end_offset) == (0, 3)
        (below,) = await read(
            b, ReadRecords(topic=T, partition=0, offset=0, max_bytes=1 << 20, max_offset=2)
        )
        assert [d.batch.base_offset for d in decode_batches(below.records)] == [0]

    sim(lambda: run_broker(log_dirs(tmp_path, 1), body))


def test_a_bad_append_or_read_answers_its_partition_only(tmp_path: Path) -> None:
    """A corrupt batch is CORRUPT_MESSAGE and writes nothing; a read past the log end is
    OFFSET_OUT_OF_RANGE; an unhosted partition is UNKNOWN_TOPIC_OR_PARTITION; the other
    partitions of the same request are served."""

    async def body(b: Harness) -> None:
        await create(b, 0)
        await create(b, 1)
        good = client_batch([b"x"])
        bad = bytearray(good)
        bad[-1] ^= 0xFF
        reply = await b.node.ask(
            b.lm.ref,
            AppendToLogs(
                appends=(
                    AppendRecords(topic=T, partition=0, records=bytes(bad), leader_epoch=0),
                    AppendRecords(topic=T, partition=1, records=good, leader_epoch=0),
                    AppendRecords(topic=T, partition=9, records=good, leader_epoch=0),
                )
            ),
        )
        assert isinstance(reply, LogsAppended)
        codes = [r.error_code for r in reply.results]
        assert codes == [
            ErrorCode.CORRUPT_MESSAGE,
            ErrorCode.NONE,
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ]
        results = await read(
            b,
            ReadRecords(topic=T, partition=0, offset=0, max_bytes=100),
            ReadRecords(topic=T, partition=1, offset=5, max_bytes=100),
            ReadRecords(topic=T, partition=1, offset=0, max_bytes=100),
        )
        assert results[0].records == b""
        assert results[0].log_end_offset == 0
        assert results[1].error_code is ErrorCode.OFFSET_OUT_OF_RANGE
        assert [d.values for d in decode_batches(results[2].records)] == [[b"x"]]

    sim(lambda: run_broker(log_dirs(tmp_path, 1), body))


def test_a_fetch_returns_one_whole_batch_past_its_limit_then_respects_it(tmp_path: Path) -> None:
    """With ``min_one_message`` the first batch found comes whole even past ``max_bytes``;
    later partitions get only what is left of the request's limit (nothing here)."""

    async def body(b: Harness) -> None:
        for p in (0, 1):
            await create(b, p)
            await append(b, client_batch([b"v" * 500]), partition=p)
        results = await read(
            b,
            ReadRecords(topic=T, partition=0, offset=0, max_bytes=10),
            ReadRecords(topic=T, partition=1, offset=0, max_bytes=10),
            max_bytes=10,
        )
        assert len(decode_batches(results[0].records)) == 1
        assert results[1].records == b""
        strict = await read(
            b, ReadRecords(topic=T, partition=0, offset=0, max_bytes=10), min_one=False
        )
        assert strict[0].records == b""

    sim(lambda: run_broker(log_dirs(tmp_path, 1), body))


def test_epoch_and_timestamp_lookups(tmp_path: Path) -> None:
    """OffsetForLeaderEpoch answers from the epoch cache (the new leader's epoch started
    at creation), ListOffsets by timestamp finds the first record at or after it."""

    async def body(b: Harness) -> None:
        await create(b, epoch=1)
        await append(b, client_batch([b"a", b"b"], timestamps=[1000, 2000]), epoch=1)
        reply = await b.node.ask(
            b.lm.ref, GetOrCreateLog(topic=T, partition=0, is_new=False, leader_epoch=4)
        )
        await append(b, client_batch([b"c"], timestamps=[3000]), epoch=4)
        found = await b.node.ask(
            b.lm.ref,
            LookupOffsets(
                queries=(
                    EpochEndOffsetQuery(topic=T, partition=0, leader_epoch=1),
                    EpochEndOffsetQuery(topic=T, partition=0, leader_epoch=3),
                    EpochEndOffsetQuery(topic=T, partition=0, leader_epoch=4),
                    OffsetTimestampQuery(topic=T, partition=0, timestamp=1500),
                    OffsetTimestampQuery(topic=T, partition=0, timestamp=9000),
                )
            ),
        )
        assert isinstance(found, OffsetsFound)
        got = [(r.leader_epoch, r.offset, r.timestamp) for r in found.results]
        assert got == [(1, 2, -1), (1, 2, -1), (4, 3, -1), (1, 1, 2000), (-1, -1, -1)]
        assert reply is not None

    sim(lambda: run_broker(log_dirs(tmp_path, 1), body))


def test_a_restarted_log_manager_recovers_logs_and_checkpoints(tmp_path: Path) -> None:
    """After a clean stop the logs reopen with their records, the offsets continue, and
    the high watermark the broker reported comes back from replication-offset-checkpoint."""
    dirs = log_dirs(tmp_path, 1)

    async def first(b: Harness) -> None:
        await create(b)
        await append(b, client_batch([b"a", b"b", b"c"]))
        b.lm.tell(
            b.lm.ref,
            RecordHighWatermarks(
                high_watermarks=(HighWatermark(topic=T, partition=0, high_watermark=2),)
            ),
        )

    async def second(b: Harness) -> None:
        reply = await b.node.ask(
            b.lm.ref, GetOrCreateLogs(logs=(GetOrCreateLog(topic=T, partition=0),))
        )
        assert isinstance(reply, LogsCreated)
        outcome = reply.results[0]
        assert (outcome.log_end_offset, outcome.high_watermark) == (3, 2)
        assert (await append(b, client_batch([b"d"]))).first_offset == 3
        (got,) = await read(b, ReadRecords(topic=T, partition=0, offset=0, max_bytes=1 << 20))
        assert [v for d in decode_batches(got.records) for v in d.values] == [
            b"a",
            b"b",
            b"c",
            b"d",
        ]

    sim(lambda: run_broker(dirs, first))
    assert (dirs[0] / ".kafka_cleanshutdown").exists()
    assert (dirs[0] / "replication-offset-checkpoint").read_text() == "0\n1\norders 0 2\n"
    assert (dirs[0] / "recovery-point-offset-checkpoint").read_text() == "0\n1\norders 0 3\n"
    sim(lambda: run_broker(dirs, second))


def test_after_a_crash_every_log_is_recovered_and_a_torn_tail_cut(tmp_path: Path) -> None:
    """Without the clean-shutdown marker every log is recovered at start-up: a torn last
    batch is cut, the whole batches stay."""
    dirs = log_dirs(tmp_path, 1)

    async def first(b: Harness) -> None:
        await create(b)
        await append(b, client_batch([b"a"]))
        await append(b, client_batch([b"b"]))

    async def second(b: Harness) -> None:
        assert b.log_dir_events("recover")
        (got,) = await read(b, ReadRecords(topic=T, partition=0, offset=0, max_bytes=1 << 20))
        assert [d.values for d in decode_batches(got.records)] == [[b"a"]]
        assert got.log_end_offset == 1

    sim(lambda: run_broker(dirs, first))
    (dirs[0] / ".kafka_cleanshutdown").unlink()
    segment = dirs[0] / "orders-0" / "00000000000000000000.log"
    data = segment.read_bytes()
    segment.write_bytes(data[:-5])
    sim(lambda: run_broker(dirs, second))


def test_logs_beyond_the_open_limit_are_closed_and_reopened(tmp_path: Path) -> None:
    """With ``max_open_logs`` 2, appending to five partitions keeps two open; each
    reopened log still has its records."""

    async def body(b: Harness) -> None:
        for p in range(5):
            await create(b, p)
            await append(b, client_batch([f"v{p}".encode()]), partition=p)
        assert b.lm.open_logs == 2
        checkpoints = [dirs[0] / f"orders-{p}" / "leader-epoch-checkpoint" for p in range(5)]
        written = [c.stat().st_ino for c in checkpoints]  # a rewrite replaces the file
        for p in range(5):
            (got,) = await read(b, ReadRecords(topic=T, partition=p, offset=0, max_bytes=1 << 20))
            assert [d.values for d in decode_batches(got.records)] == [[f"v{p}".encode()]]
        assert b.lm.open_logs == 2
        assert [c.stat().st_ino for c in checkpoints] == written  # reopening rewrites none

    dirs = log_dirs(tmp_path, 1)
    sim(lambda: run_broker(dirs, body, max_open_logs=2))


def _files_open_under(root: Path) -> list[str]:
    """The files this process holds open under ``root`` (Linux's ``/proc/self/fd``)."""
    targets = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            targets.append(os.readlink(fd))
        except OSError:  # the listing's own descriptor, closed by now
            continue
    return [t for t in targets if t.startswith(str(root))]


def test_a_crash_closes_the_open_logs_files_and_writes_nothing_more(tmp_path: Path) -> None:
    """A crashed broker's process loses its descriptors, not what it wrote: the node's
    end closes every open log's segment and index files (``Log.closeHandlers``), with no
    flush and no clean-shutdown marker, and each record appended is still in its file."""

    async def body(b: Harness) -> None:
        for p in range(3):
            await create(b, p)
            await append(b, client_batch([f"v{p}".encode()]), partition=p)
        assert b.lm.open_logs == 3
        assert len(_files_open_under(tmp_path)) == 9  # a .log, .index and .timeindex each
        b.node.crash()

    dirs = log_dirs(tmp_path, 1)
    sim(lambda: run_broker(dirs, body))
    assert _files_open_under(tmp_path) == []
    assert not (dirs[0] / ".kafka_cleanshutdown").exists()
    for p in range(3):
        segment = (dirs[0] / f"orders-{p}" / "00000000000000000000.log").read_bytes()
        assert [d.values for d in decode_batches(segment)] == [[f"v{p}".encode()]]


def test_the_open_logs_budget_shares_the_file_limit_between_a_process_s_brokers() -> None:
    """Each broker of a process may keep open what three quarters of the process's file
    limit allow, three files a log, and never fewer than the default."""
    assert open_logs_budget(20_000, 3) == 15_000 // 9
    assert open_logs_budget(20_000, 1) == 5_000
    assert open_logs_budget(1_024, 3) == DEFAULT_MAX_OPEN_LOGS
    assert open_logs_budget(1_000_000, 100) == 2_500


def test_a_topic_config_applies_to_its_logs(tmp_path: Path) -> None:
    """``max.message.bytes`` from a topic's configs refuses a larger batch with
    MESSAGE_TOO_LARGE; once the topic is deleted, a new one of that name has the
    default again."""

    async def body(b: Harness) -> None:
        await create(b)
        await b.node.ask(
            b.lm.ref, LogConfigOverrides(topic=T, configs=(("max.message.bytes", "100"),))
        )
        outcome = await append(b, client_batch([b"v" * 200]))
        assert outcome.error_code is ErrorCode.MESSAGE_TOO_LARGE
        assert (await append(b, client_batch([b"v"]))).error_code is ErrorCode.NONE
        await b.delete("orders", 0)  # a topic of the same name later has its own configs
        await create(b)
        assert (await append(b, client_batch([b"v" * 200]))).error_code is ErrorCode.NONE

    sim(lambda: run_broker(log_dirs(tmp_path, 1), body))


def test_deleting_a_log_with_records_renames_it_whole(tmp_path: Path) -> None:
    """A deleted log with records is closed and renamed ``-delete`` with its segment;
    the name is free for a new, empty log."""
    dirs = log_dirs(tmp_path, 1)

    async def body(b: Harness) -> None:
        await create(b)
        await append(b, client_batch([b"a"]))
        deleted = await b.delete("orders", 0)
        assert deleted.renamed_to is not None
        renamed = dirs[0] / deleted.renamed_to
        assert (renamed / "00000000000000000000.log").stat().st_size > 0
        assert b.lm.open_logs == 0
        outcome = (await create(b)).results[0]
        assert outcome.log_end_offset == 0

    sim(lambda: run_broker(dirs, body))


def idempotent(values: list[bytes], sequence: int, epoch: int = 0, pid: int = 7) -> bytes:
    return client_batch(values, producer_id=pid, producer_epoch=epoch, base_sequence=sequence)


def test_idempotent_producer_sequences_are_checked_as_kafka_does(tmp_path: Path) -> None:
    """A retried batch answers its original offsets and writes nothing, a gap is
    OUT_OF_ORDER_SEQUENCE_NUMBER, an older epoch INVALID_PRODUCER_EPOCH, a newer epoch
    must start at sequence 0; after a restart the retained batches are known again."""
    dirs = log_dirs(tmp_path, 1)

    async def first(b: Harness) -> None:
        await create(b)
        assert (await append(b, idempotent([b"a", b"b"], 0))).first_offset == 0
        assert (await append(b, idempotent([b"c"], 2))).first_offset == 2
        retried = await append(b, idempotent([b"a", b"b"], 0))
        assert (retried.error_code, retried.first_offset, retried.log_end_offset) == (
            ErrorCode.NONE,
            0,
            3,
        )
        gap = await append(b, idempotent([b"d"], 5))
        assert gap.error_code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert (await append(b, idempotent([b"d"], 3, epoch=1))).error_code is (
            ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        )
        assert (await append(b, idempotent([b"d"], 0, epoch=1))).first_offset == 3
        old = await append(b, idempotent([b"e"], 1, epoch=0))
        assert old.error_code is ErrorCode.INVALID_PRODUCER_EPOCH
        unknown = await append(b, idempotent([b"f"], 42, pid=8))
        assert unknown.first_offset == 4  # no state for producer 8: any sequence

    async def second(b: Harness) -> None:
        retried = await append(b, idempotent([b"d"], 0, epoch=1))
        assert (retried.first_offset, retried.log_end_offset) == (3, 5)
        assert (await append(b, idempotent([b"g"], 1, epoch=1))).first_offset == 5

    sim(lambda: run_broker(dirs, first))
    sim(lambda: run_broker(dirs, second))


def test_a_fresh_empty_log_is_served_without_opening_it(tmp_path: Path) -> None:
    """Reads, epoch lookups, no-op truncations and offsets of a log created empty are
    answered as the opened log would answer them, with no file opened; a new leader
    epoch rewrites its epoch checkpoint; once opened, the epoch is still there."""
    dirs = log_dirs(tmp_path, 1)

    async def body(b: Harness) -> None:
        await create(b, 0, epoch=2)
        await create(b, 1, epoch=None)
        results = await read(
            b,
            ReadRecords(topic=T, partition=0, offset=0, max_bytes=100),
            ReadRecords(topic=T, partition=1, offset=3, max_bytes=100),
        )
        assert [(r.error_code, r.records, r.log_end_offset) for r in results] == [
            (ErrorCode.NONE, b"", 0),
            (ErrorCode.OFFSET_OUT_OF_RANGE, b"", -1),
        ]
        queries = (
            EpochEndOffsetQuery(topic=T, partition=0, leader_epoch=2),
            EpochEndOffsetQuery(topic=T, partition=0, leader_epoch=1),
            EpochEndOffsetQuery(topic=T, partition=0, leader_epoch=3),
            EpochEndOffsetQuery(topic=T, partition=1, leader_epoch=0),
        )
        found = await b.node.ask(b.lm.ref, LookupOffsets(queries=queries))
        assert isinstance(found, OffsetsFound)
        fresh = [(r.leader_epoch, r.offset) for r in found.results]
        assert fresh == [(2, 0), (1, 0), (-1, -1), (-1, -1)]
        assert b.lm.open_logs == 0
        await b.node.ask(
            b.lm.ref, GetOrCreateLog(topic=T, partition=0, is_new=False, leader_epoch=5)
        )
        assert (dirs[0] / "orders-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n5 0\n"
        assert b.lm.open_logs == 0
        await append(b, client_batch([b"a"]), epoch=5)  # opens it
        assert b.lm.open_logs == 1
        again = await b.node.ask(
            b.lm.ref,
            LookupOffsets(queries=(EpochEndOffsetQuery(topic=T, partition=0, leader_epoch=5),)),
        )
        assert isinstance(again, OffsetsFound)
        assert (again.results[0].leader_epoch, again.results[0].offset) == (5, 1)

    sim(lambda: run_broker(dirs, body))


def test_a_follower_log_over_the_log_manager(tmp_path: Path) -> None:
    """``LogManagerFollowerLog``, the fetchers' port: ``QueryLog`` answers a fresh log's
    offsets and epoch without opening it, then the appended log's; a high watermark with
    no log start to move is only told, a leader's log start above the follower's moves
    it (not past the high watermark)."""

    async def body(b: Harness) -> None:
        await create(b)
        follower = LogManagerFollowerLog(cast(Actor, b.node), b.lm.ref)
        tp = TopicPartition(T, 0)
        assert (await follower.offsets(tp), await follower.latest_epoch(tp)) == ((0, 0), 0)
        assert b.lm.open_logs == 0
        batch = fix_crc(
            set_field(client_batch([b"a", b"b", b"c", b"d"]), "partition_leader_epoch", 3)
        )
        assert await follower.append_as_follower(tp, batch) == (0, 4)
        assert await follower.latest_epoch(tp) == 3
        kept = await follower.update_follower_offsets(
            tp, high_watermark=4, leader_log_start_offset=0, log_start_offset=0
        )
        moved = await follower.update_follower_offsets(
            tp, high_watermark=3, leader_log_start_offset=5, log_start_offset=0
        )
        assert (kept, moved) == (0, 3)
        assert await follower.offsets(tp) == (3, 4)

    sim(lambda: run_broker(log_dirs(tmp_path, 1), body))


class BusyLogManager(Actor):
    """The log manager as a fetcher finds it under load: each ask answered by the real one
    only after ``busy_s`` (virtual) seconds of other work."""

    def __init__(self, log_manager: ActorRef, busy_s: float) -> None:
        super().__init__("busy_log_manager")
        self.log_manager = log_manager
        self.busy_s = busy_s

    async def receive(self, msg: Message, ctx: Context) -> Message | None:
        await self.clock.sleep(self.busy_s)
        return await self.ask(self.log_manager, msg)


def test_a_follower_log_waits_for_a_busy_log_manager(tmp_path: Path) -> None:
    """A follower's local log that answers after a request's timeout (30 s) is slow, not
    failed: Kafka's fetcher thread calls the log and waits, so the port waits too rather
    than turning the late answer into KAFKA_STORAGE_ERROR (which fails the partition)."""

    async def body(b: Harness) -> None:
        await create(b)
        busy = await b.node.spawn(BusyLogManager(b.lm.ref, busy_s=45.0))
        follower = LogManagerFollowerLog(cast(Actor, b.node), busy)
        started = b.node.clock.now()
        assert await follower.offsets(TopicPartition(T, 0)) == (0, 0)
        assert b.node.clock.now() - started >= 45.0

    sim(lambda: run_broker(log_dirs(tmp_path, 1), body))
