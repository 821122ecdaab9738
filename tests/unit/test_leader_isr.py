"""A partition leader's ISR decisions (``actors.broker.isr``): Kafka 2.7's
``Replica.updateFetchState``, ``Partition.maybeExpandIsr`` / ``maybeShrinkIsr`` /
``maybeIncrementLeaderHW`` and the handling of AlterIsr answers."""

from __future__ import annotations

from actors.broker.isr import NEVER_MS, FollowerState, LeaderIsr, high_watermark_candidate
from protocol.control import AlterIsrPartition, AlterIsrPartitionResult, TopicPartition
from protocol.errors import ErrorCode
from protocol.ids import BrokerId, LeaderEpoch, TopicName

TP = TopicPartition(TopicName("t"), 0)
LAG = 30_000


def b(*values: int) -> tuple[BrokerId, ...]:
    return tuple(BrokerId(v) for v in values)


def leader(isr: tuple[int, ...] = (0, 1, 2), *, start: int = 10, now: int = 1_000) -> LeaderIsr:
    return LeaderIsr.become_leader(
        TP,
        leader=BrokerId(0),
        leader_epoch=LeaderEpoch(3),
        replicas=b(0, 1, 2),
        isr=b(*isr),
        zk_version=7,
        log_end_offset=start,
        now_ms=now,
    )


def fetch(state: LeaderIsr, follower: int, offset: int, now: int, leo: int) -> LeaderIsr:
    return state.on_follower_fetch(
        BrokerId(follower),
        fetch_offset=offset,
        follower_log_start_offset=0,
        fetch_time_ms=now,
        leader_log_end_offset=leo,
    )


def ok(isr: tuple[int, ...], *, version: int = 8, epoch: int = 3) -> AlterIsrPartitionResult:
    return AlterIsrPartitionResult(
        topic=TopicName("t"),
        partition=0,
        leader=BrokerId(0),
        leader_epoch=LeaderEpoch(epoch),
        isr=b(*isr),
        current_isr_version=version,
    )


def test_last_caught_up_time_follows_fetches_at_the_leaders_log_end() -> None:
    """A fetch at the leader's log end makes its time the caught-up time; a fetch behind it
    keeps the previous fetch's time only if that fetch reached the then log end."""
    s = FollowerState()
    s = s.after_fetch(
        fetch_offset=5, follower_log_start_offset=0, fetch_time_ms=100, leader_log_end_offset=5
    )
    assert (s.log_end_offset, s.last_caught_up_time_ms) == (5, 100)
    s = s.after_fetch(
        fetch_offset=5, follower_log_start_offset=0, fetch_time_ms=200, leader_log_end_offset=9
    )
    assert s.last_caught_up_time_ms == 100  # behind: 5 < 9, and the previous end was 5 ≤ 5
    s = s.after_fetch(
        fetch_offset=9, follower_log_start_offset=0, fetch_time_ms=300, leader_log_end_offset=12
    )
    assert s.last_caught_up_time_ms == 200  # reached the log end as of the previous fetch
    s = s.after_fetch(
        fetch_offset=10, follower_log_start_offset=0, fetch_time_ms=400, leader_log_end_offset=20
    )
    assert s.last_caught_up_time_ms == 200  # 10 < 12: no progress credited


def test_a_follower_lagging_longer_than_the_lag_time_is_proposed_out_of_the_isr() -> None:
    """maybeShrinkIsr: a follower behind the log end and not caught up for more than
    replica.lag.time.max.ms leaves; one at the log end or caught up recently stays."""
    s = leader(now=1_000)
    s = fetch(s, 1, 10, 1_000, 10)
    s = fetch(s, 2, 10, 1_000, 10)
    s = fetch(s, 2, 10, 31_500, 15)  # behind since the leader appended up to 15
    s, item = s.maybe_shrink(15, 31_000, LAG)
    assert item is None  # exactly the lag: not yet
    s, item = s.maybe_shrink(15, 31_001, LAG)
    assert item == AlterIsrPartition(
        topic=TopicName("t"),
        partition=0,
        leader_epoch=LeaderEpoch(3),
        new_isr=b(0),
        current_isr_version=7,
    )
    assert s.pending_isr == b(0)
    assert s.maximal_isr == b(0, 1, 2)  # leaving members count until committed
    again, second = s.maybe_shrink(15, 99_000, LAG)
    assert second is None  # one change in flight at a time
    assert again is s


def test_a_follower_at_the_log_end_is_never_out_of_sync() -> None:
    """A follower whose log end equals the leader's stays in the ISR however long ago it
    last fetched (the leader appended nothing)."""
    s = fetch(leader(now=0), 1, 10, 0, 10)
    # Follower 2 never fetched (log end unknown): it is out; follower 1 is not.
    assert s.out_of_sync_replicas(10, 10**9, LAG) == b(2)


