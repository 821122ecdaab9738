"""The controller's events (Kafka's ``ControllerEvent`` subclasses in
``KafkaController.scala``): a closed union, dispatched in one ``match``.

Store watches, request callbacks and timers only enqueue these; the controller's state
changes only while one of them is processed. Each event names the ``ControllerState`` it
runs under (for the state gauge and the time-per-state metric) and what happens to it when
it is drained from the queue unprocessed (``preempt``: nothing for most; the events with a
caller answer it there, below).

Adding an event: define it here, add it to ``ControllerEventUnion``, and give it a case
in ``KafkaController.process`` (mypy's ``assert_never`` check fails until it has one).
Topic deletion, controlled shutdown, leader elections and reassignment (TopicDeletion,
TopicDeletionStopReplicaResponseReceived, ControlledShutdown, ReplicaLeaderElection,
ZkPartitionReassignment, AutoPreferredReplicaLeaderElection) and AlterIsrReceived were added
that way. Those with a caller (ControlledShutdown, ReplicaLeaderElection with
``on_result``, AlterIsrReceived, ListPartitionReassignments, ApiPartitionReassignment)
answer it when preempted: STALE_CONTROLLER_EPOCH, NOT_CONTROLLER per partition, then
NOT_CONTROLLER for the other three.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import ClassVar

import msgspec

from actors.controller.states import ControllerState
from protocol.control import (
    AlterIsrPartition,
    AlterIsrResponse,
    ControlledShutdownResponse,
    LeaderAndIsrResponse,
    TopicPartition,
    UpdateMetadataResponse,
)
from protocol.controller import ElectionType, PartitionElectionResult
from protocol.errors import ErrorCode
from protocol.ids import BrokerEpoch, BrokerId, TopicName
from protocol.kafka_api import (
    AlterPartitionReassignmentsResponseData,
    ListPartitionReassignmentsResponseData,
)


class ControllerEvent(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """The root of the controller's events (and of test events fed to the event manager)."""

    state: ClassVar[ControllerState] = ControllerState.IDLE

    @property
    def name(self) -> str:
        return type(self).__name__

    def preempt(self) -> None:
        """Called instead of processing when the event is drained by ``clear_and_put``."""


class Startup(ControllerEvent, frozen=True, kw_only=True):
    """The controller module started: watch ``/controller`` and try to get elected."""

    state: ClassVar[ControllerState] = ControllerState.CONTROLLER_CHANGE


class ControllerChange(ControllerEvent, frozen=True, kw_only=True):
    """``/controller`` was created or changed: resign if we are no longer the controller."""

    state: ClassVar[ControllerState] = ControllerState.CONTROLLER_CHANGE


class Reelect(ControllerEvent, frozen=True, kw_only=True):
    """``/controller`` was deleted: resign if needed, then try to get elected."""

    state: ClassVar[ControllerState] = ControllerState.CONTROLLER_CHANGE


class RegisterBrokerAndReelect(ControllerEvent, frozen=True, kw_only=True):
    """A new store session exists: re-register this broker (a new broker epoch), re-elect."""

    state: ClassVar[ControllerState] = ControllerState.CONTROLLER_CHANGE


class Expire(ControllerEvent, frozen=True, kw_only=True):
    """The store session expired: resign. Queued with ``clear_and_put``."""

    state: ClassVar[ControllerState] = ControllerState.CONTROLLER_CHANGE


class BrokerChange(ControllerEvent, frozen=True, kw_only=True):
    """The children of ``/brokers/ids`` changed: brokers came, went or bounced
    (``processBrokerChange``)."""

    state: ClassVar[ControllerState] = ControllerState.BROKER_CHANGE


class BrokerModifications(ControllerEvent, frozen=True, kw_only=True):
    """``/brokers/ids/<id>`` changed: new endpoints or features to announce."""

    state: ClassVar[ControllerState] = ControllerState.BROKER_CHANGE

    broker_id: BrokerId


class TopicChange(ControllerEvent, frozen=True, kw_only=True):
    """The children of ``/brokers/topics`` changed: topics created or removed
    (``processTopicChange``)."""

    state: ClassVar[ControllerState] = ControllerState.TOPIC_CHANGE


