"""The trace schema: one JSON object per line, documented in docs/trace-schema.md."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import msgspec

TRACE_SCHEMA_VERSION = 1


class TraceKind(StrEnum):
    SEND = "send"  # a message handed to the network
    DELIVER = "deliver"  # a message put into the destination's mailbox
    DROP = "drop"  # a message the network dropped (fault rule, partition, unknown target)
    EVENT = "event"  # something an actor did or noticed (named by ``type``)
    TRANSITION = "transition"  # a state-machine transition: fields ``from`` and ``to``
    STORE = "store"  # a metadata-store operation and its result
    FAULT = "fault"  # a fault injected or healed
    LOG_DIR = "log_dir"  # a log-directory operation
    ERROR = "error"  # a failure that was handled (handler exception, bad frame, ...)


class TraceEvent(msgspec.Struct, frozen=True, kw_only=True):
    seq: int
    ts: float
    node: str
    actor: str
    kind: str
    type: str | None = None
    corr: int | None = None
    fields: dict[str, Any] = msgspec.field(default_factory=dict)


class TraceHeader(msgspec.Struct, frozen=True, kw_only=True):
    """The first line of every trace file."""

    trace_schema: int = TRACE_SCHEMA_VERSION
    run: str = ""
    seed: int | None = None
    clock: str = "real"
