"""The seam between the ``Network`` and the way bytes (or objects) move between nodes.

The network decides *whether* and *when* a message goes (fault rules, delays, reordering)
and owns the table of attached nodes; a transport only carries envelopes between networks
and hands what arrives back through ``TransportEvents``. Anything a transport loses on the
way (unknown or unreachable destination, a broken connection) it reports through
``dropped`` so that the trace still accounts for every message sent.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from anyio.abc import TaskStatus

from actors.runtime.clock import Clock
from protocol.envelope import Envelope
from protocol.trace import TraceKind


class DropReason(StrEnum):
    """The ``reason`` field of a traced drop."""

    UNKNOWN_DESTINATION = "unknown_destination"  # no node of that id is attached or known
    PARTITION = "partition"  # a partition separates source and destination
    DROP_RULE = "drop_rule"  # a Drop fault rule (field ``rule`` holds its id)
    UNREACHABLE = "unreachable"  # the destination's address could not be connected to
    CONNECTION_LOST = "connection_lost"  # the connection broke with the message on it
    FRAME_TOO_LARGE = "frame_too_large"  # the encoded message is over the frame limit
    SEND_BUFFER_FULL = "send_buffer_full"  # too many bytes queued for one destination
    SOURCE_DETACHED = "source_detached"  # posted through an endpoint already closed
    NETWORK_STOPPED = "network_stopped"  # posted, delayed or queued when the network stopped


class Report(Protocol):
    """Trace something the transport noticed (kind ``error`` or ``event``)."""

    def __call__(self, kind: TraceKind, what: str, *, node: str, **fields: Any) -> None: ...


@dataclass(frozen=True, slots=True)
class TransportEvents:
    """How a transport talks back to its network. All three are synchronous and never
    block; ``arrived`` delivers (or drops) an envelope that reached this side."""

    arrived: Callable[[Envelope], None]
    dropped: Callable[[Envelope, DropReason, str], None]
    report: Report


class Transport(ABC):
    """Carries envelopes between nodes. One instance serves one ``Network``."""

    @abstractmethod
    async def run(
        self, events: TransportEvents, clock: Clock, *, task_status: TaskStatus[None]
    ) -> None:
        """Serve until cancelled; background work lives in a task group owned here.
        Started by the network with ``await tg.start(transport.run, events, clock)``."""

    @abstractmethod
    async def listen(self, node_id: str) -> None:
        """Make a node of this process reachable. Raises ``NetworkError`` if it cannot."""

    @abstractmethod
    def unlisten(self, node_id: str) -> None:
        """Stop reaching a node of this process. Synchronous, so that a node can detach from
        a ``finally`` while it is being cancelled; closing sockets may finish a moment later
        (listening again for the same node waits for that)."""

    @abstractmethod
    def send(self, envelope: Envelope) -> None:
        """Carry an envelope towards ``envelope.dst.node``. Never blocks, never raises for
        a delivery failure: those are reported through ``TransportEvents.dropped``."""