class PartitionModifications(ControllerEvent, frozen=True, kw_only=True):
    """``/brokers/topics/<t>`` changed: maybe partitions were added
    (``processPartitionModifications``)."""

    state: ClassVar[ControllerState] = ControllerState.TOPIC_CHANGE

    topic: TopicName


class LeaderAndIsrResponseReceived(ControllerEvent, frozen=True, kw_only=True):
    """A broker answered a LeaderAndIsr request (storage errors mark replicas offline)."""

    state: ClassVar[ControllerState] = ControllerState.LEADER_AND_ISR_RESPONSE_RECEIVED

    broker_id: BrokerId
    response: LeaderAndIsrResponse


class UpdateMetadataResponseReceived(ControllerEvent, frozen=True, kw_only=True):
    """A broker answered an UpdateMetadata request (errors are only logged)."""

    state: ClassVar[ControllerState] = ControllerState.UPDATE_METADATA_RESPONSE_RECEIVED

    broker_id: BrokerId
    response: UpdateMetadataResponse


class TopicDeletion(ControllerEvent, frozen=True, kw_only=True):
    """The children of ``/admin/delete_topics`` changed: topics marked for deletion
    (``processTopicDeletion``)."""

    state: ClassVar[ControllerState] = ControllerState.TOPIC_DELETION


class LogDirEventNotification(ControllerEvent, frozen=True, kw_only=True):
    """The children of ``/log_dir_event_notification`` changed: brokers lost log
    directories (``processLogDirEventNotification``)."""

    state: ClassVar[ControllerState] = ControllerState.LOG_DIR_CHANGE


class TopicDeletionStopReplicaResponseReceived(ControllerEvent, frozen=True, kw_only=True):
    """A broker answered a StopReplica(delete=true) for partitions of topics whose deletion
    started (``processTopicDeletionStopReplicaResponseReceived``): ``partition_errors`` holds
    only those partitions."""

    state: ClassVar[ControllerState] = ControllerState.TOPIC_DELETION

    broker_id: BrokerId
    error_code: ErrorCode
    partition_errors: tuple[tuple[TopicPartition, ErrorCode], ...]


# ------------------------------------------------------------------ reassignment, leader
# elections, controlled shutdown


class ZkPartitionReassignment(ControllerEvent, frozen=True, kw_only=True):
    """``/admin/reassign_partitions`` was created (or must be looked at again after the
    controller removed it): start the reassignments it lists."""

    state: ClassVar[ControllerState] = ControllerState.ALTER_PARTITION_REASSIGNMENT


class ListPartitionReassignments(ControllerEvent, frozen=True, kw_only=True):
    """A ListPartitionReassignments caller (``KafkaController.listPartitionReassignments``):
    the reassignments in flight of ``partitions`` (None: every partition being
    reassigned). Preempted, ``reply`` gets NOT_CONTROLLER (no message)."""

    state: ClassVar[ControllerState] = ControllerState.LIST_PARTITION_REASSIGNMENT

    partitions: tuple[TopicPartition, ...] | None
    reply: Callable[[ListPartitionReassignmentsResponseData], None]

    def preempt(self) -> None:
        self.reply(ListPartitionReassignmentsResponseData(error_code=ErrorCode.NOT_CONTROLLER))


class ApiPartitionReassignment(ControllerEvent, frozen=True, kw_only=True):
    """An AlterPartitionReassignments caller (``KafkaController.alterPartitionReassignments``):
    each partition's target replicas (None: cancel its reassignment), the last entry of a
    partition listed twice winning. Preempted, ``reply`` gets NOT_CONTROLLER (no message)."""

    state: ClassVar[ControllerState] = ControllerState.ALTER_PARTITION_REASSIGNMENT

    reassignments: tuple[tuple[TopicPartition, tuple[BrokerId, ...] | None], ...]
    reply: Callable[[AlterPartitionReassignmentsResponseData], None]

    def preempt(self) -> None:
        self.reply(AlterPartitionReassignmentsResponseData(error_code=ErrorCode.NOT_CONTROLLER))


class ElectionTrigger(StrEnum):
    """Who asked for a leader election (Kafka's ``ElectionTrigger``)."""

    AUTO = "AutoTriggered"
    ZK = "ZkTriggered"
    ADMIN_CLIENT = "AdminClientTriggered"


ElectionCallback = Callable[[tuple[PartitionElectionResult, ...]], None]


