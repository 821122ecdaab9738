"""The analyses of trace files already made in a session, kept for the next job that
needs the same file analysed the same way.

``kemu trace diff`` analyses both sides as ``kemu trace analyze`` does, then compares them;
a driver program that analyses a pair of traces and then diffs them (the benchmark's row
[9], a notebook) would make each file's analysis twice. An ``AnalysisMemo`` holds each
file's per-run result (``spark.analyze.empty_run``'s dict, completed) under the file's
identity and the job's settings; a job takes a copy of it under its own run label and
analyses only the files it does not hold. A file's identity is its resolved path, its
size, inode, modification and change times, and a digest of its first and last 64 KiB:
a file written again is analysed again.
"""

from __future__ import annotations

import copy
import hashlib
import os
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Final

from spark.schema import TraceInput

__all__ = ["AnalysisMemo", "file_identity"]

_EDGE: Final = 64 * 1024
"""Bytes read at each end of a file for its identity."""


def file_identity(item: TraceInput) -> tuple[object, ...]:
    """What names the content of ``item``'s file for the memo (see the module's text)."""
    path = item.path.resolve()
    with path.open("rb") as f:
        st = os.fstat(f.fileno())
        digest = hashlib.blake2b(f.read(_EDGE), digest_size=16)
        if st.st_size > _EDGE:
            f.seek(max(_EDGE, st.st_size - _EDGE))
            digest.update(f.read(_EDGE))
    return (
        str(path),
        item.format,
        st.st_size,
        st.st_ino,
        st.st_mtime_ns,
        st.st_ctime_ns,
        digest.hexdigest(),
    )


class AnalysisMemo:
    """Per-run analyses by (file identity, settings), the ``limit`` newest kept. Results
    go in and come out as deep copies: a caller may change what it got."""

    def __init__(self, limit: int = 64) -> None:
        self._limit = limit
        self._held: OrderedDict[tuple[object, ...], dict[str, Any]] = OrderedDict()

    def key(self, item: TraceInput, settings: tuple[object, ...]) -> tuple[object, ...]:
        return (*file_identity(item), *settings)

    def get(self, key: tuple[object, ...]) -> dict[str, Any] | None:
        found = self._held.get(key)
        if found is None:
            return None
        self._held.move_to_end(key)
        return copy.deepcopy(found)

    def put(self, key: tuple[object, ...], result: Mapping[str, Any]) -> None:
        self._held[key] = copy.deepcopy(dict(result))
        self._held.move_to_end(key)
        while len(self._held) > self._limit:
            self._held.popitem(last=False)

    def clear(self) -> None:
        self._held.clear()

    def __len__(self) -> int:
        return len(self._held)
