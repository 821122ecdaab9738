"""Fixtures of the CLI tests: a running cluster with the harness of
``tests.support.topics_harness``, which runs ``kemu topics`` in-process against it, over the
Kafka wire or straight on its metadata store.

``zk_cluster`` runs on a real ZooKeeper (``--zookeeper HOST:PORT/chroot``, opened by the
command itself); ``embedded_cluster`` on the embedded store, which the command is handed
in-process; ``store_cluster`` each way in turn, the embedded store over TCP included;
``bare_store`` is a store with no cluster. The bad-input modules share one cluster per
module (their own ``shared`` fixture, on a module-scoped loop): each case checks that it
changed nothing, so the cases cannot disturb each other. Each cluster runs in a host task
of its own (``tests.support.hosting``).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from actors.zk.store import MetadataStore
from tests.support.hosting import hosted_fixture
from tests.support.topics_harness import Harness, running_harness
from tests.support.zookeeper import STORES, ZooKeeperServer


@hosted_fixture()
async def zk_cluster(tmp_path: Path, zookeeper_server: ZooKeeperServer) -> AsyncIterator[Harness]:
    """A 3-broker cluster on the real ZooKeeper, in a chroot of its own."""
    async for harness in running_harness(tmp_path, zookeeper_server):
        yield harness


@hosted_fixture()
async def embedded_cluster(tmp_path: Path) -> AsyncIterator[Harness]:
    """A 3-broker cluster on the embedded store, handed to the command in-process."""
    async for harness in running_harness(tmp_path, None):
        yield harness


@hosted_fixture(
    params=[pytest.param("zookeeper", marks=pytest.mark.zookeeper), "embedded", "served"]
)
async def store_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Harness]:
    """Each way to reach a store: a real ZooKeeper by address, the embedded store handed
    in-process, and the embedded store at its embedded:// address over TCP."""
    server = request.getfixturevalue("zookeeper_server") if request.param == "zookeeper" else None
    async for harness in running_harness(tmp_path, server, served=request.param == "served"):
        yield harness


@hosted_fixture()
async def mixed_rack_cluster(
    tmp_path: Path, zookeeper_server: ZooKeeperServer
) -> AsyncIterator[Harness]:
    """A cluster where only broker 0 has a rack."""
    async for harness in running_harness(tmp_path, zookeeper_server, racks={0: "r1"}):
        yield harness


@pytest_asyncio.fixture(params=STORES)
async def bare_store(request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    """A store with no brokers and no controller: what ``--zookeeper`` writes stays as
    written (AdminZkClient's own behaviour, whatever a controller later does with it)."""
    store: MetadataStore
    if request.param == "zookeeper":
        from cluster.store.zookeeper import ZooKeeperStore

        server: ZooKeeperServer = request.getfixturevalue("zookeeper_server")
        chroot = f"/kemu-{uuid.uuid4().hex}"
        store = ZooKeeperStore(server.hosts, chroot=chroot)
        harness = Harness(store, f"{server.hosts}{chroot}")
    else:
        from cluster.store.embedded import EmbeddedStore

        store = EmbeddedStore()
        harness = Harness(store, None)
    try:
        yield harness
    finally:
        await harness.close()
        await store.aclose()
