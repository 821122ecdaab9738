"""The log manager on real temporary directories, on the virtual clock.

Each test runs a node with a ``LogManager`` over ``tmp_path`` log dirs, wired through the
direct in-memory wire, and talks to it with ``node.ask``. Time only moves when the test
sleeps on the node's virtual clock or waits for a traced event with a deadline.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from pathlib import Path

import anyio
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from actors.log.disk import Disk, DiskOp, FaultyDisk
from actors.log.manager import (
    DEFAULT_CHECKPOINT_INTERVAL,
    LogDirKind,
    _CheckpointRows,
    _uuid4_hex,
    checkpoint_file,
    delete_dir_name,
    meta_properties,
    offsets_checkpoint,
    parse_log_dir_name,
)
from actors.runtime.clock import RealClock
from protocol.base import Message
from protocol.control import TopicPartition
from protocol.errors import ErrorCode, FatalNodeError, RemoteError
from protocol.ids import TopicName
from protocol.log import (
    DeleteLog,
    DeleteLogs,
    DescribeLogDirs,
    GetOrCreateLog,
    LogConfigOverrides,
    LogCreated,
    LogDeleted,
    LogDirFailed,
    LogsConfigured,
    LogsDeleted,
)
from tests.support.log_manager import (
    CLUSTER_ID,
    DELETE_NAME,
    Harness,
    log_dirs,
    run_broker,
    sim,
)


async def storage_error(broker: Harness, msg: Message) -> RemoteError:
    with pytest.raises(RemoteError) as info:
        await broker.node.ask(broker.lm.ref, msg)
    assert info.value.code is ErrorCode.KAFKA_STORAGE_ERROR
    return info.value


# ------------------------------------------------------------------------- creation


def test_each_log_goes_to_the_log_dir_with_the_fewest_logs(tmp_path: Path) -> None:
    """A new log lands in the dir hosting the fewest logs, ties going to the first configured."""
    dirs = log_dirs(tmp_path)

    async def body(b: Harness) -> None:
        placed = [Path((await b.create("t", p)).log_dir) for p in range(3)]
        assert placed == dirs  # all empty, then one each: configured order breaks the ties
        await b.create("u", 0)  # tie again: first dir
        await b.delete("t", 1)  # the second dir is now the emptiest
        assert Path((await b.create("v", 0)).log_dir) == dirs[1]
        assert Path((await b.create("w", 0)).log_dir) == dirs[1]  # ties with the third
        assert Path((await b.create("x", 0)).log_dir) == dirs[2]
        again = await b.create("t", 0, is_new=False)
        assert again == LogCreated(
            topic=TopicName("t"), partition=0, log_dir=str(dirs[0]), created=False
        )
        status = await b.dir_status()
        assert [d.log_count for d in status.dirs] == [2, 2, 2]
        assert status.offline == ()

    sim(lambda: run_broker(dirs, body))


def test_a_new_log_and_its_log_dir_hold_the_files_kafka_writes(tmp_path: Path) -> None:
    """A log dir has Kafka's segment, epoch, offset checkpoint and meta.properties files."""
    dirs = log_dirs(tmp_path, 1)
    d = dirs[0]

    async def body(b: Harness) -> None:
        await b.create("orders", 1)
        await b.create("orders", 0)
        log = d / "orders-0"
        assert sorted(p.name for p in log.iterdir()) == [
            "00000000000000000000.index",
            "00000000000000000000.log",
            "00000000000000000000.timeindex",
            "leader-epoch-checkpoint",
        ]
        for name in ("log", "index", "timeindex"):
            assert (log / f"00000000000000000000.{name}").read_bytes() == b""
        # No epoch yet (created without a leader epoch, as a follower's is): empty, as
        # Kafka's CheckpointFile creates it; a new leader's holds its epoch at offset 0.
        assert (log / "leader-epoch-checkpoint").read_bytes() == b""
        await b.checkpointed()  # creations are checkpointed on a timer
        offsets = "0\n2\norders 0 0\norders 1 0\n"
        assert (d / "recovery-point-offset-checkpoint").read_text() == offsets
        assert (d / "replication-offset-checkpoint").read_text() == offsets
        # Kafka lists a log here only once its start offset passed its first segment's base.
        assert (d / "log-start-offset-checkpoint").read_text() == "0\n0\n"
        # Virtual time starts at 2021-01-01T00:00:00Z, a Friday.
        assert (d / "meta.properties").read_text() == (
            f"#\n#Fri Jan 01 00:00:00 UTC 2021\nbroker.id=0\nversion=0\ncluster.id={CLUSTER_ID}\n"
        )
        assert not list(d.glob("**/*.tmp"))
        created = b.log_dir_events("create")
        assert [e.fields["result"] for e in created] == ["ok", "ok"]
        assert created[1].fields == {
            "dir": str(log),
            "log_dir": str(d),
            "topic": "orders",
            "partition": 0,
            "result": "ok",
        }
        await b.create("orders", 2, leader_epoch=3)
        assert (d / "orders-2" / "leader-epoch-checkpoint").read_text() == "0\n1\n3 0\n"

    sim(lambda: run_broker(dirs, body))


