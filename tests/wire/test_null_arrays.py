"""A null where the request's version allows no null (a non-nullable array) is a malformed
request: Kafka's generated readers refuse it ("non-nullable field ... was serialized as
null") and the connection closes. The codec would read it as ``None`` and hand it to code
that iterates it (the handler, then the error path), which failed with a TypeError."""

from __future__ import annotations

import socket
import struct

import anyio
import pytest

from actors.runtime.tracer import MemorySink
from tests.support.fake_kafka import HOST, WAIT, fake_cluster
from tests.support.kemu_child import flexible_request_frame, read_frame, request_frame

pytestmark = pytest.mark.asyncio

COMPACT_NULL = b"\x00"
CLASSIC_NULL = struct.pack(">i", -1)

NULL_FIRST_ARRAY = [
    pytest.param(request_frame(3, 0, 5, CLASSIC_NULL), "topics", id="Metadata-v0"),
    pytest.param(request_frame(19, 4, 5, CLASSIC_NULL), "topics", id="CreateTopics-v4"),
    pytest.param(flexible_request_frame(19, 5, 5, COMPACT_NULL), "topics", id="CreateTopics-v5"),
    pytest.param(request_frame(20, 3, 5, CLASSIC_NULL), "topic_names", id="DeleteTopics-v3"),
    pytest.param(
        flexible_request_frame(20, 5, 5, COMPACT_NULL), "topic_names", id="DeleteTopics-v5"
    ),
    pytest.param(request_frame(20, 0, 5, CLASSIC_NULL), "topic_names", id="DeleteTopics-v0"),
    pytest.param(request_frame(32, 3, 5, CLASSIC_NULL), "resources", id="DescribeConfigs-v3"),
    pytest.param(request_frame(32, 0, 5, CLASSIC_NULL), "resources", id="DescribeConfigs-v0"),
    pytest.param(request_frame(37, 1, 5, CLASSIC_NULL), "topics", id="CreatePartitions-v1"),
    pytest.param(
        flexible_request_frame(37, 2, 5, COMPACT_NULL), "topics", id="CreatePartitions-v2"
    ),
]


def read_answer(port: int, frame: bytes) -> bytes | None:
    with socket.create_connection((HOST, port), timeout=WAIT) as sock:
        sock.sendall(frame)
        return read_frame(sock)


def bugs(sink: MemorySink) -> list[str]:
    """Traced errors that mean code failed on the request, not that it was refused."""
    return [
        e.type or ""
        for e in sink
        if e.type in ("handler_failed", "connection_failed", "error_response_failed")
    ]


@pytest.mark.parametrize(("frame", "field"), NULL_FIRST_ARRAY)
async def test_a_null_non_nullable_array_is_a_bad_frame(frame: bytes, field: str) -> None:
    """A request whose first array is null where its version does not allow it is refused
    as a ``bad_frame`` naming the field; no handler or error path sees it, and the
    listener keeps serving."""
    async with fake_cluster() as cluster:
        port = cluster.brokers[0].port
        assert await anyio.to_thread.run_sync(read_answer, port, frame) is None
        event = await cluster.sink.wait_for(lambda e: e.type == "bad_frame", WAIT)
        assert f"non-nullable field {field} was serialized as null" in event.fields["detail"]
        assert bugs(cluster.sink) == []
        still = request_frame(3, 1, 6, struct.pack(">i", 0))
        answer = await anyio.to_thread.run_sync(read_answer, port, still)
        assert answer is not None


async def test_a_null_nullable_array_still_means_what_kafka_says() -> None:
    """Where the version allows null (Metadata v1+ topics: every topic; CreatePartitions'
    assignments), a null is read as such and answered."""
    async with fake_cluster() as cluster:
        port = cluster.brokers[0].port
        every_topic = request_frame(3, 1, 7, CLASSIC_NULL)
        answer = await anyio.to_thread.run_sync(read_answer, port, every_topic)
        assert answer is not None
        assert struct.unpack_from(">i", answer)[0] == 7
        topic = struct.pack(">h", 1) + b"t" + struct.pack(">i", 2) + CLASSIC_NULL
        grow = request_frame(
            37, 1, 8, struct.pack(">i", 1) + topic + struct.pack(">i?", 1000, False)
        )
        answer = await anyio.to_thread.run_sync(read_answer, port, grow)
        assert answer is not None
        assert struct.unpack_from(">i", answer)[0] == 8
        assert bugs(cluster.sink) == []
