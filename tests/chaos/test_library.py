"""The scenario library and the admin steps it needs: every file loads, the reassignment
and preferred-election steps are validated with file:line errors and do what they say in
a deterministic run, and the reassignment's transient ISR (Kafka's own) is not a
violation."""

from __future__ import annotations

import json
import re
from pathlib import Path

import msgspec
import pytest

from actors.invariants.trace_rules import LeaderInIsr
from actors.runtime.tracer import read_trace
from cluster.chaos import RunOptions, ScenarioError, load_scenario, parse_scenario, run_scenario
from cluster.chaos.model import (
    FAULT_TYPES,
    ClusterSetup,
    CreateTopic,
    EventSeen,
    Expect,
    Pattern,
    PreferredElection,
    PreferredLeaders,
    ReassignmentDone,
    ReassignPartitions,
    Scenario,
    StartBroker,
    StopBroker,
    TopicReady,
    Wait,
)
from cluster.chaos.runner import CHECKED_RULES
from protocol.trace import TraceEvent

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def test_the_library_has_every_scenario_loadable_and_documented() -> None:
    """At least 22 scenarios, each valid, named after its file, documented in
    docs/chaos.md, and citing the Kafka test it mirrors or the Kafka method it exercises."""
    paths = sorted(SCENARIOS.glob("*.yaml"))
    assert len(paths) >= 22
    for path in paths:
        scenario = load_scenario(path)
        assert scenario.name == path.stem
        # every scenario names the Kafka test it mirrors or the Kafka method it exercises
        assert re.search(r"\b[A-Z]\w+(Test|\.[a-z]\w+)\b", scenario.description), path.name
    docs = (SCENARIOS.parent / "docs" / "chaos.md").read_text()
    assert all(f"| `{path.stem}` |" in docs for path in paths)


def test_the_documented_invariants_are_the_ones_a_run_checks() -> None:
    """docs/chaos.md's table of invariants has one row per rule a run checks and lists in
    its invariants.json (``CHECKED_RULES``), and no other."""
    docs = (SCENARIOS.parent / "docs" / "chaos.md").read_text()
    section = docs[docs.index("## Invariants") :]
    section = section[: section.index("\n## ", 1)]
    rows = re.findall(r"^\| `(\w+)` \|", section, re.MULTILINE)
    assert len(rows) == len(set(rows))
    assert sorted(rows) == list(CHECKED_RULES)


def test_the_documented_faults_are_the_fault_steps() -> None:
    """docs/chaos.md's table of faults has one row per fault step the loader reads
    (``FAULT_TYPES``, by YAML key), and no other."""
    docs = (SCENARIOS.parent / "docs" / "chaos.md").read_text()
    section = docs[docs.index("### Faults") :]
    section = section[: section.index("\n### ", 1)]
    rows = re.findall(r"^\| `(\w+)`", section, re.MULTILINE)
    assert sorted(rows) == sorted(str(t.__struct_config__.tag) for t in FAULT_TYPES)


def test_the_new_steps_and_conditions_load_with_their_shorthands() -> None:
    """The tool steps and their conditions load as the typed values, `kind: T` naming
    the topic; both tools always take the store path."""
    scenario = parse_scenario(
        "name: x\n"
        "steps:\n"
        "  - reassign_partitions: {topic: t, assignment: {0: [1, 2], 1: [2, 0]}, outcome: ok}\n"
        "  - preferred_election: t\n"
        "  - preferred_election: {topic: t, partitions: [1], outcome: error}\n"
        "  - wait: {reassignment_done: t}\n"
        "  - expect: {reassignment_done: {topic: t, assignment: {0: [1, 2]}}, within: 5}\n"
        "  - expect: {preferred_leaders: t, within: 5}\n",
        source="good.yaml",
    )
    assert scenario.steps == (
        ReassignPartitions(topic="t", assignment={0: (1, 2), 1: (2, 0)}, outcome="ok"),
        PreferredElection(topic="t"),
        PreferredElection(topic="t", partitions=(1,), outcome="error"),
        Wait(condition=ReassignmentDone(topic="t")),
        Expect(condition=ReassignmentDone(topic="t", assignment={0: (1, 2)}), within=5),
        Expect(condition=PreferredLeaders(topic="t"), within=5),
    )
    assert all(step.via == "store" for step in scenario.steps[:3])


