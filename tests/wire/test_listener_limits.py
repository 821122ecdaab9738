"""The Kafka listener at the process's limits, against a real ``kemu up`` in a child process.

Running out of file descriptors makes ``accept()`` fail with EMFILE; Kafka's
``SocketServer.Acceptor`` logs it and carries on, and so must kemu: the error once (not
once per try in a flood), the process and its open connections alive, and the waiting
connections served once descriptors free up.
"""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Callable
from pathlib import Path

from tests.support.kemu_child import KemuChild, metadata_round_trip

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
