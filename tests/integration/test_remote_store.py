"""The embedded store shared over the network: silent sessions expire like ZooKeeper's, and
another process reaches the store of a running ``kemu up``."""

from __future__ import annotations

import os
import random
import signal
import sys
from pathlib import Path

import anyio
import pytest
from anyio.abc import Process

from actors.runtime.actor import Node
from actors.runtime.clock import VirtualClock, run_virtual
from actors.runtime.tracer import MemorySink, Tracer
from cluster.launch.connect import EMBEDDED_SCHEME, ClusterFile, open_store
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


ROOT = Path(__file__).resolve().parents[2]
STARTUP = 30.0  # seconds for a fresh interpreter to import everything and start the cluster


async def _store_address(up: Process, log: Path) -> str:
    """The store address ``kemu up`` prints in its readiness table."""
    assert up.stdout is not None
    seen = ""
    with anyio.fail_after(STARTUP):
        async for chunk in up.stdout:
            seen += chunk.decode(errors="replace")
            complete = seen[: seen.rfind("\n") + 1]
            for line in complete.splitlines():
                if line.startswith("store: "):
                    return line.removeprefix("store: ")
    errors = await anyio.Path(log).read_text()
    raise AssertionError(f"kemu up ended without a store address: {seen!r}, stderr {errors!r}")


@pytest.mark.slow
@pytest.mark.processes
@pytest.mark.asyncio
async def test_another_process_reads_the_store_of_a_running_cluster(tmp_path: Path) -> None:
    """A client process's node, in no address book of the cluster, opens a session on the
    embedded store of ``kemu up`` (running in its own process) and reads the brokers'
    registrations: the store answers over the connection the client opened."""
    cluster_file = tmp_path / "cluster.json"
    log = tmp_path / "up.log"
    command = [
        sys.executable,
        "-m",
        "cluster.cli.main",
        "up",
        "--port",
        "0",
        "--log-dir",
        str(tmp_path / "logs"),
        "--cluster-file",
        str(cluster_file),
        "--parent-pid",
        str(os.getpid()),
    ]
    with log.open("wb") as stderr:
        up = await anyio.open_process(command, cwd=ROOT, stderr=stderr)
    async with up:
        try:
            address = await _store_address(up, log)
            assert address.startswith(EMBEDDED_SCHEME)
            assert ClusterFile.read(cluster_file).store == address
            with anyio.fail_after(10):
                async with open_store(address, cluster_file=cluster_file) as store:
                    session = await store.open_session(timeout=5)
                    assert sorted(await session.children("/brokers/ids")) == ["0", "1", "2"]
                    assert await session.exists("/controller") is not None
                    await session.close()
            up.send_signal(signal.SIGTERM)
            with anyio.fail_after(10):
                assert await up.wait() == 0, await anyio.Path(log).read_text()
            assert not await anyio.Path(cluster_file).exists()  # removed on the way out
        finally:
            if up.returncode is None:
                up.kill()
                with anyio.CancelScope(shield=True):
                    await up.wait()
