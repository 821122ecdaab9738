"""Every (API, version) a kemu broker advertises is served: a real request of each version
to a running cluster's listener is answered, in that version, without an error.

The table is read from the broker itself (ApiVersions v3); each response is decoded by
kafka-python's protocol classes (a second implementation of Kafka's schemas) and must be
exactly as long as what they read. The group APIs each get a group of their own, with
a member joined (and synced) first where the request needs one. An API added to the codec
table is advertised, so this test fails until a valid request of it is added to
``SIMPLE`` (or ``Walk.group_request``) below.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from kafka.protocol.admin import (  # type: ignore[import-untyped]
    AlterConfigsResponse,
    AlterPartitionReassignmentsResponse,
    CreatePartitionsResponse,
    CreateTopicsResponse,
    DeleteGroupsResponse,
    DeleteTopicsResponse,
    DescribeConfigsResponse,
    DescribeGroupsResponse,
    DescribeLogDirsResponse,
    ElectLeadersResponse,
    IncrementalAlterConfigsResponse,
    ListGroupsResponse,
    ListPartitionReassignmentsResponse,
)
from kafka.protocol.consumer import (  # type: ignore[import-untyped]
    FetchResponse,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    ListOffsetsResponse,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
    OffsetForLeaderEpochResponse,
    SyncGroupResponse,
)
from kafka.protocol.metadata import (  # type: ignore[import-untyped]
    ApiVersionsResponse,
    FindCoordinatorResponse,
    MetadataResponse,
)
from kafka.protocol.producer import (  # type: ignore[import-untyped]
    InitProducerIdResponse,
    ProduceResponse,
)

from actors.runtime.tracer import MemorySink, Tracer
from cluster.kafka.apis import decode_response, encode_api_versions_request, encode_request
from cluster.kafka.client import KafkaAdminClient
from cluster.kafka.message_sets import write_message
from cluster.launch.cluster import SUPPORTED_APIS, Cluster, ClusterSpec
from protocol.errors import ErrorCode
from protocol.group import (
    DeleteGroupsRequestData,
    DescribeGroupsRequestData,
    FindCoordinatorRequestData,
    HeartbeatRequestData,
    JoinGroupResponseData,
    LeaveGroupMember,
    LeaveGroupRequestData,
    ListGroupsRequestData,
    OffsetCommitPartition,
    OffsetCommitRequestData,
    OffsetCommitTopic,
    OffsetDeleteRequestData,
    OffsetFetchRequestData,
    OffsetFetchTopic,
    SyncGroupAssignment,
    SyncGroupRequestData,
)
from protocol.ids import BrokerId, TopicName
from protocol.kafka_api import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsRequestData,
    AlterConfigsResource,
    AlterPartitionReassignmentsRequestData,
    ConfigResource,
    ConfigResourceType,
    CreatableTopic,
    CreatePartitionsRequestData,
    CreatePartitionsTopic,
    CreateTopicsRequestData,
    DeleteTopicsRequestData,
    DescribableLogDirTopic,
    DescribeConfigsRequestData,
    DescribeLogDirsRequestData,
    ElectLeadersRequestData,
    IncrementalAlterConfigsRequestData,
    KafkaApiRequestData,
    ListPartitionReassignmentsRequestData,
    MetadataRequestData,
    ReassignablePartition,
    ReassignableTopic,
)
from protocol.kafka_data import (
    FetchPartition,
    FetchRequestData,
    FetchTopic,
    InitProducerIdRequestData,
    ListOffsetsPartition,
    ListOffsetsRequestData,
    ListOffsetsTopic,
    OffsetForLeaderEpochRequestData,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
    ProducePartitionData,
    ProduceRequestData,
    ProduceTopicData,
)
from tests.support.fake_kafka import kp_decode
from tests.support.group_requests import consumer_join
from tests.support.hosting import hosted_fixture
from tests.support.raw_kafka import exchange
from tests.support.record_batches import client_batch

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]

HOST = "127.0.0.1"
WAIT = 30.0
TOPIC = TopicName("walk")  # one partition, on the only broker
GROWN = TopicName("grown")  # one partition more with each CreatePartitions version
LONG = 10_000


def created(version: int) -> TopicName:
    return TopicName(f"created-v{version}")


def produced(version: int) -> bytes:
    """A record as a producer of ``version`` sends it: a v2 batch from v3, before that a
    message of format v1 (v2) or v0 (v0-v1), which the broker up-converts."""
    if version >= 3:
        return client_batch([b"v"])
    out = bytearray()
    write_message(out, 0, 1 if version == 2 else 0, key=None, value=b"v", timestamp=LONG)
    return bytes(out)


SIMPLE: dict[int, Callable[[int], KafkaApiRequestData]] = {
    0: lambda v: ProduceRequestData(
        acks=1,
        timeout_ms=LONG,
        topic_data=(
            ProduceTopicData(
                name=TOPIC,
                partition_data=(ProducePartitionData(index=0, records=produced(v)),),
            ),
        ),
    ),
    1: lambda v: FetchRequestData(
        max_wait_ms=0,
        min_bytes=0,
        topics=(
            FetchTopic(
                topic=TOPIC,
                partitions=(
                    FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20),
                ),
            ),
        ),
    ),
    2: lambda v: ListOffsetsRequestData(
        topics=(
            ListOffsetsTopic(
                name=TOPIC, partitions=(ListOffsetsPartition(partition_index=0, timestamp=-1),)
            ),
        )
    ),
    3: lambda v: MetadataRequestData(topics=(TOPIC,), allow_auto_topic_creation=False),
    19: lambda v: CreateTopicsRequestData(
        topics=(CreatableTopic(name=created(v), num_partitions=1, replication_factor=1),),
        timeout_ms=LONG,
    ),
    20: lambda v: DeleteTopicsRequestData(topics=(created(v),), timeout_ms=LONG),
    22: lambda v: InitProducerIdRequestData(transaction_timeout_ms=60_000),
    23: lambda v: OffsetForLeaderEpochRequestData(
        topics=(
            OffsetForLeaderTopic(
                topic=TOPIC, partitions=(OffsetForLeaderPartition(partition=0, leader_epoch=0),)
            ),
        )
    ),
    32: lambda v: DescribeConfigsRequestData(
        resources=(ConfigResource(resource_type=ConfigResourceType.TOPIC, resource_name=TOPIC),)
    ),
    33: lambda v: AlterConfigsRequestData(
        resources=(
            AlterConfigsResource(
                resource_type=ConfigResourceType.TOPIC,
                resource_name=TOPIC,
                configs=(AlterableConfig(name="retention.ms", value=str(60_000 + v)),),
            ),
        )
    ),
    44: lambda v: IncrementalAlterConfigsRequestData(
        resources=(
            AlterConfigsResource(
                resource_type=ConfigResourceType.TOPIC,
                resource_name=TOPIC,
                configs=(
                    AlterableConfig(
                        name="cleanup.policy", value="compact", operation=AlterConfigOp.APPEND
                    ),
                ),
            ),
        )
    ),
    37: lambda v: CreatePartitionsRequestData(
        topics=(CreatePartitionsTopic(name=GROWN, count=2 + v),), timeout_ms=LONG
    ),
    # Every partition: the only broker leads each already, so none is listed (a named
    # partition would be ELECTION_NOT_NEEDED).
    43: lambda v: ElectLeadersRequestData(topic_partitions=None, timeout_ms=LONG),
    # The partition's own replica as its target: a reassignment with nothing to move.
    45: lambda v: AlterPartitionReassignmentsRequestData(
        topics=(
            ReassignableTopic(
                name=TOPIC,
                partitions=(ReassignablePartition(partition_index=0, replicas=(BrokerId(0),)),),
            ),
        ),
        timeout_ms=LONG,
    ),
    46: lambda v: ListPartitionReassignmentsRequestData(topics=None, timeout_ms=LONG),
    # v0 every partition, later versions the topic's first (the other listed with none)
    35: lambda v: DescribeLogDirsRequestData(
        topics=None if v == 0 else (DescribableLogDirTopic(topic=TOPIC, partitions=(0,)),)
    ),
}
"""API key -> a valid request of it, for a version (each version's own topic where the
request changes the cluster). The group APIs, which need a member first, are in
``Walk.group_request``."""

RESPONSES: dict[int, Any] = {
    0: ProduceResponse,
    1: FetchResponse,
    2: ListOffsetsResponse,
    3: MetadataResponse,
    18: ApiVersionsResponse,
    19: CreateTopicsResponse,
    20: DeleteTopicsResponse,
    22: InitProducerIdResponse,
    23: OffsetForLeaderEpochResponse,
    32: DescribeConfigsResponse,
    33: AlterConfigsResponse,
    44: IncrementalAlterConfigsResponse,
    37: CreatePartitionsResponse,
    8: OffsetCommitResponse,
    9: OffsetFetchResponse,
    10: FindCoordinatorResponse,
    11: JoinGroupResponse,
    12: HeartbeatResponse,
    13: LeaveGroupResponse,
    14: SyncGroupResponse,
    15: DescribeGroupsResponse,
    16: ListGroupsResponse,
    42: DeleteGroupsResponse,
    43: ElectLeadersResponse,
    45: AlterPartitionReassignmentsResponse,
    46: ListPartitionReassignmentsResponse,
    35: DescribeLogDirsResponse,
    47: OffsetDeleteResponse,
}
"""API key -> kafka-python's response class."""


