"""A broker's replicas: Kafka's ``ReplicaManager``.

The controller's requests: LeaderAndIsr (``becomeLeaderOrFollower``: create the logs of
the partitions this broker is now a replica of, and make it their leader or follower,
``actors.broker.partition``), UpdateMetadata (``maybeUpdateMetadataCache``) and
StopReplica (``stopReplicas``: delete the logs of deleted partitions). A log directory
that fails takes its partitions offline (``handleLogDirFailure``). Each first passes
the fencing Kafka applies to the three: a request for an older incarnation of this broker
is STALE_BROKER_EPOCH (``KafkaApis.isBrokerEpochStale``), one from an older controller
STALE_CONTROLLER_EPOCH.

The data plane, as the leader serves it (``appendRecords``, ``fetchMessages``,
``fetchOffsetForTimestamp``, ``lastOffsetForLeaderEpoch``): each request is one round trip
to the log manager with every partition in it, then the partitions' high watermarks
move and the delayed requests they wake are answered (``actors.broker.delayed_data``).
Followers' fetchers, and the ISR changes a leader sends as AlterIsr, plug in through
``ReplicationHooks``.

A component of the ``Broker`` actor, not an actor: its state (the controller epoch, the
partitions, the delayed requests) is the broker's, touched only on its task.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

import anyio.lowlevel
import structlog

from actors.admin import is_internal
from actors.broker.delayed_data import DataPurgatory, DelayedFetch, DelayedProduce, timed_out
from actors.broker.isr import IsrUpdate, LeaderIsr
from actors.broker.metadata_cache import MetadataUpdate
from actors.broker.partition import Partition
from actors.runtime.actor import Context
from actors.zk import kafka_zk
from protocol.base import Message
from protocol.broker import CompleteDelayedData
from protocol.control import (
    EPOCH_DURING_DELETE,
    NO_EPOCH,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    PartitionError,
    StopReplicaRequest,
    StopReplicaResponse,
    TopicPartition,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from protocol.errors import (
    ErrorCode,
    RemoteError,
    StoreError,
)
from protocol.ids import BrokerId, ControllerEpoch, TopicName
from protocol.kafka_api import (
    DescribeLogDirsPartition,
    DescribeLogDirsRequestData,
    DescribeLogDirsResponseData,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)
from protocol.kafka_data import (
    CONSUMER_REPLICA_ID,
    DEBUG_REPLICA_ID,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    FetchPartitionData,
    FetchRequestData,
    FetchResponseData,
    FetchTopicResponse,
    IsolationLevel,
    ListOffsetsPartitionResponse,
    ListOffsetsRequestData,
    ListOffsetsResponseData,
    ListOffsetsTopicResponse,
    OffsetForLeaderEpochRequestData,
    OffsetForLeaderEpochResponseData,
    OffsetForLeaderPartitionResult,
    OffsetForLeaderTopicResult,
    ProducePartitionResponse,
    ProduceRequestData,
    ProduceResponseData,
    ProduceTopicResponse,
    RecordError,
)
from protocol.log import (
    AppendOutcome,
    AppendRecords,
    AppendToLogs,
    DeleteLog,
    DeleteLogs,
    DescribeLogDirs,
    EpochEndOffsetQuery,
    GetOrCreateLog,
    GetOrCreateLogs,
    HighWatermark,
    LogConfigOverrides,
    LogDirsDescribed,
    LogsAppended,
    LogsCreated,
    LogsDeleted,
    LogsRead,
    LogStart,
    LookupOffsets,
    OffsetFound,
    OffsetQuery,
    OffsetsBeforeQuery,
    OffsetsFound,
    OffsetTimestampQuery,
    ReadFromLogs,
    ReadRecords,
    RecordHighWatermarks,
)

REPLICA_MANAGER_GAUGES: Final = (
    "LeaderCount",
    "PartitionCount",
    "OfflineReplicaCount",
    "UnderReplicatedPartitions",
    "UnderMinIsrPartitionCount",
    "AtMinIsrPartitionCount",
)
"""The ``ReplicaManager`` gauges a broker keeps (``ReplicaManager.metrics``), by Kafka's names."""

state_change_log = structlog.get_logger("kemu.state_change")  # Kafka's state.change.logger

if TYPE_CHECKING:
    from actors.broker.broker import Broker


MIN_INSYNC_REPLICAS = "min.insync.replicas"
COMPRESSION_TYPE = "compression.type"
MESSAGE_DOWNCONVERSION_ENABLE = "message.downconversion.enable"
_PARTITIONS_PER_CHECKPOINT: Final = 1000
"""Partitions of a LeaderAndIsr made leader or follower between two yields to the loop."""
LOG_CREATION_TIMEOUT_S: Final = 600.0
"""How long a LeaderAndIsr waits for its logs from the broker's own log manager. Kafka's
``ReplicaManager.becomeLeaderOrFollower`` creates them in the request handler thread with
no deadline; an ask needs one, and the usual 30 s (a request's timeout) ran out on a busy
machine while 100 brokers of one process created 300,000 logs, failing every broker's
LeaderAndIsr after its logs were made."""
FETCH_MAX_BYTES: Final = 57_671_680
"""``fetch.max.bytes``: the most one Fetch answer holds (with one batch past it)."""
LOG_CONFIGS: Final = frozenset(
    {
        "segment.bytes",
        "segment.ms",
        "segment.jitter.ms",
        "segment.index.bytes",
        "index.interval.bytes",
        "max.message.bytes",
        "message.timestamp.type",
        "message.timestamp.difference.max.ms",
        "retention.ms",
        "retention.bytes",
        "file.delete.delay.ms",
        "cleanup.policy",
        "delete.retention.ms",
        "min.compaction.lag.ms",
        "max.compaction.lag.ms",
        "min.cleanable.dirty.ratio",
    }
)
"""The topic configs a partition log reads (``LogConfigOverrides``)."""


