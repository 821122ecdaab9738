"""The trace analysis and diff in this process with pandas: the local engine of ``kemu
trace analyze`` and ``kemu trace diff`` (``--engine local``, the default; ``spark.engine``).

``analyze_pandas`` and ``diff_pandas`` compute the documents of the Spark jobs
(docs/spark.md) without Spark: the same selections, written with pandas, and the very same
per-event code where the work is Python anyway (the invariant rules through
``spark.checks.check_sorted``, the lifecycles through ``spark.analyze.lifecycles_sorted``,
the comparison of two analyses through ``spark.diff.compare``). The tests check that both
engines give the same documents, which cross-checks each; ``scripts/bench.sh`` row [9]
times the two side by side.

It reads one run at a time and holds all of that run's events in memory (about 1 GB per
million events), so runs beyond ``spark.engine.LOCAL_EVENT_LIMIT`` go to Spark unless an
engine is named.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec

from actors.invariants import CHAOS_NODE, DEFAULT_DELETION_BOUND
from protocol.control import LEADER_DURING_DELETE
from spark.analyze import (
    _PCT_NAMES,
    _UUID,
    _VOLATILE_FIELD,
    ANALYSIS_VERSION,
    PERCENTILES,
    PHASE_COLUMNS,
    RATE_BUCKETS,
    _add_metric,
    _finish_run,
    empty_run,
    file_findings,
    file_lifecycles,
    lifecycles_sorted,
)
from spark.checks import _PARTITION_EVENTS, _RUN_TYPES, GROUPED_COLUMNS, check_sorted
from spark.diff import _SEP, Thresholds, assemble_diff, pair_inputs
from spark.memo import AnalysisMemo
from spark.progress import Progress
from spark.schema import EVENT_COLUMNS, TraceInput, check_inputs, inputs_of, raw_events

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "analyze_frame",
    "analyze_pandas",
    "diff_pandas",
    "first_divergences",
    "forget_pandas_analyses",
]

# ----------------------------------------------------------------------------- reading


def _read_run(item: TraceInput) -> pd.DataFrame:
    """The events of one (checked) input, with ``run`` first (``spark.schema.read_traces``'
    columns)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if item.format == "parquet":
        table = pq.read_table(item.path, columns=list(EVENT_COLUMNS))
    else:
        table = pa.Table.from_pylist(
            [
                {**msgspec.structs.asdict(e), "fields": bytes(e.fields).decode()}
                for e in raw_events(item.path)
            ]
        )
    frame = table.to_pandas()
    frame.insert(0, "run", item.run)
    return frame


def _text(raw: msgspec.Raw) -> str | None:
    """A key's value as Spark's ``from_json`` gives it for a string column: a string's
    content, any other value's JSON text, null for null or a missing key."""
    data = bytes(raw)
    if not data or data == b"null":
        return None
    if data[:1] == b'"':
        return str(msgspec.json.decode(data))
    return data.decode()


@functools.cache
def _fields_decoder(keys: tuple[str, ...]) -> msgspec.json.Decoder[Any]:
    struct = msgspec.defstruct(
        "_Fields", [(key, msgspec.Raw, msgspec.field(default=msgspec.Raw(b""))) for key in keys]
    )
    return msgspec.json.Decoder(struct)


def with_fields(events: pd.DataFrame, *keys: str) -> pd.DataFrame:
    """``events`` (a selection) with a column ``f_<key>`` per key of ``fields`` asked."""
    import pandas as pd

    decode = _fields_decoder(keys).decode
    parsed = [decode(text) for text in events["fields"]]
    columns = {
        f"f_{key}": pd.Series(
            [_text(getattr(p, key)) for p in parsed], index=events.index, dtype=object
        )
        for key in keys
    }
    return events.assign(**columns)


# ----------------------------------------------------------------------------- checks