def test_logs_on_disk_are_loaded_at_start_up(tmp_path: Path) -> None:
    """A restarted log manager hosts the logs it finds on disk, in the dirs they are in."""
    dirs = log_dirs(tmp_path)

    async def first(b: Harness) -> None:
        for p in range(4):
            await b.create("t", p)

    async def second(b: Harness) -> None:
        listing = await b.listing()
        assert [(h.topic, h.partition, Path(h.log_dir), h.online) for h in listing.logs] == [
            ("t", 0, dirs[0], True),
            ("t", 1, dirs[1], True),
            ("t", 2, dirs[2], True),
            ("t", 3, dirs[0], True),
        ]
        assert listing.pending_deletion == ()
        assert (await b.create("t", 2, is_new=False)).created is False
        assert len(b.log_dir_events("load")) == 4

    async def both() -> None:
        await run_broker(dirs, first)
        await run_broker(dirs, second)

    sim(both)


def test_checkpoints_are_rewritten_only_in_the_affected_log_dir(tmp_path: Path) -> None:
    """Deleting a log rewrites the checkpoints of its own log dir and no other."""
    dirs = log_dirs(tmp_path)

    async def body(b: Harness) -> None:
        for p in range(6):
            await b.create("test-a", p)
        await b.checkpointed()
        before = len(b.sink.events)
        await b.delete("test-a", 1)
        rewritten = [e.fields["dir"] for e in b.sink.events[before:] if e.type == "checkpoint"]
        assert rewritten == [str(dirs[1])]
        assert (dirs[1] / "recovery-point-offset-checkpoint").read_text() == ("0\n1\ntest-a 4 0\n")
        assert (dirs[0] / "recovery-point-offset-checkpoint").read_text() == (
            "0\n2\ntest-a 0 0\ntest-a 3 0\n"
        )

    sim(lambda: run_broker(dirs, body))


def test_creations_are_checkpointed_together_once_per_interval(tmp_path: Path) -> None:
    """Logs created within one checkpoint interval cost one checkpoint write per log dir,
    on the node's clock, as Kafka's scheduled checkpoint task does; a clean stop writes
    what is still owed."""
    dirs = log_dirs(tmp_path, 2)

    def checkpoints(b: Harness) -> list[tuple[float, str]]:
        return [(e.ts, e.fields["dir"]) for e in b.log_dir_events("checkpoint")]

    async def body(b: Harness) -> None:
        at_start = checkpoints(b)  # each dir's checkpoints are written at start-up
        assert at_start == [(0.0, str(dirs[0])), (0.0, str(dirs[1]))]
        for p in range(4):
            await b.create("t", p)
            await b.sleep_until(b.now() + 1.0)
        assert checkpoints(b) == at_start
        assert (dirs[0] / "replication-offset-checkpoint").read_text() == "0\n0\n"
        await b.checkpointed()
        flushed = checkpoints(b)[len(at_start) :]
        assert flushed == [(DEFAULT_CHECKPOINT_INTERVAL, str(d)) for d in dirs]
        assert (dirs[0] / "replication-offset-checkpoint").read_text() == "0\n2\nt 0 0\nt 2 0\n"
        assert (dirs[1] / "recovery-point-offset-checkpoint").read_text() == "0\n2\nt 1 0\nt 3 0\n"
        await b.sleep_until(3 * DEFAULT_CHECKPOINT_INTERVAL)
        assert len(checkpoints(b)) == len(at_start) + 2  # nothing new: no timer, no write
        await b.create("u", 0)  # owed at the stop below, before its timer fires

    sim(lambda: run_broker(dirs, body))
    assert (dirs[0] / "recovery-point-offset-checkpoint").read_text() == (
        "0\n3\nt 0 0\nt 2 0\nu 0 0\n"
    )


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["add", "remove", "set", "render"]),
            st.sampled_from(["a", "b", "a.b", "a-1"]),
            st.integers(0, 12),
            st.integers(0, 3),
        ),
        max_size=80,
    )
)
@example([("add", "a", 0, 1), ("render", "a", 0, 0), ("remove", "a", 0, 0), ("add", "a", 0, 2)])
def test_checkpoint_rows_render_what_offsets_checkpoint_writes(
    steps: list[tuple[str, str, int, int]],
) -> None:
    """However logs come, go (and come back) and change offsets between renders, the rows
    render as ``offsets_checkpoint`` of the hosted logs (sorted by topic, then
    partition)."""
    rows = _CheckpointRows()
    hosted: dict[TopicPartition, int] = {}
    for action, topic, partition, offset in steps:
        tp = TopicPartition(TopicName(topic), partition)
        if action == "add" and tp not in hosted:
            rows.add(tp, offset)
            hosted[tp] = offset
        elif action == "remove" and tp in hosted:
            rows.remove(tp)
            del hosted[tp]
        elif action == "set" and tp in hosted:
            rows.set(tp, offset)
            hosted[tp] = offset
        elif action == "render":
            assert rows.render() == offsets_checkpoint(hosted.items())
        assert len(rows) == len(hosted)
        assert all(rows.get(h) == o for h, o in hosted.items())
    assert rows.render() == offsets_checkpoint(hosted.items())


