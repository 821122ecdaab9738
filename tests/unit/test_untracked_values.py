"""The per-partition values a large cluster holds by the million are not tracked by the
cyclic garbage collector (``gc=False``; see ``protocol.base``), even when they nest one in
another, and they still compare, hash and encode as before."""

from __future__ import annotations

import gc
from typing import Any

import msgspec

from actors.broker.isr import LeaderIsr
from actors.controller.model import LeaderAndIsr, Leadership, PartitionAndReplica
from protocol.control import (
    LeaderAndIsrPartitionState,
    PartitionError,
    TopicPartition,
    UpdateMetadataPartitionState,
)
from protocol.errors import ErrorCode
from protocol.ids import BrokerId, ControllerEpoch, LeaderEpoch, TopicName
from protocol.kafka_api import PartitionMetadata
from protocol.log import GetOrCreateLog, LogOutcome
from protocol.replication import InitialFetchState
from protocol.zkdata import ReplicaAssignment


def test_per_partition_values_are_not_tracked_and_still_behave_as_values() -> None:
    tp = TopicPartition(TopicName("t"), 3)
    brokers = (BrokerId(1), BrokerId(2))
    leadership = Leadership(
        leader_and_isr=LeaderAndIsr(leader=BrokerId(1), isr=brokers),
        controller_epoch=ControllerEpoch(1),
    )
    state: dict[str, Any] = {
        "topic": tp.topic,
        "partition": 3,
        "controller_epoch": ControllerEpoch(1),
        "leader": BrokerId(1),
        "leader_epoch": LeaderEpoch(0),
        "isr": brokers,
        "zk_version": 0,
        "replicas": brokers,
    }  # a partition's state, as LeaderAndIsr and UpdateMetadata carry it
    values: list[object] = [
        tp,
        PartitionAndReplica(tp, BrokerId(2)),
        leadership,
        leadership.leader_and_isr,
        PartitionError(topic=tp.topic, partition=3, error_code=ErrorCode.NONE),
        LeaderAndIsrPartitionState(**state),
        UpdateMetadataPartitionState(**state),
        LeaderIsr.become_leader(
            tp,
            leader=BrokerId(1),
            leader_epoch=LeaderEpoch(0),
            replicas=brokers,
            isr=brokers,
            zk_version=0,
            log_end_offset=0,
            now_ms=0,
        ),
        InitialFetchState(partition=tp, leader=BrokerId(1), leader_epoch=0, fetch_offset=0),
        ReplicaAssignment(replicas=brokers),
        PartitionMetadata(partition=3, leader=BrokerId(1), replicas=brokers, isr=brokers),
        GetOrCreateLog(topic=tp.topic, partition=3, is_new=True),
        LogOutcome(topic=tp.topic, partition=3, error_code=ErrorCode.NONE),
    ]
    for value in values:
        assert not gc.is_tracked(value), type(value).__name__
    assert PartitionAndReplica(tp, BrokerId(2)) == values[1]
    assert len({tp, TopicPartition(TopicName("t"), 3)}) == 1
    assert msgspec.json.decode(msgspec.json.encode(leadership), type=Leadership) == leadership
