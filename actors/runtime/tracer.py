"""The tracer: numbers every traced event and hands it to the sinks.

One ``Tracer`` per cluster (per process in multi-process mode). Events carry a global
sequence number and the time of the injected clock, so a deterministic run produces the
same trace byte for byte. Sinks are plain callables; ``cluster.trace_files`` has the JSONL file
writer, ``MemorySink`` keeps events for tests and invariant checkers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from protocol.trace import (
    TraceEvent,
    TraceHeader,
    TraceKind,
    TraceSchemaError,
    decode_header,
)

TraceSink = Callable[[TraceEvent], None]
TraceFn = Callable[..., None]
"""An actor's ``trace`` method (``kind, type, **fields``), handed to helpers it owns."""


def _loop_time() -> float:
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:  # outside a loop (e.g. closing a sink after the run)
        return 0.0


def payload_fields(value: Any) -> Any:
    """A message as plain JSON-able data, for the ``fields`` of a trace event."""
    return msgspec.to_builtins(value)


class Tracer:
    """Numbers events and fans them out to sinks. Never blocks, never awaits."""

    def __init__(
        self,
        *,
        time_fn: Callable[[], float] = _loop_time,
        origin: float = 0.0,
        details: Iterable[str] = (),
    ) -> None:
        self._time_fn = time_fn
        self._origin = origin
        self._seq = 0
        self._sinks: list[TraceSink] = []
        self.enabled = False
        """Whether any sink listens: hot paths skip building trace fields when not (a plain
        attribute, kept by ``add_sink``/``remove_sink``: it is read twice per message)."""
        # Optional detail families, costly to trace, off unless asked for:
        # "controller_inputs" (actors.controller.recording) makes controllers record what
        # a replay needs (kemu trace replay).
        self.details = frozenset(details)

    def rebase(self) -> None:
        """Make the current loop time the trace's time zero (real-clock runs)."""
        self._origin = self._time_fn()

    def add_sink(self, sink: TraceSink) -> None:
        self._sinks.append(sink)
        self.enabled = True

    def remove_sink(self, sink: TraceSink) -> None:
        self._sinks.remove(sink)
        self.enabled = bool(self._sinks)

    @property
    def seq(self) -> int:
        return self._seq

    def skip(self, events: int = 1) -> None:
        """Count ``events`` events that no sink listens to, without building them: what
        ``emit`` does when ``enabled`` is false, for callers that check ``enabled`` first so
        as not to build the events' fields. The numbering stays the same as if they were
        emitted."""
        self._seq += events

    def emit(
        self,
        kind: TraceKind | str,
        *,
        node: str,
        actor: str = "",
        type: str | None = None,
        corr: int | None = None,
        **fields: Any,
    ) -> TraceEvent | None:
        if not self._sinks:
            self._seq += 1
            return None
        self._seq += 1
        event = TraceEvent(
            seq=self._seq,
            ts=round(self._time_fn() - self._origin, 6),
            node=node,
            actor=actor,
            kind=str(kind),
            type=type,
            corr=corr,
            fields=fields,
        )
        for sink in self._sinks:
            sink(event)
        return event


class MemorySink:
    """Keeps events in memory; tests and invariant checkers query it."""

    def __init__(self) -> None:
        self.events: list[TraceEvent] = []
        self._waiters: list[tuple[Callable[[TraceEvent], bool], asyncio.Event]] = []

    def __call__(self, event: TraceEvent) -> None:
        self.events.append(event)
        for pred, flag in self._waiters:
            if not flag.is_set() and pred(event):
                flag.set()

    def __iter__(self) -> Iterator[TraceEvent]:
        return iter(self.events)

    def of(self, kind: str | None = None, type: str | None = None) -> list[TraceEvent]:
        return [
            e
            for e in self.events
            if (kind is None or e.kind == kind) and (type is None or e.type == type)
        ]

    async def wait_for(self, pred: Callable[[TraceEvent], bool], timeout: float) -> TraceEvent:
        """Wait until an event (past or future) matches ``pred``; raise TimeoutError after
        ``timeout`` seconds of the loop's clock."""
        import anyio

        for e in self.events:
            if pred(e):
                await anyio.lowlevel.checkpoint()  # a wait is always a scheduling point
                return e
        flag = asyncio.Event()
        entry = (pred, flag)
        self._waiters.append(entry)
        try:
            with anyio.fail_after(timeout):
                await flag.wait()
        finally:
            self._waiters.remove(entry)
        return next(e for e in reversed(self.events) if pred(e))


_event_decoder = msgspec.json.Decoder(TraceEvent)


def read_trace(path: str | Path) -> tuple[TraceHeader, Iterator[TraceEvent]]:
    """The header of a JSONL trace file (checked: ``TraceSchemaError`` if it is not a
    trace of this schema version) and an iterator over its events, read lazily."""
    p = Path(path)
    try:
        with p.open("rb") as f:
            first = f.readline()
    except OSError as exc:
        raise TraceSchemaError(f"{p}: cannot read it ({exc.strerror})") from None
    header = decode_header(first, str(p))

    def events() -> Iterator[TraceEvent]:
        with p.open("rb") as f:
            f.readline()
            for line in f:
                if line.strip():
                    yield _event_decoder.decode(line)

    return header, events()
