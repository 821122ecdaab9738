"""A consumer in a group over the Kafka wire: what Kafka's ``KafkaConsumer`` does with
``subscribe`` (``ConsumerCoordinator`` over ``AbstractCoordinator``, the eager protocol),
on ``KafkaDataClient``; and the consumer protocol's bytes and ``RangeAssignor``, which the
chaos runs' members (``cluster.chaos.group``) use too.

``GroupConsumer`` subscribes to one topic. ``ensure_active`` finds the group's
coordinator (FindCoordinator), joins (JoinGroup, first without a member id:
MEMBER_ID_REQUIRED names it), the leader assigns the topic's partitions as
``RangeAssignor`` does and sends the assignment with its SyncGroup, and the member takes
its part from the SyncGroup answer and starts each partition at its committed offset
(OffsetFetch), or where ``auto.offset.reset`` says (ListOffsets) when the group has none.
``heartbeating`` runs a task that heartbeats every ``heartbeat.interval.ms`` (on a
connection of its own to the coordinator, as Kafka's heartbeat thread does), and
``maintain`` commits the positions every ``auto.commit.interval.ms`` (with
``enable.auto.commit``) and rejoins when the coordinator says so
(REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, the last without its
member id), committing first (``onJoinPrepare``); a coordinator that is not (or no
longer) reachable is looked up again. ``close`` commits and leaves the group
(LeaveGroup). The caller fetches the partitions of ``positions`` and moves them.
"""

from __future__ import annotations

import struct
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Final

import anyio

from actors.group import consumer_assignment, consumer_subscription
from actors.runtime.clock import Clock
from cluster.kafka.client import KafkaClientError, KafkaDataClient, api_error
from protocol.errors import ErrorCode
from protocol.group import (
    UNKNOWN_MEMBER_ID,
    HeartbeatRequestData,
    HeartbeatResponseData,
    JoinGroupMember,
    JoinGroupProtocol,
    JoinGroupRequestData,
    JoinGroupResponseData,
    LeaveGroupMember,
    LeaveGroupRequestData,
    OffsetCommitPartition,
    OffsetCommitRequestData,
    OffsetCommitResponseData,
    OffsetCommitTopic,
    OffsetFetchRequestData,
    OffsetFetchResponseData,
    OffsetFetchTopic,
    SyncGroupAssignment,
    SyncGroupRequestData,
    SyncGroupResponseData,
)
from protocol.ids import TopicName
from protocol.kafka_api import KafkaApiRequestData, KafkaApiResponseData
from protocol.kafka_data import LATEST_TIMESTAMP

__all__ = [
    "COORDINATOR_ERRORS",
    "PROTOCOL",
    "REJOIN_ERRORS",
    "GroupConfig",
    "GroupConsumer",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
    "range_assign",
]

TP = tuple[str, int]

PROTOCOL: Final = "range"
"""The assignor every member offers (``RangeAssignor``'s name)."""
_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_NO_USER_DATA: Final = _I32.pack(-1)
REJOIN_ERRORS: Final = frozenset(
    {ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID}
)
"""Answers that end the member's generation: it joins again."""
COORDINATOR_ERRORS: Final = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)
"""Answers after which the coordinator is looked up again (``markCoordinatorUnknown``)."""


# ----------------------------------------------------------------------------- the protocol


def _string(text: str) -> bytes:
    raw = text.encode()
    return _I16.pack(len(raw)) + raw


def encode_subscription(topics: Sequence[str]) -> bytes:
    """``ConsumerProtocolSubscription`` v0: the topics, no user data."""
    return _I16.pack(0) + _I32.pack(len(topics)) + b"".join(map(_string, topics)) + _NO_USER_DATA


def decode_subscription(data: bytes) -> list[str]:
    """The topics of a ``ConsumerProtocolSubscription`` (the coordinator's own reading,
    ``consumer_subscription``); [] for bytes that do not read."""
    return consumer_subscription(data) or []


