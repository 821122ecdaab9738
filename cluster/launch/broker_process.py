"""``kemu _broker``: one broker process of ``kemu up --processes``.

A broker process (``run_broker_process``) runs node ``broker-<id>`` with its ``Broker``
actor on a TCP network, a ``RemoteStore`` (or ``ZooKeeperStore``) session and a Kafka
listener, assembled by ``cluster.launch.cluster.start_broker_node`` as in ``kemu up``. It
prints ``broker <id> ready pid <pid> port <kafka port>`` once registered. Its launcher is
``cluster.launch.processes``.

The launcher hands the process the cluster's secret in the environment variable
``KEMU_CLUSTER_SECRET`` (hex; an environment is readable by its user only, where the
command line is everyone's to see), which the process takes out of its environment at
once: its inter-node port asks every connection to prove it, and it proves it to the
store server and to the other brokers (``cluster.network.auth``).

A traced broker process (``BrokerProcessSpec.trace``) writes its own trace, installs the
``NetworkTap`` its caller builds (the command line hands in the one a real-mode run reads;
this package knows only its shape) and expires its own store session on SIGUSR1.

A broker whose node halts by itself (``FatalNodeError``: every log dir failed) ends its
process at once with status 1 (``HALT_STATUS``), as Kafka's ``Exit.halt(1)`` ends the
JVM: the launcher reports the exit, the rest of the cluster carries on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import random
import signal
import sys
import time
import typing
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import TaskGroup

from actors.admin import BrokerConfig
from actors.broker.broker import BROKER_ACTOR, Broker, broker_node_id
from actors.broker.controlled_shutdown import CONTROLLED_SHUTDOWN_ACTOR, ControlledShutdownActor
from actors.controller.recording import CONTROLLER_INPUTS
from actors.log.manager import open_logs_budget
from actors.runtime.actor import Attach, Node
from actors.runtime.clock import Clock, RealClock
from actors.runtime.tracer import Tracer
from actors.zk.store import MetadataStore
from cluster.launch.cluster import BrokerSpec, file_limit, start_broker_node
from cluster.launch.connect import EMBEDDED_SCHEME, STORE_NODE, parse_host_port
from cluster.launch.directory import BrokerDirectory
from cluster.launch.watchdog import wait_gone
from cluster.logging import close_broker_logs
from cluster.network import Network, TcpTransport
from cluster.store.remote import STORE_ACTOR, RemoteStore
from cluster.trace_files import JsonlTraceWriter
from protocol.base import ActorRef
from protocol.envelope import Envelope
from protocol.errors import ConnectionLossError, KemuError, unwrap_kemu_error
from protocol.trace import TraceEvent, TraceHeader

BROKER_PROCESS_COMMAND = "_broker"  # the hidden `kemu _broker` that runs one broker process
READY_LINE = "broker {id} ready pid {pid} port {port}"
CHILD_STOP_TIMEOUT = 10.0  # a child gives up its graceful steps (store gone?) after this
CLOSE_TIMEOUT = 3.0  # then for closing what is left of its store client
HALT_STATUS = 1  # the exit status of a broker that halts (Kafka's Exit.halt(1))
# The name of the variable that carries the secret (hex) from the launcher to a broker process.
SECRET_ENV = "KEMU_CLUSTER_SECRET"  # noqa: S105 - a variable name, not a password


def inherited_secret() -> bytes:
    """The cluster's secret, as the launcher handed it over (``SECRET_ENV``), taken out of
    this process's environment (a process it starts does not inherit it); ``KemuError`` if
    there is none."""
    try:
        secret = bytes.fromhex(os.environ.pop(SECRET_ENV, ""))
    except ValueError:
        secret = b""
    if len(secret) < 16:
        raise KemuError(
            f"no cluster secret in {SECRET_ENV}: a broker process is started by"
            " `kemu up --processes`, which hands it the secret"
        )
    return secret


class NetworkTap(typing.Protocol):
    """What a traced broker process installs on its network: ``observe`` sees every
    envelope posted (``Network.add_observer``), ``attach`` wraps the node's attach function
    to see the envelopes delivered to it."""

    def observe(self, envelope: Envelope) -> None: ...

    def attach(self, attach: Attach) -> Attach: ...


TapFactory = Callable[[Tracer], NetworkTap]
"""Builds a traced process's ``NetworkTap`` on its tracer."""


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
    host: str = "127.0.0.1"  # its inter-node port, and its Kafka listener unless below
    listener_host: str | None = None  # where its Kafka listener binds ("" = everywhere)
    advertised_host: str | None = None  # what it registers; None: the listener's host
    advertised_port: int = 0  # what it registers; 0: the port its listener bound
    rack: str | None = None
    config: Mapping[str, str] = field(default_factory=dict)
    seed: int = 0
    incarnation: int = 0  # how many times this broker's process ran before (BrokerSpec)
    parent_pid: int | None = None  # stop when this process is no longer our parent
    trace: Path | None = None
    """Write this process's trace here (JSON lines, flushed per event), with the network
    tap ``run_broker_process`` is given; ts counts from ``trace_origin`` on
    CLOCK_MONOTONIC, which every process on the machine shares, so that the traces of
    several processes merge in time order."""
    trace_origin: float = 0.0
    secret: bytes | None = None
    """The cluster's secret; None: take it from the environment (``inherited_secret``)."""
    discover: bool = False
    """``kemu broker run``: no launcher and no address book. The broker registers its
    node's address (``host``, or ``advertised_host``, and the bound ``network_port``) and
    finds the others' in their registrations (``cluster.launch.directory``); its log dir
    is ``log_dir`` itself; ``store`` must be a ZooKeeper."""


