"""``kemu broker run`` children for tests: one broker process each, on a loopback address
of its own (Linux routes all of 127.0.0.0/8 to ``lo``: 127.0.0.2, .3, .4 stand for three
hosts), with its own log dir, joining the cluster a real ZooKeeper holds.

``BrokerRun.start`` returns once the broker printed its ready line (it has registered);
its output goes to a file (a chatty child never blocks on a full pipe). ``terminate``
is SIGTERM (controlled shutdown) and returns the exit status; ``kill`` is SIGKILL;
``freeze``/``thaw`` are SIGSTOP/SIGCONT: the host stops answering, then comes back.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from cluster.launch.broker_process import SECRET_ENV

REPO = Path(__file__).resolve().parents[2]
READY_TIMEOUT = 60.0  # a loaded machine: the interpreter's start, then ZooKeeper's session
STOP_TIMEOUT = 60.0  # a controlled shutdown retries while the controller moves leaders
SECRET = "6b656d752d6272", "6f6b65722d72756e2d7465737421"  # one test secret, in two halves
_READY = re.compile(r"^broker (\d+) ready pid (\d+) port (\d+)$", re.MULTILINE)


def run_command(
    broker_id: int,
    zookeeper: str,
    host: str,
    log_dir: Path,
    *,
    port: int = 0,
    config: dict[str, str] | None = None,
    log_level: str = "warning",
) -> list[str]:
    """The command line of ``kemu broker run`` (what docs/scale-out.md shows)."""
    args = [
        sys.executable, "-m", "cluster.cli", "--log-level", log_level, "broker", "run",
        "--id", str(broker_id),
        "--zookeeper", zookeeper,
        "--listeners", f"PLAINTEXT://{host}:{port}",
        "--log-dir", str(log_dir),
    ]  # fmt: skip
    for key, value in (config or {}).items():
        args += ["--config", f"{key}={value}"]
    return args


def run_env() -> dict[str, str]:
    """The environment of a broker child: the cluster's secret, the same for all."""
    return {**os.environ, SECRET_ENV: "".join(SECRET), "PYTHONPATH": str(REPO)}


class BrokerRun:
    """One ``kemu broker run`` child process."""

    def __init__(
        self,
        broker_id: int,
        zookeeper: str,
        host: str,
        log_dir: Path,
        output: Path,
        *,
        config: dict[str, str] | None = None,
        log_level: str = "warning",
        port: int = 0,
    ) -> None:
        self.broker_id = broker_id
        self.host = host
        self.log_dir = log_dir
        self.output_file = output
        self.args = run_command(
            broker_id, zookeeper, host, log_dir, port=port, config=config, log_level=log_level
        )
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def output(self) -> str:
        return self.output_file.read_text(errors="replace") if self.output_file.exists() else ""

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        """Start the child; return once it is registered (its ready line)."""
        self.launch()
        self.wait_ready()

    def launch(self) -> None:
        """Start the child (``wait_ready`` waits for it: start several, then wait)."""
        with self.output_file.open("ab") as output:
            self.process = subprocess.Popen(
                self.args,
                cwd=REPO,
                env=run_env(),
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def wait_ready(self) -> None:
        """Until the child printed its ready line (it has registered)."""
        assert self.process is not None
        pid = self.process.pid
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            ready = [m for m in _READY.finditer(self.output) if int(m.group(2)) == pid]
            if ready:
                self.port = int(ready[-1].group(3))
                return
            if self.process.poll() is not None:
                raise AssertionError(f"broker {self.broker_id} exited:\n{self.output[-4000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"broker {self.broker_id} not ready within {READY_TIMEOUT}s:\n"
                    f"{self.output[-4000:]}"
                )
            time.sleep(0.05)  # polling a child's output file, not waiting for a state

    def terminate(self) -> int:
        """SIGTERM (Kafka's graceful stop: controlled shutdown); the exit status."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(STOP_TIMEOUT)

    def kill(self) -> None:
        """SIGKILL: no graceful step; its session is left to expire."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # a frozen one too
            self.process.kill()
            self.process.wait()

    def freeze(self) -> None:
        """SIGSTOP: the host stops answering (its sessions expire after their timeout)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)
