"""The scale benchmark: a large cluster in one process, e.g. 100 brokers holding 100,000
partitions.

``python -m cluster.bench.scale --brokers 100 --topics 1000 --partitions 100`` launches an
in-process cluster (embedded store, no Kafka listeners, log dirs in a temporary directory
on ``/dev/shm`` when there is one, removed afterwards), creates the topics with one
CreateTopics request (the path of the creation bench in ``cluster.bench.suite``), waits until
every partition is online, and prints one JSON object: the time to launch, the time to
create (and the CPU time the process spent meanwhile, which a busy machine does not
inflate as it does the wall time), the time until every partition was online, and the
process's peak resident set size. ``cluster.bench.suite`` runs it in a child process, so
that no other row's memory counts towards the peak. ``--profile FILE`` writes a cProfile of
the whole run to ``FILE``.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

import anyio
import msgspec

from actors.broker.broker import broker_ref
from actors.runtime.clock import Clock
from cluster.bench.process import exit_with
from cluster.cli.progress import CountProgress, count_progress
from cluster.launch.cluster import Cluster, ClusterError, ClusterSpec
from cluster.logging import configure_logging
from protocol.errors import ErrorCode
from protocol.ids import TopicName
from protocol.kafka_api import (
    CreatableTopic,
    CreateTopicsRequestData,
    CreateTopicsResponseData,
    MetadataRequestData,
    MetadataResponseData,
)

__all__ = [
    "ScaleResult",
    "bulk_create_request",
    "fast_tmp",
    "main",
    "print_result",
    "run_scale",
    "wait_controller",
]

# Bench code measures wall time on purpose: it is the one place that must.
_now = time.perf_counter

TIMEOUT_S = 600.0
"""How long the creation (and the wait for every partition) may take before it fails."""

CONTROLLER_WAIT_S = 120.0
"""How long a bench waits for its cluster's brokers to name their controller."""

_CONTROLLER_POLL_S = 0.05
"""Between two asks of the brokers' status while none names a controller."""


class ScaleResult(msgspec.Struct, frozen=True, kw_only=True):
    """What one scale run measured (printed as JSON by ``main``)."""

    brokers: int
    topics: int
    partitions: int  # in all, over every topic
    replication_factor: int
    launch_seconds: float  # from nothing to a ready cluster (as ``kemu up`` waits)
    create_seconds: float  # one CreateTopics of every topic, until it is answered
    create_cpu_seconds: float  # the process's CPU time (user + system) in that span
    online_seconds: float  # from the request until every partition has a live leader
    online_partitions: int  # partitions with a leader, as the last check saw them
    peak_rss_bytes: int  # the process's high-water resident set size


