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

Everything is computed from one cached read of the traces; only small per-run results
reach the driver.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from actors.invariants import DEFAULT_DELETION_BOUND
from protocol.control import LEADER_DURING_DELETE
from spark.checks import check_runs
from spark.progress import Progress
from spark.schema import TraceInput, read_traces, resolve_inputs

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "ANALYSIS_VERSION",
    "LIFECYCLE_COLUMNS",
    "PERCENTILES",
    "RATE_BUCKETS",
    "analyze",
    "analyze_events",
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


FIELD_KEYS: Final = (
    "topic",
    "topics",
    "partition",
    "to_state",
    "path",
    "result",
    "request",
    "src",
    "dst",
    "states",
    "stops",
    "env_kind",
    "event",
    "queue_time",
    "error",
    "op",
)
"""The keys of ``fields`` the jobs read, parsed once per event into the struct column ``f``
(each as text: nested values as their JSON)."""


def with_parsed_fields(events: DataFrame) -> DataFrame:
    """``events`` with the struct column ``f`` of ``FIELD_KEYS`` (added once)."""
    from pyspark.sql import functions as F

    if "f" in events.columns:
        return events
    schema = "struct<" + ", ".join(f"{key}: string" for key in FIELD_KEYS) + ">"
    return events.withColumn("f", F.from_json(F.col("fields"), schema))


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


def topic_events(events: DataFrame) -> DataFrame:
    """The events about each topic, one row per (event, topic): ``run, topic, seq, sub,
    ts, phase, partition, norm``. ``phase`` names the lifecycle step the event is
    (``created``, ``new_partition``, ``online``, ``marked``, ``update_metadata_deleted``,
    ``stop_replica_offline``, ``stop_replica_delete``, ``completed``, ``log_removed``)
    or is null; ``norm`` is its normalised text (seq, ts, corr and volatile keys left
    out); ``sub`` orders the rows of one event (a control request's entries)."""
    from pyspark.sql import functions as F

    events = with_parsed_fields(events)
    path = _field("path")
    topic = _field("topic")
    result = _field("result")
    base = F.concat_ws("|", "kind", "type", "node", "actor")

    # Transitions, log-directory operations and controller events naming one topic.
    named = events.where(
        topic.isNotNull() & (F.col("node") != "chaos") | (F.col("type") == "admin_result")
    )
    named = named.where(F.col("kind").isin("transition", "log_dir", "event", "error"))
    to_state = _field("to_state")
    named_phase = (
        F.when(
            (F.col("kind") == "transition") & (F.col("type") == "partition"),
            F.when(to_state == "OnlinePartition", "online").when(
                to_state == "NewPartition", "new_partition"
            ),
        )
        .when(F.col("type") == "topic_deletion_completed", "completed")
        .when(
            (F.col("kind") == "log_dir") & (F.col("type") == "remove") & (result == "ok"),
            "log_removed",
        )
    )
    named_rows = named.select(
        "run",
        topic.alias("topic"),
        "seq",
        F.lit(0).alias("sub"),
        "ts",
        named_phase.alias("phase"),
        _field("partition").cast("int").alias("partition"),
        F.concat_ws("|", base, normalised(F.col("fields"))).alias("norm"),
    )

    # Controller events naming several topics.
    listed = events.where((F.col("kind") == "event") & (F.col("node") != "chaos"))
    listed = listed.where(_field("topics").startswith("["))
    listed_rows = listed.select(
        "run",
        F.explode(F.from_json(_field("topics"), "array<string>")).alias("topic"),
        "seq",
        F.lit(0).alias("sub"),
        "ts",
        F.lit(None).cast("string").alias("phase"),
        F.lit(None).cast("int").alias("partition"),
        F.concat_ws("|", base, F.lit("topics")).alias("norm"),
    )

    # Store writes of a topic's znodes.
    store_topic = F.regexp_extract(
        path, r"^/(?:brokers/topics|admin/delete_topics|config/topics)/([^/]+)", 1
    )
    store = events.where(
        (F.col("kind") == "store") & F.col("type").isin("create", "multi", "set", "delete")
    ).where(store_topic != "")
    store_phase = F.when(
        (result == "ok") & F.col("type").isin("create", "multi"),
        F.when(path.rlike(r"^/brokers/topics/[^/]+$"), "created").when(
            path.rlike(r"^/admin/delete_topics/[^/]+$") & (F.col("type") == "create"), "marked"
        ),
    )
    store_rows = store.select(
        "run",
        store_topic.alias("topic"),
        "seq",
        F.lit(0).alias("sub"),
        "ts",
        store_phase.alias("phase"),
        F.lit(None).cast("int").alias("partition"),
        F.concat_ws(
            "|", base, F.regexp_replace(path, "^/[a-z_]+/[a-z_]+/[^/]+", "T"), result
        ).alias("norm"),
    )

    # Control requests: one row per partition entry.
    requests = events.where((F.col("node") == "chaos") & (F.col("type") == "control_request"))
    request = _field("request")
    entries = F.coalesce(
        F.from_json(_field("states"), "array<array<string>>"),
        F.from_json(_field("stops"), "array<array<string>>"),
    )
    exploded = requests.select(
        "run",
        "seq",
        "ts",
        request.alias("request"),
        _field("dst").alias("dst"),
        F.posexplode(entries).alias("sub", "entry"),
    )
    is_stop = F.col("request") == "StopReplicaRequest"
    entry_phase = F.when(
        (F.col("request") == "UpdateMetadataRequest")
        & (F.col("entry")[2].cast("int") == LEADER_DURING_DELETE),
        "update_metadata_deleted",
    ).when(
        is_stop,
        F.when(F.col("entry")[3] == "true", "stop_replica_delete").otherwise(
            "stop_replica_offline"
        ),
    )
    request_rows = exploded.select(
        "run",
        F.col("entry")[0].alias("topic"),
        "seq",
        (F.col("sub") + 1).alias("sub"),
        "ts",
        entry_phase.alias("phase"),
        F.col("entry")[1].cast("int").alias("partition"),
        F.concat_ws(
            "|", F.lit("control_request"), "request", "dst", F.to_json(F.col("entry"))
        ).alias("norm"),
    )
    return (
        named_rows.unionByName(listed_rows)
        .unionByName(store_rows)
        .unionByName(request_rows)
        .where(F.col("topic").isNotNull())
    )


