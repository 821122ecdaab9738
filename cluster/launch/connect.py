"""Reaching a running cluster from another process: its cluster file, its store and its
launcher.

``kemu up`` writes a cluster file (default ``.kemu/cluster.json``) describing the brokers,
their Kafka listeners, the metadata store and the launcher's control endpoint. A store
address is either a real ZooKeeper connection string (``HOST:PORT[,HOST:PORT...][/chroot]``)
or, for the embedded store that ``kemu up`` serves over TCP, ``embedded://HOST:PORT``.
``open_store`` gives a ``MetadataStore`` for either; ``connect_launcher`` asks the launcher
(``kemu broker``; the endpoint itself is ``cluster.launch.control``).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import anyio

from actors.runtime.actor import Node
from actors.runtime.clock import RealClock
from actors.runtime.tracer import Tracer
from actors.zk.store import MetadataStore
from cluster.network import Network, TcpTransport
from cluster.store.remote import STORE_ACTOR, RemoteStore
from protocol.base import ActorRef, Message
from protocol.errors import KemuError
from protocol.launcher import LauncherStatusRequest

DEFAULT_CLUSTER_FILE = Path(".kemu/cluster.json")
EMBEDDED_SCHEME = "embedded://"
STORE_NODE = "store"
CONTROL_NODE = "launcher"  # the node of a launcher's control endpoint (``cluster.launch.control``)
CONTROL_ACTOR = "control"  # carries out ``kemu broker`` commands, one at a time
STATUS_ACTOR = "status"  # answers status requests meanwhile
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
    running: bool = True  # False once stopped or killed (``kemu broker``), until started


@dataclass(frozen=True)
class ClusterFile:
    """What ``kemu up`` tells other processes about the cluster it runs. The launcher
    rewrites it after every ``kemu broker`` command (who is up, their pids, the controller
    at that moment) and removes it when it stops."""

    store: str  # embedded://HOST:PORT or a ZooKeeper connection string
    brokers: tuple[BrokerEntry, ...]
    controller: int
    cluster_id: str
    pid: int
    processes: bool = False
    control: str = ""  # HOST:PORT of the launcher's control endpoint (``kemu broker``)
    version: int = CLUSTER_FILE_VERSION
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def bootstrap_servers(self) -> str:
        """The running brokers' listeners (every broker's if none is marked running)."""
        running = [b for b in self.brokers if b.running] or list(self.brokers)
        return ",".join(f"{b.host}:{b.port}" for b in running)

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        tmp.replace(path)

    @classmethod
    def read(cls, path: Path) -> ClusterFile:
        try:
            raw = json.loads(path.read_text())
        except FileNotFoundError as exc:
            raise ClusterFileError(
                f"no cluster file at {path}: start a cluster with `kemu up`, or give"
                " --bootstrap-server / --zookeeper"
            ) from exc
        except (OSError, json.JSONDecodeError) as exc:
            raise ClusterFileError(f"cannot read cluster file {path}: {exc}") from exc
        try:
            brokers = tuple(BrokerEntry(**b) for b in raw["brokers"])
            return cls(
                store=raw["store"],
                brokers=brokers,
                controller=int(raw["controller"]),
                cluster_id=str(raw["cluster_id"]),
                pid=int(raw["pid"]),
                processes=bool(raw.get("processes", False)),
                control=str(raw.get("control", "")),
                version=int(raw.get("version", CLUSTER_FILE_VERSION)),
                extra=dict(raw.get("extra", {})),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ClusterFileError(f"cluster file {path} is malformed: {exc}") from exc

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


class LauncherAsk(Protocol):
    """Ask the launcher: its reply to ``msg``, within ``timeout`` seconds."""

    async def __call__(self, msg: Message, *, timeout: float) -> Message: ...


@asynccontextmanager
async def connect_launcher(address: str) -> AsyncIterator[LauncherAsk]:
    """For the life of the context, ``ask(msg, timeout=...)`` sends ``msg`` to the
    launcher's control endpoint at ``address`` (``HOST:PORT``) and returns its reply: a
    status request goes to the status actor, anything else to the control actor. Raises
    ``ClusterFileError`` at once if nothing listens there."""
    host, port = parse_host_port(address)
    try:  # fail fast: an ask to an unreachable node would only end with its timeout
        probe = await anyio.connect_tcp(host, port)
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise ClusterFileError(
            f"the launcher's control endpoint {address} does not answer: {why}"
        ) from exc
    await probe.aclose()
    tracer = Tracer()
    clock = RealClock()
    transport = TcpTransport()
    transport.add_peer(CONTROL_NODE, host, port)
    network = Network(transport, tracer=tracer, rng=random.Random(0), clock=clock)
    async with anyio.create_task_group() as tg:
        await tg.start(network.run)
        node = Node(f"kemu-broker-{os.getpid()}", attach=network.attach, tracer=tracer, clock=clock)
        await tg.start(node.run)

        async def ask(msg: Message, *, timeout: float) -> Message:
            actor = STATUS_ACTOR if isinstance(msg, LauncherStatusRequest) else CONTROL_ACTOR
            return await node.ask(ActorRef(CONTROL_NODE, actor), msg, timeout=timeout)

        try:
            yield ask
        finally:
            node.stop()
            tg.cancel_scope.cancel()
