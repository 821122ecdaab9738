"""A follower's replication: Kafka 2.7's ``ReplicaFetcherManager`` and
``ReplicaFetcherThread`` (``AbstractFetcherThread``), as actors of the broker node.

**Fetchers.** One ``ReplicaFetcher`` actor per (leader broker, fetcher id), the fetcher
id of a partition being ``getFetcherId`` over ``num.replica.fetchers`` (1 by default, so
one per leader). Each keeps, per partition, Kafka's ``PartitionFetchState`` (next fetch
offset, leader epoch, ``truncating`` / ``fetching`` / ``failed``, delayed until) and
runs rounds (``doWork``), one after the other while it has partitions to serve:

1. **Truncate** (``maybeTruncate``): the truncating partitions whose local log has a leader
   epoch ask the leader OffsetForLeaderEpoch (their latest local epoch, with the current
   leader epoch for fencing) and cut the local log where ``getOffsetTruncationState``
   says, asking again when the leader named an epoch the follower lacks (KIP-279); a
   log without epochs is cut at the high watermark (the initial fetch offset). Then the
   partition fetches from where it was cut.
2. **Fetch** (``maybeFetch``): one Fetch (``replica_id`` = this broker) for every fetching
   partition that is not delayed, with the follower defaults
   (``replica.fetch.wait.max.ms`` 500, ``replica.fetch.min.bytes`` 1,
   ``replica.fetch.response.max.bytes`` 10 MiB, ``replica.fetch.max.bytes`` 1 MiB per
   partition, the local log start); the answer's records are appended as follower, the
   follower's high watermark becomes min(leader's, own log end) and its log start
   max(own, leader's). OFFSET_OUT_OF_RANGE re-reads the leader's latest (and if need be
   earliest) offset and truncates (``fetchOffsetAndTruncate``, what follows an unclean
   election); FENCED_LEADER_EPOCH at an unchanged epoch fails the partition until the
   next LeaderAndIsr; other errors, no answer within ``replica.socket.timeout.ms`` and a
   corrupt batch delay the partition by ``replica.fetch.backoff.ms`` (1 s); a storage
   error on the local log fails it.

A leader that answers an empty fetch before ``max_wait_ms`` (which a leader with
DelayedFetch never does) does not make the fetcher spin: the next round waits the rest
of ``max_wait_ms``.

The local log is reached through ``FollowerLog``, the fetcher's own port to the broker's
log manager, made for each fetcher, which asks through it (``Partition.truncateTo``,
``appendRecordsToFollowerOrFutureReplica``, the follower high watermark); the leader is
reached with Kafka's own requests over the Network. The decisions are in
``actors.broker.replica_fetcher_state``.

**Manager.** ``ReplicaFetcherManager`` is an actor of the broker node the broker tells
(as Kafka's ReplicaManager calls its ``replicaFetcherManager``): ``AddFetcherPartitions``
on ``makeFollowers``, ``RemoveFetcherPartitions`` on ``makeLeaders``, StopReplica and
before a leader change. It spawns fetcher actors when first needed; one left without
partitions idles (no timer, no traffic) until it is given partitions again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Protocol

import msgspec
import structlog

from actors.admin import BrokerConfig
from actors.broker.replica_fetcher_state import (
    FetchErrorAction,
    fetch_error_action,
    fetcher_id,
    follower_high_watermark,
    truncation_state,
)
from actors.runtime.actor import Actor, Context
from protocol.base import ActorRef, Message
from protocol.control import TopicPartition
from protocol.errors import ErrorCode, KafkaApiError, KemuError
from protocol.ids import BrokerId, TopicName
from protocol.kafka_data import (
    FetchPartition,
    FetchPartitionData,
    FetchRequestData,
    FetchResponseData,
    FetchTopic,
    ListOffsetsPartition,
    ListOffsetsRequestData,
    ListOffsetsResponseData,
    ListOffsetsTopic,
    OffsetForLeaderEpochRequestData,
    OffsetForLeaderEpochResponseData,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from protocol.replication import (
    AddFetcherPartitions,
    FetcherStatus,
    FetcherStatusRequest,
    FetcherWork,
    InitialFetchState,
    PartitionFetchState,
    RemoveFetcherPartitions,
    ReplicaState,
)

__all__ = [
    "DEFAULT_FETCHER_CONFIG",
    "REPLICA_FETCHER_MANAGER_ACTOR",
    "FetcherConfig",
    "FollowerLog",
    "ReplicaFetcher",
    "ReplicaFetcherManager",
    "fetcher_name",
    "leader_broker_ref",
]

log = structlog.get_logger("kemu.broker.replica_fetcher")

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2


@dataclass(frozen=True, slots=True)
class FetcherConfig:
    """The broker configs of replica fetching (``ReplicaFetcherThread``'s
    ``brokerConfig``); ``of(BrokerConfig())`` holds Kafka 2.7's defaults."""

    num_replica_fetchers: int
    replica_fetch_wait_max_ms: int
    replica_fetch_min_bytes: int
    replica_fetch_max_bytes: int
    replica_fetch_response_max_bytes: int
    replica_fetch_backoff_ms: int
    replica_socket_timeout_ms: int

    @classmethod
    def of(cls, config: BrokerConfig) -> FetcherConfig:
        """The fetchers' part of a broker's configs."""
        return cls(
            num_replica_fetchers=config.num_replica_fetchers,
            replica_fetch_wait_max_ms=config.replica_fetch_wait_max_ms,
            replica_fetch_min_bytes=config.replica_fetch_min_bytes,
            replica_fetch_max_bytes=config.replica_fetch_max_bytes,
            replica_fetch_response_max_bytes=config.replica_fetch_response_max_bytes,
            replica_fetch_backoff_ms=config.replica_fetch_backoff_ms,
            replica_socket_timeout_ms=config.replica_socket_timeout_ms,
        )


