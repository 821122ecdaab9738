"""README's "Real output of `bash scripts/demo.sh`" is what kemu prints: each command of
the transcript, run again against a fresh ``kemu up`` started as the demo starts it, prints
the lines the README shows, once what differs from run to run is masked (the temporary
directory, ports, pids and the width of their columns, the start-up time, record
timestamps and their CRCs, the ids of deleted logs)."""

from __future__ import annotations

import re
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest

from tests.support.kemu_commands import COMMAND_TIMEOUT, REPO, running_up
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.processes]

README = REPO / "README.md"
DELETION_TIMEOUT = 10.0  # the controller removes a deleted topic's znodes after its StopReplicas

MASKS = (
    (re.compile(r"127\.0\.0\.1:\d+"), "ADDRESS"),
    (re.compile(r"(ready in )[\d.]+s"), r"\1Ts"),
    (re.compile(r"^(\d+ +ADDRESS +)\d+", re.MULTILINE), r"\1PID"),
    (re.compile(r"CreateTime: \d+"), "CreateTime: T"),
    (re.compile(r"crc: \d+"), "crc: C"),
    (re.compile(r"\.[0-9a-f]{32}-delete"), ".UUID-delete"),
    (re.compile(r" {2,}"), " "),  # the readiness table's columns, as wide as a pid or port
)


def transcript() -> tuple[str, list[tuple[str, str]]]:
    """The README's demo directory and its (command, output) pairs, in order."""
    text = README.read_text()
    start = text.index("Real output of `bash scripts/demo.sh`")
    block_start = text.index("```\n", start) + 4
    block = text[block_start : text.index("\n```\n", block_start) + 1]
    steps: list[tuple[str, str]] = []
    for chunk in re.split(r"^\$ ", block, flags=re.MULTILINE)[1:]:
        command, _, output = chunk.partition("\n")
        steps.append((command, output.strip("\n")))
    directory = re.search(r"/tmp/kemu-demo\.\w+", block)
    assert directory is not None
    return directory.group(0), steps


def masked(text: str, directory: str) -> str:
    text = text.replace(directory, "DIR")
    for pattern, replacement in MASKS:
        text = pattern.sub(replacement, text)
    return text.strip("\n")


def shell(command: str) -> str:
    """A transcript line run by bash, ``kemu`` being this checkout's; stdout and stderr
    together, as the demo's terminal shows them."""
    done = subprocess.run(
        ["bash", "-c", f'kemu() {{ "{sys.executable}" -m cluster.cli "$@"; }}\n{command}'],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, f"$ {command}\n{done.stdout}"
    return done.stdout


@pytest.mark.timeout(300)  # 20 commands, each a Python process of its own
def test_the_readme_demo_transcript_is_what_kemu_prints(tmp_path: Path) -> None:
    """Every command of the README's demo transcript prints what the README shows."""
    readme_dir, steps = transcript()
    assert len(steps) == 20
    (up_command, up_output), *commands, (stop_command, stop_output) = steps
    assert up_command.startswith("kemu up --brokers 3 --port 0 --log-dir ")
    assert stop_command == "kill -INT <kemu up>"
    here = str(tmp_path)
    with running_up(tmp_path) as up:  # what the demo starts, its cluster file in the dir
        assert masked(up.output, here) == masked(up_output, readme_dir)
        readme_store = re.search(r"^store: (\S+)", up_output, re.MULTILINE)
        assert readme_store is not None
        for command, expected in commands:
            command = command.replace(readme_dir, here).replace(readme_store.group(1), up.store)
            if command.endswith("ls /brokers/topics"):  # after the deletion, as demo.sh:
                output = wait_until(  # once the deleted topic's znodes are gone
                    partial(shell, command),
                    lambda output: "audit.log" not in output,
                    DELETION_TIMEOUT,
                )
            else:
                output = shell(command)
            shown = masked(output, here)
            assert shown == masked(expected, readme_dir), f"$ {command}"
        before = len(up.output)
        assert up.stop() == 0
    assert masked(up.output[before:], here) == masked(stop_output, readme_dir)