class ReplicationHooks(Protocol):
    """Where the follower side and the ISR changes plug in: Kafka's
    ``ReplicaFetcherManager`` and ``Partition.maybeExpandIsr``."""

    def make_followers(self, partitions: list[Partition]) -> None:
        """These partitions are now followed here (``addFetcherForPartitions``, after
        ``makeFollowers``): fetch from their leaders."""

    def stop_fetching(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching these partitions (``removeFetcherForPartitions``) without waiting
        for the fetchers: their logs are offline, or they have no leader."""

    async def remove_fetchers(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching these partitions (``removeFetcherForPartitions``), returning once
        no fetcher works on them: this broker is about to lead them, or to stop
        replicating them (and perhaps delete their logs)."""

    def follower_fetched(self, partition: Partition, replica: BrokerId) -> None:
        """A follower's fetch updated its state on this leader (``maybeExpandIsr``)."""


class NoReplication:
    """No follower side: LeaderAndIsr makes followers that never fetch."""

    def make_followers(self, partitions: list[Partition]) -> None:
        return None

    def stop_fetching(self, partitions: Iterable[TopicPartition]) -> None:
        return None

    async def remove_fetchers(self, partitions: Iterable[TopicPartition]) -> None:
        return None

    def follower_fetched(self, partition: Partition, replica: BrokerId) -> None:
        return None


@dataclass(frozen=True, slots=True)
class TopicSettings:
    """What the data plane reads of a topic's configs: ``min.insync.replicas``, and for
    old fetch versions ``compression.type`` and ``message.downconversion.enable``."""

    min_insync_replicas: int
    compression_type: str = "producer"
    message_downconversion_enable: bool = True


class ReplicaManager:
    """The replicas of ``broker``, as the controller has told it about them."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self.controller_epoch = ControllerEpoch(0)  # highest seen in a control request
        self.leader_epochs: dict[TopicPartition, int] = {}  # of each partition hosted here
        self.partitions: dict[TopicPartition, Partition] = {}
        self.log_dirs: dict[TopicPartition, str] = {}  # where each hosted partition's log is
        self.offline: set[TopicPartition] = set()  # HostedPartition.Offline
        self.delayed = DataPurgatory(broker)
        self.hooks: ReplicationHooks = NoReplication()
        self.replica_lag_time_max_ms = broker.config.replica_lag_time_max_ms
        self._topic_settings: dict[TopicName, TopicSettings] = {}
        self.isr_updates: dict[IsrUpdate, int] = dict.fromkeys(IsrUpdate, 0)
        """The counts of Kafka's meters IsrExpandsPerSec, IsrShrinksPerSec and
        FailedIsrUpdatesPerSec."""

    def _stale(self, controller_epoch: int, broker_epoch: int) -> ErrorCode | None:
        """The fencing shared by the three control requests: an older incarnation of this
        broker (``KafkaApis.isBrokerEpochStale``; -1 means the sender does not know),
        then an older controller; a newer controller epoch is remembered."""
        if broker_epoch != -1 and broker_epoch < self._broker.broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH
        if controller_epoch < self.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH
        self.controller_epoch = ControllerEpoch(controller_epoch)
        return None

    async def become_leader_or_follower(self, req: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        """Create the logs of the partitions of ``req`` this broker is a replica of. A
        partition whose log is in an offline directory is KAFKA_STORAGE_ERROR; one whose
        leader epoch is not newer than the one known here is ignored
        (STALE_CONTROLLER_EPOCH, as Kafka answers it), one not assigned to this broker is
        UNKNOWN_TOPIC_OR_PARTITION."""
        stale = self._stale(req.controller_epoch, req.broker_epoch)
        state_change_log.info(
            "handling_leader_and_isr",
            controller_id=req.controller_id,
            controller_epoch=req.controller_epoch,
            partitions=len(req.partition_states),
        )
        if stale is not None:
            state_change_log.warning(
                "ignoring_leader_and_isr", controller_id=req.controller_id, error=stale.name
            )
            self._broker.trace(
                "event", "stale_request_rejected", request="LeaderAndIsr", error=stale.name
            )
            return LeaderAndIsrResponse(error_code=stale)
        codes: dict[TopicPartition, ErrorCode] = {}
        tps: list[TopicPartition] = []  # each state's partition, in request order
        accepted: list[LeaderAndIsrPartitionState] = []
        accepted_tps: list[TopicPartition] = []  # alike, each accepted state's partition
        for state in req.partition_states:
            tp = TopicPartition(state.topic, state.partition)
            tps.append(tp)
            if tp in self.offline:  # HostedPartition.Offline, whatever the epoch
                codes[tp] = ErrorCode.KAFKA_STORAGE_ERROR
            elif state.leader_epoch <= self.leader_epochs.get(tp, -1):
                codes[tp] = ErrorCode.STALE_CONTROLLER_EPOCH  # ignored, as Kafka does
            elif self._broker.broker_id not in state.replicas:
                codes[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                accepted.append(state)
                accepted_tps.append(tp)
        if accepted:
            await self._read_topic_settings({s.topic for s in accepted})
            local = self._broker.broker_id
            # ``makeLeaders`` removes the fetchers before ``Partition.makeLeader``: none
            # may append as follower to a log that starts the new leader epoch below.
            partitions = self.partitions
            to_lead = [
                tp
                for s, tp in zip(accepted, accepted_tps, strict=True)
                if s.leader == local and tp in partitions and not partitions[tp].is_leader
            ]
            if to_lead:
                await self.hooks.remove_fetchers(to_lead)
            batch = GetOrCreateLogs(
                logs=tuple(
                    GetOrCreateLog(
                        topic=s.topic,
                        partition=s.partition,
                        is_new=s.is_new,
                        leader_epoch=s.leader_epoch if s.leader == local else None,
                    )
                    for s in accepted
                )
            )
            reply = await self._broker.ask(
                self._broker.log_manager_ref, batch, timeout=LOG_CREATION_TIMEOUT_S
            )
            assert isinstance(reply, LogsCreated)
            now_ms = self.now_ms()
            leaders: list[TopicPartition] = []
            followers: list[Partition] = []
            results = zip(reply.results, accepted, accepted_tps, strict=True)
            for i, (outcome, state, tp) in enumerate(results):
                if i and i % _PARTITIONS_PER_CHECKPOINT == 0:
                    await anyio.lowlevel.checkpoint()  # a yield only: no virtual time passes
                codes[tp] = outcome.error_code
                if outcome.error_code is not ErrorCode.NONE:
                    continue
                self.leader_epochs[tp] = state.leader_epoch
                if outcome.log_dir is not None:
                    self.log_dirs[tp] = outcome.log_dir
                partition = self.partitions.get(tp)
                if partition is None:
                    partition = Partition(
                        tp=tp,
                        local=local,
                        leader=state.leader,
                        leader_epoch=state.leader_epoch,
                        partition_epoch=state.zk_version,
                        replicas=tuple(state.replicas),
                    )
                    self.partitions[tp] = partition
                if state.leader == local:
                    partition.make_leader(
                        state,
                        log_start_offset=outcome.log_start_offset,
                        log_end_offset=outcome.log_end_offset,
                        high_watermark=outcome.high_watermark,
                        now_ms=now_ms,
                    )
                    leaders.append(tp)
                else:
                    partition.make_follower(
                        state,
                        log_start_offset=outcome.log_start_offset,
                        log_end_offset=outcome.log_end_offset,
                        high_watermark=outcome.high_watermark,
                    )
                    followers.append(partition)
            self._became(leaders, followers)
            state_change_log.info(
                "finished_leader_and_isr",
                controller_id=req.controller_id,
                leaders=len(leaders),
                followers=len(followers),
            )
        errors = _partition_errors(codes, req.partition_states, tps)
        return LeaderAndIsrResponse(error_code=ErrorCode.NONE, partition_errors=errors)

    def maybe_update_metadata_cache(
        self, req: UpdateMetadataRequest
    ) -> tuple[UpdateMetadataResponse, MetadataUpdate]:
        """Apply ``req`` to the broker's metadata cache unless it is fenced; the response
        and what it changed (the topics whose delayed admin operations to check, the
        partitions deleted)."""
        stale = self._stale(req.controller_epoch, req.broker_epoch)
        if stale is not None:
            self._broker.trace(
                "event", "stale_request_rejected", request="UpdateMetadata", error=stale.name
            )
            return UpdateMetadataResponse(error_code=stale), MetadataUpdate(set(), ())
        update = self._broker.cache.update(req)
        return UpdateMetadataResponse(error_code=ErrorCode.NONE), update

    async def stop_replicas(self, req: StopReplicaRequest) -> StopReplicaResponse:
        """Stop the replicas of ``req``, deleting the logs of those marked for deletion
        (removed after the broker's ``log.segment.delete.delay.ms``: no store read here), as
        ``stopReplicas`` sorts them: a partition whose log is in an offline directory is
        KAFKA_STORAGE_ERROR; a hosted one is stopped when the request's leader epoch is
        ``EPOCH_DURING_DELETE``, ``NO_EPOCH`` or newer than the one known here, and
        FENCED_LEADER_EPOCH otherwise, an equal epoch included; one not hosted here is
        stopped (its log, if any, deleted)."""
        stale = self._stale(req.controller_epoch, req.broker_epoch)
        state_change_log.info(
            "handling_stop_replica",
            controller_id=req.controller_id,
            controller_epoch=req.controller_epoch,
            partitions=len(req.partitions),
        )
        if stale is not None:
            return StopReplicaResponse(error_code=stale)
        codes: dict[TopicPartition, ErrorCode] = {}
        stopped: list[TopicPartition] = []
        for p in req.partitions:
            tp = TopicPartition(p.topic, p.partition)
            current = self.leader_epochs.get(tp)
            if tp in self.offline:
                codes[tp] = ErrorCode.KAFKA_STORAGE_ERROR
            elif current is not None and not (
                p.leader_epoch in (EPOCH_DURING_DELETE, NO_EPOCH) or p.leader_epoch > current
            ):
                codes[tp] = ErrorCode.FENCED_LEADER_EPOCH
            else:
                codes[tp] = ErrorCode.NONE
                stopped.append(tp)
        # First the fetchers of every stopped partition let go of them (waited for: none
        # may be appending to a log deleted below), then the deleted partitions leave the
        # partition map, then their logs go in one batch (one checkpoint per log dir), as
        # ``stopReplicas`` orders it.
        if stopped:
            await self.hooks.remove_fetchers(stopped)
        deletions: list[DeleteLog] = []
        for p in req.partitions:
            tp = TopicPartition(p.topic, p.partition)
            if p.delete_partition and codes[tp] is ErrorCode.NONE:
                self.leader_epochs.pop(tp, None)
                self.partitions.pop(tp, None)
                self.log_dirs.pop(tp, None)
                deletions.append(DeleteLog(topic=p.topic, partition=p.partition))
        if deletions:
            codes.update(await self._delete_logs(deletions))
        if stopped:
            await self._complete_delayed(stopped)  # force-completed: NOT_LEADER_OR_FOLLOWER
        errors = _partition_errors(codes, req.partitions)
        for topic in {TopicName(p.topic) for p in req.partitions if p.delete_partition}:
            self._topic_settings.pop(topic, None)
        return StopReplicaResponse(error_code=ErrorCode.NONE, partition_errors=errors)

    async def _delete_logs(self, deletions: list[DeleteLog]) -> dict[TopicPartition, ErrorCode]:
        """``LogManager.asyncDelete`` of a set: the error of each log that could not be
        deleted (a failure of the whole ask counts against every one of them)."""
        try:
            reply = await self._broker.ask(
                self._broker.log_manager_ref, DeleteLogs(logs=tuple(deletions))
            )
        except RemoteError as exc:
            return {d.topic_partition: exc.code for d in deletions}
        assert isinstance(reply, LogsDeleted)
        return {
            TopicPartition(outcome.topic, outcome.partition): outcome.error_code
            for outcome in reply.results
            if outcome.error_code is not ErrorCode.NONE
        }

    async def describe_log_dirs(
        self, req: DescribeLogDirsRequestData
    ) -> DescribeLogDirsResponseData:
        """``KafkaApis.handleDescribeLogDirsRequest`` with ``describeLogDirs``: every
        configured log dir, KAFKA_STORAGE_ERROR for one offline; an online one lists each
        topic with a log in it, with the sizes of the partitions asked about (a topic not
        asked about is listed with none, as Kafka's grouping leaves it) and their offset
        lag (high watermark minus log end offset, at least 0; -1 for a partition with no
        online replica here)."""
        partitions = (
            None
            if req.topics is None
            else tuple(TopicPartition(t.topic, p) for t in req.topics for p in t.partitions)
        )
        reply = await self._broker.ask(
            self._broker.log_manager_ref, DescribeLogDirs(partitions=partitions)
        )
        assert isinstance(reply, LogDirsDescribed)
        results = []
        for d in reply.dirs:
            if not d.online:
                results.append(
                    DescribeLogDirsResult(
                        error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=d.log_dir
                    )
                )
                continue
            by_topic: dict[str, list[DescribeLogDirsPartition]] = {t: [] for t in d.topics}
            for log in d.logs:
                tp = TopicPartition(log.topic, log.partition)
                partition = self.partitions.get(tp)
                lag = (
                    -1
                    if partition is None or tp in self.offline
                    else max(partition.high_watermark - log.log_end_offset, 0)
                )
                by_topic[log.topic].append(
                    DescribeLogDirsPartition(
                        partition_index=log.partition,
                        partition_size=log.size,
                        offset_lag=lag,
                    )
                )
            results.append(
                DescribeLogDirsResult(
                    error_code=ErrorCode.NONE,
                    log_dir=d.log_dir,
                    topics=tuple(
                        DescribeLogDirsTopic(name=TopicName(t), partitions=tuple(ps))
                        for t, ps in by_topic.items()
                    ),
                )
            )
        return DescribeLogDirsResponseData(results=tuple(results))

    def handle_log_dir_failure(self, log_dir: str) -> tuple[TopicPartition, ...]:
        """``handleLogDirFailure``, the broker's own part: every partition hosted here with
        its log in ``log_dir`` goes offline (``markPartitionOffline``: StopReplica answers
        KAFKA_STORAGE_ERROR for it from now on, LeaderAndIsr too) and its fetcher stops.
        The partitions taken offline, by name (the broker then notifies the controller)."""
        gone = tuple(
            sorted(
                tp
                for tp, where in self.log_dirs.items()
                if where == log_dir and tp not in self.offline
            )
        )
        if gone:
            self.offline.update(gone)
            self.hooks.stop_fetching(list(gone))
        return gone

    # ------------------------------------------------------------------ metrics

    def mark_isr_update(self, outcome: IsrUpdate) -> None:
        self.isr_updates[outcome] += 1

    def metrics(self) -> tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]:
        """The gauges and the meters' counts of Kafka's ``ReplicaManager``, by Kafka's
        names. The gauges scan the partitions hosted here and online: LeaderCount,
        PartitionCount (every hosted one, offline too), OfflineReplicaCount,
        UnderReplicatedPartitions (led here with an ISR smaller than the replicas,
        ``Partition.isUnderReplicated``), UnderMinIsrPartitionCount and
        AtMinIsrPartitionCount (led here, the ISR below or at the topic's
        ``min.insync.replicas``: the topic's override, read when this broker became its
        replica)."""
        default_min_isr = self._broker.config.min_insync_replicas
        led = under_replicated = under_min_isr = at_min_isr = 0
        for tp, partition in self.partitions.items():
            if not partition.is_leader or tp in self.offline:
                continue
            led += 1
            isr = len(partition.isr)
            settings = self._topic_settings.get(TopicName(tp.topic))
            min_isr = default_min_isr if settings is None else settings.min_insync_replicas
            under_replicated += isr < len(partition.replicas)
            under_min_isr += isr < min_isr
            at_min_isr += isr == min_isr
        values = (
            led,
            len(self.partitions.keys() | self.offline),
            len(self.offline),
            under_replicated,
            under_min_isr,
            at_min_isr,
        )
        gauges = tuple(zip(REPLICA_MANAGER_GAUGES, values, strict=True))
        meters = tuple((update.value, count) for update, count in self.isr_updates.items())
        return gauges, meters

    # ------------------------------------------------------------------ leadership

    def now_ms(self) -> int:
        """The broker's time in ms for follower lag and caught-up times: its clock's
        monotonic time, the one ``Replication``'s ISR-expiration timer reads too (a
        follower that never caught up is ``isr.NEVER_MS``, long before any of it)."""
        return int(self._broker.clock.now() * 1000)

    def _became(self, leaders: list[TopicPartition], followers: list[Partition]) -> None:
        """After a LeaderAndIsr: fetchers stop for the partitions led here now
        (``makeLeaders``) and start for the followed ones (``makeFollowers``), whose
        parked requests are answered (NOT_LEADER_OR_FOLLOWER) right after. A leader's
        high watermark may rise at once: its ISR may be down to itself
        (``Partition.makeLeader`` ends with ``maybeIncrementLeaderHW``); without that, a
        leader elected alone (unclean, or the last of its ISR) kept its records above the
        high watermark, unreadable, until the next append."""
        if leaders:
            self.hooks.stop_fetching(leaders)
            self._raise_high_watermarks(leaders)
        if followers:
            self.hooks.make_followers(followers)
            self._broker.send_self(CompleteDelayedData(partitions=tuple(p.tp for p in followers)))

    def apply_isr_state(self, tp: TopicPartition, state: LeaderIsr) -> None:
        """An ISR change of a led partition (``LeaderIsr``: a proposal in flight, or the
        controller's answer): the high watermark may move and parked produces complete."""
        partition = self.partitions.get(tp)
        if partition is None or not partition.is_leader:
            return
        partition.set_isr_state(state)
        self._broker.send_self(CompleteDelayedData(partitions=(tp,)))

    def _trace_hw(self, tps: Iterable[TopicPartition]) -> None:
        """Tell the log manager the high watermarks of ``tps`` (its next
        replication-offset-checkpoint)."""
        marks = tuple(
            HighWatermark(topic=tp.topic, partition=tp.partition, high_watermark=p.high_watermark)
            for tp in tps
            if (p := self.partitions.get(tp)) is not None
        )
        if marks:
            self._broker.tell(
                self._broker.log_manager_ref, RecordHighWatermarks(high_watermarks=marks)
            )

    def _raise_high_watermarks(self, tps: Iterable[TopicPartition]) -> list[TopicPartition]:
        """``maybeIncrementLeaderHW`` for ``tps``; the ones whose high watermark moved
        (traced and told to the log manager)."""
        now_ms = self.now_ms()
        moved = []
        for tp in tps:
            partition = self.partitions.get(tp)
            if partition is None:
                continue
            before = partition.high_watermark
            if partition.maybe_increment_high_watermark(now_ms, self.replica_lag_time_max_ms):
                moved.append(tp)
                self._broker.trace(
                    "event",
                    "high_watermark_moved",
                    topic=tp.topic,
                    partition=tp.partition,
                    leader_epoch=partition.leader_epoch,
                    **{"from": before, "to": partition.high_watermark},
                )
        self._trace_hw(moved)
        return moved

    # ------------------------------------------------------------------ topic configs

    def on_log_starts(self, starts: Iterable[LogStart]) -> None:
        """Retention moved these logs' start offsets (the log manager's ``LogStartsAdvanced``):
        the partitions' starts follow, as Kafka's ``Partition`` reads its ``Log``'s."""
        for start in starts:
            partition = self.partitions.get(TopicPartition(start.topic, start.partition))
            if partition is not None:
                partition.on_log_start(start.log_start_offset)

    def broker_config_changed(self) -> None:
        """The broker's dynamic configs changed: every topic's data-plane configs are read
        again on their next use, over the broker's new defaults."""
        self._topic_settings.clear()

    async def topic_config_changed(self, topic: TopicName) -> None:
        """``TopicConfigHandler.processConfigChanges``: the topic's config znode changed.
        Read it again: its log configs go to the log manager (all of them, so that a
        deleted override falls back to the broker's default) and its data-plane configs
        replace the ones kept, for the partitions hosted here now and later."""
        self._topic_settings.pop(topic, None)
        await self.topic_settings(topic, configure_logs=True)

    async def topic_settings(
        self, topic: TopicName, *, configure_logs: bool = False
    ) -> TopicSettings:
        """A topic's data-plane configs, read from its config znode once (with the other
        new topics of the LeaderAndIsr that makes this broker its replica, else at its
        first use; its log configs handed to the log manager then) and again on each
        change notification (``topic_config_changed``); a failed read keeps the broker's
        defaults for this request."""
        known = self._topic_settings.get(topic)
        if known is not None:
            return known
        try:
            overrides = await kafka_zk.get_topic_config(self._broker.session, topic)
        except StoreError:
            return self._default_settings()
        return await self._keep_settings(topic, overrides, configure_logs=configure_logs)

    async def _read_topic_settings(self, topics: set[TopicName]) -> None:
        """``Partition.createLogIfNotExists``'s ``fetchLogConfig``: the configs of the
        topics a LeaderAndIsr makes this broker a replica of, those not read yet, in one
        pipelined read, so that their logs (a follower's too, which serves no Produce)
        follow the topic's log configs from their creation or their loading at start-up.
        A failed read leaves the topic to be read at its next use."""
        new = sorted(t for t in topics if t not in self._topic_settings)
        if not new:
            return
        try:
            configs = await kafka_zk.get_topic_configs(self._broker.session, new)
        except StoreError:
            return
        no_overrides: TopicSettings | None = None  # the broker's defaults, one value for all
        for topic, overrides in configs.items():
            if isinstance(overrides, StoreError):
                continue
            if overrides:
                await self._keep_settings(topic, overrides, configure_logs=False)
                continue
            if no_overrides is None:
                no_overrides = await self._keep_settings(topic, {}, configure_logs=False)
            else:  # as _keep_settings would make them: no log config to hand over
                self._topic_settings[topic] = no_overrides

    def _default_settings(self) -> TopicSettings:
        config = self._broker.config
        return TopicSettings(
            min_insync_replicas=config.min_insync_replicas,
            compression_type=config.compression_type,
            message_downconversion_enable=config.log_message_downconversion_enable,
        )

    async def _keep_settings(
        self, topic: TopicName, overrides: Mapping[str, str], *, configure_logs: bool
    ) -> TopicSettings:
        """A topic's data-plane configs from its read overrides, kept; its log configs
        handed to the log manager (when it has some, or ``configure_logs``)."""
        default = self._default_settings()
        logs = tuple(sorted((k, v) for k, v in overrides.items() if k in LOG_CONFIGS))
        if logs or configure_logs:
            await self._broker.ask(
                self._broker.log_manager_ref, LogConfigOverrides(topic=topic, configs=logs)
            )
        value = overrides.get(MIN_INSYNC_REPLICAS)
        conversion = overrides.get(MESSAGE_DOWNCONVERSION_ENABLE)
        settings = TopicSettings(
            min_insync_replicas=int(value)
            if value and value.isdigit()
            else default.min_insync_replicas,
            compression_type=overrides.get(COMPRESSION_TYPE, default.compression_type).lower(),
            message_downconversion_enable=default.message_downconversion_enable
            if conversion is None
            else conversion.strip().lower() == "true",
        )
        self._topic_settings[topic] = settings
        return settings

    # ------------------------------------------------------------------ Produce

    def _leader_error(self, topic: TopicName, tp: TopicPartition) -> ErrorCode | None:
        """Why this broker cannot serve ``tp`` as its leader, if it cannot, as
        ``ReplicaManager.getPartitionOrError`` decides: a partition this broker hosts (from
        LeaderAndIsr) is served whatever the metadata cache says (a topic queued for
        deletion is gone from the cache, but its partitions still replicate until
        StopReplica); a partition not hosted is NOT_LEADER_OR_FOLLOWER if the metadata
        cache knows its topic, UNKNOWN_TOPIC_OR_PARTITION if not; a hosted one not led
        here is NOT_LEADER_OR_FOLLOWER."""
        partition = self.partitions.get(tp)
        if partition is None:
            if self._broker.cache.contains(topic):
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if not partition.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return None

    def _fenced_leader(
        self, tp: TopicPartition, current_leader_epoch: int
    ) -> tuple[Partition | None, ErrorCode]:
        """``tp``'s partition if this broker leads it in the epoch the request names
        (``Partition.fence``), else None and why not."""
        code = self._leader_error(TopicName(tp.topic), tp)
        partition = self.partitions.get(tp)
        if code is None and partition is not None:
            code = partition.fence(current_leader_epoch)
        if code is not None or partition is None:
            return None, code or ErrorCode.NOT_LEADER_OR_FOLLOWER
        return partition, ErrorCode.NONE

    async def append_records(self, req: ProduceRequestData, ctx: Context) -> Message | None:
        """``ReplicaManager.appendRecords``: every partition checked (leadership, and for
        acks=all the ISR against ``min.insync.replicas``: NOT_ENOUGH_REPLICAS, nothing
        written), the rest appended in one round trip, the high watermarks raised; acks=all
        then waits in a DelayedProduce for the high watermark to pass each partition's
        records (None: answered later)."""
        responses: dict[tuple[str, int], ProducePartitionResponse] = {}
        if req.acks not in (0, 1, -1):
            for topic in req.topic_data:
                for data in topic.partition_data:
                    responses[topic.name, data.index] = ProducePartitionResponse(
                        index=data.index, error_code=ErrorCode.INVALID_REQUIRED_ACKS
                    )
            return _produce_response(req, responses)
        appends: list[AppendRecords] = []
        min_insync: dict[TopicPartition, int] = {}
        for topic in req.topic_data:
            for data in topic.partition_data:
                tp = TopicPartition(topic.name, data.index)
                code = self._leader_error(topic.name, tp)
                if is_internal(topic.name) and not req.internal_topics_allowed:
                    code = ErrorCode.INVALID_TOPIC_EXCEPTION  # appendToLocalLog
                if code is None and req.acks == -1:
                    settings = await self.topic_settings(topic.name)
                    min_insync[tp] = settings.min_insync_replicas
                    if len(self.partitions[tp].isr) < settings.min_insync_replicas:
                        code = ErrorCode.NOT_ENOUGH_REPLICAS
                elif code is None:
                    await self.topic_settings(topic.name)  # its log configs in force
                if code is not None:
                    # Partition.appendRecordsToLeader's NotEnoughReplicasException is
                    # not one of appendToLocalLog's known failures: it answers the log
                    # start offset.
                    hosted = self.partitions.get(tp)
                    responses[topic.name, data.index] = ProducePartitionResponse(
                        index=data.index,
                        error_code=code,
                        log_start_offset=hosted.log_start_offset
                        if code is ErrorCode.NOT_ENOUGH_REPLICAS and hosted is not None
                        else -1,
                    )
                    continue
                if not data.records:  # Log.append: no whole batch, nothing to append
                    responses[topic.name, data.index] = ProducePartitionResponse(index=data.index)
                    continue
                appends.append(
                    AppendRecords(
                        topic=topic.name,
                        partition=data.index,
                        records=data.records or b"",
                        leader_epoch=self.partitions[tp].leader_epoch,
                    )
                )
        appended: list[TopicPartition] = []
        required: dict[TopicPartition, int] = {}
        if appends:
            reply = await self._broker.ask(
                self._broker.log_manager_ref, AppendToLogs(appends=tuple(appends))
            )
            assert isinstance(reply, LogsAppended)
            for outcome in reply.results:
                tp = TopicPartition(outcome.topic, outcome.partition)
                if outcome.error_code is not ErrorCode.NONE:
                    responses[outcome.topic, outcome.partition] = _failed_append(
                        outcome, self.partitions[tp].log_start_offset
                    )
                    continue
                partition = self.partitions[tp]
                partition.on_log_offsets(outcome.log_start_offset, outcome.log_end_offset)
                appended.append(tp)
                required[tp] = outcome.last_offset + 1
                responses[outcome.topic, outcome.partition] = ProducePartitionResponse(
                    index=outcome.partition,
                    base_offset=outcome.first_offset,
                    log_append_time_ms=outcome.log_append_time,
                    log_start_offset=outcome.log_start_offset,
                )
        moved = self._raise_high_watermarks(appended)
        await self._complete_delayed(appended, produces=moved)
        if req.acks != -1 or not required:
            return _produce_response(req, responses)
        delayed = DelayedProduce(
            reply=ctx.defer(),
            request=req,
            responses={key: r for key, r in responses.items()},
            required=required,
            min_insync=min_insync,
        )
        for tp in required:
            key = (tp.topic, tp.partition)
            delayed.responses[key] = timed_out(delayed.responses[key])
        if self._try_complete_produce(delayed):
            delayed.reply.send(self._broker, _produce_response(req, delayed.responses))
            return None
        self.delayed.watch(delayed, list(required), req.timeout_ms)
        return None

    def _try_complete_produce(self, delayed: DelayedProduce) -> bool:
        """``DelayedProduce.tryComplete``: each pending partition whose high watermark
        reached its records (or that lost its leadership) gets its answer; whether none
        is pending any more."""
        for tp, offset in list(delayed.required.items()):
            partition = self.partitions.get(tp)
            code = (
                ErrorCode.NOT_LEADER_OR_FOLLOWER
                if partition is None
                else partition.check_enough_replicas_reach_offset(
                    offset, delayed.min_insync.get(tp, 1)
                )
            )
            if code is None:
                continue
            del delayed.required[tp]
            key = (tp.topic, tp.partition)
            previous = delayed.responses[key]
            delayed.responses[key] = ProducePartitionResponse(
                index=previous.index,
                error_code=code,
                base_offset=previous.base_offset,
                log_append_time_ms=previous.log_append_time_ms,
                log_start_offset=previous.log_start_offset,
            )
        return not delayed.required

    # ------------------------------------------------------------------ Fetch

    async def fetch_messages(self, req: FetchRequestData, ctx: Context) -> Message | None:
        """``ReplicaManager.fetchMessages``: read every partition (one round trip), a
        follower's fetch moving its state and maybe the high watermark; answered now
        when ``max_wait_ms`` is not positive, nothing was asked, ``min_bytes`` are there
        or a partition failed; else parked in a DelayedFetch (None: answered later).
        kemu opens no fetch sessions: a request naming one is FETCH_SESSION_ID_NOT_FOUND
        (0/-1 and 0/0 are sessionless full fetches, answered with session 0)."""
        if req.session_id != 0:
            return FetchResponseData(responses=(), error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        response, size, failed = await self._read(req)
        asked = any(topic.partitions for topic in req.topics)
        if req.max_wait_ms <= 0 or not asked or size >= req.min_bytes or failed:
            return response
        partitions = frozenset(
            TopicPartition(topic.topic, p.partition)
            for topic in req.topics
            for p in topic.partitions
        )
        self.delayed.watch(
            DelayedFetch(reply=ctx.defer(), request=req, partitions=partitions),
            sorted(partitions),
            req.max_wait_ms,
        )
        return None

    async def _read(self, req: FetchRequestData) -> tuple[FetchResponseData, int, bool]:
        """``readFromLocalLog`` and, for a follower, ``updateFollowerFetchState``: the
        answer, its bytes and whether a partition failed. A consumer reads below the high
        watermark, a follower (and a debugging consumer) up to the log end; the high
        watermark, log start and last stable offset answered are those before the read."""
        follower = BrokerId(req.replica_id) if req.replica_id >= 0 else None
        answers: dict[tuple[str, int], FetchPartitionData] = {}
        reads: list[ReadRecords] = []
        snapshot: dict[TopicPartition, tuple[int, int]] = {}
        follower_log_starts: dict[TopicPartition, int] = {}
        for topic in req.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, p.partition)
                partition = self.partitions.get(tp)
                code: ErrorCode | None
                if partition is None:  # as _leader_error: hosted partitions are served
                    code = (
                        ErrorCode.NOT_LEADER_OR_FOLLOWER
                        if self._broker.cache.contains(topic.topic)
                        else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    )
                else:
                    code = partition.fence(p.current_leader_epoch)
                    if (
                        code is None
                        and not partition.is_leader
                        and (req.replica_id != DEBUG_REPLICA_ID)
                    ):
                        code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                if code is not None:
                    answers[topic.topic, p.partition] = _fetch_error(p.partition, code)
                    continue
                assert partition is not None
                snapshot[tp] = (partition.high_watermark, partition.log_end_offset)
                follower_log_starts[tp] = p.log_start_offset
                ceiling = None if req.replica_id != -1 else partition.high_watermark
                reads.append(
                    ReadRecords(
                        topic=topic.topic,
                        partition=p.partition,
                        offset=p.fetch_offset,
                        max_bytes=p.partition_max_bytes,
                        max_offset=ceiling,
                    )
                )
        size, failed = 0, len(answers) > 0
        followed: list[TopicPartition] = []
        if reads:
            reply = await self._broker.ask(
                self._broker.log_manager_ref,
                ReadFromLogs(reads=tuple(reads), max_bytes=min(req.max_bytes, FETCH_MAX_BYTES)),
            )
            assert isinstance(reply, LogsRead)
            now_ms = self.now_ms()
            for read, outcome in zip(reads, reply.results, strict=True):
                tp = TopicPartition(read.topic, read.partition)
                if outcome.error_code is not ErrorCode.NONE:
                    answers[read.topic, read.partition] = _fetch_error(
                        read.partition, outcome.error_code
                    )
                    failed = True
                    continue
                partition = self.partitions[tp]
                partition.on_log_offsets(outcome.log_start_offset, outcome.log_end_offset)
                high_watermark, _ = snapshot[tp]
                size += len(outcome.records)
                answers[read.topic, read.partition] = FetchPartitionData(
                    partition_index=read.partition,
                    high_watermark=high_watermark,
                    last_stable_offset=high_watermark,
                    log_start_offset=outcome.log_start_offset,
                    aborted_transactions=(
                        () if req.isolation_level == IsolationLevel.READ_COMMITTED else None
                    ),
                    records=outcome.records,
                )
                if follower is not None and partition.update_follower_fetch_state(
                    follower,
                    fetch_offset=read.offset,
                    follower_log_start_offset=follower_log_starts[tp],
                    leader_log_end_offset=outcome.log_end_offset,
                    now_ms=now_ms,
                ):
                    followed.append(tp)
                    self.hooks.follower_fetched(partition, follower)
        if followed:
            moved = self._raise_high_watermarks(followed)
            await self._complete_delayed(moved, produces=moved)
        if req.version < 10:
            for key, answer in list(answers.items()):
                if answer.error_code is ErrorCode.NONE:
                    refusal = await self._format_refusal(TopicName(key[0]), req, answer.records)
                    if refusal is not None:
                        answers[key] = _fetch_error(answer.partition_index, refusal)
        response = FetchResponseData(
            responses=tuple(
                FetchTopicResponse(
                    topic=topic.topic,
                    partitions=tuple(answers[topic.topic, p.partition] for p in topic.partitions),
                )
                for topic in req.topics
            )
        )
        return response, size, failed

    async def _format_refusal(
        self, topic: TopicName, req: FetchRequestData, records: bytes
    ) -> ErrorCode | None:
        """``KafkaApis.maybeConvertFetchedData``: before Fetch v10 a topic whose
        ``compression.type`` is zstd is UNSUPPORTED_COMPRESSION_TYPE; before v4 records
        that need down-converting are UNSUPPORTED_VERSION for a consumer when the topic's
        ``message.downconversion.enable`` is false (the listener converts the rest)."""
        settings = await self.topic_settings(topic)
        if settings.compression_type == "zstd":
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        if (
            req.version < 4
            and records
            and req.replica_id < 0
            and not settings.message_downconversion_enable
        ):
            return ErrorCode.UNSUPPORTED_VERSION
        return None

    async def _complete_delayed(
        self, tps: Iterable[TopicPartition], *, produces: Iterable[TopicPartition] | None = None
    ) -> None:
        """``checkAndComplete`` for the delayed requests watching ``tps``: fetches read
        again and answered if they now have ``min_bytes`` (or an error); produces
        watching ``produces`` (all of ``tps`` when None: a leadership change) answered
        once every partition is done. A follower's parked fetch is not released by a
        high watermark move alone (KAFKA-9952), only by appends and leadership changes."""
        keys = list(tps)
        produce_keys = set(keys if produces is None else produces)
        for op, operation in self.delayed.watching([*keys, *produce_keys]):
            if isinstance(operation, DelayedProduce):
                done = produce_keys & operation.required.keys() and self._try_complete_produce(
                    operation
                )
                if done and self.delayed.complete(op) is not None:
                    answer = _produce_response(operation.request, operation.responses)
                    operation.reply.send(self._broker, answer)
                continue
            if not operation.partitions & set(keys):
                continue
            response, size, failed = await self._read(operation.request)
            if (size >= operation.request.min_bytes or failed) and self.delayed.complete(
                op
            ) is not None:
                operation.reply.send(self._broker, response)

    async def expire_delayed(self, op: int) -> None:
        """A delayed request's timeout passed: a produce answers its pending partitions
        REQUEST_TIMED_OUT (what was written stays), a fetch answers what there is."""
        operation = self.delayed.complete(op)
        if operation is None:
            return
        self._broker.trace("event", "data_request_expired", operation=op)
        if isinstance(operation, DelayedProduce):
            self._try_complete_produce(operation)
            operation.reply.send(
                self._broker, _produce_response(operation.request, operation.responses)
            )
            return
        response, _, _ = await self._read(operation.request)
        operation.reply.send(self._broker, response)

    async def complete_delayed_now(self, tps: tuple[TopicPartition, ...]) -> None:
        """Leadership of ``tps`` changed (``CompleteDelayedData``): their parked requests
        are looked at again; produces on partitions no longer led here complete with
        NOT_LEADER_OR_FOLLOWER, fetches with their read."""
        moved = self._raise_high_watermarks(tps)
        await self._complete_delayed(tps, produces=[*tps, *moved])

    # ------------------------------------------------------------------ offsets

    async def fetch_offsets(self, req: ListOffsetsRequestData) -> ListOffsetsResponseData:
        """``ReplicaManager.fetchOffsetForTimestamp`` per partition: earliest, the log
        start; latest, the high watermark for a consumer (the log end for a replica or a
        debugging consumer); a timestamp, the first record at or after it below that
        ceiling (-1/-1 when none). While a new leader's high watermark is below its
        epoch's start, a consumer's latest, and its timestamp without a record below the
        ceiling, are OFFSET_NOT_AVAILABLE, LEADER_NOT_AVAILABLE before v5
        (``Partition.fetchOffsetForTimestamp``, ``KafkaApis.handleListOffsetRequestV1AndAbove``)."""
        if req.version == 0:
            return await self._legacy_fetch_offsets(req)
        unavailable = (
            ErrorCode.OFFSET_NOT_AVAILABLE if req.version >= 5 else ErrorCode.LEADER_NOT_AVAILABLE
        )
        consumer = req.replica_id == -1
        answers: dict[tuple[str, int], ListOffsetsPartitionResponse] = {}
        queries: list[OffsetTimestampQuery] = []
        lagging: set[TopicPartition] = set()
        for topic in req.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                partition, code = self._fenced_leader(tp, p.current_leader_epoch)
                if partition is None:
                    answers[topic.name, p.partition_index] = ListOffsetsPartitionResponse(
                        partition_index=p.partition_index, error_code=code
                    )
                    continue
                if consumer and partition.high_watermark < partition.leader_epoch_start_offset:
                    lagging.add(tp)
                ceiling = partition.high_watermark if consumer else partition.log_end_offset
                if p.timestamp == EARLIEST_TIMESTAMP:
                    answer = ListOffsetsPartitionResponse(
                        partition_index=p.partition_index, offset=partition.log_start_offset
                    )
                elif p.timestamp == LATEST_TIMESTAMP:
                    if tp in lagging:
                        answer = ListOffsetsPartitionResponse(
                            partition_index=p.partition_index, error_code=unavailable
                        )
                    else:
                        answer = ListOffsetsPartitionResponse(
                            partition_index=p.partition_index,
                            offset=ceiling,
                            leader_epoch=partition.leader_epoch,
                        )
                else:
                    queries.append(
                        OffsetTimestampQuery(
                            topic=topic.name, partition=p.partition_index, timestamp=p.timestamp
                        )
                    )
                    continue
                answers[topic.name, p.partition_index] = answer
        for found in await self._lookup_offsets(queries):
            tp = TopicPartition(found.topic, found.partition)
            partition = self.partitions[tp]
            ceiling = partition.high_watermark if consumer else partition.log_end_offset
            hit = found.error_code is ErrorCode.NONE and 0 <= found.offset < ceiling
            code = found.error_code
            if code is ErrorCode.NONE and not hit and tp in lagging:
                code = unavailable
            answers[found.topic, found.partition] = ListOffsetsPartitionResponse(
                partition_index=found.partition,
                error_code=code,
                timestamp=found.timestamp if hit else -1,
                offset=found.offset if hit else -1,
                leader_epoch=found.leader_epoch if hit else -1,
            )
        return _list_offsets_response(req, answers)

    async def _legacy_fetch_offsets(self, req: ListOffsetsRequestData) -> ListOffsetsResponseData:
        """ListOffsets v0 (``KafkaApis.handleListOffsetRequestV0``,
        ``Partition.legacyFetchOffsetsForTimestamp``): the leader's (any replica's for a
        debugging consumer, -2) segment offsets before the time; a consumer's list has the
        offsets above the high watermark replaced by the high watermark."""
        answers: dict[tuple[str, int], ListOffsetsPartitionResponse] = {}
        queries: list[OffsetsBeforeQuery] = []
        for topic in req.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                code = self._leader_error(topic.name, tp)
                if code is ErrorCode.NOT_LEADER_OR_FOLLOWER and req.replica_id == DEBUG_REPLICA_ID:
                    code = None if tp in self.partitions else code
                if code is not None:
                    answers[topic.name, p.partition_index] = ListOffsetsPartitionResponse(
                        partition_index=p.partition_index, error_code=code
                    )
                    continue
                queries.append(
                    OffsetsBeforeQuery(
                        topic=topic.name,
                        partition=p.partition_index,
                        timestamp=p.timestamp,
                        max_num_offsets=p.max_num_offsets,
                    )
                )
        for found in await self._lookup_offsets(queries):
            offsets = found.offsets
            partition = self.partitions.get(TopicPartition(found.topic, found.partition))
            if partition is not None and req.replica_id == CONSUMER_REPLICA_ID:
                high_watermark = partition.high_watermark
                if any(o > high_watermark for o in offsets):
                    # the offsets are largest first: those above the mark lead
                    offsets = (high_watermark, *(o for o in offsets if o <= high_watermark))
            answers[found.topic, found.partition] = ListOffsetsPartitionResponse(
                partition_index=found.partition,
                error_code=found.error_code,
                old_style_offsets=offsets,
            )
        return _list_offsets_response(req, answers)

    async def _lookup_offsets(self, queries: Sequence[OffsetQuery]) -> tuple[OffsetFound, ...]:
        """The log manager's answers to ``queries`` (one ``LookupOffsets``), in their
        order; nothing is asked when there are none."""
        if not queries:
            return ()
        reply = await self._broker.ask(
            self._broker.log_manager_ref, LookupOffsets(queries=tuple(queries))
        )
        assert isinstance(reply, OffsetsFound)
        return reply.results

    async def last_offset_for_leader_epoch(
        self, req: OffsetForLeaderEpochRequestData
    ) -> OffsetForLeaderEpochResponseData:
        """``Partition.lastOffsetForLeaderEpoch`` on the leader: the largest epoch at or
        below the one asked and where it ends in the leader's epoch cache (the log end for
        the current epoch)."""
        answers: dict[tuple[str, int], OffsetForLeaderPartitionResult] = {}
        queries: list[EpochEndOffsetQuery] = []
        for topic in req.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, p.partition)
                partition, code = self._fenced_leader(tp, p.current_leader_epoch)
                if partition is None:
                    answers[topic.topic, p.partition] = OffsetForLeaderPartitionResult(
                        partition=p.partition, error_code=code
                    )
                    continue
                queries.append(
                    EpochEndOffsetQuery(
                        topic=topic.topic, partition=p.partition, leader_epoch=p.leader_epoch
                    )
                )
        for found in await self._lookup_offsets(queries):
            answers[found.topic, found.partition] = OffsetForLeaderPartitionResult(
                partition=found.partition,
                error_code=found.error_code,
                leader_epoch=found.leader_epoch,
                end_offset=found.offset,
            )
        return OffsetForLeaderEpochResponseData(
            topics=tuple(
                OffsetForLeaderTopicResult(
                    topic=topic.topic,
                    partitions=tuple(answers[topic.topic, p.partition] for p in topic.partitions),
                )
                for topic in req.topics
            )
        )


_APPEND_ERRORS_WITHOUT_LOG_START: Final = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)
"""The append failures ``ReplicaManager.appendToLocalLog`` answers without the log start
offset (its known exceptions: ``LogAppendInfo.UnknownLogAppendInfo``)."""


def _failed_append(outcome: AppendOutcome, log_start_offset: int) -> ProducePartitionResponse:
    """A partition's answer to an append the log refused, as ``appendToLocalLog`` makes
    it: the log start offset unless the failure is one of its known ones; for records
    refused (``RecordValidationException``) each one's index and why, and the message
    (the only failure whose message Produce v8 carries)."""
    known = outcome.error_code in _APPEND_ERRORS_WITHOUT_LOG_START
    return ProducePartitionResponse(
        index=outcome.partition,
        error_code=outcome.error_code,
        log_start_offset=-1 if known else log_start_offset,
        record_errors=tuple(
            RecordError(batch_index=index, batch_index_error_message=why)
            for index, why in outcome.record_errors
        ),
        error_message=outcome.error_message if outcome.record_errors else None,
    )


def _produce_response(
    req: ProduceRequestData, responses: Mapping[tuple[str, int], ProducePartitionResponse]
) -> ProduceResponseData:
    """The answers in the request's order."""
    return ProduceResponseData(
        responses=tuple(
            ProduceTopicResponse(
                name=topic.name,
                partition_responses=tuple(
                    responses[topic.name, data.index] for data in topic.partition_data
                ),
            )
            for topic in req.topic_data
        )
    )


def _list_offsets_response(
    req: ListOffsetsRequestData, answers: Mapping[tuple[str, int], ListOffsetsPartitionResponse]
) -> ListOffsetsResponseData:
    """The answers in the request's order."""
    return ListOffsetsResponseData(
        topics=tuple(
            ListOffsetsTopicResponse(
                name=topic.name,
                partitions=tuple(answers[topic.name, p.partition_index] for p in topic.partitions),
            )
            for topic in req.topics
        )
    )


def _fetch_error(partition: int, code: ErrorCode) -> FetchPartitionData:
    """A partition's failed read: no records, offsets unknown (-1), as Kafka answers."""
    return FetchPartitionData(partition_index=partition, error_code=code, records=b"")


class _NamedPartition(Protocol):
    @property
    def topic(self) -> TopicName: ...

    @property
    def partition(self) -> int: ...


def _partition_errors(
    codes: Mapping[TopicPartition, ErrorCode],
    partitions: Iterable[_NamedPartition],
    tps: Iterable[TopicPartition] | None = None,
) -> tuple[PartitionError, ...]:
    """A control request's per-partition answer: each partition's code, in request order.
    ``tps``, when given, are the partitions' ``TopicPartition``s alike, already built (a
    bulk creation's LeaderAndIsr answers for 3,000 partitions)."""
    if tps is None:
        tps = (TopicPartition(p.topic, p.partition) for p in partitions)
    return tuple(
        PartitionError(topic=p.topic, partition=p.partition, error_code=codes[tp])
        for p, tp in zip(partitions, tps, strict=True)
    )
