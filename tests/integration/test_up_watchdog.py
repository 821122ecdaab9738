"""``kemu up --parent-pid``: a launcher whose starting program was SIGKILLed (a pytest run
killed before its fixtures tore down) stops by itself, as on SIGTERM: its broker processes
stop, its cluster file is removed, and nothing of it is left running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from cluster.launch.connect import ClusterFile
from cluster.launch.watchdog import wait_gone
from tests.support.kemu_commands import REPO, alive, kemu
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(120)

GONE_TIMEOUT = 30.0  # for the launcher to notice, stop its brokers and exit
READY_TIMEOUT = 60.0

# The starting program: the tests' own fixture (KemuUp, which passes --parent-pid), in a
# process of its own, which prints the launcher's pid and then waits to be killed.
STARTER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from tests.support.kemu_commands import KemuUp

    up = KemuUp(Path(sys.argv[1]), *sys.argv[2:])
    up.start()
    print(up.process.pid, flush=True)
    sys.stdin.read()
    """
)


@pytest.fixture
def leftovers() -> Iterator[list[int]]:
    """Pids to SIGKILL at the end if the test failed to see them gone."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.parametrize(
    "extra",
    [(), pytest.param(("--processes",), marks=pytest.mark.processes)],
    ids=["one", "processes"],
)
def test_a_launcher_stops_when_the_program_that_started_it_is_killed(
    tmp_path: Path, extra: tuple[str, ...], leftovers: list[int]
) -> None:
    """The starter is SIGKILLed while its kemu up runs: the launcher (and with --processes
    every broker process) exits, and its cluster file is removed, as on a clean stop, even
    though its stdout was a pipe to the dead starter."""
    starter = subprocess.Popen(
        [sys.executable, "-c", STARTER, str(tmp_path), *extra],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert starter.stdout is not None
        line = starter.stdout.readline()  # the starter prints it once kemu up is ready
        assert line.strip().isdigit(), line
        launcher = int(line)
        leftovers.append(launcher)
        cluster_file = tmp_path / "cluster.json"
        info = ClusterFile.read(cluster_file)
        assert info.pid == launcher
        brokers = {b.pid for b in info.brokers} - {launcher}
        assert len(brokers) == (3 if extra else 0)
        leftovers.extend(brokers)
        assert all(alive(pid) for pid in (launcher, *brokers))
    finally:
        starter.kill()
        starter.communicate(timeout=READY_TIMEOUT)  # reaps it and closes its pipes
    wait_until(
        lambda: [pid for pid in (launcher, *brokers) if alive(pid)],
        lambda left: not left,
        GONE_TIMEOUT,
    )
    assert not cluster_file.exists()


@pytest.fixture
def reader() -> Iterator[subprocess.Popen[bytes]]:
    """A child that runs until its stdin is closed (killed at the end whatever happened)."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        yield child
    finally:
        child.kill()
        child.wait()
        if child.stdin is not None:
            child.stdin.close()


@pytest.mark.asyncio
async def test_wait_gone_returns_when_the_process_exits(reader: subprocess.Popen[bytes]) -> None:
    """``wait_gone`` waits while the process runs and returns once it has exited (a zombie
    not yet reaped counts as exited), and at once for a pid that names no process."""
    with anyio.move_on_after(0.2) as waited:
        await wait_gone(reader.pid)
    assert waited.cancelled_caught  # still running: still waiting
    assert reader.stdin is not None
    reader.stdin.close()  # the child reads EOF and exits; a zombie until reaped
    with anyio.fail_after(10):
        await wait_gone(reader.pid)
    assert reader.poll() == 0  # it had exited: reaped now
    with anyio.fail_after(1):
        await wait_gone(reader.pid)  # no such process


@pytest.mark.asyncio
async def test_wait_gone_polls_without_pidfd(
    reader: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where there is no ``pidfd_open``, ``wait_gone`` polls: it still returns once the
    process has exited (a zombie)."""
    monkeypatch.delattr(os, "pidfd_open")
    monkeypatch.setattr("cluster.launch.watchdog.POLL_INTERVAL", 0.01)
    with anyio.move_on_after(0.2) as waited:
        await wait_gone(reader.pid)
    assert waited.cancelled_caught
    assert reader.stdin is not None
    reader.stdin.close()
    with anyio.fail_after(10):
        await wait_gone(reader.pid)


def test_a_parent_pid_that_is_no_pid_is_a_usage_error() -> None:
    """``--parent-pid`` takes a process id: anything else is one line and exit 2."""
    for given in ("x", "0"):
        done = kemu("up", "--parent-pid", given)
        assert done.returncode == 2
        assert "argument --parent-pid: " in done.stderr
        assert done.stdout == ""
