"""``kemu up``: launch a local cluster, print its readiness table, write the cluster file,
serve the control endpoint of ``kemu broker`` (``cluster.launch.control``), run until
SIGINT/SIGTERM (or, with ``--parent-pid``, until the program that started it is gone:
``cluster.launch.watchdog``), then shut down cleanly.

Before anything starts, ``prepare_up`` checks what a start would otherwise find out halfway
(a cluster file that belongs to a running ``kemu up``, a cluster file path that is a
directory or in a directory that does not exist); a start that fails after that is
undone by ``discard_failed_start`` (the log directories it created are removed), so
that the failure is one line and leaves nothing behind.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio

from actors.controller.recording import CONTROLLER_INPUTS
from actors.runtime.tracer import Tracer
from cluster.cli.args import UsageError
from cluster.launch.announce import announce_ready, release_cluster_file
from cluster.launch.cluster import Cluster, ClusterSpec
from cluster.launch.connect import ClusterFile, ClusterFileError
from cluster.launch.control import ClusterLauncher, Publisher
from cluster.launch.watchdog import first_stop
from cluster.trace_files import JsonlTraceWriter
from protocol.trace import TraceHeader


def up_config(brokers: int, given: dict[str, str]) -> dict[str, str]:
    """The broker configs of ``kemu up``: those given with ``--config`` over two
    defaults that Kafka's own ``config/server.properties`` sets for a local cluster,
    ``group.initial.rebalance.delay.ms=0`` (a lone consumer's first rebalance does not
    wait 3 s) and ``offsets.topic.replication.factor`` at most the number of brokers
    (``__consumer_offsets`` can be created on a one- or two-broker cluster; Kafka's
    file says 1, kemu keeps the broker default 3 where there are three brokers)."""
    return {
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.replication.factor": str(min(3, brokers)),
        **given,
    }


@dataclass
class UpStart:
    """What ``prepare_up`` found before a start: the log directory root as it was (so that a
    failed start removes only what it created), and whether the start got as far as a
    ready cluster."""

    log_dir: Path
    log_dir_existed: bool
    ready: bool = False

    def mark_ready(self) -> None:
        self.ready = True


def _is_kemu_process(pid: int) -> bool:
    """Whether ``pid`` is a live process running kemu (a pid in a stale cluster file may
    have been reused by an unrelated process since)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, someone else's: assume the worst
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc: alive is all we know
    return b"kemu" in cmdline or b"cluster.cli" in cmdline


def prepare_up(spec: ClusterSpec, cluster_file: Path, *, default_cluster_file: bool) -> UpStart:
    """Refuse a start that could only fail or harm another cluster: the cluster file of a
    running ``kemu up`` is never taken over (its pid is named), a cluster file path that is
    a directory or lies in a missing directory (other than the default ``.kemu/``) is
    refused. A stale cluster file (its launcher is gone) is taken over."""
    if cluster_file.is_dir():
        raise UsageError(f"--cluster-file {cluster_file} is a directory")
    parent = cluster_file.parent
    if not parent.is_dir():
        if parent.exists() or not default_cluster_file:
            raise UsageError(f"--cluster-file {cluster_file}: no directory {parent}")
        parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # it will hold the secret
    if cluster_file.exists():
        try:
            other = ClusterFile.read(cluster_file)
        except ClusterFileError:
            other = None  # unreadable: not a running cluster's, taken over
        if other is not None and other.pid != os.getpid() and _is_kemu_process(other.pid):
            raise UsageError(
                f"{cluster_file} belongs to a running kemu up (pid {other.pid}): stop it"
                " first, or give this cluster another --cluster-file"
            )
    return UpStart(log_dir=spec.log_dir, log_dir_existed=spec.log_dir.exists())


def discard_failed_start(start: UpStart) -> None:
    """After a start that never got to a ready cluster: remove the log directory root if
    this start created it (a root that existed before is left as it was)."""
    if not start.ready and not start.log_dir_existed:
        shutil.rmtree(start.log_dir, ignore_errors=True)


async def run_up(
    spec: ClusterSpec,
    *,
    cluster_file: Path,
    trace: Path | None,
    on_ready: Callable[[], None] = lambda: None,
    parent_pid: int | None = None,
) -> int:
    """``kemu up``: run until SIGINT/SIGTERM or, with ``parent_pid``, until that process is
    gone (``cluster.launch.watchdog``), then stop cleanly."""
    # A traced cluster records its controllers' inputs, for ``kemu trace replay``.
    tracer = Tracer(details={CONTROLLER_INPUTS} if trace is not None else ())
    writer = None
    if trace is not None:
        writer = JsonlTraceWriter(trace, TraceHeader(run="kemu-up", seed=spec.seed, clock="real"))
        tracer.add_sink(writer)
    started = time.perf_counter()  # wall time of the launch, for the user
    cluster = Cluster(spec, tracer=tracer)
    launcher = ClusterLauncher(cluster)
    try:
        async with anyio.create_task_group() as tg:
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                await tg.start(cluster.run)
                elapsed = time.perf_counter() - started
                publisher = Publisher(
                    cluster_file, spec, store=cluster.store_address or "", secret=cluster.secret
                )

                async def halted(broker_id: int, reason: str) -> None:
                    # As --processes reports a broker process that halts (its exit status 1).
                    print(f"kemu: broker {broker_id} halted: {reason}", file=sys.stderr, flush=True)
                    if publisher.control and not launcher.stopping:
                        publisher(await launcher.cluster_status(), None)

                cluster.on_halt = halted
                async with anyio.create_task_group() as control_tg:
                    await announce_ready(
                        control_tg,
                        launcher,
                        publisher,
                        secret=cluster.secret,
                        tracer=tracer,
                        clock=cluster.clock,
                        ports=cluster.ports,
                        pids={b: os.getpid() for b in cluster.nodes},
                        elapsed=elapsed,
                        store_address=cluster.store_address,
                        on_ready=on_ready,
                    )
                    await first_stop(signals, parent_pid)
                    launcher.stopping = True  # no more `kemu broker` commands
                    control_tg.cancel_scope.cancel()
                cluster.stop_brokers()
                tg.cancel_scope.cancel()
    finally:
        release_cluster_file(cluster_file)
        if writer is not None:
            writer.close()
    print("kemu: stopped", flush=True)
    return 0
