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
from cluster.cli.args import UsageError, key_values
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


# -- kemu trace analyze / diff (spark.commands) -------------------------------------------


def add_analysis_parsers(trace_sub: Any) -> None:
    """``kemu trace analyze`` and ``kemu trace diff``; Spark is imported when they run."""
    analyze = trace_sub.add_parser(
        "analyze",
        help="invariants, topic lifecycles, latencies and message counts per run (Spark)",
        description=(
            "Analyse each run of the given traces in one Spark job: the invariant checks, "
            "per-topic creation and deletion lifecycles, request latencies, message counts "
            "and rates, controller queue times and errors. Writes analysis.json and "
            "report.html into --out. Exit status 1 when any run breaks an invariant."
        ),
    )
    analyze.add_argument(
        "traces",
        nargs="+",
        metavar="TRACE",
        help="a trace (.jsonl or .parquet), a chaos run directory or a campaign directory",
    )
    diff = trace_sub.add_parser(
        "diff",
        help="compare a candidate's traces with a baseline's against thresholds (Spark)",
        description=(
            "Compare the runs of CANDIDATE with those of BASELINE (trace files, or chaos "
            "campaign directories matched by scenario and seed): metric deltas against "
            "thresholds, new or vanished error names, and per topic the first event where "
            "the normalised message sequences diverge. Writes diff.json and diff.html into "
            "--out. Exit status 1 when a threshold is crossed."
        ),
    )
    diff.add_argument("baseline", metavar="BASELINE", help="trace, run or campaign directory")
    diff.add_argument("candidate", metavar="CANDIDATE", help="trace, run or campaign directory")
    diff.add_argument(
        "--thresholds", metavar="FILE", help="a YAML or JSON thresholds file (docs/spark.md)"
    )
    for parser, out in ((analyze, ".kemu/trace-analysis"), (diff, ".kemu/trace-diff")):
        parser.add_argument("--master", metavar="URL", help="Spark master (default local[*])")
        parser.add_argument("--out", metavar="DIR", default=out, help=f"output directory ({out})")
        parser.add_argument(
            "--deletion-bound",
            type=float,
            default=60.0,
            metavar="S",
            help="fault-free seconds a marked topic has to be deleted in (60)",
        )
        parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
        add_spark_conf_argument(parser)
    analyze.set_defaults(func=_cmd_trace_analyze)
    diff.set_defaults(func=_cmd_trace_diff)


def add_spark_conf_argument(parser: Any) -> None:
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting, as spark-submit's --conf (repeatable), e.g. spark.driver.memory=4g",
    )


def spark_conf(args: Any) -> dict[str, str]:
    """The ``--conf`` settings; a bad one is a usage error, raised before Spark starts."""
    conf = key_values(args.conf, "--conf")
    for key in conf:
        if not key.startswith("spark."):
            raise UsageError(f"--conf {key}: not a Spark setting (they start with 'spark.')")
    return conf


def _cmd_trace_analyze(args: Any) -> int:
    from spark.commands import analyze_command

    return analyze_command(
        args.traces,
        master=args.master,
        conf=spark_conf(args),
        out=Path(args.out),
        deletion_bound=args.deletion_bound,
        quiet=args.quiet,
    )


def _cmd_trace_diff(args: Any) -> int:
    from spark.commands import diff_command

    return diff_command(
        args.baseline,
        args.candidate,
        thresholds=None if args.thresholds is None else Path(args.thresholds),
        master=args.master,
        conf=spark_conf(args),
        out=Path(args.out),
        deletion_bound=args.deletion_bound,
        quiet=args.quiet,
    )


# -- kemu trace replay (spark.replay) -------------------------------------------------------


def add_replay_parser(trace_sub: Any) -> None:
    """``kemu trace replay TRACE... [--master URL] [--out DIR]`` (``spark.replay``)."""
    replay = trace_sub.add_parser(
        "replay",
        help="replay recorded controller inputs through the current controller (Spark)",
        description=(
            "Feed each run's recorded controller events, with the store results it read, "
            "through the current controller code, one Spark task per run, and report per "
            "run whether its store writes, requests and transitions match the recording "
            "and where they first diverge. Exit status 1 when any run diverges."
        ),
    )
    replay.add_argument(
        "traces",
        nargs="+",
        metavar="TRACE",
        help="a trace (.jsonl or .parquet), a chaos run directory or a campaign directory",
    )
    replay.add_argument("--master", metavar="URL", help="Spark master (default local[*])")
    replay.add_argument("--out", metavar="DIR", help="write the report (replay.json) here")
    add_spark_conf_argument(replay)
    replay.set_defaults(func=_cmd_trace_replay)


def _cmd_trace_replay(args: Any) -> int:
    from spark.progress import Progress
    from spark.replay import replay_command

    out = Path(args.out) if args.out else None
    return replay_command(
        args.traces,
        master=args.master,
        conf=spark_conf(args),
        out=out,
        progress=Progress("kemu trace replay"),
    )
