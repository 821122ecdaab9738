"""Fixtures of the CLI tests: a running cluster and a harness that runs ``kemu topics``
in-process against it, over the Kafka wire or straight on its metadata store.

``zk_cluster`` runs on a real ZooKeeper (``--zookeeper HOST:PORT/chroot``, opened by the
command itself); ``embedded_cluster`` on the embedded store, which the command is handed
in-process. ``shared_zk_cluster`` is one cluster for a whole module, for the bad-input
tests: each of them checks that it changed nothing, so they cannot disturb each other.
"""

from __future__ import annotations

import io
import random
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest

from actors.zk.store import MetadataStore, StoreSession
from cluster.cli.topics import run_topic_command
from cluster.launch.cluster import Cluster, ClusterSpec
from protocol.errors import NoNodeError
from tests.support.zookeeper import ZooKeeperServer

WIRE = "wire"
STORE = "store"


@dataclass(frozen=True)
class Result:
    """What one command printed and its exit status."""

    rc: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()


@dataclass
class Harness:
    """Runs ``kemu topics`` against a cluster (or a bare store) and reads the store."""

    store: MetadataStore
    zookeeper: str | None  # the --zookeeper address, or None: hand the store in-process
    cluster: Cluster | None = None
    seed: int = 7
    _sessions: list[StoreSession] = field(default_factory=list)

    @property
    def bootstrap(self) -> str:
        assert self.cluster is not None
        return ",".join(f"127.0.0.1:{port}" for _, port in sorted(self.cluster.ports.items()))

    async def topics(self, *argv: str, via: str) -> Result:
        """``kemu topics ARGV`` with ``--bootstrap-server`` (via WIRE) or ``--zookeeper``
        (via STORE) appended."""
        out, err = io.StringIO(), io.StringIO()
        store: MetadataStore | None = None
        if via == WIRE:
            full = [*argv, "--bootstrap-server", self.bootstrap]
        elif self.zookeeper is not None:
            full = [*argv, "--zookeeper", self.zookeeper]
        else:
            full = [*argv, "--zookeeper", "embedded://in-process"]
            store = self.store
        rc = await run_topic_command(
            full, out=out, err=err, store=store, rng=random.Random(self.seed)
        )
        return Result(rc, out.getvalue(), err.getvalue())

    async def session(self) -> StoreSession:
        if not self._sessions:
            self._sessions.append(await self.store.open_session(timeout=10.0, name="probe"))
        return self._sessions[0]

    async def read(self, path: str) -> bytes:
        data, _ = await (await self.session()).get(path)
        return data

    async def exists(self, path: str) -> bool:
        return await (await self.session()).exists(path) is not None

    async def children(self, path: str) -> tuple[str, ...]:
        return await (await self.session()).children(path)

    async def snapshot(self) -> dict[str, bytes]:
        """Every znode's data, by path: "nothing written" means an equal snapshot."""
        session = await self.session()
        found: dict[str, bytes] = {}

        async def walk(path: str) -> None:
            try:
                data, _ = await session.get(path)
                children = await session.children(path)
            except NoNodeError:
                return
            found[path] = data
            for child in children:
                await walk(f"{path.rstrip('/')}/{child}")

        await walk("/")
        return found

    async def close(self) -> None:
        for session in self._sessions:
            await session.close()
            session.events.close()
        self._sessions.clear()


def _spec(
    tmp: Path, zookeeper: str | None, racks: Mapping[int, str], *, served: bool
) -> ClusterSpec:
    return ClusterSpec(
        brokers=3,
        base_port=0,
        log_dir=tmp / "logs",
        zookeeper=zookeeper,
        racks=dict(racks),
        config={"zookeeper.session.timeout.ms": "6000"},
        store_port=0 if served else None,
    )


async def _harness(
    tmp: Path,
    server: ZooKeeperServer | None,
    racks: Mapping[int, str] = {},
    *,
    served: bool = False,
) -> AsyncIterator[Harness]:
    """A running cluster: on ``server`` (a real ZooKeeper) or the embedded store, which
    the command is handed in-process, or (``served``) reaches over TCP at its
    ``embedded://`` address as another process would."""
    zookeeper = None if server is None else f"{server.hosts}/kemu-{uuid.uuid4().hex}"
    spec = _spec(tmp, zookeeper, racks, served=served)
    async with anyio.create_task_group() as tg:
        cluster: Cluster = await tg.start(Cluster(spec).run)
        assert cluster.store is not None
        if served:
            zookeeper = cluster.store_address
            assert zookeeper is not None
            assert zookeeper.startswith("embedded://")
        harness = Harness(cluster.store, zookeeper, cluster)
        try:
            yield harness
        finally:
            await harness.close()
            tg.cancel_scope.cancel()


@pytest.fixture
def anyio_backend() -> str:
    """Cluster fixtures hold a task group across the test, which anyio's plugin allows."""
    return "asyncio"


@pytest.fixture
async def zk_cluster(
    tmp_path: Path, zookeeper_server: ZooKeeperServer, anyio_backend: str
) -> AsyncIterator[Harness]:
    """A 3-broker cluster on the real ZooKeeper, in a chroot of its own."""
    async for harness in _harness(tmp_path, zookeeper_server):
        yield harness


@pytest.fixture
async def embedded_cluster(tmp_path: Path, anyio_backend: str) -> AsyncIterator[Harness]:
    """A 3-broker cluster on the embedded store, handed to the command in-process."""
    async for harness in _harness(tmp_path, None):
        yield harness


@pytest.fixture(
    params=[pytest.param("zookeeper", marks=pytest.mark.zookeeper), "embedded", "served"]
)
async def store_cluster(
    request: pytest.FixtureRequest, tmp_path: Path, anyio_backend: str
) -> AsyncIterator[Harness]:
    """Each way to reach a store: a real ZooKeeper by address, the embedded store handed
    in-process, and the embedded store at its embedded:// address over TCP."""
    server = request.getfixturevalue("zookeeper_server") if request.param == "zookeeper" else None
    async for harness in _harness(tmp_path, server, served=request.param == "served"):
        yield harness


@pytest.fixture
async def mixed_rack_cluster(
    tmp_path: Path, zookeeper_server: ZooKeeperServer, anyio_backend: str
) -> AsyncIterator[Harness]:
    """A cluster where only broker 0 has a rack."""
    async for harness in _harness(tmp_path, zookeeper_server, racks={0: "r1"}):
        yield harness


@pytest.fixture(params=[pytest.param("zookeeper", marks=pytest.mark.zookeeper), "embedded"])
async def bare_store(request: pytest.FixtureRequest, anyio_backend: str) -> AsyncIterator[Harness]:
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
