"""Partition reassignment through ``/admin/reassign_partitions`` (ControllerIntegrationTest's
reassignment lines, ``KafkaController.onPartitionReassignment``): fake brokers, real
controllers, the embedded store, the virtual clock. Broker 0 is the controller."""

from __future__ import annotations

from actors.controller.reassignment import reassign_to, reassignment_complete, scala_map_entries
from protocol import jvm, zkdata
from protocol.control import StopReplicaRequest
from protocol.ids import TopicName
from protocol.jvm import scala_hash_set_order
from protocol.store import CreateOp
from tests.support.controller_cluster import (
    assignment_of,
    exists,
    ids,
    mark_for_deletion,
    move_controller_during,
    restart_brokers,
    run_cluster,
    start,
    state_of,
    stop_brokers,
    tp,
    write_reassignment,
)
from tests.support.fake_brokers import ControllerCluster

REASSIGN = zkdata.REASSIGN_PARTITIONS_PATH


# ------------------------------------------------------------------ pure helpers


def test_reassign_to_lists_targets_first_then_the_replicas_being_removed() -> None:
    """Kafka's reassignTo: RS = TRS ++ ORS (distinct), AR = RS - ORS, RR = RS - TRS; the
    original replicas of a reassignment in progress are kept, not the ones being added."""
    plain = zkdata.ReplicaAssignment(replicas=ids(1, 2, 3))
    moving = reassign_to(plain, ids(3, 4, 2))
    assert moving == zkdata.ReplicaAssignment(
        replicas=ids(3, 4, 2, 1), adding_replicas=ids(4), removing_replicas=ids(1)
    )
    # Replacing that reassignment: the origin is what was there before the additions, in
    # the order the reassignment left it (Kafka cannot restore the original order).
    assert reassign_to(moving, ids(5)) == zkdata.ReplicaAssignment(
        replicas=ids(5, 3, 2, 1), adding_replicas=ids(5), removing_replicas=ids(3, 2, 1)
    )
    # Back to the origin: nothing to reassign any more.
    assert reassign_to(moving, ids(1, 2, 3)) == plain
    assert reassignment_complete(plain, None)
    assert not reassignment_complete(moving, None)
    assert not reassignment_complete(moving, ids(1, 2))
    assert reassignment_complete(moving, ids(1, 2, 3, 4))


def test_decoded_reassignment_iterates_like_kafkas_scala_map() -> None:
    """A partition listed twice keeps its first place and last replicas; up to four keys
    keep their order, five or more iterate as a CHAMP HashMap of TopicPartition hashes
    (checked against the CHAMP order of those hashes as a set of Ints)."""
    entries = [(tp("a", 1), ids(1)), (tp("b", 0), ids(2)), (tp("a", 1), ids(3))]
    assert scala_map_entries(entries) == [(tp("a", 1), ids(3)), (tp("b", 0), ids(2))]
    many = [(tp(t, p), ids(p)) for t in ("orders", "clicks") for p in range(4)]
    ordered = [p for p, _ in scala_map_entries(many)]
    hashes = {jvm.java_topic_partition_hash(p.topic, p.partition): p for p, _ in many}
    assert len(hashes) == len(many)
    assert ordered == [hashes[h] for h in scala_hash_set_order(list(hashes))]
    assert ordered != [p for p, _ in many]
    assert jvm.java_topic_partition_hash("t", 0) == 31 * 31 + ord("t")


# ------------------------------------------------------------------ ControllerIntegrationTest


