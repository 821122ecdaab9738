"""The controller-events-per-second benchmark body: no I/O, no tracing.

``run_event_benchmark(n)`` feeds ``n`` no-op events through a ``ControllerEventManager``
and returns once the consumer has processed them all. It reads no clock of its own:
``cluster.bench.suite`` times it (on the real clock) and reports events per second.
"""

from __future__ import annotations

import anyio

from actors.controller.event_manager import ControllerEventManager
from actors.controller.events import ControllerEvent
from actors.runtime.clock import Clock, RealClock


class BenchNoopEvent(ControllerEvent, frozen=True, kw_only=True):
    """An event whose processing does nothing but count."""

    n: int


class _Counter:
    def __init__(self, target: int) -> None:
        self.target = target
        self.count = 0
        self.done = anyio.Event()

    async def process(self, event: BenchNoopEvent) -> None:
        self.count += 1
        if self.count >= self.target:
            self.done.set()

    def preempt(self, event: BenchNoopEvent) -> None:
        """Nothing waits on a benchmark event."""


async def run_event_benchmark(events: int, *, clock: Clock | None = None) -> int:
    """Process ``events`` no-op events through a fresh manager; returns how many ran."""
    counter = _Counter(events)
    manager: ControllerEventManager[BenchNoopEvent] = ControllerEventManager(
        counter, clock=clock or RealClock()
    )
    async with anyio.create_task_group() as tg:
        await tg.start(manager.run)
        for i in range(events):
            manager.put(BenchNoopEvent(n=i))
        if events > 0:
            await counter.done.wait()
        await manager.close()
    return counter.count
