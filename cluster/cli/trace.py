"""``kemu trace export|analyze|diff|replay``: the command line of the trace tools.

The files themselves are ``cluster.trace_files`` (the JSON Lines writer, the Parquet
export); the analyses are ``spark.commands`` and ``spark.replay``, imported when a
command runs, in this process (``--engine local``, the default) or on Spark (``--engine
spark``, or a ``--master``/``--conf``: ``spark.engine``). A bad ``--conf``, or Spark
options given with ``--engine local``, is a ``UsageError`` raised before anything starts.
"""

from __future__ import annotations

import argparse
import functools
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias, cast

from cluster.cli.args import UsageError, key_values

if TYPE_CHECKING:
    from spark.engine import Engine
    from spark.progress import StageDisplay

__all__ = ["add_spark_conf_argument", "add_trace_parser", "engine_of", "spark_conf"]

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

_ENGINE_HELP = (
    "local: in this process (the default); spark: a Spark job (the default with --master "
    "or --conf, under spark-submit, or for a run of more than 2,000,000 events)"
)


def _add_analysis_parsers(trace_sub: _SubParsers) -> None:
    """``kemu trace analyze`` and ``kemu trace diff``; Spark is imported when they run."""
    analyze = trace_sub.add_parser(
        "analyze",
        help="invariants, topic lifecycles, latencies and message counts per run",
        description=(
            "Analyse each run of the given traces, in this process or in one Spark job "
            "(--engine): the invariant checks, "
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
        help="compare a candidate's traces with a baseline's against thresholds",
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
        parser.add_argument(
            "--master",
            metavar="URL",
            help="Spark master: runs on Spark (--engine spark; its default master is local[*])",
        )
        parser.add_argument("--out", metavar="DIR", default=out, help=f"output directory ({out})")
        parser.add_argument(
            "--deletion-bound",
            type=float,
            default=60.0,
            metavar="S",
            help="fault-free seconds a marked topic has to be deleted in (60)",
        )
        parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
        _add_engine_argument(parser)
        add_spark_conf_argument(parser)
    analyze.set_defaults(func=_cmd_trace_analyze)
    diff.set_defaults(func=_cmd_trace_diff)


def _add_engine_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engine", choices=("local", "spark"), help=_ENGINE_HELP)


def engine_of(args: argparse.Namespace) -> Engine | None:
    """The ``--engine`` named (None: ``spark.engine.choose_engine`` decides); Spark's own
    options with ``--engine local`` are a usage error, never silently ignored."""
    if args.engine == "local":
        for given, option in ((args.master, "--master"), (args.conf, "--conf")):
            if given:
                raise UsageError(f"{option} is a Spark option: it needs --engine spark, not local")
    return cast("Engine | None", args.engine)


def add_spark_conf_argument(parser: argparse.ArgumentParser) -> None:
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
        engine=engine_of(args),
        stages=_stage_display(args.quiet),
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
        engine=engine_of(args),
        stages=_stage_display(args.quiet),
    )


# -- kemu trace replay (spark.replay) -------------------------------------------------------


def _add_replay_parser(trace_sub: _SubParsers) -> None:
    """``kemu trace replay TRACE... [--master URL] [--out DIR]`` (``spark.replay``)."""
    replay = trace_sub.add_parser(
        "replay",
        help="replay recorded controller inputs through the current controller",
        description=(
            "Feed each run's recorded controller events, with the store results it read, "
            "through the current controller code, in this process or one Spark task per run "
            "(--engine), and report per "
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
    replay.add_argument(
        "--master",
        metavar="URL",
        help="Spark master: runs on Spark (--engine spark; its default master is local[*])",
    )
    replay.add_argument("--out", metavar="DIR", help="write the report (replay.json) here")
    replay.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    _add_engine_argument(replay)
    add_spark_conf_argument(replay)
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
        progress=Progress("kemu trace replay", quiet=args.quiet, stages=_stage_display(args.quiet)),
        engine=engine_of(args),
    )


def _stage_display(quiet: bool) -> StageDisplay:
    """Spark's stages as rich bars on a terminal stderr (``--quiet``: none)."""
    from cluster.cli.progress import spark_stage_progress

    return functools.partial(spark_stage_progress, quiet=quiet)
