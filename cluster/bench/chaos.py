"""The chaos campaign benchmark: how much faster than real time simulated time runs.

``python -m cluster.bench.chaos --seeds N [--scenarios DIR]`` runs every scenario file
directly in ``DIR`` (``scenarios/*.yaml``, not its subfolders) with seeds ``1 .. N`` (as
``scripts/chaos.sh`` numbers them) in deterministic mode (virtual clock, in-process
network, embedded store), each into a run directory under a temporary directory (on
``/dev/shm`` when there is one, removed afterwards), and prints one JSON object: the
runs, how many passed, the simulated seconds summed over every run, and the wall seconds
summed over every ``run_scenario`` call (cluster start and teardown, invariant checks and
the run directory's files included).
Their ratio is the campaign's simulated-to-wall ratio. ``cluster.bench.suite`` runs it in a child
process. Logs go to stderr at CRITICAL only: the faults are injected on purpose, and what
they cause is in each run's trace, not for the console.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import msgspec

from cluster.bench.process import exit_with
from cluster.bench.scale import fast_tmp
from cluster.chaos import RunOptions, ScenarioError, load_scenario, run_scenario
from cluster.cli.progress import count_progress
from cluster.logging import configure_logging
from protocol.errors import KemuError

__all__ = [
    "CampaignResult",
    "add_campaign_arguments",
    "campaign_files",
    "main",
    "run_campaign",
]

# Bench code measures wall time on purpose: it is the one place that must.
_now = time.perf_counter


class CampaignResult(msgspec.Struct, frozen=True, kw_only=True):
    """What one campaign measured (printed as JSON by ``main``)."""

    scenarios: int
    seeds: int  # per scenario: 1 .. seeds
    runs: int
    passed: int
    simulated_seconds: float  # summed over every run
    wall_seconds: float  # summed over every run_scenario call
    not_passed: tuple[str, ...] = ()  # "scenario seed=N: status", for each run that did not pass

    @property
    def ratio(self) -> float:
        return self.simulated_seconds / self.wall_seconds if self.wall_seconds > 0 else 0.0


def scenario_files(directory: Path) -> list[Path]:
    """The campaign's scenario files: ``*.yaml`` directly in ``directory``, by name."""
    return sorted(p for p in directory.glob("*.yaml") if p.is_file())


def run_campaign(
    files: list[Path], seeds: int, *, root: str | None = None, quiet: bool = True
) -> CampaignResult:
    """Run every scenario in ``files`` with seeds ``1 .. seeds``, deterministic mode, the
    run directories in a temporary directory under ``root`` (by default ``fast_tmp()``).
    ``ScenarioError`` if a file is not a valid scenario (before anything runs). Unless
    ``quiet``, a progress line counts the runs on a terminal stderr."""
    scenarios = [(str(path), load_scenario(path)) for path in files]
    simulated = wall = 0.0
    passed = 0
    not_passed: list[str] = []
    with (
        tempfile.TemporaryDirectory(prefix="kemu-campaign-", dir=root or fast_tmp()) as tmp,
        count_progress(len(scenarios) * seeds, label="[7]", unit="runs", quiet=quiet) as line,
    ):
        for source, scenario in scenarios:
            for seed in range(1, seeds + 1):
                options = RunOptions(
                    run_dir=Path(tmp) / scenario.name / f"seed-{seed}",
                    seed=seed,
                    deterministic=True,
                    source=source,
                )
                t0 = _now()
                result = run_scenario(scenario, options)
                wall += _now() - t0
                simulated += result.simulated_seconds
                if result.status == "passed":
                    passed += 1
                else:
                    not_passed.append(f"{scenario.name} seed={seed}: {result.status}")
                line.advance()
    return CampaignResult(
        scenarios=len(scenarios),
        seeds=seeds,
        runs=len(scenarios) * seeds,
        passed=passed,
        simulated_seconds=round(simulated, 3),
        wall_seconds=round(wall, 3),
        not_passed=tuple(not_passed),
    )


def add_campaign_arguments(parser: argparse.ArgumentParser, *, seeds: int) -> None:
    """``--seeds N`` (default ``seeds``) and ``--scenarios DIR``."""
    parser.add_argument("--seeds", type=int, default=seeds, help="seeds per scenario (1 .. N)")
    parser.add_argument(
        "--scenarios", metavar="DIR", default="scenarios", help="where the scenario files are"
    )


def campaign_files(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[Path] | None:
    """The scenario files ``--scenarios`` names; a usage error for no seeds; None, after
    an ``Error:`` line, for a directory without scenario files."""
    if args.seeds < 1:
        parser.error("--seeds must be >= 1")
    files = scenario_files(Path(args.scenarios))
    if not files:
        print(f"Error: no scenario files (*.yaml) in {args.scenarios}", file=sys.stderr)
        return None
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kemu-bench-chaos", description=__doc__.splitlines()[0])
    add_campaign_arguments(parser, seeds=5)
    parser.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    args = parser.parse_args(argv)
    files = campaign_files(parser, args)
    if files is None:
        return 2
    configure_logging(level="CRITICAL")
    try:
        result = run_campaign(files, args.seeds, quiet=args.quiet)
    except (ScenarioError, KemuError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(msgspec.json.encode(result).decode() + "\n")
    return 0


if __name__ == "__main__":
    exit_with(main)
