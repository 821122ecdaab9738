"""The consumer-group APIs as kemu's own typed values, and the group coordinator's own
messages.

What a client asks the group coordinator (Kafka's ``GroupCoordinator``) and what it
answers, mirroring Kafka 2.7's message schemas (``clients/src/main/resources/common/
message/*.json``) field for field, in snake_case; the Kafka listener turns each served
version into these values and back (``cluster.kafka.apis``: ``find_coordinator``,
``join_group``, ``sync_group``, ``heartbeat``, ``leave_group``, ``offset_commit``,
``offset_fetch``). The conventions of ``protocol.kafka_data`` hold: a request holds what
every served version can carry (fields a version lacks take Kafka's default), a response
what the newest can say.

=========================  =======  ========  =========================================
API                        key      versions  request / response values
=========================  =======  ========  =========================================
OffsetCommit               8        2-8       ``OffsetCommitRequestData`` / ``...``
OffsetFetch                9        1-7       ``OffsetFetchRequestData`` / ``...``
FindCoordinator            10       0-3       ``FindCoordinatorRequestData`` / ``...``
JoinGroup                  11       0-7       ``JoinGroupRequestData`` / ``...``
Heartbeat                  12       0-4       ``HeartbeatRequestData`` / ``...``
LeaveGroup                 13       0-4       ``LeaveGroupRequestData`` / ``...``
SyncGroup                  14       0-5       ``SyncGroupRequestData`` / ``...``
DescribeGroups             15       0-5       ``DescribeGroupsRequestData`` / ``...``
ListGroups                 16       0-4       ``ListGroupsRequestData`` / ``...``
DeleteGroups               42       0-2       ``DeleteGroupsRequestData`` / ``...``
OffsetDelete               47       0         ``OffsetDeleteRequestData`` / ``...``
=========================  =======  ========  =========================================

Kafka 2.7 serves OffsetCommit from v0 and OffsetFetch from v0, whose offsets live in
ZooKeeper (``/consumers/<group>/offsets``); the wire codec kemu uses has no such versions,
so kemu does not advertise them. Every 2.7 client negotiates a newer one.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

import msgspec

from protocol.base import Message
from protocol.errors import ErrorCode
from protocol.ids import TopicName

__all__ = [
    "GROUP_AUTHORIZED_OPERATIONS",
    "NO_GENERATION",
    "SYNC_WAIT_MS",
    "UNKNOWN_MEMBER_ID",
    "CoordinatorType",
    "DeletableGroupResult",
    "DeleteGroupsRequestData",
    "DeleteGroupsResponseData",
    "DescribeGroupsRequestData",
    "DescribeGroupsResponseData",
    "DescribedGroup",
    "DescribedGroupMember",
    "FindCoordinatorRequestData",
    "FindCoordinatorResponseData",
    "GroupAppendDone",
    "GroupLoaded",
    "GroupPartitionsDeleted",
    "GroupPartitionsElected",
    "GroupPartitionsResigned",
    "GroupRequestData",
    "GroupResponseData",
    "GroupTimerFired",
    "HeartbeatRequestData",
    "HeartbeatResponseData",
    "JoinGroupMember",
    "JoinGroupProtocol",
    "JoinGroupRequestData",
    "JoinGroupResponseData",
    "KafkaGroupRequestData",
    "LeaveGroupMember",
    "LeaveGroupMemberResponse",
    "LeaveGroupRequestData",
    "LeaveGroupResponseData",
    "ListGroupsRequestData",
    "ListGroupsResponseData",
    "ListedGroup",
    "OffsetCommitPartition",
    "OffsetCommitPartitionResponse",
    "OffsetCommitRequestData",
    "OffsetCommitResponseData",
    "OffsetCommitTopic",
    "OffsetCommitTopicResponse",
    "OffsetDeleteRequestData",
    "OffsetDeleteResponseData",
    "OffsetFetchPartitionResponse",
    "OffsetFetchRequestData",
    "OffsetFetchResponseData",
    "OffsetFetchTopic",
    "OffsetFetchTopicResponse",
    "SyncGroupAssignment",
    "SyncGroupRequestData",
    "SyncGroupResponseData",
]

UNKNOWN_MEMBER_ID: Final = ""
"""The member id of a member the coordinator has not named yet
(``JoinGroupRequest.UNKNOWN_MEMBER_ID``)."""
SYNC_WAIT_MS: Final = 1_800_000
"""The longest a SyncGroup may wait for its answer (``group.max.session.timeout.ms``)."""
NO_GENERATION: Final = -1
"""``OffsetCommitRequest.DEFAULT_GENERATION_ID``: a commit from outside any generation."""


class CoordinatorType(IntEnum):
    """FindCoordinator ``key_type`` (``FindCoordinatorRequest.CoordinatorType``)."""

    GROUP = 0
    TRANSACTION = 1


class _Value(msgspec.Struct, frozen=True, kw_only=True):
    """Base of the plain values nested inside requests and responses."""


# ------------------------------------------------------------------ FindCoordinator (10)


class FindCoordinatorRequestData(Message, frozen=True, kw_only=True):
    key: str
    key_type: int = CoordinatorType.GROUP


class FindCoordinatorResponseData(Message, frozen=True, kw_only=True):
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    node_id: int = -1
    host: str = ""
    port: int = -1
    throttle_time_ms: int = 0


# ------------------------------------------------------------------------ JoinGroup (11)


class JoinGroupProtocol(_Value, frozen=True, kw_only=True):
    name: str
    metadata: bytes


class JoinGroupRequestData(Message, frozen=True, kw_only=True):
    """A JoinGroup. ``client_id`` and ``client_host`` come from the request's header and
    connection, as Kafka's ``KafkaApis.handleJoinGroupRequest`` passes them on;
    ``api_version`` decides ``requireKnownMemberId`` (v4+)."""

    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    member_id: str
    protocol_type: str
    protocols: tuple[JoinGroupProtocol, ...]
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 7

    @property
    def timeout_ms(self) -> int:
        """How long the answer may take: a JoinGroup waits for the rebalance."""
        return max(self.rebalance_timeout_ms, self.session_timeout_ms)


class JoinGroupMember(_Value, frozen=True, kw_only=True):
    member_id: str
    metadata: bytes
    group_instance_id: str | None = None


class JoinGroupResponseData(Message, frozen=True, kw_only=True):
    error_code: ErrorCode = ErrorCode.NONE
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: tuple[JoinGroupMember, ...] = ()
    throttle_time_ms: int = 0


# ------------------------------------------------------------------------ SyncGroup (14)


class SyncGroupAssignment(_Value, frozen=True, kw_only=True):
    member_id: str
    assignment: bytes


class SyncGroupRequestData(Message, frozen=True, kw_only=True):
    group_id: str
    generation_id: int
    member_id: str
    assignments: tuple[SyncGroupAssignment, ...] = ()
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None

    @property
    def timeout_ms(self) -> int:
        """How long the answer may take: a follower's SyncGroup waits for the leader's
        assignment, which Kafka bounds only by the leader's session (at most
        ``group.max.session.timeout.ms``' default)."""
        return SYNC_WAIT_MS


