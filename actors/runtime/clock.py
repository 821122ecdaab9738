"""Injected time.

Every actor reads time through a ``Clock`` handed to it by its node; nothing calls
``time.time()`` or sleeps on a clock of its own choosing. Both clocks read the running event
loop's time, so ``anyio.sleep``, ``anyio.fail_after`` and ``Clock.sleep`` agree:

* ``RealClock``: the loop's monotonic time (uvloop when available, see ``run_real``).
* ``VirtualClock``: the time of a ``VirtualEventLoop`` (see ``run_virtual``), which jumps
  straight to the next timer whenever every task is blocked. Nothing waits for real.

A node's clock may be skewed (an offset added to its readings, a rate applied to its
sleeps) to emulate a node whose scheduled tasks run early or late.
"""

from __future__ import annotations

import asyncio
import selectors
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

from actors.runtime.freeze import FreezableEventLoop, FreezableLoop

T = TypeVar("T")

# Wall-clock origin of virtual time: 2021-01-01T00:00:00Z, a fixed date in Kafka 2.7's life,
# so that timestamps written into znodes are deterministic in a simulation.
VIRTUAL_EPOCH_MS = 1_609_459_200_000


class Clock:
    """Reads time from the running loop; ``skew`` shifts readings, ``rate`` scales sleeps."""

    deterministic = False
    """Whether runs on this clock are replays of a seed (the virtual clock): identities
    (cluster ids) are then drawn from the seed, otherwise from the OS (``Node.ids``)."""

    def __init__(self, *, skew: float = 0.0, rate: float = 1.0) -> None:
        if rate <= 0:
            raise ValueError("clock rate must be positive")
        self.skew = skew
        self.rate = rate

    def now(self) -> float:
        """Seconds on this node's time line: the loop's monotonic (or virtual) time scaled
        by ``rate``, plus ``skew``. ``sleep(d)`` lets exactly ``d`` of it pass."""
        return asyncio.get_running_loop().time() * self.rate + self.skew

    async def sleep(self, seconds: float) -> None:
        """Sleep ``seconds`` of this node's time (a fast clock sleeps less)."""
        await anyio.sleep(max(0.0, seconds) / self.rate)

    def wall_ms(self) -> int:
        """Milliseconds since the Unix epoch, for timestamps Kafka writes (znodes)."""
        raise NotImplementedError

    def skewed(self, *, skew: float = 0.0, rate: float = 1.0) -> Clock:
        """A clock of the same kind with another skew and rate (for one node)."""
        clone = type(self)(skew=skew, rate=rate)
        return clone

    def own(self) -> Clock:
        """A copy of this clock for one node to own, so that ``adjust`` on it reaches
        everything of that node (and nothing else) that reads time through it."""
        return self.skewed(skew=self.skew, rate=self.rate)

    def adjust(self, *, skew: float, rate: float) -> None:
        """Change this clock's skew and rate in place (chaos' clock skew of one node:
        call it on a clock the node owns)."""
        if rate <= 0:
            raise ValueError("clock rate must be positive")
        self.skew = skew
        self.rate = rate


class RealClock(Clock):
    def wall_ms(self) -> int:
        return int((time.time() + self.skew) * 1000)


class VirtualClock(Clock):
    deterministic = True

    def wall_ms(self) -> int:
        return VIRTUAL_EPOCH_MS + int(self.now() * 1000)


class _VirtualSelector(selectors.BaseSelector):
    """Wraps the loop's real selector: polls it without blocking and, when nothing is ready
    and a timer is pending, advances virtual time to that timer instead of waiting."""

    def __init__(self, real: selectors.BaseSelector, loop: VirtualEventLoop) -> None:
        self._real = real
        self._loop = loop

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.modify(fileobj, events, data)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = self._real.select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:
            # Nothing scheduled at all: only another thread can wake us (self-pipe).
            return self._real.select(None)
        self._loop.advance(timeout)
        return []

    def close(self) -> None:
        self._real.close()

    def get_map(self) -> Any:
        return self._real.get_map()

    def get_key(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.get_key(fileobj)


class VirtualEventLoop(FreezableLoop, asyncio.SelectorEventLoop):
    """An asyncio loop on virtual time: time moves only when every task is blocked, and
    then jumps to the next scheduled timer. Used for deterministic simulation: in-process
    transport, embedded store, no real sockets. It can freeze a node (``actors.runtime.freeze``)."""

    def __init__(self) -> None:
        super().__init__()
        self._virtual_now = 0.0
        self._selector = _VirtualSelector(self._selector, self)  # type: ignore[has-type]
        self._clock_resolution = 1e-9

    def time(self) -> float:
        return self._virtual_now

    def advance(self, seconds: float) -> None:
        if seconds > 0:
            self._virtual_now += seconds


def run_virtual(fn: Callable[[], Awaitable[T]]) -> T:
    """Run ``fn`` on a fresh ``VirtualEventLoop`` (anyio's asyncio backend)."""
    return anyio.run(fn, backend="asyncio", backend_options={"loop_factory": VirtualEventLoop})


def run_real(
    fn: Callable[[], Awaitable[T]], *, use_uvloop: bool = True, freezable: bool = False
) -> T:
    """Run ``fn`` on the real clock: on uvloop when it is installed and asked for, or on a
    ``FreezableEventLoop`` when nodes will be paused (``freezable``)."""
    if freezable:
        options: dict[str, Any] = {"loop_factory": FreezableEventLoop}
    else:
        options = {"use_uvloop": use_uvloop}
    return anyio.run(fn, backend="asyncio", backend_options=options)
