"""Topic deletion end to end on a real cluster in one process (``TopicDeletionManager``,
Kafka's DeleteTopicTest and the deletion lines of ControllerIntegrationTest): real brokers,
log managers writing real directories, the controller, on the embedded store and a real
ZooKeeper, over in-process queues and (for a subset) TCP between the nodes.

Topics are marked for deletion as ``kemu topics --delete --zookeeper`` does (the command
itself, run in-process against the cluster's store), or by writing
``/admin/delete_topics/<t>`` directly. After each deletion, ``wait_topic_gone`` checks
(``tests.support.deletion.topic_leftovers``) what Kafka's ``TestUtils.verifyTopicDeletion``
checks and more: no znode of the topic, no ``<topic>-<p>`` and, once
``log.segment.delete.delay.ms`` (200 ms here) has passed, no ``-delete`` directory in any
broker's log dir, nothing of it in any controller's context, any broker's metadata cache or
log manager.

Each broker's log manager works through an ``actors.log.disk.FaultyDisk`` (healthy until a
test breaks it), and ``log.initial.task.delay.ms=0`` lets the first removal happen within
the delay rather than 30 s after start-up (Kafka 2.7's fixed ``InitialTaskDelayMs``)."""

from __future__ import annotations

import io
import json
import random
import re
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from actors.broker.broker import Broker, broker_ref
from actors.controller.controller import KafkaController
from actors.log.disk import DiskOp, FaultyDisk
from actors.runtime.tracer import MemorySink, Tracer
from actors.zk.store import MetadataStore, StoreSession
from cluster.cli.topics import run_topic_command
from cluster.launch.cluster import Cluster, ClusterSpec
from protocol import zkdata
from protocol.broker import BrokerStatus
from protocol.errors import ErrorCode
from protocol.ids import BrokerId, TopicName
from protocol.kafka_api import (
    CreatableTopic,
    CreateTopicsRequestData,
    CreateTopicsResponseData,
    PartitionAssignment,
)
from protocol.kafka_data import (
    ProducePartitionData,
    ProduceRequestData,
    ProduceResponseData,
    ProduceTopicData,
)
from protocol.log import GetLogDirStatus, LogDirInfo, LogDirStatus
from protocol.trace import TraceEvent
from tests.support.deletion import (
    running_brokers,
    topic_leftovers,
    topic_log_dirs,
    topic_znodes,
)
from tests.support.hosting import hosted_fixture
from tests.support.record_batches import client_batch
from tests.support.waiting import eventually
from tests.support.zookeeper import ZooKeeperServer

DELETE_DELAY_MS = 200
SESSION_TIMEOUT_MS = 2000
BASE_CONFIG = {
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "log.segment.delete.delay.ms": str(DELETE_DELAY_MS),
    "log.initial.task.delay.ms": "0",
    # As Kafka's TestUtils.createBrokerConfig: a last broker's controlled shutdown, which
    # cannot move its leaders anywhere, gives up after 3 quick retries.
    "controlled.shutdown.retry.backoff.ms": "100",
}
DELETION_TIMEOUT = 20.0  # seconds for a deletion that can progress to finish
FAILOVER_TIMEOUT = 30.0  # for a crashed broker's session to expire and the cluster to react
MARKED = (
    "Topic {t} is marked for deletion.\n"
    "Note: This will have no impact if delete.topic.enable is not set to true.\n"
)
_DELETE_DIR = re.compile(r"^(?P<base>.+-\d+)\.[0-9a-f]{32}-delete$")

Assignment = Mapping[int, Sequence[int]]


@dataclass(frozen=True)
class Backend:
    store: str  # "embedded" or "zookeeper"
    transport: str  # "inproc" or "tcp"

    def __str__(self) -> str:
        return f"{self.store}-{self.transport}"


def _backend(store: str, transport: str) -> object:
    marks = [pytest.mark.zookeeper] if store == "zookeeper" else []
    backend = Backend(store, transport)
    return pytest.param(backend, marks=marks, id=str(backend))


EVERY_STORE = [_backend("embedded", "inproc"), _backend("zookeeper", "inproc")]
WITH_TCP = [*EVERY_STORE, _backend("embedded", "tcp")]  # TCP between nodes: any store


