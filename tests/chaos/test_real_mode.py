"""Chaos in real mode: one OS process per broker on a real ZooKeeper (SIGKILL, real
session expiry, traces merged from every process), and the faults that cannot cross
processes refused up front."""

from __future__ import annotations

import io
import json
import math
import uuid
from collections import Counter
from pathlib import Path

import pytest

from actors.runtime.tracer import read_trace
from cluster.chaos import RunOptions, ScenarioError, load_scenario, parse_scenario, run_scenario
from cluster.chaos.real import LiveOrder, merge
from cluster.cli.chaos import chaos_main
from cluster.cli.main import build_parser
from cluster.launch.zookeeper_server import ZooKeeperServer
from protocol.trace import TraceEvent
from tests.support.browser import ARTIFACTS, elements, render

REAL = Path(__file__).resolve().parents[2] / "scenarios" / "real"


def run_real(name: str, server: ZooKeeperServer, out: Path) -> tuple[str, Counter[str], list[str]]:
    """Run ``scenarios/real/<name>.yaml`` with seed 1: its status, the trace's events per
    node (and the broker processes' network tap events per type), and its problems."""
    scenario = load_scenario(REAL / f"{name}.yaml")
    run_dir = out / scenario.name / "seed-1"
    result = run_scenario(
        scenario,
        RunOptions(
            run_dir=run_dir,
            seed=1,
            deterministic=False,
            zookeeper=f"{server.hosts}/kemu-{uuid.uuid4().hex}",
        ),
    )
    _, events = read_trace(run_dir / "trace.jsonl")
    nodes: Counter[str] = Counter()
    seqs: list[int] = []
    sessions_expired: list[str] = []
    for event in events:
        nodes[event.node] += 1
        if event.actor == "network_tap":  # only the broker processes' taps, in this mode
            nodes[f"network_tap:{event.type}"] += 1
        seqs.append(event.seq)
        if event.type == "session_expired":
            sessions_expired.append(str(event.fields.get("cause")))
    assert seqs == list(range(1, len(seqs) + 1))  # merged into one gap-free sequence
    nodes["session_expired:" + ",".join(sessions_expired)] += 1
    return result.status, nodes, [p.line() for p in result.problems]


@pytest.mark.zookeeper
def test_a_real_session_expiry_of_the_controller_on_processes(
    zookeeper_server: ZooKeeperServer, tmp_path: Path
) -> None:
    """The controller's process loses its session for real: ZooKeeper deletes its
    ephemerals before the broker hears of it, so it registers again at once; a new
    controller is elected and creation goes on. Every broker process traced events, and
    the network tap the command line hands each of them recorded the controller's requests
    and their answers."""
    status, nodes, problems = run_real("controller-session-expiry", zookeeper_server, tmp_path)
    assert (status, problems) == ("passed", [])
    assert all(nodes[f"broker-{b}"] > 0 for b in range(3))
    assert nodes["network_tap:control_request"] > 0
    assert nodes["network_tap:control_response"] > 0
    assert any(key.startswith("session_expired:") and "forced" in key for key in nodes)
    # its report draws the merged trace: the store's lane is ZooKeeper's node
    name = load_scenario(REAL / "controller-session-expiry.yaml").name
    page = tmp_path / name / "seed-1" / "report.html"
    drawn = elements(render(page, ARTIFACTS / "report" / f"{name}.png", tmp_path / "chromium"))
    body = next(e for e in drawn if e.tag == "body")
    assert body.attrs["data-overflow"] == "none"
    lanes = body.attrs["data-lanes"].split()
    assert lanes[:3] == ["broker-0", "broker-1", "broker-2"]
    assert lanes[-1] == "chaos"
    store = lanes[-2]
    arrows = [e for e in drawn if e.tag == "line" and "arrow" in e.classes]
    to_store = {a.attrs["data-type"] for a in arrows if a.attrs["data-dst"] == store}
    assert "store create" in to_store
    assert any(a.attrs["data-type"] == "LeaderAndIsrRequest" for a in arrows)
    marks = [e.attrs.get("data-type") for e in drawn if e.tag == "text" and "mark" in e.classes]
    assert marks.count("controller_elected") >= 2


