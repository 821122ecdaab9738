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

**The mailbox during a round.** Every request to the leader goes out from a helper task
and its answer comes back as ``LeaderAnswered``; until then the fetcher handles its other
messages (a removal, new partitions, a status read), and the answer is applied only to
the partitions still as they were when the request went (not removed, re-added or moved
meanwhile). The local log work (asks to the log manager) holds the mailbox, as Kafka's
fetcher holds its ``partitionMapLock`` for it, but a slice of ``ROUND_SLICE`` partitions
at a time (``FetcherContinue``), so that a removal never waits for a round over thousands
of new partitions. An asked ``RemoveFetcherPartitions`` is thus answered once the
partitions are dropped and no local work on them is under way, at most one slice or one
answer's work later, and never waits on a leader: two brokers whose fetchers fetch from
each other can both wait for their fetchers while handling a StopReplica.

The local log is reached through ``FollowerLog``, the fetcher's own port to the broker's
log manager, made for each fetcher, which asks through it (``Partition.truncateTo``,
``appendRecordsToFollowerOrFutureReplica``, the follower high watermark); the leader is
reached with Kafka's own requests over the Network. The decisions are in
``actors.broker.replica_fetcher_state``.

**Manager.** ``ReplicaFetcherManager`` is an actor of the broker node the broker tells
or asks (as Kafka's ReplicaManager calls its ``replicaFetcherManager``):
``AddFetcherPartitions`` on ``makeFollowers``; ``RemoveFetcherPartitions`` asked before
``makeLeaders`` and before StopReplica deletes logs (answered ``FetcherPartitionsRemoved``
once every fetcher has answered its own), told for a failed log dir or a leaderless
partition; a leader change moves a partition to its new leader's fetcher once the old
one has dropped it. It spawns fetcher actors when first needed; one
left without partitions idles (no timer, no traffic) until it is given partitions again.
``ResizeFetcherPool`` (a dynamic ``num.replica.fetchers``) re-hashes every partition to
the new count (``resizeThreadPool``): each fetcher hands its partitions back with their
states (``TakeFetcherPartitions``), those with an id not below the new count and those
left idle end (``Node.despawn``), and the partitions are added again from the offsets
they had reached.
"""

from __future__ import annotations

import dataclasses
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
from protocol.envelope import EnvelopeKind
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
    FetcherContinue,
    FetcherPartitionsRemoved,
    FetcherPartitionsTaken,
    FetcherStatus,
    FetcherStatusRequest,
    FetcherWork,
    InitialFetchState,
    LeaderAnswered,
    PartitionFetchState,
    RemoveFetcherPartitions,
    ReplicaState,
    ResizeFetcherPool,
    TakeFetcherPartitions,
)

__all__ = [
    "DEFAULT_FETCHER_CONFIG",
    "FETCHER_REMOVAL_TIMEOUT_S",
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


ROUND_SLICE: Final = 64
"""How many partitions' local log work a fetcher does before it lets the messages that
came meanwhile in (``FetcherContinue``): a removal waits for at most that much, never for
a whole round over thousands of new partitions."""


@dataclass(frozen=True, slots=True)
class _Truncating:
    """The truncation's local work goes on with ``remaining`` (ready truncating partitions
    not looked at yet); ``asked``: the latest local epoch of those that need the leader's
    OffsetForLeaderEpoch so far, ``sent`` their states then."""

    remaining: tuple[PartitionFetchState, ...]
    asked: dict[TopicPartition, int]
    sent: dict[TopicPartition, PartitionFetchState]


@dataclass(frozen=True, slots=True)
class _Preparing:
    """The Fetch is being built: ``remaining`` still to look at, ``sent`` the partitions
    (with their states) it asks for so far."""

    remaining: tuple[PartitionFetchState, ...]
    sent: dict[TopicPartition, PartitionFetchState]


@dataclass(frozen=True, slots=True)
class _Epochs:
    """The round's OffsetForLeaderEpoch is out: the latest local epoch of each partition
    asked, and the states they had then."""

    asked: Mapping[TopicPartition, int]
    sent: Mapping[TopicPartition, PartitionFetchState]


@dataclass(frozen=True, slots=True)
class _Fetch:
    """The round's Fetch is out: the states of the partitions fetched, and when."""

    sent: Mapping[TopicPartition, PartitionFetchState]
    started: float


