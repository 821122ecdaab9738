"""Per-broker accumulation of control requests (Kafka's ``ControllerBrokerRequestBatch``).

A state change adds what each broker must hear; ``send_requests_to_brokers`` then flushes
them in Kafka's order: every LeaderAndIsr, then every UpdateMetadata, then every
StopReplica, one request per broker and API, only to live-or-shutting-down brokers, each
carrying the controller's id and epoch and the target broker's epoch.

* LeaderAndIsr: per broker and partition the leader, epoch, ISR, zkVersion, replicas and
  ``is_new``, which stays true once set. Adding one also adds UpdateMetadata for that
  partition to every live-or-shutting-down broker. Negative broker ids are ignored.
* StopReplica: the leader epoch is -2 for a topic queued for deletion, else the cached one,
  else -1; ``delete_partition`` stays true once set. One request per broker mixes delete
  true and false (v3).
* UpdateMetadata: only partitions with leadership info; a topic queued for deletion is
  announced with leader -2 (epoch and zkVersion 0, ISR kept). Every request lists all
  live-or-shutting-down brokers with endpoints and rack.

Responses come back to the controller only as events (``ResponseToEvent``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from actors.controller.context import EMPTY_ASSIGNMENT, ControllerContext
from actors.controller.errors import IllegalControllerStateError
from actors.controller.events import (
    ControllerEvent,
    LeaderAndIsrResponseReceived,
    UpdateMetadataResponseReceived,
)
from actors.controller.model import Leadership
from protocol import zkdata
from protocol.base import Message
from protocol.control import (
    EPOCH_DURING_DELETE,
    INITIAL_LEADER_EPOCH,
    INITIAL_ZK_VERSION,
    LEADER_DURING_DELETE,
    NO_EPOCH,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LiveLeader,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaResponse,
    TopicPartition,
    UpdateMetadataBroker,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from protocol.ids import BrokerEpoch, BrokerId, ControllerEpoch, TopicName

ControlRequest = LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest

ResponseToEvent = Callable[[Message], ControllerEvent | None]
"""Turns a broker's response into the event the controller should process (or none)."""

StopReplicaEventFactory = Callable[
    [BrokerId, StopReplicaResponse, frozenset[TopicPartition]], ControllerEvent | None
]
"""Given a StopReplica response and the partitions that were sent with delete=true, the
event for the topic-deletion manager (``TopicDeletionStopReplicaResponseReceived``). Without
one, none is made."""


class RequestSender(Protocol):
    """Where flushed requests go: the channel manager's per-broker queues."""

    def send_request(
        self, broker_id: BrokerId, request: ControlRequest, on_response: ResponseToEvent | None
    ) -> None: ...


