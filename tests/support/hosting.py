"""Async fixtures that keep something running across a test: ``hosted``.

pytest-asyncio runs an async fixture's setup, the test and the fixture's teardown as three
tasks of one event loop. A task group (any anyio cancel scope) must be entered and exited
by the same task, so a fixture cannot simply hold ``async with anyio.create_task_group()``
open across its ``yield``. ``hosted`` enters an async context manager in a task of its
own, hands the fixture its value, and on teardown tells that task to leave the context
manager; whatever the context manager raised (on entry, while the test ran, or on exit)
is raised again in the teardown, so the test fails with it. ``hosted_fixture`` declares
such a fixture in one line, on an async generator that yields once.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, ParamSpec, TypeVar, cast

import pytest_asyncio

T = TypeVar("T")


@asynccontextmanager
async def hosted(manager: AbstractAsyncContextManager[T]) -> AsyncIterator[T]:
    """``async with manager`` in a host task of its own, for the duration of this block."""
    loop = asyncio.get_running_loop()
    entered: asyncio.Future[T] = loop.create_future()
    leave = asyncio.Event()

    async def host() -> None:
        async with manager as value:
            entered.set_result(value)
            await leave.wait()

    # The fixture owns this task: it is awaited below on every path, so its failure is
    # never lost (a fixture has no task group that spans setup and teardown).
    task = loop.create_task(host(), name=f"hosted {manager!r}")
    try:
        either: set[asyncio.Future[Any]] = {task, entered}
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if not entered.done():
            task.result()  # the entry failed: raise its error here, in the setup
            raise AssertionError(f"{manager!r} returned without entering")
        yield entered.result()
    finally:
        leave.set()
        await task


P = ParamSpec("P")


def hosted_fixture(
    **fixture_options: Any,
) -> Callable[[Callable[P, AsyncIterator[T]]], Callable[P, AsyncIterator[T]]]:
    """``@pytest_asyncio.fixture(**fixture_options)`` for a fixture that yields once from
    inside a task group (or any other cancel scope): its body runs in a host task of its
    own, through ``hosted``."""

    def wrap(body: Callable[P, AsyncIterator[T]]) -> Callable[P, AsyncIterator[T]]:
        entered = asynccontextmanager(body)

        @functools.wraps(body)
        async def fixture(*args: P.args, **kwargs: P.kwargs) -> AsyncIterator[T]:
            async with hosted(entered(*args, **kwargs)) as value:
                yield value

        declared: object = pytest_asyncio.fixture(fixture, **fixture_options)
        return cast("Callable[P, AsyncIterator[T]]", declared)

    return wrap
