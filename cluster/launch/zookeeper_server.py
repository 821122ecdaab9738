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

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from cluster.launch.ports import free_ports

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
    """A free loopback port outside the ephemeral range for a server to bind later
    (``cluster.launch.ports``)."""
    (port,) = free_ports(1)
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

    def __init__(
        self,
        directory: Path | None = None,
        port: int | None = None,
        *,
        script_args: Sequence[str] | None = None,
    ) -> None:
        """``script_args``: what ``scripts/zookeeper.sh run`` is given instead of this
        server's ``--port`` and ``--dir`` (a member of a ``ZooKeeperEnsemble``)."""
        self._own_dir = directory is None
        self.directory = (
            Path(tempfile.mkdtemp(prefix="kemu-zk-")) if directory is None else directory
        )
        self.port = port or free_port()
        self._script_args = (
            ["--port", str(self.port), "--dir", str(self.directory)]
            if script_args is None
            else list(script_args)
        )
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
        self.launch()
        self.wait_serving()

    def launch(self) -> None:
        """Start the server's process (``wait_serving`` waits for it to serve: a member of
        an ensemble serves only once a quorum of its servers run)."""
        if self.running:
            return
        ensure_installed()
        self.directory.mkdir(parents=True, exist_ok=True)
        if "Mode:" in four_letter_word(self.port, "srvr"):
            raise RuntimeError(f"something already serves ZooKeeper on {self.hosts}")
        self._log = self.log_file.open("ab")
        self._process = subprocess.Popen(  # noqa: S603 - our own script, fixed arguments
            [str(SCRIPT), "run", *self._script_args],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C of the test run is not sent to the server
        )

    @property
    def mode(self) -> str:
        """What ``srvr`` says the server is (standalone, leader, follower); '' if it
        does not serve."""
        for line in four_letter_word(self.port, "srvr", timeout=0.5).splitlines():
            if line.startswith("Mode:"):
                return line.removeprefix("Mode:").strip()
        return ""

    def wait_serving(self) -> None:
        """Until the launched server serves (``RuntimeError`` if it exits or is late)."""
        assert self._process is not None
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

    def pause(self) -> None:
        """SIGSTOP: the server stalls, its connections open but unanswered."""
        assert self._process is not None
        os.kill(self._process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after ``pause``."""
        assert self._process is not None
        os.kill(self._process.pid, signal.SIGCONT)

    def stop(self) -> None:
        """SIGTERM and wait (SIGKILL after ``STOP_TIMEOUT``). Idempotent."""
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            os.kill(process.pid, signal.SIGCONT)  # a paused server handles the SIGTERM
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._reap()

    def kill(self) -> None:
        """SIGKILL, as a server whose machine died: no graceful step. Idempotent."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
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


def _member_args(
    directory: Path, size: int, k: int, client: int, quorum: int, election: int
) -> list[str]:
    """``scripts/zookeeper.sh run``'s arguments for server ``k`` of an ensemble."""
    args = [
        "--port", str(client), "--dir", str(directory),
        "--ensemble", str(size), "--server", str(k),
        "--quorum-port", str(quorum), "--election-port", str(election),
    ]  # fmt: skip
    return args


class ZooKeeperEnsemble:
    """``size`` servers on 127.0.0.1 forming one ensemble, as ``scripts/zookeeper.sh
    start --ensemble N`` runs them: server K (1..N) serves clients on the K-th client
    port, with its quorum and election ports, in ``directory/server.K`` (its ``myid``
    and ``zoo.cfg`` with every ``server.K`` line). ``servers[k - 1]`` is server K, a
    ``ZooKeeperServer`` that can be stopped and started again on its own."""

    def __init__(self, directory: Path | None = None, size: int = 3) -> None:
        self._own_dir = directory is None
        self.directory = (
            Path(tempfile.mkdtemp(prefix="kemu-zk-ensemble-")) if directory is None else directory
        )
        client, quorum, election = free_ports(3, run=size)
        self.servers = [
            ZooKeeperServer(
                self.directory / f"server.{k}",
                client + k - 1,
                script_args=_member_args(self.directory, size, k, client, quorum, election),
            )
            for k in range(1, size + 1)
        ]

    @property
    def hosts(self) -> str:
        """The connection string of the whole ensemble."""
        return ",".join(server.hosts for server in self.servers)

    def start(self) -> None:
        """Start every server, then wait for each to serve (a quorum must run first)."""
        for server in self.servers:
            server.launch()
        for server in self.servers:
            server.wait_serving()

    def leader(self) -> ZooKeeperServer | None:
        """The server that says it leads, if one does now."""
        return next((s for s in self.servers if s.running and s.mode == "leader"), None)

    def close(self) -> None:
        for server in self.servers:
            server.stop()
        if self._own_dir:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> ZooKeeperEnsemble:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
