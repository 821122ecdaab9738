"""Pipelined batches of requests (see docs/zookeeper-adapter.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

_PIPELINE_WINDOW = 256  # pipelined multi-ops in flight on one connection (patch 10)


@dataclass(frozen=True, slots=True)
class _Pipeline:
    """What a pipelined batch is made of (patch 10): how each item is traced (``op``, its
    ``path`` and extra ``fields``), becomes a request, and turns its reply into its
    outcome, and how it is run alone while the session is not connected."""

    op: str
    path: Callable[[Any], str]
    fields: Callable[[Any], dict[str, Any]]
    request: Callable[[Any], Any]
    finish: Callable[[Any, Any], Any]
    lone: Callable[[Any], Awaitable[Any]]


class _Pipelined:
    """One request of a pipelined batch: its item, then its reply's future and connection
    once sent, then its outcome."""

    __slots__ = ("conn", "future", "item", "outcome", "path")

    def __init__(self, item: Any, path: str) -> None:
        self.item = item
        self.path = path  # where it is traced (a multi: its first op's, the epoch check)
        self.outcome: Any = None
        self.future: asyncio.Future[Any] | None = None
        self.conn: Any = None