async def run_broker_process(spec: BrokerProcessSpec, *, tap: TapFactory | None = None) -> int:
    """Run one broker until SIGINT/SIGTERM (or its launcher's death), then stop it
    gracefully: the broker closes its store session, so its registration goes at once.
    A traced process (``spec.trace``) installs the network tap ``tap`` builds, if any."""
    if spec.secret is None:
        spec = dataclasses.replace(spec, secret=inherited_secret())
    with unwrap_kemu_error():  # the task groups wrap what fails in them
        if spec.trace is None:
            return await _serve_broker(spec, Tracer(), None)
        with _traced(spec.trace, spec) as tracer:
            return await _serve_broker(spec, tracer, None if tap is None else tap(tracer))


# ---------------------------------------------------------------- a traced broker process


@contextlib.contextmanager
def _traced(trace: Path, spec: BrokerProcessSpec) -> Iterator[Tracer]:
    """A tracer writing ``trace`` (flushed per event: whoever reads it may read it as it
    grows) with times on CLOCK_MONOTONIC from ``spec.trace_origin``."""
    tracer = Tracer(  # recording the controller's inputs, for ``kemu trace replay``
        time_fn=time.monotonic, origin=spec.trace_origin, details={CONTROLLER_INPUTS}
    )
    header = TraceHeader(run=f"broker-{spec.broker_id}", seed=spec.seed, clock="real")
    writer = JsonlTraceWriter(trace, header)

    def sink(event: TraceEvent) -> None:
        writer(event)
        writer.flush()

    tracer.add_sink(sink)
    try:
        yield tracer
    finally:
        writer.close()


