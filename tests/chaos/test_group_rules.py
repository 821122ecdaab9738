"""The consumer-group rules over hand-made member events: a committed offset that goes
back within a generation, a partition given to two members of one generation, and a group
that is not Stable with every partition owned at the end are each caught (live, by the
``TraceMonitor`` a chaos run uses, and by the Spark jobs' shared rule code); what is
legal (a new generation starting lower, a member's own offset reset, a commit the
coordinator refused) is not."""

from __future__ import annotations

from typing import Any

from actors.invariants import TRACE_RULES, TraceMonitor, check_trace
from actors.invariants.groups import GroupOffsetsRise, GroupsSettle, OnePartitionOwner
from protocol.trace import TraceEvent
from spark.checks import check_sorted
from tests.support.trace_builder import Trace, spark_rows


def committed(
    t: Trace, generation: int, offset: int, *, error: str = "NONE", member: str = "g-0"
) -> TraceEvent:
    return t.add(
        "event",
        "consumer_committed",
        node="chaos",
        actor="workload",
        group="g",
        member=member,
        member_id=f"{member}-id",
        generation=generation,
        coordinator=1,
        offsets=[["t", 0, offset, error]],
    )


def fetched(t: Trace, generation: int, offset: int) -> TraceEvent:
    return t.add(
        "event",
        "consumer_offsets_fetched",
        node="chaos",
        actor="workload",
        group="g",
        member="g-0",
        member_id="g-0-id",
        generation=generation,
        offsets=[["t", 0, offset]],
    )


def assigned(t: Trace, generation: int, member: str, *partitions: int) -> TraceEvent:
    return t.add(
        "event",
        "consumer_assigned",
        node="chaos",
        actor="workload",
        group="g",
        member=member,
        member_id=f"{member}-id",
        generation=generation,
        partitions=[["t", p] for p in partitions],
    )


def settled(t: Trace, state: str, owners: list[tuple[int, str]], partitions: int) -> TraceEvent:
    return t.add(
        "event",
        "consumer_group_settled",
        node="chaos",
        actor="workload",
        group="g",
        state=state,
        members=len({m for _, m in owners}),
        partitions=[["t", p] for p in range(partitions)],
        owners=[["t", p, m] for p, m in owners],
    )


def lines(rule: Any, events: list[TraceEvent]) -> list[str]:
    return [v.message for e in events for v in rule.observe(e)]


def test_a_commit_below_an_acknowledged_one_in_the_generation_is_caught() -> None:
    t = Trace()
    committed(t, 3, 10)
    committed(t.at(1.0), 3, 12)
    bad = committed(t.at(2.0), 3, 11, member="g-1")
    found = GroupOffsetsRise()
    violations = [v for e in t.events for v in found.observe(e)]
    assert [(v.rule, v.seq, v.message) for v in violations] == [
        (
            "group_offsets_rise",
            bad.seq,
            "group g generation 3: the committed offset of t-0 went back from 12"
            " (commit by g-0) to 11 (commit by g-1)",
        )
    ]


def test_an_offset_fetch_below_an_acknowledged_commit_is_caught() -> None:
    """A coordinator that lost an acknowledged commit (e.g. loaded an old state) answers
    the member's OffsetFetch with less in the same generation."""
    t = Trace()
    committed(t, 2, 40)
    fetched(t, 2, 35)
    assert lines(GroupOffsetsRise(), t.events) == [
        "group g generation 2: the committed offset of t-0 went back from 40"
        " (commit by g-0) to 35 (offset fetch by g-0)"
    ]


def test_what_may_go_lower_is_not_a_violation() -> None:
    """A refused commit, a new generation, no committed offset (-1) and a member's own
    reset of its position are no going back."""
    t = Trace()
    committed(t, 1, 50)
    committed(t, 1, 20, error="ILLEGAL_GENERATION")
    committed(t, 2, 30)  # another generation
    fetched(t, 2, -1)  # the topic's offsets were deleted
    t.add(
        "event",
        "consumer_offset_reset",
        node="chaos",
        actor="workload",
        group="g",
        member="g-0",
        member_id="g-0-id",
        generation=2,
        topic="t",
        partition=0,
        offset=0,
        before=30,
    )
    committed(t, 2, 3)
    assert lines(GroupOffsetsRise(), t.events) == []


def test_a_partition_given_to_two_members_of_one_generation_is_caught() -> None:
    t = Trace()
    assigned(t, 4, "g-0", 0, 1)
    assigned(t, 5, "g-1", 1)  # another generation: a new owner is fine
    bad = assigned(t, 4, "g-1", 1, 2)
    rule = OnePartitionOwner()
    found = [v for e in t.events for v in rule.observe(e)]
    assert [(v.rule, v.seq, v.message) for v in found] == [
        (
            "one_owner_per_partition",
            bad.seq,
            "group g generation 4: t-1 was given to g-0-id and to g-1-id",
        )
    ]


def test_a_group_not_stable_or_not_owning_everything_at_the_end_is_caught() -> None:
    t = Trace()
    settled(t, "Stable", [(0, "a"), (1, "b")], 2)  # fine
    settled(t, "PreparingRebalance", [(0, "a")], 2)
    settled(t, "Stable", [(0, "a"), (0, "b"), (2, "b")], 2)
    found = [v.message for e in t.events for v in GroupsSettle().observe(e)]
    assert found == [
        "group g after the faults healed: is PreparingRebalance, not Stable",
        "group g after the faults healed: has no owner for t-1",
        "group g after the faults healed: has no owner for t-1",
        "group g after the faults healed: gives t-0 to more than one member",
        "group g after the faults healed: assigns t-2, which do not exist",
    ]


def test_a_stable_group_whose_topics_were_all_deleted_has_settled() -> None:
    """No partition left to own: Stable with nothing assigned is settled (the
    ``group_settled`` condition agrees); still owning a deleted topic's partition, or not
    Stable, is not."""
    t = Trace()
    settled(t, "Stable", [], 0)  # fine
    settled(t, "Stable", [(0, "a")], 0)
    settled(t, "CompletingRebalance", [], 0)
    assert lines(GroupsSettle(), t.events) == [
        "group g after the faults healed: assigns t-0, which do not exist",
        "group g after the faults healed: is CompletingRebalance, not Stable",
    ]


def test_the_rules_run_live_in_the_monitor_and_in_the_spark_checks() -> None:
    """The chaos run's monitor and the Spark jobs' rule code (``check_sorted``, which
    routes the group events to the run-wide rules) report the same violations."""
    assert {"group_offsets_rise", "one_owner_per_partition", "groups_settle"} <= set(TRACE_RULES)
    t = Trace()
    committed(t, 1, 9)
    committed(t, 1, 8)
    assigned(t, 1, "g-0", 0)
    assigned(t, 1, "g-1", 0)
    settled(t, "Empty", [], 1)
    monitor = TraceMonitor()
    live = [(v.rule, v.seq) for e in t.events for v in monitor.observe(e)]
    expected = [
        ("group_offsets_rise", 2),
        ("one_owner_per_partition", 4),
        ("groups_settle", 5),
        ("groups_settle", 5),
    ]
    assert live == expected
    assert sorted((v.rule, v.seq) for v in check_trace(t.events, end=10.0)) == sorted(expected)
    rows = spark_rows(t.events, run="run", end=10.0)
    spark = [
        (r, seq) for _, r, severity, _, seq, _ in check_sorted(rows) if severity == "violation"
    ]
    assert sorted(spark) == sorted(expected)
