"""The control endpoint of a running ``kemu up``: stop, kill and start its brokers from
another process (``kemu broker``).

The launcher serves node ``launcher`` on a loopback TCP port of its own (the address goes
into the cluster file as ``control``), with two actors: ``control`` carries out
``BrokerCommand``s one at a time, ``status`` answers ``LauncherStatusRequest`` and
``ClusterViewRequest`` (``kemu top``), so a status is never stuck behind a slow start.
Messages are the typed ones of ``protocol.launcher`` over the project's frame codec, like
every other message between kemu processes. The endpoint takes a connection only once it
proved the cluster's secret (``cluster.network.auth``): another user of the machine cannot
stop a broker.

What a command does depends on how the brokers run, behind the ``Launcher`` interface:
``ClusterLauncher`` here for brokers in the launcher's own process (``Cluster``), and
``ProcessCluster`` (``cluster.launch.processes``) for one OS process per broker. Both follow the
same rules: a refused command (``refusal``) changes nothing; after each command that was
carried out, and each status, the launcher rewrites the cluster file
(``cluster_file_for``).
"""

from __future__ import annotations

import os
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Final, Protocol

import anyio
import anyio.abc

from actors.broker.names import BROKER_ACTOR, CONTROLLER_ACTOR, broker_node_id, broker_ref
from actors.runtime.actor import Actor, Context, Node
from actors.runtime.clock import Clock
from actors.runtime.freeze import NotFreezableError
from actors.runtime.tracer import Tracer
from actors.zk.store import MetadataStore
from cluster.launch.cluster import Cluster, ClusterError, ClusterSpec, wait_until_ready
from cluster.launch.connect import (
    CONTROL_ACTOR,
    CONTROL_NODE,
    STATUS_ACTOR,
    BrokerEntry,
    ClusterFile,
    register_store,
)
from cluster.network import Network, TcpTransport
from protocol import zkdata
from protocol.base import ActorRef, Message
from protocol.broker import BrokerMetrics, BrokerMetricsRequest, BrokerStatus
from protocol.controller import ControllerQueue, ControllerQueueRequest
from protocol.errors import ActorError, KemuError, sole_error
from protocol.ids import BrokerEpoch, BrokerId
from protocol.launcher import (
    BrokerAction,
    BrokerCommand,
    BrokerCommandDone,
    BrokerCommandRefused,
    BrokerMetricsView,
    BrokerState,
    ClusterMetrics,
    ClusterMetricsRequest,
    ClusterView,
    ClusterViewRequest,
    LaunchedBroker,
    LauncherStatus,
    LauncherStatusRequest,
)

__all__ = [
    "BrokerAsk",
    "ClusterLauncher",
    "Launcher",
    "LauncherError",
    "Publisher",
    "carry_out",
    "cluster_file_for",
    "cluster_metrics",
    "cluster_view",
    "controller_ref",
    "paused_note",
    "refusal",
    "serve_control",
    "settle",
    "wait_unregistered",
]

STOP_TIMEOUT: Final = 30.0  # a graceful stop (controlled shutdown included); then a crash
SETTLE_TIMEOUT: Final = 30.0  # for the running brokers to agree again after a command
EXPIRY_MARGIN: Final = 10.0  # past a session timeout, for the store to notice it
VIEW_TIMEOUT: Final = 2.0  # for a controller to say how long its event queue is
POLL: Final = 0.05  # seconds between two looks at the store while waiting on it


class LauncherError(KemuError):
    """A command the launcher could not carry out (the reply is ``BrokerCommandRefused``)."""


class Launcher(Protocol):
    """The brokers of a running ``kemu up``, as its control endpoint drives them.

    Each operation is called only for a command that ``refusal`` let through (a known
    broker: running for stop and pause, running or paused for kill, paused for resume,
    down for start); each returns once done with one line saying what happened, or
    raises ``LauncherError``."""

    @property
    def stopping(self) -> bool:
        """The whole cluster is stopping: no more commands."""
        ...

    def broker_states(self) -> Mapping[int, BrokerState]: ...

    async def stop_broker(self, broker_id: int) -> str: ...

    async def kill_broker(self, broker_id: int) -> str: ...

    async def start_broker(self, broker_id: int) -> str: ...

    async def pause_broker(self, broker_id: int) -> str: ...

    async def resume_broker(self, broker_id: int) -> str: ...

    async def cluster_status(self) -> LauncherStatus: ...

    async def cluster_view(self) -> ClusterView: ...

    async def cluster_metrics(self) -> ClusterMetrics: ...


