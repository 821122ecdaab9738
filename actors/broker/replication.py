"""A broker's replication, plugged into its ``ReplicaManager`` (its ``ReplicationHooks``):
the follower side (replica fetchers) and the leader's ISR changes (AlterIsr).

* ``make_followers`` hands the partitions now followed here to the fetcher manager, at
  their high watermark (``ReplicaManager.makeFollowers`` → ``addFetcherForPartitions``);
  ``remove_fetchers`` takes them back and returns once no fetcher works on them
  (``removeFetcherForPartitions`` before ``makeLeaders`` and before StopReplica deletes
  logs); ``stop_fetching`` takes them back without waiting (a log dir failure, a
  partition left without leader). All drop the ISR changes still waiting to be sent for
  them (``AlterIsrManager.clearPending``).
* ``follower_fetched``: a follower's fetch may let it join the ISR
  (``Partition.maybeExpandIsr``); the proposal is sent as AlterIsr.
* ``isr_expiration`` runs every ``replica.lag.time.max.ms`` / 2 (Kafka's
  ``isr-expiration`` task): each led partition whose ISR followers stopped catching up
  proposes to shrink it (``Partition.maybeShrinkIsr``).
* ``on_alter_isr_answered``: the controller's answers commit or keep the proposals
  (``LeaderIsr.on_alter_isr_result``); the broker re-checks its parked requests.

The decisions are ``actors.broker.isr``'s; this module only moves them between the
partitions (through the replica manager), the ``AlterIsrManager`` and the
``ReplicaFetcherManager`` actors of the node. ``LogManagerFollowerLog`` is the fetchers'
port to the broker's log manager.

The broker wires it (a handful of lines in its own module): ``await replication.start()``
in ``on_start``, ``replica_manager.hooks = replication``, and in ``receive``, before its
own cases, ``if replication.handle(msg): return None``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final, Protocol

import structlog

from actors.admin import BrokerConfig
from actors.broker.alter_isr_manager import AlterIsrManager
from actors.broker.isr import DEFAULT_REPLICA_LAG_TIME_MAX_MS, IsrUpdate, LeaderIsr
from actors.broker.replica_fetcher import (
    DEFAULT_FETCHER_CONFIG,
    FETCHER_REMOVAL_TIMEOUT_S,
    FetcherConfig,
    FollowerLog,
    ReplicaFetcherManager,
)
from actors.runtime.actor import Actor
from protocol.base import ActorRef, Message
from protocol.control import AlterIsrPartition, AlterIsrPartitionResult, TopicPartition
from protocol.controller import AlterIsrAnswered, ClearAlterIsr, SubmitAlterIsr
from protocol.errors import ErrorCode, KafkaApiError, KemuError, RemoteError
from protocol.ids import BrokerId, TopicName
from protocol.log import (
    AdvanceLogStart,
    AppendRecords,
    AppendToLogs,
    EpochEndOffsetQuery,
    HighWatermark,
    LogOffsets,
    LogQueried,
    LogsAppended,
    LookupOffsets,
    OffsetsFound,
    QueryLog,
    RecordHighWatermarks,
    TruncateLog,
)
from protocol.replication import (
    AddFetcherPartitions,
    InitialFetchState,
    IsrExpiration,
    RemoveFetcherPartitions,
    ResizeFetcherPool,
)

__all__ = ["LogManagerFollowerLog", "Replication"]

log = structlog.get_logger("kemu.broker.replication")


class ReplicatedPartition(Protocol):
    """What this module reads of the broker's ``Partition``."""

    @property
    def tp(self) -> TopicPartition: ...

    @property
    def leader(self) -> BrokerId: ...

    @property
    def leader_epoch(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def isr_state(self) -> LeaderIsr | None: ...


class PartitionOwner(Protocol):
    """What this module asks of the broker's ``ReplicaManager``."""

    @property
    def partitions(self) -> Mapping[TopicPartition, ReplicatedPartition]: ...

    def apply_isr_state(self, tp: TopicPartition, state: LeaderIsr) -> None: ...

    def mark_isr_update(self, outcome: IsrUpdate) -> None:
        """Count an answered ISR change (``IsrChangeListener.markExpand`` /
        ``markShrink`` / ``markFailed``)."""
        ...

    def now_ms(self) -> int:
        """The time follower fetches are stamped with (one source for both sides)."""
        ...


class Replication:
    """The broker's ``ReplicationHooks`` (see the module docstring)."""

    def __init__(
        self,
        broker: Actor,
        broker_id: BrokerId,
        *,
        log_manager: ActorRef,
        fetcher_config: FetcherConfig | None = None,
        replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS,
    ) -> None:
        self.broker = broker
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.fetcher_config = fetcher_config or DEFAULT_FETCHER_CONFIG
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.owner: PartitionOwner | None = None
        self.fetcher_manager: ActorRef | None = None
        self.alter_isr_manager: ActorRef | None = None

    async def start(self, owner: PartitionOwner) -> None:
        """Spawn the fetcher manager and the AlterIsrManager on the broker's node and start
        the ISR-expiration timer."""
        self.owner = owner
        node = self.broker.node
        log_manager = self.log_manager
        self.fetcher_manager = await node.spawn(
            ReplicaFetcherManager(
                self.broker_id,
                follower_log=lambda fetcher: LogManagerFollowerLog(fetcher, log_manager),
                config=self.fetcher_config,
            )
        )
        self.alter_isr_manager = await node.spawn(
            AlterIsrManager(self.broker_id, owner=self.broker.ref)
        )
        self.broker.start_soon(self._expiration_timer)

    async def _expiration_timer(self) -> None:
        period = self.replica_lag_time_max_ms / 2 / 1000
        while True:
            await self.broker.clock.sleep(period)
            self.broker.send_self(IsrExpiration())

    def resize_fetchers(self, config: BrokerConfig) -> None:
        """``ReplicaFetcherManager.resizeThreadPool`` with the broker's new
        ``num.replica.fetchers`` (the manager re-hashes its partitions)."""
        self.fetcher_config = FetcherConfig.of(config)
        if self.fetcher_manager is not None:
            self.broker.tell(
                self.fetcher_manager,
                ResizeFetcherPool(num_fetchers=config.num_replica_fetchers),
            )

    def handle(self, msg: Message) -> bool:
        """The broker's messages for replication; False for any other."""
        match msg:
            case IsrExpiration():
                self.isr_expiration()
                return True
            case AlterIsrAnswered(partitions=results):
                self.on_alter_isr_answered(results)
                return True
            case _:
                return False

    # ------------------------------------------------------------------ the hooks

    def make_followers(self, partitions: Iterable[ReplicatedPartition]) -> None:
        # A partition without a leader has nobody to fetch from (makeFollowers only adds
        # fetchers for a leader the metadata cache knows alive).
        given = list(partitions)
        followers = [p for p in given if p.leader >= 0]
        leaderless = [p.tp for p in given if p.leader < 0]
        if leaderless:
            self.stop_fetching(leaderless)
        states = tuple(
            InitialFetchState(
                partition=p.tp,
                leader=p.leader,
                leader_epoch=p.leader_epoch,
                fetch_offset=p.high_watermark,
            )
            for p in followers
        )
        self._clear_alter_isr(p.tp for p in followers)
        if self.fetcher_manager is not None and states:
            self.broker.tell(self.fetcher_manager, AddFetcherPartitions(partitions=states))

    def stop_fetching(self, partitions: Iterable[TopicPartition]) -> None:
        tps = tuple(sorted(partitions))
        self._clear_alter_isr(tps)
        if self.fetcher_manager is not None and tps:
            self.broker.tell(self.fetcher_manager, RemoveFetcherPartitions(partitions=tps))

    async def remove_fetchers(self, partitions: Iterable[TopicPartition]) -> None:
        tps = tuple(sorted(partitions))
        self._clear_alter_isr(tps)
        if self.fetcher_manager is None or not tps:
            return
        try:
            await self.broker.ask(
                self.fetcher_manager,
                RemoveFetcherPartitions(partitions=tps),
                timeout=FETCHER_REMOVAL_TIMEOUT_S + 1,  # the manager's own wait, and a margin
            )
        except KemuError as exc:  # only a stopping node: its fetchers stop with it
            log.warning("fetcher_removal_unanswered", partitions=len(tps), error=repr(exc))

    def follower_fetched(self, partition: ReplicatedPartition, replica: BrokerId) -> None:
        state = partition.isr_state
        if state is None:
            return
        new, item = state.maybe_expand(replica, partition.high_watermark)
        if item is not None:
            self._propose(partition.tp, new, item)

    # ------------------------------------------------------------------ the timer, answers

    def isr_expiration(self) -> None:
        """``ReplicaManager.maybeShrinkIsr`` over every led partition."""
        owner = self.owner
        if owner is None:
            return
        now_ms = owner.now_ms()
        max_lag_ms = self.replica_lag_time_max_ms
        # ``maybe_shrink`` only decides: the partitions are looked at in any order and the
        # few shrinks applied in partition order, without sorting every hosted partition
        # at every tick. Their changes go to the AlterIsr manager in one message.
        shrinks: list[tuple[TopicPartition, LeaderIsr, AlterIsrPartition]] = []
        for tp, partition in owner.partitions.items():
            state = partition.isr_state
            if state is None:
                continue
            new, item = state.maybe_shrink(partition.log_end_offset, now_ms, max_lag_ms)
            if item is not None:
                shrinks.append((tp, new, item))
        shrinks.sort(key=lambda shrink: shrink[0])
        items = [self._propose(tp, new, item, submit=False) for tp, new, item in shrinks]
        if self.alter_isr_manager is not None and items:
            self.broker.tell(self.alter_isr_manager, SubmitAlterIsr(items=tuple(items)))

    def on_alter_isr_answered(self, results: Iterable[AlterIsrPartitionResult]) -> None:
        owner = self.owner
        if owner is None:
            return
        for result in results:
            tp = result.topic_partition
            partition = owner.partitions.get(tp)
            state = None if partition is None else partition.isr_state
            if state is None or state.pending_isr is None:
                continue  # Kafka ignores an answer to a state it no longer has
            new = state.on_alter_isr_result(result)
            owner.mark_isr_update(_isr_update(state, result, new))
            if new is not state:
                if result.error_code is not ErrorCode.NONE:
                    log.info("alter_isr_refused", partition=str(tp), error=result.error_code.name)
                owner.apply_isr_state(tp, new)

    def _propose(
        self, tp: TopicPartition, new: LeaderIsr, item: AlterIsrPartition, *, submit: bool = True
    ) -> AlterIsrPartition:
        """Apply a proposed ISR change locally (pending) and, when ``submit``, hand it to the
        AlterIsr manager; the change."""
        assert self.owner is not None
        log.info(
            "isr_change_proposed",
            partition=str(tp),
            isr=list(item.new_isr),
            leader_epoch=item.leader_epoch,
        )
        self.broker.trace(
            "event",
            "isr_change_proposed",
            topic=tp.topic,
            partition=tp.partition,
            leader_epoch=item.leader_epoch,
            isr=list(item.new_isr),
            zk_version=item.current_isr_version,
        )
        self.owner.apply_isr_state(tp, new)
        if submit and self.alter_isr_manager is not None:
            self.broker.tell(self.alter_isr_manager, SubmitAlterIsr(items=(item,)))
        return item

    def _clear_alter_isr(self, tps: Iterable[TopicPartition]) -> None:
        cleared = tuple(tps)
        if self.alter_isr_manager is not None and cleared:
            self.broker.tell(self.alter_isr_manager, ClearAlterIsr(partitions=cleared))


FOLLOWER_LOG_TIMEOUT_S: Final = 600.0
"""How long a fetcher waits for its own log manager. Kafka's fetcher thread calls the log
itself and waits as long as the log takes; an ask needs a deadline, and the usual 30 s (a
request's timeout) ran out while the log manager worked through a bulk creation or
deletion, failing the partition with KAFKA_STORAGE_ERROR although no disk had failed."""


class LogManagerFollowerLog(FollowerLog):
    """A fetcher's ``FollowerLog`` over the broker's log manager actor: every call is one
    ask from the fetcher, waiting up to ``FOLLOWER_LOG_TIMEOUT_S``. An error answer
    becomes ``KafkaApiError`` with its code."""

    def __init__(self, fetcher: Actor, log_manager: ActorRef) -> None:
        self.fetcher = fetcher
        self.log_manager = log_manager

    async def _ask(self, msg: Message) -> Message:
        try:
            return await self.fetcher.ask(self.log_manager, msg, timeout=FOLLOWER_LOG_TIMEOUT_S)
        except RemoteError as exc:
            raise KafkaApiError(exc.code, exc.detail) from None
        except KemuError as exc:
            raise KafkaApiError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc)) from None

    async def _query(self, tp: TopicPartition) -> LogQueried:
        reply = await self._ask(QueryLog(topic=TopicName(tp.topic), partition=tp.partition))
        assert isinstance(reply, LogQueried)
        return reply

    async def offsets(self, tp: TopicPartition) -> tuple[int, int]:
        found = await self._query(tp)
        return found.log_start_offset, found.log_end_offset

    async def latest_epoch(self, tp: TopicPartition) -> int | None:
        return (await self._query(tp)).latest_epoch

    async def end_offset_for_epoch(self, tp: TopicPartition, epoch: int) -> tuple[int, int]:
        reply = await self._ask(
            LookupOffsets(
                queries=(
                    EpochEndOffsetQuery(
                        topic=TopicName(tp.topic), partition=tp.partition, leader_epoch=epoch
                    ),
                )
            )
        )
        assert isinstance(reply, OffsetsFound)
        (found,) = reply.results
        if found.error_code is not ErrorCode.NONE:
            raise KafkaApiError(found.error_code, found.error_code.name)
        return found.leader_epoch, found.offset

    async def truncate_to(self, tp: TopicPartition, offset: int) -> tuple[int, int]:
        reply = await self._ask(
            TruncateLog(topic=TopicName(tp.topic), partition=tp.partition, offset=offset)
        )
        return _pair(reply)

    async def truncate_fully_and_start_at(self, tp: TopicPartition, offset: int) -> tuple[int, int]:
        reply = await self._ask(
            TruncateLog(
                topic=TopicName(tp.topic), partition=tp.partition, offset=offset, fully=True
            )
        )
        return _pair(reply)

    async def append_as_follower(self, tp: TopicPartition, records: bytes) -> tuple[int, int]:
        reply = await self._ask(
            AppendToLogs(
                appends=(
                    AppendRecords(
                        topic=TopicName(tp.topic),
                        partition=tp.partition,
                        records=records,
                        leader_epoch=None,
                    ),
                )
            )
        )
        assert isinstance(reply, LogsAppended)
        (outcome,) = reply.results
        if outcome.error_code is not ErrorCode.NONE:
            raise KafkaApiError(outcome.error_code, outcome.error_message)
        if outcome.log_end_offset < 0:  # nothing whole appended
            return await self.offsets(tp)
        return outcome.log_start_offset, outcome.log_end_offset

    async def update_follower_offsets(
        self,
        tp: TopicPartition,
        *,
        high_watermark: int,
        leader_log_start_offset: int,
        log_start_offset: int,
    ) -> int:
        topic = TopicName(tp.topic)
        self.fetcher.tell(
            self.log_manager,
            RecordHighWatermarks(
                high_watermarks=(
                    HighWatermark(
                        topic=topic, partition=tp.partition, high_watermark=high_watermark
                    ),
                )
            ),
        )
        start = max(0, min(leader_log_start_offset, high_watermark))
        if start <= log_start_offset:  # nothing to advance: the high watermark's tell suffices
            return log_start_offset
        reply = await self._ask(
            AdvanceLogStart(
                topic=topic, partition=tp.partition, offset=start, high_watermark=high_watermark
            )
        )
        return _pair(reply)[0]


def _isr_update(proposed: LeaderIsr, result: AlterIsrPartitionResult, new: LeaderIsr) -> IsrUpdate:
    """What ``Partition.handleAlterIsrResponse`` meters for an answer to ``proposed``: an
    error, or a success it ignores (another leader epoch, an older zkVersion), is a failed
    update; a committed change an expand or a shrink, as the pending change was."""
    assert proposed.pending_isr is not None
    if result.error_code is not ErrorCode.NONE or new.pending_isr is not None:
        return IsrUpdate.FAILED
    if len(proposed.pending_isr) > len(proposed.isr):
        return IsrUpdate.EXPAND
    return IsrUpdate.SHRINK


def _pair(reply: Message) -> tuple[int, int]:
    """A log manager's ``LogOffsets`` answer as ``(log start, log end)``."""
    assert isinstance(reply, LogOffsets)
    return reply.log_start_offset, reply.log_end_offset
