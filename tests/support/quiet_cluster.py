"""A running in-process 3-broker cluster without automatic leader rebalance (only an
election asked for moves leaders), for the tests of the controller's admin APIs."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import anyio

from actors.runtime.tracer import Tracer
from cluster.launch.cluster import Cluster, ClusterSpec
from cluster.launch.zookeeper_server import ZooKeeperServer


async def quiet_three_brokers(
    tmp_path: Path, zookeeper: ZooKeeperServer | None = None
) -> AsyncIterator[Cluster]:
    """On the embedded store, or on ``zookeeper`` under a chroot of its own."""
    spec = ClusterSpec(
        brokers=3,
        base_port=0,
        log_dir=tmp_path / "logs",
        zookeeper=None if zookeeper is None else f"{zookeeper.hosts}/kemu-{uuid.uuid4().hex}",
        config={"zookeeper.session.timeout.ms": "6000", "auto.leader.rebalance.enable": "false"},
    )
    async with anyio.create_task_group() as tg:
        running: Cluster = await tg.start(Cluster(spec, tracer=Tracer()).run)
        yield running
        tg.cancel_scope.cancel()