def refusal(
    command: BrokerCommand, states: Mapping[int, BrokerState], *, stopping: bool
) -> str | None:
    """Why ``command`` must not be carried out (one line), or None if it can be."""
    broker = command.broker_id
    if stopping:
        return "the cluster is stopping"
    if broker not in states:
        known = ", ".join(str(b) for b in sorted(states))
        return f"no broker {broker} in this cluster (its brokers are {known})"
    state = states[broker]
    action = command.action
    if state is BrokerState.PAUSED:
        if action is BrokerAction.START:
            return f"broker {broker} is already running (paused)"
        if action is BrokerAction.PAUSE:
            return f"broker {broker} is already paused"
        if action is BrokerAction.STOP:
            return f"broker {broker} is paused: resume it before stopping it"
        return None  # resume, or kill (SIGKILL ends a stopped process too)
    if action is BrokerAction.START:
        if state is BrokerState.RUNNING:
            return f"broker {broker} is already running"
    elif action is BrokerAction.RESUME:
        return f"broker {broker} is not paused ({state.value})"
    elif state is not BrokerState.RUNNING:
        return f"broker {broker} is not running ({state.value})"
    return None


async def carry_out(launcher: Launcher, command: BrokerCommand) -> str:
    """Carry out ``command`` and return its one-line note; ``LauncherError`` with the reason
    if it is refused (``refusal``: nothing changed) or fails. What the control endpoint and
    the Python API (``cluster.api``) both do with a command."""
    reason = refusal(command, launcher.broker_states(), stopping=launcher.stopping)
    if reason is not None:
        raise LauncherError(reason)
    operation = {
        BrokerAction.STOP: launcher.stop_broker,
        BrokerAction.KILL: launcher.kill_broker,
        BrokerAction.START: launcher.start_broker,
        BrokerAction.PAUSE: launcher.pause_broker,
        BrokerAction.RESUME: launcher.resume_broker,
    }[command.action]
    return await operation(command.broker_id)


Published = Callable[[LauncherStatus, str | None], None]
"""Called by the control endpoint with the cluster's status after each command carried
out (with its note) and each status request (note None): rewrite the cluster file, tell
the user."""


class ControlActor(Actor):
    """Carries out ``BrokerCommand``s, one at a time, in the order they arrive."""

    def __init__(self, launcher: Launcher, published: Published) -> None:
        super().__init__(CONTROL_ACTOR)
        self._launcher = launcher
        self._published = published

    async def receive(self, msg: Message, ctx: Context) -> Message | None:
        if isinstance(msg, BrokerCommand):
            return await self._command(msg)
        raise LauncherError(f"the launcher cannot handle {type(msg).__name__}")

    async def _command(self, command: BrokerCommand) -> Message:
        launcher = self._launcher
        fields = {"broker": command.broker_id, "action": command.action.value}
        try:
            note = await carry_out(launcher, command)
        except LauncherError as exc:
            reason = str(exc)
            self.trace("event", "broker_command_refused", **fields, reason=reason)
            return BrokerCommandRefused(
                action=command.action, broker_id=command.broker_id, reason=reason
            )
        self.trace("event", "broker_command_done", **fields, note=note)
        status = await launcher.cluster_status()
        self._published(status, note)
        return BrokerCommandDone(
            action=command.action, broker_id=command.broker_id, note=note, status=status
        )


class StatusActor(Actor):
    """Answers ``LauncherStatusRequest``, ``ClusterViewRequest`` and
    ``ClusterMetricsRequest``, also while a command is under way."""

    def __init__(self, launcher: Launcher, published: Published) -> None:
        super().__init__(STATUS_ACTOR)
        self._launcher = launcher
        self._published = published

    async def receive(self, msg: Message, ctx: Context) -> Message | None:
        if isinstance(msg, LauncherStatusRequest):
            status = await self._launcher.cluster_status()
            self._published(status, None)
            return status
        if isinstance(msg, ClusterViewRequest):
            return await self._launcher.cluster_view()
        if isinstance(msg, ClusterMetricsRequest):
            return await self._launcher.cluster_metrics()
        raise LauncherError(f"the launcher cannot handle {type(msg).__name__}")