@hosted_fixture()
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    tracer = Tracer()
    tracer.add_sink(MemorySink())
    config = {
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0",
    }
    spec = ClusterSpec(brokers=1, base_port=0, log_dir=tmp_path / "logs", config=config)
    async with anyio.create_task_group() as tg:
        running: Cluster = await tg.start(Cluster(spec, tracer=tracer).run)
        async with KafkaAdminClient(f"{HOST}:{running.ports[0]}") as client:
            results = await client.create_topics(
                [
                    CreatableTopic(name=name, num_partitions=1, replication_factor=1)
                    for name in (TOPIC, GROWN)
                ]
            )
        assert [r.error_code for r in results] == [ErrorCode.NONE] * 2
        yield running
        tg.cancel_scope.cancel()


def error_codes(value: Any) -> list[int]:
    """Every ``error_code`` anywhere in a decoded response."""
    if isinstance(value, dict):
        own = [value["error_code"]] if "error_code" in value else []
        return own + [c for v in value.values() for c in error_codes(v)]
    if isinstance(value, list | tuple):
        return [c for v in value for c in error_codes(v)]
    return []


def read_whole(key: int, version: int, frame: bytes) -> dict[str, Any]:
    """The response decoded by kafka-python, which must read every byte of it: encoded
    again by kafka-python, its body gives the same bytes."""
    response_cls = RESPONSES[key]
    _, body = kp_decode(response_cls, version, frame)
    flexible_header = key != 18 and response_cls.flexible_version_q(version)
    header_size = 5 if flexible_header else 4  # the correlation id, then no tagged fields
    decoded = response_cls.decode(frame[4 + header_size :], version=version, header=False)
    decoded._header = None  # kafka-python's encode asks for one, even without a header
    assert bytes(decoded.encode(version=version)) == frame[4 + header_size :]
    return body


