"""A progress display for long Spark jobs: one line per stage on stderr, with its time."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    """``with progress.stage("reading traces"):`` prints ``[WHAT] reading traces ...`` when
    the stage starts and ``[WHAT] reading traces done in 1.2s`` when it ends (nothing at
    all when ``quiet``); ``note`` prints one line."""

    def __init__(self, what: str, *, quiet: bool = False, out: TextIO | None = None) -> None:
        self.what = what
        self.quiet = quiet
        self.out = out if out is not None else sys.stderr
        self.started = time.monotonic()

    def note(self, line: str) -> None:
        if not self.quiet:
            print(f"[{self.what}] {line}", file=self.out, flush=True)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        if self.quiet:
            yield
            return
        print(f"[{self.what}] {name} ...", file=self.out, flush=True)
        began = time.monotonic()
        try:
            yield
        except BaseException:
            print(f"[{self.what}] {name} failed", file=self.out, flush=True)
            raise
        elapsed = time.monotonic() - began
        print(f"[{self.what}] {name} done in {elapsed:.1f}s", file=self.out, flush=True)
