"""Brokers in this process with their launcher's control endpoint, as ``kemu up`` runs
them, for the tests of the commands that talk to a launcher (``kemu broker``, ``kemu
top``)."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

from actors.runtime.tracer import Tracer
from cluster.launch.cluster import Cluster, ClusterSpec
from cluster.launch.control import ClusterLauncher, Publisher, serve_control


@asynccontextmanager
async def launched_cluster(
    spec: ClusterSpec, tracer: Tracer, cluster_file: Path
) -> AsyncIterator[tuple[Cluster, ClusterLauncher, Publisher]]:
    """The cluster of ``spec``, its launcher, and the publisher whose ``control`` is the
    endpoint's address; the cluster file is written once the endpoint serves."""
    async with anyio.create_task_group() as tg:
        cluster: Cluster = await tg.start(Cluster(spec, tracer=tracer).run)
        launcher = ClusterLauncher(cluster)
        publisher = Publisher(cluster_file, spec, store="", secret=cluster.secret)
        publisher.control = await tg.start(
            functools.partial(
                serve_control,
                launcher,
                publisher,
                host="127.0.0.1",
                secret=cluster.secret,
                tracer=tracer,
                clock=cluster.clock,
            )
        )
        publisher(await launcher.cluster_status(), None)
        yield cluster, launcher, publisher
        tg.cancel_scope.cancel()
