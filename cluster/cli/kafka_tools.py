"""Small pieces of Kafka's tool code the admin commands share: how Jackson prints a JSON
value in a message, and ``CoreUtils.duplicates``."""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterable
from typing import Any, TypeVar

__all__ = ["duplicates", "json_node"]

H = TypeVar("H", bound=Hashable)


def json_node(value: Any) -> str:
    """Jackson's ``JsonNode.toString`` of a parsed value."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def duplicates(items: Iterable[H]) -> list[H]:
    """``CoreUtils.duplicates``: the items seen more than once, each once, in the order
    their second sighting came."""
    seen: set[H] = set()
    found: dict[H, None] = {}
    for item in items:
        if item in seen:
            found[item] = None
        seen.add(item)
    return list(found)
