"""The one ``Network`` every message between nodes crosses.

A node attaches with a delivery callback and gets an ``Endpoint`` to post through. ``post``
traces the send, settles the message's fate under the fault rules (see ``faults``) and hands
it to the transport now, after a delay, or after later messages have overtaken it. Whatever
arrives is traced and given to the destination node's callback. Every send is matched in
the trace by exactly one deliver or one drop (a duplicate is traced as a send of its own).

Life cycle: the network runs in a task group of its owner, ``await tg.start(network.run)``,
and cancelling that scope stops it; or for the length of a block, ``async with network:``
(the same ``run`` in a task group of its own). Its background work (the
timer that releases delayed and held messages, and whatever the transport runs) lives in a
task group owned by ``run``. Nothing here creates a task per message: a message that meets
no delay goes through synchronously, delayed ones wait in one heap served by one task.

Time and randomness are injected (``clock``, ``rng``): under ``run_virtual`` with the
in-process transport the same seed gives the same trace, byte for byte.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType, TracebackType
from typing import Any, NoReturn, TypeAlias

import anyio
import msgspec
import structlog
from anyio.abc import TaskGroup, TaskStatus

from actors.runtime.clock import Clock
from actors.runtime.tracer import Tracer
from cluster.logging import messages_logged
from cluster.network.faults import RULE_TYPES, UNHARMED, Fate, Partition, Rule, decide
from cluster.network.transport import DropReason, Transport, TransportEvents
from protocol.base import ActorRef
from protocol.envelope import Envelope
from protocol.errors import NetworkError
from protocol.trace import TraceKind

Deliver: TypeAlias = Callable[[Envelope], None]
"""A node's delivery callback: synchronous, never blocks (mailbox put or ask resolution)."""

Observer: TypeAlias = Callable[[Envelope], None]
"""Sees every envelope posted (``Network.add_observer``): synchronous, never posts."""

Link: TypeAlias = tuple[str, str]  # (source node, destination node)


class Endpoint:
    """A node's handle on the network: post envelopes from the node, close to detach it."""

    __slots__ = ("_closed", "_network", "node_id")

    def __init__(self, network: Network, node_id: str) -> None:
        self._network = network
        self.node_id = node_id
        self._closed = False

    @property
    def closed(self) -> bool:
        """Closed by its node, or left behind by a network that stopped."""
        return self._closed or self._network._endpoints.get(self.node_id) is not self

    def post(self, envelope: Envelope) -> None:
        """Send an envelope from this node. Never blocks; what happens to it is traced."""
        if envelope.src.node != self.node_id:
            raise ValueError(f"endpoint of node {self.node_id!r} cannot post from {envelope.src}")
        network = self._network
        if network._endpoints.get(self.node_id) is self:
            network.post(envelope)
        elif network.running:
            network._refuse(envelope, DropReason.SOURCE_DETACHED)
        else:
            network._refuse(envelope, DropReason.NETWORK_STOPPED)

    def close(self) -> None:
        """Detach the node: later messages to it are dropped as ``unknown_destination``; on
        TCP its listener and connections close right after. Synchronous and idempotent, so a
        node can call it from a ``finally`` while it is being cancelled."""
        if not self._closed:
            self._closed = True
            self._network._detach(self)


class _Timer:
    """A message waiting in the network: delayed until ``due``, or held back on ``link``
    for reordering until ``remaining`` later messages have passed (or ``due``)."""

    __slots__ = ("due", "envelope", "link", "pending", "remaining", "seq")

    def __init__(
        self, due: float, seq: int, envelope: Envelope, link: Link | None, remaining: int
    ) -> None:
        self.due = due
        self.seq = seq
        self.envelope = envelope
        self.link = link
        self.remaining = remaining
        self.pending = True

    def __lt__(self, other: _Timer) -> bool:
        return (self.due, self.seq) < (other.due, other.seq)


log = structlog.get_logger("kemu.network.messages")


def _log_message(event: str, envelope: Envelope, at: ActorRef) -> None:
    """One message between actors at DEBUG, logged as the sender's or the receiver's
    (``at``): it goes to that node's broker log."""
    log.debug(
        event,
        node=at.node,
        actor=at.name,
        src=str(envelope.src),
        dst=str(envelope.dst),
        message=envelope.type_name,
        corr=envelope.corr,
        env_kind=envelope.kind.value,
    )


