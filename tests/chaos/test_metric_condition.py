"""The ``metric`` condition: a scenario waits on a broker's or the controller's metric
under Kafka's name, read from the actors in a deterministic run; bad names, bounds and
brokers are one line with the file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.chaos import RunOptions, ScenarioError, parse_scenario, run_scenario
from cluster.chaos.model import Expect, MetricAt, Wait
from tests.support.traces import assert_same_trace

SCENARIO = """\
name: metric-wait
description: UnderReplicatedPartitions rises on the leaders when a replica's broker dies
  (ReplicaManager.underReplicatedPartitionCount) and falls once it is back.
cluster: {brokers: 3}
steps:
  - create_topic: {topic: t, assignment: {0: [0, 1, 2], 1: [1, 0, 2]}}
  - wait: {topic_ready: t}
  - expect: {metric: {name: UnderReplicatedPartitions, equals: 0}}
  - expect: {metric: {name: ActiveControllerCount, equals: 1}}
  - crash_broker: 2
  - wait: {metric: {name: UnderReplicatedPartitions, equals: 2}, within: 60}
  - expect: {metric: {name: UnderReplicatedPartitions, broker: 0, equals: 1}}
  - expect: {metric: {name: LeaderElectionRateAndTimeMs, at_least: 1}}
  - expect: {metric: {name: OfflineReplicaCount, at_most: 0}}
  - expect: {metric: {name: UnderReplicatedPartitions, broker: 2, at_least: 0}}
  - start_broker: 2
  - wait: {metric: {name: UnderReplicatedPartitions, equals: 0}, within: 60}
  - wait: {metric: {name: IsrExpandsPerSec, at_least: 2, at_most: 2}, within: 10}
"""


def test_a_run_waits_on_under_replicated_partitions_rising_and_falling(tmp_path: Path) -> None:
    """Two partitions of replication factor 3: a crashed replica leaves both
    under-replicated on their leaders (one each), the BrokerChange was timed, and once the
    broker is back both are whole again after one ISR expand each. The only failure is
    the expectation of a metric on the crashed broker, which cannot be read. The same
    seed gives the same trace."""
    scenario = parse_scenario(SCENARIO, source="metric-wait.yaml")
    waits = [s.condition for s in scenario.steps if isinstance(s, Wait | Expect)]
    assert MetricAt(name="UnderReplicatedPartitions", equals=2) in waits
    result = run_scenario(scenario, RunOptions(run_dir=tmp_path / "run", seed=7))
    assert result.error is None
    assert result.violations == []
    assert len(result.failures) == 1, [f.message for f in result.failures]
    assert result.failures[0].message.endswith(
        "metric UnderReplicatedPartitions broker=2 at_least=0 did not hold within 0s"
    )
    # the reads leave the deterministic run byte-identical
    run_scenario(scenario, RunOptions(run_dir=tmp_path / "again", seed=7))
    assert_same_trace(tmp_path / "again" / "trace.jsonl", tmp_path / "run" / "trace.jsonl")


@pytest.mark.parametrize(
    ("step", "message"),
    [
        (
            "{metric: {name: UnderReplicatedPartition, equals: 1}}",
            "unknown metric 'UnderReplicatedPartition' (did you mean 'UnderReplicatedPartitions'?)",
        ),
        ("{metric: {name: LeaderCount}}", "give equals, at_least or at_most"),
        ("{metric: {name: LeaderCount, equals: 1, at_most: 2}}", "equals does not go with"),
        ("{metric: {name: LeaderCount, at_least: 3, at_most: 2}}", "at_least 3 is above"),
        ("{metric: {name: LeaderCount, broker: 5, equals: 1}}", "no broker 5"),
        ("{metric: {name: LeaderCount, equals: 1, equal: 1}}", "unknown field `equal`"),
    ],
)
def test_a_bad_metric_condition_is_one_line_with_the_file_and_line(step: str, message: str) -> None:
    text = f"name: x\ncluster: {{brokers: 3}}\nsteps:\n  - sleep: 1\n  - wait: {step}\n"
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text, source="bad.yaml")
    error = str(caught.value)
    assert "\n" not in error
    assert error.startswith("bad.yaml:5: "), error
    assert message in error, error
