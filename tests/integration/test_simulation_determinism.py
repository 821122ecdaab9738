"""Deterministic simulation: same scenario + same seed => byte-identical trace."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.scenario import scenario_trace

ROOT = Path(__file__).resolve().parents[2]


def test_same_seed_gives_the_same_trace_byte_for_byte() -> None:
    """Two runs with one seed (random delays, drops, duplicates, reorders, a crash) trace alike."""
    first = scenario_trace(1)
    second = scenario_trace(1)
    assert first == second
    lines = first.splitlines()
    assert len(lines) > 500
    kinds = {line.split(b'"kind":"')[1].split(b'"')[0] for line in lines}
    assert {b"send", b"deliver", b"drop", b"store", b"fault"} <= kinds
    assert b'"reason":"partition"' in first
    assert b'"path":"n3","alive":false' in first  # the crashed node's ephemeral is gone


def test_another_seed_gives_another_trace() -> None:
    """A different seed changes the random choices, so the trace differs."""
    assert scenario_trace(1) != scenario_trace(2)


def test_the_trace_does_not_depend_on_the_process_or_its_hash_seed() -> None:
    """The same seed in a fresh interpreter with another PYTHONHASHSEED gives the same bytes."""
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    other = subprocess.run(
        [sys.executable, "-m", "tests.support.scenario", "1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout
    assert other == scenario_trace(1)
