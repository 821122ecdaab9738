"""The data-plane rules over hand-made workload events: an acknowledged write read back
elsewhere or not at all is lost (a violation, or a notice naming the cause the scenario
allows), an offset read with two records conflicts unless an unclean election came
between, a caught-up follower's log must be the leader's, and a high watermark may start
again only when its topic was re-created."""

from __future__ import annotations

from typing import Any

from actors.invariants import TraceMonitor, check_trace
from actors.invariants.trace_rules import (
    AcknowledgedWritesKept,
    AlterIsrKeepsShape,
    FollowerLogsMatch,
    HighWatermarksRise,
    OneRecordPerOffset,
)
from protocol.trace import TraceEvent
from spark.checks import check_sorted
from tests.support.trace_builder import Trace, spark_rows


def acked(t: Trace, base: int, *ids: str, acks: int = -1, error: str = "NONE") -> TraceEvent:
    return t.add(
        "event",
        "produce_result",
        node="chaos",
        actor="workload",
        producer="p",
        topic="t",
        partition=0,
        broker=0,
        acks=acks,
        attempt=0,
        error=error,
        base_offset=base,
        records=list(ids),
    )


def read(t: Trace, hw: int, *records: tuple[int, str], settled: bool = True) -> TraceEvent:
    return t.add(
        "event",
        "records_read",
        node="chaos",
        actor="workload",
        reader="r",
        topic="t",
        partition=0,
        broker=1,
        leader_epoch=1,
        error="NONE",
        high_watermark=hw,
        log_start_offset=0,
        settled=settled,
        records=[list(r) for r in records],
    )


def unclean(t: Trace, leader: int = 1, epoch: int = 1) -> TraceEvent:
    return t.add(
        "event",
        "unclean_leader_elected",
        node="broker-2",
        actor="controller",
        topic="t",
        partition=0,
        leader=leader,
        leader_epoch=epoch,
        isr_before=[0],
        controller_epoch=1,
    )


def observe(rule: Any, events: list[TraceEvent]) -> list[str]:
    return [v.message for e in events for v in rule.observe(e)]


def test_an_acknowledged_write_read_back_everywhere_breaks_nothing() -> None:
    """Records acknowledged with acks=all and acks=1 read back at their offsets; an
    unanswered request and acks=0 acknowledge nothing; an unsettled read that stops below
    an offset does not judge it."""
    t = Trace()
    acked(t, 0, "p-0", "p-1")
    acked(t, 2, "p-2", acks=1)
    acked(t, 3, "p-3", acks=0)
    acked(t, -1, "p-4", error="REQUEST_TIMED_OUT")
    read(t, 2, (0, "p-0"), (1, "p-1"), settled=False)
    read(t, 3, (0, "p-0"), (1, "p-1"), (2, "p-2"))
    assert check_trace(t.events, end=10) == []


def test_a_lost_acks_all_write_is_a_violation_at_the_read_that_shows_it() -> None:
    """A settled read whose high watermark stops below an acks=all record loses it, and a
    read showing another record at its offset loses it: each named once, with its
    acknowledgement's event, at the read's event."""
    t = Trace()
    first = acked(t, 0, "p-0", "p-1")
    shown = read(t, 1, (0, "p-0"))
    t.add("event", "noise")
    other = read(t, 2, (0, "p-0"), (1, "q-9"))
    rule = AcknowledgedWritesKept()
    problems = [v for e in t.events for v in rule.observe(e)]
    assert [(v.seq, v.message) for v in problems] == [
        (
            shown.seq,
            f"t-0: offset 1, p-1 acknowledged with acks=all (event {first.seq}), is gone:"
            " nothing allows losing a write the ISR acknowledged",
        )
    ]
    assert other.seq > shown.seq  # reported once: the write is forgotten once lost
    t2 = Trace()
    acked(t2, 0, "p-0")
    read(t2, 1, (0, "x-0"), settled=False)
    assert observe(AcknowledgedWritesKept(), t2.events) == [
        "t-0: offset 0, p-0 acknowledged with acks=all (event 1), now holds x-0:"
        " nothing allows losing a write the ISR acknowledged"
    ]


