"""The trace schema: one JSON object per line, documented in docs/trace-schema.md."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import msgspec

from protocol.errors import KemuError

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


class TraceSchemaError(KemuError):
    """An input is not a kemu trace this version reads (missing, unreadable, another
    ``trace_schema``)."""


def decode_header(raw: bytes, source: str) -> TraceHeader:
    """A trace's header from its encoded form (line 1 of a JSONL trace, or the
    ``kemu_trace_header`` metadata of its Parquet export), checked against the schema
    version this kemu reads; ``TraceSchemaError`` naming ``source`` otherwise."""
    try:
        first = msgspec.json.decode(raw)
        header = msgspec.convert(first, TraceHeader)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as exc:
        raise TraceSchemaError(f"{source}: not a kemu trace ({exc})") from None
    if not isinstance(first, dict) or "trace_schema" not in first:
        raise TraceSchemaError(f"{source}: not a kemu trace (no header with trace_schema)")
    if header.trace_schema != TRACE_SCHEMA_VERSION:
        raise TraceSchemaError(
            f"{source}: trace_schema {header.trace_schema}, this kemu reads {TRACE_SCHEMA_VERSION}"
        )
    return header
