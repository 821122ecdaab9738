"""The actor runtime: tell, ask, timeouts, late replies, handler failures, stop and crash."""

from __future__ import annotations

import anyio
import pytest

from actors.runtime.actor import Actor, Context, DeferredReply, Node
from actors.runtime.clock import VirtualClock, run_virtual
from actors.runtime.tracer import MemorySink, Tracer
from protocol.base import ActorRef, Message
from protocol.errors import AskTimeoutError, ErrorCode, FatalNodeError, RemoteError
from tests.support.wire import DirectWire


class RtEcho(Message, frozen=True, kw_only=True):
    text: str


class RtBoom(Message, frozen=True, kw_only=True):
    fatal: bool = False


class RtSlow(Message, frozen=True, kw_only=True):
    seconds: float


class RtCount(Message, frozen=True, kw_only=True):
    n: int


class Echo(Actor):
    def __init__(self, name: str = "echo") -> None:
        super().__init__(name)
        self.seen: list[str] = []
        self.stopped = False

    async def receive(self, msg: Message, ctx: Context) -> Message | None:
        match msg:
            case RtEcho(text=text):
                self.seen.append(text)
                return RtEcho(text=text.upper())
            case RtBoom(fatal=True):
                raise FatalNodeError("disk on fire")
            case RtBoom():
                raise ValueError("bad input")
            case RtSlow(seconds=s):
                await self.clock.sleep(s)
                return RtCount(n=1)
            case _:
                return None

    async def on_stop(self) -> None:
        self.stopped = True


class Stopping(Echo):
    """Notes in ``order`` when it stops ("stop <name>") and when its node ends
    ("exit <name>")."""

    def __init__(self, name: str, order: list[str]) -> None:
        super().__init__(name)
        self.order = order

    async def on_stop(self) -> None:
        self.order.append(f"stop {self.name}")

    def on_exit(self) -> None:
        self.order.append(f"exit {self.name}")


class FailsToStart(Stopping):
    def __init__(self, name: str, order: list[str], error: str) -> None:
        super().__init__(name, order)
        self.error = error

    async def on_start(self) -> None:
        raise OSError(self.error)


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    """The exceptions of a (nested) exception group."""
    leaves: list[BaseException] = []
    for exc in group.exceptions:
        leaves.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return leaves


def _sim(body: object) -> None:
    """Run an async test body on the virtual clock."""
    run_virtual(body)  # type: ignore[arg-type]


def test_ask_gets_the_reply_and_tell_is_one_way() -> None:
    """An ask returns the handler's reply; a tell is handled in order with no reply."""

    async def body() -> None:
        wire = DirectWire()
        node = Node("n1", attach=wire.attach, clock=VirtualClock())
        echo = Echo()
        async with anyio.create_task_group() as tg:
            await tg.start(node.run, [echo])
            node.tell(echo.ref, RtEcho(text="a"))
            node.tell(echo.ref, RtEcho(text="b"))
            reply = await node.ask(echo.ref, RtEcho(text="c"))
            assert reply == RtEcho(text="C")
            assert echo.seen == ["a", "b", "c"]
            node.stop()

    _sim(body)


def test_ask_times_out_with_a_typed_error_and_the_late_reply_is_dropped_and_traced() -> None:
    """A reply that comes after the ask's timeout raises AskTimeoutError and is traced as a drop."""

    async def body() -> None:
        wire = DirectWire()
        sink = MemorySink()
        tracer = Tracer()
        tracer.add_sink(sink)
        node = Node("n1", attach=wire.attach, clock=VirtualClock(), tracer=tracer)
        echo = Echo()
        async with anyio.create_task_group() as tg:
            await tg.start(node.run, [echo])
            with pytest.raises(AskTimeoutError):
                await node.ask(echo.ref, RtSlow(seconds=5.0), timeout=1.0)
            late = await sink.wait_for(lambda e: e.fields.get("reason") == "late_reply", 10.0)
            assert late.type == "RtCount"
            assert anyio.current_time() == pytest.approx(5.0)
            node.stop()

    _sim(body)


