"""``kemu broker stop|kill|start|status`` as separate processes against a real ``kemu up``,
in one process and with ``--processes`` (where kill is a real SIGKILL of the broker's
process): the controller sees a killed broker gone once its session expires, a restarted
broker registers with a higher broker epoch, a stop is graceful, the cluster file follows,
and bad input is one line on stderr with exit 1."""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.launch.connect import ClusterFile
from tests.support.kemu_commands import KemuUp, alive, kemu, parse_status, running_up
from tests.support.waiting import wait_until
from tests.support.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.processes, pytest.mark.slow]  # kemu up and kemu broker in child processes

SESSION = "zookeeper.session.timeout.ms=2000"
EXPIRY_TIMEOUT = 30.0  # for a killed broker's registration to go and the controller to move


def broker(up: KemuUp, *argv: str) -> subprocess.CompletedProcess[str]:
    return kemu("broker", *argv, "--cluster-file", str(up.cluster_file))


def registered(up: KemuUp) -> list[int]:
    """``kemu zk ls /brokers/ids`` through the cluster file."""
    listing = kemu("zk", "ls", "/brokers/ids", "--cluster-file", str(up.cluster_file))
    assert listing.returncode == 0, listing.stderr
    return sorted(int(line) for line in listing.stdout.split())


def epoch_of(up: KemuUp, broker_id: int) -> int:
    """The czxid of ``/brokers/ids/<id>``: the broker epoch."""
    got = kemu("zk", "get", f"/brokers/ids/{broker_id}", "--cluster-file", str(up.cluster_file))
    assert got.returncode == 0, got.stderr
    stat = got.stdout.splitlines()[-1]
    return int(stat.split()[0].removeprefix("czxid=0x"), 16)


def controller(up: KemuUp) -> int:
    status = broker(up, "status")
    assert status.returncode == 0, status.stderr
    return parse_status(status.stdout)[1]


def kill_and_restart(up: KemuUp, victim: int) -> None:
    """Kill ``victim`` (the controller), watch the controller move once its registration
    expires, start it again: a higher broker epoch, and every broker up."""
    others = sorted({0, 1, 2} - {victim})
    old_epoch = epoch_of(up, victim)
    killed = broker(up, "kill", str(victim))
    assert killed.returncode == 0, killed.stderr
    assert killed.stdout.startswith(f"Broker {victim} killed (")
    assert parse_status(killed.stdout)[0][victim].state == "killed"
    assert not next(b for b in ClusterFile.read(up.cluster_file).brokers if b.id == victim).running

    # The controller moves once the killed broker's session expired (and with it both its
    # /controller and /brokers/ids znodes).
    wait_until(lambda: controller(up), lambda c: c in others, EXPIRY_TIMEOUT)
    assert registered(up) == others

    started = broker(up, "start", str(victim))
    assert started.returncode == 0, started.stderr
    rows, _ = parse_status(started.stdout)
    assert all(row.state == "running" for row in rows.values())
    assert int(rows[victim].epoch) == epoch_of(up, victim) > old_epoch
    assert registered(up) == [0, 1, 2]
    assert all(b.running for b in ClusterFile.read(up.cluster_file).brokers)


@pytest.fixture
def one_process(tmp_path: Path) -> Iterator[KemuUp]:
    up = KemuUp(tmp_path, "--config", SESSION)
    try:
        up.start()
        yield up
    finally:
        up.kill()


def test_kill_and_start_in_one_process(one_process: KemuUp) -> None:
    """In one process: the controller's broker killed and started again; refusals."""
    up = one_process
    victim = controller(up)
    kill_and_restart(up, victim)

    again = broker(up, "start", str(victim))
    assert (again.returncode, again.stdout) == (1, "")
    assert again.stderr == f"Error: broker {victim} is already running\n"
    unknown = broker(up, "stop", "9")
    assert (unknown.returncode, unknown.stdout) == (1, "")
    assert unknown.stderr == "Error: no broker 9 in this cluster (its brokers are 0, 1, 2)\n"

    assert up.stop() == 0
    assert f"kemu: broker {victim} killed (crashed, no graceful step)" in up.output
    assert f"kemu: broker {victim} started (broker epoch " in up.output
    stale = broker(up, "status")
    assert stale.returncode == 1
    assert stale.stderr.startswith("Error: no cluster file at ")


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[KemuUp]:
    with running_up(tmp_path, "--processes", "--config", SESSION) as up:
        yield up


def test_kill_and_start_a_broker_process(processes: KemuUp) -> None:
    """With --processes, kill SIGKILLs the controller's process (no "exited unexpectedly"
    from the launcher), and start runs a new process for it; the cluster file has its pid."""
    up = processes
    pids = {b.id: b.pid for b in ClusterFile.read(up.cluster_file).brokers}
    victim = controller(up)
    kill_and_restart(up, victim)
    assert not alive(pids[victim])
    assert "exited unexpectedly" not in up.output
    new_pids = {b.id: b.pid for b in ClusterFile.read(up.cluster_file).brokers}
    assert new_pids[victim] != pids[victim]
    assert alive(new_pids[victim])
    assert {b: p for b, p in new_pids.items() if b != victim} == {
        b: p for b, p in pids.items() if b != victim
    }


