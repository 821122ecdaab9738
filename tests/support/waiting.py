"""Waiting for a condition with a deadline (never a bare sleep to let things settle):
``eventually`` (an async probe) and ``until`` (a plain predicate) in async tests, on the real
or the virtual clock; ``wait_until`` in plain ones (tests of child processes);
``in_threads`` for the blocking calls of real clients in async tests."""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

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


async def until(
    holds: Callable[[], bool], *, timeout: float = 10.0, interval: float = 0.01
) -> None:
    """Return once ``holds()`` is true; fail after ``timeout`` seconds of the loop's clock
    (virtual time under ``run_virtual``)."""

    async def probe() -> bool:
        return holds()

    await eventually(probe, timeout=timeout, interval=interval)


def wait_until(probe: Callable[[], T], until: Callable[[T], bool], timeout: float) -> T:
    """Re-run ``probe`` (blocking) until ``until(result)`` holds; fail after ``timeout``
    seconds with the last result in the message."""
    deadline = time.monotonic() + timeout
    while True:
        last = probe()
        if until(last):
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s; last value: {last!r}")
        time.sleep(0.1)  # the poll interval between probes of another process


class ThreadCall(Protocol):
    """``await call(fn, *args)``: ``fn(*args)`` run in a worker thread, with a deadline."""

    async def __call__(self, fn: Callable[..., T], /, *args: Any) -> T: ...


def in_threads(within: float) -> ThreadCall:
    """A ``ThreadCall`` that fails the test once a call has taken ``within`` seconds (a
    blocking client call must not hold the event loop, nor the test for ever)."""

    async def call(fn: Callable[..., T], /, *args: Any) -> T:
        with anyio.fail_after(within):
            return await anyio.to_thread.run_sync(
                functools.partial(fn, *args), abandon_on_cancel=True
            )

    return call
