"""``kemu top``: the view of a running cluster read from its metadata store and its
launcher's control endpoint. In process: a frame names the controller, its epoch and event
queue, the brokers, and the partitions a stopped broker leaves under-replicated and under
their min ISR, a pending deletion and a reassignment in flight. As a user runs it (``kemu
up`` and ``kemu top`` in child processes): drawn live in a pseudo-terminal, it follows a
broker's stop and exits 0 on Ctrl-C and on q; on a pipe, ``--once`` prints one plain
frame."""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pexpect
import pytest
from rich.console import Console

from actors.runtime.tracer import Tracer
from actors.zk import kafka_zk
from actors.zk.store import StoreSession
from cluster.cli.top import PartitionRow, classify, run_top
from cluster.launch.cluster import Cluster, ClusterSpec
from cluster.launch.control import ClusterLauncher, carry_out
from protocol import zkdata
from protocol.control import TopicPartition
from protocol.ids import BrokerId, TopicName
from protocol.launcher import BrokerAction, BrokerCommand
from tests.support.hosting import hosted_fixture
from tests.support.kemu_commands import REPO, kemu, running_up
from tests.support.launching import launched_cluster
from tests.support.waiting import eventually

SCREEN_TIMEOUT = 30.0  # seconds for the live view to show what is awaited


@dataclass
class Launched:
    cluster: Cluster
    launcher: ClusterLauncher
    control: str

    async def frame(self) -> str:
        """One ``kemu top --once`` frame, as printed to a file."""
        out = io.StringIO()
        assert self.cluster.store is not None
        await run_top(
            address="",
            control=self.control,
            secret=self.cluster.secret,
            console=Console(file=out, width=120),
            once=True,
            store=self.cluster.store,
        )
        return out.getvalue()


@hosted_fixture()
async def launched(tmp_path: Path) -> AsyncIterator[Launched]:
    """Three brokers in this process with their launcher's control endpoint, as
    ``kemu up`` runs them."""
    tracer = Tracer()
    spec = ClusterSpec(brokers=3, base_port=0, log_dir=tmp_path / "logs")
    cluster_file = tmp_path / "cluster.json"
    async with launched_cluster(spec, tracer, cluster_file) as (cluster, launcher, publisher):
        yield Launched(cluster, launcher, publisher.control)


@contextlib.asynccontextmanager
async def _session(cluster: Cluster) -> AsyncIterator[StoreSession]:
    """A store session of the test's own on the cluster's store, closed after."""
    assert cluster.store is not None
    session = await cluster.store.open_session(timeout=10.0, name="test")
    try:
        yield session
    finally:
        await session.close()
        session.events.close()


def _gauges(frame: str) -> dict[str, str]:
    """The controller's gauges a frame prints (``Name=value``, Kafka's names)."""
    return dict(re.findall(r"([A-Za-z]+Count)=(\d+)", frame))


def _under_replicated_rows(frame: str) -> list[list[str]]:
    """The rows of the under-replicated list of a frame."""
    lines = frame.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("under-replicated"))
    rows = []
    for line in lines[start + 2 :]:
        fields = line.split()
        if len(fields) != 5 or not fields[1].isdigit():
            break
        rows.append(fields)
    return rows


