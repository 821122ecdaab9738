"""What real-mode runs need besides the in-process ones: a fresh ZooKeeper chroot per run,
the broker processes' traces read as they grow, and the merge of every process's events
into the run's one trace.

With one process per broker (``mode: processes``), each broker process writes its own
trace (``cluster.launch.broker_process.BrokerProcessSpec.trace``), timed from the run's origin on
CLOCK_MONOTONIC, which every process of the machine shares. ``TraceTail`` reads those
files while the run goes on and hands each new event to the run's recorder (so triggers
and conditions see the brokers' events within a poll interval). ``LiveOrder`` hands
them to the trace rules in time order while the run goes on, each once ``LIVE_LAG``
seconds have passed since it happened (no process can still report an earlier one,
unless it is that late). At the end, ``merge`` orders every event of the run (the
runner's own and the brokers') by time and numbers them afresh, gap-free, from 1: the
order the rules saw live, unless an event came later than the lag.
"""

from __future__ import annotations

import heapq
import math
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import msgspec

from actors.runtime.clock import Clock
from protocol.trace import TraceEvent

__all__ = ["LIVE_LAG", "TAIL_POLL", "LiveOrder", "TraceTail", "merge", "run_chroot"]

TAIL_POLL: Final = 0.02
"""Seconds between two reads of the broker processes' trace files."""

LIVE_LAG: Final = 1.0
"""Seconds an event waits before the live trace rules see it (``LiveOrder``): longer
than a broker process takes to write an event and the run to read it, even on a busy
machine."""

_decoder = msgspec.json.Decoder(TraceEvent)


def run_chroot(connect: str, scenario: str, seed: int) -> str:
    """``connect`` (HOST:PORT[,...][/chroot]) with a chroot of this run's own below it, so
    that runs never see each other's znodes."""
    token = uuid.uuid4().hex[:8]
    return f"{connect.rstrip('/')}/kemu-chaos/{scenario}/seed-{seed}-{token}"


class _File:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.partial = b""
        self.header_read = False


class TraceTail:
    """Reads the JSONL trace files that appear in ``directory`` as they grow; ``poll``
    hands every complete new event line to ``feed`` (files in name order, each in its
    own order)."""

    def __init__(self, directory: Path, feed: Callable[[TraceEvent], None]) -> None:
        self.directory = directory
        self._feed = feed
        self._files: dict[str, _File] = {}
        self._closed = False

    def close(self) -> None:
        """Poll one last time; later polls read nothing."""
        self.poll()
        self._closed = True

    def poll(self) -> int:
        """Read what was written since the last poll; returns the events handed on."""
        fed = 0
        if self._closed:
            return fed
        for path in sorted(self.directory.glob("*.jsonl")):
            tail = self._files.setdefault(path.name, _File(path))
            fed += self._read(tail)
        return fed

    async def run(self, clock: Clock) -> None:
        """Poll until cancelled."""
        while True:
            self.poll()
            await clock.sleep(TAIL_POLL)

    def _read(self, tail: _File) -> int:
        with tail.path.open("rb") as f:
            f.seek(tail.offset)
            chunk = f.read()
        if not chunk:
            return 0
        tail.offset += len(chunk)
        lines = (tail.partial + chunk).split(b"\n")
        tail.partial = lines.pop()  # an incomplete last line waits for the next poll
        fed = 0
        for line in lines:
            if not line.strip():
                continue
            if not tail.header_read:
                tail.header_read = True  # the file's TraceHeader
                continue
            self._feed(_decoder.decode(line))
            fed += 1
        return fed


class LiveOrder:
    """Events from several processes, handed to ``release`` in time order (ties in the
    order recorded, as ``merge`` orders them) once they are old enough. ``late`` counts
    the events that came after a later one had been released: the order seen live then
    differs from ``merge``'s."""

    def __init__(self, release: Callable[[TraceEvent], None]) -> None:
        self._release = release
        self._heap: list[tuple[float, int, TraceEvent]] = []
        self._released_ts = -math.inf
        self.late = 0

    def push(self, event: TraceEvent) -> None:
        if event.ts < self._released_ts:
            self.late += 1
        heapq.heappush(self._heap, (event.ts, event.seq, event))

    def release_until(self, ts: float) -> None:
        """Hand on every event up to ``ts`` (``math.inf``: every one left)."""
        heap = self._heap
        while heap and heap[0][0] <= ts:
            _, _, event = heapq.heappop(heap)
            self._released_ts = max(self._released_ts, event.ts)
            self._release(event)  # may push more (a violation traced), later in time


def merge(events: Sequence[TraceEvent]) -> tuple[list[TraceEvent], dict[int, int]]:
    """``events`` (numbered in the order they were recorded) in time order, numbered
    afresh from 1; and the new number of each old one. Events at the same time keep
    their recorded order."""
    ordered = sorted(events, key=lambda e: e.ts)
    renumbered: dict[int, int] = {}
    merged: list[TraceEvent] = []
    for seq, event in enumerate(ordered, 1):
        renumbered[event.seq] = seq
        merged.append(msgspec.structs.replace(event, seq=seq))
    for i, event in enumerate(merged):
        for name in ("trigger_seq", "at_seq"):  # a fault's trigger, a violation's event
            cause = event.fields.get(name)
            if isinstance(cause, int) and cause in renumbered:
                fields = {**event.fields, name: renumbered[cause]}
                event = merged[i] = msgspec.structs.replace(event, fields=fields)
    return merged, renumbered
