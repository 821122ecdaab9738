"""Row [9] of ``scripts/bench.sh``: the trace analysis at scale, Spark next to pandas.

A pair of long traces is made first: a few chaos scenarios run deterministically (seed 1
for the baseline, seed 2 for the candidate) and ``cluster.bench.long_traces`` lays copies of
their traces end to end until each holds ``--analysis-events`` events (10M by default),
as Parquet exports. Then ``cluster.bench.analysis_engine`` runs in a child process per engine,
one after the other on the same files: the single-process pandas reference, and Spark
(``local[*]``; its session start reported apart). Each child's whole process tree (the
JVM and Spark's Python workers included) is sampled for its resident memory; the peak
of the sum is reported. The goal: analyze + diff on Spark in under 90 s on 2 cores,
within 2 GB (and no slower than pandas). Both engines run the diff after the analysis in
the same session (process), so the diff reuses the two files' analyses
(``spark.memo``) and builds only the topic sequences; a ``kemu trace diff`` command, a
process of its own, analyses both files first: the row prints that diff's time apart,
Spark's session made to forget the analyses, and checks it finds the same document.
Spark's CPU is printed by kind of thread and
process (``cluster.bench.jvm_cpu``): where the time went when the goal is missed.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

import anyio
import msgspec

from cluster.bench.analysis_engine import AnalysisTimes
from cluster.bench.jvm_cpu import CPU_KINDS, descendants
from cluster.bench.scale import fast_tmp

__all__ = ["SOURCE_SCENARIOS", "row_analysis", "tree_rss_bytes"]

SOURCE_SCENARIOS: Final = (
    "rolling-restart-create-delete-storm",
    "delete-many-topics-broker-down",
    "controller-killed-mid-deletion",
    "message-chaos",
    "reassignment-racing-deletion",
)
"""The runs copied into the long traces: creation and deletion storms, failovers,
message faults and reassignments."""

SPARK_SECONDS_GOAL: Final = 90.0
"""Analyze + diff of the 10M-event pair on Spark, session start apart, on 2 cores."""
SPARK_RSS_GOAL: Final = 2 * 10**9
"""At most 2 GB (decimal, the stricter reading) for Spark's whole process tree."""
_GB: Final = 10**9

_now = time.perf_counter  # bench code measures wall time on purpose
_PAGE: Final = os.sysconf("SC_PAGE_SIZE")


def tree_rss_bytes(pid: int) -> int:
    """The resident memory of ``pid`` and all its live descendants, summed."""
    total = 0
    for current in (pid, *descendants(pid)):
        try:
            resident = int(Path(f"/proc/{current}/statm").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue
        total += resident * _PAGE
    return total


async def _measured(command: list[str]) -> tuple[bytes, int] | None:
    """Run ``python COMMAND``; its stdout and the peak of its tree's RSS (the child times
    its own stages)."""
    peak = 0
    async with await anyio.open_process([sys.executable, *command], stderr=None) as process:
        assert process.stdout is not None
        chunks: list[bytes] = []

        async def read() -> None:
            assert process.stdout is not None
            async for chunk in process.stdout:
                chunks.append(chunk)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read)
            while process.returncode is None:
                peak = max(peak, tree_rss_bytes(process.pid))
                with anyio.move_on_after(0.2):
                    await process.wait()
        await process.wait()
    if process.returncode != 0:
        print(f"  failed: python {' '.join(command)} exited with {process.returncode}")
        return None
    return b"".join(chunks), peak


