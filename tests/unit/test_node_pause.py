"""Pausing a node (``Node.pause``, ``actors.runtime.freeze``): its tasks freeze at their next await,
other nodes go on, held work runs in order on resume, a crash of a paused node wins."""

from __future__ import annotations

import asyncio

import anyio
import anyio.abc
import pytest

from actors.runtime.actor import Actor, Context, Node
from actors.runtime.clock import VirtualClock, run_real, run_virtual
from actors.runtime.freeze import NODE, NotFreezableError, freezable_loop, outside_nodes
from actors.runtime.tracer import MemorySink, Tracer
from protocol.base import Message
from protocol.errors import AskTimeoutError
from tests.support.wire import DirectWire


class PzNote(Message, frozen=True, kw_only=True):
    text: str


class Ticker(Actor):
    """Counts its own ticks (a helper task sleeping 1 s) and records what it is told, with
    the time it handled it."""

    def __init__(self) -> None:
        super().__init__("ticker")
        self.ticks: list[float] = []
        self.notes: list[tuple[str, float]] = []

    async def on_start(self) -> None:
        self.start_soon(self._tick)

    async def _tick(self) -> None:
        while True:
            await self.clock.sleep(1.0)
            self.ticks.append(self.clock.now())

    async def receive(self, msg: Message, ctx: Context) -> Message | None:
        assert isinstance(msg, PzNote)
        self.notes.append((msg.text, self.clock.now()))
        return PzNote(text=msg.text.upper())


def test_a_paused_node_does_nothing_until_resumed_and_the_others_go_on() -> None:
    async def body() -> None:
        wire = DirectWire()
        clock = VirtualClock()
        sink = MemorySink()
        tracer = Tracer()
        tracer.add_sink(sink)
        a, b = (Node(n, attach=wire.attach, clock=clock, tracer=tracer) for n in "ab")
        ticker_a, ticker_b = Ticker(), Ticker()
        async with anyio.create_task_group() as tg:
            await tg.start(a.run, [ticker_a])
            await tg.start(b.run, [ticker_b])
            await clock.sleep(3.5)
            a.pause()
            assert a.paused
            for text in ("x", "y", "z"):
                b.tell(ticker_a.ref, PzNote(text=text))
            with pytest.raises(AskTimeoutError):
                await b.ask(ticker_a.ref, PzNote(text="asked"), timeout=2.0)
            await clock.sleep(10.0)
            assert [round(t) for t in ticker_a.ticks] == [1, 2, 3]  # frozen since 3.5
            assert len(ticker_b.ticks) == 15
            assert ticker_a.notes == []
            a.resume()
            await clock.sleep(1.75)
            # Held work ran in order once resumed (at 15.5), and the node goes on ticking.
            assert [text for text, _ in ticker_a.notes] == ["x", "y", "z", "asked"]
            assert {round(at, 1) for _, at in ticker_a.notes} == {15.5}
            assert round(ticker_a.ticks[3], 1) == 15.5  # the overdue tick, late
            assert len(ticker_a.ticks) == 5  # 15.5, then 16.5 on the same beat
            assert await b.ask(ticker_a.ref, PzNote(text="hi")) == PzNote(text="HI")
            a.stop()
            b.stop()
        types = [e.type for e in sink.events if e.node == "a"]
        assert types.index("node_paused") < types.index("node_resumed")

    run_virtual(body)


def test_crashing_a_paused_node_ends_it_without_another_step() -> None:
    async def body() -> None:
        wire = DirectWire()
        clock = VirtualClock()
        node = Node("a", attach=wire.attach, clock=clock)
        other = Node("b", attach=wire.attach, clock=clock)
        ticker = Ticker()
        async with anyio.create_task_group() as tg:
            await tg.start(node.run, [ticker])
            await tg.start(other.run)
            await clock.sleep(2.5)
            node.pause()
            other.tell(ticker.ref, PzNote(text="never"))
            await clock.sleep(5.0)
            node.crash()
            with anyio.fail_after(1.0):
                await node.ended.wait()
            assert not node.paused
            assert len(ticker.ticks) == 2
            assert ticker.notes == []
            other.stop()

    run_virtual(body)


