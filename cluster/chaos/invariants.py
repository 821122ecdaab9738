"""The chaos invariants (spec Appendix A, issue 5) as small pure rules.

Each rule is one documented function over values: the trace events of a run
(``protocol.trace.TraceEvent``, in sequence order) or its end state (``FinalState``, read
from the store, the brokers' metadata caches and the log directories once the cluster
settled). It returns the ``Violation``s it found, each naming the rule, saying what is
wrong in one line and, for trace rules, the event where it showed. Nothing here does I/O
or imports the rest of ``cluster``: the rules depend on ``protocol`` and on the
leadership, epoch and election checkers of ``actors.controller.invariants``, which they
reuse, so the Spark jobs can re-express (or import, once moved below ``cluster``) the
same rules.

Trace rules read Kafka's own events (controller elections, state transitions, store
operations, controller events) and the events the chaos runner adds (docs/chaos.md):
``control_request`` / ``control_response`` (the payload fields of every LeaderAndIsr,
UpdateMetadata and StopReplica and their answers, seen on the network), ``admin_result``,
and ``fault_injected`` / ``fault_healed``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

import msgspec

from actors.controller.invariants import (
    controller_election_violations,
    leader_epoch_regressions,
    leadership_violations,
)
from actors.controller.states import (
    PARTITION_VALID_PREVIOUS,
    REPLICA_VALID_PREVIOUS,
    PartitionState,
    ReplicaState,
)
from protocol.control import LEADER_DURING_DELETE
from protocol.trace import TraceEvent

__all__ = [
    "FINAL_RULES",
    "TRACE_RULES",
    "CacheView",
    "FinalState",
    "PartitionView",
    "StoreView",
    "Violation",
    "acknowledged_creations",
    "caches_converge",
    "check_final",
    "check_trace",
    "controller_epochs_increase",
    "deletions_complete",
    "leader_epochs_increase",
    "leader_in_isr",
    "legal_transitions",
    "no_orphan_log_dirs",
    "no_orphan_znodes",
    "no_stale_epoch_accepted",
    "one_controller_per_epoch",
    "pending_deletions",
    "refused_transitions",
    "store_leadership",
]

CHAOS_NODE: Final = "chaos"
"""The node the chaos runner records its own events under."""


class Violation(msgspec.Struct, frozen=True, kw_only=True):
    """One broken rule: which, what, and where in the trace (``seq``/``ts``) if known."""

    rule: str
    message: str
    seq: int | None = None
    ts: float | None = None

    def line(self) -> str:
        where = f" (event {self.seq}, t={self.ts:.3f}s)" if self.seq is not None else ""
        return f"{self.rule}: {self.message}{where}"


def _at(rule: str, message: str, event: TraceEvent | None) -> Violation:
    if event is None:
        return Violation(rule=rule, message=message)
    return Violation(rule=rule, message=message, seq=event.seq, ts=event.ts)


def _chaos(events: Iterable[TraceEvent], type_: str) -> Iterable[TraceEvent]:
    return (e for e in events if e.node == CHAOS_NODE and e.type == type_)


# ----------------------------------------------------------------------------- controller


def controller_epochs_increase(events: Sequence[TraceEvent]) -> list[Violation]:
    """Controller epochs only increase, and each is won once: over the
    ``controller_elected`` events, in order (``controller_election_violations``)."""
    rule = "controller_epochs_increase"
    elections: list[tuple[str, int]] = []
    out: list[Violation] = []
    known = 0
    for event in events:
        if event.kind != "event" or event.type != "controller_elected":
            continue
        elections.append((event.node, int(event.fields["epoch"])))
        problems = controller_election_violations(elections)
        out.extend(_at(rule, p, event) for p in problems[known:])
        known = len(problems)
    return out


def one_controller_per_epoch(events: Sequence[TraceEvent]) -> list[Violation]:
    """At most one active controller per epoch: every control request carrying a given
    controller epoch comes from one node."""
    rule = "one_controller_per_epoch"
    senders: dict[int, str] = {}
    out: list[Violation] = []
    for event in _chaos(events, "control_request"):
        epoch = int(event.fields["controller_epoch"])
        node = str(event.fields["src"]).partition("/")[0]
        first = senders.setdefault(epoch, node)
        if first != node:
            out.append(_at(rule, f"controller epoch {epoch} used by {first} and by {node}", event))
    return out


def no_stale_epoch_accepted(events: Sequence[TraceEvent]) -> list[Violation]:
    """No broker accepts a control request whose controller epoch is below one it has
    already accepted (within one run of the broker: a restarted broker starts afresh).
    Requests and answers are paired by the asking node and correlation id; a broker's
    answers come in the order it handled the requests."""
    rule = "no_stale_epoch_accepted"
    pending: dict[tuple[str, int], TraceEvent] = {}
    highest: dict[str, int] = {}
    out: list[Violation] = []
    for event in events:
        if event.type == "node_started" and event.kind == "event":
            # A new run of the node: it starts afresh, and so do its correlation ids.
            highest.pop(event.node, None)
            for key in [k for k in pending if k[0] == event.node]:
                del pending[key]
            continue
        if event.node != CHAOS_NODE:
            continue
        if event.type == "control_request":
            src = str(event.fields["src"]).partition("/")[0]
            pending[(src, event.corr or 0)] = event
        elif event.type == "control_response":
            dst = str(event.fields["dst"]).partition("/")[0]
            request = pending.pop((dst, event.corr or 0), None)
            if request is None or event.fields["error"] != "NONE":
                continue
            broker = str(event.fields["src"]).partition("/")[0]
            epoch = int(request.fields["controller_epoch"])
            seen = highest.get(broker, -1)
            if epoch < seen:
                out.append(
                    _at(
                        rule,
                        f"{broker} accepted {request.fields['request']} with controller "
                        f"epoch {epoch} after accepting epoch {seen}",
                        event,
                    )
                )
            highest[broker] = max(seen, epoch)
    return out


# ----------------------------------------------------------------------------- partitions


def _state_name(entry: Sequence[Any]) -> str:
    return f"{entry[0]}-{entry[1]}"


def leader_in_isr(events: Sequence[TraceEvent]) -> list[Violation]:
    """leader ∈ ISR ⊆ replicas (or no leader), ISR non-empty and without duplicates, for
    every partition state a controller sends in LeaderAndIsr or UpdateMetadata (those
    carrying the deletion marker leader -2 excepted): ``leadership_violations``."""
    rule = "leader_in_isr"
    out: list[Violation] = []
    for event in _chaos(events, "control_request"):
        for entry in event.fields.get("states", ()):
            _topic, _partition, leader, _epoch, isr, replicas = entry
            if leader == LEADER_DURING_DELETE:
                continue
            name = f"{_state_name(entry)} in {event.fields['request']} to {event.fields['dst']}"
            out.extend(
                _at(rule, p, event) for p in leadership_violations(name, replicas, leader, isr)
            )
    return out


def leader_epochs_increase(events: Sequence[TraceEvent]) -> list[Violation]:
    """A partition's leader epoch never goes down, except across a re-creation (it went
    NonExistent): over the partition transitions (``leader_epoch_regressions``)."""
    rule = "leader_epochs_increase"
    by_partition: dict[tuple[str, int], list[TraceEvent]] = defaultdict(list)
    for event in events:
        if event.kind == "transition" and event.type == "partition":
            by_partition[(str(event.fields["topic"]), int(event.fields["partition"]))].append(event)
    out: list[Violation] = []
    for key in sorted(by_partition):
        transitions = by_partition[key]
        known = 0
        for i, event in enumerate(transitions):
            problems = leader_epoch_regressions(t.fields for t in transitions[: i + 1])
            out.extend(_at(rule, p, event) for p in problems[known:])
            known = len(problems)
    return out


_PARTITION_STATES: Final = {s.label: s for s in PartitionState}
_REPLICA_STATES: Final = {s.label: s for s in ReplicaState}


def legal_transitions(events: Sequence[TraceEvent]) -> list[Violation]:
    """Every transition a state machine made is in its table (spec §3.2, §3.3): the
    state it left is a valid previous state of the one it entered."""
    rule = "legal_transitions"
    out: list[Violation] = []
    for event in events:
        if event.kind != "transition" or event.type not in ("partition", "replica"):
            continue
        f = event.fields
        what = f"{f['topic']}-{f['partition']}"
        if event.type == "replica":
            what += f" replica {f['replica']}"
        table: Mapping[Any, frozenset[Any]]
        states: Mapping[str, Any]
        if event.type == "partition":
            table, states = PARTITION_VALID_PREVIOUS, _PARTITION_STATES
        else:
            table, states = REPLICA_VALID_PREVIOUS, _REPLICA_STATES
        source: Any = states.get(f["from_state"])
        target: Any = states.get(f["to_state"])
        if source is None or target is None:
            out.append(
                _at(rule, f"{what}: unknown state {f['from_state']} -> {f['to_state']}", event)
            )
        elif source not in table[target]:
            out.append(_at(rule, f"{what}: illegal {f['from_state']} -> {f['to_state']}", event))
    return out


def refused_transitions(events: Sequence[TraceEvent]) -> list[Violation]:
    """Not a violation: the invalid transitions a state machine was asked for and
    refused (Kafka logs them as errors and changes nothing). Reported as notices."""
    return [
        _at(
            "refused_transition",
            f"{e.node}: {e.fields.get('topic')}-{e.fields.get('partition')} "
            f"{e.fields.get('from_state')} -> {e.fields.get('to_state')} refused",
            e,
        )
        for e in events
        if e.kind == "error" and e.type == "invalid_transition"
    ]


# ----------------------------------------------------------------------------- deletion

_DELETE_MARKER = re.compile(r"^/admin/delete_topics/([^/]+)$")


def _fault_free_spans(events: Sequence[TraceEvent]) -> list[tuple[float, float]]:
    """The time spans with no active fault, from the runner's fault events (the last span
    is open-ended: ``inf``). Instantaneous faults do not count."""
    active: set[str] = set()
    spans: list[tuple[float, float]] = []
    start: float | None = 0.0
    for event in events:
        if event.node != CHAOS_NODE or event.kind != "fault":
            continue
        fault_id = str(event.fields["id"])
        if event.type == "fault_injected" and not event.fields.get("instant", False):
            if not active and start is not None:
                spans.append((start, event.ts))
                start = None
            active.add(fault_id)
        elif event.type == "fault_healed" and fault_id in active:
            active.discard(fault_id)
            if not active:
                start = event.ts
    if start is not None:
        spans.append((start, float("inf")))
    return spans


def _due(spans: Sequence[tuple[float, float]], marked: float, bound: float) -> float | None:
    """When ``bound`` seconds of fault-free time have passed since ``marked``; None if
    that never happens."""
    left = bound
    for begin, end in spans:
        begin = max(begin, marked)
        if end <= begin:
            continue
        if end - begin >= left:
            return begin + left
        left -= end - begin
    return None


def deletions_complete(
    events: Sequence[TraceEvent], *, bound: float, end: float
) -> list[Violation]:
    """Every topic marked for deletion (``/admin/delete_topics/<t>`` created) is deleted
    (the controller's ``topic_deletion_completed``, or its ``topic_deletion_ignored`` /
    ``topic_deletion_disabled`` for a topic it will not delete) within ``bound`` seconds of
    fault-free time after the marking. Checked up to ``end``, the last instant of the
    run; a deletion not yet due then is left to the end-state rules."""
    rule = "deletions_complete"
    spans = _fault_free_spans(events)
    marks: dict[str, TraceEvent] = {}
    done: dict[str, float] = {}
    out: list[Violation] = []

    def resolve(topic: str, ts: float) -> None:
        mark = marks.pop(topic, None)
        if mark is not None:
            due = _due(spans, mark.ts, bound)
            if due is not None and ts > due:
                out.append(
                    _at(
                        rule,
                        f"topic {topic} marked at t={mark.ts:.3f}s was deleted at "
                        f"t={ts:.3f}s, after its bound (t={due:.3f}s)",
                        mark,
                    )
                )
            done[topic] = ts

    for event in events:
        if event.kind == "store" and event.type == "create" and event.fields["result"] == "ok":
            match = _DELETE_MARKER.match(str(event.fields["path"]))
            if match and match.group(1) not in marks:
                marks[match.group(1)] = event
        elif event.kind == "event" and event.type == "topic_deletion_completed":
            resolve(str(event.fields["topic"]), event.ts)
        elif event.kind == "event" and event.type in (
            "topic_deletion_ignored",
            "topic_deletion_disabled",
        ):
            for topic in event.fields.get("topics", ()):
                resolve(str(topic), event.ts)
    for topic, mark in sorted(marks.items()):
        due = _due(spans, mark.ts, bound)
        if due is not None and end > due:
            out.append(
                _at(
                    rule,
                    f"topic {topic} marked at t={mark.ts:.3f}s is not deleted "
                    f"{bound:g}s of fault-free time later (due t={due:.3f}s)",
                    mark,
                )
            )
    return out


# ----------------------------------------------------------------------------- end state


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
                out.append(_at(rule, f"partition znode {topic}-{partition} is orphaned", None))
    for topic, assignment in sorted(store.topics.items()):
        states = store.states.get(topic, {})
        for partition in sorted(assignment):
            if partition not in states:
                out.append(_at(rule, f"{topic}-{partition} has no state znode", None))
    for topic in store.configs:
        if topic not in store.topics:
            out.append(_at(rule, f"/config/topics/{topic} belongs to no topic", None))
    return out


def pending_deletions(final: FinalState) -> list[Violation]:
    """Once the cluster settled with every fault healed, no deletion is still pending."""
    return [
        _at("deletions_complete", f"deletion of {topic} is still pending at the end", None)
        for topic in final.store.deletions
    ]


def store_leadership(final: FinalState) -> list[Violation]:
    """leader ∈ ISR ⊆ replicas for every partition state in the store at the end."""
    out: list[Violation] = []
    for topic, states in sorted(final.store.states.items()):
        for partition, view in sorted(states.items()):
            out.extend(
                _at("leader_in_isr", p, None)
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
                out.append(_at(rule, f"broker {broker}: {name} is still on disk", None))
                continue
            match = _LOG_DIR.match(name)
            if match is None:
                continue  # not a log (e.g. a -future or -stray directory)
            topic, partition = match.group("topic"), int(match.group("partition"))
            hosted.add((topic, partition))
            replicas = topics.get(topic, {}).get(partition)
            if replicas is None or broker not in replicas:
                out.append(_at(rule, f"broker {broker}: log {name} is orphaned", None))
        for topic, assignment in sorted(topics.items()):
            for partition, replicas in sorted(assignment.items()):
                if broker in replicas and (topic, partition) not in hosted:
                    out.append(
                        _at(
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
            out.append(_at(rule, f"{who} could not be read", None))
            continue
        if store.controller is not None and cache.controller != store.controller:
            out.append(
                _at(
                    rule, f"{who} names controller {cache.controller}, not {store.controller}", None
                )
            )
        if sorted(cache.brokers) != sorted(store.brokers):
            out.append(
                _at(
                    rule,
                    f"{who} has brokers {sorted(cache.brokers)}, the store {sorted(store.brokers)}",
                    None,
                )
            )
        for topic in sorted(set(cache.topics) | set(expected)):
            mine, theirs = cache.topics.get(topic), expected.get(topic)
            if mine is None or theirs is None:
                where = "not in the store" if theirs is None else "missing"
                out.append(_at(rule, f"{who}: topic {topic} {where}", None))
                continue
            for partition in sorted(set(mine) | set(theirs)):
                a, b = mine.get(partition), theirs.get(partition)
                if a != b:
                    out.append(
                        _at(rule, f"{who}: {topic}-{partition} is {a}, the store says {b}", None)
                    )
    return out


def acknowledged_creations(events: Sequence[TraceEvent], final: FinalState) -> list[Violation]:
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
            match = _DELETE_MARKER.match(str(event.fields["path"]))
            if match:
                acked.pop(match.group(1), None)
    return [
        _at(rule, f"topic {topic}, acknowledged at t={event.ts:.3f}s, does not exist", event)
        for topic, event in sorted(acked.items())
        if topic not in final.store.topics
    ]


# ----------------------------------------------------------------------------- registry

TRACE_RULES: Final[Mapping[str, Callable[[Sequence[TraceEvent]], list[Violation]]]] = {
    "controller_epochs_increase": controller_epochs_increase,
    "one_controller_per_epoch": one_controller_per_epoch,
    "no_stale_epoch_accepted": no_stale_epoch_accepted,
    "leader_in_isr": leader_in_isr,
    "leader_epochs_increase": leader_epochs_increase,
    "legal_transitions": legal_transitions,
}
"""The rules over the trace alone (``deletions_complete`` also needs its bound)."""

FINAL_RULES: Final[Mapping[str, Callable[[FinalState], list[Violation]]]] = {
    "no_orphan_znodes": no_orphan_znodes,
    "no_orphan_log_dirs": no_orphan_log_dirs,
    "caches_converge": caches_converge,
    "leader_in_isr": store_leadership,
    "deletions_complete": pending_deletions,
}
"""The rules over the end state alone (``acknowledged_creations`` also reads the trace)."""


def check_trace(
    events: Sequence[TraceEvent], *, deletion_bound: float, end: float
) -> list[Violation]:
    """Every trace rule, in registry order."""
    out: list[Violation] = []
    for check in TRACE_RULES.values():
        out.extend(check(events))
    out.extend(deletions_complete(events, bound=deletion_bound, end=end))
    return out


def check_final(final: FinalState, events: Sequence[TraceEvent] = ()) -> list[Violation]:
    """Every end-state rule, in registry order, then ``acknowledged_creations``."""
    out: list[Violation] = []
    for check in FINAL_RULES.values():
        out.extend(check(final))
    out.extend(acknowledged_creations(events, final))
    return out
