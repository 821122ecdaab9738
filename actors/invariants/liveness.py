"""Which brokers are down, as a trace shows it: the broker lifecycle a rule needs to tell a
paused piece of work from a stuck one.

Kafka's controller treats a broker as dead from the moment its registration
(``/brokers/ids/<id>``) is gone until it registers again, and its ``TopicDeletionManager``
keeps a topic ineligible for deletion while one of its replicas is on a dead broker. A
broker may be down without any fault of the chaos run being active: it halted by itself
(its only log directory failed, ``LogManager`` shutting the broker down), or it was
stopped and not yet started. ``BrokerLiveness`` reads that from the events every node
traces, never from the scenario: the node's own ``node_started`` / ``node_stopped`` /
``node_crashed`` / ``node_paused`` / ``node_resumed``, the cluster's ``broker_halted``,
the broker's ``broker_registered`` / ``broker_reregistered``, and the store's removal of
``/brokers/ids/<id>`` (a session closed or expired).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import Enum
from typing import Final

from protocol.trace import TraceEvent

__all__ = ["BrokerLiveness", "DownReason"]

_REGISTRATION: Final = re.compile(r"^/brokers/ids/(\d+)$")
"""A broker's registration znode; group 1 is its id."""


class DownReason(Enum):
    """Why a broker counts as down; it is up again once no reason is left."""

    NOT_RUNNING = "not running"
    """Crashed, halted or stopped, until its node starts again."""
    PAUSED = "paused"
    """Frozen whole (``pause_broker``, SIGSTOP), until it is resumed."""
    UNREGISTERED = "unregistered"
    """Its registration znode is gone, until it registers again."""


_NODE_EVENTS: Final[dict[str, tuple[frozenset[DownReason], frozenset[DownReason]]]] = {
    # event type -> (reasons it adds, reasons it clears)
    "node_started": (frozenset(), frozenset({DownReason.NOT_RUNNING, DownReason.PAUSED})),
    # A crash of a paused node thaws it without a node_resumed: it is just not running.
    "node_crashed": (frozenset({DownReason.NOT_RUNNING}), frozenset({DownReason.PAUSED})),
    "node_stopped": (frozenset({DownReason.NOT_RUNNING}), frozenset({DownReason.PAUSED})),
    "broker_halted": (frozenset({DownReason.NOT_RUNNING}), frozenset({DownReason.PAUSED})),
    "node_paused": (frozenset({DownReason.PAUSED}), frozenset()),
    "node_resumed": (frozenset(), frozenset({DownReason.PAUSED})),
    "broker_registered": (frozenset(), frozenset({DownReason.UNREGISTERED})),
    "broker_reregistered": (frozenset(), frozenset({DownReason.UNREGISTERED})),
}


class BrokerLiveness:
    """The brokers that are down, kept up to date event by event (``observe``). Brokers
    are named by their node (``broker-2``); a broker the trace has said nothing about is
    up."""

    def __init__(self) -> None:
        self._reasons: dict[str, set[DownReason]] = {}

    def observe(self, event: TraceEvent) -> None:
        """Take in one event of the trace (any event; most change nothing)."""
        if event.kind == "event" and event.type is not None:
            change = _NODE_EVENTS.get(event.type)
            if change is not None:
                adds, clears = change
                self._update(event.node, adds, clears)
        elif (
            event.kind == "store"
            and event.type in ("delete", "delete_ephemeral")
            and event.fields.get("result") == "ok"
        ):
            match = _REGISTRATION.match(str(event.fields.get("path", "")))
            if match:
                self._update(f"broker-{match.group(1)}", {DownReason.UNREGISTERED}, ())

    def _update(self, node: str, adds: Iterable[DownReason], clears: Iterable[DownReason]) -> None:
        reasons = self._reasons.setdefault(node, set())
        reasons.difference_update(clears)
        reasons.update(adds)
        if not reasons:
            del self._reasons[node]

    @property
    def down(self) -> dict[str, frozenset[DownReason]]:
        """Every broker that is down now, with its reasons."""
        return {node: frozenset(reasons) for node, reasons in sorted(self._reasons.items())}

    def any_down(self) -> bool:
        return bool(self._reasons)
