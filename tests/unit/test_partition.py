"""The leader side of a partition (``actors.broker.partition``): Kafka's Partition
decisions as pure state, with no broker around."""

from __future__ import annotations

from actors.broker.partition import Partition
from protocol.control import LeaderAndIsrPartitionState, TopicPartition
from protocol.errors import ErrorCode
from protocol.ids import BrokerId, ControllerEpoch, LeaderEpoch, TopicName

TP = TopicPartition(TopicName("t"), 0)
LAG = 30_000
T0 = 100_000  # past the lag: a follower never caught up (0) is long ago


def state(
    leader: int, epoch: int, isr: tuple[int, ...], replicas: tuple[int, ...] = (0, 1, 2)
) -> LeaderAndIsrPartitionState:
    return LeaderAndIsrPartitionState(
        topic=TP.topic,
        partition=TP.partition,
        controller_epoch=ControllerEpoch(1),
        leader=BrokerId(leader),
        leader_epoch=LeaderEpoch(epoch),
        isr=tuple(BrokerId(b) for b in isr),
        zk_version=epoch,
        replicas=tuple(BrokerId(b) for b in replicas),
    )


def leader(isr: tuple[int, ...] = (0, 1, 2), *, leo: int = 10, hw: int = 4) -> Partition:
    p = Partition(
        tp=TP, local=BrokerId(0), leader=BrokerId(0), leader_epoch=0, partition_epoch=0, replicas=()
    )
    p.make_leader(
        state(0, 3, isr), log_start_offset=0, log_end_offset=leo, high_watermark=hw, now_ms=1000
    )
    return p


def fetched(p: Partition, replica: int, offset: int, now_ms: int) -> bool:
    return p.update_follower_fetch_state(
        BrokerId(replica),
        fetch_offset=offset,
        follower_log_start_offset=0,
        leader_log_end_offset=p.log_end_offset,
        now_ms=now_ms,
    )


def test_a_new_leader_keeps_its_checkpointed_high_watermark_and_starts_its_epoch() -> None:
    """makeLeader: the high watermark from the checkpoint (clamped to the log), the
    epoch's start offset the log end, followers' offsets unknown until they fetch."""
    p = leader(hw=40)
    assert (p.high_watermark, p.leader_epoch_start_offset, p.leader_epoch) == (10, 10, 3)
    assert p.is_leader
    assert p.isr == (0, 1, 2)
    assert not p.maybe_increment_high_watermark(T0 + 1000, LAG)  # followers unknown: no rise


def test_the_high_watermark_is_the_least_log_end_of_the_isr_and_never_falls() -> None:
    """maybeIncrementLeaderHW: the minimum over the leader and the ISR followers; a
    follower fetching behind does not lower it."""
    p = leader()
    assert fetched(p, 1, 8, T0 + 1000)
    assert fetched(p, 2, 6, T0 + 1000)
    assert p.maybe_increment_high_watermark(T0 + 1000, LAG)
    assert p.high_watermark == 6
    assert fetched(p, 2, 10, T0 + 1100)
    assert p.maybe_increment_high_watermark(T0 + 1100, LAG)
    assert p.high_watermark == 8
    assert fetched(
        p, 1, 5, T0 + 1200
    )  # a follower that went back (truncated) does not pull it down
    assert not p.maybe_increment_high_watermark(T0 + 1200, LAG)
    assert p.high_watermark == 8


def test_a_leader_alone_in_the_isr_moves_the_high_watermark_with_its_appends() -> None:
    """ISR = {leader}, and no other replica caught up recently: the high watermark is
    the log end after each append."""
    p = leader(isr=(0,))
    assert p.maybe_increment_high_watermark(T0 + LAG + 1, LAG)
    assert p.high_watermark == 10
    p.on_log_offsets(0, 12)
    assert p.maybe_increment_high_watermark(T0 + LAG + 2, LAG)
    assert p.high_watermark == 12


def test_a_delayed_produce_completes_on_the_high_watermark_or_leadership() -> None:
    """checkEnoughReplicasReachOffset: wait below the high watermark; NONE above it, or
    NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR is below min.insync.replicas; a broker
    that is no longer leader answers NOT_LEADER_OR_FOLLOWER."""
    p = leader(isr=(0, 1))
    assert p.check_enough_replicas_reach_offset(10, 2) is None
    fetched(p, 1, 10, T0 + 1000)
    p.maybe_increment_high_watermark(T0 + 1000, LAG)
    assert p.check_enough_replicas_reach_offset(10, 2) is ErrorCode.NONE
    assert p.check_enough_replicas_reach_offset(10, 3) is ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    p.make_follower(state(1, 4, (1,)), log_start_offset=0, log_end_offset=10, high_watermark=10)
    assert not p.is_leader
    assert p.isr == ()
    assert p.check_enough_replicas_reach_offset(10, 1) is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_requests_naming_another_epoch_are_fenced() -> None:
    """KIP-320: an older epoch is FENCED_LEADER_EPOCH, a newer UNKNOWN_LEADER_EPOCH, -1
    and the current one pass."""
    p = leader()
    assert p.fence(-1) is None
    assert p.fence(3) is None
    assert p.fence(2) is ErrorCode.FENCED_LEADER_EPOCH
    assert p.fence(4) is ErrorCode.UNKNOWN_LEADER_EPOCH


def test_only_assigned_followers_update_their_fetch_state() -> None:
    """A fetch from a broker that is not a replica changes nothing."""
    p = leader(isr=(0, 1), leo=10)
    assert not fetched(p, 7, 10, T0 + 1000)
    assert fetched(p, 1, 10, T0 + 1000)
