"""Consumers in a group: the ``consume`` step with ``group``.

Each member is a task of the run's client node that behaves as Kafka's consumer does
with ``subscribe`` (``ConsumerCoordinator`` over ``AbstractCoordinator``, the eager
protocol): it finds its coordinator (FindCoordinator, asked of a running broker), joins
(JoinGroup, first without a member id: MEMBER_ID_REQUIRED names it), the leader assigns
the partitions of the subscribed topics as ``RangeAssignor`` does and sends the
assignment with its SyncGroup, every member takes its part from the SyncGroup answer,
reads its committed offsets (OffsetFetch; none: from offset 0), heartbeats every
``heartbeat_interval_ms``, commits its positions every ``commit_interval`` seconds
(OffsetCommit with its generation and member id), fetches its partitions from their
leaders, and leaves (LeaveGroup) when it stops. REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION
and UNKNOWN_MEMBER_ID send it back to JoinGroup (the last without its member id);
NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, no answer and a
disconnect (NETWORK_EXCEPTION: the coordinator's process ended, or refused the connection;
``AbstractCoordinator`` marks the coordinator unknown) make it look for the coordinator
again. The leader also rejoins when the partitions of a
subscribed topic change (``ConsumerCoordinator.rejoinNeededOrPending``: its metadata
snapshot no longer matches the one it assigned from), e.g. when a topic is deleted.

Every request goes through ``Harness.ask_broker``, as the ``produce`` workload's: to the
broker's ``broker`` actor in one process (a deterministic run stays byte-identical), over
the Kafka wire to its listener with broker processes. A member traces what the group
rules judge (node ``chaos``, actor ``workload``): ``consumer_joined``,
``consumer_assigned`` (its partitions in a generation), ``consumer_offsets_fetched``,
``consumer_committed`` (each partition's offset and answer), ``consumer_offset_reset``,
``consumer_left``; at the end of a run, ``consumer_group_settled`` is what the group's
coordinator describes (``describe_settled``).

Partitions and their leaders are looked up in the store, as the ``produce`` workload
does (a client's metadata).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

import anyio

from actors.group import consumer_assignment
from cluster.chaos.harness import Gate, Harness
from cluster.chaos.model import Consume
from cluster.chaos.workload import emit, leader_of, topic_assignment
from cluster.kafka.consumer_group import (
    COORDINATOR_ERRORS,
    PROTOCOL,
    REJOIN_ERRORS,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    range_assign,
)
from cluster.kafka.records import RecordsError, batch_records, read_batches
from protocol.base import Message
from protocol.errors import AskTimeoutError, BrokerDisconnectedError, ErrorCode, RemoteError
from protocol.group import (
    UNKNOWN_MEMBER_ID,
    DescribeGroupsRequestData,
    DescribeGroupsResponseData,
    FindCoordinatorRequestData,
    FindCoordinatorResponseData,
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
from protocol.kafka_data import (
    FetchPartition,
    FetchRequestData,
    FetchResponseData,
    FetchTopic,
    ListOffsetsPartition,
    ListOffsetsRequestData,
    ListOffsetsResponseData,
    ListOffsetsTopic,
)

__all__ = [
    "ConsumerGroup",
    "describe_group",
    "find_coordinator",
    "group_settled",
]

TP = tuple[str, int]

POLL: Final = 0.2
"""Seconds between a member's fetch rounds."""
RETRY_BACKOFF: Final = 0.1
"""``retry.backoff.ms``: the pause before a failed request is tried again."""
REQUEST_TIMEOUT: Final = 2.0
"""Seconds a fetch, commit, heartbeat or lookup is waited for."""
FETCH_MAX_BYTES: Final = 1 << 20
EARLIEST: Final = -2  # ListOffsetsRequest.EARLIEST_TIMESTAMP
SETTLE_POLL: Final = 0.5
"""Seconds between the end-of-run looks at the group."""


