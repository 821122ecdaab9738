"""`kemu trace diff` finds no regression between two runs of the same scenario and seed,
and reports a changed controller: crossed thresholds, new violations and, per topic,
the first event where the normalised sequences part. Both engines (in process, the
default, and Spark) write the same diff.json and print the same lines."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from cluster.cli.main import main
from spark.diff import Limit, Thresholds, ThresholdsError, load_thresholds
from tests.support.analysis import rounded
from tests.support.campaign import run_campaign, run_forgetful_controller

# A Spark session (one JVM for the run); its first jobs on a loaded 2-core machine take
# longer than the default minute.
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(300)]

SCENARIO = "controller-killed-mid-deletion"


def _diff_by_both(baseline: Path, candidate: Path, out: Path) -> tuple[int, dict[str, Any], str]:
    """`kemu trace diff` by each engine: both exit alike, write the same diff.json and
    print the same lines; answers the status, the document and the lines."""
    found: dict[str, tuple[int, dict[str, Any], str]] = {}
    for engine in ("local", "spark"):
        target = out / engine
        args = ["trace", "diff", str(baseline), str(candidate), "--out", str(target)]
        with redirect_stdout(io.StringIO()) as printed:
            status = main([*args, "--quiet", "--engine", engine])
        document = json.loads((target / "diff.json").read_text())
        found[engine] = status, document, printed.getvalue().replace(str(target), "OUT")
    (status, local, lines), (spark_status, spark, spark_lines) = found["local"], found["spark"]
    assert status == spark_status
    assert rounded(local) == rounded(spark)
    assert lines == spark_lines
    return status, local, lines


def test_same_seed_runs_show_no_regression(
    spark: SparkSession,
    campaign: Path,
    tmp_path: Path,
) -> None:
    """A deterministic re-run of the campaign, paired by scenario and seed, differs in
    nothing: exit status 0, no delta, no divergence."""
    del spark
    again = run_campaign(tmp_path / "again")
    status, document, printed = _diff_by_both(campaign, again, tmp_path / "out")
    assert status == 0
    assert [p["run"] for p in document["pairs"]] == [
        "controller-killed-mid-deletion/seed-1",
        "create-delete-all-up/seed-1",
    ]
    assert document["unmatched"] == []
    for pair in document["pairs"]:
        assert pair["crossed"] == []
        assert pair["deltas"] == []
        assert pair["divergences"] == []
    assert "controller-killed-mid-deletion/seed-1: ok" in printed


def test_a_changed_controller_is_reported_with_its_first_divergent_event(
    spark: SparkSession,
    campaign: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A controller that forgets the marked topics at failover never finishes the
    deletion of `events`: the diff crosses thresholds (new violations, fewer
    StopReplicas per operation), exits 1, and names the first event of `events` that
    differs, the new controller's, after the failover."""
    del spark
    candidate = run_forgetful_controller(tmp_path / "candidate", monkeypatch)
    baseline = campaign / SCENARIO / "seed-1"
    status, document, printed = _diff_by_both(baseline, candidate, tmp_path / "out")
    assert status == 1
    (pair,) = document["pairs"]
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
    assert f"events: diverges at its event {events['index']}" in printed
    for engine in ("local", "spark"):
        assert (tmp_path / "out" / engine / "diff.html").read_text().count("<table") >= 3


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
