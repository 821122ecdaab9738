"""Comparing two runs' traces byte for byte, with a failure that shows where they part."""

from __future__ import annotations

from pathlib import Path

from actors.runtime.code_identity import different_code, recorded_code
from tests.support.source import KEMU_ROOT, source_changed

__all__ = ["assert_same_trace"]

SHOWN = 600
"""How much of each differing line a failure shows."""


def assert_same_trace(got: Path, want: Path) -> None:
    """``got`` and ``want`` (``trace.jsonl`` files) hold the same bytes; otherwise fail with
    the first line where they differ, from both, so that a failure seen once (under load,
    on another machine) can be diagnosed from the test's output alone. If kemu's source
    changed since the session started, the failure says so first: the two runs may then
    come from different code, which no determinism promises anything about; so does it
    when the runs' ``summary.json`` files (beside the traces) name different code."""
    a, b = got.read_bytes(), want.read_bytes()
    if a == b:
        return
    left, right = a.splitlines(), b.splitlines()
    line = next(
        (i for i, (x, y) in enumerate(zip(left, right, strict=False)) if x != y),
        min(len(left), len(right)),
    )

    def shown(lines: list[bytes]) -> str:
        return lines[line][:SHOWN].decode(errors="replace") if line < len(lines) else "<end>"

    changed = (
        f"kemu's source under {KEMU_ROOT} changed since the test session started (a"
        " rebase, checkout or merge meanwhile): the two runs may come from different code.\n"
        if source_changed()
        else ""
    )
    code = different_code(
        recorded_code(got.with_name("summary.json")), recorded_code(want.with_name("summary.json"))
    )
    if code is not None:
        changed += f"{code}\n"
    raise AssertionError(
        f"{changed}{got} ({len(left)} lines) differs from {want} ({len(right)} lines) at line"
        f" {line + 1}:\n  got:  {shown(left)}\n  want: {shown(right)}"
    )
