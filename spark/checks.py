"""The invariant checks of a trace, in Spark: the chaos rules of ``actors.invariants``,
run over slices of each run so no group holds a whole large trace.

Each rule reads only some events, and most of them only about one partition or one
topic. So the events are split into groups, and every group is fed, in sequence order,
to fresh instances of the rules that need it (``check_sorted``; in Spark, the groups are
spread over partitions and each partition, sorted by group and seq, streams through one
Python worker with ``mapInArrow``, so a group costs no more than its events; that pass
also carries the topic lifecycles' rows, ``spark.analyze``):

* ``partition/<topic>/<p>``: the partition and replica transitions of one partition, for
  ``legal_transitions`` and ``leader_epochs_increase``, and its ``isr_altered`` and
  ``high_watermark_moved`` events, for ``alter_isr_keeps_shape`` and
  ``high_watermarks_rise``;
* ``topic/<topic>``: the log-directory operations of a topic and its
  ``topic_deletion_completed``, for ``orphan_log_dirs`` (below);
* ``run``: controller elections, control requests and answers, node starts, deletion
  markers and completions, faults and refused transitions, for the other trace rules
  (``deletions_complete`` finishing at the run's last event; ``leader_in_isr`` keeps
  each partition's replicas across requests, so it must see all of a run's requests).

``orphan_log_dirs`` (``actors.invariants.OrphanLogDirs``) is the trace-only form of the
end-state rule ``no_orphan_log_dirs``, for an analysis that has no end state to read.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

import msgspec

from actors.invariants import (
    CHAOS_NODE,
    DEFAULT_DELETION_BOUND,
    GROUP_EVENTS,
    TRACE_RULES,
    TraceRule,
    refused_transitions,
)
from actors.invariants.trace_rules import DeletionsComplete, OrphanLogDirs
from protocol.trace import TraceEvent
from spark.schema import EVENT_COLUMNS

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column

__all__ = [
    "CHECK_KEYS",
    "GROUPED_COLUMNS",
    "ROUTED_RULES",
    "VIOLATION_SCHEMA",
    "arrow_rows",
    "check_groups",
    "check_selection",
    "check_sorted",
    "group_hash",
    "rules_of_group",
]

VIOLATION_SCHEMA: Final = (
    "run string, rule string, severity string, message string, seq long, ts double"
)
"""One row per violation (``severity`` = ``violation``) or notice (``notice``)."""

_PARTITION_RULES: Final = (
    "legal_transitions",
    "leader_epochs_increase",
    "alter_isr_keeps_shape",
    "high_watermarks_rise",
)
_PARTITION_EVENTS: Final = ("isr_altered", "isr_change_proposed", "high_watermark_moved")
"""Events of one partition that partition rules read besides its transitions."""
ROUTED_RULES: Final = frozenset(
    {
        *_PARTITION_RULES,
        "controller_epochs_increase",
        "one_controller_per_epoch",
        "no_stale_epoch_accepted",
        "leader_in_isr",
        "deletions_complete",
        "acknowledged_writes_kept",
        "one_record_per_offset",
        "follower_logs_match",
        "group_offsets_rise",
        "one_owner_per_partition",
        "groups_settle",
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
    "produce_result",
    "records_read",
    "replica_logs_read",
    "unclean_leader_elected",
    "data_rules",
    *GROUP_EVENTS,
)


def rules_of_group(group: str, *, deletion_bound: float) -> list[TraceRule]:
    """Fresh instances of the rules a group of events is checked by."""
    if group.startswith("partition/"):
        return [TRACE_RULES[name]() for name in _PARTITION_RULES]
    if group.startswith("topic/"):
        return [OrphanLogDirs()]
    return [
        DeletionsComplete(deletion_bound) if name == "deletions_complete" else make()
        for name, make in TRACE_RULES.items()
        if name not in _PARTITION_RULES
    ]


GROUPED_COLUMNS: Final = ("run", "group", *EVENT_COLUMNS, "end")
"""The columns ``check_sorted`` reads, in order: the event columns between the group key
and the run's last event time."""


