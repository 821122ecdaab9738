"""The progress lines of the benches' long rows (``cluster.bench``): each row run in a
child process draws its own line on its stderr when that is a terminal (the suite passes
its terminal through), counting what the row waits for; on a pipe, or with ``--quiet``,
nothing but the row's JSON result."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from cluster.bench.chaos import CampaignResult
from cluster.bench.deletion import PHASES, DeletionResult
from tests.support.bench_scenarios import FAILING, PASSING, write_scenario
from tests.support.terminal import TIMEOUT, in_a_terminal, terminal_env

COUNTED = re.compile(
    r"^(\[\d+\](?: [a-z]+)*) [━╺╸]+ (\d+)/(\d+) (\w+), [-0-9.,]+ \w+/s ETA", re.MULTILINE
)


def _counts(screen: str) -> list[tuple[str, int, int, str]]:
    return [(m[1], int(m[2]), int(m[3]), m[4]) for m in COUNTED.finditer(screen)]


def _json_of(argv: list[str], kind: type[msgspec.Struct]) -> tuple[str, object]:
    piped = subprocess.run(
        [sys.executable, *argv], env=terminal_env(), capture_output=True, text=True,
        timeout=TIMEOUT, check=True,
    )  # fmt: skip
    return piped.stderr, msgspec.json.decode(piped.stdout.splitlines()[-1], type=kind)


@pytest.mark.slow  # a campaign of four runs in a child process, three times
@pytest.mark.processes
def test_the_campaign_row_counts_its_runs_on_a_terminal_only(tmp_path: Path) -> None:
    """Row [7] in a terminal: its line counts the runs up to 4/4; on a pipe its stderr
    stays empty and its stdout is the JSON result; with --quiet in a terminal, no line."""
    write_scenario(tmp_path, "a.yaml", PASSING)
    write_scenario(tmp_path, "b.yaml", FAILING)
    argv = ["-m", "cluster.bench.chaos", "--seeds", "2", "--scenarios", str(tmp_path)]

    status, screen = in_a_terminal(sys.executable, argv)
    assert status == 0, screen
    counts = _counts(screen)
    assert counts, screen
    assert counts[-1] == ("[7]", 4, 4, "runs"), screen
    assert [done for _, done, _, _ in counts] == sorted(done for _, done, _, _ in counts)

    stderr, result = _json_of(argv, CampaignResult)
    assert stderr == ""
    assert isinstance(result, CampaignResult)
    assert (result.runs, result.passed) == (4, 2)

    status, screen = in_a_terminal(sys.executable, [*argv, "--quiet"])
    assert status == 0
    assert _counts(screen) == []
    assert '"runs":4' in screen


@pytest.mark.slow  # a three-broker cluster in a child process, twice
@pytest.mark.processes
def test_the_deletion_row_counts_its_phases_on_a_terminal_only() -> None:
    """Row [11] in a terminal: its line counts the phases it waits for, of all six (the
    last ones may end within one refresh, the line cleared before they are drawn); on a
    pipe, no line (the brokers' warnings are the only stderr)."""
    argv = ["-m", "cluster.bench.deletion", "--topics", "20", "--partitions", "2"]

    status, screen = in_a_terminal(sys.executable, argv)
    assert status == 0, screen
    counts = _counts(screen)
    assert {(label, total, unit) for label, _, total, unit in counts} == {
        ("[11] embedded", PHASES, "phases")
    }, screen
    # (a frame redrawn under a broker's warning may show the count of one refresh before)
    assert max(done for _, done, _, _ in counts) >= 3, screen

    stderr, result = _json_of(argv, DeletionResult)
    assert "phases" not in stderr
    assert "\x1b" not in stderr
    assert isinstance(result, DeletionResult)
    assert result.partitions == 40
