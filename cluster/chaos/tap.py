"""The network tap of a chaos run: the payload fields of controller requests and answers.

``ControlTap`` records every LeaderAndIsr, UpdateMetadata and StopReplica request posted,
and its answer, as ``control_request`` / ``control_response`` events (docs/chaos.md,
"Chaos trace events") under node ``chaos``, actor ``network_tap``: what the trace rules
on controller epochs, ISRs and stale requests read.

In one process (``Network.add_observer(tap.observe)``) it sees both the request and the
answer posted. With one process per broker, each broker process runs its own tap: the
controller's process sees the requests it posts; the receiving broker's process sees the
answer it posts, and learns which request that answer is for from the envelopes
delivered to its node (``tap.attach`` wraps the node's attach function).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from actors.invariants import CHAOS_NODE
from actors.runtime.actor import Attach, Postman
from actors.runtime.tracer import Tracer
from protocol.base import ErrorReply
from protocol.control import (
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from protocol.envelope import Envelope, EnvelopeKind
from protocol.errors import ErrorCode
from protocol.trace import TraceKind

__all__ = ["OBSERVER_ACTOR", "ControlTap"]

OBSERVER_ACTOR: Final = "network_tap"

_REQUESTS: Final = (LeaderAndIsrRequest, UpdateMetadataRequest, StopReplicaRequest)
_RESPONSES: Final = (LeaderAndIsrResponse, UpdateMetadataResponse, StopReplicaResponse)


class ControlTap:
    """See the module doc. ``observe`` is a network observer (envelopes posted);
    ``attach`` wraps a node's attach function to see the envelopes delivered to it."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer
        self._pending: dict[tuple[str, int], str] = {}  # (requester node, corr) -> request

    def observe(self, envelope: Envelope) -> None:
        """Record a control request posted, or the answer to one."""
        payload = envelope.payload
        if isinstance(payload, _REQUESTS):
            self._remember(envelope)
            self._emit("control_request", **_request_fields(envelope, payload))
            return
        if envelope.kind is not EnvelopeKind.REPLY:
            return
        request = self._pending.pop((envelope.dst.node, envelope.corr), None)
        if request is None:
            return
        if isinstance(payload, _RESPONSES):
            error = ErrorCode(payload.error_code).name
        elif isinstance(payload, ErrorReply):
            error = _code_name(payload.code)
        else:
            error = f"unexpected {type(payload).__name__}"
        self._emit(
            "control_response",
            request=request,
            src=str(envelope.src),
            dst=str(envelope.dst),
            corr=envelope.corr,
            error=error,
        )

    def delivered(self, envelope: Envelope) -> None:
        """An envelope reached a node of this process: remember a control request, so
        that the answer posted later is recorded."""
        if isinstance(envelope.payload, _REQUESTS):
            self._remember(envelope)

    def attach(self, attach: Attach) -> Attach:
        """``attach``, with every envelope delivered to the node shown to ``delivered``."""
        tap = self

        class _Tapped:
            async def __call__(self, node_id: str, deliver: Callable[[Envelope], None]) -> Postman:
                def tapped(envelope: Envelope) -> None:
                    tap.delivered(envelope)
                    deliver(envelope)

                return await attach(node_id, tapped)

        return _Tapped()

    def _remember(self, envelope: Envelope) -> None:
        self._pending[(envelope.src.node, envelope.corr)] = type(envelope.payload).__name__

    def _emit(self, type_: str, **fields: Any) -> None:
        self.tracer.emit(
            TraceKind.EVENT, node=CHAOS_NODE, actor=OBSERVER_ACTOR, type=type_, **fields
        )


def _request_fields(
    envelope: Envelope, payload: LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest
) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "request": type(payload).__name__,
        "src": str(envelope.src),
        "dst": str(envelope.dst),
        "corr": envelope.corr,
        "controller_id": payload.controller_id,
        "controller_epoch": payload.controller_epoch,
        "broker_epoch": payload.broker_epoch,
    }
    if isinstance(payload, StopReplicaRequest):
        fields["delete_partition"] = any(p.delete_partition for p in payload.partitions)
        fields["stops"] = [
            [p.topic, p.partition, p.leader_epoch, p.delete_partition] for p in payload.partitions
        ]
    else:
        fields["states"] = [
            [s.topic, s.partition, s.leader, s.leader_epoch, list(s.isr), list(s.replicas)]
            for s in payload.partition_states
        ]
    return fields


def _code_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