def test_the_tool_steps_take_the_wire() -> None:
    """``via: wire`` with a broker, a timeout and retries; an encoded store step shows no
    ``via`` (so the scenarios written before stay byte for byte as they were)."""
    scenario = parse_scenario(
        "name: x\n"
        "steps:\n"
        "  - reassign_partitions: {topic: t, assignment: {0: [1]}, via: wire, broker: controller,"
        " retries: 2}\n"
        "  - preferred_election: {topic: t, via: wire, broker: 1, timeout_ms: 500}\n",
        source="wire.yaml",
    )
    assert scenario.steps == (
        ReassignPartitions(
            topic="t", assignment={0: (1,)}, via="wire", broker="controller", retries=2
        ),
        PreferredElection(topic="t", via="wire", broker=1, timeout_ms=500),
    )
    assert msgspec.to_builtins(PreferredElection(topic="t")) == {
        "kind": "preferred_election",
        "topic": "t",
    }


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (
            "name: x\nsteps:\n  - reassign_partitions:\n      topic: bad topic\n"
            "      assignment: {0: [1]}\n",
            4,
            'steps[0] (reassign_partitions).topic: Topic name "bad topic" is illegal',
        ),
        (
            "name: x\ncluster: {brokers: 3}\nsteps:\n  - reassign_partitions:\n      topic: t\n"
            "      assignment:\n        0: [1, 2]\n        1: [2, 5]\n",
            8,
            "steps[0] (reassign_partitions).assignment[1]: no broker 5 (the cluster has 3)",
        ),
        (
            "name: x\nsteps:\n  - reassign_partitions: {topic: t, assignment: {0: [1, 1]}}\n",
            3,
            "partition 0 lists a broker twice: [1, 1]",
        ),
        (
            "name: x\nsteps:\n  - reassign_partitions: {topic: t, assignment: {}}\n",
            3,
            "assignment needs at least one partition",
        ),
        (
            "name: x\nsteps:\n"
            "  - reassign_partitions: {topic: t, assignment: {0: [0]}, via: api}\n",
            3,
            "steps[0] (reassign_partitions).via: Invalid enum value 'api'",
        ),
        (
            "name: x\ncluster: {brokers: 3}\nsteps:\n"
            "  - preferred_election: {topic: t, via: wire, broker: 3}\n",
            4,
            "steps[0] (preferred_election).broker: no broker 3 (the cluster has 3)",
        ),
        (
            "name: x\nsteps:\n  - preferred_election: {topic: t, via: wire, retries: -1}\n",
            3,
            "retries must not be negative, not -1",
        ),
        (
            "name: x\nsteps:\n  - reassign_partitions: t\n",
            3,
            "expected a mapping of reassign_partitions's fields",
        ),
        (
            "name: x\nsteps:\n  - sleep: 1\n  - preferred_election: 'a:b'\n",
            4,
            'steps[1] (preferred_election).topic: Topic name "a:b" is illegal',
        ),
        (
            "name: x\nsteps:\n  - preferred_election: {topic: t, outcome: TOPIC_ALREADY_EXISTS}\n",
            3,
            "steps[0] (preferred_election).outcome: Invalid enum value 'TOPIC_ALREADY_EXISTS'",
        ),
        (
            "name: x\nsteps:\n  - preferred_election: {topic: t, partitions: [0, 0]}\n",
            3,
            "partitions lists one twice: [0, 0]",
        ),
        (
            "name: x\ncluster: {brokers: 2}\nsteps:\n"
            "  - expect: {reassignment_done: {topic: t, assignment: {0: [0, 4]}}}\n",
            4,
            "steps[0] (expect).condition.assignment[0]: no broker 4 (the cluster has 2)",
        ),
    ],
)
def test_a_bad_reassignment_or_election_is_one_line_with_the_file_and_line(
    text: str, line: int, message: str
) -> None:
    """A bad topic name, a broker outside the cluster, a malformed assignment or partition
    list, a wire-only field or outcome: one line naming the file, the line and the field."""
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text, source="bad.yaml")
    error = str(caught.value)
    assert "\n" not in error
    assert error.startswith(f"bad.yaml:{line}: "), error
    assert message in error, error


REJOINED = Pattern(type="isr_altered", fields={"topic": "t", "partition": 0, "to_isr": [2, 1]})