def test_partition_reassignment_moves_the_replica_and_removes_the_path() -> None:
    """testPartitionReassignment: [controller] -> [other] ends with leader other at leader
    epoch 3 (A1 bump, reassign election, ISR shrink), the topic znode holding [other] only,
    /admin/reassign_partitions removed, the old replica deleted on its broker."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster, 2)
        await cluster.create_topic("t", {0: [0]})
        await cluster.settle()
        await write_reassignment(cluster, {tp("t"): [1]})
        await cluster.settle()
        assert await state_of(cluster, "t") == (1, 3, ids(1), 1)
        assert await assignment_of(cluster, "t") == {0: zkdata.ReplicaAssignment(replicas=ids(1))}
        assert not await exists(cluster, REASSIGN)
        ctx = cluster.brokers[0].controller.context
        assert ctx.partitions_being_reassigned == set()
        assert ctx.partition_full_replica_assignment(tp("t")).replicas == ids(1)
        # The old replica got StopReplica(delete=true); the new one leads.
        old = cluster.brokers[0].broker
        assert (tp("t"), True) in old.stopped
        assert tp("t") not in old.partitions
        assert cluster.brokers[1].broker.partitions[tp("t")].leader == 1
        for h in cluster.brokers.values():
            assert h.broker.metadata[tp("t")].replicas == ids(1)
        (done,) = cluster.sink.of("event", "partition_reassignment_completed")
        assert done.fields["leader"] == 1
        assert done.fields["leader_epoch"] == 3
        # The new replica joined the ISR by its leader's AlterIsr, at leader epoch 1.
        joined = cluster.sink.of("event", "isr_altered")
        assert [(e.fields["to_isr"], e.fields["leader_epoch"]) for e in joined] == [([0, 1], 1)]

    run_cluster(body)


def test_a_reassignment_to_a_dead_broker_halts_then_resumes_when_it_restarts() -> None:
    """testPartitionReassignmentWithOfflineReplicaHaltingProgress and ...ResumesAfter
    ReplicaComesOnline: with the target down only the A1 epoch bump happens (epoch 1) and
    the path stays, the topic znode showing the reassignment in progress; once the target
    registers again the reassignment completes at leader epoch 4."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster, 2)
        await cluster.create_topic("t", {0: [0]})
        await cluster.settle()
        await stop_brokers(cluster, 1)
        await write_reassignment(cluster, {tp("t"): [1]})
        await cluster.settle()
        assert await state_of(cluster, "t") == (0, 1, ids(0), 1)
        assert await exists(cluster, REASSIGN)
        assert await assignment_of(cluster, "t") == {
            0: zkdata.ReplicaAssignment(
                replicas=ids(1, 0), adding_replicas=ids(1), removing_replicas=ids(0)
            )
        }
        assert cluster.brokers[0].controller.context.partitions_being_reassigned == {tp("t")}
        assert not cluster.sink.of("event", "partition_reassignment_completed")

        await restart_brokers(cluster, 1)
        assert await state_of(cluster, "t") == (1, 4, ids(1), 1)
        assert await assignment_of(cluster, "t") == {0: zkdata.ReplicaAssignment(replicas=ids(1))}
        assert not await exists(cluster, REASSIGN)
        assert cluster.brokers[0].controller.context.partitions_being_reassigned == set()

    run_cluster(body)


