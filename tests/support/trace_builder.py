"""Hand-made traces for the invariant checkers: ``Trace`` numbers and times events one at a
time, with shorthands for the events the checkers read (elections, control requests and
responses, state transitions, deletion marks, faults)."""

from __future__ import annotations

import json
from typing import Any

from protocol.trace import TraceEvent


def spark_rows(events: list[TraceEvent], *, run: str, end: float) -> list[tuple[Any, ...]]:
    """``events`` as the rows of one run-wide group that ``spark.checks.check_sorted``
    reads (``GROUPED_COLUMNS``), the run ending at ``end``."""
    return [
        (
            run,
            "run",
            e.seq,
            e.ts,
            e.node,
            e.actor,
            e.kind,
            e.type,
            e.corr,
            json.dumps(e.fields),
            end,
        )
        for e in events
    ]


class Trace:
    """Builds a trace one event at a time, numbering and timing the events."""

    def __init__(self) -> None:
        self.events: list[TraceEvent] = []
        self.ts = 0.0

    def at(self, ts: float) -> Trace:
        self.ts = ts
        return self

    def add(
        self,
        kind: str,
        type_: str,
        *,
        node: str = "broker-0",
        actor: str = "",
        corr: int | None = None,
        **fields: Any,
    ) -> TraceEvent:
        event = TraceEvent(
            seq=len(self.events) + 1,
            ts=self.ts,
            node=node,
            actor=actor,
            kind=kind,
            type=type_,
            corr=corr,
            fields=fields,
        )
        self.events.append(event)
        return event

    def elected(self, node: str, epoch: int) -> TraceEvent:
        return self.add("event", "controller_elected", node=node, epoch=epoch)

    def request(
        self,
        src: str,
        dst: str,
        corr: int,
        epoch: int,
        *,
        request: str = "LeaderAndIsrRequest",
        states: list[list[Any]] | None = None,
    ) -> TraceEvent:
        return self.add(
            "event",
            "control_request",
            node="chaos",
            actor="network_tap",
            corr=corr,
            request=request,
            src=f"{src}/controller",
            dst=f"{dst}/broker",
            controller_epoch=epoch,
            states=states or [],
        )

    def response(self, src: str, dst: str, corr: int, error: str = "NONE") -> TraceEvent:
        return self.add(
            "event",
            "control_response",
            node="chaos",
            actor="network_tap",
            corr=corr,
            request="LeaderAndIsrRequest",
            src=f"{src}/broker",
            dst=f"{dst}/controller",
            error=error,
        )

    def transition(
        self,
        machine: str,
        from_state: str,
        to_state: str,
        *,
        replica: int | None = None,
        leader_epoch: int | None = None,
    ) -> TraceEvent:
        return self.add(
            "transition",
            machine,
            topic="t",
            partition=0,
            replica=replica,
            from_state=from_state,
            to_state=to_state,
            leader=0,
            leader_epoch=leader_epoch,
            controller_epoch=1,
        )

    def marked(self, topic: str) -> TraceEvent:
        return self.add(
            "store",
            "create",
            node="store",
            path=f"/admin/delete_topics/{topic}",
            result="ok",
            session=1,
        )

    def fault(self, what: str, fault_id: str, *, instant: bool = False) -> TraceEvent:
        fields: dict[str, Any] = {"id": fault_id, "fault": "crash_broker"}
        if what == "fault_injected":
            fields["instant"] = instant
        return self.add("fault", what, node="chaos", actor="runner", **fields)
