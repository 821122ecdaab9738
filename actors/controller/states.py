"""The controller's state tables (Kafka's ``ControllerState``, ``PartitionState`` and
``ReplicaState`` with their ``validPreviousStates``), as data.

Each target state declares its valid previous states; ``partition_transition_valid`` and
``replica_transition_valid`` are the only checks, and the state machines call them before
any side effect. The numeric codes are Kafka's; ``label`` is the name Kafka logs.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from typing import Final


class ControllerState(IntEnum):
    """What the controller is doing (Kafka's ``ControllerState``), as a gauge and per event."""

    IDLE = 0
    CONTROLLER_CHANGE = 1
    BROKER_CHANGE = 2
    TOPIC_CHANGE = 3
    TOPIC_DELETION = 4
    ALTER_PARTITION_REASSIGNMENT = 5
    AUTO_LEADER_BALANCE = 6
    MANUAL_LEADER_BALANCE = 7
    CONTROLLED_SHUTDOWN = 8
    ISR_CHANGE = 9
    LEADER_AND_ISR_RESPONSE_RECEIVED = 10
    LOG_DIR_CHANGE = 11
    CONTROLLER_SHUTDOWN = 12
    UNCLEAN_LEADER_ELECTION_ENABLE = 13
    TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE = 14
    LIST_PARTITION_REASSIGNMENT = 15
    UPDATE_METADATA_RESPONSE_RECEIVED = 16
    UPDATE_FEATURES = 17

    @property
    def label(self) -> str:
        return "".join(word.capitalize() for word in self.name.split("_"))

    @property
    def rate_and_time_metric_name(self) -> str | None:
        """The name of its ``ControllerStats`` timer (Kafka's ``rateAndTimeMetricName``):
        ``<label>RateAndTimeMs``, with two renamed and none for Idle and
        UpdateMetadataResponseReceived."""
        if self in (ControllerState.IDLE, ControllerState.UPDATE_METADATA_RESPONSE_RECEIVED):
            return None
        renamed = {
            ControllerState.BROKER_CHANGE: "LeaderElectionRateAndTimeMs",
            ControllerState.ALTER_PARTITION_REASSIGNMENT: "PartitionReassignmentRateAndTimeMs",
        }
        return renamed.get(self, f"{self.label}RateAndTimeMs")


class PartitionState(IntEnum):
    """A partition's state in the controller (Kafka's ``PartitionState``)."""

    NEW = 0
    ONLINE = 1
    OFFLINE = 2
    NON_EXISTENT = 3

    @property
    def label(self) -> str:
        return _PARTITION_LABELS[self]


class ReplicaState(IntEnum):
    """A replica's state in the controller (Kafka's ``ReplicaState``)."""

    NEW = 1
    ONLINE = 2
    OFFLINE = 3
    DELETION_STARTED = 4
    DELETION_SUCCESSFUL = 5
    DELETION_INELIGIBLE = 6
    NON_EXISTENT = 7

    @property
    def label(self) -> str:
        return _REPLICA_LABELS[self]


_PARTITION_LABELS: Final = {
    PartitionState.NEW: "NewPartition",
    PartitionState.ONLINE: "OnlinePartition",
    PartitionState.OFFLINE: "OfflinePartition",
    PartitionState.NON_EXISTENT: "NonExistentPartition",
}

_REPLICA_LABELS: Final = {
    ReplicaState.NEW: "NewReplica",
    ReplicaState.ONLINE: "OnlineReplica",
    ReplicaState.OFFLINE: "OfflineReplica",
    ReplicaState.DELETION_STARTED: "ReplicaDeletionStarted",
    ReplicaState.DELETION_SUCCESSFUL: "ReplicaDeletionSuccessful",
    ReplicaState.DELETION_INELIGIBLE: "ReplicaDeletionIneligible",
    ReplicaState.NON_EXISTENT: "NonExistentReplica",
}

_P = PartitionState
_R = ReplicaState

PARTITION_VALID_PREVIOUS: Final[Mapping[PartitionState, frozenset[PartitionState]]] = {
    _P.NEW: frozenset({_P.NON_EXISTENT}),
    _P.ONLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
    _P.OFFLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
    _P.NON_EXISTENT: frozenset({_P.OFFLINE}),
}
"""Target partition state -> the states a partition may be in before it (Kafka's
``PartitionState.validPreviousStates``)."""

REPLICA_VALID_PREVIOUS: Final[Mapping[ReplicaState, frozenset[ReplicaState]]] = {
    _R.NEW: frozenset({_R.NON_EXISTENT}),
    _R.ONLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
    _R.OFFLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
    _R.DELETION_STARTED: frozenset({_R.OFFLINE}),
    _R.DELETION_SUCCESSFUL: frozenset({_R.DELETION_STARTED}),
    _R.DELETION_INELIGIBLE: frozenset({_R.OFFLINE, _R.DELETION_STARTED}),
    _R.NON_EXISTENT: frozenset({_R.DELETION_SUCCESSFUL}),
}
"""Target replica state -> the states a replica may be in before it (Kafka's
``ReplicaState.validPreviousStates``)."""


def partition_transition_valid(current: PartitionState, target: PartitionState) -> bool:
    return current in PARTITION_VALID_PREVIOUS[target]


def replica_transition_valid(current: ReplicaState, target: ReplicaState) -> bool:
    return current in REPLICA_VALID_PREVIOUS[target]
