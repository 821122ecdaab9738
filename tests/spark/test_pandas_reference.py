"""The single-process pandas analysis (the benchmark's yardstick) gives the documents the
Spark jobs give, on real chaos runs and on a long trace made of copies of them: two
implementations of the same analysis cross-check each other."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from cluster.bench.long_traces import synthesize
from cluster.chaos import RunOptions, load_scenario, run_scenario
from spark.analyze import analyze
from spark.diff import diff
from spark.pandas_analysis import analyze_pandas, diff_pandas
from spark.schema import TraceSchemaError
from tests.support.analysis import rounded
from tests.support.campaign import ROOT

# A Spark session (one JVM for the run); its first jobs on a loaded 2-core machine take
# longer than the default minute.
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(300)]


def test_pandas_and_spark_analyses_agree(spark: SparkSession, campaign: Path) -> None:
    """Every figure of every run: violations and notices, lifecycles, latency
    percentiles, message counts and rates, queue times, errors."""
    by_spark = analyze(spark, [campaign])
    by_pandas = analyze_pandas([campaign])
    assert set(by_spark["runs"]) == {
        "controller-killed-mid-deletion/seed-1",
        "create-delete-all-up/seed-1",
    }
    killed = by_spark["runs"]["controller-killed-mid-deletion/seed-1"]
    assert killed["lifecycles"]
    assert killed["latency"]
    assert killed["errors"]
    assert rounded(by_pandas) == rounded(by_spark)


def test_pandas_and_spark_diffs_agree(spark: SparkSession, campaign: Path, tmp_path: Path) -> None:
    """Two seeds of a scenario: the same deltas, crossed thresholds and first
    divergences per topic."""
    scenario = load_scenario(ROOT / "scenarios" / "controller-killed-mid-deletion.yaml")
    other = tmp_path / "seed-2"
    assert run_scenario(scenario, RunOptions(run_dir=other, seed=2)).status == "passed"
    baseline = campaign / "controller-killed-mid-deletion" / "seed-1"
    by_spark = diff(spark, [baseline], [other])
    by_pandas = diff_pandas([baseline], [other])
    (pair,) = by_spark["pairs"]
    assert pair["divergences"], "two seeds should differ somewhere"
    assert rounded(by_pandas) == rounded(by_spark)


def test_a_long_trace_of_copies_keeps_every_invariant(
    spark: SparkSession, campaign: Path, tmp_path: Path
) -> None:
    """The benchmark's input: whole copies of real runs, topics renamed per copy,
    controller epochs, seqs and times carried on; no invariant breaks at the seams, and
    both implementations see the same lifecycles."""
    sources = sorted(campaign.glob("*/seed-1/trace.jsonl"))
    lines = sum(len(p.read_text().splitlines()) - 1 for p in sources)
    out = tmp_path / "long.parquet"
    written = synthesize(sources, out, lines * 2 + 1)
    assert written >= lines * 2 + 1
    table = pq.read_table(out).to_pydict()
    seqs = table["seq"]
    assert seqs == sorted(seqs)
    assert len(set(seqs)) == len(seqs) == written
    assert table["ts"] == sorted(table["ts"])
    epochs = [
        json.loads(fields)["epoch"]
        for fields, type_ in zip(table["fields"], table["type"], strict=True)
        if type_ == "controller_elected"
    ]
    assert epochs == sorted(epochs)
    assert len(set(epochs)) == len(epochs)

    by_spark = analyze(spark, [out])
    (run,) = by_spark["runs"].values()
    assert run["events"] == written
    assert run["violations"] == []
    topics = {life["topic"] for life in run["lifecycles"]}
    assert {"events-c0", "events-c2"} <= topics  # controller-killed-mid-deletion's topic
    assert rounded(analyze_pandas([out])) == rounded(by_spark)


def test_rules_with_history_see_every_request_of_a_run(spark: SparkSession, tmp_path: Path) -> None:
    """``leader_in_isr`` remembers the replicas a partition had before a reassignment
    completed (Kafka sends the new replicas with the old ISR first); spread over many
    sequence numbers, a run's requests must still reach one instance of the rule (they
    were once cut into chunks of 50,000 seqs, which made false violations)."""
    scenario = load_scenario(ROOT / "scenarios" / "reassignment-racing-deletion.yaml")
    run = tmp_path / "run"
    assert run_scenario(scenario, RunOptions(run_dir=run, seed=2)).status == "passed"
    lines = (run / "trace.jsonl").read_text().splitlines()
    spread = tmp_path / "spread.jsonl"
    events = [json.loads(line) for line in lines[1:]]
    for event in events:
        event["seq"] *= 100_000
    spread.write_text("\n".join([lines[0], *map(json.dumps, events)]) + "\n")
    assert any(
        e["type"] == "control_request" and e["fields"]["request"] == "LeaderAndIsrRequest"
        for e in events
    )
    by_spark = analyze(spark, [spread])
    assert [v["rule"] for r in by_spark["runs"].values() for v in r["violations"]] == []
    by_pandas = analyze_pandas([spread])
    assert [v["rule"] for r in by_pandas["runs"].values() for v in r["violations"]] == []


def test_the_pandas_reference_refuses_what_spark_refuses(campaign: Path, tmp_path: Path) -> None:
    """The same trace on both sides, or a trace of another schema version: one error
    before any work, as the Spark reader gives."""
    run = campaign / "create-delete-all-up" / "seed-1"
    with pytest.raises(TraceSchemaError, match="the same trace given twice"):
        diff_pandas([run], [run])
    newer = tmp_path / "trace.jsonl"
    newer.write_text('{"trace_schema":2,"run":"x","seed":null,"clock":"real"}\n')
    with pytest.raises(TraceSchemaError, match=r"trace_schema 2, this kemu reads 1"):
        analyze_pandas([newer])
