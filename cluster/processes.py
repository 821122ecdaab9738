"""``kemu up --processes``: one OS process per broker.

The launcher (``run_up_processes``) runs the metadata store (the embedded one, served over
TCP as node ``store``, or a real ZooKeeper), picks every broker's inter-node port up front
and spawns ``python -m cluster.cli broker ...`` once per broker, each with the full address
book. A broker process (``run_broker_process``) runs node ``broker-<id>`` with its
``Broker`` actor on a TCP network, a ``RemoteStore`` (or ``ZooKeeperStore``) session and a
Kafka listener, assembled by ``cluster.cluster.start_broker_node`` as in ``kemu up``. It
prints ``broker <id> ready pid <pid> port <kafka port>`` once registered.

The launcher waits for every child's line, then for the cluster to be ready (asking every
broker for its status over the network from a launcher node), prints the readiness table,
writes the cluster file (``processes: true``) and runs until SIGINT/SIGTERM: then it sends
SIGTERM to the children (a graceful stop, closing their store sessions), waits for them
(SIGKILL after a deadline) and stops the store. A child that dies meanwhile is reported
on stderr; the store expires its session after its timeout and the cluster carries on.
Children run in their own sessions (a terminal's Ctrl-C reaches the launcher only, which
stops them in order) and stop by themselves if the launcher disappears.
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
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import Process, TaskGroup
from anyio.streams.buffered import BufferedByteReceiveStream

from actors.admin import BrokerConfig
from actors.broker.broker import broker_node_id, broker_ref
from actors.clock import Clock, RealClock
from actors.runtime import Node
from actors.store import MetadataStore
from actors.trace import Tracer
from cluster.cluster import (
    BrokerSpec,
    ClusterError,
    ClusterSpec,
    serve_store,
    start_broker_node,
    wait_until_ready,
)
from cluster.connect import (
    EMBEDDED_SCHEME,
    STORE_NODE,
    BrokerEntry,
    ClusterFile,
    parse_host_port,
)
from cluster.network import Network, TcpTransport
from cluster.store.embedded import EmbeddedStore
from cluster.store.remote import STORE_ACTOR, RemoteStore
from cluster.trace import JsonlTraceWriter
from cluster.up import render_table
from protocol.base import ActorRef
from protocol.broker import BrokerStatus, BrokerStatusRequest
from protocol.errors import AskTimeoutError, KemuError, RemoteError, sole_error
from protocol.trace import TraceHeader

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
    """What one broker process runs (the arguments of ``kemu broker``)."""

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
    parent_pid: int | None = None  # stop when this process is no longer our parent


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
    tracer = Tracer()
    clock = RealClock()
    node_id = broker_node_id(spec.broker_id)
    transport = TcpTransport(host=spec.host, ports={node_id: spec.network_port})
    for peer, (host, port) in spec.peers.items():
        transport.add_peer(broker_node_id(peer), host, port)
    embedded = spec.store.startswith(EMBEDDED_SCHEME)
    if embedded:
        transport.add_peer(STORE_NODE, *parse_host_port(spec.store[len(EMBEDDED_SCHEME) :]))
    network = Network(transport, tracer=tracer, rng=random.Random(spec.seed), clock=clock)
    stop = anyio.Event()
    orphaned = anyio.Event()  # the launcher is gone, and with it the embedded store
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_set_on_signal, signals, stop)
            if spec.parent_pid is not None:
                tg.start_soon(_watch_parent, spec.parent_pid, stop, orphaned)
            listener = anyio.CancelScope()
            stopping = anyio.CancelScope()  # bounds the graceful stop once it begins
            ready = anyio.Event()
            tg.start_soon(_abort_start_up, stop, ready, stopping)
            await tg.start(network.run)
            store = await _broker_store(tg, spec, node_id, network, tracer, clock)
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
                            ),
                            attach=network.attach,
                            store=store,
                            tracer=tracer,
                            clock=clock,
                            listener_scope=listener,
                        )
                        line = READY_LINE.format(id=spec.broker_id, pid=os.getpid(), port=port)
                        print(line, flush=True)
                        ready.set()
                        await stop.wait()
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


async def _set_on_signal(signals: AsyncIterator[int], stop: anyio.Event) -> None:
    async for _ in signals:
        stop.set()


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
    broker_id: int
    process: Process
    ready: anyio.Event = field(default_factory=anyio.Event)
    port: int = 0
    output: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.process.pid


class ProcessCluster:
    """The launcher's view of a cluster of broker processes."""

    def __init__(self, spec: ClusterSpec, *, tracer: Tracer, clock: Clock) -> None:
        self.spec = spec
        self.tracer = tracer
        self.clock = clock
        self.network_ports: dict[int, int] = {}
        self.children: dict[int, _Child] = {}
        self.store_address = spec.zookeeper or ""
        self.stopping = False  # the children are being stopped
        self._node: Node | None = None
        self._stop = anyio.Event()
        self._starting = anyio.CancelScope()
        self._failure: ClusterError | None = None

    @property
    def ports(self) -> dict[int, int]:
        return {b: c.port for b, c in self.children.items()}

    @property
    def pids(self) -> dict[int, int]:
        return {b: c.pid for b, c in self.children.items()}

    def child_args(self, broker_id: int) -> list[str]:
        spec = self.spec
        port = 0 if spec.base_port == 0 else spec.base_port + broker_id
        args = [
            sys.executable, "-m", "cluster.cli", "broker",
            "--id", str(broker_id),
            "--store", self.store_address,
            "--host", spec.host,
            "--network-port", str(self.network_ports[broker_id]),
            "--port", str(port),
            "--log-dir", str(spec.log_dir),
            "--seed", str(spec.seed),
            "--parent-pid", str(os.getpid()),
        ]  # fmt: skip
        for peer, peer_port in sorted(self.network_ports.items()):
            if peer != broker_id:
                args += ["--peer", f"{broker_node_id(peer)}={spec.host}:{peer_port}"]
        if broker_id in spec.racks:
            args += ["--rack", spec.racks[broker_id]]
        for key, value in spec.config.items():
            args += ["--config", f"{key}={value}"]
        return args

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
        store: EmbeddedStore | None = None
        async with anyio.create_task_group() as tg:
            try:
                with self._starting:
                    if self.spec.zookeeper is None:
                        store = EmbeddedStore(tracer=self.tracer, clock=self.clock)
                        self.store_address = await tg.start(
                            functools.partial(
                                serve_store,
                                store,
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
                        await self._spawn(tg, broker_id)
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
                if not self._stop.is_set():
                    await on_ready()
                    await self._stop.wait()
            finally:
                with anyio.CancelScope(shield=True):
                    await self._stop_children()
                    if store is not None:
                        await store.aclose()
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

    async def _spawn(self, tg: TaskGroup, broker_id: int) -> None:
        process = await anyio.open_process(
            self.child_args(broker_id),
            stdin=None,
            stdout=-1,  # subprocess.PIPE
            stderr=None,
            start_new_session=True,
        )
        child = _Child(broker_id, process)
        self.children[broker_id] = child
        tg.start_soon(self._read, child)
        tg.start_soon(self._watch, child)

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
                child.port = int(line[len(expected) :])
                child.ready.set()
            else:
                child.output.append(line)
        if not child.ready.is_set() and not self.stopping:
            status = await child.process.wait()
            self._fail(
                ClusterError(
                    f"broker {child.broker_id} (pid {child.pid}) exited with status {status}"
                    " before it was ready"
                )
            )

    async def _watch(self, child: _Child) -> None:
        status = await child.process.wait()
        if not self.stopping and child.ready.is_set():
            print(
                f"kemu: broker {child.broker_id} (pid {child.pid}) exited unexpectedly"
                f" with status {status}",
                file=sys.stderr,
                flush=True,
            )

    async def _stop_children(self) -> None:
        self.stopping = True
        running = [c for c in self.children.values() if c.process.returncode is None]
        for child in running:
            _signal(child.process, signal.SIGTERM)
        with anyio.move_on_after(STOP_TIMEOUT):
            for child in running:
                await child.process.wait()
        for child in running:
            if child.process.returncode is None:
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
        if self._node is None or child is None or child.process.returncode is not None:
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
    async def announce() -> None:
        elapsed = time.perf_counter() - started
        controller = await cluster.controller_id()
        status = await cluster.status(controller)
        ClusterFile(
            store=cluster.store_address,
            brokers=tuple(
                BrokerEntry(
                    id=b,
                    host=spec.host,
                    port=cluster.ports[b],
                    pid=cluster.pids[b],
                    log_dir=str(spec.log_dir / f"broker-{b}"),
                    rack=spec.racks.get(b),
                )
                for b in sorted(cluster.children)
            ),
            controller=controller,
            cluster_id=status.cluster_id if status else "",
            pid=os.getpid(),
            processes=True,
        ).write(cluster_file)
        print(
            render_table(
                spec,
                ports=cluster.ports,
                pids=cluster.pids,
                controller=controller,
                elapsed=elapsed,
                store_address=cluster.store_address,
            ),
            flush=True,
        )
        print(f"cluster file: {cluster_file}\nCtrl-C stops the cluster.", flush=True)

    # The receiver stays open until the end: a second Ctrl-C must not kill the launcher
    # half-way through stopping its children.
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_stop_on_signal, signals, cluster)  # even while starting
            await cluster.run(announce)
            tg.cancel_scope.cancel()


async def _stop_on_signal(signals: AsyncIterator[int], cluster: ProcessCluster) -> None:
    async for signum in signals:
        print(f"\nkemu: {signal.Signals(signum).name}: stopping", flush=True)
        cluster.stop()
        return