class SyncGroupResponseData(Message, frozen=True, kw_only=True):
    error_code: ErrorCode = ErrorCode.NONE
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None
    throttle_time_ms: int = 0


# ------------------------------------------------------------------------ Heartbeat (12)


class HeartbeatRequestData(Message, frozen=True, kw_only=True):
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


class HeartbeatResponseData(Message, frozen=True, kw_only=True):
    error_code: ErrorCode = ErrorCode.NONE
    throttle_time_ms: int = 0


# ----------------------------------------------------------------------- LeaveGroup (13)


class LeaveGroupMember(_Value, frozen=True, kw_only=True):
    member_id: str
    group_instance_id: str | None = None


class LeaveGroupRequestData(Message, frozen=True, kw_only=True):
    """v0-v2 name one member (``member_id``), v3+ a batch; both become ``members``."""

    group_id: str
    members: tuple[LeaveGroupMember, ...]


class LeaveGroupMemberResponse(_Value, frozen=True, kw_only=True):
    member_id: str
    group_instance_id: str | None = None
    error_code: ErrorCode = ErrorCode.NONE


class LeaveGroupResponseData(Message, frozen=True, kw_only=True):
    """v0-v2 carry only ``error_code``: the top-level error, else the one member's."""

    error_code: ErrorCode = ErrorCode.NONE
    members: tuple[LeaveGroupMemberResponse, ...] = ()
    throttle_time_ms: int = 0


