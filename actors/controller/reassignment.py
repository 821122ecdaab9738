"""Partition reassignment (Kafka's ``onPartitionReassignment`` and its ZooKeeper path).

A reassignment moves a partition from its original replicas (ORS) to target replicas (TRS).
While it runs, the partition's assignment (in ``/brokers/topics/<t>`` and in the context)
holds RS = TRS + ORS (targets first), with AR = TRS - ORS being added and RR = ORS - TRS
being removed, so that a new controller can resume it (``onControllerFailover`` calls
``initializePartitionReassignments``). It goes through Kafka's phases:

* U (update): write RS/AR/RR to the topic znode, then to memory; replicas that an earlier
  reassignment of the partition was adding and this one does not want are stopped.
* A (TRS not all in the ISR yet): bump the leader epoch (LeaderAndIsr to ORS, and to AR
  with ``isNew``); AR -> NewReplica.
* B (TRS all in the ISR): AR -> OnlineReplica; RS = TRS in memory; a new leader from TRS
  if the current one is not in it or is dead (else another epoch bump); RR ->
  OfflineReplica (the ISR shrinks) -> ReplicaDeletionStarted (StopReplica delete=true) ->
  ReplicaDeletionSuccessful -> NonExistentReplica; RS = TRS written to the topic znode;
  the partition leaves ``/admin/reassign_partitions`` (the znode is deleted once empty);
  UpdateMetadata to every broker; a deletion of the topic that waited resumes.

While a partition of a topic is being reassigned, the topic's deletion is paused
(``TopicDeletionManager.markTopicIneligibleForDeletion``); a reassignment of a topic queued
for deletion is refused with UNKNOWN_TOPIC_OR_PARTITION, as Kafka's
``maybeTriggerPartitionReassignment`` does.

How new replicas catch up: phase A moves to B when the partition leader adds the new
replicas to the ISR once they have fetched its log, by an AlterIsr (IBP 2.7) that the
controller writes (``alter_isr``); after each such change the controller checks whether
the partition's reassignment can complete (``maybe_complete_reassignment``). A target
broker that is down fetches nothing, so the reassignment halts in phase A until it comes
back (``resume_for_new_brokers``) and catches up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import structlog

from actors.controller.context import ControllerContext, is_being_reassigned, target_replicas
from actors.controller.controller_ops import ControllerOps
from actors.controller.election import ReassignElection
from actors.controller.errors import StateChangeFailedError
from actors.controller.events import (
    ApiPartitionReassignment,
    ListPartitionReassignments,
    ZkPartitionReassignment,
)
from actors.controller.model import Leadership, PartitionAndReplica
from actors.controller.partition_state_machine import PartitionStateMachine
from actors.controller.replica_state_machine import ReplicaStateMachine
from actors.controller.request_batch import ControllerBrokerRequestBatch
from actors.controller.states import PartitionState, ReplicaState
from actors.controller.topic_deletion import REASON_REASSIGNMENT, TopicDeletionManager
from actors.zk import kafka_zk
from actors.zk.kafka_zk import ControllerMovedError
from protocol import jvm, zkdata
from protocol.control import TopicPartition
from protocol.errors import BadVersionError, ErrorCode, ZkDataError
from protocol.ids import BrokerId, TopicName
from protocol.kafka_api import (
    AlterPartitionReassignmentsResponseData,
    ListPartitionReassignmentsResponseData,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)

log = structlog.get_logger("kemu.controller.reassignment")

PARTITION_DOES_NOT_EXIST = "The partition does not exist."
NOT_CONTROLLER_MESSAGE = "This is not the correct controller for this cluster."
NO_REASSIGNMENT_IN_PROGRESS_MESSAGE = "No partition reassignment is in progress."
UNKNOWN_SERVER_ERROR_MESSAGE = (
    "The server experienced an unexpected error when processing the request."
)


# ------------------------------------------------------------------ pure helpers


def origin_replicas(assignment: zkdata.ReplicaAssignment) -> tuple[BrokerId, ...]:
    """The replicas the partition had before its reassignment: RS minus those being added."""
    adding = set(assignment.adding_replicas)
    return tuple(r for r in assignment.replicas if r not in adding)


def reassign_to(
    current: zkdata.ReplicaAssignment, target: Sequence[BrokerId]
) -> zkdata.ReplicaAssignment:
    """Kafka's ``ReplicaAssignment.reassignTo``: RS = (TRS ++ ORS).distinct, AR = RS - ORS,
    RR = RS - TRS. A target equal to the origin gives a plain assignment (nothing to do)."""
    origin = origin_replicas(current)
    full = tuple(dict.fromkeys((*target, *origin)))
    return zkdata.ReplicaAssignment(
        replicas=full,
        adding_replicas=tuple(r for r in full if r not in origin),
        removing_replicas=tuple(r for r in full if r not in target),
    )


def _scala_buffer(ids: Iterable[int]) -> str:
    return f"ArrayBuffer({', '.join(map(str, ids))})"


def validate_replicas(
    current: zkdata.ReplicaAssignment,
    replicas: Sequence[BrokerId],
    live_broker_ids: Iterable[BrokerId],
) -> str | None:
    """Kafka's ``KafkaController.validateReplicas``: the INVALID_REPLICA_ASSIGNMENT message
    for a target replica list that is empty, names a broker twice or a negative id, or adds
    a broker that is not alive; None when it is valid. The lists read as Scala prints them
    (the request's replicas and the replicas to add as ``ArrayBuffer``, the live brokers as
    a ``Set``, here in ascending order)."""
    if not replicas:
        return "Empty replica list specified in partition reassignment."
    if len(set(replicas)) != len(replicas):
        return (
            "Duplicate replica ids in partition reassignment replica list: "
            f"{_scala_buffer(replicas)}"
        )
    if any(r < 0 for r in replicas):
        return f"Invalid broker id in replica list: {_scala_buffer(replicas)}"
    live = sorted(live_broker_ids)
    adding = reassign_to(current, replicas).adding_replicas
    if not set(adding) <= set(live):
        return (
            "Replica assignment has brokers that are not alive. Replica list: "
            f"{_scala_buffer(adding)}, live broker list: Set({', '.join(map(str, live))})"
        )
    return None


def reassignment_complete(
    assignment: zkdata.ReplicaAssignment, isr: Iterable[BrokerId] | None
) -> bool:
    """Kafka's ``isReassignmentComplete``: nothing is being reassigned, or every target
    replica is in the ISR (``isr`` None: the partition has no state znode)."""
    if not is_being_reassigned(assignment):
        return True
    if isr is None:
        return False
    return set(target_replicas(assignment)) <= set(isr)


def scala_map_entries(
    entries: Sequence[tuple[TopicPartition, tuple[BrokerId, ...]]],
) -> list[tuple[TopicPartition, tuple[BrokerId, ...]]]:
    """The entries of Kafka's decoded ``/admin/reassign_partitions`` (a Scala immutable
    ``Map`` built by ``toMap``) in its iteration order: a key listed twice keeps its first
    place and its last value; up to four keys iterate in insertion order, five or more as
    a CHAMP ``HashMap`` of ``TopicPartition.hashCode``."""
    values: dict[TopicPartition, tuple[BrokerId, ...]] = {}
    for tp, replicas in entries:
        values[tp] = replicas
    keys = list(values)
    if len(keys) > 4:
        keys = jvm.scala_champ_order(
            keys, [jvm.java_topic_partition_hash(tp.topic, tp.partition) for tp in keys]
        )
    return [(tp, values[tp]) for tp in keys]


def _trigger_message(code: ErrorCode) -> str | None:
    """The message of ``maybeTriggerPartitionReassignment``'s ``ApiError`` for a code."""
    match code:
        case ErrorCode.NONE:
            return None
        case ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return PARTITION_DOES_NOT_EXIST
        case _:
            return UNKNOWN_SERVER_ERROR_MESSAGE


