"""The invariants over the end of a run (docs/chaos.md, "Invariants"): the store, the
brokers' metadata caches and their log directories once the cluster settled with every fault
healed (``FinalState``), and ``acknowledged_creations``, which also reads the trace. Each
rule is a pure function returning the ``Violation``s it found; nothing here does I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Final

import msgspec

from actors.invariants.base import CHAOS_NODE, Violation, violation_at
from actors.invariants.leadership import leadership_violations
from actors.invariants.trace_rules import DELETE_MARKER
from protocol.trace import TraceEvent

__all__ = [
    "FINAL_RULES",
    "CacheView",
    "FinalState",
    "PartitionView",
    "StoreView",
    "acknowledged_creations",
    "caches_converge",
    "check_final",
    "no_orphan_log_dirs",
    "no_orphan_znodes",
    "pending_deletions",
    "store_leadership",
]


class PartitionView(msgspec.Struct, frozen=True, kw_only=True):
    """One partition as the store or a metadata cache has it."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]


class StoreView(msgspec.Struct, frozen=True, kw_only=True):
    """What the store holds at the end: the controller, the registered brokers, each
    topic's assignment (``/brokers/topics/<t>``), the partitions listed under it and
    their states (replicas taken from the assignment), the topic configs and the
    deletion markers."""

    controller: int | None
    brokers: tuple[int, ...]
    topics: dict[str, dict[int, tuple[int, ...]]]
    partition_nodes: dict[str, tuple[int, ...]]
    states: dict[str, dict[int, PartitionView]]
    configs: tuple[str, ...]
    deletions: tuple[str, ...]


class CacheView(msgspec.Struct, frozen=True, kw_only=True):
    """One broker's metadata cache, as its Metadata answer shows it."""

    controller: int
    brokers: tuple[int, ...]
    topics: dict[str, dict[int, PartitionView]]


class FinalState(msgspec.Struct, frozen=True, kw_only=True):
    """The end of a run: the store, each running broker's cache (None: it did not
    answer) and log-directory entries (directory names only)."""

    store: StoreView
    running: tuple[int, ...]
    caches: dict[int, CacheView | None]
    log_dirs: dict[int, tuple[str, ...]]


def no_orphan_znodes(final: FinalState) -> list[Violation]:
    """Every partition under ``/brokers/topics/<t>/partitions`` is in the topic's
    assignment and every assigned partition has its state znode; every topic config
    belongs to a topic."""
    rule = "no_orphan_znodes"
    store = final.store
    out: list[Violation] = []
    for topic in sorted(store.partition_nodes):
        assignment = store.topics.get(topic)
        for partition in store.partition_nodes[topic]:
            if assignment is None or partition not in assignment:
                out.append(
                    violation_at(rule, f"partition znode {topic}-{partition} is orphaned", None)
                )
    for topic, assignment in sorted(store.topics.items()):
        states = store.states.get(topic, {})
        for partition in sorted(assignment):
            if partition not in states:
                out.append(violation_at(rule, f"{topic}-{partition} has no state znode", None))
    for topic in store.configs:
        if topic not in store.topics:
            out.append(violation_at(rule, f"/config/topics/{topic} belongs to no topic", None))
    return out


def pending_deletions(final: FinalState) -> list[Violation]:
    """Once the cluster settled with every fault healed, no deletion is still pending."""
    return [
        violation_at("deletions_complete", f"deletion of {topic} is still pending at the end", None)
        for topic in final.store.deletions
    ]


def store_leadership(final: FinalState) -> list[Violation]:
    """leader ∈ ISR ⊆ replicas for every partition state in the store at the end."""
    out: list[Violation] = []
    for topic, states in sorted(final.store.states.items()):
        for partition, view in sorted(states.items()):
            out.extend(
                violation_at("leader_in_isr", p, None)
                for p in leadership_violations(
                    f"{topic}-{partition} in the store", view.replicas, view.leader, view.isr
                )
            )
    return out


_LOG_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
_DELETED_LOG_DIR = re.compile(r"^.+-\d+\.[0-9a-f]{32}-delete$")