@dataclass
class Harness:
    """A running 3-broker cluster, what the test reads it with, and the knobs it turns."""

    cluster: Cluster
    logs: Path
    sink: MemorySink
    disks: dict[int, FaultyDisk]
    probe: StoreSession  # the test's own session on the cluster's store
    zookeeper: str  # the --zookeeper address of `kemu topics`
    store: MetadataStore | None  # the store handed to the command in-process (embedded)

    def running(self) -> list[int]:
        return running_brokers(self.cluster)

    def controller(self, broker_id: int) -> KafkaController:
        actor = self.cluster.nodes[broker_id].actor("controller")
        assert isinstance(actor, KafkaController)
        return actor

    def broker(self, broker_id: int) -> Broker:
        actor = self.cluster.nodes[broker_id].actor("broker")
        assert isinstance(actor, Broker)
        return actor

    # -- admin

    async def topics(self, *argv: str) -> tuple[int, str, str]:
        """``kemu topics ARGV --zookeeper ...``: exit status, stdout, stderr."""
        out, err = io.StringIO(), io.StringIO()
        rc = await run_topic_command(
            [*argv, "--zookeeper", self.zookeeper],
            out=out,
            err=err,
            store=self.store,
            rng=random.Random(0),
        )
        return rc, out.getvalue(), err.getvalue()

    async def delete(self, *topics: str) -> None:
        """``kemu topics --delete --topic T`` for each topic, as a user would."""
        for topic in topics:
            assert await self.topics("--delete", "--topic", topic) == (
                0,
                MARKED.format(t=topic),
                "",
            )

    async def create(self, topic: str, assignment: Assignment, via: int | None = None) -> None:
        """CreateTopics with a manual assignment, through broker ``via`` (any running one);
        returns once every running replica has its log and every running broker's
        metadata has the topic."""
        via = self.running()[0] if via is None else via
        request = CreateTopicsRequestData(
            topics=(
                CreatableTopic(
                    name=TopicName(topic),
                    num_partitions=-1,
                    replication_factor=-1,
                    assignments=tuple(
                        PartitionAssignment(
                            partition=p,
                            broker_ids=tuple(BrokerId(b) for b in replicas),
                        )
                        for p, replicas in sorted(assignment.items())
                    ),
                ),
            ),
            timeout_ms=10_000,
        )
        reply = await self.cluster.nodes[via].ask(broker_ref(via), request, timeout=15)
        assert isinstance(reply, CreateTopicsResponseData)
        assert reply.topics[0].error_code == 0, reply
        # Then until every running replica has its log and every running broker the topic.
        running = self.running()
        expected = {(b, p) for p, replicas in assignment.items() for b in replicas if b in running}

        async def settled() -> tuple[set[tuple[int, int]], bool]:
            logs = {(_host(d), int(d.rpartition("-")[2])) for d in self.live_dirs(topic)}
            cached = all([topic in (await self.status(b)).topics for b in running])
            return logs, cached

        await eventually(settled, until=lambda s: s == (expected, True))

    # -- reading

    async def exists(self, path: str) -> bool:
        return await self.probe.exists(path) is not None

    async def znodes(self, topic: str) -> list[str]:
        return await topic_znodes(self.probe, topic)

    def dirs(self, topic: str) -> list[str]:
        """``broker-<id>[.<k>]/<name>`` of every live or ``-delete`` dir of the topic."""
        return topic_log_dirs(self.logs, topic)

    def live_dirs(self, topic: str) -> set[str]:
        return {d for d in self.dirs(topic) if not d.endswith("-delete")}

    async def log_dir_status(self, broker_id: int) -> tuple[LogDirInfo, ...]:
        node = self.cluster.nodes[broker_id]
        reply = await node.ask(self.broker(broker_id).log_manager_ref, GetLogDirStatus(), timeout=5)
        assert isinstance(reply, LogDirStatus)
        return reply.dirs

    async def status(self, broker_id: int) -> BrokerStatus:
        status = await self.cluster.status(broker_id)
        assert status is not None, f"broker {broker_id} did not answer"
        return status

    async def controller_id(self) -> int:
        """The active controller, once every running broker names the same running one."""

        async def agreed() -> set[int]:
            return {(await self.status(b)).controller_id for b in self.running()}

        ids = await eventually(
            agreed,
            until=lambda c: len(c) == 1 and next(iter(c)) in self.running(),
            timeout=FAILOVER_TIMEOUT,
        )
        return next(iter(ids))

    # -- what is left of a topic

    async def leftovers(self, topic: str) -> list[str]:
        return await topic_leftovers(self.cluster, self.probe, topic)

    async def wait_topic_gone(self, topic: str, timeout: float = DELETION_TIMEOUT) -> None:
        await eventually(
            lambda: self.leftovers(topic), until=lambda left: not left, timeout=timeout
        )

    def log_dir_events(self, topic: str, op: str) -> list[TraceEvent]:
        return [
            e
            for e in self.sink.of("log_dir", op)
            if e.fields.get("topic") == topic and e.fields.get("result") == "ok"
        ]

    def deletion_events(self, type_: str) -> list[TraceEvent]:
        return self.sink.of("event", type_)


