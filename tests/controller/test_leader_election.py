"""Preferred replica leader elections: through ``/admin/preferred_replica_election``, from
an ElectLeaders-style caller, and automatically on the virtual clock (ControllerIntegration
Test's preferred-election lines, ``KafkaController.onReplicaElection`` and the partition
state machine's election). Broker 0 is the controller; brokers stop gracefully with the real
broker-side controlled shutdown."""

from __future__ import annotations

import anyio

from actors.controller.events import (
    ElectionTrigger,
    ReplicaLeaderElection,
)
from actors.controller.leader_election import PartitionSnapshot, auto_rebalance_plan
from protocol import zkdata
from protocol.controller import PartitionElectionResult
from protocol.errors import ErrorCode
from protocol.ids import BrokerId
from protocol.store import CreateOp
from protocol.trace import TraceEvent
from tests.support.controller_cluster import (
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
    write_preferred_election,
)
from tests.support.fake_brokers import ControllerCluster

PREFERRED = zkdata.PREFERRED_REPLICA_ELECTION_PATH


async def bounce_preferred(cluster: ControllerCluster, leader_epoch: int) -> None:
    """Kafka's preferredReplicaLeaderElection helper, first half: broker 1 (the preferred
    replica of t-0 = [1, 0]) stops cleanly, so broker 0 leads at ``leader_epoch + 1``; it
    starts again and rejoins the ISR."""
    await stop_brokers(cluster, 1)
    assert await state_of(cluster, "t") == (0, leader_epoch + 1, ids(0), 1)
    await restart_brokers(cluster, 1)
    leader, epoch, isr, _ = await state_of(cluster, "t")
    assert (leader, epoch, set(isr)) == (0, leader_epoch + 1, {0, 1})


def auto_election_done(event: TraceEvent) -> bool:
    """The controller's own preferred election (the imbalance check's) has run."""
    return (
        event.type == "preferred_replica_election_done"
        and event.fields["trigger"] == "AutoTriggered"
    )


# ------------------------------------------------------------------ the pure decision


def test_auto_rebalance_plan_elects_only_over_the_threshold_and_when_possible() -> None:
    """A broker whose share of partitions led elsewhere is above the percentage gets its
    partitions back where its replica is live and in the ISR; at or under it, nothing;
    a reassignment in progress stops every election."""

    def snap(assignment: tuple[int, ...], leader: int, isr: tuple[int, ...]) -> PartitionSnapshot:
        return PartitionSnapshot(
            assignment=ids(*assignment),
            leader=BrokerId(leader),
            isr=ids(*isr),
            online_replicas=frozenset(ids(0, 1, 2)),
        )

    partitions = {
        tp("a", 0): snap((1, 0), 0, (0, 1)),  # broker 1's, led by 0, can move
        tp("a", 1): snap((1, 0), 0, (0,)),  # broker 1's, led by 0, 1 not in ISR
        tp("a", 2): snap((1, 2), 1, (1, 2)),  # broker 1's, balanced
        tp("b", 0): snap((2, 0), 2, (2, 0)),  # broker 2's, balanced
        tp("b", 1): snap((0, 2), 2, (2, 0)),  # broker 0's, 1 of 1 led elsewhere
    }
    plan = auto_rebalance_plan(partitions, imbalance_percentage=10, reassignment_in_progress=False)
    assert plan == {BrokerId(0): (tp("b", 1),), BrokerId(1): (tp("a", 0),)}
    # 2 of broker 1's 3 partitions (67%) are led elsewhere: not above 70%.
    assert BrokerId(1) not in auto_rebalance_plan(
        partitions, imbalance_percentage=70, reassignment_in_progress=False
    )
    assert auto_rebalance_plan(
        partitions, imbalance_percentage=10, reassignment_in_progress=True
    ) == {BrokerId(0): (), BrokerId(1): ()}


# ------------------------------------------------------------------ ControllerIntegrationTest


