"""The servers under fuzzing: a ``kemu up`` in a child process, started as a user starts it
(``--port 0``, its own log dir and cluster file), so that a native abort or a hang is a
failure the fuzzer observes, not one it suffers. Its output goes to a file (a chatty child
never blocks on a full pipe); its addresses, pids and secret come from its cluster file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from cluster.launch.connect import ClusterFile, parse_host_port

READY_MARKER: Final = "Ctrl-C stops the cluster."  # the last line of kemu up's readiness table
READY_TIMEOUT: Final = 60.0  # seconds for a child to get ready, on a loaded machine too
STOP_TIMEOUT: Final = 15.0

Address = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Endpoints:
    """What the fuzzer needs to reach a running ``kemu up``."""

    kafka: Address  # broker 0's Kafka listener
    store: Address  # the embedded store server
    control: Address  # the launcher's control endpoint
    internal: Address | None  # broker 0's internal port (``--processes`` only)
    metrics: Address | None  # the launcher's Prometheus endpoint (None: not in the file)
    launcher_pid: int
    broker_pid: int  # the process holding broker 0 (the launcher's unless ``--processes``)
    secret: bytes


class KemuServer:
    """One ``kemu up --brokers 1`` child process in a new directory under ``parent``."""

    def __init__(self, parent: Path, name: str, *, processes: bool) -> None:
        parent.mkdir(parents=True, exist_ok=True)
        self.workdir = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=parent))
        self.processes = processes
        self.output_file = self.workdir / "output.txt"
        self.cluster_file = self.workdir / "cluster.json"
        self.process: subprocess.Popen[bytes] | None = None
        self._endpoints: Endpoints | None = None

    def start(self) -> Endpoints:
        """Start the child and wait for its readiness table; ``RuntimeError`` if it exits
        or is not ready in time."""
        args = [
            sys.executable, "-m", "cluster.cli", "up", "--port", "0", "--brokers", "1",
            "--log-dir", str(self.workdir / "logs"), "--cluster-file", str(self.cluster_file),
            "--parent-pid", str(os.getpid()),  # it stops if the fuzzer is killed
        ]  # fmt: skip
        if self.processes:
            args.append("--processes")
        with self.output_file.open("wb") as output:
            self.process = subprocess.Popen(  # noqa: S603 - our own CLI, arguments built here
                args,
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + READY_TIMEOUT
        while READY_MARKER not in self.output():
            if self.process.poll() is not None:
                raise RuntimeError(f"kemu up exited before it was ready:\n{self.output()}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"kemu up not ready within {READY_TIMEOUT:g} s")
            time.sleep(0.05)  # polling a child's output file for its readiness line
        self._endpoints = _endpoints(ClusterFile.read(self.cluster_file))
        return self._endpoints

    @property
    def endpoints(self) -> Endpoints:
        assert self._endpoints is not None, "the server was not started"
        return self._endpoints

    def output(self) -> str:
        if not self.output_file.exists():
            return ""
        return self.output_file.read_text(errors="replace")

    def exit_status(self, pid: int) -> str | None:
        """Why the process ``pid`` (the launcher or a broker process) no longer runs, or
        None while it does."""
        assert self.process is not None
        if pid == self.process.pid:
            code = self.process.poll()
            return None if code is None else f"exited with status {code}"
        return None if _running(pid) else "is gone"

    def stop(self) -> None:
        """SIGINT and wait (kemu up stops its brokers); SIGKILL after ``STOP_TIMEOUT``."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL the child's whole session (its broker processes too)."""
        if self.process is None:
            return
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(STOP_TIMEOUT)


def rss_bytes(pid: int) -> int:
    """The resident set size of a process (``VmRSS``), 0 once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return 0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _running(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return "\nState:\tZ" not in status


def _endpoints(info: ClusterFile) -> Endpoints:
    broker = info.brokers[0]
    internal = None
    if info.processes:
        internal = ("127.0.0.1", _network_port(broker.pid))
    return Endpoints(
        kafka=(broker.host, broker.port),
        store=parse_host_port(info.store.removeprefix("embedded://")),
        control=parse_host_port(info.control),
        internal=internal,
        metrics=parse_host_port(info.metrics) if info.metrics else None,
        launcher_pid=info.pid,
        broker_pid=broker.pid,
        secret=info.secret_bytes,
    )


def _network_port(pid: int) -> int:
    """A broker process's internal port, from its command line (``--network-port``)."""
    args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return int(args[args.index(b"--network-port") + 1])
