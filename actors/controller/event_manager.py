"""The controller's event queue and its one consumer task (Kafka's ``ControllerEventManager``).

One FIFO queue, one consumer. The queue is a deque and unbounded on purpose: its
producers are store watches, broker-response callbacks and timers, which must never block
(as in Kafka, whose ZooKeeper event thread would otherwise stall); ``depth`` exposes it.

* ``put`` appends and returns a ``QueuedEvent`` handle; ``clear_and_put`` first drains the
  queue, *preempting* every drained event (exactly one of process/preempt runs for an
  event: the handle's ``spent`` flag), then appends.
* The consumer takes the next event, sets ``state`` to the event's ``ControllerState``,
  records its queue time, marks the handle as started (``await_processing`` returns), runs
  the processor inside its own error boundary (an exception is logged and traced, the
  loop goes on; cancellation is never swallowed), records the processing time under the
  state, and sets ``state`` back to ``IDLE``.
* The queue-time histogram is cleared when the queue stays empty for ``idle_timeout``
  (300 s, Kafka's poll timeout).
* ``close`` preempts what is queued and ends the consumer once the current event is done.

Every processed event is traced: ``controller_event_start`` (with its queue time and
how many events wait behind it) and
``controller_event_end`` (with its processing time and outcome).
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from typing import Any, Generic, Protocol, TypeVar

import anyio
import structlog
from anyio.abc import TaskStatus

from actors.controller.events import ControllerEvent
from actors.controller.states import ControllerState
from actors.runtime.clock import Clock
from actors.runtime.tracer import TraceFn

log = structlog.get_logger("kemu.controller.events")

E = TypeVar("E", bound=ControllerEvent)
E_contra = TypeVar("E_contra", bound=ControllerEvent, contravariant=True)

IDLE_TIMEOUT = 300.0
"""Seconds of empty queue after which the queue-time histogram is cleared."""


class EventProcessor(Protocol[E_contra]):
    """What the manager feeds (the controller): ``process`` mutates state, ``preempt`` only
    answers whoever waits on a drained event."""

    async def process(self, event: E_contra) -> None: ...

    def preempt(self, event: E_contra) -> None: ...


class Histogram:
    """Count, sum, max and the most recent samples (for percentiles) of a duration."""

    __slots__ = ("count", "max", "recent", "total")

    def __init__(self, keep: int = 1024) -> None:
        self.count = 0
        self.total = 0.0
        self.max = 0.0
        self.recent: deque[float] = deque(maxlen=keep)

    def record(self, value: float) -> None:
        self.count += 1
        self.total += value
        self.max = max(self.max, value)
        self.recent.append(value)

    def clear(self) -> None:
        self.count = 0
        self.total = 0.0
        self.max = 0.0
        self.recent.clear()

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    def percentile(self, q: float) -> float:
        """The ``q``-th percentile (0-100) of the recent samples, nearest rank."""
        if not self.recent:
            return 0.0
        ordered = sorted(self.recent)
        rank = max(1, math.ceil(q / 100 * len(ordered)))
        return ordered[rank - 1]


class QueuedEvent(Generic[E]):
    """An event in the queue: ``spent`` once processed or preempted (never both), and a
    latch released when its processing starts (or when it is preempted)."""

    __slots__ = ("_started", "enqueued_at", "event", "spent")

    def __init__(self, event: E, enqueued_at: float) -> None:
        self.event = event
        self.enqueued_at = enqueued_at
        self.spent = False
        self._started: asyncio.Event | None = None

    def mark_started(self) -> None:
        self.spent = True
        if self._started is not None:
            self._started.set()

    @property
    def started(self) -> bool:
        return self.spent

    async def await_processing(self) -> None:
        """Return once the event's processing has started (Kafka's ``awaitProcessing``)."""
        if self.spent:
            await anyio.lowlevel.checkpoint()
            return
        if self._started is None:
            self._started = asyncio.Event()
        await self._started.wait()


class ControllerEventManager(Generic[E]):
    """The controller's queue and consumer. Start ``run`` in the node's task group."""

    def __init__(
        self,
        processor: EventProcessor[E],
        *,
        clock: Clock,
        trace: TraceFn | None = None,
        idle_timeout: float = IDLE_TIMEOUT,
    ) -> None:
        self._processor = processor
        self._clock = clock
        self._trace = trace
        self._idle_timeout = idle_timeout
        self._queue: deque[QueuedEvent[E]] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._stopping = False
        self._running = False
        self._done = anyio.Event()
        self.state = ControllerState.IDLE
        self.queue_time = Histogram()
        self.event_time: dict[ControllerState, Histogram] = {}
        self.processed = 0
        self.failed = 0
        self.preempted = 0

    # -- producers (never block)

    @property
    def depth(self) -> int:
        return len(self._queue)

    def put(self, event: E) -> QueuedEvent[E]:
        queued = QueuedEvent(event, self._clock.now())
        if self._stopping:  # nobody will process it any more
            self._preempt(queued)
            return queued
        self._queue.append(queued)
        self._wake()
        return queued

    def clear_and_put(self, event: E) -> QueuedEvent[E]:
        """Preempt everything queued, then queue ``event``."""
        self._drain()
        return self.put(event)

    async def close(self) -> None:
        """Preempt what is queued and stop the consumer after the current event."""
        self._stopping = True
        self._drain()
        self._wake()
        if self._running:
            await self._done.wait()

    # -- the consumer

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        self._running = True
        task_status.started()
        try:
            while True:
                queued = await self._take()
                if queued is None:
                    return
                await self._process(queued)
        finally:
            self._running = False
            self._done.set()

    async def _take(self) -> QueuedEvent[E] | None:
        while not self._queue:
            if self._stopping:
                return None
            loop = asyncio.get_running_loop()
            self._waiter = loop.create_future()
            try:
                with anyio.move_on_after(self._idle_timeout / self._clock.rate) as scope:
                    await self._waiter
            finally:
                self._waiter = None
            if scope.cancelled_caught:
                self.queue_time.clear()
        return self._queue.popleft()

    async def _process(self, queued: QueuedEvent[E]) -> None:
        event = queued.event
        name = event.name
        state = event.state
        start = self._clock.now()
        queue_time = max(0.0, start - queued.enqueued_at)
        self.queue_time.record(queue_time)
        self.state = state
        queued.mark_started()
        trace = self._trace
        if trace is not None:
            trace(
                "event",
                "controller_event_start",
                event=name,
                state=state.label,
                queue_time=round(queue_time, 6),
                queue_size=len(self._queue),  # still waiting behind it (EventQueueSize)
            )
        outcome = "ok"
        try:
            await self._processor.process(event)
        except Exception as exc:  # each event is its own error boundary
            outcome = "error"
            self.failed += 1
            log.exception("controller_event_failed", controller_event=name)
            if trace is not None:
                trace(
                    "error",
                    "controller_event_failed",
                    event=name,
                    error=type(exc).__name__,
                    detail=str(exc),
                )
        finally:
            duration = max(0.0, self._clock.now() - start)
            histogram = self.event_time.get(state)
            if histogram is None:
                histogram = self.event_time[state] = Histogram()
            histogram.record(duration)
            self.processed += 1
            self.state = ControllerState.IDLE
        if trace is not None:
            trace(
                "event",
                "controller_event_end",
                event=name,
                state=state.label,
                duration=round(duration, 6),
                outcome=outcome,
            )

    # -- internals

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _drain(self) -> None:
        while self._queue:
            self._preempt(self._queue.popleft())

    def _preempt(self, queued: QueuedEvent[E]) -> None:
        if queued.spent:
            return
        queued.mark_started()
        self.preempted += 1
        if self._trace is not None:
            self._trace("event", "controller_event_preempted", event=queued.event.name)
        try:
            self._processor.preempt(queued.event)
        except Exception:  # a failing preempt must not keep the others from running
            log.exception("controller_event_preempt_failed", controller_event=queued.event.name)

    def metrics(self) -> dict[str, Any]:
        """A snapshot of the gauges and histograms, for metrics export and tests."""
        return {
            "queue_depth": self.depth,
            "state": int(self.state),
            "processed": self.processed,
            "failed": self.failed,
            "preempted": self.preempted,
            "queue_time": {
                "count": self.queue_time.count,
                "mean": self.queue_time.mean,
                "max": self.queue_time.max,
                "p99": self.queue_time.percentile(99),
            },
            "event_time": {
                state.label: {"count": h.count, "mean": h.mean, "max": h.max}
                for state, h in sorted(self.event_time.items())
            },
        }
