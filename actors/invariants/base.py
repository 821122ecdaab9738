"""What every invariant rule reports, and the shape of a rule over a trace."""

from __future__ import annotations

import abc
from typing import ClassVar, Final

import msgspec

from protocol.trace import TraceEvent

__all__ = ["CHAOS_NODE", "TraceRule", "Violation", "violation_at"]

CHAOS_NODE: Final = "chaos"
"""The node a chaos run records its own events under (docs/chaos.md)."""


class Violation(msgspec.Struct, frozen=True, kw_only=True):
    """One broken rule: which, what, and where in the trace (``seq``/``ts``) if known."""

    rule: str
    message: str
    seq: int | None = None
    ts: float | None = None

    def line(self) -> str:
        where = f" (event {self.seq}, t={self.ts:.3f}s)" if self.seq is not None else ""
        return f"{self.rule}: {self.message}{where}"


def violation_at(rule: str, message: str, event: TraceEvent | None) -> Violation:
    """A violation of ``rule`` that showed at ``event`` (None: in the end state)."""
    if event is None:
        return Violation(rule=rule, message=message)
    return Violation(rule=rule, message=message, seq=event.seq, ts=event.ts)


class TraceRule(abc.ABC):
    """A rule checked while the trace is being written: fed every event in sequence
    order, it answers the violations that event shows, at once. ``finish`` closes the
    trace at ``end`` (seconds) and answers what only the end can show."""

    name: ClassVar[str]

    @abc.abstractmethod
    def observe(self, event: TraceEvent) -> list[Violation]: ...

    def finish(self, end: float) -> list[Violation]:
        del end
        return []

    def notices(self) -> list[Violation]:
        """What the rule saw that breaks nothing but must be told (an allowed loss)."""
        return []