async def _partition_counts(h: Harness, topics: Sequence[str]) -> dict[str, int]:
    """The partition count of each of ``topics`` that exists (its metadata)."""
    counts = {}
    for topic in topics:
        assignment = await topic_assignment(h, topic)
        if assignment:
            counts[topic] = len(assignment)
    return counts


async def find_coordinator(h: Harness, group: str, *, client: str = "") -> int | None:
    """The coordinator's broker as a running broker names it (FindCoordinator), or None;
    ``client``: whose connections ask (``Harness.ask_broker``)."""
    running = h.running()
    if not running:
        return None
    try:
        reply = await h.ask_broker(
            h.rng.choice(running),
            FindCoordinatorRequestData(key=group),
            timeout=REQUEST_TIMEOUT,
            client=client,
        )
    except (AskTimeoutError, RemoteError):
        return None
    if not isinstance(reply, FindCoordinatorResponseData) or reply.error_code is not ErrorCode.NONE:
        return None
    return reply.node_id


def _code(answer: Message | ErrorCode) -> ErrorCode:
    """The error of an answer of the wrong type (no answer or an error answer: its code)."""
    return answer if isinstance(answer, ErrorCode) else ErrorCode.UNKNOWN_SERVER_ERROR


# ----------------------------------------------------------------------------- a member


