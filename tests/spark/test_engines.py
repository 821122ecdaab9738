"""The engine of ``kemu trace analyze|diff|replay``: the local engine by default, Spark
when a master or Spark settings are given or a run is too large; Spark options refused
with ``--engine local``; bad inputs refused in one line before any engine starts; and the
local engine's command line never imports pyspark."""

from __future__ import annotations

import re
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from cluster.cli.main import main
from cluster.trace_files import export_parquet
from protocol.trace import TraceHeader
from spark.engine import choose_engine, input_events
from spark.progress import Progress
from spark.schema import resolve_inputs

HEADER = msgspec.json.encode(TraceHeader(run="x")).decode()
EVENT = (
    '{"seq":1,"ts":0.0,"node":"broker-0","actor":"controller","kind":"event",'
    '"type":"controller_elected","corr":null,"fields":{"epoch":1}}'
)


def _run_dir(root: Path, scenario: str, seed: int, *lines: str) -> Path:
    """``root/<scenario>/seed-<seed>/trace.jsonl`` holding a header and ``lines``."""
    directory = root / scenario / f"seed-{seed}"
    directory.mkdir(parents=True)
    (directory / "trace.jsonl").write_text("\n".join([HEADER, *lines]) + "\n")
    return directory


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("Error: ")
    return line


