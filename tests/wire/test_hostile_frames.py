"""Frames whose length prefixes lie, against a real ``kemu up`` in a child process.

Kafka's generated readers refuse an array, string or bytes longer than what remains of the
request and ``SocketServer`` closes that one connection. The codec kemu uses allocates room
for an array from its length before reading it, so one 22-byte Metadata v9 request once
aborted the whole process (every broker, the embedded store, the control endpoint): run in
a child, that shows here as a failed test, not a dead test runner. Each bad frame must cost
its connection only: another connection's Metadata request is still answered in 100 ms.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.kemu_child import (
    KemuChild,
    correlation_of,
    flexible_request_frame,
    metadata_round_trip,
    metadata_v1_frame,
    read_frame,
    request_frame,
)

HUGE_VARINT = b"\xff\xff\xff\xff\x0f"  # 2^32 - 1: a compact array of 2^32 - 2 items
HUGE_INT32 = struct.pack(">i", 2**31 - 1)
HUGE_INT16 = struct.pack(">h", 2**15 - 1)
ANSWER_WITHIN = 0.1  # seconds for another connection's Metadata answer

FIRST_FLEXIBLE = {3: 9, 19: 5, 20: 4, 32: 4, 37: 2}
"""The first flexible version of each served API (Kafka's ``flexibleVersions``)."""

SERVED = [
    ("Metadata", 3, 0), ("Metadata", 3, 1), ("Metadata", 3, 9),
    ("CreateTopics", 19, 0), ("CreateTopics", 19, 4), ("CreateTopics", 19, 5),
    ("DeleteTopics", 20, 0), ("DeleteTopics", 20, 3), ("DeleteTopics", 20, 4),
    ("DescribeConfigs", 32, 0), ("DescribeConfigs", 32, 3),
    ("CreatePartitions", 37, 1), ("CreatePartitions", 37, 2),
]  # fmt: skip
"""(API, key, version): a classic and (where 2.7 has one) a flexible version of each
admin API whose body starts with an array; v0 of those whose v0 kemu's codec adds."""


def flexible(key: int, version: int) -> bool:
    return version >= FIRST_FLEXIBLE[key]


def array_of(count: int, *, compact: bool) -> bytes:
    if compact:
        return bytes([count + 1])  # a one-byte varint for small counts
    return struct.pack(">i", count)


def string(text: str, *, compact: bool) -> bytes:
    data = text.encode()
    return (bytes([len(data) + 1]) if compact else struct.pack(">h", len(data))) + data


def element_prefix(key: int, version: int) -> bytes:
    """What the first array's element holds before its first string."""
    if key == 32:
        return b"\x02"  # DescribeConfigs' resource type (topic)
    return b""


def frame(key: int, version: int, body: bytes) -> bytes:
    if flexible(key, version):
        return flexible_request_frame(key, version, 99, body)
    return request_frame(key, version, 99, body)


def huge_array(key: int, version: int) -> bytes:
    compact = flexible(key, version)
    return frame(key, version, HUGE_VARINT if compact else HUGE_INT32)


def huge_string(key: int, version: int) -> bytes:
    compact = flexible(key, version)
    head = array_of(1, compact=compact) + element_prefix(key, version)
    return frame(key, version, head + (HUGE_VARINT if compact else HUGE_INT16))


def truncated(key: int, version: int) -> bytes:
    compact = flexible(key, version)
    return frame(key, version, array_of(1, compact=compact) + element_prefix(key, version))


def nested_huge_array(key: int, version: int) -> bytes:
    """An array inside the first element: CreateTopics' assignments, DescribeConfigs'
    configuration keys."""
    compact = flexible(key, version)
    huge = HUGE_VARINT if compact else HUGE_INT32
    if key == 19:
        element = string("t", compact=compact) + struct.pack(">ih", 1, 1) + huge
    else:
        element = b"\x02" + string("t", compact=compact) + huge
    return frame(key, version, array_of(1, compact=compact) + element)


def huge_tagged_field(key: int, version: int) -> bytes:
    """Header v2 with one tagged field whose size runs past the frame."""
    return request_frame(key, version, 99, b"\x01\x05" + HUGE_VARINT)


CASES = [
    *[
        pytest.param(build(key, version), id=f"{name}-v{version}-{build.__name__}")
        for name, key, version in SERVED
        for build in (huge_array, huge_string, truncated)
    ],
    *[
        pytest.param(nested_huge_array(key, version), id=f"{name}-v{version}-nested_huge_array")
        for name, key, version in SERVED
        if key in (19, 32)
    ],
    *[
        pytest.param(huge_tagged_field(key, version), id=f"{name}-v{version}-huge_tagged_field")
        for name, key, version in SERVED
        if flexible(key, version)
    ],
    pytest.param(struct.pack(">ihhi", 10, 3, 9, 99) + HUGE_INT16, id="Metadata-v9-huge_client_id"),
    pytest.param(struct.pack(">i", 5) + b"hello", id="garbage"),
    pytest.param(struct.pack(">i", 200 * 1024 * 1024), id="over_max_frame_bytes"),
]
PIPELINED = 500


@pytest.fixture(scope="module")
def child(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KemuChild]:
    kemu = KemuChild(tmp_path_factory.mktemp("hostile"))
    try:
        kemu.start()
        yield kemu
    finally:
        kemu.kill()


@pytest.fixture(scope="module")
def witness(child: KemuChild) -> Iterator[socket.socket]:
    """A connection open across the module, asking Metadata after every bad frame."""
    with child.connect() as sock:
        yield sock


@pytest.mark.parametrize("bad", CASES)
def test_a_lying_length_closes_only_its_connection(
    child: KemuChild, witness: socket.socket, bad: bytes
) -> None:
    """A request with a length prefix past its end (or cut short) closes its connection
    unanswered; the process lives and another connection's Metadata is answered in 100 ms."""
    assert child.alive, child.exit_report()
    with child.connect() as sock:
        sock.sendall(bad)
        assert read_frame(sock) is None  # closed, nothing answered
    took = metadata_round_trip(witness, correlation_id=len(bad))
    assert child.alive, child.exit_report()
    assert took < ANSWER_WITHIN


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(huge_array(3, 9), id="lying_array"),
        pytest.param(struct.pack(">i", 200 * 1024 * 1024), id="over_max_frame_bytes"),
    ],
)
def test_requests_before_a_bad_frame_are_all_answered_first(
    child: KemuChild, witness: socket.socket, bad: bytes
) -> None:
    """500 pipelined Metadata requests and then a bad frame (a lying array, or a frame
    size over the limit), in one write: exactly 500 answers, in request order, and then the
    end of the stream."""
    with child.connect(timeout=30.0) as sock:
        sock.sendall(b"".join(metadata_v1_frame(c) for c in range(PIPELINED)) + bad)
        answered = []
        while (frame := read_frame(sock)) is not None:
            answered.append(correlation_of(frame))
    assert answered == list(range(PIPELINED))
    metadata_round_trip(witness, correlation_id=PIPELINED)


