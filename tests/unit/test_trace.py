"""Trace files: numbering, JSONL round trip, Parquet export, and waiting on events."""

from __future__ import annotations

from pathlib import Path

import anyio
import pyarrow.parquet as pq
import pytest

from actors.runtime.clock import run_virtual
from actors.runtime.tracer import MemorySink, Tracer, read_trace
from cluster.trace_files import JsonlTraceWriter, export_parquet
from protocol.trace import TraceHeader


def test_events_are_numbered_without_gaps_and_stamped_with_the_clock(tmp_path: Path) -> None:
    """Every emitted event gets the next sequence number and the loop's (virtual) time."""

    async def body() -> None:
        tracer = Tracer()
        sink = MemorySink()
        tracer.add_sink(sink)
        tracer.emit("event", node="n", type="a")
        await anyio.sleep(2.5)  # virtual time passing is the behaviour: the next ts is 2.5
        tracer.emit("event", node="n", type="b", corr=7, x=1)
        assert [(e.seq, e.ts, e.type) for e in sink] == [(1, 0.0, "a"), (2, 2.5, "b")]
        assert sink.events[1].fields == {"x": 1}

    run_virtual(body)


def test_jsonl_round_trip_and_parquet_export(tmp_path: Path) -> None:
    """A written trace reads back identically and exports to Parquet with one row per event."""
    path = tmp_path / "t.jsonl"
    tracer = Tracer(time_fn=lambda: 1.0)
    with JsonlTraceWriter(path, TraceHeader(run="r", seed=3, clock="virtual")) as writer:
        tracer.add_sink(writer)
        for i in range(5):
            tracer.emit("send", node=f"n{i % 2}", actor="a", type="Ping", corr=i, src="x/y")
    header, events = read_trace(path)
    got = list(events)
    assert header == TraceHeader(run="r", seed=3, clock="virtual")
    assert [e.corr for e in got] == [0, 1, 2, 3, 4]
    out = tmp_path / "t.parquet"
    assert export_parquet(path, out) == 5
    table = pq.read_table(out)
    assert table.num_rows == 5
    assert table.column("node").to_pylist() == ["n0", "n1", "n0", "n1", "n0"]
    assert table.column("fields").to_pylist()[0] == '{"src":"x/y"}'
    assert b"kemu_trace_header" in table.schema.metadata


def test_wait_for_times_out_on_the_clock_when_nothing_matches() -> None:
    """MemorySink.wait_for raises TimeoutError after its deadline instead of hanging."""

    async def body() -> None:
        tracer = Tracer()
        sink = MemorySink()
        tracer.add_sink(sink)
        with pytest.raises(TimeoutError):
            await sink.wait_for(lambda e: e.type == "never", 3.0)
        assert anyio.current_time() == pytest.approx(3.0)

    run_virtual(body)