def check_sorted(
    rows: Iterable[Sequence[Any]], *, deletion_bound: float = DEFAULT_DELETION_BOUND
) -> Iterator[tuple[str, str, str, str, int | None, float | None]]:
    """The violations and notices of grouped events: ``rows`` hold ``GROUPED_COLUMNS``,
    sorted by run, group and seq (each group's events contiguous, in order). Yields
    ``VIOLATION_SCHEMA`` tuples as each group ends (or as a rule reports, mid-group).

    Both the Spark job and the single-process pandas analysis feed their rows here, so
    the two apply the very same rule code."""
    decode = msgspec.json.Decoder(dict[str, Any]).decode
    current: tuple[str, str] | None = None
    rules: list[TraceRule] = []
    end = 0.0
    for run, group, seq, ts, node, actor, kind, type_, corr, fields, run_end in rows:
        if current is None or current[0] != run or current[1] != group:
            if current is not None:
                yield from _finished(current[0], rules, end)
            current = (run, group)
            rules = rules_of_group(group, deletion_bound=deletion_bound)
            end = float(run_end)
        event = TraceEvent(
            seq=int(seq),
            ts=float(ts),
            node=node,
            actor=actor,
            kind=kind,
            type=type_,
            corr=None if corr is None or corr != corr else int(corr),  # NaN from pandas
            fields=decode(fields),
        )
        for rule in rules:
            for v in rule.observe(event):
                yield (run, v.rule, "violation", v.message, v.seq, v.ts)
        if group == "run" and kind == "error" and type_ == "invalid_transition":
            for v in refused_transitions((event,)):
                yield (run, v.rule, "notice", v.message, v.seq, v.ts)
    if current is not None:
        yield from _finished(current[0], rules, end)


def _finished(
    run: str, rules: Sequence[TraceRule], end: float
) -> Iterator[tuple[str, str, str, str, int | None, float | None]]:
    for rule in rules:
        for v in rule.finish(end):
            yield (run, v.rule, "violation", v.message, v.seq, v.ts)
        for v in rule.notices():  # e.g. the data losses the run's scenario allowed
            yield (run, v.rule, "notice", v.message, v.seq, v.ts)


def arrow_rows(batches: Iterable[pa.RecordBatch]) -> Iterator[tuple[Any, ...]]:
    """The rows of Arrow batches as tuples, in order (what a ``mapInArrow`` function
    feeds to the shared per-event code)."""
    for batch in batches:
        yield from zip(*(column.to_pylist() for column in batch.columns), strict=True)


def group_hash(*keys: str) -> Column:
    """A hash of a group's key columns, to sort by first: a sort compares the 8-byte
    prefixes of its first column before whole rows, and the run labels (paths) share
    theirs. Rows of a group stay together and in order; groups come in hash order."""
    from pyspark.sql import functions as F

    return F.xxhash64(*keys)


def check_selection() -> Column:
    """The events some rule group needs (``check_groups``), by tests on the columns and
    the raw JSON: what ``check_groups`` reads is parsed only for these."""
    from pyspark.sql import functions as F

    kind, type_, node = F.col("kind"), F.col("type"), F.col("node")
    return (
        _partition_event()
        | (kind == "log_dir")
        | type_.isin(*_RUN_TYPES, "topic_deletion_completed")
        | ((node == CHAOS_NODE) & (kind == "fault"))
        | ((kind == "error") & (type_ == "invalid_transition"))
        | (
            (kind == "store")
            & (type_ == "create")
            & F.col("fields").contains("/admin/delete_topics/")
        )
    )


CHECK_KEYS: Final = ("topic", "partition", "path")
"""The keys of ``fields`` that ``check_groups`` reads (each parsed as text)."""


def _partition_event() -> Column:
    from pyspark.sql import functions as F

    kind, type_ = F.col("kind"), F.col("type")
    return ((kind == "transition") & type_.isin("partition", "replica")) | (
        (kind == "event") & type_.isin(*_PARTITION_EVENTS)
    )


def check_groups(topic: Column, partition: Column, path: Column) -> list[Column]:
    """The rule groups of an event selected by ``check_selection`` (null: not in that
    group), from its ``CHECK_KEYS`` parsed: its partition's, its topic's, its run's."""
    from pyspark.sql import functions as F

    kind, type_, node = F.col("kind"), F.col("type"), F.col("node")
    completed = (kind == "event") & (type_ == "topic_deletion_completed")
    marker = (
        (kind == "store")
        & (type_ == "create")
        & path.startswith("/admin/delete_topics/")
        & F.col("fields").contains("/admin/delete_topics/")
    )
    is_run_event = (
        type_.isin(*_RUN_TYPES)
        | ((node == CHAOS_NODE) & (kind == "fault"))
        | ((kind == "error") & (type_ == "invalid_transition"))
        | completed
        | marker
    )
    return [
        F.when(_partition_event(), F.concat_ws("/", F.lit("partition"), topic, partition)),
        F.when(
            ((kind == "log_dir") & topic.isNotNull()) | completed,
            F.concat_ws("/", F.lit("topic"), topic),
        ),
        F.when(is_run_event, F.lit("run")),
    ]
