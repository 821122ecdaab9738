"""How a follower rejoins the ISR in kemu: the AlterIsr its partition leader would send.

In Kafka 2.7 (IBP 2.7-IV2) a partition leader adds a follower to the ISR once the follower
has fetched up to the leader's log end, by sending the controller an AlterIsr request; the
controller writes the new ISR (same leader, same leader epoch, next zkVersion), sends
UpdateMetadata, and checks whether a reassignment of the partition can now complete.

kemu's brokers hold no data and do not fetch, so "caught up" is decided here, simply and
deterministically: a replica is caught up as soon as its broker has the partition's log,
which it says by answering a LeaderAndIsr without error for the partition. So when a
broker answers NONE for a partition, it joins the ISR if

* it is an assigned replica of the partition, in state New or Online, on a live broker
  that is not shutting down (a broker going away must not undo its controlled shutdown);
* the partition has a leader, on a live broker, and it is not that leader;
* it is not in the ISR already.

A topic queued for deletion whose deletion has not started (paused) still expands, as
Kafka's AlterIsr does: that is how a reassignment holding the deletion completes. Once the
deletion starts its replicas leave the Online state and no longer join.

The state znode is re-read and written conditionally (a lost race is retried), as
``processAlterIsr`` does. This is what lets a restarted broker become a preferred leader
again, and a reassignment's new replicas complete it.
"""

from __future__ import annotations

from collections.abc import Iterable

import structlog

from actors.controller.context import ControllerContext
from actors.controller.controller_ops import ControllerOps
from actors.controller.model import LeaderAndIsr, Leadership, PartitionAndReplica
from actors.controller.reassignment import PartitionReassignments
from actors.controller.states import ReplicaState
from actors.zk import kafka_zk
from protocol.control import TopicPartition
from protocol.errors import BadVersionError
from protocol.ids import BrokerId

log = structlog.get_logger("kemu.controller.isr_expansion")

_CAUGHT_UP_STATES = (ReplicaState.NEW, ReplicaState.ONLINE)


class IsrExpansion:
    def __init__(
        self,
        context: ControllerContext,
        reassignments: PartitionReassignments,
        ops: ControllerOps,
    ) -> None:
        self.context = context
        self.reassignments = reassignments
        self.ops = ops

    def may_join(self, broker_id: BrokerId, tp: TopicPartition, current: LeaderAndIsr) -> bool:
        """The conditions of the module docstring, against ``current`` leader and ISR."""
        ctx = self.context
        return (
            current.has_leader
            and current.leader != broker_id
            and broker_id not in current.isr
            and broker_id in ctx.partition_replica_assignment(tp)
            and ctx.replica_state(PartitionAndReplica(tp, broker_id)) in _CAUGHT_UP_STATES
            and ctx.is_replica_online(broker_id, tp)
            and ctx.is_replica_online(current.leader, tp)
        )

    async def on_replicas_caught_up(
        self, broker_id: BrokerId, partitions: Iterable[TopicPartition]
    ) -> None:
        """``broker_id`` has the logs of ``partitions``: it joins their ISRs where it may."""
        ctx = self.context
        candidates = []
        for tp in sorted(set(partitions)):
            leadership = ctx.leadership(tp)
            if leadership is not None and self.may_join(broker_id, tp, leadership.leader_and_isr):
                candidates.append(tp)
        if not candidates:
            return
        expanded = [tp for tp in candidates if await self._expand(broker_id, tp)]
        if not expanded:
            return
        await self.ops.send_update_metadata(sorted(ctx.live_or_shutting_down_broker_ids), expanded)
        for tp in expanded:
            await self.reassignments.maybe_complete_reassignment(tp)

    async def _expand(self, broker_id: BrokerId, tp: TopicPartition) -> bool:
        ctx = self.context
        session = self.ops.session()
        while True:
            state = await kafka_zk.get_partition_state(session, tp)
            if state is None or state.state.controller_epoch > ctx.epoch:
                return False
            current = Leadership.from_znode(state).leader_and_isr
            if not self.may_join(broker_id, tp, current):
                return False
            new = LeaderAndIsr(
                leader=current.leader,
                leader_epoch=current.leader_epoch,
                isr=(*current.isr, broker_id),
                zk_version=current.zk_version,
            )
            written = Leadership(leader_and_isr=new, controller_epoch=ctx.epoch)
            try:
                zk_version = await kafka_zk.update_partition_state(
                    session, ctx.epoch_zk_version, tp, written.to_znode(), current.zk_version
                )
            except BadVersionError:
                continue
            ctx.put_leadership(
                tp,
                Leadership(
                    leader_and_isr=new.with_zk_version(zk_version), controller_epoch=ctx.epoch
                ),
            )
            log.info("isr_expanded", partition=str(tp), replica=broker_id, isr=new.isr)
            self.ops.trace(
                "event",
                "isr_expanded",
                topic=tp.topic,
                partition=tp.partition,
                replica=broker_id,
                isr=list(new.isr),
                leader=new.leader,
                leader_epoch=new.leader_epoch,
                zk_version=zk_version,
            )
            return True
