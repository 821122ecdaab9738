"""Topic deletion in the controller (``TopicDeletionManager``, TopicDeletionManagerTest and
the controller side of DeleteTopicTest): fake brokers, the embedded store and the virtual
clock. Every test ends with the cluster settled and the control plane's invariants holding
(docs/chaos.md)."""

from __future__ import annotations

from collections.abc import Callable

import anyio

from actors.zk import kafka_zk
from protocol import zkdata
from protocol.control import LEADER_DURING_DELETE, StopReplicaRequest
from protocol.ids import TopicName
from protocol.trace import TraceEvent
from tests.support.controller_cluster import run_cluster, tp
from tests.support.fake_brokers import ControllerCluster

ALPHA = {0: [0, 1, 2], 1: [1, 2, 0]}


async def _start(cluster: ControllerCluster, brokers: int = 3) -> None:
    for i in range(brokers):
        await cluster.start_broker(i)
    await cluster.active_controller()


async def _mark(cluster: ControllerCluster, *topics: str) -> None:
    admin = await cluster.admin()
    for topic in topics:
        await admin.create(zkdata.delete_topic_path(TopicName(topic)), make_parents=True)


async def _exists(cluster: ControllerCluster, path: str) -> bool:
    return await (await cluster.admin()).exists(path) is not None


async def assert_topic_gone(cluster: ControllerCluster, topic: str) -> None:
    """Kafka's TestUtils.verifyTopicDeletion, on our fakes: no znode, no controller state,
    no broker serving or caching a partition of it."""
    name = TopicName(topic)
    for path in (
        zkdata.topic_path(name),
        zkdata.topic_config_path(name),
        zkdata.delete_topic_path(name),
    ):
        assert not await _exists(cluster, path), path
    for handle in cluster.brokers.values():
        ctx = handle.controller.context
        assert topic not in ctx.all_topics
        assert topic not in ctx.partition_assignments
        assert topic not in ctx.topics_to_be_deleted
        assert topic not in ctx.topics_with_deletion_started
        assert topic not in ctx.topics_ineligible_for_deletion
        assert not [p for p in ctx.partition_states if p.topic == topic]
        assert not [r for r in ctx.replica_states if r.topic == topic]
        assert not [p for p in ctx.leaderships if p.topic == topic]
        assert not [p for p in handle.broker.partitions if p.topic == topic]
        assert not [p for p in handle.broker.metadata if p.topic == topic]


def _holding(broker_id: int) -> Callable[[TraceEvent], bool]:
    node = f"broker-{broker_id}"
    return lambda e: e.type == "fake_broker_holds_stop_replica" and e.node == node


def replica_states(cluster: ControllerCluster, controller_id: int, topic: str) -> dict[str, str]:
    ctx = cluster.brokers[controller_id].controller.context
    return {
        f"{r.topic_partition}@{r.replica}": s.label
        for r, s in sorted(ctx.replica_states.items(), key=lambda i: str(i[0]))
        if r.topic == topic
    }


def test_deletion_with_all_replicas_alive() -> None:
    """Both StopReplica phases reach every replica's broker (delete=false, then true),
    every broker drops the topic from its cache (leader -2), and the znodes go in Kafka's
    order; another topic is untouched."""

    async def body(cluster: ControllerCluster) -> None:
        await _start(cluster)
        await cluster.create_topic("alpha", ALPHA)
        await cluster.create_topic("beta", {0: [2, 0]})
        await cluster.settle()
        await _mark(cluster, "alpha")
        await cluster.wait_for(lambda e: e.type == "topic_deletion_completed")
        await cluster.settle()
        await assert_topic_gone(cluster, "alpha")
        for handle in cluster.brokers.values():
            stops = [(str(p), d) for p, d in handle.broker.stopped if p.topic == "alpha"]
            hosted = sorted(f"alpha-{p}" for p, r in ALPHA.items() if handle.broker_id in r)
            # Phase 1 for every hosted partition, in one request; then phase 2.
            assert stops == [(t, False) for t in hosted] + [(t, True) for t in hosted]
            dropped = [
                um
                for req in handle.broker.update_metadata()
                for um in req.partition_states
                if um.topic == "alpha" and um.leader == LEADER_DURING_DELETE
            ]
            assert sorted({um.partition for um in dropped}) == [0, 1]
        assert await cluster.partition_state("beta", 0) is not None
        assert tp("beta") in cluster.brokers[0].broker.metadata
        # The deletion events, in order, from the active controller.
        names = [
            e.type for e in cluster.sink.events if (e.type or "").startswith("topic_deletion_")
        ]
        assert names[:2] == ["topic_deletion_enqueued", "topic_deletion_started"]
        assert names[-1] == "topic_deletion_completed"

    run_cluster(body)