def _lifecycles(key: tuple[Any, ...], pdf: pd.DataFrame) -> pd.DataFrame:
    """The generations of one topic from its phase rows (sorted here by seq)."""
    import pandas as pd

    run, topic = str(key[0]), str(key[1])
    gens: list[dict[str, Any]] = []

    def new_generation() -> dict[str, Any]:
        gen: dict[str, Any] = dict.fromkeys(LIFECYCLE_COLUMNS)
        gen["partitions_new"] = set()
        gen["partitions_online"] = {}
        gens.append(gen)
        return gen

    for row in pdf.sort_values(["seq", "sub"]).itertuples(index=False):
        phase, ts = row.phase, float(row.ts)
        if phase == "created":
            gen = new_generation()
            gen["created"] = ts
            continue
        gen = gens[-1] if gens else new_generation()
        partition = None if pd.isna(row.partition) else int(row.partition)
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
    rows: list[dict[str, Any]] = []
    for number, gen in enumerate(gens):
        partitions = gen["partitions_new"] or set(gen["partitions_online"])
        online = gen["partitions_online"]
        if partitions and all(p in online for p in partitions):
            gen["online"] = max(online[p] for p in partitions)
        end_of_deletion = gen["logs_gone"] if gen["logs_gone"] is not None else gen["znodes_gone"]
        rows.append(
            {
                "run": run,
                "topic": topic,
                "generation": number,
                "partitions": len(partitions),
                **{c: gen[c] for c in LIFECYCLE_COLUMNS},
                "creation_duration": _minus(gen["online"], gen["created"]),
                "deletion_duration": _minus(end_of_deletion, gen["marked"]),
            }
        )
    columns = ["run", "topic", "generation", "partitions", *LIFECYCLE_COLUMNS]
    columns += ["creation_duration", "deletion_duration"]
    return pd.DataFrame({c: pd.Series([r[c] for r in rows], dtype=object) for c in columns})


def _minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(a - b, 6)


# ----------------------------------------------------------------------------- metrics


def _latency(events: DataFrame) -> DataFrame:
    """One row per answered ask: ``run, key`` (the request type), ``value`` (seconds)."""
    from pyspark.sql import functions as F

    kind = _field("env_kind")
    asks = events.where((F.col("kind") == "send") & (kind == "ask")).select(
        "run",
        F.col("seq").alias("ask_seq"),
        F.col("ts").alias("ask_ts"),
        F.col("type").alias("request"),
        _field("src").alias("actor"),
        "corr",
    )
    replies = events.where((F.col("kind") == "deliver") & (kind == "reply")).select(
        "run",
        F.col("seq").alias("reply_seq"),
        F.col("ts").alias("reply_ts"),
        _field("dst").alias("actor"),
        "corr",
    )
    return (
        asks.join(replies, ["run", "actor", "corr"])
        .where(F.col("reply_seq") > F.col("ask_seq"))
        .groupBy("run", "ask_seq", "request", "ask_ts")
        .agg(F.min(F.struct("reply_seq", "reply_ts")).alias("reply"))
        .select(
            "run",
            F.lit("latency").alias("metric"),
            F.col("request").alias("key"),
            (F.col("reply.reply_ts") - F.col("ask_ts")).alias("value"),
        )
    )


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