def no_orphan_log_dirs(final: FinalState) -> list[Violation]:
    """On every running broker, at the end: no ``-delete`` directory is left, every log
    directory belongs to a partition the store assigns to that broker, and every replica
    the store assigns to it has its log directory."""
    rule = "no_orphan_log_dirs"
    out: list[Violation] = []
    topics = final.store.topics
    for broker in final.running:
        entries = final.log_dirs.get(broker, ())
        hosted: set[tuple[str, int]] = set()
        for name in entries:
            if _DELETED_LOG_DIR.match(name):
                out.append(violation_at(rule, f"broker {broker}: {name} is still on disk", None))
                continue
            match = _LOG_DIR.match(name)
            if match is None:
                continue  # not a log (e.g. a -future or -stray directory)
            topic, partition = match.group("topic"), int(match.group("partition"))
            hosted.add((topic, partition))
            replicas = topics.get(topic, {}).get(partition)
            if replicas is None or broker not in replicas:
                out.append(violation_at(rule, f"broker {broker}: log {name} is orphaned", None))
        for topic, assignment in sorted(topics.items()):
            for partition, replicas in sorted(assignment.items()):
                if broker in replicas and (topic, partition) not in hosted:
                    out.append(
                        violation_at(
                            rule,
                            f"broker {broker}: no log for replica {topic}-{partition}",
                            None,
                        )
                    )
    return out


def caches_converge(final: FinalState) -> list[Violation]:
    """Every running broker's metadata cache equals the store: the controller, the
    registered brokers, the topics, and each partition's leader, leader epoch, ISR and
    replicas."""
    rule = "caches_converge"
    store = final.store
    out: list[Violation] = []
    expected: dict[str, dict[int, PartitionView]] = {
        topic: store.states.get(topic, {}) for topic in store.topics
    }
    for broker in final.running:
        cache = final.caches.get(broker)
        who = f"broker {broker}'s cache"
        if cache is None:
            out.append(violation_at(rule, f"{who} could not be read", None))
            continue
        if store.controller is not None and cache.controller != store.controller:
            out.append(
                violation_at(
                    rule, f"{who} names controller {cache.controller}, not {store.controller}", None
                )
            )
        if sorted(cache.brokers) != sorted(store.brokers):
            out.append(
                violation_at(
                    rule,
                    f"{who} has brokers {sorted(cache.brokers)}, the store {sorted(store.brokers)}",
                    None,
                )
            )
        for topic in sorted(set(cache.topics) | set(expected)):
            mine, theirs = cache.topics.get(topic), expected.get(topic)
            if mine is None or theirs is None:
                where = "not in the store" if theirs is None else "missing"
                out.append(violation_at(rule, f"{who}: topic {topic} {where}", None))
                continue
            for partition in sorted(set(mine) | set(theirs)):
                a, b = mine.get(partition), theirs.get(partition)
                if a != b:
                    out.append(
                        violation_at(
                            rule, f"{who}: {topic}-{partition} is {a}, the store says {b}", None
                        )
                    )
    return out


def acknowledged_creations(events: Iterable[TraceEvent], final: FinalState) -> list[Violation]:
    """A creation acknowledged to its client (``admin_result`` without error) yields a
    topic that exists at the end, unless the topic was marked for deletion after the
    acknowledgement."""
    rule = "acknowledged_creations"
    acked: dict[str, TraceEvent] = {}
    for event in events:
        if (
            event.node == CHAOS_NODE
            and event.type == "admin_result"
            and event.fields.get("op") == "create_topic"
            and event.fields.get("error") == "NONE"
        ):
            acked[str(event.fields["topic"])] = event
        elif event.kind == "store" and event.type == "create" and event.fields["result"] == "ok":
            match = DELETE_MARKER.match(str(event.fields["path"]))
            if match:
                acked.pop(match.group(1), None)
    return [
        violation_at(
            rule, f"topic {topic}, acknowledged at t={event.ts:.3f}s, does not exist", event
        )
        for topic, event in sorted(acked.items())
        if topic not in final.store.topics
    ]


FINAL_RULES: Final[Mapping[str, Callable[[FinalState], list[Violation]]]] = {
    "no_orphan_znodes": no_orphan_znodes,
    "no_orphan_log_dirs": no_orphan_log_dirs,
    "caches_converge": caches_converge,
    "leader_in_isr": store_leadership,
    "deletions_complete": pending_deletions,
}
"""The rules over the end state alone (``acknowledged_creations`` also reads the trace)."""


def check_final(final: FinalState, events: Iterable[TraceEvent] = ()) -> list[Violation]:
    """Every end-state rule, in registry order, then ``acknowledged_creations``."""
    out: list[Violation] = []
    for check in FINAL_RULES.values():
        out.extend(check(final))
    out.extend(acknowledged_creations(events, final))
    return out
