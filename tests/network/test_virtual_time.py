"""Faults on the virtual clock: exact timings, and the same seed giving the same trace."""

from __future__ import annotations

from actors.runtime.clock import VirtualClock, run_virtual
from cluster.network import Delay, Drop, Duplicate, InProcessTransport, Match, Reorder
from protocol.envelope import Envelope
from protocol.trace import TraceEvent
from tests.support.network import NetTestPing, NetTestPong, envelope, ping, running, trace_lines


def _numbered(src: str, dst: str, n: int) -> Envelope:
    """A ping whose correlation id tells it apart in the trace."""
    return envelope(src, dst, NetTestPing(seq=n), corr=n)


def _latencies(events: list[TraceEvent]) -> dict[int, float]:
    """Delivery time minus send time, by correlation id."""
    sent = {e.corr: e.ts for e in events if e.kind == "send"}
    return {int(e.corr or 0): round(e.ts - sent[e.corr], 9) for e in events if e.kind == "deliver"}


def test_delay_is_exact_on_the_virtual_clock() -> None:
    """A message delayed by 0.25 s is delivered exactly 0.25 s of virtual time after it was
    sent; with jitter, each delay stays within its bound and is the one traced."""

    async def scenario() -> tuple[dict[int, float], dict[int, float]]:
        async with running(InProcessTransport(), ["a", "b"], clock=VirtualClock()) as c:
            rule = c.network.add_rule(Delay(seconds=0.25))
            c.post(_numbered("a", "b", 1))
            await c.inboxes["b"].wait_for(1)
            c.network.remove_rule(rule)
            c.network.add_rule(Delay(seconds=0.1, jitter=0.05))
            for n in range(2, 22):
                c.post(_numbered("a", "b", n))
            await c.inboxes["b"].wait_for(21)
            traced = {int(e.corr or 0): e.fields["delay"] for e in c.events("send")}
            return _latencies(c.sink.events), traced

    latencies, traced = run_virtual(scenario)
    assert latencies[1] == 0.25
    jittered = [latencies[n] for n in range(2, 22)]
    assert all(0.1 <= d <= 0.15 for d in jittered)
    assert len(set(jittered)) > 1
    for n, latency in zip(range(2, 22), jittered, strict=True):
        assert abs(latency - traced[n]) <= 2e-6  # the trace keeps microseconds


def test_delays_add_up_and_drop_wins() -> None:
    """Two matching Delay rules add their delays; a matching Drop rule drops the message
    whatever else applies."""

    async def scenario() -> tuple[float, list[str]]:
        async with running(InProcessTransport(), ["a", "b"], clock=VirtualClock()) as c:
            c.network.add_rule(Delay(seconds=0.1))
            c.network.add_rule(Delay(seconds=0.2))
            c.network.add_rule(Drop(match=Match.where(types=NetTestPong)))
            c.post(ping("a", "b", 1))
            c.post(envelope("a", "b", NetTestPong(seq=2)))
            await c.inboxes["b"].wait_for(1)
            await c.wait_settled()
            took = c.events("deliver")[0].ts - c.events("send")[0].ts
            return took, [e.fields["reason"] for e in c.events("drop")]

    took, reasons = run_virtual(scenario)
    assert abs(took - 0.3) < 1e-9
    assert reasons == ["drop_rule"]


def test_held_message_is_released_after_max_hold() -> None:
    """A message held for reordering on a quiet link goes out exactly ``max_hold`` later."""

    async def scenario() -> float:
        async with running(InProcessTransport(), ["a", "b"], clock=VirtualClock()) as c:
            c.network.add_rule(Reorder(window=3, max_hold=0.5))
            c.post(ping("a", "b", 1))
            await c.inboxes["b"].wait_for(1)
            return c.events("deliver")[0].ts - c.events("send")[0].ts

    assert run_virtual(scenario) == 0.5


def test_an_earlier_deadline_wakes_the_timer() -> None:
    """A short delay posted while a long one waits is delivered on time, not after it."""

    async def scenario() -> dict[int, float]:
        clock = VirtualClock()
        async with running(InProcessTransport(), ["a", "b"], clock=clock, deadline=60) as c:
            long_rule = c.network.add_rule(Delay(seconds=10))
            c.post(_numbered("a", "b", 1))
            c.network.remove_rule(long_rule)
            c.network.add_rule(Delay(seconds=1))
            c.post(_numbered("a", "b", 2))
            await c.inboxes["b"].wait_for(2)
            assert c.inboxes["b"].seqs == [2, 1]
            return _latencies(c.sink.events)

    assert run_virtual(scenario) == {1: 10.0, 2: 1.0}


async def _chaos(seed: int) -> list[bytes]:
    """Three nodes chatting for a while under random drops, delays, duplicates and
    reordering; returns the trace as JSON lines."""
    clock = VirtualClock()
    async with running(InProcessTransport(), ["a", "b", "c"], seed=seed, clock=clock) as c:
        c.network.add_rule(Drop(probability=0.1))
        c.network.add_rule(Delay(seconds=0.01, jitter=0.02, match=Match.where(dst="b")))
        c.network.add_rule(Reorder(probability=0.3, window=2, max_hold=0.05))
        c.network.add_rule(Duplicate(probability=0.1, match=Match.where(src="c")))
        for i in range(60):
            for src, dst in (("a", "b"), ("b", "c"), ("c", "a"), ("a", "c")):
                c.post(ping(src, dst, i))
            if i == 30:
                c.network.partition({"a"}, {"b", "c"})
            if i == 40:
                c.network.heal()
            await clock.sleep(0.003)
        await c.wait_settled()
        return trace_lines(c.sink.events)


def test_same_seed_gives_the_same_trace_byte_for_byte() -> None:
    """The same random fault scenario on the virtual clock with seed 1 twice gives identical
    traces; seed 2 gives a different one."""
    first = run_virtual(lambda: _chaos(1))
    second = run_virtual(lambda: _chaos(1))
    other = run_virtual(lambda: _chaos(2))
    assert first == second
    assert first != other
    kinds = b"".join(first)
    for needle in (b'"drop_rule"', b'"partition"', b'"delay"', b'"hold"', b'"duplicate"'):
        assert needle in kinds
