"""The garbage collector's thresholds of a kemu process (docs/architecture.md, "Garbage
collection").

A cluster of 100,000 partitions holds millions of objects that live as long as the
cluster, and its bulk operations (a creation, a controller failover) allocate hundreds of
thousands more that live through a batch. With CPython's default thresholds (700, 10,
10) those survive into the oldest generation fast enough to set off full collections of
the whole heap, which free almost nothing: a third of a failover's CPU time at 100,000
partitions. ``configure_gc`` raises the thresholds to ``THRESHOLDS``: a young collection
after 50,000 net allocations instead of 700, a full one considered after 100 middle
collections instead of 10 (CPython still runs it only once the objects promoted since the
last one are a quarter of those it kept then).

Only the processes kemu starts set it: the ``kemu`` command run as a program and the
benchmarks' processes. The library never does (an application that embeds kemu, such as
a test suite using the pytest plugin, keeps its own settings).
"""

from __future__ import annotations

import gc
from typing import Final

__all__ = ["THRESHOLDS", "configure_gc"]

THRESHOLDS: Final = (50_000, 20, 100)
"""``gc.set_threshold``'s three thresholds for a kemu process."""


def configure_gc() -> None:
    """Set this process's collector thresholds to ``THRESHOLDS``."""
    gc.set_threshold(*THRESHOLDS)