def test_a_failing_handler_answers_with_an_error_and_the_actor_goes_on() -> None:
    """A handler exception is traced and answered with an error; the next message is served."""

    async def body() -> None:
        wire = DirectWire()
        sink = MemorySink()
        tracer = Tracer()
        tracer.add_sink(sink)
        node = Node("n1", attach=wire.attach, clock=VirtualClock(), tracer=tracer)
        echo = Echo()
        async with anyio.create_task_group() as tg:
            await tg.start(node.run, [echo])
            with pytest.raises(RemoteError) as info:
                await node.ask(echo.ref, RtBoom())
            assert info.value.code is ErrorCode.UNKNOWN_SERVER_ERROR
            assert [e.type for e in sink.of("error")] == ["handler_failed"]
            assert await node.ask(echo.ref, RtEcho(text="x")) == RtEcho(text="X")
            node.stop()

    _sim(body)


def test_a_fatal_error_crashes_the_node_without_graceful_steps() -> None:
    """FatalNodeError crashes the node: on_stop does not run and the node stops serving."""

    async def body() -> None:
        wire = DirectWire()
        node = Node("n1", attach=wire.attach, clock=VirtualClock())
        echo = Echo()
        async with anyio.create_task_group() as tg:
            await tg.start(node.run, [echo])
            node.tell(echo.ref, RtBoom(fatal=True))
        assert node.crashed
        assert node.fatal == "disk on fire"
        assert not node.running
        assert not echo.stopped
        assert "n1" not in wire.nodes

    _sim(body)


def test_graceful_stop_runs_on_stop_in_reverse_order() -> None:
    """Stopping a node runs every actor's on_stop, last started first, then ends its tasks."""

    async def body() -> None:
        order: list[str] = []

        class Recorder(Echo):
            async def on_stop(self) -> None:
                order.append(self.name)

        wire = DirectWire()
        node = Node("n1", attach=wire.attach, clock=VirtualClock())
        async with anyio.create_task_group() as tg:
            await tg.start(node.run, [Recorder("a"), Recorder("b")])
            await node.spawn(Recorder("c"))
            node.stop()
        assert order == ["c", "b", "a"]
        assert not node.crashed

    _sim(body)


def test_an_actor_failing_to_start_stops_the_ones_started_before_it() -> None:
    """A node whose third actor's on_start fails ends with that error, after the two
    actors that had started ran their on_stop (last started first), as at a stop: what
    they opened (files, sessions) is closed. The failed one's on_stop does not run, but its
    on_exit does, at once (it lets go of what it opened before failing); the started
    actors' on_exit run as the node ends."""

    async def body() -> None:
        order: list[str] = []
        wire = DirectWire()
        node = Node("n1", attach=wire.attach, clock=VirtualClock())
        failed: list[str] = []
        started = [Stopping("a", order), Stopping("b", order)]
        try:
            async with anyio.create_task_group() as tg:
                await tg.start(
                    node.run, [*started, FailsToStart("c", order, "log dir not writable")]
                )
        except* OSError as group:
            failed = [str(exc) for exc in _leaves(group)]
        assert failed == ["log dir not writable"]
        assert order == ["exit c", "stop b", "stop a", "exit b", "exit a"]
        assert not node.running

    _sim(body)


def test_an_actor_spawned_later_that_fails_to_start_leaves_the_node_running() -> None:
    """``spawn`` of an actor whose on_start fails raises that error; the node runs on
    without it (its name free again, its on_exit run), and a stop runs the others'
    on_stop only."""

    async def body() -> None:
        order: list[str] = []
        wire = DirectWire()
        node = Node("n1", attach=wire.attach, clock=VirtualClock())
        async with anyio.create_task_group() as tg:
            await tg.start(node.run, [Stopping("a", order)])
            with pytest.raises(OSError, match="no space left"):
                await node.spawn(FailsToStart("b", order, "no space left"))
            assert node.running
            await node.spawn(Stopping("b", order))
            node.stop()
        assert order == ["exit b", "stop b", "stop a", "exit b", "exit a"]

    _sim(body)


class TicksOnce(Stopping):
    """Its helper task feeds it ``RtEcho("tick")`` a second after it starts."""

    async def on_start(self) -> None:
        self.start_soon(self._tick)

    async def _tick(self) -> None:
        await self.clock.sleep(1.0)
        self.send_self(RtEcho(text="tick"))


