"""`kemu trace diff` finds no regression between two runs of the same scenario and seed,
and reports a changed controller: crossed thresholds, new violations and, per topic,
the first event where the normalised sequences part."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from actors.controller.topic_deletion import TopicDeletionManager
from cluster.chaos import RunOptions, load_scenario, run_scenario
from cluster.cli.main import main
from spark.diff import Limit, Thresholds, ThresholdsError, load_thresholds
from tests.support.campaign import ROOT, run_campaign

pytestmark = [pytest.mark.spark, pytest.mark.slow]  # a Spark session: one JVM for the run

SCENARIO = "controller-killed-mid-deletion"


def test_same_seed_runs_show_no_regression(
    spark: SparkSession,
    campaign: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A deterministic re-run of the campaign, paired by scenario and seed, differs in
    nothing: exit status 0, no delta, no divergence."""
    del spark
    again = run_campaign(tmp_path / "again")
    out = tmp_path / "out"
    status = main(["trace", "diff", str(campaign), str(again), "--out", str(out), "--quiet"])
    assert status == 0
    document = json.loads((out / "diff.json").read_text())
    assert [p["run"] for p in document["pairs"]] == [
        "controller-killed-mid-deletion/seed-1",
        "create-delete-all-up/seed-1",
    ]
    assert document["unmatched"] == []
    for pair in document["pairs"]:
        assert pair["crossed"] == []
        assert pair["deltas"] == []
        assert pair["divergences"] == []
    assert "controller-killed-mid-deletion/seed-1: ok" in capsys.readouterr().out


def test_a_changed_controller_is_reported_with_its_first_divergent_event(
    spark: SparkSession,
    campaign: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A controller that forgets the marked topics at failover never finishes the
    deletion of `events`: the diff crosses thresholds (new violations, fewer
    StopReplicas per operation), exits 1, and names the first event of `events` that
    differs, the new controller's, after the failover."""
    del spark
    original = TopicDeletionManager.init

    async def forgetful(self: TopicDeletionManager, to_delete: object, ineligible: object) -> None:
        await original(self, (), ())

    monkeypatch.setattr(TopicDeletionManager, "init", forgetful)
    candidate = tmp_path / "candidate" / SCENARIO / "seed-1"
    result = run_scenario(
        load_scenario(ROOT / "scenarios" / f"{SCENARIO}.yaml"),
        RunOptions(run_dir=candidate, seed=1),
    )
    assert result.status == "failed"
    baseline = campaign / SCENARIO / "seed-1"
    out = tmp_path / "out"
    status = main(["trace", "diff", str(baseline), str(candidate), "--out", str(out), "--quiet"])
    assert status == 1
    (pair,) = json.loads((out / "diff.json").read_text())["pairs"]
    assert pair["run"] == f"{SCENARIO}/seed-1"
    metrics = {c["metric"] for c in pair["crossed"]}
    assert "new violations" in metrics
    assert "messages/operation StopReplicaRequest" in metrics
    assert any(v["rule"] == "deletions_complete" for v in pair["new_violations"])
    (events,) = [d for d in pair["divergences"] if d["topic"] == "events"]
    # Everything before the failover is the same; the first difference is after it.
    baseline_lines = [json.loads(x) for x in (baseline / "trace.jsonl").read_text().splitlines()]
    failover = next(e["seq"] for e in baseline_lines[1:] if e["type"] == "node_crashed")
    assert events["index"] > 1
    assert events["baseline_seq"] > failover
    assert events["baseline"] != events["candidate"]
    printed = capsys.readouterr().out
    assert f"events: diverges at its event {events['index']}" in printed
    assert (out / "diff.html").read_text().count("<table") >= 3


def test_thresholds_file(tmp_path: Path) -> None:
    """A thresholds file overrides the defaults key by key; an unknown key or a wrong
    type is one error naming the file and the key."""
    good = tmp_path / "t.yaml"
    good.write_text("messages_per_operation: {relative: 0.2, absolute: 1}\ndivergent_topics: 0\n")
    limits = load_thresholds(good)
    assert limits.messages_per_operation == Limit(relative=0.2, absolute=1.0)
    assert limits.divergent_topics == 0
    assert limits.latency == Thresholds().latency
    bad = tmp_path / "bad.yaml"
    bad.write_text("latency: {relative: fast, absolute: 1}\n")
    with pytest.raises(
        ThresholdsError,
        match=r"bad\.yaml: Expected `float`, got `str` - at `\$\.latency\.relative`",
    ):
        load_thresholds(bad)
    unknown = tmp_path / "unknown.json"
    unknown.write_text('{"latncy": {}}')
    with pytest.raises(
        ThresholdsError, match=r"unknown\.json: Object contains unknown field `latncy`"
    ):
        load_thresholds(unknown)
