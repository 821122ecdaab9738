"""Topic deletion with ``kemu up --processes``: one OS process per broker, on the embedded
store (served over TCP by the launcher) and a real ZooKeeper, driven only by the commands
a user has: ``kemu topics --delete --zookeeper`` marks the topic, ``kemu broker kill|start``
SIGKILLs a broker's process and starts it again, ``kemu zk tree`` and kcat look.

After each deletion: no znode of the topic, no ``<topic>-<p>`` and, once
``log.segment.delete.delay.ms`` (200 ms here) has passed, no ``-delete`` directory in any
broker's log dir, and no broker's metadata has the topic. (The controller's memory is in
another process: re-creating the topic with the same name shows it forgot the old one.)
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from cluster.cli.zk import run_zk_command
from cluster.launch.connect import ClusterFile
from tests.support.deletion import topic_log_dirs
from tests.support.kemu_commands import KemuUp, alive, kemu
from tests.support.waiting import wait_until
from tests.support.zookeeper import STORES, ZooKeeperServer

pytestmark = [pytest.mark.processes, pytest.mark.slow]  # kemu up --processes, SIGKILLed brokers

CONFIG = (
    "zookeeper.session.timeout.ms=2000",
    "log.segment.delete.delay.ms=200",
    "log.initial.task.delay.ms=0",
)
DELETION_TIMEOUT = 30.0
EXPIRY_TIMEOUT = 30.0  # for a killed broker's registration to go and the controller to move
MARKED = (
    "Topic {t} is marked for deletion.\n"
    "Note: This will have no impact if delete.topic.enable is not set to true.\n"
)


@pytest.fixture(params=STORES)
def up(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KemuUp]:
    """``kemu up --processes`` on the parameter's store; no broker process outlives it."""
    extra = ["--processes"]
    for setting in CONFIG:
        extra += ["--config", setting]
    if request.param == "zookeeper":
        server: ZooKeeperServer = request.getfixturevalue("zookeeper_server")
        extra += ["--zookeeper", f"{server.hosts}/kemu-{uuid.uuid4().hex}"]
    launched = KemuUp(tmp_path, *extra)
    pids: set[int] = set()
    try:
        launched.start()
        pids = {b.pid for b in ClusterFile.read(launched.cluster_file).brokers}
        yield launched
    finally:
        if launched.cluster_file.exists():
            pids |= {b.pid for b in ClusterFile.read(launched.cluster_file).brokers}
        launched.kill()
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def topics(up: KemuUp, *argv: str) -> subprocess.CompletedProcess[str]:
    """``kemu topics ARGV`` on the store path (``--zookeeper`` the cluster's store)."""
    return kemu("topics", *argv, "--zookeeper", up.store)


def create(up: KemuUp, topic: str, assignment: str) -> None:
    """``kemu topics --create`` through the cluster file (CreateTopics over the wire,
    answered once every partition has a leader)."""
    done = kemu(
        "topics", "--create", "--topic", topic, "--replica-assignment", assignment,
        "--cluster-file", str(up.cluster_file),
    )  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (0, f"Created topic {topic}.\n", "")


def delete(up: KemuUp, topic: str) -> None:
    marked = topics(up, "--delete", "--topic", topic)
    assert (marked.returncode, marked.stdout, marked.stderr) == (0, MARKED.format(t=topic), "")


def broker(up: KemuUp, *argv: str) -> subprocess.CompletedProcess[str]:
    done = kemu("broker", *argv, "--cluster-file", str(up.cluster_file))
    assert done.returncode == 0, done.stderr
    return done


def controller(up: KemuUp) -> int:
    """The controller every running broker's metadata names (-1 until they agree)."""
    named = {metadata(port).get("controllerid", -1) for port in ports(up).values()}
    return int(next(iter(named))) if len(named) == 1 else -1


def ports(up: KemuUp) -> dict[int, int]:
    return {b.id: b.port for b in ClusterFile.read(up.cluster_file).brokers if b.running}


def znodes(up: KemuUp) -> set[str]:
    """Every path of ``kemu zk tree /`` (its code, run here: no interpreter to start)."""
    out = io.StringIO()
    anyio.run(
        lambda: run_zk_command("tree", "/", address=up.store, out=out, cluster_file=up.cluster_file)
    )
    paths: set[str] = set()
    stack: list[str] = []
    for line in out.getvalue().splitlines()[1:]:
        depth = (len(line) - len(line.lstrip(" "))) // 2
        del stack[depth - 1 :]
        stack.append(line.strip())
        paths.add("/" + "/".join(stack))
    return paths


def topic_znodes(up: KemuUp, topic: str) -> list[str]:
    owned = (f"/brokers/topics/{topic}", f"/config/topics/{topic}", f"/admin/delete_topics/{topic}")
    return sorted(p for p in znodes(up) if p in owned or p.startswith(owned[0] + "/"))


def dirs(up: KemuUp, topic: str) -> list[str]:
    """``broker-<id>/<name>`` of every live or ``-delete`` directory of the topic."""
    return topic_log_dirs(up.cluster_file.parent / "logs", topic)


