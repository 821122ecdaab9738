"""Scenario files: YAML becomes typed steps, and every mistake is one line naming the file,
the line and what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.chaos import ScenarioError, check_scenario, load_scenario, parse_scenario
from cluster.chaos.model import (
    ClusterSetup,
    CrashBroker,
    CreateTopic,
    DeleteTopic,
    DiskFailure,
    EventSeen,
    Expect,
    Heal,
    KillController,
    NetworkPartition,
    Pattern,
    Scenario,
    Sleep,
    Wait,
)
from protocol.trace import TraceEvent

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"

GOOD = """\
name: sample
description: every shape of step
cluster:
  brokers: 3
  racks: {0: a, 1: b, 2: a}
  config:
    zookeeper.session.timeout.ms: 6000
    delete.topic.enable: true
steps:
  - create_topic: {topic: t1, partitions: 3, replication_factor: 2, outcome: ok}
  - create_topic: t2
  - crash_broker: 2
    id: down
  - kill_controller:
    after: {type: control_request, fields: {request: StopReplicaRequest, delete_partition: true}}
  - partition: [[controller], [1, 2]]
    at: 12.5
    duration: 3
  - disk_failure: {broker: any, ops: [rename], times: 1}
  - delete_topic: {topic: t1, via: store}
  - sleep: 2
  - wait: {topic_ready: t1, within: 10}
  - expect: converged
  - expect: {event: {type: controller_elected, fields: {epoch: 2}, nth: 1}, within: 5}
  - heal: down
