"""pyspark's daemon with its workers' CPU kept: the benchmark of the analysis (row [9]
of docs/benchmarks.md) starts it as ``spark.python.daemon.module``.

``pyspark.daemon.manager`` forks one worker per task and sets ``SIGCHLD`` to ``SIG_IGN``
so that they need no reaping. A child reaped that way is never waited for, and Linux
drops its CPU time instead of adding it to its parent's ``cutime``/``cstime``: with workers
that exit with their task (``spark.python.worker.reuse=false``), their CPU is nowhere in
/proc by the time the bench reads its CPU by kind. Here the daemon's request to ignore
``SIGCHLD`` installs a handler that reaps its children with ``os.waitpid`` instead: no
zombies are left either, and each worker's CPU is added to the daemon's children times,
which the bench counts. The daemon is otherwise pyspark's own.

``python -m spark.worker_daemon`` is how Spark's ``PythonWorkerFactory`` starts
it; ``reap_ignored_children`` is the change, apart for its test.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from types import FrameType
from typing import Any

__all__ = ["reap_ignored_children"]


def _reap(signal_number: int, frame: FrameType | None) -> None:
    """Wait for every child that has exited, without blocking."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


_Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


def reap_ignored_children() -> None:
    """From now on in this process, ``signal.signal(SIGCHLD, SIG_IGN)`` installs a handler
    that reaps the exited children (their CPU then counts in this process's children
    times) instead of ignoring the signal. Other signals and handlers are unchanged."""
    install = signal.signal

    def _signal(signalnum: int | signal.Signals, handler: _Handler) -> _Handler:
        if signalnum == signal.SIGCHLD and handler == signal.SIG_IGN:
            handler = _reap
        return install(signalnum, handler)

    signal.signal = _signal


if __name__ == "__main__":
    from pyspark.daemon import manager

    reap_ignored_children()
    manager()
