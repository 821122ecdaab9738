"""One side of ``scripts/bench.sh`` row [9]: the analysis and the diff of a pair of
traces, by Spark or by the local engine (pandas, ``--engine local`` of the commands),
timed; prints one JSON line.

``python -m cluster.bench.analysis_engine --engine spark|pandas BASELINE CANDIDATE``: first
``analyze`` of both traces (one job), then ``diff`` of the pair (which analyses both
again and compares their topic sequences). For Spark the session start is timed apart.
The caller (``cluster.bench.suite``) runs each engine in its own process and samples the
memory of the whole process tree (Spark's JVM and Python workers included).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import msgspec

from cluster.bench.jvm_cpu import spark_cpu_seconds
from cluster.bench.process import exit_with
from cluster.cli.progress import spark_stage_progress
from spark.progress import Progress

__all__ = ["AnalysisTimes", "main"]

JAVA_OPTIONS = "-XX:+UseSerialGC"
"""The driver JVM's options: the serial collector keeps no per-region bookkeeping (G1's
costs ~10% of the heap in resident memory) and leaves the second core to the work."""

WORKER_REUSE = "false"
"""``spark.python.worker.reuse``: each ``mapInArrow`` task forks its Python worker from
the daemon and the worker exits with the task. Reused workers stay behind idle between
stages (two daemons' worth, 50-60 MB each by RSS) and count in the process tree's peak;
the fork per task is cheap next to a task of the 10M-event jobs."""

DAEMON_MODULE = "spark.worker_daemon"
"""``spark.python.daemon.module``: pyspark's daemon, but reaping its exited workers, so
that their CPU counts in its children times (``spark.worker_daemon``); pyspark's
own lets the kernel discard it."""

# Bench code measures wall time on purpose: it is the one place that must.
_now = time.perf_counter


class AnalysisTimes(msgspec.Struct, frozen=True, kw_only=True):
    engine: str
    session_seconds: float
    analyze_seconds: float
    diff_seconds: float
    events: int
    violations: int
    divergent_topics: int
    cpu: dict[str, float] = msgspec.field(default_factory=dict)
    """Spark: the session's CPU seconds by kind (``cluster.bench.jvm_cpu``), sampled
    after the diff, the session's start included."""
    steps: dict[str, float] = msgspec.field(default_factory=dict)
    """Wall seconds of each step of the jobs (``spark.progress.Progress.seconds``), as
    ``analyze: <step>`` and ``diff: <step>``."""
    diff_alone_seconds: float = 0.0
    """Spark: the diff of the pair again with the session's analyses forgotten, as a
    ``kemu trace diff`` command makes it (both files analysed, then the sequences); run
    after ``cpu`` is sampled, and its document checked equal to the first diff's."""


def _pandas(baseline: Path, candidate: Path) -> AnalysisTimes:
    from spark.pandas_analysis import analyze_pandas, diff_pandas

    steps = Progress("analyze", quiet=True), Progress("diff", quiet=True)
    t0 = _now()
    analysis = analyze_pandas([baseline, candidate], progress=steps[0])
    t1 = _now()
    document = diff_pandas([baseline], [candidate], progress=steps[1])
    t2 = _now()
    times = _times("pandas", 0.0, t1 - t0, t2 - t1, analysis, document)
    return msgspec.structs.replace(times, steps=_steps(*steps))


def _steps(*progress: Progress) -> dict[str, float]:
    return {f"{p.what}: {name}": s for p in progress for name, s in p.seconds.items()}


def _spark(
    baseline: Path, candidate: Path, master: str, memory: str, java_options: str, *, quiet: bool
) -> AnalysisTimes:
    from spark.analyze import analyze, forget_analyses
    from spark.diff import diff
    from spark.session import spark_session

    t0 = _now()
    config = {
        "spark.driver.memory": memory,
        "spark.driver.extraJavaOptions": java_options,
        "spark.python.worker.reuse": WORKER_REUSE,
        "spark.python.daemon.module": DAEMON_MODULE,
    }
    with spark_session(master, app="kemu-bench", config=config) as spark:
        spark.range(1).count()  # the JVM and a first job are up
        t1 = _now()
        steps = Progress("analyze", quiet=True), Progress("diff", quiet=True)
        with spark_stage_progress(spark.sparkContext.statusTracker(), quiet=quiet):
            analysis = analyze(spark, [baseline, candidate], progress=steps[0])
            t2 = _now()
            document = diff(spark, [baseline], [candidate], progress=steps[1])
            t3 = _now()
        cpu = spark_cpu_seconds()
        forget_analyses(spark)
        t4 = _now()
        alone = diff(spark, [baseline], [candidate])
        t5 = _now()
    if alone != document:
        raise AssertionError("the diff alone differs from the diff reusing the analyses")
    times = _times("spark", t1 - t0, t2 - t1, t3 - t2, analysis, document)
    return msgspec.structs.replace(times, cpu=cpu, steps=_steps(*steps), diff_alone_seconds=t5 - t4)


def _times(
    engine: str,
    session: float,
    analyze: float,
    diff: float,
    analysis: dict[str, object],
    document: dict[str, object],
) -> AnalysisTimes:
    runs = analysis["runs"]
    pairs = document["pairs"]
    assert isinstance(runs, dict)
    assert isinstance(pairs, list)
    return AnalysisTimes(
        engine=engine,
        session_seconds=session,
        analyze_seconds=analyze,
        diff_seconds=diff,
        events=sum(int(r["events"]) for r in runs.values()),
        violations=sum(len(r["violations"]) for r in runs.values()),
        divergent_topics=sum(len(p["divergences"]) for p in pairs),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cluster.bench.analysis_engine",
        description="Time the analysis and the diff of a pair of traces (one JSON line).",
    )
    parser.add_argument("baseline", type=Path)
    parser.add_argument("candidate", type=Path)
    parser.add_argument("--engine", choices=("spark", "pandas"), required=True)
    parser.add_argument("--master", default="local[*]", help="the Spark master")
    parser.add_argument("--driver-memory", default="768m", help="spark.driver.memory")
    parser.add_argument(
        "--java-options",
        default=JAVA_OPTIONS,
        help="spark.driver.extraJavaOptions (default: %(default)s)",
    )
    parser.add_argument("--quiet", action="store_true", help="no Spark stages on stderr")
    args = parser.parse_args(argv)
    if args.engine == "pandas":
        result = _pandas(args.baseline, args.candidate)
    else:
        result = _spark(
            args.baseline,
            args.candidate,
            args.master,
            args.driver_memory,
            args.java_options,
            quiet=args.quiet,
        )
    print(msgspec.json.encode(result).decode(), flush=True)
    return 0


if __name__ == "__main__":
    exit_with(main)
