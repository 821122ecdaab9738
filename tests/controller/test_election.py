"""Leader election strategies as pure functions of a snapshot (Kafka's Election)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from actors.controller.election import (
    ControlledShutdownElection,
    OfflineElection,
    PreferredReplicaElection,
    ReassignElection,
    leader_for_controlled_shutdown,
    leader_for_offline,
    leader_for_preferred_replica,
    leader_for_reassign,
    remove_replica_from_isr,
    strategy_name,
)
from actors.controller.model import LeaderAndIsr
from protocol.control import NO_LEADER, TopicPartition
from protocol.ids import BrokerId, LeaderEpoch, TopicName

TP = TopicPartition(TopicName("t"), 0)


def b(*ids: int) -> tuple[BrokerId, ...]:
    return tuple(BrokerId(i) for i in ids)


def lai(leader: int, isr: tuple[int, ...], epoch: int = 3, zk_version: int = 7) -> LeaderAndIsr:
    return LeaderAndIsr(
        leader=BrokerId(leader), leader_epoch=LeaderEpoch(epoch), isr=b(*isr), zk_version=zk_version
    )


def test_offline_election_picks_the_first_live_isr_replica_in_assignment_order() -> None:
    """Offline: leader = first assigned replica live and in ISR; ISR = live part of the ISR."""
    result = leader_for_offline(TP, b(2, 0, 1), lai(2, (2, 0, 1)), frozenset(b(0, 1)), False)
    assert result.leader_and_isr == lai(0, (0, 1), epoch=4)
    assert result.recipients == b(0, 1)


def test_offline_election_bumps_the_epoch_even_when_the_leader_stays() -> None:
    """Every election increments the leader epoch by one and keeps the zkVersion to compare."""
    result = leader_for_offline(TP, b(0, 1), lai(0, (0, 1)), frozenset(b(0, 1)), False)
    assert result.leader_and_isr == lai(0, (0, 1), epoch=4, zk_version=7)


def test_offline_election_without_live_isr_replica_needs_unclean() -> None:
    """ISR [dead] and a live non-ISR replica: no leader, unless unclean election is allowed."""
    current = lai(1, (1,))
    clean = leader_for_offline(TP, b(1, 2), current, frozenset(b(2)), False)
    assert clean.leader_and_isr is None
    assert clean.recipients == b(2)
    unclean = leader_for_offline(TP, b(1, 2), current, frozenset(b(2)), True)
    assert unclean.leader_and_isr == lai(2, (2,), epoch=4)


def test_offline_election_with_no_live_replica_or_no_state_elects_nobody() -> None:
    """No live replica (even unclean) or no leadership at all: no leader."""
    assert leader_for_offline(TP, b(0, 1), lai(0, (0, 1)), frozenset(), True).leader_and_isr is None
    assert leader_for_offline(TP, b(0, 1), None, frozenset(b(0, 1)), True).leader_and_isr is None


def test_reassign_election_picks_the_first_live_isr_target_and_keeps_the_isr() -> None:
    """Reassign: first target replica live and in ISR; ISR unchanged; recipients = targets."""
    result = leader_for_reassign(TP, b(3, 4), lai(1, (1, 3, 4)), frozenset(b(1, 4)))
    assert result.leader_and_isr == lai(4, (1, 3, 4), epoch=4)
    assert result.recipients == b(3, 4)
    assert leader_for_reassign(TP, b(3), lai(1, (1,)), frozenset(b(3))).leader_and_isr is None


def test_preferred_replica_election_only_elects_the_assignment_head() -> None:
    """Preferred: the head of the assignment if live and in ISR, else nobody."""
    result = leader_for_preferred_replica(TP, b(0, 1), lai(1, (1, 0)), frozenset(b(0, 1)))
    assert result.leader_and_isr == lai(0, (1, 0), epoch=4)
    assert result.recipients == b(0, 1)
    not_in_isr = leader_for_preferred_replica(TP, b(0, 1), lai(1, (1,)), frozenset(b(0, 1)))
    assert not_in_isr.leader_and_isr is None
    dead = leader_for_preferred_replica(TP, b(0, 1), lai(1, (1, 0)), frozenset(b(1)))
    assert dead.leader_and_isr is None


def test_controlled_shutdown_election_moves_leadership_off_shutting_down_brokers() -> None:
    """Controlled shutdown: skip shutting-down brokers; ISR loses them; recipients include them."""
    result = leader_for_controlled_shutdown(
        TP, b(0, 1, 2), lai(0, (0, 1, 2)), frozenset(b(0, 1, 2)), frozenset(b(0))
    )
    assert result.leader_and_isr == lai(1, (1, 2), epoch=4)
    assert result.recipients == b(0, 1, 2)
    alone = leader_for_controlled_shutdown(TP, b(0), lai(0, (0,)), frozenset(b(0)), frozenset(b(0)))
    assert alone.leader_and_isr is None


def test_removing_a_replica_from_the_isr_never_empties_it() -> None:
    """ISR shrink: leader -1 if it led, ISR without it unless it is the last member, epoch+1."""
    assert remove_replica_from_isr(lai(0, (0, 1)), BrokerId(0)) == lai(-1, (1,), epoch=4)
    assert remove_replica_from_isr(lai(0, (0, 1)), BrokerId(1)) == lai(0, (0,), epoch=4)
    assert remove_replica_from_isr(lai(0, (0,)), BrokerId(0)) == lai(-1, (0,), epoch=4)


def test_strategies_have_kafkas_names() -> None:
    """Strategy names match Kafka's log messages."""
    assert strategy_name(OfflineElection(False)) == "OfflinePartitionLeaderElectionStrategy(false)"
    assert strategy_name(ReassignElection()) == "ReassignPartitionLeaderElectionStrategy"
    assert strategy_name(PreferredReplicaElection()) == (
        "PreferredReplicaPartitionLeaderElectionStrategy"
    )
    assert strategy_name(ControlledShutdownElection()) == (
        "ControlledShutdownPartitionLeaderElectionStrategy"
    )


_brokers = st.lists(st.integers(0, 5), min_size=1, max_size=5, unique=True)


@given(
    assignment=_brokers,
    isr_pick=st.lists(st.booleans(), min_size=5, max_size=5),
    live=st.sets(st.integers(0, 5)),
    unclean=st.booleans(),
)
def test_offline_election_keeps_leader_in_isr_within_assignment(
    assignment: list[int], isr_pick: list[bool], live: set[int], unclean: bool
) -> None:
    """Whatever the snapshot, an elected leader is live, in the new non-empty ISR, which is
    a subset of the assignment; without unclean election it came from the old ISR."""
    isr = tuple(r for r, keep in zip(assignment, isr_pick, strict=False) if keep) or (
        assignment[0],
    )
    current = lai(isr[0], isr)
    result = leader_for_offline(TP, b(*assignment), current, frozenset(b(*live)), unclean)
    new = result.leader_and_isr
    assert set(result.recipients) == set(assignment) & live
    if new is None:
        assert not set(isr) & live
        assert not unclean or not set(assignment) & live
        return
    assert new.leader != NO_LEADER
    assert new.leader in live
    assert new.leader in new.isr
    assert new.isr
    assert set(new.isr) <= set(assignment)
    assert new.leader_epoch == current.leader_epoch + 1
    if not unclean:
        assert new.leader in isr