class Walk:
    """The test's side of the walk: one request at a time to the only broker, and the
    group members the group APIs need (set up with the codec's newest versions)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.correlation_id = 0

    async def send(self, data: KafkaApiRequestData, key: int, version: int) -> bytes:
        self.correlation_id += 1
        frame = encode_request(
            data, api_version=version, correlation_id=self.correlation_id, client_id="walk"
        )
        answer = await exchange(HOST, self.port, frame, timeout=WAIT)
        assert answer, f"API {key} v{version}: the broker closed the connection"
        return answer

    async def ask(self, data: KafkaApiRequestData, key: int, version: int) -> Any:
        """A set-up request, answered in plain values (the codec reads the answer)."""
        answer = await self.send(data, key, version)
        return decode_response(key, version, answer[4:])[1]

    async def join(self, group: str, member_id: str = "") -> JoinGroupResponseData:
        """JoinGroup v5 as a consumer: the member id the broker asks for (v4+'s
        MEMBER_ID_REQUIRED), then the join itself."""
        while True:
            answer = await self.ask(consumer_join(group, member_id), 11, 5)
            assert isinstance(answer, JoinGroupResponseData)
            if answer.error_code is not ErrorCode.MEMBER_ID_REQUIRED:
                assert answer.error_code is ErrorCode.NONE, answer
                return answer
            member_id = answer.member_id

    async def member(self, group: str, *, synced: bool) -> JoinGroupResponseData:
        """A member of a new group: joined, and (``synced``) its assignment received."""
        joined = await self.join(group)
        if synced:
            await self.ask(sync_request(group, joined), 14, 5)
        return joined

    async def group_request(self, key: int, version: int) -> KafkaApiRequestData:
        """A valid request of group API ``key`` for ``version`` (a group of its own)."""
        group = f"g-{key}-v{version}"
        if key == 10:
            return FindCoordinatorRequestData(key=group)
        if key == 11:
            member_id = ""
            if version >= 4:  # the first join of v4+ only gets the member id
                answer = await self.ask(consumer_join(group, ""), 11, version)
                assert answer.error_code is ErrorCode.MEMBER_ID_REQUIRED, answer
                member_id = answer.member_id
            return consumer_join(group, member_id)
        if key == 8:  # a group without members: the commit of a simple consumer
            return commit_request(group)
        if key == 15:  # a group this broker does not know is described as Dead
            return DescribeGroupsRequestData(groups=(group,))
        if key == 16:
            return ListGroupsRequestData()
        if key == 42:  # an Empty group: one that has committed offsets
            await self.ask(commit_request(group), 8, 8)
            return DeleteGroupsRequestData(groups_names=(group,))
        if key == 9:
            asked = OffsetFetchTopic(name=TOPIC, partition_indexes=(0,))
            return OffsetFetchRequestData(group_id=group, topics=(asked,))
        if key == 47:  # an Empty group's committed offset
            await self.ask(commit_request(group), 8, 8)
            asked = OffsetFetchTopic(name=TOPIC, partition_indexes=(0,))
            return OffsetDeleteRequestData(group_id=group, topics=(asked,))
        joined = await self.member(group, synced=key == 12)
        if key == 14:
            return sync_request(group, joined)
        if key == 12:
            return HeartbeatRequestData(
                group_id=group, generation_id=joined.generation_id, member_id=joined.member_id
            )
        assert key == 13, f"no request of API {key} to walk with"
        return LeaveGroupRequestData(
            group_id=group, members=(LeaveGroupMember(member_id=joined.member_id),)
        )

    async def request(self, key: int, version: int) -> KafkaApiRequestData:
        if key in SIMPLE:
            return SIMPLE[key](version)
        return await self.group_request(key, version)

    async def coordinator_ready(self) -> None:
        """Until a group's coordinator answers (``__consumer_offsets`` is created on the
        first FindCoordinator and loaded when its leader is elected)."""
        with anyio.fail_after(WAIT):
            while True:
                found = await self.ask(FindCoordinatorRequestData(key="warm-up"), 10, 3)
                if found.error_code is ErrorCode.NONE:
                    answer = await self.ask(consumer_join("warm-up", ""), 11, 5)
                    if answer.error_code is ErrorCode.MEMBER_ID_REQUIRED:
                        return
                await anyio.sleep(0.05)


def commit_request(group: str) -> OffsetCommitRequestData:
    """Offset 0 of the walked topic's partition, committed for ``group``."""
    partition = OffsetCommitPartition(partition_index=0, committed_offset=0)
    committed = OffsetCommitTopic(name=TOPIC, partitions=(partition,))
    return OffsetCommitRequestData(group_id=group, topics=(committed,))


