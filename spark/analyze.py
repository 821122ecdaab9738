"""``kemu trace analyze``: what happened in each run of a set of traces, as one Spark job.

Per run (docs/spark.md lists every key of the result):

* ``violations`` / ``notices``: the invariant checks (``spark.checks``);
* ``lifecycles``: per topic and generation (a re-created topic starts a new one), the
  creation (topic znode written -> every partition online) and the deletion (marked ->
  UpdateMetadata with leader -2 -> StopReplica delete=false -> StopReplica delete=true ->
  znodes gone, i.e. ``topic_deletion_completed`` -> last log directory removed), each
  phase's time and the two durations;
* ``latency``: request -> answer times per request type (the ask's ``send`` to the
  ``deliver`` of the reply with the same correlation id to the same actor), percentiles;
* ``messages``: sends per type and per node, and a send-rate histogram over the run;
* ``queue_time``: the controller's event queue times and processing durations per event;
* ``errors``: error names seen (control answers, admin results, error events, store
  results other than ok) with their counts;
* ``operations`` (topic creations + deletions) and ``messages_per_operation``.

Nothing is cached in Spark: each stage scans the traces (Parquet reads only the columns it needs),
picks its events with cheap tests on the raw JSON, and parses only those, only the keys
it reads; the per-event Python work (rules and lifecycles, in one pass) streams through
``mapInArrow`` over partitions sorted by group. Only small per-run results reach the
driver; the session keeps them by file (``spark.memo``), so a file is analysed once per
session.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec

from actors.invariants import DEFAULT_DELETION_BOUND
from protocol.control import LEADER_DURING_DELETE
from spark.checks import (
    CHECK_KEYS,
    GROUPED_COLUMNS,
    VIOLATION_SCHEMA,
    arrow_rows,
    check_groups,
    check_selection,
    check_sorted,
    group_hash,
)
from spark.memo import AnalysisMemo
from spark.progress import Progress
from spark.schema import (
    EVENT_COLUMNS,
    TraceInput,
    check_inputs,
    inputs_of,
    parsed_fields,
    read_traces,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "ANALYSIS_VERSION",
    "LIFECYCLE_COLUMNS",
    "PERCENTILES",
    "PHASE_COLUMNS",
    "RATE_BUCKETS",
    "analyze",
    "analyze_events",
    "analyze_inputs",
    "empty_run",
    "file_findings",
    "file_lifecycles",
    "forget_analyses",
    "lifecycles_sorted",
    "topic_events",
    "with_parsed_fields",
]

ANALYSIS_VERSION: Final = 1
"""The version of the analysis JSON (``kemu_trace_analysis``)."""

PERCENTILES: Final = (0.5, 0.9, 0.99)
RATE_BUCKETS: Final = 50
"""The send-rate histogram splits each run's time into this many buckets."""

LIFECYCLE_COLUMNS: Final = (
    "created",
    "online",
    "marked",
    "update_metadata_deleted",
    "stop_replica_offline",
    "stop_replica_delete",
    "znodes_gone",
    "logs_gone",
)
"""The phase times of a topic generation, in lifecycle order (null: not reached)."""

_LIFECYCLE_SCHEMA: Final = (
    "run string, topic string, generation int, partitions int, "
    + ", ".join(f"{c} double" for c in LIFECYCLE_COLUMNS)
    + ", creation_duration double, deletion_duration double"
)

_VOLATILE_KEYS: Final = (
    "session",
    "broker_epoch",
    "epoch_zk_version",
    "zk_version",
    "due",
    "delay",
    "queue_time",
    "duration",
)
"""Keys of ``fields`` dropped from the normalised form of an event (docs/spark.md)."""

_VOLATILE_FIELD: Final = (
    r'"(?:' + "|".join(_VOLATILE_KEYS) + r')":(?:-?[0-9.eE+-]+|null|true|false|"[^"]*"),?'
)
_UUID: Final = r"[0-9a-f]{32}"


def with_parsed_fields(events: DataFrame, *keys: str) -> DataFrame:
    """``events`` with the struct column ``f`` of the given keys of ``fields``, each as
    text (``spark.schema.parsed_fields``)."""
    return events.withColumn("f", parsed_fields(dict.fromkeys(keys, "string")))


def _has(text: str) -> Column:
    """The raw ``fields`` JSON contains ``text``: a cheap test before parsing."""
    from pyspark.sql import functions as F

    return F.col("fields").contains(text)


def _field(name: str) -> Column:
    from pyspark.sql import functions as F

    return F.col("f").getField(name)