@pytest.mark.zookeeper
def test_a_sigkilled_follower_on_processes_comes_back(
    zookeeper_server: ZooKeeperServer, tmp_path: Path
) -> None:
    """SIGKILL of a broker process that is not the controller: its session expires on
    the server, creations go on without it, and after its restart everything converges."""
    status, nodes, problems = run_real(
        "follower-sigkill-during-creation", zookeeper_server, tmp_path
    )
    assert (status, problems) == ("passed", [])
    assert all(nodes[f"broker-{b}"] > 0 for b in range(3))


@pytest.mark.zookeeper
@pytest.mark.slow  # ~35 s: the removed replicas' logs go after the log manager's first 30 s
def test_a_reassignment_and_an_election_through_the_api_on_processes(
    zookeeper_server: ZooKeeperServer, tmp_path: Path
) -> None:
    """AlterPartitionReassignments and ElectLeaders sent to the controller's process: the
    topic moves to the other two brokers and each leadership to its new first replica."""
    status, nodes, problems = run_real(
        "reassign-and-elect-through-the-api", zookeeper_server, tmp_path
    )
    assert (status, problems) == ("passed", [])
    assert all(nodes[f"broker-{b}"] > 0 for b in range(4))


@pytest.mark.zookeeper
def test_a_sigkilled_leader_under_acks_all_loses_nothing(
    zookeeper_server: ZooKeeperServer, tmp_path: Path
) -> None:
    """SIGKILL of the leader's process while a producer writes with acks=all over the
    Kafka wire: every record is acknowledged (after retries reach the new leader) and read
    back at its offset, from the new leader and after the killed broker returned, whose
    log is then the leader's."""
    status, nodes, problems = run_real("data-leader-sigkill-acks-all", zookeeper_server, tmp_path)
    assert (status, problems) == ("passed", [])
    assert all(nodes[f"broker-{b}"] > 0 for b in range(3))
    run_dir = tmp_path / "real-data-leader-sigkill-acks-all" / "seed-1"
    _, events = read_trace(run_dir / "trace.jsonl")
    trace = list(events)
    acked = {
        identity: e.fields["base_offset"] + i
        for e in trace
        if e.type == "produce_result" and e.fields["error"] == "NONE"
        for i, identity in enumerate(e.fields["records"])
    }
    assert sorted(acked, key=lambda i: int(i.split("-")[1])) == [f"p2-{n}" for n in range(30)]
    reads = [e.fields for e in trace if e.type == "records_read" and e.fields["settled"]]
    assert len(reads) >= 2
    for read in reads:
        assert {identity: offset for offset, identity in read["records"]} == acked
    logs = [e.fields for e in trace if e.type == "replica_logs_read"]
    assert [log["broker"] for log in logs[-1]["logs"]] == [0, 1, 2]
    assert logs[-1]["caught_up"]


@pytest.mark.zookeeper
def test_a_consumer_group_over_the_wire_survives_its_sigkilled_coordinator(
    zookeeper_server: ZooKeeperServer, tmp_path: Path
) -> None:
    """Two group members speak to the coordinator over the Kafka wire of broker
    processes; SIGKILL of the coordinator's process moves the group to the next leader of
    its offsets partition, which loads it; the members commit there, and at the end the
    group is Stable with every partition owned (the group rules hold)."""
    status, _, problems = run_real("group-coordinator-sigkill", zookeeper_server, tmp_path)
    assert (status, problems) == ("passed", [])
    run_dir = tmp_path / "real-group-coordinator-sigkill" / "seed-1"
    _, events = read_trace(run_dir / "trace.jsonl")
    trace = list(events)
    loaded = [e.node for e in trace if e.type == "group_partition_loaded"]
    assert len(set(loaded)) >= 2  # the group moved to another broker
    accepted = {
        e.fields["coordinator"]
        for e in trace
        if e.type == "consumer_committed" and all(o[3] == "NONE" for o in e.fields["offsets"])
    }
    assert len(accepted) >= 2  # commits accepted by both coordinators
    final = [e.fields for e in trace if e.type == "consumer_group_settled"]
    assert [(f["state"], len(f["owners"])) for f in final] == [("Stable", 3)]


