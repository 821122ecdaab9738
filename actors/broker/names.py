"""Where a broker's actors live: node and actor names, and references to them."""

from __future__ import annotations

from protocol.base import ActorRef

BROKER_ACTOR = "broker"
CONTROLLER_ACTOR = "controller"
LOG_MANAGER_ACTOR = "log_manager"
INTERNAL_LISTENER = "KEMU"
"""The listener name under which a broker of ``kemu broker run`` registers the address of
its node (kemu's inter-broker transport, not a Kafka listener) in ``/brokers/ids/<id>``,
after its Kafka listener: as Kafka's ``inter.broker.listener.name`` names the listener
the other brokers use. Clients are only ever told the first (Kafka) listener."""


def broker_node_id(broker_id: int) -> str:
    return f"broker-{broker_id}"


def broker_id_of(node_id: str) -> int | None:
    """The broker id of node ``broker-<id>``; None for any other node."""
    prefix, _, number = node_id.rpartition("-")
    return int(number) if prefix == "broker" and number.isdigit() else None


def broker_ref(broker_id: int) -> ActorRef:
    return ActorRef(broker_node_id(broker_id), BROKER_ACTOR)
