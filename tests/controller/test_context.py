"""The controller context's derived views agree with their per-replica definitions."""

from __future__ import annotations

from actors.controller.context import Broker, ControllerContext
from protocol import zkdata
from protocol.control import TopicPartition
from protocol.ids import BrokerId, TopicName
from tests.support.fake_brokers import registration


def _context() -> ControllerContext:
    """Brokers 0-3 registered (2 shutting down, 3 with a failed log dir holding b-1),
    broker 4 gone; topics a (on 0, 1), b (on 0, 3), c (on 1, 2), d (on 0, 4), e (not
    assigned)."""
    ctx = ControllerContext()
    ctx.set_live_brokers(
        {BrokerId(b): (Broker(BrokerId(b), registration(b, 0)), 10 + b) for b in range(4)}
    )
    ctx.shutting_down_broker_ids.add(BrokerId(2))
    ctx.replicas_on_offline_dirs[BrokerId(3)] = {TopicPartition(TopicName("b"), 1)}
    assignments = {"a": ((0, 1), (1, 0)), "b": ((0, 3), (3, 0)), "c": ((1, 2),), "d": ((0, 4),)}
    for topic, partitions in assignments.items():
        for partition, replicas in enumerate(partitions):
            ctx.update_partition_full_replica_assignment(
                TopicPartition(TopicName(topic), partition),
                zkdata.ReplicaAssignment(replicas=tuple(BrokerId(r) for r in replicas)),
            )
    ctx.set_all_topics(TopicName(t) for t in "abcde")
    return ctx


def test_topics_with_offline_replicas_are_those_with_a_replica_not_online() -> None:
    """A replica on a shutting-down broker, on a failed log dir or on a gone broker makes
    its topic's deletion ineligible (``fetchTopicDeletionsInProgress``); a topic without
    an assignment has none."""
    ctx = _context()
    expected = {
        TopicName(r.topic)
        for topic in ctx.all_topics
        for r in ctx.replicas_for_topic(topic)
        if not ctx.is_replica_online(r.replica, r.topic_partition)
    }
    assert expected == {"b", "c", "d"}
    assert ctx.topics_with_offline_replicas() == expected
    ctx.shutting_down_broker_ids.clear()
    ctx.replicas_on_offline_dirs.clear()
    assert ctx.topics_with_offline_replicas() == {"d"}


def test_offline_replicas_keep_their_order_with_or_without_failed_dirs() -> None:
    """UpdateMetadata's offline replicas: not registered, shutting down, or on a failed dir,
    in the assignment's order."""
    ctx = _context()
    b1 = TopicPartition(TopicName("b"), 1)
    assert ctx.offline_replicas(b1, (BrokerId(4), BrokerId(3), BrokerId(0), BrokerId(2))) == (
        4,
        3,
        2,
    )
    ctx.shutting_down_broker_ids.clear()
    ctx.replicas_on_offline_dirs.clear()
    assert ctx.offline_replicas(b1, (BrokerId(4), BrokerId(3), BrokerId(0), BrokerId(2))) == (4,)
