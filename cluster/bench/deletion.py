"""The bulk deletion benchmark: the topics of a bulk creation deleted with one DeleteTopics,
measured next to their creation in the same run.

``python -m cluster.bench.deletion --topics 1000`` launches an in-process 3-broker cluster
(no Kafka listeners, log dirs in a temporary directory on ``/dev/shm`` when there is one)
with ``log.segment.delete.delay.ms=0`` and ``log.initial.task.delay.ms=0``, so that a
renamed log is removed at once, creates the topics with one CreateTopics (the request of
the creation bench), then deletes them all with one DeleteTopics and prints one JSON
object: the creation's time until CreateTopics answered and until every log directory
existed, and the deletion's time until DeleteTopics answered, until no topic znode was left
(``/brokers/topics``, ``/config/topics`` and ``/admin/delete_topics`` empty of them), until
every log directory was renamed ``-delete`` and until every log directory was gone, each
also in the process's CPU time (``*_cpu``: on a loaded machine the wall times swing with
the other work, the CPU spent much less).
``--zookeeper HOST:PORT[/chroot]`` runs the same against ZooKeeper; when the (first)
server is a process of this machine, its CPU time until no topic znode was left is
measured too (``delete_znodes_server_cpu``). ``cluster.bench.suite``
runs it in a child process as row [11]; ``--profile FILE`` writes a cProfile of the run.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final

import anyio
import msgspec

from actors.broker.broker import broker_ref
from actors.log.manager import DELETE_SUFFIX
from actors.zk.store import StoreSession
from cluster.bench.jvm_cpu import listener_pid, process_cpu_seconds
from cluster.bench.process import exit_with
from cluster.bench.scale import bulk_create_request, fast_tmp, print_result, wait_controller
from cluster.cli.progress import CountProgress, count_progress
from cluster.launch.cluster import Cluster, ClusterSpec
from cluster.logging import configure_logging
from protocol.errors import ErrorCode
from protocol.kafka_api import (
    CreateTopicsResponseData,
    DeleteTopicsRequestData,
    DeleteTopicsResponseData,
)

__all__ = ["DeletionResult", "main", "run_deletion"]

# Bench code measures wall time on purpose: it is the one place that must.
_now = time.perf_counter
_cpu = time.process_time

TIMEOUT_S = float(os.environ.get("KEMU_BENCH_TIMEOUT", "600"))
"""How long each phase may take before the run fails."""

POLL_S = 0.02
"""How often the znodes are looked at while waiting."""

LOG_POLL_S = 0.1
"""How often the log directories are listed while waiting for the creation's logs."""

PREFIX = "bench"

TOPIC_PARENTS = ("/brokers/topics", "/config/topics", "/admin/delete_topics")
"""Where a topic has znodes (``/admin/delete_topics`` only while it is being deleted)."""


class DeletionResult(msgspec.Struct, frozen=True, kw_only=True):
    """What one run measured (printed as JSON by ``main``); seconds from each request."""

    topics: int
    partitions: int  # in all, over every topic
    replication_factor: int
    store: str  # "embedded" or "zookeeper"
    create_answered: float  # until CreateTopics answered
    create_logs: float  # until every log directory existed
    delete_answered: float  # until DeleteTopics answered
    delete_znodes: float  # until no znode of the topics was left
    delete_renamed: float  # until every log directory was renamed -delete
    delete_removed: float  # until no log directory of the topics was left
    # The same in the process's CPU time (every thread: the polling's included).
    create_logs_cpu: float
    delete_znodes_cpu: float
    delete_renamed_cpu: float
    delete_removed_cpu: float
    # The ZooKeeper server's CPU time from DeleteTopics until no topic znode was left, when
    # it is a process of this machine that can be read (None otherwise).
    delete_znodes_server_cpu: float | None = None