@pytest.mark.asyncio
async def test_a_frame_follows_the_controller_and_a_stopped_broker(launched: Launched) -> None:
    """A frame names the active controller with its epoch and event queue and the three
    registered brokers; once a broker stops, it shows it unregistered, and every partition
    it held under-replicated, and under min ISR where the topic asks for three."""
    cluster = launched.cluster
    controller = await cluster.controller_id()
    frame = await launched.frame()
    header = re.search(r"controller: broker (\d+) \(epoch (\d+)\)  event queue: (\d+)", frame)
    assert header is not None, frame
    assert int(header[1]) == controller
    assert int(header[2]) >= 1
    assert "brokers: 3 registered of 3" in frame
    assert re.search(r"^0\s+running\s+yes\s+127\.0\.0\.1:\d+\s+\d+", frame, re.MULTILINE), frame
    assert "topics: 0  partitions: 0  offline: 0  under-replicated: 0" in frame

    async with _session(cluster) as session:
        await kafka_zk.write_topic(
            session, TopicName("strict"), {0: [0, 1, 2], 1: [1, 2, 0]}, {"min.insync.replicas": "3"}
        )
        await kafka_zk.write_topic(session, TopicName("loose"), {0: [2, 0, 1]}, {})
    frame = await eventually(
        launched.frame,
        until=lambda f: (
            "topics: 2  partitions: 3  offline: 0  under-replicated: 0" in f
            and "GlobalPartitionCount=3" in f
        ),
    )
    # KafkaController's gauges: every leader preferred, nothing being deleted
    assert _gauges(frame) == {
        "OfflinePartitionsCount": "0",
        "PreferredReplicaImbalanceCount": "0",
        "GlobalTopicCount": "2",
        "GlobalPartitionCount": "3",
        "TopicsToDeleteCount": "0",
        "ReplicasToDeleteCount": "0",
        "TopicsIneligibleToDeleteCount": "0",
        "ReplicasIneligibleToDeleteCount": "0",
    }

    stopped = next(b for b in (2, 1, 0) if b != controller)
    command = BrokerCommand(action=BrokerAction.STOP, broker_id=BrokerId(stopped))
    await carry_out(launched.launcher, command)
    frame = await eventually(
        launched.frame, until=lambda f: "under-replicated: 3  under-min-isr: 2" in f
    )
    assert "brokers: 2 registered of 3" in frame
    assert re.search(rf"^{stopped}\s+stopped\s+no\s+-\s+-", frame, re.MULTILINE), frame
    assert "offline: 0" in frame
    rows = _under_replicated_rows(frame)
    assert [(r[0], r[1]) for r in rows] == [("loose", "0"), ("strict", "0"), ("strict", "1")]
    for _topic, _partition, leader, replicas, isr in rows:
        assert str(stopped) in replicas.split(",")
        assert str(stopped) not in isr.split(",")
        assert leader != str(stopped)
    assert "under-min-isr partitions (2)" in frame
    # the partition the stopped broker led moved away from its preferred leader
    assert _gauges(frame)["PreferredReplicaImbalanceCount"] == "1"

    # a deletion with a replica on the stopped broker waits for it (the topic ineligible)
    async with _session(cluster) as session:
        await session.create(zkdata.delete_topic_path(TopicName("loose")), b"")
    frame = await eventually(
        launched.frame,
        until=lambda f: (
            _gauges(f).get("TopicsIneligibleToDeleteCount") == "1"
            and _gauges(f).get("ReplicasToDeleteCount") == "1"
        ),
    )
    gauges = _gauges(frame)
    assert gauges["TopicsToDeleteCount"] == "1"
    # the dead replica went ReplicaDeletionIneligible, and back to OfflineReplica once the
    # live ones were deleted (retryDeletionForIneligibleReplicas): none ineligible now
    assert gauges["ReplicasIneligibleToDeleteCount"] == "0"
    assert gauges["GlobalTopicCount"] == "2"  # the topic stays until its last replica goes

    # a reassignment onto the stopped broker waits for it (its target is never all in the
    # ISR): listed as in flight, from /admin/reassign_partitions and from the assignment's
    # removing replicas alike, once
    other = next(b for b in (0, 1, 2) if b != stopped)
    target = zkdata.PartitionReplicas(
        topic=TopicName("strict"), partition=1, replicas=(BrokerId(stopped), BrokerId(other))
    )
    async with _session(cluster) as session:
        await kafka_zk.create_partition_reassignment(
            session, zkdata.PartitionReassignment(partitions=(target,))
        )
    frame = await eventually(launched.frame, until=lambda f: "reassignments: 1 (strict-1)" in f)
    assert "pending deletions: 1 (loose)" in frame


def test_partitions_are_classified_as_kafka_topics_describes_them() -> None:
    """Offline: no leader, or a leader not registered; under-replicated: an ISR smaller
    than the replicas; under min ISR: no leader, or an ISR smaller than the topic's
    min.insync.replicas (1 for a topic not listed)."""

    def row(topic: str, leader: int | None, isr: tuple[int, ...]) -> PartitionRow:
        return PartitionRow(TopicPartition(TopicName(topic), 0), leader, (0, 1, 2), isr)

    healthy = row("healthy", 0, (0, 1, 2))
    leaderless = row("leaderless", None, (1,))
    gone_leader = row("gone-leader", 2, (2,))
    short = row("short", 0, (0, 1))
    offline, under_replicated, under_min_isr = classify(
        [healthy, leaderless, gone_leader, short], live={0, 1}, min_isr={"short": 3}
    )
    assert offline == (leaderless, gone_leader)
    assert under_replicated == (leaderless, gone_leader, short)
    assert under_min_isr == (leaderless, short)


