"""Comparing analysis documents of the two engines (local and Spark)."""

from __future__ import annotations

from typing import Any


def rounded(value: Any) -> Any:
    """Floats to 6 places (Spark and numpy sum differently in the last bits), violations
    in one order (Spark collects them unordered)."""
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [rounded(v) for v in value]
        if items and all(isinstance(v, dict) and "rule" in v for v in items):
            items.sort(key=lambda v: (v["seq"] or 0, v["rule"], v["message"]))
        return items
    return value
