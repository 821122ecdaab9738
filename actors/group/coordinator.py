"""The group coordinator of one broker: Kafka's ``GroupCoordinator`` with its
``GroupMetadataManager``, as an actor (``group_coordinator`` on node ``broker-<id>``).

It owns the groups whose partition of ``__consumer_offsets`` (``partition_for``) this
broker leads. The broker tells it which partitions it gained or lost after each
LeaderAndIsr and StopReplica (``GroupPartitionsElected``/``...Resigned``, as
``KafkaApis.onLeadershipChange`` calls ``onElection``/``onResignation``); a gained
partition is loaded from its log (COORDINATOR_LOAD_IN_PROGRESS meanwhile), a lost one's
groups are dropped (NOT_COORDINATOR from then on).

Group state changes only on this actor's task. What waits is never awaited inline:

* a JoinGroup or SyncGroup is answered later (``ctx.defer``) when the rebalance
  completes or the leader's assignment is stored;
* timers (``DelayedJoin``, ``InitialDelayedJoin``, ``DelayedHeartbeat``, a pending
  member's expiry) are helper tasks sleeping on the node's clock that only
  ``send_self`` a ``GroupTimerFired``;
* records go to ``__consumer_offsets`` through the broker's own append path (a Produce
  with acks=-1 and ``internal_topics_allowed``, as ``GroupMetadataManager.appendForGroup``
  calls ``ReplicaManager.appendRecords``) from a helper task, whose outcome comes back as
  ``GroupAppendDone`` and runs the operation's callback here;
* loading reads the partition's log through the broker (a debugging consumer's Fetch,
  up to the log end) from a helper task, whose ``GroupLoaded`` is applied here.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from actors.admin import GROUP_METADATA_TOPIC_NAME, BrokerConfig
from actors.broker.names import BROKER_ACTOR
from actors.group.group import Group, GroupState, Member
from actors.group.records import (
    GroupMember,
    GroupValue,
    OffsetKey,
    OffsetValue,
    RecordFormatError,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    partition_for,
)
from actors.log.batch_codec import (
    ProducerRecord,
    RecordsError,
    decode_records,
    encode_records,
    seal_batch,
)
from actors.log.records import RECORD_BATCH_OVERHEAD, batch_headers
from actors.runtime.actor import Actor, Context
from protocol.base import ActorRef, Message
from protocol.errors import AskTimeoutError, ErrorCode, KafkaApiError, RemoteError
from protocol.group import (
    GROUP_AUTHORIZED_OPERATIONS,
    UNKNOWN_MEMBER_ID,
    DeletableGroupResult,
    DeleteGroupsRequestData,
    DeleteGroupsResponseData,
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsRequestData,
    DescribeGroupsResponseData,
    GroupAppendDone,
    GroupLoaded,
    GroupPartitionsDeleted,
    GroupPartitionsElected,
    GroupPartitionsResigned,
    GroupTimerFired,
    HeartbeatRequestData,
    HeartbeatResponseData,
    JoinGroupMember,
    JoinGroupRequestData,
    JoinGroupResponseData,
    LeaveGroupMemberResponse,
    LeaveGroupRequestData,
    LeaveGroupResponseData,
    ListedGroup,
    ListGroupsRequestData,
    ListGroupsResponseData,
    OffsetCommitPartitionResponse,
    OffsetCommitRequestData,
    OffsetCommitResponseData,
    OffsetCommitTopicResponse,
    OffsetDeleteRequestData,
    OffsetDeleteResponseData,
    OffsetFetchPartitionResponse,
    OffsetFetchRequestData,
    OffsetFetchResponseData,
    OffsetFetchTopicResponse,
    SyncGroupRequestData,
    SyncGroupResponseData,
)
from protocol.ids import TopicName
from protocol.kafka_data import (
    DEBUG_REPLICA_ID,
    EARLIEST_TIMESTAMP,
    FetchPartition,
    FetchRequestData,
    FetchResponseData,
    FetchTopic,
    ListOffsetsPartition,
    ListOffsetsRequestData,
    ListOffsetsResponseData,
    ListOffsetsTopic,
    ProducePartitionData,
    ProduceRequestData,
    ProduceResponseData,
    ProduceTopicData,
)

__all__ = ["GROUP_COORDINATOR_ACTOR", "GroupConfig", "GroupCoordinator", "commit_answer"]

GROUP_COORDINATOR_ACTOR: Final = "group_coordinator"
NEW_MEMBER_JOIN_TIMEOUT_MS: Final = 300_000
"""``GroupCoordinator.NewMemberJoinTimeoutMs``: a new member's first expiry."""
_LOAD_BUFFER_BYTES: Final = 5 * 1024 * 1024  # offsets.load.buffer.size

_JOIN: Final = "join"
_HEARTBEAT: Final = "heartbeat"
_PENDING: Final = "pending_member"
_EXPIRY: Final = "delete-expired-group-metadata"


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """The broker configs the coordinator reads (``GroupConfig``, ``OffsetConfig``)."""

    offsets_topic_partitions: int  # the offsets topic's partitions as it exists, if it does
    group_min_session_timeout_ms: int
    group_max_session_timeout_ms: int
    group_initial_rebalance_delay_ms: int
    offsets_commit_timeout_ms: int
    offset_metadata_max_bytes: int
    group_max_size: int
    offsets_retention_ms: int
    offsets_retention_check_interval_ms: int

    @classmethod
    def of(cls, config: BrokerConfig, *, offsets_topic_partitions: int) -> GroupConfig:
        """The coordinator's part of a broker's configs."""
        return cls(
            offsets_topic_partitions=offsets_topic_partitions,
            group_min_session_timeout_ms=config.group_min_session_timeout_ms,
            group_max_session_timeout_ms=config.group_max_session_timeout_ms,
            group_initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            offsets_commit_timeout_ms=config.offsets_commit_timeout_ms,
            offset_metadata_max_bytes=config.offset_metadata_max_bytes,
            group_max_size=config.group_max_size,
            offsets_retention_ms=config.offsets_retention_minutes * 60_000,
            offsets_retention_check_interval_ms=config.offsets_retention_check_interval_ms,
        )


_Callback = Callable[[ErrorCode], None]


