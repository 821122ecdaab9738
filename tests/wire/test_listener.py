"""The Kafka listener on raw sockets: ApiVersions fallback, ordering, and failure paths.

Every failure must cost the one connection it happened on: the listener keeps serving, and
a new connection (or another open one) still gets answers.
"""

from __future__ import annotations

import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from anyio.abc import SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream
from kafka.protocol.admin import (  # type: ignore[import-untyped]
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from kafka.protocol.metadata import (  # type: ignore[import-untyped]
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import (  # type: ignore[import-untyped]
    ProduceRequest,
    ProduceResponse,
)

from actors.runtime.tracer import MemorySink, Tracer
from cluster.kafka.listener import KafkaRequest, KafkaWireServer, request_data
from protocol.errors import ErrorCode, NetworkError
from protocol.ids import BrokerId, TopicName
from protocol.kafka_api import CreatableTopic
from protocol.kafka_data import (
    ProducePartitionResponse,
    ProduceRequestData,
    ProduceResponseData,
    ProduceTopicResponse,
)
from protocol.trace import TraceEvent
from tests.support.fake_kafka import (
    HOST,
    WAIT,
    CodecFakeHandler,
    FakeCluster,
    FakeHandler,
    fake_cluster,
    kp_decode,
    kp_frame,
)
from tests.support.record_batches import client_batch

pytestmark = pytest.mark.asyncio


class Conn:
    """A raw client connection: whole frames out, whole frames in."""

    def __init__(self, stream: SocketStream) -> None:
        self.stream = stream
        self.reader = BufferedByteReceiveStream(stream)

    async def send(self, *frames: bytes) -> None:
        await self.stream.send(b"".join(frames))

    async def frame(self) -> bytes:
        """The next response frame, size prefix included."""
        with anyio.fail_after(WAIT):
            head = await self.reader.receive_exactly(4)
            (size,) = struct.unpack(">i", head)
            return head + await self.reader.receive_exactly(size)

    async def closed_by_server(self) -> bool:
        """Whether the server ends this connection (end of stream or reset) in time."""
        with anyio.fail_after(WAIT):
            try:
                await self.stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                return True
        return False


@asynccontextmanager
async def connect(cluster: FakeCluster, broker: int = 0) -> AsyncIterator[Conn]:
    stream = await anyio.connect_tcp(HOST, cluster.brokers[broker].port)
    async with stream:
        yield Conn(stream)


def metadata_request(correlation_id: int) -> bytes:
    return kp_frame(MetadataRequest(version=9, topics=None), correlation_id=correlation_id)


def api_versions_v3(name: str = "kafka-python", version: str = "3.0.0") -> Any:
    return ApiVersionsRequest(version=3, client_software_name=name, client_software_version=version)


async def still_serves(cluster: FakeCluster) -> None:
    """A fresh connection gets its ApiVersions and Metadata answered."""
    async with connect(cluster) as conn:
        await conn.send(kp_frame(api_versions_v3(), correlation_id=70))
        assert (await kp_api_versions(conn, 3))[0] == 70
        await conn.send(metadata_request(71))
        correlation_id, body = kp_decode(MetadataResponse, 9, await conn.frame())
        assert (correlation_id, len(body["brokers"])) == (71, 3)


async def kp_api_versions(conn: Conn, version: int) -> tuple[int, dict[str, Any]]:
    return kp_decode(ApiVersionsResponse, version, await conn.frame())


def of_type(name: str) -> Any:
    def match(event: TraceEvent) -> bool:
        return event.type == name

    return match


# ---------------------------------------------------------------------- ApiVersions


async def test_api_versions_v3_has_no_tagged_fields() -> None:
    """kemu's deliberate difference (docs/kafka-wire.md): the v3 answer ends with an empty
    tagged-field section, without 2.7.2's FinalizedFeaturesEpoch (tag 1)."""
    async with fake_cluster() as cluster, connect(cluster) as conn:
        await conn.send(kp_frame(api_versions_v3(), correlation_id=4))
        frame = await conn.frame()
        _, body = kp_decode(ApiVersionsResponse, 3, frame)
        assert body["error_code"] == 0
        assert frame[-5:] == bytes(5)  # throttle time 0, then no tagged fields
        assert body.get("finalized_features_epoch", -1) == -1


async def test_api_versions_newer_than_ours_gets_a_v0_error_reply() -> None:
    """ApiVersions v4 is answered with a v0 body, UNSUPPORTED_VERSION and ApiVersions' own
    range only (``ApiVersionsRequest.getErrorResponse``); v3 then gets the whole table."""
    async with fake_cluster() as cluster, connect(cluster) as conn:
        await conn.send(
            kp_frame(
                ApiVersionsRequest(
                    version=4, client_software_name="t", client_software_version="1"
                ),
                correlation_id=5,
            )
        )
        frame = await conn.frame()
        assert frame[4:10] == b"\x00\x00\x00\x05\x00\x23"  # header v0, then error 35
        correlation_id, body = kp_decode(ApiVersionsResponse, 0, frame)
        table = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
        assert (correlation_id, body["error_code"]) == (5, 35)
        assert table == {18: (0, 3)}
        table = dict(cluster.servers[0].api_versions)
        assert (table[18], table[3]) == ((0, 3), (0, 9))
        # the client retries lower on the same connection, as kafka-python does
        await conn.send(kp_frame(api_versions_v3(), correlation_id=6))
        frame = await conn.frame()
        assert frame[4:10] == b"\x00\x00\x00\x06\x00\x00"  # header v0 even for flexible v3
        correlation_id, body = kp_decode(ApiVersionsResponse, 3, frame)
        assert (correlation_id, body["error_code"], len(body["api_keys"])) == (6, 0, len(table))


@pytest.mark.parametrize(
    ("name", "version"), [("", "1"), ("kafka-python", ""), ("-x", "1"), ("a b", "1"), ("a", "1.")]
)
async def test_api_versions_v3_with_a_bad_software_name_is_an_invalid_request(
    name: str, version: str
) -> None:
    """A v3 request whose client software name or version does not match Kafka's pattern
    (``ApiVersionsRequest.isValid``) is answered INVALID_REQUEST with no table, in v3 (which
    kafka-python, reading any error as v0, cannot decode: the bytes are checked); the
    connection stays open."""
    async with fake_cluster() as cluster, connect(cluster) as conn:
        await conn.send(kp_frame(api_versions_v3(name, version), correlation_id=3))
        frame = await conn.frame()
        # size, header v0 (correlation id), error 42, compact array of none, throttle 0,
        # no tagged fields
        assert frame == struct.pack(">ii", 12, 3) + b"\x00\x2a\x01" + bytes(4) + b"\x00"
        await conn.send(kp_frame(api_versions_v3("kafka-python", "3.0.0"), correlation_id=4))
        correlation_id, body = await kp_api_versions(conn, 3)
        assert (correlation_id, body["error_code"]) == (4, 0)
        assert len(body["api_keys"]) == len(cluster.servers[0].api_versions)


async def test_api_versions_of_a_negative_version_gets_a_v0_error_reply() -> None:
    """Any version outside 0-3 (``ApiKeys.isVersionSupported``), not only newer ones, is
    answered in v0 with UNSUPPORTED_VERSION."""
    async with fake_cluster() as cluster, connect(cluster) as conn:
        body = struct.pack(">hhih", 18, -1, 12, -1)
        await conn.send(struct.pack(">i", len(body)) + body)
        correlation_id, answer = await kp_api_versions(conn, 0)
        assert (correlation_id, answer["error_code"]) == (12, 35)
        assert [(k["api_key"], k["min_version"], k["max_version"]) for k in answer["api_keys"]] == [
            (18, 0, 3)
        ]


# ---------------------------------------------------------------------- bad requests


async def test_malformed_frame_closes_only_that_connection() -> None:
    """A request the codec cannot decode closes its connection; others keep being served."""
    async with fake_cluster() as cluster, connect(cluster) as bystander, connect(cluster) as bad:
        header = metadata_request(9)[4:24]  # a whole Metadata v9 request header (v2)
        assert header.endswith(b"wire-test\x00")  # the client id, then no tagged fields
        body = header + b"\xff" * 7  # then a topics count whose varint never ends
        await bad.send(struct.pack(">i", len(body)) + body)
        assert await bad.closed_by_server()
        event = await cluster.sink.wait_for(of_type("bad_frame"), WAIT)
        assert event.node == "broker-1"
        assert "cannot decode API 3 v9" in event.fields["detail"]
        await bystander.send(metadata_request(10))
        assert kp_decode(MetadataResponse, 9, await bystander.frame())[0] == 10
        await still_serves(cluster)


async def test_oversized_frame_closes_the_connection() -> None:
    """A frame longer than the limit closes the connection before it is buffered."""
    async with fake_cluster(max_frame_bytes=4096) as cluster:
        async with connect(cluster) as conn:
            await conn.send(struct.pack(">i", 1 << 20) + b"\x00" * 64)
            assert await conn.closed_by_server()
        event = await cluster.sink.wait_for(of_type("bad_frame"), WAIT)
        assert "exceeds the limit of 4096" in event.fields["detail"]
        await still_serves(cluster)


async def test_truncated_frame_is_traced() -> None:
    """A client leaving in the middle of a frame is traced as a bad frame."""
    async with fake_cluster() as cluster:
        async with connect(cluster) as conn:
            await conn.send(metadata_request(3)[:10])
        event = await cluster.sink.wait_for(of_type("bad_frame"), WAIT)
        assert event.fields["detail"].startswith("truncated")
        await still_serves(cluster)


@pytest.mark.parametrize(
    ("api_key", "api_version"),
    [(999, 0), (3, 10), (0, 2), (16, 3), (60, 0), (4, 0), (52, 0), (-1, 0), (3, -1)],
    ids=[
        "unknown-key",
        "metadata-v10",
        "produce-v2",
        "list-groups-not-served",
        "describe-cluster-of-2.8",
        "leader-and-isr",
        "vote-disabled-in-2.7",
        "negative-key",
        "negative-version",
    ],
)
async def test_unadvertised_api_or_version_closes_the_connection(
    api_key: int, api_version: int
) -> None:
    """An API key or version we do not advertise closes the connection, as a 2.7 broker
    does: an unknown or disabled key fails ``RequestHeader.parse`` (or
    ``parseRequestHeader``), an unknown version ``RequestContext.parseRequest``, and
    ``SocketServer.Processor`` closes the connection on either."""
    async with fake_cluster() as cluster:
        async with connect(cluster) as conn:
            body = struct.pack(">hhih", api_key, api_version, 77, -1) + b"\x00" * 8
            await conn.send(struct.pack(">i", len(body)) + body)
            assert await conn.closed_by_server()
        event = await cluster.sink.wait_for(of_type("unsupported_request"), WAIT)
        assert (event.corr, event.fields["api_key"], event.fields["api_version"]) == (
            77,
            api_key,
            api_version,
        )
        await still_serves(cluster)


# ---------------------------------------------------------------------- ordering


class SlowFirst(FakeHandler):
    """Holds the request with correlation id 1 until the one with id 2 has been answered."""

    def __init__(self, cluster: FakeCluster, broker_id: BrokerId) -> None:
        super().__init__(cluster, broker_id)
        self.second_done = anyio.Event()
        self.completed: list[int] = []

    async def handle(self, request: KafkaRequest) -> Any:
        if request.correlation_id == 1:
            await self.second_done.wait()
        response = await super().handle(request)
        self.completed.append(request.correlation_id)
        if request.correlation_id == 2:
            self.second_done.set()
        return response


async def test_pipelined_requests_are_answered_in_request_order() -> None:
    """Responses follow request order on a connection even when handlers finish out of order."""
    handlers: list[SlowFirst] = []

    def factory(cluster: FakeCluster, broker_id: BrokerId) -> SlowFirst:
        handlers.append(SlowFirst(cluster, broker_id))
        return handlers[-1]

    async with fake_cluster(factory) as cluster, connect(cluster) as conn:
        await conn.send(metadata_request(1), metadata_request(2))
        first, second = await conn.frame(), await conn.frame()
        assert handlers[0].completed == [2, 1]
        assert kp_decode(MetadataResponse, 9, first)[0] == 1
        assert kp_decode(MetadataResponse, 9, second)[0] == 2


# ---------------------------------------------------------------------- handler outcomes


@pytest.mark.parametrize("handler", [FakeHandler, CodecFakeHandler], ids=["plain", "codec"])
async def test_handler_answers_with_plain_values_or_codec_objects(handler: Any) -> None:
    """A handler may return plain response values or the codec's object; clients see the same."""
    async with fake_cluster(handler) as cluster, connect(cluster) as conn:
        seed = CreatableTopic(name=TopicName("orders"), num_partitions=2, replication_factor=3)
        FakeHandler(cluster, BrokerId(1)).create(seed, validate_only=False)
        await conn.send(metadata_request(1))
        _, body = kp_decode(MetadataResponse, 9, await conn.frame())
        (topic,) = body["topics"]
        assert (topic["name"], len(topic["partitions"]), body["controller_id"]) == ("orders", 2, 2)


async def test_metadata_answers_are_encoded_once_until_they_change() -> None:
    """Identical Metadata answers reuse their encoding; a changed one is encoded afresh."""
    async with fake_cluster() as cluster, connect(cluster) as conn:
        server = cluster.servers[0]
        frames = []
        for correlation_id in (1, 2):
            await conn.send(metadata_request(correlation_id))
            frames.append(await conn.frame())
        assert server.cached_metadata_responses == 1
        assert frames[0][8:] == frames[1][8:]  # same body, own correlation ids
        assert [kp_decode(MetadataResponse, 9, f)[0] for f in frames] == [1, 2]
        seed = CreatableTopic(name=TopicName("orders"), num_partitions=1, replication_factor=1)
        FakeHandler(cluster, BrokerId(1)).create(seed, validate_only=False)
        await conn.send(metadata_request(3))
        _, body = kp_decode(MetadataResponse, 9, await conn.frame())
        assert [t["name"] for t in body["topics"]] == ["orders"]
        assert server.cached_metadata_responses == 2


class Failing(FakeHandler):
    """Raises on CreateTopics; answers nothing to DeleteTopics and Produce (a handler bug:
    it advertises them)."""

    async def handle(self, request: KafkaRequest) -> Any:
        if request.api_key == 19:
            raise RuntimeError("the broker broke")
        if request.api_key in (0, 20):
            return None
        return await super().handle(request)


async def test_handler_failure_answers_unknown_server_error() -> None:
    """A handler that raises gets Kafka's error response, traced; the connection stays open."""
    async with fake_cluster(Failing) as cluster, connect(cluster) as conn:
        creatable = CreateTopicsRequest.CreatableTopic
        request = CreateTopicsRequest(
            version=6,
            topics=[creatable(name="a", num_partitions=1, replication_factor=1)],
            timeout_ms=1000,
        )
        await conn.send(kp_frame(request, correlation_id=3))
        correlation_id, body = kp_decode(CreateTopicsResponse, 6, await conn.frame())
        assert (correlation_id, body["topics"][0]["error_code"]) == (3, -1)
        event = await cluster.sink.wait_for(of_type("handler_failed"), WAIT)
        assert "the broker broke" in event.fields["detail"]
        await conn.send(metadata_request(4))
        assert kp_decode(MetadataResponse, 9, await conn.frame())[0] == 4


async def test_advertised_but_unanswered_api_gets_unsupported_version() -> None:
    """A handler answering nothing to an API it advertises gets UNSUPPORTED_VERSION sent
    for it, for each topic or partition."""
    async with fake_cluster(Failing) as cluster:
        async with connect(cluster) as conn:
            delete = DeleteTopicsRequest(version=5, topic_names=["a", "b"], timeout_ms=100)
            await conn.send(kp_frame(delete, correlation_id=8))
            correlation_id, body = kp_decode(DeleteTopicsResponse, 5, await conn.frame())
            assert correlation_id == 8
            assert [(t["name"], t["error_code"]) for t in body["responses"]] == [
                ("a", 35),
                ("b", 35),
            ]
            unimplemented = await cluster.sink.wait_for(of_type("kafka_unimplemented_api"), WAIT)
            assert unimplemented.corr == 8
        async with connect(cluster) as conn:  # Produce says it per partition
            topic = ProduceRequest.TopicProduceData
            produce = ProduceRequest(
                version=8,
                acks=1,
                timeout_ms=100,
                topic_data=[
                    topic(
                        name="t",
                        partition_data=[
                            topic.PartitionProduceData(index=3, records=client_batch([b"v"]))
                        ],
                    )
                ],
            )
            await conn.send(kp_frame(produce, correlation_id=9))
            correlation_id, body = kp_decode(ProduceResponse, 8, await conn.frame())
            ((answer,),) = [t["partition_responses"] for t in body["responses"]]
            assert (correlation_id, answer["index"], answer["error_code"]) == (9, 3, 35)
        await still_serves(cluster)


class LeaderOfPartitionZero(FakeHandler):
    """Answers Produce as the leader of every topic's partition 0 and of nothing else."""

    async def handle(self, request: KafkaRequest) -> Any:
        if request.api_key != 0:
            return await super().handle(request)
        data = request_data(request)
        assert isinstance(data, ProduceRequestData)
        return ProduceResponseData(
            responses=tuple(
                ProduceTopicResponse(
                    name=t.name,
                    partition_responses=tuple(
                        ProducePartitionResponse(index=p.index, base_offset=0)
                        if p.index == 0
                        else ProducePartitionResponse(
                            index=p.index, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER
                        )
                        for p in t.partition_data
                    ),
                )
                for t in data.topic_data
            )
        )


def produce_without_acks(partition: int, correlation_id: int) -> bytes:
    topic = ProduceRequest.TopicProduceData
    data = topic.PartitionProduceData(index=partition, records=client_batch([b"v"]))
    request = ProduceRequest(
        version=8, acks=0, timeout_ms=100, topic_data=[topic(name="t", partition_data=[data])]
    )
    return kp_frame(request, correlation_id=correlation_id)


async def test_produce_without_acks_gets_no_answer() -> None:
    """A Produce with acks=0 that succeeds is answered with nothing: the next answer on the
    connection is the next request's."""
    async with fake_cluster(LeaderOfPartitionZero) as cluster, connect(cluster) as conn:
        await conn.send(produce_without_acks(0, 11), metadata_request(12))
        correlation_id, _ = kp_decode(MetadataResponse, 9, await conn.frame())
        assert correlation_id == 12
        await conn.send(produce_without_acks(0, 13), metadata_request(14))
        assert kp_decode(MetadataResponse, 9, await conn.frame())[0] == 14
        assert not cluster.sink.of(type="kafka_produce_failed_without_acks")


async def test_partitions_with_other_than_one_v2_batch_never_reach_the_broker() -> None:
    """A Produce partition with two batches, or none, is answered INVALID_RECORD by the
    listener (``ProduceRequest.validateRecords``); the broker is asked only for the
    partitions whose records pass, and not at all when none does."""
    topic = ProduceRequest.TopicProduceData
    one = client_batch([b"v"])

    def produce(correlation_id: int, *partitions: tuple[int, bytes]) -> bytes:
        data = [topic.PartitionProduceData(index=i, records=r) for i, r in partitions]
        request = ProduceRequest(
            version=8, acks=1, timeout_ms=100, topic_data=[topic(name="t", partition_data=data)]
        )
        return kp_frame(request, correlation_id=correlation_id)

    def answers(frame: bytes) -> list[tuple[int, int]]:
        _, body = kp_decode(ProduceResponse, 8, frame)
        return sorted(
            (p["index"], p["error_code"])
            for t in body["responses"]
            for p in t["partition_responses"]
        )

    asked: list[KafkaRequest] = []

    class Recording(LeaderOfPartitionZero):
        async def handle(self, request: KafkaRequest) -> Any:
            asked.append(request)
            return await super().handle(request)

    async with fake_cluster(Recording) as cluster, connect(cluster) as conn:
        await conn.send(produce(30, (0, one), (1, one + one), (2, b"")))
        assert answers(await conn.frame()) == [(0, 0), (1, 87), (2, 87)]
        (seen,) = [r for r in asked if r.api_key == 0]
        assert [p.index for t in seen.body.topic_data for p in t.partition_data] == [0]
        await conn.send(produce(31, (0, one + one)))
        assert answers(await conn.frame()) == [(0, 87)]
        assert len([r for r in asked if r.api_key == 0]) == 1


async def test_failed_produce_without_acks_closes_the_connection() -> None:
    """A Produce with acks=0 that fails anywhere closes its connection (the producer's only
    way to learn of it), after the answers before it, traced with the failures."""
    async with fake_cluster(LeaderOfPartitionZero) as cluster:
        async with connect(cluster) as conn:
            await conn.send(metadata_request(20), produce_without_acks(1, 21), metadata_request(22))
            assert kp_decode(MetadataResponse, 9, await conn.frame())[0] == 20
            assert await conn.closed_by_server()
        event = await cluster.sink.wait_for(of_type("kafka_produce_failed_without_acks"), WAIT)
        assert (event.corr, event.fields["errors"]) == (21, ["t-1:NOT_LEADER_OR_FOLLOWER"])
        (closed,) = cluster.sink.of(type="kafka_connection_closed")
        assert closed.fields["reason"] == "produce_failed_without_acks"
        await still_serves(cluster)


# ---------------------------------------------------------------------- life cycle


async def test_stopping_the_listener_closes_its_connections() -> None:
    """Cancelling the listener's task closes every connection it accepted, traced."""
    sink = MemorySink()
    tracer = Tracer()
    tracer.add_sink(sink)
    cluster = FakeCluster()
    server = KafkaWireServer(FakeHandler(cluster, BrokerId(1)), node="broker-1", tracer=tracer)
    async with anyio.create_task_group() as tg:
        port = await tg.start(server.serve)
        assert server.port == port
        stream = await anyio.connect_tcp(HOST, port)
        await sink.wait_for(of_type("kafka_connection_opened"), WAIT)
        tg.cancel_scope.cancel()
    async with stream:
        assert await Conn(stream).closed_by_server()
    (closed,) = sink.of(type="kafka_connection_closed")
    assert closed.fields["reason"] == "listener_stopped"
    with pytest.raises(NetworkError):
        _ = server.port
