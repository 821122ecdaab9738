"""A consumer group's state as the coordinator keeps it: Kafka's ``GroupMetadata`` and
``MemberMetadata``.

Plain state, touched only on the ``GroupCoordinator``'s task. The state machine is a
table (``VALID_PREVIOUS``): ``transition`` refuses a move whose previous state is not
listed, as ``GroupMetadata.assertValidTransition`` does.
"""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from actors.group.records import OffsetValue
from actors.runtime.actor import DeferredReply

__all__ = [
    "VALID_PREVIOUS",
    "Group",
    "GroupState",
    "Member",
]


class GroupState(StrEnum):
    """The group states, with the names DescribeGroups and ListGroups put on the wire."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


VALID_PREVIOUS: Final[dict[GroupState, frozenset[GroupState]]] = {
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}
"""Each target state and the states it may be entered from (``GroupMetadata``'s
``validPreviousStates``)."""


@dataclass
class Member:
    """``MemberMetadata``: one member, its protocols and what it waits for."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    join_reply: DeferredReply | None = None
    join_version: int = 0
    sync_reply: DeferredReply | None = None
    is_new: bool = False
    deadline: float = 0.0
    """When the member expires without a heartbeat (the coordinator's clock)."""
    timer_seq: int = 0
    """The number of the member's heartbeat timer in force; an older one's tick is stale."""
    timer_at: float | None = None
    """When that timer fires (None: none armed)."""

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        return self.join_reply is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_reply is not None

    def protocol_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.protocols)

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(protocol)

    def matches(self, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        """``MemberMetadata.matches``: the same protocols with the same metadata."""
        return self.protocols == protocols

    def has_satisfied_heartbeat(self) -> bool:
        """``MemberMetadata.hasSatisfiedHeartbeat`` once its deadline passed without a
        heartbeat: a member awaiting a join or sync answer is alive by waiting (its
        rebalance's own timeout bounds it), unless it is new."""
        return not self.is_new and (self.awaiting_join or self.awaiting_sync)


@dataclass
class Group:
    """``GroupMetadata``: a group's members, generation and committed offsets."""

    group_id: str
    state: GroupState = GroupState.EMPTY
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation: int = 0
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)
    offsets: dict[tuple[str, int], OffsetValue] = field(default_factory=dict)
    pending_commits: Counter[tuple[str, int]] = field(default_factory=Counter)
    """Per partition, the commits appended and not yet answered
    (``pendingOffsetCommits``): expiry leaves their offsets alone."""
    new_member_added: bool = False
    current_state_timestamp: int = -1
    join_timer: int = 0
    """The number of the join timer in force (``DelayedJoin``/``InitialDelayedJoin``);
    a tick of an older one is ignored."""

    def transition(self, target: GroupState, now_ms: int) -> GroupState:
        """Move to ``target``; the state left. Raises ``ValueError`` for a move the
        table does not allow."""
        if self.state not in VALID_PREVIOUS[target]:
            raise ValueError(
                f"Group {self.group_id} should be in the {sorted(VALID_PREVIOUS[target])} "
                f"states before moving to {target} state. Instead it is in {self.state} state"
            )
        before = self.state
        self.state = target
        self.current_state_timestamp = now_ms
        return before

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    @property
    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    def add(self, member: Member, reply: DeferredReply | None, version: int) -> None:
        """``GroupMetadata.add``: the first member sets the protocol type and becomes
        leader."""
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        member.join_reply = reply
        member.join_version = version

    def remove(self, member_id: str) -> Member | None:
        """``GroupMetadata.remove``: a leaving leader hands over to the next member."""
        member = self.members.pop(member_id, None)
        instance = member.group_instance_id if member is not None else None
        if instance is not None and self.static_members.get(instance) == member_id:
            del self.static_members[instance]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def has_all_members_joined(self) -> bool:
        """``GroupMetadata.hasAllMembersJoined``."""
        return all(m.awaiting_join for m in self.members.values()) and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def supports_protocols(self, protocol_type: str, protocols: tuple[str, ...]) -> bool:
        """``GroupMetadata.supportsProtocols``: an empty group takes any non-empty type
        and list; otherwise the same type and a protocol every member supports."""
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        return self.protocol_type == protocol_type and bool(self._candidates() & set(protocols))

    def _candidates(self) -> set[str]:
        sets = [set(m.protocol_names()) for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str:
        """``GroupMetadata.selectProtocol``: each member votes for the first protocol of
        its own list that every member supports; the most votes win (ties: the first
        candidate in the leader's order, a choice Kafka leaves open)."""
        candidates = self._candidates()
        votes: Counter[str] = Counter()
        for m in self.members.values():
            votes[next(p for p in m.protocol_names() if p in candidates)] += 1
        order = {p: i for i, p in enumerate(self._ordered_candidates(candidates))}
        return max(votes, key=lambda p: (votes[p], -order[p]))

    def _ordered_candidates(self, candidates: set[str]) -> list[str]:
        first = self.members.get(self.leader_id) if self.leader_id is not None else None
        names = first.protocol_names() if first else tuple(sorted(candidates))
        return [p for p in names if p in candidates] + sorted(candidates - set(names))

    def elect_joined_leader(self) -> bool:
        """``GroupMetadata.maybeElectNewJoinedLeader``: keep a leader that rejoined, else
        any member that did; False when no member rejoined."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.awaiting_join:
                self.leader_id = member_id
                return True
        return False

    def has_offsets(self) -> bool:
        """``GroupMetadata.hasOffsets``: committed offsets, or commits in flight."""
        return bool(self.offsets) or bool(self.pending_commits)

    def num_awaiting(self) -> int:
        """``GroupMetadata.numAwaiting``: the members whose join waits for its answer."""
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def subscribed_topics(self) -> set[str] | None:
        """``GroupMetadata.computeSubscribedTopics``: the topics a consumer group's members
        subscribe to (their ``consumer`` protocol metadata says so); None for a group of
        another protocol type, without members or a chosen protocol, or whose metadata
        cannot be read."""
        if self.protocol_type != "consumer" or self.protocol_name is None or not self.members:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            try:
                subscription = consumer_subscription(member.metadata(self.protocol_name))
            except KeyError:
                return None
            if subscription is None:
                return None
            topics.update(subscription)
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        """``GroupMetadata.isSubscribedToTopic``."""
        topics = self.subscribed_topics()
        return topics is not None and topic in topics

    def remove_expired_offsets(self, now_ms: int, retention_ms: int) -> list[tuple[str, int]]:
        """``GroupMetadata.removeExpiredOffsets``: the offsets whose retention has passed
        leave the group (returned, in order); none with a commit in flight. An Empty group
        that has had a protocol type counts from when it became Empty (its commits' own
        times where that is unknown); a consumer group with members, from each commit, for
        the topics its members do not subscribe to; a group that never had members (only
        commits, ``assign()``), from each commit; any other group keeps its offsets. A
        commit that named its own retention (OffsetCommit v1-v4) expires at its
        ``expire_timestamp`` instead."""
        subscribed: set[str] = set()
        if self.protocol_type is not None and self.is_(GroupState.EMPTY):
            state_time = self.current_state_timestamp

            def base(value: OffsetValue) -> int:
                return state_time if state_time >= 0 else value.commit_timestamp
        elif self.protocol_type == "consumer" and (topics := self.subscribed_topics()) is not None:
            subscribed = topics

            def base(value: OffsetValue) -> int:
                return value.commit_timestamp
        elif self.protocol_type is None:

            def base(value: OffsetValue) -> int:
                return value.commit_timestamp
        else:
            return []
        expired = [
            tp
            for tp, value in self.offsets.items()
            if tp[0] not in subscribed
            and not self.pending_commits[tp]
            and (
                now_ms - base(value) >= retention_ms
                if value.expire_timestamp is None
                else now_ms >= value.expire_timestamp
            )
        ]
        for tp in expired:
            del self.offsets[tp]
        return sorted(expired)


def consumer_subscription(metadata: bytes) -> list[str] | None:
    """The topics of a consumer's subscription (``ConsumerProtocolSubscription``: int16
    version, then an int32 count of strings), None if it cannot be read."""
    try:
        at = 2
        (count,) = struct.unpack_from(">i", metadata, at)
        at += 4
        topics = []
        for _ in range(count):
            (length,) = struct.unpack_from(">h", metadata, at)
            at += 2
            if length < 0 or at + length > len(metadata):
                return None
            topics.append(metadata[at : at + length].decode())
            at += length
        return topics
    except (struct.error, UnicodeDecodeError):
        return None


def consumer_assignment(data: bytes) -> list[tuple[str, int]]:
    """The partitions of a consumer's assignment (``ConsumerProtocol.
    deserializeAssignment``: int16 version, then topics, each a string and int32
    partitions); empty bytes or ones that do not read are no partitions."""
    try:
        at = 2
        (topics,) = struct.unpack_from(">i", data, at)
        at += 4
        out = []
        for _ in range(topics):
            (length,) = struct.unpack_from(">h", data, at)
            at += 2
            if length < 0 or at + length > len(data):
                return []
            topic = data[at : at + length].decode()
            at += length
            (count,) = struct.unpack_from(">i", data, at)
            at += 4
            for _ in range(count):
                out.append((topic, struct.unpack_from(">i", data, at)[0]))
                at += 4
        return out
    except (struct.error, UnicodeDecodeError):
        return []