def test_preferred_replica_leader_election() -> None:
    """testPreferredReplicaLeaderElection: after the preferred broker's bounce and ISR
    rejoin, the ZooKeeper-triggered election moves leadership back (leader epoch +2) and
    deletes the admin path."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster, 2)
        await cluster.create_topic("t", {0: [1, 0]})
        await cluster.settle()
        await bounce_preferred(cluster, 0)
        await write_preferred_election(cluster, [tp("t")])
        await cluster.settle()
        assert not await exists(cluster, PREFERRED)
        assert await state_of(cluster, "t") == (1, 2, ids(0, 1), 1)
        for h in cluster.brokers.values():
            assert h.broker.metadata[tp("t")].leader == 1
        done = cluster.sink.of("event", "preferred_replica_election_done")
        assert [(e.fields["trigger"], e.fields["leaders"]) for e in done][-1] == (
            "ZkTriggered",
            [1],
        )

    run_cluster(body, controlled_shutdown=True)


def test_back_to_back_preferred_replica_leader_elections() -> None:
    """testBackToBackPreferredReplicaLeaderElections: the same twice (epochs 2 then 4)."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster, 2)
        await cluster.create_topic("t", {0: [1, 0]})
        await cluster.settle()
        for epoch in (0, 2):
            await bounce_preferred(cluster, epoch)
            await write_preferred_election(cluster, [tp("t")])
            await cluster.settle()
            assert not await exists(cluster, PREFERRED)
            assert await state_of(cluster, "t") == (1, epoch + 2, ids(0, 1), 1)

    run_cluster(body, controlled_shutdown=True)


def test_preferred_replica_leader_election_with_offline_preferred_replica() -> None:
    """testPreferredReplicaLeaderElectionWithOfflinePreferredReplica: the preferred replica
    is down; the path is removed anyway and the leader stays (epoch 1)."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster, 2)
        await cluster.create_topic("t", {0: [1, 0]})
        await cluster.settle()
        await stop_brokers(cluster, 1)
        await write_preferred_election(cluster, [tp("t")])
        await cluster.settle()
        assert not await exists(cluster, PREFERRED)
        assert await state_of(cluster, "t") == (0, 1, ids(0), 1)

    run_cluster(body, controlled_shutdown=True)


def test_auto_preferred_replica_leader_election_on_the_virtual_clock() -> None:
    """testAutoPreferredReplicaLeaderElection: with auto-rebalance on (checked every second,
    first 5 s after failover), leadership returns to the restarted preferred replica
    (leader epoch 2) without anyone asking; no admin path is involved."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster, 2)
        await cluster.create_topic("t", {0: [1, 0]})
        await cluster.settle()
        await stop_brokers(cluster, 1)
        assert await state_of(cluster, "t") == (0, 1, ids(0), 1)
        await restart_brokers(cluster, 1)
        checks_before = len(cluster.sink.of("event", "leader_imbalance_checked"))
        with anyio.fail_after(10):  # virtual seconds: the next check is at most 1 s away
            await cluster.wait_for(auto_election_done)
        await cluster.settle()
        assert await state_of(cluster, "t") == (1, 2, ids(0, 1), 1)
        assert len(cluster.sink.of("event", "leader_imbalance_checked")) > checks_before
        assert not await exists(cluster, PREFERRED)
        assert cluster.brokers[0].controller.scheduler.pending == ("auto-leader-rebalance-task",)

    run_cluster(
        body,
        controlled_shutdown=True,
        auto_leader_rebalance_enable=True,
        leader_imbalance_check_interval_seconds=1,
    )


