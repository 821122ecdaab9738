"""The replica state machine (Kafka's ``ZkReplicaStateMachine``).

``handle_state_changes`` starts a fresh request batch, handles the replicas grouped by
broker (in broker id order), and flushes the batch. A replica whose current state is not a
valid previous state of the target is refused (logged and traced) and left alone. The side
effects are those of Kafka's ``doHandleStateChanges``: LeaderAndIsr to a new or re-onlined
replica, StopReplica and the ISR shrink (``removeReplicasFromIsr``) for an offline one,
StopReplica(delete) when its deletion starts, and removal from the assignment once it no
longer exists.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import repeat
from operator import itemgetter
from typing import assert_never

import anyio.lowlevel
import msgspec
import structlog

from actors.controller.context import EMPTY_ASSIGNMENT, ControllerContext, remove_replica
from actors.controller.election import remove_replica_from_isr
from actors.controller.errors import StateChangeFailedError
from actors.controller.model import LeaderAndIsr, Leadership, PartitionAndReplica
from actors.controller.request_batch import ControllerBrokerRequestBatch
from actors.controller.state_change_log import StateChangeLogger
from actors.controller.states import (
    REPLICA_VALID_PREVIOUS,
    ReplicaState,
    replica_transition_valid,
)
from actors.zk import kafka_zk
from actors.zk.kafka_zk import ControllerMovedError
from actors.zk.store import StoreSession
from protocol import zkdata
from protocol.control import TopicPartition
from protocol.errors import BadVersionError, NoNodeError, StoreError
from protocol.ids import BrokerId, TopicName

log = structlog.get_logger("kemu.controller.replica_state_machine")

_MACHINE = "replica"


class ReplicaStateMachine:
    def __init__(
        self,
        controller_id: BrokerId,
        context: ControllerContext,
        session: Callable[[], StoreSession],
        batch: ControllerBrokerRequestBatch,
        state_log: StateChangeLogger,
    ) -> None:
        self.controller_id = controller_id
        self.context = context
        self._session = session
        self.batch = batch
        self.state_log = state_log

    # ------------------------------------------------------------------ startup

    async def startup(self) -> None:
        """Kafka's ``startup``: replicas on live brokers Online, others DeletionIneligible; then
        move the online ones to Online (LeaderAndIsr to each) and the others to Offline."""
        online, offline = self.initialize_replica_state()
        await self.handle_state_changes(online, ReplicaState.ONLINE)
        await self.handle_state_changes(offline, ReplicaState.OFFLINE)

    def initialize_replica_state(
        self,
    ) -> tuple[list[PartitionAndReplica], list[PartitionAndReplica]]:
        """Kafka's ``initializeReplicaState``: every replica of every partition Online if
        it is online, else DeletionIneligible. Returns them split so, in partition order:
        what Kafka's ``onlineAndOfflineReplicas`` then finds, asking each replica again."""
        ctx = self.context
        online: list[PartitionAndReplica] = []
        offline: list[PartitionAndReplica] = []
        states = ctx.replica_states  # set directly: 300,000 replicas at 100,000 partitions
        assignment_of = ctx.partition_replica_assignment
        is_online = ctx.is_replica_online
        # With no broker shutting down and no offline log dir, ``is_replica_online`` is
        # whether the broker is live: one test a replica here.
        live = (
            None
            if ctx.shutting_down_broker_ids or ctx.replicas_on_offline_dirs
            else ctx.live_broker_epochs
        )
        for tp in ctx.all_partitions:
            for replica_id in assignment_of(tp):
                replica = PartitionAndReplica(tp, replica_id)
                if replica_id in live if live is not None else is_online(replica_id, tp):
                    states[replica] = ReplicaState.ONLINE
                    online.append(replica)
                else:
                    states[replica] = ReplicaState.DELETION_INELIGIBLE
                    offline.append(replica)
        return online, offline

    # ------------------------------------------------------------------ transitions

    async def handle_state_changes(
        self, replicas: Iterable[PartitionAndReplica], target: ReplicaState
    ) -> None:
        # By replica, then partition: grouped by replica first, each group sorted by its
        # own order (the partition's, the replica being the same). A group keeps the order
        # it was given in (dict keys, which also drop repeats): the context hands replicas
        # over in partition order, and sorting a sorted list is one comparison a replica.
        by_replica: dict[BrokerId, dict[PartitionAndReplica, None]] = {}
        for replica in replicas:
            group = by_replica.get(replica.replica)
            if group is None:
                group = by_replica[replica.replica] = {}
            group[replica] = None
        if not by_replica:
            return
        try:
            self.batch.new_batch()
            for replica_id in sorted(by_replica):
                # Let the channel's senders run between two brokers' replicas: a new
                # controller's first UpdateMetadata, queued before its replica state
                # machine resends LeaderAndIsr for every partition, reaches the brokers
                # then, not once all of them are done (Kafka's send threads run
                # beside its event thread).
                await anyio.lowlevel.checkpoint()
                await self._do_handle_state_changes(
                    replica_id, sorted(by_replica[replica_id]), target
                )
            self.batch.send_requests_to_brokers(self.context.epoch)
        except ControllerMovedError:
            log.warning("controller_moved", target=target.label)
            self.batch.clear()
            raise
        except Exception:
            # Logged as Kafka does; the batch is cleared so the next change can start one.
            log.exception("replica_state_change_error", target=target.label)
            self.batch.clear()

    async def _do_handle_state_changes(
        self, replica_id: BrokerId, replicas: list[PartitionAndReplica], target: ReplicaState
    ) -> None:
        ctx = self.context
        batch = self.batch
        valid = self._valid(replicas, target)
        match target:
            case ReplicaState.NEW:
                for replica, current in valid:
                    tp = replica.topic_partition
                    leadership = ctx.leadership(tp)
                    if leadership is None:
                        self._change_state(replica, target, current)
                    elif leadership.leader == replica_id:
                        self._failed(
                            replica,
                            target,
                            f"Replica {replica_id} for partition {tp} cannot be moved to "
                            "NewReplica state as it is being requested to become leader",
                        )
                    else:
                        batch.add_leader_and_isr(
                            (replica_id,),
                            tp,
                            leadership,
                            ctx.partition_full_replica_assignment(tp),
                            is_new=True,
                        )
                        self._change_state(replica, target, current)
            case ReplicaState.ONLINE:
                # A new controller resends every live replica's LeaderAndIsr through here
                # (300,000 at 100,000 partitions): each lookup made once per replica.
                leadership_of = ctx.leaderships.get
                # Their LeaderAndIsr added together after the loop (one partition each in
                # this broker's group: nothing in the loop changes what they are built of).
                resend: list[tuple[TopicPartition, Leadership]] = []
                # Unless logged or traced, the changes are applied together after the
                # loop (as the Offline pass's below): every valid one is applied.
                recorded = self.state_log.records(target.label)
                for replica, current in valid:
                    tp = replica.topic_partition
                    leadership = leadership_of(tp)
                    if current is ReplicaState.NEW:
                        assignment = ctx.partition_full_replica_assignment(tp)
                        if replica_id not in assignment.replicas:
                            log.error(
                                "adding_replica_not_in_assignment",
                                replica=replica_id,
                                partition=str(tp),
                            )
                            ctx.update_partition_full_replica_assignment(
                                tp,
                                msgspec.structs.replace(
                                    assignment, replicas=(*assignment.replicas, replica_id)
                                ),
                            )
                    elif leadership is not None:
                        resend.append((tp, leadership))
                    if recorded:
                        self._apply(replica, target, current, leadership, known=True)
                batch.resend_leader_and_isr(replica_id, resend)
                if not recorded:
                    self._apply_each(valid, target)
            case ReplicaState.OFFLINE:
                leadership_of = ctx.leaderships.get
                with_info: dict[TopicPartition, tuple[PartitionAndReplica, ReplicaState]] = {}
                without_info: list[tuple[PartitionAndReplica, ReplicaState]] = []
                for replica, current in valid:
                    tp = replica.topic_partition
                    batch.add_stop_replica((replica_id,), tp, delete_partition=False)
                    if leadership_of(tp) is not None:
                        with_info[tp] = (replica, current)
                    else:
                        without_info.append((replica, current))
                updated = await self._remove_replicas_from_isr(replica_id, list(with_info))
                # Unless logged or traced, the changes are applied together after the loop.
                quiet: list[tuple[PartitionAndReplica, ReplicaState]] | None = (
                    None if self.state_log.records(target.label) else []
                )
                # A topic being deleted (phase 1 of its deletion) gets no LeaderAndIsr:
                # neither its assignment nor its queue looked up again per replica.
                deleting = ctx.topics_to_be_deleted
                for tp, leadership in updated.items():
                    if tp.topic not in deleting:
                        assignment = ctx.partition_full_replica_assignment(tp)
                        recipients = [r for r in assignment.replicas if r != replica_id]
                        batch.add_leader_and_isr(
                            recipients, tp, leadership, assignment, is_new=False
                        )
                    # Its state as ``_valid`` found it: only this task changes states, and
                    # the ISR shrink changed none (Kafka reads it again, to log it).
                    replica, current = with_info[tp]
                    if quiet is None:
                        self._apply(replica, target, current, leadership, known=True)
                    else:
                        quiet.append((replica, current))
                if quiet:
                    self._apply_each(quiet, target)
                for replica, current in without_info:
                    batch.add_update_metadata(
                        sorted(ctx.live_or_shutting_down_broker_ids), (replica.topic_partition,)
                    )
                    self._apply(replica, target, current, None, known=True)
            case ReplicaState.DELETION_STARTED:
                self._apply_each(valid, target)
                for replica, _ in valid:
                    batch.add_stop_replica(
                        (replica_id,), replica.topic_partition, delete_partition=True
                    )
            case ReplicaState.DELETION_INELIGIBLE | ReplicaState.DELETION_SUCCESSFUL:
                self._apply_each(valid, target)
            case ReplicaState.NON_EXISTENT:
                # Each replica leaves its partition's assignment (``updatePartitionFull
                # ReplicaAssignment``), the topic's map looked up once per run of replicas
                # of one topic (a completed deletion hands over 30,000 in topic order).
                assignments = ctx.partition_assignments
                topic: TopicName | None = None
                partitions: dict[int, zkdata.ReplicaAssignment] = {}
                for replica, _ in valid:
                    tp = replica.topic_partition
                    if tp.topic != topic:
                        topic = tp.topic
                        partitions = assignments.setdefault(topic, {})
                    partitions[tp.partition] = remove_replica(
                        partitions.get(tp.partition, EMPTY_ASSIGNMENT), replica_id
                    )
                self._apply_each(valid, target)
            case _:
                assert_never(target)

    def _valid(
        self, replicas: Sequence[PartitionAndReplica], target: ReplicaState
    ) -> list[tuple[PartitionAndReplica, ReplicaState]]:
        """The replicas that may move to ``target``, each with its current state (a
        replica without one is NonExistent from now on, as Kafka's
        ``putReplicaStateIfNotExists`` makes it); the others are logged as refused."""
        put_if_absent = self.context.replica_states.setdefault
        allowed = REPLICA_VALID_PREVIOUS[target]
        valid: list[tuple[PartitionAndReplica, ReplicaState]] = []
        for replica in replicas:
            current = put_if_absent(replica, ReplicaState.NON_EXISTENT)
            if current in allowed:
                valid.append((replica, current))
            else:
                self._invalid(replica, current, target)
        return valid

    def _invalid(
        self, replica: PartitionAndReplica, current: ReplicaState, target: ReplicaState
    ) -> None:
        self.state_log.invalid(
            _MACHINE,
            replica.topic_partition,
            replica.replica,
            current.label,
            target.label,
            controller_epoch=self.context.epoch,
            valid_previous=sorted(s.label for s in REPLICA_VALID_PREVIOUS[target]),
        )

    def _change_state(
        self,
        replica: PartitionAndReplica,
        target: ReplicaState,
        current: ReplicaState | None = None,
    ) -> bool:
        """The one place a replica's state changes: validate, apply, trace. NonExistent
        drops the replica's entry. ``current``: the state the replica is in, when
        ``_valid`` has just found it valid for ``target`` (nothing changed it since)."""
        if current is None:
            current = self.context.replica_state(replica)
            if not replica_transition_valid(current, target):
                self._invalid(replica, current, target)
                return False
        self._apply(replica, target, current)
        return True

    def _apply_each(
        self, changes: Sequence[tuple[PartitionAndReplica, ReplicaState]], target: ReplicaState
    ) -> None:
        """``_apply`` of each valid change (replica, current state) to ``target``, in
        order. While no transition to ``target`` is logged or traced (the bench's and a
        quiet cluster's case: a deletion of 1,000 topics x 10 partitions x RF 3 makes
        90,000 such changes here) the states are set in one loop and the transitions'
        trace events counted in one step, which is all ``_apply`` would do for each."""
        if self.state_log.records(target.label):
            for replica, current in changes:
                self._apply(replica, target, current)
            return
        states = self.context.replica_states
        if target is ReplicaState.NON_EXISTENT:
            for replica, _ in changes:
                states.pop(replica, None)
        else:  # in order, as a loop setting each would (a replica met twice: once)
            states.update(zip(map(itemgetter(0), changes), repeat(target)))
        self.state_log.skip_transitions(len(changes))

    def _apply(
        self,
        replica: PartitionAndReplica,
        target: ReplicaState,
        current: ReplicaState,
        leadership: Leadership | None = None,
        *,
        known: bool = False,
    ) -> None:
        """A valid change from ``current`` applied and traced. ``known``: ``leadership``
        is the partition's as the controller context holds it (looked up already),
        else it is looked up if the transition is logged or traced."""
        ctx = self.context
        if target is ReplicaState.NON_EXISTENT:
            ctx.remove_replica_state(replica)
        elif target is not current:  # a failover's resend moves Online replicas to Online
            ctx.replica_states[replica] = target
        leader = leader_epoch = None
        # The leadership only for a transition logged or traced (120,000 in a deletion of
        # 1,000 topics x 10 partitions x RF 3, each otherwise only counted).
        if self.state_log.records(target.label):
            if not known:
                leadership = ctx.leadership(replica.topic_partition)
            if leadership is not None:
                leader, leader_epoch = leadership.leader, leadership.leader_epoch
        self.state_log.transition(
            _MACHINE,
            replica.topic_partition,
            replica.replica,
            current.label,
            target.label,
            controller_epoch=ctx.epoch,
            leader=leader,
            leader_epoch=leader_epoch,
        )

    def _failed(
        self, replica: PartitionAndReplica, target: ReplicaState, error: BaseException | str
    ) -> None:
        self.state_log.failed(
            _MACHINE,
            replica.topic_partition,
            replica.replica,
            self.context.replica_state(replica).label,
            target.label,
            controller_epoch=self.context.epoch,
            error=error,
        )

    # ------------------------------------------------------------------ ISR shrink

    async def _remove_replicas_from_isr(
        self, replica_id: BrokerId, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, Leadership]:
        """Kafka's ``removeReplicasFromIsr``, retrying partitions whose conditional update
        lost a race; returns the new leadership of every partition it handled (also those
        already without it).

        One difference in reads, none in writes: Kafka reads every partition's state
        (``getTopicPartitionStatesRaw``) before each broker's round, so a deletion's phase 1
        (three rounds, one per broker) reads each state three times, twice right after
        writing it itself. Here a partition whose cached state (the controller context's,
        with its zkVersion: the controller is the one writer of state znodes) still has
        ``replica_id`` in its ISR starts from that state; its write stays conditional on
        the cached zkVersion, as Kafka's ``processAlterIsr`` writes on a zkVersion it did
        not read, so a state changed meanwhile fails it with BADVERSION (NONODE if removed)
        and the partition is read and retried as Kafka would. A partition whose cached ISR
        lacks the replica, or that has no cached state, is read first (it may need no
        write: only a read can tell)."""
        results: dict[TopicPartition, Leadership] = {}
        remaining = partitions
        cached = True
        while remaining:
            finished, remaining = await self._do_remove_replicas_from_isr(
                replica_id, remaining, cached=cached
            )
            cached = False  # a retried partition is read again
            for tp, outcome in finished.items():
                if isinstance(outcome, Exception):
                    self._failed(PartitionAndReplica(tp, replica_id), ReplicaState.OFFLINE, outcome)
                else:
                    results[tp] = outcome
        return results

    def _cached_states(
        self, replica_id: BrokerId, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, LeaderAndIsr]:
        """The cached states of ``partitions`` that the ISR shrink may start from without
        a read (see ``_remove_replicas_from_isr``)."""
        ctx = self.context
        cached: dict[TopicPartition, LeaderAndIsr] = {}
        for tp in partitions:
            leadership = ctx.leadership(tp)
            if (
                leadership is not None
                and leadership.controller_epoch <= ctx.epoch
                and replica_id in leadership.leader_and_isr.isr
            ):
                cached[tp] = leadership.leader_and_isr
        return cached

    async def _do_remove_replicas_from_isr(
        self, replica_id: BrokerId, partitions: list[TopicPartition], *, cached: bool
    ) -> tuple[dict[TopicPartition, Leadership | Exception], list[TopicPartition]]:
        ctx = self.context
        session = self._session()
        outcome: dict[TopicPartition, Leadership | Exception] = {}
        own = self._cached_states(replica_id, partitions) if cached else {}
        to_read = [tp for tp in partitions if tp not in own]
        try:  # one pipelined read of every other state (``getTopicPartitionStatesRaw``)
            states = await kafka_zk.get_partition_states(session, to_read) if to_read else {}
        except Exception as exc:
            return dict.fromkeys(partitions, exc), []
        unchanged: dict[TopicPartition, LeaderAndIsr] = {}
        adjusted: dict[TopicPartition, LeaderAndIsr] = {}
        for tp in partitions:
            if tp in own:
                adjusted[tp] = remove_replica_from_isr(own[tp], replica_id)
                continue
            state = states.get(tp)
            if state is None:
                if not ctx.is_topic_queued_for_deletion(tp.topic):
                    outcome[tp] = StateChangeFailedError(
                        f"Failed to change state of replica {replica_id} for partition {tp} "
                        "since the leader and isr path in zookeeper is empty"
                    )
                continue
            if state.state.controller_epoch > ctx.epoch:
                outcome[tp] = StateChangeFailedError(
                    "Leader and isr path written by another controller. This probably means "
                    f"the current controller with epoch {ctx.epoch} went through a soft "
                    "failure and another controller was elected with epoch "
                    f"{state.state.controller_epoch}. Aborting state change by this controller"
                )
                continue
            current = Leadership.from_znode(state).leader_and_isr
            if replica_id in current.isr:
                adjusted[tp] = remove_replica_from_isr(current, replica_id)
            else:
                unchanged[tp] = current
        retry: list[TopicPartition] = []
        written: dict[TopicPartition, LeaderAndIsr] = {}
        # One pipelined batch of conditional writes (``updateLeaderAndIsr``); a failed
        # guard raises ControllerMovedError.
        updates = await kafka_zk.update_partition_states(
            session,
            ctx.epoch_zk_version,
            {
                tp: (
                    Leadership(leader_and_isr=new, controller_epoch=ctx.epoch).to_znode(),
                    new.zk_version,
                )
                for tp, new in adjusted.items()
            },
        )
        for tp, update in updates.items():
            if isinstance(update, BadVersionError) or (
                tp in own and isinstance(update, NoNodeError)
            ):
                retry.append(tp)
            elif isinstance(update, StoreError):
                outcome[tp] = update
            else:
                written[tp] = adjusted[tp].with_zk_version(update)
        for tp in partitions:
            lai = written.get(tp) or unchanged.get(tp)
            if lai is None:
                continue
            leadership = Leadership(leader_and_isr=lai, controller_epoch=ctx.epoch)
            ctx.put_leadership(tp, leadership)
            outcome[tp] = leadership
        return outcome, retry
