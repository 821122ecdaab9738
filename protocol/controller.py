"""Messages about the controller itself, between a broker's actors.

Other actors never read the controller's state: they ask it. ``ControllerStatusRequest``
answers whether this broker's controller is the active one, whom it believes the active
controller is, and its epoch (Kafka's ``KafkaController.isActive`` / ``epoch``), e.g. for a
broker to answer NOT_CONTROLLER to an admin request.
"""

from __future__ import annotations

from protocol.base import Message
from protocol.ids import BrokerId, ControllerEpoch

__all__ = ["ControllerStatus", "ControllerStatusRequest"]


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
