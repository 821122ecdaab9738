"""`kemu trace analyze` checks the chaos invariants per run and reports topic lifecycles,
latencies, message counts and queue times, with either engine (in process, the default,
and Spark); planted faults in real traces are found at the event that shows them, and the
two engines write the same analysis.json and print the same lines."""

from __future__ import annotations

import io
import json
import re
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from actors.invariants import TRACE_RULES
from cluster.cli.main import main
from spark.analyze import LIFECYCLE_COLUMNS, RATE_BUCKETS
from spark.checks import ROUTED_RULES
from tests.support.analysis import rounded

# A Spark session (one JVM for the run); its first jobs on a loaded 2-core machine take
# longer than the default minute.
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(300)]

Analysis = tuple[dict[str, dict[str, Any]], dict[str, Any], Path]
ENGINES = ("local", "spark")


def _plant(
    source: Path, target: Path, edit: re.Pattern[str], replacement: str | None
) -> tuple[int, str]:
    """Copy a trace, replacing (or, with None, dropping) the first line matching ``edit``;
    answers that line's seq and original text."""
    lines = source.read_text().splitlines(keepends=True)
    index = next(i for i, line in enumerate(lines) if edit.search(line))
    original = lines[index]
    seq = int(json.loads(original)["seq"])
    if replacement is None:
        del lines[index]
    else:
        lines[index] = edit.sub(replacement, lines[index])
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(lines))
    return seq, original


@pytest.fixture(scope="module")
def analyses(
    spark: SparkSession, campaign: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[Analysis, list[str]]]:
    """One `kemu trace analyze` per engine over the campaign plus two planted traces: an
    illegal partition transition and a leader outside its ISR in one; a log directory of
    a deleted topic never removed and an AlterIsr result without its leader in the other.
    Per engine: the runs of its analysis.json, the planted seqs, the work directory, and
    the lines it printed."""
    del spark  # the Spark command joins the shared session
    work = tmp_path_factory.mktemp("planted")
    illegal_seq, _ = _plant(
        campaign / "create-delete-all-up" / "seed-1" / "trace.jsonl",
        work / "illegal" / "seed-1" / "trace.jsonl",
        re.compile(r'"from_state":"NonExistentPartition","to_state":"NewPartition"'),
        '"from_state":"OnlinePartition","to_state":"NewPartition"',
    )
    isr_seq, _ = _plant(
        work / "illegal" / "seed-1" / "trace.jsonl",
        work / "illegal" / "seed-1" / "trace.jsonl",
        re.compile(r'"states":\[\["alpha",0,1,'),
        '"states":[["alpha",0,9,',
    )
    orphan_seq, orphan_line = _plant(
        campaign / "controller-killed-mid-deletion" / "seed-1" / "trace.jsonl",
        work / "orphan" / "seed-1" / "trace.jsonl",
        re.compile(r'"kind":"log_dir","type":"remove".*"topic":"events"'),
        None,
    )
    alter_isr_seq, _ = _plant(
        work / "orphan" / "seed-1" / "trace.jsonl",
        work / "orphan" / "seed-1" / "trace.jsonl",
        re.compile(r'("type":"isr_altered".*"leader":1,.*"to_isr":)\[1,0\]'),
        r"\1[0]",
    )
    planted = {
        "illegal": illegal_seq,
        "isr": isr_seq,
        "orphan": orphan_seq,
        "orphan_line": orphan_line,
        "alter_isr": alter_isr_seq,
    }
    traces = [str(campaign), str(work / "illegal"), str(work / "orphan")]
    found: dict[str, tuple[Analysis, list[str]]] = {}
    for engine in ENGINES:
        out = work / f"out-{engine}"
        with redirect_stdout(io.StringIO()) as printed:
            status = main(
                ["trace", "analyze", *traces, "--out", str(out), "--quiet", "--engine", engine]
            )
        assert status == 1  # the planted runs break invariants
        document = json.loads((out / "analysis.json").read_text())
        assert (out / "report.html").read_text().count("<svg") >= 4
        lines = printed.getvalue().replace(str(out), "OUT").splitlines()
        found[engine] = (document["runs"], planted, work), lines
    return found


@pytest.fixture(params=ENGINES)
def analysis(
    request: pytest.FixtureRequest, analyses: dict[str, tuple[Analysis, list[str]]]
) -> Analysis:
    """The planted analysis by one engine."""
    return analyses[request.param][0]