def test_faults_that_cannot_cross_processes_are_refused_with_their_line() -> None:
    """Network, disk and clock faults live inside one process: a processes scenario
    naming them is bad input, at the step's line."""
    text = """\
name: x
description: a partition across processes
cluster: {brokers: 3, mode: processes}
steps:
  - partition: [[0], [1, 2]]
"""
    with pytest.raises(ScenarioError, match=r"x\.yaml:5: .*partition.*processes"):
        parse_scenario(text, source="x.yaml")
    # The same file in-process is fine, and --processes applies the same refusal.
    in_process = text.replace(", mode: processes", "")
    assert parse_scenario(in_process, source="x.yaml").cluster.mode == "in-process"
    with pytest.raises(ScenarioError, match="processes"):
        parse_scenario(in_process, source="x.yaml", cluster={"mode": "processes"})


def test_real_mode_cannot_be_deterministic(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--deterministic with --processes or --zookeeper is one error line, exit 2."""
    scenario = REAL / "controller-session-expiry.yaml"
    for flag in (["--processes"], ["--zookeeper", "127.0.0.1:1"]):
        args = build_parser().parse_args(
            ["chaos", "run", str(scenario), "--deterministic", "--out", str(tmp_path), *flag]
        )
        assert chaos_main(args, out=io.StringIO()) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1
        assert lines[0].startswith("Error:")
    assert not any(tmp_path.iterdir())


def test_every_real_scenario_is_valid_and_real() -> None:
    """The real-mode library runs on processes and ZooKeeper."""
    paths = sorted(REAL.glob("*.yaml"))
    assert len(paths) >= 3
    for path in paths:
        scenario = load_scenario(path)
        assert (scenario.cluster.mode, scenario.cluster.store) == ("processes", "zookeeper")
        assert json.dumps(scenario.name).startswith('"real-')


def _event(seq: int, ts: float, node: str, type_: str = "e", **fields: object) -> TraceEvent:
    return TraceEvent(
        seq=seq, ts=ts, node=node, actor="a", kind="event", type=type_, corr=None, fields=fields
    )


def test_live_order_hands_events_on_in_merge_order_once_old_enough() -> None:
    """Events from several processes reach the rules in time order (ties as recorded),
    only once they are old enough, in the same order ``merge`` writes the trace; one
    that comes after a later one was released counts as late."""
    seen: list[int] = []
    live = LiveOrder(lambda e: seen.append(e.seq))
    recorded = [
        _event(1, 0.5, "chaos"),
        _event(2, 0.2, "broker-0"),
        _event(3, 0.9, "broker-1"),
        _event(4, 0.2, "broker-1"),
        _event(5, 1.5, "chaos", "invariant_violated", at_seq=3),
    ]
    for event in recorded[:4]:
        live.push(event)
    live.release_until(0.6)
    assert seen == [2, 4, 1]
    live.push(recorded[4])
    live.release_until(math.inf)
    assert seen == [2, 4, 1, 3, 5]
    assert live.late == 0
    merged, renumbered = merge(recorded)
    assert [renumbered[s] for s in seen] == [1, 2, 3, 4, 5]
    assert merged[-1].fields["at_seq"] == renumbered[3]  # a violation's event, renumbered
    live.push(_event(6, 1.0, "broker-0"))  # older than what the rules already saw
    assert live.late == 1
