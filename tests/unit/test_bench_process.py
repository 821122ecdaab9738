"""A benchmark stopped midway removes its log directories (on /dev/shm, which is memory):
SIGTERM prints its tasks' stacks and unwinds it as Ctrl-C does, and a row's parent that
is cancelled stops its child that way instead of killing it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import pytest

from cluster.bench.process import run_child
from cluster.bench.scale import fast_tmp

pytestmark = pytest.mark.processes

BENCH = ["-m", "cluster.bench.deletion", "--topics", "300", "--quiet"]
"""A row's child long enough (seconds) to be caught holding its log files open."""

PREFIX = "kemu-deletion-"


def _base() -> Path:
    return Path(fast_tmp() or tempfile.gettempdir())


def _log_root(pid: int) -> Path | None:
    """The temporary directory the bench process ``pid`` has log files open in, if any."""
    base = _base()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except FileNotFoundError:
        return None
    for fd in fds:
        try:
            target = Path(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
        if target.is_relative_to(base) and target.parts[len(base.parts)].startswith(PREFIX):
            return base / target.parts[len(base.parts)]
    return None


def _wait_for_log_root(pid: int, deadline_s: float = 120.0) -> Path:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        root = _log_root(pid)
        if root is not None:
            return root
        time.sleep(0.01)
    raise AssertionError(f"bench process {pid} opened no log file in {deadline_s} s")


def _children() -> list[int]:
    """This process's child processes."""
    me = str(os.getpid())
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if stat.rsplit(")", 1)[1].split()[1] == me:
                found.append(int(entry))
    return found


def _wait_for_new_child(before: set[int], deadline_s: float = 120.0) -> int:
    """The child process this process started since ``before`` was taken (the test
    session has children of its own, a ZooKeeper server for one)."""
    deadline = time.monotonic() + deadline_s
    while not (new := set(_children()) - before):
        if time.monotonic() > deadline:
            raise AssertionError(f"no new child process in {deadline_s} s")
        time.sleep(0.01)
    (pid,) = new
    return pid


def test_a_bench_process_sent_sigterm_removes_its_log_directories() -> None:
    child = subprocess.Popen(
        [sys.executable, *BENCH], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        root = _wait_for_log_root(child.pid)
        child.send_signal(signal.SIGTERM)
        _, err = child.communicate(timeout=120)
    finally:
        child.kill()
    assert child.returncode != 0, "the bench finished before it was stopped"
    assert b"KeyboardInterrupt" in err
    assert not root.exists()
    # what each task awaited when stopped, down to the bench's own coroutine
    assert b"asyncio tasks:" in err
    assert b"in run_deletion\n" in err


@pytest.mark.asyncio
async def test_a_cancelled_row_stops_its_child_which_removes_its_log_directories() -> None:
    async def watch(scope: anyio.CancelScope) -> None:
        pids.append(await anyio.to_thread.run_sync(_wait_for_new_child, before))
        roots.append(await anyio.to_thread.run_sync(_wait_for_log_root, pids[0]))
        scope.cancel()

    before = set(_children())
    pids: list[int] = []
    roots: list[Path] = []
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch, scope)
            await run_child(BENCH)
            raise AssertionError("the row's child finished before it was cancelled")
    assert roots
    assert not roots[0].exists()
    assert pids[0] not in _children()  # stopped and reaped
