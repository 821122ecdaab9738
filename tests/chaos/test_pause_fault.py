"""The pause_broker fault: a paused broker does nothing at all until resumed, loses its
session only past its timeout, a zombie controller thawed late is fenced, and the
faults that cannot apply to a paused broker are refused; with processes it is SIGSTOP."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from actors.broker.replica_manager import ReplicaManager
from actors.runtime.tracer import read_trace
from cluster.chaos import RunOptions, ScenarioError, load_scenario, parse_scenario, run_scenario
from cluster.launch.zookeeper_server import ZooKeeperServer
from protocol.ids import ControllerEpoch
from protocol.trace import TraceEvent

ROOT = Path(__file__).resolve().parents[2]

TWO_PAUSES = """\
name: two-pauses
description: a short pause of broker 1, then a long one of broker 2
cluster:
  brokers: 3
  config: {zookeeper.session.timeout.ms: 6000}
steps:
  - create_topic: {topic: t, partitions: 3, replication_factor: 3, outcome: ok}
  - wait: {topic_ready: t, within: 10}
  - pause_broker: 1
    id: short
    duration: 4
  - sleep: 5
  - pause_broker: 2
    id: long
    duration: 10
  - create_topic: {topic: u, partitions: 3, replication_factor: 3, broker: 0}
  - sleep: 11
  - expect: {cluster_ready: true, within: 30}
  - expect: {topic_ready: u, within: 30}
"""


def _events(run_dir: Path) -> list[TraceEvent]:
    _, events = read_trace(run_dir / "trace.jsonl")
    return list(events)


def _own(event: TraceEvent, node: str) -> bool:
    """Something the node did itself (not a delivery to it, which the network traces)."""
    return event.node == node and event.kind not in {"deliver", "drop", "fault"}


def test_a_paused_broker_does_nothing_and_loses_its_session_only_past_the_timeout(
    tmp_path: Path,
) -> None:
    scenario = parse_scenario(TWO_PAUSES, source="two-pauses.yaml")
    result = run_scenario(scenario, RunOptions(run_dir=tmp_path / "run", seed=1))
    assert [p.line() for p in result.problems] == []
    events = _events(tmp_path / "run")

    for broker, paused_for, expires in (("broker-1", 4.0, False), ("broker-2", 10.0, True)):
        paused = next(e for e in events if e.node == broker and e.type == "node_paused")
        resumed = next(e for e in events if e.node == broker and e.type == "node_resumed")
        assert resumed.ts - paused.ts == pytest.approx(paused_for)
        between = [e for e in events if paused.seq < e.seq < resumed.seq and _own(e, broker)]
        assert between == []  # frozen: not one event of its own
        expired = [
            e
            for e in events
            if e.type == "session_expired" and e.actor.startswith(broker) and e.seq > paused.seq
        ]
        if expires:
            # The cluster plays ZooKeeper: the silent session expires at the timeout, and
            # the broker registers again once thawed.
            assert expired
            assert expired[0].ts - paused.ts == pytest.approx(6.0)
            again = [
                e
                for e in events
                if e.node == broker and e.type == "broker_reregistered" and e.seq > resumed.seq
            ]
            assert again
        else:
            assert expired == []


def test_a_zombie_controller_thawed_late_is_fenced_and_a_broker_that_is_not_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Thawed after another controller was elected, the old controller's queued requests
    (epoch 1) are refused; brokers that accept any epoch are caught."""
    path = ROOT / "scenarios" / "zombie-controller-after-pause.yaml"
    good = run_scenario(load_scenario(path), RunOptions(run_dir=tmp_path / "good", seed=1))
    assert good.status == "passed"
    events = _events(tmp_path / "good")
    resumed = next(e for e in events if e.type == "node_resumed")
    refused = [
        e
        for e in events
        if e.type == "control_response"
        and e.fields.get("error") == "STALE_CONTROLLER_EPOCH"
        and e.seq > resumed.seq
    ]
    assert refused

    def accept_all(self: ReplicaManager, controller_epoch: int, broker_epoch: int) -> None:
        self.controller_epoch = ControllerEpoch(max(self.controller_epoch, controller_epoch))

    monkeypatch.setattr(ReplicaManager, "_stale", accept_all)
    bad = run_scenario(load_scenario(path), RunOptions(run_dir=tmp_path / "bad", seed=1))
    assert bad.status == "failed"
    stale = [v.message for v in bad.violations if v.rule == "no_stale_epoch_accepted"]
    assert any("with controller epoch 1 after accepting epoch 2" in m for m in stale)