def metadata(port: int) -> dict[str, Any]:
    """kcat's view through one broker ({} if it did not answer)."""
    out = subprocess.run(
        ["kcat", "-L", "-J", "-b", f"127.0.0.1:{port}", "-m", "5"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if out.returncode != 0:
        return {}
    listing: dict[str, Any] = json.loads(out.stdout)
    return listing


def cached_by(up: KemuUp, topic: str) -> list[int]:
    """The running brokers whose metadata has ``topic`` (or that did not answer)."""
    holders = []
    for b, port in sorted(ports(up).items()):
        listing = metadata(port)
        if not listing or topic in {t["topic"] for t in listing.get("topics", [])}:
            holders.append(b)
    return holders


def leftovers(up: KemuUp, topic: str) -> list[str]:
    """What the cluster still holds of ``topic`` (the cheap looks first)."""
    left = [f"dir {d}" for d in dirs(up, topic)]
    left += [f"metadata of broker {b}" for b in cached_by(up, topic)]
    if not left:
        left += [f"znode {p}" for p in topic_znodes(up, topic)]
    return left


def wait_gone(up: KemuUp, topic: str) -> None:
    wait_until(lambda: leftovers(up, topic), lambda left: not left, DELETION_TIMEOUT)
    assert topic_znodes(up, topic) == []


def test_deletion_survives_killed_follower_and_controller_processes(up: KemuUp) -> None:
    """DeleteTopicTest.testResumeDeleteTopicWithRecoveredFollower,
    testResumeDeleteTopicOnControllerFailover and testRecreateTopicAfterDeletion, with
    SIGKILLed processes: a killed follower pauses the deletion (the live replicas go, the
    topic and its marker stay); the controller's process is killed too and another broker
    takes over, still paused; once the follower's process is started again, the new
    controller finishes the deletion, the old controller's broker, started last, does not
    bring the topic back, and the name can be created again with another layout."""
    old = controller(up)
    survivor, follower = sorted({0, 1, 2} - {old})
    create(up, "paused", f"{survivor}:{follower},{follower}:{survivor}")
    broker(up, "kill", str(follower))
    wait_until(lambda: znodes(up), lambda z: f"/brokers/ids/{follower}" not in z, EXPIRY_TIMEOUT)
    delete(up, "paused")

    def stuck() -> list[str]:
        return dirs(up, "paused")

    expected = [f"broker-{follower}/paused-0", f"broker-{follower}/paused-1"]
    wait_until(stuck, lambda left: left == expected, DELETION_TIMEOUT)
    assert "/admin/delete_topics/paused" in topic_znodes(up, "paused")

    broker(up, "kill", str(old))
    wait_until(lambda: controller(up), lambda c: c == survivor, EXPIRY_TIMEOUT)
    assert "/brokers/topics/paused" in topic_znodes(up, "paused")
    assert "/admin/delete_topics/paused" in topic_znodes(up, "paused")
    # The new controller's start-up sends LeaderAndIsr for every replica it finds online,
    # queued for deletion or not (Kafka 2.7's ReplicaStateMachine.startup): the survivor
    # may get its logs back until the deletion resumes.
    assert set(expected) <= set(dirs(up, "paused"))

    broker(up, "start", str(follower))
    wait_gone(up, "paused")
    broker(up, "start", str(old))
    wait_until(lambda: cached_by(up, "paused"), lambda held: not held, DELETION_TIMEOUT)
    assert sorted(ports(up)) == [0, 1, 2]
    assert dirs(up, "paused") == []

    create(up, "paused", f"{old}:{follower}")
    listed = topics(up, "--list")
    assert (listed.returncode, listed.stdout) == (0, "paused\n")
    new_logs = sorted(f"broker-{b}/paused-0" for b in (old, follower))
    wait_until(lambda: dirs(up, "paused"), lambda found: found == new_logs, DELETION_TIMEOUT)
    assert topic_znodes(up, "paused") == [
        "/brokers/topics/paused",
        "/brokers/topics/paused/partitions",
        "/brokers/topics/paused/partitions/0",
        "/brokers/topics/paused/partitions/0/state",
        "/config/topics/paused",
    ]
    wait_until(lambda: cached_by(up, "paused"), lambda held: held == [0, 1, 2], DELETION_TIMEOUT)


@pytest.mark.timeout(180)  # fourteen kemu commands, each a Python start-up: ~2.4 s loaded
def test_many_topics_deleted_over_the_wire_and_unknown_topics_refused(up: KemuUp) -> None:
    """DeleteTopicTest.testDeleteNonExistingTopic and many deletions at once, across
    processes: one `kemu topics --delete` with a regex (DeleteTopics over the wire, through
    the cluster file) removes ten topics completely and leaves another alone; a missing
    topic is refused with Kafka's message on both paths and nothing is written."""
    for i in range(10):
        create(up, f"bulk{i}", f"{i % 3}:{(i + 1) % 3}")
    create(up, "kept", "0:1,1:2")
    done = kemu(
        "topics", "--delete", "--topic", "bulk.*", "--cluster-file", str(up.cluster_file)
    )  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    for i in range(10):
        wait_gone(up, f"bulk{i}")
    assert dirs(up, "kept") == ["broker-0/kept-0", "broker-1/kept-0", "broker-1/kept-1",
                                "broker-2/kept-1"]  # fmt: skip

    missing = kemu(
        "topics", "--delete", "--topic", "ghost", "--cluster-file", str(up.cluster_file)
    )  # fmt: skip
    assert missing.returncode == 1
    assert missing.stdout == (
        "Error while executing topic command : Topic 'ghost' does not exist as expected\n"
    )
    marked = topics(up, "--delete", "--topic", "ghost")
    assert marked.returncode == 1  # the store path refuses it too: nothing is written
    assert "/admin/delete_topics/ghost" not in znodes(up)
