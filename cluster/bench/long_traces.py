"""Large traces for the analysis benchmark, made of real runs laid end to end.

``synthesize`` reads a few recorded traces (chaos runs) and writes one long trace of (at
least) the requested number of events as a Parquet export: copy after copy of the sources, each
shifted past the previous one, so the result reads like one cluster living through many
runs. So that every invariant still holds across the seams, each copy gets

* its own topics: a topic ``t`` of copy ``k`` is ``t-c<k>`` (in every field, store path
  and log directory name);
* controller epochs above the previous copies' (``controller_epoch`` everywhere, and
  ``epoch`` of the controller's own election events);
* sequence numbers, correlation ids and times after the previous copy's (one second
  apart), as a cluster's counters and clock would go on.

Events are copied as their JSON text and edited with two regular expressions, so a 10M
event trace takes a minute or two to write. ``python -m cluster.bench.long_traces`` is the
command-line form (``scripts/bench.sh`` row [9] uses it).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

import msgspec

from cluster.bench.process import exit_with
from protocol.trace import TraceHeader
from spark.schema import raw_events

__all__ = ["SourceTrace", "load_source", "synthesize"]

_ELECTION_TYPES: Final = ("controller_elected", "controller_ready", "controller_resigned")
_CONTROLLER_EPOCH = re.compile(rb'"controller_epoch":(\d+)')
_EPOCH = re.compile(rb'"epoch":(\d+)')
_TOPIC_PATH = re.compile(rb"^/(?:brokers/topics|admin/delete_topics|config/topics)/([^/]+)")


class _Names(msgspec.Struct):
    topic: str | int | None = None
    topics: list[str] | int | None = None
    path: str | None = None
    epoch: int | None = None


class SourceTrace(msgspec.Struct, frozen=True):
    """One recorded trace, held as rows with ``fields`` as raw JSON bytes."""

    path: str
    rows: list[tuple[int, float, str, str, str, str | None, int | None, bytes]]
    topics: frozenset[str]
    max_epoch: int
    max_corr: int
    end: float


def load_source(path: Path) -> SourceTrace:
    """A JSONL trace read for copying: its rows, the topics it names, its highest
    controller epoch and its last event's time."""
    decode_names = msgspec.json.Decoder(_Names).decode
    topics: set[str] = set()
    max_epoch = 0
    rows: list[tuple[int, float, str, str, str, str | None, int | None, bytes]] = []
    for line in raw_events(path):
        fields = bytes(line.fields)
        names = decode_names(fields)
        if isinstance(names.topic, str) and names.topic:
            topics.add(names.topic)
        if isinstance(names.topics, list):
            topics.update(names.topics)
        if names.path and (match := _TOPIC_PATH.match(names.path.encode())):
            topics.add(match.group(1).decode())
        if line.type in _ELECTION_TYPES and names.epoch is not None:
            max_epoch = max(max_epoch, names.epoch)
        row = (line.seq, line.ts, line.node, line.actor, line.kind, line.type, line.corr)
        rows.append((*row, fields))
    end = rows[-1][1] if rows else 0.0
    max_corr = max((row[6] for row in rows if row[6] is not None), default=0)
    return SourceTrace(str(path), rows, frozenset(topics), max_epoch, max_corr, end)


def _topic_pattern(topics: frozenset[str]) -> re.Pattern[bytes] | None:
    if not topics:
        return None
    names = b"|".join(re.escape(t.encode()) for t in sorted(topics, key=len, reverse=True))
    return re.compile(rb'(?<=["/])(' + names + rb')(?=["/]|-\d)')


def _copies(
    sources: Sequence[SourceTrace], events: int
) -> Iterator[tuple[int, float, str, str, str, str | None, int | None, str]]:
    """Whole copies of the sources in turn, each shifted past the previous one, until at
    least ``events`` rows are out (a run cut short would break invariants at its end)."""
    patterns = [_topic_pattern(s.topics) for s in sources]
    seq_base, ts_base, epoch_base, corr_base, written, copy = 0, 0.0, 0, 0, 0, 0
    while written < events:
        index = copy % len(sources)
        source, pattern = sources[index], patterns[index]
        suffix = f"-c{copy}".encode()
        shift = epoch_base

        def rename(m: re.Match[bytes], suffix: bytes = suffix) -> bytes:
            return m.group(1) + suffix

        def controller_epoch(m: re.Match[bytes], shift: int = shift) -> bytes:
            return b'"controller_epoch":%d' % (int(m.group(1)) + shift)

        def epoch(m: re.Match[bytes], shift: int = shift) -> bytes:
            return b'"epoch":%d' % (int(m.group(1)) + shift)

        for seq, ts, node, actor, kind, type_, corr, fields in source.rows:
            if pattern is not None:
                fields = pattern.sub(rename, fields)
            if shift and b"epoch" in fields:
                fields = _CONTROLLER_EPOCH.sub(controller_epoch, fields)
                if type_ in _ELECTION_TYPES:
                    fields = _EPOCH.sub(epoch, fields)
            if corr is not None:
                corr += corr_base
            yield (seq_base + seq, ts_base + ts, node, actor, kind, type_, corr, fields.decode())
            written += 1
        seq_base += source.rows[-1][0] if source.rows else 0
        ts_base += source.end + 1.0
        epoch_base += source.max_epoch
        corr_base += source.max_corr
        copy += 1


def synthesize(
    sources: Sequence[Path],
    out: Path,
    events: int,
    *,
    run: str = "synthetic",
    batch_rows: int = 262_144,
) -> int:
    """Write a Parquet trace (``kemu trace export``'s format) of at least ``events``
    events made of whole copies of the ``sources`` (JSONL traces); returns the number
    written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    loaded = [load_source(p) for p in sources]
    if not any(s.rows for s in loaded):
        raise ValueError("the source traces hold no events")
    loaded = [s for s in loaded if s.rows]
    header = msgspec.json.encode(TraceHeader(run=run, clock="virtual"))
    names = ("seq", "ts", "node", "actor", "kind", "type", "corr", "fields")
    types = (pa.int64(), pa.float64(), *[pa.string()] * 4, pa.int64(), pa.string())
    schema = pa.schema(
        list(zip(names, types, strict=True)), metadata={b"kemu_trace_header": header}
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with pq.ParquetWriter(str(out), schema, compression="zstd") as writer:
        batch: list[tuple[int, float, str, str, str, str | None, int | None, str]] = []
        for row in _copies(loaded, events):
            batch.append(row)
            written += 1
            if len(batch) >= batch_rows:
                writer.write_table(
                    pa.Table.from_arrays([list(c) for c in zip(*batch, strict=True)], schema=schema)
                )
                batch = []
        if batch:
            writer.write_table(
                pa.Table.from_arrays([list(c) for c in zip(*batch, strict=True)], schema=schema)
            )
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cluster.bench.long_traces",
        description="Write a long Parquet trace made of copies of recorded runs.",
    )
    parser.add_argument("sources", nargs="+", type=Path, help="JSONL traces to copy")
    parser.add_argument("--events", type=int, required=True, help="events to write")
    parser.add_argument("--out", type=Path, required=True, help="the Parquet file to write")
    parser.add_argument("--run", default="synthetic", help="the run name in the header")
    args = parser.parse_args(argv)
    synthesize(args.sources, args.out, args.events, run=args.run)
    return 0


if __name__ == "__main__":
    exit_with(main)
