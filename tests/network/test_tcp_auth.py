"""The TCP transport's handshake (``cluster.network.auth``): peers that prove the cluster's
secret exchange frames both ways; a peer that does not (a wrong secret, none, silence, a
forged frame) is closed, traced as ``auth_refused`` with its address, logged once per
burst, and nothing it sent is delivered."""

from __future__ import annotations

import anyio
import pytest
import structlog
from anyio.abc import SocketStream

from cluster.network import TcpTransport
from cluster.network.auth import (
    CHALLENGE_BYTES,
    VERDICT_BYTES,
    AuthError,
    authenticate,
    client_answer,
    new_secret,
)
from protocol.codec import frame
from tests.support.network import Cluster, ping, running

pytestmark = pytest.mark.asyncio

SECRET = new_secret()


def tcp(c: Cluster) -> TcpTransport:
    transport = c.network.transport
    assert isinstance(transport, TcpTransport)
    return transport


def _introduce(client: Cluster, server: Cluster, node: str) -> None:
    host, port = tcp(server).address_of(node)
    tcp(client).add_peer(node, host, port)


async def _connect(c: Cluster, node: str) -> SocketStream:
    host, port = tcp(c).address_of(node)
    return await anyio.connect_tcp(host, port)


async def _receive_exactly(stream: SocketStream, count: int) -> bytes:
    data = b""
    with anyio.fail_after(5):
        while len(data) < count:
            data += await stream.receive(count - len(data))
    return data


async def _closed_by_server(stream: SocketStream) -> bool:
    """Whether the server ends this connection (end of stream or reset) within the wait."""
    with anyio.fail_after(5):
        try:
            while await stream.receive():
                pass
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return True
    return False


async def test_peers_with_the_secret_exchange_frames_both_ways() -> None:
    """Two transports given the same secret: a's message reaches b over the connection a
    opened, and b's reply comes back over it; nothing is refused."""
    async with (
        running(TcpTransport(secret=SECRET), ["srv"], name="server") as server,
        running(TcpTransport(secret=SECRET), ["cli"], name="client") as client,
    ):
        _introduce(client, server, "srv")
        for seq in range(1, 4):  # each way in turn, the reply on the connection cli opened
            client.post(ping("cli", "srv", seq))
            await server.inboxes["srv"].wait_for(seq)
            server.post(ping("srv", "cli", -seq))
            await client.inboxes["cli"].wait_for(seq)
        assert (server.inboxes["srv"].seqs, client.inboxes["cli"].seqs) == ([1, 2, 3], [-1, -2, -3])
        assert len(client.events("event", "connected")) == 1
        assert server.events("event", "connected") == []
        assert server.events("error") == client.events("error") == []


@pytest.mark.parametrize("secret", [new_secret(), None], ids=["wrong-secret", "no-secret"])
async def test_a_peer_without_the_secret_is_refused_and_nothing_is_delivered(
    secret: bytes | None,
) -> None:
    """A transport with another secret, or with none (its first frame is taken for an
    answer), is refused: the server traces ``auth_refused`` with its address, delivers
    nothing and learns no route; the one with another secret sees its message dropped as
    unreachable, the server having refused it."""
    async with (
        running(TcpTransport(secret=SECRET), ["srv"], name="server") as srv,
        running(TcpTransport(secret=secret), ["cli"], name="client") as cli,
    ):
        _introduce(cli, srv, "srv")
        cli.post(ping("cli", "srv", 1))
        refused = await srv.wait_event(lambda e: e.type == "auth_refused")
        assert refused.kind == "error"
        assert refused.node == "srv"
        assert refused.fields["peer"].startswith("127.0.0.1:")
        assert "wrong answer" in refused.fields["detail"]
        if secret is not None:
            dropped = await cli.wait_drop("unreachable")
            assert "refused the secret" in dropped.fields["detail"]
        assert srv.inboxes["srv"].received == []
        assert tcp(srv).connected == frozenset()
        assert srv.events("event", "route_learned") == []


async def test_a_silent_client_is_refused_once_the_handshake_deadline_passes() -> None:
    """A client that connects and never answers the challenge is closed after the
    handshake timeout, and traced."""
    async with running(
        TcpTransport(secret=SECRET, handshake_timeout=0.2), ["srv"], name="server"
    ) as srv:
        stream = await _connect(srv, "srv")
        await _receive_exactly(stream, CHALLENGE_BYTES)
        assert await _closed_by_server(stream)
        refused = await srv.wait_event(lambda e: e.type == "auth_refused")
        assert "no answer to the challenge within 0.2 s" in refused.fields["detail"]
        await stream.aclose()


