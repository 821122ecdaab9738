"""The ``alter_configs`` step: AlterConfigs and IncrementalAlterConfigs of a topic through
the wire, and the bookkeeping that makes ``follower_logs_match`` compare a topic switched
to ``cleanup.policy=compact`` after its creation as a compacted topic from then on."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.runtime.tracer import read_trace
from cluster.chaos import RunOptions, ScenarioError, parse_scenario, run_scenario
from cluster.chaos.model import AlterConfigs

SWITCHED = """\
name: switched-to-compact
cluster: {brokers: 3}
steps:
  - create_topic: {topic: t, assignment: {0: [0, 1, 2]}, outcome: ok}
  - create_topic: {topic: u, assignment: {0: [0, 1, 2]}, outcome: ok}
  - wait: {topic_ready: t, within: 10}
  - wait: {topic_ready: u, within: 10}
  - produce: {topic: t, count: 3, acks: all, outcome: ok}
  - produce: {topic: u, count: 3, acks: all, outcome: ok}
  - alter_configs: {topic: t, configs: {retention.ms: "86400000"}, outcome: ok}
  - verify: {topic: t, within: 10}
  - alter_configs: {topic: t, configs: {cleanup.policy: compact}, outcome: ok}
  - verify: {topic: t, within: 10}
  - verify: {topic: u, within: 10}
  - alter_configs: {topic: u, incremental: true, configs: {cleanup.policy: "compact,delete"},
                    outcome: ok}
  - verify: {topic: u, within: 10}
  - alter_configs: {topic: u, incremental: true, delete: [cleanup.policy], outcome: ok}
  - verify: {topic: u, within: 10}
  - alter_configs: {topic: nope, configs: {cleanup.policy: compact},
                    outcome: UNKNOWN_TOPIC_OR_PARTITION}
"""


def test_a_topic_switched_to_compact_is_compared_as_compacted_from_then_on(
    tmp_path: Path,
) -> None:
    """``t``: an AlterConfigs that leaves ``cleanup.policy`` alone keeps it compared as a
    plain topic; one that sets ``compact`` makes its next read ``compacted``. ``u``: an
    IncrementalAlterConfigs SET of ``compact,delete`` does the same, and a DELETE of the
    override afterwards (back to ``delete``) does not undo it (the cleaners' holes stay).
    An alteration of a topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION and marks
    nothing. Every read's replicas agree, the final phase's too."""
    scenario = parse_scenario(SWITCHED)
    result = run_scenario(scenario, RunOptions(run_dir=tmp_path / "run", seed=1))
    assert [p.line() for p in result.problems] == []
    _, events = read_trace(Path(result.run_dir) / "trace.jsonl")
    trace = list(events)
    reads = [
        (e.fields["topic"], e.fields["compacted"], e.fields["caught_up"])
        for e in trace
        if e.type == "replica_logs_read"
    ]
    assert reads == [
        ("t", False, True),
        ("t", True, True),
        ("u", False, True),
        ("u", True, True),
        ("u", True, True),
        ("t", True, True),  # the final phase's reads
        ("u", True, True),
    ]
    altered = [(e.fields["topic"], e.fields["error"]) for e in trace if e.type == "admin_result"][
        2:
    ]
    assert altered == [
        ("t", "NONE"),
        ("t", "NONE"),
        ("u", "NONE"),
        ("u", "NONE"),
        ("nope", "UNKNOWN_TOPIC_OR_PARTITION"),
    ]


def test_the_step_loads_and_refuses_what_it_cannot_send() -> None:
    """``alter_configs`` loads with its fields; the store path and a ``delete`` without
    ``incremental`` are one line naming the step."""
    (step,) = parse_scenario(
        "name: x\nsteps:\n  - alter_configs: {topic: t, incremental: true,"
        " configs: {cleanup.policy: compact}, delete: [retention.ms]}\n"
    ).steps
    assert isinstance(step, AlterConfigs)
    assert (step.topic, step.incremental, step.delete) == ("t", True, ("retention.ms",))
    assert step.configs == {"cleanup.policy": "compact"}
    for fields, message in [
        ("{topic: t, via: store}", "alter_configs goes through the wire only"),
        ("{topic: t, delete: [retention.ms]}", "delete needs incremental: true"),
    ]:
        with pytest.raises(ScenarioError, match=message) as caught:
            parse_scenario(f"name: x\nsteps:\n  - alter_configs: {fields}\n", source="x.yaml")
        assert str(caught.value).startswith("x.yaml:3: steps[0] (alter_configs)")