def test_a_new_controller_resumes_a_reassignment_in_progress() -> None:
    """The controller dies mid-reassignment (its target down): the next one (epoch 2)
    reads the path and the topic znode at failover, and finishes once the target is up."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster, 3)
        await cluster.create_topic("t", {0: [1, 0]})
        await cluster.settle()
        await stop_brokers(cluster, 2)
        await write_reassignment(cluster, {tp("t"): [2, 1]})
        await cluster.settle()
        assert await exists(cluster, REASSIGN)
        await cluster.crash_broker(0)
        new = await cluster.active_controller()
        await cluster.settle()
        assert new.broker_id == 1
        assert new.controller.context.partitions_being_reassigned == {tp("t")}
        await restart_brokers(cluster, 2)
        leader, _, isr, controller_epoch = await state_of(cluster, "t")
        assert (leader, set(isr), controller_epoch) == (1, {1, 2}, 2)
        assert await assignment_of(cluster, "t") == {
            0: zkdata.ReplicaAssignment(replicas=ids(2, 1))
        }
        assert not await exists(cluster, REASSIGN)

    run_cluster(body)


def test_the_path_keeps_the_partitions_still_moving_in_kafkas_order() -> None:
    """Partitions that complete leave the path one by one: the controller rewrites the rest
    (fenced), in the order Kafka's decoded map iterates (five or more: a CHAMP HashMap),
    and deletes it when the last one is done."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster, 3)
        await cluster.create_topic("t", {p: [0] for p in range(6)})
        await cluster.settle()
        await stop_brokers(cluster, 2)
        targets = {tp("t", p): ([2] if p % 2 else [1]) for p in range(6)}
        await write_reassignment(cluster, targets)
        await cluster.settle()
        data, _ = await (await cluster.admin()).get(REASSIGN)
        stuck = [(tp("t", p), ids(2)) for p in (1, 3, 5)]
        expected = zkdata.PartitionReassignment(
            partitions=tuple(
                zkdata.PartitionReplicas(topic=TopicName("t"), partition=p.partition, replicas=r)
                for p, r in scala_map_entries(
                    [(tp("t", p), ids(2) if p % 2 else ids(1)) for p in range(6)]
                )
                if (p, r) in stuck
            )
        )
        assert data == expected.encode()
        for p in (0, 2, 4):
            assert (await state_of(cluster, "t", p))[0] == 1
        await restart_brokers(cluster, 2)
        assert not await exists(cluster, REASSIGN)
        assert {p: a.replicas for p, a in (await assignment_of(cluster, "t")).items()} == {
            p: ids(2) if p % 2 else ids(1) for p in range(6)
        }

    run_cluster(body)


def test_reassigning_a_topic_queued_for_deletion_is_refused() -> None:
    """Spec §6.6: the reassignment of a partition of a topic queued for deletion fails
    (UNKNOWN_TOPIC_OR_PARTITION) and leaves the path; the deletion is not disturbed."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster, 3)
        await cluster.create_topic("t", {0: [1, 2]})
        await cluster.settle()
        await stop_brokers(cluster, 2)  # deletion cannot finish: a replica is offline
        await mark_for_deletion(cluster, "t")
        await cluster.settle()
        ctx = cluster.brokers[0].controller.context
        assert ctx.is_topic_queued_for_deletion("t")
        await write_reassignment(cluster, {tp("t"): [0, 1]})
        await cluster.settle()
        assert not await exists(cluster, REASSIGN)
        (rejected,) = cluster.sink.of("event", "partition_reassignment_rejected")
        assert rejected.fields == {
            "partitions": ["t-0"],
            "errors": ["UNKNOWN_TOPIC_OR_PARTITION"],
        }
        assert ctx.partitions_being_reassigned == set()
        assert ctx.partition_replica_assignment(tp("t")) == ids(1, 2)
        await restart_brokers(cluster, 2)
        assert not await exists(cluster, zkdata.topic_path(TopicName("t")))

    run_cluster(body)


def test_a_deletion_waits_for_a_reassignment_in_progress_then_completes() -> None:
    """DeleteTopicTest.testPartitionReassignmentDuringDeleteTopic's other half: a topic
    marked while one of its partitions is being reassigned stays queued (ineligible) until
    the reassignment completes, then its deletion runs to the end."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster, 3)
        await cluster.create_topic("t", {0: [0, 1]})
        await cluster.settle()
        await stop_brokers(cluster, 2)
        await write_reassignment(cluster, {tp("t"): [1, 2]})
        await cluster.settle()
        await mark_for_deletion(cluster, "t")
        await cluster.settle()
        ctx = cluster.brokers[0].controller.context
        assert ctx.is_topic_queued_for_deletion("t")
        assert "t" in ctx.topics_ineligible_for_deletion
        assert not cluster.sink.of("event", "topic_deletion_started")
        assert await exists(cluster, zkdata.topic_path(TopicName("t")))
        await restart_brokers(cluster, 2)
        done = [e.type for e in cluster.sink.of("event")]
        assert done.index("partition_reassignment_completed") < done.index(
            "topic_deletion_completed"
        )
        assert not await exists(cluster, zkdata.topic_path(TopicName("t")))
        assert not await exists(cluster, REASSIGN)
        assert not [p for p in ctx.partitions_being_reassigned if p.topic == "t"]

    run_cluster(body)