def test_auto_rebalance_runs_only_when_enabled_and_stops_with_the_controller() -> None:
    """Disabled (the default of the test harness): no check however long the cluster runs.
    Enabled: the first check 5 s after failover, then every interval; a resigned controller
    has no timer left, and the new one starts its own."""

    async def disabled(cluster: ControllerCluster) -> None:
        await start(cluster, 2)
        await cluster.clock.sleep(30)  # virtual time: 30 s without a check when disabled
        assert not cluster.sink.of("event", "leader_imbalance_checked")
        assert cluster.brokers[0].controller.scheduler.pending == ()

    run_cluster(disabled)

    async def enabled(cluster: ControllerCluster) -> None:
        await start(cluster, 2)
        (elected,) = cluster.sink.of("event", "controller_elected")
        check = await cluster.wait_for(lambda e: e.type == "leader_imbalance_checked")
        assert 5.0 <= check.ts - elected.ts <= 5.1
        await cluster.clock.sleep(10.05)  # virtual time: one check per interval
        checks = cluster.sink.of("event", "leader_imbalance_checked")
        assert all(e.node == "broker-0" for e in checks)
        assert 10 <= len(checks) - 1 <= 11  # every 10 s of the interval
        old = cluster.brokers[0].controller
        await cluster.stop_broker(0)
        new = await cluster.active_controller()
        assert old.scheduler.pending == ()
        assert not old.scheduler.running
        assert new.controller.scheduler.pending == ("auto-leader-rebalance-task",)
        seen = len(cluster.sink.of("event", "leader_imbalance_checked"))
        await cluster.clock.sleep(6)  # virtual time: the new controller's first check, 5 s
        later = cluster.sink.of("event", "leader_imbalance_checked")[seen:]
        assert later
        assert {e.node for e in later} == {"broker-1"}

    run_cluster(
        enabled, auto_leader_rebalance_enable=True, leader_imbalance_check_interval_seconds=1
    )


def test_auto_rebalance_leaves_topics_queued_for_deletion_alone() -> None:
    """Spec §6.6: a topic queued for deletion (paused: a replica is down) is not part of
    the imbalance check; another imbalanced topic is rebalanced."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster, 3)
        await cluster.create_topic("doomed", {0: [1, 0, 2]})
        await cluster.create_topic("kept", {0: [1, 0]})
        await cluster.settle()
        await stop_brokers(cluster, 1, 2)
        await mark_for_deletion(cluster, "doomed")
        await cluster.settle()
        await restart_brokers(cluster, 1)
        await cluster.wait_for(auto_election_done)
        await cluster.settle()
        assert (await state_of(cluster, "kept"))[0] == 1
        done = cluster.sink.of("event", "preferred_replica_election_done")
        assert all("doomed-0" not in e.fields["partitions"] for e in done)
        assert cluster.brokers[0].controller.context.is_topic_queued_for_deletion("doomed")

    run_cluster(
        body,
        controlled_shutdown=True,
        auto_leader_rebalance_enable=True,
        leader_imbalance_check_interval_seconds=1,
    )


def test_election_requests_get_an_answer_per_partition() -> None:
    """An ElectLeaders-style election: the preferred leader where it can be elected, else
    PREFERRED_LEADER_NOT_AVAILABLE; ELECTION_NOT_NEEDED where it leads already;
    INVALID_TOPIC_EXCEPTION for a topic queued for deletion; UNKNOWN_TOPIC_OR_PARTITION
    for a partition that does not exist. No admin path is written or removed."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster, 3)
        await cluster.create_topic("t", {0: [1, 0], 1: [2, 0], 2: [0, 1]})
        await cluster.create_topic("doomed", {0: [2, 1]})
        await cluster.settle()
        await stop_brokers(cluster, 1, 2)
        await mark_for_deletion(cluster, "doomed")
        await restart_brokers(cluster, 1)
        answers: list[tuple[PartitionElectionResult, ...]] = []
        partitions = (tp("t", 0), tp("t", 1), tp("t", 2), tp("doomed"), tp("t", 9))
        cluster.brokers[0].controller.events.put(
            ReplicaLeaderElection(
                partitions=partitions,
                trigger=ElectionTrigger.ADMIN_CLIENT,
                on_result=answers.append,
            )
        )
        await cluster.settle()
        (results,) = answers
        by_partition = {str(r.partition): (r.error_code, r.leader) for r in results}
        assert by_partition == {
            "t-0": (ErrorCode.NONE, 1),
            "t-1": (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, None),
            "t-2": (ErrorCode.ELECTION_NOT_NEEDED, None),
            "doomed-0": (ErrorCode.INVALID_TOPIC_EXCEPTION, None),
            "t-9": (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None),
        }
        done = cluster.sink.of("event", "preferred_replica_election_done")
        assert all(
            e.fields["trigger"] == "ZkTriggered" and not e.fields["partitions"] for e in done
        )

    run_cluster(body, controlled_shutdown=True)