async def run_deletion(
    topics: int,
    partitions: int,
    rf: int,
    *,
    zookeeper: str | None = None,
    root: str | None = None,
    quiet: bool = True,
) -> DeletionResult:
    """Create then delete ``topics`` topics of ``partitions`` partitions (replication factor
    ``rf``) on 3 brokers, timing each phase. Unless ``quiet``, a progress line counts the
    phases done (``PHASES``) on a terminal stderr."""
    config = {"log.segment.delete.delay.ms": "0", "log.initial.task.delay.ms": "0"}
    with tempfile.TemporaryDirectory(prefix="kemu-deletion-", dir=root or fast_tmp()) as tmp:
        spec = ClusterSpec(
            brokers=3,
            base_port=0,
            log_dir=Path(tmp),
            zookeeper=zookeeper,
            listeners=False,
            config=config,
        )
        logs = topics * partitions * rf
        store = "embedded" if zookeeper is None else "zookeeper"
        with _phases(store, quiet) as line:
            async with anyio.create_task_group() as tg:
                cluster: Cluster = await tg.start(Cluster(spec).run)
                assert cluster.store is not None
                session = await cluster.store.open_session(name="bench")
                controller = await wait_controller(cluster)
                node, ref = cluster.nodes[controller], broker_ref(controller)
                log_dirs = [Path(tmp) / f"broker-{b}" for b in sorted(cluster.nodes)]

                t0, cpu0 = _now(), _cpu()
                created = await node.ask(
                    ref,
                    bulk_create_request(PREFIX, topics, partitions, rf, TIMEOUT_S),
                    timeout=TIMEOUT_S,
                )
                create_answered = _now() - t0
                line.advance()
                assert isinstance(created, CreateTopicsResponseData)
                failed = [t for t in created.topics if t.error_code != ErrorCode.NONE]
                if failed:
                    raise RuntimeError(f"{len(failed)} topics failed, e.g. {failed[0]}")
                await _until(lambda: _logs(log_dirs) == (logs, 0))
                create_logs, create_logs_cpu = _now() - t0, _cpu() - cpu0
                line.advance()

                names = tuple(created_topic.name for created_topic in created.topics)
                watch = _LogWatch.of(log_dirs)
                others = await _other_children(session)
                server = _local_server(zookeeper)
                server0 = _server_cpu(server)
                t0, cpu0 = _now(), _cpu()
                deleted = await node.ask(
                    ref,
                    DeleteTopicsRequestData(topics=names, timeout_ms=int(TIMEOUT_S * 1000)),
                    timeout=TIMEOUT_S,
                )
                delete_answered = _now() - t0
                line.advance()
                assert isinstance(deleted, DeleteTopicsResponseData)
                failed_deletes = [t for t in deleted.topics if t.error_code != ErrorCode.NONE]
                if failed_deletes:
                    raise RuntimeError(
                        f"{len(failed_deletes)} deletions failed: {failed_deletes[0]}"
                    )
                times: dict[str, tuple[float, float, float | None]] = {}
                async with anyio.create_task_group() as waits:
                    timed = functools.partial(_timed, times, line, t0, cpu0, server)
                    waits.start_soon(timed, "znodes", _no_topic_znodes(session, others))
                    waits.start_soon(_logs_gone, watch, timed)
                await session.close()
                tg.cancel_scope.cancel()
    return DeletionResult(
        topics=topics,
        partitions=topics * partitions,
        replication_factor=rf,
        store=store,
        create_answered=round(create_answered, 3),
        create_logs=round(create_logs, 3),
        delete_answered=round(delete_answered, 3),
        delete_znodes=round(times["znodes"][0], 3),
        delete_renamed=round(times["renamed"][0], 3),
        delete_removed=round(times["removed"][0], 3),
        create_logs_cpu=round(create_logs_cpu, 3),
        delete_znodes_cpu=round(times["znodes"][1], 3),
        delete_renamed_cpu=round(times["renamed"][1], 3),
        delete_removed_cpu=round(times["removed"][1], 3),
        delete_znodes_server_cpu=_spent(times["znodes"][2], server0),
    )


