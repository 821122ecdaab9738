"""The group coordinator's answers, request by request, against an in-process cluster:
the typed requests the Kafka listener hands a broker (``protocol.group``), sent to the
coordinator's broker and to another.

Kafka's ``GroupCoordinator`` decides each error before touching a group: an empty group
id, a broker that does not lead the group's partition (NOT_COORDINATOR), an unknown
member, a wrong generation, a rebalance in progress; none of them changes the group.
Offsets are written to ``__consumer_offsets`` in Kafka's record formats and read back
by the broker that next leads the partition.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from actors.broker.broker import broker_ref
from actors.group.records import (
    GroupKey,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    partition_for,
)
from cluster.kafka.records import ConsumedRecord, batch_records, read_batches
from protocol.errors import ErrorCode
from protocol.group import (
    GROUP_AUTHORIZED_OPERATIONS,
    DeletableGroupResult,
    DeleteGroupsRequestData,
    DeleteGroupsResponseData,
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsRequestData,
    DescribeGroupsResponseData,
    FindCoordinatorRequestData,
    FindCoordinatorResponseData,
    HeartbeatRequestData,
    HeartbeatResponseData,
    JoinGroupProtocol,
    JoinGroupRequestData,
    JoinGroupResponseData,
    LeaveGroupMember,
    LeaveGroupRequestData,
    LeaveGroupResponseData,
    ListedGroup,
    ListGroupsRequestData,
    ListGroupsResponseData,
    OffsetCommitPartition,
    OffsetCommitPartitionResponse,
    OffsetCommitRequestData,
    OffsetCommitResponseData,
    OffsetCommitTopic,
    OffsetCommitTopicResponse,
    OffsetDeleteRequestData,
    OffsetDeleteResponseData,
    OffsetFetchRequestData,
    OffsetFetchResponseData,
    OffsetFetchTopic,
    SyncGroupAssignment,
    SyncGroupRequestData,
    SyncGroupResponseData,
)
from protocol.ids import TopicName
from protocol.kafka_api import (
    CreatableTopic,
    CreateTopicsRequestData,
    CreateTopicsResponseData,
    DeleteTopicsRequestData,
    DeleteTopicsResponseData,
)
from protocol.kafka_data import (
    FetchPartition,
    FetchRequestData,
    FetchResponseData,
    FetchTopic,
    ProducePartitionData,
    ProduceRequestData,
    ProduceResponseData,
    ProduceTopicData,
)
from tests.support.creation import Harness, running_cluster
from tests.support.group_requests import consumer_join
from tests.support.hosting import hosted_fixture
from tests.support.record_batches import client_batch
from tests.support.waiting import eventually

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120)]

GROUP = "test-group"  # partition 12 of 50, as a JVM computes it
TOPIC = TopicName("orders")
SHORT_SESSION_MS = 500
CONFIG = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": str(SHORT_SESSION_MS),
}


@hosted_fixture()
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    async with running_cluster(tmp_path / "logs", config=CONFIG) as h:
        yield h


async def coordinator(h: Harness, group: str = GROUP) -> int:
    """The coordinator's broker id once FindCoordinator names one (the first call creates
    ``__consumer_offsets``) and it has loaded the group's partition (the traced
    ``group_partition_loaded``)."""

    async def find() -> FindCoordinatorResponseData:
        reply = await h.client.ask(broker_ref(0), FindCoordinatorRequestData(key=group))
        assert isinstance(reply, FindCoordinatorResponseData)
        return reply

    found = await eventually(find, until=lambda r: r.error_code is ErrorCode.NONE, timeout=60)
    partition = partition_for(group, 50)

    async def loaded() -> bool:
        return any(
            e.type == "group_partition_loaded"
            and e.node == f"broker-{found.node_id}"
            and e.fields["partition"] == partition
            for e in h.sink.events
        )

    await eventually(loaded, timeout=30)
    return found.node_id


async def ask(h: Harness, broker: int, request: object) -> object:
    return await h.client.ask(broker_ref(broker), request, timeout=60)  # type: ignore[arg-type]


def join(member_id: str = "", *, version: int = 7, group: str = GROUP) -> JoinGroupRequestData:
    return consumer_join(
        group,
        member_id,
        metadata=b"\x00\x00",
        client_id="wire-test",
        client_host="/127.0.0.1",
        api_version=version,
    )


async def stable_member(h: Harness, broker: int) -> tuple[str, int]:
    """One member through the v4+ MEMBER_ID_REQUIRED round trip, its join and sync:
    (member id, generation)."""
    first = await ask(h, broker, join())
    assert isinstance(first, JoinGroupResponseData)
    assert first.error_code is ErrorCode.MEMBER_ID_REQUIRED
    assert first.member_id.startswith("wire-test-")
    joined = await ask(h, broker, join(first.member_id))
    assert isinstance(joined, JoinGroupResponseData)
    assert joined.error_code is ErrorCode.NONE, joined
    assert (joined.generation_id, joined.leader, joined.protocol_name) == (
        1,
        first.member_id,
        "range",
    )
    assert [m.member_id for m in joined.members] == [first.member_id]
    synced = await ask(
        h,
        broker,
        SyncGroupRequestData(
            group_id=GROUP,
            generation_id=1,
            member_id=first.member_id,
            assignments=(SyncGroupAssignment(member_id=first.member_id, assignment=b"mine"),),
        ),
    )
    assert synced == SyncGroupResponseData(
        assignment=b"mine", protocol_type="consumer", protocol_name="range"
    )
    return first.member_id, 1


async def test_find_coordinator_creates_the_offsets_topic_and_names_the_partition_leader(
    harness: Harness,
) -> None:
    """The first FindCoordinator answers COORDINATOR_NOT_AVAILABLE and creates
    ``__consumer_offsets`` (50 partitions, replication factor 3, compacted); then every
    broker names the leader of partition abs(hashCode) % 50 of the group."""
    first = await ask(harness, 1, FindCoordinatorRequestData(key=GROUP))
    assert first == FindCoordinatorResponseData(
        error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
        error_message="The coordinator is not available.",
    )
    node = await coordinator(harness)
    assert partition_for(GROUP, 50) == 12
    for broker in (0, 1, 2):
        found = await ask(harness, broker, FindCoordinatorRequestData(key=GROUP))
        assert isinstance(found, FindCoordinatorResponseData)
        assert (found.error_code, found.node_id, found.port) == (
            ErrorCode.NONE,
            node,
            harness.cluster.ports[node],
        )
    created = [e for e in harness.sink.events if e.type == "offsets_topic_created"]
    assert [e.fields["partitions"] for e in created] == [50]


async def test_group_errors_are_kafkas_and_change_nothing(harness: Harness) -> None:
    """INVALID_GROUP_ID for an empty id, NOT_COORDINATOR at another broker,
    UNKNOWN_MEMBER_ID for a member the group does not know, ILLEGAL_GENERATION for a
    wrong generation; the member stays Stable and its heartbeats keep answering NONE."""
    await create_topic(harness)
    node = await coordinator(harness)
    other = next(b for b in (0, 1, 2) if b != node)
    member, generation = await stable_member(harness, node)

    empty = await ask(harness, node, join(group=""))
    assert isinstance(empty, JoinGroupResponseData)
    assert empty.error_code is ErrorCode.INVALID_GROUP_ID
    elsewhere = await ask(harness, other, join(member))
    assert isinstance(elsewhere, JoinGroupResponseData)
    assert elsewhere.error_code is ErrorCode.NOT_COORDINATOR
    beat = await ask(
        harness,
        other,
        HeartbeatRequestData(group_id=GROUP, generation_id=generation, member_id=member),
    )
    assert beat == HeartbeatResponseData(error_code=ErrorCode.NOT_COORDINATOR)
    unknown = await ask(
        harness,
        node,
        HeartbeatRequestData(group_id=GROUP, generation_id=generation, member_id="nobody"),
    )
    assert unknown == HeartbeatResponseData(error_code=ErrorCode.UNKNOWN_MEMBER_ID)
    stale = await ask(
        harness,
        node,
        HeartbeatRequestData(group_id=GROUP, generation_id=generation + 1, member_id=member),
    )
    assert stale == HeartbeatResponseData(error_code=ErrorCode.ILLEGAL_GENERATION)
    sync_stale = await ask(
        harness,
        node,
        SyncGroupRequestData(group_id=GROUP, generation_id=7, member_id=member),
    )
    assert sync_stale == SyncGroupResponseData(error_code=ErrorCode.ILLEGAL_GENERATION)
    commit_stale = await ask(harness, node, commit(member, generation + 3, 5))
    assert isinstance(commit_stale, OffsetCommitResponseData)
    assert commit_stale.topics[0].partitions[0].error_code is ErrorCode.ILLEGAL_GENERATION
    still = await ask(
        harness,
        node,
        HeartbeatRequestData(group_id=GROUP, generation_id=generation, member_id=member),
    )
    assert still == HeartbeatResponseData()
    fetched = await fetch_offset(harness, node)
    assert fetched == -1  # nothing was committed


async def test_a_second_member_starts_a_rebalance_that_the_first_sees(harness: Harness) -> None:
    """A second member's join moves the Stable group to PreparingRebalance: the first
    member's heartbeat answers REBALANCE_IN_PROGRESS, its old generation's commit too
    after it rejoined (CompletingRebalance), and both join generation 2 with one leader;
    when the second leaves, the first is alone in generation 3."""
    node = await coordinator(harness)
    first, _ = await stable_member(harness, node)
    pending = await ask(harness, node, join())
    assert isinstance(pending, JoinGroupResponseData)
    second = pending.member_id
    joining = harness.client.ask(broker_ref(node), join(second), timeout=60)

    async def heartbeat() -> HeartbeatResponseData:
        reply = await ask(
            harness,
            node,
            HeartbeatRequestData(group_id=GROUP, generation_id=1, member_id=first),
        )
        assert isinstance(reply, HeartbeatResponseData)
        return reply

    import anyio

    results: dict[str, object] = {}

    async def second_joins() -> None:
        results["second"] = await joining

    async with anyio.create_task_group() as tg:
        tg.start_soon(second_joins)
        await eventually(heartbeat, until=lambda r: r.error_code is ErrorCode.REBALANCE_IN_PROGRESS)
        rejoined = await ask(harness, node, join(first))
    assert isinstance(rejoined, JoinGroupResponseData)
    other = results["second"]
    assert isinstance(other, JoinGroupResponseData)
    assert rejoined.generation_id == other.generation_id == 2
    assert rejoined.leader == other.leader == first
    assert sorted(m.member_id for m in rejoined.members) == sorted([first, second])
    assert other.members == ()
    left = await ask(
        harness,
        node,
        LeaveGroupRequestData(group_id=GROUP, members=(LeaveGroupMember(member_id=second),)),
    )
    assert isinstance(left, LeaveGroupResponseData)
    assert [m.error_code for m in left.members] == [ErrorCode.NONE]
    gone = await ask(
        harness,
        node,
        LeaveGroupRequestData(group_id=GROUP, members=(LeaveGroupMember(member_id=second),)),
    )
    assert isinstance(gone, LeaveGroupResponseData)
    assert [m.error_code for m in gone.members] == [ErrorCode.UNKNOWN_MEMBER_ID]
    alone = await ask(harness, node, join(first))
    assert isinstance(alone, JoinGroupResponseData)
    assert (alone.generation_id, [m.member_id for m in alone.members]) == (3, [first])


def commit(
    member: str, generation: int, offset: int, partition: int = 0
) -> OffsetCommitRequestData:
    return OffsetCommitRequestData(
        group_id=GROUP,
        generation_id=generation,
        member_id=member,
        topics=(
            OffsetCommitTopic(
                name=TOPIC,
                partitions=(
                    OffsetCommitPartition(
                        partition_index=partition,
                        committed_offset=offset,
                        committed_leader_epoch=0,
                        committed_metadata="meta",
                    ),
                ),
            ),
        ),
    )


async def fetch_offset(h: Harness, broker: int, partition: int = 0) -> int:
    reply = await ask(
        h,
        broker,
        OffsetFetchRequestData(
            group_id=GROUP,
            topics=(OffsetFetchTopic(name=TOPIC, partition_indexes=(partition,)),),
        ),
    )
    assert isinstance(reply, OffsetFetchResponseData)
    assert reply.error_code is ErrorCode.NONE
    return reply.topics[0].partitions[0].committed_offset


async def offsets_log(h: Harness, broker: int, partition: int) -> list[ConsumedRecord]:
    """The records of a ``__consumer_offsets`` partition as a debugging consumer reads
    them from ``broker`` (replica id -2: up to the high watermark)."""
    log = await ask(
        h,
        broker,
        FetchRequestData(
            max_wait_ms=0,
            min_bytes=0,
            replica_id=-2,
            topics=(
                FetchTopic(
                    topic=TopicName("__consumer_offsets"),
                    partitions=(
                        FetchPartition(
                            partition=partition, fetch_offset=0, partition_max_bytes=1 << 20
                        ),
                    ),
                ),
            ),
        ),
    )
    assert isinstance(log, FetchResponseData)
    data = log.responses[0].partitions[0].records or b""
    return [r for header in read_batches(data) for r in batch_records(data, header)]


async def create_topic(h: Harness) -> None:
    controller = await h.cluster.controller_id()
    reply = await ask(
        h,
        controller,
        CreateTopicsRequestData(
            topics=(CreatableTopic(name=TOPIC, num_partitions=2, replication_factor=3),),
            timeout_ms=30_000,
        ),
    )
    assert isinstance(reply, CreateTopicsResponseData)
    assert reply.topics[0].error_code is ErrorCode.NONE


async def test_offsets_are_kafka_records_and_survive_the_coordinator_moving(
    harness: Harness,
) -> None:
    """A member's commit is written to ``__consumer_offsets`` as an offset key v1 and
    value v3 beside the group's key v2 and value v3; an unknown topic is
    UNKNOWN_TOPIC_OR_PARTITION; a client may not produce to the internal topic. When the
    coordinator's broker stops, the partition's new leader loads the log and answers the
    committed offset, and the old member id is unknown there."""
    await create_topic(harness)
    node = await coordinator(harness)
    member, generation = await stable_member(harness, node)
    reply = await ask(harness, node, commit(member, generation, 42))
    assert isinstance(reply, OffsetCommitResponseData)
    assert reply.topics[0].partitions[0].error_code is ErrorCode.NONE
    unknown = await ask(
        harness,
        node,
        OffsetCommitRequestData(
            group_id=GROUP,
            generation_id=generation,
            member_id=member,
            topics=(
                OffsetCommitTopic(
                    name=TopicName("no-such-topic"),
                    partitions=(OffsetCommitPartition(partition_index=0, committed_offset=1),),
                ),
            ),
        ),
    )
    assert isinstance(unknown, OffsetCommitResponseData)
    assert unknown.topics[0].partitions[0].error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert await fetch_offset(harness, node) == 42

    offsets_topic = TopicName("__consumer_offsets")
    refused = await ask(
        harness,
        node,
        ProduceRequestData(
            acks=1,
            timeout_ms=5000,
            topic_data=(
                ProduceTopicData(
                    name=offsets_topic,
                    partition_data=(ProducePartitionData(index=12, records=client_batch([b"x"])),),
                ),
            ),
        ),
    )
    assert isinstance(refused, ProduceResponseData)
    assert (
        refused.responses[0].partition_responses[0].error_code is ErrorCode.INVALID_TOPIC_EXCEPTION
    )

    records = await offsets_log(harness, node, 12)
    keys = [decode_key(r.key or b"") for r in records]
    assert keys == [GroupKey(GROUP), OffsetKey(GROUP, TOPIC, 0)]
    assert [(r.key or b"")[:2] for r in records] == [b"\x00\x02", b"\x00\x01"]
    group_value = decode_group_value(records[0].value or b"")
    assert (group_value.generation, group_value.protocol, group_value.leader) == (
        1,
        "range",
        member,
    )
    assert [(m.member_id, m.assignment) for m in group_value.members] == [(member, b"mine")]
    assert (records[1].value or b"")[:2] == b"\x00\x03"
    offset_value = decode_offset_value(records[1].value or b"")
    assert (offset_value.offset, offset_value.leader_epoch, offset_value.metadata) == (
        42,
        0,
        "meta",
    )

    harness.cluster.stop_broker(node)
    assert await harness.cluster.wait_stopped(node, timeout=30)
    successor = await coordinator(harness)
    assert successor != node
    assert await eventually(lambda: fetch_offset(harness, successor), until=lambda o: o == 42)
    beat = await ask(
        harness,
        successor,
        HeartbeatRequestData(group_id=GROUP, generation_id=generation, member_id=member),
    )
    # The loaded group is Stable with its member; its session expires unless it beats.
    assert beat == HeartbeatResponseData()


async def test_list_describe_and_delete_groups(harness: Harness) -> None:
    """ListGroups names the group at its coordinator only (and filters by state);
    DescribeGroups shows a Stable group's protocol, member, metadata and assignment, an
    unknown group as Dead; DeleteGroups refuses a group with members (NON_EMPTY_GROUP),
    deletes it once Empty (its committed offset gone), and then finds it no more."""
    await create_topic(harness)
    node = await coordinator(harness)
    other = next(b for b in (0, 1, 2) if b != node)
    member, generation = await stable_member(harness, node)
    committed = await ask(harness, node, commit(member, generation, 9))
    assert isinstance(committed, OffsetCommitResponseData)

    listed = await ask(harness, node, ListGroupsRequestData())
    assert listed == ListGroupsResponseData(
        groups=(ListedGroup(group_id=GROUP, protocol_type="consumer", group_state="Stable"),)
    )
    assert await ask(harness, node, ListGroupsRequestData(states_filter=("Empty",))) == (
        ListGroupsResponseData()
    )
    assert await ask(harness, other, ListGroupsRequestData()) == ListGroupsResponseData()

    described = await ask(
        harness,
        node,
        DescribeGroupsRequestData(groups=(GROUP, "nobody"), include_authorized_operations=True),
    )
    assert described == DescribeGroupsResponseData(
        groups=(
            DescribedGroup(
                group_id=GROUP,
                group_state="Stable",
                protocol_type="consumer",
                protocol_data="range",
                members=(
                    DescribedGroupMember(
                        member_id=member,
                        client_id="wire-test",
                        client_host="/127.0.0.1",
                        member_metadata=b"\x00\x00",
                        member_assignment=b"mine",
                    ),
                ),
                authorized_operations=GROUP_AUTHORIZED_OPERATIONS,
            ),
            DescribedGroup(
                group_id="nobody",
                group_state="Dead",
                authorized_operations=GROUP_AUTHORIZED_OPERATIONS,
            ),
        )
    )

    def deleted(code: ErrorCode) -> DeleteGroupsResponseData:
        return DeleteGroupsResponseData(
            results=(DeletableGroupResult(group_id=GROUP, error_code=code),)
        )

    delete = DeleteGroupsRequestData(groups_names=(GROUP,))
    assert await ask(harness, node, delete) == deleted(ErrorCode.NON_EMPTY_GROUP)
    assert await ask(harness, other, delete) == deleted(ErrorCode.NOT_COORDINATOR)
    left = await ask(
        harness,
        node,
        LeaveGroupRequestData(group_id=GROUP, members=(LeaveGroupMember(member_id=member),)),
    )
    assert isinstance(left, LeaveGroupResponseData)
    assert await fetch_offset(harness, node) == 9
    assert await ask(harness, node, delete) == deleted(ErrorCode.NONE)
    assert await ask(harness, node, delete) == deleted(ErrorCode.GROUP_ID_NOT_FOUND)
    assert await fetch_offset(harness, node) == -1


async def test_transaction_coordinators_are_not_served(harness: Harness) -> None:
    """kemu has no transaction coordinator: FindCoordinator for a transactional id is
    INVALID_REQUEST at once (a documented divergence: Kafka would name one), and an
    unknown key type is INVALID_REQUEST as in Kafka."""
    for key_type, message in (
        (1, "kemu has no transaction coordinator"),
        (7, "Unknown coordinator type 7 in FindCoordinator request"),
    ):
        reply = await ask(harness, 0, FindCoordinatorRequestData(key="tx", key_type=key_type))
        assert reply == FindCoordinatorResponseData(
            error_code=ErrorCode.INVALID_REQUEST, error_message=message
        )


def static_join(instance: str, member_id: str = "") -> JoinGroupRequestData:
    return msgspec.structs.replace(join(member_id), group_instance_id=instance)


async def test_a_static_member_rejoining_fences_its_old_member_id(harness: Harness) -> None:
    """A member with a group instance id gets its member id without the MEMBER_ID_REQUIRED
    round trip (``<instance>-<uuid>``); when the instance joins again as a new member
    (a restart), the Stable group keeps its generation and assignment, and the old member
    id is fenced (FENCED_INSTANCE_ID) while the new one heartbeats."""
    node = await coordinator(harness)
    joined = await ask(harness, node, static_join("instance-a"))
    assert isinstance(joined, JoinGroupResponseData)
    assert joined.error_code is ErrorCode.NONE
    assert joined.member_id.startswith("instance-a-")
    old = joined.member_id
    synced = await ask(
        harness,
        node,
        SyncGroupRequestData(
            group_id=GROUP,
            generation_id=joined.generation_id,
            member_id=old,
            group_instance_id="instance-a",
            assignments=(SyncGroupAssignment(member_id=old, assignment=b"a"),),
        ),
    )
    assert isinstance(synced, SyncGroupResponseData)
    assert synced.assignment == b"a"
    again = await ask(harness, node, static_join("instance-a"))
    assert isinstance(again, JoinGroupResponseData)
    new = again.member_id
    assert new.startswith("instance-a-")
    assert new != old
    # No rebalance: the same generation, no member list, the leader named as it was.
    assert (again.error_code, again.generation_id, again.leader, again.members) == (
        ErrorCode.NONE,
        joined.generation_id,
        old,
        (),
    )
    fenced = await ask(
        harness,
        node,
        HeartbeatRequestData(
            group_id=GROUP,
            generation_id=joined.generation_id,
            member_id=old,
            group_instance_id="instance-a",
        ),
    )
    assert fenced == HeartbeatResponseData(error_code=ErrorCode.FENCED_INSTANCE_ID)
    beat = await ask(
        harness,
        node,
        HeartbeatRequestData(
            group_id=GROUP,
            generation_id=joined.generation_id,
            member_id=new,
            group_instance_id="instance-a",
        ),
    )
    assert beat == HeartbeatResponseData()
    kept = await ask(
        harness,
        node,
        SyncGroupRequestData(
            group_id=GROUP,
            generation_id=joined.generation_id,
            member_id=new,
            group_instance_id="instance-a",
        ),
    )
    assert isinstance(kept, SyncGroupResponseData)
    assert kept.assignment == b"a"


async def test_a_member_that_stops_heartbeating_expires_and_the_group_empties(
    harness: Harness,
) -> None:
    """A member whose session passes without a heartbeat is removed (``DelayedHeartbeat``
    on the node's clock): the group rebalances to Empty and its old member id is unknown;
    the wait is the session timeout, traced as ``group_member_expired``."""
    node = await coordinator(harness)
    short = msgspec.structs.replace(join(), session_timeout_ms=SHORT_SESSION_MS)
    first = await ask(harness, node, short)
    assert isinstance(first, JoinGroupResponseData)
    joined = await ask(harness, node, msgspec.structs.replace(short, member_id=first.member_id))
    assert isinstance(joined, JoinGroupResponseData)
    assert joined.error_code is ErrorCode.NONE
    member = joined.member_id
    await ask(
        harness,
        node,
        SyncGroupRequestData(group_id=GROUP, generation_id=1, member_id=member),
    )

    async def expired() -> bool:
        return any(
            e.type == "group_member_expired" and e.fields["member"] == member
            for e in harness.sink.events
        )

    await eventually(expired, timeout=30)
    listed = await ask(harness, node, ListGroupsRequestData())
    assert listed == ListGroupsResponseData(
        groups=(ListedGroup(group_id=GROUP, protocol_type="consumer", group_state="Empty"),)
    )
    gone = await ask(
        harness, node, HeartbeatRequestData(group_id=GROUP, generation_id=1, member_id=member)
    )
    assert gone == HeartbeatResponseData(error_code=ErrorCode.UNKNOWN_MEMBER_ID)


def subscription(*topics: str) -> bytes:
    """A consumer's subscription metadata (``ConsumerProtocolSubscription`` v0)."""
    out = b"\x00\x00" + len(topics).to_bytes(4, "big")
    for topic in topics:
        out += len(topic).to_bytes(2, "big") + topic.encode()
    return out + b"\xff\xff\xff\xff"  # no user data


async def test_offset_delete_spares_subscribed_topics_until_the_group_is_empty(
    harness: Harness,
) -> None:
    """OffsetDelete: a Stable consumer group's subscribed topic is
    GROUP_SUBSCRIBED_TO_TOPIC and keeps its offset; an unknown topic is
    UNKNOWN_TOPIC_OR_PARTITION; an unknown group GROUP_ID_NOT_FOUND and an empty id
    INVALID_GROUP_ID, alone; once the group is Empty the offset is deleted."""
    await create_topic(harness)
    node = await coordinator(harness)
    request = msgspec.structs.replace(
        join(), protocols=(JoinGroupProtocol(name="range", metadata=subscription(TOPIC)),)
    )
    first = await ask(harness, node, request)
    assert isinstance(first, JoinGroupResponseData)
    joined = await ask(harness, node, msgspec.structs.replace(request, member_id=first.member_id))
    assert isinstance(joined, JoinGroupResponseData)
    member = joined.member_id
    await ask(
        harness, node, SyncGroupRequestData(group_id=GROUP, generation_id=1, member_id=member)
    )
    committed = await ask(harness, node, commit(member, 1, 42))
    assert isinstance(committed, OffsetCommitResponseData)

    def delete(group: str, topic: str) -> OffsetDeleteRequestData:
        return OffsetDeleteRequestData(
            group_id=group,
            topics=(OffsetFetchTopic(name=TopicName(topic), partition_indexes=(0,)),),
        )

    def answer(topic: str, code: ErrorCode) -> OffsetDeleteResponseData:
        return OffsetDeleteResponseData(
            topics=(
                OffsetCommitTopicResponse(
                    name=TopicName(topic),
                    partitions=(OffsetCommitPartitionResponse(partition_index=0, error_code=code),),
                ),
            )
        )

    assert await ask(harness, node, delete(GROUP, TOPIC)) == answer(
        TOPIC, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
    )
    assert await fetch_offset(harness, node) == 42
    assert await ask(harness, node, delete(GROUP, "no-such-topic")) == answer(
        "no-such-topic", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    assert await ask(harness, node, delete("nobody-at-all", TOPIC)) in (
        OffsetDeleteResponseData(error_code=ErrorCode.GROUP_ID_NOT_FOUND),
        OffsetDeleteResponseData(error_code=ErrorCode.NOT_COORDINATOR),
    )
    assert await ask(harness, node, delete("", TOPIC)) == OffsetDeleteResponseData(
        error_code=ErrorCode.INVALID_GROUP_ID
    )
    await ask(
        harness,
        node,
        LeaveGroupRequestData(group_id=GROUP, members=(LeaveGroupMember(member_id=member),)),
    )
    assert await ask(harness, node, delete(GROUP, TOPIC)) == answer(TOPIC, ErrorCode.NONE)
    assert await fetch_offset(harness, node) == -1


async def test_deleting_a_topic_drops_its_committed_offsets(harness: Harness) -> None:
    """``handleDeletedPartitions``: once a topic is deleted, a group's committed offset
    of it is gone (OffsetFetch answers -1), and a standalone group left with no offsets
    is no longer listed."""
    await create_topic(harness)
    node = await coordinator(harness)
    standalone = await ask(harness, node, commit("", -1, 7))  # assign() commits: no member
    assert isinstance(standalone, OffsetCommitResponseData)
    assert standalone.topics[0].partitions[0].error_code is ErrorCode.NONE
    assert await fetch_offset(harness, node) == 7
    controller = await harness.cluster.controller_id()
    deleted = await ask(
        harness,
        controller,
        DeleteTopicsRequestData(topics=(TOPIC,), timeout_ms=30_000),
    )
    assert isinstance(deleted, DeleteTopicsResponseData)
    assert await eventually(lambda: fetch_offset(harness, node), until=lambda o: o == -1)
    assert await ask(harness, node, ListGroupsRequestData()) == ListGroupsResponseData()


# group.max.size and offset expiry get clusters of their own. The cleanup runs every 100 ms
# there: as Kafka's would, it retires an Empty group without offsets, such as one whose
# only member is between its MEMBER_ID_REQUIRED answer and its second join.
@hosted_fixture()
async def limited(tmp_path: Path) -> AsyncIterator[Harness]:
    async with running_cluster(tmp_path / "logs", config={**CONFIG, "group.max.size": "2"}) as h:
        yield h


@hosted_fixture()
async def expiring(tmp_path: Path) -> AsyncIterator[Harness]:
    config = {**CONFIG, "offsets.retention.check.interval.ms": "100"}
    async with running_cluster(tmp_path / "logs", config=config) as h:
        yield h


async def test_a_group_at_group_max_size_turns_a_new_member_away(limited: Harness) -> None:
    """``acceptJoiningMember``: with ``group.max.size`` 2, a third member's join of a
    Stable group of two is GROUP_MAX_SIZE_REACHED with no member id, and the group keeps
    its generation and members; once one leaves, a newcomer is let in (MEMBER_ID_REQUIRED,
    then a rebalance)."""
    node = await coordinator(limited)
    first, _ = await stable_member(limited, node)
    pending = await ask(limited, node, join())
    assert isinstance(pending, JoinGroupResponseData)
    assert pending.error_code is ErrorCode.MEMBER_ID_REQUIRED
    second = pending.member_id

    import anyio

    results: dict[str, object] = {}

    async def second_joins() -> None:
        results["second"] = await ask(limited, node, join(second))

    async with anyio.create_task_group() as tg:
        tg.start_soon(second_joins)
        await eventually(
            lambda: ask(
                limited,
                node,
                HeartbeatRequestData(group_id=GROUP, generation_id=1, member_id=first),
            ),
            until=lambda r: getattr(r, "error_code", None) is ErrorCode.REBALANCE_IN_PROGRESS,
        )
        rejoined = await ask(limited, node, join(first))
    assert isinstance(rejoined, JoinGroupResponseData)
    assert rejoined.generation_id == 2
    for member in (first, second):
        synced = await ask(
            limited,
            node,
            SyncGroupRequestData(group_id=GROUP, generation_id=2, member_id=member),
        )
        assert isinstance(synced, SyncGroupResponseData)
        assert synced.error_code is ErrorCode.NONE

    for version in (7, 3):  # with and without the MEMBER_ID_REQUIRED round trip
        refused = await ask(limited, node, join(version=version))
        assert refused == JoinGroupResponseData(
            error_code=ErrorCode.GROUP_MAX_SIZE_REACHED, member_id=""
        )
    described = await ask(limited, node, DescribeGroupsRequestData(groups=(GROUP,)))
    assert isinstance(described, DescribeGroupsResponseData)
    assert described.groups[0].group_state == "Stable"
    assert sorted(m.member_id for m in described.groups[0].members) == sorted([first, second])
    assert any(e.type == "group_max_size_reached" for e in limited.sink.events)

    left = await ask(
        limited,
        node,
        LeaveGroupRequestData(group_id=GROUP, members=(LeaveGroupMember(member_id=second),)),
    )
    assert isinstance(left, LeaveGroupResponseData)
    admitted = await ask(limited, node, join())
    assert isinstance(admitted, JoinGroupResponseData)
    assert admitted.error_code is ErrorCode.MEMBER_ID_REQUIRED


async def test_offsets_past_their_retention_expire_with_tombstones(expiring: Harness) -> None:
    """``cleanupGroupMetadata``: a commit that named a 200 ms retention (OffsetCommit
    v2-v4's ``retention_time_ms``) is gone after it (OffsetFetch answers -1) while the
    group's other offset, kept for ``offsets.retention.minutes``, stays; the offset's key
    gets a tombstone in ``__consumer_offsets``. A standalone group whose every offset
    expired goes Dead and is no longer listed."""
    await create_topic(expiring)
    node = await coordinator(expiring)
    short = msgspec.structs.replace(commit("", -1, 7, partition=0), retention_time_ms=200)
    kept = commit("", -1, 8, partition=1)
    for request in (short, kept):
        reply = await ask(expiring, node, request)
        assert isinstance(reply, OffsetCommitResponseData)
        assert reply.topics[0].partitions[0].error_code is ErrorCode.NONE
    assert await eventually(lambda: fetch_offset(expiring, node, 0), until=lambda o: o == -1)
    assert await fetch_offset(expiring, node, 1) == 8
    listed = await ask(expiring, node, ListGroupsRequestData())
    assert isinstance(listed, ListGroupsResponseData)
    assert [g.group_id for g in listed.groups] == [GROUP]

    partition = partition_for(GROUP, 50)

    async def committed() -> list[tuple[object, int | None]]:
        records = await offsets_log(expiring, node, partition)
        return [
            (
                decode_key(r.key or b""),
                None if r.value is None else decode_offset_value(r.value).offset,
            )
            for r in records
        ]

    # the commits, then the expired one's tombstone (once the followers have it)
    offsets = await eventually(committed, until=lambda found: len(found) >= 3)
    assert offsets == [
        (OffsetKey(GROUP, TOPIC, 0), 7),
        (OffsetKey(GROUP, TOPIC, 1), 8),
        (OffsetKey(GROUP, TOPIC, 0), None),
    ]

    other = "expiring-alone"
    lone = msgspec.structs.replace(short, group_id=other)
    other_node = await coordinator(expiring, other)
    reply = await ask(expiring, other_node, lone)
    assert isinstance(reply, OffsetCommitResponseData)
    assert reply.topics[0].partitions[0].error_code is ErrorCode.NONE

    async def listed_groups() -> list[str]:
        answer = await ask(expiring, other_node, ListGroupsRequestData())
        assert isinstance(answer, ListGroupsResponseData)
        return [g.group_id for g in answer.groups]

    assert other not in await eventually(listed_groups, until=lambda ids: other not in ids)
    assert any(e.type == "group_dead" and e.fields["group"] == other for e in expiring.sink.events)
