"""A small chaos campaign of real deterministic runs, for the tests of the Spark analyses
(and the pandas reference) to read: ``run_campaign`` writes each (scenario, seed) run the
way ``kemu chaos run`` does."""

from __future__ import annotations

from pathlib import Path

from cluster.chaos import RunOptions, load_scenario, run_scenario

ROOT = Path(__file__).resolve().parents[2]
CAMPAIGN = (("create-delete-all-up", 1), ("controller-killed-mid-deletion", 1))
"""The runs of the shared campaign: (scenario, seed)."""


def run_campaign(out: Path, runs: tuple[tuple[str, int], ...] = CAMPAIGN) -> Path:
    """Run each (scenario, seed) deterministically into ``out/<scenario>/seed-<N>``."""
    for name, seed in runs:
        scenario = load_scenario(ROOT / "scenarios" / f"{name}.yaml")
        result = run_scenario(
            scenario, RunOptions(run_dir=out / scenario.name / f"seed-{seed}", seed=seed)
        )
        assert result.status == "passed", [p.line() for p in result.problems]
    return out