async def _expire_on_signal(store: MetadataStore, broker: list[Node]) -> None:
    """SIGUSR1 (``ProcessCluster.expire_broker_session``): expire the session of this broker
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


async def _serve_broker(spec: BrokerProcessSpec, tracer: Tracer, tap: NetworkTap | None) -> int:
    clock = RealClock()
    node_id = broker_node_id(spec.broker_id)
    directory: BrokerDirectory | None = None
    zookeeper: MetadataStore | None = None
    if spec.discover:
        from cluster.store.zookeeper import ZooKeeperStore

        zookeeper = ZooKeeperStore(spec.store, tracer=tracer, clock=clock)
        directory = BrokerDirectory(
            zookeeper, name=f"{node_id}-directory", timeout=_session_timeout(spec)
        )
        try:
            await _open_directory(spec, directory)
            await directory.check_unregistered(spec.broker_id)
        except BaseException:
            with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_TIMEOUT):
                await zookeeper.aclose()
            raise
    transport = TcpTransport(
        host=spec.host,
        ports={node_id: spec.network_port},
        secret=spec.secret,
        resolver=directory,
    )
    for peer, (host, port) in spec.peers.items():
        transport.add_peer(broker_node_id(peer), host, port)
    embedded = spec.store.startswith(EMBEDDED_SCHEME)
    if embedded:
        transport.add_peer(STORE_NODE, *parse_host_port(spec.store[len(EMBEDDED_SCHEME) :]))
    network = Network(transport, tracer=tracer, rng=random.Random(spec.seed), clock=clock)
    attach: Attach = network.attach
    started: list[Node] = []  # the broker's node, once started (for _expire_on_signal)
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
            store = zookeeper or await _broker_store(tg, spec, node_id, network, tracer, clock)
            if spec.trace is not None:
                tg.start_soon(_expire_on_signal, store, started)
            try:
                with stopping:
                    async with anyio.create_task_group() as broker_tg:
                        node, _, port = await start_broker_node(
                            broker_tg,
                            BrokerSpec(
                                broker_id=spec.broker_id,
                                host=_listener_host(spec),
                                advertised_host=spec.advertised_host,
                                advertised_port=spec.advertised_port,
                                port=spec.port,
                                log_dir=spec.log_dir,
                                config=BrokerConfig.from_overrides(dict(spec.config)),
                                rack=spec.rack,
                                seed=spec.seed,
                                incarnation=spec.incarnation,
                                max_open_logs=open_logs_budget(file_limit(), 1),
                                own_log_dir=spec.discover,
                                internal_endpoint=(
                                    functools.partial(_internal_endpoint, spec, transport)
                                    if spec.discover
                                    else None
                                ),
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
                        await _first_of(stop, node.ended)
                        if not stop.is_set():
                            _halt(spec.broker_id, node)
                        if received[:1] == [signal.SIGINT]:
                            _skip_controlled_shutdown(node)
                        stopping.deadline = anyio.current_time() + CHILD_STOP_TIMEOUT
                        listener.cancel()
                        if orphaned.is_set() and isinstance(store, RemoteStore):
                            node.crash()  # no store to close a session with
                        else:
                            node.stop()
            finally:
                if directory is not None:
                    await directory.aclose()
                close_broker_logs([node_id])
                if orphaned.is_set() and isinstance(store, RemoteStore):
                    store.discard()
                else:
                    with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_TIMEOUT):
                        await store.aclose()
            tg.cancel_scope.cancel()
    return 0


def _session_timeout(spec: BrokerProcessSpec) -> float:
    return BrokerConfig.from_overrides(dict(spec.config)).zookeeper_session_timeout_ms / 1000


async def _open_directory(spec: BrokerProcessSpec, directory: BrokerDirectory) -> None:
    """Open the directory's ZooKeeper session before anything else, within
    ``zookeeper.connection.timeout.ms`` (else the session timeout, as Kafka's
    ``KafkaConfig.zkConnectionTimeoutMs``): an unreachable ensemble ends the start with
    one line, as Kafka's ``ZooKeeperClient.waitUntilConnected`` does."""
    config = BrokerConfig.from_overrides(dict(spec.config))
    timeout_ms = config.zookeeper_connection_timeout_ms or config.zookeeper_session_timeout_ms
    try:
        with anyio.fail_after(timeout_ms / 1000):
            await directory.open()
    except (TimeoutError, ConnectionLossError):
        raise KemuError(
            f"broker {spec.broker_id} cannot connect to ZooKeeper at {spec.store}: Timed out"
            f" waiting for connection while in state: CONNECTING ({timeout_ms} ms)"
        ) from None


def _internal_endpoint(spec: BrokerProcessSpec, transport: TcpTransport) -> tuple[str, int]:
    """What a discovering broker registers as its node's address: the host others reach
    it at (``advertised_host``, else where it binds) and the port its node bound."""
    _, port = transport.address_of(broker_node_id(spec.broker_id))
    host = spec.advertised_host or spec.host
    return host, port


def _listener_host(spec: BrokerProcessSpec) -> str:
    """Where the broker's Kafka listener binds: ``listener_host``, else ``host``."""
    return spec.host if spec.listener_host is None else spec.listener_host


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


async def _first_of(*events: anyio.Event) -> None:
    """Until one of ``events`` is set."""
    async with anyio.create_task_group() as tg:
        for event in events:
            tg.start_soon(_cancel_when_set, event, tg.cancel_scope)


async def _cancel_when_set(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


def _halt(broker_id: int, node: Node) -> typing.NoReturn:
    """The broker's node ended by itself: a handler raised ``FatalNodeError`` (every log
    dir failed, ``LogDirFailureChannel``), and Kafka's broker calls ``Exit.halt(1)`` then.
    So does this process: one line on stderr, exit status 1, no graceful step (no
    controlled shutdown, no session close: the store expires the session after its
    timeout, as ZooKeeper does for a halted JVM). The launcher sees the exit and reports
    it; the trace, flushed per event, is complete."""
    reason = node.fatal or "its node crashed"
    print(f"kemu: broker {broker_id} halted: {reason}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(HALT_STATUS)


async def _abort_start_up(stop: anyio.Event, ready: anyio.Event, scope: anyio.CancelScope) -> None:
    """Told to stop before the broker is up: give up starting it."""
    await stop.wait()
    if not ready.is_set():
        scope.cancel()


async def _watch_parent(parent_pid: int, stop: anyio.Event, orphaned: anyio.Event) -> None:
    """Stop once the launcher is gone: waited on as ``kemu up --parent-pid`` waits
    (``watchdog.wait_gone``: a pidfd, no polling, on Linux), unless it is already gone
    (this process was reparented, and its number may name another process by now)."""
    if os.getppid() == parent_pid:
        await wait_gone(parent_pid)
    orphaned.set()
    stop.set()
