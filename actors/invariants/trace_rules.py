"""The invariants over a trace, checked as the trace is written.

Each rule is a ``TraceRule``: fed the events of a run one at a time, in sequence order, it
answers at once the violations the event shows, so a chaos run sees a violation at the
moment it happens (``TraceMonitor``), and the same rule checks a whole recorded trace
afterwards (the functions of the same names, ``check_trace``) or a slice of one (the
Spark jobs run them per run or per partition). Nothing here does I/O.

The rules read Kafka's own events (controller elections, state transitions, store
operations, controller events) and the events a chaos run adds (docs/chaos.md):
``control_request`` / ``control_response`` (the payload fields of every LeaderAndIsr,
UpdateMetadata and StopReplica and their answers, seen on the network), ``admin_result``,
and ``fault_injected`` / ``fault_healed``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Final

from actors.controller.states import (
    PARTITION_VALID_PREVIOUS,
    REPLICA_VALID_PREVIOUS,
    PartitionState,
    ReplicaState,
)
from actors.invariants.base import CHAOS_NODE, TraceRule, Violation, violation_at
from actors.invariants.data import (
    DataLedger,
    HighWatermarkTracker,
    Loss,
    UncleanElection,
    isr_change_violations,
    replica_log_violations,
)
from actors.invariants.groups import GroupOffsetsRise, GroupsSettle, OnePartitionOwner
from actors.invariants.leadership import (
    ElectionTracker,
    LeaderEpochTracker,
    leadership_violations,
)
from actors.invariants.liveness import BrokerLiveness
from protocol.control import LEADER_DURING_DELETE
from protocol.trace import TraceEvent

__all__ = [
    "DEFAULT_DELETION_BOUND",
    "TRACE_RULES",
    "AcknowledgedWritesKept",
    "ControllerEpochsIncrease",
    "DeletionsComplete",
    "FollowerLogsMatch",
    "LeaderEpochsIncrease",
    "LeaderInIsr",
    "LegalTransitions",
    "NoStaleEpochAccepted",
    "OneControllerPerEpoch",
    "OneRecordPerOffset",
    "OrphanLogDirs",
    "TraceMonitor",
    "check_trace",
    "controller_epochs_increase",
    "deletions_complete",
    "leader_epochs_increase",
    "leader_in_isr",
    "legal_transitions",
    "no_stale_epoch_accepted",
    "one_controller_per_epoch",
    "refused_transitions",
]

DEFAULT_DELETION_BOUND: Final = 60.0
"""Seconds of fault-free time a marked topic has to be deleted in (a scenario's default)."""


def _is_chaos(event: TraceEvent, type_: str) -> bool:
    return event.node == CHAOS_NODE and event.type == type_


def _node_of(ref: object) -> str:
    """``broker-1`` of an actor reference ``broker-1/controller``."""
    return str(ref).partition("/")[0]


# ----------------------------------------------------------------------------- controller


class ControllerEpochsIncrease(TraceRule):
    """Controller epochs only increase, and each is won once: over the
    ``controller_elected`` events (``ElectionTracker``)."""

    name = "controller_epochs_increase"

    def __init__(self) -> None:
        self._elections = ElectionTracker()

    def observe(self, event: TraceEvent) -> list[Violation]:
        if event.kind != "event" or event.type != "controller_elected":
            return []
        problem = self._elections.observe(event.node, int(event.fields["epoch"]))
        return [] if problem is None else [violation_at(self.name, problem, event)]


class OneControllerPerEpoch(TraceRule):
    """At most one active controller per epoch: every control request carrying a given
    controller epoch comes from one node."""

    name = "one_controller_per_epoch"

    def __init__(self) -> None:
        self._senders: dict[int, str] = {}

    def observe(self, event: TraceEvent) -> list[Violation]:
        if not _is_chaos(event, "control_request"):
            return []
        epoch = int(event.fields["controller_epoch"])
        node = _node_of(event.fields["src"])
        first = self._senders.setdefault(epoch, node)
        if first == node:
            return []
        return [
            violation_at(
                self.name, f"controller epoch {epoch} used by {first} and by {node}", event
            )
        ]


class NoStaleEpochAccepted(TraceRule):
    """No broker accepts a control request whose controller epoch is below one it has
    already accepted (within one run of the broker: a restarted broker starts afresh).
    Requests and answers are paired by the asking node and correlation id."""

    name = "no_stale_epoch_accepted"

    def __init__(self) -> None:
        self._pending: dict[tuple[str, int], TraceEvent] = {}
        self._highest: dict[str, int] = {}

    def observe(self, event: TraceEvent) -> list[Violation]:
        if event.type == "node_started" and event.kind == "event":
            # A new run of the node: it starts afresh, and so do its correlation ids.
            self._highest.pop(event.node, None)
            for key in [k for k in self._pending if k[0] == event.node]:
                del self._pending[key]
            return []
        if event.node != CHAOS_NODE:
            return []
        if event.type == "control_request":
            self._pending[(_node_of(event.fields["src"]), event.corr or 0)] = event
            return []
        if event.type != "control_response":
            return []
        request = self._pending.pop((_node_of(event.fields["dst"]), event.corr or 0), None)
        if request is None or event.fields["error"] != "NONE":
            return []
        broker = _node_of(event.fields["src"])
        epoch = int(request.fields["controller_epoch"])
        seen = self._highest.get(broker, -1)
        self._highest[broker] = max(seen, epoch)
        if epoch >= seen:
            return []
        return [
            violation_at(
                self.name,
                f"{broker} accepted {request.fields['request']} with controller "
                f"epoch {epoch} after accepting epoch {seen}",
                event,
            )
        ]


# ----------------------------------------------------------------------------- partitions


class LeaderInIsr(TraceRule):
    """leader ∈ ISR ⊆ replicas (or no leader), ISR non-empty and without duplicates, for
    every partition state a controller sends in LeaderAndIsr or UpdateMetadata (those
    carrying the deletion marker leader -2 excepted): ``leadership_violations``.

    One exception, Kafka's own: when a reassignment completes, the controller sends the
    target replicas with the ISR unchanged (KafkaController.onPartitionReassignment, step
    B3) and only then shrinks the ISR (B4), so an ISR member may be a replica the
    partition had in a state sent at this or an earlier leader epoch. (The history is
    kept across a re-creation: states of the old topic may still be on their way.)"""

    name = "leader_in_isr"

    def __init__(self) -> None:
        self._had: dict[tuple[str, int], dict[int, set[int]]] = {}  # epoch -> replicas

    def observe(self, event: TraceEvent) -> list[Violation]:
        if not _is_chaos(event, "control_request"):
            return []
        out: list[Violation] = []
        for entry in event.fields.get("states", ()):
            topic, partition, leader, epoch, isr, replicas = entry
            if leader == LEADER_DURING_DELETE:
                continue
            had = self._had.setdefault((topic, partition), {})
            had.setdefault(epoch, set()).update(replicas)
            removing = sorted(
                {r for e, rs in had.items() if e <= epoch for r in rs} - set(replicas)
            )
            name = f"{topic}-{partition} in {event.fields['request']} to {event.fields['dst']}"
            out.extend(
                violation_at(self.name, p, event)
                for p in leadership_violations(name, [*replicas, *removing], leader, isr)
            )
        return out


class LeaderEpochsIncrease(TraceRule):
    """A partition's leader epoch never goes down, except across a re-creation (it went
    NonExistent): over the partition transitions (``LeaderEpochTracker``)."""

    name = "leader_epochs_increase"

    def __init__(self) -> None:
        self._epochs = LeaderEpochTracker()

    def observe(self, event: TraceEvent) -> list[Violation]:
        if event.kind != "transition" or event.type != "partition":
            return []
        problem = self._epochs.observe(event.fields)
        return [] if problem is None else [violation_at(self.name, problem, event)]


def _proposal_violations(event: TraceEvent) -> list[str]:
    """A leader's own ISR proposal (``isr_change_proposed``, the ISR it then waits for):
    it holds the proposing broker, is not empty and has no duplicates."""
    f = event.fields
    isr = [int(r) for r in f["isr"]]
    name = f"{f['topic']}-{f['partition']}"
    leader = _broker_of(event.node)
    problems = []
    if len(set(isr)) != len(isr):
        problems.append(f"{name}: {event.node} proposed duplicate ISR members {isr}")
    if leader is not None and leader not in isr:
        problems.append(f"{name}: {event.node} proposed ISR {isr} without itself")
    return problems


def _broker_of(node: str) -> int | None:
    prefix, _, number = node.rpartition("-")
    return int(number) if prefix == "broker" and number.isdigit() else None


class AlterIsrKeepsShape(TraceRule):
    """An ISR the controller wrote for a partition leader's AlterIsr holds that leader, is
    not empty, has no duplicates and lies within the partition's replicas as the
    controller had them (``isr_change_violations`` over ``isr_altered``, whose
    ``replicas`` field carries them; an event without it is checked against its own ISR).
    So does what a leader proposes (``isr_change_proposed``): its own ISR, which its high
    watermark follows until the answer, holds the leader and no duplicates."""

    name = "alter_isr_keeps_shape"

    def observe(self, event: TraceEvent) -> list[Violation]:
        if event.kind == "event" and event.type == "isr_change_proposed":
            return [violation_at(self.name, p, event) for p in _proposal_violations(event)]
        if event.kind != "event" or event.type != "isr_altered":
            return []
        replicas = [int(r) for r in event.fields.get("replicas", event.fields.get("to_isr", ()))]
        return [
            violation_at(self.name, p, event)
            for p in isr_change_violations(event.fields, replicas, None)
        ]


def _recreated(event: TraceEvent) -> bool:
    """A partition made New from NonExistent: a topic of this name starts (again). (Its
    deletion made it NonExistent first, while its old leaders may still take writes
    until their StopReplica.)"""
    return (
        event.kind == "transition"
        and event.type == "partition"
        and event.fields.get("from_state") == "NonExistentPartition"
        and event.fields.get("to_state") == "NewPartition"
    )


class HighWatermarksRise(TraceRule):
    """A leader's high watermark never falls within one of its leader epochs (the
    brokers' ``high_watermark_moved`` events, ``HighWatermarkTracker``); a re-created
    topic starts again."""

    name = "high_watermarks_rise"

    def __init__(self) -> None:
        self._marks = HighWatermarkTracker()

    def observe(self, event: TraceEvent) -> list[Violation]:
        if _recreated(event):
            self._marks.forget_topic(str(event.fields["topic"]))  # epochs start anew
            return []
        if event.kind != "event" or event.type != "high_watermark_moved":
            return []
        problem = self._marks.observe(event.node, event.fields)
        return [] if problem is None else [violation_at(self.name, problem, event)]


# ----------------------------------------------------------------------------- data


class _DataRule(TraceRule):
    """A rule over the chaos run's workload events and ``DataLedger``: it forgets a topic
    when its deletion completes (and again when it is created anew: an old answer may
    come late) and learns the unclean elections. ``allowed_loss``: the causes the
    scenario declared (an allowed loss is a notice, not a violation); a chaos run also
    records them in its trace (``data_rules``), which the rule reads too."""

    def __init__(self, allowed_loss: Collection[str] = ()) -> None:
        self.allowed = frozenset(allowed_loss)
        self.ledger = DataLedger()
        self._notices: list[Violation] = []

    def notices(self) -> list[Violation]:
        return list(self._notices)

    def _learn(self, event: TraceEvent) -> None:
        f = event.fields
        if _is_chaos(event, "data_rules"):  # the scenario's declaration, in its trace
            self.allowed |= {str(c) for c in (*f["allow_loss"], *f["expect_loss"])}
        elif (event.kind == "event" and event.type == "topic_deletion_completed") or _recreated(
            event
        ):
            self.ledger.forget_topic(str(f["topic"]))
        elif event.kind == "event" and event.type == "unclean_leader_elected":
            election = UncleanElection(
                leader=int(f["leader"]),
                leader_epoch=int(f["leader_epoch"]),
                seq=event.seq,
                ts=event.ts,
            )
            self.ledger.unclean(str(f["topic"]), int(f["partition"]), election)

    def _read(self, event: TraceEvent) -> tuple[list[Loss], list[Any]]:
        f = event.fields
        return self.ledger.read(
            str(f["topic"]),
            int(f["partition"]),
            ((int(o), str(i)) for o, i in f["records"]),
            high_watermark=int(f["high_watermark"]),
            log_start_offset=int(f["log_start_offset"]),
            settled=bool(f["settled"]),
            seq=event.seq,
        )

    def _report(self, allowed: bool, text: str, event: TraceEvent) -> list[Violation]:
        if allowed:
            self._notices.append(violation_at("data_loss", text, event))
            return []
        return [violation_at(self.name, text, event)]


def _is_read(event: TraceEvent) -> bool:
    return _is_chaos(event, "records_read") and event.fields.get("error") == "NONE"


class AcknowledgedWritesKept(_DataRule):
    """An acknowledged write is never lost (``DataLedger``): a record acknowledged with
    acks=all, so written to an ISR of at least ``min.insync.replicas``, is read back at
    its offset by every later read, unless an unclean election of its partition came
    after it (the loss then names that election); a record acknowledged with acks=1 may
    be lost with its leader. A loss whose cause the scenario allows (``acks_1``,
    ``unclean``) is a notice listing exactly what was lost; any other is a violation.
    A new acknowledgement at the offset of an earlier one loses the earlier one too.
    Fed ``produce_result`` (the acknowledgements), ``records_read`` (the reads),
    ``unclean_leader_elected`` and ``topic_deletion_completed``."""

    name = "acknowledged_writes_kept"

    def __init__(self, allowed_loss: Collection[str] = ()) -> None:
        super().__init__(allowed_loss)
        self.losses: list[Loss] = []

    def observe(self, event: TraceEvent) -> list[Violation]:
        self._learn(event)
        f = event.fields
        losses: list[Loss] = []
        if _is_chaos(event, "produce_result"):
            if f["error"] == "NONE" and int(f["acks"]) != 0:
                losses = self.ledger.acknowledged(
                    str(f["topic"]),
                    int(f["partition"]),
                    int(f["base_offset"]),
                    (str(i) for i in f["records"]),
                    acks=int(f["acks"]),
                    seq=event.seq,
                )
        elif _is_read(event):
            losses, _ = self._read(event)
        out: list[Violation] = []
        for loss in losses:
            self.losses.append(loss)
            text = loss.text()
            if loss.cause is None:
                text += ": nothing allows losing a write the ISR acknowledged"
            elif loss.cause not in self.allowed:
                text += f" (a loss of cause {loss.cause} the scenario does not allow)"
            out += self._report(loss.cause in self.allowed, text, event)
        return out


class OneRecordPerOffset(_DataRule):
    """No offset is ever read with two different records: what a consumer saw below the
    high watermark stays (``records_read``), unless an unclean election of the partition
    came between the two reads and the scenario allows ``unclean`` losses (a notice)."""

    name = "one_record_per_offset"

    def observe(self, event: TraceEvent) -> list[Violation]:
        self._learn(event)
        if not _is_read(event):
            return []
        _, conflicts = self._read(event)
        out: list[Violation] = []
        for conflict in conflicts:
            allowed = conflict.election is not None and "unclean" in self.allowed
            out += self._report(allowed, conflict.text(), event)
        return out


class FollowerLogsMatch(TraceRule):
    """Once caught up, a follower's log is the leader's prefix, and leader ∈ ISR ⊆
    replicas with the ISR the store holds: over ``replica_logs_read``, the logs of every
    running replica of a partition read by a ``verify`` step or the run's end
    (``replica_log_violations``)."""

    name = "follower_logs_match"

    def observe(self, event: TraceEvent) -> list[Violation]:
        if not _is_chaos(event, "replica_logs_read"):
            return []
        return [violation_at(self.name, p, event) for p in replica_log_violations(event.fields)]


_PARTITION_STATES: Final = {s.label: s for s in PartitionState}
_REPLICA_STATES: Final = {s.label: s for s in ReplicaState}


class LegalTransitions(TraceRule):
    """Every transition a state machine made is in its table (Kafka's
    ``validPreviousStates``, ``actors.controller.states``): the state it left is a valid
    previous state of the one it entered."""

    name = "legal_transitions"

    def observe(self, event: TraceEvent) -> list[Violation]:
        if event.kind != "transition" or event.type not in ("partition", "replica"):
            return []
        f = event.fields
        what = f"{f['topic']}-{f['partition']}"
        table: Mapping[Any, frozenset[Any]]
        states: Mapping[str, Any]
        if event.type == "partition":
            table, states = PARTITION_VALID_PREVIOUS, _PARTITION_STATES
        else:
            what += f" replica {f['replica']}"
            table, states = REPLICA_VALID_PREVIOUS, _REPLICA_STATES
        source: Any = states.get(f["from_state"])
        target: Any = states.get(f["to_state"])
        if source is None or target is None:
            message = f"{what}: unknown state {f['from_state']} -> {f['to_state']}"
        elif source not in table[target]:
            message = f"{what}: illegal {f['from_state']} -> {f['to_state']}"
        else:
            return []
        return [violation_at(self.name, message, event)]


def refused_transitions(events: Iterable[TraceEvent]) -> list[Violation]:
    """Not a violation: the invalid transitions a state machine was asked for and
    refused (Kafka logs them as errors and changes nothing). Reported as notices."""
    return [
        violation_at(
            "refused_transition",
            f"{e.node}: {e.fields.get('topic')}-{e.fields.get('partition')} "
            f"{e.fields.get('from_state')} -> {e.fields.get('to_state')} refused",
            e,
        )
        for e in events
        if e.kind == "error" and e.type == "invalid_transition"
    ]


# ----------------------------------------------------------------------------- deletion

DELETE_MARKER: Final = re.compile(r"^/admin/delete_topics/([^/]+)$")
"""A deletion marker's path; group 1 is the topic."""


class DeletionsComplete(TraceRule):
    """Every topic marked for deletion (``/admin/delete_topics/<t>`` created) is deleted
    (the controller's ``topic_deletion_completed``, or its ``topic_deletion_ignored`` /
    ``topic_deletion_disabled`` for a topic it will not delete) within ``bound`` seconds
    of fault-free time after the marking. Fault-free time is the time with no active
    fault of the chaos run (instantaneous faults do not count) and no broker down for
    any reason (``BrokerLiveness``: crashed, halted, stopped, paused or unregistered,
    until it runs and is registered again). A broker can be down with no fault active,
    e.g. one that halted because its only log directory failed and was not restarted
    after the disk was repaired; Kafka's ``TopicDeletionManager`` rightly keeps a topic
    ineligible while one of its replicas is on a dead broker, so that time does not
    count against the deletion.

    A deletion still pending when an event shows its bound passed is reported at once
    (at the marking event); ``finish`` reports the ones whose bound passed before the
    trace's end. A deletion not yet due at the end is left to the end-state rules."""

    name = "deletions_complete"

    def __init__(self, bound: float = DEFAULT_DELETION_BOUND) -> None:
        self.bound = bound
        self._faults: set[str] = set()
        self._liveness = BrokerLiveness()
        self._now = 0.0
        # topic -> (its marking, fault-free seconds since)
        self._marks: dict[str, tuple[TraceEvent, float]] = {}

    def _advance(self, ts: float) -> list[Violation]:
        """Let time run to ``ts``; the deletions that became overdue on the way."""
        quiet = not self._faults and not self._liveness.any_down()
        elapsed = ts - self._now if quiet and ts > self._now else 0.0
        out: list[Violation] = []
        for topic, (mark, free) in sorted(self._marks.items()):
            if free + elapsed > self.bound:
                due = self._now + (self.bound - free)
                del self._marks[topic]
                out.append(
                    violation_at(
                        self.name,
                        f"topic {topic} marked at t={mark.ts:.3f}s is not deleted "
                        f"{self.bound:g}s of fault-free time later (due t={due:.3f}s)",
                        mark,
                    )
                )
            else:
                self._marks[topic] = (mark, free + elapsed)
        self._now = max(self._now, ts)
        return out

    def observe(self, event: TraceEvent) -> list[Violation]:
        out = self._advance(event.ts)
        self._liveness.observe(event)
        if event.node == CHAOS_NODE and event.kind == "fault":
            fault_id = str(event.fields["id"])
            if event.type == "fault_injected" and not event.fields.get("instant", False):
                self._faults.add(fault_id)
            elif event.type == "fault_healed":
                self._faults.discard(fault_id)
        elif event.kind == "store" and event.type == "create" and event.fields["result"] == "ok":
            match = DELETE_MARKER.match(str(event.fields["path"]))
            if match and match.group(1) not in self._marks:
                self._marks[match.group(1)] = (event, 0.0)
        elif event.kind == "event" and event.type == "topic_deletion_completed":
            self._marks.pop(str(event.fields["topic"]), None)
        elif event.kind == "event" and event.type in (
            "topic_deletion_ignored",
            "topic_deletion_disabled",
        ):
            for topic in event.fields.get("topics", ()):
                self._marks.pop(str(topic), None)
        return out

    def finish(self, end: float) -> list[Violation]:
        return self._advance(end)


# ----------------------------------------------------------------------------- log directories


class OrphanLogDirs(TraceRule):
    """The trace-only form of the end-state rule ``no_orphan_log_dirs``, for analyses of a
    recorded trace that have no end state to read (the Spark jobs; a chaos run checks the
    end state itself, so it is not in ``TRACE_RULES``). No log directory of a deleted
    topic outlives its deletion: a directory of topic T
    created, loaded or renamed (to its ``-delete`` name) before T's last
    ``topic_deletion_completed`` must have been removed by the end of the trace. Fed the
    ``log_dir`` events and the deletion completions; reported at ``finish``, at the event
    that last made the directory appear."""

    name = "orphan_log_dirs"

    def __init__(self) -> None:
        self._live: dict[tuple[str, str], TraceEvent] = {}
        self._completed: dict[str, int] = {}

    def observe(self, event: TraceEvent) -> list[Violation]:
        f = event.fields
        if event.kind == "event" and event.type == "topic_deletion_completed":
            self._completed[str(f["topic"])] = event.seq
        elif event.kind == "log_dir" and f.get("topic") is not None and f.get("result") == "ok":
            where = (event.node, str(f["dir"]))
            if event.type in ("create", "load", "load_deleted"):
                self._live[where] = event
            elif event.type == "rename":
                self._live.pop(where, None)
                self._live[(event.node, f"{f['log_dir']}/{f['to']}")] = event
            elif event.type == "remove":
                self._live.pop(where, None)
        return []

    def finish(self, end: float) -> list[Violation]:
        del end
        out: list[Violation] = []
        for (node, directory), event in sorted(self._live.items()):
            topic = str(event.fields["topic"])
            completed = self._completed.get(topic)
            if completed is not None and event.seq < completed:
                out.append(
                    violation_at(
                        self.name,
                        f"{node}: {directory} of deleted topic {topic} was never removed",
                        event,
                    )
                )
        return out


# ----------------------------------------------------------------------------- all of them

TRACE_RULES: Final[Mapping[str, Callable[[], TraceRule]]] = {
    "controller_epochs_increase": ControllerEpochsIncrease,
    "one_controller_per_epoch": OneControllerPerEpoch,
    "no_stale_epoch_accepted": NoStaleEpochAccepted,
    "leader_in_isr": LeaderInIsr,
    "leader_epochs_increase": LeaderEpochsIncrease,
    "legal_transitions": LegalTransitions,
    "deletions_complete": DeletionsComplete,
    "alter_isr_keeps_shape": AlterIsrKeepsShape,
    "high_watermarks_rise": HighWatermarksRise,
    "acknowledged_writes_kept": AcknowledgedWritesKept,
    "one_record_per_offset": OneRecordPerOffset,
    "follower_logs_match": FollowerLogsMatch,
    "group_offsets_rise": GroupOffsetsRise,
    "one_owner_per_partition": OnePartitionOwner,
    "groups_settle": GroupsSettle,
}
"""Every trace rule by name (``deletions_complete`` with the default bound, the data rules
allowing no loss)."""


class TraceMonitor:
    """Every trace rule at once, fed event by event: what a chaos run checks live.
    ``violations`` keeps everything found so far, in the order found."""

    def __init__(
        self,
        *,
        deletion_bound: float = DEFAULT_DELETION_BOUND,
        allowed_loss: Collection[str] = (),
    ) -> None:
        self.rules: list[TraceRule] = [
            _make_rule(name, make, deletion_bound, allowed_loss)
            for name, make in TRACE_RULES.items()
        ]
        self.violations: list[Violation] = []

    def rule(self, name: str) -> TraceRule:
        return next(r for r in self.rules if r.name == name)

    @property
    def notices(self) -> list[Violation]:
        """What the rules saw that breaks nothing but must be told, in rule order."""
        return [n for rule in self.rules for n in rule.notices()]

    def observe(self, event: TraceEvent) -> list[Violation]:
        """The violations ``event`` shows (also added to ``violations``)."""
        found = [v for rule in self.rules for v in rule.observe(event)]
        self.violations += found
        return found

    def finish(self, end: float) -> list[Violation]:
        """The violations only the trace's end shows (also added to ``violations``)."""
        found = [v for rule in self.rules for v in rule.finish(end)]
        self.violations += found
        return found


def _make_rule(
    name: str,
    make: Callable[[], TraceRule],
    deletion_bound: float,
    allowed_loss: Collection[str],
) -> TraceRule:
    if name == "deletions_complete":
        return DeletionsComplete(deletion_bound)
    if name == "acknowledged_writes_kept":
        return AcknowledgedWritesKept(allowed_loss)
    if name == "one_record_per_offset":
        return OneRecordPerOffset(allowed_loss)
    return make()


def _check(
    rule: TraceRule, events: Iterable[TraceEvent], end: float | None = None
) -> list[Violation]:
    out = [v for event in events for v in rule.observe(event)]
    if end is not None:
        out += rule.finish(end)
    return out


def check_trace(
    events: Iterable[TraceEvent],
    *,
    deletion_bound: float = DEFAULT_DELETION_BOUND,
    end: float,
) -> list[Violation]:
    """Every trace rule over a whole trace that ended at ``end``, grouped by rule in
    ``TRACE_RULES`` order."""
    monitor = TraceMonitor(deletion_bound=deletion_bound)
    for event in events:
        monitor.observe(event)
    monitor.finish(end)
    order = {name: i for i, name in enumerate(TRACE_RULES)}
    return sorted(monitor.violations, key=lambda v: order[v.rule])


def controller_epochs_increase(events: Iterable[TraceEvent]) -> list[Violation]:
    """``ControllerEpochsIncrease`` over ``events``."""
    return _check(ControllerEpochsIncrease(), events)


def one_controller_per_epoch(events: Iterable[TraceEvent]) -> list[Violation]:
    """``OneControllerPerEpoch`` over ``events``."""
    return _check(OneControllerPerEpoch(), events)


def no_stale_epoch_accepted(events: Iterable[TraceEvent]) -> list[Violation]:
    """``NoStaleEpochAccepted`` over ``events``."""
    return _check(NoStaleEpochAccepted(), events)


def leader_in_isr(events: Iterable[TraceEvent]) -> list[Violation]:
    """``LeaderInIsr`` over ``events``."""
    return _check(LeaderInIsr(), events)


def leader_epochs_increase(events: Iterable[TraceEvent]) -> list[Violation]:
    """``LeaderEpochsIncrease`` over ``events``."""
    return _check(LeaderEpochsIncrease(), events)


def legal_transitions(events: Iterable[TraceEvent]) -> list[Violation]:
    """``LegalTransitions`` over ``events``."""
    return _check(LegalTransitions(), events)


def deletions_complete(
    events: Sequence[TraceEvent], *, bound: float = DEFAULT_DELETION_BOUND, end: float
) -> list[Violation]:
    """``DeletionsComplete`` over a trace that ended at ``end``."""
    return _check(DeletionsComplete(bound), events, end)
