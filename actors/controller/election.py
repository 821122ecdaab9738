"""Leader election strategies (Kafka's ``Election`` and ``PartitionLeaderElectionAlgorithms``).

Pure functions of a snapshot: the partition's assignment, its current leader and ISR, and
which replicas are online. No I/O, no controller state: the partition state machine
gathers the snapshot, calls one of these, then writes the result
(``ZkPartitionStateMachine.doElectLeaderForPartitions``).
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass
from typing import assert_never

import msgspec

from actors.controller.model import LeaderAndIsr
from protocol.control import NO_LEADER, TopicPartition
from protocol.ids import BrokerId

# ------------------------------------------------------------------- strategies


class OfflineElection(msgspec.Struct, frozen=True):
    """For new and offline partitions and broker changes. ``allow_unclean`` forces an
    unclean election; otherwise the topic's ``unclean.leader.election.enable`` decides."""

    allow_unclean: bool = False


class ReassignElection(msgspec.Struct, frozen=True):
    """For a partition whose reassignment moves the leader out of the target replicas."""


class PreferredReplicaElection(msgspec.Struct, frozen=True):
    """Move leadership back to the first assigned replica."""


class ControlledShutdownElection(msgspec.Struct, frozen=True):
    """Move leadership away from brokers that are shutting down."""


ElectionStrategy = (
    OfflineElection | ReassignElection | PreferredReplicaElection | ControlledShutdownElection
)


def strategy_name(strategy: ElectionStrategy) -> str:
    """Kafka's name of the strategy, as in its log messages."""
    match strategy:
        case OfflineElection(allow_unclean=unclean):
            return f"OfflinePartitionLeaderElectionStrategy({str(unclean).lower()})"
        case ReassignElection():
            return "ReassignPartitionLeaderElectionStrategy"
        case PreferredReplicaElection():
            return "PreferredReplicaPartitionLeaderElectionStrategy"
        case ControlledShutdownElection():
            return "ControlledShutdownPartitionLeaderElectionStrategy"
        case _:
            assert_never(strategy)


# ------------------------------------------------------------------- algorithms


def offline_partition_leader(
    assignment: Sequence[BrokerId],
    isr: Sequence[BrokerId],
    live: Set[BrokerId],
    unclean: bool,
) -> BrokerId | None:
    """The first assigned replica that is live and in the ISR; failing that, with unclean
    election, the first live assigned replica."""
    leader = next((r for r in assignment if r in live and r in isr), None)
    if leader is None and unclean:
        leader = next((r for r in assignment if r in live), None)
    return leader


def reassign_partition_leader(
    target: Sequence[BrokerId], isr: Sequence[BrokerId], live: Set[BrokerId]
) -> BrokerId | None:
    """The first target replica that is live and in the ISR."""
    return next((r for r in target if r in live and r in isr), None)


def preferred_replica_leader(
    assignment: Sequence[BrokerId], isr: Sequence[BrokerId], live: Set[BrokerId]
) -> BrokerId | None:
    """The head of the assignment, only if it is live and in the ISR."""
    if assignment and assignment[0] in live and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_leader(
    assignment: Sequence[BrokerId],
    isr: Sequence[BrokerId],
    live: Set[BrokerId],
    shutting_down: Set[BrokerId],
) -> BrokerId | None:
    """The first assigned replica that is live (or shutting down), in the ISR, and not
    shutting down."""
    return next((r for r in assignment if r in live and r in isr and r not in shutting_down), None)


# ------------------------------------------------------------------- elections


@dataclass(frozen=True, slots=True)
class ElectionResult:
    """The outcome for one partition: the new leader and ISR (None: no leader could be
    elected) and the replicas the LeaderAndIsr request goes to."""

    partition: TopicPartition
    leader_and_isr: LeaderAndIsr | None
    recipients: tuple[BrokerId, ...]


def leader_for_offline(
    partition: TopicPartition,
    assignment: Sequence[BrokerId],
    current: LeaderAndIsr | None,
    online: Set[BrokerId],
    unclean: bool,
) -> ElectionResult:
    """New ISR: the live part of the old ISR if the leader came from it, else just the
    (unclean) leader. Recipients: the live assigned replicas."""
    live = tuple(r for r in assignment if r in online)
    if current is None:
        return ElectionResult(partition, None, live)
    isr = current.isr
    leader = offline_partition_leader(assignment, isr, online, unclean)
    if leader is None:
        return ElectionResult(partition, None, live)
    new_isr = tuple(r for r in isr if r in online) if leader in isr else (leader,)
    return ElectionResult(partition, current.new_leader_and_isr(leader, new_isr), live)


def leader_for_reassign(
    partition: TopicPartition,
    target: Sequence[BrokerId],
    current: LeaderAndIsr,
    online: Set[BrokerId],
) -> ElectionResult:
    """ISR unchanged; recipients: the target replicas."""
    leader = reassign_partition_leader(target, current.isr, online)
    result = current.new_leader(leader) if leader is not None else None
    return ElectionResult(partition, result, tuple(target))


def leader_for_preferred_replica(
    partition: TopicPartition,
    assignment: Sequence[BrokerId],
    current: LeaderAndIsr,
    online: Set[BrokerId],
) -> ElectionResult:
    """ISR unchanged; recipients: the whole assignment."""
    leader = preferred_replica_leader(assignment, current.isr, online)
    result = current.new_leader(leader) if leader is not None else None
    return ElectionResult(partition, result, tuple(assignment))


def leader_for_controlled_shutdown(
    partition: TopicPartition,
    assignment: Sequence[BrokerId],
    current: LeaderAndIsr,
    online_or_shutting_down: Set[BrokerId],
    shutting_down: Set[BrokerId],
) -> ElectionResult:
    """New ISR: the old one minus shutting-down brokers. Recipients: the live-or-shutting-
    down assigned replicas (so the broker going away hears that it is a follower now)."""
    live = tuple(r for r in assignment if r in online_or_shutting_down)
    leader = controlled_shutdown_leader(
        assignment, current.isr, online_or_shutting_down, shutting_down
    )
    new_isr = tuple(r for r in current.isr if r not in shutting_down)
    result = current.new_leader_and_isr(leader, new_isr) if leader is not None else None
    return ElectionResult(partition, result, live)


def remove_replica_from_isr(current: LeaderAndIsr, replica: BrokerId) -> LeaderAndIsr:
    """ISR shrink when a replica goes offline
    (``ZkReplicaStateMachine.doRemoveReplicasFromIsr``): no leader if it led; the ISR
    without it, unless it is the last member (the ISR never becomes empty); next epoch."""
    leader = NO_LEADER if current.leader == replica else current.leader
    isr = current.isr if len(current.isr) == 1 else tuple(r for r in current.isr if r != replica)
    return current.new_leader_and_isr(leader, isr)