class ControllerBrokerRequestBatch:
    """One batch of control requests, built by a state change and flushed at its end."""

    def __init__(
        self,
        controller_id: BrokerId,
        context: ControllerContext,
        sender: RequestSender,
        *,
        inter_broker_listener: str = "PLAINTEXT",
        stop_replica_event: StopReplicaEventFactory | None = None,
    ) -> None:
        self.controller_id = controller_id
        self.context = context
        self.sender = sender
        self.inter_broker_listener = inter_broker_listener
        self.stop_replica_event = stop_replica_event
        self.leader_and_isr: dict[BrokerId, dict[TopicPartition, LeaderAndIsrPartitionState]] = {}
        self.stop_replica: dict[BrokerId, dict[TopicPartition, StopReplicaPartitionState]] = {}
        self.update_metadata_brokers: set[BrokerId] = set()
        self.update_metadata_partitions: dict[TopicPartition, UpdateMetadataPartitionState] = {}
        # Per partition in this batch: the leadership and assignment its LeaderAndIsr
        # states were built from, and those states by is_new (see add_leader_and_isr).
        self._built: dict[
            TopicPartition,
            tuple[
                Leadership,
                zkdata.ReplicaAssignment,
                list[LeaderAndIsrPartitionState | None],  # indexed by is_new
            ],
        ] = {}
        # The offline replicas of each replica list met in this batch, while they depend
        # on the list alone (no broker shutting down, no offline log dir): a few hundred
        # lists among 100,000 partitions.
        self._offline: dict[tuple[BrokerId, ...], tuple[BrokerId, ...]] = {}

    # -- lifecycle

    @property
    def is_empty(self) -> bool:
        return not (self.leader_and_isr or self.stop_replica or self.update_metadata_brokers)

    def new_batch(self) -> None:
        """Start a batch; the previous one must have been flushed (or cleared)."""
        if self.leader_and_isr:
            raise IllegalControllerStateError(
                "controller-to-broker batch is not empty while creating a new one: "
                f"LeaderAndIsr for brokers {sorted(self.leader_and_isr)} might be lost"
            )
        if self.stop_replica:
            raise IllegalControllerStateError(
                "controller-to-broker batch is not empty while creating a new one: "
                f"StopReplica for brokers {sorted(self.stop_replica)} might be lost"
            )
        if self.update_metadata_brokers:
            raise IllegalControllerStateError(
                "controller-to-broker batch is not empty while creating a new one: "
                f"UpdateMetadata for brokers {sorted(self.update_metadata_brokers)} might be lost"
            )
        self._offline.clear()  # the live brokers may have changed since the last batch

    def clear(self) -> None:
        self._built.clear()
        self._offline.clear()
        self.leader_and_isr.clear()
        self.stop_replica.clear()
        self.update_metadata_brokers.clear()
        self.update_metadata_partitions.clear()

    # -- accumulation

    def add_leader_and_isr(
        self,
        broker_ids: Iterable[BrokerId],
        tp: TopicPartition,
        leadership: Leadership,
        assignment: zkdata.ReplicaAssignment,
        *,
        is_new: bool,
    ) -> None:
        built = self._built.get(tp)
        if built is None or built[0] is not leadership or built[1] is not assignment:
            built = (leadership, assignment, [None, None])
            self._built[tp] = built
            # The UpdateMetadata state of ``tp`` only changes with its leadership or
            # assignment while a batch is built (the live brokers and the deletion queue
            # change between batches): once per partition, not once per recipient.
            self._add_partition_metadata(tp)
            # Every live-or-shutting-down broker hears of it. A set of brokers: the order
            # they are sent in is settled when the batch is sent. (Registered broker ids
            # are never negative: no filtering. Once per partition: the set is emptied
            # only with ``_built``, when the batch is sent or cleared.)
            live = self.context.live_or_shutting_down_broker_ids
            if not live <= self.update_metadata_brokers:
                self.update_metadata_brokers |= live
        shared = built[2]  # the same state for every recipient, by its is_new
        by_broker = self.leader_and_isr
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            states = by_broker.get(broker_id)
            if states is None:
                states = by_broker[broker_id] = {}
            new = is_new
            if not new:
                previous = states.get(tp)
                new = previous is not None and previous.is_new
            partition_state = shared[new]
            if partition_state is None:
                partition_state = shared[new] = _leader_and_isr_state(
                    tp, leadership, assignment, is_new=new
                )
            states[tp] = partition_state

    def resend_leader_and_isr(
        self, broker_id: BrokerId, partitions: Sequence[tuple[TopicPartition, Leadership]]
    ) -> None:
        """``add_leader_and_isr((broker_id,), tp, leadership, assignment, is_new=False)``
        of each ``(tp, leadership)`` in order, ``leadership`` and the assignment being the
        context's own (looked up once here): the replica state machine's OnlineReplica
        resend, 240,000 replicas of 100,000 partitions in a new controller's startup,
        without a call and a recipient loop each. The states added are the same."""
        if broker_id < 0 or not partitions:
            return  # nothing to add: no request for the broker either
        assignments = self.context.partition_assignments
        live = self.context.live_or_shutting_down_broker_ids
        built_of = self._built
        states = self.leader_and_isr.get(broker_id)
        if states is None:
            states = self.leader_and_isr[broker_id] = {}
        topic: str | None = None
        of_topic: dict[int, zkdata.ReplicaAssignment] = {}
        for tp, leadership in partitions:
            # ``partition_full_replica_assignment``, the topic's table looked up once a
            # run of its partitions (they come in partition order)
            if tp.topic != topic:
                topic = tp.topic
                of_topic = assignments.get(TopicName(topic)) or {}
            assignment = of_topic.get(tp.partition, EMPTY_ASSIGNMENT)
            built = built_of.get(tp)
            if built is None or built[0] is not leadership or built[1] is not assignment:
                built = built_of[tp] = (leadership, assignment, [None, None])
                self._add_partition_metadata(tp, leadership, assignment.replicas)
                if not live <= self.update_metadata_brokers:
                    self.update_metadata_brokers |= live
            previous = states.get(tp)
            new = previous is not None and previous.is_new
            shared = built[2]
            partition_state = shared[new]
            if partition_state is None:
                partition_state = shared[new] = _leader_and_isr_state(
                    tp, leadership, assignment, is_new=new
                )
            states[tp] = partition_state

    def add_stop_replica(
        self, broker_ids: Iterable[BrokerId], tp: TopicPartition, *, delete_partition: bool
    ) -> None:
        if self.context.is_topic_queued_for_deletion(tp.topic):
            leader_epoch = EPOCH_DURING_DELETE
        else:
            leadership = self.context.leadership(tp)
            leader_epoch = leadership.leader_epoch if leadership is not None else NO_EPOCH
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            states = self.stop_replica.setdefault(broker_id, {})
            previous = states.get(tp)
            states[tp] = StopReplicaPartitionState(
                topic=tp.topic,
                partition=tp.partition,
                leader_epoch=leader_epoch,
                delete_partition=delete_partition
                or (previous is not None and previous.delete_partition),
            )

    def add_update_metadata(
        self, broker_ids: Iterable[BrokerId], partitions: Iterable[TopicPartition]
    ) -> None:
        self.update_metadata_brokers.update(b for b in broker_ids if b >= 0)
        for tp in partitions:
            self._add_partition_metadata(tp)

    def _add_partition_metadata(
        self,
        tp: TopicPartition,
        leadership: Leadership | None = None,
        replicas: tuple[BrokerId, ...] = (),
    ) -> None:
        """What UpdateMetadata will say of ``tp`` (nothing while it has no leadership).
        ``leadership`` and ``replicas``: the context's, when the caller has looked them
        up already (else they are looked up here)."""
        ctx = self.context
        if leadership is None:
            leadership = ctx.leadership(tp)
            if leadership is None:
                return  # no leader yet: nothing to announce
            replicas = ctx.partition_replica_assignment(tp)
        if ctx.shutting_down_broker_ids or ctx.replicas_on_offline_dirs:
            offline = ctx.offline_replicas(tp, replicas)
        else:
            known = self._offline.get(replicas)
            if known is None:
                known = self._offline[replicas] = ctx.offline_replicas(tp, replicas)
            offline = known
        state = leadership.leader_and_isr
        if ctx.is_topic_queued_for_deletion(tp.topic):
            leader, leader_epoch, zk_version = (
                LEADER_DURING_DELETE,
                INITIAL_LEADER_EPOCH,
                INITIAL_ZK_VERSION,
            )
        else:
            leader, leader_epoch, zk_version = state.leader, state.leader_epoch, state.zk_version
        self.update_metadata_partitions[tp] = UpdateMetadataPartitionState(
            topic=tp.topic,
            partition=tp.partition,
            controller_epoch=leadership.controller_epoch,
            leader=leader,
            leader_epoch=leader_epoch,
            isr=state.isr,
            zk_version=zk_version,
            replicas=replicas,
            offline_replicas=offline,
        )

    # -- flushing

    def send_requests_to_brokers(self, controller_epoch: ControllerEpoch) -> None:
        """Flush in Kafka's order. A failure leaves the batch for the caller to clear and is
        raised as ``IllegalControllerStateError`` (the controller then resigns)."""
        self._built.clear()
        self._offline.clear()
        try:
            self._send_leader_and_isr(controller_epoch)
            self._send_update_metadata(controller_epoch)
            self._send_stop_replica(controller_epoch)
        except IllegalControllerStateError:
            raise
        except Exception as exc:
            raise IllegalControllerStateError(f"failed to send control requests: {exc!r}") from exc

    def _broker_epoch(self, broker_id: BrokerId) -> BrokerEpoch:
        return BrokerEpoch(self.context.live_broker_epochs[broker_id])

    def _send_leader_and_isr(self, controller_epoch: ControllerEpoch) -> None:
        live = self.context.live_or_shutting_down_broker_ids
        for broker_id in sorted(self.leader_and_isr):
            states = self.leader_and_isr[broker_id]
            if broker_id not in live:
                continue
            leader_ids = {s.leader for s in states.values()}
            leaders = tuple(
                self._live_leader(b.id, b.registration)
                for b in self.context.live_or_shutting_down_brokers
                if b.id in leader_ids
            )
            request = LeaderAndIsrRequest(
                controller_id=self.controller_id,
                controller_epoch=controller_epoch,
                broker_epoch=self._broker_epoch(broker_id),
                partition_states=tuple(states.values()),
                live_leaders=leaders,
            )
            self.sender.send_request(broker_id, request, _leader_and_isr_event(broker_id))
        self.leader_and_isr.clear()

    def _live_leader(
        self, broker_id: BrokerId, registration: zkdata.BrokerRegistration
    ) -> LiveLeader:
        endpoints = registration.endpoints
        endpoint = next(
            (e for e in endpoints if e.listener == self.inter_broker_listener),
            endpoints[0] if endpoints else None,
        )
        if endpoint is None:
            return LiveLeader(broker_id=broker_id, host="", port=-1)
        return LiveLeader(broker_id=broker_id, host=endpoint.host, port=endpoint.port)

    def _send_update_metadata(self, controller_epoch: ControllerEpoch) -> None:
        if not self.update_metadata_brokers:
            self.update_metadata_partitions.clear()
            return
        partition_states = tuple(self.update_metadata_partitions.values())
        live_brokers = tuple(
            UpdateMetadataBroker(
                id=b.id, endpoints=b.registration.endpoints, rack=b.registration.rack
            )
            for b in self.context.live_or_shutting_down_brokers
        )
        live = self.context.live_or_shutting_down_broker_ids
        for broker_id in sorted(self.update_metadata_brokers & live):
            request = UpdateMetadataRequest(
                controller_id=self.controller_id,
                controller_epoch=controller_epoch,
                broker_epoch=self._broker_epoch(broker_id),
                partition_states=partition_states,
                live_brokers=live_brokers,
            )
            self.sender.send_request(broker_id, request, _update_metadata_event(broker_id))
        self.update_metadata_brokers.clear()
        self.update_metadata_partitions.clear()

    def _send_stop_replica(self, controller_epoch: ControllerEpoch) -> None:
        live = self.context.live_or_shutting_down_broker_ids
        for broker_id in sorted(self.stop_replica):
            states = self.stop_replica[broker_id]
            if broker_id not in live:
                continue
            request = StopReplicaRequest(
                controller_id=self.controller_id,
                controller_epoch=controller_epoch,
                broker_epoch=self._broker_epoch(broker_id),
                partitions=tuple(states.values()),
            )
            deleted = frozenset(tp for tp, s in states.items() if s.delete_partition)
            self.sender.send_request(
                broker_id, request, self._stop_replica_callback(broker_id, deleted)
            )
        self.stop_replica.clear()

    def _stop_replica_callback(
        self, broker_id: BrokerId, deleted: frozenset[TopicPartition]
    ) -> ResponseToEvent | None:
        factory = self.stop_replica_event
        if factory is None or not deleted:
            return None  # delete=false partitions never produce an event

        def to_event(response: Message) -> ControllerEvent | None:
            if not isinstance(response, StopReplicaResponse):
                return None
            return factory(broker_id, response, deleted)

        return to_event