@given(st.integers(0, 2**128 - 1))
def test_a_deleted_logs_unique_id_is_a_version_4_uuid_of_the_bits_drawn(bits: int) -> None:
    """The id in ``<topic>-<p>.<id>-delete`` is ``UUID(int=bits, version=4).hex``."""
    assert _uuid4_hex(bits) == uuid.UUID(int=bits, version=4).hex


def test_with_no_checkpoint_interval_each_request_is_checkpointed_at_once(
    tmp_path: Path,
) -> None:
    """``checkpoint_interval=0`` rewrites a log dir's checkpoints right after the request."""
    dirs = log_dirs(tmp_path, 1)

    async def body(b: Harness) -> None:
        await b.create("t", 0)
        await b.listing()  # answered after the flush queued behind the creation
        assert (dirs[0] / "recovery-point-offset-checkpoint").read_text() == "0\n1\nt 0 0\n"
        assert [e.ts for e in b.log_dir_events("checkpoint")] == [0.0, 0.0]

    sim(lambda: run_broker(dirs, body, checkpoint_interval=0.0))


# ------------------------------------------------------------------------- deletion


def test_delete_renames_at_once_and_removes_exactly_after_the_delay(tmp_path: Path) -> None:
    """DeleteLog renames to <t>-<p>.<uuid>-delete now and removes it file.delete.delay.ms later."""
    dirs = log_dirs(tmp_path, 1)
    d = dirs[0]

    async def body(b: Harness) -> None:
        await b.create("t", 0)
        await b.sleep_until(5.0)
        deleted = await b.delete("t", 0)
        assert deleted.log_dir == str(d)
        assert deleted.renamed_to is not None
        match = DELETE_NAME.match(deleted.renamed_to)
        assert match is not None
        assert match["tp"] == "t-0"
        assert not (d / "t-0").exists()
        assert (d / deleted.renamed_to / "00000000000000000000.log").exists()
        assert (d / "recovery-point-offset-checkpoint").read_text() == "0\n0\n"
        listing = await b.listing()
        assert listing.logs == ()
        assert [(p.name, p.due) for p in listing.pending_deletion] == [(deleted.renamed_to, 65.0)]

        await b.sleep_until(64.999)
        assert (d / deleted.renamed_to).exists()
        removed = await b.removed(deleted.renamed_to)
        assert removed.ts == pytest.approx(65.0, abs=1e-6)
        assert not (d / deleted.renamed_to).exists()
        assert sorted(p.name for p in d.iterdir() if p.is_dir()) == []
        assert (await b.listing()).pending_deletion == ()
        assert b.lm.pending_deletions == 0

        # Deleting a log that is not hosted is a no-op, as Kafka's asyncDelete.
        assert await b.delete("t", 0) == LogDeleted(topic=TopicName("t"), partition=0)

    sim(lambda: run_broker(dirs, body))