@asynccontextmanager
async def running(
    request: pytest.FixtureRequest,
    backend: Backend,
    tmp_path: Path,
    config: Mapping[str, str] | None = None,
    *,
    log_dirs: int = 1,
) -> AsyncIterator[Harness]:
    """Three brokers on ``backend`` (a real ZooKeeper under a fresh chroot, or the embedded
    store), with a ``FaultyDisk`` (healthy until told otherwise) under each log manager
    and every trace event kept."""
    tracer = Tracer()
    sink = MemorySink()
    tracer.add_sink(sink)
    zookeeper = None
    if backend.store == "zookeeper":
        server: ZooKeeperServer = request.getfixturevalue("zookeeper_server")
        zookeeper = f"{server.hosts}/kemu-{uuid.uuid4().hex}"
    spec = ClusterSpec(
        brokers=3,
        base_port=0,
        log_dir=tmp_path / "logs",
        zookeeper=zookeeper,
        transport=backend.transport,
        config={**BASE_CONFIG, **(config or {})},
        log_dirs_per_broker=log_dirs,
    )
    disks = {b: FaultyDisk() for b in range(spec.brokers)}
    async with anyio.create_task_group() as tg:
        cluster: Cluster = await tg.start(Cluster(spec, tracer=tracer, disks=disks).run)
        assert cluster.store is not None
        probe = await cluster.store.open_session(timeout=10.0, name="probe")
        try:
            yield Harness(
                cluster,
                spec.log_dir,
                sink,
                disks,
                probe,
                zookeeper or "embedded://in-process",
                None if zookeeper else cluster.store,
            )
        finally:
            await probe.close()
            probe.events.close()
            tg.cancel_scope.cancel()


@hosted_fixture()
async def harness(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Harness]:
    async with running(request, request.param, tmp_path) as h:
        yield h


def _host(path: str) -> int:
    """The broker of a ``broker-<id>[.<k>]/<name>`` path of ``Harness.dirs``."""
    return int(path.split("/")[0].removeprefix("broker-").split(".")[0])


def _others(*excluded: int) -> list[int]:
    """The brokers other than ``excluded``, in order."""
    return [b for b in range(3) if b not in excluded]


async def _stop(h: Harness, broker_id: int) -> None:
    """Stop a broker gracefully and wait until the controller has seen it go."""
    h.cluster.stop_broker(broker_id)
    assert await h.cluster.wait_stopped(broker_id, timeout=15)

    async def live() -> set[bool]:
        return {set((await h.status(b)).live_brokers) == set(h.running()) for b in h.running()}

    await eventually(live, until=lambda seen: seen == {True}, timeout=FAILOVER_TIMEOUT)


async def _start(h: Harness, broker_id: int) -> None:
    await h.cluster.start_broker(broker_id)
    await h.cluster.wait_ready(timeout=FAILOVER_TIMEOUT)


async def _wait_paused(h: Harness, topic: str, hosts: Sequence[int]) -> None:
    """Until the live replicas of ``topic`` (those on ``hosts``) are renamed for deletion
    while the topic stays, paused, in the active controller's queue."""
    controller = await h.controller_id()

    async def state() -> tuple[set[str], bool]:
        ctx = h.controller(controller).context
        paused = topic in ctx.topics_to_be_deleted and topic in ctx.topics_ineligible_for_deletion
        return {d for d in h.live_dirs(topic) if _host(d) in hosts}, paused

    await eventually(state, until=lambda s: not s[0] and s[1], timeout=DELETION_TIMEOUT)


# ============================================================================ scenarios


@pytest.mark.asyncio
@pytest.mark.parametrize("harness", WITH_TCP, indirect=True)
async def test_delete_with_all_replicas_alive(harness: Harness) -> None:
    """DeleteTopicTest.testDeleteTopicWithAllAliveReplicas: every replica's log is renamed
    to ``<topic>-<p>.<32 hex>-delete`` and removed no sooner than the delete delay; the
    topic leaves every znode, context and cache; another topic is untouched."""
    h = harness
    doomed = {0: [0, 1, 2], 1: [1, 2, 0]}
    await h.create("doomed", doomed)
    await h.create("kept", {0: [2, 0]})
    before = h.dirs("kept")
    await h.delete("doomed")
    await h.wait_topic_gone("doomed")

    renamed = h.log_dir_events("doomed", "rename")
    assert sorted((e.node, e.fields["partition"]) for e in renamed) == sorted(
        (f"broker-{b}", p) for p, replicas in doomed.items() for b in replicas
    )
    for event in renamed:
        name = event.fields["to"]
        match = _DELETE_DIR.match(name)
        assert match is not None, name
        assert match["base"] == f"doomed-{event.fields['partition']}", name
        removed = [
            e
            for e in h.log_dir_events("doomed", "remove")
            if e.node == event.node and e.fields["dir"].endswith(f"/{name}")
        ]
        assert len(removed) == 1, name
        assert removed[0].ts - event.ts >= DELETE_DELAY_MS / 1000 - 0.01
    assert h.dirs("kept") == before
    assert await h.exists("/brokers/topics/kept")
    for b in range(3):
        assert "kept" in (await h.status(b)).topics