def test_a_loss_after_an_unclean_election_names_it_and_is_a_notice_when_allowed() -> None:
    """An acks=all record lost after an unclean election of its partition: a violation
    naming the election unless the scenario allows ``unclean``, then a notice; an acks=1
    record lost with its leader likewise with ``acks_1``."""
    t = Trace()
    acked(t, 0, "p-0")
    acked(t, 1, "p-1", acks=1)
    election = unclean(t, leader=2, epoch=3)
    read(t, 0)
    strict = AcknowledgedWritesKept()
    messages = observe(strict, t.events)
    named = f"the unclean election of broker 2 at leader epoch 3 (event {election.seq}"
    assert len(messages) == 2
    assert named in messages[0]
    assert "cause unclean the scenario does not allow" in messages[0]
    assert "acks=1" in messages[1]
    assert "cause acks_1" in messages[1]
    lenient = AcknowledgedWritesKept(["unclean", "acks_1"])
    assert observe(lenient, t.events) == []
    assert [n.rule for n in lenient.notices()] == ["data_loss", "data_loss"]
    assert named in lenient.notices()[0].message
    assert [loss.cause for loss in lenient.losses] == ["unclean", "acks_1"]
    monitor = TraceMonitor(allowed_loss=["unclean"])
    for event in t.events:
        monitor.observe(event)
    assert [v.rule for v in monitor.violations] == ["acknowledged_writes_kept"]  # acks=1
    assert [n.rule for n in monitor.notices] == ["data_loss"]


def test_an_election_before_the_write_does_not_excuse_its_loss() -> None:
    """Only an unclean election after the acknowledgement can explain a loss."""
    t = Trace()
    unclean(t)
    acked(t, 0, "p-0")
    read(t, 0)
    assert "nothing allows" in observe(AcknowledgedWritesKept(["unclean"]), t.events)[0]


def test_a_deleted_topic_forgets_its_writes() -> None:
    """A topic deleted and created again starts empty: the old writes are not lost."""
    t = Trace()
    acked(t, 0, "p-0")
    read(t, 1, (0, "p-0"))
    t.add("event", "topic_deletion_completed", topic="t")
    read(t, 1, (0, "new-0"))
    read(t, 0)
    assert check_trace(t.events, end=10) == []


def test_an_offset_read_with_two_records_conflicts() -> None:
    """Two reads below the high watermark showing two records at one offset: a
    violation; with an unclean election between them and ``unclean`` allowed, a notice."""
    t = Trace()
    read(t, 2, (0, "a"), (1, "b"))
    read(t, 2, (0, "a"), (1, "c"))
    assert observe(OneRecordPerOffset(), t.events) == [
        "t-0: offset 1 was read as b (event 1) and now as c"
    ]
    t = Trace()
    read(t, 2, (0, "a"), (1, "b"))
    unclean(t)
    read(t, 2, (0, "a"), (1, "c"))
    rule = OneRecordPerOffset(["unclean"])
    assert observe(rule, t.events) == []
    assert "after the unclean election of broker 1" in rule.notices()[0].message


def logs(caught_up: bool, isr: list[int], leader: int = 0, **ends: list[str]) -> dict[str, Any]:
    return {
        "topic": "t",
        "partition": 0,
        "leader": leader,
        "leader_epoch": 1,
        "isr": isr,
        "replicas": [0, 1, 2],
        "caught_up": caught_up,
        "logs": [
            {
                "broker": int(name[1:]),
                "error": "NONE",
                "high_watermark": len(ids),
                "log_end_offset": len(ids),
                "records": [[o, i] for o, i in enumerate(ids)],
            }
            for name, ids in sorted(ends.items())
        ],
    }