def test_a_new_controller_finishes_a_pending_preferred_election() -> None:
    """Failover step 11: an election left in the znode (its controller died first) is run
    by the next controller, which then deletes the znode."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster, 3)
        await cluster.create_topic("t", {0: [1, 2]})
        await cluster.settle()
        await stop_brokers(cluster, 1)
        await restart_brokers(cluster, 1)
        assert (await state_of(cluster, "t"))[0] == 2
        # The controller crashes and the election is asked for before its session expires:
        # no controller sees the znode created; the next one finds it at failover.
        dead = cluster.brokers.pop(0)
        dead.node.crash()
        await write_preferred_election(cluster, [tp("t")])
        await cluster.settle()
        assert await exists(cluster, PREFERRED)
        await cluster.store.expire_session(dead.session_id)
        await cluster.active_controller()
        await cluster.settle()
        assert not await exists(cluster, PREFERRED)
        leader, _, _, controller_epoch = await state_of(cluster, "t")
        assert (leader, controller_epoch) == (1, 2)

    run_cluster(body, controlled_shutdown=True)


def test_controller_move_on_preferred_replica_election() -> None:
    """testControllerMoveOnPreferredReplicaElection: another controller is installed as the
    election is asked for; the old controller's fenced write fails and it resigns."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster, 1)
        await cluster.create_topic("t", {0: [0]})
        await cluster.settle()
        election = zkdata.PreferredReplicaElection(partitions=(tp("t"),))
        moved = await move_controller_during(
            cluster, CreateOp(path=PREFERRED, data=election.encode())
        )
        assert moved == ["ReplicaLeaderElection"]
        assert not cluster.brokers[0].controller.is_active
        assert await exists(cluster, PREFERRED)  # nobody could remove it
        assert await state_of(cluster, "t") == (0, 0, ids(0), 1)

    run_cluster(body, check_invariants=False)


def test_preemption_with_callbacks() -> None:
    """testPreemptionWithCallbacks: queued when the controller shuts down, an election
    caller is answered NOT_CONTROLLER for every partition and a controlled shutdown
    STALE_CONTROLLER_EPOCH (Kafka's ControllerMovedException)."""

    async def body(cluster: ControllerCluster) -> None:
        from actors.controller.events import ControlledShutdown, Reelect
        from protocol.control import ControlledShutdownResponse
        from protocol.ids import BrokerEpoch

        await start(cluster, 1)
        controller = cluster.brokers[0].controller
        elections: list[tuple[PartitionElectionResult, ...]] = []
        shutdowns: list[ControlledShutdownResponse] = []
        cluster.store.set_latency(0.1)  # the Reelects below keep the queue busy
        for _ in range(3):
            controller.events.put(Reelect())
        controller.events.put(
            ReplicaLeaderElection(
                partitions=(tp("t", 0), tp("t", 1)),
                trigger=ElectionTrigger.ZK,
                on_result=elections.append,
            )
        )
        controller.events.put(
            ControlledShutdown(
                broker_id=BrokerId(0), broker_epoch=BrokerEpoch(0), reply=shutdowns.append
            )
        )
        await cluster.stop_broker(0)
        cluster.store.set_latency(0.0)
        (answer,) = elections
        assert {(str(r.partition), r.error_code) for r in answer} == {
            ("t-0", ErrorCode.NOT_CONTROLLER),
            ("t-1", ErrorCode.NOT_CONTROLLER),
        }
        assert [r.error_code for r in shutdowns] == [ErrorCode.STALE_CONTROLLER_EPOCH]

    run_cluster(body)


def test_an_election_of_a_topic_queued_for_deletion_leaves_it_alone() -> None:
    """Spec §6.6 on the ZooKeeper path: the election skips it, removes the path, and the
    leader does not change."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster, 3)
        await cluster.create_topic("t", {0: [1, 0, 2]})
        await cluster.settle()
        await stop_brokers(cluster, 1, 2)
        await mark_for_deletion(cluster, "t")
        await cluster.settle()
        await restart_brokers(cluster, 1)
        before = await state_of(cluster, "t")
        await write_preferred_election(cluster, [tp("t")])
        await cluster.settle()
        assert not await exists(cluster, PREFERRED)
        assert await state_of(cluster, "t") == before

    run_cluster(body, controlled_shutdown=True)
