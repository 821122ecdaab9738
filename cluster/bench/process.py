"""How a benchmark process ends: on SIGTERM as on Ctrl-C, so that its temporary
directories (log dirs on ``/dev/shm``, which is memory) are removed on the way out, and a
row's child process stopped with its parent instead of killed outright. A process stopped
by SIGTERM (a deadline: ``timeout``, or its row's parent cancelled) first prints the stack
of each of its asyncio tasks on stderr, so that a run stuck waiting says what it waited
for."""

from __future__ import annotations

import asyncio
import collections
import signal
import sys
from collections.abc import Callable
from types import FrameType
from typing import NoReturn, TextIO

import anyio

from cluster.gc_settings import configure_gc

__all__ = ["STOP_GRACE_S", "exit_with", "print_tasks", "run_child"]

STOP_GRACE_S = 30.0
"""How long a row's child process has to remove its directories once told to stop."""


def exit_with(main: Callable[[], int]) -> NoReturn:
    """Run a benchmark's ``main`` with SIGTERM raising KeyboardInterrupt, as SIGINT does:
    the ``with tempfile.TemporaryDirectory()`` blocks unwind instead of the process
    vanishing with its directories left behind; exit with ``main``'s status. The process
    gets the collector thresholds a ``kemu`` process has (``cluster.gc_settings``): the
    benchmarks measure what ``kemu`` runs."""
    configure_gc()
    signal.signal(signal.SIGTERM, _stopped)
    sys.exit(main())


def _stopped(signum: int, frame: FrameType | None) -> None:
    """SIGTERM: print the tasks' stacks (once), then unwind as on Ctrl-C."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    print_tasks(sys.stderr)
    signal.default_int_handler(signum, frame)


def print_tasks(file: TextIO) -> None:
    """Print the stack of each asyncio task of the running event loop (none if no loop
    runs), tasks with the same stack printed once with their count and first name."""
    try:
        tasks = asyncio.all_tasks()
    except RuntimeError:
        return
    stacks: collections.Counter[str] = collections.Counter()
    names: dict[str, str] = {}
    for task in tasks:
        lines = [
            f"  {f.f_code.co_filename}:{f.f_lineno} in {f.f_code.co_qualname}"
            for f in _awaiting(task.get_coro())
        ]
        stack = "\n".join(lines) or "  (no frame)"
        stacks[stack] += 1
        names.setdefault(stack, task.get_name())
    print(f"stopped with {len(tasks)} asyncio tasks:", file=file)
    for stack, count in stacks.most_common():
        print(f"{count} x {names[stack]}:\n{stack}", file=file)
    file.flush()


async def run_child(command: list[str]) -> tuple[int, bytes]:
    """Run ``python COMMAND`` (its stderr passes through) and return its exit status and
    standard output. If the caller is cancelled (Ctrl-C, a deadline), the child gets
    SIGTERM and up to ``STOP_GRACE_S`` to clean up before it is killed."""
    process = await anyio.open_process([sys.executable, *command], stderr=None)
    assert process.stdout is not None
    chunks: list[bytes] = []
    try:
        async for chunk in process.stdout:
            chunks.append(chunk)
        status = await process.wait()
    except BaseException:
        with anyio.CancelScope(shield=True):
            process.terminate()
            with anyio.move_on_after(STOP_GRACE_S):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
            await process.aclose()
        raise
    await process.aclose()
    return status, b"".join(chunks)


def _awaiting(awaitable: object) -> list[FrameType]:
    """The frames of a suspended coroutine and of what it awaits, down the chain
    (``Task.get_stack`` gives a suspended task's outermost frame only)."""
    frames: list[FrameType] = []
    while awaitable is not None:
        frame = next(
            (f for a in ("cr_frame", "gi_frame", "ag_frame") if (f := getattr(awaitable, a, None))),
            None,
        )
        if frame is not None:
            frames.append(frame)
        awaitable = next(
            (
                w
                for a in ("cr_await", "gi_yieldfrom", "ag_await")
                if (w := getattr(awaitable, a, None)) is not None
            ),
            None,
        )
    return frames