DEFAULT_FETCHER_CONFIG: Final = FetcherConfig.of(BrokerConfig())
"""Kafka 2.7's defaults, for fetchers built without a broker's configs (tests)."""


class FollowerLog(Protocol):
    """A follower's local partition logs, as its fetchers use them. Methods raise
    ``KafkaApiError`` with the partition's error code (CORRUPT_MESSAGE for a batch that
    fails its checks, KAFKA_STORAGE_ERROR for a failed disk) and change nothing then.
    Those that change the log answer its ``(log start, log end)`` offsets afterwards, so
    the fetcher needs no extra round trip to know them."""

    async def offsets(self, tp: TopicPartition) -> tuple[int, int]:
        """``(log start, log end)``."""
        ...

    async def latest_epoch(self, tp: TopicPartition) -> int | None:
        """The latest leader epoch of the local epoch cache (None: empty)
        (``ReplicaFetcherThread.latestEpoch``)."""
        ...

    async def end_offset_for_epoch(self, tp: TopicPartition, epoch: int) -> tuple[int, int]:
        """``(epoch, end offset)`` as the local epoch cache answers (``endOffsetFor``)."""
        ...

    async def truncate_to(self, tp: TopicPartition, offset: int) -> tuple[int, int]: ...

    async def truncate_fully_and_start_at(
        self, tp: TopicPartition, offset: int
    ) -> tuple[int, int]: ...

    async def append_as_follower(self, tp: TopicPartition, records: bytes) -> tuple[int, int]:
        """Append the leader's batches as they are."""
        ...

    async def update_follower_offsets(
        self,
        tp: TopicPartition,
        *,
        high_watermark: int,
        leader_log_start_offset: int,
        log_start_offset: int,
    ) -> int:
        """The follower's high watermark, and its log start (``log_start_offset`` as the
        fetcher last knew it) raised towards the leader's (not past the high watermark);
        the log start after."""
        ...


def leader_broker_ref(broker_id: BrokerId) -> ActorRef:
    """The broker actor of broker ``broker_id`` (where Fetch and OffsetForLeaderEpoch go)."""
    return ActorRef(f"broker-{broker_id}", "broker")


def fetcher_name(leader: BrokerId, fid: int) -> str:
    """Kafka's thread name ``ReplicaFetcherThread-<fetcherId>-<leaderId>``, as an actor name."""
    return f"replica_fetcher-{fid}-{leader}"