def _grouped(events: pd.DataFrame, ends: pd.Series) -> pd.DataFrame:
    """``spark.checks.check_runs``' selection: every event of a rule group, with its
    group, sorted by run, group and seq."""
    import pandas as pd

    kind, type_, node = events["kind"], events["type"], events["node"]
    candidates = events[
        ((kind == "transition") & type_.isin(["partition", "replica"]))
        | ((kind == "event") & type_.isin(_PARTITION_EVENTS))
        | (kind == "log_dir")
        | type_.isin([*_RUN_TYPES, "topic_deletion_completed"])
        | ((node == CHAOS_NODE) & (kind == "fault"))
        | ((kind == "error") & (type_ == "invalid_transition"))
        | ((kind == "store") & (type_ == "create"))
    ]
    c = with_fields(candidates, "topic", "partition", "path")
    kind, type_, node = c["kind"], c["type"], c["node"]
    completed = (kind == "event") & (type_ == "topic_deletion_completed")
    parts: list[pd.DataFrame] = []
    partition_event = ((kind == "transition") & type_.isin(["partition", "replica"])) | (
        (kind == "event") & type_.isin(_PARTITION_EVENTS)
    )
    partition = c[partition_event]
    parts.append(partition.assign(group=_joined("partition", partition)))
    topic = c[((kind == "log_dir") & c["f_topic"].notna()) | completed]
    parts.append(topic.assign(group="topic/" + topic["f_topic"].fillna("")))
    deletion_marker = c["f_path"].fillna("").str.startswith("/admin/delete_topics/")
    run_events = c[
        type_.isin(_RUN_TYPES)
        | ((node == CHAOS_NODE) & (kind == "fault"))
        | ((kind == "error") & (type_ == "invalid_transition"))
        | completed
        | ((kind == "store") & (type_ == "create") & deletion_marker)
    ]
    parts.append(run_events.assign(group="run"))
    grouped = pd.concat(parts, ignore_index=True)
    grouped["end"] = grouped["run"].map(ends)
    return grouped.sort_values(["run", "group", "seq"], kind="stable")[list(GROUPED_COLUMNS)]


def _joined(prefix: str, frame: pd.DataFrame) -> pd.Series:
    """``concat_ws("/", prefix, topic, partition)``: null parts left out."""
    return _concat_ws("/", [prefix, frame["f_topic"], frame["f_partition"]], frame.index)


def _concat_ws(sep: str, parts: Sequence[Any], index: Any) -> pd.Series:
    """Spark's ``concat_ws``: the non-null parts joined by ``sep``."""
    import pandas as pd

    columns = [p.tolist() if isinstance(p, pd.Series) else [p] * len(index) for p in parts]
    joined = [
        sep.join(str(v) for v in row if v is not None and v == v)
        for row in zip(*columns, strict=True)
    ]
    return pd.Series(joined, index=index, dtype=object)


def _violations(
    events: pd.DataFrame, ends: pd.Series, deletion_bound: float
) -> list[tuple[str, str, str, str, int | None, float | None]]:
    grouped = _grouped(events, ends)
    return list(
        check_sorted(grouped.itertuples(index=False, name=None), deletion_bound=deletion_bound)
    )


# ----------------------------------------------------------------------------- topics