def test_a_never_opened_log_is_removed_whole_whatever_else_its_directory_holds(
    tmp_path: Path,
) -> None:
    """A deleted log made and never opened is removed by the names of the files it was
    made with (``Disk.rmtree``'s ``names``); whatever else its directory holds (a stray
    file, a subdirectory) and a file of those names gone meanwhile do not keep it: the
    directory is then listed and removed whole, as any other. A log opened since is
    removed by listing its directory."""
    dirs = log_dirs(tmp_path, 1)
    d = dirs[0]
    asked: list[tuple[str, tuple[str, ...] | None]] = []

    class Recording(Disk):
        def rmtree(self, path: Path | str, names: Iterable[str] | None = None) -> None:
            asked.append((Path(path).name, None if names is None else tuple(names)))
            super().rmtree(path, names)

    async def body(b: Harness) -> None:
        for p in range(4):
            await b.create("t", p)
        (d / "t-1" / "stray.txt").write_bytes(b"x")
        (d / "t-2" / "sub").mkdir()
        (d / "t-2" / "sub" / "f").write_bytes(b"y")
        (d / "t-3" / "00000000000000000000.index").unlink()
        opened = DescribeLogDirs(partitions=(TopicPartition(TopicName("t"), 0),))
        await b.node.ask(b.lm.ref, opened)  # opens t-0
        renamed = [await b.delete("t", p) for p in range(4)]
        for deleted in renamed:
            assert deleted.renamed_to is not None
            await b.removed(deleted.renamed_to)
        assert sorted(p.name for p in d.iterdir() if p.is_dir()) == []
        made = (
            "00000000000000000000.log",
            "00000000000000000000.index",
            "00000000000000000000.timeindex",
            "leader-epoch-checkpoint",
        )
        assert sorted(names is not None for _, names in asked) == [False, True, True, True]
        assert all(names in (None, made) for _, names in asked)

    sim(lambda: run_broker(dirs, body, disk=Recording()))


def test_with_a_zero_delay_removal_waits_only_for_the_first_sweep(tmp_path: Path) -> None:
    """With file.delete.delay.ms 0 a log goes 30 s after start-up, or at once after that."""
    dirs = log_dirs(tmp_path, 1)
    d = dirs[0]

    async def body(b: Harness) -> None:
        await b.create("a", 0)
        await b.create("b", 0)
        first = (await b.delete("a", 0)).renamed_to
        assert first is not None
        await b.sleep_until(29.9)
        assert (d / first).exists()
        assert (await b.removed(first)).ts == pytest.approx(30.0, abs=1e-6)

        await b.sleep_until(40.0)
        second = (await b.delete("b", 0)).renamed_to
        assert second is not None
        assert (await b.removed(second)).ts == pytest.approx(40.0, abs=1e-6)
        assert not (d / second).exists()

    sim(lambda: run_broker(dirs, body, segment_delete_delay=0.0))


def test_a_batch_of_deletions_checkpoints_each_log_dir_once(tmp_path: Path) -> None:
    """DeleteLogs (one StopReplica's deletions, Kafka's ``asyncDelete`` of a set): every
    log renamed, one checkpoint rewrite per log dir touched instead of one per log, each
    log's outcome in request order (a log not hosted: no dir, no error), the renamed logs
    queued and removed after the delay; logs outside the batch stay."""
    dirs = log_dirs(tmp_path, 2)

    async def body(b: Harness) -> None:
        for p in range(6):
            await b.create("t", p)
        await b.create("keep", 0)
        hosted = {p: (await b.create("t", p, is_new=False)).log_dir for p in range(6)}
        before = len(b.log_dir_events("checkpoint"))
        asked = (5, 0, 9, 3, 1)
        reply = await b.node.ask(
            b.lm.ref,
            DeleteLogs(logs=tuple(DeleteLog(topic=TopicName("t"), partition=p) for p in asked)),
        )
        assert isinstance(reply, LogsDeleted)
        assert [(r.partition, r.error_code, r.log_dir) for r in reply.results] == [
            (p, ErrorCode.NONE, hosted.get(p)) for p in asked
        ]
        assert reply.results[2].renamed_to is None  # partition 9 was never hosted
        checkpoints = b.log_dir_events("checkpoint")[before:]
        assert sorted(e.fields["dir"] for e in checkpoints) == sorted(
            {hosted[p] for p in asked if p in hosted}
        )
        listing = await b.listing()
        assert sorted((log.topic, log.partition) for log in listing.logs) == [
            ("keep", 0),
            ("t", 2),
            ("t", 4),
        ]
        renamed = [r.renamed_to for r in reply.results if r.renamed_to is not None]
        assert sorted(p.name for p in listing.pending_deletion) == sorted(renamed)
        for name in renamed:
            await b.removed(name)
        assert b.lm.pending_deletions == 0

    sim(lambda: run_broker(dirs, body, segment_delete_delay=0.0))