@pytest.mark.asyncio
@pytest.mark.parametrize("harness", WITH_TCP, indirect=True)
async def test_delete_with_a_follower_down_resumes_when_it_restarts(harness: Harness) -> None:
    """DeleteTopicTest.testResumeDeleteTopicWithRecoveredFollower: with a follower stopped,
    the live replicas are deleted but the topic stays marked, paused; marking it again is
    reported as already marked (testDeleteTopicAlreadyMarkedAsDeleted); once the follower
    is back, its replica is deleted too and the topic goes."""
    h = harness
    controller = await h.controller_id()
    leader, follower = _others(controller)
    await h.create("paused", {0: [leader, follower], 1: [follower, controller]})
    await _stop(h, follower)
    await h.delete("paused")
    await _wait_paused(h, "paused", [leader, controller])
    assert await h.exists("/brokers/topics/paused")
    assert await h.exists("/admin/delete_topics/paused")
    assert h.live_dirs("paused") == {f"broker-{follower}/paused-0", f"broker-{follower}/paused-1"}
    halted = h.deletion_events("topic_deletion_halted")
    assert [e.fields["reason"] for e in halted if "paused" in e.fields["topics"]] == [
        "offline replicas"
    ]
    again = await h.topics("--delete", "--topic", "paused")
    assert again == (0, "Topic paused is already marked for deletion.\n", "")

    await _start(h, follower)
    await h.wait_topic_gone("paused")
    assert [e.fields["partition"] for e in h.log_dir_events("paused", "rename") if
            e.node == f"broker-{follower}"] == [0, 1]  # fmt: skip


@pytest.mark.slow  # seconds of real time: failover, halts, many topics
@pytest.mark.asyncio
@pytest.mark.parametrize("harness", WITH_TCP, indirect=True)
async def test_new_controller_finishes_a_deletion_paused_by_a_dead_follower(
    harness: Harness,
) -> None:
    """DeleteTopicTest.testResumeDeleteTopicOnControllerFailover: a follower down pauses
    the deletion; the controller's broker crashes; the new controller re-queues the marked
    topic at failover (still paused) and finishes it once the follower is back."""
    h = harness
    old = await h.controller_id()
    survivor, follower = _others(old)
    await h.create("moved", {0: [survivor, follower], 1: [follower, survivor]})
    await _stop(h, follower)
    await h.delete("moved")
    await _wait_paused(h, "moved", [survivor])

    await h.cluster.crash_broker(old)
    new = await h.controller_id()
    assert new == survivor
    ctx = h.controller(new).context
    assert "moved" in ctx.topics_to_be_deleted
    assert "moved" in ctx.topics_ineligible_for_deletion
    assert await h.exists("/brokers/topics/moved")

    await _start(h, follower)
    await h.wait_topic_gone("moved")
    assert (await h.probe.get(zkdata.CONTROLLER_EPOCH_PATH))[0] == b"2"


@pytest.mark.asyncio
@pytest.mark.parametrize("backend", EVERY_STORE)
async def test_deletion_disabled_removes_the_marker_and_keeps_the_topic(
    request: pytest.FixtureRequest, backend: Backend, tmp_path: Path
) -> None:
    """DeleteTopicTest.testDisableDeleteTopic: with delete.topic.enable=false the controller
    removes the marker and leaves the topic whole: znodes, logs, leaders, caches."""
    async with running(request, backend, tmp_path, {"delete.topic.enable": "false"}) as h:
        assignment = {0: [0, 1], 1: [1, 2]}
        await h.create("stays", assignment)
        state = await h.probe.get(zkdata.partition_state_path(TopicName("stays"), 0))
        await h.delete("stays")

        async def marked() -> bool:
            return await h.exists("/admin/delete_topics/stays")

        await eventually(marked, until=lambda m: not m)
        assert h.deletion_events("topic_deletion_disabled")
        assert await h.znodes("stays") == [
            "/brokers/topics/stays",
            "/brokers/topics/stays/partitions",
            "/brokers/topics/stays/partitions/0",
            "/brokers/topics/stays/partitions/0/state",
            "/brokers/topics/stays/partitions/1",
            "/brokers/topics/stays/partitions/1/state",
            "/config/topics/stays",
        ]
        assert await h.probe.get(zkdata.partition_state_path(TopicName("stays"), 0)) == state
        assert h.dirs("stays") == [
            "broker-0/stays-0",
            "broker-1/stays-0",
            "broker-1/stays-1",
            "broker-2/stays-1",
        ]
        assert not h.log_dir_events("stays", "rename")
        controller = h.controller(await h.controller_id()).context
        assert "stays" in controller.all_topics
        assert not controller.topics_to_be_deleted
        for b in range(3):
            assert "stays" in (await h.status(b)).topics


