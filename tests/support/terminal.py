"""Commands run in a pseudo-terminal (pexpect), for the tests of what kemu draws only on
a terminal: progress lines and bars."""

from __future__ import annotations

import os
import re
import sys

import pexpect

from tests.support.kemu_commands import REPO

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
"""Terminal escape sequences (colours, cursor moves), left out of what a test reads."""

TIMEOUT = 120.0
"""How long a command in the terminal may take, seconds."""


def terminal_env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "TERM": "xterm-256color",
        "KEMU_VENV": sys.prefix,  # scripts/chaos.sh runs this interpreter's kemu
    }


def _text(drawn: object) -> str:
    """What ``pexpect`` read (its ``before`` is typed loosely)."""
    assert isinstance(drawn, bytes), drawn
    return drawn.decode()


def in_a_terminal(program: str, args: list[str]) -> tuple[int | None, str]:
    """``program args`` in a pseudo-terminal (stdout and stderr both on it): its exit
    status and what it drew, escape sequences left out, each carriage return a line end."""
    child = pexpect.spawn(
        program,
        args,
        cwd=REPO,
        env=terminal_env(),
        dimensions=(40, 160),
        timeout=TIMEOUT,
        use_poll=True,  # select() fails on descriptors past 1023, as a long session has
    )
    child.expect(pexpect.EOF)
    child.close()
    return child.exitstatus, ANSI.sub("", _text(child.before)).replace("\r\n", "\n").replace(
        "\r", "\n"
    )