class Network:
    """Connects the nodes of a cluster (or of this process) through one transport."""

    def __init__(
        self,
        transport: Transport,
        *,
        tracer: Tracer,
        rng: random.Random,
        clock: Clock,
        name: str = "network",
    ) -> None:
        self.name = name
        self._transport = transport
        self._tracer = tracer
        self._rng = rng
        self._clock = clock
        self._nodes: dict[str, Deliver] = {}
        self._endpoints: dict[str, Endpoint] = {}
        self._rules: dict[int, Rule] = {}
        self._observers: list[Observer] = []
        self._rule_ids = itertools.count(1)
        self._timers: list[_Timer] = []  # a heap; entries of released messages linger
        self._timer_seq = itertools.count()
        self._held: dict[Link, list[_Timer]] = {}
        self._wakeup: anyio.CancelScope | None = None
        self._wakeup_at = math.inf
        self._running = False
        self._own_tg: TaskGroup | None = None  # when run by ``async with``
        self._log_messages = messages_logged()  # DEBUG: every message, sent and received

    # ------------------------------------------------------------------ life cycle

    @property
    def transport(self) -> Transport:
        return self._transport

    @property
    def running(self) -> bool:
        return self._running

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled: ``await tg.start(network.run)``. On the way out every
        message still delayed or held is traced as dropped and every node is detached
        (posting through a left-over endpoint drops with reason ``network_stopped``)."""
        if self._running:
            raise NetworkError(f"network {self.name!r} is already running")
        events = TransportEvents(arrived=self._arrive, dropped=self._dropped, report=self._report)
        try:
            async with anyio.create_task_group() as tg:
                await tg.start(self._transport.run, events, self._clock)
                self._running = True
                task_status.started()
                await self._serve_timers()
        finally:
            self._running = False
            self._discard_waiting()
            self._endpoints.clear()
            self._nodes.clear()

    async def __aenter__(self) -> Network:
        """``async with network:`` runs it in a task group of its own for the block."""
        if self._own_tg is not None:
            raise NetworkError(f"network {self.name!r} is already running")
        tg = anyio.create_task_group()
        await tg.__aenter__()
        try:
            await tg.start(self.run)
        except BaseException as exc:
            await tg.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        self._own_tg = tg
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        tg, self._own_tg = self._own_tg, None
        assert tg is not None
        tg.cancel_scope.cancel()
        return await tg.__aexit__(exc_type, exc, tb)

    async def attach(self, node_id: str, deliver: Deliver) -> Endpoint:
        """Make a node reachable: what arrives for it goes to ``deliver``."""
        if not self._running:
            raise NetworkError(f"network {self.name!r} is not running")
        if node_id in self._nodes:
            raise NetworkError(f"node {node_id!r} is already attached to {self.name!r}")
        self._nodes[node_id] = deliver  # before listening: a frame may arrive right away
        try:
            await self._transport.listen(node_id)
        except BaseException:
            self._nodes.pop(node_id, None)
            raise
        endpoint = self._endpoints[node_id] = Endpoint(self, node_id)
        self._tracer.emit(TraceKind.EVENT, node=node_id, actor=self.name, type="attach")
        return endpoint

    def _detach(self, endpoint: Endpoint) -> None:
        node_id = endpoint.node_id
        if self._endpoints.get(node_id) is not endpoint:
            return  # the network stopped meanwhile
        del self._endpoints[node_id]
        del self._nodes[node_id]
        self._tracer.emit(TraceKind.EVENT, node=node_id, actor=self.name, type="detach")
        self._transport.unlisten(node_id)

    @property
    def nodes(self) -> frozenset[str]:
        """The nodes attached to this network (in this process)."""
        return frozenset(self._nodes)

    @property
    def waiting(self) -> int:
        """Messages delayed or held back for reordering right now (queue depth)."""
        return sum(1 for t in self._timers if t.pending)

    # ------------------------------------------------------------------ fault rules

    @property
    def rules(self) -> Mapping[int, Rule]:
        """The rules in force, by id, in the order they apply."""
        return MappingProxyType(self._rules)

    def add_rule(self, rule: Rule) -> int:
        """Start applying a rule to later messages; returns its id for ``remove_rule``."""
        if not isinstance(rule, RULE_TYPES):
            raise TypeError(f"not a fault rule: {rule!r}")
        rule_id = next(self._rule_ids)
        self._rules[rule_id] = rule
        self._trace_fault("add_rule", rule_id=rule_id, rule=_rule_fields(rule))
        return rule_id

    def remove_rule(self, rule_id: int) -> None:
        """Stop applying a rule. Messages it already delayed or held still wait their turn.
        Raises ``KeyError`` for an id not in force."""
        rule = self._rules.pop(rule_id)
        self._trace_fault("remove_rule", rule_id=rule_id, rule=_rule_fields(rule))

    def clear_rules(self) -> None:
        """Remove every rule, partitions included."""
        removed = list(self._rules)
        self._rules.clear()
        self._trace_fault("clear_rules", rule_ids=removed)

    def partition(self, *groups: Iterable[str]) -> int:
        """Cut the network between groups of nodes, both ways; nodes in no group are
        unaffected. A rule like any other (its id is returned); ``heal`` ends them all."""
        return self.add_rule(Partition.of(*groups))

    def heal(self) -> None:
        """End every partition; other rules stay."""
        healed = [i for i, rule in self._rules.items() if isinstance(rule, Partition)]
        for rule_id in healed:
            del self._rules[rule_id]
        self._trace_fault("heal", rule_ids=healed)

    def _trace_fault(self, what: str, **fields: Any) -> None:
        self._tracer.emit(TraceKind.FAULT, node=self.name, actor=self.name, type=what, **fields)

    # ------------------------------------------------------------------ observers

    def add_observer(self, observer: Observer) -> None:
        """Show ``observer`` every envelope posted from now on, before its fate is settled:
        chaos runs read the payloads the trace leaves out (controller epochs, delete
        flags, error codes). It must not block, and must not post."""
        self._observers.append(observer)

    def remove_observer(self, observer: Observer) -> None:
        self._observers.remove(observer)

    # ------------------------------------------------------------------ sending

    def post(self, envelope: Envelope) -> None:
        """Send an envelope: traced, subject to the fault rules unless source and
        destination are on the same node, then handed to the transport. Never blocks."""
        if self._observers:
            for observer in self._observers:
                observer(envelope)
        if self._log_messages:
            _log_message("message_sent", envelope, envelope.src)
        if not self._running:
            self._refuse(envelope, DropReason.NETWORK_STOPPED)
            return
        src_node = envelope.src.node
        dst_node = envelope.dst.node
        if src_node == dst_node:
            if self._tracer.enabled:
                self._trace_send(envelope)
            self._arrive(envelope)
            return
        if self._rules:
            fate = decide(self._rules.items(), src_node, dst_node, envelope.type_name, self._rng)
            if fate is not UNHARMED:
                self._apply(envelope, fate)
                return
        if self._tracer.enabled:  # checked here too: this is the hottest path
            self._trace_send(envelope)
        self._transmit(envelope)

    def _apply(self, envelope: Envelope, fate: Fate) -> None:
        """Carry out a fate other than going through untouched."""
        if fate.dropped_by is not None:
            self._trace_send(envelope)
            reason = DropReason.PARTITION if fate.partitioned else DropReason.DROP_RULE
            self._trace_drop(envelope, reason, rule=fate.dropped_by)
            return
        extra: dict[str, Any] = {}
        if fate.delay > 0:
            extra["delay"] = round(fate.delay, 9)
        if fate.reorder is not None:
            extra["hold"] = fate.reorder.window
        for copy in range(fate.copies):
            if copy:
                extra["duplicate"] = copy
            self._trace_send(envelope, **extra)
            if fate.delay > 0:
                self._schedule(self._clock.now() + fate.delay, envelope, None, 0)
            elif fate.reorder is not None:
                self._hold(envelope, fate.reorder.window, fate.reorder.max_hold)
            else:
                self._transmit(envelope)

    def _refuse(self, envelope: Envelope, reason: DropReason) -> None:
        """Trace a send the network will not carry at all, and its drop."""
        self._trace_send(envelope)
        self._trace_drop(envelope, reason)

    def _transmit(self, envelope: Envelope) -> None:
        """Hand an envelope to the transport; it counts towards releasing held ones."""
        self._transport.send(envelope)
        if self._held:
            link = (envelope.src.node, envelope.dst.node)
            if link in self._held:
                self._count_down(link)

    # ------------------------------------------------------------------ delays and holds

    def _schedule(
        self, due: float, envelope: Envelope, link: Link | None, remaining: int
    ) -> _Timer:
        timer = _Timer(due, next(self._timer_seq), envelope, link, remaining)
        heapq.heappush(self._timers, timer)
        if due < self._wakeup_at and self._wakeup is not None:
            self._wakeup.cancel()  # the timer task sleeps towards a later deadline
        return timer

    def _hold(self, envelope: Envelope, window: int, max_hold: float) -> None:
        link = (envelope.src.node, envelope.dst.node)
        timer = self._schedule(self._clock.now() + max_hold, envelope, link, window)
        self._held.setdefault(link, []).append(timer)

    def _count_down(self, link: Link) -> None:
        """One more message went out on ``link``: release, right after it, the held ones
        whose window it closes (that is the overtaking)."""
        released: list[_Timer] = []
        for timer in self._held[link]:
            timer.remaining -= 1
            if timer.remaining <= 0:
                released.append(timer)
        for timer in released:
            if timer.pending:  # a delivery callback may have posted meanwhile
                self._release(timer)

    def _release(self, timer: _Timer) -> None:
        timer.pending = False
        if timer.link is None:
            self._transmit(timer.envelope)
            return
        waiting = self._held.get(timer.link, [])
        if timer in waiting:
            waiting.remove(timer)
            if not waiting:
                del self._held[timer.link]
        self._transport.send(timer.envelope)

    def _fire_due(self, now: float) -> None:
        timers = self._timers
        while timers and timers[0].due <= now:
            timer = heapq.heappop(timers)
            if timer.pending:
                self._release(timer)

    async def _serve_timers(self) -> NoReturn:
        """The one task behind every delayed or held message: sleep on the clock until the
        earliest deadline; a new earlier deadline cancels the sleep (``_schedule``)."""
        while True:
            self._fire_due(self._clock.now())
            target = self._timers[0].due if self._timers else math.inf
            with anyio.CancelScope() as scope:
                self._wakeup, self._wakeup_at = scope, target
                try:
                    if target == math.inf:
                        await anyio.sleep_forever()
                    else:
                        await self._clock.sleep(target - self._clock.now())
                finally:
                    self._wakeup, self._wakeup_at = None, math.inf
            if not scope.cancelled_caught:
                # The clock's sleep is over: everything due by the target goes, even if a
                # skewed or scaled clock reads slightly earlier.
                self._fire_due(target)

    def _discard_waiting(self) -> None:
        waiting = sorted(t for t in self._timers if t.pending)
        self._timers.clear()
        self._held.clear()
        for timer in waiting:
            timer.pending = False
            self._trace_drop(timer.envelope, DropReason.NETWORK_STOPPED)

    # ------------------------------------------------------------------ arrival and tracing

    def _arrive(self, envelope: Envelope) -> None:
        """An envelope reached this side: give it to its node, or drop it."""
        dst = envelope.dst
        deliver = self._nodes.get(dst.node)
        if deliver is None:
            self._trace_drop(envelope, DropReason.UNKNOWN_DESTINATION)
            return
        if self._log_messages:
            _log_message("message_received", envelope, dst)
        if self._tracer.enabled:
            self._tracer.emit(
                TraceKind.DELIVER,
                node=dst.node,
                actor=dst.name,
                type=envelope.type_name,
                corr=envelope.corr,
                src=str(envelope.src),
                dst=str(dst),
                env_kind=envelope.kind.value,
            )
        try:
            deliver(envelope)
        except Exception as exc:  # one node's faulty callback must not break the sender
            self._report(
                TraceKind.ERROR,
                "deliver_failed",
                node=dst.node,
                corr=envelope.corr,
                dst=str(dst),
                detail=repr(exc),
            )

    def _dropped(self, envelope: Envelope, reason: DropReason, detail: str) -> None:
        if detail:
            self._trace_drop(envelope, reason, detail=detail)
        else:
            self._trace_drop(envelope, reason)

    def _report(self, kind: TraceKind, what: str, *, node: str, **fields: Any) -> None:
        self._tracer.emit(kind, node=node, actor=self.name, type=what, **fields)

    def _trace_send(self, envelope: Envelope, **extra: Any) -> None:
        if not self._tracer.enabled:
            return
        src = envelope.src
        self._tracer.emit(
            TraceKind.SEND,
            node=src.node,
            actor=src.name,
            type=envelope.type_name,
            corr=envelope.corr,
            src=str(src),
            dst=str(envelope.dst),
            env_kind=envelope.kind.value,
            **extra,
        )

    def _trace_drop(self, envelope: Envelope, reason: DropReason, **extra: Any) -> None:
        if not self._tracer.enabled:
            return
        src = envelope.src
        self._tracer.emit(
            TraceKind.DROP,
            node=src.node,
            actor=src.name,
            type=envelope.type_name,
            corr=envelope.corr,
            src=str(src),
            dst=str(envelope.dst),
            env_kind=envelope.kind.value,
            reason=reason.value,
            **extra,
        )


def _rule_fields(rule: Rule) -> Any:
    """A rule as JSON-able data with sets sorted, so traces do not depend on hash order."""
    return msgspec.to_builtins(rule, order="deterministic")