def test_a_despawned_actor_ends_and_a_successor_takes_its_name() -> None:
    """``despawn`` ends one actor of a running node: its on_exit runs (its on_stop does
    not: a shut-down thread, not a stopping process), asks to its name fail fast, its
    helper task's ``send_self`` does not reach a new actor of the same name, and the
    node's stop leaves it out."""

    async def body() -> None:
        order: list[str] = []
        wire = DirectWire()
        node = Node("n1", attach=wire.attach, clock=VirtualClock())
        old = TicksOnce("a", order)
        async with anyio.create_task_group() as tg:
            await tg.start(node.run, [old, Stopping("b", order)])
            node.despawn("a")
            assert order == ["exit a"]
            assert list(node.mailbox_depths()) == ["b"]
            with pytest.raises(RemoteError):
                await node.ask(ActorRef("n1", "a"), RtEcho(text="?"), timeout=5.0)
            new = Stopping("a", order)
            await node.spawn(new)
            await node.clock.sleep(2.0)  # the old actor's tick is due, and goes nowhere
            assert await node.ask(new.ref, RtEcho(text="x")) == RtEcho(text="X")
            assert new.seen == ["x"]
            assert old.seen == []
            node.stop()
        assert order == ["exit a", "stop a", "stop b", "exit a", "exit b"]

    _sim(body)


class DespawnsOnStop(Stopping):
    """Despawns ``target`` in its own on_stop (a manager ending its workers)."""

    def __init__(self, name: str, order: list[str], target: str) -> None:
        super().__init__(name, order)
        self.target = target

    async def on_stop(self) -> None:
        await super().on_stop()
        self.node.despawn(self.target)


def test_an_actor_despawned_during_the_graceful_stop_is_skipped() -> None:
    """The graceful steps go over the actors as they were: one despawned meanwhile gets
    no on_stop (its on_exit ran at the despawn), and no other runs twice."""

    async def body() -> None:
        order: list[str] = []
        wire = DirectWire()
        node = Node("n1", attach=wire.attach, clock=VirtualClock())
        async with anyio.create_task_group() as tg:
            await tg.start(node.run, [Stopping("a", order), DespawnsOnStop("b", order, "a")])
            node.stop()
        assert order == ["stop b", "exit a", "exit b"]

    _sim(body)


def test_asking_a_missing_actor_fails_fast() -> None:
    """An ask to a missing actor gets an error reply at once instead of timing out."""

    async def body() -> None:
        wire = DirectWire()
        node = Node("n1", attach=wire.attach, clock=VirtualClock())
        async with anyio.create_task_group() as tg:
            await tg.start(node.run)
            with pytest.raises(RemoteError):
                await node.ask(ActorRef("n1", "ghost"), RtEcho(text="?"), timeout=5.0)
            assert anyio.current_time() == 0.0
            node.stop()

    _sim(body)


def test_on_exit_runs_at_a_crash_and_after_a_stop_last_started_first() -> None:
    """Whatever ends a node, each actor's ``on_exit`` runs once its tasks are done (a crash
    skips ``on_stop``, not ``on_exit``): what the OS closes for a killed process."""

    async def body() -> None:
        order: list[str] = []
        wire = DirectWire()
        for end in ("crash", "stop"):
            order.clear()
            node = Node("n1", attach=wire.attach, clock=VirtualClock())
            async with anyio.create_task_group() as tg:
                await tg.start(node.run, [Stopping("a", order), Stopping("b", order)])
                if end == "crash":
                    node.crash()
                else:
                    node.stop()
                assert not order  # nothing yet: the node's tasks end first
            graceful = ["stop b", "stop a"] if end == "stop" else []
            assert order == [*graceful, "exit b", "exit a"]

    _sim(body)


def test_actors_on_two_nodes_talk_and_a_crashed_peer_makes_asks_time_out() -> None:
    """Asks across nodes work; after the peer crashes, asks to it time out instead of hanging."""

    async def body() -> None:
        wire = DirectWire()
        a = Node("a", attach=wire.attach, clock=VirtualClock())
        b = Node("b", attach=wire.attach, clock=VirtualClock())
        echo = Echo()
        async with anyio.create_task_group() as tg:
            await tg.start(a.run)
            await tg.start(b.run, [echo])
            assert await a.ask(echo.ref, RtEcho(text="hi")) == RtEcho(text="HI")
            b.crash()
            assert b.fatal is None  # crashed from outside, not halted by itself
            with pytest.raises(AskTimeoutError):
                await a.ask(echo.ref, RtEcho(text="hi"), timeout=2.0)
            a.stop()

    _sim(body)


