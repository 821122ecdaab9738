"""The controller's behaviour is deterministic: same scenario, same trace, byte for byte."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.controller_scenario import scenario_trace

ROOT = Path(__file__).resolve().parents[2]


def test_the_controller_scenario_traces_identically_across_hash_seeds() -> None:
    """Two runs (one in a fresh interpreter with another PYTHONHASHSEED) give the same bytes."""
    first = scenario_trace()
    assert b'"controller_elected"' in first
    assert b'"transition"' in first
    env = {**os.environ, "PYTHONHASHSEED": "4242"}
    other = subprocess.run(
        [sys.executable, "-m", "tests.support.controller_scenario"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout
    trace_lines = b"".join(
        line for line in other.splitlines(keepends=True) if line.startswith(b'{"seq"')
    )  # structlog's console lines go to stdout too
    assert trace_lines == first