@pytest.mark.asyncio
@pytest.mark.parametrize("harness", EVERY_STORE, indirect=True)
async def test_recreate_a_topic_right_after_its_deletion(harness: Harness) -> None:
    """DeleteTopicTest.testRecreateTopicAfterDeletion: as soon as the deletion completes
    (its marker, removed last, is gone), the same name is created again with another
    layout; the new topic gets leaders and its own logs, and the old logs still go."""
    h = harness
    await h.create("again", {0: [0, 1], 1: [1, 2], 2: [2, 0]})
    await h.delete("again")

    async def marked() -> bool:
        return await h.exists("/admin/delete_topics/again")

    await eventually(marked, until=lambda m: not m, timeout=DELETION_TIMEOUT)
    await h.create("again", {0: [2, 1]})

    async def settled() -> tuple[list[str], bool]:
        cached = all(["again" in (await h.status(b)).topics for b in range(3)])
        return h.dirs("again"), cached

    new_logs = ["broker-1/again-0", "broker-2/again-0"]
    await eventually(settled, until=lambda s: s == (new_logs, True), timeout=DELETION_TIMEOUT)
    assert await h.znodes("again") == [
        "/brokers/topics/again",
        "/brokers/topics/again/partitions",
        "/brokers/topics/again/partitions/0",
        "/brokers/topics/again/partitions/0/state",
        "/config/topics/again",
    ]
    data, _ = await h.probe.get(zkdata.partition_state_path(TopicName("again"), 0))
    state = json.loads(data)
    assert (state["leader"], state["leader_epoch"], state["isr"]) == (2, 0, [2, 1])
    ctx = h.controller(await h.controller_id()).context
    assert set(ctx.partition_assignments[TopicName("again")]) == {0}
    assert "again" not in ctx.topics_to_be_deleted


@pytest.mark.asyncio
@pytest.mark.parametrize("harness", EVERY_STORE, indirect=True)
async def test_deleting_a_topic_that_does_not_exist(harness: Harness) -> None:
    """DeleteTopicTest.testDeleteNonExistingTopic: the command refuses it and writes no
    marker (with --if-exists it does nothing, quietly); a marker written anyway is removed
    by the controller (``TopicDeletionManager.onTopicDeletion``). Another topic is untouched."""
    h = harness
    await h.create("bystander", {0: [0, 1, 2]})
    before = h.dirs("bystander")
    assert await h.topics("--delete", "--topic", "ghost") == (
        1,
        "Error while executing topic command : Topic 'ghost' does not exist as expected\n",
        "",
    )
    assert await h.topics("--delete", "--topic", "ghost", "--if-exists") == (0, "", "")
    assert not await h.exists("/admin/delete_topics/ghost")

    await h.probe.create("/admin/delete_topics/ghost", make_parents=True)

    async def marked() -> bool:
        return await h.exists("/admin/delete_topics/ghost")

    await eventually(marked, until=lambda m: not m)
    ignored = h.deletion_events("topic_deletion_ignored")
    assert [e.fields["topics"] for e in ignored] == [["ghost"]]
    assert await h.leftovers("ghost") == []
    assert h.dirs("bystander") == before
    for b in range(3):
        assert "bystander" in (await h.status(b)).topics


