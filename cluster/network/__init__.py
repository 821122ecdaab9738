"""The network every inter-node message crosses: fault rules and two transports.

Start it in its owner's task group, ``await tg.start(network.run)``, attach nodes with
``await network.attach(node_id, deliver)`` and post through the returned ``Endpoint``;
cancel the owner's scope to stop it.
"""

from __future__ import annotations

from cluster.network.faults import (
    ANY,
    UNHARMED,
    Delay,
    Drop,
    Duplicate,
    Fate,
    Match,
    Partition,
    Reorder,
    Rule,
    decide,
)
from cluster.network.inproc import InProcessTransport
from cluster.network.network import Deliver, Endpoint, Network
from cluster.network.tcp import Resolver, TcpTransport
from cluster.network.transport import DropReason, Transport, TransportEvents

__all__ = [
    "ANY",
    "UNHARMED",
    "Delay",
    "Deliver",
    "Drop",
    "DropReason",
    "Duplicate",
    "Endpoint",
    "Fate",
    "InProcessTransport",
    "Match",
    "Network",
    "Partition",
    "Reorder",
    "Resolver",
    "Rule",
    "TcpTransport",
    "Transport",
    "TransportEvents",
    "decide",
]