@dataclass(frozen=True, slots=True)
class _OutOfRange:
    """``fetchOffsetAndTruncate`` of ``queue[0]`` (each with the state it had when its
    fetch answered OFFSET_OUT_OF_RANGE): its ListOffsets for ``timestamp`` is out; its
    local offsets were ``(start, log_end)``."""

    queue: tuple[tuple[TopicPartition, PartitionFetchState], ...]
    timestamp: int
    start: int
    log_end: int


_Pending = _Truncating | _Preparing | _Epochs | _Fetch | _OutOfRange


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
        self._calls = 0
        """How many requests the fetcher sent its leader (the number of the last)."""
        self._pending: _Pending | None = None
        """What the round does with the leader's answer to request ``_calls``; None
        between rounds."""

    # ------------------------------------------------------------------ messages

    async def receive(self, msg: Message, ctx: Context) -> Message | None:
        match msg:
            case AddFetcherPartitions(partitions=partitions):
                self._add(partitions)
                self._schedule()
            case RemoveFetcherPartitions(partitions=partitions):
                for tp in partitions:
                    self.states.pop(tp, None)
                return FetcherPartitionsRemoved()
            case TakeFetcherPartitions():
                taken = [s for s in self.states.values() if s.state is not ReplicaState.FAILED]
                for state in taken:
                    del self.states[state.partition]
                return FetcherPartitionsTaken(
                    partitions=tuple(sorted(taken, key=lambda s: s.partition)),
                    failed=tuple(sorted(self.states)),
                )
            case FetcherWork():
                self._scheduled = False
                if self._pending is None:
                    await self._maybe_truncate()
                    self._schedule()
            case LeaderAnswered(call=call, reply=reply):
                await self._go_on(call, reply)
            case FetcherContinue(call=call):
                await self._go_on(call, None)
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
        """Queue the next round: now, or when the first delayed partition is due (none
        while a request of this round is out: its answer goes on with the round)."""
        if self._scheduled or self._pending is not None:
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

    # ------------------------------------------------------------------ the leader

    def _call_leader(self, request: Message, pending: _Pending) -> None:
        """Send ``request`` to the leader from a helper task and leave the mailbox free:
        the answer comes back as ``LeaderAnswered``, and ``pending`` says what the round
        does with it."""
        self._calls += 1
        self._pending = pending
        self.start_soon(self._ask_leader, self._calls, request)

    async def _ask_leader(self, call: int, request: Message) -> None:
        """A helper task: ask the leader, hand the answer (None when it did not answer in
        time or refused) to the fetcher's mailbox."""
        reply: Message | None
        try:
            reply = await self.ask(
                self._leader_ref,
                request,
                timeout=self.config.replica_socket_timeout_ms / 1000,
            )
        except KemuError as exc:
            log.info("replica_fetcher_leader_unavailable", leader=self.leader, error=repr(exc))
            reply = None
        self.send_self(LeaderAnswered(call=call, reply=reply))

    def _let_messages_in(self, pending: _Pending) -> None:
        """Stop the round's local work here, go on (``pending``) after the messages that
        came meanwhile."""
        self._calls += 1
        self._pending = pending
        self.send_self(FetcherContinue(call=self._calls))

    async def _go_on(self, call: int, reply: Message | None) -> None:
        """Go on with the round where step ``call`` left it; then, once the round is over,
        schedule the next."""
        pending = self._pending
        if pending is None or call != self._calls:
            return
        self._pending = None
        await self._resume(pending, reply)
        self._schedule()

    async def _resume(self, pending: _Pending, reply: Message | None) -> None:
        """Go on with the round where its request to the leader, or a slice of its local
        work, left it."""
        match pending:
            case _Truncating(remaining=remaining, asked=asked, sent=sent):
                await self._truncation_slice(remaining, asked, sent)
            case _Preparing(remaining=remaining, sent=sent):
                await self._fetch_slice(remaining, sent)
            case _Epochs():
                await self._on_epochs(pending, reply)
            case _Fetch():
                await self._on_fetched(pending, reply)
            case _OutOfRange():
                await self._on_leader_offset(pending, reply)

    # ------------------------------------------------------------------ a round

    async def _maybe_truncate(self) -> None:
        """``maybeTruncate``, then (once no OffsetForLeaderEpoch is needed) the fetch."""
        await self._truncation_slice(tuple(self._ready(ReplicaState.TRUNCATING)), {}, {})

    async def _truncation_slice(
        self,
        remaining: tuple[PartitionFetchState, ...],
        asked: dict[TopicPartition, int],
        sent: dict[TopicPartition, PartitionFetchState],
    ) -> None:
        """The truncation's local work over the next ``ROUND_SLICE`` partitions still as
        they were listed: a log without epochs is cut at the high watermark, one with
        epochs joins the OffsetForLeaderEpoch sent once every partition was looked at."""
        for s in remaining[:ROUND_SLICE]:
            tp = s.partition
            if self.states.get(tp) != s:
                continue  # removed or re-added while the fetcher let messages in
            try:
                latest = await self.log.latest_epoch(tp)
            except KafkaApiError as exc:
                self._fail(tp, exc.code.name)
                continue
            if latest is None:  # no epochs: cut at the high watermark
                await self._truncate(tp, s.fetch_offset, completed=True)
            else:
                asked[tp] = latest
                sent[tp] = s
        if len(remaining) > ROUND_SLICE:
            self._let_messages_in(_Truncating(remaining[ROUND_SLICE:], asked, sent))
            return
        current = {tp: epoch for tp, epoch in asked.items() if self.states.get(tp) == sent[tp]}
        if not current:
            await self._maybe_fetch()
            return
        by_topic: dict[TopicName, list[OffsetForLeaderPartition]] = {}
        for tp, epoch in sorted(current.items()):
            by_topic.setdefault(TopicName(tp.topic), []).append(
                OffsetForLeaderPartition(
                    partition=tp.partition,
                    leader_epoch=epoch,
                    current_leader_epoch=sent[tp].leader_epoch,
                )
            )
        request = OffsetForLeaderEpochRequestData(
            replica_id=self.broker_id,
            topics=tuple(
                OffsetForLeaderTopic(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()
            ),
        )
        self._call_leader(request, _Epochs(asked=current, sent={tp: sent[tp] for tp in current}))

    async def _on_epochs(self, pending: _Epochs, reply: Message | None) -> None:
        """The OffsetForLeaderEpoch answer: cut each partition still as it was asked
        about where ``getOffsetTruncationState`` says, then truncate again (the leader
        named an epoch the follower lacks) or fetch. An error delays the partition
        (``handlePartitionsWithErrors``), a fencing at an unchanged epoch fails it."""
        if not isinstance(reply, OffsetForLeaderEpochResponseData):
            self._delay(pending.asked)
            await self._maybe_fetch()
            return
        again = False
        for topic in reply.topics:
            for result in topic.partitions:
                tp = TopicPartition(topic.topic, result.partition)
                state = self.states.get(tp)
                if state is None or state != pending.sent.get(tp):
                    continue  # removed, re-added or moved meanwhile
                if result.error_code is not ErrorCode.NONE:
                    if self._on_error(tp, result.error_code, state.leader_epoch):
                        self._delay((tp,))
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
        if again:
            await self._maybe_truncate()
        else:
            await self._maybe_fetch()

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
        """``maybeFetch``: one Fetch for every ready fetching partition."""
        fetching = self._ready(ReplicaState.FETCHING)
        if fetching:
            await self._fetch_slice(tuple(fetching), {})

    async def _fetch_slice(
        self,
        remaining: tuple[PartitionFetchState, ...],
        sent: dict[TopicPartition, PartitionFetchState],
    ) -> None:
        """The Fetch's local work (the log start of a partition new to this fetcher) over
        the next ``ROUND_SLICE`` partitions still as they were listed; the Fetch goes
        once every partition was looked at."""
        for s in remaining[:ROUND_SLICE]:
            tp = s.partition
            if self.states.get(tp) != s:
                continue  # removed or re-added while the fetcher let messages in
            if s.log_start_offset < 0:  # not known since this fetcher took the partition
                try:
                    start, _ = await self.log.offsets(tp)
                except KafkaApiError as exc:
                    self._fail(tp, exc.code.name)
                    continue
                self._put(tp, log_start_offset=start)
                s = self.states[tp]
            sent[tp] = s
        if len(remaining) > ROUND_SLICE:
            self._let_messages_in(_Preparing(remaining[ROUND_SLICE:], sent))
            return
        current = {tp: s for tp, s in sent.items() if self.states.get(tp) == s}
        if not current:
            return
        cfg = self.config
        by_topic: dict[TopicName, list[FetchPartition]] = {}
        for tp, s in current.items():
            by_topic.setdefault(TopicName(tp.topic), []).append(
                FetchPartition(
                    partition=tp.partition,
                    fetch_offset=s.fetch_offset,
                    partition_max_bytes=cfg.replica_fetch_max_bytes,
                    current_leader_epoch=s.leader_epoch,
                    log_start_offset=s.log_start_offset,
                )
            )
        request = FetchRequestData(
            replica_id=self.broker_id,
            max_wait_ms=cfg.replica_fetch_wait_max_ms,
            min_bytes=cfg.replica_fetch_min_bytes,
            max_bytes=cfg.replica_fetch_response_max_bytes,
            topics=tuple(FetchTopic(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
        )
        self._call_leader(request, _Fetch(sent=current, started=self.clock.now()))

    async def _on_fetched(self, pending: _Fetch, reply: Message | None) -> None:
        """The Fetch answer (``processFetchRequest``): each partition still as it was
        sent (not removed, re-added or moved meanwhile) takes its records; then the
        partitions whose fetch offset was out of range, one after the other."""
        if not isinstance(reply, FetchResponseData) or reply.error_code is not ErrorCode.NONE:
            self._delay(pending.sent)
            return
        got_data = False
        out_of_range: list[tuple[TopicPartition, PartitionFetchState]] = []
        for topic in reply.responses:
            for data in topic.partitions:
                tp = TopicPartition(topic.topic, data.partition_index)
                before = pending.sent.get(tp)
                current = self.states.get(tp)
                if before is None or current != before:
                    continue  # removed, re-added or moved meanwhile
                if data.error_code is not ErrorCode.NONE:
                    if self._on_error(tp, data.error_code, current.leader_epoch):
                        out_of_range.append((tp, current))
                    continue
                got_data = await self._process(tp, current, data) or got_data
        if not got_data:
            self._idle_until = pending.started + self.config.replica_fetch_wait_max_ms / 1000
        await self._next_out_of_range(tuple(out_of_range))

    async def _process(
        self, tp: TopicPartition, state: PartitionFetchState, data: FetchPartitionData
    ) -> bool:
        """One partition of a fetch answer without error; whether records were appended."""
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

    def _on_error(self, tp: TopicPartition, error: ErrorCode, sent_epoch: int) -> bool:
        """A partition's error from the leader: fail or delay it; True when its fetch
        offset was out of range (``fetchOffsetAndTruncate`` is the caller's to run)."""
        current = self.states.get(tp)
        if current is None:
            return False
        action = fetch_error_action(
            error, sent_leader_epoch=sent_epoch, current_leader_epoch=current.leader_epoch
        )
        match action:
            case FetchErrorAction.TRUNCATE_OUT_OF_RANGE:
                return True
            case FetchErrorAction.FAIL:
                self._fail(tp, error.name)
            case FetchErrorAction.RETRY:
                self._delay((tp,))
        return False

    async def _next_out_of_range(
        self, queue: tuple[tuple[TopicPartition, PartitionFetchState], ...]
    ) -> None:
        """``fetchOffsetAndTruncate`` of the first partition of ``queue`` still as its
        fetch left it: its local offsets, then the leader's latest offset."""
        while queue:
            (tp, state), rest = queue[0], queue[1:]
            if self.states.get(tp) == state:
                try:
                    start, log_end = await self.log.offsets(tp)
                except KafkaApiError as exc:
                    self._fail(tp, exc.code.name)
                else:
                    self._call_leader(
                        self._list_offsets(tp, state, LATEST_TIMESTAMP),
                        _OutOfRange(
                            queue=queue, timestamp=LATEST_TIMESTAMP, start=start, log_end=log_end
                        ),
                    )
                    return
            queue = rest

    async def _on_leader_offset(self, pending: _OutOfRange, reply: Message | None) -> None:
        """``fetchOffsetAndTruncate`` goes on: below the leader's latest offset (an
        unclean election made a shorter log the leader's) cut there; under the leader's
        log start start over at it; then fetch from max(leader start, own log end). No
        answer delays the partition. Then the next partition of the queue."""
        (tp, state), rest = pending.queue[0], pending.queue[1:]
        if self.states.get(tp) == state:
            offset = _listed_offset(reply, tp)
            if offset is None:
                self._delay((tp,))
            elif pending.timestamp == LATEST_TIMESTAMP:
                if offset < pending.log_end:
                    await self._truncate(tp, offset, completed=True)
                else:
                    self._call_leader(
                        self._list_offsets(tp, state, EARLIEST_TIMESTAMP),
                        dataclasses.replace(pending, timestamp=EARLIEST_TIMESTAMP),
                    )
                    return
            else:
                await self._start_at_leader_start(tp, offset, pending.start, pending.log_end)
        await self._next_out_of_range(rest)

    async def _start_at_leader_start(
        self, tp: TopicPartition, earliest: int, start: int, log_end: int
    ) -> None:
        """Fetch from max(the leader's log start, the local log end), starting the local
        log over at the leader's start when its end is below it."""
        if earliest > log_end:
            try:
                start, log_end = await self.log.truncate_fully_and_start_at(tp, earliest)
            except KafkaApiError as exc:
                self._fail(tp, exc.code.name)
                return
            log.info("replica_restarted_at_leader_start", partition=str(tp), offset=earliest)
        self._put(
            tp,
            fetch_offset=max(earliest, log_end),
            log_start_offset=start,
            state=ReplicaState.FETCHING,
        )

    def _list_offsets(
        self, tp: TopicPartition, state: PartitionFetchState, timestamp: int
    ) -> ListOffsetsRequestData:
        """ListOffsets as a replica for the leader's latest or earliest offset."""
        return ListOffsetsRequestData(
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


def _listed_offset(reply: Message | None, tp: TopicPartition) -> int | None:
    """The offset a ListOffsets answer gives ``tp`` without error, if any."""
    if not isinstance(reply, ListOffsetsResponseData):
        return None
    for topic in reply.topics:
        if topic.name != tp.topic:
            continue
        for p in topic.partitions:
            if p.partition_index == tp.partition and p.error_code is ErrorCode.NONE:
                return p.offset
    return None


REPLICA_FETCHER_MANAGER_ACTOR = "replica_fetcher_manager"

FETCHER_REMOVAL_TIMEOUT_S: Final = 600.0
"""How long the manager waits for a fetcher to drop partitions: the local log work of one
answer, which waits on the log manager as long as a bulk creation or deletion keeps it
busy (Kafka's ``removeFetcherForPartitions`` waits for the fetcher's lock without end)."""


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
                if ctx.kind is EnvelopeKind.ASK:
                    await self.remove_fetcher_for_partitions(partitions)
                    return FetcherPartitionsRemoved()
                self.tell_fetchers_to_remove(partitions)
            case ResizeFetcherPool(num_fetchers=num_fetchers):
                await self.resize_thread_pool(num_fetchers)
            case _:
                pass
        return None

    async def add_fetcher_for_partitions(self, states: Iterable[InitialFetchState]) -> None:
        """``addFetcherForPartitions``: each partition to the fetcher of its leader (a
        partition that had another leader leaves that one's fetcher first, waited for:
        the two never work on its log at the same time)."""
        groups: dict[tuple[BrokerId, int], list[InitialFetchState]] = {}
        moved: list[TopicPartition] = []
        for state in states:
            tp = state.partition
            key = (
                state.leader,
                fetcher_id(tp.topic, tp.partition, self.config.num_replica_fetchers),
            )
            previous = self.assigned.get(tp)
            if previous is not None and previous != key:
                moved.append(tp)
            groups.setdefault(key, []).append(state)
        if moved:
            await self.remove_fetcher_for_partitions(moved)
        for key, group in groups.items():
            for state in group:
                self.assigned[state.partition] = key
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

    async def remove_fetcher_for_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        """``removeFetcherForPartitions``: returns once every fetcher that had one of
        ``partitions`` has dropped it, none in the middle of its local log work on it
        (a fetcher's mailbox is free while its requests to the leader are out, so this
        waits at most for the local work of one answer)."""
        for key, tps in self._by_fetcher(partitions):
            ref = self.fetchers.get(key)
            if ref is None:
                continue
            try:
                await self.ask(
                    ref, RemoveFetcherPartitions(partitions=tps), timeout=FETCHER_REMOVAL_TIMEOUT_S
                )
            except KemuError as exc:  # only a stopping node: the fetcher goes with it
                log.warning("fetcher_removal_unanswered", fetcher=ref.name, error=repr(exc))

    async def resize_thread_pool(self, new_size: int) -> None:
        """``resizeThreadPool``: with a new ``num.replica.fetchers``, each fetcher in turn
        gives up its partitions with their fetch states (``partitionsAndOffsets``), is
        shut down when its fetcher id is not below the new count, and the partitions are
        added again (``addFetcherForPartitions``), to the fetcher the new count hashes
        them to, from the offset they had reached (truncating first, as any added
        partition). Then every fetcher left without partitions is shut down
        (``shutdownIdleFetcherThreads``). A failed partition stays failed in its fetcher,
        or is dropped with it (as Kafka's ``failedPartitions``, until its next
        LeaderAndIsr)."""
        current = self.config.num_replica_fetchers
        log.info("resizing_fetcher_pool", current=current, new=new_size)
        self.config = dataclasses.replace(self.config, num_replica_fetchers=new_size)
        if new_size != current:
            for key in sorted(self.fetchers):
                try:
                    taken = await self.ask(
                        self.fetchers[key],
                        TakeFetcherPartitions(),
                        timeout=FETCHER_REMOVAL_TIMEOUT_S,
                    )
                except KemuError as exc:  # only a stopping node: the fetcher goes with it
                    log.warning("fetcher_removal_unanswered", fetcher=key, error=repr(exc))
                    continue
                assert isinstance(taken, FetcherPartitionsTaken)
                for state in taken.partitions:
                    self.assigned.pop(state.partition, None)
                if key[1] >= new_size:
                    for tp in taken.failed:
                        self.assigned.pop(tp, None)
                    self._shutdown(key)
                leader = key[0]
                await self.add_fetcher_for_partitions(
                    InitialFetchState(
                        partition=state.partition,
                        leader=leader,
                        leader_epoch=state.leader_epoch,
                        fetch_offset=state.fetch_offset,
                    )
                    for state in taken.partitions
                )
        busy = set(self.assigned.values())
        for key in sorted(self.fetchers):
            if key not in busy:
                self._shutdown(key)
        self.trace(
            "event",
            "replica_fetchers_resized",
            broker=self.broker_id,
            fetchers=sorted(ref.name for ref in self.fetchers.values()),
        )

    def _shutdown(self, key: tuple[BrokerId, int]) -> None:
        """The fetcher ``key`` ends (``AbstractFetcherThread.shutdown``); it has no
        partition left."""
        ref = self.fetchers.pop(key)
        self.node.despawn(ref.name)

    def tell_fetchers_to_remove(self, partitions: Iterable[TopicPartition]) -> None:
        """``removeFetcherForPartitions`` without waiting for the fetchers."""
        for key, tps in self._by_fetcher(partitions):
            self._tell(key, RemoveFetcherPartitions(partitions=tps))

    def _by_fetcher(
        self, partitions: Iterable[TopicPartition]
    ) -> list[tuple[tuple[BrokerId, int], tuple[TopicPartition, ...]]]:
        """``partitions`` leave ``assigned``; those each fetcher had, in fetcher order."""
        by_fetcher: dict[tuple[BrokerId, int], list[TopicPartition]] = {}
        for tp in partitions:
            key = self.assigned.pop(tp, None)
            if key is not None:
                by_fetcher.setdefault(key, []).append(tp)
        return [(key, tuple(sorted(by_fetcher[key]))) for key in sorted(by_fetcher)]

    def _tell(self, key: tuple[BrokerId, int], msg: Message) -> None:
        ref = self.fetchers.get(key)
        if ref is not None:
            self.tell(ref, msg)
