"""``kemu trace diff``: a candidate's runs against a baseline's, in one Spark job.

Runs are paired by chaos scenario and seed (two campaign directories), or a lone trace
against a lone trace. Both sides are read and analysed together (``analyze_events``);
then, per pair:

* metric deltas, each checked against its threshold (``Thresholds``): request latency
  percentiles and controller queue times (only a rise crosses), messages per topic
  operation (a change either way crosses), topic creation and deletion durations (a rise);
* error names new in the candidate or vanished from it; violations new in the candidate;
* per topic, the first position where the normalised event sequences about the topic
  differ (``spark.analyze.topic_events``: seq, ts, corr, session ids, broker epochs,
  znode versions, delays and uuids left out), with the two events there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec
import yaml

from actors.invariants import DEFAULT_DELETION_BOUND
from protocol.errors import KemuError
from spark.analyze import analyze_inputs, topic_events
from spark.progress import Progress
from spark.schema import TraceInput, read_traces, resolve_inputs

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "DIFF_VERSION",
    "DiffError",
    "Limit",
    "Thresholds",
    "ThresholdsError",
    "assemble_diff",
    "diff",
    "load_thresholds",
    "pair_inputs",
]

DIFF_VERSION: Final = 1
_SEP: Final = "|"


class DiffError(KemuError):
    """Inputs that cannot be compared (e.g. several traces that are not chaos runs)."""


class ThresholdsError(DiffError):
    """A thresholds file that cannot be used; the message names the file and the key."""


class Limit(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A change crosses the limit when it exceeds both: ``relative`` (a fraction of the
    baseline value) and ``absolute`` (in the metric's unit)."""

    relative: float
    absolute: float

    def crossed(self, baseline: float, candidate: float, *, both_ways: bool = False) -> bool:
        delta = candidate - baseline if not both_ways else abs(candidate - baseline)
        return delta > self.absolute and delta > self.relative * abs(baseline)


class LatencyLimit(Limit, frozen=True, forbid_unknown_fields=True):
    percentiles: tuple[str, ...] = ("p50", "p99")


