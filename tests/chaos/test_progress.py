"""The progress line of chaos campaigns (``cluster.cli.progress``): drawn on stderr only when
stderr is a terminal, counting runs done of all, the failures so far, the rate and the
time left, with the runs' own lines whole above it; nothing of it on a pipe, nor with
``--quiet``; ``scripts/chaos.sh`` draws it over its jobs' logs."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
from pathlib import Path

import pytest

from cluster.cli.progress import count_runs, run_progress
from tests.support.browser import elements
from tests.support.chaos_cli import FAILING, PASSING, write
from tests.support.kemu_commands import REPO
from tests.support.terminal import ANSI, TIMEOUT, in_a_terminal, terminal_env

LINE = re.compile(r"chaos .* (\d+)/(\d+) runs, (\d+) failed, ([-0-9.]+) runs/s ETA")


def _progress_lines(screen: str) -> list[tuple[int, int, int]]:
    return [(int(m[1]), int(m[2]), int(m[3])) for m in LINE.finditer(screen)]


def test_runs_are_counted_from_the_lines_kemu_chaos_run_prints() -> None:
    """A run counts once its status is printed; every status but passed is a failure."""
    text = (
        "[1/4] tiny seed=1 ... passed (10 events, 1.0s simulated in 0.10s (10:1))\n"
        "[2/4] tiny seed=2 ... failed (12 events, 2.0s simulated in 0.20s (10:1))\n"
        "  [topic_exists] never: not within 2s\n"
        "[3/4] other seed=1 ... error\n"
        "  the store went away\n"
        "[4/4] other seed=2 ... "
    )
    assert count_runs(text) == (3, 2)
    assert count_runs("") == (0, 0)


def _read_available(master: int) -> bytes:
    """Everything written to the terminal so far: a pty hands it over in pieces (one
    ``read`` may return only the first under load), so read until nothing is left."""
    chunks = []
    poller = select.poll()  # not select(): it fails on descriptors past 1023
    poller.register(master, select.POLLIN)
    while poller.poll(0):
        chunk = os.read(master, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def test_lines_written_to_stderr_meanwhile_are_printed_whole_above_the_line() -> None:
    """A log line written to stderr while the line is drawn on a terminal is printed on
    a line of its own, the progress line cleared first and drawn again after it."""
    master, replica = os.openpty()
    stderr = sys.stderr
    try:
        with open(replica, "w", closefd=False) as terminal:
            with run_progress(3, label="chaos", stream=terminal) as line:
                line.advance(failed=True)
                sys.stderr.write("WARNING broker 1: a log line\n")
                sys.stderr.flush()
            terminal.flush()
        drawn = ANSI.sub("", _read_available(master).decode())
    finally:
        os.close(master)
        os.close(replica)
    rows = drawn.replace("\r\n", "\n").replace("\r", "\n").splitlines()
    assert "WARNING broker 1: a log line" in rows, drawn
    assert any(LINE.search(row) for row in rows), drawn
    assert sys.stderr is stderr  # given back at the end


@pytest.mark.slow  # four scenario runs in child processes, three times
@pytest.mark.processes
def test_kemu_chaos_run_draws_progress_only_on_a_terminal(tmp_path: Path) -> None:
    """In a terminal, the line counts up to 4/4 runs with the 2 failures, and the run
    lines are printed whole; on pipes stderr stays empty and stdout holds only the run
    lines; with --quiet in a terminal, no progress line."""
    scenarios = [write(tmp_path, "tiny.yaml", PASSING), write(tmp_path, "wrong.yaml", FAILING)]
    argv = [
        "-m", "cluster.cli", "chaos", "run", *scenarios, "--seeds", "1..2", "--deterministic",
        "--out", str(tmp_path / "out"),
    ]  # fmt: skip

    status, screen = in_a_terminal(sys.executable, argv)
    assert status == 1, screen
    counts = _progress_lines(screen)
    assert counts[-1] == (4, 4, 2), screen
    assert [done for done, _, _ in counts] == sorted(done for done, _, _ in counts)
    lines = screen.splitlines()
    assert any(line.startswith("[2/4] tiny seed=2 ... passed (") for line in lines), screen
    assert any(line.startswith("[4/4] wrong seed=2 ... failed (") for line in lines), screen
    assert "4 run(s): 2 passed, 2 failed" in screen

    piped = subprocess.run(
        [sys.executable, *argv], cwd=REPO, env=terminal_env(), capture_output=True, text=True,
        timeout=TIMEOUT, check=False,
    )  # fmt: skip
    assert piped.returncode == 1
    assert piped.stderr == ""
    assert "runs/s" not in piped.stdout
    assert "\x1b" not in piped.stdout
    assert "[4/4] wrong seed=2 ... failed" in piped.stdout

    status, screen = in_a_terminal(sys.executable, [*argv, "--quiet"])
    assert status == 1
    assert _progress_lines(screen) == []
    assert "4 run(s): 2 passed, 2 failed" in screen


@pytest.mark.slow  # a campaign of scripts/chaos.sh, twice
@pytest.mark.processes
def test_the_campaign_script_draws_progress_over_its_jobs(tmp_path: Path) -> None:
    """scripts/chaos.sh in a terminal counts the runs of both its jobs up to 4/4 with the
    2 failures, then prints its summary; on a pipe, the summary alone."""
    scenarios = [write(tmp_path, "tiny.yaml", PASSING), write(tmp_path, "wrong.yaml", FAILING)]
    argv = [
        "scripts/chaos.sh", "--seeds", "1..2", "--jobs", "2", "--out", str(tmp_path / "out"),
        *scenarios,
    ]  # fmt: skip
    status, screen = in_a_terminal("bash", argv)
    assert status == 1, screen
    assert _progress_lines(screen)[-1] == (4, 4, 2), screen
    assert "2 scenario(s), 4 run(s): 2 passed, 2 failed" in screen

    piped = subprocess.run(
        ["bash", *argv], cwd=REPO, env=terminal_env(), capture_output=True, text=True,
        timeout=TIMEOUT, check=False,
    )  # fmt: skip
    assert piped.returncode == 1
    assert piped.stderr == ""
    assert "runs/s" not in piped.stdout
    assert "2 scenario(s), 4 run(s): 2 passed, 2 failed" in piped.stdout
    # the campaign page, written once the passed runs' directories are gone: every run
    # is a cell, only the failed ones link to a report
    page = tmp_path / "out" / "campaign.html"
    assert f"campaign page: {page}" in piped.stdout
    drawn = elements(page.read_text())
    cells = [e for e in drawn if "cell" in e.classes and "data-seed" in e.attrs]
    assert [(e.tag, e.attrs["data-status"], e.attrs.get("href")) for e in cells] == [
        ("span", "passed", None), ("span", "passed", None),
        ("a", "failed", "wrong/seed-1/report.html"), ("a", "failed", "wrong/seed-2/report.html"),
    ]  # fmt: skip