# --------------------------------------------------------------------- OffsetCommit (8)


class OffsetCommitPartition(_Value, frozen=True, kw_only=True):
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int = -1
    committed_metadata: str | None = ""


class OffsetCommitTopic(_Value, frozen=True, kw_only=True):
    name: TopicName
    partitions: tuple[OffsetCommitPartition, ...]


class OffsetCommitRequestData(Message, frozen=True, kw_only=True):
    """``retention_time_ms`` -1 (v2-v4's default, and every later version) keeps the
    broker's retention; another value is an explicit expiry (offset value v1)."""

    group_id: str
    topics: tuple[OffsetCommitTopic, ...]
    generation_id: int = NO_GENERATION
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None
    retention_time_ms: int = -1


class OffsetCommitPartitionResponse(_Value, frozen=True, kw_only=True):
    partition_index: int
    error_code: ErrorCode = ErrorCode.NONE


class OffsetCommitTopicResponse(_Value, frozen=True, kw_only=True):
    name: TopicName
    partitions: tuple[OffsetCommitPartitionResponse, ...]


class OffsetCommitResponseData(Message, frozen=True, kw_only=True):
    topics: tuple[OffsetCommitTopicResponse, ...]
    throttle_time_ms: int = 0


# ---------------------------------------------------------------------- OffsetFetch (9)


class OffsetFetchTopic(_Value, frozen=True, kw_only=True):
    name: TopicName
    partition_indexes: tuple[int, ...]


class OffsetFetchRequestData(Message, frozen=True, kw_only=True):
    """``topics`` None (v2+) asks for every committed offset of the group."""

    group_id: str
    topics: tuple[OffsetFetchTopic, ...] | None
    require_stable: bool = False


class OffsetFetchPartitionResponse(_Value, frozen=True, kw_only=True):
    partition_index: int
    committed_offset: int = -1
    committed_leader_epoch: int = -1
    metadata: str | None = ""
    error_code: ErrorCode = ErrorCode.NONE


class OffsetFetchTopicResponse(_Value, frozen=True, kw_only=True):
    name: TopicName
    partitions: tuple[OffsetFetchPartitionResponse, ...]


class OffsetFetchResponseData(Message, frozen=True, kw_only=True):
    """``error_code`` is the top-level error (v2+); v0-v1 put it on every partition."""

    topics: tuple[OffsetFetchTopicResponse, ...]
    error_code: ErrorCode = ErrorCode.NONE
    throttle_time_ms: int = 0


# ------------------------------------------------------------------------ ListGroups (16)


class ListGroupsRequestData(Message, frozen=True, kw_only=True):
    """``states_filter`` (v4): only groups in these states; empty: all."""

    states_filter: tuple[str, ...] = ()


class ListedGroup(_Value, frozen=True, kw_only=True):
    group_id: str
    protocol_type: str
    group_state: str


class ListGroupsResponseData(Message, frozen=True, kw_only=True):
    groups: tuple[ListedGroup, ...] = ()
    error_code: ErrorCode = ErrorCode.NONE
    throttle_time_ms: int = 0


# -------------------------------------------------------------------- DescribeGroups (15)

GROUP_AUTHORIZED_OPERATIONS: Final = (1 << 3) | (1 << 6) | (1 << 8)
"""READ, DELETE and DESCRIBE: what Kafka answers for a group without an authorizer
(``KafkaApis.authorizedOperations``: every operation a group supports)."""


class DescribeGroupsRequestData(Message, frozen=True, kw_only=True):
    groups: tuple[str, ...]
    include_authorized_operations: bool = False


class DescribedGroupMember(_Value, frozen=True, kw_only=True):
    member_id: str
    client_id: str
    client_host: str
    member_metadata: bytes = b""
    member_assignment: bytes = b""
    group_instance_id: str | None = None


class DescribedGroup(_Value, frozen=True, kw_only=True):
    group_id: str
    error_code: ErrorCode = ErrorCode.NONE
    group_state: str = ""
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[DescribedGroupMember, ...] = ()
    authorized_operations: int = -(2**31)


