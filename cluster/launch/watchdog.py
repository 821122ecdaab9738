"""``kemu up --parent-pid PID``: stop the launcher once the program that started it is gone.

A program that starts ``kemu up`` (a test fixture, a benchmark, the fuzzer's servers) stops
it with SIGINT or SIGTERM when it is done; when that program is SIGKILLed it never does,
and the launcher (with its broker processes) would run on. With ``--parent-pid`` the
launcher watches the program's process and, once it has exited, stops as on SIGTERM:
brokers stopped, the cluster file removed, ``kemu: stopped`` (``first_stop``).

The watch does not poll on Linux: ``os.pidfd_open`` gives a descriptor that becomes
readable when the process exits (a zombie counts as exited), and the event loop waits on
it like on a socket. A pidfd names the process, not its number, so a number reused after
the exit cannot fool it. Elsewhere (no ``pidfd_open``) the launcher checks every
``POLL_INTERVAL`` seconds whether the process still exists and is no zombie.

Once the watched program is gone, whatever read the launcher's output may be gone with it
(a pipe without a reader): ``detach_output`` points stdout and stderr at ``/dev/null``
where writing to them fails, so that stopping is not cut short by a ``BrokenPipeError``.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final

import anyio

POLL_INTERVAL: Final = 0.5
"""Seconds between two checks of the watched process where there is no pidfd."""


async def wait_gone(pid: int) -> None:
    """Return once process ``pid`` has exited (at once if there is none)."""
    try:
        descriptor = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):  # no pidfd on this system: poll
        while _exists(pid):  # noqa: ASYNC110 - an OS condition, no event to wait on
            await anyio.sleep(POLL_INTERVAL)
        return
    try:
        await anyio.wait_readable(descriptor)
    finally:
        os.close(descriptor)


def _exists(pid: int) -> bool:
    """Whether ``pid`` is a process that has not exited yet (a zombie has)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process, alive
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc: alive is all we know
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


async def first_stop(signals: AsyncIterator[int], parent_pid: int | None) -> None:
    """Wait for the first reason to stop, SIGINT/SIGTERM on ``signals`` or (with a
    ``parent_pid``) that process gone, and say which on stdout."""
    async with anyio.create_task_group() as tg:

        async def on_signal() -> None:
            async for signum in signals:
                print(f"\nkemu: {signal.Signals(signum).name}: stopping", flush=True)
                break
            tg.cancel_scope.cancel()

        async def on_parent_gone(pid: int) -> None:
            await wait_gone(pid)
            detach_output()
            print(f"\nkemu: process {pid} (--parent-pid) is gone: stopping", flush=True)
            tg.cancel_scope.cancel()

        tg.start_soon(on_signal)
        if parent_pid is not None:
            tg.start_soon(on_parent_gone, parent_pid)


def detach_output() -> None:
    """Point stdout and stderr at ``/dev/null`` where they are a pipe that nobody reads any
    more, so that later prints and logs go nowhere instead of raising."""
    for stream in (sys.stdout, sys.stderr):
        try:
            fd = stream.fileno()
        except (OSError, ValueError):
            continue  # not a file descriptor (captured output): nothing to detach
        if _reader_gone(fd):
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, fd)
            os.close(null)
            with contextlib.suppress(OSError, ValueError):
                stream.flush()  # what was buffered goes to /dev/null too


def _reader_gone(fd: int) -> bool:
    """Whether ``fd`` is a pipe whose reading end is closed (poll reports POLLERR)."""
    if not stat.S_ISFIFO(os.fstat(fd).st_mode):
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(event & select.POLLERR for _, event in poller.poll(0))
