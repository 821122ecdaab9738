"""Command-line input shared by ``kemu``'s commands: the usage error every bad argument
ends in (one line, exit status 2, printed by ``cluster.cli.main.main``) and ``KEY=VALUE``
lists."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["UsageError", "key_values"]


class UsageError(Exception):
    """Bad command-line input: printed as one line, exit status 2."""


def key_values(items: Iterable[str], what: str) -> dict[str, str]:
    """``KEY=VALUE`` arguments of the option ``what`` as a dict (a later key wins)."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"{what} must be KEY=VALUE, got {item!r}")
        out[key] = value
    return out
