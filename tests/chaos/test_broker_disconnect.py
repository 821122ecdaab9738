"""In one process, a chaos client learns at once that a broker's process is gone, as it
would over TCP: a request in flight when the broker crashes fails with a disconnect, a
request to a broker that is down is refused (and not tried again before the reconnect
back-off), while a paused broker leaves the request unanswered until its timeout."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from actors.runtime.tracer import read_trace
from cluster.chaos import RunOptions, load_scenario, parse_scenario, run_scenario
from cluster.chaos.workload import RETRY_BACKOFF
from protocol.trace import TraceEvent

ROOT = Path(__file__).resolve().parents[2]

SETUP = """\
cluster:
  brokers: 3
  config: {zookeeper.session.timeout.ms: 6000}
steps:
  - create_topic: {topic: t, partitions: 1, replication_factor: 3,
                   assignment: {0: [0, 1, 2]}, outcome: ok}
  - wait: {topic_ready: t, within: 10}
"""
"""Topic t, led by broker 0 on three brokers."""

LEADER_CRASHED = (
    "name: leader-crashed-in-flight\n"
    "description: the leader of t crashes while a Produce to it is in flight\n"
    + SETUP
    + """\
  - crash_broker: 0
    id: leader-down
    after: {kind: send, type: ProduceRequestData, fields: {dst: broker-0/broker}}
  - produce: {topic: t, count: 1, acks: all, retries: 5}
"""
)

LEADER_PAUSED = (
    "name: leader-paused\n"
    "description: the leader of t is paused while a Produce to it waits\n"
    + SETUP
    + """\
  - pause_broker: 0
    id: leader-stopped
    duration: 4
  - produce: {topic: t, count: 1, acks: all, retries: 0, timeout_ms: 2000}
"""
)


def _events(run_dir: Path) -> list[TraceEvent]:
    _, events = read_trace(run_dir / "trace.jsonl")
    return list(events)


def _run(text: str, source: str, run_dir: Path) -> list[TraceEvent]:
    result = run_scenario(parse_scenario(text, source=source), RunOptions(run_dir=run_dir, seed=1))
    assert [p.line() for p in result.problems] == []
    return _events(run_dir)


def test_a_produce_in_flight_to_a_crashed_leader_fails_at_once_and_is_retried_after_backoff(
    tmp_path: Path,
) -> None:
    events = _run(LEADER_CRASHED, "leader-crashed.yaml", tmp_path)
    crash = next(e for e in events if e.node == "broker-0" and e.type == "node_crashed")
    results = [e for e in events if e.type == "produce_result"]
    # The first attempt ends at the crash, not after its 5 s timeout: a disconnect.
    first = results[0]
    assert (first.fields["attempt"], first.fields["broker"]) == (0, 0)
    assert first.fields["error"] == "NETWORK_EXCEPTION"
    assert first.ts == pytest.approx(crash.ts)
    disconnects = [e for e in events if e.type == "broker_disconnected"]
    assert disconnects[0].fields == {
        "broker": 0,
        "client": "",
        "request": "ProduceRequestData",
        "how": "reset",
    }
    assert disconnects[0].ts == pytest.approx(crash.ts)
    # Retried after retry.backoff.ms: the leader is still broker 0 (its session has not
    # expired), which refuses the connection, at most once per reconnect back-off
    # (50 ms doubling to 1 s), until the new leader takes the batch.
    refused = [e for e in disconnects if e.fields["how"] == "refused"]
    assert refused
    assert refused[0].ts == pytest.approx(crash.ts + RETRY_BACKOFF)
    assert {e.fields["broker"] for e in refused} == {0}
    gaps = [b.ts - a.ts for a, b in itertools.pairwise(refused)]
    assert all(gap >= RETRY_BACKOFF - 1e-9 for gap in gaps)
    assert all(later >= earlier - 1e-9 for earlier, later in itertools.pairwise(gaps))
    assert max(gaps) <= 1.0 + RETRY_BACKOFF + 1e-9
    last = results[-1]
    assert last.fields["error"] == "NONE"
    assert last.fields["broker"] != 0
    sends = [
        e
        for e in events
        if e.kind == "send"
        and e.type == "ProduceRequestData"
        and e.fields["dst"] != "broker-0/broker"
    ]
    assert sends[0].ts > refused[-1].ts  # sent to the new leader once it was named


def test_a_produce_to_a_paused_leader_is_unanswered_until_its_timeout(tmp_path: Path) -> None:
    events = _run(LEADER_PAUSED, "leader-paused.yaml", tmp_path)
    sent = next(e for e in events if e.kind == "send" and e.type == "ProduceRequestData")
    result = next(e for e in events if e.type == "produce_result")
    # SIGSTOP tells the client nothing: the request waits out timeout_ms plus the margin.
    assert result.fields["error"] == "NO_ANSWER"
    assert result.ts - sent.ts == pytest.approx(2.0 + 1.0)
    assert [e for e in events if e.type == "broker_disconnected"] == []


@pytest.mark.slow
def test_members_whose_coordinator_crashed_mid_rebalance_look_for_the_next_at_once(
    tmp_path: Path,
) -> None:
    """Their SyncGroups in flight fail at the crash; they look for the coordinator again
    and JoinGroup at the next one as soon as FindCoordinator names it (once the crashed
    broker's session has expired and the controller moved the group's partition), not
    after the SyncGroup's session timeout plus 2 s."""
    path = ROOT / "scenarios" / "group-coordinator-killed-mid-rebalance.yaml"
    scenario = load_scenario(path)
    result = run_scenario(scenario, RunOptions(run_dir=tmp_path, seed=1))
    assert result.status == "passed"
    events = _events(tmp_path)
    crash = next(e for e in events if e.type == "node_crashed")
    crashed = crash.node
    reset = [
        e
        for e in events
        if e.type == "broker_disconnected" and e.fields["how"] == "reset" and e.seq > crash.seq
    ]
    assert {e.fields["request"] for e in reset} >= {"SyncGroupRequestData"}
    assert all(e.ts == pytest.approx(crash.ts) for e in reset)
    rejoining = [e for e in events if e.type == "consumer_rejoining" and e.seq > crash.seq]
    assert rejoining[0].fields["reason"] == "NETWORK_EXCEPTION"
    assert rejoining[0].ts == pytest.approx(crash.ts)
    join = next(
        e
        for e in events
        if e.seq > crash.seq
        and e.kind == "send"
        and e.type == "JoinGroupRequestData"
        and e.node == "chaos"
        and not e.fields["dst"].startswith(f"{crashed}/")
    )
    expired = next(
        e
        for e in events
        if e.type == "session_expired" and e.actor.startswith(crashed) and e.seq > crash.seq
    )
    session = 6.0  # zookeeper.session.timeout.ms: the controller learns of the crash
    assert expired.ts - crash.ts == pytest.approx(session)
    sync_wait = 10.0 + 2.0  # what a SyncGroup waited for before (session timeout + 2 s)
    # Within about the members' back-offs of the moment the group could move.
    assert join.ts - expired.ts <= 1.0 + RETRY_BACKOFF
    assert join.ts - crash.ts < sync_wait