def topic_events(events: pd.DataFrame) -> pd.DataFrame:
    """``spark.analyze.topic_events`` in pandas: ``run, topic, seq, sub, ts, phase,
    partition, norm`` rows (unordered)."""
    import pandas as pd

    kind, type_, node = events["kind"], events["type"], events["node"]
    candidates = with_fields(
        events[
            kind.isin(["transition", "log_dir", "event", "error"])
            | ((kind == "store") & type_.isin(["create", "multi", "set", "delete"]))
            | ((node == CHAOS_NODE) & (type_ == "control_request"))
        ],
        *("topic", "topics", "partition", "to_state", "result", "path"),
        *("request", "dst", "states", "stops"),
    )
    kind, type_, node = candidates["kind"], candidates["type"], candidates["node"]
    base = _concat_ws("|", [kind, type_, node, candidates["actor"]], candidates.index)
    out: list[pd.DataFrame] = []

    named = candidates[
        ((candidates["f_topic"].notna() & (node != CHAOS_NODE)) | (type_ == "admin_result"))
        & kind.isin(["transition", "log_dir", "event", "error"])
    ]
    nk, nt = named["kind"], named["type"]
    to_state, result = named["f_to_state"], named["f_result"]
    phase = pd.Series(None, index=named.index, dtype=object)
    partition_transition = (nk == "transition") & (nt == "partition")
    phase[partition_transition & (to_state == "OnlinePartition")] = "online"
    phase[partition_transition & (to_state == "NewPartition")] = "new_partition"
    phase[~partition_transition & (nt == "topic_deletion_completed")] = "completed"
    removed = (nk == "log_dir") & (nt == "remove") & (result == "ok")
    phase[~partition_transition & (nt != "topic_deletion_completed") & removed] = "log_removed"
    out.append(
        pd.DataFrame(
            {
                "run": named["run"],
                "topic": named["f_topic"],
                "seq": named["seq"],
                "sub": 0,
                "ts": named["ts"],
                "phase": phase,
                "partition": pd.to_numeric(named["f_partition"], errors="coerce"),
                "norm": _concat_ws(
                    "|", [base[named.index], _normalised(named["fields"])], named.index
                ),
            }
        )
    )

    listed = candidates[
        (kind == "event")
        & (node != CHAOS_NODE)
        & candidates["f_topics"].fillna("").str.startswith("[")
    ]
    rows = [
        (run, topic, seq, ts, b)
        for run, seq, ts, topics, b in zip(
            listed["run"],
            listed["seq"],
            listed["ts"],
            listed["f_topics"],
            base[listed.index],
            strict=True,
        )
        for topic in msgspec.json.decode(topics)
        if topic is not None
    ]
    out.append(
        pd.DataFrame(
            {
                "run": [r[0] for r in rows],
                "topic": [str(r[1]) for r in rows],
                "seq": [r[2] for r in rows],
                "sub": 0,
                "ts": [r[3] for r in rows],
                "phase": None,
                "partition": float("nan"),
                "norm": [f"{r[4]}|topics" for r in rows],
            }
        )
    )

    writes = candidates[(kind == "store") & type_.isin(["create", "multi", "set", "delete"])]
    path = writes["f_path"]
    store_topic = path.str.extract(
        r"^/(?:brokers/topics|admin/delete_topics|config/topics)/([^/]+)", expand=False
    )
    writes = writes[store_topic.notna() & (store_topic != "")]
    store_topic, path = store_topic[writes.index], path[writes.index]
    ok_create = (writes["f_result"] == "ok") & writes["type"].isin(["create", "multi"])
    store_phase = pd.Series(None, index=writes.index, dtype=object)
    store_phase[ok_create & path.str.match(r"^/brokers/topics/[^/]+$")] = "created"
    marked = path.str.match(r"^/admin/delete_topics/[^/]+$") & (writes["type"] == "create")
    is_created = path.str.match(r"^/brokers/topics/[^/]+$")
    store_phase[ok_create & ~is_created & marked] = "marked"
    out.append(
        pd.DataFrame(
            {
                "run": writes["run"],
                "topic": store_topic,
                "seq": writes["seq"],
                "sub": 0,
                "ts": writes["ts"],
                "phase": store_phase,
                "partition": float("nan"),
                "norm": _concat_ws(
                    "|",
                    [
                        base[writes.index],
                        path.str.replace(r"^/[a-z_]+/[a-z_]+/[^/]+", "T", n=1, regex=True),
                        writes["f_result"],
                    ],
                    writes.index,
                ),
            }
        )
    )

    requests = candidates[(node == CHAOS_NODE) & (type_ == "control_request")]
    out.append(_request_rows(requests))
    found = pd.concat(out, ignore_index=True)
    return found[found["topic"].notna()]


def _request_rows(requests: pd.DataFrame) -> pd.DataFrame:
    import pandas as pd

    columns: dict[str, list[Any]] = {name: [] for name in (*PHASE_COLUMNS, "norm")}
    for run, seq, ts, request, dst, states, stops in zip(
        requests["run"],
        requests["seq"],
        requests["ts"],
        requests["f_request"],
        requests["f_dst"],
        requests["f_states"],
        requests["f_stops"],
        strict=True,
    ):
        entries = _string_arrays(states) or _string_arrays(stops) or []
        for sub, entry in enumerate(entries, start=1):
            topic = entry[0] if entry else None
            if topic is None:
                continue
            phase = None
            if request == "UpdateMetadataRequest" and _int(entry, 2) == LEADER_DURING_DELETE:
                phase = "update_metadata_deleted"
            elif request == "StopReplicaRequest":
                delete = len(entry) > 3 and entry[3] == "true"
                phase = "stop_replica_delete" if delete else "stop_replica_offline"
            prefix = "|".join(p for p in ("control_request", request, dst) if p is not None)
            for name, value in (
                ("run", run),
                ("topic", topic),
                ("seq", seq),
                ("sub", sub),
                ("ts", ts),
                ("phase", phase),
                ("partition", _int(entry, 1)),
                ("norm", f"{prefix}|{msgspec.json.encode(entry).decode()}"),
            ):
                columns[name].append(value)
    frame = pd.DataFrame(columns)
    frame["partition"] = pd.to_numeric(frame["partition"], errors="coerce")
    return frame