async def _sources(root: Path, scenarios: Path, seed: int) -> list[Path] | None:
    """The source runs of one side, by ``kemu chaos run`` in a child process (its logs
    kept out of the bench's output unless it fails)."""
    out = root / f"seed-{seed}"
    command = ["-m", "cluster.cli", "chaos", "run"]
    command += [str(scenarios / f"{name}.yaml") for name in SOURCE_SCENARIOS]
    command += ["--seed", str(seed), "--deterministic", "--out", str(out)]
    done = await anyio.run_process([sys.executable, *command], check=False)
    if done.returncode != 0:
        print(f"  failed: kemu {' '.join(command[2:])} exited with {done.returncode}")
        print(done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace"))
        return None
    return [out / name / f"seed-{seed}" / "trace.jsonl" for name in SOURCE_SCENARIOS]


async def row_analysis(
    events: int, scenarios: Path, driver_memory: str, *, quiet: bool = False
) -> bool:
    """Row [9]; False if it could not measure. Unless ``quiet``, the Spark side draws its
    stages on a terminal stderr."""
    print(
        f"\n[9] trace analysis: analyze + diff of a pair of {events:,}-event traces, Spark"
        " (local[*]) vs the same analysis with pandas in one process"
        f" (goal: Spark < {SPARK_SECONDS_GOAL:g} s, peak <= {SPARK_RSS_GOAL / _GB:g} GB,"
        " and no slower than pandas)"
    )
    root = Path(tempfile.mkdtemp(prefix="kemu-bench-analysis-", dir=fast_tmp()))
    try:
        t0 = _now()
        pair: list[Path] = []
        for seed, side in ((1, "baseline"), (2, "candidate")):
            sources = await _sources(root, scenarios, seed)
            if sources is None:
                return False
            out = root / f"{side}.parquet"
            command = [
                "-m",
                "cluster.bench.long_traces",
                *map(str, sources),
                "--events",
                str(events),
            ]
            command += ["--out", str(out), "--run", side]
            done = await anyio.run_process([sys.executable, *command], stderr=None, check=False)
            if done.returncode != 0:
                print(f"  failed: python {' '.join(command)} exited with {done.returncode}")
                return False
            pair.append(out)
        size = sum(p.stat().st_size for p in pair) / 1024**2
        print(f"  inputs: 2 Parquet traces, {size:,.0f} MB, made in {_now() - t0:.1f} s")
        results: dict[str, tuple[AnalysisTimes, int]] = {}
        for engine in ("pandas", "spark"):
            command = ["-m", "cluster.bench.analysis_engine", *map(str, pair), "--engine", engine]
            command += ["--driver-memory", driver_memory, *(["--quiet"] if quiet else [])]
            found = await _measured(command)
            if found is None:
                return False
            stdout, peak = found
            results[engine] = (
                msgspec.json.decode(stdout.splitlines()[-1], type=AnalysisTimes),
                peak,
            )
        _print_results(results)
        return True
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _print_results(results: dict[str, tuple[AnalysisTimes, int]]) -> None:
    (pandas, pandas_peak), (spark, spark_peak) = results["pandas"], results["spark"]
    print(f"  {'':<36} {'pandas':>9} {'Spark':>9} {'ratio':>7}")
    for label, p, s in (
        ("analyze, both traces", pandas.analyze_seconds, spark.analyze_seconds),
        ("diff of the pair, analyses reused", pandas.diff_seconds, spark.diff_seconds),
        (
            "analyze + diff",
            pandas.analyze_seconds + pandas.diff_seconds,
            spark.analyze_seconds + spark.diff_seconds,
        ),
    ):
        print(f"  {label:<36} {p:>8.1f}s {s:>8.1f}s {p / s:>6.2f}x")
    print(f"  {'Spark session start (apart)':<36} {'':>9} {spark.session_seconds:>8.1f}s")
    print(
        f"  {'diff alone, as kemu trace diff':<36} {'':>9} {spark.diff_alone_seconds:>8.1f}s"
        "  (apart: the analyses forgotten, the same document)"
    )
    print(
        f"  {'peak memory, whole process tree':<36} {pandas_peak / _GB:>7.2f}GB"
        f" {spark_peak / _GB:>7.2f}GB"
    )
    agree = (pandas.events, pandas.violations, pandas.divergent_topics) == (
        spark.events,
        spark.violations,
        spark.divergent_topics,
    )
    print(
        f"  both found: {spark.events:,} events, {spark.violations} violations,"
        f" {spark.divergent_topics:,} divergent topics"
        + ("" if agree else f" (pandas: {pandas.violations}, {pandas.divergent_topics:,})")
    )
    if spark.cpu:
        kinds = ", ".join(f"{kind} {spark.cpu.get(kind, 0.0):.1f}" for kind in CPU_KINDS)
        print(f"  Spark's CPU seconds, session start included: {kinds}")
    spark_total = spark.analyze_seconds + spark.diff_seconds
    faster = spark_total <= pandas.analyze_seconds + pandas.diff_seconds
    fast = spark_total < SPARK_SECONDS_GOAL
    within = spark_peak <= SPARK_RSS_GOAL
    verdict = "OK" if faster and fast and within else "BELOW GOAL"
    why = [
        w
        for w, ok in (
            (f"{spark_total:.0f} s, not under {SPARK_SECONDS_GOAL:g} s", fast),
            ("slower than pandas", faster),
            ("above 2 GB", within),
        )
        if not ok
    ]
    if not fast:
        print(_why_slow(spark, spark_total, os.cpu_count() or 1, os.getloadavg()[0]))
    print(f"  {verdict}" + (f" ({', '.join(why)})" if why else ""))


def _why_slow(spark: AnalysisTimes, total: float, cores: int, load: float) -> str:
    """One line on where the time went when analyze + diff missed the goal: the CPU the
    session used against what the cores give in the goal's time, the biggest kinds, the
    longest steps, and the machine's load (other work takes cores too)."""
    budget = SPARK_SECONDS_GOAL * cores
    used = sum(spark.cpu.values())
    kinds = sorted(spark.cpu.items(), key=lambda item: -item[1])[:3]
    steps = sorted(spark.steps.items(), key=lambda item: -item[1])[:4]
    return (
        f"  why: {total:.0f} s of wall time; the session used {used:.0f} CPU-s"
        f" ({', '.join(f'{k} {v:.0f}' for k, v in kinds)}) of the {budget:.0f} that"
        f" {cores} cores give in {SPARK_SECONDS_GOAL:g} s; longest steps:"
        f" {', '.join(f'{k} {v:.0f} s' for k, v in steps)};"
        f" load average {load:.1f}"
    )