def _logs(log_dirs: list[Path]) -> tuple[int, int]:
    """The bench's log directories in ``log_dirs``: (still named ``<topic>-<p>``, renamed
    ``-delete``). Counted in the joined listing, without a Python step per name: the bench
    runs in the process it measures, and tens of thousands of names ten times a second
    would take a noticeable share of it."""
    live = renamed = 0
    for log_dir in log_dirs:
        listing = "\n" + "\n".join(os.listdir(log_dir)) + "\n"
        deleted = listing.count(DELETE_SUFFIX + "\n")
        live += listing.count("\n" + PREFIX) - deleted
        renamed += deleted
    return live, renamed


class _LogWatch:
    """The deletion's log directories, watched without listing them at every poll: the
    bench runs in the process it measures, and listing 3 x 10,000 names ten times a second
    took about a tenth of the deletion's CPU and of its event loop, which the creation
    (answered once its logs exist) does not pay.

    ``pending`` holds each log dir's live logs, in name order. A poll looks at the last
    one only (one ``lstat`` per dir: a broker renames its logs in partition order, which
    is name order here); once it is gone the dir is listed, and the dir is done when the
    listing shows no live log (else the live ones are pending again). Looking at every
    path from the end instead cost one ``lstat`` per log, 30,000 in all, about 0.1 s of
    the process's CPU. Removal is read from each log dir's link count (a directory's
    ``st_nlink`` is 2 plus its subdirectories on tmpfs and ext4), used only when it
    matched the listing when the watch started; otherwise the log dirs are listed."""

    def __init__(
        self, log_dirs: list[Path], pending: dict[Path, list[str]], links: dict[Path, int]
    ):
        self.log_dirs = log_dirs
        self.pending = pending  # each log dir with logs left: their names, sorted
        self.links = links  # each log dir's link count once its logs are gone, if reliable

    @classmethod
    def of(cls, log_dirs: list[Path]) -> _LogWatch:
        pending: dict[Path, list[str]] = {}
        links: dict[Path, int] = {}
        for log_dir in log_dirs:
            names = os.listdir(log_dir)
            logs = _live_logs(names)
            if logs:
                pending[log_dir] = logs
            subdirs = sum(1 for n in names if (log_dir / n).is_dir())
            if os.stat(log_dir).st_nlink == 2 + subdirs:
                links[log_dir] = 2 + subdirs - len(logs)
        return cls(log_dirs, pending, links)

    def renamed(self) -> bool:
        for log_dir, logs in list(self.pending.items()):
            if os.path.lexists(os.path.join(log_dir, logs[-1])):
                continue
            left = _live_logs(os.listdir(log_dir))
            if left:
                self.pending[log_dir] = left
            else:
                del self.pending[log_dir]
        return not self.pending

    def removed(self) -> bool:
        if len(self.links) < len(self.log_dirs):
            return _logs(self.log_dirs) == (0, 0)
        return all(os.stat(d).st_nlink == n for d, n in self.links.items())


def _live_logs(names: list[str]) -> list[str]:
    """The bench's logs among ``names`` still under their own name, sorted."""
    return sorted(n for n in names if n.startswith(PREFIX) and not n.endswith(DELETE_SUFFIX))


async def _logs_gone(
    watch: _LogWatch, timed: Callable[[str, Awaitable[None]], Awaitable[None]]
) -> None:
    """Time "renamed" (no log left under its own name) and "removed" (no log left)."""
    await timed("renamed", _until(watch.renamed, POLL_S))
    await timed("removed", _until(watch.removed, POLL_S))


async def _until(condition: Callable[[], bool], every: float = LOG_POLL_S) -> None:
    """Poll ``condition`` (bench code: nothing traced tells when a directory is gone)."""
    with anyio.fail_after(TIMEOUT_S):
        while not condition():  # noqa: ASYNC110 - a file system condition, polled
            await anyio.sleep(every)


async def _other_children(session: StoreSession) -> dict[str, int]:
    """How many children of each of ``TOPIC_PARENTS`` are not the bench's."""
    others: dict[str, int] = {}
    for parent in TOPIC_PARENTS:
        if await session.exists(parent):
            children = await session.children(parent)
            others[parent] = sum(1 for c in children if not c.startswith(PREFIX))
        else:
            others[parent] = 0
    return others


