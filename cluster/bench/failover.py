"""The failover benchmark: a controlled shutdown and a controller crash on a large cluster.

``python -m cluster.bench.failover`` launches an in-process cluster of 10 brokers
(embedded store, no Kafka listeners, log dirs in a temporary directory on ``/dev/shm``
when there is one) with ``zookeeper.session.timeout.ms=500``, creates 1,000 topics of 100
partitions, replication factor 3 (every broker the preferred leader of 10,000 of them),
waits until every partition is online, then:

1. stops a broker that is not the controller gracefully and times its controlled
   shutdown: from the stop until the controller moved every leadership away (the
   broker's ControlledShutdown answered with none left, Kafka's
   ``KafkaController.doControlledShutdown``), and until the broker had stopped;
2. crashes the controller and times, from its session's expiry (its ``/controller``
   znode deleted, seen through a watch), until another broker is the controller
   (``/controller`` created again), until another broker knows it (its metadata cache,
   told by the new controller's first UpdateMetadata) and until every partition is led
   by a live broker in the Metadata of a broker that is neither the old controller nor
   the new one.

Each phase's times come with the process's CPU seconds over it (the brokers, the
controller and the store share the process: on a loaded machine the CPU is the figure
that compares) and the CPU seconds its full (generation 2) garbage collections took.

A broker's Metadata is read from its metadata cache, which a Metadata request answers
from: the bench looks at the cache each time an UpdateMetadata changed it (``updates``),
and once it shows every partition led, asks a Metadata request to confirm. Polling with
Metadata requests instead, each of 100,000 partitions, would take the event loop the
brokers share for about a second each time.

It prints one JSON object. ``cluster.bench.suite`` runs it in a child process as row [13];
``--profile FILE`` writes a cProfile of the shutdown and the failover (``--profile-phase``
one of them only).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import tempfile
import time
from pathlib import Path
from typing import Any, Final, Literal

import anyio
import msgspec

from actors.broker.broker import Broker, broker_ref
from actors.broker.controlled_shutdown import CONTROLLED_SHUTDOWN_ACTOR, ControlledShutdownActor
from actors.zk import kafka_zk
from actors.zk.store import StoreSession
from cluster.bench.process import exit_with
from cluster.bench.scale import (
    bulk_create_request,
    fast_tmp,
    peak_rss_bytes,
    print_result,
    wait_controller,
)
from cluster.cli.progress import CountProgress, count_progress
from cluster.launch.cluster import Cluster, ClusterSpec
from cluster.logging import configure_logging
from protocol import zkdata
from protocol.errors import ErrorCode
from protocol.ids import BrokerId
from protocol.kafka_api import CreateTopicsResponseData, MetadataRequestData, MetadataResponseData
from protocol.store import WatchEvent

__all__ = ["FailoverResult", "main", "run_failover", "wait_controller_created"]

# Bench code measures wall time on purpose: it is the one place that must.
_now = time.perf_counter
_cpu = time.process_time

TIMEOUT_S = 600.0
"""How long each phase may take before the run fails."""

CACHE_POLL_S = 0.002
"""How long to wait between two looks at whether a broker's metadata cache changed."""

SESSION_TIMEOUT_MS = 500

PHASES: Final = 5
"""What a run waits for: every partition online, the controlled shutdown, the stop, a new
controller, every partition led again."""

Phase = Literal["both", "shutdown", "failover"]
"""What ``--profile`` profiles."""


class FailoverResult(msgspec.Struct, frozen=True, kw_only=True):
    """What one run measured (printed as JSON by ``main``), in seconds."""

    brokers: int
    topics: int
    partitions: int  # in all, over every topic
    replication_factor: int
    session_timeout_ms: int
    create_seconds: float  # one CreateTopics, until every partition was online
    shutdown_leaders: int  # partitions the stopped broker led before its shutdown
    shutdown_moved: float  # from the stop until its leaderships were all moved
    shutdown_stopped: float  # from the stop until the broker had stopped
    shutdown_cpu: float  # the process's CPU seconds from the stop until it had stopped
    shutdown_gc: float  # CPU seconds of full garbage collections over the same
    failover_leaders: int  # partitions the crashed controller led
    session_expiry: float  # from the crash until its session expired
    failover_elected: float  # from the expiry until a new controller was elected
    failover_known: float  # from the expiry until another broker knew the new controller
    failover_online: float  # from the expiry until every partition was led again
    failover_cpu: float  # the process's CPU seconds from the expiry until the same
    failover_gc: float  # CPU seconds of full garbage collections over the same
    peak_rss_bytes: int  # the process's high-water resident set size


