"""Preferred (and unclean) replica leader elections: Kafka's ``onReplicaElection``, the
``/admin/preferred_replica_election`` path and the automatic leader rebalance.

* ``ReplicaLeaderElection`` (ZooKeeper-triggered: the partitions listed in
  ``/admin/preferred_replica_election``; or from an ElectLeaders caller): unknown
  partitions answer UNKNOWN_TOPIC_OR_PARTITION, those of topics queued for deletion
  INVALID_TOPIC_EXCEPTION, those already led by their preferred replica
  ELECTION_NOT_NEEDED; the rest go OnlinePartition -> OnlinePartition with the
  PreferredReplica strategy (leader = first assigned replica if live and in the ISR, ISR
  unchanged, next leader epoch); a failed election answers PREFERRED_LEADER_NOT_AVAILABLE.
  A ZooKeeper-triggered election then deletes the znode (whatever the outcome) and looks
  at the path again, which re-arms its watch.
* ``AutoPreferredReplicaLeaderElection`` (the scheduler, first 5 s after failover, then
  every ``leader.imbalance.check.interval.seconds``): for each broker, the partitions whose
  preferred replica it is; if more than ``leader.imbalance.per.broker.percentage`` percent
  of them are led by another broker, elect the preferred replica for those that can have
  it, unless a reassignment is in progress. Topics queued for deletion are left alone.
* Failover step 11: the elections still listed in the znode are finished.

The decision of which partitions to rebalance is ``auto_rebalance_plan``, a pure function
of a snapshot.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import structlog

from actors.controller.context import ControllerContext
from actors.controller.controller_ops import ControllerOps
from actors.controller.election import (
    ElectionStrategy,
    OfflineElection,
    PreferredReplicaElection,
    preferred_replica_leader,
)
from actors.controller.errors import StateChangeFailedError
from actors.controller.events import (
    AutoPreferredReplicaLeaderElection,
    ElectionTrigger,
    ReplicaLeaderElection,
)
from actors.controller.model import LeaderAndIsr
from actors.controller.partition_state_machine import ElectionOutcome, PartitionStateMachine
from actors.controller.scheduler import ControllerScheduler
from actors.controller.states import PartitionState
from actors.controller.topic_deletion import TopicDeletionManager
from actors.zk import kafka_zk
from protocol import zkdata
from protocol.control import NO_LEADER, TopicPartition
from protocol.controller import ElectionType, PartitionElectionResult
from protocol.errors import ErrorCode, ZkDataError
from protocol.ids import BrokerId

log = structlog.get_logger("kemu.controller.leader_election")

AUTO_REBALANCE_TASK = "auto-leader-rebalance-task"
AUTO_REBALANCE_FIRST_DELAY = 5.0
"""Seconds after failover before the first imbalance check (Kafka's fixed 5 s)."""


# ------------------------------------------------------------------ the pure decision


@dataclass(frozen=True, slots=True)
class PartitionSnapshot:
    """What the imbalance check looks at for one partition."""

    assignment: tuple[BrokerId, ...]
    leader: BrokerId | None
    """None: the controller has no leadership information for it."""
    isr: tuple[BrokerId, ...]
    online_replicas: frozenset[BrokerId]


def auto_rebalance_plan(
    partitions: Mapping[TopicPartition, PartitionSnapshot],
    *,
    imbalance_percentage: int,
    reassignment_in_progress: bool,
) -> dict[BrokerId, tuple[TopicPartition, ...]]:
    """Kafka's ``checkAndTriggerAutoLeaderRebalance``: ``partitions`` (those of topics not
    queued for deletion) grouped by preferred replica; for each preferred broker whose
    share of partitions led by someone else is above ``imbalance_percentage`` percent, the
    partitions to elect: led by someone else, and whose preferred replica is live and in
    the ISR (none while a reassignment is in progress)."""
    by_preferred: dict[BrokerId, list[TopicPartition]] = {}
    for tp in sorted(partitions):
        snapshot = partitions[tp]
        if snapshot.assignment:
            by_preferred.setdefault(snapshot.assignment[0], []).append(tp)
    plan: dict[BrokerId, tuple[TopicPartition, ...]] = {}
    for broker in sorted(by_preferred):
        owned = by_preferred[broker]
        not_preferred = [
            tp
            for tp in owned
            if partitions[tp].leader is not None and partitions[tp].leader != broker
        ]
        ratio = len(not_preferred) / len(owned)
        if ratio <= imbalance_percentage / 100:
            continue
        plan[broker] = tuple(
            tp
            for tp in not_preferred
            if not reassignment_in_progress
            and preferred_replica_leader(
                partitions[tp].assignment, partitions[tp].isr, partitions[tp].online_replicas
            )
            is not None
        )
    return plan


# ------------------------------------------------------------------ the elections


class LeaderElections:
    """The controller's replica leader elections; runs on its event task only."""

    def __init__(
        self,
        context: ControllerContext,
        partition_state_machine: PartitionStateMachine,
        deletion: TopicDeletionManager,
        scheduler: ControllerScheduler,
        ops: ControllerOps,
        *,
        imbalance_check_interval: float,
        imbalance_percentage: int,
    ) -> None:
        self.context = context
        self.psm = partition_state_machine
        self.deletion = deletion
        self.scheduler = scheduler
        self.ops = ops
        self.imbalance_check_interval = imbalance_check_interval
        self.imbalance_percentage = imbalance_percentage

    # ------------------------------------------------------------------ ReplicaLeaderElection

    async def process_replica_leader_election(
        self, event: ReplicaLeaderElection, *, active: bool
    ) -> None:
        if not active:
            event.preempt()  # every partition asked for: NOT_CONTROLLER
            return
        if event.trigger is not ElectionTrigger.ADMIN_CLIENT and not await self.ops.watch_existence(
            zkdata.PREFERRED_REPLICA_ELECTION_PATH
        ):
            return
        partitions = (
            set(event.partitions)
            if event.partitions is not None
            else await self._zk_preferred_replica_election()
        )
        ctx = self.context
        known = {tp for tp in partitions if ctx.partition_replica_assignment(tp)}
        unknown = partitions - known
        for tp in sorted(unknown):
            log.info("skipping_election_of_unknown_partition", partition=str(tp))
        being_deleted = {tp for tp in known if self.deletion.is_topic_queued_for_deletion(tp.topic)}
        if being_deleted:
            log.warning(
                "skipping_election_of_topics_being_deleted",
                partitions=[str(tp) for tp in sorted(being_deleted)],
            )
        live = known - being_deleted
        electable = {tp for tp in live if self._needs_election(tp, event.election_type)}
        outcomes = await self.on_replica_election(electable, event.election_type, event.trigger)
        results = [self._result(tp, outcomes[tp], event.election_type) for tp in sorted(outcomes)]
        results += [
            PartitionElectionResult(
                partition=tp,
                error_code=ErrorCode.ELECTION_NOT_NEEDED,
                # ApiError(Errors.ELECTION_NOT_NEEDED): the error's own message.
                message="Leader election not needed for topic partition.",
            )
            for tp in sorted(live - electable)
        ]
        results += [
            PartitionElectionResult(
                partition=tp,
                error_code=ErrorCode.INVALID_TOPIC_EXCEPTION,
                message="The topic is being deleted",
            )
            for tp in sorted(being_deleted)
        ]
        results += [
            PartitionElectionResult(
                partition=tp,
                error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                message="The partition does not exist.",
            )
            for tp in sorted(unknown)
        ]
        if event.on_result is not None:
            event.on_result(tuple(sorted(results, key=lambda r: r.partition)))

    def _needs_election(self, tp: TopicPartition, election_type: ElectionType) -> bool:
        leadership = self.context.leadership(tp)
        leader = leadership.leader if leadership is not None else NO_LEADER
        if election_type is ElectionType.PREFERRED:
            return leader != self.context.partition_replica_assignment(tp)[0]
        return leader == NO_LEADER or leader not in self.context.live_broker_ids

    @staticmethod
    def _result(
        tp: TopicPartition, outcome: ElectionOutcome, election_type: ElectionType
    ) -> PartitionElectionResult:
        if isinstance(outcome, LeaderAndIsr):
            return PartitionElectionResult(partition=tp, leader=outcome.leader)
        if isinstance(outcome, StateChangeFailedError):
            code = (
                ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
                if election_type is ElectionType.PREFERRED
                else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
            )
            return PartitionElectionResult(partition=tp, error_code=code, message=str(outcome))
        return PartitionElectionResult(
            partition=tp, error_code=ErrorCode.UNKNOWN_SERVER_ERROR, message=str(outcome)
        )

    async def _zk_preferred_replica_election(self) -> set[TopicPartition]:
        try:
            return set(await kafka_zk.get_preferred_replica_election(self.ops.session()))
        except ZkDataError as exc:
            log.warning("ignoring_invalid_preferred_replica_election", error=str(exc))
            return set()

    async def on_replica_election(
        self,
        partitions: Iterable[TopicPartition],
        election_type: ElectionType,
        trigger: ElectionTrigger,
    ) -> dict[TopicPartition, ElectionOutcome]:
        """Elect ``partitions`` (sorted) with the type's strategy. Unless an ElectLeaders
        caller asked, the outcome is only logged, and a ZooKeeper-triggered election's
        znode is removed afterwards, whatever happened."""
        todo = sorted(set(partitions))
        log.info(
            "starting_replica_leader_election",
            election_type=election_type.name,
            trigger=trigger.value,
            partitions=[str(tp) for tp in todo],
        )
        strategy: ElectionStrategy = (
            PreferredReplicaElection()
            if election_type is ElectionType.PREFERRED
            # Unclean only when an admin client asked for it.
            else OfflineElection(allow_unclean=trigger is ElectionTrigger.ADMIN_CLIENT)
        )
        try:
            outcomes = await self.psm.handle_state_changes(todo, PartitionState.ONLINE, strategy)
        except Exception:
            if trigger is not ElectionTrigger.ADMIN_CLIENT:
                await self._remove_from_preferred_replica_election(todo, trigger)
            raise
        if trigger is not ElectionTrigger.ADMIN_CLIENT:
            for tp, outcome in sorted(outcomes.items()):
                if isinstance(outcome, Exception):
                    log.error(
                        "replica_leader_election_failed",
                        partition=str(tp),
                        election_type=election_type.name,
                        error=str(outcome),
                    )
            await self._remove_from_preferred_replica_election(todo, trigger)
        return outcomes

    async def _remove_from_preferred_replica_election(
        self, partitions: Sequence[TopicPartition], trigger: ElectionTrigger
    ) -> None:
        ctx = self.context
        leaders: dict[str, int | None] = {}
        for tp in partitions:
            leadership = ctx.leadership(tp)
            replicas = ctx.partition_replica_assignment(tp)
            leader = leadership.leader if leadership is not None else None
            leaders[str(tp)] = leader
            if replicas and leader == replicas[0]:
                log.info("preferred_replica_election_completed", partition=str(tp), leader=leader)
            else:
                log.warning(
                    "preferred_replica_election_not_completed",
                    partition=str(tp),
                    preferred=replicas[0] if replicas else None,
                    leader=leader,
                )
        self.ops.trace(
            "event",
            "preferred_replica_election_done",
            trigger=trigger.value,
            partitions=sorted(leaders),
            leaders=[leaders[p] for p in sorted(leaders)],
        )
        if trigger is ElectionTrigger.AUTO:
            return
        await kafka_zk.delete_preferred_replica_election_fenced(
            self.ops.session(), ctx.epoch_zk_version
        )
        # Look at the path again: re-arms the watch for the next election.
        self.ops.enqueue(ReplicaLeaderElection())

    # ------------------------------------------------------------------ failover step 11

    async def resume_pending_preferred_replica_elections(self) -> None:
        """The elections still listed in the znode, minus those done or of deleted topics
        and those of topics queued for deletion; the znode is removed either way."""
        ctx = self.context
        listed = await self._zk_preferred_replica_election()
        done = set()
        for tp in listed:
            replicas = ctx.partition_replica_assignment(tp)
            leadership = ctx.leadership(tp)
            if not replicas or (leadership is not None and leadership.leader == replicas[0]):
                done.add(tp)
        pending = listed - done
        skipped = {tp for tp in pending if self.deletion.is_topic_queued_for_deletion(tp.topic)}
        log.info(
            "pending_preferred_replica_elections",
            listed=[str(tp) for tp in sorted(listed)],
            completed=[str(tp) for tp in sorted(done)],
            skipped_for_deletion=[str(tp) for tp in sorted(skipped)],
        )
        await self.on_replica_election(
            pending - skipped, ElectionType.PREFERRED, ElectionTrigger.ZK
        )

    # ------------------------------------------------------------------ auto rebalance

    def schedule_auto_rebalance(self, delay: float) -> None:
        self.scheduler.schedule(
            AUTO_REBALANCE_TASK,
            delay,
            lambda: self.ops.enqueue(AutoPreferredReplicaLeaderElection()),
        )

    async def process_auto_preferred_replica_leader_election(self, *, active: bool) -> None:
        if not active:
            return
        try:
            await self.check_and_trigger_auto_leader_rebalance()
        finally:
            self.schedule_auto_rebalance(self.imbalance_check_interval)

    def snapshot(self) -> dict[TopicPartition, PartitionSnapshot]:
        """The imbalance check's view: every partition of a topic not queued for deletion."""
        ctx = self.context
        out: dict[TopicPartition, PartitionSnapshot] = {}
        for tp in ctx.all_partitions:
            if (
                self.deletion.is_topic_queued_for_deletion(tp.topic)
                or tp.topic not in ctx.all_topics
            ):
                continue
            leadership = ctx.leadership(tp)
            out[tp] = PartitionSnapshot(
                assignment=ctx.partition_replica_assignment(tp),
                leader=leadership.leader if leadership is not None else None,
                isr=leadership.isr if leadership is not None else (),
                online_replicas=ctx.online_replicas(tp),
            )
        return out

    async def check_and_trigger_auto_leader_rebalance(self) -> None:
        plan = auto_rebalance_plan(
            self.snapshot(),
            imbalance_percentage=self.imbalance_percentage,
            reassignment_in_progress=bool(self.context.partitions_being_reassigned),
        )
        self.ops.trace(
            "event",
            "leader_imbalance_checked",
            brokers=sorted(plan),
            partitions=[str(tp) for broker in sorted(plan) for tp in plan[broker]],
        )
        for broker in sorted(plan):
            await self.on_replica_election(
                plan[broker], ElectionType.PREFERRED, ElectionTrigger.AUTO
            )
