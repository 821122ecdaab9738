"""``kemu up``: launch a local cluster, print its readiness table, write the cluster file,
serve the control endpoint of ``kemu broker`` (``cluster.launch.control``), run until
SIGINT/SIGTERM, then shut down cleanly."""

from __future__ import annotations

import functools
import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path

import anyio

from actors.controller.recording import CONTROLLER_INPUTS
from actors.runtime.tracer import Tracer
from cluster.launch.cluster import Cluster, ClusterSpec
from cluster.launch.control import ClusterLauncher, Publisher, serve_control
from cluster.trace_files import JsonlTraceWriter
from protocol.trace import TraceHeader


def render_table(
    spec: ClusterSpec,
    *,
    ports: Mapping[int, int],
    pids: Mapping[int, int],
    controller: int,
    elapsed: float,
    store_address: str | None,
) -> str:
    """The readiness table of ``kemu up``: one line per broker (its Kafka endpoint, the
    process it runs in, its log dir), the controller and the store."""
    store = "ZooKeeper at " + spec.zookeeper if spec.zookeeper else "the embedded store"
    lines = [
        f"kemu: {spec.brokers} brokers ready in {elapsed:.2f}s on {store}",
        f"{'BROKER':<7}{'ENDPOINT':<22}{'PID':<9}LOG DIR",
    ]
    for broker_id in sorted(pids):
        endpoint = f"{spec.host}:{ports.get(broker_id, '-')}"
        log_dir = spec.log_dir / f"broker-{broker_id}"
        lines.append(f"{broker_id:<7}{endpoint:<22}{pids[broker_id]:<9}{log_dir}")
    lines.append(f"controller: broker {controller}")
    if store_address:
        lines.append(f"store: {store_address}")
    return "\n".join(lines)


async def run_up(spec: ClusterSpec, *, cluster_file: Path, trace: Path | None) -> int:
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
                publisher = Publisher(cluster_file, spec, store=cluster.store_address or "")
                async with anyio.create_task_group() as control_tg:
                    publisher.control = await control_tg.start(
                        functools.partial(
                            serve_control,
                            launcher,
                            publisher,
                            host=spec.host,
                            tracer=tracer,
                            clock=cluster.clock,
                        )
                    )
                    status = await launcher.cluster_status()
                    publisher(status, None)
                    print(
                        render_table(
                            spec,
                            ports=cluster.ports,
                            pids={b: os.getpid() for b in cluster.nodes},
                            controller=status.controller_id,
                            elapsed=elapsed,
                            store_address=cluster.store_address,
                        ),
                        flush=True,
                    )
                    print(f"cluster file: {cluster_file}\nCtrl-C stops the cluster.", flush=True)
                    async for signum in signals:
                        print(f"\nkemu: {signal.Signals(signum).name}: stopping", flush=True)
                        break
                    launcher.stopping = True  # no more `kemu broker` commands
                    control_tg.cancel_scope.cancel()
                for broker_id in sorted(cluster.nodes, reverse=True):
                    if cluster.nodes[broker_id].running:
                        cluster.stop_broker(broker_id)
                tg.cancel_scope.cancel()
    finally:
        cluster_file.unlink(missing_ok=True)  # noqa: ASYNC240 - one small local file, at exit
        if writer is not None:
            writer.close()
    print("kemu: stopped", flush=True)
    return 0
