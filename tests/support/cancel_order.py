"""Cancel many tasks on the virtual clock and print the traced order (JSON): a frozen
node's tasks killed (``FreezableLoop.kill``), and tasks cancelled one cancel scope at a
time. ``python -m tests.support.cancel_order PATTERN``: ``PATTERN`` seeds the allocation
pattern that decides where in memory each task lands (tests/unit/test_cancellation_order.py
runs it under several, with several hash seeds)."""

from __future__ import annotations

import asyncio
import contextvars
import json
import random
import sys

import anyio
import anyio.abc

from actors.runtime.clock import run_virtual
from actors.runtime.freeze import NODE, freezable_loop
from actors.runtime.tracer import MemorySink, Tracer
from protocol.trace import TraceKind

TASKS = 48


async def scatter(pattern: int) -> None:
    """Leave holes the size of a task in memory, freed in an order ``pattern`` shuffles:
    the next tasks take them, so their addresses follow no order of their creation."""

    async def nothing() -> None:
        return None

    dummies = [asyncio.get_running_loop().create_task(nothing()) for _ in range(4 * TASKS)]
    await asyncio.gather(*dummies)
    random.Random(pattern).shuffle(dummies)
    while dummies:
        dummies.pop()


async def body(pattern: int) -> dict[str, list[int]]:
    tracer, sink = Tracer(), MemorySink()
    tracer.add_sink(sink)
    loop = freezable_loop()

    async def killed(i: int) -> None:
        try:
            await loop.create_future()  # never resolved
        except asyncio.CancelledError:
            tracer.emit(TraceKind.EVENT, node="n", type="killed", index=i)
            raise

    await scatter(pattern)
    node = contextvars.copy_context()
    node.run(NODE.set, "n")
    tasks = [loop.create_task(killed(i), context=node) for i in range(TASKS)]
    await asyncio.sleep(0)  # every task waits
    loop.freeze("n")
    loop.kill("n")
    await asyncio.gather(*tasks, return_exceptions=True)

    scopes: list[anyio.CancelScope] = []

    async def scoped(i: int, task_status: anyio.abc.TaskStatus[None]) -> None:
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            task_status.started()
            try:
                await anyio.sleep_forever()
            except anyio.get_cancelled_exc_class():
                tracer.emit(TraceKind.EVENT, node="n", type="scope_cancelled", index=i)
                raise

    await scatter(pattern + 1)
    async with anyio.create_task_group() as tg:
        for i in range(TASKS):
            await tg.start(scoped, i)
        for scope in reversed(scopes):  # one scope at a time: the order is this one
            scope.cancel()
    return {
        kind: [int(e.fields["index"]) for e in sink.events if e.type == kind]
        for kind in ("killed", "scope_cancelled")
    }


if __name__ == "__main__":
    print(json.dumps(run_virtual(lambda: body(int(sys.argv[1])))))