def test_a_reassignment_and_a_preferred_election_do_what_they_say(tmp_path: Path) -> None:
    """The reassignment moves the partitions (the store, the caches, and the removed
    replicas' logs follow) and leaves no znode; bouncing broker 1 moves leadership off it,
    and the election moves it back. The conditions see both states: each is expected
    once when it cannot hold, and those two expectations are the run's only failures."""
    target: dict[int, tuple[int, ...]] = {0: (1, 2), 1: (2, 1)}
    scenario = Scenario(
        name="tools",
        cluster=ClusterSetup(
            brokers=3,
            config={
                "auto.leader.rebalance.enable": "false",
                "log.segment.delete.delay.ms": "1000",
            },
        ),
        steps=(
            CreateTopic(topic="t", assignment={0: (0, 1), 1: (1, 0)}, outcome="ok"),
            Wait(condition=TopicReady(topic="t"), within=10),
            ReassignPartitions(topic="t", assignment=target, outcome="ok"),
            Wait(condition=ReassignmentDone(topic="t", assignment=target), within=20),
            Expect(condition=ReassignmentDone(topic="t", assignment={0: (0, 1)})),  # fails
            StopBroker(broker=1),
            StartBroker(broker=1),
            Wait(condition=TopicReady(topic="t"), within=10),
            Expect(condition=PreferredLeaders(topic="t")),  # fails: 2 leads partition 0
            # Broker 1 is back in partition 0's ISR once it fetched and 2's AlterIsr landed.
            Wait(condition=EventSeen(pattern=REJOINED), within=10),
            PreferredElection(topic="t", outcome="ok"),
            Wait(condition=PreferredLeaders(topic="t"), within=20),
        ),
    )
    result = run_scenario(scenario, RunOptions(run_dir=tmp_path / "tools", seed=3))
    assert result.error is None
    assert [p.line().split(":")[0] for p in result.problems] == ["expectation", "expectation"]
    assert "reassignment_done t" in result.failures[0].message
    assert "preferred_leaders t" in result.failures[1].message
    assert result.violations == []

    final = json.loads((tmp_path / "tools" / "final_state.json").read_text())
    store = final["store"]
    assert store["topics"]["t"] == {"0": [1, 2], "1": [2, 1]}
    assert {p: s["leader"] for p, s in store["states"]["t"].items()} == {"0": 1, "1": 2}
    assert not {"t-0", "t-1"} & set(final["log_dirs"]["0"])  # broker 0's replicas went

    _, events = read_trace(tmp_path / "tools" / "trace.jsonl")
    trace = list(events)
    results = [e.fields for e in trace if e.type == "admin_result" and e.fields["via"] == "store"]
    assert [(r["op"], r["error"]) for r in results] == [
        ("reassign_partitions", "NONE"),
        ("preferred_election", "NONE"),
    ]
    assert "Successfully started partition reassignments for t-0,t-1" in results[0]["detail"]
    assert "Successfully started preferred replica election" in results[1]["detail"]
    store_writes = {
        (e.actor, e.fields["path"])
        for e in trace
        if e.kind == "store" and e.type == "create" and e.fields.get("result") == "ok"
    }
    assert ("kemu-reassign", "/admin/reassign_partitions") in store_writes
    assert ("kemu-leader-election", "/admin/preferred_replica_election") in store_writes


def test_a_tool_refusal_is_an_error_outcome(tmp_path: Path) -> None:
    """A reassignment to a broker that is not registered is refused by the tool, as
    kafka-reassign-partitions does: outcome ERROR with its message, nothing written."""
    scenario = Scenario(
        name="refused",
        cluster=ClusterSetup(brokers=3),
        steps=(
            CreateTopic(topic="t", assignment={0: (0, 1)}, outcome="ok"),
            StopBroker(broker=2),
            ReassignPartitions(topic="t", assignment={0: (1, 2)}, outcome="error"),
            PreferredElection(topic="gone", outcome="error"),
        ),
    )
    result = run_scenario(scenario, RunOptions(run_dir=tmp_path / "refused", seed=1))
    assert [p.line() for p in result.problems] == []
    _, events = read_trace(tmp_path / "refused" / "trace.jsonl")
    trace = list(events)
    details = [e.fields["detail"] for e in trace if e.type == "admin_result"][1:]
    assert details == [
        "Error: The proposed assignment contains non-existent brokerIDs: 2",
        "Error: Topic gone does not exist",
    ]
    tool_writes = [
        e
        for e in trace
        if e.kind == "store" and e.actor.startswith("kemu-") and e.type in ("create", "set")
    ]
    assert tool_writes == []


# ----------------------------------------------------------------------------- leader_in_isr


def _states(seq: int, *states: tuple[int, int, list[int], list[int]]) -> TraceEvent:
    return TraceEvent(
        seq=seq,
        ts=0.0,
        node="chaos",
        actor="network_tap",
        kind="event",
        type="control_request",
        fields={
            "request": "LeaderAndIsrRequest",
            "dst": "broker-1/broker",
            "states": [
                ["t", 0, leader, epoch, isr, replicas] for leader, epoch, isr, replicas in states
            ],
        },
    )


def test_the_isr_may_keep_a_removed_replica_while_a_reassignment_completes() -> None:
    """Kafka sends the target replicas with the old ISR (step B3) before shrinking it
    (B4): no violation. An ISR member that never was a replica still is one."""
    rule = LeaderInIsr()
    reassignment = [
        _states(1, (0, 0, [0, 1], [0, 1])),
        _states(2, (0, 1, [0, 1], [1, 2, 0])),  # phase A: RS = TRS + ORS
        _states(3, (1, 2, [0, 1, 2], [1, 2])),  # B3: RS = TRS, ISR unchanged
        _states(4, (1, 3, [1, 2], [1, 2])),  # B4: the ISR shrinks
    ]
    assert [v for e in reassignment for v in rule.observe(e)] == []
    stranger = rule.observe(_states(5, (1, 4, [1, 2, 3], [1, 2])))
    assert [v.message for v in stranger] == [
        "t-0 in LeaderAndIsrRequest to broker-1/broker: ISR members [3] are not replicas [1, 2, 0]"
    ]
    fresh = LeaderInIsr()
    assert len(fresh.observe(_states(1, (1, 0, [0, 1], [1, 2])))) == 1
