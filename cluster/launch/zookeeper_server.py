"""A throwaway local ZooKeeper server: the Debian package's server on a free loopback port.

``ZooKeeperServer`` runs ``scripts/zookeeper.sh run`` (the same config and command line
users get from ``scripts/zookeeper.sh start``) as a child process with its own directory.
``stop()``/``start()`` keep the port and the data directory, so sessions can outlive a
restart, as with a real ensemble member. The tests' ``zookeeper_server`` fixture
(``tests/support/zookeeper.py``) and the commands that want a ZooKeeper but were given no
``--zookeeper`` address use it. ZooKeeper missing is installed
(``scripts/zookeeper.sh install``) or the start fails loudly.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "scripts" / "zookeeper.sh"
ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
READY_TIMEOUT = 20.0  # seconds for a started server to serve
STOP_TIMEOUT = 10.0  # seconds for SIGTERM before SIGKILL


def ensure_installed() -> None:
    """Install the Debian zookeeper package if its jar is missing (raises if that fails)."""
    if ZOOKEEPER_JAR.exists():
        return
    result = subprocess.run(  # noqa: S603 - our own script, fixed arguments
        [str(SCRIPT), "install"], capture_output=True, text=True, timeout=600, check=False
    )
    if result.returncode != 0 or not ZOOKEEPER_JAR.exists():
        raise RuntimeError(
            f"could not install ZooKeeper with {SCRIPT} install "
            f"(exit {result.returncode}):\n{result.stdout}\n{result.stderr}"
        )


def free_port() -> int:
    """A TCP port nobody listens on right now (the server binds it again, SO_REUSEADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def four_letter_word(port: int, word: str, timeout: float = 1.0) -> str:
    """Send a four-letter command (srvr, ruok, stat, mntr); '' if nobody answers."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(word.encode())
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
    except OSError:
        return ""
    return b"".join(chunks).decode(errors="replace")


class ZooKeeperServer:
    """One standalone server on 127.0.0.1. ``start``/``stop``/``restart`` are synchronous
    and return once the server serves (``srvr`` reports its Mode) or has exited."""

    def __init__(self, directory: Path | None = None, port: int | None = None) -> None:
        self._own_dir = directory is None
        self.directory = (
            Path(tempfile.mkdtemp(prefix="kemu-zk-")) if directory is None else directory
        )
        self.port = port or free_port()
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.directory / "zookeeper.log"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        if self.running:
            return
        ensure_installed()
        self.directory.mkdir(parents=True, exist_ok=True)
        if "Mode:" in four_letter_word(self.port, "srvr"):
            raise RuntimeError(f"something already serves ZooKeeper on {self.hosts}")
        self._log = self.log_file.open("ab")
        self._process = subprocess.Popen(  # noqa: S603 - our own script, fixed arguments
            [str(SCRIPT), "run", "--port", str(self.port), "--dir", str(self.directory)],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C of the test run is not sent to the server
        )
        deadline = time.monotonic() + READY_TIMEOUT
        while "Mode:" not in four_letter_word(self.port, "srvr", timeout=0.5):
            if self._process.poll() is not None:
                self._reap()
                raise RuntimeError(f"ZooKeeper exited during start-up:\n{self._log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"ZooKeeper did not serve on {self.hosts} within {READY_TIMEOUT} s:\n"
                    f"{self._log_tail()}"
                )
            time.sleep(0.02)

    def stop(self) -> None:
        """SIGTERM and wait (SIGKILL after ``STOP_TIMEOUT``). Idempotent."""
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._reap()

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        """Stop the server and delete its directory if this object made it."""
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> ZooKeeperServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _reap(self) -> None:
        if self._process is not None:
            self._process.wait()
            self._process = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def _log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_file.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])