@dataclass
class _Member:
    h: Harness
    step: Consume
    group: str
    index: int
    gate: Gate
    member_id: str = UNKNOWN_MEMBER_ID
    generation: int = -1
    coordinator: int | None = None
    rejoin: bool = True
    leader: bool = False
    snapshot: dict[str, int] = field(default_factory=dict)  # the leader's, as assigned
    owned: list[TP] = field(default_factory=list)
    positions: dict[TP, int] = field(default_factory=dict)
    committed: dict[TP, int] = field(default_factory=dict)
    next_heartbeat: float = 0.0
    next_commit: float = 0.0
    consumed: int = 0

    @property
    def name(self) -> str:
        return f"{self.group}-{self.index}"

    def trace(self, type_: str, **fields: object) -> None:
        emit(self.h, type_, group=self.group, member=self.name, **fields)

    async def ask(self, broker: int, request: Message, timeout: float) -> Message | ErrorCode:
        """The answer of ``broker``, once the member's gate is open; an error code for an
        error answer, NETWORK_EXCEPTION for a disconnect, REQUEST_TIMED_OUT for none."""
        await self.gate.passage()
        try:
            return await self.h.ask_broker(broker, request, timeout=timeout, client=self.name)
        except BrokerDisconnectedError:
            return ErrorCode.NETWORK_EXCEPTION
        except AskTimeoutError:
            return ErrorCode.REQUEST_TIMED_OUT
        except RemoteError as exc:
            return exc.code

    def lost_coordinator(self) -> None:
        self.coordinator = None

    def coordinator_lost(self) -> bool:
        """Whether the coordinator is to be found again (a request may have lost it)."""
        return self.coordinator is None

    def must_rejoin(self, code: ErrorCode) -> None:
        """``AbstractCoordinator``'s reaction to an error that ends the generation."""
        self.rejoin = True
        if code is ErrorCode.UNKNOWN_MEMBER_ID:
            self.member_id = UNKNOWN_MEMBER_ID
            self.generation = -1

    # -- the loop

    async def run(self, stop_at: float | None) -> None:
        clock = self.h.clock
        while stop_at is None or clock.now() < stop_at:
            await self.gate.passage()
            if self.coordinator is None:
                self.coordinator = await find_coordinator(self.h, self.group, client=self.name)
                if self.coordinator is None:
                    await clock.sleep(RETRY_BACKOFF)
                    continue
                if not self.rejoin and self.owned:
                    await self.fetch_offsets(adopt=False)  # what the new coordinator loaded
            if self.rejoin:
                await self.join()
                continue
            if self.coordinator is not None and clock.now() >= self.next_heartbeat:
                await self.heartbeat()
            if not self.rejoin and self.coordinator is not None and clock.now() >= self.next_commit:
                await self.commit()
            if self.leader and not self.rejoin and await self.metadata_changed():
                self.trace("consumer_rejoining", reason="metadata changed")
                self.rejoin = True
                continue
            if not self.rejoin:
                await self.fetch()
            await clock.sleep(POLL)
        await self.leave()

    async def metadata_changed(self) -> bool:
        """The leader's check: the subscribed topics' partitions are no longer those it
        assigned."""
        return await _partition_counts(self.h, self.step.subscription) != self.snapshot

    # -- joining

    async def join(self) -> None:
        """``joinGroupIfNeeded``: commit what was consumed, give up every partition (the
        eager protocol), JoinGroup and SyncGroup."""
        if self.coordinator is None:
            return  # lost while it read its offsets: found again first
        if self.owned and self.generation >= 0:
            await self.commit()  # onJoinPrepare's synchronous auto-commit
            if self.coordinator_lost():
                return  # lost meanwhile: found again first
        self.owned = []
        self.positions = {}
        step = self.step
        request = JoinGroupRequestData(
            group_id=self.group,
            session_timeout_ms=step.session_timeout_ms,
            rebalance_timeout_ms=step.rebalance_timeout_ms,
            member_id=self.member_id,
            protocol_type="consumer",
            protocols=(
                JoinGroupProtocol(name=PROTOCOL, metadata=encode_subscription(step.subscription)),
            ),
            client_id=self.name,
        )
        reply = await self.ask(
            self.coordinator, request, step.rebalance_timeout_ms / 1000 + REQUEST_TIMEOUT
        )
        if not isinstance(reply, JoinGroupResponseData):
            await self._failed(
                reply if isinstance(reply, ErrorCode) else ErrorCode.UNKNOWN_SERVER_ERROR
            )
            return
        if reply.error_code is ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = reply.member_id
            return
        if reply.error_code is not ErrorCode.NONE:
            await self._failed(reply.error_code)
            return
        self.member_id = reply.member_id
        self.generation = reply.generation_id
        self.leader = reply.leader == reply.member_id
        self.trace(
            "consumer_joined",
            member_id=self.member_id,
            generation=self.generation,
            leader=self.leader,
            coordinator=self.coordinator,
            members=len(reply.members),
        )
        assignments = await self._assign(reply.members) if self.leader else ()
        sync = SyncGroupRequestData(
            group_id=self.group,
            generation_id=self.generation,
            member_id=self.member_id,
            assignments=assignments,
            protocol_type="consumer",
            protocol_name=PROTOCOL,
        )
        answer = await self.ask(
            self.coordinator, sync, step.session_timeout_ms / 1000 + REQUEST_TIMEOUT
        )
        if not isinstance(answer, SyncGroupResponseData):
            await self._failed(
                answer if isinstance(answer, ErrorCode) else ErrorCode.UNKNOWN_SERVER_ERROR
            )
            return
        if answer.error_code is not ErrorCode.NONE:
            await self._failed(answer.error_code)
            return
        self.owned = sorted(consumer_assignment(answer.assignment))
        self.rejoin = False
        self.trace(
            "consumer_assigned",
            member_id=self.member_id,
            generation=self.generation,
            partitions=[list(tp) for tp in self.owned],
        )
        now = self.h.clock.now()
        self.next_heartbeat = now + step.heartbeat_interval_ms / 1000
        self.next_commit = now + step.commit_interval
        await self.fetch_offsets(adopt=True)

    async def _assign(self, members: Sequence[JoinGroupMember]) -> tuple[SyncGroupAssignment, ...]:
        """The leader's ``performAssignment``: RangeAssignor over the members'
        subscriptions and the topics' partitions now."""
        subscriptions = {m.member_id: decode_subscription(m.metadata) for m in members}
        topics = sorted({t for ts in subscriptions.values() for t in ts})
        self.snapshot = await _partition_counts(self.h, topics)
        plan = range_assign(subscriptions, self.snapshot)
        return tuple(
            SyncGroupAssignment(member_id=m, assignment=encode_assignment(plan[m]))
            for m in sorted(plan)
        )

    async def _failed(self, code: ErrorCode) -> None:
        """A JoinGroup or SyncGroup that did not end in an assignment."""
        self.trace("consumer_rejoining", reason=code.name, generation=self.generation)
        if code in COORDINATOR_ERRORS:
            self.lost_coordinator()
        self.must_rejoin(code)
        await self.h.clock.sleep(RETRY_BACKOFF)

    # -- the generation's work

    async def heartbeat(self) -> None:
        assert self.coordinator is not None
        self.next_heartbeat = self.h.clock.now() + self.step.heartbeat_interval_ms / 1000
        reply = await self.ask(
            self.coordinator,
            HeartbeatRequestData(
                group_id=self.group, generation_id=self.generation, member_id=self.member_id
            ),
            REQUEST_TIMEOUT,
        )
        code = reply.error_code if isinstance(reply, HeartbeatResponseData) else reply
        assert isinstance(code, ErrorCode)
        self._react(code, "heartbeat")

    def _react(self, code: ErrorCode, what: str) -> None:
        if code is ErrorCode.NONE:
            return
        if code in REJOIN_ERRORS:
            self.trace(
                "consumer_rejoining", reason=f"{what}: {code.name}", generation=self.generation
            )
            self.must_rejoin(code)
        elif code in COORDINATOR_ERRORS:
            self.lost_coordinator()

    async def fetch_offsets(self, *, adopt: bool) -> None:
        """OffsetFetch of the owned partitions, traced; ``adopt``: start there (no
        commit: offset 0)."""
        if self.coordinator is None or not self.owned:
            return
        by_topic: dict[str, list[int]] = {}
        for topic, partition in self.owned:
            by_topic.setdefault(topic, []).append(partition)
        request = OffsetFetchRequestData(
            group_id=self.group,
            topics=tuple(
                OffsetFetchTopic(name=TopicName(t), partition_indexes=tuple(ps))
                for t, ps in sorted(by_topic.items())
            ),
        )
        reply = await self.ask(self.coordinator, request, REQUEST_TIMEOUT)
        if not isinstance(reply, OffsetFetchResponseData) or reply.error_code is not ErrorCode.NONE:
            code = reply.error_code if isinstance(reply, OffsetFetchResponseData) else reply
            assert isinstance(code, ErrorCode)
            self._react(code, "offset fetch")
            if adopt:
                self.positions = {tp: 0 for tp in self.owned}  # auto.offset.reset=earliest
            return
        found = {
            (str(t.name), p.partition_index): p.committed_offset
            for t in reply.topics
            for p in t.partitions
            if p.error_code is ErrorCode.NONE
        }
        self.trace(
            "consumer_offsets_fetched",
            member_id=self.member_id,
            generation=self.generation,
            offsets=[[t, p, o] for (t, p), o in sorted(found.items())],
        )
        if adopt:
            self.positions = {tp: max(found.get(tp, -1), 0) for tp in self.owned}
            self.committed = {tp: o for tp, o in found.items() if o >= 0}

    async def commit(self) -> None:
        """OffsetCommit of the positions that moved since the last commit, traced."""
        assert self.coordinator is not None
        self.next_commit = self.h.clock.now() + self.step.commit_interval
        moved = {tp: o for tp, o in sorted(self.positions.items()) if self.committed.get(tp) != o}
        if not moved:
            return
        by_topic: dict[str, list[OffsetCommitPartition]] = {}
        for (topic, partition), offset in moved.items():
            by_topic.setdefault(topic, []).append(
                OffsetCommitPartition(partition_index=partition, committed_offset=offset)
            )
        request = OffsetCommitRequestData(
            group_id=self.group,
            generation_id=self.generation,
            member_id=self.member_id,
            topics=tuple(
                OffsetCommitTopic(name=TopicName(t), partitions=tuple(ps))
                for t, ps in sorted(by_topic.items())
            ),
        )
        reply = await self.ask(self.coordinator, request, REQUEST_TIMEOUT)
        if isinstance(reply, OffsetCommitResponseData):
            answers = {
                (str(t.name), p.partition_index): p.error_code
                for t in reply.topics
                for p in t.partitions
            }
        else:
            code = reply if isinstance(reply, ErrorCode) else ErrorCode.UNKNOWN_SERVER_ERROR
            answers = {tp: code for tp in moved}
        self.trace(
            "consumer_committed",
            member_id=self.member_id,
            generation=self.generation,
            coordinator=self.coordinator,
            offsets=[
                [t, p, o, answers.get((t, p), ErrorCode.UNKNOWN_SERVER_ERROR).name]
                for (t, p), o in moved.items()
            ],
        )
        for tp, offset in moved.items():
            if answers.get(tp) is ErrorCode.NONE:
                self.committed[tp] = offset
        for code in sorted(set(answers.values()) - {ErrorCode.NONE}):
            self._react(code, "commit")

    async def fetch(self) -> None:
        """One Fetch per leader of the owned partitions, from the positions."""
        by_leader: dict[int, list[tuple[TP, int]]] = {}
        for tp in self.owned:
            found = await leader_of(self.h, *tp)
            if found is None or found.leader < 0 or not self.h.is_running(found.leader):
                continue
            by_leader.setdefault(found.leader, []).append((tp, found.leader_epoch))
        for leader, partitions in sorted(by_leader.items()):
            by_topic: dict[str, list[FetchPartition]] = {}
            for (topic, partition), epoch in partitions:
                by_topic.setdefault(topic, []).append(
                    FetchPartition(
                        partition=partition,
                        fetch_offset=self.positions.get((topic, partition), 0),
                        partition_max_bytes=FETCH_MAX_BYTES,
                        current_leader_epoch=epoch,
                    )
                )
            request = FetchRequestData(
                max_wait_ms=0,
                min_bytes=0,
                topics=tuple(
                    FetchTopic(topic=TopicName(t), partitions=tuple(ps))
                    for t, ps in sorted(by_topic.items())
                ),
            )
            reply = await self.ask(leader, request, REQUEST_TIMEOUT)
            if not isinstance(reply, FetchResponseData):
                continue
            for topic_data in reply.responses:
                for data in topic_data.partitions:
                    tp = (str(topic_data.topic), data.partition_index)
                    if tp not in self.positions:
                        continue  # given up meanwhile
                    if data.error_code is ErrorCode.OFFSET_OUT_OF_RANGE:
                        await self._reset(leader, tp)
                    elif data.error_code is ErrorCode.NONE:
                        self._advance(tp, data.records)

    def _advance(self, tp: TP, records: bytes) -> None:
        position = self.positions[tp]
        try:
            for header in read_batches(records):
                for record in batch_records(records, header):
                    if record.offset >= position:
                        self.consumed += 1
                        position = record.offset + 1
        except RecordsError:
            return
        self.positions[tp] = position

    async def _reset(self, leader: int, tp: TP) -> None:
        """``auto.offset.reset=earliest``: the partition's log start (ListOffsets)."""
        request = ListOffsetsRequestData(
            topics=(
                ListOffsetsTopic(
                    name=TopicName(tp[0]),
                    partitions=(ListOffsetsPartition(partition_index=tp[1], timestamp=EARLIEST),),
                ),
            )
        )
        reply = await self.ask(leader, request, REQUEST_TIMEOUT)
        if not isinstance(reply, ListOffsetsResponseData):
            return
        answer = reply.topics[0].partitions[0]
        if answer.error_code is not ErrorCode.NONE or tp not in self.positions:
            return
        self.trace(
            "consumer_offset_reset",
            member_id=self.member_id,
            generation=self.generation,
            topic=tp[0],
            partition=tp[1],
            offset=answer.offset,
            before=self.positions[tp],
        )
        self.positions[tp] = answer.offset

    async def leave(self) -> None:
        """``close``: commit, then LeaveGroup (a member that is not in a generation just
        stops)."""
        if self.coordinator is not None and not self.rejoin and self.generation >= 0:
            await self.commit()
        if self.coordinator is not None and self.member_id:
            await self.ask(
                self.coordinator,
                LeaveGroupRequestData(
                    group_id=self.group, members=(LeaveGroupMember(member_id=self.member_id),)
                ),
                REQUEST_TIMEOUT,
            )
        self.trace(
            "consumer_left",
            member_id=self.member_id,
            generation=self.generation,
            consumed=self.consumed,
        )