def test_a_deleted_log_waits_the_broker_delay_whatever_its_topics_override(
    tmp_path: Path,
) -> None:
    """``LogManager.deleteLogs`` waits ``currentDefaultConfig.fileDeleteDelayMs`` for every
    deleted log: a topic whose config overrides ``file.delete.delay.ms`` (its log's config,
    and the per-topic delay of its retention's segment files) is removed after the broker's
    60 s, as a topic without the override, alone or in a batch."""
    dirs = log_dirs(tmp_path, 2)

    async def body(b: Harness) -> None:
        configured = await b.node.ask(
            b.lm.ref,
            LogConfigOverrides(
                topic=TopicName("fast"), configs=(("file.delete.delay.ms", "5000"),)
            ),
        )
        assert isinstance(configured, LogsConfigured)
        await b.create("fast", 0)
        await b.create("fast", 1)
        await b.create("slow", 0)
        fast = (await b.delete("fast", 0)).renamed_to
        slow = (await b.delete("slow", 0)).renamed_to
        batch = await b.node.ask(
            b.lm.ref, DeleteLogs(logs=(DeleteLog(topic=TopicName("fast"), partition=1),))
        )
        assert isinstance(batch, LogsDeleted)
        batched = batch.results[0].renamed_to
        assert fast is not None
        assert slow is not None
        assert batched is not None
        for name in (fast, slow, batched):
            assert (await b.removed(name)).ts == pytest.approx(60.0, abs=1e-6)

    sim(lambda: run_broker(dirs, body, initial_task_delay=0.0))


def test_a_failed_removal_moves_to_the_end_of_the_queue_and_is_retried(tmp_path: Path) -> None:
    """A removal that fails is traced, queued behind the others and done on a later sweep."""
    dirs = log_dirs(tmp_path, 1)
    d = dirs[0]
    disk = FaultyDisk()

    async def body(b: Harness) -> None:
        await b.create("t", 0)
        await b.create("u", 0)
        first = (await b.delete("t", 0)).renamed_to
        assert first is not None
        disk.fail(d / first, [DiskOp.RMTREE], times=1)
        await b.sleep_until(30.0)
        second = (await b.delete("u", 0)).renamed_to
        assert second is not None

        failed = await b.sink.wait_for(
            lambda e: e.type == "remove" and e.fields["result"] == "OSError", 600.0
        )
        assert failed.ts == pytest.approx(60.0, abs=1e-6)
        assert failed.fields["attempts"] == 1
        assert failed.fields["retry_at"] == pytest.approx(120.0)
        queue = (await b.listing()).pending_deletion
        assert [(p.name, p.attempts) for p in queue] == [(second, 0), (first, 1)]
        assert (d / first).exists()
        assert (await b.dir_status()).offline == ()  # a failed removal is retried, not fatal

        assert (await b.removed(second)).ts == pytest.approx(90.0, abs=1e-6)
        assert (await b.removed(first)).ts == pytest.approx(120.0, abs=1e-6)
        assert not (d / first).exists()
        assert disk.injected == [(DiskOp.RMTREE, d / first)]

    sim(lambda: run_broker(dirs, body, disk=disk))


def test_delete_dirs_found_at_start_up_are_removed_after_the_delay(tmp_path: Path) -> None:
    """A -delete dir left by a previous run is queued again, its delay counted from start-up."""
    dirs = log_dirs(tmp_path, 2)
    names: list[str] = []

    async def first(b: Harness) -> None:
        await b.create("t", 0)
        await b.create("t", 1)
        for p in (0, 1):
            renamed = (await b.delete("t", p)).renamed_to
            assert renamed is not None
            names.append(renamed)
        await b.sleep_until(10.0)  # stop long before they are due (60 s)

    async def second(b: Harness) -> None:
        started = b.now()
        assert started == pytest.approx(10.0)
        loaded = b.log_dir_events("load_deleted")
        assert sorted(Path(e.fields["dir"]).name for e in loaded) == sorted(names)
        assert [e.fields["due"] for e in loaded] == [pytest.approx(70.0)] * 2
        listing = await b.listing()
        assert listing.logs == ()
        assert len(listing.pending_deletion) == 2
        await b.sleep_until(69.9)
        assert all((d / n).exists() for d, n in zip(dirs, names, strict=True))
        for d, n in zip(dirs, names, strict=True):
            assert (await b.removed(n)).ts == pytest.approx(70.0, abs=1e-6)
            assert not (d / n).exists()

    async def both() -> None:
        await run_broker(dirs, first)
        await run_broker(dirs, second)

    sim(both)