def _string_arrays(text: str | None) -> list[list[str | None]] | None:
    """``from_json(text, "array<array<string>>")``: inner values as their text."""
    if text is None:
        return None
    try:
        outer = msgspec.json.decode(text.encode(), type=list[list[msgspec.Raw] | None])
    except msgspec.DecodeError:
        return None
    return [[_text(v) for v in inner] if inner is not None else [] for inner in outer]


def _int(entry: Sequence[str | None], index: int) -> int | None:
    if len(entry) <= index or entry[index] is None:
        return None
    try:
        return int(str(entry[index]))
    except ValueError:
        return None


def _normalised(fields: pd.Series) -> pd.Series:
    text = fields.str.replace(_VOLATILE_FIELD, "", regex=True)
    text = text.str.replace(",}", "}", regex=False)
    return text.str.replace(_UUID, "*", regex=True)


def _lifecycles(topics: pd.DataFrame) -> list[dict[str, Any]]:
    phases = topics[topics["phase"].notna()]
    phases = phases.sort_values(["run", "topic", "seq", "sub"], kind="stable")
    rows = phases[list(PHASE_COLUMNS)].itertuples(index=False, name=None)
    return list(lifecycles_sorted(rows))


# ----------------------------------------------------------------------------- metrics


def _metric_rows(events: pd.DataFrame, ends: pd.Series) -> pd.DataFrame:
    """``spark.analyze._metric_rows`` and ``_send_counts`` in pandas: ``run, metric, key,
    value`` rows (one per send for its counts)."""
    import numpy as np
    import pandas as pd

    kind, type_ = events["kind"], events["type"]
    out: list[pd.DataFrame] = []
    sends = events[kind == "send"]
    width = np.maximum(sends["run"].map(ends) / RATE_BUCKETS, 1e-6)
    bucket = np.minimum(np.floor(sends["ts"] / width), RATE_BUCKETS - 1).astype("int64")
    for metric, key in (
        ("by_type", sends["type"]),
        ("by_node", sends["node"]),
        ("rate", bucket.astype(str)),
    ):
        out.append(
            pd.DataFrame({"run": sends["run"], "metric": metric, "key": key, "value": np.nan})
        )

    messages = with_fields(events[kind.isin(["send", "deliver"])], "env_kind", "src", "dst")
    env, present = messages["f_env_kind"], messages["corr"].notna()
    asks = messages[(messages["kind"] == "send") & (env == "ask") & present]
    replies = messages[(messages["kind"] == "deliver") & (env == "reply") & present]
    # Each ask's answer: the first reply after it with the same correlation id to the
    # same actor (Spark: the next reply in a window over (run, actor, corr) by seq).
    answered = pd.merge_asof(
        asks[["run", "seq", "ts", "type", "f_src", "corr"]]
        .rename(columns={"f_src": "actor", "ts": "ask_ts"})
        .astype({"corr": "int64"})
        .sort_values("seq"),
        replies[["run", "seq", "ts", "f_dst", "corr"]]
        .rename(columns={"f_dst": "actor", "ts": "reply_ts"})
        .astype({"corr": "int64"})
        .sort_values("seq"),
        on="seq",
        by=["run", "actor", "corr"],
        direction="forward",
        allow_exact_matches=False,
    ).dropna(subset=["reply_ts"])
    out.append(
        pd.DataFrame(
            {
                "run": answered["run"],
                "metric": "latency",
                "key": answered["type"],
                "value": answered["reply_ts"] - answered["ask_ts"],
            }
        )
    )

    starts = with_fields(
        events[(kind == "event") & (type_ == "controller_event_start")], "event", "queue_time"
    )
    out.append(
        pd.DataFrame(
            {
                "run": starts["run"],
                "metric": "queue_time",
                "key": starts["f_event"],
                "value": pd.to_numeric(starts["f_queue_time"], errors="coerce"),
            }
        )
    )

    maybe = with_fields(
        events[
            type_.isin(["control_response", "admin_result"])
            | (kind == "error")
            | kind.isin(["store", "log_dir"])
        ],
        *("request", "op", "error", "result"),
    )
    names = [
        _error_name(k, t, request, op, error, result)
        for k, t, request, op, error, result in zip(
            maybe["kind"],
            maybe["type"],
            maybe["f_request"],
            maybe["f_op"],
            maybe["f_error"],
            maybe["f_result"],
            strict=True,
        )
    ]
    errors = maybe.assign(key=names)
    errors = errors[errors["key"].notna()]
    out.append(
        pd.DataFrame(
            {"run": errors["run"], "metric": "error", "key": errors["key"], "value": np.nan}
        )
    )
    return pd.concat(out, ignore_index=True)


