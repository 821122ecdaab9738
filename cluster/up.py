"""``kemu up``: launch a local cluster, print its readiness table, write the cluster file,
run until SIGINT/SIGTERM, then shut down cleanly."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path

import anyio

from actors.trace import Tracer
from cluster.cluster import Cluster, ClusterSpec
from cluster.connect import BrokerEntry, ClusterFile
from cluster.trace import JsonlTraceWriter
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
    tracer = Tracer()
    writer = None
    if trace is not None:
        writer = JsonlTraceWriter(trace, TraceHeader(run="kemu-up", seed=spec.seed, clock="real"))
        tracer.add_sink(writer)
    started = time.perf_counter()  # wall time of the launch, for the user
    cluster = Cluster(spec, tracer=tracer)
    try:
        async with anyio.create_task_group() as tg:
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                await tg.start(cluster.run)
                elapsed = time.perf_counter() - started
                controller = await cluster.controller_id()
                status = await cluster.status(controller)
                ClusterFile(
                    store=cluster.store_address or "",
                    brokers=tuple(
                        BrokerEntry(
                            id=b,
                            host=spec.host,
                            port=cluster.ports.get(b, 0),
                            pid=os.getpid(),
                            log_dir=str(spec.log_dir / f"broker-{b}"),
                            rack=spec.racks.get(b),
                        )
                        for b in sorted(cluster.nodes)
                    ),
                    controller=controller,
                    cluster_id=status.cluster_id if status else "",
                    pid=os.getpid(),
                ).write(cluster_file)
                print(
                    render_table(
                        spec,
                        ports=cluster.ports,
                        pids={b: os.getpid() for b in cluster.nodes},
                        controller=controller,
                        elapsed=elapsed,
                        store_address=cluster.store_address,
                    ),
                    flush=True,
                )
                print(f"cluster file: {cluster_file}\nCtrl-C stops the cluster.", flush=True)
                async for signum in signals:
                    print(f"\nkemu: {signal.Signals(signum).name}: stopping", flush=True)
                    break
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