def test_stop_replica_goes_only_to_brokers_hosting_replicas() -> None:
    async def body(cluster: ControllerCluster) -> None:
        await _start(cluster)
        await cluster.create_topic("solo", {0: [1]})
        await cluster.settle()
        await _mark(cluster, "solo")
        await cluster.wait_for(lambda e: e.type == "topic_deletion_completed")
        for broker_id in (0, 2):
            assert cluster.brokers[broker_id].broker.of_type(StopReplicaRequest) == []
        assert cluster.brokers[1].broker.stopped == [(tp("solo"), False), (tp("solo"), True)]

    run_cluster(body)


def test_deletion_waits_for_a_dead_follower_and_resumes_when_it_returns() -> None:
    """DeleteTopicTest.testResumeDeleteTopicWithRecoveredFollower: the live replicas are
    deleted, the dead one's are ReplicaDeletionIneligible, the marker and topic znode stay;
    the follower's restart finishes the deletion."""

    async def body(cluster: ControllerCluster) -> None:
        await _start(cluster)
        active = await cluster.active_controller()
        follower = next(b for b in (2, 1, 0) if b != active.broker_id)
        await cluster.create_topic("alpha", ALPHA)
        await cluster.settle()
        await cluster.crash_broker(follower)
        await cluster.settle()
        await _mark(cluster, "alpha")
        await cluster.wait_for(
            lambda e: e.type == "topic_deletion_halted" and e.fields["reason"] == "offline replicas"
        )
        await cluster.settle()
        states = replica_states(cluster, active.broker_id, "alpha")
        for key, state in states.items():
            # The dead replicas went Ineligible, then back to Offline by the retry once
            # nothing else was in flight (TopicDeletionManagerTest.testDeletionWithBrokerOffline).
            expected = (
                "OfflineReplica" if key.endswith(f"@{follower}") else ("ReplicaDeletionSuccessful")
            )
            assert state == expected, (key, state)
        assert await _exists(cluster, "/admin/delete_topics/alpha")
        assert await _exists(cluster, "/brokers/topics/alpha")
        ctx = active.controller.context
        assert ctx.topics_ineligible_for_deletion == {"alpha"}
        await cluster.start_broker(follower)
        await cluster.wait_for(lambda e: e.type == "topic_deletion_completed")
        await cluster.settle()
        await assert_topic_gone(cluster, "alpha")
        # The restarted follower was told to delete its replicas.
        assert (tp("alpha", 0), True) in cluster.brokers[follower].broker.stopped

    run_cluster(body)


def test_new_controller_finishes_a_paused_deletion() -> None:
    """DeleteTopicTest.testResumeDeleteTopicOnControllerFailover: a follower is down and
    the controller moves mid-deletion; the new controller re-queues the topic (paused: a
    replica is offline) and completes it once the follower is back."""

    async def body(cluster: ControllerCluster) -> None:
        await _start(cluster, 4)
        active = await cluster.active_controller()
        others = [b for b in range(4) if b != active.broker_id]
        follower = others[0]
        await cluster.create_topic(
            "alpha", {0: [others[0], others[1], others[2]], 1: [others[1], others[2], others[0]]}
        )
        await cluster.settle()
        await cluster.crash_broker(follower)
        await cluster.settle()
        await _mark(cluster, "alpha")
        await cluster.wait_for(lambda e: e.type == "topic_deletion_halted")
        await cluster.crash_broker(active.broker_id)
        new = await cluster.active_controller()
        await cluster.settle()
        assert new.controller.context.topics_to_be_deleted == {"alpha"}
        assert new.controller.context.topics_ineligible_for_deletion == {"alpha"}
        assert await _exists(cluster, "/brokers/topics/alpha")
        await cluster.start_broker(follower)
        await cluster.wait_for(lambda e: e.type == "topic_deletion_completed")
        await cluster.settle()
        await assert_topic_gone(cluster, "alpha")

    run_cluster(body)


def test_controller_failover_after_deletion_started_resends_both_phases() -> None:
    """The brokers never answer the delete phase, then the controller dies: the new
    controller restarts the deletion from the beginning (§7.4 step 10), both phases again."""

    async def body(cluster: ControllerCluster) -> None:
        await _start(cluster)
        active = await cluster.active_controller()
        others = sorted(b for b in range(3) if b != active.broker_id)
        await cluster.create_topic("alpha", {0: others})
        await cluster.settle()
        for b in others:
            cluster.brokers[b].broker.hold_delete = True
        await _mark(cluster, "alpha")
        for b in others:
            await cluster.wait_for(_holding(b))
        await cluster.crash_broker(active.broker_id)
        for b in others:
            cluster.brokers[b].broker.hold_delete = False
        await cluster.active_controller()
        await cluster.wait_for(lambda e: e.type == "topic_deletion_completed")
        await cluster.settle()
        await assert_topic_gone(cluster, "alpha")
        for b in others:
            assert cluster.brokers[b].broker.stopped == [
                (tp("alpha"), False),
                (tp("alpha"), True),
                (tp("alpha"), False),
                (tp("alpha"), True),
            ]

    run_cluster(body)


