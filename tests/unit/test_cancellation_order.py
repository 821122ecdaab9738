"""In deterministic mode the order in which many cancelled tasks run their cancellation
is the same whatever the hash seed and wherever the allocator put the tasks, where kemu
defines it: a frozen node's tasks killed (``FreezableLoop.kill``: creation order) and
tasks cancelled one cancel scope at a time (the order of the ``cancel`` calls). A task
group's one ``cancel`` reaching many tasks is anyio's order, which is not defined
(docs/chaos.md, "Deterministic mode")."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.support.cancel_order import TASKS
from tests.support.source import KEMU_ROOT


def _traced_order(*, hash_seed: str, pattern: int) -> dict[str, list[int]]:
    """``tests.support.cancel_order`` in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.cancel_order", str(pattern)],
        cwd=KEMU_ROOT,
        env={**os.environ, "PYTHONHASHSEED": hash_seed},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    order: dict[str, list[int]] = json.loads(done.stdout)
    return order


def test_cancellation_order_does_not_depend_on_addresses_or_hash_seeds() -> None:
    """Two interpreters with other hash seeds and other allocation patterns trace the
    same cancellation order: the killed node's tasks in the order they were created,
    the scoped tasks in the order their scopes were cancelled."""
    first = _traced_order(hash_seed="1", pattern=1)
    second = _traced_order(hash_seed="2", pattern=2)
    assert first == second
    assert first["killed"] == list(range(TASKS))
    assert first["scope_cancelled"] == list(reversed(range(TASKS)))
