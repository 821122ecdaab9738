"""ISR changes asked by partition leaders: Kafka 2.7's ``KafkaController.processAlterIsr``.

With the inter-broker protocol 2.7-IV2 a partition leader no longer writes its ISR to
ZooKeeper itself: it sends the controller an AlterIsr request (``AlterIsrManager``) with,
per partition, the ISR it wants, its leader epoch and the zkVersion of the state znode its
current ISR came from. The controller, on its event thread:

1. answers NOT_CONTROLLER when it is not the active controller, and STALE_BROKER_EPOCH
   when the asking broker is not registered or registered with another epoch, looking at
   no partition;
2. per partition: UNKNOWN_TOPIC_OR_PARTITION when it caches no leadership for it;
   FENCED_LEADER_EPOCH when the request's leader epoch is below the cached one; the
   cached state unchanged (no write) when leader, epoch and ISR, in order, already are
   the requested ones;
3. writes the others to their state znodes, each conditional on the request's zkVersion
   and fenced by the controller epoch, pipelined (``KafkaZkClient.updateLeaderAndIsr``):
   the leader is the asking broker, the leader epoch the request's (an ISR change does not
   bump it), the controller epoch the current one. A version conflict is
   INVALID_UPDATE_VERSION;
4. caches what it wrote, sends UpdateMetadata for every requested partition to the live
   and shutting-down brokers, answers, and then checks whether a reassignment of a
   partition it changed can complete (``maybeCompleteReassignment``).

As in 2.7 the new ISR is not checked against the assignment nor against live brokers: the
leader decides who is in sync (``Partition.maybeExpandIsr``/``maybeShrinkIsr``). A fenced
write that finds another controller raises ``ControllerMovedError`` after answering
NOT_CONTROLLER: the controller resigns and the leader sends again to the new one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import structlog

from actors.controller.context import ControllerContext
from actors.controller.controller_ops import ControllerOps
from actors.controller.model import LeaderAndIsr, Leadership
from actors.controller.reassignment import PartitionReassignments
from actors.zk import kafka_zk
from actors.zk.kafka_zk import ControllerMovedError
from protocol import zkdata
from protocol.control import (
    AlterIsrPartition,
    AlterIsrPartitionResult,
    AlterIsrResponse,
    TopicPartition,
)
from protocol.errors import BadVersionError, ErrorCode, StoreError
from protocol.ids import BrokerEpoch, BrokerId, TopicName
from protocol.store import OpResult, SetDataOp, SetDataResult

log = structlog.get_logger("kemu.controller.alter_isr")


@dataclass(frozen=True, slots=True)
class _Write:
    """A validated proposal: the state to write and the zkVersion it must replace."""

    partition: TopicPartition
    proposed: LeaderAndIsr
    previous: LeaderAndIsr


def _result(tp: TopicPartition, error: ErrorCode) -> AlterIsrPartitionResult:
    return AlterIsrPartitionResult(
        topic=TopicName(tp.topic), partition=tp.partition, error_code=error
    )


def _committed(tp: TopicPartition, lai: LeaderAndIsr) -> AlterIsrPartitionResult:
    return AlterIsrPartitionResult(
        topic=TopicName(tp.topic),
        partition=tp.partition,
        leader=lai.leader,
        leader_epoch=lai.leader_epoch,
        isr=lai.isr,
        current_isr_version=lai.zk_version,
    )


def validate(
    context: ControllerContext, broker_id: BrokerId, partition: AlterIsrPartition
) -> AlterIsrPartitionResult | _Write:
    """Step 2 of the module docstring for one partition: an answer without a write, or
    the write to make. Pure: reads the controller's cache only."""
    tp = partition.topic_partition
    leadership = context.leadership(tp)
    if leadership is None:
        return _result(tp, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    current = leadership.leader_and_isr
    if partition.leader_epoch < current.leader_epoch:
        return _result(tp, ErrorCode.FENCED_LEADER_EPOCH)
    proposed = LeaderAndIsr(
        leader=broker_id,
        leader_epoch=partition.leader_epoch,
        isr=partition.new_isr,
        zk_version=partition.current_isr_version,
    )
    if (proposed.leader, proposed.leader_epoch, proposed.isr) == (
        current.leader,
        current.leader_epoch,
        current.isr,
    ):
        return _committed(tp, current)  # Kafka's LeaderAndIsr.equalsIgnoreZk
    return _Write(tp, proposed, current)


class AlterIsrHandler:
    """The controller's AlterIsr processing (see the module docstring)."""

    def __init__(
        self,
        context: ControllerContext,
        reassignments: PartitionReassignments,
        ops: ControllerOps,
    ) -> None:
        self.context = context
        self.reassignments = reassignments
        self.ops = ops

    async def process(
        self,
        broker_id: BrokerId,
        broker_epoch: BrokerEpoch,
        partitions: Sequence[AlterIsrPartition],
        reply: Callable[[AlterIsrResponse], None],
        *,
        active: bool,
    ) -> None:
        """Answer ``reply`` exactly once, then complete the reassignments that can."""
        if not active:
            reply(AlterIsrResponse(error_code=ErrorCode.NOT_CONTROLLER))
            return
        registered = self.context.live_broker_epochs.get(broker_id)
        if registered is None or registered != broker_epoch:
            log.info(
                "alter_isr_stale_broker_epoch",
                broker=broker_id,
                broker_epoch=broker_epoch,
                registered=registered,
            )
            reply(AlterIsrResponse(error_code=ErrorCode.STALE_BROKER_EPOCH))
            return
        try:
            results, changed = await self._alter(broker_id, partitions)
        except ControllerMovedError:
            reply(AlterIsrResponse(error_code=ErrorCode.NOT_CONTROLLER))
            raise
        except Exception:
            reply(AlterIsrResponse(error_code=ErrorCode.UNKNOWN_SERVER_ERROR))
            raise
        reply(AlterIsrResponse(error_code=ErrorCode.NONE, partitions=results))
        for tp in changed:
            await self.reassignments.maybe_complete_reassignment(tp)

    async def _alter(
        self, broker_id: BrokerId, partitions: Sequence[AlterIsrPartition]
    ) -> tuple[tuple[AlterIsrPartitionResult, ...], list[TopicPartition]]:
        ctx = self.context
        answers: dict[TopicPartition, AlterIsrPartitionResult] = {}
        writes: list[_Write] = []
        for partition in partitions:
            outcome = validate(ctx, broker_id, partition)
            if isinstance(outcome, _Write):
                writes.append(outcome)
            else:
                answers[partition.topic_partition] = outcome
        changed: list[TopicPartition] = []
        if writes:
            outcomes = await kafka_zk.fenced_each(
                self.ops.session(),
                ctx.epoch_zk_version,
                [[self._set_state(w)] for w in writes],
            )
            for write, result in zip(writes, outcomes, strict=True):
                answers[write.partition] = self._apply(write, result)
                if answers[write.partition].error_code is ErrorCode.NONE:
                    changed.append(write.partition)
        requested = sorted({p.topic_partition for p in partitions})
        await self.ops.send_update_metadata(sorted(ctx.live_or_shutting_down_broker_ids), requested)
        return tuple(answers[p.topic_partition] for p in partitions), changed

    def _set_state(self, write: _Write) -> SetDataOp:
        tp = write.partition
        written = Leadership(leader_and_isr=write.proposed, controller_epoch=self.context.epoch)
        return SetDataOp(
            path=zkdata.partition_state_path(TopicName(tp.topic), tp.partition),
            data=written.to_znode().encode(),
            version=write.proposed.zk_version,
        )

    def _apply(
        self, write: _Write, outcome: tuple[OpResult, ...] | StoreError
    ) -> AlterIsrPartitionResult:
        """Cache a written state and say so; a failed write is the partition's error."""
        tp = write.partition
        if isinstance(outcome, BadVersionError):
            log.info(
                "alter_isr_invalid_version",
                partition=str(tp),
                version=write.proposed.zk_version,
                cached=write.previous.zk_version,
            )
            return _result(tp, ErrorCode.INVALID_UPDATE_VERSION)
        if isinstance(outcome, StoreError):
            log.error("alter_isr_write_failed", partition=str(tp), error=repr(outcome))
            return _result(tp, ErrorCode.UNKNOWN_SERVER_ERROR)
        (stat_result,) = outcome
        assert isinstance(stat_result, SetDataResult)
        written = write.proposed.with_zk_version(stat_result.stat.version)
        ctx = self.context
        ctx.put_leadership(tp, Leadership(leader_and_isr=written, controller_epoch=ctx.epoch))
        previous = write.previous
        log.info(
            "isr_altered",
            partition=str(tp),
            leader=written.leader,
            isr=written.isr,
            previous_isr=previous.isr,
        )
        self.ops.trace(
            "event",
            "isr_altered",
            topic=tp.topic,
            partition=tp.partition,
            leader=written.leader,
            leader_epoch=written.leader_epoch,
            from_isr=list(previous.isr),
            to_isr=list(written.isr),
            zk_version=written.zk_version,
            replicas=list(ctx.partition_replica_assignment(tp)),
        )
        return _committed(tp, written)