def test_deletion_disabled_removes_the_marker_and_keeps_the_topic() -> None:
    """DeleteTopicTest.testDisableDeleteTopic."""

    async def body(cluster: ControllerCluster) -> None:
        await _start(cluster)
        await cluster.create_topic("alpha", ALPHA)
        await cluster.settle()
        before = await cluster.partition_state("alpha", 0)
        await _mark(cluster, "alpha")
        await cluster.wait_for(lambda e: e.type == "topic_deletion_disabled")
        await cluster.settle()
        assert not await _exists(cluster, "/admin/delete_topics/alpha")
        assert await _exists(cluster, "/brokers/topics/alpha")
        assert await cluster.partition_state("alpha", 0) == before
        for handle in cluster.brokers.values():
            assert handle.broker.of_type(StopReplicaRequest) == []
            assert not handle.controller.context.topics_to_be_deleted

    run_cluster(body, delete_topic_enable=False)


def test_deletion_disabled_markers_removed_at_failover() -> None:
    async def body(cluster: ControllerCluster) -> None:
        admin = await cluster.admin()
        await kafka_zk.create_top_level_paths(admin)
        await cluster.create_topic("alpha", {0: [0]})
        await _mark(cluster, "alpha")
        await _start(cluster, 1)
        await cluster.settle()
        assert not await _exists(cluster, "/admin/delete_topics/alpha")
        assert await _exists(cluster, "/brokers/topics/alpha")

    run_cluster(body, delete_topic_enable=False)


def test_marker_of_a_non_existent_topic_is_removed() -> None:
    """DeleteTopicTest.testDeleteNonExistingTopic, on the store path."""

    async def body(cluster: ControllerCluster) -> None:
        await _start(cluster)
        await cluster.create_topic("alpha", ALPHA)
        await cluster.settle()
        await _mark(cluster, "ghost")
        await cluster.wait_for(lambda e: e.type == "topic_deletion_ignored")
        await cluster.settle()
        assert not await _exists(cluster, "/admin/delete_topics/ghost")
        assert await _exists(cluster, "/brokers/topics/alpha")
        assert (await cluster.partition_state("alpha", 0)) is not None

    run_cluster(body)


def test_recreate_topic_after_deletion() -> None:
    """DeleteTopicTest.testRecreateTopicAfterDeletion: the name is free again and the new
    topic gets leaders (a fresh leader epoch 0)."""

    async def body(cluster: ControllerCluster) -> None:
        await _start(cluster)
        await cluster.create_topic("alpha", ALPHA)
        await cluster.settle()
        await _mark(cluster, "alpha")
        await cluster.wait_for(lambda e: e.type == "topic_deletion_completed")
        await cluster.settle()
        await cluster.create_topic("alpha", {0: [2, 1]})
        await cluster.settle()
        state = await cluster.partition_state("alpha", 0)
        assert state is not None
        assert (state.state.leader, state.state.leader_epoch) == (2, 0)
        assert await cluster.partition_state("alpha", 1) is None
        for handle in cluster.brokers.values():
            assert tp("alpha") in handle.broker.metadata

    run_cluster(body)


def test_stop_replica_error_pauses_until_the_broker_restarts() -> None:
    """A KAFKA_STORAGE_ERROR on StopReplica(delete=true): the replica goes
    ReplicaDeletionIneligible and the deletion stalls (no timer retry, §6.4); the broker's
    restart (its disk repaired) resumes it."""

    async def body(cluster: ControllerCluster) -> None:
        await _start(cluster)
        active = await cluster.active_controller()
        victim = next(b for b in (2, 1, 0) if b != active.broker_id)
        await cluster.create_topic("alpha", ALPHA)
        await cluster.settle()
        cluster.fail_storage[victim].add(tp("alpha", 1))
        await _mark(cluster, "alpha")
        await cluster.wait_for(
            lambda e: (
                e.type == "topic_deletion_halted"
                and e.fields["reason"] == "replica deletion failure"
            )
        )
        await cluster.settle()
        states = replica_states(cluster, active.broker_id, "alpha")
        # The retry moved the failed replica back to OfflineReplica; nothing in flight.
        assert states[f"alpha-1@{victim}"] in {"OfflineReplica", "ReplicaDeletionIneligible"}
        assert await _exists(cluster, "/brokers/topics/alpha")
        cluster.fail_storage[victim].clear()
        await cluster.crash_broker(victim)
        await cluster.start_broker(victim)
        await cluster.wait_for(lambda e: e.type == "topic_deletion_completed")
        await cluster.settle()
        await assert_topic_gone(cluster, "alpha")

    run_cluster(body)


