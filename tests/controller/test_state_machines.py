"""Partition and replica state machines (PartitionStateMachineTest, ReplicaStateMachineTest)
against the embedded store: valid transitions with their side effects, invalid ones refused."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import anyio
import msgspec
import pytest

from actors.controller.election import (
    ControlledShutdownElection,
    OfflineElection,
    PreferredReplicaElection,
)
from actors.controller.model import LeaderAndIsr, PartitionAndReplica
from actors.controller.state_change_log import StateChangeLogger
from actors.controller.states import (
    PARTITION_VALID_PREVIOUS,
    REPLICA_VALID_PREVIOUS,
    PartitionState,
    ReplicaState,
)
from actors.runtime.tracer import Tracer
from actors.zk.store import ForwardingSession, StoreSession
from protocol import zkdata
from protocol.control import (
    LeaderAndIsrRequest,
    StopReplicaRequest,
    TopicPartition,
    UpdateMetadataRequest,
)
from protocol.errors import StoreError
from protocol.ids import BrokerId, ControllerEpoch, LeaderEpoch, TopicName
from protocol.store import OpResult, Stat, StoreOp
from tests.support.controller_cluster import ids
from tests.support.state_machine_rig import T0, P, R, Rig, rig_test

# ============================================================== partition state machine


@rig_test()
async def test_nonexistent_to_new_is_valid_and_nonexistent_to_online_or_offline_is_not(
    rig: Rig,
) -> None:
    """NonExistent -> New is valid; NonExistent -> Online/Offline are refused, state unchanged."""
    await rig.create_topic((0,))
    await rig.psm.handle_state_changes([T0], P.ONLINE, OfflineElection())
    await rig.psm.handle_state_changes([T0], P.OFFLINE)
    assert rig.ctx.partition_state(T0) is P.NON_EXISTENT
    assert [(e["from_state"], e["to_state"]) for e in rig.errors("invalid_transition")] == [
        ("NonExistentPartition", "OnlinePartition"),
        ("NonExistentPartition", "OfflinePartition"),
    ]
    await rig.psm.handle_state_changes([T0], P.NEW)
    assert rig.ctx.partition_state(T0) is P.NEW
    assert rig.sender.sent == []


@rig_test()
async def test_new_to_online_creates_the_state_znode_and_sends_leader_and_isr_is_new(
    rig: Rig,
) -> None:
    """New -> Online: leader = first live replica, epoch 0, ISR = live ones; LeaderAndIsr(isNew)."""
    await rig.create_topic((1, 0, 2))
    rig.ctx.remove_live_brokers(ids(2))
    await rig.psm.handle_state_changes([T0], P.NEW)
    await rig.psm.handle_state_changes([T0], P.ONLINE, OfflineElection())
    assert rig.ctx.partition_state(T0) is P.ONLINE
    state = await rig.zk_state()
    assert state is not None
    assert state.state == zkdata.LeaderIsrAndControllerEpoch(
        leader=BrokerId(1),
        leader_epoch=LeaderEpoch(0),
        isr=ids(1, 0),
        controller_epoch=ControllerEpoch(1),
    )
    lair = rig.requests(LeaderAndIsrRequest)
    assert [b for b, _ in lair] == [0, 1]
    assert all(r.partition_states[0].is_new for _, r in lair)
    assert [b for b, _ in rig.requests(UpdateMetadataRequest)] == [0, 1]
    assert ("partition", "NewPartition", "OnlinePartition") in rig.transitions()


@rig_test()
async def test_new_to_online_stays_new_when_the_state_znode_exists(rig: Rig) -> None:
    """A NODEEXISTS on the state znode leaves the partition New and sends nothing."""
    await rig.create_topic((0,))
    await rig.seed_leadership(T0, 0, (0,))
    await rig.psm.handle_state_changes([T0], P.NEW)
    rig.sender.sent.clear()
    await rig.psm.handle_state_changes([T0], P.ONLINE, OfflineElection())
    assert rig.ctx.partition_state(T0) is P.NEW
    assert rig.requests(LeaderAndIsrRequest) == []
    assert "NodeExistsError" in rig.errors("state_change_failed")[0]["detail"]


@rig_test()
async def test_new_to_online_stays_new_on_a_store_failure(rig: Rig) -> None:
    """A store exception while creating the znode leaves the partition New."""
    await rig.create_topic((0,))
    await rig.psm.handle_state_changes([T0], P.NEW)
    await rig.session.close()
    await rig.psm.handle_state_changes([T0], P.ONLINE, OfflineElection())
    assert rig.ctx.partition_state(T0) is P.NEW
    assert rig.sender.sent == []


@rig_test(live=(1,))
async def test_new_to_online_without_a_live_replica_stays_new(rig: Rig) -> None:
    """No assigned replica alive: the partition stays New, no znode, no request."""
    await rig.create_topic((0, 2))
    await rig.psm.handle_state_changes([T0], P.NEW)
    await rig.psm.handle_state_changes([T0], P.ONLINE, OfflineElection())
    assert rig.ctx.partition_state(T0) is P.NEW
    assert await rig.zk_state() is None
    assert "No assigned replica is alive" in rig.errors("state_change_failed")[0]["detail"]


@rig_test()
async def test_new_to_offline_is_valid_and_new_to_nonexistent_is_not(rig: Rig) -> None:
    """New -> Offline is valid; New -> NonExistent is refused."""
    await rig.psm.handle_state_changes([T0], P.NEW)
    await rig.psm.handle_state_changes([T0], P.NON_EXISTENT)
    assert rig.ctx.partition_state(T0) is P.NEW
    await rig.psm.handle_state_changes([T0], P.OFFLINE)
    assert rig.ctx.partition_state(T0) is P.OFFLINE


@rig_test()
async def test_online_to_online_preferred_election_bumps_the_epoch(rig: Rig) -> None:
    """Online -> Online (preferred): the znode is re-read and updated with epoch+1."""
    await rig.create_topic((0, 1))
    await rig.seed_leadership(T0, 1, (1, 0), epoch=3)
    rig.ctx.put_partition_state(T0, P.ONLINE)
    results = await rig.psm.handle_state_changes([T0], P.ONLINE, PreferredReplicaElection())
    assert results[T0] == LeaderAndIsr(
        leader=BrokerId(0), leader_epoch=LeaderEpoch(4), isr=ids(1, 0), zk_version=1
    )
    state = await rig.zk_state()
    assert state is not None
    assert (state.state.leader, state.state.leader_epoch, state.zk_version) == (0, 4, 1)
    assert [b for b, _ in rig.requests(LeaderAndIsrRequest)] == [0, 1]
    leadership = rig.ctx.leadership(T0)
    assert leadership is not None
    assert leadership.zk_version == 1


@rig_test()
async def test_online_to_online_for_controlled_shutdown_moves_leadership(rig: Rig) -> None:
    """Controlled shutdown: the other replica leads, the ISR drops the shutting-down broker,
    and both brokers hear about it."""
    await rig.create_topic((0, 1))
    await rig.seed_leadership(T0, 0, (0, 1))
    rig.ctx.put_partition_state(T0, P.ONLINE)
    rig.ctx.shutting_down_broker_ids.add(BrokerId(0))
    await rig.psm.handle_state_changes([T0], P.ONLINE, ControlledShutdownElection())
    state = await rig.zk_state()
    assert state is not None
    assert (state.state.leader, state.state.isr, state.state.leader_epoch) == (1, ids(1), 1)
    assert [b for b, _ in rig.requests(LeaderAndIsrRequest)] == [0, 1]


@rig_test()
async def test_online_to_offline_is_valid_and_online_to_nonexistent_or_new_is_not(rig: Rig) -> None:
    """Online -> Offline is valid; Online -> NonExistent and Online -> New are refused."""
    rig.ctx.put_partition_state(T0, P.ONLINE)
    await rig.psm.handle_state_changes([T0], P.NON_EXISTENT)
    await rig.psm.handle_state_changes([T0], P.NEW)
    assert rig.ctx.partition_state(T0) is P.ONLINE
    assert len(rig.errors("invalid_transition")) == 2
    await rig.psm.handle_state_changes([T0], P.OFFLINE)
    assert rig.ctx.partition_state(T0) is P.OFFLINE


@rig_test(live=(1, 2))
async def test_offline_to_online_elects_a_live_isr_replica(rig: Rig) -> None:
    """Offline -> Online: the first live ISR replica becomes leader, ISR = live part."""
    await rig.create_topic((0, 1, 2))
    await rig.seed_leadership(T0, 0, (0, 2))
    rig.ctx.put_partition_state(T0, P.OFFLINE)
    await rig.psm.handle_state_changes([T0], P.ONLINE, OfflineElection())
    assert rig.ctx.partition_state(T0) is P.ONLINE
    state = await rig.zk_state()
    assert state is not None
    assert (state.state.leader, state.state.isr, state.state.leader_epoch) == (2, ids(2), 1)
    assert [b for b, _ in rig.requests(LeaderAndIsrRequest)] == [1, 2]


@rig_test(live=(1,))
async def test_offline_to_online_unclean_by_topic_config(rig: Rig) -> None:
    """ISR [dead], a live non-ISR replica: leader only when the topic enables unclean election."""
    await rig.create_topic((0, 1), config={"unclean.leader.election.enable": "true"})
    await rig.seed_leadership(T0, 0, (0,))
    rig.ctx.put_partition_state(T0, P.OFFLINE)
    await rig.psm.handle_state_changes([T0], P.ONLINE, OfflineElection())
    state = await rig.zk_state()
    assert state is not None
    assert (state.state.leader, state.state.isr) == (1, ids(1))
    assert rig.ctx.partition_state(T0) is P.ONLINE


@rig_test(live=(1,))
async def test_offline_to_online_without_unclean_election_stays_offline(rig: Rig) -> None:
    """ISR [dead] and unclean election disabled: no leader, the partition stays Offline."""
    await rig.create_topic((0, 1))
    await rig.seed_leadership(T0, 0, (0,))
    rig.ctx.put_partition_state(T0, P.OFFLINE)
    results = await rig.psm.handle_state_changes([T0], P.ONLINE, OfflineElection())
    assert isinstance(results[T0], Exception)
    assert rig.ctx.partition_state(T0) is P.OFFLINE
    assert "Failed to elect leader" in rig.errors("state_change_failed")[0]["detail"]


@rig_test()
async def test_offline_to_online_without_a_state_znode_stays_offline(rig: Rig) -> None:
    """NONODE on the state read: the election fails and the partition stays Offline."""
    await rig.create_topic((0,))
    rig.ctx.put_partition_state(T0, P.OFFLINE)
    await rig.psm.handle_state_changes([T0], P.ONLINE, OfflineElection())
    assert rig.ctx.partition_state(T0) is P.OFFLINE
    assert "doesn't exist" in rig.errors("state_change_failed")[0]["detail"]


@rig_test()
async def test_an_election_aborts_when_a_newer_controller_wrote_the_state(rig: Rig) -> None:
    """A state znode written by a higher controller epoch aborts the election."""
    await rig.create_topic((0, 1))
    await rig.seed_leadership(T0, 0, (0, 1))
    rig.ctx.put_partition_state(T0, P.OFFLINE)
    newer = zkdata.LeaderIsrAndControllerEpoch(
        leader=BrokerId(1),
        leader_epoch=LeaderEpoch(5),
        isr=ids(1),
        controller_epoch=ControllerEpoch(9),
    )
    await rig.session.set(zkdata.partition_state_path(TopicName("t"), 0), newer.encode())
    await rig.psm.handle_state_changes([T0], P.ONLINE, OfflineElection())
    assert rig.ctx.partition_state(T0) is P.OFFLINE
    assert "another controller" in rig.errors("state_change_failed")[0]["detail"]


@rig_test()
async def test_an_election_that_loses_a_write_race_is_retried(rig: Rig) -> None:
    """BADVERSION (someone wrote between read and update): the partition is re-read and retried."""
    await rig.create_topic((0, 1))
    await rig.seed_leadership(T0, 0, (0, 1))
    rig.ctx.put_partition_state(T0, P.ONLINE)
    other = await rig.store.open_session(name="leader")
    rig.store.set_latency(1.0)

    async def racing_write() -> None:
        await anyio.sleep(0.5)  # lands at t=1.5, between the read (t=1) and the update (t=2)
        bumped = zkdata.LeaderIsrAndControllerEpoch(
            leader=BrokerId(0),
            leader_epoch=LeaderEpoch(0),
            isr=ids(0),
            controller_epoch=ControllerEpoch(1),
        )
        await other.set(zkdata.partition_state_path(TopicName("t"), 0), bumped.encode())

    async with anyio.create_task_group() as tg:
        tg.start_soon(racing_write)
        results = await rig.psm.handle_state_changes([T0], P.ONLINE, PreferredReplicaElection())
    state = await rig.zk_state()
    assert state is not None
    assert state.zk_version == 2  # the racing write, then ours
    assert (state.state.leader, state.state.isr, state.state.leader_epoch) == (0, ids(0), 1)
    assert results[T0] == LeaderAndIsr(
        leader=BrokerId(0), leader_epoch=LeaderEpoch(1), isr=ids(0), zk_version=2
    )


@rig_test()
async def test_offline_to_nonexistent_is_valid_and_offline_to_new_is_not(rig: Rig) -> None:
    """Offline -> NonExistent is valid; Offline -> New is refused."""
    rig.ctx.put_partition_state(T0, P.OFFLINE)
    await rig.psm.handle_state_changes([T0], P.NEW)
    assert rig.ctx.partition_state(T0) is P.OFFLINE
    await rig.psm.handle_state_changes([T0], P.NON_EXISTENT)
    assert rig.ctx.partition_state(T0) is P.NON_EXISTENT


@rig_test()
async def test_offline_partition_count_follows_offline_transitions(rig: Rig) -> None:
    """The offline count rises on Offline and falls when the partitions come back Online."""
    await rig.create_topic((0,), partitions=3)
    partitions = [TopicPartition(TopicName("t"), p) for p in range(3)]
    await rig.psm.handle_state_changes(partitions, P.NEW)
    await rig.psm.handle_state_changes(partitions, P.OFFLINE)
    assert rig.ctx.offline_partition_count == 3
    await rig.psm.handle_state_changes(partitions, P.ONLINE, OfflineElection())
    assert rig.ctx.offline_partition_count == 3  # no state znode yet: elections fail
    for tp in partitions:
        await rig.seed_leadership(tp, 0, (0,))
    await rig.psm.handle_state_changes(partitions, P.ONLINE, OfflineElection())
    assert rig.ctx.offline_partition_count == 0


@rig_test()
async def test_no_offline_count_change_for_topics_whose_deletion_started(rig: Rig) -> None:
    """Partitions of a topic being deleted do not move the offline count."""
    rig.ctx.topics_with_deletion_started.add(TopicName("t"))
    await rig.psm.handle_state_changes([T0], P.NEW)
    await rig.psm.handle_state_changes([T0], P.OFFLINE)
    assert rig.ctx.offline_partition_count == 0


@rig_test(live=(0, 2))
async def test_partition_startup_classifies_then_brings_partitions_online(rig: Rig) -> None:
    """Startup: no leadership -> New, dead leader -> Offline, then both elected Online."""
    await rig.create_topic((1, 2), partitions=2)
    t1 = TopicPartition(TopicName("t"), 1)
    await rig.seed_leadership(t1, 1, (1, 2))
    rig.psm.initialize_partition_state()
    assert (rig.ctx.partition_state(T0), rig.ctx.partition_state(t1)) == (P.NEW, P.OFFLINE)
    await rig.psm.trigger_online_partition_state_change()
    assert (rig.ctx.partition_state(T0), rig.ctx.partition_state(t1)) == (P.ONLINE, P.ONLINE)
    s0, s1 = await rig.zk_state(T0), await rig.zk_state(t1)
    assert s0 is not None
    assert s1 is not None
    assert (s0.state.leader, s0.state.leader_epoch) == (2, 0)
    assert (s1.state.leader, s1.state.isr, s1.state.leader_epoch) == (2, ids(2), 1)


# ============================================================== replica state machine

R0 = PartitionAndReplica(T0, BrokerId(0))
R1 = PartitionAndReplica(T0, BrokerId(1))


@rig_test(live=(0,))
async def test_replica_startup_marks_live_replicas_online_and_dead_ones_offline(rig: Rig) -> None:
    """Startup: a replica on a live broker is Online, on a dead one Offline (leader or not)."""
    await rig.create_topic((0, 1), partitions=2)
    await rig.seed_leadership(T0, 0, (0, 1))
    await rig.rsm.startup()
    t1 = TopicPartition(TopicName("t"), 1)
    assert rig.ctx.replica_state(R0) is R.ONLINE
    assert rig.ctx.replica_state(R1) is R.OFFLINE
    assert rig.ctx.replica_state(PartitionAndReplica(t1, BrokerId(1))) is R.OFFLINE
    # Online sends the leadership to broker 0; the ISR shrink for 1 tells broker 0 again.
    assert [b for b, _ in rig.requests(LeaderAndIsrRequest)] == [0, 0]
    state = await rig.zk_state()
    assert state is not None
    assert (state.state.leader, state.state.isr) == (0, ids(0))


@rig_test()
async def test_replica_new_then_online_sends_nothing_without_leadership(rig: Rig) -> None:
    """NonExistent -> New -> Online of a brand-new partition changes state only."""
    await rig.create_topic((0, 1))
    await rig.rsm.handle_state_changes([R0, R1], R.NEW)
    await rig.rsm.handle_state_changes([R0, R1], R.ONLINE)
    assert rig.ctx.replica_state(R0) is R.ONLINE
    assert rig.sender.sent == []


@rig_test()
async def test_replica_new_with_leadership_gets_leader_and_isr_but_not_the_leader(rig: Rig) -> None:
    """-> New with leadership: LeaderAndIsr(isNew) to a follower; the current leader is refused."""
    await rig.create_topic((0, 1))
    await rig.seed_leadership(T0, 0, (0,))
    await rig.rsm.handle_state_changes([R0, R1], R.NEW)
    assert rig.ctx.replica_state(R0) is R.NON_EXISTENT
    assert rig.ctx.replica_state(R1) is R.NEW
    ((broker, request),) = rig.requests(LeaderAndIsrRequest)
    assert broker == 1
    assert request.partition_states[0].is_new


@rig_test()
async def test_replica_new_to_online_appends_a_replica_missing_from_the_assignment(
    rig: Rig,
) -> None:
    """New -> Online of a replica outside the assignment appends it (logged as an error)."""
    await rig.create_topic((0,))
    extra = PartitionAndReplica(T0, BrokerId(2))
    await rig.rsm.handle_state_changes([extra], R.NEW)
    await rig.rsm.handle_state_changes([extra], R.ONLINE)
    assert rig.ctx.partition_replica_assignment(T0) == ids(0, 2)


@rig_test()
async def test_replica_online_to_online_sends_leader_and_isr(rig: Rig) -> None:
    """Online -> Online resends the current leadership to that replica."""
    await rig.create_topic((0, 1))
    await rig.seed_leadership(T0, 0, (0, 1))
    rig.ctx.put_replica_state(R1, R.ONLINE)
    await rig.rsm.handle_state_changes([R1], R.ONLINE)
    ((broker, request),) = rig.requests(LeaderAndIsrRequest)
    assert broker == 1
    assert not request.partition_states[0].is_new


@rig_test()
async def test_replica_online_to_offline_shrinks_the_isr_and_tells_the_others(rig: Rig) -> None:
    """Online -> Offline: StopReplica(false) to it, ISR without it (leader -1 if it led),
    LeaderAndIsr to the remaining replica, leadership cache updated."""
    await rig.create_topic((0, 1))
    await rig.seed_leadership(T0, 0, (0, 1))
    rig.ctx.put_replica_state(R0, R.ONLINE)
    await rig.rsm.handle_state_changes([R0], R.OFFLINE)
    assert rig.ctx.replica_state(R0) is R.OFFLINE
    state = await rig.zk_state()
    assert state is not None
    assert (state.state.leader, state.state.isr, state.state.leader_epoch) == (-1, ids(1), 1)
    ((broker, lair),) = rig.requests(LeaderAndIsrRequest)
    assert broker == 1
    assert (lair.partition_states[0].leader, lair.partition_states[0].isr) == (-1, ids(1))
    ((stop_broker, stop),) = rig.requests(StopReplicaRequest)
    assert stop_broker == 0
    assert not stop.partitions[0].delete_partition
    leadership = rig.ctx.leadership(T0)
    assert leadership is not None
    assert (leadership.leader, leadership.zk_version) == (-1, 1)


@rig_test(live=(1,))
async def test_the_last_isr_member_going_offline_keeps_the_isr(rig: Rig) -> None:
    """RF1: the ISR never becomes empty; the leader becomes -1 and the epoch moves on."""
    await rig.create_topic((0,))
    await rig.seed_leadership(T0, 0, (0,))
    rig.ctx.put_replica_state(R0, R.ONLINE)
    await rig.rsm.handle_state_changes([R0], R.OFFLINE)
    state = await rig.zk_state()
    assert state is not None
    assert (state.state.leader, state.state.isr, state.state.leader_epoch) == (-1, ids(0), 1)


@rig_test()
async def test_replica_deletion_path_and_removal_from_the_assignment(rig: Rig) -> None:
    """Offline -> DeletionStarted (StopReplica delete) -> Successful -> NonExistent (assignment
    emptied, state removed); Offline -> Ineligible and Started -> Ineligible are valid."""
    await rig.create_topic((0, 1))
    rig.ctx.put_replica_state(R0, R.OFFLINE)
    rig.ctx.put_replica_state(R1, R.OFFLINE)
    await rig.rsm.handle_state_changes([R0, R1], R.DELETION_STARTED)
    stops = rig.requests(StopReplicaRequest)
    assert [(b, r.partitions[0].delete_partition) for b, r in stops] == [(0, True), (1, True)]
    await rig.rsm.handle_state_changes([R1], R.DELETION_INELIGIBLE)
    assert rig.ctx.replica_state(R1) is R.DELETION_INELIGIBLE
    await rig.rsm.handle_state_changes([R0], R.DELETION_SUCCESSFUL)
    await rig.rsm.handle_state_changes([R0], R.NON_EXISTENT)
    assert R0 not in rig.ctx.replica_states
    assert rig.ctx.partition_replica_assignment(T0) == ids(1)
    rig.ctx.put_replica_state(R1, R.OFFLINE)
    await rig.rsm.handle_state_changes([R1], R.DELETION_INELIGIBLE)
    assert rig.ctx.replica_state(R1) is R.DELETION_INELIGIBLE


@rig_test()
async def test_ineligible_and_offline_replicas_can_come_back_online(rig: Rig) -> None:
    """Ineligible -> Online and Offline -> Online send LeaderAndIsr to the replica."""
    await rig.create_topic((0, 1))
    await rig.seed_leadership(T0, 0, (0, 1))
    rig.ctx.put_replica_state(R0, R.DELETION_INELIGIBLE)
    rig.ctx.put_replica_state(R1, R.OFFLINE)
    await rig.rsm.handle_state_changes([R0, R1], R.ONLINE)
    assert (rig.ctx.replica_state(R0), rig.ctx.replica_state(R1)) == (R.ONLINE, R.ONLINE)
    assert [b for b, _ in rig.requests(LeaderAndIsrRequest)] == [0, 1]


_INVALID_REPLICA_TRANSITIONS = [
    (current, target)
    for current, target in itertools.product(R, R)
    if current not in REPLICA_VALID_PREVIOUS[target]
]


@pytest.mark.parametrize(("current", "target"), _INVALID_REPLICA_TRANSITIONS, ids=lambda s: s.label)
def test_every_invalid_replica_transition_is_refused(
    current: ReplicaState, target: ReplicaState
) -> None:
    """An invalid replica transition is traced as an error and changes nothing, sends nothing."""

    @rig_test()
    async def check(rig: Rig) -> None:
        await rig.create_topic((0, 1))
        await rig.seed_leadership(T0, 0, (0, 1))
        if current is not R.NON_EXISTENT:
            rig.ctx.put_replica_state(R1, current)
        await rig.rsm.handle_state_changes([R1], target)
        assert rig.ctx.replica_state(R1) is current
        assert rig.sender.sent == []
        (error,) = rig.errors("invalid_transition")
        assert (error["from_state"], error["to_state"]) == (current.label, target.label)
        assert not [t for t in rig.transitions() if t[0] == "replica"]

    check()


_INVALID_PARTITION_TRANSITIONS = [
    (current, target)
    for current, target in itertools.product(P, P)
    if current not in PARTITION_VALID_PREVIOUS[target]
]


@pytest.mark.parametrize(
    ("current", "target"), _INVALID_PARTITION_TRANSITIONS, ids=lambda s: s.label
)
def test_every_invalid_partition_transition_is_refused(
    current: PartitionState, target: PartitionState
) -> None:
    """An invalid partition transition is traced as an error and changes nothing, sends nothing."""

    @rig_test()
    async def check(rig: Rig) -> None:
        await rig.create_topic((0, 1))
        await rig.seed_leadership(T0, 0, (0, 1))
        rig.ctx.put_partition_state(T0, current)
        await rig.psm.handle_state_changes([T0], target, OfflineElection())
        assert rig.ctx.partition_state(T0) is current
        assert rig.sender.sent == []
        (error,) = rig.errors("invalid_transition")
        assert (error["from_state"], error["to_state"]) == (current.label, target.label)

    check()


class _CountingSession(ForwardingSession):
    """Counts the state znodes read and written, and may write one state behind the
    controller's back right before the controller's ``writes_before``-th pipelined write
    batch (as another writer would)."""

    def __init__(self, inner: StoreSession, *, intrude_before: int | None = None) -> None:
        super().__init__(inner)
        self.reads: list[str] = []
        self.write_batches = 0
        self.writes = 0
        self._intrude_before = intrude_before

    async def get_each(
        self, reads: Sequence[tuple[str, bool]]
    ) -> list[tuple[bytes, Stat] | StoreError]:
        self.reads.extend(path for path, _ in reads if path.endswith("/state"))
        return await super().get_each(reads)

    async def multi_each(
        self, batches: Sequence[Sequence[StoreOp]]
    ) -> list[tuple[OpResult, ...] | StoreError]:
        self.write_batches += 1
        self.writes += len(batches)
        if self.write_batches == self._intrude_before:
            path = zkdata.partition_state_path(TopicName("t"), 0)
            data, _ = await self.inner.get(path)
            state = zkdata.LeaderIsrAndControllerEpoch.decode(data)
            # Broker 1 leading again, written by someone else: the version moves on.
            led = msgspec.structs.replace(state, leader=BrokerId(1))
            await self.inner.set(path, led.encode())
        return await super().multi_each(batches)


def _offline_all(rig: Rig, partitions: int) -> list[PartitionAndReplica]:
    replicas = [
        PartitionAndReplica(TopicPartition(TopicName("t"), p), BrokerId(b))
        for p in range(partitions)
        for b in (0, 1, 2)
    ]
    for replica in replicas:
        rig.ctx.put_replica_state(replica, R.ONLINE)
    return replicas


@rig_test()
async def test_offline_of_every_replica_writes_each_state_per_broker_from_the_cache(
    rig: Rig,
) -> None:
    """OfflineReplica for all three replicas of each partition (a deletion's phase 1):
    Kafka's three rounds, one per broker, each writing every state whose ISR holds the
    broker, so each state is written three times (leader -1 once its leader went, the last
    ISR member kept); every round starts from the cached state, so none is read."""
    await rig.create_topic((0, 1, 2), partitions=4)
    for p in range(4):
        await rig.seed_leadership(TopicPartition(TopicName("t"), p), p % 3, (0, 1, 2))
    counting = _CountingSession(rig.session)
    rig.rsm._session = lambda: counting
    await rig.rsm.handle_state_changes(_offline_all(rig, 4), R.OFFLINE)
    assert counting.reads == []
    assert (counting.write_batches, counting.writes) == (3, 12)
    for p in range(4):
        tp = TopicPartition(TopicName("t"), p)
        state = await rig.zk_state(tp)
        assert state is not None
        assert (state.state.leader, state.state.isr, state.state.leader_epoch) == (-1, ids(2), 3)
        assert state.zk_version == 3
        leadership = rig.ctx.leadership(tp)
        assert leadership is not None
        assert (leadership.leader_and_isr.isr, leadership.zk_version) == (ids(2), 3)
        assert all(
            rig.ctx.replica_state(PartitionAndReplica(tp, BrokerId(b))) is R.OFFLINE
            for b in (0, 1, 2)
        )
    assert not rig.errors("state_change_failed")


@rig_test()
async def test_a_state_written_by_another_between_rounds_is_read_and_retried(rig: Rig) -> None:
    """If someone else writes a state between two rounds, the round's conditional write
    meets BADVERSION; the state is then read and the shrink retried on what was read, as
    Kafka's retry does."""
    await rig.create_topic((0, 1, 2))
    await rig.seed_leadership(T0, 0, (0, 1, 2))
    counting = _CountingSession(rig.session, intrude_before=2)
    rig.rsm._session = lambda: counting
    await rig.rsm.handle_state_changes(_offline_all(rig, 1), R.OFFLINE)
    # Round 1 wrote on the cached state; round 2's write lost to the intruder (leader 1)
    # and read it, then shrank what it read (leader 1 gone: -1); round 3 wrote on its own
    # write.
    assert counting.reads == ["/brokers/topics/t/partitions/0/state"]
    state = await rig.zk_state()
    assert state is not None
    assert (state.state.leader, state.state.isr, state.zk_version) == (-1, ids(2), 4)
    assert counting.writes == 4  # three rounds, one retried
    assert not rig.errors("state_change_failed")
    assert all(
        rig.ctx.replica_state(PartitionAndReplica(T0, BrokerId(b))) is R.OFFLINE for b in (0, 1, 2)
    )


@rig_test()
async def test_a_stale_cached_state_fails_its_write_and_is_read_and_retried(rig: Rig) -> None:
    """The ISR shrink starts from the cached state; a state someone else wrote before the
    change (the cache behind it) fails the conditional write with BADVERSION and is read
    and shrunk as Kafka's retry does. A cached ISR without the replica is read first: only
    the znode can tell whether it needs a write."""
    await rig.create_topic((0, 1, 2), partitions=2)
    t1 = TopicPartition(TopicName("t"), 1)
    await rig.seed_leadership(T0, 0, (0, 1, 2))
    await rig.seed_leadership(t1, 1, (1, 2))
    path = zkdata.partition_state_path(TopicName("t"), 0)
    data, _ = await rig.session.get(path)
    led = msgspec.structs.replace(zkdata.LeaderIsrAndControllerEpoch.decode(data), leader=1)
    await rig.session.set(path, led.encode())  # behind the controller's back: zkVersion 1
    # The znode of partition 1 holds broker 0 in its ISR although the cache does not.
    t1_path = zkdata.partition_state_path(TopicName("t"), 1)
    data, _ = await rig.session.get(t1_path)
    wide = msgspec.structs.replace(
        zkdata.LeaderIsrAndControllerEpoch.decode(data), isr=ids(0, 1, 2)
    )
    await rig.session.set(t1_path, wide.encode())
    counting = _CountingSession(rig.session)
    rig.rsm._session = lambda: counting
    replicas = [PartitionAndReplica(T0, BrokerId(0)), PartitionAndReplica(t1, BrokerId(0))]
    for replica in replicas:
        rig.ctx.put_replica_state(replica, R.ONLINE)
    await rig.rsm.handle_state_changes(replicas, R.OFFLINE)
    # Partition 1 read first (cached ISR without 0), partition 0 read after BADVERSION.
    assert counting.reads == [t1_path, path]
    assert counting.writes == 3  # partition 0 twice (one lost), partition 1 once
    state = await rig.zk_state()
    assert state is not None
    assert (state.state.leader, state.state.isr, state.zk_version) == (1, ids(1, 2), 2)
    state1 = await rig.zk_state(t1)
    assert state1 is not None
    assert (state1.state.isr, state1.zk_version) == (ids(1, 2), 2)
    assert not rig.errors("state_change_failed")
    assert all(rig.ctx.replica_state(r) is R.OFFLINE for r in replicas)


@rig_test()
async def test_an_untraced_move_to_online_counts_each_transition_and_sends_alike(
    rig: Rig,
) -> None:
    """With no trace sink listening (a new controller's resend to every live replica), the
    replica state machine counts each transition's trace event without building it, in
    one go: the numbering is what tracing each would give, the states and the requests
    are those of the traced path."""
    await rig.create_topic((0, 1, 2), partitions=4)
    partitions = [TopicPartition(TopicName("t"), p) for p in range(4)]
    for tp in partitions:
        await rig.seed_leadership(tp, 0, (0, 1, 2))
    replicas = [PartitionAndReplica(tp, BrokerId(r)) for tp in partitions for r in (0, 1, 2)]
    for replica in replicas:  # two already Online, the others not yet (a new controller)
        state = R.ONLINE if replica.topic_partition.partition < 2 else R.OFFLINE
        rig.ctx.put_replica_state(replica, state)
    await rig.rsm.handle_state_changes(replicas, R.ONLINE)
    traced_requests = [(b, r) for b, r, _ in rig.sender.sent]
    assert len(rig.transitions()) == len(replicas)

    tracer = Tracer()  # no sink: nothing is built, every event counted
    rig.rsm.state_log = StateChangeLogger(0, lambda *_, **__: None, tracer=tracer)
    assert not rig.rsm.state_log.records(R.ONLINE.label)
    for replica in replicas:
        rig.ctx.put_replica_state(
            replica, R.ONLINE if replica.topic_partition.partition < 2 else R.OFFLINE
        )
    rig.sender.sent.clear()
    await rig.rsm.handle_state_changes(replicas, R.ONLINE)
    assert tracer.seq == len(replicas)
    assert all(rig.ctx.replica_state(r) is R.ONLINE for r in replicas)
    assert [(b, r) for b, r, _ in rig.sender.sent] == traced_requests


@rig_test()
async def test_an_untraced_move_to_offline_counts_each_transition(rig: Rig) -> None:
    """The same for the replicas of a dead broker moved Offline (its ISR shrink): each
    transition's event counted, the states changed, the ISR shrunk."""
    await rig.create_topic((0, 1, 2), partitions=3)
    partitions = [TopicPartition(TopicName("t"), p) for p in range(3)]
    for tp in partitions:
        await rig.seed_leadership(tp, 0, (0, 1, 2))
    replicas = [PartitionAndReplica(tp, BrokerId(2)) for tp in partitions]
    for replica in replicas:
        rig.ctx.put_replica_state(replica, R.ONLINE)
    tracer = Tracer()
    rig.rsm.state_log = StateChangeLogger(0, lambda *_, **__: None, tracer=tracer)
    await rig.rsm.handle_state_changes(replicas, R.OFFLINE)
    assert tracer.seq == len(replicas)
    assert all(rig.ctx.replica_state(r) is R.OFFLINE for r in replicas)
    assert all(rig.ctx.leadership(tp).isr == ids(0, 1) for tp in partitions)  # type: ignore[union-attr]
