"""Command-line input shared by ``kemu``'s commands: the usage error every bad argument
ends in and ``KEY=VALUE`` lists."""

from __future__ import annotations

from collections.abc import Iterable

from protocol.errors import KemuError

__all__ = ["UsageError", "key_values"]


class UsageError(KemuError):
    """Bad command-line input, reported in one line before anything runs. kemu's own
    commands exit with status 2 (``cluster.cli.main.main``); the Kafka tools (``kemu
    topics``, ``reassign-partitions``, ``leader-election``) with 1, as their
    ``CommandLineUtils.printUsageAndDie`` does (``kemu topics`` prints its usage too)."""


def key_values(items: Iterable[str], what: str) -> dict[str, str]:
    """``KEY=VALUE`` arguments of the option ``what`` as a dict (a later key wins)."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"{what} must be KEY=VALUE, got {item!r}")
        out[key] = value
    return out