@pytest.mark.asyncio
@pytest.mark.parametrize("backend", EVERY_STORE)
async def test_stop_replica_storage_error_pauses_the_deletion_until_a_healthy_restart(
    request: pytest.FixtureRequest, backend: Backend, tmp_path: Path
) -> None:
    """A StopReplica(delete=true) whose rename fails (a disk fault in one of the broker's
    two log dirs) answers KAFKA_STORAGE_ERROR for that replica: the dir goes offline, the
    broker stays up, the controller pauses the deletion (replica deletion failure) with
    that log still on disk while every other replica is deleted. Once the broker restarts
    with the disk healed, the controller resumes the deletion and it completes."""
    async with running(request, backend, tmp_path, log_dirs=2) as h:
        controller = await h.controller_id()
        faulty, other = _others(controller)
        await h.create("faulted", {0: [faulty, other], 1: [controller, faulty]})
        await h.create("spared", {0: [faulty]})
        spared = h.dirs("spared")
        (broken,) = [d for d in h.dirs("faulted") if d.endswith("/faulted-0") and
                     _host(d) == faulty]  # fmt: skip
        broken_dir = h.logs / broken.split("/")[0]
        fault = h.disks[faulty].fail(broken_dir, [DiskOp.RENAME])
        await h.delete("faulted")

        await _wait_paused(h, "faulted", [other, controller])

        assert h.live_dirs("faulted") == {broken}
        assert h.disks[faulty].injected == [(DiskOp.RENAME, broken_dir / "faulted-0")]
        halted = [e for e in h.deletion_events("topic_deletion_halted")
                  if "faulted" in e.fields["topics"]]  # fmt: skip
        assert [e.fields["reason"] for e in halted] == ["replica deletion failure"]
        assert h.cluster.nodes[faulty].running
        assert await h.exists("/brokers/topics/faulted")
        assert await h.exists("/admin/delete_topics/faulted")
        offline = [d.log_dir for d in (await h.log_dir_status(faulty)) if not d.online]
        assert offline == [str(broken_dir)]

        h.disks[faulty].heal(fault)
        await _stop(h, faulty)
        await _start(h, faulty)
        await h.wait_topic_gone("faulted")
        assert h.dirs("spared") == spared
        for b in range(3):
            assert "spared" in (await h.status(b)).topics


@pytest.mark.slow  # seconds of real time: failover, halts, many topics
@pytest.mark.asyncio
@pytest.mark.parametrize("harness", EVERY_STORE, indirect=True)
async def test_disk_fault_in_the_only_log_dir_halts_the_broker_then_deletion_resumes(
    harness: Harness,
) -> None:
    """A failed rename in a broker's only log dir halts the broker (Kafka's
    ``Exit.halt``) before it answers: the controller sees it die, deletes the other
    replicas and pauses. Restarted on a healthy disk, the broker finds the log still
    there and the controller finishes the deletion."""
    h = harness
    controller = await h.controller_id()
    faulty, other = _others(controller)
    await h.create("faulted", {0: [faulty, other], 1: [controller, faulty]})
    session_id = (await h.status(faulty)).session_id
    fault = h.disks[faulty].fail(h.logs / f"broker-{faulty}", [DiskOp.RENAME])
    await h.delete("faulted")
    node = h.cluster.nodes[faulty]

    async def halted() -> bool:
        return node.crashed and not node.running

    await eventually(halted, timeout=DELETION_TIMEOUT)
    assert {op for op, _ in h.disks[faulty].injected} == {DiskOp.RENAME}
    # As when a process halts: its listener goes, and ZooKeeper expires its session (in one
    # process, the test plays both parts).
    await h.cluster.crash_broker(faulty)
    assert await h.cluster.wait_stopped(faulty, timeout=5)
    assert h.cluster.store is not None
    await h.cluster.store.expire_session(session_id)
    await _wait_paused(h, "faulted", [other, controller])
    assert await h.exists("/admin/delete_topics/faulted")
    assert h.live_dirs("faulted") == {f"broker-{faulty}/faulted-0", f"broker-{faulty}/faulted-1"}

    h.disks[faulty].heal(fault)
    await _start(h, faulty)
    await h.wait_topic_gone("faulted")


@pytest.mark.asyncio
@pytest.mark.parametrize("harness", EVERY_STORE, indirect=True)
async def test_partitions_added_while_a_deletion_is_paused_are_undone(harness: Harness) -> None:
    """DeleteTopicTest.testAddPartitionDuringDeleteTopic: partitions written to the store
    (``kemu topics --alter --partitions``) after the topic is marked are undone by the
    controller (the assignment goes back to the partitions it knows) and get no log; the
    deletion completes once the stopped follower is back."""
    h = harness
    controller = await h.controller_id()
    leader, follower = _others(controller)
    await h.create("growing", {0: [leader, follower]})
    await _stop(h, follower)
    await h.delete("growing")
    await _wait_paused(h, "growing", [leader])
    rc, out, err = await h.topics("--alter", "--topic", "growing", "--partitions", "3")
    assert (rc, err) == (0, ""), out
    assert out.endswith("Adding partitions succeeded!\n")

    async def assignment() -> dict[str, list[int]]:
        data, _ = await h.probe.get("/brokers/topics/growing")
        partitions: dict[str, list[int]] = json.loads(data)["partitions"]
        return partitions

    assert await eventually(assignment, until=lambda a: list(a) == ["0"]) == {
        "0": [leader, follower]
    }
    assert await h.probe.children("/brokers/topics/growing/partitions") == ("0",)
    assert h.live_dirs("growing") == {f"broker-{follower}/growing-0"}

    await _start(h, follower)
    await h.wait_topic_gone("growing")
    assert {e.fields["partition"] for e in h.log_dir_events("growing", "create")} == {0}


