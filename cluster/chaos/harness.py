"""A running cluster as a chaos run sees it: the trace it records, the triggers it arms,
and the handles through which its steps act on the cluster.

``Recorder`` is the run's one trace sink. It keeps every event (for triggers, conditions
and the invariant rules), writes it to the run's JSONL file, and counts *activity*: every
event the run did not cause itself. Conditions are re-evaluated only after activity, so
polling them adds nothing to a quiet cluster's trace and costs nothing on the virtual
clock. Log-directory paths are written relative to the run directory (``logs/...``), so
that the trace of a deterministic run does not depend on where the run directory is.

``Harness`` holds the cluster, a client node ``chaos`` on the cluster's network (for
Kafka requests and status asks), a store session ``chaos`` (for reads), the run's seeded
RNG, and the network observer that records the payload fields of every controller
request and answer as ``control_request`` / ``control_response`` events (docs/chaos.md).
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Final, get_args

import anyio
import msgspec

from actors.broker.broker import LOG_MANAGER_ACTOR, broker_ref
from actors.invariants import CHAOS_NODE
from actors.log.disk import FaultyDisk
from actors.log.manager import LogManager
from actors.runtime.actor import Node
from actors.runtime.clock import Clock
from actors.runtime.freeze import NotFreezableError
from actors.runtime.tracer import Tracer
from actors.zk.store import MetadataStore, StoreSession
from cluster.chaos.model import BrokerSel, Pattern
from cluster.chaos.tap import ControlTap
from cluster.kafka.client import KafkaAdminClient, KafkaClientError
from cluster.launch.cluster import Cluster
from cluster.launch.control import LauncherError
from cluster.launch.processes import ProcessCluster
from cluster.network.tcp import RECONNECT_BACKOFF, RECONNECT_BACKOFF_MAX
from protocol import zkdata
from protocol.base import Message
from protocol.broker import BrokerStatus, BrokerStatusRequest
from protocol.envelope import Envelope
from protocol.errors import AskTimeoutError, BrokerDisconnectedError, KemuError, RemoteError
from protocol.ids import BrokerId
from protocol.kafka_api import KafkaApiRequestData
from protocol.trace import TraceEvent, TraceKind

__all__ = ["ChaosStepError", "Gate", "Harness", "Recorder", "Trigger"]

KAFKA_REQUESTS: Final = get_args(KafkaApiRequestData)
"""The request types a broker's Kafka listener takes."""

POLL: Final = 0.05
"""Seconds a condition waits after activity before it looks again (bursts coalesce)."""

STOP_TIMEOUT: Final = 30.0
"""Seconds a crashed or stopped broker's node and listener get to end."""

RUNNER_ACTOR: Final = "runner"
OBSERVER_ACTOR: Final = "network_tap"
CLIENT_ACTOR: Final = "kafka_client"
"""The actor of the chaos node a client's broker disconnections are traced under."""


class ChaosStepError(KemuError):
    """A step could not be carried out (no such broker running, no controller, ...)."""


# ----------------------------------------------------------------------------- gates


class Gate:
    """Lets a consumer of a group run, or holds it before its next request while closed
    (the ``pause_member`` fault)."""

    def __init__(self) -> None:
        self._open = anyio.Event()
        self._open.set()

    @property
    def closed(self) -> bool:
        return not self._open.is_set()

    def close(self) -> None:
        if self._open.is_set():
            self._open = anyio.Event()

    def open(self) -> None:
        self._open.set()

    async def passage(self) -> None:
        """Until the gate is open."""
        await self._open.wait()


# ----------------------------------------------------------------------------- triggers


class Trigger:
    """Waits for a sequence of patterns to match, in order, among the events recorded
    after it was armed; ``fired`` is set with the event that completed it."""

    def __init__(self, patterns: Sequence[Pattern]) -> None:
        self.patterns = tuple(patterns)
        self._index = 0
        self._count = 0
        self.fired = anyio.Event()
        self.event: TraceEvent | None = None

    def feed(self, event: TraceEvent) -> None:
        if self.event is not None:
            return
        pattern = self.patterns[self._index]
        if not pattern.matches(event):
            return
        self._count += 1
        if self._count < pattern.nth:
            return
        self._index += 1
        self._count = 0
        if self._index == len(self.patterns):
            self.event = event
            self.fired.set()


# ----------------------------------------------------------------------------- the recorder


def is_own(event: TraceEvent) -> bool:
    """Whether the chaos run caused this event itself (its node, its store session, its
    messages): such events do not count as cluster activity."""
    if event.node == CHAOS_NODE:
        return True
    if event.kind == "store":
        return event.actor.startswith(CHAOS_NODE)
    fields = event.fields
    src, dst = fields.get("src"), fields.get("dst")
    return (isinstance(src, str) and src.startswith("chaos/")) or (
        isinstance(dst, str) and dst.startswith("chaos/")
    )


