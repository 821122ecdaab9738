"""``kemu up --processes``: one OS process per broker. Real clients see the brokers and
the controller; a SIGKILLed broker process loses its registration once its store session
expires, and the controller moves its leaderships; SIGINT stops every process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster.launch.connect import ClusterFile
from tests.support.kemu_commands import KemuUp, alive, kemu, readiness_rows
from tests.support.waiting import wait_until
from tests.support.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.processes, pytest.mark.slow]  # kemu up --processes: a process per broker

SESSION_TIMEOUT_MS = 2000
EXPIRY_TIMEOUT = 30.0  # for the controller to see a killed broker gone, and re-elect


def metadata(bootstrap: str) -> dict[str, Any]:
    """kcat's view of the cluster: brokers, controller, topics (empty if it failed)."""
    out = subprocess.run(
        ["kcat", "-L", "-J", "-b", bootstrap, "-m", "5"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if out.returncode != 0:
        return {}
    listing: dict[str, Any] = json.loads(out.stdout)
    return listing


@pytest.fixture
def processes_up(tmp_path: Path) -> Iterator[KemuUp]:
    up = KemuUp(
        tmp_path, "--processes", "--config", f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}"
    )
    pids: list[int] = []
    try:
        up.start()
        pids = [b.pid for b in ClusterFile.read(up.cluster_file).brokers]
        yield up
    finally:
        up.kill()
        for pid in pids:  # never leave a broker process behind, whatever failed
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_one_process_per_broker_survives_a_killed_broker_and_stops_on_sigint(
    processes_up: KemuUp,
) -> None:
    up = processes_up
    assert up.process is not None
    info = ClusterFile.read(up.cluster_file)
    assert info.processes
    assert info.pid == up.process.pid
    pids = {b.id: b.pid for b in info.brokers}
    assert sorted(pids) == [0, 1, 2]
    assert len(set(pids.values())) == 3
    assert up.process.pid not in pids.values()
    assert all(alive(pid) for pid in pids.values())
    # The readiness table shows each broker's own process.
    rows = {int(row[0]): row for row in readiness_rows(up.output)}
    assert {b: int(row[2]) for b, row in rows.items()} == pids
    ports = {b.id: b.port for b in info.brokers}

    listing = metadata(up.bootstrap)
    assert sorted(b["id"] for b in listing["brokers"]) == [0, 1, 2]
    controller = listing["controllerid"]
    assert controller == info.controller
    assert controller in pids

    created = kemu(
        "topics", "--cluster-file", str(up.cluster_file), "--create", "--topic", "spread",
        "--partitions", "6", "--replication-factor", "3",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    assert created.stdout == "Created topic spread.\n"

    via_controller = f"127.0.0.1:{ports[controller]}"

    def partitions(listing: dict[str, Any]) -> list[dict[str, Any]]:
        topics = {t["topic"]: t for t in listing.get("topics", [])}
        return list(topics.get("spread", {}).get("partitions", []))

    def led(listing: dict[str, Any], among: set[int]) -> bool:
        found = partitions(listing)
        return len(found) == 6 and all(p["leader"] in among for p in found)

    listing = wait_until(lambda: metadata(via_controller), lambda m: led(m, set(pids)), 30)
    leaders = {p["partition"]: p["leader"] for p in partitions(listing)}
    victim = next(b for b in sorted(pids) if b != controller and b in leaders.values())
    survivors = set(pids) - {victim}

    os.kill(pids[victim], signal.SIGKILL)
    up._read_until(f"broker {victim} (pid {pids[victim]}) exited unexpectedly", 10)

    def moved(listing: dict[str, Any]) -> bool:
        """The victim is gone from the brokers, the leaders and every ISR (the ISR shrinks
        of partitions it only followed may reach the metadata after the leader moves)."""
        brokers = sorted(b["id"] for b in listing.get("brokers", []))
        isrs_shrunk = all(
            sorted(i["id"] for i in p["isrs"]) == sorted(survivors) for p in partitions(listing)
        )
        return brokers == sorted(survivors) and led(listing, survivors) and isrs_shrunk

    listing = wait_until(lambda: metadata(via_controller), moved, EXPIRY_TIMEOUT)
    assert listing["controllerid"] == controller
    for partition in partitions(listing):
        if leaders[partition["partition"]] != victim:
            assert partition["leader"] == leaders[partition["partition"]]
        assert sorted(i["id"] for i in partition["isrs"]) == sorted(survivors)

    assert up.stop() == 0
    assert not up.cluster_file.exists()
    wait_until(lambda: [pid for pid in pids.values() if alive(pid)], lambda left: not left, 10)


def test_broker_processes_stop_when_the_launcher_is_killed(processes_up: KemuUp) -> None:
    """A SIGKILLed launcher cannot stop its children: they notice and stop by themselves."""
    up = processes_up
    assert up.process is not None
    pids = [b.pid for b in ClusterFile.read(up.cluster_file).brokers]
    assert all(alive(pid) for pid in pids)
    up.process.kill()
    up.process.wait(10)
    wait_until(lambda: [pid for pid in pids if alive(pid)], lambda left: not left, 15)


@pytest.mark.zookeeper
def test_broker_processes_on_a_real_zookeeper(
    tmp_path: Path, zookeeper_server: ZooKeeperServer
) -> None:
    """With --zookeeper the launcher runs no store: every broker process has its own
    ZooKeeper session, and SIGINT stops them all."""
    address = f"{zookeeper_server.hosts}/kemu-{uuid.uuid4().hex}"
    up = KemuUp(tmp_path, "--processes", "--zookeeper", address)
    pids: list[int] = []
    try:
        up.start()
        info = ClusterFile.read(up.cluster_file)
        assert info.processes
        assert info.store == address
        pids = [b.pid for b in info.brokers]
        listing = metadata(up.bootstrap)
        assert sorted(b["id"] for b in listing["brokers"]) == [0, 1, 2]
        assert listing["controllerid"] == info.controller
        assert up.stop() == 0
        wait_until(lambda: [pid for pid in pids if alive(pid)], lambda left: not left, 10)
    finally:
        up.kill()
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