def normalised(fields: Column) -> Column:
    """``fields`` JSON without its volatile keys, uuids replaced by ``*``."""
    from pyspark.sql import functions as F

    text = F.regexp_replace(fields, _VOLATILE_FIELD, "")
    text = F.regexp_replace(text, ",}", "}")
    return F.regexp_replace(text, _UUID, "*")


# ----------------------------------------------------------------------------- topics


_TOPIC_KEYS: Final = (
    "topic",
    "to_state",
    "result",
    "partition",
    "topics",
    "path",
    "request",
    "dst",
    "states",
    "stops",
)
"""The keys of ``fields`` that the topic rows read (each parsed as text)."""


def _topic_selection(*, phases_only: bool) -> dict[str, Column]:
    """The cheap tests on the raw JSON that pick the events with topic rows, by kind of
    row: ``_named`` (an event naming one topic), ``_listed`` (a controller event naming
    several), ``_store`` (a store write of a topic's znodes) and ``_request`` (a control
    request, one row per partition entry). ``phases_only``: only the events that can have
    a lifecycle phase, the tests then tighter."""
    from pyspark.sql import functions as F

    kind, type_, node = F.col("kind"), F.col("type"), F.col("node")
    anything = F.lit(True)

    # Transitions, log-directory operations and controller events naming one topic.
    maybe_phase = (
        (kind == "transition")
        & (type_ == "partition")
        & (_has('"to_state":"OnlinePartition"') | _has('"to_state":"NewPartition"'))
        | (type_ == "topic_deletion_completed")
        | ((kind == "log_dir") & (type_ == "remove"))
    )
    named_candidate = (
        kind.isin("transition", "log_dir", "event", "error")
        & _has('"topic"')
        & (maybe_phase if phases_only else anything)
    )
    # Controller events naming several topics (never a phase).
    listed_candidate = (
        (kind == "event") & (node != "chaos") & _has('"topics":[') & F.lit(not phases_only)
    )
    # Store writes of a topic's znodes.
    topic_or_marker = _has('"path":"/brokers/topics/') | _has('"path":"/admin/delete_topics/')
    store_candidate = (
        (kind == "store")
        & type_.isin("create", "multi", "set", "delete")
        & ((type_.isin("create", "multi") & topic_or_marker) if phases_only else anything)
    )
    # Control requests: one row per partition entry.
    deleting = (
        _has('"request":"UpdateMetadataRequest"') & _has(f",{LEADER_DURING_DELETE},")
    ) | _has('"request":"StopReplicaRequest"')
    request_candidate = (
        (node == "chaos") & (type_ == "control_request") & (deleting if phases_only else anything)
    )
    return {
        "_named": named_candidate,
        "_listed": listed_candidate,
        "_store": store_candidate,
        "_request": request_candidate,
    }


def _any(conditions: Iterable[Column]) -> Column:
    """The disjunction of ``conditions``."""
    from functools import reduce
    from operator import or_

    return reduce(or_, conditions)