async def test_a_forged_frame_from_a_raw_client_is_not_delivered() -> None:
    """A client that skips the handshake and writes a well-formed envelope frame (a message
    with a self-declared source) is closed and traced; the envelope is never delivered, and
    the listener goes on serving peers that prove the secret."""
    async with (
        running(TcpTransport(secret=SECRET), ["srv"], name="server") as srv,
        running(TcpTransport(secret=SECRET), ["cli"], name="client") as cli,
    ):
        stream = await _connect(srv, "srv")
        challenge = await _receive_exactly(stream, CHALLENGE_BYTES)
        assert challenge.startswith(b"KEMUAUTH")
        await stream.send(frame(ping("broker-1", "srv", 666)))
        assert await _closed_by_server(stream)
        refused = await srv.wait_event(lambda e: e.type == "auth_refused")
        assert refused.fields["peer"].startswith("127.0.0.1:")
        await stream.aclose()
        _introduce(cli, srv, "srv")
        cli.post(ping("cli", "srv", 7))
        await srv.inboxes["srv"].wait_for(1)
        assert srv.inboxes["srv"].seqs == [7]
        assert tcp(srv).connected == {"cli"}


async def test_a_client_answering_a_replayed_challenge_is_refused() -> None:
    """An answer computed for another connection's challenge (a replay) proves nothing:
    each connection has its own nonce."""
    async with running(TcpTransport(secret=SECRET), ["srv"], name="server") as srv:
        first = await _connect(srv, "srv")
        old = await _receive_exactly(first, CHALLENGE_BYTES)
        await first.aclose()
        second = await _connect(srv, "srv")
        await _receive_exactly(second, CHALLENGE_BYTES)
        await second.send(client_answer(SECRET, old))
        assert await _closed_by_server(second)
        await srv.wait_event(lambda e: e.type == "auth_refused")
        await second.aclose()


async def test_the_probe_client_passes_with_the_secret_and_fails_without() -> None:
    """``authenticate`` on a raw stream: with the secret the server accepts it and proves
    the secret back; with another secret it raises ``AuthError`` and is traced refused."""
    async with running(TcpTransport(secret=SECRET), ["srv"], name="server") as srv:
        good = await _connect(srv, "srv")
        with anyio.fail_after(5):
            await authenticate(good, SECRET)
        await good.aclose()
        assert srv.events("error") == []
        bad = await _connect(srv, "srv")
        with pytest.raises(AuthError, match="refused the cluster's secret"), anyio.fail_after(5):
            await authenticate(bad, new_secret())
        await bad.aclose()
        await srv.wait_event(lambda e: e.type == "auth_refused")


async def test_a_server_that_cannot_prove_the_secret_is_not_trusted() -> None:
    """The client checks the server's proof: a server of another secret that accepts
    whatever it is sent is given up on (``AuthError``), so a process squatting the port
    cannot pose as the store."""
    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(anyio.abc.SocketAttribute.local_port)  # noqa: S610 - not Django

        async def impostor(stream: SocketStream) -> None:
            async with stream:
                await stream.send(b"KEMUAUTH" + bytes(32))
                await _receive_exactly(stream, 32)
                await stream.send(b"\x01" + bytes(VERDICT_BYTES - 1))
                await anyio.sleep_forever()

        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, impostor)
            stream = await anyio.connect_tcp("127.0.0.1", port)
            with pytest.raises(AuthError, match="did not prove"), anyio.fail_after(5):
                await authenticate(stream, SECRET)
            await stream.aclose()
            tg.cancel_scope.cancel()


async def test_a_burst_of_refusals_is_traced_each_time_and_logged_once() -> None:
    """Five refused connections from one host: five ``auth_refused`` trace events, one log
    line."""
    async with running(TcpTransport(secret=SECRET), ["srv"], name="server") as srv:
        with structlog.testing.capture_logs() as logs:
            for _ in range(5):
                stream = await _connect(srv, "srv")
                await _receive_exactly(stream, CHALLENGE_BYTES)
                await stream.send(bytes(32))
                assert await _closed_by_server(stream)
                await stream.aclose()
            await srv.wait_event(lambda _: len(srv.events("error", "auth_refused")) == 5)
        assert [entry["event"] for entry in logs] == ["auth_refused"]
        assert logs[0]["log_level"] == "warning"


async def test_frames_before_an_oversized_size_are_delivered_then_the_connection_closes() -> None:
    """An authenticated peer writing a frame and then a frame size over the limit in one
    write: the frame is delivered, and the connection is closed at once (it stayed open
    until the peer wrote again)."""
    async with running(TcpTransport(secret=SECRET), ["srv"], name="server") as srv:
        stream = await _connect(srv, "srv")
        with anyio.fail_after(5):
            await authenticate(stream, SECRET)
        too_big = (16 * 1024 * 1024 + 1).to_bytes(4, "big")
        await stream.send(frame(ping("peer", "srv", 5)) + too_big)
        await srv.inboxes["srv"].wait_for(1)
        assert srv.inboxes["srv"].seqs == [5]
        assert await _closed_by_server(stream)
        await stream.aclose()
