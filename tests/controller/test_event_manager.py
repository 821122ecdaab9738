"""The controller event manager: FIFO order, preemption, error boundary, metrics, close."""

from __future__ import annotations

from typing import ClassVar

import anyio
import pytest

from actors.controller.event_manager import ControllerEventManager, Histogram
from actors.controller.events import ControllerEvent
from actors.controller.states import ControllerState
from actors.runtime.clock import VirtualClock, run_virtual
from cluster.bench.controller_events import run_event_benchmark
from tests.support.waiting import until


class EmNote(ControllerEvent, frozen=True, kw_only=True):
    state: ClassVar[ControllerState] = ControllerState.TOPIC_CHANGE
    label: str


class EmSlow(ControllerEvent, frozen=True, kw_only=True):
    state: ClassVar[ControllerState] = ControllerState.BROKER_CHANGE
    seconds: float


class EmBoom(ControllerEvent, frozen=True, kw_only=True):
    state: ClassVar[ControllerState] = ControllerState.TOPIC_DELETION


EmEvent = EmNote | EmSlow | EmBoom


class Recorder:
    """A processor that records what it processed and preempted, and what state the
    manager was in while processing."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.processed: list[str] = []
        self.preempted: list[str] = []
        self.states: list[ControllerState] = []
        self.manager: ControllerEventManager[EmEvent] | None = None
        self.gate: anyio.Event | None = None

    async def process(self, event: EmEvent) -> None:
        assert self.manager is not None
        self.states.append(self.manager.state)
        match event:
            case EmNote(label=label):
                self.processed.append(label)
            case EmSlow(seconds=seconds):
                if self.gate is not None:
                    await self.gate.wait()
                await self.clock.sleep(seconds)
                self.processed.append(f"slow{seconds}")
            case EmBoom():
                self.processed.append("boom")
                raise ValueError("bad event")

    def preempt(self, event: EmEvent) -> None:
        self.preempted.append(event.name if not isinstance(event, EmNote) else event.label)


def _setup() -> tuple[
    Recorder, ControllerEventManager[EmEvent], list[tuple[str, str, dict[str, object]]]
]:
    clock = VirtualClock()
    recorder = Recorder(clock)
    traced: list[tuple[str, str, dict[str, object]]] = []

    def trace(kind: str, type_: str, **fields: object) -> None:
        traced.append((kind, type_, fields))

    manager: ControllerEventManager[EmEvent] = ControllerEventManager(
        recorder, clock=clock, trace=trace
    )
    recorder.manager = manager
    return recorder, manager, traced


def test_events_are_processed_in_order_under_their_state_and_traced() -> None:
    """Events run one at a time in FIFO order, under their ControllerState, then back to Idle."""

    async def body() -> None:
        recorder, manager, traced = _setup()
        async with anyio.create_task_group() as tg:
            await tg.start(manager.run)
            queued = [manager.put(EmNote(label=label)) for label in ("a", "b", "c")]
            assert manager.depth == 3
            await queued[-1].await_processing()
            await manager.close()
        assert recorder.processed == ["a", "b", "c"]
        assert recorder.states == [ControllerState.TOPIC_CHANGE] * 3
        assert manager.state is ControllerState.IDLE
        starts = [f for k, t, f in traced if t == "controller_event_start"]
        ends = [f for k, t, f in traced if t == "controller_event_end"]
        assert [f["event"] for f in starts] == ["EmNote"] * 3
        assert [f["queue_size"] for f in starts] == [2, 1, 0]  # queued behind each one
        assert all(f["outcome"] == "ok" for f in ends)
        assert manager.event_time[ControllerState.TOPIC_CHANGE].count == 3

    run_virtual(body)


def test_clear_and_put_preempts_the_queued_events_and_runs_the_new_one() -> None:
    """clear_and_put drains the queue (each drained event preempted, never processed)."""

    async def body() -> None:
        recorder, manager, _ = _setup()
        recorder.gate = anyio.Event()
        async with anyio.create_task_group() as tg:
            await tg.start(manager.run)
            running = manager.put(EmSlow(seconds=0.0))
            await running.await_processing()
            drained = [manager.put(EmNote(label=x)) for x in ("x", "y")]
            last = manager.clear_and_put(EmNote(label="z"))
            assert all(q.spent for q in drained)
            await drained[0].await_processing()  # returns for a preempted event too
            recorder.gate.set()
            await last.await_processing()
            await manager.close()
        assert recorder.preempted == ["x", "y"]
        assert recorder.processed == ["slow0.0", "z"]
        assert manager.preempted == 2

    run_virtual(body)


def test_a_failing_event_is_logged_and_the_loop_goes_on() -> None:
    """An exception in processing is traced as an error; the next event still runs."""

    async def body() -> None:
        recorder, manager, traced = _setup()
        async with anyio.create_task_group() as tg:
            await tg.start(manager.run)
            manager.put(EmBoom())
            last = manager.put(EmNote(label="after"))
            await last.await_processing()
            await manager.close()
        assert recorder.processed == ["boom", "after"]
        assert manager.failed == 1
        errors = [f for k, t, f in traced if k == "error"]
        assert errors == [{"event": "EmBoom", "error": "ValueError", "detail": "bad event"}]
        assert manager.event_time[ControllerState.TOPIC_DELETION].count == 1
        assert manager.state is ControllerState.IDLE

    run_virtual(body)


def test_queue_time_records_how_long_an_event_waited() -> None:
    """An event queued behind a 500 ms event waits 0.5 s; the first one waits 0."""

    async def body() -> None:
        _, manager, traced = _setup()
        async with anyio.create_task_group() as tg:
            await tg.start(manager.run)
            manager.put(EmSlow(seconds=0.5))
            last = manager.put(EmNote(label="late"))
            await last.await_processing()
            await manager.close()
        assert sorted(manager.queue_time.recent) == [0.0, pytest.approx(0.5)]
        assert manager.queue_time.max == pytest.approx(0.5)
        starts = [f["queue_time"] for k, t, f in traced if t == "controller_event_start"]
        assert starts == [0.0, pytest.approx(0.5)]
        assert manager.event_time[ControllerState.BROKER_CHANGE].total == pytest.approx(0.5)

    run_virtual(body)


def test_queue_time_histogram_is_cleared_after_the_idle_timeout() -> None:
    """After 300 s with an empty queue the queue-time histogram is reset (Kafka's poll timeout)."""

    async def body() -> None:
        _, manager, _ = _setup()
        async with anyio.create_task_group() as tg:
            await tg.start(manager.run)
            done = manager.put(EmNote(label="a"))
            await done.await_processing()
            # Virtual time is the behaviour: kept while idle under the 300 s poll timeout,
            # cleared once it has passed.
            await anyio.sleep(1.0)
            assert manager.queue_time.count == 1
            await anyio.sleep(300.0)
            assert manager.queue_time.count == 0
            await manager.close()

    run_virtual(body)


def test_close_preempts_pending_events_and_later_puts() -> None:
    """close() preempts what is queued, ends the consumer, and preempts any later put."""

    async def body() -> None:
        recorder, manager, _ = _setup()
        recorder.gate = anyio.Event()
        async with anyio.create_task_group() as tg:
            await tg.start(manager.run)
            running = manager.put(EmSlow(seconds=0.0))
            await running.await_processing()
            manager.put(EmNote(label="pending"))
            tg.start_soon(manager.close)
            await until(lambda: recorder.preempted == ["pending"])  # while "slow" still runs
            recorder.gate.set()
        late = manager.put(EmNote(label="late"))
        assert late.spent
        assert recorder.processed == ["slow0.0"]
        assert recorder.preempted == ["pending", "late"]

    run_virtual(body)


def test_metrics_snapshot_reports_gauges_and_histograms() -> None:
    """The metrics snapshot exposes depth, state, counters and per-state times."""

    async def body() -> None:
        _, manager, _ = _setup()
        queued = manager.put(EmNote(label="queued"))
        snapshot = manager.metrics()
        assert snapshot["queue_depth"] == 1
        assert snapshot["state"] == 0
        async with anyio.create_task_group() as tg:
            await tg.start(manager.run)
            await queued.await_processing()
            await manager.close()
        snapshot = manager.metrics()
        assert snapshot["processed"] == 1
        assert snapshot["event_time"]["TopicChange"]["count"] == 1

    run_virtual(body)


def test_histogram_percentiles() -> None:
    """Nearest-rank percentiles over the recent samples."""
    h = Histogram()
    for v in range(1, 101):
        h.record(float(v))
    assert h.percentile(50) == 50.0
    assert h.percentile(99) == 99.0
    assert h.mean == 50.5
    h.clear()
    assert h.percentile(99) == 0.0


def test_the_benchmark_body_processes_every_event() -> None:
    """run_event_benchmark feeds N no-op events through a manager and sees all of them run."""
    assert run_virtual(lambda: run_event_benchmark(1000)) == 1000
