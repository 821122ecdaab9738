"""The in-process transport: an envelope is handed straight to the destination's callback.

Nothing is copied, encoded or queued here: the delivery callback of an attached node puts
the envelope in a mailbox (or resolves a pending ask) without blocking, so a send is one
synchronous call chain and per-link order is the order of ``send`` calls. Delays and
reordering, when a fault rule asks for them, are the network's business, on its clock;
that is what keeps a simulation on the virtual clock deterministic.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
from anyio.abc import TaskStatus

from actors.runtime.clock import Clock
from cluster.network.transport import Transport, TransportEvents
from protocol.envelope import Envelope
from protocol.errors import NetworkError


class InProcessTransport(Transport):
    """Direct delivery between nodes of one process (the network keeps the node table)."""

    def __init__(self) -> None:
        self._events: TransportEvents | None = None
        self._arrived: Callable[[Envelope], None] = _not_running

    async def run(
        self,
        events: TransportEvents,
        clock: Clock,
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        if self._events is not None:
            raise NetworkError("this transport already serves a network")
        self._events = events
        self._arrived = events.arrived
        try:
            task_status.started()
            await anyio.sleep_forever()
        finally:
            self._events = None
            self._arrived = _not_running

    async def listen(self, node_id: str) -> None:
        """Nothing to open: the network's node table is the address book."""

    def unlisten(self, node_id: str) -> None:
        """Nothing to close."""

    def send(self, envelope: Envelope) -> None:
        self._arrived(envelope)


def _not_running(envelope: Envelope) -> None:
    raise NetworkError("the in-process transport is not running")