def test_partitions_added_during_deletion_are_undone() -> None:
    """DeleteTopicTest.testAddPartitionDuringDeleteTopic: an assignment written to the topic
    znode after marking is restored; the new partition never gets a state znode."""

    async def body(cluster: ControllerCluster) -> None:
        await _start(cluster)
        active = await cluster.active_controller()
        follower = next(b for b in (2, 1, 0) if b != active.broker_id)
        await cluster.create_topic("alpha", ALPHA)
        await cluster.settle()
        await cluster.crash_broker(follower)  # keeps the deletion paused
        await _mark(cluster, "alpha")
        await cluster.wait_for(lambda e: e.type == "topic_deletion_halted")
        await cluster.settle()
        await kafka_zk.set_topic_assignment(
            await cluster.admin(), TopicName("alpha"), {**ALPHA, 2: [0, 1, 2]}
        )
        await cluster.settle()
        assignment = await kafka_zk.get_topic_assignment(await cluster.admin(), TopicName("alpha"))
        assert sorted(assignment or {}) == [0, 1]
        assert await cluster.partition_state("alpha", 2) is None
        await cluster.start_broker(follower)
        await cluster.wait_for(lambda e: e.type == "topic_deletion_completed")
        await cluster.settle()
        await assert_topic_gone(cluster, "alpha")

    run_cluster(body)


def test_many_topics_deleted_at_once() -> None:
    async def body(cluster: ControllerCluster) -> None:
        await _start(cluster)
        names = [f"t{i:02d}" for i in range(20)]
        for i, name in enumerate(names):
            await cluster.create_topic(name, {0: [i % 3, (i + 1) % 3], 1: [(i + 2) % 3]})
        await cluster.create_topic("keep", {0: [0, 1, 2]})
        await cluster.settle()
        await _mark(cluster, *names)
        with anyio.fail_after(60):
            while await (await cluster.admin()).children(zkdata.TOPICS_PATH) != ("keep",):
                await cluster.settle()
        await cluster.settle()
        for name in names:
            await assert_topic_gone(cluster, name)
        assert await cluster.partition_state("keep", 0) is not None

    run_cluster(body)


def test_deleting_a_partially_deleted_topic() -> None:
    """DeleteTopicTest.testDeletingPartiallyDeletedTopic: a partition's state znode removed
    while no controller runs, then marked; the next controller deletes both partitions."""

    async def body(cluster: ControllerCluster) -> None:
        await _start(cluster)
        await cluster.create_topic("alpha", ALPHA)
        await cluster.settle()
        for broker_id in list(cluster.brokers):
            await cluster.stop_broker(broker_id)
        admin = await cluster.admin()
        await admin.delete(zkdata.partition_state_path(TopicName("alpha"), 1), recursive=False)
        await admin.delete(zkdata.partition_path(TopicName("alpha"), 1))
        await _mark(cluster, "alpha")
        await _start(cluster)
        await cluster.wait_for(lambda e: e.type == "topic_deletion_completed")
        await cluster.settle()
        await assert_topic_gone(cluster, "alpha")

    run_cluster(body)


def test_broker_failure_after_deletion_started() -> None:
    """TopicDeletionManagerTest.testBrokerFailureAfterDeletionStarted, through the
    controller: a broker dies before answering the delete phase; its replicas go
    ReplicaDeletionIneligible (the others complete), then back to Offline; its return
    resumes the topic and the retry deletes them."""

    async def body(cluster: ControllerCluster) -> None:
        await _start(cluster)
        active = await cluster.active_controller()
        victim = next(b for b in (2, 1, 0) if b != active.broker_id)
        await cluster.create_topic("alpha", ALPHA)
        await cluster.settle()
        cluster.brokers[victim].broker.hold_delete = True
        await _mark(cluster, "alpha")
        await cluster.wait_for(lambda e: e.type == "fake_broker_holds_stop_replica")
        await cluster.crash_broker(victim)
        await cluster.wait_for(
            lambda e: (
                e.type == "topic_deletion_halted"
                and e.fields["reason"] == "replica deletion failure"
            )
        )
        await cluster.settle()
        states = replica_states(cluster, active.broker_id, "alpha")
        for key, state in states.items():
            expected = (
                "OfflineReplica" if key.endswith(f"@{victim}") else ("ReplicaDeletionSuccessful")
            )
            assert state == expected, (key, state)
        assert await _exists(cluster, "/brokers/topics/alpha")
        await cluster.start_broker(victim)
        await cluster.wait_for(lambda e: e.type == "topic_deletion_completed")
        await cluster.settle()
        await assert_topic_gone(cluster, "alpha")
        assert (tp("alpha", 1), True) in cluster.brokers[victim].broker.stopped

    run_cluster(body)
