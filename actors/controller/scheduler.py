"""The controller's scheduler (Kafka's ``KafkaScheduler`` as the controller uses it).

One-shot named timers on the node's injected clock, each of which only enqueues an event
when it fires: the auto leader rebalance (``AutoPreferredReplicaLeaderElection``), which
reschedules itself after every check. On the virtual clock, advancing time fires them.

Each timer is a task in the node's task group with a cancel scope of its own; ``shutdown``
(on resignation) cancels them all, and nothing can be scheduled until ``startup`` (on the
next election). Scheduling a name that is already pending replaces it, so a stale event
cannot start a second chain of checks.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import structlog

from actors.runtime.actor import Node
from actors.runtime.clock import Clock

log = structlog.get_logger("kemu.controller.scheduler")


class ControllerScheduler:
    def __init__(self, node: Node, clock: Clock) -> None:
        self._node = node
        self._clock = clock
        self._running = False
        self._pending: dict[str, anyio.CancelScope] = {}

    @property
    def running(self) -> bool:
        return self._running

    @property
    def pending(self) -> tuple[str, ...]:
        """The names of the timers not fired yet (for tests and status)."""
        return tuple(sorted(self._pending))

    def startup(self) -> None:
        self._running = True

    def shutdown(self) -> None:
        """Cancel every pending timer; ``schedule`` does nothing until ``startup``."""
        self._running = False
        for scope in self._pending.values():
            scope.cancel()
        self._pending.clear()

    def schedule(self, name: str, delay: float, action: Callable[[], None]) -> None:
        """Run ``action`` (which must only enqueue) once, ``delay`` seconds from now."""
        if not self._running:
            log.debug("scheduler_not_running", task=name)
            return
        previous = self._pending.pop(name, None)
        if previous is not None:
            previous.cancel()
        scope = anyio.CancelScope()
        self._pending[name] = scope
        self._node.task_group.start_soon(self._fire, name, delay, action, scope)

    async def _fire(
        self, name: str, delay: float, action: Callable[[], None], scope: anyio.CancelScope
    ) -> None:
        with scope:
            await self._clock.sleep(delay)
            if self._pending.get(name) is scope:
                del self._pending[name]
                action()
