"""The invariant checks of a trace, in Spark: the chaos rules of ``actors.invariants``,
run over slices of each run so no group holds a whole large trace.

Each rule reads only some events, and most of them only about one partition or one
topic. So the events are split into groups, and every group is fed, in sequence order,
to fresh instances of the rules that need it (``applyInPandas``):

* ``partition/<topic>/<p>``: the partition and replica transitions of one partition, for
  ``legal_transitions`` and ``leader_epochs_increase``;
* ``topic/<topic>``: the log-directory operations of a topic and its
  ``topic_deletion_completed``, for ``orphan_log_dirs`` (below);
* ``requests/<n>``: the control requests of one chunk of ``CHUNK`` sequence numbers,
  for ``leader_in_isr`` (it judges each request alone);
* ``run``: controller elections, control requests and answers, node starts, deletion
  markers and completions, faults and refused transitions, for the other trace rules
  (``deletions_complete`` finishing at the run's last event).

``orphan_log_dirs`` (``actors.invariants.OrphanLogDirs``) is the trace-only form of the
end-state rule ``no_orphan_log_dirs``, for an analysis that has no end state to read.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final

import msgspec

from actors.invariants import (
    CHAOS_NODE,
    DEFAULT_DELETION_BOUND,
    TRACE_RULES,
    TraceRule,
    refused_transitions,
)
from actors.invariants.trace_rules import DeletionsComplete, OrphanLogDirs
from protocol.trace import TraceEvent
from spark.schema import EVENT_COLUMNS

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import Column, DataFrame

__all__ = [
    "ROUTED_RULES",
    "VIOLATION_SCHEMA",
    "check_runs",
    "rules_of_group",
]

VIOLATION_SCHEMA: Final = (
    "run string, rule string, severity string, message string, seq long, ts double"
)
"""One row per violation (``severity`` = ``violation``) or notice (``notice``)."""

_PARTITION_RULES: Final = ("legal_transitions", "leader_epochs_increase")
_STATELESS_RULES: Final = ("leader_in_isr",)
"""Rules that judge each event alone: fed control requests in chunks of ``CHUNK`` events."""
CHUNK: Final = 50_000
ROUTED_RULES: Final = frozenset(
    {
        *_PARTITION_RULES,
        *_STATELESS_RULES,
        "controller_epochs_increase",
        "one_controller_per_epoch",
        "no_stale_epoch_accepted",
        "leader_in_isr",
        "deletions_complete",
    }
)
"""The trace rules whose events ``check_runs`` knows how to select; a rule added to
``actors.invariants.TRACE_RULES`` must be routed here too (a test compares the two)."""
_RUN_TYPES: Final = (
    "controller_elected",
    "control_request",
    "control_response",
    "node_started",
    "topic_deletion_ignored",
    "topic_deletion_disabled",
)


def rules_of_group(group: str, *, deletion_bound: float) -> list[TraceRule]:
    """Fresh instances of the rules a group of events is checked by."""
    if group.startswith("partition/"):
        return [TRACE_RULES[name]() for name in _PARTITION_RULES]
    if group.startswith("topic/"):
        return [OrphanLogDirs()]
    if group.startswith("requests/"):
        return [TRACE_RULES[name]() for name in _STATELESS_RULES]
    return [
        DeletionsComplete(deletion_bound) if name == "deletions_complete" else make()
        for name, make in TRACE_RULES.items()
        if name not in (*_PARTITION_RULES, *_STATELESS_RULES)
    ]


def _events(pdf: pd.DataFrame) -> Iterator[TraceEvent]:
    decode = msgspec.json.Decoder(dict[str, Any]).decode
    for row in pdf.sort_values("seq").itertuples(index=False):
        yield TraceEvent(
            seq=int(row.seq),
            ts=float(row.ts),
            node=row.node,
            actor=row.actor,
            kind=row.kind,
            type=row.type,
            corr=None if row.corr is None or row.corr != row.corr else int(row.corr),
            fields=decode(row.fields),
        )


def _check_group(deletion_bound: float) -> Any:
    def check(key: tuple[Any, ...], pdf: pd.DataFrame) -> pd.DataFrame:
        import pandas as pd

        run, group = str(key[0]), str(key[1])
        rules = rules_of_group(group, deletion_bound=deletion_bound)
        events = list(_events(pdf))
        found = [v for event in events for rule in rules for v in rule.observe(event)]
        end = float(pdf["end"].iloc[0])
        found += [v for rule in rules for v in rule.finish(end)]
        notices = refused_transitions(events) if group == "run" else []
        rows = [("violation", v) for v in found] + [("notice", v) for v in notices]
        columns = {
            "run": [run] * len(rows),
            "rule": [v.rule for _, v in rows],
            "severity": [s for s, _ in rows],
            "message": [v.message for _, v in rows],
            "seq": [v.seq for _, v in rows],
            "ts": [v.ts for _, v in rows],
        }
        return pd.DataFrame({k: pd.Series(v, dtype=object) for k, v in columns.items()})

    return check


def check_runs(events: DataFrame, *, deletion_bound: float = DEFAULT_DELETION_BOUND) -> DataFrame:
    """The violations and notices of every run in ``events`` (``read_traces``' columns),
    as rows of ``VIOLATION_SCHEMA`` (unordered)."""
    from pyspark.sql import functions as F

    ends = events.groupBy("run").agg(F.max("ts").alias("end"))
    parsed = "f" in events.columns  # spark.analyze parsed the keys once already

    def field(name: str) -> Column:
        if parsed:
            return F.col("f").getField(name)
        return F.get_json_object("fields", f"$.{name}")

    topic = field("topic")
    partition = field("partition")
    is_transition = (events.kind == "transition") & events.type.isin("partition", "replica")
    is_log_dir = (events.kind == "log_dir") & topic.isNotNull()
    completed = (events.kind == "event") & (events.type == "topic_deletion_completed")
    is_run_event = (
        events.type.isin(*_RUN_TYPES)
        | ((events.node == CHAOS_NODE) & (events.kind == "fault"))
        | ((events.kind == "error") & (events.type == "invalid_transition"))
        | completed
        | (
            (events.kind == "store")
            & (events.type == "create")
            & field("path").startswith("/admin/delete_topics/")
        )
    )
    partition_group = events.where(is_transition).withColumn(
        "group", F.concat_ws("/", F.lit("partition"), topic, partition)
    )
    topic_group = events.where(is_log_dir | completed).withColumn(
        "group", F.concat_ws("/", F.lit("topic"), topic)
    )
    run_group = events.where(is_run_event).withColumn("group", F.lit("run"))
    chunk = F.floor(F.col("seq") / CHUNK).cast("string")
    request_group = events.where(
        (events.node == CHAOS_NODE) & (events.type == "control_request")
    ).withColumn("group", F.concat(F.lit("requests/"), chunk))
    grouped = (
        partition_group.unionByName(topic_group)
        .unionByName(run_group)
        .unionByName(request_group)
        .select("run", "group", *EVENT_COLUMNS)
    )
    return (
        grouped.join(F.broadcast(ends), "run")
        .groupBy("run", "group")
        .applyInPandas(_check_group(deletion_bound), VIOLATION_SCHEMA)
    )