def test_a_caught_up_follower_must_hold_the_leaders_log() -> None:
    """Caught up, an ISR follower holding another record, or ending elsewhere, breaks
    ``follower_logs_match``; a follower outside the ISR, or logs not caught up yet, do not;
    a leader outside its ISR or an ISR member that is no replica always do."""
    t = Trace()

    def check(fields: dict[str, Any]) -> list[str]:
        event = t.add("event", "replica_logs_read", node="chaos", actor="workload", **fields)
        return observe(FollowerLogsMatch(), [event])

    assert check(logs(True, [0, 1, 2], b0=["a", "b"], b1=["a", "b"], b2=["a", "b"])) == []
    assert check(logs(True, [0, 1], b0=["a", "b"], b1=["a", "x"])) == [
        "t-0: follower 1 holds x at offset 1, leader 0 holds b"
    ]
    assert check(logs(True, [0, 1], b0=["a", "b"], b1=["a"])) == [
        "t-0: follower 1 ends at 1 once caught up, leader 0 at 2"
    ]
    assert check(logs(True, [0, 1], b0=["a", "b"], b2=["z"])) == []  # 2 is not in the ISR
    assert check(logs(False, [0, 1], b0=["a"], b1=["a", "old"])) == []
    assert check(logs(False, [1, 5], b0=["a"])) == [
        "t-0: leader 0 is not in the ISR [1, 5]",
        "t-0: ISR members [5] are not replicas [0, 1, 2]",
    ]


def test_a_compacted_partitions_replicas_need_only_agree_where_both_hold_an_offset() -> None:
    """Of a compacted topic each replica's cleaner removes records at its own time: a
    caught-up follower holding a record its leader cleaned away (or lacking one the
    leader still holds) is no violation; another record at an offset both hold, or
    another log end, is. Not compacted, the follower's extra record is one."""
    t = Trace()

    def check(compacted: bool, leader: list[list[Any]], follower: list[list[Any]]) -> list[str]:
        fields = logs(True, [0, 1], b0=[], b1=[])
        for log, records in zip(fields["logs"], (leader, follower), strict=True):
            log.update(records=records, log_end_offset=6, high_watermark=6)
        fields["compacted"] = compacted
        event = t.add("event", "replica_logs_read", node="chaos", actor="workload", **fields)
        return observe(FollowerLogsMatch(), [event])

    cleaned = [[3, "k1"], [5, "k2"]]
    stale = [[0, "k1-old"], [1, "k2-old"], [3, "k1"], [5, "k2"]]
    assert check(True, cleaned, stale) == []
    assert check(True, stale, cleaned) == []
    assert check(True, cleaned, [[0, "k1-old"], [3, "x"], [5, "k2"]]) == [
        "t-0: follower 1 holds x at offset 3, leader 0 holds k1"
    ]
    assert check(False, cleaned, stale) == [
        "t-0: follower 1 holds k1-old at offset 0, leader 0 holds nothing"
    ]


def test_alter_isr_is_checked_against_the_partitions_replicas() -> None:
    """An ISR written by AlterIsr with a member outside the replicas the controller
    traced with it is a violation (the leader's own ISR is not the yardstick)."""
    t = Trace()
    t.add(
        "event",
        "isr_altered",
        node="broker-0",
        actor="controller",
        topic="t",
        partition=0,
        leader=0,
        leader_epoch=1,
        from_isr=[0],
        to_isr=[0, 3],
        zk_version=2,
        replicas=[0, 1, 2],
    )
    assert observe(AlterIsrKeepsShape(), t.events) == [
        "t-0: AlterIsr wrote ISR members [3] outside [0, 1, 2]"
    ]


