"""``kemu trace export|analyze|diff|replay``: the command line of the trace tools.

The files themselves are ``cluster.trace_files`` (the JSON Lines writer, the Parquet
export); the Spark jobs are ``spark.commands`` and ``spark.replay``, imported when a
command runs. A bad ``--conf`` is a ``UsageError`` raised before Spark starts.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TypeAlias

from cluster.cli.args import UsageError, key_values

__all__ = ["add_trace_parser", "spark_conf"]

_SubParsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def add_trace_parser(sub: _SubParsers) -> None:
    """``kemu trace`` and its actions, on the top-level command's subparsers."""
    trace = sub.add_parser("trace", help="work with trace files")
    trace_sub = trace.add_subparsers(dest="trace_command", required=True, metavar="ACTION")
    export = trace_sub.add_parser("export", help="export a JSONL trace to Parquet")
    export.add_argument("trace", help="the JSONL trace file")
    export.add_argument("output", help="the Parquet file to write")
    export.set_defaults(func=_cmd_trace_export)
    _add_analysis_parsers(trace_sub)
    _add_replay_parser(trace_sub)


def _cmd_trace_export(args: argparse.Namespace) -> int:
    from cluster.trace_files import export_parquet

    src = Path(args.trace)
    if not src.is_file():
        raise UsageError(f"trace file {src} does not exist")
    rows = export_parquet(src, args.output)
    print(f"wrote {rows} events to {args.output}")
    return 0


# -- kemu trace analyze / diff (spark.commands) -------------------------------------------


def _add_analysis_parsers(trace_sub: _SubParsers) -> None:
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
        _add_spark_conf_argument(parser)
    analyze.set_defaults(func=_cmd_trace_analyze)
    diff.set_defaults(func=_cmd_trace_diff)


def _add_spark_conf_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting, as spark-submit's --conf (repeatable), e.g. spark.driver.memory=4g",
    )


def spark_conf(args: argparse.Namespace) -> dict[str, str]:
    """The ``--conf`` settings; a bad one is a usage error, raised before Spark starts."""
    conf = key_values(args.conf, "--conf")
    for key in conf:
        if not key.startswith("spark."):
            raise UsageError(f"--conf {key}: not a Spark setting (they start with 'spark.')")
    return conf


def _cmd_trace_analyze(args: argparse.Namespace) -> int:
    from spark.commands import analyze_command

    return analyze_command(
        args.traces,
        master=args.master,
        conf=spark_conf(args),
        out=Path(args.out),
        deletion_bound=args.deletion_bound,
        quiet=args.quiet,
    )


def _cmd_trace_diff(args: argparse.Namespace) -> int:
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


def _add_replay_parser(trace_sub: _SubParsers) -> None:
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
    _add_spark_conf_argument(replay)
    replay.set_defaults(func=_cmd_trace_replay)


def _cmd_trace_replay(args: argparse.Namespace) -> int:
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