"""


def test_a_scenario_file_becomes_the_python_values_of_the_same_vocabulary() -> None:
    """Every step kind, its shorthand and its options load as the typed values a Python
    scenario would use; broker configs keep their YAML text."""
    scenario = parse_scenario(GOOD, source="good.yaml")
    assert scenario.cluster == ClusterSetup(
        brokers=3,
        racks={0: "a", 1: "b", 2: "a"},
        config={"zookeeper.session.timeout.ms": "6000", "delete.topic.enable": "true"},
    )
    steps = scenario.steps
    assert steps[0] == CreateTopic(topic="t1", partitions=3, replication_factor=2, outcome="ok")
    assert steps[1] == CreateTopic(topic="t2")
    assert steps[2] == CrashBroker(broker=2, id="down")
    assert steps[3] == KillController(
        after=(
            Pattern(
                type="control_request",
                fields={"request": "StopReplicaRequest", "delete_partition": True},
            ),
        )
    )
    assert steps[4] == NetworkPartition(groups=(("controller",), (1, 2)), at=12.5, duration=3)
    assert steps[5] == DiskFailure(broker="any", ops=("rename",), times=1)
    assert steps[6] == DeleteTopic(topic="t1", via="store")
    assert steps[7] == Sleep(seconds=2)
    assert isinstance(steps[8], Wait)
    assert steps[8].within == 10
    assert isinstance(steps[9], Expect)
    assert steps[9].within == 0
    assert steps[10] == Expect(
        condition=EventSeen(pattern=Pattern(type="controller_elected", fields={"epoch": 2}, nth=1)),
        within=5,
    )
    assert steps[11] == Heal(fault="down")
    assert check_scenario(scenario) is scenario


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("name: x\nsteps:\n  - explode: 3\n", 3, "steps[0]: unknown step 'explode'"),
        ("name: x\nsteps:\n  - sleep: 1\n    crash_broker: 1\n", 3, "exactly one kind"),
        (
            "name: x\nsteps:\n  - sleep: 1\n  - create_topic: {topic: t, partitions: many}\n",
            4,
            "steps[1] (create_topic).partitions: Expected `int`, got `str`",
        ),
        (
            "name: x\nsteps:\n  - create_topic:\n      topic: t\n      colour: red\n",
            5,
            "steps[0] (create_topic).colour: unknown field `colour`",
        ),
        (
            "name: x\ncluster: {brokers: 3}\nsteps:\n  - sleep: 1\n  - crash_broker: 7\n",
            5,
            "steps[1] (crash_broker).broker: no broker 7 (the cluster has 3)",
        ),
        (
            "name: x\nsteps:\n  - heal: nothing\n",
            3,
            "steps[0] (heal).fault: no earlier fault has id 'nothing'",
        ),
        (
            "name: x\nsteps:\n  - drop: {types: [StopReplica]}\n",
            3,
            "steps[0] (drop).types[0]: unknown message type 'StopReplica'",
        ),
        (
            "name: x\ncluster:\n  config:\n    no.such.config: 1\n",
            4,
            "cluster.config.no.such.config: Unknown broker config name: no.such.config",
        ),
        ("name: x\nsteps:\n  - wait: {topic_gone: t}\n", 3, "unknown condition 'topic_gone'"),
        ("name: x\nsteps:\n  - sleep: -1\n", 3, "seconds must not be negative"),
        ("name: x\nsteps:\n  - pause: 1\n", 3, "pause is not available yet"),
        ("name: x\nsteps:\n  - sleep: 1\n    at: 3\n", 4, "at applies to actions, not to sleep"),
        ("name: x\nsteps: [\n", 3, "not valid YAML"),
        ("name: x\nname: y\n", 2, "duplicate key 'name'"),
        (
            "name: x\nsteps:\n  - delete_topic: {topic: t, outcome: BROKEN}\n",
            3,
            "outcome is any, ok, error or a Kafka error name, not 'BROKEN'",
        ),
        (
            "name: x\nsteps:\n  - crash_broker: 1\n    id: a\n  - stop_broker: 2\n    id: a\n",
            6,
            "steps[1] (stop_broker).id: id 'a' is already used",
        ),
    ],
)
def test_every_mistake_is_one_line_with_the_file_and_line(
    text: str, line: int, message: str
) -> None:
    """The error names the source, the line of the offending part and what is wrong."""
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text, source="bad.yaml")
    error = str(caught.value)
    assert "\n" not in error
    assert error.startswith(f"bad.yaml:{line}: "), error
    assert message in error, error


def test_an_unreadable_file_is_a_scenario_error(tmp_path: Path) -> None:
    """A missing file is reported with its path, not as a traceback."""
    with pytest.raises(ScenarioError, match=r"missing\.yaml: cannot read the scenario"):
        load_scenario(tmp_path / "missing.yaml")


def test_a_python_scenario_goes_through_the_same_checks() -> None:
    """``check_scenario`` finds what the file loader finds, naming the place."""
    scenario = Scenario(
        name="py",
        cluster=ClusterSetup(brokers=2),
        steps=(Sleep(seconds=1), CrashBroker(broker=5)),
    )
    with pytest.raises(ScenarioError, match=r"steps\[1\] \(crash_broker\)\.broker: no broker 5"):
        check_scenario(scenario)


def test_patterns_match_kind_type_node_and_a_subset_of_fields() -> None:
    """A pattern names what must be equal; tuples in the trace compare like YAML lists."""
    event = TraceEvent(
        seq=1,
        ts=0.0,
        node="chaos",
        actor="network_tap",
        kind="event",
        type="control_request",
        fields={"request": "StopReplicaRequest", "dst": "broker-2/broker", "ids": (1, 2)},
    )
    assert Pattern(type="control_request", fields={"dst": "broker-2/broker"}).matches(event)
    assert Pattern(fields={"ids": [1, 2]}).matches(event)
    assert not Pattern(type="control_request", node="broker-2").matches(event)
    assert not Pattern(fields={"delete_partition": True}).matches(event)


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_library_scenario_is_valid(path: Path) -> None:
    """The scenarios shipped under scenarios/ load, and each is named after its file."""
    scenario = load_scenario(path)
    assert scenario.name == path.stem
    assert scenario.description
