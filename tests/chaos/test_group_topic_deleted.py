"""The ``group_settled`` condition and the ``groups_settle`` rule agree on a group whose
only topic is deleted while it consumes: once the coordinator rebalanced it onto nothing,
it is Stable with every partition (none) owned, both mid-run and at the end."""

from __future__ import annotations

from pathlib import Path

from cluster.chaos import RunOptions, parse_scenario, run_scenario

SCENARIO = """\
name: group-only-topic-deleted
cluster:
  brokers: 1
  config:
    offsets.topic.num.partitions: 1
    offsets.topic.replication.factor: 1
    group.initial.rebalance.delay.ms: 0
    log.segment.delete.delay.ms: 1000
steps:
  - create_topic: {topic: t, partitions: 2, replication_factor: 1, outcome: ok}
  - wait: {topic_ready: t, within: 10}
  - consume: {group: g1, topics: [t], members: 1, commit_interval: 0.5,
              heartbeat_interval_ms: 1000}
  - wait: {group_settled: g1, within: 30}
  - delete_topic: {topic: t, outcome: ok}
  - wait: {topic_deleted: t, within: 60}
  - wait: {group_settled: g1, within: 30}
"""


def test_a_group_whose_only_topic_is_deleted_settles_on_nothing(tmp_path: Path) -> None:
    scenario = parse_scenario(SCENARIO, source="group-only-topic-deleted.yaml")
    result = run_scenario(
        scenario, RunOptions(run_dir=tmp_path / "run", seed=1, deterministic=True)
    )
    assert result.error is None
    assert [f.message for f in result.failures] == []
    assert result.violations == []
    assert result.status == "passed"
