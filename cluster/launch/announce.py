"""What a launcher does once its brokers are up, the same for ``kemu up`` in one process and
with ``--processes``: serve the control endpoint, write the first cluster file, say so, and
print the readiness table; and at exit, remove the cluster file while it is still its own."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from anyio.abc import TaskGroup

from actors.runtime.clock import Clock
from actors.runtime.tracer import Tracer
from cluster.launch.cluster import ClusterSpec
from cluster.launch.connect import ClusterFile, ClusterFileError, unregister_store
from cluster.launch.control import Launcher, Publisher, serve_control
from cluster.launch.prometheus import serve_prometheus

METRICS_HOST = "127.0.0.1"
"""The Prometheus endpoint listens on loopback only: its metrics need no secret to read."""


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
    advertised = spec.advertised_ports(ports)  # where clients find each broker
    for broker_id in sorted(pids):
        endpoint = f"{spec.advertised_host}:{advertised.get(broker_id, '-')}"
        log_dir = spec.log_dir / f"broker-{broker_id}"
        lines.append(f"{broker_id:<7}{endpoint:<22}{pids[broker_id]:<9}{log_dir}")
    lines.append(f"controller: broker {controller}")
    if store_address:
        lines.append(f"store: {store_address}")
    return "\n".join(lines)


async def announce_ready(
    control_tg: TaskGroup,
    launcher: Launcher,
    publisher: Publisher,
    *,
    secret: bytes,
    tracer: Tracer,
    clock: Clock,
    ports: Mapping[int, int],
    pids: Mapping[int, int],
    elapsed: float,
    store_address: str | None,
    on_ready: Callable[[], None],
) -> None:
    """Serve the control endpoint and the Prometheus endpoint in ``control_tg`` (their
    addresses go into the cluster file), write the first cluster file, call ``on_ready``,
    and print the readiness table and where the cluster file and the metrics are."""
    spec = publisher.spec
    publisher.metrics = await control_tg.start(
        functools.partial(
            serve_prometheus,
            launcher.cluster_metrics,
            host=METRICS_HOST,
            port=spec.metrics_port,
        )
    )
    publisher.control = await control_tg.start(
        functools.partial(
            serve_control,
            launcher,
            publisher,
            host=spec.host,
            secret=secret,
            tracer=tracer,
            clock=clock,
        )
    )
    status = await launcher.cluster_status()
    publisher(status, None)
    on_ready()
    table = render_table(
        spec,
        ports=ports,
        pids=pids,
        controller=status.controller_id,
        elapsed=elapsed,
        store_address=store_address,
    )
    print(table, flush=True)
    print(f"metrics: http://{publisher.metrics}/metrics", flush=True)
    print(f"cluster file: {publisher.path}\nCtrl-C stops the cluster.", flush=True)


def release_cluster_file(cluster_file: Path) -> None:
    """Remove the cluster file at exit, unless another launcher has written it since."""
    try:
        info: ClusterFile | None = ClusterFile.read(cluster_file)
    except ClusterFileError:
        info = None  # ours, half-written or gone
    if info is None or info.pid == os.getpid():
        if info is not None:
            unregister_store(info.store, cluster_file)
        cluster_file.unlink(missing_ok=True)