class Recorder:
    """The run's trace sink (see the module doc). ``write`` receives each event as it
    will appear in the trace file."""

    def __init__(
        self, write: Callable[[TraceEvent], None], log_root: Path, *, renumber: bool = False
    ) -> None:
        """``renumber``: number events in the order recorded (events from several
        processes, each numbered by its own tracer)."""
        self.events: list[TraceEvent] = []
        self._renumber = renumber
        self.generation = 0  # events the run did not cause, so far
        self._write = write
        self._root = str(log_root)
        self._triggers: list[Trigger] = []
        self._activity: anyio.Event | None = None
        self._listeners: list[Callable[[TraceEvent], None]] = []

    def __call__(self, event: TraceEvent) -> None:
        if event.kind in ("log_dir", "error") or "log_dir" in event.fields:
            event = self._relative(event)  # the run's trace, wherever its directory is
        if self._renumber:
            event = msgspec.structs.replace(event, seq=len(self.events) + 1)
        self.events.append(event)
        self._write(event)
        for listener in self._listeners:
            listener(event)
        if self._triggers:
            for trigger in list(self._triggers):
                trigger.feed(event)
                if trigger.event is not None:
                    self._triggers.remove(trigger)
        if not is_own(event):
            self.generation += 1
            if self._activity is not None:
                self._activity.set()
                self._activity = None

    def _relative(self, event: TraceEvent) -> TraceEvent:
        root = self._root
        if not any(isinstance(v, str) and root in v for v in event.fields.values()):
            return event
        fields = {
            k: v.replace(root, "logs") if isinstance(v, str) else v for k, v in event.fields.items()
        }
        return TraceEvent(
            seq=event.seq,
            ts=event.ts,
            node=event.node,
            actor=event.actor,
            kind=event.kind,
            type=event.type,
            corr=event.corr,
            fields=fields,
        )

    def listen(self, listener: Callable[[TraceEvent], None]) -> None:
        """Call ``listener`` with every event recorded from now on (it must not block)."""
        self._listeners.append(listener)

    def arm(self, patterns: Sequence[Pattern], *, past: bool = False) -> Trigger:
        """A trigger fed every event recorded from now on (and, with ``past``, every
        event recorded so far first)."""
        trigger = Trigger(patterns)
        if past:
            for event in self.events:
                trigger.feed(event)
                if trigger.event is not None:
                    return trigger
        self._triggers.append(trigger)
        return trigger

    def disarm(self, trigger: Trigger) -> None:
        if trigger in self._triggers:
            self._triggers.remove(trigger)

    async def activity_since(self, generation: int) -> None:
        """Until an event the run did not cause is recorded after ``generation``."""
        while self.generation == generation:
            if self._activity is None:
                self._activity = anyio.Event()
            await self._activity.wait()


# ----------------------------------------------------------------------------- the harness


