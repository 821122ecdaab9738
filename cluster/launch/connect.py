"""Reaching a running cluster from another process: its cluster file, its store and its
launcher.

``kemu up`` writes a cluster file (default ``.kemu/cluster.json``) describing the brokers,
their Kafka listeners, the metadata store and the launcher's control endpoint. A store
address is either a real ZooKeeper connection string (``HOST:PORT[,HOST:PORT...][/chroot]``)
or, for the embedded store that ``kemu up`` serves over TCP, ``embedded://HOST:PORT``.
``open_store`` gives a ``MetadataStore`` for either; ``connect_launcher`` asks the launcher
(``kemu broker``; the endpoint itself is ``cluster.launch.control``).

The cluster file also holds the cluster's secret, which the embedded store, the control
endpoint and the brokers' internal ports ask every connection to prove
(``cluster.network.auth``; docs/security.md). So it is written readable by its owner only:
created with mode 0600, filled, synced, then renamed over the old one. A command given
``embedded://HOST:PORT`` finds the secret in the cluster file (``--cluster-file``, else
the default one) whose store is that address; without ``--cluster-file``, also in the one
the user's run directory names for that address (``register_store``: ``kemu up`` notes
there where the cluster file of each embedded store it serves is, so that a bare
``--zookeeper embedded://...`` works from any directory).
"""

from __future__ import annotations

import json
import os
import random
import re
import secrets
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
from cluster.network.auth import HANDSHAKE_TIMEOUT, AuthError, authenticate
from cluster.store.remote import STORE_ACTOR, RemoteStore
from protocol.base import ActorRef, Message
from protocol.errors import KemuError
from protocol.launcher import ClusterMetricsRequest, ClusterViewRequest, LauncherStatusRequest

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
    secret: str = ""  # the cluster's secret, hex (``cluster.network.auth``); "" = none
    metrics: str = ""  # HOST:PORT of the launcher's Prometheus endpoint (``GET /metrics``)
    version: int = CLUSTER_FILE_VERSION
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def bootstrap_servers(self) -> str:
        """The running brokers' listeners (every broker's if none is marked running)."""
        running = [b for b in self.brokers if b.running] or list(self.brokers)
        return ",".join(f"{b.host}:{b.port}" for b in running)

    @property
    def secret_bytes(self) -> bytes:
        """The cluster's secret; ``ClusterFileError`` if the file holds none."""
        try:
            secret = bytes.fromhex(self.secret)
        except ValueError:
            secret = b""
        if len(secret) < 16:
            raise ClusterFileError(
                "the cluster file holds no valid secret (a `kemu up` older than authentication?)"
            )
        return secret

    def write(self, path: Path) -> None:
        """Replace the file at ``path`` with this one, atomically, readable by its owner
        only (it holds the secret): ``write_private``."""
        write_private(path, (json.dumps(asdict(self), indent=2) + "\n").encode())

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
                secret=str(raw.get("secret", "")),
                metrics=str(raw.get("metrics", "")),
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


def write_private(path: Path, data: bytes) -> None:
    """Replace the file at ``path`` with ``data``, atomically, readable by its owner only:
    a new file is created with mode 0600 (never wider, not even for an instant), written,
    synced, renamed over ``path``, and the rename synced."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        try:
            os.fchmod(fd, 0o600)  # whatever the umask left, and no more
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def run_directory() -> Path:
    """Where ``kemu up`` notes which cluster file belongs to which embedded store: the
    user's runtime directory (``$XDG_RUNTIME_DIR/kemu``), else ``~/.kemu/run``."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return Path(runtime) / "kemu" if runtime else Path.home() / ".kemu" / "run"


def _note_path(store: str) -> Path:
    return run_directory() / (re.sub(r"[^A-Za-z0-9.]+", "_", _store_key(store)) + ".json")


def register_store(store: str, cluster_file: Path) -> None:
    """Note in the user's run directory that the embedded store at ``store`` is the one of
    ``cluster_file`` (where its secret is); nothing for any other store."""
    if store.startswith(EMBEDDED_SCHEME):
        note = {"store": store, "cluster_file": str(cluster_file.resolve())}
        write_private(_note_path(store), (json.dumps(note) + "\n").encode())
        _prune_notes(keep=_note_path(store))


def _prune_notes(*, keep: Path) -> None:
    """Remove the notes of clusters that are gone (a ``kemu up`` that was killed could not
    remove its own): their cluster file is missing, unreadable, or its launcher dead."""
    for note in run_directory().glob("embedded_*.json"):
        if note == keep:
            continue
        try:
            noted = Path(json.loads(note.read_text())["cluster_file"])
            gone = not ClusterFile.read(noted).is_running()
        except (OSError, ValueError, KeyError, TypeError, ClusterFileError):
            gone = True
        if gone:
            note.unlink(missing_ok=True)


def unregister_store(store: str, cluster_file: Path) -> None:
    """Remove the note of ``register_store``, if it still names ``cluster_file``."""
    if store.startswith(EMBEDDED_SCHEME) and _registered(store) == cluster_file.resolve():
        _note_path(store).unlink(missing_ok=True)