def _leader_and_isr_event(broker_id: BrokerId) -> ResponseToEvent:
    def to_event(response: Message) -> ControllerEvent | None:
        if isinstance(response, LeaderAndIsrResponse):
            return LeaderAndIsrResponseReceived(broker_id=broker_id, response=response)
        return None

    return to_event


def _update_metadata_event(broker_id: BrokerId) -> ResponseToEvent:
    def to_event(response: Message) -> ControllerEvent | None:
        if isinstance(response, UpdateMetadataResponse):
            return UpdateMetadataResponseReceived(broker_id=broker_id, response=response)
        return None

    return to_event


def _leader_and_isr_state(
    tp: TopicPartition,
    leadership: Leadership,
    assignment: zkdata.ReplicaAssignment,
    *,
    is_new: bool,
) -> LeaderAndIsrPartitionState:
    """A partition's LeaderAndIsr state, built of its leadership and assignment."""
    state = leadership.leader_and_isr
    return LeaderAndIsrPartitionState(
        topic=tp.topic,
        partition=tp.partition,
        controller_epoch=leadership.controller_epoch,
        leader=state.leader,
        leader_epoch=state.leader_epoch,
        isr=state.isr,
        zk_version=state.zk_version,
        replicas=assignment.replicas,
        adding_replicas=assignment.adding_replicas,
        removing_replicas=assignment.removing_replicas,
        is_new=is_new,
    )
