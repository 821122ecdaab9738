"""A harness that runs ``kemu topics`` in-process against a running cluster, over the
Kafka wire (``WIRE``) or straight on its metadata store (``STORE``), and reads the store
back; ``running_harness`` starts the cluster it drives (on a real ZooKeeper, the embedded
store handed in-process, or the embedded store served over TCP)."""

from __future__ import annotations

import io
import os
import random
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from actors.zk.store import MetadataStore, StoreSession
from cluster.cli.topics import run_topic_command
from cluster.launch.cluster import Cluster, ClusterSpec
from cluster.launch.connect import ClusterFile, register_store, unregister_store
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


async def running_harness(
    tmp: Path,
    server: ZooKeeperServer | None,
    racks: Mapping[int, str] = {},
    *,
    served: bool = False,
    brokers: int = 3,
    config: Mapping[str, str] = {},
) -> AsyncIterator[Harness]:
    """A running cluster (6 s store sessions, then ``config``): on ``server`` (a real
    ZooKeeper) or the embedded store, which the command is handed in-process, or
    (``served``) reaches over TCP at its ``embedded://`` address as another process would,
    with the secret of the cluster file that ``kemu up`` would write (and register)."""
    zookeeper = None if server is None else f"{server.hosts}/kemu-{uuid.uuid4().hex}"
    spec = ClusterSpec(
        brokers=brokers,
        base_port=0,
        log_dir=tmp / "logs",
        zookeeper=zookeeper,
        racks=dict(racks),
        config={"zookeeper.session.timeout.ms": "6000", **config},
        store_port=0 if served else None,
    )
    async with anyio.create_task_group() as tg:
        cluster: Cluster = await tg.start(Cluster(spec).run)
        assert cluster.store is not None
        cluster_file = tmp / "cluster.json"
        if served:
            zookeeper = cluster.store_address
            assert zookeeper is not None
            assert zookeeper.startswith("embedded://")
            info = ClusterFile(
                store=zookeeper,
                brokers=(),
                controller=-1,
                cluster_id="",
                pid=os.getpid(),
                secret=cluster.secret.hex(),
            )
            info.write(cluster_file)
            register_store(zookeeper, cluster_file)
        harness = Harness(cluster.store, zookeeper, cluster)
        try:
            yield harness
        finally:
            if served and zookeeper is not None:
                unregister_store(zookeeper, cluster_file)
            await harness.close()
            tg.cancel_scope.cancel()
