"""A run for people to read: ``timeline.txt``.

One line per notable event (steps, faults, admin results, nodes starting and crashing,
controller elections, session expiries, deletions, log-directory renames and removals,
errors), each with its trace time, sequence number and node; the violations and notices
(an allowed data loss, a refused transition) appear at the event where they showed, and
the outcome closes the file.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

import msgspec

from actors.invariants import CHAOS_NODE, Violation
from cluster.chaos.model import Expect, Scenario, Step, Wait, kind_of
from protocol.trace import TraceEvent

if TYPE_CHECKING:
    from cluster.chaos.runner import RunResult

__all__ = ["condition_text", "step_label", "timeline"]

_EVENTS: Final = frozenset(
    {
        "node_started",
        "node_stopped",
        "node_crashed",
        "controller_elected",
        "controller_resigned",
        "controller_moved",
        "broker_registered",
        "broker_reregistered",
        "topic_marked_for_deletion",
        "topic_deletion_enqueued",
        "topic_deletion_started",
        "topic_deletion_halted",
        "topic_deletion_resumed",
        "topic_deletion_completed",
        "topic_deletion_ignored",
        "topic_deletion_disabled",
        "unclean_leader_elected",
        "group_generation",
        "group_stable",
        "group_member_expired",
        "group_partition_loaded",
        "group_partition_unloaded",
    }
)
_QUIET_ERRORS: Final = frozenset({"controller_request_failed"})
_LOG_DIR_OPS: Final = frozenset({"rename", "remove", "offline"})
_RUNNER: Final = frozenset(
    {
        "step_started",
        "step_armed",
        "admin_result",
        "scenario_failure",
        "final_phase_started",
        "final_phase_finished",
    }
)


def step_label(index: int, step: Step) -> str:
    """``steps[3] crash_broker broker=2`` (how the progress lines and timeline name it)."""
    if isinstance(step, Wait | Expect):
        args = f" {condition_text(step.condition)} within {step.within:g}s"
    else:
        data = msgspec.to_builtins(step)
        assert isinstance(data, dict)
        shown = [f"{k}={v}" for k, v in data.items() if k not in ("kind", "at", "after")]
        args = f" {' '.join(shown)}" if shown else ""
    return f"steps[{index}] {kind_of(step)}{args}"


def condition_text(condition: object) -> str:
    data = msgspec.to_builtins(condition)
    assert isinstance(data, dict)
    kind = data.pop("kind")
    if kind == "metric":  # its bounds by name: "metric UnderReplicatedPartitions broker=2 equals=0"
        name = data.pop("name")
        return " ".join([kind, name, *(f"{k}={v}" for k, v in data.items())])
    return " ".join([kind, *(str(v) for v in data.values())])


def _describe(event: TraceEvent, scenario: Scenario) -> str | None:
    f = event.fields
    if event.node == CHAOS_NODE:
        if event.type in ("step_started", "step_armed"):
            index = int(f["index"])
            label = step_label(index, scenario.steps[index])
            if event.type == "step_armed":
                return f"armed: {label}"
            cause = f" (triggered by event {f['trigger_seq']})" if "trigger_seq" in f else ""
            return f"{label}{cause}"
        if event.type == "fault_injected":
            detail = f": {f['detail']}" if f.get("detail") else ""
            return f"FAULT {f['id']} ({f['fault']}){detail}"
        if event.type == "fault_healed":
            return f"HEALED {f['id']} ({f['how']})"
        if event.type == "admin_result":
            detail = f" {f['detail']}" if f.get("detail") else ""
            return f"{f['op']} {f['topic']} via {f['via']}: {f['error']}{detail}"
        if event.type == "produce_finished":
            return (
                f"produced {f['records']} records to {f['topic']} (acks={f['acks']}):"
                f" {f['answered_ok']} answered without error; answers {f['requests']}"
            )
        if event.type == "records_read":
            settled = ", settled" if f["settled"] else ""
            return (
                f"read {f['topic']}-{f['partition']} from broker {f['broker']}: {f['error']},"
                f" {len(f['records'])} records below high watermark {f['high_watermark']}"
                f"{settled}"
            )
        if event.type == "replica_logs_read":
            ends = ", ".join(f"{log['broker']}:{log['log_end_offset']}" for log in f["logs"])
            caught = "caught up" if f["caught_up"] else "NOT caught up"
            return (
                f"replica logs of {f['topic']}-{f['partition']} (leader {f['leader']},"
                f" ISR {f['isr']}), log ends {ends}: {caught}"
            )
        if event.type == "consumer_assigned":
            owned = ", ".join(f"{t}-{p}" for t, p in f["partitions"]) or "nothing"
            return f"{f['member']} of {f['group']} generation {f['generation']}: {owned}"
        if event.type == "consumer_rejoining":
            return f"{f['member']} of {f['group']} rejoins: {f['reason']}"
        if event.type == "consumer_group_settled":
            return (
                f"group {f['group']}: {f['state']}, {f['members']} members,"
                f" {len(f['owners'])} of {len(f['partitions'])} partitions owned"
            )
        if event.type == "scenario_failure":
            return f"FAILED {f['rule']}: {f['message']}"
        if event.type in _RUNNER:
            return f"{event.type} {' '.join(f'{k}={v}' for k, v in f.items())}".strip()
        return None
    if event.kind == "event" and event.type in _EVENTS:
        shown = " ".join(f"{k}={v}" for k, v in f.items())
        return f"{event.type} {shown}".strip()
    if event.kind == "store" and event.type == "session_expired":
        return f"store session {f.get('session')} ({event.actor}) expired"
    if event.kind == "log_dir" and event.type in _LOG_DIR_OPS:
        return f"log dir {event.type} {f.get('dir')} {f.get('result')}"
    if event.kind == "error" and event.type not in _QUIET_ERRORS:
        detail = f.get("detail") or f.get("error") or ""
        return f"error {event.type} {detail}".strip()
    return None


def timeline(scenario: Scenario, result: RunResult, events: Sequence[TraceEvent]) -> str:
    by_seq: dict[int, list[tuple[str, Violation]]] = {}
    for label, found in (("VIOLATION", result.violations), ("notice", result.notices)):
        for v in found:
            if v.seq is not None:
                by_seq.setdefault(v.seq, []).append((label, v))
    lines = [
        f"scenario {scenario.name} seed {result.seed} ({result.mode})",
        *(f"  {line}" for line in scenario.description.strip().splitlines()),
        "",
    ]
    for event in events:
        text = _describe(event, scenario)
        if text is not None:
            lines.append(f"{event.ts:10.3f}s #{event.seq:<6} {event.node:<10} {text}")
        for label, v in by_seq.get(event.seq, ()):
            mark = "!!" if label == "VIOLATION" else "--"
            lines.append(
                f"{event.ts:10.3f}s #{event.seq:<6} {mark:<10} {label} {v.rule}: {v.message}"
            )
    lines.append("")
    lines.append(f"outcome: {result.status}")
    if result.error:
        lines.append(f"  error: {result.error}")
    for v in result.failures:
        lines.append(f"  {v.line()}")
    for v in result.violations:
        lines.append(f"  VIOLATION {v.line()}")
    for v in result.notices:
        lines.append(f"  notice {v.line()}")
    if result.status != "passed":
        lines.append(f"reproduce: {result.reproduce}")
    return "\n".join(lines) + "\n"