def encode_assignment(partitions: Sequence[TP]) -> bytes:
    """``ConsumerProtocolAssignment`` v0: partitions by topic, no user data."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    out = _I16.pack(0) + _I32.pack(len(by_topic))
    for topic, numbers in sorted(by_topic.items()):
        out += _string(topic) + _I32.pack(len(numbers))
        out += b"".join(_I32.pack(n) for n in sorted(numbers))
    return out + _NO_USER_DATA


def range_assign(
    subscriptions: Mapping[str, Sequence[str]], partitions: Mapping[str, int]
) -> dict[str, list[TP]]:
    """``RangeAssignor.assign``: for each topic, its partitions split in ranges over the
    members subscribed to it in member-id order, the first ``count % members`` one
    partition longer. ``partitions``: each existing topic's partition count."""
    out: dict[str, list[TP]] = {member: [] for member in subscriptions}
    for topic, count in sorted(partitions.items()):
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not members:
            continue
        each, extra = divmod(count, len(members))
        for i, member in enumerate(members):
            start = each * i + min(i, extra)
            length = each + (1 if i < extra else 0)
            out[member] += [(topic, p) for p in range(start, start + length)]
    return out


# ----------------------------------------------------------------------------- a member


@dataclass(frozen=True)
class GroupConfig:
    """The consumer configs a member follows (Kafka's names and defaults)."""

    session_timeout_ms: int = 10_000
    rebalance_timeout_ms: int = 300_000  # max.poll.interval.ms
    heartbeat_interval_ms: int = 3_000
    auto_commit: bool = True  # enable.auto.commit
    auto_commit_interval_ms: int = 5_000
    reset: int = LATEST_TIMESTAMP  # auto.offset.reset: LATEST_ or EARLIEST_TIMESTAMP
    client_id: str = "consumer"