def test_a_connection_reset_mid_frame_costs_that_connection_only(
    child: KemuChild, witness: socket.socket
) -> None:
    """A client that resets its connection (RST) halfway through a frame leaves the
    process and another connection unharmed."""
    sock = child.connect()
    sock.sendall(metadata_v1_frame(1)[:7])
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()  # SO_LINGER 0: the close sends RST
    assert metadata_round_trip(witness, correlation_id=2) < ANSWER_WITHIN
    assert child.alive, child.exit_report()


def test_the_refused_frame_is_traced_as_bad_frame(tmp_path: Path) -> None:
    """The 22-byte Metadata v9 frame is traced as an ``error`` of type ``bad_frame`` naming
    the array's claim, and its connection closes with reason ``bad_frame``."""
    kemu = KemuChild(tmp_path)
    try:
        kemu.start()
        with kemu.connect() as sock:
            sock.sendall(huge_array(3, 9))
            assert read_frame(sock) is None
        with kemu.connect() as sock:
            metadata_round_trip(sock, correlation_id=1)
        events = kemu.stop()
    finally:
        kemu.kill()
    bad = [e for e in events if e.type == "bad_frame"]
    assert len(bad) == 1
    assert bad[0].kind == "error"
    assert "claims 4294967294 items" in bad[0].fields["detail"]
    closed = [e for e in events if e.type == "kafka_connection_closed"]
    assert closed[0].fields["peer"] == bad[0].fields["peer"]
    assert closed[0].fields["reason"] == "bad_frame"
