"""A local N-broker cluster in one process: network, metadata store, broker nodes, and a
Kafka listener per broker.

``Cluster`` puts the actors together. Each broker ``i`` is a node ``broker-i`` holding the
``Broker`` actor (which starts its log manager and controller) and, when listeners are
enabled, a ``KafkaWireServer`` on ``base_port + i`` whose requests become typed asks to
that broker. The store is the embedded one by default, or a real ZooKeeper. Brokers can
be stopped gracefully, crashed and restarted while the cluster runs.
"""

from __future__ import annotations

import functools
import random
import resource
import socket
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import structlog
from anyio.abc import TaskGroup

from actors.admin import BrokerConfig
from actors.broker.broker import BROKER_ACTOR, Broker, BrokerSettings, broker_node_id, broker_ref
from actors.log.disk import Disk
from actors.log.manager import DEFAULT_MAX_OPEN_LOGS, open_logs_budget
from actors.runtime.actor import Attach, Node
from actors.runtime.clock import Clock, RealClock, VirtualClock
from actors.runtime.freeze import NODE
from actors.runtime.tracer import Tracer
from actors.zk.store import MetadataStore
from cluster.kafka.apis import SERVED_API_VERSIONS
from cluster.kafka.listener import KafkaRequest, KafkaWireServer, request_data
from cluster.launch.connect import EMBEDDED_SCHEME, STORE_NODE
from cluster.launch.ports import free_ports
from cluster.logging import broker_registered, close_broker_logs, open_broker_logs
from cluster.network import InProcessTransport, Network, TcpTransport
from cluster.network.auth import new_secret, seeded_secret
from cluster.store.embedded import EmbeddedStore
from cluster.store.remote import StoreServer
from protocol.broker import BrokerStatus, BrokerStatusRequest
from protocol.errors import ActorError, KemuError
from protocol.ids import BrokerId
from protocol.kafka_api import KafkaApiResponseData
from protocol.trace import TraceKind

SUPPORTED_APIS: Mapping[int, tuple[int, int]] = SERVED_API_VERSIONS
"""The Kafka APIs a kemu broker answers: those of the codec table (``cluster.kafka.apis``),
admin and data alike."""


