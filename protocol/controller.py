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
"""

from __future__ import annotations

from protocol.base import Message
from protocol.control import (
    AlterIsrPartition,
    AlterIsrPartitionResult,
    AlterIsrResponse,
    TopicPartition,
)
from protocol.ids import BrokerId, ControllerEpoch

__all__ = [
    "AlterIsrAnswered",
    "AlterIsrFlush",
    "AlterIsrSent",
    "ClearAlterIsr",
    "ControllerStatus",
    "ControllerStatusRequest",
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
