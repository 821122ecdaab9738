"""Progress of long Spark jobs on stderr: one line per step with its time, and, while a
Spark session runs a job, its stages drawn from Spark's status tracker.

The stages are drawn by a ``StageDisplay`` the caller gives (the command line's is
``cluster.cli.progress.spark_stage_progress``, rich bars on a terminal stderr): this
package draws nothing itself and imports no terminal library.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["Progress", "StageDisplay"]

StageDisplay = Callable[[Any], AbstractContextManager[object]]
"""Draws the active stages of a Spark status tracker (``SparkContext.statusTracker()``)
for the length of the block."""


class Progress:
    """``with progress.stage("reading traces"):`` prints ``[WHAT] reading traces ...`` when
    the stage starts and ``[WHAT] reading traces done in 1.2s`` when it ends (nothing at
    all when ``quiet``) and adds its time to ``seconds``; ``note`` prints one line;
    ``spark_stages(session)`` draws the session's stages with ``stages`` meanwhile.
    ``out``: where lines go (None: whatever ``sys.stderr`` is when a line is printed, so
    that a live display above which lines are printed sees them)."""

    def __init__(
        self,
        what: str,
        *,
        quiet: bool = False,
        out: TextIO | None = None,
        stages: StageDisplay | None = None,
    ) -> None:
        self.what = what
        self.quiet = quiet
        self._out = out
        self._stages = stages
        self.started = time.monotonic()
        self.seconds: dict[str, float] = {}
        """Wall seconds of each step so far, by name."""

    @property
    def out(self) -> TextIO:
        return self._out if self._out is not None else sys.stderr

    def note(self, line: str) -> None:
        if not self.quiet:
            print(f"[{self.what}] {line}", file=self.out, flush=True)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """The block as a step; its time is added to ``seconds[name]`` (quiet or not)."""
        if not self.quiet:
            print(f"[{self.what}] {name} ...", file=self.out, flush=True)
        began = time.monotonic()
        try:
            yield
        except BaseException:
            if not self.quiet:
                print(f"[{self.what}] {name} failed", file=self.out, flush=True)
            raise
        elapsed = time.monotonic() - began
        self.seconds[name] = self.seconds.get(name, 0.0) + elapsed
        if not self.quiet:
            print(f"[{self.what}] {name} done in {elapsed:.1f}s", file=self.out, flush=True)

    @contextmanager
    def spark_stages(self, session: SparkSession) -> Iterator[None]:
        """The stages of ``session``'s jobs drawn while the block runs (nothing when
        ``quiet`` or no ``StageDisplay`` was given)."""
        if self.quiet or self._stages is None:
            yield
            return
        with self._stages(session.sparkContext.statusTracker()):
            yield