def test_a_follower_joins_once_it_reaches_the_high_watermark_and_the_epoch_start() -> None:
    """maybeExpandIsr: an assigned follower outside the ISR joins when its log end reaches
    the high watermark and the leader epoch's start offset, and the committed answer
    makes it a member."""
    s = leader((0,), start=10)
    s = fetch(s, 1, 8, 100, 10)
    assert s.maybe_expand(BrokerId(1), 8)[1] is None  # below the epoch start (10)
    s = fetch(s, 1, 10, 200, 10)
    assert s.maybe_expand(BrokerId(1), 11)[1] is None  # below the high watermark
    s, item = s.maybe_expand(BrokerId(1), 10)
    assert item is not None
    assert item.new_isr == b(0, 1)
    assert s.maximal_isr == b(0, 1)  # a joining member counts at once
    assert s.maybe_expand(BrokerId(2), 0)[1] is None  # in flight
    s = s.on_alter_isr_result(ok((0, 1)))
    assert (s.isr, s.zk_version, s.pending_isr) == (b(0, 1), 8, None)
    assert s.maybe_expand(BrokerId(9), 0)[1] is None  # not an assigned replica


def test_fatal_answers_leave_the_change_pending_until_the_next_leader_and_isr() -> None:
    """FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION and UNKNOWN_TOPIC_OR_PARTITION leave the
    proposal pending (nothing more proposed) until makeLeader resets the state; another
    error withdraws it; a success for another epoch or an older version is ignored."""
    for error in (
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.INVALID_UPDATE_VERSION,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ):
        s, _ = leader((0, 1)).propose_shrink(b(1))
        s = s.on_alter_isr_result(
            AlterIsrPartitionResult(topic=TopicName("t"), partition=0, error_code=error)
        )
        assert s.stuck
        assert s.isr == b(0, 1)
        assert s.maybe_shrink(99, 10**9, LAG)[1] is None
        renewed = LeaderIsr.become_leader(
            TP,
            leader=BrokerId(0),
            leader_epoch=LeaderEpoch(4),
            replicas=b(0, 1, 2),
            isr=b(0, 1),
            zk_version=9,
            log_end_offset=10,
            now_ms=0,
            previous=s,
        )
        assert not renewed.stuck
        assert renewed.pending_isr is None
    s, _ = leader((0, 1)).propose_shrink(b(1))
    retry = s.on_alter_isr_result(
        AlterIsrPartitionResult(
            topic=TopicName("t"), partition=0, error_code=ErrorCode.UNKNOWN_SERVER_ERROR
        )
    )
    assert (retry.pending_isr, retry.stuck, retry.isr) == (None, False, b(0, 1))
    assert s.on_alter_isr_result(ok((0,), epoch=2)) is s
    assert s.on_alter_isr_result(ok((0,), version=6)) is s
    assert s.on_alter_isr_result(ok((0,), version=7)).isr == b(0)


def test_the_high_watermark_waits_for_the_maximal_isr_and_recently_caught_up_followers() -> None:
    """maybeIncrementLeaderHW's candidate: the least log end among the maximal ISR and the
    followers caught up within the lag; a follower out of both does not hold it back."""
    s = leader((0, 1), start=0, now=0)
    s = fetch(s, 1, 4, 1_000, 10)
    s = fetch(s, 2, 2, 1_000, 10)
    # Follower 2 is outside the ISR and never caught up: only follower 1 counts.
    assert high_watermark_candidate(s, 10, 50_000, LAG) == 4
    s = fetch(s, 2, 10, 2_000, 10)
    s = fetch(s, 2, 10, 3_000, 20)
    # Follower 2 caught up at 2 000 and is behind now: within the lag it holds the mark.
    s = fetch(s, 1, 20, 3_000, 20)
    assert high_watermark_candidate(s, 20, 3_000, LAG) == 10
    assert high_watermark_candidate(s, 20, 40_000, LAG) == 20
    unknown = leader((0, 1), start=0, now=0)
    assert high_watermark_candidate(unknown, 5, 0, LAG) == -1  # follower 1 never fetched


def test_a_follower_that_never_caught_up_does_not_hold_the_mark_early_in_the_clock() -> None:
    """On a clock that starts at 0 (the broker's monotonic or virtual clock), a follower
    outside the ISR that never fetched is not caught up within the lag at time 1 000: only
    the ISR's follower holds the high watermark back. An ISR follower counts as caught up
    from the election, and a first fetch at or past the epoch's start credits that time
    (``Replica.resetLastCaughtUpTime``)."""
    s = leader((0, 1), start=5, now=1_000)
    s = fetch(s, 1, 8, 1_000, 10)
    assert s.followers[BrokerId(2)].last_caught_up_time_ms == NEVER_MS
    assert high_watermark_candidate(s, 10, 1_000, LAG) == 8
    assert s.out_of_sync_replicas(10, 1_000 + LAG + 1, LAG) == b(1)
    s = fetch(s, 2, 6, 2_000, 10)  # behind the log end, past the epoch start
    assert s.followers[BrokerId(2)].last_caught_up_time_ms == 1_000
