"""Waiting for a condition with a deadline (never a bare sleep to let things settle)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T]],
    *,
    until: Callable[[T], bool] = bool,
    timeout: float = 10.0,
    interval: float = 0.01,
) -> T:
    """Re-run ``probe`` until ``until(result)`` holds; fail after ``timeout`` seconds with
    the last result in the message."""
    last: T | None = None
    try:
        with anyio.fail_after(timeout):
            while True:
                last = await probe()
                if until(last):
                    return last
                await anyio.sleep(interval)
    except TimeoutError:
        raise AssertionError(f"condition not met within {timeout}s; last value: {last!r}") from None
