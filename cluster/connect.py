"""Reaching a running cluster from another process: its cluster file and its store.

``kemu up`` writes a cluster file (default ``.kemu/cluster.json``) describing the brokers,
their Kafka listeners and the metadata store. A store address is either a real ZooKeeper
connection string (``HOST:PORT[,HOST:PORT...][/chroot]``) or, for the embedded store that
``kemu up`` serves over TCP, ``embedded://HOST:PORT``. ``open_store`` gives a
``MetadataStore`` for either.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anyio

from actors.clock import RealClock
from actors.runtime import Node
from actors.store import MetadataStore
from actors.trace import Tracer
from cluster.network import Network, TcpTransport
from cluster.store.remote import STORE_ACTOR, RemoteStore
from protocol.base import ActorRef
from protocol.errors import KemuError

DEFAULT_CLUSTER_FILE = Path(".kemu/cluster.json")
EMBEDDED_SCHEME = "embedded://"
STORE_NODE = "store"
CLUSTER_FILE_VERSION = 1


class ClusterFileError(KemuError):
    """No usable cluster file: no running ``kemu up`` to talk to."""


@dataclass(frozen=True)
class BrokerEntry:
    id: int
    host: str
    port: int
    pid: int
    log_dir: str
    rack: str | None = None


@dataclass(frozen=True)
class ClusterFile:
    store: str  # embedded://HOST:PORT or a ZooKeeper connection string
    brokers: tuple[BrokerEntry, ...]
    controller: int
    cluster_id: str
    pid: int
    processes: bool = False
    version: int = CLUSTER_FILE_VERSION
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{b.host}:{b.port}" for b in self.brokers)

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        tmp.replace(path)

    @classmethod
    def read(cls, path: Path) -> ClusterFile:
        try:
            raw = json.loads(path.read_text())
        except FileNotFoundError:
            raise ClusterFileError(
                f"no cluster file at {path}: start a cluster with `kemu up`, or give"
                " --bootstrap-server / --zookeeper"
            ) from None
        except (OSError, json.JSONDecodeError) as exc:
            raise ClusterFileError(f"cannot read cluster file {path}: {exc}") from None
        try:
            brokers = tuple(BrokerEntry(**b) for b in raw["brokers"])
            return cls(
                store=raw["store"],
                brokers=brokers,
                controller=int(raw["controller"]),
                cluster_id=str(raw["cluster_id"]),
                pid=int(raw["pid"]),
                processes=bool(raw.get("processes", False)),
                version=int(raw.get("version", CLUSTER_FILE_VERSION)),
                extra=dict(raw.get("extra", {})),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ClusterFileError(f"cluster file {path} is malformed: {exc}") from None

    def is_running(self) -> bool:
        """Whether the launcher process is still alive."""
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def load_cluster_file(path: Path | None = None) -> ClusterFile:
    path = path or DEFAULT_CLUSTER_FILE
    info = ClusterFile.read(path)
    if not info.is_running():
        raise ClusterFileError(f"the cluster in {path} is not running (process {info.pid} is gone)")
    return info


def parse_host_port(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise KemuError(f"expected HOST:PORT, got {address!r}")
    return host, int(port)


@asynccontextmanager
async def open_store(address: str, *, name: str = "kemu-cli") -> AsyncIterator[MetadataStore]:
    """A ``MetadataStore`` on ``address`` for the life of the context: a real ZooKeeper,
    or the embedded store of a running ``kemu up`` (``embedded://HOST:PORT``)."""
    if not address.startswith(EMBEDDED_SCHEME):
        from cluster.store.zookeeper import ZooKeeperStore

        zk = ZooKeeperStore(address, name=name)
        try:
            yield zk
        finally:
            await zk.aclose()
        return
    host, port = parse_host_port(address[len(EMBEDDED_SCHEME) :])
    tracer = Tracer()
    clock = RealClock()
    transport = TcpTransport()
    transport.add_peer(STORE_NODE, host, port)
    network = Network(transport, tracer=tracer, rng=random.Random(0), clock=clock)
    async with anyio.create_task_group() as tg:
        await tg.start(network.run)
        node = Node(f"{name}-{os.getpid()}", attach=network.attach, tracer=tracer, clock=clock)
        await tg.start(node.run)
        remote = RemoteStore(node, ActorRef(STORE_NODE, STORE_ACTOR))
        try:
            yield remote
        finally:
            with anyio.CancelScope(shield=True):
                await remote.aclose()
            node.stop()
            tg.cancel_scope.cancel()