def _error_name(
    kind: str,
    type_: str | None,
    request: str | None,
    op: str | None,
    error: str | None,
    result: str | None,
) -> str | None:
    """``spark.analyze._error_name`` for one event."""

    def ws(*parts: str | None) -> str:
        return " ".join(p for p in parts if p is not None)

    if type_ == "control_response":
        return ws(request, error) if error is not None and error != "NONE" else None
    if type_ == "admin_result":
        return ws(op, error) if error is not None and error != "NONE" else None
    if kind == "error":
        return ws("error", type_, error)
    if kind in ("store", "log_dir") and result is not None and result != "ok":
        return ws(kind, type_, result)
    return None


def _metrics(events: pd.DataFrame, ends: pd.Series) -> list[dict[str, Any]]:
    """One dict per (run, metric, key): count, max and the percentiles Spark's
    ``percentile_approx`` gives (the smallest value with at least that share at or
    below it; exact here)."""
    import numpy as np

    rows = _metric_rows(events, ends)
    out: list[dict[str, Any]] = []
    for (run, metric, key), values in rows.groupby(["run", "metric", "key"], sort=False)["value"]:
        present = values.dropna().to_numpy()
        stats: dict[str, Any] = {"run": run, "metric": metric, "key": key, "count": len(values)}
        stats["max"] = float(present.max()) if len(present) else None
        for name, p in zip(_PCT_NAMES, PERCENTILES, strict=True):
            stats[name] = (
                float(np.percentile(present, p * 100, method="inverted_cdf"))
                if len(present)
                else None
            )
        out.append(stats)
    return out


# ----------------------------------------------------------------------------- the jobs


def analyze_frame(
    events: pd.DataFrame, *, deletion_bound: float = DEFAULT_DELETION_BOUND
) -> tuple[dict[str, dict[str, Any]], pd.DataFrame]:
    """The analysis of every run in ``events`` by run label (``spark.analyze.analyze_events``'
    result), and the topic rows it was made from (for the diff)."""
    summary = events.groupby("run", sort=True).agg(events=("seq", "size"), end=("ts", "max"))
    ends = summary["end"]
    runs = {str(run): empty_run(int(row.events), float(row.end)) for run, row in summary.iterrows()}
    file_findings(runs, _violations(events, ends, deletion_bound))
    topics = topic_events(events)
    file_lifecycles(runs, _lifecycles(topics))
    for stats in _metrics(events, ends):
        _add_metric(runs[stats["run"]], stats)
    for result in runs.values():
        _finish_run(result)
    return runs, topics


