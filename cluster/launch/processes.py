"""``kemu up --processes``: one OS process per broker.

The launcher (``run_up_processes``) runs the metadata store (the embedded one, served over
TCP as node ``store``, or a real ZooKeeper), picks every broker's inter-node port up front
and spawns ``python -m cluster.cli _broker ...`` once per broker, each with the full address
book. A broker process (``run_broker_process``) runs node ``broker-<id>`` with its
``Broker`` actor on a TCP network, a ``RemoteStore`` (or ``ZooKeeperStore``) session and a
Kafka listener, assembled by ``cluster.launch.cluster.start_broker_node`` as in ``kemu up``. It
prints ``broker <id> ready pid <pid> port <kafka port>`` once registered.

The launcher waits for every child's line, then for the cluster to be ready (asking every
broker for its status over the network from a launcher node), prints the readiness table,
writes the cluster file (``processes: true``) and runs until SIGINT/SIGTERM: then it sends
SIGINT to the children (a graceful stop closing their store sessions, without controlled
shutdown: the whole cluster goes, there is nowhere to move leaders), waits for them
(SIGKILL after a deadline) and stops the store. A child that dies meanwhile is reported
on stderr; the store expires its session after its timeout and the cluster carries on.
Children run in their own sessions (a terminal's Ctrl-C reaches the launcher only, which
stops them in order) and stop by themselves if the launcher disappears.

The launcher owns the children, so ``kemu broker stop|kill|start ID`` reaches it, through
the control endpoint of ``cluster.launch.control``: kill is a SIGKILL of the broker's process,
stop a SIGTERM (the broker's own graceful stop, controlled shutdown first), start a new
process for the same id with the same ports, log dir and config, once the killed one's
registration has expired.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import signal
import socket
import sys
import time
import typing
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import Process, TaskGroup
from anyio.streams.buffered import BufferedByteReceiveStream

from actors.admin import BrokerConfig
from actors.broker.broker import BROKER_ACTOR, Broker, broker_node_id, broker_ref
from actors.broker.controlled_shutdown import CONTROLLED_SHUTDOWN_ACTOR, ControlledShutdownActor
from actors.controller.recording import CONTROLLER_INPUTS
from actors.runtime.actor import Attach, Node
from actors.runtime.clock import Clock, RealClock
from actors.runtime.tracer import Tracer
from actors.zk.store import MetadataStore
from cluster.cli.up import render_table
from cluster.launch.cluster import (
    BrokerSpec,
    ClusterError,
    ClusterSpec,
    serve_store,
    start_broker_node,
    wait_until_ready,
)
from cluster.launch.connect import EMBEDDED_SCHEME, STORE_NODE, open_store, parse_host_port
from cluster.launch.control import (
    EXPIRY_MARGIN,
    SETTLE_TIMEOUT,
    LauncherError,
    Publisher,
    expiry_timeout,
    launcher_status,
    paused_note,
    serve_control,
    settle,
    wait_unregistered,
)
from cluster.logging import configured_level
from cluster.network import Network, TcpTransport
from cluster.store.embedded import EmbeddedStore
from cluster.store.remote import STORE_ACTOR, RemoteStore
from cluster.trace_files import JsonlTraceWriter
from protocol.base import ActorRef
from protocol.broker import BrokerStatus, BrokerStatusRequest
from protocol.errors import AskTimeoutError, KemuError, RemoteError, sole_error
from protocol.launcher import BrokerState, LauncherStatus
from protocol.trace import TraceEvent, TraceHeader

if typing.TYPE_CHECKING:
    from cluster.chaos.tap import ControlTap

BROKER_PROCESS_COMMAND = "_broker"  # the hidden `kemu _broker` that runs one broker process
READY_LINE = "broker {id} ready pid {pid} port {port}"
CHILD_READY_TIMEOUT = 60.0  # seconds for every child to print its ready line
CLUSTER_READY_TIMEOUT = 30.0  # then for the cluster to agree on its controller and brokers
STOP_TIMEOUT = 15.0  # for the children to stop after SIGTERM; SIGKILL after
CHILD_STOP_TIMEOUT = 10.0  # a child gives up its graceful steps (store gone?) after this
CLOSE_TIMEOUT = 3.0  # then for closing what is left of its store client
PARENT_POLL = 0.5  # how often a child checks that its launcher still lives


# ---------------------------------------------------------------------- a broker process


@dataclass(frozen=True)
class BrokerProcessSpec:
    """What one broker process runs (the arguments of ``kemu _broker``)."""

    broker_id: int
    store: str  # embedded://HOST:PORT or a ZooKeeper connection string
    network_port: int
    peers: Mapping[int, tuple[str, int]]  # other brokers' inter-node addresses
    port: int  # the Kafka listener; 0 = any free port
    log_dir: Path
    host: str = "127.0.0.1"
    rack: str | None = None
    config: Mapping[str, str] = field(default_factory=dict)
    seed: int = 0
    incarnation: int = 0  # how many times this broker's process ran before (BrokerSpec)
    parent_pid: int | None = None  # stop when this process is no longer our parent
    # Chaos real mode (cluster/chaos): the process's own trace.
    trace: Path | None = None
    """Write this process's trace here (JSON lines, flushed per event), with the network
    tap of ``cluster.chaos.tap``; ts counts from ``trace_origin`` on CLOCK_MONOTONIC,
    which every process on the machine shares, so that traces merge in time order."""
    trace_origin: float = 0.0


async def run_broker_process(spec: BrokerProcessSpec) -> int:
    """Run one broker until SIGINT/SIGTERM (or its launcher's death), then stop it
    gracefully: the broker closes its store session, so its registration goes at once."""
    try:
        return await _run_broker(spec)
    except BaseExceptionGroup as group:  # the task groups wrap what fails in them
        leaf = sole_error(group)
        if isinstance(leaf, KemuError):
            raise leaf from None
        raise


async def _run_broker(spec: BrokerProcessSpec) -> int:
    if spec.trace is None:
        return await _serve_broker(spec, Tracer(), None)
    with _traced(spec) as (tracer, tap):  # chaos: trace this process
        return await _serve_broker(spec, tracer, tap)


# ---------------------------------------------- a traced broker process (chaos real mode)


@contextlib.contextmanager
def _traced(spec: BrokerProcessSpec) -> Iterator[tuple[Tracer, ControlTap]]:
    """A tracer writing ``spec.trace`` (flushed per event: the chaos runner reads it as it
    grows) with times on CLOCK_MONOTONIC from ``spec.trace_origin``."""
    from cluster.chaos.tap import ControlTap  # not at the top: cluster.chaos imports us

    assert spec.trace is not None
    tracer = Tracer(  # recording the controller's inputs, for ``kemu trace replay``
        time_fn=time.monotonic, origin=spec.trace_origin, details={CONTROLLER_INPUTS}
    )
    header = TraceHeader(run=f"broker-{spec.broker_id}", seed=spec.seed, clock="real")
    writer = JsonlTraceWriter(spec.trace, header)

    def sink(event: TraceEvent) -> None:
        writer(event)
        writer.flush()

    tracer.add_sink(sink)
    try:
        yield tracer, ControlTap(tracer)
    finally:
        writer.close()


async def _expire_on_signal(store: MetadataStore, broker: list[Node]) -> None:
    """SIGUSR1 (chaos's ``expire_session``): expire the session of this broker
    (``broker``: its node, once started) for real; the ZooKeeper client takes the
    session over and closes it."""
    with anyio.open_signal_receiver(signal.SIGUSR1) as signals:
        async for _ in signals:
            try:
                actor = typing.cast(Broker, broker[-1].actor(BROKER_ACTOR))
                session_id = actor.session.session_id
            except (IndexError, KeyError, RuntimeError):  # not started, or no session yet
                continue
            await store.expire_session(session_id)


async def _serve_broker(spec: BrokerProcessSpec, tracer: Tracer, tap: ControlTap | None) -> int:
    clock = RealClock()
    node_id = broker_node_id(spec.broker_id)
    transport = TcpTransport(host=spec.host, ports={node_id: spec.network_port})
    for peer, (host, port) in spec.peers.items():
        transport.add_peer(broker_node_id(peer), host, port)
    embedded = spec.store.startswith(EMBEDDED_SCHEME)
    if embedded:
        transport.add_peer(STORE_NODE, *parse_host_port(spec.store[len(EMBEDDED_SCHEME) :]))
    network = Network(transport, tracer=tracer, rng=random.Random(spec.seed), clock=clock)
    attach: Attach = network.attach
    started: list[Node] = []  # the broker's node, once started (chaos's expiries)
    if tap is not None:
        network.add_observer(tap.observe)
        attach = tap.attach(attach)
    stop = anyio.Event()
    orphaned = anyio.Event()  # the launcher is gone, and with it the embedded store
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with anyio.create_task_group() as tg:
            received: list[int] = []
            tg.start_soon(_set_on_signal, signals, stop, received)
            if spec.parent_pid is not None:
                tg.start_soon(_watch_parent, spec.parent_pid, stop, orphaned)
            listener = anyio.CancelScope()
            stopping = anyio.CancelScope()  # bounds the graceful stop once it begins
            ready = anyio.Event()
            tg.start_soon(_abort_start_up, stop, ready, stopping)
            await tg.start(network.run)
            store = await _broker_store(tg, spec, node_id, network, tracer, clock)
            if tap is not None:
                tg.start_soon(_expire_on_signal, store, started)
            try:
                with stopping:
                    async with anyio.create_task_group() as broker_tg:
                        node, _, port = await start_broker_node(
                            broker_tg,
                            BrokerSpec(
                                broker_id=spec.broker_id,
                                host=spec.host,
                                port=spec.port,
                                log_dir=spec.log_dir,
                                config=BrokerConfig.from_overrides(dict(spec.config)),
                                rack=spec.rack,
                                seed=spec.seed,
                                incarnation=spec.incarnation,
                            ),
                            attach=attach,
                            store=store,
                            tracer=tracer,
                            clock=clock,
                            listener_scope=listener,
                        )
                        started.append(node)
                        line = READY_LINE.format(id=spec.broker_id, pid=os.getpid(), port=port)
                        print(line, flush=True)
                        ready.set()
                        await stop.wait()
                        if received[:1] == [signal.SIGINT]:
                            _skip_controlled_shutdown(node)
                        stopping.deadline = anyio.current_time() + CHILD_STOP_TIMEOUT
                        listener.cancel()
                        if orphaned.is_set() and isinstance(store, RemoteStore):
                            node.crash()  # no store to close a session with
                        else:
                            node.stop()
            finally:
                if orphaned.is_set() and isinstance(store, RemoteStore):
                    store.discard()
                else:
                    with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_TIMEOUT):
                        await store.aclose()
            tg.cancel_scope.cancel()
    return 0


async def _broker_store(
    tg: TaskGroup,
    spec: BrokerProcessSpec,
    node_id: str,
    network: Network,
    tracer: Tracer,
    clock: Clock,
) -> MetadataStore:
    if not spec.store.startswith(EMBEDDED_SCHEME):
        from cluster.store.zookeeper import ZooKeeperStore

        return ZooKeeperStore(spec.store, tracer=tracer, clock=clock)
    # The store client on a node of its own, so that it outlives the broker's node while
    # the broker closes its session on a graceful stop.
    client = Node(f"{node_id}-store-client", attach=network.attach, tracer=tracer, clock=clock)
    await tg.start(client.run)
    return RemoteStore(client, ActorRef(STORE_NODE, STORE_ACTOR))


async def _set_on_signal(
    signals: AsyncIterator[int], stop: anyio.Event, received: list[int]
) -> None:
    async for signum in signals:
        received.append(signum)
        stop.set()


def _skip_controlled_shutdown(node: Node) -> None:
    """SIGINT from the launcher: the whole cluster stops, so there is no broker to move
    leaderships to (the last one would retry for ``max.retries`` x backoff for nothing);
    SIGTERM (``kemu broker stop``) keeps the controlled shutdown."""
    actor = node.actor(CONTROLLED_SHUTDOWN_ACTOR)
    if isinstance(actor, ControlledShutdownActor):
        actor.enable = False


async def _abort_start_up(stop: anyio.Event, ready: anyio.Event, scope: anyio.CancelScope) -> None:
    """Told to stop before the broker is up: give up starting it."""
    await stop.wait()
    if not ready.is_set():
        scope.cancel()


async def _watch_parent(parent_pid: int, stop: anyio.Event, orphaned: anyio.Event) -> None:
    while os.getppid() == parent_pid:  # noqa: ASYNC110 - an OS condition, no event
        await anyio.sleep(PARENT_POLL)
    orphaned.set()
    stop.set()


# ---------------------------------------------------------------------- the launcher


def free_ports(count: int, host: str) -> list[int]:
    """``count`` distinct free TCP ports on ``host`` (held together while picked)."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind((host, 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


@dataclass
class _Child:
    """One run of a broker process (a restart is a new ``_Child``)."""

    broker_id: int
    process: Process
    ready: anyio.Event = field(default_factory=anyio.Event)
    exited: anyio.Event = field(default_factory=anyio.Event)
    output: list[str] = field(default_factory=list)
    commanded: bool = False  # stopped or killed on purpose: its exit is no surprise
    paused: bool = False  # SIGSTOPped (chaos' pause_broker), until SIGCONT

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process.returncode is None


class ProcessCluster:
    """The launcher's view of a cluster of broker processes; also the ``Launcher`` that
    ``kemu broker`` drives (``cluster.launch.control``): ``kill_broker`` is a SIGKILL of the
    broker's process, ``stop_broker`` a SIGTERM (the broker's graceful stop: controlled
    shutdown, then its store session closed), ``start_broker`` a new process for the same
    id with the same ports, log dir and config."""

    def __init__(self, spec: ClusterSpec, *, tracer: Tracer, clock: Clock) -> None:
        self.spec = spec
        self.tracer = tracer
        self.clock = clock
        self.network_ports: dict[int, int] = {}
        self.children: dict[int, _Child] = {}
        self._incarnations: dict[int, int] = {}  # per broker: how many processes it had
        self.kafka_ports: dict[int, int] = {}  # where each broker listens, kept for restarts
        self.store_address = spec.zookeeper or ""
        self.on_exit: Callable[[int], Awaitable[None]] | None = None
        """Called when a broker process exits without being told to."""
        self._stopping_children = False
        self._launched = False  # every first child was ready: later failures are a command's
        self._down: dict[int, BrokerState] = {}  # how each broker that is down went down
        self._node: Node | None = None
        self._tg: TaskGroup | None = None
        self._store: EmbeddedStore | None = None
        self._stop = anyio.Event()
        self._starting = anyio.CancelScope()
        self._failure: ClusterError | None = None
        # Chaos real mode (cluster/chaos): where the brokers trace.
        self.trace_dir: Path | None = None
        """Each broker process traces into ``trace_dir/broker-<id>.<run>.jsonl``."""
        self.trace_origin = 0.0  # their time zero on CLOCK_MONOTONIC (BrokerProcessSpec)

    @property
    def stopping(self) -> bool:
        """The whole cluster is stopping (or its children are being stopped)."""
        return self._stop.is_set() or self._stopping_children

    @property
    def ports(self) -> dict[int, int]:
        return dict(self.kafka_ports)

    @property
    def pids(self) -> dict[int, int]:
        return {b: c.pid for b, c in self.children.items()}

    def child_args(self, broker_id: int) -> list[str]:
        spec = self.spec
        port = 0 if spec.base_port == 0 else spec.base_port + broker_id
        port = self.kafka_ports.get(broker_id, port)  # a restart: where clients know it is
        args = [
            sys.executable, "-m", "cluster.cli", "--log-level", configured_level(),
            BROKER_PROCESS_COMMAND,
            "--id", str(broker_id),
            "--store", self.store_address,
            "--host", spec.host,
            "--network-port", str(self.network_ports[broker_id]),
            "--port", str(port),
            "--log-dir", str(spec.log_dir),
            "--seed", str(spec.seed),
            "--incarnation", str(self._incarnations.get(broker_id, 0)),
            "--parent-pid", str(os.getpid()),
        ]  # fmt: skip
        for peer, peer_port in sorted(self.network_ports.items()):
            if peer != broker_id:
                args += ["--peer", f"{broker_node_id(peer)}={spec.host}:{peer_port}"]
        if broker_id in spec.racks:
            args += ["--rack", spec.racks[broker_id]]
        for key, value in spec.config.items():
            args += ["--config", f"{key}={value}"]
        if self.trace_dir is not None:  # chaos
            run = self._incarnations.get(broker_id, 0)
            trace = self.trace_dir / f"broker-{broker_id}.{run}.jsonl"
            args += ["--trace", str(trace), "--trace-origin", repr(self.trace_origin)]
        return args

    @property
    def embedded_store(self) -> EmbeddedStore | None:
        """The embedded store this launcher serves (None on ZooKeeper)."""
        return self._store

    def expire_broker_session(self, broker_id: int) -> None:
        """SIGUSR1 to a traced broker process: it expires its own store session for real
        (``BrokerProcessSpec.trace``)."""
        child = self.children[broker_id]
        if self.trace_dir is None or not child.running:
            raise LauncherError(f"broker {broker_id} cannot expire its session on request")
        _signal(child.process, signal.SIGUSR1)

    async def pause_broker(self, broker_id: int) -> str:
        """SIGSTOP to the broker's process: it freezes whole (its store heartbeats too, so
        its session expires after its timeout) until ``resume_broker``."""
        child = self.children.get(broker_id)
        if child is None or not child.running:
            raise LauncherError(f"broker {broker_id} is not running")
        _signal(child.process, signal.SIGSTOP)
        child.paused = True
        note = paused_note(broker_id, self.spec)
        return note.replace(" paused (", f" paused (SIGSTOP to pid {child.pid}; ", 1)

    def continue_broker(self, broker_id: int) -> None:
        """SIGCONT to a paused broker's process (nothing if it is not paused)."""
        child = self.children[broker_id]
        if child.paused:
            child.paused = False
            _signal(child.process, signal.SIGCONT)

    async def resume_broker(self, broker_id: int) -> str:
        """``kemu broker resume``: SIGCONT, then wait for the brokers to agree again."""
        self.continue_broker(broker_id)
        pid = self.children[broker_id].pid
        return f"broker {broker_id} resumed (SIGCONT to pid {pid})" + await self._settled()

    def stop(self) -> None:
        """Stop the cluster (at any point of its start-up too): ``run`` returns once the
        children have stopped."""
        self._stop.set()
        self._starting.cancel()

    async def run(self, on_ready: Callable[[], Awaitable[None]]) -> None:
        """Start the store and the brokers, call ``on_ready`` once the cluster is ready,
        run until ``stop``; then stop the children (SIGTERM, SIGKILL after a deadline)
        while the store still serves them (so they close their sessions), then the store.
        Raises ``ClusterError`` if the cluster did not start."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                with self._starting:
                    if self.spec.zookeeper is None:
                        self._store = EmbeddedStore(tracer=self.tracer, clock=self.clock)
                        self.store_address = await tg.start(
                            functools.partial(
                                serve_store,
                                self._store,
                                host=self.spec.host,
                                port=self.spec.store_port or 0,
                                tracer=self.tracer,
                                clock=self.clock,
                            )
                        )
                    ports = free_ports(self.spec.brokers, self.spec.host)
                    self.network_ports = dict(enumerate(ports))
                    await self._start_status_node(tg)
                    for broker_id in range(self.spec.brokers):
                        await self._spawn(broker_id)
                    try:
                        await self._wait_children_ready()
                        await wait_until_ready(
                            self.status,
                            sorted(self.children),
                            clock=self.clock,
                            timeout=CLUSTER_READY_TIMEOUT,
                        )
                    except ClusterError as exc:
                        self._fail(exc)
                    self._launched = True
                if not self._stop.is_set():
                    await on_ready()
                    await self._stop.wait()
            finally:
                with anyio.CancelScope(shield=True):
                    await self._stop_children()
                    if self._store is not None:
                        await self._store.aclose()
                self._tg = None
                tg.cancel_scope.cancel()
        if self._failure is not None:
            raise self._failure

    async def _wait_children_ready(self) -> None:
        try:
            with anyio.fail_after(CHILD_READY_TIMEOUT):
                for child in self.children.values():
                    await child.ready.wait()
        except TimeoutError:
            late = sorted(b for b, c in self.children.items() if not c.ready.is_set())
            raise ClusterError(
                f"brokers {late} were not ready within {CHILD_READY_TIMEOUT}s"
            ) from None

    def _fail(self, error: ClusterError) -> None:
        if self._failure is None:
            self._failure = error
        self.stop()

    async def _start_status_node(self, tg: TaskGroup) -> None:
        transport = TcpTransport(host=self.spec.host)
        for broker_id, port in self.network_ports.items():
            transport.add_peer(broker_node_id(broker_id), self.spec.host, port)
        network = Network(transport, tracer=self.tracer, rng=random.Random(0), clock=self.clock)
        await tg.start(network.run)
        self._node = Node(
            f"kemu-up-{os.getpid()}", attach=network.attach, tracer=self.tracer, clock=self.clock
        )
        await tg.start(self._node.run)

    async def _spawn(self, broker_id: int) -> _Child:
        if self._tg is None:
            raise ClusterError("the cluster is not running")
        args = self.child_args(broker_id)
        self._incarnations[broker_id] = self._incarnations.get(broker_id, 0) + 1
        process = await anyio.open_process(
            args,
            stdin=None,
            stdout=-1,  # subprocess.PIPE
            stderr=None,
            start_new_session=True,
        )
        child = _Child(broker_id, process)
        self.children[broker_id] = child
        self._tg.start_soon(self._read, child)
        self._tg.start_soon(self._watch, child)
        if self._stopping_children:  # spawned while the others were being stopped
            child.commanded = True
            _signal(process, signal.SIGINT)
        return child

    async def _read(self, child: _Child) -> None:
        """The child's stdout: its ready line, then whatever else it prints."""
        assert child.process.stdout is not None
        lines = BufferedByteReceiveStream(child.process.stdout)
        expected = f"broker {child.broker_id} ready pid {child.pid} port "
        while True:
            try:
                line = (await lines.receive_until(b"\n", 65536)).decode(errors="replace")
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
                break
            if not child.ready.is_set() and line.startswith(expected):
                self.kafka_ports[child.broker_id] = int(line[len(expected) :])
                child.ready.set()
            else:
                child.output.append(line)
        if not child.ready.is_set() and not self.stopping and not self._launched:
            status = await child.process.wait()
            self._fail(
                ClusterError(
                    f"broker {child.broker_id} (pid {child.pid}) exited with status {status}"
                    " before it was ready"
                )
            )

    async def _watch(self, child: _Child) -> None:
        status = await child.process.wait()
        child.exited.set()
        if self.stopping or child.commanded or not child.ready.is_set():
            return
        self._down[child.broker_id] = BrokerState.EXITED
        print(
            f"kemu: broker {child.broker_id} (pid {child.pid}) exited unexpectedly"
            f" with status {status}",
            file=sys.stderr,
            flush=True,
        )
        if self.on_exit is not None:
            await self.on_exit(child.broker_id)

    async def _stop_children(self) -> None:
        """The whole cluster stops: SIGINT, a graceful stop without controlled shutdown
        (see ``_skip_controlled_shutdown``)."""
        self._stopping_children = True
        running = [c for c in self.children.values() if c.running]
        for child in running:
            _signal(child.process, signal.SIGINT)
        with anyio.move_on_after(STOP_TIMEOUT):
            for child in running:
                await child.process.wait()
        for child in running:
            if child.running:
                print(
                    f"kemu: broker {child.broker_id} (pid {child.pid}) did not stop within"
                    f" {STOP_TIMEOUT}s: killing it",
                    file=sys.stderr,
                    flush=True,
                )
                _signal(child.process, signal.SIGKILL)
                await child.process.wait()

    async def status(self, broker_id: int, *, timeout: float = 2.0) -> BrokerStatus | None:
        """The status of a broker, asked over the network; None if it does not answer."""
        child = self.children.get(broker_id)
        if self._node is None or child is None or not child.running:
            return None
        try:
            reply = await self._node.ask(
                broker_ref(broker_id), BrokerStatusRequest(), timeout=timeout
            )
        except (AskTimeoutError, RemoteError):
            return None
        return reply if isinstance(reply, BrokerStatus) else None

    async def controller_id(self) -> int:
        for broker_id in sorted(self.children):
            status = await self.status(broker_id)
            if status is not None and status.controller_id >= 0:
                return int(status.controller_id)
        return -1

    # ------------------------------------------------------------ kemu broker (Launcher)

    def broker_states(self) -> Mapping[int, BrokerState]:
        return {
            b: (BrokerState.PAUSED if c.paused else BrokerState.RUNNING)
            if c.running
            else self._down.get(b, BrokerState.EXITED)
            for b, c in sorted(self.children.items())
        }

    def _running(self) -> list[int]:
        return sorted(b for b, c in self.children.items() if c.running)

    async def stop_broker(self, broker_id: int) -> str:
        child = self.children[broker_id]
        child.commanded = True
        self._down[broker_id] = BrokerState.STOPPED
        _signal(child.process, signal.SIGTERM)
        with anyio.move_on_after(STOP_TIMEOUT):
            await child.process.wait()
        if child.running:
            self._down[broker_id] = BrokerState.KILLED
            _signal(child.process, signal.SIGKILL)
            await child.process.wait()
            return (
                f"broker {broker_id} (pid {child.pid}) did not stop within {STOP_TIMEOUT:g}s"
                " of SIGTERM: killed it"
            )
        note = (
            f"broker {broker_id} stopped (SIGTERM to pid {child.pid}: graceful shutdown,"
            f" exit status {child.process.returncode})"
        )
        return note + await self._settled()

    async def kill_broker(self, broker_id: int) -> str:
        child = self.children[broker_id]
        child.commanded = True
        self._down[broker_id] = BrokerState.KILLED
        _signal(child.process, signal.SIGKILL)
        await child.process.wait()
        return (
            f"broker {broker_id} killed (SIGKILL to pid {child.pid}): its session expires"
            f" after {expiry_timeout(self.spec):g}s, then the controller sees it gone"
        )

    async def start_broker(self, broker_id: int) -> str:
        timeout = expiry_timeout(self.spec) + EXPIRY_MARGIN
        if self._store is not None:
            await wait_unregistered(self._store, broker_id, timeout=timeout, clock=self.clock)
        else:
            async with open_store(self.store_address, name="kemu-launcher") as store:
                await wait_unregistered(store, broker_id, timeout=timeout, clock=self.clock)
        if self.stopping:
            raise LauncherError("the cluster is stopping")
        child = await self._spawn(broker_id)
        with anyio.move_on_after(CHILD_READY_TIMEOUT):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_set_when, child.ready, tg.cancel_scope)
                tg.start_soon(_set_when, child.exited, tg.cancel_scope)
        if not child.ready.is_set():
            child.commanded = True
            if child.running:
                _signal(child.process, signal.SIGKILL)
                await child.process.wait()
                why = f"was not ready within {CHILD_READY_TIMEOUT:g}s"
            else:
                why = f"exited with status {child.process.returncode} before it was ready"
            raise LauncherError(f"broker {broker_id} (pid {child.pid}) {why}")
        self._down.pop(broker_id, None)
        settled = await self._settled()
        status = await self.status(broker_id)
        epoch = status.broker_epoch if status is not None else -1
        return f"broker {broker_id} started (pid {child.pid}, broker epoch {epoch})" + settled

    async def _settled(self) -> str:
        """Wait for the running brokers to agree again; a note if they did not."""
        if await settle(self.status, self._running(), clock=self.clock):
            return ""
        return f"; the brokers did not agree on the cluster within {SETTLE_TIMEOUT:g}s"

    async def cluster_status(self) -> LauncherStatus:
        return await launcher_status(
            self.broker_states(),
            self.status,
            host=self.spec.host,
            ports=self.kafka_ports,
            pid=lambda broker_id: self.children[broker_id].pid,
            processes=True,
        )


async def _set_when(event: anyio.Event, scope: anyio.CancelScope) -> None:
    """Cancel ``scope`` once ``event`` is set (the first of several events to wait for)."""
    await event.wait()
    scope.cancel()


def _signal(process: Process, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # it has just exited
        process.send_signal(signum)


async def run_up_processes(spec: ClusterSpec, *, cluster_file: Path, trace: Path | None) -> int:
    """``kemu up --processes``: as ``kemu up``, with one process per broker."""
    tracer = Tracer()
    writer = None
    if trace is not None:  # the launcher's own events (the store's): brokers trace nothing
        writer = JsonlTraceWriter(trace, TraceHeader(run="kemu-up", seed=spec.seed, clock="real"))
        tracer.add_sink(writer)
    started = time.perf_counter()  # wall time of the launch, for the user
    cluster = ProcessCluster(spec, tracer=tracer, clock=RealClock())
    try:
        await _launch(spec, cluster, cluster_file, started)
    except BaseExceptionGroup as group:  # the task groups wrap what fails in them
        leaf = sole_error(group)
        if isinstance(leaf, KemuError):
            raise leaf from None
        raise
    finally:
        cluster_file.unlink(missing_ok=True)  # noqa: ASYNC240 - one small local file, at exit
        if writer is not None:
            writer.close()
    print("kemu: stopped", flush=True)
    return 0


async def _launch(
    spec: ClusterSpec, cluster: ProcessCluster, cluster_file: Path, started: float
) -> None:
    publisher = Publisher(cluster_file, spec, store="")

    async def announce(control_tg: TaskGroup) -> None:
        elapsed = time.perf_counter() - started
        publisher.store = cluster.store_address
        publisher.control = await control_tg.start(
            functools.partial(
                serve_control,
                cluster,
                publisher,
                host=spec.host,
                tracer=cluster.tracer,
                clock=cluster.clock,
            )
        )
        status = await cluster.cluster_status()
        publisher(status, None)
        print(
            render_table(
                spec,
                ports=cluster.ports,
                pids=cluster.pids,
                controller=status.controller_id,
                elapsed=elapsed,
                store_address=cluster.store_address,
            ),
            flush=True,
        )
        print(f"cluster file: {cluster_file}\nCtrl-C stops the cluster.", flush=True)

    async def exited(broker_id: int) -> None:
        if publisher.control and not cluster.stopping:
            publisher(await cluster.cluster_status(), None)

    cluster.on_exit = exited
    # The receiver stays open until the end: a second Ctrl-C must not kill the launcher
    # half-way through stopping its children.
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_stop_on_signal, signals, cluster)  # even while starting
            async with anyio.create_task_group() as control_tg:
                await cluster.run(functools.partial(announce, control_tg))
                control_tg.cancel_scope.cancel()
            tg.cancel_scope.cancel()


async def _stop_on_signal(signals: AsyncIterator[int], cluster: ProcessCluster) -> None:
    async for signum in signals:
        print(f"\nkemu: {signal.Signals(signum).name}: stopping", flush=True)
        cluster.stop()
        return
