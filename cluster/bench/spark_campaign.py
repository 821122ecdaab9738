"""Bench row [12]: the same deterministic chaos campaign on one and on two Spark executors,
next to ``scripts/chaos.sh``'s process fan-out on the same cores.

``python -m cluster.bench.spark_campaign --seeds N [--scenarios DIR]`` runs every scenario
file directly in ``DIR`` with seeds ``1 .. N`` four ways, one after the other, and prints
one JSON object with each way's runs, wall seconds and runs per second:

* ``processes-1`` / ``processes-2``: ``kemu chaos run --deterministic`` in one process, and
  in two side by side, each on every scenario with a contiguous share of the seeds (on a
  contiguous share of the scenarios with every seed when there are fewer seeds than
  processes): what ``scripts/chaos.sh --jobs N`` starts; wall time from the first start
  to the last exit;
* ``spark-1`` / ``spark-2``: ``kemu chaos campaign``'s job (``run_on_spark``) on a
  standalone master with two one-core workers on loopback
  (``cluster.launch.spark_standalone``), with ``spark.cores.max`` 1 (one executor) and 2
  (two), wall time of the job once its executors are registered (Spark's start-up left
  out; ``spark.scheduler.minRegisteredResourcesRatio`` 1).

The scaling ratio is ``spark-2``'s runs per second over ``spark-1``'s. Logs at CRITICAL.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec

from cluster.bench.chaos import add_campaign_arguments, campaign_files
from cluster.bench.process import exit_with
from cluster.bench.scale import fast_tmp
from cluster.chaos.spark_campaign import run_on_spark
from cluster.launch.spark_standalone import standalone_spark
from cluster.logging import configure_logging

__all__ = ["CampaignWay", "SparkCampaignResult", "main"]

# Bench code measures wall time on purpose: it is the one place that must.
_now = time.perf_counter


class CampaignWay(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    runs: int
    passed: int
    wall_seconds: float

    @property
    def rate(self) -> float:
        return self.runs / self.wall_seconds if self.wall_seconds > 0 else 0.0


class SparkCampaignResult(msgspec.Struct, frozen=True, kw_only=True):
    scenarios: int
    seeds: int
    ways: tuple[CampaignWay, ...]

    def way(self, name: str) -> CampaignWay:
        return next(w for w in self.ways if w.name == name)

    @property
    def ratio(self) -> float:
        one = self.way("spark-1").rate
        return self.way("spark-2").rate / one if one > 0 else 0.0


def _processes(files: list[Path], seeds: int, jobs: int, out: Path) -> CampaignWay:
    kemu = str(Path(sys.executable).parent / "kemu")
    if seeds >= jobs:  # shares of the seeds: halves of the scenarios differ in work
        shares = [
            (files, f"{1 + job * seeds // jobs}..{(job + 1) * seeds // jobs}")
            for job in range(jobs)
        ]
    else:
        per = -(-len(files) // jobs)
        shares = [(files[i : i + per], f"1..{seeds}") for i in range(0, len(files), per)]
    started = _now()
    children = [
        subprocess.Popen(  # noqa: S603 - our own command, fixed arguments
            [
                kemu,
                "--log-level",
                "CRITICAL",
                "chaos",
                "run",
                *map(str, share),
                "--seeds",
                share_seeds,
                "--deterministic",
                "--out",
                str(out),
                "--quiet",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for share, share_seeds in shares
    ]
    lines = [child.communicate()[0] for child in children]
    wall = _now() - started
    passed = sum(text.count("... passed") for text in lines)
    return CampaignWay(
        name=f"processes-{jobs}",
        runs=len(files) * seeds,
        passed=passed,
        wall_seconds=round(wall, 3),
    )


def _spark(files: list[Path], seeds: int, executors: int, url: str, out: Path) -> CampaignWay:
    texts = [(str(f), f.read_text(encoding="utf-8")) for f in files]
    results, wall = run_on_spark(
        texts,
        list(range(1, seeds + 1)),
        out,
        master=url,
        conf={
            "spark.cores.max": str(executors),
            "spark.executor.memory": "512m",
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
        },
        log_level="CRITICAL",
    )
    return CampaignWay(
        name=f"spark-{executors}",
        runs=len(results),
        passed=sum(1 for r in results if r.status == "passed"),
        wall_seconds=round(wall, 3),
    )


def run_ways(files: list[Path], seeds: int) -> SparkCampaignResult:
    ways: list[CampaignWay] = []
    with tempfile.TemporaryDirectory(prefix="kemu-bench-spark-", dir=fast_tmp()) as tmp:
        root = Path(tmp)
        for jobs in (1, 2):
            ways.append(_processes(files, seeds, jobs, root / f"processes-{jobs}"))
        (root / "cluster").mkdir()
        with standalone_spark(root / "cluster", workers=2) as cluster:
            os.environ.update(cluster.env)
            for executors in (1, 2):
                ways.append(
                    _spark(files, seeds, executors, cluster.url, root / f"spark-{executors}")
                )
    return SparkCampaignResult(scenarios=len(files), seeds=seeds, ways=tuple(ways))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="kemu-bench-spark-campaign", description=__doc__.splitlines()[0]
    )
    add_campaign_arguments(parser, seeds=2)
    args = parser.parse_args(argv)
    files = campaign_files(parser, args)
    if files is None:
        return 2
    configure_logging(level="CRITICAL")
    result = run_ways(files, args.seeds)
    sys.stdout.write(msgspec.json.encode(result).decode() + "\n")
    return 0


if __name__ == "__main__":
    exit_with(main)
