"""The embedded store served over real TCP: a ``StoreServer`` on one node, a ``RemoteStore``
on another, so the store contract suite can run against the network path too.

Test scaffolding only: the nodes and the network run in a background task so that a
pytest-asyncio fixture can hand out a store and close it in its teardown.
"""

from __future__ import annotations

import asyncio
import random

import anyio

from actors.runtime.actor import Node
from actors.runtime.clock import RealClock
from actors.runtime.tracer import Tracer
from actors.zk.store import MetadataStore, StoreSession
from cluster.network import Network, TcpTransport
from cluster.store.embedded import EmbeddedStore
from cluster.store.remote import RemoteStore, StoreServer


class ServedStore(MetadataStore):
    def __init__(self, embedded: EmbeddedStore, *, tick: float = 0.1) -> None:
        self.embedded = embedded
        self._tick = tick
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.remote: RemoteStore | None = None
        self.server_node: Node | None = None

    async def start(self) -> ServedStore:
        self._task = asyncio.get_running_loop().create_task(self._run())
        ready = asyncio.get_running_loop().create_task(self._ready.wait())
        await asyncio.wait({self._task, ready}, return_when=asyncio.FIRST_COMPLETED)
        if self._task.done():
            ready.cancel()
            self._task.result()  # re-raise the start-up failure
        return self

    async def _run(self) -> None:
        tracer = Tracer()
        clock = RealClock()
        network = Network(TcpTransport(), tracer=tracer, rng=random.Random(0), clock=clock)
        async with anyio.create_task_group() as tg:
            await tg.start(network.run)
            server_node = Node("store", attach=network.attach, tracer=tracer, clock=clock)
            server = StoreServer(self.embedded, tick=self._tick)
            await tg.start(server_node.run, [server])
            client = Node("client", attach=network.attach, tracer=tracer, clock=clock)
            await tg.start(client.run)
            self.server_node = server_node
            self.remote = RemoteStore(client, server.ref)
            self._ready.set()
            await self._stop.wait()
            client.stop()
            server_node.stop()
            tg.cancel_scope.cancel()

    def _remote(self) -> RemoteStore:
        assert self.remote is not None, "ServedStore.start() first"
        return self.remote

    async def open_session(
        self,
        *,
        timeout: float = 18.0,
        name: str = "",
    ) -> StoreSession:
        return await self._remote().open_session(timeout=timeout, name=name)

    async def expire_session(self, session_id: int) -> None:
        await self._remote().expire_session(session_id)

    async def aclose(self) -> None:
        if self._task is None:
            return
        if self.remote is not None:
            await self.remote.aclose()
        self._stop.set()
        await self._task
        self._task = None
