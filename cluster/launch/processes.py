"""``kemu up --processes``: one OS process per broker.

The launcher (``run_up_processes``) runs the metadata store (the embedded one, served over
TCP as node ``store``, or a real ZooKeeper), picks every broker's inter-node port up front
and spawns ``python -m cluster.cli _broker ...`` once per broker, each with the full address
book: a broker process of ``cluster.launch.broker_process``, which prints
``broker <id> ready pid <pid> port <kafka port>`` once registered.

The launcher waits for every child's line, then for the cluster to be ready (asking every
broker for its status over the network from a launcher node), prints the readiness table,
writes the cluster file (``processes: true``) and runs until SIGINT/SIGTERM: then it sends
SIGINT to the children (a graceful stop closing their store sessions, without controlled
shutdown: the whole cluster goes, there is nowhere to move leaders), waits for them
(SIGKILL after a deadline) and stops the store. A child that dies meanwhile is reported
on stderr; the store expires its session after its timeout and the cluster carries on.
Children run in their own sessions (a terminal's Ctrl-C reaches the launcher only, which
stops them in order) and stop by themselves if the launcher disappears; the launcher, given
``--parent-pid``, stops them as on SIGTERM once the program that started it is gone
(``cluster.launch.watchdog``).

The launcher owns the children, so ``kemu broker stop|kill|start ID`` reaches it, through
the control endpoint of ``cluster.launch.control``: kill is a SIGKILL of the broker's process,
stop a SIGTERM (the broker's own graceful stop, controlled shutdown first), start a new
process for the same id with the same ports, log dir and config, once the killed one's
registration has expired.

The launcher makes the cluster's secret (``cluster.network.auth``): its store server and
control endpoint ask for it, it proves it to the brokers, and it hands it to each child in
the environment (``broker_process.SECRET_ENV``), never on the command line.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import Process, TaskGroup
from anyio.streams.buffered import BufferedByteReceiveStream

from actors.broker.broker import broker_node_id, broker_ref
from actors.runtime.actor import Node
from actors.runtime.clock import Clock, RealClock
from actors.runtime.tracer import Tracer
from cluster.launch.announce import announce_ready, release_cluster_file
from cluster.launch.broker_process import BROKER_PROCESS_COMMAND, READY_LINE, SECRET_ENV
from cluster.launch.cluster import ClusterError, ClusterSpec, serve_store, wait_until_ready
from cluster.launch.connect import open_store
from cluster.launch.control import (
    EXPIRY_MARGIN,
    SETTLE_TIMEOUT,
    VIEW_TIMEOUT,
    LauncherError,
    Publisher,
    cluster_metrics,
    cluster_view,
    expiry_timeout,
    launcher_status,
    paused_note,
    settle,
    wait_unregistered,
)
from cluster.launch.ports import free_ports
from cluster.launch.watchdog import first_stop
from cluster.logging import configured, log_options
from cluster.network import Network, TcpTransport
from cluster.network.auth import new_secret
from cluster.store.embedded import EmbeddedStore
from cluster.trace_files import JsonlTraceWriter
from protocol.base import ActorRef, Message
from protocol.broker import BrokerStatus, BrokerStatusRequest
from protocol.errors import AskTimeoutError, RemoteError, unwrap_kemu_error
from protocol.launcher import BrokerState, ClusterMetrics, ClusterView, LauncherStatus
from protocol.trace import TraceHeader

CHILD_READY_TIMEOUT = 60.0  # seconds for every child to print its ready line
CLUSTER_READY_TIMEOUT = 30.0  # then for the cluster to agree on its controller and brokers
STOP_TIMEOUT = 15.0  # for the children to stop after SIGTERM; SIGKILL after


# ---------------------------------------------------------------------- the launcher


@dataclass
class _Child:
    """One run of a broker process (a restart is a new ``_Child``)."""

    broker_id: int
    process: Process
    ready: anyio.Event = field(default_factory=anyio.Event)
    exited: anyio.Event = field(default_factory=anyio.Event)
    output: list[str] = field(default_factory=list)
    commanded: bool = False  # stopped or killed on purpose: its exit is no surprise
    paused: bool = False  # SIGSTOPped (pause_broker), until SIGCONT

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
        self.secret = new_secret()  # what every connection to the cluster must prove
        self.tracer = tracer
        self.clock = clock
        self.network_ports: dict[int, int] = {}
        self.children: dict[int, _Child] = {}
        self._incarnations: dict[int, int] = {}  # per broker: how many processes it had
        self.kafka_ports: dict[int, int] = {}  # where each broker listens, kept for restarts
        self._picked_kafka_ports: dict[int, int] = {}  # base_port 0: picked before the first run
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
        # Traced broker processes (BrokerProcessSpec.trace): where they trace.
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
        port = self._picked_kafka_ports.get(broker_id, port)
        port = self.kafka_ports.get(broker_id, port)  # a restart: where clients know it is
        args = [
            sys.executable, "-m", "cluster.cli", *log_options(configured()),
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
        if spec.listener_host is not None:  # the Kafka listener binds elsewhere
            args += ["--listener-host", spec.listener_host]
        if spec.advertised is not None or spec.bind_host == "":
            args += ["--advertised-host", spec.advertised_host]
            args += ["--advertised-port", str(spec.advertised_port(broker_id))]
        if broker_id in spec.racks:
            args += ["--rack", spec.racks[broker_id]]
        for key, value in spec.config.items():
            args += ["--config", f"{key}={value}"]
        if self.trace_dir is not None:  # traced broker processes
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
                                secret=self.secret,
                                tracer=self.tracer,
                                clock=self.clock,
                            )
                        )
                    self._pick_ports()
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

    def _pick_ports(self) -> None:
        """Every broker's internal port, and its Kafka port when none is configured, picked
        outside the ephemeral range (``cluster.launch.ports``): its process binds them again
        when it is restarted, long after they were picked."""
        brokers = self.spec.brokers
        same_host = self.spec.listener_host in (None, self.spec.host)
        picks = 2 * brokers if self.spec.base_port == 0 and same_host else brokers
        ports = free_ports(picks, self.spec.host)
        self.network_ports = dict(enumerate(ports[:brokers]))
        self._picked_kafka_ports = dict(enumerate(ports[brokers:]))

    def _fail(self, error: ClusterError) -> None:
        if self._failure is None:
            self._failure = error
        self.stop()

    async def _start_status_node(self, tg: TaskGroup) -> None:
        transport = TcpTransport(host=self.spec.host, secret=self.secret)
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
            env={**os.environ, SECRET_ENV: self.secret.hex()},
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
        expected = READY_LINE.format(id=child.broker_id, pid=child.pid, port="")
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
            async with open_store(
                self.store_address, name="kemu-launcher", secret=self.secret
            ) as store:
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

    async def _ask(self, broker_id: int, to: ActorRef, msg: Message) -> Message | None:
        """``msg`` to actor ``to`` of broker ``broker_id``; None when it did not answer."""
        child = self.children.get(broker_id)
        if self._node is None or child is None or not child.running:
            return None
        try:
            return await self._node.ask(to, msg, timeout=VIEW_TIMEOUT)
        except (AskTimeoutError, RemoteError):
            return None

    async def cluster_view(self) -> ClusterView:
        return await cluster_view(self.broker_states(), self._ask, spec=self.spec)

    async def cluster_metrics(self) -> ClusterMetrics:
        return await cluster_metrics(self.broker_states(), self._ask)

    async def cluster_status(self) -> LauncherStatus:
        return await launcher_status(
            self.broker_states(),
            self.status,
            host=self.spec.advertised_host,
            ports=self.spec.advertised_ports(self.kafka_ports),
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


async def run_up_processes(
    spec: ClusterSpec,
    *,
    cluster_file: Path,
    trace: Path | None,
    on_ready: Callable[[], None] = lambda: None,
    parent_pid: int | None = None,
) -> int:
    """``kemu up --processes``: as ``kemu up``, with one process per broker; ``on_ready``
    is called once the cluster is up and its cluster file written; ``parent_pid``: stop
    once that process is gone, as on SIGTERM."""
    tracer = Tracer()
    writer = None
    if trace is not None:  # the launcher's own events (the store's): brokers trace nothing
        writer = JsonlTraceWriter(trace, TraceHeader(run="kemu-up", seed=spec.seed, clock="real"))
        tracer.add_sink(writer)
    started = time.perf_counter()  # wall time of the launch, for the user
    cluster = ProcessCluster(spec, tracer=tracer, clock=RealClock())
    try:
        with unwrap_kemu_error():  # the task groups wrap what fails in them
            await _launch(spec, cluster, cluster_file, started, on_ready, parent_pid)
    finally:
        release_cluster_file(cluster_file)
        if writer is not None:
            writer.close()
    print("kemu: stopped", flush=True)
    return 0


async def _launch(
    spec: ClusterSpec,
    cluster: ProcessCluster,
    cluster_file: Path,
    started: float,
    on_ready: Callable[[], None],
    parent_pid: int | None,
) -> None:
    publisher = Publisher(cluster_file, spec, store="", secret=cluster.secret)

    async def announce(control_tg: TaskGroup) -> None:
        elapsed = time.perf_counter() - started
        publisher.store = cluster.store_address
        await announce_ready(
            control_tg,
            cluster,
            publisher,
            secret=cluster.secret,
            tracer=cluster.tracer,
            clock=cluster.clock,
            ports=cluster.ports,
            pids=cluster.pids,
            elapsed=elapsed,
            store_address=cluster.store_address,
            on_ready=on_ready,
        )

    async def exited(broker_id: int) -> None:
        if publisher.control and not cluster.stopping:
            publisher(await cluster.cluster_status(), None)

    cluster.on_exit = exited
    # The receiver stays open until the end: a second Ctrl-C must not kill the launcher
    # half-way through stopping its children.
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_stop_on_signal, signals, cluster, parent_pid)  # even while starting
            async with anyio.create_task_group() as control_tg:
                await cluster.run(functools.partial(announce, control_tg))
                control_tg.cancel_scope.cancel()
            tg.cancel_scope.cancel()


async def _stop_on_signal(
    signals: AsyncIterator[int], cluster: ProcessCluster, parent_pid: int | None
) -> None:
    await first_stop(signals, parent_pid)
    cluster.stop()
