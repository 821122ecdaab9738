"""The control-request batch (ControllerChannelManagerTest): contents, stickiness, order."""

from __future__ import annotations

import pytest

from actors.controller.context import Broker, ControllerContext
from actors.controller.errors import IllegalControllerStateError
from actors.controller.events import (
    ControllerEvent,
    LeaderAndIsrResponseReceived,
    UpdateMetadataResponseReceived,
)
from actors.controller.model import LeaderAndIsr, Leadership
from actors.controller.request_batch import (
    ControllerBrokerRequestBatch,
)
from protocol import zkdata
from protocol.control import (
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LiveLeader,
    StopReplicaRequest,
    StopReplicaResponse,
    TopicPartition,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from protocol.errors import ErrorCode
from protocol.ids import BrokerId, ControllerEpoch, LeaderEpoch, TopicName
from tests.support.fake_brokers import RecordingSender, registration

T0 = TopicPartition(TopicName("t"), 0)
T1 = TopicPartition(TopicName("t"), 1)
D0 = TopicPartition(TopicName("doomed"), 0)


class DeletionStopped(ControllerEvent, frozen=True, kw_only=True):
    broker_id: BrokerId
    partitions: tuple[TopicPartition, ...]


def ids(*values: int) -> tuple[BrokerId, ...]:
    return tuple(BrokerId(v) for v in values)


def leadership(leader: int, isr: tuple[int, ...], epoch: int = 3) -> Leadership:
    return Leadership(
        leader_and_isr=LeaderAndIsr(
            leader=BrokerId(leader), leader_epoch=LeaderEpoch(epoch), isr=ids(*isr), zk_version=4
        ),
        controller_epoch=ControllerEpoch(2),
    )


def make() -> tuple[ControllerContext, RecordingSender, ControllerBrokerRequestBatch]:
    ctx = ControllerContext()
    ctx.epoch = ControllerEpoch(5)
    ctx.set_live_brokers(
        {BrokerId(b): (Broker(BrokerId(b), registration(b, 0)), 100 + b) for b in (0, 1, 2)}
    )
    for tp in (T0, T1, D0):
        ctx.update_partition_full_replica_assignment(
            tp, zkdata.ReplicaAssignment(replicas=ids(0, 1, 2))
        )
    ctx.put_leadership(T0, leadership(0, (0, 1, 2)))
    ctx.put_leadership(D0, leadership(1, (1, 2)))
    sender = RecordingSender()

    def stopped(
        broker: BrokerId, response: StopReplicaResponse, deleted: frozenset[TopicPartition]
    ) -> ControllerEvent:
        return DeletionStopped(broker_id=broker, partitions=tuple(sorted(deleted)))

    batch = ControllerBrokerRequestBatch(BrokerId(9), ctx, sender, stop_replica_event=stopped)
    return ctx, sender, batch


def test_leader_and_isr_carries_the_partition_state_and_the_live_leaders() -> None:
    """LeaderAndIsr: leader, epochs, ISR, zkVersion, replicas, controller id/epoch, broker epoch."""
    ctx, sender, batch = make()
    batch.new_batch()
    batch.add_leader_and_isr(
        ids(1),
        T0,
        leadership(0, (0, 1, 2)),
        ctx.partition_full_replica_assignment(T0),
        is_new=False,
    )
    batch.send_requests_to_brokers(ctx.epoch)
    broker, request, _ = sender.sent[0]
    assert broker == 1
    assert isinstance(request, LeaderAndIsrRequest)
    assert (request.controller_id, request.controller_epoch, request.broker_epoch) == (9, 5, 101)
    (state,) = request.partition_states
    assert (state.topic, state.partition, state.leader, state.leader_epoch) == ("t", 0, 0, 3)
    assert (state.isr, state.zk_version, state.replicas, state.controller_epoch) == (
        ids(0, 1, 2),
        4,
        ids(0, 1, 2),
        2,
    )
    assert not state.is_new
    assert request.live_leaders == (LiveLeader(broker_id=BrokerId(0), host="127.0.0.1", port=9092),)
    assert batch.is_empty


def test_is_new_is_sticky_and_negative_brokers_are_ignored() -> None:
    """Adding a partition again keeps isNew true; broker ids < 0 get nothing."""
    ctx, sender, batch = make()
    batch.new_batch()
    assignment = ctx.partition_full_replica_assignment(T0)
    batch.add_leader_and_isr(ids(1, -1), T0, leadership(0, (0, 1, 2)), assignment, is_new=True)
    batch.add_leader_and_isr(
        ids(1), T0, leadership(0, (0, 1, 2), epoch=4), assignment, is_new=False
    )
    batch.send_requests_to_brokers(ctx.epoch)
    lair = [r for _, r, _ in sender.sent if isinstance(r, LeaderAndIsrRequest)]
    assert len(lair) == 1
    (state,) = lair[0].partition_states
    assert state.is_new
    assert state.leader_epoch == 4


def test_leader_and_isr_adds_update_metadata_for_every_live_or_shutting_down_broker() -> None:
    """Every LeaderAndIsr also queues UpdateMetadata for that partition to all brokers."""
    ctx, sender, batch = make()
    ctx.shutting_down_broker_ids.add(BrokerId(2))
    batch.new_batch()
    batch.add_leader_and_isr(
        ids(0), T0, leadership(0, (0, 1, 2)), ctx.partition_full_replica_assignment(T0), is_new=True
    )
    batch.send_requests_to_brokers(ctx.epoch)
    assert sender.kinds() == [
        (0, "LeaderAndIsrRequest"),
        (0, "UpdateMetadataRequest"),
        (1, "UpdateMetadataRequest"),
        (2, "UpdateMetadataRequest"),
    ]
    um = sender.sent[1][1]
    assert isinstance(um, UpdateMetadataRequest)
    assert [b.id for b in um.live_brokers] == [0, 1, 2]  # shutting-down brokers included
    assert [(p.topic, p.partition, p.leader) for p in um.partition_states] == [("t", 0, 0)]


def test_requests_go_only_to_live_or_shutting_down_brokers() -> None:
    """A broker that is not registered gets no request of any kind."""
    ctx, sender, batch = make()
    ctx.remove_live_brokers(ids(2))
    batch.new_batch()
    assignment = ctx.partition_full_replica_assignment(T0)
    batch.add_leader_and_isr(ids(1, 2), T0, leadership(0, (0, 1, 2)), assignment, is_new=False)
    batch.add_stop_replica(ids(2), T0, delete_partition=False)
    batch.add_update_metadata(ids(0, 1, 2), (T0,))
    batch.send_requests_to_brokers(ctx.epoch)
    assert {b for b, _, _ in sender.sent} == {0, 1}
    assert batch.is_empty


def test_flush_order_is_leader_and_isr_then_update_metadata_then_stop_replica() -> None:
    """Whatever the order of adds: LeaderAndIsr first, UpdateMetadata next, StopReplica last."""
    ctx, sender, batch = make()
    batch.new_batch()
    batch.add_stop_replica(ids(0, 1), T0, delete_partition=False)
    batch.add_update_metadata(ids(2), ())
    batch.add_leader_and_isr(
        ids(1),
        T0,
        leadership(0, (0, 1, 2)),
        ctx.partition_full_replica_assignment(T0),
        is_new=False,
    )
    batch.send_requests_to_brokers(ctx.epoch)
    kinds = [k for _, k in sender.kinds()]
    assert (
        kinds
        == ["LeaderAndIsrRequest"] + ["UpdateMetadataRequest"] * 3 + ["StopReplicaRequest"] * 2
    )


def test_update_metadata_skips_leaderless_partitions_and_marks_queued_topics() -> None:
    """No leader: not announced. Queued for deletion: leader -2, epoch/zkVersion 0, ISR kept."""
    ctx, sender, batch = make()
    ctx.topics_to_be_deleted.add(TopicName("doomed"))
    ctx.remove_live_brokers(ids(2))
    batch.new_batch()
    batch.add_update_metadata(ids(0), (T0, T1, D0))
    batch.send_requests_to_brokers(ctx.epoch)
    (request,) = [r for _, r, _ in sender.sent]
    assert isinstance(request, UpdateMetadataRequest)
    states = {p.topic_partition: p for p in request.partition_states}
    assert set(states) == {T0, D0}
    assert (states[D0].leader, states[D0].leader_epoch, states[D0].zk_version) == (-2, 0, 0)
    assert states[D0].isr == ids(1, 2)
    assert states[T0].offline_replicas == ids(2)
    assert states[T0].replicas == ids(0, 1, 2)


def test_stop_replica_epochs_and_sticky_delete_in_one_request_per_broker() -> None:
    """Epoch -2 when queued for deletion, else cached, else -1; delete stays true; one request."""
    ctx, sender, batch = make()
    ctx.topics_to_be_deleted.add(TopicName("doomed"))
    batch.new_batch()
    batch.add_stop_replica(ids(0), T0, delete_partition=True)
    batch.add_stop_replica(ids(0), T0, delete_partition=False)
    batch.add_stop_replica(ids(0), T1, delete_partition=False)
    batch.add_stop_replica(ids(0), D0, delete_partition=True)
    batch.send_requests_to_brokers(ctx.epoch)
    (request,) = [r for _, r, _ in sender.sent]
    assert isinstance(request, StopReplicaRequest)
    got = {(p.topic, p.partition): (p.leader_epoch, p.delete_partition) for p in request.partitions}
    assert got == {("t", 0): (3, True), ("t", 1): (-1, False), ("doomed", 0): (-2, True)}


def test_only_delete_true_stop_replica_responses_make_deletion_events() -> None:
    """A StopReplica with delete=true partitions reports them; one without reports nothing."""
    ctx, sender, batch = make()
    batch.new_batch()
    batch.add_stop_replica(ids(0), T0, delete_partition=True)
    batch.add_stop_replica(ids(0), T1, delete_partition=False)
    batch.add_stop_replica(ids(1), T1, delete_partition=False)
    batch.send_requests_to_brokers(ctx.epoch)
    callbacks = {int(b): cb for b, _, cb in sender.sent}
    assert callbacks[1] is None
    cb = callbacks[0]
    assert cb is not None
    event = cb(StopReplicaResponse(error_code=ErrorCode.NONE))
    assert event == DeletionStopped(broker_id=BrokerId(0), partitions=(T0,))


def test_responses_come_back_as_controller_events() -> None:
    """LeaderAndIsr and UpdateMetadata responses map to their *ResponseReceived events."""
    ctx, sender, batch = make()
    batch.new_batch()
    batch.add_leader_and_isr(
        ids(1),
        T0,
        leadership(0, (0, 1, 2)),
        ctx.partition_full_replica_assignment(T0),
        is_new=False,
    )
    batch.send_requests_to_brokers(ctx.epoch)
    by_kind = {(int(b), type(r).__name__): cb for b, r, cb in sender.sent}
    lair_cb = by_kind[(1, "LeaderAndIsrRequest")]
    um_cb = by_kind[(2, "UpdateMetadataRequest")]
    assert lair_cb is not None
    assert um_cb is not None
    lair_response = LeaderAndIsrResponse(error_code=ErrorCode.NONE)
    assert lair_cb(lair_response) == LeaderAndIsrResponseReceived(
        broker_id=BrokerId(1), response=lair_response
    )
    um_response = UpdateMetadataResponse(error_code=ErrorCode.NONE)
    assert um_cb(um_response) == UpdateMetadataResponseReceived(
        broker_id=BrokerId(2), response=um_response
    )


def test_a_new_batch_requires_the_previous_one_flushed() -> None:
    """Starting a batch while the last one still holds requests is an illegal state."""
    _, _, batch = make()
    batch.new_batch()
    batch.add_update_metadata(ids(0), ())
    with pytest.raises(IllegalControllerStateError):
        batch.new_batch()
    batch.clear()
    batch.new_batch()


def test_a_resend_adds_what_add_leader_and_isr_adds_for_each_partition() -> None:
    """``resend_leader_and_isr`` (the replica state machine's OnlineReplica resend) sends
    the requests a call of ``add_leader_and_isr`` per partition sends: the states, their
    sticky isNew (a partition added as new before stays new), the UpdateMetadata states
    and recipients; a negative broker id gets nothing."""

    def requests(resend: bool) -> list[tuple[BrokerId, object]]:
        ctx, sender, batch = make()
        ctx.put_leadership(T1, leadership(2, (2, 0), epoch=7))
        batch.new_batch()
        t0 = ctx.partition_full_replica_assignment(T0)
        batch.add_leader_and_isr(ids(1), T0, leadership(0, (0, 1, 2)), t0, is_new=True)
        entries = [(T0, ctx.leadership(T0)), (T1, ctx.leadership(T1)), (D0, ctx.leadership(D0))]
        for broker in (1, 2, -1):
            if resend:
                batch.resend_leader_and_isr(BrokerId(broker), entries)  # type: ignore[arg-type]
            else:
                for tp, known in entries:
                    assert known is not None
                    batch.add_leader_and_isr(
                        ids(broker),
                        tp,
                        known,
                        ctx.partition_full_replica_assignment(tp),
                        is_new=False,
                    )
        batch.send_requests_to_brokers(ctx.epoch)
        return [(b, r) for b, r, _ in sender.sent]

    sent = requests(resend=True)
    assert sent == requests(resend=False)
    assert [(b, type(r).__name__) for b, r in sent] == [
        (1, "LeaderAndIsrRequest"),
        (2, "LeaderAndIsrRequest"),
        (0, "UpdateMetadataRequest"),
        (1, "UpdateMetadataRequest"),
        (2, "UpdateMetadataRequest"),
    ]
    first = sent[0][1]
    assert isinstance(first, LeaderAndIsrRequest)
    assert [(s.partition, s.topic, s.is_new) for s in first.partition_states] == [
        (0, "t", True),
        (1, "t", False),
        (0, "doomed", False),
    ]
