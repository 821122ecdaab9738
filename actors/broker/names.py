"""Where a broker's actors live: node and actor names, and references to them."""

from __future__ import annotations

from protocol.base import ActorRef

BROKER_ACTOR = "broker"
CONTROLLER_ACTOR = "controller"
LOG_MANAGER_ACTOR = "log_manager"


def broker_node_id(broker_id: int) -> str:
    return f"broker-{broker_id}"


def broker_ref(broker_id: int) -> ActorRef:
    return ActorRef(broker_node_id(broker_id), BROKER_ACTOR)
