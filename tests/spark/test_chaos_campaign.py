"""``kemu chaos campaign``: every (scenario, seed) run a Spark task (here on the tests'
local[1] session, which the command joins). Each run directory is the one ``kemu chaos
run --deterministic`` writes for the same scenario and seed, and so is the campaign
page; a run that cannot be done is that run's error, not the campaign's end."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import msgspec
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from actors.runtime.code_identity import different_code, recorded_code
from cluster.chaos.loader import ScenarioError, parse_scenario
from cluster.chaos.runner import RunResult
from cluster.chaos.spark_campaign import CampaignTask, campaign_lock, run_batch
from cluster.cli.main import main
from tests.support.traces import assert_same_trace

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
FILES = [str(ROOT / "scenarios" / f"{n}.yaml") for n in ("create-delete-all-up", "delete-disabled")]
WALL = re.compile(rb'<span id="wall-time">[^<]*</span>')
# what differs between two runs of the same seed: the wall clock (log lines' times)
WALL_CLOCK_FILES = {"server.log", "controller.log", "state-change.log"}


def _files(root: Path) -> set[Path]:
    return {p.relative_to(root) for p in root.rglob("*") if p.is_file()}


def test_campaign_runs_are_the_local_runs_byte_for_byte(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "campaign"
    status = main(["chaos", "campaign", *FILES, "--seeds", "1..2", "--out", str(out)])
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert re.search(r"^create-delete-all-up +2/2 passed$", printed, re.M)
    assert re.search(r"^delete-disabled +2/2 passed$", printed, re.M)
    assert "2 scenario(s), 4 run(s): 4 passed, 0 failed" in printed
    assert f"campaign: {out / 'campaign.html'}" in printed
    on_spark = tmp_path / "on-spark"
    out.rename(on_spark)

    # the same runs, locally, into the same path (summaries name their run directory)
    assert main(["chaos", "run", *FILES, "--seeds", "1..2", "--deterministic",
                 "--out", str(out), "--quiet"]) == 0  # fmt: skip
    spark_files, local_files = _files(on_spark), _files(out)
    parquet = {p for p in spark_files if p.name == "trace.parquet"}
    assert len(parquet) == 4
    # Broker log files exist where the process configured logging with them: an executor
    # does; this test's process may have been configured without them by an earlier test.
    logs = {p for p in spark_files | local_files if p.name in WALL_CLOCK_FILES}
    assert spark_files - parquet - logs == local_files - logs
    for name in sorted(local_files):
        mine, theirs = (on_spark / name).read_bytes(), (out / name).read_bytes()
        if name.name in WALL_CLOCK_FILES:
            continue
        if name.name == "summary.json":
            a, b = json.loads(mine), json.loads(theirs)
            assert a.pop("wall_seconds") > 0
            assert b.pop("wall_seconds") > 0
            code = different_code(recorded_code(on_spark / name), recorded_code(out / name))
            assert code is None, code  # the executor ran this process's kemu
            assert a == b, name
        elif name.name == "trace.jsonl":
            assert_same_trace(on_spark / name, out / name)  # says if other code made it
        elif name.name == "campaign.html":
            assert WALL.sub(b"", mine) == WALL.sub(b"", theirs)
        else:
            assert mine == theirs, name
    for name in parquet:
        summary = json.loads((on_spark / name.parent / "summary.json").read_text())
        assert pq.read_metadata(on_spark / name).num_rows == summary["events"]


def test_a_run_that_cannot_be_done_fails_alone(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "campaign"
    foreign = out / "delete-disabled" / "seed-2" / "notes.txt"
    foreign.parent.mkdir(parents=True)
    foreign.write_text("not a run\n")
    status = main(["chaos", "campaign", *FILES, "--seeds", "1..2", "--out", str(out)])
    printed = capsys.readouterr().out
    assert status == 1
    assert re.search(r"^create-delete-all-up +2/2 passed$", printed, re.M)
    assert re.search(r"^delete-disabled +1/2 passed  FAILED$", printed, re.M)
    assert "4 run(s): 3 passed, 1 failed" in printed
    assert "delete-disabled seed=2: error" in printed
    assert "holds no chaos run: not touching it" in printed
    assert f"reproduce: kemu chaos run {FILES[1]} --seed 2 --deterministic --out {out}" in printed
    assert foreign.read_text() == "not a run\n"  # untouched
    page = (out / "campaign.html").read_text()
    assert 'data-seed="2" data-status="error"' in page


def test_an_unwritable_out_dir_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    status = main(["chaos", "campaign", FILES[0], "--seeds", "1..1", "--out", str(blocker / "x")])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 1
    assert err == [f"Error: --out {blocker / 'x'}: cannot write there: Not a directory"]


def test_an_unreachable_master_is_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cluster.launch.ports import free_ports

    (port,) = free_ports(1, "127.0.0.1")
    out = tmp_path / "campaign"
    status = main(["chaos", "campaign", FILES[0], "--seeds", "1..1", "--out", str(out),
                   "--master", f"spark://127.0.0.1:{port}"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 1
    assert err == [
        f"Error: cannot reach the Spark master at spark://127.0.0.1:{port}:"
        " nothing accepts connections"
    ]
    assert not out.exists()


def test_bad_seeds_and_real_mode_scenarios_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "campaign"
    assert main(["chaos", "campaign", FILES[0], "--seeds", "3..1", "--out", str(out)]) == 2
    assert capsys.readouterr().err.startswith("Error: --seeds must be A..B")
    real = sorted((ROOT / "scenarios" / "real").glob("*.yaml"))[0]
    assert main(["chaos", "campaign", str(real), "--seeds", "1..1", "--out", str(out)]) == 2
    assert "deterministic mode runs in one process" in capsys.readouterr().err
    assert not out.exists()


def test_a_run_directory_no_executor_can_write_fails_the_job_in_one_line(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "campaign"
    out.mkdir()
    (out / "delete-disabled").write_text("")  # a file where the scenario's runs go
    status = main(["chaos", "campaign", FILES[1], "--seeds", "1..1", "--out", str(out)])
    captured = capsys.readouterr()
    assert status == 1
    assert captured.err.strip().splitlines()[-1:] == [
        f"Error: a run could not be written: {socket.gethostname()} cannot write"
        f" {out / 'delete-disabled'}: File exists"
    ]
    assert "Traceback" not in captured.err
    assert captured.out == ""
    assert not (out / "campaign.html").exists()


def test_an_exception_outside_a_runs_boundary_is_that_runs_error_and_the_task_goes_on(
    spark: SparkSession, tmp_path: Path
) -> None:
    """What an executor whose kemu is another version than the driver's does with a
    scenario it cannot read: ``parse_scenario`` raises in the task's forked runs' process,
    before the run (``run_scenario``) starts. That run is an error with the exception and
    the command that reproduces it; the same task's next run passes."""
    out = tmp_path / "campaign"
    text = Path(FILES[1]).read_text()
    newer = text + "from_a_newer_kemu: true\n"  # a field this kemu does not know
    source = "scenarios/newer.yaml"
    with pytest.raises(ScenarioError) as raised:
        parse_scenario(newer, source=source)
    with campaign_lock(out) as token:
        tasks = [
            CampaignTask(source=source, text=newer, seed=1, out=str(out), campaign=token),
            CampaignTask(source=FILES[1], text=text, seed=1, out=str(out), campaign=token),
        ]
        batch = [(index, msgspec.json.encode(task)) for index, task in enumerate(tasks)]
        answers = spark.sparkContext.parallelize([batch], 1).flatMap(run_batch).collect()
    failed, passed = (msgspec.json.decode(a, type=RunResult) for _, a in sorted(answers))
    assert failed.status == "error"
    assert failed.error == (
        f"the run's process failed outside the run: ScenarioError: {raised.value}"
    )
    assert (failed.scenario, failed.seed) == ("newer", 1)
    assert failed.reproduce == f"kemu chaos run {source} --seed 1 --deterministic --out {out}"
    assert passed.status == "passed", passed.error
    assert (out / "delete-disabled" / "seed-1" / "trace.parquet").is_file()
    # no run directory of the failed run, no staging directory, no lock file left
    assert [p.name for p in out.iterdir()] == ["delete-disabled"]
    assert [p.name for p in (out / "delete-disabled").iterdir()] == ["seed-1"]
