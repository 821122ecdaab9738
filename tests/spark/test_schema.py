"""Traces read into Spark keep every event, label each run, read JSONL and Parquet alike,
and refuse a trace of another schema version with one clear error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from cluster.trace_files import export_parquet
from spark.schema import TraceSchemaError, read_traces, resolve_inputs, with_fields

pytestmark = [pytest.mark.spark, pytest.mark.slow]  # a Spark session: one JVM for the run


def test_campaign_runs_are_labelled_and_complete(spark: SparkSession, campaign: Path) -> None:
    """Every event line of every run arrives once, under its `<scenario>/seed-<N>` label."""
    expected = {
        f"{p.parent.parent.name}/{p.parent.name}": len(p.read_text().splitlines()) - 1
        for p in campaign.glob("*/seed-*/trace.jsonl")
    }
    rows = read_traces(spark, [campaign]).groupBy("run").count().collect()
    assert {r["run"]: r["count"] for r in rows} == expected


def test_parquet_export_reads_like_jsonl(
    spark: SparkSession, campaign: Path, tmp_path: Path
) -> None:
    """A Parquet export and its JSONL source give the same events, fields included."""
    source = campaign / "create-delete-all-up" / "seed-1" / "trace.jsonl"
    parquet = tmp_path / "trace.parquet"
    export_parquet(source, parquet)
    both = read_traces(spark, [source, parquet])
    by_run = {
        run: sorted(tuple(r[1:]) for r in both.where(both.run == run).collect())
        for run in (str(source), str(parquet))
    }
    assert by_run[str(source)] == by_run[str(parquet)]
    assert len(by_run[str(source)]) > 100


def test_typed_field_extraction(spark: SparkSession, campaign: Path) -> None:
    """`with_fields` gives the keys of `fields` as typed columns, nested lists parsed."""
    df = read_traces(spark, [campaign / "create-delete-all-up" / "seed-1"])
    transitions = with_fields(
        df.where(df.kind == "transition"), {"topic": "string", "partition": "int"}
    ).collect()
    assert transitions
    assert all(json.loads(r["fields"])["partition"] == r["f_partition"] for r in transitions)
    requests = with_fields(
        df.where(df.type == "control_request"), {"states": "array<array<string>>"}
    ).collect()
    states = [s for r in requests for s in (r["f_states"] or [])]
    assert states
    assert all(len(s) == 6 for s in states)


def test_other_schema_version_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    """A trace written under trace_schema 2 is refused, naming the file and both versions."""
    trace = tmp_path / "trace.jsonl"
    trace.write_text('{"trace_schema":2,"run":"x","seed":null,"clock":"real"}\n')
    with pytest.raises(TraceSchemaError, match=r"trace.jsonl: trace_schema 2, this kemu reads 1"):
        read_traces(spark, [trace])


def test_missing_and_empty_inputs_are_refused(tmp_path: Path) -> None:
    """A path that holds no trace is named in the error."""
    with pytest.raises(TraceSchemaError, match="no such trace file"):
        resolve_inputs([tmp_path / "nope.jsonl"])
    with pytest.raises(TraceSchemaError, match=r"no trace\.jsonl or trace\.parquet"):
        resolve_inputs([tmp_path])
