"""The scenario format's consumer-group vocabulary: ``consume`` with ``group``, the
``kill_coordinator`` and ``pause_member`` faults and the ``group_settled`` condition, as
YAML, as the JSON Schema ``kemu chaos schema`` prints, and refused with one line when
wrong; and the members' own pieces of Kafka's consumer protocol (RangeAssignor, the
ConsumerProtocol subscription and assignment bytes)."""

from __future__ import annotations

from typing import Any

import pytest

from actors.group import consumer_assignment
from cluster.chaos import ScenarioError, parse_scenario
from cluster.chaos.loader import scenario_schema
from cluster.chaos.model import Consume, GroupSettled, KillCoordinator, PauseMember, Wait
from cluster.kafka.consumer_group import (
    decode_subscription,
    encode_assignment,
    encode_subscription,
    range_assign,
)

GOOD = """\
name: g
steps:
  - create_topic: {topic: t, partitions: 3}
  - consume: {group: g1, topics: [t], members: 2, commit_interval: 0.25}
  - consume: {group: g1, topic: t, stop_after: 5}
  - wait: {group_settled: {group: g1, members: 3}}
  - pause_member: {group: g1, member: 2}
    id: frozen
    duration: 8
  - kill_coordinator: g1
  - consume: t
"""


def test_a_group_scenario_reads_as_the_python_values() -> None:
    scenario = parse_scenario(GOOD, source="g.yaml")
    steps = scenario.steps
    assert steps[1] == Consume(group="g1", topics=("t",), members=2, commit_interval=0.25)
    assert steps[2] == Consume(group="g1", topic="t", stop_after=5.0)
    assert isinstance(steps[1], Consume)
    assert isinstance(steps[2], Consume)
    assert steps[1].subscription == steps[2].subscription == ("t",)
    assert steps[3] == Wait(condition=GroupSettled(group="g1", members=3))
    assert steps[4] == PauseMember(id="frozen", group="g1", member=2, duration=8.0)
    assert steps[5] == KillCoordinator(group="g1")
    assert steps[6] == Consume(topic="t")  # the plain read, as before


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ("consume: {topic: t, members: 2}", "members needs a group"),
        ("consume: {topic: t, stop_after: 3}", "stop_after needs a group"),
        ("consume: {group: g1}", "a group needs topics to subscribe to"),
        ("consume: {group: g1, topic: t, partitions: [0]}", "give no partitions"),
        ("consume: {group: g1, topic: t, topics: [u]}", "give topic or topics, not both"),
        ("consume: {group: g1, topic: t, members: 0}", "members must be within [1, 100]"),
        (
            "consume: {group: g1, topic: t, heartbeat_interval_ms: 10000}",
            "heartbeat_interval_ms must be positive and below session_timeout_ms",
        ),
        ("pause_member: {group: g2}", "no earlier consume step runs group 'g2'"),
        ("pause_member: {group: g1, member: 1}", "no member 1 (group g1 has 1)"),
    ],
)
def test_a_wrong_group_step_is_one_line_with_its_place(step: str, message: str) -> None:
    text = f"name: x\nsteps:\n  - consume: {{group: g1, topic: t}}\n  - {step}\n"
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text, source="bad.yaml")
    error = str(caught.value)
    assert "\n" not in error
    assert error.startswith("bad.yaml:4: steps[1] ("), error
    assert message in error, error


def _definition(schema: dict[str, Any], name: str) -> dict[str, Any]:
    found = schema["$defs"][name]
    assert isinstance(found, dict)
    return found


def test_the_schema_has_the_group_fields_faults_and_condition() -> None:
    schema = scenario_schema()
    consume = _definition(schema, "Consume")
    assert {
        "group",
        "topics",
        "members",
        "commit_interval",
        "session_timeout_ms",
        "heartbeat_interval_ms",
        "rebalance_timeout_ms",
        "stop_after",
    } <= set(consume["properties"])
    assert set(_definition(schema, "KillCoordinator")["properties"]) >= {"group", "graceful"}
    assert set(_definition(schema, "PauseMember")["properties"]) >= {"group", "member"}
    assert set(_definition(schema, "GroupSettled")["properties"]) >= {"group", "members"}


def test_range_assign_splits_each_topic_in_member_id_order() -> None:
    """RangeAssignor: 7 partitions over 3 members give 3, 2, 2 in member-id order; a
    topic only some subscribe to goes to those; a topic that does not exist to nobody."""
    plan = range_assign(
        {"c": ["t", "u"], "a": ["t"], "b": ["t", "u", "gone"]},
        {"t": 7, "u": 2},
    )
    assert plan == {
        "a": [("t", 0), ("t", 1), ("t", 2)],
        "b": [("t", 3), ("t", 4), ("u", 0)],
        "c": [("t", 5), ("t", 6), ("u", 1)],
    }


def test_subscription_and_assignment_bytes_are_the_consumer_protocols() -> None:
    """Version 0 of ConsumerProtocolSubscription / ConsumerProtocolAssignment, as a Java
    consumer writes them (int16 version, string topics, int32 partitions, null user data)."""
    assert encode_subscription(["ab"]) == b"\x00\x00\x00\x00\x00\x01\x00\x02ab\xff\xff\xff\xff"
    assert decode_subscription(encode_subscription(["x", "yz"])) == ["x", "yz"]
    data = encode_assignment([("t", 2), ("s", 0), ("t", 1)])
    assert data == (
        b"\x00\x00\x00\x00\x00\x02"
        b"\x00\x01s\x00\x00\x00\x01\x00\x00\x00\x00"
        b"\x00\x01t\x00\x00\x00\x02\x00\x00\x00\x01\x00\x00\x00\x02"
        b"\xff\xff\xff\xff"
    )
    assert consumer_assignment(data) == [("s", 0), ("t", 1), ("t", 2)]
    assert decode_subscription(b"\x00") == []
    # Bytes that do not read are no partitions: cut short, a negative or overlong length.
    assert consumer_assignment(data[:9]) == []
    assert consumer_assignment(b"\x00\x00\x00\x00\x00\x01\xff\xffs") == []
    assert consumer_assignment(b"\x00\x00\x00\x00\x00\x01\x00\x09s") == []