class Harness:
    """What steps act through (see the module doc)."""

    def __init__(
        self,
        cluster: Cluster | ProcessCluster,
        *,
        client: Node,
        session: StoreSession,
        recorder: Recorder,
        tracer: Tracer,
        clock: Clock,
        rng: random.Random,
        log_root: Path,
        store: MetadataStore | None = None,
    ) -> None:
        """``cluster``: the in-process ``Cluster``, or the ``ProcessCluster`` of broker
        processes; ``store``: the store admin steps and expiries use (the cluster's own
        by default)."""
        self._cluster = cluster if isinstance(cluster, Cluster) else None
        self.processes = cluster if isinstance(cluster, ProcessCluster) else None
        self.spec = cluster.spec
        if store is None:
            if self._cluster is None or self._cluster.store is None:
                raise ChaosStepError("the harness needs a store")
            store = self._cluster.store
        self.store = store
        self.client = client
        self.session = session
        self.recorder = recorder
        self.tracer = tracer
        self.clock = clock
        self.rng = rng
        self.log_root = log_root
        self.disks: dict[int, FaultyDisk] = {}
        self.tap = ControlTap(tracer)
        self.member_gates: dict[tuple[str, int], Gate] = {}
        """The gate of each consumer of a group a ``consume`` step started, by (group,
        member index)."""
        self.compacted_topics: set[str] = set()
        """The topics a ``create_topic`` step created with ``cleanup.policy`` compact, or
        an ``alter_configs`` step switched to it (until the topic is created again):
        their replicas' logs are compared as compacted logs (``follower_logs_match``)."""
        self._kafka: dict[str, KafkaAdminClient] = {}  # by the client asking
        # In one process, by (client, broker): when a refused connection may be tried
        # again, and the back-off after the next refusal.
        self._reconnect_at: dict[tuple[str, int], float] = {}
        self._reconnect_backoff: dict[tuple[str, int], float] = {}

    @property
    def cluster(self) -> Cluster:
        """The in-process cluster (its nodes, network and disks): what the faults that
        do not cross processes act on."""
        if self._cluster is None:
            raise ChaosStepError("not available with one process per broker (mode: processes)")
        return self._cluster

    @property
    def brokers(self) -> int:
        return self.spec.brokers

    def emit(self, kind: TraceKind, type_: str, **fields: Any) -> None:
        self.tracer.emit(kind, node=CHAOS_NODE, actor=RUNNER_ACTOR, type=type_, **fields)

    # -- who is where

    def running(self) -> list[int]:
        return [b for b in range(self.brokers) if self.is_running(b)]

    def is_running(self, broker: int) -> bool:
        """Running and not crashed (a crashed node runs on until its tasks are cancelled;
        a broker process runs until it has exited)."""
        if self.processes is not None:
            child = self.processes.children.get(broker)
            return child is not None and child.running
        node = self.cluster.nodes.get(broker)
        return node is not None and node.running and not node.crashed

    async def controller(self) -> int | None:
        """The broker ``/controller`` names, or None."""
        try:
            data, _ = await self.session.get(zkdata.CONTROLLER_PATH)
        except KemuError:
            return None
        return int(zkdata.ControllerRegistration.decode(data).broker_id)

    async def resolve(self, selector: BrokerSel) -> int:
        """A broker id for a selector, now (see ``cluster.chaos.model``)."""
        if isinstance(selector, int):
            return selector
        running = self.running()
        if selector == "controller":
            controller = await self.controller()
            if controller is None or controller not in running:
                raise ChaosStepError("there is no running controller")
            return controller
        if selector == "other":
            controller = await self.controller()
            running = [b for b in running if b != controller]
        if not running:
            raise ChaosStepError(f"no running broker for {selector!r}")
        return self.rng.choice(running)

    # -- asking brokers

    async def ask_broker(
        self, broker: int, request: Message, *, timeout: float, client: str = ""
    ) -> Message:
        """A client request (``protocol.kafka_api`` / ``kafka_data``) answered by
        ``broker``: in one process, asked of its ``broker`` actor, exactly what its Kafka
        listener would hand it (no socket: a deterministic run stays deterministic), as
        over a connection whose other end is the broker's process (``_ask_in_process``);
        with broker processes, sent over the Kafka wire to its listener
        (``KafkaAdminClient.request_broker``), on the connections of ``client`` (each
        consumer of a group has its own, as a real one does: a JoinGroup parked at the
        coordinator must not hold up another member's heartbeat). ``AskTimeoutError`` when
        no answer came in time or the connection failed (``BrokerDisconnectedError`` in
        one process when it was refused or reset); ``RemoteError`` for an error answer."""
        if self.processes is None:
            return await self._ask_in_process(broker, request, timeout=timeout, client=client)
        port = self.processes.kafka_ports.get(broker)
        if port is None:
            raise AskTimeoutError(f"broker {broker} has no Kafka listener")
        kafka = self._kafka.get(client)
        if kafka is None:
            kafka = self._kafka[client] = KafkaAdminClient(
                [(self.spec.host, port)], clock=self.clock
            )
        assert isinstance(request, KAFKA_REQUESTS)
        try:
            return await kafka.request_broker((self.spec.host, port), request, timeout=timeout)
        except KafkaClientError as exc:
            raise AskTimeoutError(str(exc)) from None

    async def _ask_in_process(
        self, broker: int, request: Message, *, timeout: float, client: str
    ) -> Message:
        """The ask of ``ask_broker`` in one process, with what the operating system tells a
        client of a broker process over TCP. A broker whose node is not running (crashed,
        stopped, never started) refuses the connection at once; one whose node ends (a
        crash, the end of a stop) while the request is in flight resets it at once
        (Kafka's ``NetworkClient``: the node disconnected, its in-flight requests fail):
        ``BrokerDisconnectedError`` either way, traced as ``broker_disconnected``. A
        refused connection is not tried again before ``reconnect.backoff.ms`` (doubling
        up to ``reconnect.backoff.max.ms`` while refusals go on; a connection made
        resets it): the wait comes out of the next ask's timeout, so that no retry loop
        spins on the virtual clock against a broker that is down. A paused broker
        (SIGSTOP) or one cut off by a partition leaves the request unanswered until its
        timeout, as TCP says nothing of a host that stopped or cannot be reached."""
        clock = self.clock
        link = (client, broker)
        hold = self._reconnect_at.get(link, 0.0) - clock.now()
        if hold > 0:  # NetworkClient.ready is false until the back-off has passed
            if hold >= timeout:
                await clock.sleep(timeout)
                raise AskTimeoutError(f"no connection to broker {broker} within {timeout}s")
            await clock.sleep(hold)
            timeout -= hold
        node = self.cluster.nodes.get(broker)
        if node is None or not node.running or node.crashed:
            backoff = self._reconnect_backoff.get(link, RECONNECT_BACKOFF)
            self._reconnect_at[link] = clock.now() + backoff
            self._reconnect_backoff[link] = min(2 * backoff, RECONNECT_BACKOFF_MAX)
            self._disconnected(broker, request, client, "refused")
            raise BrokerDisconnectedError(f"connection to broker {broker} refused", sent=False)
        self._reconnect_at.pop(link, None)
        self._reconnect_backoff.pop(link, None)
        outcome: list[Message | KemuError] = []
        async with anyio.create_task_group() as tg:

            async def ask() -> None:
                try:
                    outcome.append(
                        await self.client.ask(broker_ref(broker), request, timeout=timeout)
                    )
                except KemuError as exc:  # raised below, not inside the task group
                    outcome.append(exc)
                tg.cancel_scope.cancel()

            tg.start_soon(ask)
            await node.ended.wait()  # the process is gone: its sockets close
            tg.cancel_scope.cancel()
        if not outcome:
            self._disconnected(broker, request, client, "reset")
            raise BrokerDisconnectedError(
                f"connection to broker {broker} reset: {type(request).__name__} in flight",
                sent=True,
            )
        answer = outcome[0]
        if isinstance(answer, KemuError):
            raise answer
        return answer

    def _disconnected(self, broker: int, request: Message, client: str, how: str) -> None:
        self.tracer.emit(
            TraceKind.EVENT,
            node=CHAOS_NODE,
            actor=CLIENT_ACTOR,
            type="broker_disconnected",
            broker=broker,
            client=client,
            request=type(request).__name__,
            how=how,
        )

    async def aclose(self) -> None:
        """Close the Kafka connections ``ask_broker`` opened."""
        clients, self._kafka = list(self._kafka.values()), {}
        for kafka in clients:
            await kafka.aclose()

    async def status(self, broker: int) -> BrokerStatus | None:
        if not self.is_running(broker):
            return None
        try:
            reply = await self.client.ask(broker_ref(broker), BrokerStatusRequest(), timeout=5.0)
        except (AskTimeoutError, RemoteError):
            return None
        return reply if isinstance(reply, BrokerStatus) else None

    # -- crashes

    async def crash_broker(self, broker: int) -> None:
        """Crash a broker through the cluster, which leaves its session to expire (so does
        a broker that halts by itself: ``Cluster`` plays the store server's part); a
        broker process gets SIGKILL, and the store server expires its session."""
        if self.processes is not None:
            await self.processes.kill_broker(broker)
            return
        await self.cluster.crash_broker(broker)
        if not await self.cluster.wait_stopped(broker, timeout=STOP_TIMEOUT):
            raise ChaosStepError(f"broker {broker} did not stop after its crash")

    async def stop_broker(self, broker: int, *, timeout: float) -> None:
        """Graceful stop (a broker process gets SIGTERM, as ``kemu broker stop``)."""
        if self.is_paused(broker):
            raise ChaosStepError(f"broker {broker} is paused: heal the pause before stopping it")
        if self.processes is not None:
            await self.processes.stop_broker(broker)
            return
        self.cluster.stop_broker(broker)
        if not await self.cluster.wait_stopped(broker, timeout=timeout):
            raise ChaosStepError(f"broker {broker} did not stop")

    # -- pauses

    def is_paused(self, broker: int) -> bool:
        if self.processes is not None:
            child = self.processes.children.get(broker)
            return child is not None and child.running and child.paused
        node = self.cluster.nodes.get(broker)
        return node is not None and node.paused

    async def pause_broker(self, broker: int) -> None:
        """Freeze a broker: its node in one process (``Cluster.pause_broker``), SIGSTOP
        to its process."""
        try:
            if self.processes is not None:
                await self.processes.pause_broker(broker)
            else:
                self.cluster.pause_broker(broker)
        except (KemuError, NotFreezableError) as exc:
            raise ChaosStepError(str(exc)) from None

    async def resume_broker(self, broker: int) -> None:
        """Undo ``pause_broker`` (SIGCONT); nothing to do if the broker went down since."""
        if self.processes is not None:
            child = self.processes.children.get(broker)
            if child is not None and child.running:
                self.processes.continue_broker(broker)
            return
        self.cluster.resume_broker(broker)

    async def wait_stopped(self, broker: int, *, timeout: float) -> bool:
        if self.processes is not None:
            child = self.processes.children.get(broker)
            if child is None:
                return True
            with anyio.move_on_after(timeout):
                await child.exited.wait()
            return child.exited.is_set()
        return await self.cluster.wait_stopped(broker, timeout=timeout)

    async def expire_session(self, broker: int, session_id: int) -> None:
        """Expire the broker's store session ``session_id`` for real: the store the run
        holds does it (the embedded store, or the in-process cluster's ZooKeeper client,
        which takes the session over and closes it); a broker process on ZooKeeper does
        the same on SIGUSR1, and this waits until the server has deleted the session's
        registration."""
        if self.processes is None or self.processes.embedded_store is not None:
            await self.store.expire_session(session_id)
            return
        self.processes.expire_broker_session(broker)
        path = zkdata.broker_path(BrokerId(broker))

        async def gone() -> bool:
            stat = await self.session.exists(path)
            return stat is None or stat.ephemeral_owner != session_id

        timeout = self.spec.broker_config().zookeeper_session_timeout_ms / 1000 + STOP_TIMEOUT
        if not await self.until(gone, timeout):
            raise ChaosStepError(f"broker {broker}'s session {session_id} did not expire")

    # -- starting brokers

    async def start_broker(self, broker: int, *, timeout: float) -> None:
        """Start a broker that is down, once its previous run has ended and its old
        registration is gone (a crashed broker's session expires after its timeout)."""
        if self.is_running(broker):
            raise ChaosStepError(f"broker {broker} is already running")
        if not await self.wait_stopped(broker, timeout=timeout):
            raise ChaosStepError(f"broker {broker} did not stop within {timeout}s")
        path = zkdata.broker_path(BrokerId(broker))
        if not await self.until(self._absent(path), timeout):
            raise ChaosStepError(f"{path} was still registered after {timeout}s")
        if self.processes is not None:
            try:
                await self.processes.start_broker(broker)
            except LauncherError as exc:
                raise ChaosStepError(str(exc)) from None
            return
        await self.cluster.start_broker(broker)
        disk = self.disks.get(broker)
        if disk is not None:
            self._install(broker, disk)

    def _absent(self, path: str) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            return await self.session.exists(path) is None

        return check

    async def until(self, check: Callable[[], Awaitable[bool]], within: float) -> bool:
        """Evaluate ``check`` now and again after each burst of cluster activity, until it
        holds (True) or ``within`` seconds have passed (False)."""
        deadline = self.clock.now() + within
        while True:
            generation = self.recorder.generation
            if await check():
                return True
            remaining = deadline - self.clock.now()
            if remaining <= 0:
                return False
            with anyio.move_on_after(remaining):
                await self.recorder.activity_since(generation)
                await self.clock.sleep(min(POLL, max(0.0, deadline - self.clock.now())))

    # -- disks

    def disk(self, broker: int) -> FaultyDisk:
        """The broker's fault-injecting disk, installed in its log manager (and again in
        the log manager of each later run of the broker that chaos starts)."""
        disk = self.disks.get(broker)
        if disk is None:
            disk = self.disks[broker] = FaultyDisk()
        if self.is_running(broker):
            self._install(broker, disk)
        return disk

    def _install(self, broker: int, disk: FaultyDisk) -> None:
        log_manager = self.cluster.nodes[broker].actor(LOG_MANAGER_ACTOR)
        assert isinstance(log_manager, LogManager)
        log_manager.disk = disk

    def log_dir(self, broker: int) -> Path:
        """Broker ``broker``'s first log directory, as its log manager names it."""
        return self.spec.log_dir / f"broker-{broker}"

    def log_dirs(self, broker: int) -> list[Path]:
        """Every log directory of broker ``broker`` (``log.dirs``), in order."""
        first = self.log_dir(broker)
        return [
            first,
            *(
                first.with_name(f"{first.name}.{k}")
                for k in range(1, self.spec.log_dirs_per_broker)
            ),
        ]

    # -- the network observer

    def observe(self, envelope: Envelope) -> None:
        """Record the payload fields of controller requests and their answers."""
        self.tap.observe(envelope)


def _broker_of(node: str) -> int | None:
    prefix, _, number = node.rpartition("-")
    return int(number) if prefix == "broker" and number.isdigit() else None