def test_stop_a_broker_process_gracefully(processes: KemuUp) -> None:
    """With --processes, stop SIGTERMs a broker's process, which shuts down gracefully
    (exit status 0, its registration gone at once); a start that fails is one line and the
    cluster carries on; a start that works runs a new process for it."""
    up = processes
    pids = {b.id: b.pid for b in ClusterFile.read(up.cluster_file).brokers}
    stopped = broker(up, "stop", "1")
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.splitlines()[0] == (
        f"Broker 1 stopped (SIGTERM to pid {pids[1]}: graceful shutdown, exit status 0)."
    )
    assert not alive(pids[1])
    assert registered(up) == [0, 2]  # its session was closed, not left to expire
    refused = broker(up, "kill", "1")
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == "Error: broker 1 is not running (stopped)\n"

    # A start that fails (its log dir is a file) is one line; the cluster carries on.
    log_dir = up.cluster_file.parent / "logs" / "broker-1"
    moved = log_dir.rename(log_dir.with_name("broker-1.moved"))
    log_dir.write_text("not a directory")
    failed = broker(up, "start", "1")
    assert (failed.returncode, failed.stdout) == (1, "")
    assert failed.stderr.startswith("Error: broker 1 (pid ")
    assert failed.stderr.endswith(" exited with status 1 before it was ready\n")
    log_dir.unlink()
    moved.rename(log_dir)

    started = broker(up, "start", "1")
    assert started.returncode == 0, started.stderr
    final = {b.id: b for b in ClusterFile.read(up.cluster_file).brokers}
    assert all(b.running and alive(b.pid) for b in final.values())
    assert final[1].pid != pids[1]
    assert up.stop() == 0
    wait_until(lambda: [b.pid for b in final.values() if alive(b.pid)], lambda left: not left, 10)


def _process_state(pid: int) -> str:
    """The state letter of a process (``T``: stopped by a signal)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]


def test_pause_and_resume_a_broker_process(processes: KemuUp) -> None:
    """With --processes, pause SIGSTOPs a broker's process: ZooKeeper's part (the
    launcher's store server) expires its silent session; resume SIGCONTs it and it
    registers again; a paused process can also be killed."""
    up = processes
    pids = {b.id: b.pid for b in ClusterFile.read(up.cluster_file).brokers}
    victim = next(b for b in (0, 1, 2) if b != controller(up))
    old_epoch = epoch_of(up, victim)
    paused = broker(up, "pause", str(victim))
    assert paused.returncode == 0, paused.stderr
    assert paused.stdout.startswith(f"Broker {victim} paused (SIGSTOP to pid {pids[victim]}; ")
    assert parse_status(paused.stdout)[0][victim].state == "paused"
    assert _process_state(pids[victim]) == "T"
    others = sorted({0, 1, 2} - {victim})
    wait_until(lambda: registered(up), lambda r: r == others, EXPIRY_TIMEOUT)

    resumed = broker(up, "resume", str(victim))
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.startswith(f"Broker {victim} resumed (SIGCONT to pid {pids[victim]})")
    assert _process_state(pids[victim]) != "T"
    wait_until(lambda: registered(up), lambda r: r == [0, 1, 2], EXPIRY_TIMEOUT)
    assert epoch_of(up, victim) > old_epoch

    assert broker(up, "pause", str(victim)).returncode == 0
    killed = broker(up, "kill", str(victim))
    assert killed.returncode == 0, killed.stderr
    wait_until(lambda: alive(pids[victim]), lambda up_still: not up_still, 10)


def test_a_broker_process_that_died_on_its_own_can_be_started(processes: KemuUp) -> None:
    """A broker process that dies without `kemu broker` shows as exited, in the cluster
    file too, and `kemu broker start` runs it again."""
    up = processes
    pids = {b.id: b.pid for b in ClusterFile.read(up.cluster_file).brokers}
    os.kill(pids[2], signal.SIGKILL)
    up._read_until(f"broker 2 (pid {pids[2]}) exited unexpectedly", 10)
    wait_until(
        lambda: ClusterFile.read(up.cluster_file).brokers[2].running,
        lambda running: not running,
        10,
    )
    assert parse_status(broker(up, "status").stdout)[0][2].state == "exited"
    started = broker(up, "start", "2")
    assert started.returncode == 0, started.stderr
    final = {b.id: b for b in ClusterFile.read(up.cluster_file).brokers}
    assert all(b.running and alive(b.pid) for b in final.values())


@pytest.mark.zookeeper
def test_kill_and_start_a_broker_process_on_a_real_zookeeper(
    tmp_path: Path, zookeeper_server: ZooKeeperServer
) -> None:
    """On a real ZooKeeper, the launcher waits on ZooKeeper itself for a killed broker's
    registration to expire before starting it again."""
    address = f"{zookeeper_server.hosts}/kemu-{uuid.uuid4().hex}"
    up = KemuUp(tmp_path, "--processes", "--zookeeper", address, "--config", SESSION)
    pids: set[int] = set()
    try:
        up.start()
        pids = {b.pid for b in ClusterFile.read(up.cluster_file).brokers}
        victim = controller(up)
        killed = broker(up, "kill", str(victim))
        assert killed.returncode == 0, killed.stderr
        # Started at once: the command itself waits for the old session to expire.
        started = broker(up, "start", str(victim))
        assert started.returncode == 0, started.stderr
        info = ClusterFile.read(up.cluster_file)
        pids |= {b.pid for b in info.brokers}
        assert all(b.running for b in info.brokers)
        assert registered(up) == [0, 1, 2]
        assert controller(up) in (0, 1, 2)
    finally:
        up.kill()
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
