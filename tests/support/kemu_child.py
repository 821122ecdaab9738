"""A one-broker ``kemu up`` in a child process, for wire tests whose failure on the old code
would take the test runner down with it (a native abort in the codec) or needs limits of
its own (``RLIMIT_NOFILE``). Its output goes to a file, so a chatty child never blocks on a
full pipe; ``stop`` sends SIGINT and waits, which flushes the trace file."""

from __future__ import annotations

import os
import resource
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

from actors.runtime.tracer import read_trace
from protocol.trace import TraceEvent
from tests.support.kemu_commands import readiness_rows

REPO = Path(__file__).resolve().parents[2]
READY_MARKER = "Ctrl-C stops the cluster."
READY_TIMEOUT = 30.0
STOP_TIMEOUT = 15.0
_SIZE = struct.Struct(">i")


class KemuChild:
    """``kemu up --brokers 1 --port 0`` with a trace file, optionally under a lower
    ``RLIMIT_NOFILE``."""

    def __init__(self, tmp: Path, *, nofile: int | None = None) -> None:
        self.tmp = tmp
        self.trace_file = tmp / "trace.jsonl"
        self.output_file = tmp / "output.txt"
        self.nofile = nofile
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0

    def start(self) -> None:
        args = [
            sys.executable, "-m", "cluster.cli", "up", "--port", "0", "--brokers", "1",
            "--log-dir", str(self.tmp / "logs"), "--cluster-file", str(self.tmp / "c.json"),
            "--trace", str(self.trace_file), "--parent-pid", str(os.getpid()),
        ]  # fmt: skip
        with self.output_file.open("wb") as output:
            self.process = subprocess.Popen(
                args,
                cwd=REPO,
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=self._limit if self.nofile is not None else None,
            )
        deadline = time.monotonic() + READY_TIMEOUT
        while READY_MARKER not in self.output:
            if self.process.poll() is not None:
                raise AssertionError(f"kemu up exited before it was ready:\n{self.output}")
            if time.monotonic() > deadline:
                raise AssertionError(f"kemu up not ready within {READY_TIMEOUT}s:\n{self.output}")
            time.sleep(0.05)  # polling a child's output file, not waiting for a state
        endpoint = readiness_rows(self.output)[0][1]
        self.port = int(endpoint.rsplit(":", 1)[1])

    def _limit(self) -> None:
        assert self.nofile is not None
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.nofile, self.nofile))

    @property
    def output(self) -> str:
        return self.output_file.read_text(errors="replace")

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def exit_report(self) -> str:
        """What a dead child said, for an assertion message."""
        code = None if self.process is None else self.process.poll()
        return f"kemu up exited with {code}:\n{self.output[-4000:]}"

    def stop(self) -> list[TraceEvent]:
        """SIGINT, wait for the exit, and the trace it wrote."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            self.process.wait(STOP_TIMEOUT)
        if not self.trace_file.exists():
            return []
        _header, events = read_trace(self.trace_file)
        return list(events)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(STOP_TIMEOUT)

    def connect(self, timeout: float = 5.0) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=timeout)


def request_frame(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    """A whole request frame: size, header v1 (client id "t"), ``body`` as given."""
    header = struct.pack(">hhih", api_key, version, correlation_id, 1) + b"t"
    return _SIZE.pack(len(header) + len(body)) + header + body


def flexible_request_frame(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    """A whole request frame with header v2 (header v1 and no tagged fields)."""
    return request_frame(api_key, version, correlation_id, b"\x00" + body)


def metadata_v1_frame(correlation_id: int) -> bytes:
    """Metadata v1 for no topics (the brokers and the controller)."""
    return request_frame(3, 1, correlation_id, _SIZE.pack(0))


def read_frame(sock: socket.socket) -> bytes | None:
    """One response frame (without its size), or None at the end of the stream."""
    head = _read_exactly(sock, _SIZE.size)
    if head is None:
        return None
    body = _read_exactly(sock, _SIZE.unpack(head)[0])
    assert body is not None, "the connection closed in the middle of a response"
    return body


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            assert not data, f"the connection closed {len(data)} bytes into {size}"
            return None
        data += chunk
    return data


def correlation_of(frame: bytes) -> int:
    return int(_SIZE.unpack_from(frame)[0])


def metadata_round_trip(sock: socket.socket, correlation_id: int) -> float:
    """Send Metadata v1 on ``sock`` and return how long its answer took; raises
    ``AssertionError`` when the connection closes instead."""
    started = time.monotonic()
    sock.sendall(metadata_v1_frame(correlation_id))
    frame = read_frame(sock)
    took = time.monotonic() - started
    assert frame is not None, "the listener closed a connection that sent a valid request"
    assert correlation_of(frame) == correlation_id
    return took
