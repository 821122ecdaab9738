"""The actor runtime: nodes, actors, mailboxes, ``tell`` and ``ask``.

An actor is one task, one mailbox and state that only its own task touches. It handles
one message at a time. A node owns its actors' tasks in one anyio task group; stopping a
node runs the actors' graceful ``on_stop`` steps and then cancels that scope, crashing it
cancels the scope with no graceful step at all.

Messages leave a node through its ``Postman`` (the network endpoint, see
``cluster.network``) and arrive through ``Node.deliver``, which never blocks: a request or a
tell goes into the destination actor's mailbox, a reply resolves the pending ``ask`` with
the same correlation id, and a late reply (its ask timed out) is dropped and traced.
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, Protocol, TypeVar

import anyio
import structlog
from anyio.abc import TaskGroup, TaskStatus

from actors.runtime.clock import Clock, RealClock
from actors.runtime.freeze import NODE, FreezableLoop, freezable_loop
from actors.runtime.tracer import Tracer
from protocol.base import ActorRef, ErrorReply, Message
from protocol.envelope import Envelope, EnvelopeKind
from protocol.errors import (
    ActorNotFoundError,
    AskTimeoutError,
    ErrorCode,
    FatalNodeError,
    NodeStoppedError,
    RemoteError,
    error_code_for,
)
from protocol.trace import TraceKind

log = structlog.get_logger("kemu.actors")

M = TypeVar("M", bound=Message)

DEFAULT_ASK_TIMEOUT = 30.0  # Kafka's request.timeout.ms


class Postman(Protocol):
    """Where a node hands outgoing envelopes: never blocks (see ``cluster.network``)."""

    def post(self, envelope: Envelope) -> None: ...


class Attach(Protocol):
    """Connects a node to the network: given its id and delivery callback, a Postman."""

    async def __call__(self, node_id: str, deliver: Callable[[Envelope], None]) -> Postman: ...


class Mailbox:
    """An actor's inbox: unbounded on purpose (the network never waits on a slow actor, as
    a broker's socket reader does not wait on its request handler); ``depth`` is exposed
    for metrics and tests. One reader (the actor's task), any number of writers, all on
    the loop's thread. Lighter than ``asyncio.Queue``: this is the hottest path."""

    __slots__ = ("_items", "_waiter")

    def __init__(self) -> None:
        self._items: deque[Envelope] = deque()
        self._waiter: asyncio.Future[None] | None = None

    def put_nowait(self, env: Envelope) -> None:
        self._items.append(env)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self) -> Envelope:
        while not self._items:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._items.popleft()

    @property
    def depth(self) -> int:
        return len(self._items)


class Context:
    """What a handler knows about the message it is handling."""

    __slots__ = ("_deferred", "_envelope", "corr", "kind", "sender")

    def __init__(self, envelope: Envelope) -> None:
        self._envelope = envelope
        self.sender = envelope.src
        self.corr = envelope.corr
        self.kind = envelope.kind
        self._deferred: DeferredReply | None = None

    def defer(self) -> DeferredReply:
        """Answer this ask later (e.g. once a purgatory condition holds) instead of with
        the handler's return value, so the actor can go on handling other messages."""
        if self.kind is not EnvelopeKind.ASK:
            raise RuntimeError("only an ask can be answered later")
        if self._deferred is None:
            self._deferred = DeferredReply(self._envelope)
        return self._deferred


class DeferredReply:
    """A promise to answer one ask; ``send`` it exactly once, from the owning actor."""

    __slots__ = ("_envelope", "sent")

    def __init__(self, envelope: Envelope) -> None:
        self._envelope = envelope
        self.sent = False

    @property
    def request(self) -> Message:
        return self._envelope.payload

    def send(self, actor: Actor, reply: Message) -> None:
        if self.sent:
            raise RuntimeError("a deferred reply is sent once")
        self.sent = True
        actor.node._reply(self._envelope, reply)