def sync_request(group: str, joined: JoinGroupResponseData) -> SyncGroupRequestData:
    return SyncGroupRequestData(
        group_id=group,
        generation_id=joined.generation_id,
        member_id=joined.member_id,
        assignments=(SyncGroupAssignment(member_id=joined.member_id, assignment=b""),),
        protocol_type="consumer",
        protocol_name="range",
    )


async def test_every_advertised_version_is_answered_in_its_version(cluster: Cluster) -> None:
    """The broker advertises ApiVersions v0-3 and the served APIs, and answers a valid
    request of each advertised (API, version) with a whole response of that version that
    carries no error (no connection close, no UNKNOWN_SERVER_ERROR)."""
    port = cluster.ports[0]
    frame = encode_api_versions_request(api_version=3, correlation_id=1, client_id="walk")
    _, body = kp_decode(ApiVersionsResponse, 3, await exchange(HOST, port, frame, timeout=WAIT))
    table = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
    assert table == {**SUPPORTED_APIS, 18: (0, 3)}
    assert set(table) == set(RESPONSES), "a served API without a response class here"

    walk = Walk(port)
    if 10 in table:
        await walk.coordinator_ready()
    answered: list[tuple[int, int]] = []
    for key, (low, high) in sorted(table.items()):
        for version in range(low, high + 1):
            if key == 18:
                walk.correlation_id += 1
                frame = encode_api_versions_request(
                    api_version=version, correlation_id=walk.correlation_id, client_id="walk"
                )
                answer = await exchange(HOST, port, frame, timeout=WAIT)
            else:
                answer = await walk.send(await walk.request(key, version), key, version)
            assert int.from_bytes(answer[4:8], "big") == walk.correlation_id
            body = read_whole(key, version, answer)
            assert set(error_codes(body)) <= {0}, (key, version, body)
            answered.append((key, version))
    assert len(answered) == sum(high - low + 1 for low, high in table.values())
