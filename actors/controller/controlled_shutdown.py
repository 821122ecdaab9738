"""Controlled shutdown, the controller's side (Kafka's ``KafkaController.doControlledShutdown``).

A broker about to stop asks the active controller to move its leaderships away first:

* a controller that is not active answers STALE_CONTROLLER_EPOCH (Kafka's
  ControllerMovedException); a broker the controller does not know answers
  BROKER_NOT_AVAILABLE; a broker epoch older than the one the controller cached (a request
  from a previous incarnation) answers STALE_BROKER_EPOCH;
* the broker joins the shutting-down set (it stops counting as live for elections, but
  still gets requests);
* of the partitions it hosts with more than one replica, with a leader, and whose topic is
  not queued for deletion: those it leads get a new leader with the ControlledShutdown
  strategy (first live replica in the ISR that is not shutting down; the ISR loses the
  shutting-down brokers); for those it follows, StopReplica(delete=false) to it and its
  replica -> OfflineReplica (out of the ISR, the leader told);
* the answer lists the partitions it still leads (no other replica could take over); the
  broker retries until that is empty (``actors.broker.controlled_shutdown``).

Single-replica partitions are left alone. When the broker's znode finally goes, the usual
broker failure follows and the broker leaves the shutting-down set.
"""

from __future__ import annotations

import structlog

from actors.controller.context import ControllerContext
from actors.controller.controller_ops import ControllerOps
from actors.controller.election import ControlledShutdownElection
from actors.controller.model import PartitionAndReplica
from actors.controller.partition_state_machine import PartitionStateMachine
from actors.controller.replica_state_machine import ReplicaStateMachine
from actors.controller.request_batch import ControllerBrokerRequestBatch
from actors.controller.states import PartitionState, ReplicaState
from actors.controller.topic_deletion import TopicDeletionManager
from protocol.control import ControlledShutdownResponse, TopicPartition
from protocol.errors import ErrorCode
from protocol.ids import BrokerEpoch, BrokerId

log = structlog.get_logger("kemu.controller.controlled_shutdown")

UNKNOWN_BROKER_EPOCH = -1
"""A request from a broker that does not send its epoch: never refused as stale."""


class ControlledShutdowns:
    def __init__(
        self,
        context: ControllerContext,
        partition_state_machine: PartitionStateMachine,
        replica_state_machine: ReplicaStateMachine,
        deletion: TopicDeletionManager,
        ops: ControllerOps,
    ) -> None:
        self.context = context
        self.psm = partition_state_machine
        self.rsm = replica_state_machine
        self.deletion = deletion
        self.ops = ops

    async def process(
        self, broker_id: BrokerId, broker_epoch: BrokerEpoch, *, active: bool
    ) -> ControlledShutdownResponse:
        ctx = self.context
        if not active:
            return ControlledShutdownResponse(error_code=ErrorCode.STALE_CONTROLLER_EPOCH)
        cached = ctx.live_broker_epochs.get(broker_id)
        if cached is None:
            log.info("controlled_shutdown_of_unknown_broker", broker=broker_id)
            return ControlledShutdownResponse(error_code=ErrorCode.BROKER_NOT_AVAILABLE)
        if broker_epoch != UNKNOWN_BROKER_EPOCH and broker_epoch < cached:
            log.info(
                "controlled_shutdown_stale_broker_epoch",
                broker=broker_id,
                broker_epoch=broker_epoch,
                cached=cached,
            )
            self.ops.trace(
                "event",
                "controlled_shutdown_rejected",
                broker=broker_id,
                error=ErrorCode.STALE_BROKER_EPOCH.name,
            )
            return ControlledShutdownResponse(error_code=ErrorCode.STALE_BROKER_EPOCH)
        log.info("shutting_down_broker", broker=broker_id)
        remaining = await self._shut_down(broker_id)
        self.ops.trace(
            "event",
            "controlled_shutdown",
            broker=broker_id,
            remaining=[str(tp) for tp in remaining],
        )
        return ControlledShutdownResponse(
            error_code=ErrorCode.NONE, remaining_partitions=tuple(remaining)
        )

    async def _shut_down(self, broker_id: BrokerId) -> list[TopicPartition]:
        ctx = self.context
        ctx.shutting_down_broker_ids.add(broker_id)
        to_act_on = [
            tp
            for tp in ctx.all_partitions
            if broker_id in ctx.partition_replica_assignment(tp)
            and len(ctx.partition_replica_assignment(tp)) > 1
            and ctx.leadership(tp) is not None
            and not self.deletion.is_topic_queued_for_deletion(tp.topic)
        ]
        led = [tp for tp in to_act_on if self._leader(tp) == broker_id]
        followed = [tp for tp in to_act_on if self._leader(tp) != broker_id]
        await self.psm.handle_state_changes(
            led, PartitionState.ONLINE, ControlledShutdownElection()
        )

        def stop_followers(batch: ControllerBrokerRequestBatch) -> None:
            for tp in followed:
                batch.add_stop_replica((broker_id,), tp, delete_partition=False)

        await self.ops.send_requests(stop_followers)
        await self.rsm.handle_state_changes(
            [PartitionAndReplica(tp, broker_id) for tp in followed], ReplicaState.OFFLINE
        )
        return ctx.partition_leaders_on_broker(broker_id)

    def _leader(self, tp: TopicPartition) -> BrokerId | None:
        leadership = self.context.leadership(tp)
        return leadership.leader if leadership is not None else None
