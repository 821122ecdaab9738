"""Freezing one node of a process, as SIGSTOP freezes one process.

Every task of a node carries the node's id in a context variable (``NODE``: set by
``Node.run``, inherited by every task the node starts, since a task copies its creator's
context). A ``FreezableLoop`` can *freeze* a node id: from then on it holds, instead of
running, every callback whose context carries that id (the steps and wake-ups of the
node's tasks), and *thawing* the node puts them back on the loop in the order they were
held. So each task of a frozen node stops at its next ``await``, as a stopped JVM does:
its actors handle nothing, its timers' wake-ups wait, its messages queue up in its
mailboxes, nothing it would send leaves, and on resume everything runs in order, late.

Timers of a frozen node still fire, but a timer in this code base only resolves a future
(a sleep, an ask's timeout, a cancel scope's deadline), and the wake-up that follows is a
callback of the waiting task, which is held. Other nodes, the network's own tasks, the
store and the code driving the run are untouched.

The loops: ``FreezableEventLoop`` (asyncio's selector loop) and ``VirtualEventLoop``
(``actors.runtime.clock``, the deterministic one) mix it in. uvloop cannot hold callbacks already
queued in its C ready queue, so a run that pauses nodes in one process uses one of these.
"""

from __future__ import annotations

import asyncio
import contextvars
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = [
    "NODE",
    "FreezableEventLoop",
    "FreezableLoop",
    "NotFreezableError",
    "freezable_loop",
    "outside_nodes",
]

NODE: contextvars.ContextVar[str | None] = contextvars.ContextVar("kemu_node", default=None)
"""The id of the node the running task belongs to (None: no node, e.g. a test's main)."""

T = TypeVar("T")


def outside_nodes(fn: Callable[..., T], *args: Any) -> T:
    """Call ``fn`` in a copy of the current context that belongs to no node: a task it
    starts serves every node (e.g. a shared connection) and no pause may freeze it."""
    context = contextvars.copy_context()
    context.run(NODE.set, None)
    return context.run(fn, *args)


class NotFreezableError(RuntimeError):
    """The running loop cannot freeze a node (uvloop, or a plain asyncio loop)."""


class FreezableLoop(asyncio.BaseEventLoop):
    """Mixin for asyncio's loops: ``freeze``/``thaw`` a node (see the module doc). While
    no node is frozen, ``call_soon`` costs one extra dict check."""

    _ready: Any  # asyncio.BaseEventLoop's deque of handles ready to run

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._held: dict[str, list[asyncio.Handle]] = {}
        # Each node's tasks in the order they were adopted (a weak set's order would be
        # their addresses'): ``kill`` cancels them in it. Keyed by id for a task adopted
        # twice; an entry goes when its task is collected.
        self._tasks: dict[str, dict[int, weakref.ref[asyncio.Task[Any]]]] = {}
        self._thawed: set[asyncio.Handle] = set()  # queued by a thaw, not yet selected past

    def create_task(  # type: ignore[override]  # the stub's overloads, same signature
        self,
        coro: Coroutine[Any, Any, T],
        *,
        name: str | None = None,
        context: contextvars.Context | None = None,
    ) -> asyncio.Task[T]:
        task = super().create_task(coro, name=name, context=context)
        node = NODE.get() if context is None else context.get(NODE)
        if node is not None:
            self.adopt(node, task)
        return task

    def adopt(self, node: str, task: asyncio.Task[Any]) -> None:
        """Count ``task`` as one of ``node``'s (its tasks are counted when created; the
        task that set ``NODE`` itself is adopted by it)."""
        tasks = self._tasks.setdefault(node, {})
        key = id(task)
        if key in tasks and tasks[key]() is task:
            return

        def forget(ref: weakref.ref[asyncio.Task[Any]]) -> None:
            if tasks.get(key) is ref:
                del tasks[key]

        tasks[key] = weakref.ref(task, forget)

    def frozen(self, node: str) -> bool:
        return node in self._held

    def freeze(self, node: str) -> None:
        """Hold every callback of ``node`` from now on, those already queued included."""
        if node in self._held:
            return
        held = self._held[node] = []
        # The loop may be iterating its ready queue right now (a pause from a callback):
        # leave the queue as it is, cancel the node's handles in it and hold copies.
        for handle in self._ready:
            if not handle.cancelled() and _node_of(handle) == node:
                callback, args = handle._callback, handle._args
                held.append(asyncio.Handle(callback, args, self, handle._context))
                handle.cancel()

    def kill(self, node: str) -> None:
        """End a frozen node as SIGKILL ends a stopped process: cancel each of its tasks
        (so that its next step raises ``CancelledError`` instead of doing anything), in
        the order they were adopted (creation order, not addresses': their steps run in
        it), then thaw it so that those steps run."""
        for ref in list(self._tasks.pop(node, {}).values()):
            task = ref()
            if task is not None and not task.done():
                task.cancel()
        self.thaw(node)

    def thaw(self, node: str) -> None:
        """Run ``node``'s held callbacks (in the order they were held), and later ones."""
        held = self._held.pop(node, None)
        if held:
            thawed = [h for h in held if not h.cancelled()]
            self._ready.extend(thawed)
            self._thawed.update(thawed)

    def call_soon(  # type: ignore[override]  # the stub's TypeVarTuple form, same signature
        self,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.Handle:
        if self._held:
            node = NODE.get() if context is None else context.get(NODE)
            if node is not None:
                held = self._held.get(node)
                if held is not None:
                    handle = asyncio.Handle(callback, args, self, context)
                    held.append(handle)
                    return handle
        return super().call_soon(callback, *args, context=context)

    def _add_callback(self, handle: asyncio.Handle) -> None:
        """The selector's readiness callbacks (a socket of the node became readable or
        writable) are held too, and each is run once on thaw. Run while frozen,
        ``sock_accept``'s would accept a connection for a future whose waiter is held, and
        at the next readiness accept another for the same, already answered, future (a
        socket nobody owns). The fd stays ready, so the selector hands the same handle
        again at each iteration: it is held once, and not queued again by the first
        selection after the thaw that already queued it."""
        if handle in self._thawed:
            return
        if self._held and not handle.cancelled():
            node = _node_of(handle)
            held = None if node is None else self._held.get(node)
            if held is not None:
                if handle not in held:
                    held.append(handle)
                return
        super()._add_callback(handle)  # type: ignore[misc]  # asyncio's, not in the stub

    def _process_events(self, event_list: list[Any]) -> None:
        super()._process_events(event_list)  # type: ignore[misc]  # the selector loop's
        self._thawed.clear()  # the handles thawed before this selection run next


def _node_of(handle: asyncio.Handle) -> str | None:
    context: contextvars.Context | None = getattr(handle, "_context", None)
    return None if context is None else context.get(NODE)


class FreezableEventLoop(FreezableLoop, asyncio.SelectorEventLoop):
    """asyncio's selector loop, able to freeze a node: what in-process chaos runs on the
    real clock use (uvloop cannot)."""


def freezable_loop() -> FreezableLoop:
    """The running loop, if it can freeze a node; ``NotFreezableError`` if not."""
    loop = asyncio.get_running_loop()
    if not isinstance(loop, FreezableLoop):
        raise NotFreezableError(
            f"pausing a node needs kemu's freezable event loop, not {type(loop).__name__}"
            " (run on actors.runtime.clock.run_virtual, or run_real(freezable=True))"
        )
    return loop
