"""Injected clocks: virtual time jumps only when every task is blocked; skew and rate."""

from __future__ import annotations

import time

import anyio
import pytest

from actors.runtime.clock import VIRTUAL_EPOCH_MS, VirtualClock, run_virtual


def test_virtual_time_jumps_to_the_next_timer_and_costs_no_real_time() -> None:
    """An hour of sleeping tasks passes instantly, and timers fire in time order."""

    async def body() -> list[tuple[float, str]]:
        fired: list[tuple[float, str]] = []

        async def sleeper(seconds: float, name: str) -> None:
            await anyio.sleep(seconds)
            fired.append((anyio.current_time(), name))

        async with anyio.create_task_group() as tg:
            tg.start_soon(sleeper, 3600.0, "late")
            tg.start_soon(sleeper, 1.5, "early")
        return fired

    started = time.perf_counter()
    assert run_virtual(body) == [(1.5, "early"), (3600.0, "late")]
    assert time.perf_counter() - started < 5.0


def test_virtual_time_does_not_move_while_a_task_is_runnable() -> None:
    """Busy tasks that keep yielding do not advance virtual time."""

    async def body() -> float:
        for _ in range(1000):
            await anyio.lowlevel.checkpoint()
        return anyio.current_time()

    assert run_virtual(body) == 0.0


def test_a_skewed_fast_clock_reads_and_sleeps_on_its_own_time_line() -> None:
    """A clock with rate 2 and skew 10 sees 10 + 2t, and its sleep(d) lets d of its time pass."""

    async def body() -> tuple[float, float, float, int]:
        clock = VirtualClock(skew=10.0, rate=2.0)
        before = clock.now()
        await clock.sleep(4.0)
        return before, clock.now(), anyio.current_time(), clock.wall_ms()

    before, after, loop_time, wall = run_virtual(body)
    assert (before, after, loop_time) == (10.0, 14.0, 2.0)
    assert wall == VIRTUAL_EPOCH_MS + 14_000


def test_a_clock_rate_must_be_positive() -> None:
    """A zero or negative rate is refused."""
    with pytest.raises(ValueError, match="positive"):
        VirtualClock(rate=0)


def test_adjusting_a_node_s_own_clock_reaches_every_holder_and_no_other_node() -> None:
    """Two nodes own copies of the run's clock; skewing one in place is seen by whatever
    took that node's clock earlier (a store connection, a channel), not by the other."""

    async def body() -> tuple[float, float, float, float]:
        run_clock = VirtualClock()
        mine, other = run_clock.own(), run_clock.own()
        held = mine  # what a component took at start-up
        await anyio.sleep(1.0)
        mine.adjust(skew=30.0, rate=4.0)
        started = anyio.current_time()
        await held.sleep(8.0)  # 8 s of its time pass in 2 s of the run's
        return held.now(), other.now(), run_clock.now(), anyio.current_time() - started

    held_now, other_now, run_now, took = run_virtual(body)
    assert (other_now, run_now, took) == (3.0, 3.0, 2.0)
    assert held_now == 3.0 * 4.0 + 30.0
    with pytest.raises(ValueError, match="positive"):
        VirtualClock().own().adjust(skew=0.0, rate=-1.0)
