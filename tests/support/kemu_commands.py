"""Running kemu as a user does, in child processes: ``kemu up`` (``KemuUp``), one-shot
commands (``kemu``), whether a broker's process still runs (``alive``), and the broker table
that ``kemu broker`` prints (``parse_status``)."""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cluster.launch.connect import ClusterFile

REPO = Path(__file__).resolve().parents[2]
READY_TIMEOUT = 30.0  # seconds for `kemu up` to print its cluster file line
STOP_TIMEOUT = 15.0
COMMAND_TIMEOUT = 60.0


_READINESS_ROW = re.compile(r"^\d+\s+\S+:\d+\s+\d+\s")


def readiness_rows(output: str) -> list[list[str]]:
    """The broker rows of ``kemu up``'s readiness table (``ID HOST:PORT PID LOG-DIR``), split
    on blanks; the log lines around it, which start with a timestamp, are not rows."""
    return [line.split() for line in output.splitlines() if _READINESS_ROW.match(line)]


class KemuUp:
    """A ``kemu up`` child process; ``start`` returns once its readiness table is out."""

    def __init__(self, tmp: Path, *extra: str) -> None:
        self.cluster_file = tmp / "cluster.json"
        port = [] if "--listeners" in extra else ["--port", "0"]  # the listener has its port
        self.args = [
            sys.executable, "-m", "cluster.cli", "up", *port, "--brokers", "3",
            "--log-dir", str(tmp / "logs"), "--cluster-file", str(self.cluster_file),
            "--parent-pid", str(os.getpid()), *extra,
        ]  # fmt: skip
        self.output = ""
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            self.args,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._read_until("Ctrl-C stops the cluster.", READY_TIMEOUT)

    def _read_until(self, marker: str, timeout: float) -> None:
        assert self.process is not None
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            while marker not in self.output:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"no {marker!r} within {timeout}s:\n{self.output}")
                if not selector.select(remaining):
                    continue
                chunk = os.read(self.process.stdout.fileno(), 65536)
                if not chunk:
                    raise AssertionError(f"kemu up exited before {marker!r}:\n{self.output}")
                self.output += chunk.decode(errors="replace")

    @property
    def store(self) -> str:
        """The store address of the readiness table's "store:" line."""
        return next(
            line.split()[1] for line in self.output.splitlines() if line.startswith("store:")
        )

    @property
    def bootstrap(self) -> str:
        return ",".join(row[1] for row in readiness_rows(self.output))

    def stop(self) -> int:
        """SIGINT, then wait for "kemu: stopped" and the exit status."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            self._read_until("kemu: stopped", STOP_TIMEOUT)
        return self.process.wait(STOP_TIMEOUT)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(STOP_TIMEOUT)
        if self.process is not None and self.process.stdout is not None:
            self.process.stdout.close()


@contextlib.contextmanager
def running_up(tmp: Path, *extra: str) -> Iterator[KemuUp]:
    """A started ``KemuUp``, killed at the end with every broker process its cluster file
    names (whatever failed, no broker process is left behind)."""
    up = KemuUp(tmp, *extra)
    pids: set[int] = set()
    try:
        up.start()
        yield up
    finally:
        if up.cluster_file.exists():
            pids = {b.pid for b in ClusterFile.read(up.cluster_file).brokers}
        up.kill()
        assert up.process is not None
        for pid in pids - {up.process.pid}:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def kemu(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cluster.cli", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited but not yet reaped by init, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


@dataclass(frozen=True)
class Row:
    """One broker line of ``kemu broker status``."""

    state: str
    pid: str
    endpoint: str
    epoch: str


def parse_status(out: str) -> tuple[dict[int, Row], int]:
    """The broker table and the controller of a ``kemu broker`` output."""
    rows: dict[int, Row] = {}
    controller = -2
    for line in out.splitlines():
        fields = line.split()
        if fields and fields[0].isdigit():
            rows[int(fields[0])] = Row(*fields[1:])
        elif line.startswith("controller: "):
            last = line.split()[-1]
            controller = int(last) if last.isdigit() else -1
    return rows, controller