class GroupConsumer:
    """One member of ``group`` subscribed to ``topic`` (see the module doc)."""

    def __init__(
        self, client: KafkaDataClient, group: str, topic: str, config: GroupConfig, clock: Clock
    ) -> None:
        self.client = client
        self.group = group
        self.topic = topic
        self.config = config
        self.clock = clock
        self.member_id = UNKNOWN_MEMBER_ID
        self.generation = -1
        self.coordinator: tuple[str, int] | None = None
        self.rejoin = True
        self.positions: dict[int, int] = {}
        """Where each assigned partition is read next: the caller moves them."""
        self.committed: dict[int, int] = {}
        self.next_heartbeat = 0.0
        self.heartbeats = 0
        """Heartbeats the coordinator answered without an error."""
        self.next_commit = 0.0

    @property
    def _request_timeout(self) -> float:
        return self.client.config.request_timeout_ms / 1000

    async def _ask(
        self, request: KafkaApiRequestData, timeout: float | None = None
    ) -> KafkaApiResponseData | ErrorCode:
        """The coordinator's answer, looked up first if unknown; NETWORK_EXCEPTION for a
        failed connection or no answer in time (the coordinator is then unknown)."""
        if self.coordinator is None:
            found = await self.client.find_coordinator(self.group)
            self.coordinator = (found.host, found.port)
        try:
            return await self.client.request_broker(
                self.coordinator,
                request,
                timeout=timeout or self._request_timeout,
                coordinator=True,
            )
        except KafkaClientError:
            self.coordinator = None
            return ErrorCode.NETWORK_EXCEPTION

    def _react(self, code: ErrorCode) -> None:
        """``AbstractCoordinator``'s handling of an error answer."""
        if code in REJOIN_ERRORS:
            self.rejoin = True
            if code is not ErrorCode.REBALANCE_IN_PROGRESS:
                self.member_id = UNKNOWN_MEMBER_ID
                self.generation = -1
        elif code in COORDINATOR_ERRORS:
            self.coordinator = None
        elif code is not ErrorCode.NONE:
            raise api_error(code, None)

    async def _backoff(self) -> None:
        await self.clock.sleep(self.client.config.retry_backoff_ms / 1000)

    # -- joining

    async def ensure_active(self) -> None:
        """``ensureActiveGroup``: join (again) until the member has an assignment."""
        while self.rejoin:
            await self._join()

    async def _join(self) -> None:
        """``joinGroupIfNeeded``, once: commit what was consumed, give up every partition
        (the eager protocol), JoinGroup and SyncGroup, then the positions."""
        if self.positions and self.generation >= 0 and self.config.auto_commit:
            await self.commit()  # onJoinPrepare's synchronous auto-commit
        self.positions = {}
        config = self.config
        reply = await self._ask(
            JoinGroupRequestData(
                group_id=self.group,
                session_timeout_ms=config.session_timeout_ms,
                rebalance_timeout_ms=config.rebalance_timeout_ms,
                member_id=self.member_id,
                protocol_type="consumer",
                protocols=(
                    JoinGroupProtocol(name=PROTOCOL, metadata=encode_subscription([self.topic])),
                ),
                client_id=config.client_id,
            ),
            config.rebalance_timeout_ms / 1000 + self._request_timeout,
        )
        if isinstance(reply, JoinGroupResponseData) and reply.error_code in (
            ErrorCode.MEMBER_ID_REQUIRED,
            ErrorCode.NONE,
        ):
            self.member_id = reply.member_id
        if not isinstance(reply, JoinGroupResponseData) or reply.error_code is not ErrorCode.NONE:
            code = reply.error_code if isinstance(reply, JoinGroupResponseData) else _code(reply)
            if code is not ErrorCode.MEMBER_ID_REQUIRED:
                self._failed(code)
                await self._backoff()
            return
        self.generation = reply.generation_id
        assignments = await self._assign(reply.members) if reply.leader == reply.member_id else ()
        answer = await self._ask(
            SyncGroupRequestData(
                group_id=self.group,
                generation_id=self.generation,
                member_id=self.member_id,
                assignments=assignments,
                protocol_type="consumer",
                protocol_name=PROTOCOL,
            ),
            config.session_timeout_ms / 1000 + self._request_timeout,
        )
        if not isinstance(answer, SyncGroupResponseData) or answer.error_code is not ErrorCode.NONE:
            self._failed(
                answer.error_code if isinstance(answer, SyncGroupResponseData) else _code(answer)
            )
            await self._backoff()
            return
        owned = sorted(p for t, p in consumer_assignment(answer.assignment) if t == self.topic)
        self.rejoin = False
        now = self.clock.now()
        self.next_heartbeat = now + config.heartbeat_interval_ms / 1000
        self.next_commit = now + config.auto_commit_interval_ms / 1000
        await self._start_positions(owned)

    def _failed(self, code: ErrorCode) -> None:
        """A JoinGroup or SyncGroup that did not end in an assignment."""
        self._react(code)
        if code is ErrorCode.UNKNOWN_MEMBER_ID:
            return
        if code not in REJOIN_ERRORS | COORDINATOR_ERRORS:
            raise api_error(code, None)

    async def _assign(self, members: Sequence[JoinGroupMember]) -> tuple[SyncGroupAssignment, ...]:
        """The leader's ``performAssignment``: RangeAssignor over the members'
        subscriptions and the topics' partitions now."""
        subscriptions = {m.member_id: decode_subscription(m.metadata) for m in members}
        counts = {}
        for topic in sorted({t for ts in subscriptions.values() for t in ts}):
            try:
                counts[topic] = len(await self.client.partitions(topic))
            except KafkaClientError:
                continue  # not a topic (yet): nothing of it to assign
        plan = range_assign(subscriptions, counts)
        return tuple(
            SyncGroupAssignment(member_id=m, assignment=encode_assignment(plan[m]))
            for m in sorted(plan)
        )

    async def _start_positions(self, owned: Sequence[int]) -> None:
        """Each owned partition's committed offset (OffsetFetch), or where
        ``auto.offset.reset`` says."""
        self.committed = {}
        if owned:
            reply = await self._ask(
                OffsetFetchRequestData(
                    group_id=self.group,
                    topics=(
                        OffsetFetchTopic(
                            name=TopicName(self.topic), partition_indexes=tuple(owned)
                        ),
                    ),
                )
            )
            if not isinstance(reply, OffsetFetchResponseData):
                self._react(_code(reply))
                self.rejoin = True  # the offsets are read again with the next assignment
                return
            if reply.error_code is not ErrorCode.NONE:
                self._react(reply.error_code)
                self.rejoin = True
                return
            self.committed = {
                p.partition_index: p.committed_offset
                for t in reply.topics
                for p in t.partitions
                if p.error_code is ErrorCode.NONE and p.committed_offset >= 0
            }
        positions = {}
        for partition in owned:
            found = self.committed.get(partition)
            positions[partition] = found if found is not None else await self.reset(partition)
        self.positions = positions

    async def reset(self, partition: int) -> int:
        """Where ``auto.offset.reset`` starts ``partition``: its log start or end."""
        answer = await self.client.list_offset(self.topic, partition, self.config.reset)
        if answer.error_code is not ErrorCode.NONE:
            raise api_error(answer.error_code, None)
        return answer.offset

    # -- the generation's work

    async def maintain(self) -> None:
        """What a poll does besides fetching: auto-commit when due, and a rejoin when the
        coordinator asked for one (the heartbeats go on in ``heartbeating``)."""
        if not self.rejoin and self.config.auto_commit and self.clock.now() >= self.next_commit:
            await self.commit()
        await self.ensure_active()

    @asynccontextmanager
    async def heartbeating(self) -> AsyncIterator[None]:
        """Heartbeats in a task of their own while the body runs, as
        ``AbstractCoordinator.HeartbeatThread`` sends them beside the polls: a long fetch
        never holds one back past ``session.timeout.ms``."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._heartbeats)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()

    async def _heartbeats(self) -> None:
        """Every ``heartbeat.interval.ms`` of a generation, a Heartbeat; none while the
        member (re)joins. An answer that comes after the generation changed is dropped
        (``HeartbeatResponseHandler``'s generation check)."""
        while True:
            wait = self.next_heartbeat - self.clock.now()
            if self.rejoin or self.generation < 0:
                wait = max(wait, self.client.config.retry_backoff_ms / 1000)
            if wait > 0:
                await self.clock.sleep(wait)
                continue
            generation, member_id = self.generation, self.member_id
            self.next_heartbeat = self.clock.now() + self.config.heartbeat_interval_ms / 1000
            reply = await self._ask(
                HeartbeatRequestData(
                    group_id=self.group, generation_id=generation, member_id=member_id
                )
            )
            if generation != self.generation or self.rejoin:
                continue
            code = reply.error_code if isinstance(reply, HeartbeatResponseData) else _code(reply)
            self.heartbeats += code is ErrorCode.NONE
            self._react(code)

    async def commit(self) -> None:
        """OffsetCommit of the positions that moved since the last commit."""
        self.next_commit = self.clock.now() + self.config.auto_commit_interval_ms / 1000
        moved = {p: o for p, o in sorted(self.positions.items()) if self.committed.get(p) != o}
        if not moved:
            return
        reply = await self._ask(
            OffsetCommitRequestData(
                group_id=self.group,
                generation_id=self.generation,
                member_id=self.member_id,
                topics=(
                    OffsetCommitTopic(
                        name=TopicName(self.topic),
                        partitions=tuple(
                            OffsetCommitPartition(partition_index=p, committed_offset=o)
                            for p, o in moved.items()
                        ),
                    ),
                ),
            )
        )
        if not isinstance(reply, OffsetCommitResponseData):
            self._react(_code(reply))
            return
        codes = set()
        for partition in (p for t in reply.topics for p in t.partitions):
            if partition.error_code is ErrorCode.NONE:
                self.committed[partition.partition_index] = moved[partition.partition_index]
            codes.add(partition.error_code)
        for code in sorted(codes - {ErrorCode.NONE}):
            self._react(code)

    async def close(self) -> None:
        """``close``: commit (with ``enable.auto.commit``), then LeaveGroup, within
        ``request.timeout.ms`` (Kafka's consumer: 30 seconds); a member not in a group
        just stops. Each is tried once more after a lost connection: a request the exit
        cut off leaves its connection unusable, and the next one opens another."""
        if self.member_id == UNKNOWN_MEMBER_ID:
            return
        with anyio.move_on_after(self._request_timeout):
            for _ in range(2):
                if self.rejoin or self.generation < 0 or not self.config.auto_commit:
                    break
                await self.commit()
                if self.coordinator is not None:
                    break
            leave = LeaveGroupRequestData(
                group_id=self.group, members=(LeaveGroupMember(member_id=self.member_id),)
            )
            for _ in range(2):
                if not isinstance(await self._ask(leave), ErrorCode):
                    break


def _code(reply: object) -> ErrorCode:
    """The error of an answer of the wrong type (a failed request: its code)."""
    return reply if isinstance(reply, ErrorCode) else ErrorCode.UNKNOWN_SERVER_ERROR
