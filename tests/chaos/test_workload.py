"""The workload steps: ``produce``, ``consume`` and ``verify`` load from YAML with file:line
errors, go through the brokers' own Produce and Fetch handling, trace every
acknowledgement and read, and a leader that raises its high watermark before its
followers have the records is caught by ``acknowledged_writes_kept`` with a seed that
reproduces it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import actors.broker.partition as partition_module
from actors.broker.isr import LeaderIsr
from actors.runtime.tracer import read_trace
from cluster.chaos import (
    RunOptions,
    RunResult,
    ScenarioError,
    load_scenario,
    parse_scenario,
    run_scenario,
)
from cluster.chaos.model import Consume, Produce, Verify

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
STALLED = SCENARIOS / "data-acks-all-followers-stalled.yaml"


def run(path: Path, seed: int, out: Path) -> RunResult:
    scenario = load_scenario(path)
    return run_scenario(scenario, RunOptions(run_dir=out / f"seed-{seed}", seed=seed))


def test_the_workload_steps_load_with_their_shorthands() -> None:
    """``produce`` with its fields (``acks: all`` is -1 on the wire), ``consume: t`` and
    ``verify: t`` name the topic, ``background`` and the declared losses load."""
    scenario = parse_scenario(
        "name: x\n"
        "data: {allow_loss: [acks_1], expect_loss: [unclean]}\n"
        "steps:\n"
        "  - produce: {topic: t, count: 3, acks: all, rate: 5, background: true}\n"
        "  - consume: t\n"
        "  - verify: {topic: t, within: 5}\n"
    )
    produce, consume, verify = scenario.steps
    assert isinstance(produce, Produce)
    assert produce.required_acks == -1
    assert (produce.count, produce.rate, produce.background, produce.batch) == (3, 5, True, 1)
    assert isinstance(consume, Consume)
    assert not isinstance(consume, Verify)
    assert isinstance(verify, Verify)
    assert (verify.topic, verify.within) == ("t", 5)
    assert scenario.data.allowed == {"acks_1", "unclean"}


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ("{topic: t, count: 0}", "count must be at least 1, not 0"),
        ("{topic: t, count: 1, acks: 2}", "Invalid enum value 2"),
        ("{topic: t, count: 1, rate: 0}", "rate must be positive, not 0"),
        ("{topic: t}", "Object missing required field `count`"),
    ],
)
def test_a_bad_produce_step_is_one_line_naming_its_place(step: str, message: str) -> None:
    """A produce step the model refuses names its file, line and step."""
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(f"name: x\nsteps:\n  - sleep: 1\n  - produce: {step}\n", source="x.yaml")
    text = str(caught.value)
    assert text.startswith("x.yaml:4: steps[1] (produce)")
    assert message in text


def test_every_acknowledgement_and_read_is_traced(tmp_path: Path) -> None:
    """The stalled-followers scenario: five records acknowledged with acks=all, five
    answered REQUEST_TIMED_OUT (the leader appended them, its high watermark could not
    move), and every read after the failover shows the first five where they were
    acknowledged; the old leader truncates the tail only it had."""
    result = run(STALLED, 1, tmp_path)
    assert [p.line() for p in result.problems] == []
    _, events = read_trace(Path(result.run_dir) / "trace.jsonl")
    trace = list(events)
    answers = [e.fields for e in trace if e.type == "produce_result"]
    assert [(a["records"], a["error"]) for a in answers[:5]] == [
        ([f"p2-{n}"], "NONE") for n in range(5)
    ]
    assert [a["base_offset"] for a in answers[:5]] == [0, 1, 2, 3, 4]
    assert {a["error"] for a in answers[5:]} == {"REQUEST_TIMED_OUT"}
    reads = [e.fields for e in trace if e.type == "records_read"]
    assert reads
    assert all(r["settled"] for r in reads)
    for r in reads:
        assert r["records"][:5] == [[n, f"p2-{n}"] for n in range(5)]
    assert any(e.type == "replica_truncated" and e.node == "broker-0" for e in trace)
    rules = json.loads((Path(result.run_dir) / "invariants.json").read_text())["rules"]
    assert {"acknowledged_writes_kept", "one_record_per_offset", "follower_logs_match"} <= set(
        rules
    )


def test_a_high_watermark_raised_before_the_followers_have_the_records_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A leader whose high watermark is its own log end (not the ISR's least) acknowledges
    acks=all writes its followers never got; its crash loses them without any unclean
    election: ``acknowledged_writes_kept`` names each, and the same seed reproduces the
    same violations and the same trace."""

    def own_log_end(state: LeaderIsr, leader_log_end: int, now_ms: int, lag_ms: int) -> int:
        return leader_log_end

    monkeypatch.setattr(partition_module, "high_watermark_candidate", own_log_end)
    first = run(STALLED, 1, tmp_path / "a")
    lost = [v for v in first.violations if v.rule == "acknowledged_writes_kept"]
    assert first.status == "failed"
    assert len(lost) >= 4
    assert all("acknowledged with acks=all" in v.message for v in lost)
    assert all("nothing allows losing a write the ISR acknowledged" in v.message for v in lost)
    assert "pay-0: offset 9, p4-4 acknowledged with acks=all" in lost[-1].message
    assert not any(
        e.type == "unclean_leader_elected"
        for e in read_trace(Path(first.run_dir) / "trace.jsonl")[1]
    )
    assert "--seed 1 --deterministic" in first.reproduce
    again = run(STALLED, 1, tmp_path / "b")
    assert [v.line() for v in again.violations] == [v.line() for v in first.violations]
    assert again.trace_sha256 == first.trace_sha256