def test_a_high_watermark_starts_again_with_a_recreated_topic() -> None:
    """Within one leader epoch a high watermark only rises, also after the deletion made
    its partition NonExistent, and starts again when the topic is re-created (its
    partition made New from NonExistent)."""

    def moved(t: Trace, before: int, to: int) -> None:
        fields: dict[str, Any] = {"from": before, "to": to}
        t.add("event", "high_watermark_moved", topic="t", partition=0, leader_epoch=0, **fields)

    t = Trace()
    moved(t, 0, 5)
    moved(t, 2, 3)
    assert observe(HighWatermarksRise(), t.events) == [
        "t-0: high watermark on broker-0 fell from 5 to 3 within leader epoch 0"
    ]
    t = Trace()
    moved(t, 0, 5)
    t.transition("partition", "OfflinePartition", "NonExistentPartition")
    moved(t, 5, 6)  # the old leader takes writes until its StopReplica
    assert observe(HighWatermarksRise(), t.events) == []
    t.transition("partition", "NonExistentPartition", "NewPartition")
    moved(t, 0, 3)
    assert observe(HighWatermarksRise(), t.events) == []


def test_a_new_acknowledgement_at_an_acknowledged_offset_loses_the_earlier_one() -> None:
    """A leader that answers a new record at the offset of an acknowledged one has lost
    that one: reported at the new acknowledgement, before any read."""
    t = Trace()
    acked(t, 0, "p-0", acks=1)
    unclean(t)
    second = acked(t, 0, "q-0")
    rule = AcknowledgedWritesKept(["acks_1"])
    assert observe(rule, t.events) == []
    (notice,) = rule.notices()
    assert notice.seq == second.seq
    assert notice.message.startswith(
        "t-0: offset 0, p-0 acknowledged with acks=1 (event 1), now holds q-0"
    )
    t = Trace()
    acked(t, 0, "p-0")
    acked(t, 0, "q-0")
    assert observe(AcknowledgedWritesKept(["acks_1", "unclean"]), t.events) == [
        "t-0: offset 0, p-0 acknowledged with acks=all (event 1), now holds q-0:"
        " nothing allows losing a write the ISR acknowledged"
    ]


def test_a_leader_proposing_an_isr_without_itself_is_caught() -> None:
    """``isr_change_proposed``: the proposing broker must be in the ISR it proposes, once."""
    t = Trace()

    def proposed(node: str, isr: list[int]) -> TraceEvent:
        return t.add(
            "event",
            "isr_change_proposed",
            node=node,
            actor="broker",
            topic="t",
            partition=0,
            leader_epoch=1,
            isr=isr,
            zk_version=1,
        )

    assert observe(AlterIsrKeepsShape(), [proposed("broker-0", [0, 1])]) == []
    assert observe(AlterIsrKeepsShape(), [proposed("broker-0", [1, 2])]) == [
        "t-0: broker-0 proposed ISR [1, 2] without itself"
    ]
    assert observe(AlterIsrKeepsShape(), [proposed("broker-2", [2, 2])]) == [
        "t-0: broker-2 proposed duplicate ISR members [2, 2]"
    ]


def test_the_losses_a_run_declares_in_its_trace_are_allowed_from_the_trace_alone() -> None:
    """A chaos run records its scenario's allowed losses (``data_rules``): a rule built
    without them, as the Spark jobs build it, reads them there, and the per-group checker
    the Spark and pandas analyses share reports the loss as a notice, not a violation."""
    t = Trace()
    t.add(
        "event", "data_rules", node="chaos", actor="runner", allow_loss=[], expect_loss=["unclean"]
    )
    acked(t, 0, "p-0")
    unclean(t)
    read(t, 0)
    rule = AcknowledgedWritesKept()
    assert observe(rule, t.events) == []
    assert [n.rule for n in rule.notices()] == ["data_loss"]
    rows = spark_rows(t.events, run="run-1", end=9.0)
    found = list(check_sorted(rows))
    assert [(rule, severity) for _, rule, severity, *_ in found] == [("data_loss", "notice")]