def test_a_paused_broker_cannot_be_stopped_gracefully(tmp_path: Path) -> None:
    text = """\
name: stop-paused
description: a graceful stop of a paused broker is refused
cluster: {brokers: 3}
steps:
  - pause_broker: 1
  - stop_broker: 1
"""
    result = run_scenario(
        parse_scenario(text, source="stop-paused.yaml"), RunOptions(run_dir=tmp_path, seed=1)
    )
    lines = [p.line() for p in result.problems]
    assert len(lines) == 1
    assert "broker 1 is paused: heal the pause before stopping it" in lines[0]


def test_a_paused_broker_crashed_ends_without_another_step_and_restarts(tmp_path: Path) -> None:
    text = """\
name: crash-paused
description: a crash of a paused broker, then its restart
cluster: {brokers: 3}
steps:
  - create_topic: {topic: t, partitions: 3, replication_factor: 3, outcome: ok}
  - wait: {topic_ready: t, within: 10}
  - pause_broker: 1
  - create_topic: {topic: u, partitions: 3, replication_factor: 3, broker: 0}
  - crash_broker: 1
  - heal: all
  - expect: {cluster_ready: true, within: 60}
  - expect: {topic_ready: u, within: 30}
"""
    result = run_scenario(
        parse_scenario(text, source="crash-paused.yaml"), RunOptions(run_dir=tmp_path, seed=1)
    )
    assert [p.line() for p in result.problems] == []
    events = _events(tmp_path)
    paused = next(e for e in events if e.node == "broker-1" and e.type == "node_paused")
    crashed = next(e for e in events if e.node == "broker-1" and e.type == "node_crashed")
    restarted = next(
        e for e in events if e.node == "broker-1" and e.type == "attach" and e.seq > crashed.seq
    )
    # Frozen, then crashed: its tasks end without a step of their own (the network
    # detaching the node on its way out is the network's doing). The restart waited
    # for the session to expire, once.
    own = [e.type for e in events if paused.seq < e.seq < restarted.seq and _own(e, "broker-1")]
    assert own == ["node_crashed", "detach"]
    assert restarted.ts == pytest.approx(18.05)
    expired = [e for e in events if e.type == "session_expired" and e.actor.startswith("broker-1")]
    assert len(expired) == 1


def test_pause_in_one_process_on_zookeeper_is_refused_at_its_line() -> None:
    text = """\
name: x
description: pause on ZooKeeper in one process
cluster: {brokers: 3, store: zookeeper}
steps:
  - pause_broker: 1
"""
    with pytest.raises(ScenarioError, match=r"x\.yaml:5: .*pause_broker .*embedded store"):
        parse_scenario(text, source="x.yaml")
    as_processes = text.replace("store: zookeeper", "store: zookeeper, mode: processes")
    assert parse_scenario(as_processes, source="x.yaml").cluster.mode == "processes"


@pytest.mark.zookeeper
def test_a_sigstopped_controller_process_is_expired_by_zookeeper_and_comes_back(
    zookeeper_server: ZooKeeperServer, tmp_path: Path
) -> None:
    """SIGSTOP of the controller's process mid-deletion: ZooKeeper expires its silent
    session by itself, another broker takes over, and after SIGCONT the old one resigns
    and the deletion completes."""
    scenario = load_scenario(
        ROOT / "scenarios" / "real" / "controller-sigstop-during-deletion.yaml"
    )
    result = run_scenario(
        scenario,
        RunOptions(
            run_dir=tmp_path / "run",
            seed=1,
            deterministic=False,
            zookeeper=f"{zookeeper_server.hosts}/kemu-{uuid.uuid4().hex}",
        ),
    )
    assert [p.line() for p in result.problems] == []
    events = _events(tmp_path / "run")
    injected = next(e for e in events if e.type == "fault_injected")
    paused = injected.fields["detail"]
    assert isinstance(paused, str)
    assert paused.endswith("paused")
    broker = "broker-" + paused.split()[1]
    elected = next(e for e in events if e.type == "controller_elected" and e.seq > injected.seq)
    assert elected.node != broker
    # Nothing of the stopped process from SIGSTOP until another broker was elected (its
    # session expired meanwhile). (After SIGCONT it runs at once, before the run traces
    # the heal: the heal's event is no bound.)
    frozen = [e for e in events if injected.ts < e.ts < elected.ts and _own(e, broker)]
    assert frozen == []
    assert elected.ts - injected.ts >= 6.0  # not before ZooKeeper's session timeout