class Thresholds(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What a candidate may differ by (docs/spark.md, "Thresholds"); these are the
    defaults."""

    latency: LatencyLimit = LatencyLimit(relative=0.5, absolute=0.005)
    messages_per_operation: Limit = Limit(relative=0.05, absolute=0.1)
    lifecycle_duration: Limit = Limit(relative=0.5, absolute=1.0)
    queue_time: Limit = Limit(relative=1.0, absolute=0.05)
    new_error_names: bool = True
    new_violations: bool = True
    divergent_topics: int | None = None


def load_thresholds(path: Path | None) -> Thresholds:
    """The thresholds of a YAML (or JSON) file; keys left out keep their defaults."""
    if path is None:
        return Thresholds()
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ThresholdsError(f"{path}: cannot read thresholds ({exc})") from exc
    try:
        return msgspec.convert(data or {}, Thresholds)
    except msgspec.ValidationError as exc:
        raise ThresholdsError(f"{path}: {exc}") from exc


# ----------------------------------------------------------------------------- pairing


def _key(item: TraceInput) -> str | None:
    if item.scenario is None or item.seed is None:
        return None
    return f"{item.scenario}/seed-{item.seed}"


def pair_inputs(
    baseline: Sequence[TraceInput], candidate: Sequence[TraceInput]
) -> tuple[list[tuple[str, TraceInput, TraceInput]], list[str]]:
    """The (key, baseline, candidate) pairs and the unmatched runs (``side:key``). Chaos
    runs pair by scenario and seed; one lone trace on each side pairs as ``trace``."""
    if len(baseline) == 1 and len(candidate) == 1:
        b, c = baseline[0], candidate[0]
        same = _key(b) if _key(b) == _key(c) else None
        return [(same or "trace", b, c)], []
    keyed_b = {_key(i): i for i in baseline}
    keyed_c = {_key(i): i for i in candidate}
    if None in keyed_b or None in keyed_c:
        raise DiffError(
            "several traces on a side must be chaos run directories (<scenario>/seed-<N>) "
            "to be paired by scenario and seed"
        )
    pairs = [(str(k), keyed_b[k], keyed_c[k]) for k in sorted(set(keyed_b) & set(keyed_c), key=str)]
    if not pairs:
        raise DiffError(
            "no run pairs: no candidate run has a baseline run of the same scenario and seed "
            f"(baseline: {_listed(keyed_b)}; candidate: {_listed(keyed_c)})"
        )
    unmatched = [f"baseline:{k}" for k in sorted(set(keyed_b) - set(keyed_c), key=str)]
    unmatched += [f"candidate:{k}" for k in sorted(set(keyed_c) - set(keyed_b), key=str)]
    return pairs, unmatched


_LISTED: Final = 6
"""Runs named per side in the error of a diff without pairs."""


def _listed(keyed: Mapping[str | None, TraceInput]) -> str:
    keys = sorted(str(k) for k in keyed)
    more = f" and {len(keys) - _LISTED} more" if len(keys) > _LISTED else ""
    return ", ".join(keys[:_LISTED]) + more


# ----------------------------------------------------------------------------- sequences


def first_divergences(events: DataFrame) -> DataFrame:
    """Per (pair key, topic): the 1-based index of the first differing normalised event
    (0 when the sequences are equal) and the two events there (null past an end).

    One scan and one aggregation: both sides' rows about a topic are grouped together, each
    side collected into its own list (a side without the topic has an empty one)."""
    from pyspark.sql import functions as F

    rows = topic_events(events)
    side = F.substring_index("run", _SEP, 1)
    event = F.struct("seq", "sub", "norm")

    def sequence(name: str) -> Column:
        return F.array_sort(F.collect_list(F.when(side == name, event))).alias(name[0])

    joined = rows.groupBy(
        F.expr(f"substr(run, instr(run, '{_SEP}') + 1)").alias("key"), "topic"
    ).agg(sequence("baseline"), sequence("candidate"))
    index = F.expr("array_position(zip_with(b, c, (x, y) -> x.norm <=> y.norm), false)")
    found = joined.select("key", "topic", "b", "c", index.alias("index"))
    return found.select(
        "key",
        "topic",
        F.col("index").cast("int").alias("index"),
        F.size("b").alias("baseline_events"),
        F.size("c").alias("candidate_events"),
        F.expr("if(index > 0, try_element_at(b, cast(index as int)), null)").alias("baseline"),
        F.expr("if(index > 0, try_element_at(c, cast(index as int)), null)").alias("candidate"),
    )


# ----------------------------------------------------------------------------- metrics


def _metrics(result: Mapping[str, Any], thresholds: Thresholds) -> dict[str, tuple[float, str]]:
    """metric name -> (value, which limit applies)."""
    out: dict[str, tuple[float, str]] = {}
    for request, stats in result["latency"].items():
        for p in thresholds.latency.percentiles:
            if stats.get(p) is not None:
                out[f"latency {request} {p}"] = (float(stats[p]), "latency")
    for name, value in result["messages_per_operation"].items():
        out[f"messages/operation {name}"] = (float(value), "messages_per_operation")
    for life in result["lifecycles"]:
        label = f"{life['topic']}#{life['generation']}"
        for what in ("creation_duration", "deletion_duration"):
            if life[what] is not None:
                out[f"lifecycle {label} {what}"] = (float(life[what]), "lifecycle_duration")
    for event, stats in result["queue_time"].items():
        if stats.get("p99") is not None:
            out[f"queue_time {event} p99"] = (float(stats["p99"]), "queue_time")
    return out


def compare(
    baseline: Mapping[str, Any], candidate: Mapping[str, Any], thresholds: Thresholds
) -> dict[str, Any]:
    """The deltas, crossed thresholds and error-name changes of one pair of analyses."""
    mb, mc = _metrics(baseline, thresholds), _metrics(candidate, thresholds)
    deltas: list[dict[str, Any]] = []
    crossed: list[dict[str, Any]] = []
    for name in sorted(set(mb) | set(mc)):
        b_value = mb[name][0] if name in mb else None
        c_value = mc[name][0] if name in mc else None
        which = (mc.get(name) or mb[name])[1]
        if b_value == c_value:
            continue
        b, c = b_value or 0.0, c_value or 0.0
        row = {"metric": name, "baseline": b_value, "candidate": c_value, "delta": round(c - b, 6)}
        deltas.append(row)
        limit: Limit = getattr(thresholds, which)
        if limit.crossed(b, c, both_ways=which == "messages_per_operation"):
            crossed.append({**row, "limit": f"{which}: {limit.relative:g} and {limit.absolute:g}"})
    new_errors = sorted(set(candidate["errors"]) - set(baseline["errors"]))
    vanished = sorted(set(baseline["errors"]) - set(candidate["errors"]))
    if new_errors and thresholds.new_error_names:
        crossed.append(_flag("new error names", ", ".join(new_errors)))
    seen = {(v["rule"], v["message"]) for v in baseline["violations"]}
    new_violations = [v for v in candidate["violations"] if (v["rule"], v["message"]) not in seen]
    if new_violations and thresholds.new_violations:
        crossed.append(_flag("new violations", f"{len(new_violations)}"))
    return {
        "deltas": deltas,
        "crossed": crossed,
        "new_errors": new_errors,
        "vanished_errors": vanished,
        "new_violations": new_violations,
    }


def _flag(metric: str, what: str) -> dict[str, Any]:
    return {"metric": metric, "baseline": None, "candidate": what, "delta": None, "limit": "any"}


# ----------------------------------------------------------------------------- the job


def diff(
    spark: SparkSession,
    baseline: Sequence[str | Path],
    candidate: Sequence[str | Path],
    *,
    thresholds: Thresholds | None = None,
    deletion_bound: float = DEFAULT_DELETION_BOUND,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """The diff document (docs/spark.md): ``pairs`` (one per matched run), ``unmatched``,
    and ``crossed`` (every crossed threshold, each naming its pair)."""
    thresholds = thresholds or Thresholds()
    progress = progress or Progress("diff", quiet=True)
    pairs, unmatched = pair_inputs(resolve_inputs(baseline), resolve_inputs(candidate))
    inputs: list[TraceInput] = []
    for key, b, c in pairs:
        inputs.append(msgspec.structs.replace(b, run=f"baseline{_SEP}{key}"))
        inputs.append(msgspec.structs.replace(c, run=f"candidate{_SEP}{key}"))
    runs = analyze_inputs(spark, inputs, deletion_bound=deletion_bound, progress=progress)
    events = read_traces(spark, inputs)
    with progress.stage("normalised sequences"):
        divergences = [r.asDict(recursive=True) for r in first_divergences(events).collect()]
    return assemble_diff(pairs, unmatched, runs, divergences, thresholds)


def assemble_diff(
    pairs: Sequence[tuple[str, TraceInput, TraceInput]],
    unmatched: Sequence[str],
    runs: Mapping[str, Mapping[str, Any]],
    divergences: Sequence[Mapping[str, Any]],
    thresholds: Thresholds,
) -> dict[str, Any]:
    """The diff document from the analyses of both sides (``runs``, labelled
    ``baseline|<key>`` and ``candidate|<key>``) and the first divergences per topic."""
    document_pairs: list[dict[str, Any]] = []
    crossed_all: list[dict[str, Any]] = []
    for key, b, c in pairs:
        rb, rc = runs[f"baseline{_SEP}{key}"], runs[f"candidate{_SEP}{key}"]
        result = compare(rb, rc, thresholds)
        diverged = sorted(
            (
                {
                    "topic": d["topic"],
                    "index": d["index"],
                    "baseline_events": d["baseline_events"],
                    "candidate_events": d["candidate_events"],
                    "baseline_seq": (d["baseline"] or {}).get("seq"),
                    "baseline": (d["baseline"] or {}).get("norm"),
                    "candidate_seq": (d["candidate"] or {}).get("seq"),
                    "candidate": (d["candidate"] or {}).get("norm"),
                }
                for d in divergences
                if d["key"] == key and d["index"]
            ),
            key=lambda d: d["topic"],
        )
        limit = thresholds.divergent_topics
        if limit is not None and len(diverged) > limit:
            result["crossed"].append(_flag("divergent topics", f"{len(diverged)} > {limit}"))
        document_pairs.append(
            {
                "run": key,
                "baseline": str(b.path),
                "candidate": str(c.path),
                **result,
                "divergences": diverged,
                "rates": {
                    side: {
                        "rate": r["messages"]["rate"],
                        "bucket_seconds": r["messages"]["rate_bucket_seconds"],
                    }
                    for side, r in (("baseline", rb), ("candidate", rc))
                },
            }
        )
        crossed_all += [{"run": key, **x} for x in result["crossed"]]
    return {
        "kemu_trace_diff": DIFF_VERSION,
        "thresholds": msgspec.to_builtins(thresholds),
        "pairs": document_pairs,
        "unmatched": list(unmatched),
        "crossed": crossed_all,
    }