def _topic_rows(
    row: Callable[[Column, Column, Column, Column, Column], Column], rows_type: str
) -> Column:
    """The topic rows of an event parsed with ``_TOPIC_KEYS`` (column ``f``) and flagged
    with ``_topic_selection``'s columns, as an array (of type ``rows_type``) of
    ``row(topic, sub, phase, partition, norm)``."""
    from pyspark.sql import functions as F

    kind, type_, node = F.col("kind"), F.col("type"), F.col("node")
    base = F.concat_ws("|", "kind", "type", "node", "actor")
    null_text = F.lit(None).cast("string")
    null_int = F.lit(None).cast("int")
    no_rows = F.array().cast(rows_type)

    def only(condition: Column, rows: Column) -> Column:
        return F.coalesce(F.when(condition, rows), no_rows)

    topic, result, to_state = _field("topic"), _field("result"), _field("to_state")
    named_phase = (
        F.when(
            (kind == "transition") & (type_ == "partition"),
            F.when(to_state == "OnlinePartition", "online").when(
                to_state == "NewPartition", "new_partition"
            ),
        )
        .when(type_ == "topic_deletion_completed", "completed")
        .when((kind == "log_dir") & (type_ == "remove") & (result == "ok"), "log_removed")
    )
    named = only(
        F.col("_named") & (topic.isNotNull() & (node != "chaos") | (type_ == "admin_result")),
        F.array(
            row(
                topic,
                F.lit(0),
                named_phase,
                _field("partition").cast("int"),
                F.concat_ws("|", base, normalised(F.col("fields"))),
            )
        ),
    )
    listed = only(
        F.col("_listed") & _field("topics").startswith("["),
        F.transform(
            F.from_json(_field("topics"), "array<string>"),
            lambda t: row(
                t, F.lit(0), null_text, null_int, F.concat_ws("|", base, F.lit("topics"))
            ),
        ),
    )
    path = _field("path")
    store_topic = F.regexp_extract(
        path, r"^/(?:brokers/topics|admin/delete_topics|config/topics)/([^/]+)", 1
    )
    store_phase = F.when(
        (result == "ok") & type_.isin("create", "multi"),
        F.when(path.rlike(r"^/brokers/topics/[^/]+$"), "created").when(
            path.rlike(r"^/admin/delete_topics/[^/]+$") & (type_ == "create"), "marked"
        ),
    )
    store = only(
        F.col("_store") & (store_topic != ""),
        F.array(
            row(
                store_topic,
                F.lit(0),
                store_phase,
                null_int,
                F.concat_ws(
                    "|", base, F.regexp_replace(path, "^/[a-z_]+/[a-z_]+/[^/]+", "T"), result
                ),
            )
        ),
    )
    request = _field("request")
    entries = F.coalesce(
        F.from_json(_field("states"), "array<array<string>>"),
        F.from_json(_field("stops"), "array<array<string>>"),
    )

    def entry_row(entry: Column, index: Column) -> Column:
        phase = F.when(
            (request == "UpdateMetadataRequest") & (entry[2].cast("int") == LEADER_DURING_DELETE),
            "update_metadata_deleted",
        ).when(
            request == "StopReplicaRequest",
            F.when(entry[3] == "true", "stop_replica_delete").otherwise("stop_replica_offline"),
        )
        norm = F.concat_ws("|", F.lit("control_request"), request, _field("dst"), F.to_json(entry))
        return row(entry[0], index + 1, phase, entry[1].cast("int"), norm)

    requests = only(F.col("_request"), F.transform(entries, entry_row))
    return F.concat(named, listed, store, requests)


def topic_events(events: DataFrame) -> DataFrame:
    """The events about each topic, one row per (event, topic): ``run, topic, seq, sub,
    ts, phase, partition, norm``. ``phase`` names the lifecycle step the event is
    (``created``, ``new_partition``, ``online``, ``marked``, ``update_metadata_deleted``,
    ``stop_replica_offline``, ``stop_replica_delete``, ``completed``, ``log_removed``)
    or is null; ``norm`` is its normalised text (seq, ts, corr and volatile keys left
    out); ``sub`` orders the rows of one event (a control request's entries).

    One scan: cheap tests on the raw JSON pick the candidate events, each is parsed once,
    and yields an array of its topic rows, exploded. The lifecycles read the rows with a
    phase in the invariant checks' pass instead (``analyze_events``)."""
    from pyspark.sql import functions as F

    selection = _topic_selection(phases_only=False)
    parsed = with_parsed_fields(events.where(_any(selection.values())), *_TOPIC_KEYS).select(
        "*", *(condition.alias(name) for name, condition in selection.items())
    )

    def row(topic: Column, sub: Column, phase: Column, partition: Column, norm: Column) -> Column:
        return F.struct(
            topic.alias("topic"),
            sub.alias("sub"),
            phase.alias("phase"),
            partition.alias("partition"),
            norm.alias("norm"),
        )

    rows_type = (
        "array<struct<topic: string, sub: int, phase: string, partition: int, norm: string>>"
    )
    found = parsed.select(
        "run", "seq", "ts", F.explode(_topic_rows(row, rows_type)).alias("r")
    ).select(
        "run",
        F.col("r.topic").alias("topic"),
        "seq",
        F.col("r.sub").alias("sub"),
        "ts",
        F.col("r.phase").alias("phase"),
        F.col("r.partition").alias("partition"),
        F.col("r.norm").alias("norm"),
    )
    return found.where(F.col("topic").isNotNull())


PHASE_COLUMNS: Final = ("run", "topic", "seq", "sub", "ts", "phase", "partition")
"""The columns ``lifecycles_sorted`` reads, in order."""