@pytest.mark.asyncio
@pytest.mark.parametrize("harness", EVERY_STORE, indirect=True)
async def test_a_partially_deleted_topic_is_finished_by_the_next_controller(
    harness: Harness,
) -> None:
    """DeleteTopicTest.testDeletingPartiallyDeletedTopic: with every broker down, one
    partition's znodes are removed (as a controller that crashed half-way through would
    leave them) and the topic is marked; the controller elected when the brokers return
    deletes both partitions' logs and every znode left."""
    h = harness
    await h.create("partial", {0: [0, 1], 1: [1, 2]})
    for b in range(3):
        h.cluster.stop_broker(b)
        assert await h.cluster.wait_stopped(b, timeout=15)
    await h.probe.delete("/brokers/topics/partial/partitions/1", recursive=True)
    await h.probe.create("/admin/delete_topics/partial", make_parents=True)
    for b in range(3):
        await h.cluster.start_broker(b)
    await h.cluster.wait_ready(timeout=FAILOVER_TIMEOUT)
    await h.wait_topic_gone("partial")
    renamed = {(e.node, e.fields["partition"]) for e in h.log_dir_events("partial", "rename")}
    assert renamed == {("broker-0", 0), ("broker-1", 0), ("broker-1", 1), ("broker-2", 1)}


@pytest.mark.slow  # seconds of real time: failover, halts, many topics
@pytest.mark.asyncio
@pytest.mark.parametrize("harness", EVERY_STORE, indirect=True)
async def test_many_topics_deleted_at_once(harness: Harness) -> None:
    """Twenty topics marked by one regex command are all deleted; a topic outside the
    regex stays."""
    h = harness
    names = [f"bulk-{i:02d}" for i in range(20)]
    for i, name in enumerate(names):
        await h.create(name, {0: [i % 3, (i + 1) % 3], 1: [(i + 1) % 3, (i + 2) % 3]})
    await h.create("bulky", {0: [0]})
    rc, out, err = await h.topics("--delete", "--topic", "bulk-.*")
    assert (rc, err) == (0, "")
    assert out == "".join(MARKED.format(t=name) for name in names)
    for name in names:
        await h.wait_topic_gone(name)
    assert h.dirs("bulky") == ["broker-0/bulky-0"]
    assert await h.exists("/brokers/topics/bulky")


@pytest.mark.asyncio
@pytest.mark.parametrize("backend", EVERY_STORE)
async def test_a_deleted_log_waits_for_the_broker_delay_not_its_topics_override(
    request: pytest.FixtureRequest, backend: Backend, tmp_path: Path
) -> None:
    """A deleted log is removed after the broker's ``log.segment.delete.delay.ms`` whatever
    its topic's ``file.delete.delay.ms`` (``LogManager.deleteLogs`` waits
    ``currentDefaultConfig.fileDeleteDelayMs``; the log's own config only delays its
    segment files): a topic overriding it with an hour has its ``-delete`` directories
    removed as soon as a topic without the override."""
    async with running(request, backend, tmp_path) as h:
        for topic, extra in (
            ("lingering", ["--config", "file.delete.delay.ms=3600000"]),
            ("plain", []),
        ):
            rc, _, err = await h.topics(
                "--create", "--topic", topic, "--replica-assignment", "0:1,1:2", *extra
            )
            assert rc == 0, err

        async def logs_made() -> set[str]:
            return h.live_dirs("lingering") | h.live_dirs("plain")

        await eventually(logs_made, until=lambda dirs: len(dirs) == 8)
        await h.delete("lingering", "plain")
        await h.wait_topic_gone("lingering")
        await h.wait_topic_gone("plain")
        assert h.dirs("lingering") == h.dirs("plain") == []
        for topic in ("lingering", "plain"):
            renamed = {e.fields["to"] for e in h.log_dir_events(topic, "rename")}
            removed = {Path(e.fields["dir"]).name for e in h.log_dir_events(topic, "remove")}
            assert len(removed) == 4
            assert removed == renamed


