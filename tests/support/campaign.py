"""A small chaos campaign of real deterministic runs, for the tests of the Spark analyses
(and the pandas reference) to read: ``run_campaign`` writes each (scenario, seed) run the
way ``kemu chaos run`` does."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.controller.topic_deletion import TopicDeletionManager
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


def run_forgetful_controller(out: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``controller-killed-mid-deletion`` seed 1 with a controller that forgets the
    marked topics at failover (``TopicDeletionManager.init`` given none), so the deletion
    of ``events`` never finishes: a candidate that differs from the campaign's run. Its
    run directory, ``out/<scenario>/seed-1``."""
    original = TopicDeletionManager.init

    async def forgetful(self: TopicDeletionManager, to_delete: object, ineligible: object) -> None:
        await original(self, (), ())

    monkeypatch.setattr(TopicDeletionManager, "init", forgetful)
    name = "controller-killed-mid-deletion"
    run_dir = out / name / "seed-1"
    result = run_scenario(
        load_scenario(ROOT / "scenarios" / f"{name}.yaml"), RunOptions(run_dir=run_dir, seed=1)
    )
    assert result.status == "failed"
    return run_dir