# ---------------------------------------------------------------------- as a user runs it

ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


def _spawn_top(cluster_file: Path) -> pexpect.spawn[bytes]:
    """``kemu top`` in a 50x120 pseudo-terminal."""
    env = {**os.environ, "TERM": "xterm-256color", "PYTHONPATH": str(REPO)}
    env.pop("NO_COLOR", None)
    return pexpect.spawn(
        sys.executable,
        ["-m", "cluster.cli", "top", "--cluster-file", str(cluster_file)],
        cwd=REPO,
        env=env,
        dimensions=(50, 120),
        timeout=SCREEN_TIMEOUT,
        use_poll=True,  # select() fails on descriptors past 1023, as a long session has
    )


def _seen(value: object) -> bytes:
    """What ``pexpect`` read (its ``before`` and ``after`` are typed loosely)."""
    assert isinstance(value, bytes), value
    return value


def _exit_status(child: pexpect.spawn[bytes]) -> int | None:
    child.expect(pexpect.EOF)
    child.close()
    assert child.signalstatus is None
    return child.exitstatus


@pytest.mark.slow  # kemu up and kemu top in child processes
@pytest.mark.processes
def test_the_live_view_follows_a_stopped_broker_and_quits_cleanly(tmp_path: Path) -> None:
    """In a terminal, the view names the controller the cluster file names and three
    registered brokers; after ``kemu broker stop`` it shows two, and the partitions the
    broker held under-replicated; Ctrl-C exits 0 and leaves the alternate screen, q too."""
    with running_up(tmp_path) as up:
        create = kemu(
            "topics", "--bootstrap-server", up.bootstrap, "--create", "--topic", "watched",
            "--partitions", "3", "--replication-factor", "3",
        )  # fmt: skip
        assert create.returncode == 0, create.stderr
        named = re.search(r"controller: broker (\d+)", up.output)
        assert named is not None, up.output
        controller = int(named[1])
        top = _spawn_top(up.cluster_file)
        try:
            top.expect(rb"controller: broker (\d+) \(epoch \d+\)")
            assert isinstance(top.match, re.Match)
            assert int(top.match[1]) == controller
            top.expect(rb"brokers: 3 registered of 3")
            top.expect(rb"partitions: 3  offline: 0  under-replicated: 0")

            stopped = next(b for b in (2, 1, 0) if b != controller)
            stop = kemu("broker", "stop", str(stopped), "--cluster-file", str(up.cluster_file))
            assert stop.returncode == 0, stop.stderr
            top.expect(rb"brokers: 2 registered of 3")
            top.expect(rb"under-replicated partitions \(3\)")
            screen = ANSI.sub(b"", _seen(top.before) + _seen(top.after))
            assert re.search(rf"{stopped}\s+stopped\s+no".encode(), screen), screen

            top.sendintr()
            assert _exit_status(top) == 0
            assert _seen(top.before).endswith(b"\x1b[?1049l")  # back from the alternate screen
        finally:
            top.close(force=True)

        top = _spawn_top(up.cluster_file)
        try:
            top.expect(rb"brokers: 2 registered of 3")
            top.send("q")
            assert _exit_status(top) == 0
        finally:
            top.close(force=True)

        once = kemu("top", "--once", "--cluster-file", str(up.cluster_file))
        assert once.returncode == 0, once.stderr
        assert "\x1b" not in once.stdout  # plain: no escape sequences on a pipe
        assert f"controller: broker {controller} (epoch " in once.stdout
        assert "brokers: 2 registered of 3" in once.stdout
        assert once.stdout.count("kemu top ") == 1


@pytest.mark.processes
def test_no_running_cluster_is_one_line_and_exit_1(tmp_path: Path) -> None:
    """Without a cluster file, ``kemu top`` says so in one line and exits 1; a bad
    interval is a usage error."""
    result = kemu("top", "--once", "--cluster-file", str(tmp_path / "none.json"))
    assert result.returncode == 1
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("Error: ")
    bad = kemu("top", "--interval", "0", "--cluster-file", str(tmp_path / "none.json"))
    assert bad.returncode == 2
    assert bad.stderr == "Error: --interval 0: must be more than 0 seconds\n"