async def _no_topic_znodes(session: StoreSession, others: dict[str, int]) -> None:
    """Wait until no znode of the bench's topics is left: each poll reads the parents'
    stats (their child counts, against ``others``), and lists the children only once the
    counts say none is left (a getChildren of 1,000 names fifty times a second, on the
    process measured and on ZooKeeper, would weigh on what is measured)."""
    with anyio.fail_after(TIMEOUT_S):
        while True:
            counted = True
            for parent in TOPIC_PARENTS:
                stat = await session.exists(parent)
                if stat is not None and stat.num_children > others[parent]:
                    counted = False
                    break
            if counted:
                left = 0
                for parent in TOPIC_PARENTS:
                    if await session.exists(parent):
                        children = await session.children(parent)
                        left += sum(1 for c in children if c.startswith(PREFIX))
                if left == 0:
                    return
            await anyio.sleep(POLL_S)


async def _timed(
    times: dict[str, tuple[float, float, float | None]],
    line: CountProgress,
    t0: float,
    cpu0: float,
    server: int | None,
    name: str,
    wait: Awaitable[None],
) -> None:
    """Wait for ``wait``; record the wall and CPU seconds since ``t0``/``cpu0`` and the
    ZooKeeper server's CPU time (its process ``server``, if known) under ``name``."""
    await wait
    times[name] = (_now() - t0, _cpu() - cpu0, _server_cpu(server))
    line.advance()


_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


def _local_server(zookeeper: str | None) -> int | None:
    """The process of the first ZooKeeper server of ``zookeeper`` (a connect string) when
    it listens on this machine's loopback, else None."""
    if zookeeper is None:
        return None
    first = zookeeper.partition("/")[0].split(",")[0]
    host, _, port = first.rpartition(":")
    if host not in _LOOPBACK or not port.isdigit():
        return None
    return listener_pid(int(port))


def _server_cpu(server: int | None) -> float | None:
    return None if server is None else process_cpu_seconds(server)


def local_server_cpu(zookeeper: str) -> Callable[[], float | None]:
    """A reader of the CPU seconds so far of the ZooKeeper server of ``zookeeper`` (its
    first server, when a process of this machine: None otherwise)."""
    return functools.partial(_server_cpu, _local_server(zookeeper))


def _spent(now: float | None, then: float | None) -> float | None:
    return None if now is None or then is None else round(now - then, 3)


PHASES: Final = 6
"""What a run waits for: CreateTopics answered, every log created, DeleteTopics answered,
no topic znode left, every log renamed, every log removed."""


def _phases(store: str, quiet: bool) -> contextlib.AbstractContextManager[CountProgress]:
    return count_progress(PHASES, label=f"[11] {store}", unit="phases", quiet=quiet)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="kemu-bench-deletion", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=10, help="partitions per topic")
    parser.add_argument("--replication-factor", type=int, default=3)
    parser.add_argument(
        "--zookeeper", metavar="HOST:PORT", help="ZooKeeper instead of the embedded store"
    )
    parser.add_argument("--profile", metavar="FILE", help="write a cProfile of the run here")
    parser.add_argument("--no-uvloop", action="store_true", help="measure on asyncio's own loop")
    parser.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    args = parser.parse_args(argv)
    if min(args.topics, args.partitions, args.replication_factor) < 1:
        parser.error("--topics, --partitions and --replication-factor must be >= 1")
    if args.replication_factor > 3:
        parser.error("--replication-factor cannot exceed the 3 brokers")
    configure_logging()  # WARNING to stderr, as `kemu up` does by default

    def run() -> DeletionResult:
        return anyio.run(
            lambda: run_deletion(
                args.topics,
                args.partitions,
                args.replication_factor,
                zookeeper=args.zookeeper,
                quiet=args.quiet,
            ),
            backend="asyncio",
            backend_options={"use_uvloop": not args.no_uvloop},
        )

    return print_result(run, args.profile)


if __name__ == "__main__":
    exit_with(main)