def _analyze_inputs(
    inputs: Sequence[TraceInput], deletion_bound: float, progress: Progress, *, with_topics: bool
) -> tuple[dict[str, dict[str, Any]], list[pd.DataFrame]]:
    """Each input read and analysed in turn, so only one run's events are in memory at a
    time; with the topic rows of each when ``with_topics`` (for the diff). A file this
    process has analysed before with the same ``deletion_bound`` (and not changed since)
    is not analysed again (``spark.memo``): only read for its topic rows."""
    check_inputs(inputs)
    runs: dict[str, dict[str, Any]] = {}
    topics: list[pd.DataFrame] = []
    for item in inputs:
        key = _MEMO.key(item, (deletion_bound,))
        found_before = _MEMO.get(key)
        if found_before is not None and not with_topics:
            progress.note(f"{item.run} analysed before in this process")
            runs[item.run] = found_before
            continue
        if found_before is not None:
            with progress.stage(f"topic rows of {item.run} (analysed before in this process)"):
                rows = topic_events(_read_run(item))
            runs[item.run] = found_before
        else:
            with progress.stage(f"analysing {item.run}"):
                found, rows = analyze_frame(_read_run(item), deletion_bound=deletion_bound)
            if item.run in found:
                _MEMO.put(key, found[item.run])
            runs.update(found)
        if with_topics:
            topics.append(rows[["run", "topic", "seq", "sub", "norm"]])
    return runs, topics


_MEMO: Final = AnalysisMemo()
"""This process's analyses of trace files (``spark.memo``), as a Spark session keeps its
own (``spark.analyze.analyze_inputs``)."""


def forget_pandas_analyses() -> None:
    """Drop this process's analyses: every trace is analysed again."""
    _MEMO.clear()


def analyze_pandas(
    traces: Sequence[str | Path] | Sequence[TraceInput],
    *,
    deletion_bound: float = DEFAULT_DELETION_BOUND,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """``spark.analyze.analyze``'s document, computed with pandas in this process."""
    inputs = inputs_of(traces)
    progress = progress or Progress("analyze", quiet=True)
    runs, _ = _analyze_inputs(inputs, deletion_bound, progress, with_topics=False)
    sources = {i.run: str(i.path) for i in inputs}
    for run, result in runs.items():
        result["source"] = sources.get(run, run)
    return {"kemu_trace_analysis": ANALYSIS_VERSION, "runs": dict(sorted(runs.items()))}


def first_divergences(topics: pd.DataFrame) -> list[dict[str, Any]]:
    """``spark.diff.first_divergences`` in pandas."""
    ordered = topics.sort_values(["run", "topic", "seq", "sub", "norm"], kind="stable")
    sequences: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for run, topic, seq, sub, norm in zip(
        ordered["run"],
        ordered["topic"],
        ordered["seq"],
        ordered["sub"],
        ordered["norm"],
        strict=True,
    ):
        side, key = str(run).split(_SEP, 1)
        sequences.setdefault((key, str(topic), side), []).append(
            {"seq": int(seq), "sub": int(sub), "norm": norm}
        )
    out: list[dict[str, Any]] = []
    for key, topic in sorted({(k, t) for k, t, _ in sequences}):
        b = sequences.get((key, topic, "baseline"), [])
        c = sequences.get((key, topic, "candidate"), [])
        index = next(
            (
                i + 1
                for i in range(max(len(b), len(c)))
                if i >= len(b) or i >= len(c) or b[i]["norm"] != c[i]["norm"]
            ),
            0,
        )
        out.append(
            {
                "key": key,
                "topic": topic,
                "index": index,
                "baseline_events": len(b),
                "candidate_events": len(c),
                "baseline": b[index - 1] if 0 < index <= len(b) else None,
                "candidate": c[index - 1] if 0 < index <= len(c) else None,
            }
        )
    return out


def diff_pandas(
    baseline: Sequence[str | Path],
    candidate: Sequence[str | Path],
    *,
    thresholds: Thresholds | None = None,
    deletion_bound: float = DEFAULT_DELETION_BOUND,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """``spark.diff.diff``'s document, computed with pandas in this process."""
    thresholds = thresholds or Thresholds()
    progress = progress or Progress("diff", quiet=True)
    pairs, unmatched = pair_inputs(inputs_of(baseline), inputs_of(candidate))
    inputs: list[TraceInput] = []
    for key, b, c in pairs:
        inputs.append(msgspec.structs.replace(b, run=f"baseline{_SEP}{key}"))
        inputs.append(msgspec.structs.replace(c, run=f"candidate{_SEP}{key}"))
    import pandas as pd

    runs, topics = _analyze_inputs(inputs, deletion_bound, progress, with_topics=True)
    with progress.stage("normalised sequences"):
        divergences = first_divergences(pd.concat(topics, ignore_index=True))
    return assemble_diff(pairs, unmatched, runs, divergences, thresholds)