class ReplicaFetcher(Actor):
    """One fetcher (see the module docstring)."""

    def __init__(
        self,
        broker_id: BrokerId,
        leader: BrokerId,
        fid: int,
        follower_log: Callable[[Actor], FollowerLog],
        *,
        config: FetcherConfig | None = None,
        leader_ref: Callable[[BrokerId], ActorRef] = leader_broker_ref,
    ) -> None:
        super().__init__(fetcher_name(leader, fid))
        self.broker_id = broker_id
        self.leader = leader
        self.config = config or DEFAULT_FETCHER_CONFIG
        self.log = follower_log(self)
        self._leader_ref = leader_ref(leader)
        self.states: dict[TopicPartition, PartitionFetchState] = {}
        self._scheduled = False
        self._idle_until = 0.0

    # ------------------------------------------------------------------ messages

    async def receive(self, msg: Message, ctx: Context) -> Message | None:
        match msg:
            case AddFetcherPartitions(partitions=partitions):
                self._add(partitions)
                self._schedule()
            case RemoveFetcherPartitions(partitions=partitions):
                for tp in partitions:
                    self.states.pop(tp, None)
            case FetcherWork():
                self._scheduled = False
                await self._do_work()
                self._schedule()
            case FetcherStatusRequest():
                return FetcherStatus(
                    leader=self.leader,
                    partitions=tuple(self.states[tp] for tp in sorted(self.states)),
                )
            case _:
                pass
        return None

    def _add(self, partitions: Iterable[InitialFetchState]) -> None:
        """``addPartitions``: a partition already fetched at the same leader epoch keeps
        its state; any other starts truncating at its initial offset."""
        for initial in partitions:
            current = self.states.get(initial.partition)
            if current is not None and current.leader_epoch == initial.leader_epoch:
                continue
            self.states[initial.partition] = PartitionFetchState(
                partition=initial.partition,
                fetch_offset=initial.fetch_offset,
                leader_epoch=initial.leader_epoch,
                state=ReplicaState.TRUNCATING,
            )

    def _schedule(self) -> None:
        """Queue the next round: now, or when the first delayed partition is due."""
        if self._scheduled:
            return
        live = [s for s in self.states.values() if s.state is not ReplicaState.FAILED]
        if not live:
            return
        now = self.clock.now()
        due = max(min(s.delayed_until for s in live), self._idle_until)
        self._scheduled = True
        if due <= now:
            self.send_self(FetcherWork())
        else:
            self.start_soon(self._wake_at, due - now)

    async def _wake_at(self, seconds: float) -> None:
        await self.clock.sleep(seconds)
        self.send_self(FetcherWork())

    def _ready(self, state: ReplicaState) -> list[PartitionFetchState]:
        now = self.clock.now()
        return [
            s
            for tp, s in sorted(self.states.items())
            if s.state is state and s.delayed_until <= now
        ]

    def _put(self, tp: TopicPartition, **changes: object) -> None:
        current = self.states.get(tp)
        if current is not None:
            self.states[tp] = msgspec.structs.replace(current, **changes)

    def _delay(self, tps: Iterable[TopicPartition]) -> None:
        until = self.clock.now() + self.config.replica_fetch_backoff_ms / 1000
        for tp in tps:
            self._put(tp, delayed_until=until)

    def _fail(self, tp: TopicPartition, reason: str) -> None:
        """``markPartitionFailed``: no more fetching until a LeaderAndIsr re-adds it."""
        if tp in self.states:
            self._put(tp, state=ReplicaState.FAILED)
            log.warning("replica_fetch_failed", partition=str(tp), reason=reason)
            self.trace(
                "event",
                "replica_fetch_failed",
                topic=tp.topic,
                partition=tp.partition,
                leader=self.leader,
                reason=reason,
            )

    # ------------------------------------------------------------------ a round

    async def _do_work(self) -> None:
        await self._maybe_truncate()
        await self._maybe_fetch()

    async def _ask_leader(self, request: Message) -> Message | None:
        """The leader's answer, or None when it did not answer in time or refused."""
        try:
            return await self.ask(
                self._leader_ref,
                request,
                timeout=self.config.replica_socket_timeout_ms / 1000,
            )
        except KemuError as exc:
            log.info("replica_fetcher_leader_unavailable", leader=self.leader, error=repr(exc))
            return None

    async def _maybe_truncate(self) -> None:
        """``maybeTruncate``, repeated while the leader names epochs the follower lacks."""
        while True:
            truncating = self._ready(ReplicaState.TRUNCATING)
            if not truncating:
                return
            asked: dict[TopicPartition, int] = {}
            for s in truncating:
                tp = s.partition
                try:
                    latest = await self.log.latest_epoch(tp)
                except KafkaApiError as exc:
                    self._fail(tp, exc.code.name)
                    continue
                if latest is None:  # no epochs: cut at the high watermark
                    await self._truncate(tp, s.fetch_offset, completed=True)
                else:
                    asked[tp] = latest
            if not asked:
                return
            if not await self._truncate_by_epochs(asked):
                return

    async def _truncate_by_epochs(self, asked: Mapping[TopicPartition, int]) -> bool:
        """One OffsetForLeaderEpoch round; whether another round may be needed."""
        by_topic: dict[TopicName, list[OffsetForLeaderPartition]] = {}
        for tp, epoch in sorted(asked.items()):
            by_topic.setdefault(TopicName(tp.topic), []).append(
                OffsetForLeaderPartition(
                    partition=tp.partition,
                    leader_epoch=epoch,
                    current_leader_epoch=self.states[tp].leader_epoch,
                )
            )
        request = OffsetForLeaderEpochRequestData(
            replica_id=self.broker_id,
            topics=tuple(
                OffsetForLeaderTopic(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()
            ),
        )
        reply = await self._ask_leader(request)
        if not isinstance(reply, OffsetForLeaderEpochResponseData):
            self._delay(asked)
            return False
        again = False
        for topic in reply.topics:
            for result in topic.partitions:
                tp = TopicPartition(topic.topic, result.partition)
                state = self.states.get(tp)
                if tp not in asked or state is None or state.state is not ReplicaState.TRUNCATING:
                    continue
                if result.error_code is not ErrorCode.NONE:
                    await self._on_error(tp, result.error_code, state.leader_epoch)
                    continue
                try:
                    local = await self.log.end_offset_for_epoch(tp, result.leader_epoch)
                    target = truncation_state(
                        leader_epoch=result.leader_epoch,
                        leader_end_offset=result.end_offset,
                        local_end_for_epoch=None if local[1] < 0 else local,
                        log_end_offset=(await self.log.offsets(tp))[1],
                        high_watermark=state.fetch_offset,
                    )
                except KafkaApiError as exc:
                    self._fail(tp, exc.code.name)
                    continue
                await self._truncate(tp, target.offset, completed=target.completed)
                again = again or not target.completed
        return again

    async def _truncate(self, tp: TopicPartition, offset: int, *, completed: bool) -> None:
        """``ReplicaFetcherThread.truncate``, then fetch from ``offset`` (or ask again)."""
        try:
            before = (await self.log.offsets(tp))[1]
            start, end = await self.log.truncate_to(tp, offset)
        except KafkaApiError as exc:
            self._fail(tp, exc.code.name)
            return
        if offset < before:
            log.info("replica_truncated", partition=str(tp), offset=offset, log_end_offset=before)
            self.trace(
                "event",
                "replica_truncated",
                topic=tp.topic,
                partition=tp.partition,
                leader=self.leader,
                offset=offset,
                log_end_offset=before,
            )
        self._put(
            tp,
            fetch_offset=end,  # the target, or the log end if that was below it
            log_start_offset=start,
            state=ReplicaState.FETCHING if completed else ReplicaState.TRUNCATING,
        )

    async def _maybe_fetch(self) -> None:
        fetching = self._ready(ReplicaState.FETCHING)
        if not fetching:
            return
        cfg = self.config
        by_topic: dict[TopicName, list[FetchPartition]] = {}
        sent: dict[TopicPartition, PartitionFetchState] = {}
        for s in fetching:
            tp = s.partition
            start = s.log_start_offset
            if start < 0:  # not known since this fetcher took the partition
                try:
                    start, _ = await self.log.offsets(tp)
                except KafkaApiError as exc:
                    self._fail(tp, exc.code.name)
                    continue
                self._put(tp, log_start_offset=start)
                s = self.states[tp]
            sent[tp] = s
            by_topic.setdefault(TopicName(tp.topic), []).append(
                FetchPartition(
                    partition=tp.partition,
                    fetch_offset=s.fetch_offset,
                    partition_max_bytes=cfg.replica_fetch_max_bytes,
                    current_leader_epoch=s.leader_epoch,
                    log_start_offset=start,
                )
            )
        if not sent:
            return
        request = FetchRequestData(
            replica_id=self.broker_id,
            max_wait_ms=cfg.replica_fetch_wait_max_ms,
            min_bytes=cfg.replica_fetch_min_bytes,
            max_bytes=cfg.replica_fetch_response_max_bytes,
            topics=tuple(FetchTopic(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
        )
        started = self.clock.now()
        reply = await self._ask_leader(request)
        if not isinstance(reply, FetchResponseData) or reply.error_code is not ErrorCode.NONE:
            self._delay(sent)
            return
        got_data = False
        for topic in reply.responses:
            for data in topic.partitions:
                tp = TopicPartition(topic.topic, data.partition_index)
                before = sent.get(tp)
                current = self.states.get(tp)
                if before is None or current != before:
                    continue  # removed, re-added or moved meanwhile
                got_data = await self._process(tp, current, data) or got_data
        if not got_data:
            self._idle_until = started + cfg.replica_fetch_wait_max_ms / 1000

    async def _process(
        self, tp: TopicPartition, state: PartitionFetchState, data: FetchPartitionData
    ) -> bool:
        """One partition of a fetch answer; whether records were appended."""
        if data.error_code is not ErrorCode.NONE:
            await self._on_error(tp, data.error_code, state.leader_epoch)
            return False
        # The fetch offset is the local log end: the fetcher set it at the truncation and
        # after every append (an append starting elsewhere is refused by the log).
        start, log_end = state.log_start_offset, state.fetch_offset
        try:
            if data.records:
                start, log_end = await self.log.append_as_follower(tp, data.records)
            high_watermark = follower_high_watermark(data.high_watermark, log_end)
            if high_watermark != state.high_watermark or data.log_start_offset > start:
                start = await self.log.update_follower_offsets(
                    tp,
                    high_watermark=high_watermark,
                    leader_log_start_offset=data.log_start_offset,
                    log_start_offset=start,
                )
        except KafkaApiError as exc:
            if exc.code in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD):
                self._delay((tp,))
            else:
                self._fail(tp, exc.code.name)
            return False
        self._put(tp, fetch_offset=log_end, log_start_offset=start, high_watermark=high_watermark)
        return log_end != state.fetch_offset

    async def _on_error(self, tp: TopicPartition, error: ErrorCode, sent_epoch: int) -> None:
        current = self.states.get(tp)
        if current is None:
            return
        action = fetch_error_action(
            error, sent_leader_epoch=sent_epoch, current_leader_epoch=current.leader_epoch
        )
        match action:
            case FetchErrorAction.TRUNCATE_OUT_OF_RANGE:
                await self._fetch_offset_and_truncate(tp, current)
            case FetchErrorAction.FAIL:
                self._fail(tp, error.name)
            case FetchErrorAction.RETRY:
                self._delay((tp,))

    async def _fetch_offset_and_truncate(
        self, tp: TopicPartition, state: PartitionFetchState
    ) -> None:
        """``fetchOffsetAndTruncate``: below the leader's latest offset (an unclean
        election made a shorter log the leader's) cut there; under the leader's log start
        start over at it; then fetch from max(leader start, own log end)."""
        try:
            start, log_end = await self.log.offsets(tp)
            latest = await self._leader_offset(tp, state, LATEST_TIMESTAMP)
            if latest is None:
                self._delay((tp,))
                return
            if latest < log_end:
                await self._truncate(tp, latest, completed=True)
                return
            earliest = await self._leader_offset(tp, state, EARLIEST_TIMESTAMP)
            if earliest is None:
                self._delay((tp,))
                return
            if earliest > log_end:
                start, log_end = await self.log.truncate_fully_and_start_at(tp, earliest)
                log.info("replica_restarted_at_leader_start", partition=str(tp), offset=earliest)
        except KafkaApiError as exc:
            self._fail(tp, exc.code.name)
            return
        self._put(
            tp,
            fetch_offset=max(earliest, log_end),
            log_start_offset=start,
            state=ReplicaState.FETCHING,
        )

    async def _leader_offset(
        self, tp: TopicPartition, state: PartitionFetchState, timestamp: int
    ) -> int | None:
        """The leader's latest or earliest offset (ListOffsets as a replica)."""
        request = ListOffsetsRequestData(
            replica_id=self.broker_id,
            topics=(
                ListOffsetsTopic(
                    name=TopicName(tp.topic),
                    partitions=(
                        ListOffsetsPartition(
                            partition_index=tp.partition,
                            timestamp=timestamp,
                            current_leader_epoch=state.leader_epoch,
                        ),
                    ),
                ),
            ),
        )
        reply = await self._ask_leader(request)
        if not isinstance(reply, ListOffsetsResponseData):
            return None
        for topic in reply.topics:
            for p in topic.partitions:
                if p.partition_index == tp.partition and p.error_code is ErrorCode.NONE:
                    return p.offset
        return None


REPLICA_FETCHER_MANAGER_ACTOR = "replica_fetcher_manager"


class ReplicaFetcherManager(Actor):
    """The broker's fetchers (see the module docstring): told ``AddFetcherPartitions`` and
    ``RemoveFetcherPartitions`` by the broker, it hands each partition to the fetcher of
    its leader, spawning that fetcher on this node the first time (so a partition's
    messages always reach a running fetcher, in order). ``follower_log`` makes each
    fetcher's port to the local logs."""

    def __init__(
        self,
        broker_id: BrokerId,
        *,
        follower_log: Callable[[Actor], FollowerLog],
        config: FetcherConfig | None = None,
        leader_ref: Callable[[BrokerId], ActorRef] = leader_broker_ref,
        name: str = REPLICA_FETCHER_MANAGER_ACTOR,
    ) -> None:
        super().__init__(name)
        self.broker_id = broker_id
        self.config = config or DEFAULT_FETCHER_CONFIG
        self._follower_log = follower_log
        self._leader_ref = leader_ref
        self.fetchers: dict[tuple[BrokerId, int], ActorRef] = {}
        self.assigned: dict[TopicPartition, tuple[BrokerId, int]] = {}
        """Which fetcher each partition was given to."""

    async def receive(self, msg: Message, ctx: Context) -> Message | None:
        match msg:
            case AddFetcherPartitions(partitions=partitions):
                await self.add_fetcher_for_partitions(partitions)
            case RemoveFetcherPartitions(partitions=partitions):
                self.remove_fetcher_for_partitions(partitions)
            case _:
                pass
        return None

    async def add_fetcher_for_partitions(self, states: Iterable[InitialFetchState]) -> None:
        """``addFetcherForPartitions``: each partition to the fetcher of its leader (a
        partition that had another leader leaves that one's fetcher first)."""
        groups: dict[tuple[BrokerId, int], list[InitialFetchState]] = {}
        for state in states:
            tp = state.partition
            key = (
                state.leader,
                fetcher_id(tp.topic, tp.partition, self.config.num_replica_fetchers),
            )
            previous = self.assigned.get(tp)
            if previous is not None and previous != key:
                self._tell(previous, RemoveFetcherPartitions(partitions=(tp,)))
            self.assigned[tp] = key
            groups.setdefault(key, []).append(state)
        for key in sorted(groups):
            if key not in self.fetchers:
                leader, fid = key
                fetcher = ReplicaFetcher(
                    self.broker_id,
                    leader,
                    fid,
                    self._follower_log,
                    config=self.config,
                    leader_ref=self._leader_ref,
                )
                self.fetchers[key] = await self.node.spawn(fetcher)
            self._tell(key, AddFetcherPartitions(partitions=tuple(groups[key])))

    def remove_fetcher_for_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        """``removeFetcherForPartitions``."""
        by_fetcher: dict[tuple[BrokerId, int], list[TopicPartition]] = {}
        for tp in partitions:
            key = self.assigned.pop(tp, None)
            if key is not None:
                by_fetcher.setdefault(key, []).append(tp)
        for key in sorted(by_fetcher):
            self._tell(key, RemoveFetcherPartitions(partitions=tuple(sorted(by_fetcher[key]))))

    def _tell(self, key: tuple[BrokerId, int], msg: Message) -> None:
        ref = self.fetchers.get(key)
        if ref is not None:
            self.tell(ref, msg)
