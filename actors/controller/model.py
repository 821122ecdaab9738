"""Values the controller reasons about: a partition's leader and ISR with the zkVersion of
its state znode, the controller epoch that wrote it, and a replica of a partition."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from actors.zk.kafka_zk import PartitionState as ZkPartitionState
from protocol import zkdata
from protocol.control import INITIAL_LEADER_EPOCH, INITIAL_ZK_VERSION, NO_LEADER, TopicPartition
from protocol.ids import BrokerId, ControllerEpoch, LeaderEpoch


class LeaderAndIsr(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Kafka's ``LeaderAndIsr``: a partition's leader (``NO_LEADER`` for none), leader epoch,
    ISR, and the zkVersion of the state znode it was read from or written as."""

    leader: BrokerId
    leader_epoch: LeaderEpoch = INITIAL_LEADER_EPOCH
    isr: tuple[BrokerId, ...]
    zk_version: int = INITIAL_ZK_VERSION

    def new_leader(self, leader: BrokerId) -> LeaderAndIsr:
        """Another leader, same ISR, next leader epoch."""
        return self.new_leader_and_isr(leader, self.isr)

    def new_leader_and_isr(self, leader: BrokerId, isr: Iterable[BrokerId]) -> LeaderAndIsr:
        """Every election or ISR change the controller writes bumps the leader epoch by one, even
        when the leader stays (Kafka's ``LeaderAndIsr.newLeaderAndIsr``); the zkVersion changes only
        once written."""
        return LeaderAndIsr(
            leader=leader,
            leader_epoch=LeaderEpoch(self.leader_epoch + 1),
            isr=tuple(isr),
            zk_version=self.zk_version,
        )

    def with_zk_version(self, zk_version: int) -> LeaderAndIsr:
        return msgspec.structs.replace(self, zk_version=zk_version)

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER


class Leadership(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Kafka's ``LeaderIsrAndControllerEpoch``: what the controller caches per partition."""

    leader_and_isr: LeaderAndIsr
    controller_epoch: ControllerEpoch

    @property
    def leader(self) -> BrokerId:
        return self.leader_and_isr.leader

    @property
    def leader_epoch(self) -> LeaderEpoch:
        return self.leader_and_isr.leader_epoch

    @property
    def isr(self) -> tuple[BrokerId, ...]:
        return self.leader_and_isr.isr

    @property
    def zk_version(self) -> int:
        return self.leader_and_isr.zk_version

    def to_znode(self) -> zkdata.LeaderIsrAndControllerEpoch:
        """The state znode's payload (its zkVersion lives in the znode's Stat)."""
        return zkdata.LeaderIsrAndControllerEpoch(
            leader=self.leader,
            leader_epoch=self.leader_epoch,
            isr=self.isr,
            controller_epoch=self.controller_epoch,
        )

    @classmethod
    def from_znode(cls, state: ZkPartitionState) -> Leadership:
        znode = state.state
        return cls(
            leader_and_isr=LeaderAndIsr(
                leader=znode.leader,
                leader_epoch=znode.leader_epoch,
                isr=znode.isr,
                zk_version=state.zk_version,
            ),
            controller_epoch=znode.controller_epoch,
        )


class PartitionAndReplica(msgspec.Struct, frozen=True, order=True, gc=False):
    """One replica of one partition: what the replica state machine keys on."""

    topic_partition: TopicPartition
    replica: BrokerId

    @property
    def topic(self) -> str:
        return self.topic_partition.topic

    def __str__(self) -> str:
        return f"[{self.topic_partition},{self.replica}]"
