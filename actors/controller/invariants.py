"""Reusable invariant checkers for partition leadership and controller elections (spec
Appendix A): pure functions over values, so unit tests, chaos runs and trace analysis share
them. Each returns the violations it found, as one line each (empty when all hold)."""

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


def leader_epoch_regressions(transitions: Iterable[Mapping[str, Any]]) -> list[str]:
    """Over partition transition trace fields (``topic``, ``partition``, ``to_state``,
    ``leader_epoch``, ``controller_epoch``), in trace order: a partition's leader epoch
    never goes down, except after it went NonExistent (the topic was re-created)."""
    last: dict[tuple[str, int], int] = {}
    problems: list[str] = []
    for t in transitions:
        key = (str(t["topic"]), int(t["partition"]))
        if t.get("to_state") == "NonExistentPartition":
            last.pop(key, None)
            continue
        epoch = t.get("leader_epoch")
        if epoch is None:
            continue
        previous = last.get(key)
        if previous is not None and epoch < previous:
            problems.append(f"{key[0]}-{key[1]}: leader epoch went from {previous} to {epoch}")
        last[key] = max(epoch, previous if previous is not None else epoch)
    return problems


def controller_election_violations(elections: Iterable[tuple[str, int]]) -> list[str]:
    """Over ``(node, epoch)`` of every successful election, in order: one controller per
    epoch, and epochs strictly increase."""
    problems: list[str] = []
    seen: dict[int, str] = {}
    highest = 0
    for node, epoch in elections:
        if epoch in seen:
            problems.append(f"epoch {epoch} elected twice: {seen[epoch]} and {node}")
        elif epoch <= highest:
            problems.append(f"epoch {epoch} elected on {node} after epoch {highest}")
        seen.setdefault(epoch, node)
        highest = max(highest, epoch)
    return problems