@pytest.mark.asyncio
@pytest.mark.parametrize("harness", EVERY_STORE, indirect=True)
async def test_a_deletion_waits_for_a_running_reassignment_then_completes(
    harness: Harness,
) -> None:
    """Deletion during a reassignment (``TopicDeletionManager`` marks the topic ineligible):
    a reassignment whose new replica's broker is down holds; the topic marked meanwhile is
    queued paused, nothing of it is renamed; once the broker is back the reassignment
    completes, the deletion resumes and the topic, its logs (the new replica's too) and the
    reassignment znode all go."""
    h = harness
    controller = await h.controller_id()
    target, other = _others(controller)
    await h.create("moving", {0: [controller, other]})
    await _stop(h, target)
    reassignment = zkdata.PartitionReassignment(
        partitions=(
            zkdata.PartitionReplicas(
                topic=TopicName("moving"),
                partition=0,
                replicas=(BrokerId(controller), BrokerId(target)),
            ),
        )
    )
    await h.probe.create(zkdata.REASSIGN_PARTITIONS_PATH, reassignment.encode())

    async def reassigning() -> bool:
        ctx = h.controller(controller).context
        return any(tp.topic == "moving" for tp in ctx.partitions_being_reassigned)

    await eventually(reassigning, until=bool, timeout=FAILOVER_TIMEOUT)
    await h.delete("moving")

    async def held() -> tuple[bool, bool]:
        ctx = h.controller(controller).context
        return (
            "moving" in ctx.topics_to_be_deleted,
            "moving" in ctx.topics_ineligible_for_deletion,
        )

    assert await eventually(held, until=lambda s: s == (True, True)) == (True, True)
    assert not h.log_dir_events("moving", "rename")
    assert h.live_dirs("moving") == {f"broker-{controller}/moving-0", f"broker-{other}/moving-0"}
    assert await h.exists(zkdata.REASSIGN_PARTITIONS_PATH)

    await _start(h, target)
    await h.wait_topic_gone("moving")
    assert not await h.exists(zkdata.REASSIGN_PARTITIONS_PATH)
    assert not await h.exists("/admin/delete_topics/moving")


@pytest.mark.slow  # the failed write is the broker's next checkpoint, up to 5 s away
@pytest.mark.asyncio
@pytest.mark.parametrize("backend", EVERY_STORE)
async def test_a_failed_log_dir_reaches_the_controller_which_moves_its_leaders(
    request: pytest.FixtureRequest, backend: Backend, tmp_path: Path
) -> None:
    """``ReplicaManager.handleLogDirFailure`` → ``/log_dir_event_notification`` →
    ``KafkaController.processLogDirEventNotification``: when a checkpoint write fails in
    one of a broker's two log dirs, the broker stays up and writes a notification; the
    controller asks it about all its replicas, the one in the failed dir answers
    KAFKA_STORAGE_ERROR, goes offline and its leadership moves to the other replica (out
    of the ISR), while the partition in the healthy dir keeps its leader. The processed
    notification is deleted."""
    async with running(request, backend, tmp_path, log_dirs=2) as h:
        controller = await h.controller_id()
        faulty, other = _others(controller)
        await h.create("moved", {0: [faulty, other]})
        await h.create("stays", {0: [faulty, other]})
        (moved,) = [d for d in h.dirs("moved") if _host(d) == faulty]
        (stays,) = [d for d in h.dirs("stays") if _host(d) == faulty]
        # nextLogDirs: fewest logs first, so the two logs are in different dirs
        assert moved.split("/")[0] != stays.split("/")[0]
        broken_dir = h.logs / moved.split("/")[0]
        h.disks[faulty].fail(broken_dir, [DiskOp.WRITE_FILE])

        produced = await h.cluster.nodes[faulty].ask(
            broker_ref(faulty),
            ProduceRequestData(
                acks=-1,
                timeout_ms=10_000,
                topic_data=(
                    ProduceTopicData(
                        name=TopicName("moved"),
                        partition_data=(
                            ProducePartitionData(index=0, records=client_batch([b"x"])),
                        ),
                    ),
                ),
            ),
            timeout=15,
        )
        # A checkpoint is due now (the creation's, or this append's high watermark): it
        # fails in the broken dir, before or after this append.
        assert isinstance(produced, ProduceResponseData)
        assert produced.responses[0].partition_responses[0].error_code in (
            ErrorCode.NONE,
            ErrorCode.KAFKA_STORAGE_ERROR,
        )

        async def state(topic: str) -> zkdata.LeaderIsrAndControllerEpoch:
            data, _ = await h.probe.get(f"/brokers/topics/{topic}/partitions/0/state")
            return zkdata.LeaderIsrAndControllerEpoch.decode(data)

        moved_state = await eventually(
            lambda: state("moved"), until=lambda s: s.leader == other, timeout=FAILOVER_TIMEOUT
        )
        assert moved_state.isr == (other,)
        assert (await state("stays")).leader == faulty
        assert h.cluster.nodes[faulty].running
        offline = [d.log_dir for d in (await h.log_dir_status(faulty)) if not d.online]
        assert offline == [str(broken_dir)]
        assert [e.fields["brokers"] for e in h.sink.of("event", "log_dir_failure_handled")] == [
            [faulty]
        ]
        (propagated,) = h.sink.of("event", "log_dir_event_propagated")
        assert propagated.node == f"broker-{faulty}"
        assert await h.probe.children("/log_dir_event_notification") == ()