async def serve_control(
    launcher: Launcher,
    published: Published,
    *,
    host: str,
    secret: bytes,
    tracer: Tracer,
    clock: Clock,
    task_status: anyio.abc.TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the control endpoint on a free port of ``host`` to the clients that prove
    ``secret``; reports its ``HOST:PORT``, serves until cancelled."""
    transport = TcpTransport(host=host, secret=secret)
    network = Network(transport, tracer=tracer, rng=random.Random(0), clock=clock)
    async with anyio.create_task_group() as tg:
        await tg.start(network.run)
        node = Node(CONTROL_NODE, attach=network.attach, tracer=tracer, clock=clock)
        await tg.start(
            node.run, [ControlActor(launcher, published), StatusActor(launcher, published)]
        )
        bound_host, bound = transport.address_of(CONTROL_NODE)
        task_status.started(f"{bound_host}:{bound}")


# ---------------------------------------------------------------------- shared steps


async def wait_unregistered(
    store: MetadataStore, broker_id: int, *, timeout: float, clock: Clock
) -> None:
    """Wait until ``/brokers/ids/<id>`` is gone: a killed broker's registration lasts
    until its session expires, and a broker cannot register over another session's
    (Kafka refuses to start then too). ``LauncherError`` after ``timeout`` seconds."""
    path = zkdata.broker_path(BrokerId(broker_id))
    session = await store.open_session(timeout=max(timeout, 10.0), name="kemu-launcher")
    try:
        with anyio.move_on_after(timeout):
            while await session.exists(path) is not None:
                await clock.sleep(POLL)
            return
        raise LauncherError(
            f"broker {broker_id}'s previous registration ({path}) did not go within"
            f" {timeout:g}s: its old session has not expired"
        )
    finally:
        with anyio.CancelScope(shield=True):
            await session.close()
        session.events.close()


async def settle(
    status: Callable[[int], Awaitable[BrokerStatus | None]],
    running: Sequence[int],
    *,
    clock: Clock,
    timeout: float = SETTLE_TIMEOUT,
) -> bool:
    """Wait until the running brokers agree on the controller and on who is live (the
    controller has acted on the change); False if they do not within ``timeout``."""
    if not running:
        return True
    try:
        await wait_until_ready(status, running, clock=clock, timeout=timeout)
    except ClusterError:
        return False
    return True


def paused_note(broker_id: int, spec: ClusterSpec) -> str:
    """What ``kemu broker pause`` says it did, for either launcher."""
    return (
        f"broker {broker_id} paused (frozen whole: it answers nothing and sends nothing); its"
        f" session expires after {expiry_timeout(spec):g}s unless it is resumed first"
    )


def expiry_timeout(spec: ClusterSpec) -> float:
    """How long a killed broker's registration may outlive it."""
    return spec.broker_config().zookeeper_session_timeout_ms / 1000


def cluster_file_for(
    status: LauncherStatus,
    spec: ClusterSpec,
    *,
    store: str,
    control: str,
    pid: int,
    secret: bytes,
    metrics: str = "",
) -> ClusterFile:
    """The cluster file of a launcher whose cluster is as ``status`` says."""
    return ClusterFile(
        store=store,
        brokers=tuple(
            BrokerEntry(
                id=b.broker_id,
                host=b.host,
                port=b.port,
                pid=b.pid,
                log_dir=str(spec.log_dir / f"broker-{b.broker_id}"),
                rack=spec.racks.get(b.broker_id),
                running=b.state is BrokerState.RUNNING,
            )
            for b in status.brokers
        ),
        controller=status.controller_id,
        cluster_id=status.cluster_id,
        pid=pid,
        processes=status.processes,
        control=control,
        secret=secret.hex(),
        metrics=metrics,
    )


class Publisher:
    """The launcher's ``Published``: keeps the cluster file current and tells the user (on
    the launcher's stdout) what each command did."""

    def __init__(self, path: Path, spec: ClusterSpec, *, store: str, secret: bytes) -> None:
        self.path = path
        self.spec = spec
        self.store = store
        self.secret = secret
        self.control = ""  # the control endpoint's address, once it serves
        self.metrics = ""  # the Prometheus endpoint's address, once it serves

    def __call__(self, status: LauncherStatus, note: str | None) -> None:
        cluster_file_for(
            status,
            self.spec,
            store=self.store,
            control=self.control,
            pid=os.getpid(),
            secret=self.secret,
            metrics=self.metrics,
        ).write(self.path)
        register_store(self.store, self.path)
        if note is not None:
            print(f"kemu: {note}", flush=True)


# ---------------------------------------------------------------------- one process


class ClusterLauncher:
    """The ``Launcher`` of brokers that run in the launcher's own process: ``kill`` is
    ``Cluster.crash_broker`` (the broker's store session left to expire), ``stop`` the
    node's graceful stop, ``start`` a new node for the same id, port and log dir,
    ``pause`` ``Cluster.pause_broker`` (the launcher must run on a freezable loop)."""

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster
        self._down: dict[int, BrokerState] = {}  # how each broker that is down went down
        self.stopping = False

    def broker_states(self) -> Mapping[int, BrokerState]:
        out: dict[int, BrokerState] = {}
        for broker_id in range(self._cluster.spec.brokers):
            node = self._cluster.nodes.get(broker_id)
            if node is not None and node.running:
                out[broker_id] = BrokerState.PAUSED if node.paused else BrokerState.RUNNING
            else:
                out[broker_id] = self._down.get(broker_id, BrokerState.EXITED)
        return out

    def _running(self) -> list[int]:
        return sorted(b for b, s in self.broker_states().items() if s is BrokerState.RUNNING)

    async def stop_broker(self, broker_id: int) -> str:
        cluster = self._cluster
        self._down[broker_id] = BrokerState.STOPPED
        cluster.stop_broker(broker_id)
        if not await cluster.wait_stopped(broker_id, timeout=STOP_TIMEOUT):
            self._down[broker_id] = BrokerState.KILLED
            await cluster.crash_broker(broker_id)
            await cluster.wait_stopped(broker_id, timeout=STOP_TIMEOUT)
            return f"broker {broker_id} did not stop within {STOP_TIMEOUT:g}s: crashed it"
        note = f"broker {broker_id} stopped (graceful shutdown)"
        return note + await self._settled()

    async def kill_broker(self, broker_id: int) -> str:
        cluster = self._cluster
        self._down[broker_id] = BrokerState.KILLED
        await cluster.crash_broker(broker_id)
        await cluster.wait_stopped(broker_id, timeout=STOP_TIMEOUT)
        return (
            f"broker {broker_id} killed (crashed, no graceful step): its session expires"
            f" after {expiry_timeout(cluster.spec):g}s, then the controller sees it gone"
        )

    async def start_broker(self, broker_id: int) -> str:
        cluster = self._cluster
        assert cluster.store is not None
        timeout = expiry_timeout(cluster.spec) + EXPIRY_MARGIN
        await wait_unregistered(cluster.store, broker_id, timeout=timeout, clock=cluster.clock)
        try:
            await cluster.start_broker(broker_id)
        except Exception as exc:  # whatever stopped it starting, told to the user in one line
            raise LauncherError(f"broker {broker_id} did not start: {sole_error(exc)}") from None
        self._down.pop(broker_id, None)
        settled = await self._settled()
        status = await cluster.status(broker_id)
        epoch = status.broker_epoch if status is not None else -1
        return f"broker {broker_id} started (broker epoch {epoch})" + settled

    async def pause_broker(self, broker_id: int) -> str:
        try:
            self._cluster.pause_broker(broker_id)
        except (ClusterError, NotFreezableError) as exc:
            raise LauncherError(str(exc)) from None
        return paused_note(broker_id, self._cluster.spec)

    async def resume_broker(self, broker_id: int) -> str:
        self._cluster.resume_broker(broker_id)
        return f"broker {broker_id} resumed" + await self._settled()

    async def _settled(self) -> str:
        """Wait for the running brokers to agree again; a note if they did not."""
        if await settle(self._cluster.status, self._running(), clock=self._cluster.clock):
            return ""
        return f"; the brokers did not agree on the cluster within {SETTLE_TIMEOUT:g}s"

    async def _ask(self, broker_id: int, to: ActorRef, msg: Message) -> Message | None:
        """``msg`` to actor ``to`` of broker ``broker_id``; None when it did not answer."""
        node = self._cluster.nodes.get(broker_id)
        if node is None or not node.running:
            return None
        try:
            return await node.ask(to, msg, timeout=VIEW_TIMEOUT)
        except ActorError:  # no answer, or the node went down meanwhile
            return None

    async def cluster_view(self) -> ClusterView:
        return await cluster_view(self.broker_states(), self._ask, spec=self._cluster.spec)

    async def cluster_metrics(self) -> ClusterMetrics:
        return await cluster_metrics(self.broker_states(), self._ask)

    async def cluster_status(self) -> LauncherStatus:
        cluster = self._cluster
        return await launcher_status(
            self.broker_states(),
            cluster.status,
            host=cluster.spec.advertised_host,
            ports=cluster.spec.advertised_ports(cluster.ports),
            pid=lambda _broker_id: os.getpid(),
            processes=False,
        )


def controller_ref(broker_id: int) -> ActorRef:
    """The controller actor of broker ``broker_id``, on the broker's node."""
    return ActorRef(broker_node_id(broker_id), CONTROLLER_ACTOR)


BrokerAsk = Callable[[int, ActorRef, Message], Awaitable[Message | None]]
"""A launcher's way to ask an actor of a running broker (by the broker's id): the answer,
or None when it did not answer in time."""


async def cluster_view(
    states: Mapping[int, BrokerState],
    ask: BrokerAsk,
    *,
    spec: ClusterSpec,
) -> ClusterView:
    """What ``kemu top`` shows that the store does not hold, for either launcher: the
    brokers' states, the event queue of the running broker whose controller answers as
    the active one, and the brokers' ``min.insync.replicas``."""
    queue: ControllerQueue | None = None
    for broker_id, state in sorted(states.items()):
        if state is not BrokerState.RUNNING:
            continue
        reply = await ask(broker_id, controller_ref(broker_id), ControllerQueueRequest())
        if isinstance(reply, ControllerQueue) and reply.active:
            queue = reply
            break
    return ClusterView(
        states=tuple((BrokerId(b), s) for b, s in sorted(states.items())),
        controller_queue=queue,
        min_insync_replicas=spec.broker_config().min_insync_replicas,
    )


async def cluster_metrics(states: Mapping[int, BrokerState], ask: BrokerAsk) -> ClusterMetrics:
    """Every running broker's metrics, for either launcher: its ``ReplicaManager``'s
    (``BrokerMetricsRequest`` to the broker actor) and its controller's gauges, timers and
    meters (``ControllerQueueRequest``), asked of all brokers at once."""
    running = sorted(b for b, s in states.items() if s is BrokerState.RUNNING)
    replies: dict[tuple[int, str], Message | None] = {}

    async def one(broker_id: int, to: ActorRef, msg: Message) -> None:
        replies[broker_id, to.name] = await ask(broker_id, to, msg)

    async with anyio.create_task_group() as tg:
        for broker_id in running:
            tg.start_soon(one, broker_id, broker_ref(broker_id), BrokerMetricsRequest())
            tg.start_soon(one, broker_id, controller_ref(broker_id), ControllerQueueRequest())
    views = []
    for broker_id in running:
        replica = replies.get((broker_id, BROKER_ACTOR))
        queue = replies.get((broker_id, CONTROLLER_ACTOR))
        views.append(
            BrokerMetricsView(
                broker_id=BrokerId(broker_id),
                replica_manager=replica if isinstance(replica, BrokerMetrics) else None,
                controller=queue if isinstance(queue, ControllerQueue) else None,
            )
        )
    return ClusterMetrics(brokers=tuple(views))


async def launcher_status(
    states: Mapping[int, BrokerState],
    status: Callable[[int], Awaitable[BrokerStatus | None]],
    *,
    host: str,
    ports: Mapping[int, int],
    pid: Callable[[int], int],
    processes: bool,
) -> LauncherStatus:
    """What ``kemu broker status`` shows, for either launcher: every broker's state, pid,
    endpoint and epoch (asked of the running ones), the controller the first running
    broker names, and the cluster id."""
    brokers: list[LaunchedBroker] = []
    controller = -1
    cluster_id = ""
    for broker_id, state in sorted(states.items()):
        answer = await status(broker_id) if state is BrokerState.RUNNING else None
        if answer is not None:
            cluster_id = answer.cluster_id
            if controller < 0:
                controller = answer.controller_id
        brokers.append(
            LaunchedBroker(
                broker_id=BrokerId(broker_id),
                state=state,
                pid=pid(broker_id),
                host=host,
                port=ports.get(broker_id, 0),
                broker_epoch=BrokerEpoch(answer.broker_epoch if answer else -1),
            )
        )
    return LauncherStatus(
        brokers=tuple(brokers),
        controller_id=BrokerId(controller),
        cluster_id=cluster_id,
        processes=processes,
    )