def test_node_rng_is_seeded_per_node() -> None:
    """Two nodes with the same seed and id draw the same numbers; another id draws others."""
    wire = DirectWire()
    x = Node("n1", attach=wire.attach, seed=7).rng.random()
    y = Node("n1", attach=wire.attach, seed=7).rng.random()
    z = Node("n2", attach=wire.attach, seed=7).rng.random()
    assert x == y != z


class RtLater(Message, frozen=True, kw_only=True):
    pass


class RtRelease(Message, frozen=True, kw_only=True):
    pass


class Deferring(Actor):
    """Parks RtLater asks and answers them all when RtRelease arrives."""

    def __init__(self) -> None:
        super().__init__("deferring")
        self.parked: list[DeferredReply] = []

    async def receive(self, msg: Message, ctx: Context) -> Message | None:
        if isinstance(msg, RtLater):
            self.parked.append(ctx.defer())
            return None
        if isinstance(msg, RtRelease):
            for i, parked in enumerate(self.parked):
                parked.send(self, RtCount(n=i))
            self.parked.clear()
        return None


def test_a_deferred_reply_lets_the_actor_serve_other_messages_first() -> None:
    """An ask answered later does not block the actor; the asker gets the later answer."""

    async def body() -> None:
        wire = DirectWire()
        node = Node("n1", attach=wire.attach, clock=VirtualClock())
        actor = Deferring()
        results: list[Message] = []

        async def ask_later() -> None:
            results.append(await node.ask(actor.ref, RtLater(), timeout=5.0))

        async with anyio.create_task_group() as tg:
            await tg.start(node.run, [actor])
            async with anyio.create_task_group() as askers:
                askers.start_soon(ask_later)
                askers.start_soon(ask_later)
                await anyio.sleep(1.0)  # a virtual second: both asks stay held until released
                assert results == []
                node.tell(actor.ref, RtRelease())
            assert sorted(r.n for r in results if isinstance(r, RtCount)) == [0, 1]
            node.stop()

    _sim(body)


class RtTick(Message, frozen=True, kw_only=True):
    local_only = True
    n: int


class Ticking(Actor):
    """Counts its own ticks, as a timer-driven actor does."""

    def __init__(self) -> None:
        super().__init__("ticking")
        self.ticks: list[int] = []

    async def receive(self, msg: Message, ctx: Context) -> Message | None:
        match msg:
            case RtTick(n=n):
                self.ticks.append(n)
            case RtEcho():
                self.send_self(RtTick(n=0))
                return RtCount(n=len(self.ticks))
        return None


def test_a_message_an_actor_sends_itself_is_refused_from_another_node() -> None:
    """A ``local_only`` message (a timer's tick, a halt) reaches its actor from the actor
    itself, but one that comes from another node is dropped and traced: no peer can fire
    another node's timers or halt it."""

    async def body() -> None:
        wire = DirectWire()
        sink = MemorySink()
        tracer = Tracer()
        tracer.add_sink(sink)
        a = Node("a", attach=wire.attach, clock=VirtualClock())
        b = Node("b", attach=wire.attach, clock=VirtualClock(), tracer=tracer)
        ticking = Ticking()
        async with anyio.create_task_group() as tg:
            await tg.start(a.run)
            await tg.start(b.run, [ticking])
            a.tell(ticking.ref, RtTick(n=7))  # forged from another node
            assert await a.ask(ticking.ref, RtEcho(text="x")) == RtCount(n=0)
            assert await a.ask(ticking.ref, RtEcho(text="y")) == RtCount(n=1)  # its own tick
            assert 7 not in ticking.ticks
            drops = [
                e
                for e in sink.events
                if e.kind == "drop" and e.fields.get("reason") == "local_only"
            ]
            assert [e.type for e in drops] == ["RtTick"]
            a.stop()
            b.stop()

    _sim(body)
