"""Trace files: JSON Lines writing and Parquet export.

A trace file starts with a ``TraceHeader`` line, then one ``TraceEvent`` per line in
sequence order (docs/trace-schema.md). Lines are encoded with msgspec, whose output is
deterministic (fields in declaration order, ``fields`` in insertion order), so a
deterministic run yields a byte-identical file.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

import msgspec

from actors.runtime.tracer import read_trace
from protocol.trace import TraceEvent, TraceHeader

_encoder = msgspec.json.Encoder()


def encode_event(event: TraceEvent) -> bytes:
    return _encoder.encode(event)


class JsonlTraceWriter:
    """A tracer sink writing one JSON line per event to a file (buffered, synchronous:
    writing never yields to the loop, so the order of lines is the order of events)."""

    def __init__(self, path: str | Path, header: TraceHeader | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[bytes] = self.path.open("wb")
        self._file.write(_encoder.encode(header or TraceHeader()) + b"\n")
        self.count = 0

    def __call__(self, event: TraceEvent) -> None:
        self._file.write(_encoder.encode(event) + b"\n")
        self.count += 1

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()

    def __enter__(self) -> JsonlTraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def export_parquet(jsonl: str | Path, parquet: str | Path, *, batch_rows: int = 65_536) -> int:
    """Write a trace's events as a zstd-compressed Parquet file; returns the row count.

    Columns follow TraceEvent; ``fields`` is kept as a JSON string (its keys vary by event
    type), ``corr`` and ``type`` are nullable. The header goes into the file's metadata.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    header, events = read_trace(jsonl)
    schema = pa.schema(
        [
            ("seq", pa.int64()),
            ("ts", pa.float64()),
            ("node", pa.string()),
            ("actor", pa.string()),
            ("kind", pa.string()),
            ("type", pa.string()),
            ("corr", pa.int64()),
            ("fields", pa.string()),
        ],
        metadata={b"kemu_trace_header": _encoder.encode(header)},
    )
    rows = 0
    with pq.ParquetWriter(str(parquet), schema, compression="zstd") as writer:
        batch: dict[str, list[Any]] = {name: [] for name in schema.names}
        for ev in events:
            batch["seq"].append(ev.seq)
            batch["ts"].append(ev.ts)
            batch["node"].append(ev.node)
            batch["actor"].append(ev.actor)
            batch["kind"].append(ev.kind)
            batch["type"].append(ev.type)
            batch["corr"].append(ev.corr)
            batch["fields"].append(_encoder.encode(ev.fields).decode())
            rows += 1
            if len(batch["seq"]) >= batch_rows:
                writer.write_table(pa.Table.from_pydict(batch, schema=schema))
                batch = {name: [] for name in schema.names}
        if batch["seq"]:
            writer.write_table(pa.Table.from_pydict(batch, schema=schema))
    return rows