def peak_rss_bytes() -> int:
    """The process's peak resident set size (``ru_maxrss`` is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def bulk_create_request(
    prefix: str, topics: int, partitions: int, rf: int, timeout: float
) -> CreateTopicsRequestData:
    """One CreateTopics request for ``topics`` topics ``<prefix>-<i>`` of ``partitions``
    partitions each, replication factor ``rf`` (the bulk creation the benches measure)."""
    return CreateTopicsRequestData(
        topics=tuple(
            CreatableTopic(
                name=TopicName(f"{prefix}-{i}"), num_partitions=partitions, replication_factor=rf
            )
            for i in range(topics)
        ),
        timeout_ms=int(timeout * 1000),
    )


def fast_tmp() -> str | None:
    """Log dirs on tmpfs when there is one: the benchmarks measure kemu, not the disk
    (on these machines /tmp can cost 2 ms per mkdir+create, /dev/shm 20 µs)."""
    shm = "/dev/shm"  # noqa: S108 - a private mkdtemp inside it, removed after the run
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None


class _Controlled(Protocol):
    """What ``wait_controller`` reads of a cluster (``Cluster``)."""

    @property
    def nodes(self) -> Mapping[int, object]: ...

    @property
    def clock(self) -> Clock: ...

    async def controller_id(self) -> int: ...


async def wait_controller(cluster: _Controlled, timeout: float = CONTROLLER_WAIT_S) -> int:
    """The id of the controller the cluster's brokers name, once they name one of its
    brokers. ``Cluster.controller_id`` answers -1 while none does (no broker answered its
    status within its own deadline on a busy machine, or the controller is being elected
    again): the benches ask it again until ``timeout`` seconds have passed, then raise
    ``ClusterError`` saying so, instead of sending their request to a broker -1."""
    last = -1
    try:
        with anyio.fail_after(timeout):
            while True:
                last = await cluster.controller_id()
                if last in cluster.nodes:
                    return last
                await cluster.clock.sleep(_CONTROLLER_POLL_S)
    except TimeoutError:
        raise ClusterError(
            f"no broker named a controller among brokers {sorted(cluster.nodes)}"
            f" within {timeout:g} s (the last answer: {last})"
        ) from None


async def run_scale(
    brokers: int,
    topics: int,
    partitions: int,
    rf: int,
    *,
    root: str | None = None,
    quiet: bool = True,
) -> ScaleResult:
    """Launch ``brokers`` brokers, create ``topics`` topics of ``partitions`` partitions
    each (replication factor ``rf``) and wait until every partition is online. The log
    dirs go in a temporary directory under ``root`` (by default ``fast_tmp()``). Unless
    ``quiet``, a progress line counts the partitions online on a terminal stderr."""
    with tempfile.TemporaryDirectory(prefix="kemu-scale-", dir=root or fast_tmp()) as tmp:
        spec = ClusterSpec(brokers=brokers, base_port=0, log_dir=Path(tmp), listeners=False)
        async with anyio.create_task_group() as tg:
            t0 = _now()
            cluster: Cluster = await tg.start(Cluster(spec).run)
            launched = _now() - t0
            controller = await wait_controller(cluster)
            request = bulk_create_request("scale", topics, partitions, rf, TIMEOUT_S)
            t0, cpu0 = _now(), time.process_time()
            reply = await cluster.nodes[controller].ask(
                broker_ref(controller), request, timeout=TIMEOUT_S
            )
            created, created_cpu = _now() - t0, time.process_time() - cpu0
            assert isinstance(reply, CreateTopicsResponseData)
            failed = [t for t in reply.topics if t.error_code != ErrorCode.NONE]
            if failed:
                raise RuntimeError(f"{len(failed)} topics failed, e.g. {failed[0]}")
            with count_progress(
                topics * partitions, label="[8] online", unit="partitions", quiet=quiet
            ) as line:
                online = await _wait_online(cluster, topics * partitions, line)
            online_seconds = _now() - t0
            tg.cancel_scope.cancel()
    return ScaleResult(
        brokers=brokers,
        topics=topics,
        partitions=topics * partitions,
        replication_factor=rf,
        launch_seconds=round(launched, 3),
        create_seconds=round(created, 3),
        create_cpu_seconds=round(created_cpu, 3),
        online_seconds=round(online_seconds, 3),
        online_partitions=online,
        peak_rss_bytes=peak_rss_bytes(),
    )


async def _wait_online(cluster: Cluster, expected: int, line: CountProgress) -> int:
    """Until a broker's metadata, asked over Metadata, shows ``expected`` partitions each
    led by a live broker with no error; the count of such partitions. A broker other than
    the one that answered the creation is asked: the controller's updates reach them all."""
    asked = max(cluster.nodes)
    with anyio.fail_after(TIMEOUT_S):
        while True:
            reply = await cluster.nodes[asked].ask(
                broker_ref(asked), MetadataRequestData(topics=None), timeout=TIMEOUT_S
            )
            assert isinstance(reply, MetadataResponseData)
            live = {b.broker_id for b in reply.brokers}
            online = sum(
                1
                for topic in reply.topics
                for p in topic.partitions
                if p.error_code == ErrorCode.NONE and p.leader in live
            )
            line.set(online)
            if online >= expected:
                return online
            await anyio.sleep(0.1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kemu-bench-scale", description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=100)
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=100, help="partitions per topic")
    parser.add_argument("--replication-factor", type=int, default=3)
    parser.add_argument("--profile", metavar="FILE", help="write a cProfile of the run here")
    parser.add_argument("--no-uvloop", action="store_true", help="measure on asyncio's own loop")
    parser.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    args = parser.parse_args(argv)
    if min(args.brokers, args.topics, args.partitions, args.replication_factor) < 1:
        parser.error("--brokers, --topics, --partitions and --replication-factor must be >= 1")
    if args.replication_factor > args.brokers:
        parser.error("--replication-factor cannot exceed --brokers")
    configure_logging()  # WARNING to stderr, as `kemu up` does by default

    def run() -> ScaleResult:
        return anyio.run(
            functools.partial(run_scale, quiet=args.quiet),
            args.brokers,
            args.topics,
            args.partitions,
            args.replication_factor,
            backend="asyncio",
            backend_options={"use_uvloop": not args.no_uvloop},
        )

    return print_result(run, args.profile)


def print_result(run: Callable[[], msgspec.Struct], profile: str | None) -> int:
    """Run ``run`` (under cProfile, written to ``profile``, when given) and print its result
    as one JSON line, which is what ``cluster.bench.suite`` reads of a child row; 0."""
    if profile:
        profiler = cProfile.Profile()
        result = profiler.runcall(run)
        profiler.dump_stats(profile)
    else:
        result = run()
    sys.stdout.write(msgspec.json.encode(result).decode() + "\n")
    return 0


if __name__ == "__main__":
    exit_with(main)
