"""An in-process cluster on the virtual clock with a client node and every trace event in
a sink: what the integration tests of replication drive their bodies against."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

import anyio

from actors.runtime.actor import Node
from actors.runtime.clock import VirtualClock, run_virtual
from actors.runtime.tracer import MemorySink, Tracer
from cluster.launch.cluster import Cluster, ClusterSpec

Body = Callable[[Cluster, Node, VirtualClock, MemorySink], Awaitable[None]]
"""A test's body: the running cluster, the client node, the clock and the trace sink."""


def run_with_client(
    tmp_path: Path, body: Body, *, brokers: int = 3, config: Mapping[str, str] | None = None
) -> None:
    """``body`` against ``brokers`` brokers (no listeners, broker ``config``), logs under
    ``tmp_path``; the cluster stops when it returns."""
    clock = VirtualClock()

    async def main() -> None:
        sink = MemorySink()
        tracer = Tracer()
        tracer.add_sink(sink)
        spec = ClusterSpec(
            brokers=brokers,
            base_port=0,
            log_dir=tmp_path / "logs",
            listeners=False,
            config=dict(config or {}),
        )
        async with anyio.create_task_group() as tg:
            cluster: Cluster = await tg.start(Cluster(spec, tracer=tracer, clock=clock).run)
            assert cluster.network is not None
            client = Node("client", attach=cluster.network.attach, tracer=tracer, clock=clock)
            await tg.start(client.run)
            await body(cluster, client, clock, sink)
            tg.cancel_scope.cancel()

    run_virtual(main)
