"""Messages about the controller itself, between a broker's actors.

Other actors never read the controller's state: they ask it. ``ControllerStatusRequest``
answers whether this broker's controller is the active one, whom it believes the active
controller is, and its epoch (Kafka's ``KafkaController.isActive`` / ``epoch``), e.g. for a
broker to answer NOT_CONTROLLER to an admin request.

A partition leader's ISR changes go to the controller through the broker's
``AlterIsrManager`` actor (Kafka's ``AlterIsrManager``): the broker submits them
(``SubmitAlterIsr``), withdraws the unsent ones when a LeaderAndIsr or StopReplica
overtakes them (``ClearAlterIsr``), and gets the controller's per-partition answers back
(``AlterIsrAnswered``). ``AlterIsrFlush`` and ``AlterIsrSent`` are the manager's own timer
and send-completion messages.

An ElectLeaders request reaches the broker's own controller as ``ElectLeadersToController``
(Kafka's ``KafkaController.electLeaders``, the ``ReplicaLeaderElection`` event with a
callback); the controller answers ``ElectLeadersResults``, one ``PartitionElectionResult``
per partition asked for (NOT_CONTROLLER for each when it is not the active one).
"""

from __future__ import annotations

from enum import IntEnum

import msgspec

from protocol.base import Message
from protocol.control import (
    AlterIsrPartition,
    AlterIsrPartitionResult,
    AlterIsrResponse,
    TopicPartition,
)
from protocol.errors import ErrorCode
from protocol.ids import BrokerId, ControllerEpoch, TopicName

__all__ = [
    "AlterIsrAnswered",
    "AlterIsrFlush",
    "AlterIsrSent",
    "ClearAlterIsr",
    "ControllerQueue",
    "ControllerQueueRequest",
    "ControllerStatus",
    "ControllerStatusRequest",
    "DefaultUncleanLeaderElection",
    "ElectLeadersResults",
    "ElectLeadersToController",
    "ElectionType",
    "EnableTopicUncleanLeaderElection",
    "PartitionElectionResult",
    "SubmitAlterIsr",
]


class ControllerStatusRequest(Message, frozen=True, kw_only=True):
    """Ask a broker's controller actor for its ``ControllerStatus``."""


class ControllerStatus(Message, frozen=True, kw_only=True):
    """A controller's view: ``active`` if this broker is the active controller;
    ``controller_id`` the active controller it knows of (-1 for none); ``epoch`` its
    controller epoch while active (0 otherwise)."""

    broker_id: BrokerId
    active: bool
    controller_id: BrokerId
    epoch: ControllerEpoch


class ControllerQueueRequest(Message, frozen=True, kw_only=True):
    """Ask a broker's controller actor for its event queue as it is now (``kemu top``)."""


class ControllerQueue(Message, frozen=True, kw_only=True):
    """A controller's event queue: ``depth`` events waiting (Kafka's ``EventQueueSize``
    gauge of ``ControllerEventManager``) and ``state``, what it processes now (Kafka's
    ``ControllerState`` name, ``Idle`` between events); ``active`` and ``epoch`` as in
    ``ControllerStatus``."""

    broker_id: BrokerId
    active: bool
    epoch: ControllerEpoch
    depth: int
    state: str
    gauges: tuple[tuple[str, int], ...] = ()
    """Its gauges under Kafka's names, (name, value) pairs (``KafkaController.updateMetrics``)."""
    timers: tuple[tuple[str, int, float], ...] = ()
    """``ControllerStats``' rate-and-time timers, (name, events, total milliseconds): one
    per ``ControllerState`` that has one (``rateAndTimeMetricName``), under Kafka's name,
    for the events processed so far."""
    meters: tuple[tuple[str, int], ...] = ()
    """``ControllerStats``' meters' counts: UncleanLeaderElectionsPerSec."""


class SubmitAlterIsr(Message, frozen=True, kw_only=True):
    """Broker → its AlterIsrManager: send these ISR changes to the controller. A later item
    for a partition replaces an unsent one (the broker proposes one change at a time)."""

    items: tuple[AlterIsrPartition, ...]


class ClearAlterIsr(Message, frozen=True, kw_only=True):
    """Broker → its AlterIsrManager: forget the unsent changes of these partitions
    (``AlterIsrManager.clearPending``, on makeLeader / makeFollower / StopReplica)."""

    partitions: tuple[TopicPartition, ...]


class AlterIsrAnswered(Message, frozen=True, kw_only=True):
    """AlterIsrManager → broker: the controller's answer for each partition it sent."""

    partitions: tuple[AlterIsrPartitionResult, ...]


class AlterIsrFlush(Message, frozen=True, kw_only=True):
    """The AlterIsrManager's send timer (``send-alter-isr``, every 50 ms while changes
    wait)."""

    local_only = True


class AlterIsrSent(Message, frozen=True, kw_only=True):
    """The AlterIsrManager's send finished: the controller's answer, or None when no
    controller was known or it did not answer in time."""

    local_only = True

    response: AlterIsrResponse | None


# ------------------------------------------------------------------ ElectLeaders


class ElectionType(IntEnum):
    """Kafka's ``ElectionType`` (its byte values on the wire)."""

    PREFERRED = 0
    UNCLEAN = 1


class PartitionElectionResult(msgspec.Struct, frozen=True, kw_only=True):
    """One partition's outcome of a ``ReplicaLeaderElection``: its new leader, or why
    there is none (ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, ...)."""

    partition: TopicPartition
    error_code: ErrorCode = ErrorCode.NONE
    message: str | None = None
    leader: BrokerId | None = None


class DefaultUncleanLeaderElection(Message, frozen=True, kw_only=True):
    """The broker's ``unclean.leader.election.enable`` changed at run time (a dynamic
    broker config): its own controller reads the new default on every election from now
    on, and when it became true elects leaders for every offline partition
    (``KafkaController.enableDefaultUncleanLeaderElection``)."""

    local_only = True

    enabled: bool


class EnableTopicUncleanLeaderElection(Message, frozen=True, kw_only=True):
    """A broker's ``TopicConfigHandler`` saw the topic's ``unclean.leader.election.enable``
    become true: its own controller, if active, elects leaders for the topic's offline
    partitions (``KafkaController.enableTopicUncleanLeaderElection``)."""

    local_only = True

    topic: TopicName


class ElectLeadersToController(Message, frozen=True, kw_only=True):
    """A broker's ElectLeaders for its own controller (``KafkaController.electLeaders``)."""

    partitions: tuple[TopicPartition, ...]
    election_type: ElectionType


class ElectLeadersResults(Message, frozen=True, kw_only=True):
    """The controller's answer: one result per partition asked for."""

    results: tuple[PartitionElectionResult, ...]
