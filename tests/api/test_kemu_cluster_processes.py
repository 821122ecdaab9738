"""``KemuCluster(processes=True)``: one OS process per broker, driven as ``kemu up
--processes`` drives them. kafka-python produces and consumes; confluent-kafka's metadata
sees a stopped broker gone at once with its leadership moved, a killed (SIGKILLed) one gone
once its session expired, and each back after ``start``; a paused (SIGSTOPped) one is not
running until ``resume``. Closing leaves no broker process."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from cluster import KemuCluster
from tests.support.clients import (
    confluent_brokers,
    confluent_leaders,
    kafka_python_consume,
    kafka_python_produce,
)


def broker_processes(log_dir: Path) -> set[int]:
    """The pids of the live broker processes whose log dir root is ``log_dir``."""
    found = set()
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # gone, or not a process
        if b"_broker" in argv and str(log_dir).encode() in argv:
            found.add(int(proc.name))
    return found


pytestmark = [pytest.mark.slow, pytest.mark.processes, pytest.mark.timeout(180)]


def test_broker_processes_stop_kill_start_pause_and_resume(tmp_path: Path) -> None:
    """Every broker command on broker processes, each seen by a real client."""
    config = {"zookeeper.session.timeout.ms": 2000}
    with KemuCluster(brokers=3, config=config, processes=True, log_dir=tmp_path) as cluster:
        bootstrap = cluster.bootstrap_servers
        cluster.create_topic("procs", partitions=1, replication_factor=3)
        kafka_python_produce(bootstrap, "procs", [b"before"])
        leader = confluent_leaders(bootstrap, "procs")[0]

        assert "SIGTERM" in cluster.stop(leader)
        assert confluent_brokers(bootstrap) == {0, 1, 2} - {leader}
        assert confluent_leaders(bootstrap, "procs")[0] not in (leader, -1)
        cluster.start(leader)
        assert confluent_brokers(bootstrap) == {0, 1, 2}

        victim = (leader + 1) % 3
        assert "SIGKILL" in cluster.kill(victim)
        cluster.wait_until(lambda: victim not in confluent_brokers(bootstrap), timeout=20)
        cluster.start(victim)
        assert confluent_brokers(bootstrap) == {0, 1, 2}

        assert "SIGSTOP" in cluster.pause(victim)
        assert victim not in cluster.running_brokers()
        assert "SIGCONT" in cluster.resume(victim)
        assert cluster.running_brokers() == (0, 1, 2)
        assert kafka_python_consume(bootstrap, "procs", 1) == [b"before"]
        children = broker_processes(tmp_path)
        assert len(children) == 3
    assert not broker_processes(tmp_path)


def test_a_sigkilled_broker_process_leaves_no_temporary_directory() -> None:
    """Without ``log_dir`` the temporary log directory is the parent's to remove: broker
    processes SIGKILLed behind the cluster's back (no clean exit, no cleanup of their own)
    leave nothing of it after close."""
    with KemuCluster(brokers=2, processes=True) as cluster:
        log_dir = cluster.log_dir
        cluster.create_topic("doomed", partitions=2, replication_factor=2)
        children = broker_processes(log_dir)
        assert len(children) == 2
        for pid in children:
            os.kill(pid, signal.SIGKILL)
        cluster.wait_until(lambda: not broker_processes(log_dir), timeout=20)
        assert (log_dir / "broker-0").is_dir()
    assert not log_dir.exists()
