"""``kemu chaos``: exit status 0 when every run passes, 1 with the problems and the command
that reproduces a failed run, 2 with one error line for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cluster.cli.chaos import parse_seeds
from tests.support.chaos_cli import FAILING, PASSING, kemu, write


def test_passing_runs_exit_zero_with_one_line_each(tmp_path: Path) -> None:
    """Two seeds, two run directories, a summary line; the determinism check agrees."""
    scenario = write(tmp_path, "tiny.yaml", PASSING)
    out = tmp_path / "out"
    status, printed = kemu(
        ["chaos", "run", scenario, "--seeds", "3..4", "--check-determinism", "--out", str(out)]
    )
    assert status == 0, printed
    assert "[1/2] tiny seed=3 ... passed" in printed
    assert "[2/2] tiny seed=4 ... passed" in printed
    assert "2 run(s): 2 passed, 0 failed" in printed
    assert sorted(p.name for p in (out / "tiny").iterdir()) == ["seed-3", "seed-4"]
    summary = json.loads((out / "tiny" / "seed-3" / "summary.json").read_text())
    assert (summary["seed"], summary["mode"], summary["status"]) == (3, "deterministic", "passed")


def test_a_run_with_a_failed_log_dir_replays_byte_for_byte_in_another_directory(
    tmp_path: Path,
) -> None:
    """The broker's own events about a failed log dir (``partitions_offline``,
    ``log_dir_event_propagated``) name it as the log manager's do, relative to the run's
    log root: the replay, in ``seed-N.replay``, writes the same trace bytes."""
    scenario = Path(__file__).parents[2] / "scenarios" / "log-dir-failure-mid-deletion.yaml"
    out = tmp_path / "out"
    status, printed = kemu(
        ["chaos", "run", str(scenario), "--seed", "1", "--check-determinism", "--out", str(out)]
    )
    assert status == 0, printed
    trace = (out / "log-dir-failure-mid-deletion" / "seed-1" / "trace.jsonl").read_text()
    assert '"type":"partitions_offline"' in trace
    assert str(tmp_path) not in trace


def test_a_failed_run_exits_one_and_prints_how_to_reproduce_it(tmp_path: Path) -> None:
    """The failed expectation, the run directory and the exact command are printed."""
    scenario = write(tmp_path, "wrong.yaml", FAILING)
    out = tmp_path / "out"
    status, printed = kemu(
        ["chaos", "run", scenario, "--seed", "5", "--deterministic", "--out", str(out)]
    )
    assert status == 1
    assert "wrong seed=5 ... failed" in printed
    assert "expectation: steps[0] expect topic_exists never within 2s" in printed
    assert f"reproduce: kemu chaos run {scenario} --seed 5 --deterministic --out {out}" in printed
    report = out / "wrong" / "seed-5" / "report.html"
    assert f"  report: {report}\n" in printed
    assert b'"rule":"expectation"' in report.read_bytes()  # the page lists the failure
    timeline = (out / "wrong" / "seed-5" / "timeline.txt").read_text()
    assert "FAILED expectation" in timeline
    assert "outcome: failed" in timeline


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--seeds", "5..2"], "Error: --seeds must be A..B with 0 <= A <= B, not '5..2'"),
        (["--seeds", "x"], "Error: --seeds must be A..B"),
    ],
)
def test_bad_seeds_are_one_error_line(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad seed range is refused before anything runs."""
    scenario = write(tmp_path, "tiny.yaml", PASSING)
    status, _ = kemu(["chaos", "run", scenario, *args, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith(message)
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_an_invalid_scenario_is_one_error_line_naming_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing runs; the line of the mistake is given."""
    scenario = write(tmp_path, "bad.yaml", "name: bad\nsteps:\n  - crash_broker: {duration: 5}\n")
    status, _ = kemu(["chaos", "run", scenario])
    err = capsys.readouterr().err
    assert status == 2
    assert (
        err
        == f"Error: {scenario}:3: steps[0] (crash_broker): Object missing required field `broker`\n"
    )


def test_check_validates_without_running(tmp_path: Path) -> None:
    """``kemu chaos check`` loads the files and says so."""
    scenario = write(tmp_path, "tiny.yaml", PASSING)
    assert kemu(["chaos", "check", scenario]) == (0, f"{scenario}: tiny: 2 steps, valid\n")


def test_a_directory_that_is_not_a_run_is_left_alone(tmp_path: Path) -> None:
    """The runner empties an old run directory, never someone else's files."""
    scenario = write(tmp_path, "tiny.yaml", PASSING)
    precious = tmp_path / "out" / "tiny" / "seed-0" / "notes.txt"
    precious.parent.mkdir(parents=True)
    precious.write_text("keep me")
    status, printed = kemu(
        ["chaos", "run", scenario, "--deterministic", "--out", str(tmp_path / "out")]
    )
    assert status == 1
    assert "is not empty and holds no chaos run" in printed
    assert precious.read_text() == "keep me"


def test_seed_ranges() -> None:
    """``--seed N`` is one seed, ``--seeds A..B`` every seed from A to B."""
    assert parse_seeds(None, None) == [0]
    assert parse_seeds(9, None) == [9]
    assert parse_seeds(None, "2..5") == [2, 3, 4, 5]