def test_a_graceful_stop_of_a_paused_node_waits_for_the_resume() -> None:
    async def body() -> None:
        wire = DirectWire()
        clock = VirtualClock()
        node = Node("a", attach=wire.attach, clock=clock)
        async with anyio.create_task_group() as tg:
            await tg.start(node.run, [Ticker()])
            node.pause()
            node.stop()
            with anyio.move_on_after(30.0):
                await node.ended.wait()
            assert not node.ended.is_set()
            node.resume()
            with anyio.fail_after(1.0):
                await node.ended.wait()
            tg.cancel_scope.cancel()

    run_virtual(body)


def test_the_real_clock_runs_on_a_freezable_loop_and_uvloop_refuses_to_pause() -> None:
    async def body() -> tuple[int, int]:
        wire = DirectWire()
        node = Node("a", attach=wire.attach)
        ticker = Ticker()
        async with anyio.create_task_group() as tg:
            await tg.start(node.run, [ticker])
            node.pause()
            node.tell(ticker.ref, PzNote(text="held"))
            for _ in range(50):  # the loop goes round; the node stays frozen
                await asyncio.sleep(0)
            held = len(ticker.notes)
            node.resume()
            assert await node.ask(ticker.ref, PzNote(text="after"), timeout=5.0)
            node.stop()
        return held, len(ticker.notes)

    assert run_real(body, freezable=True) == (0, 2)

    async def refused() -> None:
        node = Node("a", attach=DirectWire().attach)
        async with anyio.create_task_group() as tg:
            await tg.start(node.run)
            with pytest.raises(NotFreezableError, match="freezable event loop"):
                node.pause()
            assert not node.paused
            node.stop()

    run_real(refused)


def test_tasks_inherit_their_node_and_outside_nodes_clears_it() -> None:
    async def body() -> None:
        wire = DirectWire()
        node = Node("a", attach=wire.attach, clock=VirtualClock())
        seen: list[str | None] = []

        class Probe(Actor):
            async def receive(self, msg: Message, ctx: Context) -> Message | None:
                seen.append(NODE.get())
                seen.append(outside_nodes(NODE.get))
                return msg

        probe = Probe("probe")
        async with anyio.create_task_group() as tg:
            await tg.start(node.run, [probe])
            assert NODE.get() is None  # the caller's own context is untouched
            await node.ask(probe.ref, PzNote(text="?"))
            node.stop()
        assert seen == ["a", None]

    run_virtual(body)


def test_connections_to_a_frozen_node_are_accepted_once_each_after_the_thaw() -> None:
    """A frozen node's socket readiness is held as its other callbacks are: connections
    that arrive meanwhile wait in the backlog, and after the thaw each is accepted once by
    the node's own accept loop, with no accept for an already answered future (no loop
    error, no socket nobody owns)."""

    async def body() -> tuple[int, int, list[object]]:
        loop = asyncio.get_running_loop()
        errors: list[object] = []
        loop.set_exception_handler(lambda _loop, context: errors.append(context["message"]))
        accepted: list[anyio.abc.SocketStream] = []
        (listener,) = (await anyio.create_tcp_listener(local_host="127.0.0.1")).listeners
        assert isinstance(listener, anyio.abc.SocketListener)
        port = int(listener.extra(anyio.abc.SocketAttribute.local_port))  # noqa: S610 - not Django
        all_in = anyio.Event()

        async def accept_forever() -> None:
            NODE.set("n")
            while True:
                accepted.append(await listener.accept())
                if len(accepted) == 3:
                    all_in.set()

        clients: list[anyio.abc.SocketStream] = []
        async with listener, anyio.create_task_group() as tg:
            tg.start_soon(accept_forever)
            await settle()  # it waits in accept
            freezer = freezable_loop()
            freezer.freeze("n")
            for _ in range(3):
                clients.append(await anyio.connect_tcp("127.0.0.1", port))
                await settle()  # the loop selects the listener's readiness again
            while_frozen = len(accepted)
            freezer.thaw("n")
            with anyio.fail_after(5):
                await all_in.wait()
            await settle()
            tg.cancel_scope.cancel()
        for stream in accepted + clients:
            await stream.aclose()
        return while_frozen, len(accepted), errors

    assert run_real(body, freezable=True) == (0, 3, [])


async def settle() -> None:
    """Let the loop go round a few times (selecting each time)."""
    for _ in range(10):
        await asyncio.sleep(0)