class ReplicaLeaderElection(ControllerEvent, frozen=True, kw_only=True):
    """Elect leaders for ``partitions`` (None: those listed in
    ``/admin/preferred_replica_election``, for a ZooKeeper-triggered election). An
    ElectLeaders caller gets its ``on_result``; preempted, every partition is answered
    NOT_CONTROLLER."""

    state: ClassVar[ControllerState] = ControllerState.MANUAL_LEADER_BALANCE

    partitions: tuple[TopicPartition, ...] | None = None
    election_type: ElectionType = ElectionType.PREFERRED
    trigger: ElectionTrigger = ElectionTrigger.ZK
    on_result: ElectionCallback | None = None

    def preempt(self) -> None:
        if self.on_result is not None:
            self.on_result(
                tuple(
                    PartitionElectionResult(partition=tp, error_code=ErrorCode.NOT_CONTROLLER)
                    for tp in self.partitions or ()
                )
            )


class AutoPreferredReplicaLeaderElection(ControllerEvent, frozen=True, kw_only=True):
    """The scheduler's leader-imbalance check (every ``leader.imbalance.check.interval
    .seconds``, first after 5 s)."""

    state: ClassVar[ControllerState] = ControllerState.AUTO_LEADER_BALANCE


class UncleanLeaderElectionEnable(ControllerEvent, frozen=True, kw_only=True):
    """The broker's ``unclean.leader.election.enable`` default changed
    (``processUncleanLeaderElectionEnable``): the partition state machine reads
    ``enabled`` from now on, and when it is true the offline partitions go online.
    Kafka queues the event only for a change to true (the controller reads the broker's
    current config on each election); kemu queues it for both, so that a recording
    replays the default it ran with."""

    state: ClassVar[ControllerState] = ControllerState.UNCLEAN_LEADER_ELECTION_ENABLE

    enabled: bool


class TopicUncleanLeaderElectionEnable(ControllerEvent, frozen=True, kw_only=True):
    """The topic's ``unclean.leader.election.enable`` became true
    (``processTopicUncleanLeaderElectionEnable``)."""

    state: ClassVar[ControllerState] = ControllerState.TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE

    topic: TopicName


class ControlledShutdown(ControllerEvent, frozen=True, kw_only=True):
    """A broker asks to stop cleanly (``processControlledShutdown``): move its leaderships
    away. ``reply`` gets the answer; preempted, it gets STALE_CONTROLLER_EPOCH (Kafka's
    ControllerMovedException)."""

    state: ClassVar[ControllerState] = ControllerState.CONTROLLED_SHUTDOWN

    broker_id: BrokerId
    broker_epoch: BrokerEpoch
    reply: Callable[[ControlledShutdownResponse], None]

    def preempt(self) -> None:
        self.reply(ControlledShutdownResponse(error_code=ErrorCode.STALE_CONTROLLER_EPOCH))


class AlterIsrReceived(ControllerEvent, frozen=True, kw_only=True):
    """A partition leader asks for ISR changes (``processAlterIsr``, see
    ``actors.controller.alter_isr``). ``reply`` gets the answer; preempted, it gets
    NOT_CONTROLLER and the leader sends again."""

    state: ClassVar[ControllerState] = ControllerState.ISR_CHANGE

    broker_id: BrokerId
    broker_epoch: BrokerEpoch
    partitions: tuple[AlterIsrPartition, ...]
    reply: Callable[[AlterIsrResponse], None]

    def preempt(self) -> None:
        self.reply(AlterIsrResponse(error_code=ErrorCode.NOT_CONTROLLER))


ControllerEventUnion = (
    Startup
    | ControllerChange
    | Reelect
    | RegisterBrokerAndReelect
    | Expire
    | BrokerChange
    | BrokerModifications
    | TopicChange
    | PartitionModifications
    | LeaderAndIsrResponseReceived
    | UpdateMetadataResponseReceived
    | TopicDeletion
    | TopicDeletionStopReplicaResponseReceived
    | LogDirEventNotification
    | ZkPartitionReassignment
    | ListPartitionReassignments
    | ApiPartitionReassignment
    | ReplicaLeaderElection
    | AutoPreferredReplicaLeaderElection
    | UncleanLeaderElectionEnable
    | TopicUncleanLeaderElectionEnable
    | ControlledShutdown
    | AlterIsrReceived
)
"""Every event the controller processes."""
