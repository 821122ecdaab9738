"""The partition state machine (Kafka's ``ZkPartitionStateMachine``).

``handle_state_changes`` starts a fresh request batch, moves every partition it can to
the target state, and flushes the batch. A partition whose current state is not a valid
previous state of the target is refused (logged and traced) and left alone. The side
effects:

* New -> Online: leader = first live assigned replica, ISR = the live replicas, epoch 0;
  the state znode is created (fenced); LeaderAndIsr(isNew) to the ISR. No live replica,
  or the znode cannot be created: the partition stays New.
* Online/Offline -> Online: election with a strategy (``election``), in a loop that retries
  partitions whose conditional znode update lost a race (BADVERSION).
* -> Offline, -> NonExistent, -> New: state only.

``ControllerMovedError`` always propagates (the controller resigns); other failures are
reported per partition.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import assert_never

import structlog

from actors.controller.context import ControllerContext, target_replicas
from actors.controller.election import (
    ControlledShutdownElection,
    ElectionResult,
    ElectionStrategy,
    OfflineElection,
    PreferredReplicaElection,
    ReassignElection,
    leader_for_controlled_shutdown,
    leader_for_offline,
    leader_for_preferred_replica,
    leader_for_reassign,
    strategy_name,
)
from actors.controller.errors import StateChangeFailedError
from actors.controller.model import LeaderAndIsr, Leadership
from actors.controller.request_batch import ControllerBrokerRequestBatch
from actors.controller.state_change_log import StateChangeLogger
from actors.controller.states import (
    PARTITION_VALID_PREVIOUS,
    PartitionState,
    partition_transition_valid,
)
from actors.zk import kafka_zk
from actors.zk.kafka_zk import ControllerMovedError
from actors.zk.store import StoreSession
from protocol.control import TopicPartition
from protocol.errors import BadVersionError, StoreError
from protocol.ids import BrokerId, TopicName

log = structlog.get_logger("kemu.controller.partition_state_machine")

UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"

ElectionOutcome = LeaderAndIsr | Exception
"""Per partition: the new leader and ISR, or why there is none."""

_MACHINE = "partition"


class PartitionStateMachine:
    def __init__(
        self,
        controller_id: BrokerId,
        context: ControllerContext,
        session: Callable[[], StoreSession],
        batch: ControllerBrokerRequestBatch,
        state_log: StateChangeLogger,
        *,
        unclean_leader_election_enable: bool = False,
    ) -> None:
        self.controller_id = controller_id
        self.context = context
        self._session = session
        self.batch = batch
        self.state_log = state_log
        self.unclean_default = unclean_leader_election_enable

    # ------------------------------------------------------------------ startup

    async def startup(self) -> None:
        """Kafka's ``startup``: New without leadership, Online with a live leader, else Offline;
        then bring New/Offline partitions online."""
        self.initialize_partition_state()
        await self.trigger_online_partition_state_change()

    def initialize_partition_state(self) -> None:
        ctx = self.context
        leadership_of = ctx.leaderships.get  # once per partition: 100,000 at a failover
        is_online = ctx.is_replica_online
        put = ctx.put_partition_state
        for tp in ctx.all_partitions:
            leadership = leadership_of(tp)
            if leadership is None:
                state = PartitionState.NEW
            elif is_online(leadership.leader_and_isr.leader, tp):
                state = PartitionState.ONLINE
            else:
                state = PartitionState.OFFLINE
            put(tp, state)

    async def trigger_online_partition_state_change(self, topic: TopicName | None = None) -> None:
        """Every New or Offline partition (of ``topic``) whose topic is not queued for
        deletion -> Online, with the offline election (unclean only by topic config)."""
        ctx = self.context
        partitions = [
            tp
            for tp in ctx.partitions_in_states((PartitionState.NEW, PartitionState.OFFLINE), topic)
            if not ctx.is_topic_queued_for_deletion(tp.topic)
        ]
        await self.handle_state_changes(partitions, PartitionState.ONLINE, OfflineElection(False))

    # ------------------------------------------------------------------ transitions

    async def handle_state_changes(
        self,
        partitions: Iterable[TopicPartition],
        target: PartitionState,
        strategy: ElectionStrategy | None = None,
    ) -> dict[TopicPartition, ElectionOutcome]:
        """Move ``partitions`` to ``target``; for elections, the outcome per partition."""
        todo = list(dict.fromkeys(partitions))
        if not todo:
            return {}
        try:
            self.batch.new_batch()
            result = await self._do_handle_state_changes(todo, target, strategy)
            self.batch.send_requests_to_brokers(self.context.epoch)
            return result
        except ControllerMovedError:
            log.warning("controller_moved", target=target.label)
            self.batch.clear()
            raise
        except Exception as exc:
            # Kafka logs and reports the failure for every partition. The batch is cleared
            # here so that the next state change can start one (Kafka leaves it dirty).
            log.exception("partition_state_change_error", target=target.label)
            self.batch.clear()
            return dict.fromkeys(todo, exc)

    async def _do_handle_state_changes(
        self,
        partitions: list[TopicPartition],
        target: PartitionState,
        strategy: ElectionStrategy | None,
    ) -> dict[TopicPartition, ElectionOutcome]:
        ctx = self.context
        for tp in partitions:
            ctx.put_partition_state_if_absent(tp, PartitionState.NON_EXISTENT)
        valid = self._valid(partitions, target)
        match target:
            case PartitionState.NEW | PartitionState.OFFLINE | PartitionState.NON_EXISTENT:
                for tp in valid:
                    self._change_state(tp, target)
                return {}
            case PartitionState.ONLINE:
                uninitialized = [
                    tp for tp in valid if ctx.partition_state(tp) is PartitionState.NEW
                ]
                to_elect = [
                    tp
                    for tp in valid
                    if ctx.partition_state(tp) in (PartitionState.OFFLINE, PartitionState.ONLINE)
                ]
                if uninitialized:
                    for tp in await self._initialize_leader_and_isr(uninitialized):
                        self._change_state(tp, PartitionState.ONLINE)
                if not to_elect:
                    return {}
                if strategy is None:
                    raise ValueError("an election strategy is required to move to OnlinePartition")
                results = await self._elect_leaders(to_elect, strategy)
                for tp, outcome in results.items():
                    if isinstance(outcome, LeaderAndIsr):
                        self._change_state(tp, PartitionState.ONLINE)
                return results
            case _:
                assert_never(target)

    def _valid(
        self, partitions: Sequence[TopicPartition], target: PartitionState
    ) -> list[TopicPartition]:
        """Split off (and log) the partitions that cannot move to ``target`` now."""
        valid: list[TopicPartition] = []
        for tp in partitions:
            current = self.context.partition_state(tp)
            if partition_transition_valid(current, target):
                valid.append(tp)
            else:
                self._invalid(tp, current, target)
        return valid

    def _invalid(self, tp: TopicPartition, current: PartitionState, target: PartitionState) -> None:
        """Kafka's IllegalStateException of a transition ``target`` does not allow from
        ``current``, in the state-change log; nothing changes."""
        self.state_log.invalid(
            _MACHINE,
            tp,
            None,
            current.label,
            target.label,
            controller_epoch=self.context.epoch,
            valid_previous=sorted(s.label for s in PARTITION_VALID_PREVIOUS[target]),
        )

    def _change_state(self, tp: TopicPartition, target: PartitionState) -> bool:
        """The one place a partition's state changes: validate, apply, trace."""
        ctx = self.context
        current = ctx.partition_state(tp)
        if not partition_transition_valid(current, target):
            self._invalid(tp, current, target)
            return False
        ctx.put_partition_state(tp, target)
        leadership = ctx.leadership(tp)
        self.state_log.transition(
            _MACHINE,
            tp,
            None,
            current.label,
            target.label,
            controller_epoch=ctx.epoch,
            leader=leadership.leader if leadership is not None else None,
            leader_epoch=leadership.leader_epoch if leadership is not None else None,
        )
        return True

    def _failed(
        self, tp: TopicPartition, target: PartitionState, error: BaseException | str
    ) -> None:
        self.state_log.failed(
            _MACHINE,
            tp,
            None,
            self.context.partition_state(tp).label,
            target.label,
            controller_epoch=self.context.epoch,
            error=error,
        )

    # ------------------------------------------------------------------ New -> Online

    async def _initialize_leader_and_isr(
        self, partitions: list[TopicPartition]
    ) -> list[TopicPartition]:
        """Kafka's ``initializeLeaderAndIsrForPartitions``; returns the partitions whose
        state znode was created."""
        ctx = self.context
        initial: dict[TopicPartition, Leadership] = {}
        for tp in partitions:
            replicas = ctx.partition_replica_assignment(tp)
            live = [r for r in replicas if ctx.is_replica_online(r, tp)]
            if not live:
                self._failed(
                    tp,
                    PartitionState.ONLINE,
                    f"Controller {self.controller_id} epoch {ctx.epoch} encountered error during "
                    f"state change of partition {tp} from New to Online, assigned replicas are "
                    f"[{','.join(map(str, replicas))}], live brokers are "
                    f"[{','.join(map(str, sorted(ctx.live_broker_ids)))}]. No assigned replica "
                    "is alive.",
                )
                continue
            initial[tp] = Leadership(
                leader_and_isr=LeaderAndIsr(leader=live[0], isr=tuple(live)),
                controller_epoch=ctx.epoch,
            )
        if not initial:
            return []
        session = self._session()
        try:
            await kafka_zk.create_partition_paths(session, ctx.epoch_zk_version, initial)
        except ControllerMovedError:
            raise
        except Exception as exc:
            for tp in initial:
                self._failed(tp, PartitionState.ONLINE, exc)
            return []
        errors = await kafka_zk.create_partition_states(
            session,
            ctx.epoch_zk_version,
            {tp: leadership.to_znode() for tp, leadership in initial.items()},
        )
        created: list[TopicPartition] = []
        for tp, leadership in initial.items():
            error = errors[tp]
            if error is not None:
                self._failed(tp, PartitionState.ONLINE, error)
                continue
            ctx.put_leadership(tp, leadership)
            self.batch.add_leader_and_isr(
                leadership.isr,
                tp,
                leadership,
                ctx.partition_full_replica_assignment(tp),
                is_new=True,
            )
            created.append(tp)
        return created

    # ------------------------------------------------------------------ elections

    async def _elect_leaders(
        self, partitions: list[TopicPartition], strategy: ElectionStrategy
    ) -> dict[TopicPartition, ElectionOutcome]:
        """Elect until no partition needs a retry (Kafka's ``electLeaderForPartitions``)."""
        remaining = partitions
        finished: dict[TopicPartition, ElectionOutcome] = {}
        while remaining:
            done, remaining = await self._do_elect_leaders(remaining, strategy)
            for tp, outcome in done.items():
                if isinstance(outcome, Exception):
                    self._failed(tp, PartitionState.ONLINE, outcome)
            finished.update(done)
            if remaining:
                log.info(
                    "retrying_leader_election",
                    strategy=strategy_name(strategy),
                    partitions=[str(tp) for tp in remaining],
                )
        return finished

    async def _do_elect_leaders(
        self, partitions: list[TopicPartition], strategy: ElectionStrategy
    ) -> tuple[dict[TopicPartition, ElectionOutcome], list[TopicPartition]]:
        ctx = self.context
        session = self._session()
        failed: dict[TopicPartition, ElectionOutcome] = {}
        current: list[tuple[TopicPartition, LeaderAndIsr]] = []
        try:  # one pipelined read of every state (``getTopicPartitionStatesRaw``)
            states = await kafka_zk.get_partition_states(session, partitions)
        except Exception as exc:
            return dict.fromkeys(partitions, exc), []
        for tp in partitions:
            state = states.get(tp)
            if state is None:
                failed[tp] = StateChangeFailedError(
                    f"LeaderAndIsr information doesn't exist for partition {tp} in "
                    f"{ctx.partition_state(tp).label} state"
                )
            elif state.state.controller_epoch > ctx.epoch:
                failed[tp] = StateChangeFailedError(
                    f"Aborted leader election for partition {tp} since the LeaderAndIsr path "
                    "was already written by another controller. This probably means that the "
                    f"current controller {self.controller_id} went through a soft failure and "
                    f"another controller was elected with epoch {state.state.controller_epoch}."
                )
            else:
                current.append((tp, Leadership.from_znode(state).leader_and_isr))
        if not current:
            return failed, []

        previous = dict(current)
        results = await self._decide(current, strategy, failed)
        finished: dict[TopicPartition, ElectionOutcome] = {}
        retry: list[TopicPartition] = []
        # One pipelined batch of conditional writes (``updateLeaderAndIsr``); a failed
        # guard raises ControllerMovedError.
        updates = await kafka_zk.update_partition_states(
            session,
            ctx.epoch_zk_version,
            {
                result.partition: (
                    Leadership(
                        leader_and_isr=result.leader_and_isr, controller_epoch=ctx.epoch
                    ).to_znode(),
                    result.leader_and_isr.zk_version,
                )
                for result in results
                if result.leader_and_isr is not None
            },
        )
        for result in results:
            tp = result.partition
            if result.leader_and_isr is None:
                failed[tp] = StateChangeFailedError(
                    f"Failed to elect leader for partition {tp} under strategy "
                    f"{strategy_name(strategy)}"
                )
                continue
            new = result.leader_and_isr
            update = updates[tp]
            if isinstance(update, BadVersionError):
                retry.append(tp)
                continue
            if isinstance(update, StoreError):
                failed[tp] = update
                continue
            zk_version = update
            written = Leadership(
                leader_and_isr=new.with_zk_version(zk_version), controller_epoch=ctx.epoch
            )
            ctx.put_leadership(tp, written)
            self.batch.add_leader_and_isr(
                result.recipients,
                tp,
                written,
                ctx.partition_full_replica_assignment(tp),
                is_new=False,
            )
            finished[tp] = written.leader_and_isr
            before = previous[tp]
            if new.leader not in before.isr:
                # PartitionLeaderElectionAlgorithms.offlinePartitionLeaderElection, its
                # unclean branch: a leader from outside the ISR, which may lack records
                # the ISR had acknowledged (the uncleanLeaderElectionsPerSec meter).
                ctx.unclean_leader_elections += 1
                self.state_log.unclean_election(
                    tp,
                    leader=new.leader,
                    leader_epoch=new.leader_epoch,
                    isr_before=before.isr,
                    controller_epoch=ctx.epoch,
                )
        finished.update(failed)
        return finished, retry

    async def _decide(
        self,
        current: list[tuple[TopicPartition, LeaderAndIsr]],
        strategy: ElectionStrategy,
        failed: dict[TopicPartition, ElectionOutcome],
    ) -> list[ElectionResult]:
        """Gather each partition's snapshot and run the strategy's pure election."""
        ctx = self.context
        match strategy:
            case OfflineElection(allow_unclean=allow_unclean):
                results: list[ElectionResult] = []
                unclean_by_topic: dict[str, bool | Exception] = {}
                for tp, lai in current:
                    online = ctx.online_replicas(tp)
                    unclean = False
                    if not any(r in online for r in lai.isr):
                        if allow_unclean:
                            unclean = True
                        else:
                            decision = unclean_by_topic.get(tp.topic)
                            if decision is None:
                                decision = await self._topic_unclean_enabled(TopicName(tp.topic))
                                unclean_by_topic[tp.topic] = decision
                            if isinstance(decision, Exception):
                                self._failed(tp, PartitionState.ONLINE, decision)
                                results.append(ElectionResult(tp, None, ()))
                                continue
                            unclean = decision
                    results.append(
                        leader_for_offline(
                            tp, ctx.partition_replica_assignment(tp), lai, online, unclean
                        )
                    )
                return results
            case ReassignElection():
                return [
                    leader_for_reassign(
                        tp,
                        target_replicas(ctx.partition_full_replica_assignment(tp)),
                        lai,
                        ctx.online_replicas(tp),
                    )
                    for tp, lai in current
                ]
            case PreferredReplicaElection():
                return [
                    leader_for_preferred_replica(
                        tp, ctx.partition_replica_assignment(tp), lai, ctx.online_replicas(tp)
                    )
                    for tp, lai in current
                ]
            case ControlledShutdownElection():
                return [
                    leader_for_controlled_shutdown(
                        tp,
                        ctx.partition_replica_assignment(tp),
                        lai,
                        ctx.online_replicas(tp, include_shutting_down=True),
                        frozenset(ctx.shutting_down_broker_ids),
                    )
                    for tp, lai in current
                ]
            case _:
                assert_never(strategy)

    async def _topic_unclean_enabled(self, topic: TopicName) -> bool | Exception:
        """``unclean.leader.election.enable`` of the topic (its ``/config/topics`` override,
        else the broker default)."""
        try:
            config = await kafka_zk.get_topic_config(self._session(), topic)
        except Exception as exc:
            return exc
        value = config.get(UNCLEAN_LEADER_ELECTION_ENABLE)
        if value is None:
            return self.unclean_default
        return value.strip().lower() == "true"
