"""The controller's own failures (the actors layer of kemu's exception tree)."""

from __future__ import annotations

from protocol.errors import KemuError


class ControllerError(KemuError):
    """Root of the controller's exceptions."""


class IllegalControllerStateError(ControllerError):
    """Kafka's ``IllegalStateException`` in the controller: a request batch was not flushed before a
    new one started, or flushing failed. The controller resigns
    (``KafkaController.handleIllegalState``)."""


class StateChangeFailedError(ControllerError):
    """One partition's or replica's state change could not be made (logged, not fatal)."""