@pytest.mark.parametrize("command", ["analyze", "replay"])
def test_a_missing_empty_or_non_trace_input_is_one_line(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing path, an empty directory, a directory of other files, a file that is not
    a trace and a trace with no event: each one error line naming it, exit 1, nothing
    written, with the default engine and with Spark named (refused before it starts)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("not a trace\n")
    text = tmp_path / "notes.jsonl"
    text.write_text("hello\n")
    no_events = _run_dir(tmp_path / "campaign", "s", 1)
    cases = {
        tmp_path / "missing": "no such trace file or directory",
        empty: "no trace.jsonl or trace.parquet under it",
        other: "no trace.jsonl or trace.parquet under it",
        text: "not a kemu trace",
        no_events: "no events after its header",
    }
    out = tmp_path / "out"
    for engine in ([], ["--engine", "spark"]):
        for path, why in cases.items():
            status = main(["trace", command, str(path), "--out", str(out), *engine])
            assert status == 1
            line = _one_error(capsys)
            assert why in line
            assert path.name in line
    assert not out.exists()


def test_a_diff_without_run_pairs_names_both_sides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two campaigns with no (scenario, seed) in common: one line listing each side's
    runs, exit 1, before any engine starts."""
    baseline, candidate = tmp_path / "baseline", tmp_path / "candidate"
    _run_dir(baseline, "create-delete", 1, EVENT)
    _run_dir(baseline, "create-delete", 2, EVENT)
    _run_dir(candidate, "create-delete", 3, EVENT)
    _run_dir(candidate, "failover", 1, EVENT)
    out = tmp_path / "out"
    for engine in ([], ["--engine", "spark"]):
        status = main(["trace", "diff", str(baseline), str(candidate), "--out", str(out), *engine])
        assert status == 1
        assert _one_error(capsys) == (
            "Error: no run pairs: no candidate run has a baseline run of the same scenario "
            "and seed (baseline: create-delete/seed-1, create-delete/seed-2; "
            "candidate: create-delete/seed-3, failover/seed-1)"
        )
    assert not out.exists()


@pytest.mark.parametrize("command", ["analyze", "replay"])
@pytest.mark.parametrize(
    ("option", "value"), [("--master", "local[1]"), ("--conf", "spark.driver.memory=1g")]
)
def test_spark_options_with_the_local_engine_are_refused(
    command: str, option: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run_dir(tmp_path, "s", 1, EVENT)
    status = main(["trace", command, str(run), "--engine", "local", option, value])
    assert status == 2
    assert _one_error(capsys) == (
        f"Error: {option} is a Spark option: it needs --engine spark, not local"
    )


def test_the_engine_chosen_without_one_named(tmp_path: Path) -> None:
    """Local unless a master or Spark settings are given, or a run holds more events
    than the limit (counted from a JSONL trace's lines, a Parquet export's metadata)."""
    run = _run_dir(tmp_path, "s", 1, *[EVENT.replace('"seq":1', f'"seq":{n}') for n in range(50)])
    parquet = tmp_path / "run.parquet"
    export_parquet(run / "trace.jsonl", parquet)
    inputs = resolve_inputs([run, parquet])
    assert [input_events(i, above=0) for i in inputs] == [50, 50]
    quiet = Progress("test", quiet=True)

    def chosen(**options: object) -> str:
        settings: dict[str, object] = {"master": None, "conf": {}, "inputs": inputs}
        settings.update(options)
        return choose_engine(None, progress=quiet, **settings)  # type: ignore[arg-type]

    assert chosen() == "local"
    assert chosen(master="local[2]") == "spark"
    assert chosen(conf={"spark.driver.memory": "1g"}) == "spark"
    assert chosen(limit=49) == "spark"
    assert chosen(inputs=inputs[1:], limit=49) == "spark"
    assert chosen(limit=50) == "local"
    assert chosen(limit=None) == "local"
    assert (
        choose_engine("local", master=None, conf={}, inputs=inputs, progress=quiet, limit=1)
        == "local"
    )


@pytest.mark.slow
def test_the_local_engine_never_imports_pyspark(campaign: Path, tmp_path: Path) -> None:
    """``kemu trace analyze|diff|replay`` of real runs in a fresh interpreter, default
    engine: the documents are written and pyspark was never imported."""
    run = campaign / "create-delete-all-up" / "seed-1"
    copy = tmp_path / "copy.jsonl"
    shutil.copy(run / "trace.jsonl", copy)
    script = (
        "import sys\n"
        "from cluster.cli.main import main\n"
        f"out = {str(tmp_path)!r}\n"
        f"run, copy = {str(run)!r}, {str(copy)!r}\n"
        "codes = [\n"
        "    main(['trace', 'analyze', run, '--out', out + '/a', '--quiet']),\n"
        "    main(['trace', 'diff', run, copy, '--out', out + '/d', '--quiet']),\n"
        "    main(['trace', 'replay', run, '--out', out + '/r']),\n"
        "]\n"
        "assert codes == [0, 0, 0], codes\n"
        "assert not [m for m in sys.modules if m.split('.')[0] == 'pyspark'], 'pyspark imported'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr
    for written in ("a/analysis.json", "a/report.html", "d/diff.json", "r/replay.json"):
        assert (tmp_path / written).is_file()


ANALYZE_CPU_BUDGET = 3.0
"""Seconds of CPU (user + system, the whole child process: interpreter start, imports,
analysis, report.html) that ``kemu trace analyze`` of one chaos run directory may take
on the default engine. On an idle machine its wall time is about its CPU time; on a
loaded one the wall time is the load's, so the budget is checked in CPU."""


@pytest.mark.slow
def test_the_default_engine_analyses_a_chaos_run_directory_within_3s_of_cpu(
    campaign: Path, tmp_path: Path
) -> None:
    """``kemu trace analyze RUN_DIR`` of a real ~1,400-event run, as a user types it, in
    a fresh interpreter: it ends well, naming the run's events, within the budget."""
    run = campaign / "create-delete-all-up" / "seed-1"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    command = ["-m", "cluster.cli", "trace", "analyze", str(run), "--out", str(tmp_path)]
    done = subprocess.run(
        [sys.executable, *command, "--quiet"],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert done.returncode == 0, done.stderr
    assert re.match(r"create-delete-all-up/seed-1: 1\d{3} events", done.stdout), done.stdout
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert cpu < ANALYZE_CPU_BUDGET, f"{cpu:.2f}s of CPU"
    assert (tmp_path / "analysis.json").is_file()