# ----------------------------------------------------------------------------- the group


class ConsumerGroup:
    """The members a ``consume`` step with ``group`` started (see the module doc)."""

    def __init__(self, h: Harness, step: Consume, first: int = 0) -> None:
        """``first``: the index of its first member (members an earlier step started in
        the same group come before)."""
        assert step.group is not None
        self.h = h
        self.step = step
        self.group = step.group
        self.members = []
        for index in range(first, first + step.members):
            gate = h.member_gates.setdefault((self.group, index), Gate())
            self.members.append(_Member(h, step, self.group, index, gate))

    @property
    def until_the_end(self) -> bool:
        """Whether the members run until the end of the run (no ``stop_after``)."""
        return self.step.stop_after is None

    async def run(self) -> None:
        """Every member, side by side, until ``stop_after`` (or cancelled)."""
        stop_at = None
        if self.step.stop_after is not None:
            stop_at = self.h.clock.now() + self.step.stop_after
        async with anyio.create_task_group() as tg:
            for member in self.members:
                tg.start_soon(member.run, stop_at)

    async def settle(self, within: float) -> bool:
        """Wait up to ``within`` seconds for the coordinator to describe the group Stable
        with every partition of its topics owned, once; trace the last look
        (``consumer_group_settled``) and whether it was so."""
        clock = self.h.clock
        deadline = clock.now() + within
        while True:
            view = await describe_group(self.h, self.group)
            if (view is not None and view.settled) or clock.now() >= deadline:
                break
            await clock.sleep(SETTLE_POLL)
        if view is None:
            view = _View(state="Unknown", partitions=[], owners=[], members=0)
        emit(
            self.h,
            "consumer_group_settled",
            group=self.group,
            state=view.state,
            members=view.members,
            partitions=[list(tp) for tp in view.partitions],
            owners=[[t, p, m] for t, p, m in view.owners],
        )
        return view.settled