class Actor:
    """Subclass and implement ``receive``. For an ``ask``, the returned message is the
    reply; raising sends the asker an ``ErrorReply`` with the mapped Kafka error code."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._node: Node | None = None
        self._mailbox = Mailbox()
        self._despawned = False

    # -- wiring, set when spawned

    @property
    def node(self) -> Node:
        if self._node is None:
            raise RuntimeError(f"actor {self.name} is not spawned")
        return self._node

    @property
    def ref(self) -> ActorRef:
        return ActorRef(self.node.node_id, self.name)

    @property
    def clock(self) -> Clock:
        return self.node.clock

    @property
    def rng(self) -> random.Random:
        return self.node.rng

    @property
    def tracer(self) -> Tracer:
        return self.node.tracer

    @property
    def mailbox_depth(self) -> int:
        return self._mailbox.depth

    # -- behaviour, overridden by subclasses

    async def on_start(self) -> None:
        """Runs in the actor's task before the first message."""

    async def on_stop(self) -> None:
        """Graceful stop only (never on crash): release what the actor holds."""

    def on_exit(self) -> None:
        """Whatever ended the node (a stop, a crash, a failed start), once its tasks are
        done: let go of the operating system's resources the actor still holds, writing
        nothing, as the OS closes a killed process's files and sockets. After a graceful
        stop, ``on_stop`` has usually released them already."""

    async def receive(self, msg: Message, ctx: Context) -> Message | None:
        raise NotImplementedError

    # -- messaging

    def tell(self, dst: ActorRef, msg: Message) -> None:
        self.node.send(self.ref, dst, msg)

    async def ask(
        self, dst: ActorRef, msg: Message, *, timeout: float = DEFAULT_ASK_TIMEOUT
    ) -> Message:
        return await self.node.ask_from(self.ref, dst, msg, timeout=timeout)

    def send_self(self, msg: Message) -> None:
        """Put ``msg`` in this actor's own mailbox, bypassing the network: how timers and
        helper tasks hand work to the actor without touching its state. Nothing once the
        actor is despawned (its helper tasks must not feed a successor of the same name)."""
        if self._despawned:
            return
        self.node.deliver(
            Envelope(src=self.ref, dst=self.ref, corr=0, kind=EnvelopeKind.TELL, payload=msg)
        )

    def trace(self, kind: TraceKind | str, type: str, **fields: Any) -> None:
        tracer = self.node.tracer
        if tracer.enabled:
            tracer.emit(kind, node=self.node.node_id, actor=self.name, type=type, **fields)
        else:
            tracer.skip()  # the hot paths trace a lot; nothing listens

    def start_soon(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        """Run a helper task (a timer, a retry loop) owned by this actor's node. It must only
        feed the actor's own mailbox (``self.node.deliver``/``tell`` to itself)."""
        self.node.task_group.start_soon(fn, *args)


class Node:
    """A process-like unit: actors, a clock, a seeded RNG, a network endpoint."""

    def __init__(
        self,
        node_id: str,
        *,
        attach: Attach,
        tracer: Tracer | None = None,
        clock: Clock | None = None,
        seed: int | str = 0,
    ) -> None:
        self.node_id = node_id
        self.tracer = tracer or Tracer()
        self.clock = clock or RealClock()
        # A str seed goes through SHA-512, so it is independent of PYTHONHASHSEED.
        self.rng = random.Random(f"{seed}:{node_id}")
        # Identities (a new cluster's id) must differ between runs, as Kafka's random
        # UUIDs do, except in a deterministic run, where they come from the seed too.
        self.ids: random.Random = (
            random.Random(f"{seed}:{node_id}:ids")
            if self.clock.deterministic
            else random.SystemRandom()
        )
        self._attach = attach
        self._postman: Postman | None = None
        self._actors: dict[str, Actor] = {}
        self._order: list[str] = []
        self._scopes: dict[str, anyio.CancelScope] = {}
        """Each running actor's loop, for ``despawn``."""
        self._pending: dict[int, asyncio.Future[Envelope]] = {}
        self._next_corr = 0
        self._tg: TaskGroup | None = None
        self._stop_requested: anyio.Event | None = None
        self.running = False
        self.crashed = False
        self.fatal: str | None = None
        """Why the node halted by itself (the ``FatalNodeError`` a handler raised), if it did."""
        self.paused = False
        self.ended = anyio.Event()
        """Set when ``run`` has returned (a stop, a crash, or a crash of its own)."""

    # -- lifecycle

    @property
    def task_group(self) -> TaskGroup:
        if self._tg is None:
            raise RuntimeError(f"node {self.node_id} is not running")
        return self._tg

    async def run(
        self,
        actors: Iterable[Actor] = (),
        *,
        task_status: TaskStatus[Node] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run the node until stopped or crashed. Start it with ``await tg.start(node.run)``:
        it reports readiness once it is attached and its first actors have started."""
        self._stop_requested = anyio.Event()
        token = NODE.set(self.node_id)  # every task of the node inherits it (``pause``)
        structlog.contextvars.bind_contextvars(node=self.node_id)  # and what they log
        loop = asyncio.get_running_loop()
        if isinstance(loop, FreezableLoop):
            task = asyncio.current_task()
            assert task is not None
            loop.adopt(self.node_id, task)
        try:
            self._postman = await self._attach(self.node_id, self.deliver)
            await self._serve(actors, task_status)
        finally:
            NODE.reset(token)
            self.ended.set()

    async def _serve(self, actors: Iterable[Actor], task_status: TaskStatus[Node]) -> None:
        assert self._stop_requested is not None
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                self.running = True
                try:
                    for actor in actors:
                        await self.spawn(actor)
                except Exception:  # the ones started close what they opened, as at a stop
                    await self._graceful_steps()
                    raise
                self.tracer.emit(TraceKind.EVENT, node=self.node_id, type="node_started")
                task_status.started(self)
                await self._stop_requested.wait()
                await self._graceful_steps()
                tg.cancel_scope.cancel()
        finally:
            self.running = False
            self.paused = False
            self._tg = None
            self._release()
            self._fail_pending()
            close = getattr(self._postman, "close", None)
            if close is not None:
                close()

    async def spawn(self, actor: Actor) -> ActorRef:
        """Start ``actor`` on this node; returns once its ``on_start`` has run."""
        if actor.name in self._actors:
            raise ValueError(f"actor {actor.name!r} already exists on node {self.node_id}")
        actor._node = self
        self._actors[actor.name] = actor
        self._order.append(actor.name)
        try:
            await self.task_group.start(self._actor_loop, actor)
        except BaseException:  # its on_start failed: it never ran, and will not stop,
            del self._actors[actor.name]  # but lets go of what it opened before failing
            self._order.remove(actor.name)
            self._exit(actor)
            raise
        return actor.ref

    def actor(self, name: str) -> Actor:
        return self._actors[name]

    def despawn(self, name: str) -> None:
        """End one actor of the running node (a thread of Kafka's that is shut down while
        the process runs): its loop is cancelled where it waits, the messages left in its
        mailbox are dropped, ``on_exit`` runs, and its helper tasks' ``send_self`` does
        nothing more. Call it when the actor is idle (nothing of its own under way), from
        another actor; a new actor may then take the name."""
        actor = self._actors.pop(name)
        self._order.remove(name)
        actor._despawned = True
        scope = self._scopes.pop(name, None)
        if scope is not None:
            scope.cancel()
        self._exit(actor)

    def stop(self) -> None:
        """Graceful stop: actors' ``on_stop`` in reverse start order, then cancel."""
        if self._stop_requested is not None:
            self._stop_requested.set()

    def crash(self) -> None:
        """Crash: cancel everything now, no graceful step (no on_stop, no session close).
        A paused node is cancelled first and thawed after, so that none of its tasks
        takes another step of its own (a SIGKILL of a stopped process)."""
        if self._tg is not None:
            self.crashed = True
            self.tracer.emit(TraceKind.EVENT, node=self.node_id, type="node_crashed")
            self._tg.cancel_scope.cancel()
            if self.paused:
                self.paused = False
                freezable_loop().kill(self.node_id)

    def pause(self) -> None:
        """Freeze the node, as SIGSTOP freezes a process (``actors.runtime.freeze``): each of its
        tasks stops at its next await, messages for it wait in its mailboxes, and its
        timers' wake-ups wait, until ``resume``. A graceful ``stop`` asked meanwhile
        takes effect after the resume; a ``crash`` takes effect at once. Needs a
        freezable loop (``NotFreezableError`` otherwise)."""
        if not self.running or self.crashed:
            raise NodeStoppedError(f"node {self.node_id} is not running")
        if self.paused:
            return
        freezable_loop().freeze(self.node_id)
        self.paused = True
        self.tracer.emit(TraceKind.EVENT, node=self.node_id, type="node_paused")

    def resume(self) -> None:
        """Undo ``pause``: the node's held work runs, in the order it was held."""
        if not self.paused:
            return
        self.paused = False
        self.tracer.emit(TraceKind.EVENT, node=self.node_id, type="node_resumed")
        freezable_loop().thaw(self.node_id)

    def _release(self) -> None:
        for name in reversed(self._order):
            self._exit(self._actors[name])

    def _exit(self, actor: Actor) -> None:
        try:
            actor.on_exit()
        except Exception as exc:  # one actor's failure must not keep the others' files
            self._trace_error(actor.name, "on_exit_failed", exc)

    async def _graceful_steps(self) -> None:
        # A snapshot: an actor may despawn another while one's on_stop awaits.
        for name in list(reversed(self._order)):
            actor = self._actors.get(name)
            if actor is None:
                continue
            try:
                await actor.on_stop()
            except Exception as exc:  # one actor's failed shutdown must not skip the others
                self._trace_error(actor.name, "on_stop_failed", exc)
        self.tracer.emit(TraceKind.EVENT, node=self.node_id, type="node_stopped")

    def _fail_pending(self) -> None:
        """Fail the asks still waiting for a reply: ``NodeStoppedError``, not a
        cancellation (an asker outside the node, e.g. a test or a CLI adapter, must not see
        a ``CancelledError`` it did not ask for)."""
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(NodeStoppedError(f"node {self.node_id} stopped"))
        self._pending.clear()

    # -- the actor loop

    async def _actor_loop(self, actor: Actor, *, task_status: TaskStatus[None]) -> None:
        structlog.contextvars.bind_contextvars(node=self.node_id, actor=actor.name)
        await actor.on_start()
        with anyio.CancelScope() as scope:
            self._scopes[actor.name] = scope
            task_status.started()
            mailbox = actor._mailbox
            while True:
                env = await mailbox.get()
                await self._handle(actor, env)

    async def _handle(self, actor: Actor, env: Envelope) -> None:
        ctx = Context(env)
        try:
            reply = await actor.receive(env.payload, ctx)
        except FatalNodeError as exc:  # Kafka's Exit.halt: the whole node goes, at once
            self._trace_error(actor.name, "fatal_error", exc)
            log.exception("fatal_error")
            if self.fatal is None:
                self.fatal = str(exc) or type(exc).__name__
            self.crash()
            return
        except Exception as exc:  # each message is its own error boundary
            self._trace_error(actor.name, "handler_failed", exc, msg_type=env.type_name)
            log.warning("handler_failed", msg_type=env.type_name, error=repr(exc))
            if env.kind is EnvelopeKind.ASK:
                code = error_code_for(exc)
                self._reply(env, ErrorReply(code=int(code), message=str(exc) or type(exc).__name__))
            return
        if env.kind is EnvelopeKind.ASK and ctx._deferred is None:
            if reply is None:
                reply = ErrorReply(
                    code=int(ErrorCode.UNKNOWN_SERVER_ERROR),
                    message=f"{actor.name} gave no reply to {env.type_name}",
                )
            self._reply(env, reply)

    def _trace_error(self, actor: str, type_: str, exc: BaseException, **fields: Any) -> None:
        self.tracer.emit(
            TraceKind.ERROR,
            node=self.node_id,
            actor=actor,
            type=type_,
            error=type(exc).__name__,
            detail=str(exc),
            **fields,
        )

    # -- sending

    def _post(self, env: Envelope) -> None:
        if self._postman is None:
            raise RuntimeError(f"node {self.node_id} is not attached")
        self._postman.post(env)

    def _reply(self, request: Envelope, reply: Message) -> None:
        self._post(
            Envelope(
                src=request.dst,
                dst=request.src,
                corr=request.corr,
                kind=EnvelopeKind.REPLY,
                payload=reply,
            )
        )

    def send(self, src: ActorRef, dst: ActorRef, msg: Message) -> None:
        self._post(Envelope(src=src, dst=dst, corr=0, kind=EnvelopeKind.TELL, payload=msg))

    async def ask_from(
        self, src: ActorRef, dst: ActorRef, msg: Message, *, timeout: float = DEFAULT_ASK_TIMEOUT
    ) -> Message:
        """Send ``msg`` as a request and wait for the reply; ``AskTimeoutError`` after
        ``timeout`` seconds of this node's clock, ``RemoteError`` if the handler failed."""
        self._next_corr += 1
        corr = self._next_corr
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Envelope] = loop.create_future()
        self._pending[corr] = fut
        # A loop timer rather than a cancel scope: asks are the hot path, and a timer that
        # fails the future is a fraction of the cost (same loop clock, virtual or real).
        timer = loop.call_later(timeout / self.clock.rate, _expire, fut)
        try:
            self._post(Envelope(src=src, dst=dst, corr=corr, kind=EnvelopeKind.ASK, payload=msg))
            reply = await fut
        except TimeoutError:
            raise AskTimeoutError(
                f"no reply from {dst} to {type(msg).__name__} within {timeout}s"
            ) from None
        finally:
            timer.cancel()
            self._pending.pop(corr, None)
        payload = reply.payload
        if isinstance(payload, ErrorReply):
            raise RemoteError(_code(payload.code), payload.message)
        return payload

    async def ask(
        self, dst: ActorRef, msg: Message, *, timeout: float = DEFAULT_ASK_TIMEOUT
    ) -> Message:
        """Ask from outside any actor (tests, CLI adapters): the reply comes to this node."""
        return await self.ask_from(ActorRef(self.node_id, "_client"), dst, msg, timeout=timeout)

    def tell(self, dst: ActorRef, msg: Message) -> None:
        self.send(ActorRef(self.node_id, "_client"), dst, msg)

    # -- receiving

    def deliver(self, env: Envelope) -> None:
        """Called by the network for every envelope addressed to this node. Never blocks."""
        if env.kind is EnvelopeKind.REPLY:
            fut = self._pending.get(env.corr)
            if fut is None or fut.done():
                self._drop(env, "late_reply")
                return
            fut.set_result(env)
            return
        if env.payload.local_only and env.src.node != self.node_id:
            self._drop(env, "local_only")  # a peer may not fire our timers or halt us
            return
        actor = self._actors.get(env.dst.name)
        if actor is None or not self.running:
            self._drop(env, "no_such_actor")
            if env.kind is EnvelopeKind.ASK and self.running:
                err = ActorNotFoundError(f"no actor {env.dst.name!r} on node {self.node_id}")
                self._reply(env, ErrorReply(code=int(error_code_for(err)), message=str(err)))
            return
        actor._mailbox.put_nowait(env)

    def _drop(self, env: Envelope, reason: str) -> None:
        """An envelope this node will not deliver, traced with why."""
        self.tracer.emit(
            TraceKind.DROP,
            node=self.node_id,
            actor=env.dst.name,
            type=env.type_name,
            corr=env.corr,
            reason=reason,
            src=str(env.src),
        )

    def mailbox_depths(self) -> dict[str, int]:
        return {name: self._actors[name].mailbox_depth for name in self._order}


def _expire(fut: asyncio.Future[Envelope]) -> None:
    if not fut.done():
        fut.set_exception(TimeoutError())


def _code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR
