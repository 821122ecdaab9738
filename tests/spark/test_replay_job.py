"""The replay, in process (the default engine) and as a Spark job: every run of a small
chaos campaign (three scenarios, two seeds) replays to a match on the current controller,
and a deliberately changed controller (shipped to the executors) diverges on the runs
that exercise the change, with the first divergent event named in the report and a
non-zero exit. Both engines write the same report and print the same lines."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from pyspark import cloudpickle
from pyspark.sql import SparkSession

from cluster.trace_files import export_parquet
from spark.engine import Engine
from spark.replay import replay_command, replay_local, replay_runs
from spark.schema import resolve_inputs
from tests.support.campaign import run_campaign
from tests.support.planted import no_delete_phase

# A Spark session (one JVM for the run); its first jobs on a loaded 2-core machine take
# longer than the default minute.
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(300)]

RUNS = tuple(
    (scenario, seed)
    for scenario in (
        "create-delete-all-up",
        "delete-with-broker-down",
        "session-expiry-controller-during-creation",
    )
    for seed in (1, 2)
)
ENGINES: tuple[Engine, ...] = ("local", "spark")
DELETING = {"create-delete-all-up", "delete-with-broker-down"}
"""The scenarios that delete a topic (the session-expiry one only creates)."""

# The patch below runs in Spark's Python workers: ship this module's code by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]


@pytest.fixture(scope="module")
def replay_campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_campaign(tmp_path_factory.mktemp("replay-campaign"), RUNS)


def test_a_campaign_replays_to_a_match_one_task_per_run(
    spark: SparkSession, replay_campaign: Path, tmp_path: Path
) -> None:
    """All six runs match, and so does a run exported to Parquet; the report (JSON and one
    line per run) says so; exit 0; the same report by either engine."""
    del spark  # the Spark command joins the shared session
    parquet = tmp_path / "exported.parquet"
    export_parquet(replay_campaign / "delete-with-broker-down" / "seed-2" / "trace.jsonl", parquet)
    printed: dict[str, list[str]] = {}
    for engine in ENGINES:
        lines = printed.setdefault(engine, [])
        code = replay_command(
            [str(replay_campaign), str(parquet)],
            out=tmp_path / engine,
            echo=lines.append,
            engine=engine,
        )
        assert code == 0, lines
        lines[-1] = lines[-1].replace(str(tmp_path / engine), "OUT")
    assert printed["local"] == printed["spark"]
    assert (tmp_path / "local" / "replay.json").read_bytes() == (
        tmp_path / "spark" / "replay.json"
    ).read_bytes()
    lines = printed["local"]
    runs = len(RUNS) + 1
    labels = sorted([f"{s}/seed-{n}" for s, n in RUNS] + [str(parquet)])
    assert sorted(line.split()[1].rstrip(":") for line in lines[:runs]) == labels
    assert all(line.startswith("MATCH ") for line in lines[:runs])
    assert lines[runs] == "7 runs: 7 match, 0 diverged, 0 could not be replayed"
    report = json.loads((tmp_path / "local" / "replay.json").read_text())
    assert (report["matched"], report["diverged"], report["errors"]) == (7, 0, 0)
    for run in report["runs"]:
        assert run["replay"]["match"] is True
        incarnations = run["replay"]["incarnations"]
        assert len(incarnations) >= 3
        assert sum(i["events"] for i in incarnations) > 10
    by_label = {run["label"]: run["replay"] for run in report["runs"]}
    assert (
        by_label[str(parquet)]["incarnations"]
        == (by_label["delete-with-broker-down/seed-2"]["incarnations"])
    )


def test_a_changed_controller_diverges_on_the_runs_it_affects(
    spark: SparkSession, replay_campaign: Path, tmp_path: Path
) -> None:
    """Without the deletion's delete phase, every run that deletes a topic diverges at its
    TopicDeletion event (the recorded ReplicaDeletionStarted transition is missing); the
    creation-only runs still match; the command exits 1 and names the divergence."""
    inputs = resolve_inputs([replay_campaign])
    report = replay_runs(spark, inputs, patch=no_delete_phase)
    assert replay_local(inputs, patch=no_delete_phase) == report
    by_label = {o.label: o for o in report.runs}
    assert len(by_label) == len(RUNS)
    for scenario, seed in RUNS:
        outcome = by_label[f"{scenario}/seed-{seed}"]
        if scenario not in DELETING:
            assert outcome.status == "match"
            continue
        assert outcome.status == "diverged"
        first = outcome.replay.first_divergence
        assert first is not None
        _, divergence = first
        assert divergence.event == "TopicDeletion"
        assert divergence.expected["to_state"] == "ReplicaDeletionStarted"
    assert (report.matched, report.diverged, report.errors) == (2, 4, 0)

    for engine in ENGINES:
        lines: list[str] = []
        code = replay_command(
            [str(replay_campaign / "delete-with-broker-down" / f"seed-{n}") for n in (1, 2)],
            out=tmp_path / engine,
            echo=lines.append,
            patch=no_delete_phase,
            engine=engine,
        )
        assert code == 1
        diverged = [line for line in lines if line.startswith("DIVERGED")]
        assert len(diverged) == 2
        assert all("TopicDeletion (seq " in line for line in diverged)
        assert "ReplicaDeletionStarted" in diverged[0]


def test_bad_inputs_are_one_error_line_before_spark_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing input or a trace of another schema version: one line, exit 1, no job."""
    from cluster.cli.main import main

    assert main(["trace", "replay", str(tmp_path / "missing.jsonl")]) == 1
    other = tmp_path / "other.jsonl"
    other.write_text('{"trace_schema": 99, "run": "x", "seed": null, "clock": "real"}\n')
    assert main(["trace", "replay", str(other)]) == 1
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 2
    assert errors[0].startswith("Error: ")
    assert "missing.jsonl" in errors[0]
    assert errors[1].startswith("Error: ")
    assert "99" in errors[1]
