"""Who sets a process's garbage-collector thresholds: ``kemu`` run as a program and the
benchmark processes, never kemu called as a library (docs/architecture.md, "Garbage
collection"). Each case runs in a child interpreter, so that this one keeps its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cluster.gc_settings import THRESHOLDS

ROOT = Path(__file__).resolve().parents[2]

_AFTER = """
import contextlib, gc, sys
{call}
print(*gc.get_threshold())
"""


def _thresholds_after(call: str) -> tuple[int, ...]:
    done = subprocess.run(
        [sys.executable, "-c", _AFTER.format(call=call)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return tuple(int(n) for n in done.stdout.split())


def test_kemu_as_a_program_raises_the_thresholds() -> None:
    """``main()`` reads the process's own command line: it is the program."""
    call = (
        "from cluster.cli.main import main\n"
        "sys.argv = ['kemu', 'chaos', 'check', 'scenarios/create-delete-all-up.yaml']\n"
        "with contextlib.redirect_stdout(sys.stderr):\n"
        "    assert main() == 0"
    )
    assert _thresholds_after(call) == THRESHOLDS


def test_kemu_called_with_arguments_leaves_them_alone() -> None:
    """A caller that passes the arguments (a test, an embedding program) keeps its own."""
    call = (
        "from cluster.cli.main import main\n"
        "default = gc.get_threshold()\n"
        "with contextlib.redirect_stdout(sys.stderr):\n"
        "    assert main(['chaos', 'check', 'scenarios/create-delete-all-up.yaml']) == 0\n"
        "assert gc.get_threshold() == default"
    )
    assert _thresholds_after(call) != THRESHOLDS  # the interpreter's own, unchanged


def test_a_benchmark_process_raises_the_thresholds() -> None:
    call = (
        "from cluster.bench.process import exit_with\n"
        "with contextlib.suppress(SystemExit):\n"
        "    exit_with(lambda: 0)"
    )
    assert _thresholds_after(call) == THRESHOLDS
