"""The controller's events (spec §2.3): a closed union, dispatched in one ``match``.

Store watches, request callbacks and timers only enqueue these; the controller's state
changes only while one of them is processed. Each event names the ``ControllerState`` it
runs under (for the state gauge and the time-per-state metric) and what happens to it when
it is drained from the queue unprocessed (``preempt``: nothing for these; API-style events
of later issues answer their caller NOT_CONTROLLER there).

Adding an event: define it here, add it to ``ControllerEventUnion``, and give it a case
in ``KafkaController.process`` (mypy's ``assert_never`` check fails until it has one).
Topic deletion, controlled shutdown, leader elections and reassignment (TopicDeletion,
TopicDeletionStopReplicaResponseReceived, ControlledShutdown, ReplicaLeaderElection,
ZkPartitionReassignment, AutoPreferredReplicaLeaderElection) slot in that way.
"""

from __future__ import annotations

from typing import ClassVar

import msgspec

from actors.controller.states import ControllerState
from protocol.control import LeaderAndIsrResponse, TopicPartition, UpdateMetadataResponse
from protocol.errors import ErrorCode
from protocol.ids import BrokerId, TopicName


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
    """The children of ``/brokers/ids`` changed: brokers came, went or bounced (§8.1)."""

    state: ClassVar[ControllerState] = ControllerState.BROKER_CHANGE


class BrokerModifications(ControllerEvent, frozen=True, kw_only=True):
    """``/brokers/ids/<id>`` changed: new endpoints or features to announce."""

    state: ClassVar[ControllerState] = ControllerState.BROKER_CHANGE

    broker_id: BrokerId


class TopicChange(ControllerEvent, frozen=True, kw_only=True):
    """The children of ``/brokers/topics`` changed: topics created or removed (§4.3)."""

    state: ClassVar[ControllerState] = ControllerState.TOPIC_CHANGE


class PartitionModifications(ControllerEvent, frozen=True, kw_only=True):
    """``/brokers/topics/<t>`` changed: maybe partitions were added (§5.2)."""

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
    """The children of ``/admin/delete_topics`` changed: topics marked for deletion (§6.2)."""

    state: ClassVar[ControllerState] = ControllerState.TOPIC_DELETION


class TopicDeletionStopReplicaResponseReceived(ControllerEvent, frozen=True, kw_only=True):
    """A broker answered a StopReplica(delete=true) for partitions of topics whose deletion
    started (§6.5): ``partition_errors`` holds only those partitions."""

    state: ClassVar[ControllerState] = ControllerState.TOPIC_DELETION

    broker_id: BrokerId
    error_code: ErrorCode
    partition_errors: tuple[tuple[TopicPartition, ErrorCode], ...]


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
)
"""Every event the controller processes."""