class DescribeGroupsResponseData(Message, frozen=True, kw_only=True):
    groups: tuple[DescribedGroup, ...]
    throttle_time_ms: int = 0


# ---------------------------------------------------------------------- DeleteGroups (42)


class DeleteGroupsRequestData(Message, frozen=True, kw_only=True):
    groups_names: tuple[str, ...]


class DeletableGroupResult(_Value, frozen=True, kw_only=True):
    group_id: str
    error_code: ErrorCode = ErrorCode.NONE


class DeleteGroupsResponseData(Message, frozen=True, kw_only=True):
    results: tuple[DeletableGroupResult, ...]
    throttle_time_ms: int = 0


# --------------------------------------------------------------------- OffsetDelete (47)


class OffsetDeleteRequestData(Message, frozen=True, kw_only=True):
    """The partitions whose committed offsets the group drops."""

    group_id: str
    topics: tuple[OffsetFetchTopic, ...]


class OffsetDeleteResponseData(Message, frozen=True, kw_only=True):
    """A group-level ``error_code`` comes with no topics (``getErrorResponse``)."""

    topics: tuple[OffsetCommitTopicResponse, ...] = ()
    error_code: ErrorCode = ErrorCode.NONE
    throttle_time_ms: int = 0


GroupRequestData = (
    JoinGroupRequestData
    | SyncGroupRequestData
    | HeartbeatRequestData
    | LeaveGroupRequestData
    | OffsetCommitRequestData
    | OffsetFetchRequestData
    | ListGroupsRequestData
    | DescribeGroupsRequestData
    | DeleteGroupsRequestData
    | OffsetDeleteRequestData
)
"""The requests a broker hands its group coordinator."""

KafkaGroupRequestData = FindCoordinatorRequestData | GroupRequestData
"""Every consumer-group request a kemu broker answers."""

GroupResponseData = (
    FindCoordinatorResponseData
    | JoinGroupResponseData
    | SyncGroupResponseData
    | HeartbeatResponseData
    | LeaveGroupResponseData
    | OffsetCommitResponseData
    | OffsetFetchResponseData
    | ListGroupsResponseData
    | DescribeGroupsResponseData
    | DeleteGroupsResponseData
    | OffsetDeleteResponseData
)


# ----------------------------------------------------- the coordinator's own messages


class GroupPartitionsElected(Message, frozen=True, kw_only=True):
    """From the broker after a LeaderAndIsr: this broker now leads these partitions of
    ``__consumer_offsets`` (``GroupCoordinator.onElection``), each with its leader
    epoch."""

    local_only = True  # from the broker of the same node only

    partitions: tuple[tuple[int, int], ...]


class GroupPartitionsResigned(Message, frozen=True, kw_only=True):
    """From the broker after a LeaderAndIsr or StopReplica: this broker no longer leads
    these partitions of ``__consumer_offsets`` (``GroupCoordinator.onResignation``)."""

    local_only = True  # from the broker of the same node only

    partitions: tuple[int, ...]


class GroupPartitionsDeleted(Message, frozen=True, kw_only=True):
    """From the broker after an UpdateMetadata: these partitions' topics are being deleted
    (``GroupCoordinator.handleDeletedPartitions``): their committed offsets go."""

    local_only = True  # from the broker of the same node only

    partitions: tuple[tuple[str, int], ...]


class GroupLoaded(Message, frozen=True, kw_only=True):
    """The coordinator's loader read a partition of ``__consumer_offsets`` from its log
    start to its end: the batches, as the log holds them (or the error that stopped it)."""

    local_only = True

    partition: int
    leader_epoch: int
    records: bytes
    error_code: ErrorCode = ErrorCode.NONE


class GroupAppendDone(Message, frozen=True, kw_only=True):
    """An append of the coordinator's records finished: its operation and the outcome."""

    local_only = True

    operation: int
    error_code: ErrorCode


class GroupTimerFired(Message, frozen=True, kw_only=True):
    """A coordinator timer's tick (``DelayedJoin``, ``InitialDelayedJoin``,
    ``DelayedHeartbeat``): ``kind`` says which, ``group_id`` (and ``member_id``) whose,
    ``generation`` the number of the timer (a stale one is ignored)."""

    local_only = True

    kind: str
    group_id: str
    member_id: str = ""
    generation: int = -1