class GroupCoordinator(Actor):
    """The groups of the ``__consumer_offsets`` partitions its broker leads."""

    def __init__(self, config: GroupConfig, *, name: str = GROUP_COORDINATOR_ACTOR) -> None:
        super().__init__(name)
        self.config = config
        self.groups: dict[str, Group] = {}
        self.owned: set[int] = set()
        self.loading: dict[int, int] = {}  # partition -> the leader epoch being loaded
        self._appends: dict[int, _Callback] = {}
        self._next_append = 0
        self._join_budget: dict[str, int | None] = {}
        self._expiry_armed = False
        """Per group in PreparingRebalance: the rebalance budget an
        ``InitialDelayedJoin`` has left, or None for a ``DelayedJoin``."""

    @property
    def _broker(self) -> ActorRef:
        return ActorRef(self.node.node_id, BROKER_ACTOR)

    def _now_ms(self) -> int:
        return self.clock.wall_ms()

    # ------------------------------------------------------------------ dispatch

    async def receive(self, msg: Message, ctx: Context) -> Message | None:
        match msg:
            case JoinGroupRequestData():
                return self._join_group(msg, ctx)
            case SyncGroupRequestData():
                return self._sync_group(msg, ctx)
            case HeartbeatRequestData():
                return self._heartbeat(msg)
            case LeaveGroupRequestData():
                return self._leave_group(msg)
            case OffsetCommitRequestData():
                return self._commit_offsets(msg, ctx)
            case OffsetFetchRequestData():
                return self._fetch_offsets(msg)
            case ListGroupsRequestData():
                return self._list_groups(msg)
            case DescribeGroupsRequestData():
                return self._describe_groups(msg)
            case DeleteGroupsRequestData():
                return self._delete_groups(msg)
            case OffsetDeleteRequestData():
                return self._delete_offsets(msg)
            case GroupPartitionsElected():
                for partition, epoch in msg.partitions:
                    self._on_election(partition, epoch)
                return None
            case GroupPartitionsDeleted():
                self._deleted_partitions(msg.partitions)
                return None
            case GroupPartitionsResigned():
                for partition in msg.partitions:
                    self._on_resignation(partition)
                return None
            case GroupLoaded():
                self._loaded(msg)
                return None
            case GroupAppendDone():
                callback = self._appends.pop(msg.operation, None)
                if callback is not None:
                    callback(msg.error_code)
                return None
            case GroupTimerFired():
                self._timer_fired(msg)
                return None
        raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"no group API {type(msg).__name__}")

    # ------------------------------------------------------------------ ownership

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_partitions)

    def _validate(self, group_id: str, *, empty_allowed: bool = False) -> ErrorCode | None:
        """``GroupCoordinator.validateGroupStatus``."""
        if not group_id and not empty_allowed:
            return ErrorCode.INVALID_GROUP_ID
        partition = self.partition_for(group_id)
        if partition in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self.owned:
            return ErrorCode.NOT_COORDINATOR
        return None

    def _on_election(self, partition: int, leader_epoch: int) -> None:
        """``GroupCoordinator.onElection``: load the partition's groups unless they are
        loaded or loading already."""
        if partition in self.owned or partition in self.loading:
            return
        self.loading[partition] = leader_epoch
        self.trace("event", "group_partition_loading", partition=partition, epoch=leader_epoch)
        self.start_soon(self._read_partition, partition, leader_epoch)

    def _on_resignation(self, partition: int) -> None:
        """``GroupCoordinator.onResignation`` (``removeGroupsForPartition``): the
        partition's groups go Dead; their parked joins and syncs get NOT_COORDINATOR."""
        self.loading.pop(partition, None)
        if partition not in self.owned:
            return
        self.owned.discard(partition)
        now = self._now_ms()
        for group_id in [g for g in self.groups if self.partition_for(g) == partition]:
            group = self.groups.pop(group_id)
            group.transition(GroupState.DEAD, now)
            for member in group.members.values():
                if member.join_reply is not None:
                    self._answer_join(
                        member, _join_error(member.member_id, ErrorCode.NOT_COORDINATOR)
                    )
                if member.sync_reply is not None:
                    self._answer_sync(
                        member, SyncGroupResponseData(error_code=ErrorCode.NOT_COORDINATOR)
                    )
        self.trace("event", "group_partition_unloaded", partition=partition)

    async def _read_partition(self, partition: int, leader_epoch: int) -> None:
        """Helper task: the partition's log from its start to its end, through the
        broker, handed back as one ``GroupLoaded``. It touches no coordinator state."""
        topic = TopicName(GROUP_METADATA_TOPIC_NAME)
        chunks: list[bytes] = []
        code = ErrorCode.NONE
        try:
            start = await self.ask(
                self._broker,
                ListOffsetsRequestData(
                    replica_id=DEBUG_REPLICA_ID,
                    topics=(
                        ListOffsetsTopic(
                            name=topic,
                            partitions=(
                                ListOffsetsPartition(
                                    partition_index=partition, timestamp=EARLIEST_TIMESTAMP
                                ),
                            ),
                        ),
                    ),
                ),
            )
            assert isinstance(start, ListOffsetsResponseData)
            answer = start.topics[0].partitions[0]
            code = answer.error_code
            offset = answer.offset
            while code is ErrorCode.NONE:
                fetched = await self.ask(
                    self._broker,
                    FetchRequestData(
                        max_wait_ms=0,
                        min_bytes=0,
                        replica_id=DEBUG_REPLICA_ID,
                        max_bytes=_LOAD_BUFFER_BYTES,
                        topics=(
                            FetchTopic(
                                topic=topic,
                                partitions=(
                                    FetchPartition(
                                        partition=partition,
                                        fetch_offset=offset,
                                        partition_max_bytes=_LOAD_BUFFER_BYTES,
                                    ),
                                ),
                            ),
                        ),
                    ),
                )
                assert isinstance(fetched, FetchResponseData)
                data = fetched.responses[0].partitions[0]
                code = data.error_code
                records = data.records or b""
                headers = list(batch_headers(records))
                if code is not ErrorCode.NONE or not headers:
                    break
                end = headers[-1].position + headers[-1].size
                chunks.append(records[:end])
                offset = headers[-1].next_offset
        except (RemoteError, KafkaApiError) as exc:
            code = exc.code
        except AskTimeoutError:
            code = ErrorCode.REQUEST_TIMED_OUT
        self.send_self(
            GroupLoaded(
                partition=partition,
                leader_epoch=leader_epoch,
                records=b"".join(chunks),
                error_code=code,
            )
        )

    def _loaded(self, msg: GroupLoaded) -> None:
        """``GroupMetadataManager.doLoadGroupsAndOffsets`` applied: the latest record of
        each key wins, tombstones remove; groups with members load Stable, others Empty;
        each member's heartbeat is armed (``onGroupLoaded``)."""
        if self.loading.get(msg.partition) != msg.leader_epoch:
            return  # resigned (or re-elected) meanwhile
        del self.loading[msg.partition]
        if msg.error_code is not ErrorCode.NONE:
            self.trace(
                "event",
                "group_partition_load_failed",
                partition=msg.partition,
                error=msg.error_code.name,
            )
            return
        offsets: dict[OffsetKey, OffsetValue | None] = {}
        groups: dict[str, GroupValue | None] = {}
        try:
            for header in batch_headers(msg.records):
                payload = msg.records[
                    header.position + RECORD_BATCH_OVERHEAD : header.position + header.size
                ]
                for record in decode_records(payload, header):
                    if record.key is None:
                        continue
                    key = decode_key(record.key)
                    if isinstance(key, OffsetKey):
                        offsets[key] = (
                            None if record.value is None else decode_offset_value(record.value)
                        )
                    else:
                        groups[key.group] = (
                            None if record.value is None else decode_group_value(record.value)
                        )
        except (RecordsError, RecordFormatError, KafkaApiError) as exc:
            self.trace(
                "error", "group_partition_load_failed", partition=msg.partition, detail=str(exc)
            )
            return
        now = self._now_ms()
        for group_id, value in groups.items():
            if value is not None:
                self.groups[group_id] = self._group_from(group_id, value)
        for key, offset in offsets.items():
            if offset is None:
                continue
            group = self.groups.get(key.group)
            if group is None:
                group = self.groups[key.group] = Group(key.group, current_state_timestamp=now)
            group.offsets[key.topic, key.partition] = offset
        self.owned.add(msg.partition)
        for group in list(self.groups.values()):
            if self.partition_for(group.group_id) == msg.partition:
                if len(group.members) > self.config.group_max_size:  # onGroupLoaded
                    self._prepare_rebalance(
                        group,
                        f"Freshly-loaded group is over capacity ({self.config.group_max_size})",
                    )
                for member in group.members.values():
                    self._schedule_heartbeat(group, member, member.session_timeout_ms)
        self._schedule_expiry()
        self.trace(
            "event",
            "group_partition_loaded",
            partition=msg.partition,
            epoch=msg.leader_epoch,
            groups=sum(1 for g in groups.values() if g is not None),
            offsets=sum(1 for o in offsets.values() if o is not None),
        )

    def _group_from(self, group_id: str, value: GroupValue) -> Group:
        """``GroupMetadata.loadGroup``."""
        group = Group(
            group_id,
            state=GroupState.STABLE if value.members else GroupState.EMPTY,
            protocol_type=value.protocol_type or None,
            protocol_name=value.protocol,
            generation=value.generation,
            leader_id=value.leader,
            current_state_timestamp=value.current_state_timestamp,
        )
        for m in value.members:
            protocols = ((value.protocol or "", m.subscription),)
            member = Member(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.session_timeout_ms,
                protocol_type=value.protocol_type,
                protocols=protocols,
                assignment=m.assignment,
            )
            group.members[m.member_id] = member
            if m.group_instance_id is not None:
                group.static_members[m.group_instance_id] = m.member_id
        return group

    # ------------------------------------------------------------------ appends

    def _append(self, group_id: str, records: list[ProducerRecord], callback: _Callback) -> None:
        """Append ``records`` to the group's partition (acks=-1, the commit timeout);
        ``callback`` runs on this task with the outcome."""
        self._next_append += 1
        op = self._next_append
        self._appends[op] = callback
        batch = seal_batch(records, encode_records(records))
        request = ProduceRequestData(
            acks=-1,
            timeout_ms=self.config.offsets_commit_timeout_ms,
            topic_data=(
                ProduceTopicData(
                    name=TopicName(GROUP_METADATA_TOPIC_NAME),
                    partition_data=(
                        ProducePartitionData(index=self.partition_for(group_id), records=batch),
                    ),
                ),
            ),
            internal_topics_allowed=True,
        )
        self.start_soon(self._produce, op, request)

    async def _produce(self, op: int, request: ProduceRequestData) -> None:
        """Helper task: the append through the broker; its outcome back as a message."""
        try:
            reply = await self.ask(self._broker, request, timeout=request.timeout_ms / 1000 + 5.0)
            assert isinstance(reply, ProduceResponseData)
            code = reply.responses[0].partition_responses[0].error_code
        except RemoteError as exc:
            code = exc.code
        except AskTimeoutError:
            code = ErrorCode.REQUEST_TIMED_OUT
        self.send_self(GroupAppendDone(operation=op, error_code=code))

    def _group_record(self, group: Group) -> ProducerRecord:
        """``GroupMetadataManager.storeGroup``'s record: the group and each member with
        its assignment."""
        value = GroupValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation,
            protocol=group.protocol_name,
            leader=group.leader_id,
            current_state_timestamp=group.current_state_timestamp,
            members=tuple(
                GroupMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    subscription=m.metadata(group.protocol_name) if group.protocol_name else b"",
                    assignment=m.assignment,
                )
                for m in group.members.values()
            ),
        )
        return ProducerRecord(
            key=encode_group_key(group.group_id),
            value=encode_group_value(value),
            timestamp_ms=self._now_ms(),
        )

    # ------------------------------------------------------------------ timers

    def _start_timer(self, seconds: float, tick: GroupTimerFired) -> None:
        self.start_soon(self._sleep_then_tell, seconds, tick)

    async def _sleep_then_tell(self, seconds: float, tick: GroupTimerFired) -> None:
        await self.clock.sleep(seconds)
        self.send_self(tick)

    def _timer_fired(self, tick: GroupTimerFired) -> None:
        if tick.kind == _EXPIRY:
            self._expiry_armed = False
            self._expire_offsets()
            self._schedule_expiry()
            return
        group = self.groups.get(tick.group_id)
        if group is None:
            return
        if tick.kind == _JOIN:
            if tick.generation == group.join_timer and group.is_(GroupState.PREPARING_REBALANCE):
                self._join_timer_expired(group)
        elif tick.kind == _HEARTBEAT:
            member = group.members.get(tick.member_id)
            if member is not None and tick.generation == member.timer_seq:
                member.timer_at = None
                self._check_heartbeat(group, member)
        elif tick.kind == _PENDING and tick.member_id in group.pending_members:
            group.pending_members.discard(tick.member_id)
            if group.is_(GroupState.PREPARING_REBALANCE):
                self._try_complete_join(group)

    def _schedule_heartbeat(self, group: Group, member: Member, timeout_ms: int) -> None:
        """``completeAndScheduleNextExpiration``: the member lives ``timeout_ms`` more."""
        member.deadline = self.clock.now() + timeout_ms / 1000
        if member.timer_at is None or member.deadline < member.timer_at:
            self._arm_heartbeat(group, member, timeout_ms / 1000)

    def _arm_heartbeat(self, group: Group, member: Member, seconds: float) -> None:
        """One heartbeat timer per member: a new one makes the earlier one's tick stale."""
        member.timer_seq += 1
        member.timer_at = self.clock.now() + seconds
        self._start_timer(
            seconds,
            GroupTimerFired(
                kind=_HEARTBEAT,
                group_id=group.group_id,
                member_id=member.member_id,
                generation=member.timer_seq,
            ),
        )

    def _check_heartbeat(self, group: Group, member: Member) -> None:
        """``DelayedHeartbeat``: not expired yet (a later heartbeat moved the deadline,
        or the member waits for a join or sync answer): armed again; expired: the member
        is removed (``onExpireHeartbeat``)."""
        remaining = member.deadline - self.clock.now()
        if remaining > 0 or member.has_satisfied_heartbeat():
            if remaining <= 0:
                member.deadline = self.clock.now() + member.session_timeout_ms / 1000
                remaining = member.session_timeout_ms / 1000
            self._arm_heartbeat(group, member, remaining)
            return
        self.trace("event", "group_member_expired", group=group.group_id, member=member.member_id)
        self._remove_member_and_update(group, member)

    # ------------------------------------------------------------------ JoinGroup

    def _join_group(self, req: JoinGroupRequestData, ctx: Context) -> Message | None:
        """``GroupCoordinator.handleJoinGroup``."""
        code = self._validate(req.group_id)
        if code is None and not (
            self.config.group_min_session_timeout_ms
            <= req.session_timeout_ms
            <= self.config.group_max_session_timeout_ms
        ):
            code = ErrorCode.INVALID_SESSION_TIMEOUT
        if code is not None:
            return _join_error(req.member_id, code)
        group = self.groups.get(req.group_id)
        if req.member_id == UNKNOWN_MEMBER_ID:
            if group is None:
                group = self.groups[req.group_id] = Group(
                    req.group_id, current_state_timestamp=self._now_ms()
                )
        elif group is None:
            return _join_error(req.member_id, ErrorCode.UNKNOWN_MEMBER_ID)
        answer: Message | None
        if not self._accept_joining_member(group, req.member_id):
            group.remove(req.member_id)
            if req.group_instance_id is not None:
                group.static_members.pop(req.group_instance_id, None)
            self.trace(
                "event", "group_max_size_reached", group=group.group_id, member=req.member_id
            )
            answer = _join_error(UNKNOWN_MEMBER_ID, ErrorCode.GROUP_MAX_SIZE_REACHED)
        elif req.member_id == UNKNOWN_MEMBER_ID:
            answer = self._unknown_join(group, req, ctx)
        else:
            answer = self._known_join(group, req, ctx)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)
        return answer

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        """``acceptJoiningMember``: ``group.max.size`` bounds a group. An Empty or Dead
        group takes anyone; one preparing a rebalance a member already waiting in it, or
        anyone while fewer members than the bound wait (so the last to rejoin a group over
        the bound are the ones turned away); a Stable or CompletingRebalance one a member
        it has, or anyone while it is smaller than the bound."""
        max_size = self.config.group_max_size
        if group.is_(GroupState.EMPTY, GroupState.DEAD):
            return True
        member = group.members.get(member_id)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return (member is not None and member.awaiting_join) or group.num_awaiting() < max_size
        return member is not None or len(group.members) < max_size

    def _protocols(self, req: JoinGroupRequestData) -> tuple[tuple[str, bytes], ...]:
        return tuple((p.name, p.metadata) for p in req.protocols)

    def _unknown_join(
        self, group: Group, req: JoinGroupRequestData, ctx: Context
    ) -> Message | None:
        """``doUnknownJoinGroup``."""
        if group.is_(GroupState.DEAD):
            return _join_error(req.member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not group.supports_protocols(req.protocol_type, tuple(p.name for p in req.protocols)):
            return _join_error(req.member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        prefix = req.group_instance_id if req.group_instance_id is not None else req.client_id
        member_id = f"{prefix}-{uuid.UUID(int=self.rng.getrandbits(128), version=4)}"
        instance = req.group_instance_id
        if instance is not None and instance in group.static_members:
            return self._replace_static_member(group, req, member_id, ctx)
        if instance is None and req.api_version >= 4:
            group.pending_members.add(member_id)
            self._start_timer(
                req.session_timeout_ms / 1000,
                GroupTimerFired(kind=_PENDING, group_id=group.group_id, member_id=member_id),
            )
            return _join_error(member_id, ErrorCode.MEMBER_ID_REQUIRED)
        self._add_member_and_rebalance(group, req, member_id, ctx)
        return None

    def _replace_static_member(
        self, group: Group, req: JoinGroupRequestData, member_id: str, ctx: Context
    ) -> Message | None:
        """``updateStaticMemberAndRebalance``: the instance's old member id is fenced and
        the new one takes its place; a Stable group whose protocol choice stays answers
        the current generation without a rebalance (after storing the group), naming the
        leader as it was, so that a replaced leader does not assign again."""
        assert req.group_instance_id is not None
        old_id = group.static_members[req.group_instance_id]
        current_leader = group.leader_id
        old = group.members.pop(old_id)
        if old.join_reply is not None:
            self._answer_join(old, _join_error(old_id, ErrorCode.FENCED_INSTANCE_ID))
        if old.sync_reply is not None:
            self._answer_sync(old, SyncGroupResponseData(error_code=ErrorCode.FENCED_INSTANCE_ID))
        old.member_id = member_id
        old.protocols = self._protocols(req)
        old.client_id, old.client_host = req.client_id, req.client_host
        old.session_timeout_ms = req.session_timeout_ms
        old.rebalance_timeout_ms = req.rebalance_timeout_ms
        group.members[member_id] = old
        group.static_members[req.group_instance_id] = member_id
        if group.leader_id == old_id:
            group.leader_id = member_id
        old.timer_at = None  # the old id's timer finds no member: a new one is armed
        self._schedule_heartbeat(group, old, old.session_timeout_ms)
        if group.is_(GroupState.STABLE) and group.protocol_name == group.select_protocol():
            reply = ctx.defer()
            generation = group.generation

            def stored(code: ErrorCode) -> None:
                if code is not ErrorCode.NONE:
                    reply.send(self, _join_error(member_id, _store_error(code)))
                    return
                reply.send(
                    self,
                    JoinGroupResponseData(
                        generation_id=generation,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader=current_leader or "",
                        member_id=member_id,
                    ),
                )

            self._append(group.group_id, [self._group_record(group)], stored)
            return None
        old.join_reply = ctx.defer()
        old.join_version = req.api_version
        self._maybe_prepare_rebalance(group, "static member joined with a new member id")
        return None

    def _add_member_and_rebalance(
        self, group: Group, req: JoinGroupRequestData, member_id: str, ctx: Context
    ) -> None:
        """``addMemberAndRebalance``."""
        member = Member(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=self._protocols(req),
            is_new=True,
        )
        if req.group_instance_id is not None:
            group.static_members[req.group_instance_id] = member_id
        group.pending_members.discard(member_id)
        group.add(member, ctx.defer(), req.api_version)
        if group.is_(GroupState.PREPARING_REBALANCE) and group.generation == 0:
            group.new_member_added = True
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self.trace("event", "group_member_added", group=group.group_id, member=member_id)
        self._maybe_prepare_rebalance(group, f"Adding new member {member_id}")

    def _known_join(self, group: Group, req: JoinGroupRequestData, ctx: Context) -> Message | None:
        """``doJoinGroup`` for a member id the coordinator gave out."""
        if group.is_(GroupState.DEAD):
            return _join_error(req.member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not group.supports_protocols(req.protocol_type, tuple(p.name for p in req.protocols)):
            return _join_error(req.member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if req.member_id in group.pending_members:
            self._add_member_and_rebalance(group, req, req.member_id, ctx)
            return None
        fenced = self._fenced(group, req.member_id, req.group_instance_id)
        if fenced is not None:
            return _join_error(req.member_id, fenced)
        member = group.members.get(req.member_id)
        if member is None:
            return _join_error(req.member_id, ErrorCode.UNKNOWN_MEMBER_ID)
        protocols = self._protocols(req)
        match group.state:
            case GroupState.PREPARING_REBALANCE:
                self._update_member_and_rebalance(group, member, req, ctx)
            case GroupState.COMPLETING_REBALANCE:
                if not member.matches(protocols):
                    self._update_member_and_rebalance(group, member, req, ctx)
                else:
                    return self._current_generation(group, member.member_id, leader_view=True)
            case GroupState.STABLE:
                if group.is_leader(member.member_id) or not member.matches(protocols):
                    self._update_member_and_rebalance(group, member, req, ctx)
                else:
                    return self._current_generation(group, member.member_id, leader_view=False)
            case GroupState.EMPTY | GroupState.DEAD:
                return _join_error(req.member_id, ErrorCode.UNKNOWN_MEMBER_ID)
        return None

    def _current_generation(
        self, group: Group, member_id: str, *, leader_view: bool
    ) -> JoinGroupResponseData:
        members: tuple[JoinGroupMember, ...] = ()
        if leader_view and group.is_leader(member_id):
            members = self._member_list(group)
        return JoinGroupResponseData(
            generation_id=group.generation,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            member_id=member_id,
            members=members,
        )

    def _member_list(self, group: Group) -> tuple[JoinGroupMember, ...]:
        assert group.protocol_name is not None
        return tuple(
            JoinGroupMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                metadata=m.metadata(group.protocol_name),
            )
            for m in group.members.values()
        )

    def _update_member_and_rebalance(
        self, group: Group, member: Member, req: JoinGroupRequestData, ctx: Context
    ) -> None:
        member.protocols = self._protocols(req)
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        if member.join_reply is not None:  # a second JoinGroup replaces the first
            self._answer_join(
                member, _join_error(member.member_id, ErrorCode.REBALANCE_IN_PROGRESS)
            )
        member.join_reply = ctx.defer()
        member.join_version = req.api_version
        self._maybe_prepare_rebalance(group, f"Updating metadata for member {member.member_id}")

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.can_rebalance:
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        """``prepareRebalance``: a pending assignment is dropped (parked syncs answered
        REBALANCE_IN_PROGRESS); from Empty the join waits ``group.initial.rebalance.
        delay.ms`` (``InitialDelayedJoin``), else up to the rebalance timeout
        (``DelayedJoin``)."""
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self._reset_assignment(group, ErrorCode.REBALANCE_IN_PROGRESS)
        initial = group.is_(GroupState.EMPTY)
        before = group.transition(GroupState.PREPARING_REBALANCE, self._now_ms())
        self.trace(
            "event",
            "group_state_changed",
            group=group.group_id,
            generation=group.generation,
            reason=reason,
            **{"from": str(before), "to": str(group.state)},
        )
        if initial:
            delay = self.config.group_initial_rebalance_delay_ms
            self._arm_join(group, delay, max(group.rebalance_timeout_ms() - delay, 0))
        else:
            self._arm_join(group, group.rebalance_timeout_ms(), None)

    def _arm_join(self, group: Group, delay_ms: int, remaining_ms: int | None) -> None:
        """Arm the group's join timer; ``remaining_ms`` None is a ``DelayedJoin`` (which
        completes early once every member joined), else an ``InitialDelayedJoin`` with
        that much rebalance budget left."""
        group.join_timer += 1
        self._join_budget[group.group_id] = remaining_ms
        self._start_timer(
            delay_ms / 1000,
            GroupTimerFired(kind=_JOIN, group_id=group.group_id, generation=group.join_timer),
        )

    def _join_timer_expired(self, group: Group) -> None:
        remaining = self._join_budget.get(group.group_id)
        delay = self.config.group_initial_rebalance_delay_ms
        if remaining is not None and group.new_member_added and remaining > 0:
            group.new_member_added = False
            self._arm_join(group, min(delay, remaining), max(remaining - delay, 0))
            return
        self._complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        """``DelayedJoin.tryComplete``: done once every member rejoined (an
        ``InitialDelayedJoin`` always waits for its timer)."""
        if self._join_budget.get(group.group_id) is None and group.has_all_members_joined():
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """``onCompleteJoin``: dynamic members that did not rejoin are dropped, the next
        generation starts, and every parked JoinGroup is answered (the leader with the
        members' metadata)."""
        group.join_timer += 1  # any armed join timer is spent
        self._join_budget.pop(group.group_id, None)
        for member in [
            m for m in group.members.values() if not m.awaiting_join and not m.is_static
        ]:
            group.remove(member.member_id)
        if group.is_(GroupState.DEAD):
            return
        if not group.elect_joined_leader() and group.members:
            self._arm_join(group, group.rebalance_timeout_ms(), None)
            return
        now = self._now_ms()
        group.generation += 1
        if group.members:
            group.protocol_name = group.select_protocol()
            group.transition(GroupState.COMPLETING_REBALANCE, now)
        else:
            group.protocol_name = None
            group.transition(GroupState.EMPTY, now)
        self.trace(
            "event",
            "group_generation",
            group=group.group_id,
            generation=group.generation,
            protocol=group.protocol_name,
            members=len(group.members),
            state=str(group.state),
        )
        if group.is_(GroupState.EMPTY):
            self._append(group.group_id, [self._group_record(group)], lambda _code: None)
            return
        members = self._member_list(group)
        for member in group.members.values():
            if member.join_reply is not None:
                self._answer_join(
                    member,
                    JoinGroupResponseData(
                        generation_id=group.generation,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader=group.leader_id or "",
                        member_id=member.member_id,
                        members=members if group.is_leader(member.member_id) else (),
                    ),
                )
            member.is_new = False
            self._schedule_heartbeat(group, member, member.session_timeout_ms)

    def _answer_join(self, member: Member, answer: JoinGroupResponseData) -> None:
        reply, member.join_reply = member.join_reply, None
        if reply is not None:
            reply.send(self, answer)

    # ------------------------------------------------------------------ SyncGroup

    def _fenced(self, group: Group, member_id: str, instance: str | None) -> ErrorCode | None:
        """``GroupMetadata.isStaticMemberFenced``: the instance is known under another
        member id."""
        if instance is None:
            return None
        known = group.static_members.get(instance)
        if known is not None and known != member_id:
            return ErrorCode.FENCED_INSTANCE_ID
        return None

    def _generation_member(
        self, req: SyncGroupRequestData | HeartbeatRequestData
    ) -> tuple[Group, Member] | ErrorCode:
        """The checks SyncGroup and Heartbeat share, in Kafka's order: an unknown group or
        member is UNKNOWN_MEMBER_ID, a Dead group COORDINATOR_NOT_AVAILABLE, a fenced
        static member FENCED_INSTANCE_ID, another generation ILLEGAL_GENERATION."""
        group = self.groups.get(req.group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        fenced = self._fenced(group, req.member_id, req.group_instance_id)
        if fenced is not None:
            return fenced
        member = group.members.get(req.member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if req.generation_id != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        return group, member

    def _sync_group(self, req: SyncGroupRequestData, ctx: Context) -> Message | None:
        """``GroupCoordinator.handleSyncGroup``: a loading partition answers
        REBALANCE_IN_PROGRESS (the member rejoins once it is loaded)."""
        code = self._validate(req.group_id)
        if code is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            code = ErrorCode.REBALANCE_IN_PROGRESS
        found = code if code is not None else self._generation_member(req)
        if isinstance(found, ErrorCode):
            return SyncGroupResponseData(error_code=found)
        group, member = found
        if (req.protocol_type is not None and req.protocol_type != group.protocol_type) or (
            req.protocol_name is not None and req.protocol_name != group.protocol_name
        ):
            return SyncGroupResponseData(error_code=ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        match group.state:
            case GroupState.EMPTY | GroupState.DEAD:
                return SyncGroupResponseData(error_code=ErrorCode.UNKNOWN_MEMBER_ID)
            case GroupState.PREPARING_REBALANCE:
                return SyncGroupResponseData(error_code=ErrorCode.REBALANCE_IN_PROGRESS)
            case GroupState.STABLE:
                self._schedule_heartbeat(group, member, member.session_timeout_ms)
                return self._assignment_answer(group, member)
            case GroupState.COMPLETING_REBALANCE:
                if member.sync_reply is not None:
                    self._answer_sync(
                        member, SyncGroupResponseData(error_code=ErrorCode.REBALANCE_IN_PROGRESS)
                    )
                member.sync_reply = ctx.defer()
                self._schedule_heartbeat(group, member, member.session_timeout_ms)
                if group.is_leader(member.member_id):
                    self._store_assignment(group, req)
        return None

    def _store_assignment(self, group: Group, req: SyncGroupRequestData) -> None:
        """The leader's assignment (absent members get an empty one) is written with the
        group; once stored every member gets its part and the group is Stable."""
        given = {a.member_id: a.assignment for a in req.assignments}
        assignment = {m: given.get(m, b"") for m in group.members}
        generation = group.generation
        for member_id, value in assignment.items():
            group.members[member_id].assignment = value
        record = self._group_record(group)

        def stored(code: ErrorCode) -> None:
            if not (group.is_(GroupState.COMPLETING_REBALANCE) and group.generation == generation):
                return
            if code is not ErrorCode.NONE:
                self._reset_assignment(group, _store_error(code))
                self._maybe_prepare_rebalance(group, "storing the group failed")
                return
            for member_id, value in assignment.items():
                if member_id in group.members:
                    group.members[member_id].assignment = value
            group.transition(GroupState.STABLE, self._now_ms())
            self.trace("event", "group_stable", group=group.group_id, generation=generation)
            for member in group.members.values():
                if member.sync_reply is not None:
                    self._answer_sync(member, self._assignment_answer(group, member))

        self._append(group.group_id, [record], stored)

    def _assignment_answer(self, group: Group, member: Member) -> SyncGroupResponseData:
        return SyncGroupResponseData(
            assignment=member.assignment,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
        )

    def _reset_assignment(self, group: Group, code: ErrorCode) -> None:
        """``resetAndPropagateAssignmentError``."""
        for member in group.members.values():
            member.assignment = b""
            if member.sync_reply is not None:
                self._answer_sync(member, SyncGroupResponseData(error_code=code))

    def _answer_sync(self, member: Member, answer: SyncGroupResponseData) -> None:
        reply, member.sync_reply = member.sync_reply, None
        if reply is not None:
            reply.send(self, answer)

    # ------------------------------------------------------------------ Heartbeat

    def _heartbeat(self, req: HeartbeatRequestData) -> HeartbeatResponseData:
        """``GroupCoordinator.handleHeartbeat``: a loading partition answers NONE (the
        member finds out when it next joins)."""
        code = self._validate(req.group_id)
        if code is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return HeartbeatResponseData()
        found = code if code is not None else self._generation_member(req)
        if isinstance(found, ErrorCode):
            return HeartbeatResponseData(error_code=found)
        group, member = found
        if group.is_(GroupState.EMPTY):
            return HeartbeatResponseData(error_code=ErrorCode.UNKNOWN_MEMBER_ID)
        self._schedule_heartbeat(group, member, member.session_timeout_ms)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return HeartbeatResponseData(error_code=ErrorCode.REBALANCE_IN_PROGRESS)
        return HeartbeatResponseData()

    # ------------------------------------------------------------------ LeaveGroup

    def _leave_group(self, req: LeaveGroupRequestData) -> LeaveGroupResponseData:
        """``GroupCoordinator.handleLeaveGroup``, member by member."""
        code = self._validate(req.group_id)
        if code is not None:
            return LeaveGroupResponseData(error_code=code)
        group = self.groups.get(req.group_id)
        if group is None:
            return LeaveGroupResponseData(
                members=tuple(
                    LeaveGroupMemberResponse(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        error_code=ErrorCode.UNKNOWN_MEMBER_ID,
                    )
                    for m in req.members
                )
            )
        if group.is_(GroupState.DEAD):
            return LeaveGroupResponseData(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        answers = []
        for m in req.members:
            member_code = ErrorCode.NONE
            member_id = m.member_id
            if m.group_instance_id is not None and m.group_instance_id in group.static_members:
                known = group.static_members[m.group_instance_id]
                if member_id != UNKNOWN_MEMBER_ID and member_id != known:
                    member_code = ErrorCode.FENCED_INSTANCE_ID
                member_id = known
            if member_code is ErrorCode.NONE:
                if member_id in group.pending_members:
                    group.pending_members.discard(member_id)
                    if group.is_(GroupState.PREPARING_REBALANCE):
                        self._try_complete_join(group)
                elif member_id in group.members:
                    self.trace("event", "group_member_left", group=group.group_id, member=member_id)
                    self._remove_member_and_update(group, group.members[member_id])
                else:
                    member_code = ErrorCode.UNKNOWN_MEMBER_ID
            answers.append(
                LeaveGroupMemberResponse(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    error_code=member_code,
                )
            )
        return LeaveGroupResponseData(members=tuple(answers))

    def _remove_member_and_update(self, group: Group, member: Member) -> None:
        """``removeMemberAndUpdateGroup``: a parked join is answered UNKNOWN_MEMBER_ID;
        the group rebalances (or, already rebalancing, may complete its join now)."""
        if member.join_reply is not None:
            self._answer_join(member, _join_error(member.member_id, ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        match group.state:
            case GroupState.DEAD | GroupState.EMPTY:
                pass
            case GroupState.PREPARING_REBALANCE:
                self._try_complete_join(group)
            case GroupState.STABLE | GroupState.COMPLETING_REBALANCE:
                self._prepare_rebalance(group, f"removing member {member.member_id}")

    # ------------------------------------------------------------------ offsets

    def _commit_offsets(self, req: OffsetCommitRequestData, ctx: Context) -> Message | None:
        """``GroupCoordinator.handleCommitOffsets`` (the broker answered unknown topics
        already)."""
        code = self._validate(req.group_id, empty_allowed=True)
        group = self.groups.get(req.group_id)
        if code is None and group is None:
            if req.generation_id < 0:  # a commit from outside any group (assign())
                group = self.groups[req.group_id] = Group(
                    req.group_id, current_state_timestamp=self._now_ms()
                )
            else:
                code = ErrorCode.ILLEGAL_GENERATION
        if code is None and group is not None:
            code = self._commit_refused(group, req)
        if code is not None:
            return commit_answer(req, {}, code)
        assert group is not None
        now = self._now_ms()
        too_large: set[tuple[str, int]] = set()
        values: dict[tuple[str, int], OffsetValue] = {}
        for topic in req.topics:
            for p in topic.partitions:
                metadata = p.committed_metadata or ""
                if len(metadata) > self.config.offset_metadata_max_bytes:
                    too_large.add((topic.name, p.partition_index))
                    continue
                values[topic.name, p.partition_index] = OffsetValue(
                    offset=p.committed_offset,
                    metadata=metadata,
                    commit_timestamp=now,
                    leader_epoch=p.committed_leader_epoch,
                    expire_timestamp=(
                        now + req.retention_time_ms if req.retention_time_ms >= 0 else None
                    ),
                )
        codes = {key: ErrorCode.OFFSET_METADATA_TOO_LARGE for key in too_large}
        if not values:
            return commit_answer(req, codes, ErrorCode.NONE)
        records = [
            ProducerRecord(
                key=encode_offset_key(OffsetKey(req.group_id, topic, partition)),
                value=encode_offset_value(value),
                timestamp_ms=now,
            )
            for (topic, partition), value in values.items()
        ]
        reply = ctx.defer()
        group.pending_commits.update(values.keys())

        def stored(outcome: ErrorCode) -> None:
            for key in values:
                group.pending_commits[key] -= 1
                if not group.pending_commits[key]:
                    del group.pending_commits[key]
            error = ErrorCode.NONE if outcome is ErrorCode.NONE else _commit_error(outcome)
            if error is ErrorCode.NONE and not group.is_(GroupState.DEAD):
                group.offsets.update(values)
            for key in values:
                codes[key] = error
            reply.send(self, commit_answer(req, codes, ErrorCode.NONE))

        self._append(req.group_id, records, stored)
        return None

    def _commit_refused(self, group: Group, req: OffsetCommitRequestData) -> ErrorCode | None:
        """Why a commit to an existing group is refused (``doCommitOffsets``), if it is."""
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        fenced = self._fenced(group, req.member_id, req.group_instance_id)
        if fenced is not None:
            return fenced
        if req.generation_id < 0 and group.is_(GroupState.EMPTY):
            return None
        member = group.members.get(req.member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if req.generation_id != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_(GroupState.COMPLETING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        self._schedule_heartbeat(group, member, member.session_timeout_ms)
        return None

    def _fetch_offsets(self, req: OffsetFetchRequestData) -> OffsetFetchResponseData:
        """``GroupCoordinator.handleFetchOffsets``: an unknown group or partition is
        offset -1 with no error."""
        code = self._validate(req.group_id, empty_allowed=True)
        if code is not None:
            return OffsetFetchResponseData(
                topics=tuple(
                    OffsetFetchTopicResponse(
                        name=t.name,
                        partitions=tuple(
                            OffsetFetchPartitionResponse(partition_index=p, error_code=code)
                            for p in t.partition_indexes
                        ),
                    )
                    for t in req.topics or ()
                ),
                error_code=code,
            )
        group = self.groups.get(req.group_id)
        offsets = group.offsets if group is not None else {}
        if req.topics is None:
            asked: dict[str, list[int]] = {}
            for topic, partition in sorted(offsets):
                asked.setdefault(topic, []).append(partition)
        else:
            asked = {t.name: list(t.partition_indexes) for t in req.topics}
        topics = []
        for name, partitions in asked.items():
            answers = []
            for p in partitions:
                value = offsets.get((name, p))
                answers.append(
                    OffsetFetchPartitionResponse(partition_index=p)
                    if value is None
                    else OffsetFetchPartitionResponse(
                        partition_index=p,
                        committed_offset=value.offset,
                        committed_leader_epoch=value.leader_epoch,
                        metadata=value.metadata,
                    )
                )
            topics.append(OffsetFetchTopicResponse(name=TopicName(name), partitions=tuple(answers)))
        return OffsetFetchResponseData(topics=tuple(topics))

    # ------------------------------------------------------------------ admin

    def _list_groups(self, req: ListGroupsRequestData) -> ListGroupsResponseData:
        """``GroupCoordinator.handleListGroups``: the groups of the loaded partitions (in
        the states asked for, if any); COORDINATOR_LOAD_IN_PROGRESS while a partition
        loads, with the groups loaded so far."""
        states = set(req.states_filter)
        return ListGroupsResponseData(
            error_code=(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.loading else ErrorCode.NONE),
            groups=tuple(
                ListedGroup(
                    group_id=g.group_id,
                    protocol_type=g.protocol_type or "",
                    group_state=str(g.state),
                )
                for g in sorted(self.groups.values(), key=lambda g: g.group_id)
                if not states or str(g.state) in states
            ),
        )

    def _describe_groups(self, req: DescribeGroupsRequestData) -> DescribeGroupsResponseData:
        """``GroupCoordinator.handleDescribeGroup`` for each group: an unknown one is Dead
        with no members; only a Stable group shows its protocol and the members'
        metadata and assignments (``GroupMetadata.summary``)."""
        operations = GROUP_AUTHORIZED_OPERATIONS if req.include_authorized_operations else -(2**31)
        described = []
        for group_id in req.groups:
            code = self._validate(group_id, empty_allowed=True)
            group = self.groups.get(group_id)
            if code is not None:
                described.append(DescribedGroup(group_id=group_id, error_code=code))
            elif group is None:
                described.append(
                    DescribedGroup(
                        group_id=group_id,
                        group_state=str(GroupState.DEAD),
                        authorized_operations=operations,
                    )
                )
            else:
                stable = group.is_(GroupState.STABLE) and group.protocol_name is not None
                described.append(
                    DescribedGroup(
                        group_id=group_id,
                        group_state=str(group.state),
                        protocol_type=group.protocol_type or "",
                        protocol_data=(group.protocol_name or "") if stable else "",
                        members=tuple(
                            DescribedGroupMember(
                                member_id=m.member_id,
                                group_instance_id=m.group_instance_id,
                                client_id=m.client_id,
                                client_host=m.client_host,
                                member_metadata=(
                                    m.metadata(group.protocol_name)
                                    if stable and group.protocol_name
                                    else b""
                                ),
                                member_assignment=m.assignment if stable else b"",
                            )
                            for m in group.members.values()
                        ),
                        authorized_operations=operations,
                    )
                )
        return DescribeGroupsResponseData(groups=tuple(described))

    def _delete_groups(self, req: DeleteGroupsRequestData) -> DeleteGroupsResponseData:
        """``GroupCoordinator.handleDeleteGroups``: an Empty group goes Dead and its
        offsets and group record get tombstones (``cleanupGroupMetadata``, not waited
        for); an unknown or Dead one is GROUP_ID_NOT_FOUND, one with members
        NON_EMPTY_GROUP."""
        results = []
        for group_id in req.groups_names:
            code = self._validate(group_id, empty_allowed=True)
            group = self.groups.get(group_id)
            if code is None:
                if group is None or group.is_(GroupState.DEAD):
                    code = ErrorCode.GROUP_ID_NOT_FOUND
                elif not group.is_(GroupState.EMPTY):
                    code = ErrorCode.NON_EMPTY_GROUP
            if code is None and group is not None:
                self._remove_group(group)
            results.append(
                DeletableGroupResult(group_id=group_id, error_code=code or ErrorCode.NONE)
            )
        return DeleteGroupsResponseData(results=tuple(results))

    def _delete_offsets(self, req: OffsetDeleteRequestData) -> OffsetDeleteResponseData:
        """``GroupCoordinator.handleDeleteOffsets``: an Empty group drops every offset
        asked; an active consumer group those of topics its members do not subscribe to
        (the others GROUP_SUBSCRIBED_TO_TOPIC); another active group none
        (NON_EMPTY_GROUP); a missing or Dead one is GROUP_ID_NOT_FOUND. Tombstones are
        written for what is dropped, not waited for."""
        code = self._validate(req.group_id)
        group = self.groups.get(req.group_id)
        if code is None and (group is None or group.is_(GroupState.DEAD)):
            code = ErrorCode.GROUP_ID_NOT_FOUND
        active = group is not None and not group.is_(GroupState.EMPTY)
        if code is None and active and group is not None and group.protocol_type != "consumer":
            code = ErrorCode.NON_EMPTY_GROUP
        if code is not None or group is None:
            return OffsetDeleteResponseData(error_code=code or ErrorCode.GROUP_ID_NOT_FOUND)
        codes: dict[tuple[str, int], ErrorCode] = {}
        dropped: list[tuple[str, int]] = []
        for topic in req.topics:
            subscribed = not group.is_(GroupState.EMPTY) and group.is_subscribed_to(topic.name)
            for partition in topic.partition_indexes:
                if subscribed:
                    codes[topic.name, partition] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    codes[topic.name, partition] = ErrorCode.NONE
                    if group.offsets.pop((topic.name, partition), None) is not None:
                        dropped.append((topic.name, partition))
        if dropped:
            now = self._now_ms()
            self._append(
                group.group_id,
                [
                    ProducerRecord(
                        key=encode_offset_key(OffsetKey(group.group_id, topic, partition)),
                        value=None,
                        timestamp_ms=now,
                    )
                    for topic, partition in dropped
                ],
                lambda _code: None,
            )
        return OffsetDeleteResponseData(
            topics=tuple(
                OffsetCommitTopicResponse(
                    name=t.name,
                    partitions=tuple(
                        OffsetCommitPartitionResponse(
                            partition_index=p, error_code=codes[t.name, p]
                        )
                        for p in t.partition_indexes
                    ),
                )
                for t in req.topics
            )
        )

    def _deleted_partitions(self, partitions: tuple[tuple[str, int], ...]) -> None:
        """``handleDeletedPartitions``: the offsets of deleted topics' partitions leave
        every group loaded here (``cleanupGroupMetadata``)."""
        gone = set(partitions)

        def deleted(group: Group) -> list[tuple[str, int]]:
            dropped = sorted(tp for tp in group.offsets if tp in gone)
            for tp in dropped:
                del group.offsets[tp]
            return dropped

        self._cleanup_group_metadata(deleted, "group_offsets_deleted")

    def _schedule_expiry(self) -> None:
        """Arm the next ``delete-expired-group-metadata`` run while this coordinator owns
        a partition (Kafka runs it from start-up every
        ``offsets.retention.check.interval.ms`` whether or not it owns any: with nothing
        owned a run finds nothing)."""
        if self.owned and not self._expiry_armed:
            self._expiry_armed = True
            self._start_timer(
                self.config.offsets_retention_check_interval_ms / 1000,
                GroupTimerFired(kind=_EXPIRY, group_id=""),
            )

    def _expire_offsets(self) -> None:
        """``GroupMetadataManager.cleanupGroupMetadata`` with ``removeExpiredOffsets``:
        offsets older than ``offsets.retention.minutes`` leave their groups."""
        now = self._now_ms()
        retention = self.config.offsets_retention_ms
        self._cleanup_group_metadata(
            lambda group: group.remove_expired_offsets(now, retention), "group_offsets_expired"
        )

    def _cleanup_group_metadata(
        self, selector: Callable[[Group], list[tuple[str, int]]], event: str
    ) -> None:
        """``cleanupGroupMetadata``: ``selector`` takes offsets out of each group loaded
        here; they get tombstones, and an Empty group left without offsets goes Dead and
        is forgotten (its group record tombstoned too unless it never had a generation).
        The tombstones are appended and not waited for: one that is lost is written again
        by a later run."""
        now = self._now_ms()
        for group in list(self.groups.values()):
            dropped = selector(group)
            records = [
                ProducerRecord(
                    key=encode_offset_key(OffsetKey(group.group_id, topic, partition)),
                    value=None,
                    timestamp_ms=now,
                )
                for topic, partition in dropped
            ]
            if group.is_(GroupState.EMPTY) and not group.has_offsets():
                group.transition(GroupState.DEAD, now)
                del self.groups[group.group_id]
                self.trace("event", "group_dead", group=group.group_id)
                if group.generation > 0:
                    records.append(
                        ProducerRecord(
                            key=encode_group_key(group.group_id), value=None, timestamp_ms=now
                        )
                    )
            if records:
                self.trace("event", event, group=group.group_id, offsets=len(dropped))
                self._append(group.group_id, records, lambda _code: None)

    def _remove_group(self, group: Group) -> None:
        now = self._now_ms()
        group.transition(GroupState.DEAD, now)
        del self.groups[group.group_id]
        tombstones = [
            ProducerRecord(
                key=encode_offset_key(OffsetKey(group.group_id, topic, partition)),
                value=None,
                timestamp_ms=now,
            )
            for topic, partition in sorted(group.offsets)
        ]
        if group.generation > 0:
            tombstones.append(
                ProducerRecord(key=encode_group_key(group.group_id), value=None, timestamp_ms=now)
            )
        group.offsets.clear()
        self.trace("event", "group_deleted", group=group.group_id, tombstones=len(tombstones))
        if tombstones:
            self._append(group.group_id, tombstones, lambda _code: None)


def _join_error(member_id: str, code: ErrorCode) -> JoinGroupResponseData:
    return JoinGroupResponseData(error_code=code, member_id=member_id)


def _store_error(code: ErrorCode) -> ErrorCode:
    """How ``storeGroup`` maps an append's error for JoinGroup and SyncGroup."""
    match code:
        case (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            | ErrorCode.NOT_ENOUGH_REPLICAS
            | ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        ):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        case ErrorCode.NOT_LEADER_OR_FOLLOWER | ErrorCode.KAFKA_STORAGE_ERROR:
            return ErrorCode.NOT_COORDINATOR
        case ErrorCode.REQUEST_TIMED_OUT:
            return ErrorCode.REBALANCE_IN_PROGRESS
        case (
            ErrorCode.MESSAGE_TOO_LARGE
            | ErrorCode.RECORD_LIST_TOO_LARGE
            | ErrorCode.INVALID_FETCH_SIZE
        ):
            return ErrorCode.UNKNOWN_SERVER_ERROR
    return code


def _commit_error(code: ErrorCode) -> ErrorCode:
    """How ``storeOffsets`` maps an append's error for OffsetCommit."""
    match code:
        case (
            ErrorCode.MESSAGE_TOO_LARGE
            | ErrorCode.RECORD_LIST_TOO_LARGE
            | ErrorCode.INVALID_FETCH_SIZE
        ):
            return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
        case ErrorCode.REQUEST_TIMED_OUT:
            return ErrorCode.REQUEST_TIMED_OUT
    return _store_error(code)


def commit_answer(
    req: OffsetCommitRequestData, codes: Mapping[tuple[str, int], ErrorCode], default: ErrorCode
) -> OffsetCommitResponseData:
    """The answer to ``req``, in its order: each partition's code in ``codes``, else
    ``default``."""
    return OffsetCommitResponseData(
        topics=tuple(
            OffsetCommitTopicResponse(
                name=t.name,
                partitions=tuple(
                    OffsetCommitPartitionResponse(
                        partition_index=p.partition_index,
                        error_code=codes.get((t.name, p.partition_index), default),
                    )
                    for p in t.partitions
                ),
            )
            for t in req.topics
        )
    )
