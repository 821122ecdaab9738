"""Which kemu source the tests run, for their subprocesses and for trace comparisons.

A test compares what a subprocess did (a fresh interpreter, ``kemu`` commands, Spark's
executors) with what this process did, so both must run the same code. The virtualenv
may hold kemu as an editable install of another checkout (another worktree): a
subprocess that does not find this checkout on ``PYTHONPATH`` imports that one, and a
deterministic run then differs from this process's wherever the two checkouts' code
does. ``pin_subprocesses`` puts the checkout this process imported first on
``PYTHONPATH`` (the test session does it at start, ``tests/conftest.py``).

The checkout can also change under a running session (a rebase, a checkout, a merge
into it): modules imported later, and every later subprocess, then run the new code.
``source_changed`` tells whether that happened since the session started (the
fingerprint ``session_fingerprint`` took then), so that a failed trace comparison says
so instead of blaming determinism.
"""

from __future__ import annotations

import os
from pathlib import Path

import actors
from actors.runtime.code_identity import PACKAGES, source_digest

__all__ = ["KEMU_ROOT", "pin_subprocesses", "source_changed", "source_fingerprint"]

KEMU_ROOT = Path(actors.__file__).resolve().parents[1]
"""The checkout whose kemu this process imports."""


def source_fingerprint(root: Path = KEMU_ROOT) -> str:
    """``source_digest`` of kemu's packages under ``root`` (read now, not cached)."""
    return source_digest({package: root / package for package in PACKAGES})


def pin_subprocesses(root: Path = KEMU_ROOT) -> None:
    """Put ``root`` first on ``PYTHONPATH`` for every subprocess started from now on."""
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if rest[:1] != [str(root)]:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(root), *rest])


session_fingerprint: str | None = None
"""``source_fingerprint()`` when the session started (``tests/conftest.py``)."""


def source_changed() -> bool:
    """Whether kemu's source changed since the session started."""
    return session_fingerprint is not None and source_fingerprint() != session_fingerprint
