"""The state tables: Kafka's codes and valid previous states, for every pair of states."""

from __future__ import annotations

import itertools

import pytest

from actors.controller.states import (
    PARTITION_VALID_PREVIOUS,
    REPLICA_VALID_PREVIOUS,
    ControllerState,
    PartitionState,
    ReplicaState,
    partition_transition_valid,
    replica_transition_valid,
)

P = PartitionState
R = ReplicaState

# Spec §3.2 and §3.3, written out pair by pair.
PARTITION_SPEC = {
    P.NEW: {P.NON_EXISTENT},
    P.ONLINE: {P.NEW, P.ONLINE, P.OFFLINE},
    P.OFFLINE: {P.NEW, P.ONLINE, P.OFFLINE},
    P.NON_EXISTENT: {P.OFFLINE},
}
REPLICA_SPEC = {
    R.NEW: {R.NON_EXISTENT},
    R.ONLINE: {R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE},
    R.OFFLINE: {R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE},
    R.DELETION_STARTED: {R.OFFLINE},
    R.DELETION_SUCCESSFUL: {R.DELETION_STARTED},
    R.DELETION_INELIGIBLE: {R.OFFLINE, R.DELETION_STARTED},
    R.NON_EXISTENT: {R.DELETION_SUCCESSFUL},
}


def test_state_codes_and_labels_are_kafkas() -> None:
    """Partition, replica and controller states carry Kafka's numeric codes and names."""
    assert [(s.value, s.label) for s in PartitionState] == [
        (0, "NewPartition"),
        (1, "OnlinePartition"),
        (2, "OfflinePartition"),
        (3, "NonExistentPartition"),
    ]
    assert [(s.value, s.label) for s in ReplicaState] == [
        (1, "NewReplica"),
        (2, "OnlineReplica"),
        (3, "OfflineReplica"),
        (4, "ReplicaDeletionStarted"),
        (5, "ReplicaDeletionSuccessful"),
        (6, "ReplicaDeletionIneligible"),
        (7, "NonExistentReplica"),
    ]
    codes = {s.label: s.value for s in ControllerState}
    assert codes["Idle"] == 0
    assert codes["TopicDeletion"] == 4
    assert codes["LeaderAndIsrResponseReceived"] == 10
    assert codes["UpdateMetadataResponseReceived"] == 16
    assert codes["UpdateFeatures"] == 17
    assert list(codes.values()) == list(range(18))
    assert ControllerState.LEADER_AND_ISR_RESPONSE_RECEIVED.label == "LeaderAndIsrResponseReceived"


def test_tables_are_the_spec_tables() -> None:
    """Each target state declares exactly the valid previous states of the spec."""
    assert {k: set(v) for k, v in PARTITION_VALID_PREVIOUS.items()} == PARTITION_SPEC
    assert {k: set(v) for k, v in REPLICA_VALID_PREVIOUS.items()} == REPLICA_SPEC


@pytest.mark.parametrize(("current", "target"), list(itertools.product(P, P)))
def test_every_partition_transition_is_valid_exactly_when_its_table_says(
    current: PartitionState, target: PartitionState
) -> None:
    """A partition may move to a target only from one of the target's valid previous states."""
    assert partition_transition_valid(current, target) == (current in PARTITION_SPEC[target])


@pytest.mark.parametrize(("current", "target"), list(itertools.product(R, R)))
def test_every_replica_transition_is_valid_exactly_when_its_table_says(
    current: ReplicaState, target: ReplicaState
) -> None:
    """A replica may move to a target only from one of the target's valid previous states."""
    assert replica_transition_valid(current, target) == (current in REPLICA_SPEC[target])