def lifecycles_sorted(rows: Iterable[Sequence[Any]]) -> Iterator[dict[str, Any]]:
    """The generations of each topic from its phase rows (``PHASE_COLUMNS``, sorted by
    run, topic, seq and sub): one ``_LIFECYCLE_SCHEMA`` dict per generation.

    The Spark job and the single-process pandas analysis both feed their rows here."""
    current: tuple[str, str] | None = None
    gens: list[dict[str, Any]] = []
    for run, topic, _seq, _sub, ts, phase, partition in rows:
        if current is None or current[0] != run or current[1] != topic:
            if current is not None:
                yield from _generations(current[0], current[1], gens)
            current, gens = (run, topic), []
        _add_phase(gens, phase, float(ts), partition)
    if current is not None:
        yield from _generations(current[0], current[1], gens)


def _new_generation(gens: list[dict[str, Any]]) -> dict[str, Any]:
    gen: dict[str, Any] = dict.fromkeys(LIFECYCLE_COLUMNS)
    gen["partitions_new"] = set()
    gen["partitions_online"] = {}
    gens.append(gen)
    return gen


def _add_phase(gens: list[dict[str, Any]], phase: str, ts: float, partition: Any) -> None:
    if phase == "created":
        _new_generation(gens)["created"] = ts
        return
    gen = gens[-1] if gens else _new_generation(gens)
    partition = None if partition is None or partition != partition else int(partition)
    if phase == "new_partition" and partition is not None:
        gen["partitions_new"].add(partition)
    elif phase == "online" and partition is not None:
        gen["partitions_online"].setdefault(partition, ts)
    elif phase == "marked" and gen["marked"] is None:
        gen["marked"] = ts
    elif phase in ("update_metadata_deleted", "stop_replica_offline", "stop_replica_delete"):
        if gen["marked"] is not None and gen[phase] is None:
            gen[phase] = ts
    elif phase == "completed":
        gen["znodes_gone"] = ts
    elif phase == "log_removed":
        marked = [g for g in gens if g["marked"] is not None]
        if marked:
            marked[-1]["logs_gone"] = ts


