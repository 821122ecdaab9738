"""The controller scheduler on the virtual clock: a timer fires once after its delay; one
of the same name replaces it; shutdown cancels what is pending and refuses new timers until
the next startup."""

from __future__ import annotations

import anyio

from actors.controller.scheduler import ControllerScheduler
from actors.runtime.actor import Node
from actors.runtime.clock import VirtualClock, run_virtual
from tests.support.wire import DirectWire


def test_timers_fire_once_are_replaced_by_name_and_die_with_shutdown() -> None:
    """Nothing is scheduled before startup; a timer fires once, after exactly its delay of
    virtual time; a second one of the same name replaces the first; after shutdown the
    pending ones never fire and new ones are refused."""

    async def main() -> None:
        clock = VirtualClock()
        fired: list[tuple[str, float]] = []
        async with anyio.create_task_group() as tg:
            node = Node("n", attach=DirectWire().attach, clock=clock)
            await tg.start(node.run)
            scheduler = ControllerScheduler(node, clock)
            scheduler.schedule("early", 1.0, lambda: fired.append(("early", clock.now())))
            assert list(scheduler.pending) == []  # not started: nothing is scheduled
            scheduler.startup()
            start = clock.now()
            scheduler.schedule("a", 5.0, lambda: fired.append(("a", clock.now() - start)))
            scheduler.schedule("a", 2.0, lambda: fired.append(("a2", clock.now() - start)))
            scheduler.schedule("b", 3.0, lambda: fired.append(("b", clock.now() - start)))
            assert list(scheduler.pending) == ["a", "b"]
            await clock.sleep(10)
            assert [name for name, _ in fired] == ["a2", "b"]
            assert [round(at, 3) for _, at in fired] == [2.0, 3.0]
            assert list(scheduler.pending) == []
            scheduler.schedule("c", 1.0, lambda: fired.append(("c", 0.0)))
            scheduler.shutdown()
            assert not scheduler.running
            scheduler.schedule("d", 1.0, lambda: fired.append(("d", 0.0)))
            await clock.sleep(5)
            assert [name for name, _ in fired] == ["a2", "b"]
            node.crash()
            tg.cancel_scope.cancel()

    run_virtual(main)
