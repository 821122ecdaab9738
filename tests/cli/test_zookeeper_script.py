"""``scripts/zookeeper.sh``: a standalone server's stop and status find its port in its
directory; ``--ensemble 3``: three servers on loopback that form one ensemble
(server.K lines, myid files, client ports P..P+2, quorum and election ports from theirs),
started and stopped together or one at a time; an ensemble that is not 3, 5, 7 ... servers
is one line and exit 1."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cluster.launch.ports import free_ports
from cluster.launch.zookeeper_server import four_letter_word
from tests.support.zookeeper import SCRIPT, ensure_installed


def script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=120, check=False
    )


def mode(port: int) -> str:
    lines = four_letter_word(port, "srvr").splitlines()
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("Mode:")), "")


@pytest.mark.processes
def test_stop_and_status_without_port_act_on_the_port_the_directory_was_started_on(
    tmp_path: Path,
) -> None:
    """Started on a free port, the server is found running by ``status --dir D`` alone
    and stopped by ``stop --dir D`` alone, both naming its port (they checked 2181)."""
    ensure_installed()
    (port,) = free_ports(1)
    started = script("start", "--port", str(port), "--dir", str(tmp_path))
    try:
        assert started.returncode == 0, started.stderr
        status = script("status", "--dir", str(tmp_path))
        assert (status.returncode, status.stdout.split(", ")[-1]) == (0, f"127.0.0.1:{port})\n")
        stopped = script("stop", "--dir", str(tmp_path))
        assert (stopped.returncode, stopped.stdout) == (
            0,
            f"zookeeper stopped (127.0.0.1:{port})\n",
        )
        assert four_letter_word(port, "ruok") == ""  # nobody answers any more
        status = script("status", "--dir", str(tmp_path))
        assert (status.returncode, status.stdout) == (3, f"zookeeper stopped (127.0.0.1:{port})\n")
    finally:
        script("stop", "--port", str(port), "--dir", str(tmp_path))


@pytest.mark.slow
@pytest.mark.processes
def test_an_ensemble_of_three_starts_serves_and_stops_server_by_server(tmp_path: Path) -> None:
    """start --ensemble 3 writes each server's config and myid, starts all three and
    prints the connection string; one leader, two followers; stop --server K stops that
    server only; stop stops the rest."""
    ensure_installed()
    client, quorum, election = free_ports(3, run=3)
    options = [
        "--ensemble", "3", "--port", str(client), "--quorum-port", str(quorum),
        "--election-port", str(election), "--dir", str(tmp_path),
    ]  # fmt: skip
    ports = [client, client + 1, client + 2]
    try:
        started = script("start", *options)
        assert started.returncode == 0, started.stderr
        hosts = ",".join(f"127.0.0.1:{p}" for p in ports)
        assert started.stdout.splitlines()[-1] == f"zookeeper ensemble: {hosts}"
        for k in (1, 2, 3):
            server = tmp_path / f"server.{k}"
            assert (server / "data" / "myid").read_text() == f"{k}\n"
            config = (server / "zoo.cfg").read_text().splitlines()
            assert f"clientPort={client + k - 1}" in config
            assert [line for line in config if line.startswith("server.")] == [
                f"server.{j}=127.0.0.1:{quorum + j - 1}:{election + j - 1}" for j in (1, 2, 3)
            ]
        assert sorted(mode(p) for p in ports) == ["follower", "follower", "leader"]

        stopped = script("stop", *options, "--server", "2")
        assert stopped.returncode == 0, stopped.stderr
        assert stopped.stdout == f"zookeeper stopped (127.0.0.1:{client + 1})\n"
        assert mode(client + 1) == ""
        assert not (tmp_path / "server.2" / "zookeeper.pid").exists()
        assert (tmp_path / "server.1" / "zookeeper.pid").exists()
    finally:
        script("stop", *options)
    assert all(mode(p) == "" for p in ports)
    status = script("status", *options)
    assert status.returncode == 3


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--ensemble", "4"], "zookeeper.sh: --ensemble 4: an ensemble is 3, 5, 7 ... servers"),
        (["--ensemble", "3", "--server", "4"], "zookeeper.sh: --server 4: the ensemble has"),
        (["--server", "1"], "zookeeper.sh: --server needs --ensemble"),
        (["--ensemble", "3", "--port", "65534"], "zookeeper.sh: ports 65534 to 65536 are not"),
    ],
)
def test_a_bad_ensemble_is_one_line_and_exit_1(args: list[str], error: str) -> None:
    """A bad ensemble is refused before anything starts."""
    done = script("status", *args, "--dir", "/nonexistent/kemu-zk")
    assert done.returncode == 1
    assert done.stderr.startswith(error), done.stderr
    assert len(done.stderr.splitlines()) == 1