async def run_failover(
    brokers: int,
    topics: int,
    partitions: int,
    rf: int,
    *,
    root: str | None = None,
    quiet: bool = True,
    profiler: cProfile.Profile | None = None,
    profile_phase: Phase = "both",
) -> FailoverResult:
    """The run described in the module's docstring. Unless ``quiet``, a progress line
    counts the phases done on a terminal stderr; ``profiler`` is enabled from the stop to
    the end (the launch and the creation left out), or over ``profile_phase`` only."""
    config = {"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS)}
    total = topics * partitions
    with tempfile.TemporaryDirectory(prefix="kemu-failover-", dir=root or fast_tmp()) as tmp:
        spec = ClusterSpec(
            brokers=brokers, base_port=0, log_dir=Path(tmp), listeners=False, config=config
        )
        collections = _FullCollections()
        with _phases(quiet) as line, collections:
            async with anyio.create_task_group() as tg:
                cluster: Cluster = await tg.start(Cluster(spec).run)
                assert cluster.store is not None
                session = await cluster.store.open_session(name="bench")
                controller = await wait_controller(cluster)
                t0 = _now()
                created = await cluster.nodes[controller].ask(
                    broker_ref(controller),
                    bulk_create_request("failover", topics, partitions, rf, TIMEOUT_S),
                    timeout=TIMEOUT_S,
                )
                assert isinstance(created, CreateTopicsResponseData)
                failed = [t for t in created.topics if t.error_code != ErrorCode.NONE]
                if failed:
                    raise RuntimeError(f"{len(failed)} topics failed, e.g. {failed[0]}")
                asked = max(b for b in cluster.nodes if b != controller)
                _, leaders = await _wait_led(cluster, asked, total, dead=())
                create_seconds = _now() - t0
                line.advance()

                # 1. the controlled shutdown of a broker other than the controller
                stopped = min(b for b in cluster.nodes if b != controller)
                shutdown_leaders = sum(1 for leader in leaders if leader == stopped)
                shutdown = cluster.nodes[stopped].actor(CONTROLLED_SHUTDOWN_ACTOR)
                assert isinstance(shutdown, ControlledShutdownActor)
                if profiler is not None and profile_phase != "failover":
                    profiler.enable()
                t0, cpu0, gc0 = _now(), _cpu(), collections.seconds
                cluster.stop_broker(stopped)
                with anyio.fail_after(TIMEOUT_S):
                    while shutdown.succeeded is None:  # noqa: ASYNC110 - set by its on_stop
                        await anyio.sleep(0.001)
                shutdown_moved = _now() - t0
                if not shutdown.succeeded:
                    raise RuntimeError(f"broker {stopped}'s controlled shutdown failed")
                line.advance()
                if not await cluster.wait_stopped(stopped, timeout=TIMEOUT_S):
                    raise RuntimeError(f"broker {stopped} did not stop")
                shutdown_stopped = _now() - t0
                shutdown_cpu, shutdown_gc = _cpu() - cpu0, collections.seconds - gc0
                if profiler is not None and profile_phase == "shutdown":
                    profiler.disable()
                line.advance()

                # 2. the controller crashes; its session expires after the timeout
                asked = max(b for b in cluster.nodes if b not in (controller, stopped))
                _, leaders = await _wait_led(cluster, asked, total, dead=(stopped,))
                failover_leaders = sum(1 for leader in leaders if leader == controller)
                await session.exists(zkdata.CONTROLLER_PATH, watch=True)
                crashed = _now()
                await cluster.crash_broker(controller)
                await _watch_fired(session)
                expired, cpu0, gc0 = _now(), _cpu(), collections.seconds
                if profiler is not None and profile_phase == "failover":
                    profiler.enable()
                await wait_controller_created(session)
                failover_elected = _now() - expired
                line.advance()
                new_controller = await kafka_zk.get_controller_id(session)
                survivors = [b for b in cluster.nodes if b not in (controller, stopped)]
                asked = max(b for b in survivors if b != new_controller)
                with anyio.fail_after(TIMEOUT_S):
                    while True:
                        status = await cluster.status(asked, timeout=TIMEOUT_S)
                        if status is not None and status.controller_id == new_controller:
                            break
                        await anyio.sleep(0.005)
                failover_known = _now() - expired
                led_at, _ = await _wait_led(cluster, asked, total, dead=(stopped, controller))
                failover_online = led_at - expired
                failover_cpu, failover_gc = _cpu() - cpu0, collections.seconds - gc0
                session_expiry = expired - crashed
                if profiler is not None:
                    profiler.disable()
                line.advance()
                await session.close()
                tg.cancel_scope.cancel()
    return FailoverResult(
        brokers=brokers,
        topics=topics,
        partitions=total,
        replication_factor=rf,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        create_seconds=round(create_seconds, 3),
        shutdown_leaders=shutdown_leaders,
        shutdown_moved=round(shutdown_moved, 3),
        shutdown_stopped=round(shutdown_stopped, 3),
        shutdown_cpu=round(shutdown_cpu, 3),
        shutdown_gc=round(shutdown_gc, 3),
        failover_leaders=failover_leaders,
        session_expiry=round(session_expiry, 3),
        failover_elected=round(failover_elected, 3),
        failover_known=round(failover_known, 3),
        failover_online=round(failover_online, 3),
        failover_cpu=round(failover_cpu, 3),
        failover_gc=round(failover_gc, 3),
        peak_rss_bytes=peak_rss_bytes(),
    )


async def wait_controller_created(session: StoreSession) -> None:
    """Until ``/controller`` exists again, after the crashed controller's went with its
    session. A surviving broker may have created it (Kafka's ``KafkaController.elect``,
    on its own watch of the deletion) before the bench's ``exists`` sets the watch: that
    ``exists`` then finds the znode and watches it for a change or deletion, which comes
    only at the next election, so the bench returns at once instead of waiting for it."""
    if await session.exists(zkdata.CONTROLLER_PATH, watch=True) is None:
        await _watch_fired(session)


async def _watch_fired(session: StoreSession) -> None:
    """Until the bench session's one watch fires."""
    with anyio.fail_after(TIMEOUT_S):
        async for event in session.events:
            if isinstance(event, WatchEvent):
                return
    raise RuntimeError("the bench's store session ended")


async def _wait_led(
    cluster: Cluster, asked: int, expected: int, *, dead: tuple[int, ...]
) -> tuple[float, list[BrokerId]]:
    """Until broker ``asked``'s metadata cache shows ``expected`` partitions, each led by
    a broker it lists as live that is not one of ``dead`` (looked at again each time an
    UpdateMetadata changed it); when it first did, and the leaders of its Metadata, asked
    then to confirm it."""
    broker = cluster.nodes[asked].actor("broker")
    assert isinstance(broker, Broker)
    cache = broker.cache
    seen = -1
    with anyio.fail_after(TIMEOUT_S):
        while True:
            if cache.updates != seen:
                seen = cache.updates
                live = set(cache.brokers).difference(dead)
                led = sum(
                    1
                    for partitions in cache.topics.values()
                    for state in partitions.values()
                    if state.leader in live
                )
                if led >= expected:
                    break
            await anyio.sleep(CACHE_POLL_S)
    led_at = _now()
    leaders = await _metadata_leaders(cluster, asked, dead=dead)
    if len(leaders) < expected:
        raise RuntimeError(
            f"broker {asked}'s Metadata shows {len(leaders)} of {expected} partitions led"
            " where its metadata cache showed them all"
        )
    return led_at, leaders


async def _metadata_leaders(
    cluster: Cluster, asked: int, *, dead: tuple[int, ...]
) -> list[BrokerId]:
    """The leader of each partition with no error in broker ``asked``'s Metadata that is
    a broker it lists as live and not one of ``dead``."""
    reply = await cluster.nodes[asked].ask(
        broker_ref(asked), MetadataRequestData(topics=None), timeout=TIMEOUT_S
    )
    assert isinstance(reply, MetadataResponseData)
    live = {b.broker_id for b in reply.brokers}.difference(dead)
    return [
        p.leader
        for topic in reply.topics
        for p in topic.partitions
        if p.error_code == ErrorCode.NONE and p.leader in live
    ]


class _FullCollections:
    """Counts the CPU seconds the garbage collector spends in full (generation 2)
    collections while entered (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._started = _cpu()
        else:
            self.seconds += _cpu() - self._started

    def __enter__(self) -> _FullCollections:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)


def _phases(quiet: bool) -> contextlib.AbstractContextManager[CountProgress]:
    return count_progress(PHASES, label="[13] failover", unit="phases", quiet=quiet)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="kemu-bench-failover", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--brokers", type=int, default=10)
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=100, help="partitions per topic")
    parser.add_argument("--replication-factor", type=int, default=3)
    parser.add_argument(
        "--profile",
        metavar="FILE",
        help="write a cProfile of the shutdown and the failover (not the creation) here",
    )
    parser.add_argument(
        "--log-root",
        metavar="DIR",
        help="where the brokers' log dirs go (a temporary directory in it; by default"
        " /dev/shm when there is one: a run makes about 8 inodes per replica)",
    )
    parser.add_argument(
        "--profile-phase",
        choices=("both", "shutdown", "failover"),
        default="both",
        help="what --profile profiles: the shutdown, the failover (from the expiry) or both",
    )
    parser.add_argument("--no-uvloop", action="store_true", help="measure on asyncio's own loop")
    parser.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    args = parser.parse_args(argv)
    if min(args.topics, args.partitions) < 1:
        parser.error("--topics and --partitions must be >= 1")
    if not 3 <= args.replication_factor <= args.brokers - 2:
        parser.error(
            "--replication-factor must be >= 3 (a partition keeps a replica after two"
            " brokers go) and at most --brokers - 2"
        )
    configure_logging()  # WARNING to stderr, as `kemu up` does by default

    profiler = cProfile.Profile() if args.profile else None

    def run() -> FailoverResult:
        return anyio.run(
            lambda: run_failover(
                args.brokers,
                args.topics,
                args.partitions,
                args.replication_factor,
                root=args.log_root,
                quiet=args.quiet,
                profiler=profiler,
                profile_phase=args.profile_phase,
            ),
            backend="asyncio",
            backend_options={"use_uvloop": not args.no_uvloop},
        )

    code = print_result(run, None)
    if profiler is not None:
        profiler.dump_stats(args.profile)
    return code


if __name__ == "__main__":
    exit_with(main)
