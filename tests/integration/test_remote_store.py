"""The embedded store shared over the network: silent sessions expire like ZooKeeper's."""

from __future__ import annotations

import random

import anyio
import pytest

from actors.clock import VirtualClock, run_virtual
from actors.runtime import Node
from actors.trace import MemorySink, Tracer
from cluster.network import InProcessTransport, Network
from cluster.store.embedded import EmbeddedStore
from cluster.store.remote import RemoteStore, StoreServer
from protocol.errors import ConnectionLossError
from protocol.store import SessionEvent, SessionState, WatchEvent, WatchKind


def test_a_crashed_client_loses_its_ephemerals_after_the_session_timeout() -> None:
    """When a client node crashes, the server expires its session once the timeout passes
    without heartbeats, not before; a live client's session survives meanwhile."""

    async def body() -> None:
        clock = VirtualClock()
        tracer = Tracer()
        sink = MemorySink()
        tracer.add_sink(sink)
        network = Network(InProcessTransport(), tracer=tracer, rng=random.Random(1), clock=clock)
        embedded = EmbeddedStore(tracer=tracer, clock=clock)
        async with anyio.create_task_group() as tg:
            await tg.start(network.run)
            server_node = Node("store", attach=network.attach, tracer=tracer, clock=clock)
            server = StoreServer(embedded, tick=0.1)
            await tg.start(server_node.run, [server])
            a = Node("a", attach=network.attach, tracer=tracer, clock=clock)
            b = Node("b", attach=network.attach, tracer=tracer, clock=clock)
            await tg.start(a.run)
            await tg.start(b.run)
            ra, rb = RemoteStore(a, server.ref), RemoteStore(b, server.ref)
            sa = await ra.open_session(timeout=2.0, name="a")
            sb = await rb.open_session(timeout=2.0, name="b")
            await sa.create("/a", ephemeral=True)
            await sb.create("/b", ephemeral=True)
            assert await sb.exists("/a", watch=True) is not None

            crashed_at = clock.now()
            a.crash()
            ra.discard()
            with anyio.fail_after(5.0):
                event = await sb.events.receive()
            assert event == WatchEvent(session_id=sb.session_id, path="/a", kind=WatchKind.DELETED)
            waited = clock.now() - crashed_at
            assert 2.0 < waited <= 2.0 + 0.1 + 1e-6  # the timeout, plus at most one tick
            assert await sb.exists("/b") is not None  # heartbeats kept b alive
            await rb.aclose()
            await embedded.aclose()
            b.stop()
            server_node.stop()
            tg.cancel_scope.cancel()

    run_virtual(body)


def test_calls_fail_with_connection_loss_when_the_server_is_gone() -> None:
    """With the store node crashed, a call raises ConnectionLossError within the session
    timeout and the owner sees SUSPENDED."""

    async def body() -> None:
        clock = VirtualClock()
        network = Network(InProcessTransport(), tracer=Tracer(), rng=random.Random(1), clock=clock)
        async with anyio.create_task_group() as tg:
            await tg.start(network.run)
            server_node = Node("store", attach=network.attach, clock=clock)
            server_store = EmbeddedStore(clock=clock)
            server = StoreServer(server_store)
            await tg.start(server_node.run, [server])
            client = Node("c", attach=network.attach, clock=clock)
            await tg.start(client.run)
            remote = RemoteStore(client, server.ref)
            session = await remote.open_session(timeout=1.0, name="c")
            server_node.crash()
            with pytest.raises(ConnectionLossError):
                await session.get("/")
            assert clock.now() == pytest.approx(1.0)
            assert await session.events.receive() == SessionEvent(
                session_id=session.session_id, state=SessionState.SUSPENDED
            )
            remote.discard()
            await server_store.aclose()
            client.stop()
            tg.cancel_scope.cancel()

    run_virtual(body)
