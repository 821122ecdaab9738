"""Subprocesses of the tests run the kemu checkout the tests import, and a trace
comparison that fails after that checkout changed says so (``tests.support.source``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import tests.support.source
from tests.support.source import KEMU_ROOT
from tests.support.traces import assert_same_trace


def test_a_fresh_interpreter_started_elsewhere_imports_this_checkout(tmp_path: Path) -> None:
    """Run from another directory (as Spark runs its executors from their work directory),
    with the session's environment: kemu's packages come from the checkout this process
    imported, not from whatever an editable install of the virtualenv points at."""
    done = subprocess.run(
        [sys.executable, "-c",
         "import actors, cluster, protocol, spark\n"
         "for m in (actors, cluster, protocol, spark): print(m.__file__)"],
        cwd=tmp_path, capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    files = [Path(line) for line in done.stdout.splitlines()]
    assert len(files) == 4
    assert all(f.resolve().parents[1] == KEMU_ROOT for f in files), files


def _traces(tmp_path: Path) -> tuple[Path, Path]:
    got, want = tmp_path / "got.jsonl", tmp_path / "want.jsonl"
    got.write_bytes(b'{"seq":0}\n{"seq":1,"node":"store"}\n')
    want.write_bytes(b'{"seq":0}\n{"seq":1,"node":"broker-0"}\n')
    return got, want


def test_a_differing_trace_names_its_first_differing_line(tmp_path: Path) -> None:
    got, want = _traces(tmp_path)
    with pytest.raises(AssertionError) as failure:
        assert_same_trace(got, want)
    message = str(failure.value)
    assert "at line 2:" in message
    assert '"node":"store"' in message
    assert '"node":"broker-0"' in message
    assert "changed since the test session started" not in message


def test_a_differing_trace_after_the_source_changed_says_the_code_may_differ(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    got, want = _traces(tmp_path)
    # as if the checkout had been rebased since the session took its fingerprint
    monkeypatch.setattr(tests.support.source, "session_fingerprint", "0" * 64)
    with pytest.raises(AssertionError) as failure:
        assert_same_trace(got, want)
    message = str(failure.value)
    assert message.startswith(f"kemu's source under {KEMU_ROOT} changed since the test")
    assert "at line 2:" in message
