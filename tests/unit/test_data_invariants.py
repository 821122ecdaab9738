"""The data plane's invariant checkers (``actors.invariants.data``)."""

from __future__ import annotations

from actors.invariants.data import (
    AcknowledgedWrite,
    high_watermark_regressions,
    isr_change_violations,
    lost_acknowledged_writes,
)


def moved(epoch: int, start: int, to: int, partition: int = 0) -> dict[str, object]:
    return {"topic": "t", "partition": partition, "leader_epoch": epoch, "from": start, "to": to}


def test_a_high_watermark_may_restart_lower_only_in_a_new_epoch_or_on_another_broker() -> None:
    """Within one broker's leader epoch the high watermark only rises; a new epoch, or
    another broker leading, may start below it; a single move downwards is reported."""
    events = [
        ("broker-0", moved(1, 0, 5)),
        ("broker-0", moved(1, 5, 7)),
        ("broker-1", moved(2, 3, 4)),  # the next leader starts lower: fine
        ("broker-0", moved(3, 2, 3)),  # broker 0 leads again in epoch 3: fine
        ("broker-0", moved(1, 7, 6)),  # a move downwards
        ("broker-0", moved(3, 3, 9, partition=1)),
    ]
    assert high_watermark_regressions(events) == [
        "t-0: high watermark on broker-0 went from 7 to 6",
    ]
    late = [("broker-0", moved(1, 0, 5)), ("broker-0", moved(1, 2, 4))]
    assert high_watermark_regressions(late) == [
        "t-0: high watermark on broker-0 fell from 5 to 4 within leader epoch 1"
    ]


def test_an_isr_written_by_alter_isr_keeps_its_shape_and_leader_epoch() -> None:
    """The ISR holds its leader, is not empty, has no duplicates, lies within the
    replicas, and the leader epoch is the one cached before."""
    ok = {"topic": "t", "partition": 0, "leader": 1, "leader_epoch": 4, "to_isr": [1, 2]}
    assert isr_change_violations(ok, [1, 2, 3], 4) == []
    bad = {"topic": "t", "partition": 0, "leader": 1, "leader_epoch": 5, "to_isr": [2, 2, 9]}
    assert isr_change_violations(bad, [1, 2, 3], 4) == [
        "t-0: AlterIsr wrote duplicate ISR members [2, 2, 9]",
        "t-0: AlterIsr wrote ISR [2, 2, 9] without its leader 1",
        "t-0: AlterIsr wrote ISR members [9] outside [1, 2, 3]",
        "t-0: AlterIsr changed the leader epoch from 4 to 5",
    ]
    empty = {"topic": "t", "partition": 0, "leader": 1, "leader_epoch": 4, "to_isr": []}
    assert "t-0: AlterIsr wrote an empty ISR" in isr_change_violations(empty, [1], None)


def test_acknowledged_writes_survive_unless_an_unclean_election_happened() -> None:
    """A missing or changed acknowledged record is reported; in a partition with an
    unclean election, or a deleted one, it is not."""
    acked = [
        AcknowledgedWrite("t", 0, 0, b"a"),
        AcknowledgedWrite("t", 0, 1, b"b"),
        AcknowledgedWrite("t", 0, 2, b"c"),
        AcknowledgedWrite("u", 0, 5, b"x"),
        AcknowledgedWrite("gone", 0, 0, b"z"),
    ]
    logs = {("t", 0): {0: b"a", 1: b"B"}, ("u", 0): {}}
    assert lost_acknowledged_writes(acked, logs) == [
        "t-0: offset 1 holds b'B', acknowledged as b'b'",
        "t-0: acknowledged offset 2 is gone",
        "u-0: acknowledged offset 5 is gone",
    ]
    assert lost_acknowledged_writes(acked, logs, unclean={("t", 0), ("u", 0)}) == []