def test_an_allowed_loss_is_a_notice_naming_each_record_at_its_read(tmp_path: Path) -> None:
    """acks=1 writes only the crashed leader had: the scenario expects the loss, the run
    passes, and each lost record is a ``data_loss`` notice (its offset, identity and
    acknowledgement), in ``summary.json`` and in the timeline at the read that showed it."""
    result = run(SCENARIOS / "data-leader-killed-acks-1.yaml", 1, tmp_path)
    assert [p.line() for p in result.problems] == []
    lost = [n for n in result.notices if n.rule == "data_loss"]
    assert lost
    assert all("acknowledged with acks=1" in n.message for n in lost)
    identities = [n.message.split(", ")[1].split(" ")[0] for n in lost]
    assert len(set(identities)) == len(identities)
    assert all(i.startswith("p5-") for i in identities)  # the writes made during the stall
    timeline = (Path(result.run_dir) / "timeline.txt").read_text()
    first = lost[0]
    assert f"#{first.seq:<6} {'--':<10} notice data_loss: {first.message}" in timeline


DELIVERY = (
    "name: delivery-timeout\n"
    "cluster: {brokers: 3}\n"
    "steps:\n"
    "  - create_topic: {topic: pay, assignment: {0: [0, 1, 2]},\n"
    "                   configs: {min.insync.replicas: '2'}, outcome: ok}\n"
    "  - wait: {topic_ready: pay, within: 10}\n"
    "  - drop: {src: [1, 2], dst: [0], types: [FetchRequestData]}\n"
    "  - produce: {topic: pay, count: 1, acks: all, timeout_ms: 1000, {limits}}\n"
)


def produce_events(run_dir: str) -> tuple[list[dict[str, object]], list[float], list[str | None]]:
    """The ``produce_result`` fields, their times, and the types of the producer's
    events, from a run's trace."""
    _, events = read_trace(Path(run_dir) / "trace.jsonl")
    mine = [e for e in events if e.type in ("produce_result", "produce_expired")]
    results = [e for e in mine if e.type == "produce_result"]
    return [e.fields for e in results], [e.ts for e in mine], [e.type for e in mine]


@pytest.mark.slow  # two runs of a scenario
def test_a_produce_retries_until_its_delivery_timeout_on_the_run_clock(tmp_path: Path) -> None:
    """With ``delivery_timeout_ms`` and no ``retries`` a batch answered with a retriable
    error (acks=all, followers cut off: REQUEST_TIMED_OUT after the request's 1 s) is
    sent again until 3.5 s after it was made, as Kafka's producer with its default
    retries: four requests, the last cut at the deadline unanswered, then
    ``produce_expired``; the same seed gives the same trace."""
    scenario = parse_scenario(DELIVERY.replace("{limits}", "delivery_timeout_ms: 3500"))
    first = run_scenario(scenario, RunOptions(run_dir=tmp_path / "a", seed=3))
    results, times, types = produce_events(first.run_dir)
    assert [r["error"] for r in results] == ["REQUEST_TIMED_OUT"] * 3 + ["NO_ANSWER"]
    assert [r["attempt"] for r in results] == [0, 1, 2, 3]
    assert types[-1] == "produce_expired"
    # From the first answer (1 s after the batch was made) to the expiry: 2.5 s.
    assert 2.4 <= times[-1] - times[0] <= 2.5
    again = run_scenario(scenario, RunOptions(run_dir=tmp_path / "b", seed=3))
    assert again.trace_sha256 == first.trace_sha256


def test_retries_bound_a_produce_before_its_delivery_timeout(tmp_path: Path) -> None:
    """``retries`` and ``delivery_timeout_ms`` together: whichever runs out first ends
    the batch; one retry is two requests, well inside 30 s, and nothing expires."""
    limits = "retries: 1, delivery_timeout_ms: 30000"
    result = run_scenario(
        parse_scenario(DELIVERY.replace("{limits}", limits)),
        RunOptions(run_dir=tmp_path / "a", seed=3),
    )
    results, _, types = produce_events(result.run_dir)
    assert [r["error"] for r in results] == ["REQUEST_TIMED_OUT"] * 2
    assert "produce_expired" not in types


def test_a_delivery_timeout_shorter_than_a_request_is_refused() -> None:
    """As KafkaProducer refuses delivery.timeout.ms below request.timeout.ms; a produce
    without either limit is sent once."""
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(DELIVERY.replace("{limits}", "delivery_timeout_ms: 999"))
    assert "delivery_timeout_ms must be at least timeout_ms (1000), not 999" in str(caught.value)
    once = Produce(topic="t", count=1)
    assert once.max_retries == 0
    assert Produce(topic="t", count=1, delivery_timeout_ms=9000).max_retries is None
    assert Produce(topic="t", count=1, retries=2, delivery_timeout_ms=9000).max_retries == 2