def _generations(run: str, topic: str, gens: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for number, gen in enumerate(gens):
        partitions = gen["partitions_new"] or set(gen["partitions_online"])
        online = gen["partitions_online"]
        if partitions and all(p in online for p in partitions):
            gen["online"] = max(online[p] for p in partitions)
        end_of_deletion = gen["logs_gone"] if gen["logs_gone"] is not None else gen["znodes_gone"]
        yield {
            "run": run,
            "topic": topic,
            "generation": number,
            "partitions": len(partitions),
            **{c: gen[c] for c in LIFECYCLE_COLUMNS},
            "creation_duration": _minus(gen["online"], gen["created"]),
            "deletion_duration": _minus(end_of_deletion, gen["marked"]),
        }


_LIFECYCLE_NAMES: Final = (
    "run",
    "topic",
    "generation",
    "partitions",
    *LIFECYCLE_COLUMNS,
    "creation_duration",
    "deletion_duration",
)
"""The columns of ``_LIFECYCLE_SCHEMA``, in order."""

_LIFE: Final = "life/"
"""The group of a topic's lifecycle rows is ``life/<topic>`` (the rule groups are
``partition/...``, ``topic/...`` and ``run``: ``spark.checks``)."""

_GROUP_COLUMNS: Final = (*GROUPED_COLUMNS, "sub", "phase", "partition")
"""The columns of the checks' and lifecycles' pass, in order: a rule group's events
(``GROUPED_COLUMNS``; ``sub``, ``phase`` and ``partition`` null), or a lifecycle group's
phase rows (``group``: ``life/<topic>``; ``fields`` null)."""

_FOUND_SCHEMA: Final = (
    VIOLATION_SCHEMA
    + ", topic string, generation int, partitions int, "
    + ", ".join(f"{c} double" for c in LIFECYCLE_COLUMNS)
    + ", creation_duration double, deletion_duration double"
)
"""What that pass finds: a violation or notice (``VIOLATION_SCHEMA``; ``topic`` null)
or a topic generation's lifecycle (``_LIFECYCLE_SCHEMA``; ``rule`` null)."""


def _group_batches(deletion_bound: float) -> Any:
    """The ``mapInArrow`` function of the checks' and lifecycles' pass: ``_GROUP_COLUMNS``
    rows (sorted within the Spark partition by group, seq and sub) in, ``_FOUND_SCHEMA``
    rows out. Rule groups stream through ``check_sorted``, each lifecycle group through
    ``lifecycles_sorted`` as it ends."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        lifecycles: list[dict[str, Any]] = []

        def rule_rows() -> Iterator[tuple[Any, ...]]:
            phases: list[tuple[Any, ...]] = []
            for row in arrow_rows(batches):
                group = row[1]
                if not group.startswith(_LIFE):
                    yield row[:-3]
                    continue
                topic = group[len(_LIFE) :]
                if phases and (phases[-1][1] != topic or phases[-1][0] != row[0]):
                    lifecycles.extend(lifecycles_sorted(phases))
                    phases = []
                phases.append((row[0], topic, row[2], row[-3], row[3], row[-2], row[-1]))
            lifecycles.extend(lifecycles_sorted(phases))

        found = list(check_sorted(rule_rows(), deletion_bound=deletion_bound))
        blank = [None] * len(lifecycles)
        columns = [list(c) for c in zip(*found, strict=True)] if found else [[]] * 6
        columns = [c + blank for c in columns]
        columns[0] = columns[0][: len(found)] + [g["run"] for g in lifecycles]
        nothing = [None] * len(found)
        columns += [nothing + [g[n] for g in lifecycles] for n in _LIFECYCLE_NAMES[1:]]
        names = ["run", "rule", "severity", "message", "seq", "ts", *_LIFECYCLE_NAMES[1:]]
        types = [pa.string()] * 4 + [pa.int64(), pa.float64(), pa.string()]
        types += [pa.int32(), pa.int32()] + [pa.float64()] * (len(_LIFECYCLE_NAMES) - 4)
        yield pa.RecordBatch.from_arrays(
            [pa.array(c, type=t) for c, t in zip(columns, types, strict=True)], names=names
        )

    return run


def _checks_and_lifecycles(
    events: DataFrame, ends: DataFrame, *, deletion_bound: float
) -> DataFrame:
    """The invariant checks and the topic lifecycles of every run, in one pass over the
    events (``_FOUND_SCHEMA`` rows, unordered): the events the rule groups need
    (``spark.checks.check_selection``) and those with a lifecycle phase are picked,
    parsed once, and exploded into their rule groups' rows and their lifecycle rows;
    one shuffle by group and one sort bring each group's rows together in order, and
    one Python worker per partition runs the rules and the lifecycles over them."""
    from pyspark.sql import functions as F

    topics = _topic_selection(phases_only=True)
    del topics["_listed"]  # no phase
    wanted = check_selection() | _any(topics.values())
    keys = dict.fromkeys((*CHECK_KEYS, *_TOPIC_KEYS))
    parsed = with_parsed_fields(events.where(wanted), *keys).select(
        "*", F.lit(False).alias("_listed"), *(c.alias(n) for n, c in topics.items())
    )
    null_text = F.lit(None).cast("string")
    null_int = F.lit(None).cast("int")

    def group_row(
        group: Column, life: bool, sub: Column, phase: Column, partition: Column
    ) -> Column:
        return F.struct(
            group.alias("group"),
            F.lit(life).alias("life"),
            sub.alias("sub"),
            phase.alias("phase"),
            partition.alias("partition"),
        )

    def life_row(
        topic: Column, sub: Column, phase: Column, partition: Column, _norm: Column
    ) -> Column:
        return group_row(F.concat(F.lit(_LIFE), topic), True, sub, phase, partition)

    rows_type = (
        "array<struct<group: string, life: boolean, sub: int, phase: string, partition: int>>"
    )
    rule_groups = check_groups(_field("topic"), _field("partition"), _field("path"))
    rows = F.concat(
        F.array(*(group_row(g, False, null_int, null_text, null_int) for g in rule_groups)),
        _topic_rows(life_row, rows_type),
    )
    g = F.col("g")
    life = g.getField("life")
    grouped = (
        parsed.select("run", F.explode(rows).alias("g"), *EVENT_COLUMNS)
        .where(g.getField("group").isNotNull() & (~life | g.getField("phase").isNotNull()))
        .select(
            "run",
            g.getField("group").alias("group"),
            *(c for c in EVENT_COLUMNS if c != "fields"),
            F.when(~life, F.col("fields")).alias("fields"),
            g.getField("sub").alias("sub"),
            g.getField("phase").alias("phase"),
            g.getField("partition").alias("partition"),
        )
    )
    partitions = 4 * events.sparkSession.sparkContext.defaultParallelism
    return (
        grouped.join(F.broadcast(ends), "run")
        .select(*_GROUP_COLUMNS)
        .repartition(partitions, "run", "group")
        .sortWithinPartitions(group_hash("run", "group"), "run", "group", "seq", "sub")
        .mapInArrow(_group_batches(deletion_bound), _FOUND_SCHEMA)
    )


def _minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(a - b, 6)


# ----------------------------------------------------------------------------- metrics


def _error_name() -> Column:
    from pyspark.sql import functions as F

    error = _field("error")
    result = _field("result")
    return (
        F.when(
            F.col("type") == "control_response",
            F.when(error != "NONE", F.concat_ws(" ", _field("request"), error)),
        )
        .when(
            F.col("type") == "admin_result",
            F.when(error != "NONE", F.concat_ws(" ", _field("op"), error)),
        )
        .when(F.col("kind") == "error", F.concat_ws(" ", F.lit("error"), "type", error))
        .when(
            (F.col("kind").isin("store", "log_dir")) & result.isNotNull() & (result != "ok"),
            F.concat_ws(" ", "kind", "type", result),
        )
    )


def _metric_rows(events: DataFrame) -> DataFrame:
    """The per-run figures with values as ``run, metric, key, value`` rows, for one
    aggregation: ``latency`` (key: the request type) and ``queue_time`` (key: the
    controller event; value: seconds) and ``error`` (key: the error name; no value). The
    sends are counted apart (``_send_counts``).

    One scan of the traces: the asks, the replies, the controller's event starts and the
    possible errors are picked by cheap tests and parsed once. An ask's latency is the
    time to the first reply after it with its correlation id to its actor (a window over
    actor and correlation id ordered by seq; the other rows each have a window of their
    own)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    kind, type_ = F.col("kind"), F.col("type")
    send = kind == "send"
    asked = send & _has('"env_kind":"ask"')
    replied = (kind == "deliver") & _has('"env_kind":"reply"')
    start = (kind == "event") & (type_ == "controller_event_start")
    failed = kind.isin("store", "log_dir") & _has('"result":') & ~_has('"result":"ok"')
    maybe_error = ~send & (
        type_.isin("control_response", "admin_result") | (kind == "error") | failed
    )
    keys = ("env_kind", "src", "dst", "event", "queue_time", "request", "op", "error", "result")
    candidates = with_parsed_fields(events.where(asked | replied | start | maybe_error), *keys)
    env_kind = _field("env_kind")
    ask = send & (env_kind == "ask")
    reply = (kind == "deliver") & (env_kind == "reply")
    paired = (ask | reply) & F.col("corr").isNotNull()
    rows = candidates.select(
        "run",
        "seq",
        "ts",
        F.when(paired, F.when(ask, _field("src")).otherwise(_field("dst"))).alias("actor"),
        F.when(paired, F.col("corr")).alias("pair_corr"),
        F.when(~paired, F.col("seq")).alias("lone"),
        F.when(paired & ask, type_).alias("request"),
        (paired & reply).alias("reply"),
        start.alias("start"),
        F.when(start, _field("event")).alias("event"),
        F.when(start, _field("queue_time").cast("double")).alias("queue_time"),
        F.when(maybe_error, _error_name()).alias("error"),
    )
    # The hash first: rows are sorted by the window's keys in order, and a sort compares
    # 8-byte prefixes of its first key (the run labels' would all tie).
    window_keys = ("run", "lone", "actor", "pair_corr")
    following = (
        Window.partitionBy(group_hash(*window_keys), *window_keys)
        .orderBy("seq")
        .rowsBetween(1, Window.unboundedFollowing)
    )
    answer = F.first(F.when(F.col("reply"), F.col("ts")), ignorenulls=True).over(following)

    def figure(metric: str, key: Column, value: Column) -> Column:
        return F.struct(F.lit(metric).alias("metric"), key.alias("key"), value.alias("value"))

    request, event, error = F.col("request"), F.col("event"), F.col("error")
    figures = F.array(
        F.when(
            request.isNotNull() & F.col("answer").isNotNull(),
            figure("latency", request, F.col("answer") - F.col("ts")),
        ),
        F.when(F.col("start"), figure("queue_time", event, F.col("queue_time"))),
        F.when(error.isNotNull(), figure("error", error, F.lit(None).cast("double"))),
    )
    return (
        rows.select("*", answer.alias("answer"))
        .select("run", F.explode(F.array_compact(figures)).alias("m"))
        .select("run", "m.metric", "m.key", "m.value")
    )


def _send_counts(events: DataFrame, ends: DataFrame) -> DataFrame:
    """The sends counted per run by type (``by_type``), by node (``by_node``) and by
    bucket of the run's time (``rate``), as ``run, metric, key, count`` rows: one
    aggregation over grouping sets of the columns alone (``fields`` is not read)."""
    from pyspark.sql import functions as F

    width = F.greatest(F.col("end") / RATE_BUCKETS, F.lit(1e-6))
    bucket = F.least(F.floor(F.col("ts") / width), F.lit(RATE_BUCKETS - 1)).cast("string")
    sends = (
        events.where(F.col("kind") == "send")
        .join(F.broadcast(ends), "run")
        .select("run", "type", "node", bucket.alias("bucket"))
    )
    counted = sends.groupingSets(
        [("run", "type"), ("run", "node"), ("run", "bucket")], "run", "type", "node", "bucket"
    ).agg(F.count("*").alias("count"), F.grouping_id().alias("set"))
    # grouping_id's bits (run, type, node, bucket) say which are left out: 0b0011 keeps
    # type, 0b0101 node, 0b0110 the bucket.
    metric = F.when(F.col("set") == 0b0011, "by_type").when(F.col("set") == 0b0101, "by_node")
    key = F.when(F.col("set") == 0b0011, F.col("type")).when(F.col("set") == 0b0101, F.col("node"))
    return counted.select(
        "run",
        metric.otherwise("rate").alias("metric"),
        key.otherwise(F.col("bucket")).alias("key"),
        "count",
    )


def _metrics(events: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    rows = _metric_rows(events)
    approx = F.percentile_approx("value", list(PERCENTILES), 10_000)
    return rows.groupBy("run", "metric", "key").agg(
        F.count("*").alias("count"),
        F.max("value").alias("max"),
        *[approx[i].alias(name) for i, name in enumerate(_PCT_NAMES)],
    )


_PCT_NAMES: Final = tuple(f"p{round(p * 100)}" for p in PERCENTILES)


# ----------------------------------------------------------------------------- the job


def analyze_events(
    events: DataFrame,
    *,
    deletion_bound: float = DEFAULT_DELETION_BOUND,
    progress: Progress | None = None,
) -> dict[str, dict[str, Any]]:
    """The analysis of every run in ``events`` (``read_traces``' columns), by run label."""
    from pyspark.sql import functions as F

    progress = progress or Progress("analyze", quiet=True)
    with progress.stage("reading traces"):
        summary = events.groupBy("run").agg(F.count("*").alias("events"), F.max("ts").alias("end"))
        summary_rows = {r["run"]: r.asDict() for r in summary.collect()}
    # The runs' ends as a local relation: joining it scans no trace again.
    ends = events.sparkSession.createDataFrame(
        [(run, first["end"]) for run, first in sorted(summary_rows.items())],
        "run string, end double",
    )
    runs = {
        run: empty_run(first["events"], first["end"]) for run, first in sorted(summary_rows.items())
    }
    with progress.stage("invariant checks and topic lifecycles"):
        found = _checks_and_lifecycles(events, ends, deletion_bound=deletion_bound).collect()
        file_findings(runs, (tuple(row[:6]) for row in found if row["topic"] is None))
        file_lifecycles(
            runs,
            ({n: row[n] for n in _LIFECYCLE_NAMES} for row in found if row["topic"] is not None),
        )
    with progress.stage("latencies, message counts, queue times, errors"):
        for row in _metrics(events).collect():
            _add_metric(runs[row["run"]], row.asDict())
        for row in _send_counts(events, ends).collect():
            _add_metric(runs[row["run"]], row.asDict())
    for result in runs.values():
        _finish_run(result)
    return runs


def file_findings(runs: dict[str, dict[str, Any]], found: Iterable[Sequence[Any]]) -> None:
    """Add ``VIOLATION_SCHEMA`` rows (tuples or Spark rows) to their runs' violations or
    notices, in trace order (then by rule and message: the same order whichever engine
    found them)."""
    for run, rule, severity, message, seq, ts in sorted(
        found, key=lambda v: (v[4] is None, v[4] or 0, v[1], v[3])
    ):
        target = "violations" if severity == "violation" else "notices"
        runs[run][target].append({"rule": rule, "message": message, "seq": seq, "ts": ts})


def file_lifecycles(runs: dict[str, dict[str, Any]], found: Iterable[dict[str, Any]]) -> None:
    """Add lifecycle dicts (``_LIFECYCLE_SCHEMA``) to their runs, by topic and generation."""
    for life in sorted(found, key=lambda d: (d["topic"], d["generation"])):
        runs[life.pop("run")]["lifecycles"].append(life)


def empty_run(events: int, end: float) -> dict[str, Any]:
    """A run's analysis before anything is added to it."""
    return {
        "events": events,
        "end": end,
        "violations": [],
        "notices": [],
        "lifecycles": [],
        "latency": {},
        "messages": {"by_type": {}, "by_node": {}, "rate": [0] * RATE_BUCKETS},
        "queue_time": {},
        "errors": {},
    }


def _add_metric(result: dict[str, Any], row: dict[str, Any]) -> None:
    metric, key = row["metric"], row["key"]
    if metric in ("latency", "queue_time"):
        stats = {name: row[name] for name in _PCT_NAMES}
        result[metric][key] = {**stats, "max": row["max"], "count": row["count"]}
    elif metric == "rate":
        result["messages"]["rate"][int(key)] = row["count"]
    elif metric == "error":
        result["errors"][key] = row["count"]
    else:
        result["messages"][metric][key] = row["count"]


def _finish_run(result: dict[str, Any]) -> None:
    """Sort what came back unordered; derive the per-operation figures."""
    messages = result["messages"]
    messages["by_type"] = dict(sorted(messages["by_type"].items()))
    messages["by_node"] = dict(sorted(messages["by_node"].items()))
    result["latency"] = dict(sorted(result["latency"].items()))
    result["queue_time"] = dict(sorted(result["queue_time"].items()))
    result["errors"] = dict(sorted(result["errors"].items()))
    lifecycles = result["lifecycles"]
    operations = sum(1 for c in lifecycles if c["created"] is not None)
    operations += sum(1 for c in lifecycles if c["marked"] is not None)
    result["operations"] = operations
    result["messages_per_operation"] = {
        name: round(count / max(operations, 1), 6) for name, count in messages["by_type"].items()
    }
    width = result["end"] / RATE_BUCKETS if result["end"] else 0.0
    messages["rate_bucket_seconds"] = width


_MEMOS: Final[weakref.WeakKeyDictionary[SparkSession, AnalysisMemo]] = weakref.WeakKeyDictionary()
"""Each live session's analyses of trace files (``spark.memo``)."""


def forget_analyses(spark: SparkSession) -> None:
    """Drop the analyses ``spark`` holds: every trace is analysed again."""
    _MEMOS.pop(spark, None)


def analyze_inputs(
    spark: SparkSession,
    inputs: Sequence[TraceInput],
    *,
    deletion_bound: float = DEFAULT_DELETION_BOUND,
    progress: Progress | None = None,
) -> dict[str, dict[str, Any]]:
    """``analyze_events`` of the traces of ``inputs``, by run label; a file this session
    has already analysed with the same ``deletion_bound`` (and not changed since) is not
    analysed again: its result is copied under its label here (``spark.memo``)."""
    progress = progress or Progress("analyze", quiet=True)
    check_inputs(inputs)
    memo = _MEMOS.setdefault(spark, AnalysisMemo())
    keys = {item.run: memo.key(item, (deletion_bound,)) for item in inputs}
    runs: dict[str, dict[str, Any]] = {}
    for item in inputs:
        found = memo.get(keys[item.run])
        if found is not None:
            runs[item.run] = found
    if runs:
        progress.note(f"{len(runs)} of {len(inputs)} trace(s) analysed before in this session")
    missing = [item for item in inputs if item.run not in runs]
    if missing:
        # During the jobs each file is labelled by its position here: every row of every
        # shuffle carries its run, and a label is often a path. The labels come back on
        # the collected results.
        labels = {str(n): item.run for n, item in enumerate(missing)}
        events = read_traces(
            spark, [msgspec.structs.replace(item, run=str(n)) for n, item in enumerate(missing)]
        )
        made = {
            labels.get(run, run): result  # an unmatched file keeps its URI (spark.schema)
            for run, result in analyze_events(
                events, deletion_bound=deletion_bound, progress=progress
            ).items()
        }
        for item in missing:
            if item.run in made:
                memo.put(keys[item.run], made[item.run])
        runs.update(made)
    return {run: runs[run] for run in sorted(runs)}


def analyze(
    spark: SparkSession,
    traces: Sequence[str | Path] | Sequence[TraceInput],
    *,
    deletion_bound: float = DEFAULT_DELETION_BOUND,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """The analysis document of the given traces: ``{"kemu_trace_analysis": 1, "runs":
    {run: {...}}}`` (docs/spark.md)."""
    inputs = inputs_of(traces)
    runs = analyze_inputs(spark, inputs, deletion_bound=deletion_bound, progress=progress)
    sources = {i.run: str(i.path) for i in inputs}
    for run, result in runs.items():
        result["source"] = sources.get(run, run)
    return {"kemu_trace_analysis": ANALYSIS_VERSION, "runs": runs}