async def describe_group(h: Harness, group: str) -> _View | None:
    """The group as its coordinator describes it (DescribeGroups): its state, members,
    the partitions of the topics they subscribe to (as the store has them) and who owns
    each; None while no coordinator answers."""
    coordinator = await find_coordinator(h, group)
    if coordinator is None:
        return None
    try:
        reply = await h.ask_broker(
            coordinator, DescribeGroupsRequestData(groups=(group,)), timeout=REQUEST_TIMEOUT
        )
    except (AskTimeoutError, RemoteError):
        return None
    if not isinstance(reply, DescribeGroupsResponseData) or not reply.groups:
        return None
    described = reply.groups[0]
    if described.error_code is not ErrorCode.NONE:
        return None
    topics = sorted({t for m in described.members for t in decode_subscription(m.member_metadata)})
    counts = await _partition_counts(h, topics)
    return _View(
        state=described.group_state,
        partitions=sorted((t, p) for t, n in counts.items() for p in range(n)),
        owners=sorted(
            (t, p, m.member_id)
            for m in described.members
            for t, p in consumer_assignment(m.member_assignment)
        ),
        members=len(described.members),
    )


async def group_settled(h: Harness, group: str, members: int | None) -> bool:
    """The ``group_settled`` condition: Stable (with ``members`` members, when given) and
    every partition owned once — as the ``groups_settle`` rule judges the end: a group
    whose topics were all deleted is settled once Stable with nothing assigned."""
    view = await describe_group(h, group)
    return view is not None and view.settled and members in (None, view.members)


@dataclass(frozen=True)
class _View:
    state: str
    partitions: list[TP]
    owners: list[tuple[str, int, str]]
    members: int

    @property
    def settled(self) -> bool:
        owned = [(t, p) for t, p, _ in self.owners]
        return self.state == "Stable" and owned == self.partitions