# ------------------------------------------------------------------ the reassignment logic


class PartitionReassignments:
    """The controller's reassignment logic; it runs on the controller's event task only."""

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

    # ------------------------------------------------------------------ entry points

    def list_partition_reassignments(
        self, event: ListPartitionReassignments, *, active: bool
    ) -> ListPartitionReassignmentsResponseData:
        """Kafka's ``processListPartitionReassignments``: of the partitions asked for (None:
        those being reassigned), each whose assignment in the context is being reassigned,
        with its replicas (RS), adding (AR) and removing (RR) replicas; grouped by topic,
        topics and partitions sorted. Not the active controller: NOT_CONTROLLER with
        Kafka's message (``new ApiError(Errors.NOT_CONTROLLER)``)."""
        if not active:
            return ListPartitionReassignmentsResponseData(
                error_code=ErrorCode.NOT_CONTROLLER,
                error_message="This is not the correct controller for this cluster.",
            )
        ctx = self.context
        asked = (
            ctx.partitions_being_reassigned if event.partitions is None else set(event.partitions)
        )
        by_topic: dict[TopicName, list[OngoingPartitionReassignment]] = {}
        for tp in sorted(asked):
            assignment = ctx.partition_full_replica_assignment(tp)
            if not is_being_reassigned(assignment):
                continue
            by_topic.setdefault(TopicName(tp.topic), []).append(
                OngoingPartitionReassignment(
                    partition_index=tp.partition,
                    replicas=assignment.replicas,
                    adding_replicas=assignment.adding_replicas,
                    removing_replicas=assignment.removing_replicas,
                )
            )
        return ListPartitionReassignmentsResponseData(
            topics=tuple(
                OngoingTopicReassignment(name=topic, partitions=tuple(partitions))
                for topic, partitions in by_topic.items()
            )
        )

    async def process_api_partition_reassignment(
        self, event: ApiPartitionReassignment, *, active: bool
    ) -> AlterPartitionReassignmentsResponseData:
        """Kafka's ``processApiPartitionReassignment``: each partition's target validated
        (``validateReplicas``) and built (``maybeBuildReassignment``: None cancels the
        reassignment in flight, reverting to the original replicas; none in flight:
        NO_REASSIGNMENT_IN_PROGRESS); the partitions to reassign leave
        ``/admin/reassign_partitions`` (the latest reassignment wins), then start. Answered
        per partition, grouped by topic, topics and partitions sorted. Not the active
        controller: NOT_CONTROLLER at the top level with Kafka's message."""
        if not active:
            return AlterPartitionReassignmentsResponseData(
                error_code=ErrorCode.NOT_CONTROLLER, error_message=NOT_CONTROLLER_MESSAGE
            )
        ctx = self.context
        results: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
        to_reassign: dict[TopicPartition, zkdata.ReplicaAssignment] = {}
        for tp, target in event.reassignments:
            current = ctx.partition_full_replica_assignment(tp)
            invalid = (
                None if target is None else validate_replicas(current, target, ctx.live_broker_ids)
            )
            if invalid is not None:
                results[tp] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT, invalid)
            elif is_being_reassigned(current):
                to_reassign[tp] = reassign_to(
                    current, origin_replicas(current) if target is None else target
                )
            elif target is not None:
                to_reassign[tp] = reassign_to(current, target)
            else:
                results[tp] = (
                    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                    NO_REASSIGNMENT_IN_PROGRESS_MESSAGE,
                )
        await self.maybe_remove_from_zk_reassignment(lambda tp, _replicas: tp in to_reassign)
        for tp, code in (await self.maybe_trigger_partition_reassignment(to_reassign)).items():
            results[tp] = (code, _trigger_message(code))
        by_topic: dict[TopicName, list[ReassignablePartitionResponse]] = {}
        for tp, (code, message) in sorted(results.items()):
            by_topic.setdefault(TopicName(tp.topic), []).append(
                ReassignablePartitionResponse(
                    partition_index=tp.partition, error_code=code, error_message=message
                )
            )
        return AlterPartitionReassignmentsResponseData(
            responses=tuple(
                ReassignableTopicResponse(name=topic, partitions=tuple(partitions))
                for topic, partitions in by_topic.items()
            )
        )

    async def process_zk_partition_reassignment(self) -> set[TopicPartition]:
        """``ZkPartitionReassignment``: re-arm the watch; if ``/admin/reassign_partitions``
        exists, start what it lists and drop from it the partitions that cannot be
        reassigned. Returns the partitions started."""
        if not await self.ops.watch_existence(zkdata.REASSIGN_PARTITIONS_PATH):
            return set()
        try:
            pending = await kafka_zk.get_partition_reassignment(self.ops.session())
        except ZkDataError as exc:
            log.warning("ignoring_invalid_partition_reassignment", error=str(exc))
            self.ops.trace("event", "partition_reassignment_invalid", error=str(exc))
            return set()
        if pending is None:
            return set()
        ctx = self.context
        to_reassign = {
            tp: reassign_to(ctx.partition_full_replica_assignment(tp), replicas)
            for tp, replicas in scala_map_entries(
                [(TopicPartition(p.topic, p.partition), p.replicas) for p in pending.partitions]
            )
        }
        results = await self.maybe_trigger_partition_reassignment(to_reassign)
        failed = {tp: code for tp, code in results.items() if code is not ErrorCode.NONE}
        if failed:
            log.warning(
                "zk_partition_reassignment_failed",
                errors={str(tp): code.name for tp, code in sorted(failed.items())},
            )
            self.ops.trace(
                "event",
                "partition_reassignment_rejected",
                partitions=[str(tp) for tp in sorted(failed)],
                errors=[code.name for _, code in sorted(failed.items())],
            )
            await self.maybe_remove_from_zk_reassignment(lambda tp, _replicas: tp in failed)
        return {tp for tp, code in results.items() if code is ErrorCode.NONE}

    async def maybe_trigger_partition_reassignment(
        self, reassignments: Mapping[TopicPartition, zkdata.ReplicaAssignment]
    ) -> dict[TopicPartition, ErrorCode]:
        """Start each reassignment whose topic exists and is not queued for deletion."""
        results: dict[TopicPartition, ErrorCode] = {}
        for tp, reassignment in reassignments.items():
            if self.deletion.is_topic_queued_for_deletion(tp.topic):
                log.info("skipping_reassignment_of_topic_being_deleted", partition=str(tp))
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif not self.context.partition_replica_assignment(tp):
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                try:
                    await self.on_partition_reassignment(tp, reassignment)
                    results[tp] = ErrorCode.NONE
                except ControllerMovedError:
                    log.info("reassignment_aborted_controller_moved", partition=str(tp))
                    raise
                except Exception:
                    log.exception("reassignment_failed", partition=str(tp))
                    results[tp] = ErrorCode.UNKNOWN_SERVER_ERROR
        return results

    async def initialize(self) -> None:
        """Failover step 9: the ZooKeeper-path reassignments first, then those the topic
        znodes say are in progress (started through the API, or by an earlier controller)."""
        resumed = await self.process_zk_partition_reassignment()
        await self._maybe_resume(lambda tp, _assignment: tp not in resumed)

    async def resume_for_new_brokers(self, new_brokers: Iterable[BrokerId]) -> None:
        """``onBrokerStartup`` step 6: reassignments whose targets include a new broker."""
        started = set(new_brokers)
        await self._maybe_resume(
            lambda _tp, assignment: any(r in started for r in target_replicas(assignment))
        )

    async def maybe_complete_reassignment(self, tp: TopicPartition) -> None:
        """A replica of ``tp`` joined the ISR: finish the reassignment if every target is in."""
        if tp not in self.context.partitions_being_reassigned:
            return
        assignment = self.context.partition_full_replica_assignment(tp)
        if await self._is_reassignment_complete(tp, assignment):
            log.info(
                "reassignment_targets_caught_up",
                partition=str(tp),
                targets=list(target_replicas(assignment)),
            )
            await self.on_partition_reassignment(tp, assignment)

    async def _maybe_resume(
        self, should_resume: Callable[[TopicPartition, zkdata.ReplicaAssignment], bool]
    ) -> None:
        for tp in sorted(self.context.partitions_being_reassigned):
            assignment = self.context.partition_full_replica_assignment(tp)
            if should_resume(tp, assignment):
                await self.on_partition_reassignment(tp, assignment)

    # ------------------------------------------------------------------ the phases

    async def on_partition_reassignment(
        self, tp: TopicPartition, reassignment: zkdata.ReplicaAssignment
    ) -> None:
        topic = TopicName(tp.topic)
        self.deletion.mark_topic_ineligible_for_deletion({topic}, REASON_REASSIGNMENT)
        await self._update_current_reassignment(tp, reassignment)
        adding = reassignment.adding_replicas
        if not await self._is_reassignment_complete(tp, reassignment):
            self.ops.trace(
                "event",
                "partition_reassignment_started",
                topic=tp.topic,
                partition=tp.partition,
                replicas=list(reassignment.replicas),
                adding=list(adding),
                removing=list(reassignment.removing_replicas),
            )
            # A1, A2.
            await self._update_leader_epoch_and_send_request(tp, reassignment)
            for replica in adding:
                await self.rsm.handle_state_changes(
                    [PartitionAndReplica(tp, replica)], ReplicaState.NEW
                )
            return
        ctx = self.context
        # B1, B2.
        await self.rsm.handle_state_changes(
            [PartitionAndReplica(tp, r) for r in adding], ReplicaState.ONLINE
        )
        completed = zkdata.ReplicaAssignment(replicas=target_replicas(reassignment))
        ctx.update_partition_full_replica_assignment(tp, completed)
        # B3: a leader from the targets if needed.
        await self._move_reassigned_partition_leader_if_required(tp, completed)
        # B4, B5.
        await self._stop_removed_replicas(tp, reassignment.removing_replicas)
        # B6, B7.
        await self._update_replica_assignment_for_partition(tp, completed)
        await self._remove_partition_from_reassigning_partitions(tp, completed)
        # B8.
        await self.ops.send_update_metadata(sorted(ctx.live_or_shutting_down_broker_ids), [tp])
        leadership = ctx.leadership(tp)
        log.info("partition_reassignment_completed", partition=str(tp), replicas=completed.replicas)
        self.ops.trace(
            "event",
            "partition_reassignment_completed",
            topic=tp.topic,
            partition=tp.partition,
            replicas=list(completed.replicas),
            leader=leadership.leader if leadership is not None else None,
            leader_epoch=leadership.leader_epoch if leadership is not None else None,
        )
        await self.deletion.resume_deletion_for_topics({topic})

    async def _update_current_reassignment(
        self, tp: TopicPartition, reassignment: zkdata.ReplicaAssignment
    ) -> None:
        ctx = self.context
        current = ctx.partition_full_replica_assignment(tp)
        if current != reassignment:
            log.debug("updating_assignment", partition=str(tp), to=reassignment)
            await self._update_replica_assignment_for_partition(tp, reassignment)
            ctx.update_partition_full_replica_assignment(tp, reassignment)
            unneeded = [r for r in current.replicas if r not in reassignment.replicas]
            if unneeded:
                await self._stop_removed_replicas(tp, unneeded)
        ctx.partitions_being_reassigned.add(tp)

    async def _is_reassignment_complete(
        self, tp: TopicPartition, assignment: zkdata.ReplicaAssignment
    ) -> bool:
        if not is_being_reassigned(assignment):
            return True
        state = await kafka_zk.get_partition_state(self.ops.session(), tp)
        return reassignment_complete(assignment, state.state.isr if state is not None else None)

    async def _move_reassigned_partition_leader_if_required(
        self, tp: TopicPartition, assignment: zkdata.ReplicaAssignment
    ) -> None:
        ctx = self.context
        leadership = ctx.leadership(tp)
        leader = leadership.leader if leadership is not None else None
        if leader is None or leader not in assignment.replicas:
            log.info("reassigned_leader_not_in_targets", partition=str(tp), leader=leader)
            await self.psm.handle_state_changes([tp], PartitionState.ONLINE, ReassignElection())
        elif ctx.is_replica_online(leader, tp):
            # Shrink the replication factor: a new leader epoch with the new replicas.
            await self._update_leader_epoch_and_send_request(tp, assignment)
        else:
            log.info("reassigned_leader_dead", partition=str(tp), leader=leader)
            await self.psm.handle_state_changes([tp], PartitionState.ONLINE, ReassignElection())

    async def _stop_removed_replicas(self, tp: TopicPartition, removed: Sequence[BrokerId]) -> None:
        """Offline (out of the ISR, StopReplica delete=false), then deleted (StopReplica
        delete=true; as in Kafka, its answer is not waited for), then forgotten."""
        replicas = [PartitionAndReplica(tp, r) for r in removed]
        if not replicas:
            return
        rsm = self.rsm
        await rsm.handle_state_changes(replicas, ReplicaState.OFFLINE)
        await rsm.handle_state_changes(replicas, ReplicaState.DELETION_STARTED)
        await rsm.handle_state_changes(replicas, ReplicaState.DELETION_SUCCESSFUL)
        await rsm.handle_state_changes(replicas, ReplicaState.NON_EXISTENT)

    async def _update_replica_assignment_for_partition(
        self, tp: TopicPartition, assignment: zkdata.ReplicaAssignment
    ) -> None:
        """Write the topic's full assignment with ``tp``'s replaced (fenced). A topic znode
        that is gone fails the reassignment."""
        ctx = self.context
        topic = TopicName(tp.topic)
        full = dict(ctx.partition_assignments.get(topic, {}))
        full[tp.partition] = assignment
        await kafka_zk.set_topic_assignment_fenced(
            self.ops.session(), ctx.epoch_zk_version, topic, full
        )
        log.info("assignment_updated", partition=str(tp), assignment=assignment)

    async def _update_leader_epoch_and_send_request(
        self, tp: TopicPartition, assignment: zkdata.ReplicaAssignment
    ) -> None:
        """A1 / B3: the next leader epoch, same leader and ISR, so that the leader learns
        the new replica set; LeaderAndIsr to the original replicas, and to the added ones
        with ``isNew``."""
        leadership = await self._update_leader_epoch(tp)
        if leadership is None:
            log.error("leader_epoch_update_failed", partition=str(tp), assignment=assignment)
            return
        origin = origin_replicas(assignment)
        adding = assignment.adding_replicas

        def fill(batch: ControllerBrokerRequestBatch) -> None:
            batch.add_leader_and_isr(origin, tp, leadership, assignment, is_new=False)
            batch.add_leader_and_isr(adding, tp, leadership, assignment, is_new=True)

        await self.ops.send_requests(fill)

    async def _update_leader_epoch(self, tp: TopicPartition) -> Leadership | None:
        """Kafka's ``updateLeaderEpoch``: re-read the state znode, write it back with the
        leader epoch + 1 (conditional; retried on a lost race)."""
        ctx = self.context
        session = self.ops.session()
        while True:
            state = await kafka_zk.get_partition_state(session, tp)
            if state is None:
                raise StateChangeFailedError(
                    f"Cannot update leader epoch for partition {tp} as leaderAndIsr path is "
                    "empty. This could mean we somehow tried to reassign a partition that "
                    "doesn't exist"
                )
            if state.state.controller_epoch > ctx.epoch:
                raise StateChangeFailedError(
                    "Leader and isr path written by another controller. This probably means "
                    f"the current controller with epoch {ctx.epoch} went through a soft "
                    "failure and another controller was elected with epoch "
                    f"{state.state.controller_epoch}. Aborting state change by this controller"
                )
            current = Leadership.from_znode(state).leader_and_isr
            new = current.new_leader_and_isr(current.leader, current.isr)
            written = Leadership(leader_and_isr=new, controller_epoch=ctx.epoch)
            try:
                zk_version = await kafka_zk.update_partition_state(
                    session, ctx.epoch_zk_version, tp, written.to_znode(), new.zk_version
                )
            except BadVersionError:
                continue
            leadership = Leadership(
                leader_and_isr=new.with_zk_version(zk_version), controller_epoch=ctx.epoch
            )
            ctx.put_leadership(tp, leadership)
            self.ops.trace(
                "event",
                "leader_epoch_bumped",
                topic=tp.topic,
                partition=tp.partition,
                leader=leadership.leader,
                leader_epoch=leadership.leader_epoch,
                zk_version=zk_version,
            )
            return leadership

    async def _remove_partition_from_reassigning_partitions(
        self, tp: TopicPartition, assignment: zkdata.ReplicaAssignment
    ) -> None:
        ctx = self.context
        if tp not in ctx.partitions_being_reassigned:
            raise StateChangeFailedError(
                "Cannot remove a reassigning partition because it is not present in memory"
            )
        await self.maybe_remove_from_zk_reassignment(
            lambda other, replicas: other == tp and replicas == assignment.replicas
        )
        ctx.partitions_being_reassigned.discard(tp)

    async def maybe_remove_from_zk_reassignment(
        self, should_remove: Callable[[TopicPartition, tuple[BrokerId, ...]], bool]
    ) -> None:
        """Drop partitions from ``/admin/reassign_partitions``; once none is left, delete it
        and look again (so that the next creation is seen)."""
        session = self.ops.session()
        try:
            pending = await kafka_zk.get_partition_reassignment(session)
        except ZkDataError:
            return
        if pending is None:
            return
        entries = scala_map_entries(
            [(TopicPartition(p.topic, p.partition), p.replicas) for p in pending.partitions]
        )
        removing = [tp for tp, replicas in entries if should_remove(tp, replicas)]
        remaining = [(tp, replicas) for tp, replicas in entries if not should_remove(tp, replicas)]
        log.info("removing_partitions_from_zk_reassignment", partitions=[str(t) for t in removing])
        epoch_zk_version = self.context.epoch_zk_version
        if not remaining:
            await kafka_zk.delete_partition_reassignment_fenced(session, epoch_zk_version)
            self.ops.trace("event", "partition_reassignment_path_deleted")
            self.ops.enqueue(ZkPartitionReassignment())
            return
        if not removing:
            return
        rewritten = zkdata.PartitionReassignment(
            partitions=tuple(
                zkdata.PartitionReplicas(
                    topic=TopicName(tp.topic), partition=tp.partition, replicas=replicas
                )
                for tp, replicas in remaining
            )
        )
        await kafka_zk.set_or_create_partition_reassignment_fenced(
            session, epoch_zk_version, rewritten
        )
