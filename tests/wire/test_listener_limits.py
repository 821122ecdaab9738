"""The Kafka listener at the process's limits, against a real ``kemu up`` in a child process.

Running out of file descriptors makes ``accept()`` fail with EMFILE; Kafka's
``SocketServer.Acceptor`` logs it and carries on, and so must kemu: the error once (not
once per try in a flood), the process and its open connections alive, and the waiting
connections served once descriptors free up.
"""

from __future__ import annotations

import errno
import re
import socket
import struct
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from anyio.abc import SocketAttribute, SocketListener, SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream
from structlog.testing import capture_logs

from actors.runtime.clock import RealClock
from actors.runtime.tracer import MemorySink, Tracer
from cluster.kafka import KafkaWireServer
from protocol.ids import BrokerId
from tests.support.fake_kafka import HOST, WAIT, FakeCluster, FakeHandler
from tests.support.kemu_child import KemuChild, metadata_round_trip, metadata_v1_frame

NOFILE = 256  # the child's RLIMIT_NOFILE
IDLE = NOFILE + 64  # idle connections: more than the child can hold
DEADLINE = 30.0


def wait_for(condition: Callable[[], bool], what: str, child: KemuChild) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert child.alive, child.exit_report()
        assert time.monotonic() < deadline, f"no {what} within {DEADLINE}s:\n{child.output}"
        time.sleep(0.05)  # polling a child's output file, not waiting for a state


def test_running_out_of_file_descriptors_is_survived(tmp_path: Path) -> None:
    """Under RLIMIT_NOFILE 256, 320 idle connections make accept() fail with EMFILE: the
    process lives, logs the failure once, keeps answering an open connection, and serves
    new connections once the idle ones close, logging the recovery with how many tries
    failed."""
    child = KemuChild(tmp_path, nofile=NOFILE)
    idle: list[socket.socket] = []
    try:
        child.start()
        witness = child.connect()
        metadata_round_trip(witness, correlation_id=1)
        idle.extend(child.connect() for _ in range(IDLE))  # queued in the backlog past the limit
        wait_for(lambda: "kafka_accept_failed" in child.output, "kafka_accept_failed", child)
        assert child.alive, child.exit_report()
        metadata_round_trip(witness, correlation_id=2)
        for sock in idle:
            sock.close()
        with child.connect(timeout=DEADLINE) as fresh:
            metadata_round_trip(fresh, correlation_id=3)
        wait_for(lambda: "kafka_accept_recovered" in child.output, "the recovery", child)
        metadata_round_trip(witness, correlation_id=4)
        witness.close()
        output = child.output
        events = child.stop()
    finally:
        for sock in idle:
            sock.close()
        child.kill()
    assert output.count("kafka_accept_failed") == 1
    assert "Too many open files" in output
    recovered = re.search(r"kafka_accept_recovered.*failures=(\d+)", output)
    assert recovered is not None
    assert int(recovered.group(1)) >= 1
    failed = [e for e in events if e.type == "kafka_accept_failed"]
    assert len(failed) == 1
    assert failed[0].kind == "error"
    assert [e.type for e in events if e.type == "kafka_accept_recovered"] == [
        "kafka_accept_recovered"
    ]


class FloodingListener(SocketListener):
    """A broken fake: the first ``failures`` calls to ``accept()`` fail with EMFILE, as a
    process out of file descriptors sees them; the next ones accept on a real listener."""

    def __init__(self, real: SocketListener, failures: int) -> None:
        self.real = real
        self.failures = failures
        self.calls = 0

    async def accept(self) -> SocketStream:
        self.calls += 1
        if self.calls <= self.failures:
            await anyio.lowlevel.checkpoint()
            raise OSError(errno.EMFILE, "Too many open files")
        return await self.real.accept()

    async def aclose(self) -> None:
        await self.real.aclose()

    @property
    def _raw_socket(self) -> socket.socket:
        return self.real._raw_socket


@pytest.mark.asyncio
async def test_a_flood_of_failing_accepts_is_logged_once() -> None:
    """Twenty accept() failures in a row are logged and traced once when the run starts
    and once, with their count, when a connection is accepted again; that connection is
    served."""
    sink = MemorySink()
    tracer = Tracer()
    tracer.add_sink(sink)
    server = KafkaWireServer(
        FakeHandler(FakeCluster(), BrokerId(1)),
        node="broker-1",
        tracer=tracer,
        clock=RealClock(rate=100),  # the backoff between tries passes 100 times faster
    )
    real = await anyio.create_tcp_listener(local_host=HOST)
    inner = real.listeners[0]
    assert isinstance(inner, SocketListener)
    port = int(inner.extra(SocketAttribute.local_port))  # noqa: S610 - not Django
    flooding = FloodingListener(inner, failures=20)
    with capture_logs() as logs, anyio.fail_after(WAIT):
        async with real, anyio.create_task_group() as tg:
            tg.start_soon(server._accept_connections, flooding, tg)
            async with await anyio.connect_tcp(HOST, port) as client:
                await client.send(metadata_v1_frame(5))
                reader = BufferedByteReceiveStream(client)
                size = struct.unpack(">i", await reader.receive_exactly(4))[0]
                answer = await reader.receive_exactly(size)
            tg.cancel_scope.cancel()
    assert struct.unpack_from(">i", answer)[0] == 5  # the correlation id
    assert flooding.calls > 20
    assert [log["event"] for log in logs] == ["kafka_accept_failed", "kafka_accept_recovered"]
    assert "Too many open files" in logs[0]["error"]
    assert logs[1]["failures"] == 20
    assert [e.type for e in sink.of(kind="error")] == ["kafka_accept_failed"]
    assert [e.fields["failures"] for e in sink.of(type="kafka_accept_recovered")] == [20]