def test_an_overly_long_topic_is_cut_to_fit_the_delete_dir_name(tmp_path: Path) -> None:
    """A 253-char topic's log can be created, renamed within 255 chars, reloaded and removed."""
    dirs = log_dirs(tmp_path, 1)
    d = dirs[0]
    topic = "x" * 253
    renamed: list[str] = []

    async def first(b: Harness) -> None:
        await b.create(topic, 0)
        assert (d / f"{topic}-0").is_dir()  # 255 characters, the limit
        name = (await b.delete(topic, 0)).renamed_to
        assert name is not None
        assert len(name) == 255
        assert name.startswith("x" * 213 + "-0.")
        assert (d / name).is_dir()
        renamed.append(name)

    async def second(b: Harness) -> None:
        (name,) = renamed
        [loaded] = b.log_dir_events("load_deleted")
        assert loaded.fields["topic"] == "x" * 213
        assert (await b.removed(name)).ts == pytest.approx(60.0, abs=1e-6)

    async def both() -> None:
        await run_broker(dirs, first)
        await run_broker(dirs, second)

    sim(both)


# ---------------------------------------------------------------------- disk faults


def test_a_failed_rename_answers_storage_error_and_takes_the_dir_offline(tmp_path: Path) -> None:
    """A rename that fails answers KAFKA_STORAGE_ERROR, and its log dir goes offline."""
    dirs = log_dirs(tmp_path)
    disk = FaultyDisk()

    async def body(b: Harness) -> None:
        for p in range(3):
            await b.create("t", p)
        disk.fail(dirs[1], [DiskOp.RENAME])
        error = await storage_error(b, DeleteLog(topic=TopicName("t"), partition=1))
        assert str(dirs[1]) in error.detail
        assert (dirs[1] / "t-1").is_dir()  # nothing renamed

        status = await b.dir_status()
        assert status.offline == (str(dirs[1]),)
        assert "renaming" in (status.dirs[1].error or "")
        [offline] = b.log_dir_events("offline")
        assert offline.fields["log_dir"] == str(dirs[1])
        assert offline.fields["result"] == "OSError"
        [rename] = b.log_dir_events("rename")
        assert rename.fields["result"] == "OSError"
        assert rename.fields["topic"] == "t"
        assert rename.fields["partition"] == 1
        assert b.recorder.seen == [
            LogDirFailed(log_dir=str(dirs[1]), reason=status.dirs[1].error or "")
        ]

        hosted = {(h.partition, h.online) for h in (await b.listing()).logs}
        assert hosted == {(0, True), (1, False), (2, True)}
        # The log in the offline dir, and any log that might be there, are storage errors.
        await storage_error(b, GetOrCreateLog(topic=TopicName("t"), partition=1, is_new=True))
        await storage_error(b, DeleteLog(topic=TopicName("t"), partition=1))
        await storage_error(b, GetOrCreateLog(topic=TopicName("u"), partition=0, is_new=False))
        await storage_error(b, DeleteLog(topic=TopicName("u"), partition=0))
        # A new log still finds an online dir; the others keep working.
        assert Path((await b.create("u", 0)).log_dir) in (dirs[0], dirs[2])
        assert (await b.delete("t", 2)).renamed_to is not None
        assert b.node.running

    sim(lambda: run_broker(dirs, body, disk=disk))


