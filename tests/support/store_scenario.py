"""A fixed sequence of embedded-store calls covering every kind of change, watch and
session end, on the virtual clock: its Stats and trace must be the same on every run.

``python -m tests.support.store_scenario`` prints them as JSON (the contract suite compares
the output across interpreters with different hash seeds).
"""

from __future__ import annotations

import json

import msgspec

from actors.runtime.clock import VirtualClock, run_virtual
from actors.runtime.tracer import MemorySink, Tracer
from cluster.store.embedded import EmbeddedStore
from protocol.store import CheckOp, CreateOp, SetDataOp, Stat


async def _scenario(sink: MemorySink) -> list[Stat | None]:
    """A fixed sequence of calls covering every kind of change, watch and session end."""
    clock = VirtualClock()
    tracer = Tracer()
    tracer.add_sink(sink)
    store = EmbeddedStore(tracer=tracer, clock=clock, chroot="/det/root")
    a = await store.open_session(name="a")
    b = await store.open_session(name="b")
    stats: list[Stat | None] = []
    await b.exists("/n", watch=True)
    await a.create("/n", b"x")
    await clock.sleep(1.5)
    stats.append(await a.set("/n", b"y"))
    for name in ("zeta", "alpha", "mid", "omega", "beta"):
        await b.children("/n", watch=True)
        await a.create(f"/n/{name}", ephemeral=True)
    await a.create("/n/s-", sequential=True, ephemeral=True)
    store.set_latency(0.25)
    await a.multi(
        [CheckOp(path="/n", version=1), CreateOp(path="/m"), SetDataOp(path="/m", data=b"1")]
    )
    store.set_latency(0)
    stats.append(await b.exists("/n"))
    stats.append(await b.exists("/m"))
    await b.children("/n", watch=True)
    await store.expire_session(a.session_id)
    stats.append(await b.exists("/n"))
    await b.create("/r/s/t", make_parents=True)
    await b.delete("/r", recursive=True)
    stats.append(await b.exists("/"))
    await store.aclose()
    return stats


def scenario_trace() -> str:
    """The scenario's Stats and trace, as JSON, from a fresh virtual-time run."""
    sink = MemorySink()
    stats = run_virtual(lambda: _scenario(sink))
    return json.dumps(msgspec.to_builtins({"stats": stats, "trace": sink.events}))


if __name__ == "__main__":
    print(scenario_trace())
