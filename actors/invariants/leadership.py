"""Reusable invariant checkers for partition leadership and controller elections (leader in
ISR, ISR within replicas, one controller per epoch, epochs only grow; docs/chaos.md,
"Invariants"): pure functions over values, so unit tests, chaos runs and trace analysis
share them. Each returns the violations it found, as one line each (empty when all hold)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from protocol.control import NO_LEADER


def leadership_violations(
    name: str, replicas: Sequence[int], leader: int, isr: Sequence[int]
) -> list[str]:
    """leader in ISR (or no leader), ISR non-empty and within the replicas, no duplicates."""
    problems: list[str] = []
    if not isr:
        problems.append(f"{name}: empty ISR")
    if len(set(isr)) != len(isr):
        problems.append(f"{name}: duplicate ISR members {list(isr)}")
    outside = [r for r in isr if r not in replicas]
    if outside:
        problems.append(f"{name}: ISR members {outside} are not replicas {list(replicas)}")
    if leader != NO_LEADER and leader not in isr:
        problems.append(f"{name}: leader {leader} is not in the ISR {list(isr)}")
    return problems


class LeaderEpochTracker:
    """The last leader epoch of every partition, fed partition transition trace fields
    (``topic``, ``partition``, ``to_state``, ``leader_epoch``) one at a time, in trace
    order: a partition's leader epoch never goes down, except after it went NonExistent
    (the topic was re-created)."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, int], int] = {}

    def observe(self, transition: Mapping[str, Any]) -> str | None:
        """The regression this transition shows, if any."""
        key = (str(transition["topic"]), int(transition["partition"]))
        if transition.get("to_state") == "NonExistentPartition":
            self._last.pop(key, None)
            return None
        epoch = transition.get("leader_epoch")
        if epoch is None:
            return None
        previous = self._last.get(key)
        if previous is not None and epoch < previous:
            return f"{key[0]}-{key[1]}: leader epoch went from {previous} to {epoch}"
        self._last[key] = epoch
        return None


def leader_epoch_regressions(transitions: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every regression of ``LeaderEpochTracker`` over ``transitions``, in trace order."""
    tracker = LeaderEpochTracker()
    return [p for t in transitions if (p := tracker.observe(t)) is not None]


class ElectionTracker:
    """Every successful election so far, fed ``(node, epoch)`` one at a time, in order:
    one controller per epoch, and epochs strictly increase."""

    def __init__(self) -> None:
        self._seen: dict[int, str] = {}
        self._highest = 0

    def observe(self, node: str, epoch: int) -> str | None:
        """The violation this election shows, if any."""
        problem = None
        if epoch in self._seen:
            problem = f"epoch {epoch} elected twice: {self._seen[epoch]} and {node}"
        elif epoch <= self._highest:
            problem = f"epoch {epoch} elected on {node} after epoch {self._highest}"
        self._seen.setdefault(epoch, node)
        self._highest = max(self._highest, epoch)
        return problem


def controller_election_violations(elections: Iterable[tuple[str, int]]) -> list[str]:
    """Every violation of ``ElectionTracker`` over ``elections``, in order."""
    tracker = ElectionTracker()
    return [p for node, epoch in elections if (p := tracker.observe(node, epoch)) is not None]