def _registered(store: str) -> Path | None:
    """The cluster file noted for ``store``, if the note is there and the run directory is
    the user's own, private one."""
    note = _note_path(store)
    try:
        owner = note.parent.stat()
        if owner.st_uid != os.getuid() or owner.st_mode & 0o077:
            return None
        return Path(json.loads(note.read_text())["cluster_file"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def load_cluster_file(path: Path | None = None) -> ClusterFile:
    path = path or DEFAULT_CLUSTER_FILE
    info = ClusterFile.read(path)
    if not info.is_running():
        raise ClusterFileError(f"the cluster in {path} is not running (process {info.pid} is gone)")
    return info


def store_secret(address: str, cluster_file: Path | None = None) -> bytes:
    """The secret of the cluster whose embedded store is at ``address``
    (``embedded://HOST:PORT``): from the cluster file at ``cluster_file`` (default
    ``.kemu/cluster.json``), which must name that store. ``ClusterFileError`` otherwise,
    saying where the secret comes from."""
    where = (
        f"{address} asks for its cluster's secret, which is in the cluster file its `kemu up`"
        " wrote (readable by its owner only; give it with --cluster-file)"
    )
    if cluster_file is None:
        candidates = [DEFAULT_CLUSTER_FILE]
        noted = _registered(address)
        if noted is not None:
            candidates.append(noted)
    else:
        candidates = [cluster_file]
    found = [path for path in candidates if path.exists()]
    if not found:
        raise ClusterFileError(f"{where}: there is no {candidates[0]}")
    others: list[str] = []
    for path in found:
        info = ClusterFile.read(path)
        if _store_key(info.store) == _store_key(address):
            return info.secret_bytes
        others.append(f"{path} is another cluster's (its store is {info.store or 'none'})")
    raise ClusterFileError(f"{where}: {'; '.join(others)}")


def _store_key(address: str) -> str:
    """An embedded store's address as compared: localhost is 127.0.0.1."""
    return address.replace("://localhost:", "://127.0.0.1:")


async def _probe(address: str, secret: bytes, what: str) -> None:
    """Connect to ``address`` and pass its handshake, or fail at once with one line
    (``ClusterFileError``): an ask to an endpoint that cannot be reached, or that refuses
    us, would only end with its timeout."""
    host, port = parse_host_port(address)
    try:
        stream = await anyio.connect_tcp(host, port)
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise ClusterFileError(f"{what} {address} does not answer: {why}") from exc
    try:
        with anyio.fail_after(HANDSHAKE_TIMEOUT):
            await authenticate(stream, secret)
    except TimeoutError:
        raise ClusterFileError(f"{what} {address} did not finish the handshake") from None
    except AuthError as exc:
        raise ClusterFileError(f"{what} {address} refused us: {exc}") from None
    finally:
        await stream.aclose()


def parse_host_port(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise KemuError(f"expected HOST:PORT, got {address!r}")
    return host, int(port)


@asynccontextmanager
async def open_store(
    address: str,
    *,
    name: str = "kemu-cli",
    secret: bytes | None = None,
    cluster_file: Path | None = None,
) -> AsyncIterator[MetadataStore]:
    """A ``MetadataStore`` on ``address`` for the life of the context: a real ZooKeeper,
    or the embedded store of a running ``kemu up`` (``embedded://HOST:PORT``), which
    takes us with its cluster's ``secret`` (by default, the one in ``cluster_file`` or
    the default cluster file: ``store_secret``)."""
    if not address.startswith(EMBEDDED_SCHEME):
        from cluster.store.zookeeper import ZooKeeperStore

        zk = ZooKeeperStore(address, name=name)
        try:
            yield zk
        finally:
            await zk.aclose()
        return
    host_port = address[len(EMBEDDED_SCHEME) :]
    host, port = parse_host_port(host_port)
    if secret is None:
        secret = store_secret(address, cluster_file)
    await _probe(host_port, secret, "the embedded store")
    tracer = Tracer()
    clock = RealClock()
    transport = TcpTransport(secret=secret)
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
async def connect_launcher(address: str, *, secret: bytes) -> AsyncIterator[LauncherAsk]:
    """For the life of the context, ``ask(msg, timeout=...)`` sends ``msg`` to the
    launcher's control endpoint at ``address`` (``HOST:PORT``), which takes us with the
    cluster's ``secret``, and returns its reply: a status or view request goes to the
    status actor, anything else to the control actor. Raises ``ClusterFileError`` at once if
    nothing listens there, or it refuses us."""
    host, port = parse_host_port(address)
    await _probe(address, secret, "the launcher's control endpoint")
    tracer = Tracer()
    clock = RealClock()
    transport = TcpTransport(secret=secret)
    transport.add_peer(CONTROL_NODE, host, port)
    network = Network(transport, tracer=tracer, rng=random.Random(0), clock=clock)
    async with anyio.create_task_group() as tg:
        await tg.start(network.run)
        node = Node(f"kemu-broker-{os.getpid()}", attach=network.attach, tracer=tracer, clock=clock)
        await tg.start(node.run)

        async def ask(msg: Message, *, timeout: float) -> Message:
            status = isinstance(
                msg, LauncherStatusRequest | ClusterViewRequest | ClusterMetricsRequest
            )
            actor = STATUS_ACTOR if status else CONTROL_ACTOR
            return await node.ask(ActorRef(CONTROL_NODE, actor), msg, timeout=timeout)

        try:
            yield ask
        finally:
            node.stop()
            tg.cancel_scope.cancel()