def test_a_failed_mkdir_takes_the_dir_offline_and_the_next_dir_is_used(tmp_path: Path) -> None:
    """When mkdir fails in the least-loaded dir, that dir goes offline and the next one is used."""
    dirs = log_dirs(tmp_path)
    disk = FaultyDisk()

    async def body(b: Harness) -> None:
        disk.fail(dirs[0], [DiskOp.MKDIR])
        created = await b.create("t", 0)
        assert Path(created.log_dir) == dirs[1]
        assert not (dirs[0] / "t-0").exists()
        assert (dirs[1] / "t-0").is_dir()
        assert (await b.dir_status()).offline == (str(dirs[0]),)
        attempts = [(e.fields["log_dir"], e.fields["result"]) for e in b.log_dir_events("create")]
        assert attempts == [(str(dirs[0]), "OSError"), (str(dirs[1]), "ok")]
        assert b.log_dir_events("create")[0].fields["step"] == "mkdir"
        assert Path((await b.create("t", 1)).log_dir) == dirs[2]

    sim(lambda: run_broker(dirs, body, disk=disk))


def test_failed_checkpoint_or_segment_writes_take_the_dir_offline(tmp_path: Path) -> None:
    """A failed checkpoint write after a rename, or a failed new segment, takes its dir offline."""
    dirs = log_dirs(tmp_path, 3)
    disk = FaultyDisk()

    async def body(b: Harness) -> None:
        for p in range(3):
            await b.create("t", p)
        disk.fail(dirs[0] / "recovery-point-offset-checkpoint", [DiskOp.WRITE_FILE])
        deleted = await b.delete("t", 0)  # renamed: the delete itself succeeded, as in Kafka
        assert deleted.renamed_to is not None
        assert (dirs[0] / deleted.renamed_to).is_dir()
        [offline] = b.log_dir_events("offline")
        assert offline.fields["log_dir"] == str(dirs[0])
        assert (await b.listing()).pending_deletion == ()  # nothing is removed from a failed dir

        disk.fail(dirs[1], [DiskOp.WRITE_FILE])
        error = await storage_error(
            b, GetOrCreateLog(topic=TopicName("u"), partition=0, is_new=True)
        )
        assert str(dirs[1]) in error.detail
        assert (await b.dir_status()).offline == (str(dirs[0]), str(dirs[1]))
        assert [e.fields.get("step") for e in b.log_dir_events("create")][-1] == "files"
        assert Path((await b.create("u", 0)).log_dir) == dirs[2]

    sim(lambda: run_broker(dirs, body, disk=disk))


def test_when_every_log_dir_fails_the_request_gets_a_storage_error_and_the_broker_halts(
    tmp_path: Path,
) -> None:
    """With its last log dir failed, the broker answers KAFKA_STORAGE_ERROR, then halts."""
    dirs = log_dirs(tmp_path, 1)
    disk = FaultyDisk()

    async def body(b: Harness) -> None:
        disk.fail(dirs[0], [DiskOp.MKDIR])
        error = await storage_error(
            b, GetOrCreateLog(topic=TopicName("t"), partition=0, is_new=True)
        )
        assert "No log directories available" in error.detail
        await b.sink.wait_for(lambda e: e.type == "node_crashed", 1.0)
        [fatal] = b.sink.of("error", "fatal_error")
        assert "all log dirs" in fatal.fields["detail"]

    async def run() -> None:
        await run_broker(dirs, body, disk=disk)

    sim(run)


def test_an_unwritable_log_dir_at_start_up_is_offline(tmp_path: Path) -> None:
    """A log dir that cannot be written at start-up is offline: new logs avoid it, old ones fail."""
    dirs = log_dirs(tmp_path, 2)
    disk = FaultyDisk()
    disk.unwritable(dirs[0])

    async def body(b: Harness) -> None:
        status = await b.dir_status()
        assert status.offline == (str(dirs[0]),)
        assert not dirs[0].exists()
        assert Path((await b.create("t", 0)).log_dir) == dirs[1]
        assert Path((await b.create("t", 1)).log_dir) == dirs[1]
        await storage_error(b, GetOrCreateLog(topic=TopicName("t"), partition=2, is_new=False))
        [init_failed] = [e for e in b.log_dir_events("init") if e.fields["result"] != "ok"]
        assert init_failed.fields["result"] == "OSError"

    sim(lambda: run_broker(dirs, body, disk=disk))


def test_a_directory_that_is_not_a_log_stops_the_broker_at_start_up(tmp_path: Path) -> None:
    """A stray directory such as lost+found in a log dir makes start-up fail, as in Kafka."""
    dirs = log_dirs(tmp_path, 1)
    (dirs[0] / "lost+found").mkdir(parents=True)

    async def body(b: Harness) -> None:
        raise AssertionError("the broker must not start")

    async def run() -> None:
        with pytest.RaisesGroup(
            pytest.RaisesExc(FatalNodeError, match="lost\\+found"), flatten_subgroups=True
        ):
            await run_broker(dirs, body)

    sim(run)