def _metric_rows(events: DataFrame, ends: DataFrame) -> DataFrame:
    """Every per-run figure as ``run, metric, key, value`` rows, for one aggregation:
    ``latency`` and ``queue_time`` (value: seconds), ``by_type`` / ``by_node`` / ``rate``
    (sends; key: type, node, bucket) and ``error`` (key: the error name)."""
    from pyspark.sql import functions as F

    events = with_parsed_fields(events)
    none = F.lit(None).cast("double")
    sends = events.where(F.col("kind") == "send").join(F.broadcast(ends), "run")
    width = F.greatest(F.col("end") / RATE_BUCKETS, F.lit(1e-6))
    bucket = F.least(F.floor(F.col("ts") / width), F.lit(RATE_BUCKETS - 1)).cast("string")
    counted = sends.select(
        "run",
        F.explode(
            F.array(
                F.struct(F.lit("by_type").alias("metric"), F.col("type").alias("key")),
                F.struct(F.lit("by_node").alias("metric"), F.col("node").alias("key")),
                F.struct(F.lit("rate").alias("metric"), bucket.alias("key")),
            )
        ).alias("m"),
    ).select("run", "m.metric", "m.key", none.alias("value"))
    queue = events.where(
        (F.col("kind") == "event") & (F.col("type") == "controller_event_start")
    ).select(
        "run",
        F.lit("queue_time").alias("metric"),
        _field("event").alias("key"),
        _field("queue_time").cast("double").alias("value"),
    )
    errors = events.select(
        "run", F.lit("error").alias("metric"), _error_name().alias("key"), none.alias("value")
    ).where(F.col("key").isNotNull())
    return _latency(events).unionByName(queue).unionByName(counted).unionByName(errors)


def _metrics(events: DataFrame, ends: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    rows = _metric_rows(events, ends)
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
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    progress = progress or Progress("analyze", quiet=True)
    events = with_parsed_fields(events)
    owned = not events.is_cached  # a caller's cache is the caller's to drop
    if owned:
        events = events.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        with progress.stage("reading traces"):
            summary = events.groupBy("run").agg(
                F.count("*").alias("events"), F.max("ts").alias("end")
            )
            summary_rows = {r["run"]: r.asDict() for r in summary.collect()}
        ends = summary.select("run", "end")
        runs: dict[str, dict[str, Any]] = {}
        for run, first in sorted(summary_rows.items()):
            runs[run] = {
                "events": first["events"],
                "end": first["end"],
                "violations": [],
                "notices": [],
                "lifecycles": [],
                "latency": {},
                "messages": {"by_type": {}, "by_node": {}, "rate": [0] * RATE_BUCKETS},
                "queue_time": {},
                "errors": {},
            }
        with progress.stage("invariant checks"):
            found = check_runs(events, deletion_bound=deletion_bound).collect()
            for row in sorted(found, key=lambda r: (r["seq"] is None, r["seq"] or 0, r["rule"])):
                d = row.asDict()
                target = "violations" if d.pop("severity") == "violation" else "notices"
                runs[d.pop("run")][target].append(d)
        with progress.stage("topic lifecycles"):
            phases = topic_events(events).where(F.col("phase").isNotNull())
            lifecycles = (
                phases.select("run", "topic", "seq", "sub", "ts", "phase", "partition")
                .groupBy("run", "topic")
                .applyInPandas(_lifecycles, _LIFECYCLE_SCHEMA)
                .collect()
            )
            for row in sorted(lifecycles, key=lambda r: (r["topic"], r["generation"])):
                d = row.asDict()
                runs[d.pop("run")]["lifecycles"].append(d)
        with progress.stage("latencies, message counts, queue times, errors"):
            for row in _metrics(events, ends).collect():
                _add_metric(runs[row["run"]], row.asDict())
    finally:
        if owned:
            events.unpersist()
    for result in runs.values():
        _finish_run(result)
    return runs


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


def analyze(
    spark: SparkSession,
    traces: Sequence[str | Path] | Sequence[TraceInput],
    *,
    deletion_bound: float = DEFAULT_DELETION_BOUND,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """The analysis document of the given traces: ``{"kemu_trace_analysis": 1, "runs":
    {run: {...}}}`` (docs/spark.md)."""
    items = list(traces)
    inputs = (
        [i for i in items if isinstance(i, TraceInput)]
        if items and all(isinstance(i, TraceInput) for i in items)
        else resolve_inputs(i for i in items if not isinstance(i, TraceInput))
    )
    events = read_traces(spark, inputs)
    runs = analyze_events(events, deletion_bound=deletion_bound, progress=progress)
    sources = {i.run: str(i.path) for i in inputs}
    for run, result in runs.items():
        result["source"] = sources.get(run, run)
    return {"kemu_trace_analysis": ANALYSIS_VERSION, "runs": runs}