def test_a_reassignment_of_an_unknown_partition_is_dropped_from_the_path() -> None:
    """A partition that does not exist fails (UNKNOWN_TOPIC_OR_PARTITION) and leaves the
    path; the others of the same reassignment go ahead."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster, 2)
        await cluster.create_topic("t", {0: [0]})
        await cluster.settle()
        await write_reassignment(cluster, {tp("t", 0): [1], tp("t", 7): [1], tp("nope"): [0]})
        await cluster.settle()
        assert not await exists(cluster, REASSIGN)
        (rejected,) = cluster.sink.of("event", "partition_reassignment_rejected")
        assert rejected.fields["partitions"] == ["nope-0", "t-7"]
        assert await state_of(cluster, "t") == (1, 3, ids(1), 1)

    run_cluster(body)


def test_an_unreadable_reassignment_is_ignored_and_the_controller_goes_on() -> None:
    """A payload that is not a reassignment is logged and left alone, as Kafka does."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster, 2)
        await cluster.create_topic("t", {0: [0]})
        await cluster.settle()
        await (await cluster.admin()).create(REASSIGN, b"{not json")
        await cluster.settle()
        assert cluster.sink.of("event", "partition_reassignment_invalid")
        assert await exists(cluster, REASSIGN)
        assert await state_of(cluster, "t") == (0, 0, ids(0), 1)
        await cluster.create_topic("u", {0: [1]})
        await cluster.settle()
        assert await state_of(cluster, "u") == (1, 0, ids(1), 1)

    run_cluster(body)


def test_controller_move_on_partition_reassignment() -> None:
    """testControllerMoveOnPartitionReassignment: another controller is installed (epoch
    bumped) as the reassignment is written: the old controller's fenced write fails, it
    resigns, and neither the state znode nor the topic znode changed."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster, 1)
        await cluster.create_topic("t", {0: [0]})
        await cluster.settle()
        reassignment = zkdata.PartitionReassignment(
            partitions=(
                zkdata.PartitionReplicas(topic=TopicName("t"), partition=0, replicas=ids(0)),
            )
        )
        moved = await move_controller_during(
            cluster, CreateOp(path=REASSIGN, data=reassignment.encode())
        )
        assert moved == ["ZkPartitionReassignment"]
        assert not cluster.brokers[0].controller.is_active
        assert await state_of(cluster, "t") == (0, 0, ids(0), 1)
        assert await exists(cluster, REASSIGN)

    run_cluster(body, check_invariants=False)


def test_a_removed_replica_is_stopped_even_when_its_broker_answers_late() -> None:
    """B4/B5: the replica being removed gets StopReplica(delete=false), then
    StopReplica(delete=true); its broker no longer serves the partition."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster, 3)
        await cluster.create_topic("t", {0: [1, 2]})
        await cluster.settle()
        await write_reassignment(cluster, {tp("t"): [0, 1]})
        await cluster.settle()
        removed = cluster.brokers[2].broker
        stops = [
            (p.partition, p.delete_partition)
            for r in removed.of_type(StopReplicaRequest)
            if isinstance(r, StopReplicaRequest)
            for p in r.partitions
        ]
        assert stops == [(0, False), (0, True)]
        assert tp("t") not in removed.partitions
        leader, _, isr, _ = await state_of(cluster, "t")
        assert leader == 1
        assert set(isr) == {0, 1}
        assert await assignment_of(cluster, "t") == {
            0: zkdata.ReplicaAssignment(replicas=ids(0, 1))
        }

    run_cluster(body)