def test_both_engines_write_the_same_analysis(
    analyses: dict[str, tuple[Analysis, list[str]]],
) -> None:
    """analysis.json and the printed lines are the same whichever engine ran (floats to
    6 places, violations in one order: ``rounded``)."""
    (local, local_lines), (spark, spark_lines) = analyses["local"], analyses["spark"]
    assert rounded(local[0]) == rounded(spark[0])
    assert local_lines == spark_lines
    assert any("violation(s)" in line for line in local_lines)


def test_real_runs_have_no_violation(analysis: Analysis) -> None:
    """The campaign's runs pass the chaos rules here as they did in the runner."""
    runs, _, _ = analysis
    for run in ("create-delete-all-up/seed-1", "controller-killed-mid-deletion/seed-1"):
        assert runs[run]["violations"] == [], run


def test_planted_illegal_transition_is_found(analysis: Analysis) -> None:
    """A partition that jumps from OnlinePartition to NewPartition breaks
    legal_transitions, reported at the planted event."""
    runs, planted, _ = analysis
    found = [v for v in runs["illegal/seed-1"]["violations"] if v["rule"] == "legal_transitions"]
    assert len(found) == 1
    assert "illegal OnlinePartition -> NewPartition" in found[0]["message"]
    assert found[0]["seq"] == planted["illegal"]


def test_planted_leader_outside_isr_is_found(analysis: Analysis) -> None:
    """A LeaderAndIsr naming a leader outside its ISR breaks leader_in_isr, at that request."""
    runs, planted, _ = analysis
    found = [v for v in runs["illegal/seed-1"]["violations"] if v["rule"] == "leader_in_isr"]
    assert [v["seq"] for v in found] == [planted["isr"]]
    assert "alpha-0" in found[0]["message"]


def test_planted_alter_isr_without_its_leader_is_found(analysis: Analysis) -> None:
    """An AlterIsr result whose ISR lacks the partition's leader breaks
    alter_isr_keeps_shape, at that event (a partition-group rule over controller events,
    not transitions)."""
    runs, planted, _ = analysis
    found = [v for v in runs["orphan/seed-1"]["violations"] if v["rule"] == "alter_isr_keeps_shape"]
    assert [v["seq"] for v in found] == [planted["alter_isr"]]
    assert "without its leader 1" in found[0]["message"]


def test_planted_orphan_log_dir_is_found(analysis: Analysis) -> None:
    """A -delete directory of a deleted topic whose removal never happened is an orphan,
    reported at the rename that created it."""
    runs, planted, _ = analysis
    found = [v for v in runs["orphan/seed-1"]["violations"] if v["rule"] == "orphan_log_dirs"]
    assert len(found) == 1
    dropped = json.loads(planted["orphan_line"])
    assert found[0]["message"] == (
        f"{dropped['node']}: {dropped['fields']['dir']} of deleted topic events was never removed"
    )
    assert found[0]["seq"] < planted["orphan"]


def test_lifecycles_latencies_and_counts(analysis: Analysis) -> None:
    """The deletion of `events` goes through every phase in order; latencies, message
    counts, rates and controller queue times are there for every run."""
    runs, _, _ = analysis
    run = runs["controller-killed-mid-deletion/seed-1"]
    (events,) = [c for c in run["lifecycles"] if c["topic"] == "events"]
    times = [events[c] for c in LIFECYCLE_COLUMNS]
    assert None not in times
    assert times == sorted(times)
    assert events["partitions"] == 6
    assert events["deletion_duration"] == pytest.approx(events["logs_gone"] - events["marked"])
    # Every StopReplica sent is counted; those the killed controller never got an answer
    # to have no latency.
    answered = run["latency"]["StopReplicaRequest"]["count"]
    assert 0 < answered <= run["messages"]["by_type"]["StopReplicaRequest"]
    assert sum(run["messages"]["rate"]) == sum(run["messages"]["by_type"].values())
    assert len(run["messages"]["rate"]) == RATE_BUCKETS
    assert run["queue_time"]["TopicDeletion"]["count"] >= 1
    assert run["operations"] == 3  # two creations, one deletion


def test_missing_trace_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A path holding no trace ends the command with one line and status 1, before Spark."""
    status = main(["trace", "analyze", str(tmp_path / "nope"), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 1
    assert err == [f"Error: {tmp_path / 'nope'}: no such trace file or directory"]
    assert not (tmp_path / "o").exists()


def test_every_trace_rule_is_routed() -> None:
    """Spark feeds each chaos trace rule only the events it reads: a rule added to
    actors.invariants must be given its events in spark.checks too."""
    assert set(TRACE_RULES) == ROUTED_RULES
