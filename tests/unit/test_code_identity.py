"""A run's summary names the kemu code that made it: the same code gives the same
identity in every process, a copy of the source with one file changed gives another,
and a comparison of two runs made by different code (a trace diff, a replay that
diverges) says so."""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from actors.runtime.code_identity import (
    PACKAGES,
    TRACE_DEPENDENCIES,
    CodeIdentity,
    code_identity,
    different_code,
    recorded_code,
    source_digest,
)
from cluster.cli.main import main
from spark.replay import replay_command
from tests.support.planted import no_delete_phase
from tests.support.source import KEMU_ROOT
from tests.support.traces import assert_same_trace

SCENARIO = KEMU_ROOT / "scenarios" / "create-delete-all-up.yaml"

PRINT_IDENTITY = (
    "import sys, actors, msgspec\n"
    "from actors.runtime.code_identity import code_identity\n"
    "print(actors.__file__, file=sys.stderr)\n"
    "sys.stdout.write(msgspec.json.encode(code_identity()).decode())\n"
)


def _python(root: Path, *args: str, hash_seed: str = "0") -> subprocess.CompletedProcess[str]:
    """``python args`` in a fresh interpreter that imports kemu from ``root``."""
    env = {**os.environ, "PYTHONPATH": str(root), "PYTHONHASHSEED": hash_seed}
    return subprocess.run(
        [sys.executable, *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )


def _identity_in(root: Path, *, hash_seed: str = "0") -> CodeIdentity:
    done = _python(root, "-c", PRINT_IDENTITY, hash_seed=hash_seed)
    assert done.stderr.strip() == str(root / "actors" / "__init__.py")  # that copy ran
    return msgspec.json.decode(done.stdout, type=CodeIdentity)


def _copy_source(to: Path) -> Path:
    """kemu's packages (and its scenarios) copied under ``to``, without bytecode."""
    for package in PACKAGES:
        shutil.copytree(
            KEMU_ROOT / package, to / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copytree(KEMU_ROOT / "scenarios", to / "scenarios")
    return to


def test_the_same_code_has_the_same_identity_in_every_process(tmp_path: Path) -> None:
    """Fresh interpreters under two hash seeds, and a second copy of the same files in
    another directory, name the same code alike, byte for byte; this process computes
    its own identity once. (Copies: the checkout may change under a long session.)"""
    assert code_identity() is code_identity()
    first = _copy_source(tmp_path / "one")
    one = _identity_in(first, hash_seed="1")
    two = _identity_in(first, hash_seed="2")
    elsewhere = _identity_in(_copy_source(tmp_path / "two" / "kemu"))
    assert msgspec.json.encode(one) == msgspec.json.encode(two) == msgspec.json.encode(elsewhere)
    assert one.source_sha256 == source_digest({p: first / p for p in PACKAGES})
    assert one.commit is None  # not a git checkout
    assert different_code(one, elsewhere) is None


def test_a_changed_source_file_gives_another_identity(tmp_path: Path) -> None:
    """One line added to one file of a copy makes it other code, and the sentence saying
    so names both."""
    copy = _copy_source(tmp_path / "kemu")
    before = _identity_in(copy)
    errors = copy / "protocol" / "errors.py"
    errors.write_text(errors.read_text() + "# one more line\n")
    after = _identity_in(copy)
    assert after.version == before.version
    assert after.source_sha256 != before.source_sha256
    assert after.source_sha256 == source_digest({p: copy / p for p in PACKAGES})
    assert different_code(after, before) == (
        f"the runs were made by different code: kemu {after.version} source"
        f" {after.source_sha256[:12]} (no clean git commit) vs kemu {before.version}"
        f" source {before.source_sha256[:12]} (no clean git commit)"
    )


def test_the_identity_names_the_runtime_a_trace_depends_on() -> None:
    """The identity carries the versions of Python, anyio and msgspec this process runs;
    the same source on another version of one of them is other code, and the sentence
    names the versions that differ; a summary from before the field existed is compared
    on its source alone."""
    here = code_identity()
    assert here.runtime == {
        "python": platform.python_version(),
        **{name: importlib.metadata.version(name) for name in TRACE_DEPENDENCIES},
    }
    assert set(TRACE_DEPENDENCIES) >= {"anyio", "msgspec"}
    older = msgspec.structs.replace(here, runtime={**here.runtime, "anyio": "4.0.0"})
    assert different_code(here, older) == (
        f"the runs were made by different code: {here.label()} with anyio"
        f" {here.runtime['anyio']} vs {here.label()} with anyio 4.0.0"
    )
    assert different_code(here, msgspec.structs.replace(here, runtime=dict(here.runtime))) is None
    unknown = msgspec.structs.replace(here, runtime=None)
    assert different_code(here, unknown) is None
    decoded = msgspec.json.decode(
        b'{"version":"%s","source_sha256":"%s"}'
        % (here.version.encode(), here.source_sha256.encode()),
        type=CodeIdentity,
    )
    assert decoded.runtime is None
    assert different_code(decoded, here) is None


@pytest.mark.slow  # two chaos runs and a trace diff: about 25 s on a loaded machine
def test_a_trace_diff_of_runs_made_by_different_code_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same scenario and seed run by this code and by a copy with a comment added:
    the traces are the same bytes, each summary names the code that made it, and
    ``kemu trace diff`` of the two runs says they were made by different code."""
    copy = _copy_source(tmp_path / "kemu")
    errors = copy / "protocol" / "errors.py"
    errors.write_text(errors.read_text() + "# one more line\n")
    run = ("chaos", "run", str(SCENARIO), "--seed", "1", "--deterministic", "--quiet")
    _python(copy, "-m", "cluster.cli", "--log-level", "CRITICAL", *run, "--out", "elsewhere")
    assert main([*run, "--out", str(tmp_path / "here")]) == 0
    there_dir = copy / "elsewhere" / "create-delete-all-up" / "seed-1"
    here_dir = tmp_path / "here" / "create-delete-all-up" / "seed-1"

    assert_same_trace(there_dir / "trace.jsonl", here_dir / "trace.jsonl")
    there, here = (
        recorded_code(there_dir / "summary.json"),
        recorded_code(here_dir / "summary.json"),
    )
    assert here == code_identity()
    assert there is not None
    assert there.source_sha256 != here.source_sha256
    summary = json.loads((there_dir / "summary.json").read_text())
    assert summary["code"] == msgspec.to_builtins(there)

    capsys.readouterr()
    out = tmp_path / "diff"
    assert main(["trace", "diff", str(there_dir), str(here_dir), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"  {different_code(there, here)}\n" in printed
    assert "the runs were made by different code: kemu" in printed


@pytest.mark.slow  # one chaos run and three local replays: about 15 s on a loaded machine
def test_a_replay_that_diverges_on_a_run_made_by_other_code_says_so(tmp_path: Path) -> None:
    """``kemu trace replay`` of a run whose summary names other code than the replaying
    code's: a divergence is followed by the line naming both codes; the same divergence
    on a run made by this code, and a match on the other code's run, say nothing of it."""
    run = ("chaos", "run", str(SCENARIO), "--seed", "1", "--deterministic", "--quiet")
    assert main([*run, "--out", str(tmp_path / "here")]) == 0
    here = tmp_path / "here" / "create-delete-all-up" / "seed-1"
    other = tmp_path / "other" / "create-delete-all-up" / "seed-1"
    shutil.copytree(here, other)
    summary = json.loads((other / "summary.json").read_text())
    summary["code"]["source_sha256"] = "0" * 64  # as if another checkout had made it
    (other / "summary.json").write_text(json.dumps(summary))
    there = recorded_code(other / "summary.json")
    assert there is not None
    note = different_code(there, code_identity())
    assert note is not None
    assert note.startswith("the runs were made by different code: kemu ")

    def replay(run_dir: Path, *, changed: bool) -> tuple[int, list[str]]:
        lines: list[str] = []
        code = replay_command(
            [str(run_dir)],
            echo=lines.append,
            engine="local",
            patch=no_delete_phase if changed else None,
        )
        return code, lines

    code, lines = replay(other, changed=True)
    assert code == 1
    assert lines[0].startswith("DIVERGED  create-delete-all-up/seed-1: ")
    assert lines[1] == f"  {note}"
    assert lines[2] == "1 runs: 0 match, 1 diverged, 0 could not be replayed"

    code, lines = replay(here, changed=True)  # the same divergence, made by this code
    assert code == 1
    assert lines[0].startswith("DIVERGED  ")
    assert lines[1] == "1 runs: 0 match, 1 diverged, 0 could not be replayed"

    code, lines = replay(other, changed=False)  # other code, but no divergence
    assert (code, lines[0].split()[0], len(lines)) == (0, "MATCH", 2)
