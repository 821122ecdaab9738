"""A running in-process 3-broker cluster without automatic leader rebalance (only an
election asked for moves leaders), for the tests of the controller's admin APIs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio

from actors.runtime.tracer import Tracer
from cluster.launch.cluster import Cluster, ClusterSpec


async def quiet_three_brokers(tmp_path: Path) -> AsyncIterator[Cluster]:
    spec = ClusterSpec(
        brokers=3,
        base_port=0,
        log_dir=tmp_path / "logs",
        config={"zookeeper.session.timeout.ms": "6000", "auto.leader.rebalance.enable": "false"},
    )
    async with anyio.create_task_group() as tg:
        running: Cluster = await tg.start(Cluster(spec, tracer=Tracer()).run)
        yield running
        tg.cancel_scope.cancel()
