"""``protocol.errors.unwrap_kemu_error``: the one error a command prints out of anyio's
single-error groups, and every other group left as it was."""

from __future__ import annotations

import anyio
import pytest

from protocol.errors import KemuError, StoreClosedError, sole_error, unwrap_kemu_error


async def _fail_two_task_groups_deep(error: BaseException) -> None:
    async def fail() -> None:
        raise error

    async def inner() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(fail)

    async with anyio.create_task_group() as tg:
        tg.start_soon(inner)


def test_a_kemu_error_comes_out_of_nested_task_groups_alone() -> None:
    """A KemuError raised two task groups deep leaves the helper as itself, not as a group."""

    async def body() -> None:
        with unwrap_kemu_error():
            await _fail_two_task_groups_deep(StoreClosedError("store closed"))

    with pytest.raises(StoreClosedError, match="store closed") as caught:
        anyio.run(body)
    assert caught.value.__suppress_context__


def test_other_errors_stay_in_their_groups_unless_named() -> None:
    """A foreign error stays grouped unless it is one of ``also``; two errors stay grouped."""
    with pytest.raises(BaseExceptionGroup) as grouped, unwrap_kemu_error():
        raise BaseExceptionGroup("one", [BrokenPipeError()])
    assert isinstance(sole_error(grouped.value), BrokenPipeError)

    with pytest.raises(BrokenPipeError), unwrap_kemu_error(BrokenPipeError):
        raise BaseExceptionGroup("one", [BaseExceptionGroup("two", [BrokenPipeError()])])

    with pytest.raises(BaseExceptionGroup) as two, unwrap_kemu_error():
        raise BaseExceptionGroup("two", [KemuError("a"), KemuError("b")])
    assert len(two.value.exceptions) == 2