# ---------------------------------------------------------------------- determinism


def test_the_same_seed_gives_the_same_delete_dir_names(tmp_path: Path) -> None:
    """Two runs with the same seed rename logs to the same -delete names; another seed does not."""

    def names_for(seed: int, root: Path) -> list[str]:
        out: list[str] = []

        async def body(b: Harness) -> None:
            for p in range(3):
                await b.create("t", p)
            for p in range(3):
                renamed = (await b.delete("t", p)).renamed_to
                assert renamed is not None
                out.append(renamed)

        sim(lambda: run_broker(log_dirs(root), body, seed=seed))
        return out

    first = names_for(7, tmp_path / "a")
    assert first == names_for(7, tmp_path / "b")
    assert first != names_for(8, tmp_path / "c")
    assert len(set(first)) == 3


def test_a_broker_run_again_on_its_log_dirs_draws_new_delete_dir_names(tmp_path: Path) -> None:
    """Outside a deterministic run a -delete name is random per run, as Kafka's UUID: a
    broker started again with the same seed on the same log dir, its last run's -delete dir
    still there (a crash), deletes a log of the same name without colliding with it."""
    dirs = log_dirs(tmp_path)
    names: list[str] = []

    async def body(b: Harness) -> None:
        await b.create("t", 0)
        renamed = (await b.delete("t", 0)).renamed_to
        assert renamed is not None
        names.append(renamed)

    for _ in range(2):
        anyio.run(lambda: run_broker(dirs, body, clock=RealClock()))
    assert len(set(names)) == 2
    assert all((dirs[0] / name).is_dir() for name in names)


# ---------------------------------------------------------------------- pure parts


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("t-0", (TopicPartition(TopicName("t"), 0), LogDirKind.LIVE)),
        ("my-topic-12", (TopicPartition(TopicName("my-topic"), 12), LogDirKind.LIVE)),
        (
            "a.b-3." + "f" * 32 + "-delete",
            (TopicPartition(TopicName("a.b"), 3), LogDirKind.DELETED),
        ),
        ("t-1." + "0" * 32 + "-future", (TopicPartition(TopicName("t"), 1), LogDirKind.FUTURE)),
        ("lost+found", None),
        ("t", None),
        ("-1", None),
        ("t-x", None),
        ("t-0-delete", None),
        ("t-0.id with space-delete", None),
    ],
)
def test_log_dir_names_parse_as_kafka_parses_them(
    name: str, expected: tuple[TopicPartition, LogDirKind] | None
) -> None:
    """Directory names parse like Log.parseTopicPartitionName, and others are refused."""
    if expected is None:
        with pytest.raises(ValueError, match="is not"):
            parse_log_dir_name(name)
    else:
        assert parse_log_dir_name(name) == expected


def test_helpers_build_kafkas_names_and_formats() -> None:
    """Delete-dir names, checkpoint text and meta.properties follow Kafka."""
    tp = TopicPartition(TopicName("t"), 4)
    assert delete_dir_name(tp, "ab" * 16) == "t-4." + "ab" * 16 + "-delete"
    assert checkpoint_file(["a 0 5"]) == b"0\n1\na 0 5\n"
    assert (
        meta_properties(3, None, 0) == b"#\n#Thu Jan 01 00:00:00 UTC 1970\nbroker.id=3\nversion=0\n"
    )


def test_removing_a_renamed_log_takes_its_files_and_any_subdirectory(tmp_path: Path) -> None:
    log = tmp_path / "t-0.0123-delete"
    (log / "nested" / "deeper").mkdir(parents=True)
    for name in ("00000000000000000000.log", "00000000000000000000.index", "nested/x"):
        (log / name).write_bytes(b"data")
    Disk().rmtree(log)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(FileNotFoundError):
        Disk().rmtree(log)


def test_removal_refuses_a_symlink_and_leaves_what_it_points_to(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    (target / "keep.log").write_bytes(b"")
    link = tmp_path / "t-0.0123-delete"
    link.symlink_to(target, target_is_directory=True)
    with pytest.raises(NotADirectoryError):
        Disk().rmtree(link)
    assert (target / "keep.log").exists()
    assert link.is_symlink()