def file_limit() -> int:
    """The process's limit of open files, raised to its hard limit first (a broker keeps
    its logs open, as Kafka's deployment guide asks a high ``ulimit -n`` for)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            return soft
    return hard


class ClusterError(KemuError):
    """The cluster could not be started or did not become ready."""


@dataclass(frozen=True)
class ClusterSpec:
    brokers: int = 3
    base_port: int = 9092  # broker i listens on base_port + i; 0 = any free port
    host: str = "127.0.0.1"
    log_dir: Path = Path(".kemu/logs")
    zookeeper: str | None = None  # HOST:PORT[/chroot]; None = the embedded store
    transport: str = "inproc"  # or "tcp"
    racks: Mapping[int, str] = field(default_factory=dict)
    config: Mapping[str, str] = field(default_factory=dict)
    seed: int = 0
    listeners: bool = True
    log_dirs_per_broker: int = 1  # see ``BrokerSpec.log_dirs``
    store_port: int | None = None
    """Serve the embedded store over TCP on this port (0 = any) so that other processes
    (``kemu topics --zookeeper embedded://...``, ``kemu zk``) can reach it."""
    metrics_port: int = 0
    """The loopback port of ``kemu up``'s Prometheus endpoint (0 = any)."""
    listener_host: str | None = None
    """Where the Kafka listeners bind (the host of Kafka's ``listeners``; "" = every
    interface); None: ``host``. kemu's own endpoints (store, control, inter-broker ports)
    stay on ``host`` whatever this is."""
    advertised: Advertised | None = None
    """What the brokers register and clients are told (Kafka's ``advertised.listeners``);
    None: the listener's own address, as in Kafka."""

    def broker_config(self) -> BrokerConfig:
        return BrokerConfig.from_overrides(dict(self.config))

    @property
    def bind_host(self) -> str:
        """Where the Kafka listeners bind."""
        return self.host if self.listener_host is None else self.listener_host

    @property
    def advertised_host(self) -> str:
        """The host every broker registers: ``advertised``'s, else the listener's; a
        listener on every interface ("") advertises this machine's canonical name, as
        Kafka's ``KafkaServer.createBrokerInfo`` does."""
        if self.advertised is not None:
            return self.advertised.host
        return self.bind_host or socket.getfqdn()

    def advertised_port(self, broker_id: int) -> int:
        """The port broker ``broker_id`` registers: ``advertised.port`` + id, or 0 (the
        port its listener bound)."""
        if self.advertised is None or self.advertised.port == 0:
            return 0
        return self.advertised.port + broker_id

    def advertised_ports(self, bound: Mapping[int, int]) -> dict[int, int]:
        """Each broker's registered port, given the ports its listener bound."""
        return {b: self.advertised_port(b) or port for b, port in bound.items()}


@dataclass(frozen=True)
class Advertised:
    """Kafka's ``advertised.listeners`` for a whole cluster: broker i is advertised at
    ``host``:``port`` + i (``port`` 0: the port its listener bound)."""

    host: str
    port: int = 0


class BrokerWireHandler:
    """Turns Kafka requests into typed asks to one broker actor."""

    def __init__(self, node: Node, broker_id: int, timeout: float) -> None:
        self._node = node
        self._broker_id = broker_id
        self._timeout = timeout

    @property
    def supported(self) -> Mapping[int, tuple[int, int]]:
        return SUPPORTED_APIS

    async def handle(self, request: KafkaRequest) -> KafkaApiResponseData:
        data = request_data(request)
        wait = self._timeout + getattr(data, "timeout_ms", 0) / 1000
        reply = await self._node.ask(broker_ref(self._broker_id), data, timeout=wait)
        if not isinstance(reply, KafkaApiResponseData):
            # The listener turns a handler failure into UNKNOWN_SERVER_ERROR for the client.
            raise TypeError(
                f"broker {self._broker_id} answered {type(data).__name__} with {reply!r}"
            )
        return reply


@dataclass(frozen=True)
class BrokerSpec:
    """One broker's assembly: what ``start_broker_node`` needs, in either launch mode
    (all brokers in one process, or one process per broker)."""

    broker_id: int
    host: str  # where its Kafka listener binds ("" = every interface)
    port: int  # its Kafka listener; 0 = any free port
    log_dir: Path  # the root: the broker's log dir is ``log_dir/broker-<id>``
    config: BrokerConfig
    rack: str | None = None
    seed: int = 0
    incarnation: int = 0
    """How many times this broker ran before: each run draws from its own random stream
    (a restarted broker must not draw the same ``-delete`` directory names again)."""
    listener: bool = True
    disk: Disk | None = None  # the log manager's filesystem (None: the real one)
    max_open_logs: int = DEFAULT_MAX_OPEN_LOGS
    """The broker's log manager's open logs (``open_logs_budget`` of its process)."""
    log_dirs: int = 1
    """How many log dirs (``log.dirs``) the broker has: ``log_dir/broker-<id>``, then
    ``log_dir/broker-<id>.<k>`` for k = 1, 2 ... (tests fail one and keep the broker up)."""
    advertised_host: str | None = None  # what it registers (advertised.listeners); None: host
    advertised_port: int = 0  # what it registers; 0: the port its listener bound
    own_log_dir: bool = False
    """``log_dir`` is the broker's log dir itself (``kemu broker run --log-dir``, as Kafka's
    ``log.dirs``), not the root of every broker's; ``log_dirs`` must be 1."""
    internal_endpoint: Callable[[], tuple[str, int]] | None = None
    """What the broker registers as the address of its node (``BrokerSettings``)."""

    def broker_log_dirs(self) -> tuple[Path, ...]:
        if self.own_log_dir:
            return (self.log_dir,)
        return tuple(
            self.log_dir / (f"broker-{self.broker_id}" + (f".{k}" if k else ""))
            for k in range(self.log_dirs)
        )


async def start_broker_node(
    tg: TaskGroup,
    spec: BrokerSpec,
    *,
    attach: Attach,
    store: MetadataStore,
    tracer: Tracer,
    clock: Clock,
    listener_scope: anyio.CancelScope | None = None,
) -> tuple[Node, KafkaWireServer | None, int]:
    """Start node ``broker-<id>`` with its ``Broker`` actor in ``tg`` and, if wanted, its
    Kafka listener (in ``listener_scope``). Returns once the broker has registered: the
    node, the listener and the listener's bound port (``spec.port`` without one)."""
    seed: int | str = spec.seed if spec.incarnation == 0 else f"{spec.seed}.{spec.incarnation}"
    node = Node(
        broker_node_id(spec.broker_id), attach=attach, tracer=tracer, clock=clock.own(), seed=seed
    )
    server: KafkaWireServer | None = None
    port = spec.port
    if spec.listener:
        server = KafkaWireServer(
            BrokerWireHandler(node, spec.broker_id, spec.config.request_timeout_ms / 1000),
            node=node.node_id,
            host=spec.host,
            port=spec.port,
            tracer=tracer,
        )
        scope = listener_scope or anyio.CancelScope()
        port = await tg.start(_serve_listener, server, scope, node.node_id)
    settings = BrokerSettings(
        broker_id=BrokerId(spec.broker_id),
        log_dirs=spec.broker_log_dirs(),
        host=spec.host if spec.advertised_host is None else spec.advertised_host,
        port=spec.advertised_port or port,
        rack=spec.rack,
        config=spec.config,
        disk=spec.disk,
        max_open_logs=spec.max_open_logs,
        internal_endpoint=spec.internal_endpoint,
    )
    open_broker_logs(node.node_id, spec.broker_id, settings.log_dirs[0])  # with broker_files
    await tg.start(node.run, [Broker(settings, store)])
    broker_registered(node.node_id)  # the broker's on_start ends once it has registered
    return node, server, port


async def _serve_listener(
    server: KafkaWireServer,
    scope: anyio.CancelScope,
    node_id: str,
    *,
    task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    NODE.set(node_id)  # the listener is the broker's: a pause freezes it too
    structlog.contextvars.bind_contextvars(node=node_id)  # and what it logs, the broker's
    with scope:
        async with anyio.create_task_group() as tg:
            port = await tg.start(server.serve)
            task_status.started(port)


async def serve_store(
    store: EmbeddedStore,
    *,
    host: str,
    port: int,
    secret: bytes,
    tracer: Tracer,
    clock: Clock,
    task_status: anyio.abc.TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """The embedded store as an actor (node ``store``) on its own TCP network, for the
    processes that prove the cluster's ``secret``; reports its ``embedded://HOST:PORT``
    address, serves until cancelled."""
    transport = TcpTransport(host=host, ports={STORE_NODE: port}, secret=secret)
    network = Network(transport, tracer=tracer, rng=random.Random(0), clock=clock)
    async with anyio.create_task_group() as tg:
        await tg.start(network.run)
        node = Node(STORE_NODE, attach=network.attach, tracer=tracer, clock=clock)
        await tg.start(node.run, [StoreServer(store, owns_store=False)])
        bound_host, bound = transport.address_of(STORE_NODE)
        task_status.started(f"{EMBEDDED_SCHEME}{bound_host}:{bound}")


def is_ready(statuses: Sequence[BrokerStatus | None], running: Sequence[int]) -> bool:
    """Every running broker answered, is registered, and knows the same live controller
    and every running broker (so clients asking any of them see the whole cluster)."""
    if not all(s is not None for s in statuses):
        return False
    ready = [s for s in statuses if s is not None]
    controllers = {s.controller_id for s in ready}
    return (
        len(controllers) == 1
        and next(iter(controllers)) in running
        and all(sorted(s.live_brokers) == sorted(running) for s in ready)
    )


async def wait_until_ready(
    status: Callable[[int], Awaitable[BrokerStatus | None]],
    running: Sequence[int],
    *,
    clock: Clock,
    timeout: float = 30.0,
) -> None:
    """Poll ``status`` of every running broker until ``is_ready``; ``ClusterError`` after
    ``timeout`` seconds."""
    try:
        with anyio.fail_after(timeout):
            while not is_ready([await status(b) for b in running], running):
                await clock.sleep(0.005)
    except TimeoutError:
        raise ClusterError(f"the cluster was not ready within {timeout}s") from None


class Cluster:
    def __init__(
        self,
        spec: ClusterSpec,
        *,
        tracer: Tracer | None = None,
        clock: Clock | None = None,
        store: MetadataStore | None = None,
        disks: Mapping[int, Disk] | None = None,
        secret: bytes | None = None,
    ) -> None:
        """``disks``: the filesystem of a broker's log manager, by broker id, kept across its
        restarts (tests hand in an ``actors.log.disk.FaultyDisk``); the others use the real one.
        ``secret``: what its store server and TCP transport ask of every connection
        (``cluster.network.auth``); by default a new random one, or on a virtual clock (a
        deterministic run) one derived from the seed."""
        self.spec = spec
        self._disks = dict(disks or {})
        self.config = spec.broker_config()
        self.tracer = tracer or Tracer()
        self.clock = clock or RealClock()
        if secret is None:
            virtual = isinstance(self.clock, VirtualClock)
            secret = seeded_secret(spec.seed) if virtual else new_secret()
        self.secret = secret
        self.store = store
        self.network: Network | None = None
        self.nodes: dict[int, Node] = {}
        self.listeners: dict[int, KafkaWireServer] = {}
        self.ports: dict[int, int] = {}
        self._tg: TaskGroup | None = None
        self._broker_scopes: dict[int, anyio.CancelScope] = {}
        self._stopped: dict[int, anyio.Event] = {}  # per broker: its last run has ended
        self._incarnations: dict[int, int] = {}  # per broker: how many runs it started
        self._pause_expiries: dict[int, anyio.CancelScope] = {}  # per paused broker
        self.store_address: str | None = spec.zookeeper
        self.on_halt: Callable[[int, str], Awaitable[None]] | None = None
        """Called with a broker's id and reason when it halts by itself (``Node.fatal``)."""

    # ------------------------------------------------------------------ lifecycle

    def _make_store(self) -> MetadataStore:
        if self.spec.zookeeper:
            from cluster.store.zookeeper import ZooKeeperStore

            return ZooKeeperStore(self.spec.zookeeper, tracer=self.tracer, clock=self.clock)
        return EmbeddedStore(tracer=self.tracer, clock=self.clock)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[Cluster] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Start everything, report readiness, run until cancelled."""
        self.store = self.store or self._make_store()
        transport = (
            TcpTransport(secret=self.secret)
            if self.spec.transport == "tcp"
            else InProcessTransport()
        )
        self.network = Network(
            transport, tracer=self.tracer, rng=random.Random(self.spec.seed), clock=self.clock
        )
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                await tg.start(self.network.run)
                if isinstance(self.store, EmbeddedStore) and self.spec.store_port is not None:
                    await tg.start(self._serve_store, self.store)
                for broker_id in range(self.spec.brokers):
                    await self.start_broker(broker_id)
                await self.wait_ready()
                task_status.started(self)
                try:
                    await anyio.sleep_forever()
                finally:
                    self._kill_paused()
        finally:
            self._tg = None
            close_broker_logs(broker_node_id(b) for b in range(self.spec.brokers))
            with anyio.CancelScope(shield=True):
                await self.store.aclose()

    async def _serve_store(
        self,
        store: EmbeddedStore,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """The embedded store as an actor on its own TCP network, for other processes."""
        async with anyio.create_task_group() as tg:
            self.store_address = await tg.start(
                functools.partial(
                    serve_store,
                    store,
                    host=self.spec.host,
                    port=self.spec.store_port or 0,
                    secret=self.secret,
                    tracer=self.tracer,
                    clock=self.clock,
                )
            )
            task_status.started()

    async def start_broker(self, broker_id: int) -> None:
        """Start (or restart) broker ``broker_id``: a new node with its actors, and its
        listener on the port it had before. A restarted broker opens a new store session,
        registers again (so it gets a new broker epoch) and its log manager re-opens its
        log dir. If it fails to start (e.g. its previous session still holds its
        registration), the error propagates and nothing of it is left running."""
        if self._tg is None or self.network is None or self.store is None:
            raise ClusterError("the cluster is not running")
        if broker_id in self.nodes and self.nodes[broker_id].running:
            raise ClusterError(f"broker {broker_id} is already running")
        scope = anyio.CancelScope()
        self._broker_scopes[broker_id] = scope
        try:
            node, server, port = await self._tg.start(self._run_broker, broker_id, scope)
        except BaseException:
            if self._broker_scopes.get(broker_id) is scope:
                del self._broker_scopes[broker_id]
            raise
        self.nodes[broker_id] = node
        if server is not None:
            self.listeners[broker_id] = server
            self.ports[broker_id] = port

    async def _run_broker(
        self,
        broker_id: int,
        scope: anyio.CancelScope,
        *,
        task_status: anyio.abc.TaskStatus[tuple[Node, KafkaWireServer | None, int]],
    ) -> None:
        """One run of a broker, from its start to its stop or crash: its node and listener
        in a task group of their own, so that ``wait_stopped`` knows when both are gone."""
        assert self.network is not None
        assert self.store is not None
        stopped = anyio.Event()
        self._stopped[broker_id] = stopped
        incarnation = self._incarnations.get(broker_id, 0)
        self._incarnations[broker_id] = incarnation + 1
        try:
            async with anyio.create_task_group() as tg:
                started = await start_broker_node(
                    tg,
                    BrokerSpec(
                        broker_id=broker_id,
                        host=self.spec.bind_host,
                        advertised_host=self.spec.advertised_host,
                        advertised_port=self.spec.advertised_port(broker_id),
                        port=self.ports.get(broker_id) or self._port_for(broker_id),
                        log_dir=self.spec.log_dir,
                        config=self.config,
                        rack=self.spec.racks.get(broker_id),
                        seed=self.spec.seed,
                        incarnation=incarnation,
                        listener=self.spec.listeners,
                        disk=self._disks.get(broker_id),
                        log_dirs=self.spec.log_dirs_per_broker,
                        max_open_logs=open_logs_budget(file_limit(), self.spec.brokers),
                    ),
                    attach=self.network.attach,
                    store=self.store,
                    tracer=self.tracer,
                    clock=self.clock,
                    listener_scope=scope,
                )
                task_status.started(started)
                await self._after_node_ended(broker_id, started[0], scope)
        finally:
            stopped.set()

    async def _after_node_ended(self, broker_id: int, node: Node, scope: anyio.CancelScope) -> None:
        """A broker that halts by itself (e.g. its last log dir failed: Kafka's
        ``Exit.halt(1)``) is a crashed process: its listener goes, ``on_halt`` hears of
        it, and its store session is left to expire, as ``crash_broker`` does (a crash we
        were asked for has already done both). The other brokers carry on."""
        await node.ended.wait()
        if not node.crashed or self._broker_scopes.get(broker_id) is not scope:
            return
        self._stop_listener(broker_id)
        if self.on_halt is not None:
            await self.on_halt(broker_id, node.fatal or "its node crashed")
        session_id = _session_id(node)
        if session_id is None:  # it halted before it had a session
            return
        self.tracer.emit(TraceKind.EVENT, node=node.node_id, type="broker_halted")
        await self._expire_later(session_id, self.config.zookeeper_session_timeout_ms / 1000)

    def _port_for(self, broker_id: int) -> int:
        """The Kafka port of a broker's first run (a restart binds the port it had).
        Without a base port, one picked outside the kernel's ephemeral range: a port the
        kernel gave (``bind(0)``) can be any outgoing connection's while the broker is down
        (``cluster.launch.ports``)."""
        if self.spec.base_port != 0:
            return self.spec.base_port + broker_id
        if not self.spec.listeners:
            return 0
        (port,) = free_ports(1, self.spec.bind_host)
        return port

    def stop_broker(self, broker_id: int) -> None:
        """Graceful stop: the broker's own shutdown steps run (it closes its store session,
        so its znode goes at once); ``wait_stopped`` waits for them to finish."""
        self._stop_listener(broker_id)
        self.nodes[broker_id].stop()

    def stop_brokers(self) -> None:
        """The whole cluster is going away: a graceful stop of every running broker, the
        highest id first (the caller then cancels ``run``)."""
        for broker_id in sorted(self.nodes, reverse=True):
            if self.nodes[broker_id].running:
                self.stop_broker(broker_id)

    async def wait_stopped(self, broker_id: int, *, timeout: float) -> bool:
        """Wait until broker ``broker_id``'s node and listener have ended (after a stop or
        a crash); False if they still run after ``timeout`` seconds."""
        stopped = self._stopped.get(broker_id)
        if stopped is None:
            return True
        with anyio.move_on_after(timeout):
            await stopped.wait()
        return stopped.is_set()

    async def crash_broker(self, broker_id: int) -> None:
        """Crash: no graceful step. As with a killed process, the broker's store session
        is left to expire: once its timeout passes without the broker, the store expires
        it (ZooKeeper's server does this for a dead client; in one process the client's
        own heartbeats would outlive the crash, so the cluster plays the server's part)."""
        node = self.nodes[broker_id]
        session_id = _session_id(node) if node.running else None
        pause_expiry = self._pause_expiries.pop(broker_id, None)
        self._stop_listener(broker_id)
        node.crash()
        if pause_expiry is not None:
            return  # a paused broker's session already expires on time
        if session_id is not None and self._tg is not None:
            timeout = self.config.zookeeper_session_timeout_ms / 1000
            self._tg.start_soon(self._expire_later, session_id, timeout)

    async def _expire_later(self, session_id: int, timeout: float) -> None:
        await self.clock.sleep(timeout)
        assert self.store is not None
        await self.store.expire_session(session_id)

    def pause_broker(self, broker_id: int) -> None:
        """Freeze a broker as SIGSTOP freezes its process (``Node.pause``; the run must be
        on a freezable loop). Nothing of it runs until ``resume_broker``: it answers
        nothing and sends nothing, and once its session timeout has passed its store
        session expires (the store server hears no heartbeat; here the cluster plays the
        server's part, as for a crash). Embedded store only."""
        node = self.nodes.get(broker_id)
        if node is None or not node.running or node.crashed:
            raise ClusterError(f"broker {broker_id} is not running")
        if not isinstance(self.store, EmbeddedStore):
            raise ClusterError("pausing a broker in one process needs the embedded store")
        if node.paused:
            return
        node.pause()
        session_id = _session_id(node)
        if session_id is not None and self._tg is not None:
            scope = self._pause_expiries[broker_id] = anyio.CancelScope()
            timeout = self.config.zookeeper_session_timeout_ms / 1000
            self._tg.start_soon(self._expire_unless_resumed, session_id, timeout, scope)

    def _kill_paused(self) -> None:
        """The cluster is going away: a paused broker ends as a SIGKILLed stopped process
        does (its frozen tasks could not see a cancellation otherwise)."""
        for node in self.nodes.values():
            if node.paused:
                node.crash()

    def resume_broker(self, broker_id: int) -> None:
        """Undo ``pause_broker``: the broker's held work runs, late; if its session
        expired meanwhile, it learns so now and registers again."""
        scope = self._pause_expiries.pop(broker_id, None)
        if scope is not None:
            scope.cancel()
        node = self.nodes.get(broker_id)
        if node is not None:
            node.resume()

    async def _expire_unless_resumed(
        self, session_id: int, timeout: float, scope: anyio.CancelScope
    ) -> None:
        with scope:
            await self._expire_later(session_id, timeout)

    def _stop_listener(self, broker_id: int) -> None:
        scope = self._broker_scopes.pop(broker_id, None)
        if scope is not None:
            scope.cancel()

    # ------------------------------------------------------------------ observation

    async def status(self, broker_id: int, *, timeout: float = 5.0) -> BrokerStatus | None:
        node = self.nodes.get(broker_id)
        if node is None or not node.running:
            return None
        try:
            reply = await node.ask(broker_ref(broker_id), BrokerStatusRequest(), timeout=timeout)
        except ActorError:  # no answer, a failed handler, or the node went down meanwhile
            return None
        return reply if isinstance(reply, BrokerStatus) else None

    async def wait_ready(self, *, timeout: float = 30.0) -> None:
        """Until the running brokers are ready (``is_ready``)."""
        running = sorted(b for b, n in self.nodes.items() if n.running)
        await wait_until_ready(self.status, running, clock=self.clock, timeout=timeout)

    async def controller_id(self) -> int:
        for broker_id in sorted(self.nodes):
            status = await self.status(broker_id)
            if status is not None and status.controller_id >= 0:
                return int(status.controller_id)
        return -1


def _session_id(node: Node) -> int | None:
    """The id of the store session the node's broker holds (None before it has one)."""
    try:
        return typing.cast(Broker, node.actor(BROKER_ACTOR)).session.session_id
    except (KeyError, RuntimeError):
        return None
