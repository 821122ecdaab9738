"""How a benchmark process ends: on SIGTERM as on Ctrl-C, so that its temporary
directories (log dirs on ``/dev/shm``, which is memory) are removed on the way out, and a
row's child process stopped with its parent instead of killed outright."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from typing import NoReturn

import anyio

from cluster.gc_settings import configure_gc

__all__ = ["STOP_GRACE_S", "exit_with", "run_child"]

STOP_GRACE_S = 30.0
"""How long a row's child process has to remove its directories once told to stop."""


def exit_with(main: Callable[[], int]) -> NoReturn:
    """Run a benchmark's ``main`` with SIGTERM raising KeyboardInterrupt, as SIGINT does:
    the ``with tempfile.TemporaryDirectory()`` blocks unwind instead of the process
    vanishing with its directories left behind; exit with ``main``'s status. The process
    gets the collector thresholds a ``kemu`` process has (``cluster.gc_settings``): the
    benchmarks measure what ``kemu`` runs."""
    configure_gc()
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    sys.exit(main())


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
