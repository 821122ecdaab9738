"""The TCP transport's failure paths: bad frames, restarts, unreachable and oversized."""

from __future__ import annotations

import socket
import struct

import anyio
import pytest
from anyio.abc import SocketAttribute, SocketStream

from actors.trace import Tracer
from cluster.network import TcpTransport
from protocol.codec import FrameReader, decode_envelope, frame
from protocol.errors import NetworkError
from tests.network.support import Cluster, NetTestBulk, envelope, ping, running

pytestmark = pytest.mark.asyncio


def tcp(c: Cluster) -> TcpTransport:
    transport = c.network.transport
    assert isinstance(transport, TcpTransport)
    return transport


async def _raw_connection(c: Cluster, node: str) -> SocketStream:
    host, port = tcp(c).address_of(node)
    return await anyio.connect_tcp(host, port)


async def _closed_by_server(stream: SocketStream) -> bool:
    """Whether the server ends this connection (end of stream or reset) within the wait."""
    with anyio.fail_after(5):
        try:
            await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return True
    return False


async def _free_port() -> int:
    """A loopback port nobody listens on (bound, then closed again)."""
    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        return int(listener.extra(SocketAttribute.local_port))  # noqa: S610 - not Django


async def _still_serves(c: Cluster, seq: int) -> None:
    """A fresh connection to b's listener (a's first message to b) is served."""
    before = len(c.inboxes["b"].received)
    c.post(ping("a", "b", seq))
    await c.inboxes["b"].wait_for(before + 1)
    assert c.inboxes["b"].seqs[-1] == seq


@pytest.mark.parametrize(
    ("garbage", "complaint"),
    [
        pytest.param(struct.pack(">I", 5) + b"\xc1\xc1\xc1\xc1\xc1", "malformed", id="malformed"),
        pytest.param(struct.pack(">I", 2**31), "exceeds the limit", id="oversized-length"),
        pytest.param(struct.pack(">I", 3) + b"\x93\x01\x02", "malformed", id="wrong-shape"),
    ],
)
async def test_a_bad_frame_closes_only_its_connection(garbage: bytes, complaint: str) -> None:
    """A malformed or oversized frame closes that connection with a traced bad_frame error;
    the listener keeps serving new connections."""
    async with running(TcpTransport(), ["a", "b"]) as c:
        bystander = await _raw_connection(c, "b")
        async with await _raw_connection(c, "b") as bad:
            await bad.send(garbage)
            error = await c.wait_event(lambda e: e.kind == "error" and e.type == "bad_frame")
            assert await _closed_by_server(bad)
        assert error.node == "b"
        assert complaint in error.fields["detail"]
        await _still_serves(c, 1)
        async with bystander:  # another connection, open all along, is still usable
            await bystander.send(frame(ping("x", "b", 2)))
            await c.inboxes["b"].wait_for(2)
        assert c.inboxes["b"].seqs == [1, 2]


async def test_a_truncated_frame_is_reported_when_the_connection_ends() -> None:
    """A connection that ends halfway through a frame is traced as a bad_frame; frames
    before it on the same connection were delivered."""
    async with running(TcpTransport(), ["a", "b"]) as c:
        good = frame(ping("x", "b", 1))
        async with await _raw_connection(c, "b") as stream:
            await stream.send(good + good[: len(good) // 2])
            await c.inboxes["b"].wait_for(1)
            await stream.send_eof()
            error = await c.wait_event(lambda e: e.type == "bad_frame")
        assert "truncated" in error.fields["detail"]
        await _still_serves(c, 2)


async def test_a_restarted_peer_gets_messages_again() -> None:
    """When a node in another process closes its listener and reopens it on the same port,
    the sender notices the broken connection and later messages reach the new listener."""
    tracer = Tracer()
    async with (
        running(TcpTransport(), ["a"], tracer=tracer, name="net1") as one,
        running(TcpTransport(), ["b"], tracer=tracer, name="net2") as two,
    ):
        host, port = tcp(two).address_of("b")
        tcp(one).add_peer("b", host, port)
        one.post(ping("a", "b", 1))
        await two.inboxes["b"].wait_for(1)

        two.endpoints["b"].close()
        await one.wait_event(lambda e: e.type == "disconnected" and e.node == "b")
        tcp(two).listen_on("b", port)
        await two.attach("b")

        one.post(ping("a", "b", 2))
        await two.inboxes["b"].wait_for(1)
        assert two.inboxes["b"].seqs == [2]
        links = [e.type for e in one.events("event") if "connected" in (e.type or "")]
        assert links == [
            "connected",
            "disconnected",
            "connected",
        ]


async def test_an_unreachable_peer_drops_until_it_comes_up() -> None:
    """Messages to a peer nobody listens for are dropped as unreachable, at once while the
    sender backs off; once the peer listens and the back-off is over, messages get through."""
    tracer = Tracer()
    async with running(TcpTransport(reconnect_backoff=0.05), ["a"], tracer=tracer) as one:
        port = await _free_port()
        tcp(one).add_peer("b", "127.0.0.1", port)

        one.post(ping("a", "b", 1))
        drop = await one.wait_drop("unreachable")
        assert "cannot connect" in drop.fields["detail"]
        one.post(ping("a", "b", 2))  # backing off: dropped without trying
        assert one.events("drop")[-1].fields["reason"] == "unreachable"
        assert len(one.events("event", "connect_failed")) == 1

        async with running(TcpTransport(ports={"b": port}), ["b"], tracer=tracer) as two:
            await one.wait_event(lambda e: e.type == "backoff_ended")
            one.post(ping("a", "b", 3))
            await two.inboxes["b"].wait_for(1)
            assert two.inboxes["b"].seqs == [3]


async def test_an_oversized_message_is_dropped_and_the_link_goes_on() -> None:
    """A message whose frame is over the limit is dropped as frame_too_large before it is
    written; the next message on the link is delivered."""
    async with running(TcpTransport(max_frame_bytes=1024), ["a", "b"]) as c:
        c.post(envelope("a", "b", NetTestBulk(data=b"x" * 2000)))
        c.post(ping("a", "b", 1))
        await c.inboxes["b"].wait_for(1)
        (drop,) = c.events("drop")
        assert drop.fields["reason"] == "frame_too_large"
        assert c.inboxes["b"].seqs == [1]


async def test_a_full_send_queue_drops_instead_of_blocking() -> None:
    """Posting faster than the writer drains never blocks: past the queue limit messages
    are dropped as send_buffer_full, and the rest arrive in order."""
    async with running(TcpTransport(max_queued_bytes=10_000), ["a", "b"]) as c:
        for i in range(100):
            c.post(envelope("a", "b", NetTestBulk(data=bytes([i]) * 500)))
        assert tcp(c).queued_bytes("b") <= 10_000
        await c.wait_settled()
        delivered = [e.payload for e in c.inboxes["b"].received]
        dropped = c.events("drop")
        assert dropped
        assert {e.fields["reason"] for e in dropped} == {"send_buffer_full"}
        assert len(delivered) + len(dropped) == 100
        firsts = [p.data[0] for p in delivered if isinstance(p, NetTestBulk)]
        assert firsts == sorted(firsts)


async def test_a_peer_that_stops_reading_pauses_then_drops() -> None:
    """When the destination stops reading, the connection's buffers fill up: later messages
    wait in the bounded queue and, past its limit, are dropped as send_buffer_full. Once the
    destination reads again, every message not dropped arrives, in the order posted."""
    limit = 1 << 20
    with socket.create_server(("127.0.0.1", 0)) as listener:  # accepted only to read, later
        port = listener.getsockname()[1]
        async with running(TcpTransport(max_queued_bytes=limit), ["a"]) as c:
            tcp(c).add_peer("z", "127.0.0.1", port)
            posted = 1
            c.post(envelope("a", "z", NetTestBulk(data=b""), corr=posted))
            await c.wait_event(lambda e: e.type == "connected")
            while not c.events("drop"):  # nobody reads: the socket buffers fill, then the queue
                await anyio.sleep(0.001)
                for _ in range(16):
                    posted += 1
                    c.post(envelope("a", "z", NetTestBulk(data=b"x" * 65536), corr=posted))
                assert tcp(c).queued_bytes("z") <= limit
                assert posted < 10_000, "never dropped"
            assert tcp(c).queued_bytes("z") > 0  # queued behind the paused connection
            assert {e.fields["reason"] for e in c.events("drop")} == {"send_buffer_full"}
            dropped = {e.corr for e in c.events("drop")}
            expected = [n for n in range(1, posted + 1) if n not in dropped]

            connection, _ = listener.accept()
            reader, corrs = FrameReader(), list[int]()
            async with await SocketStream.from_socket(connection) as stream:
                with anyio.fail_after(10):
                    while len(corrs) < len(expected):
                        for body in reader.feed(await stream.receive()):
                            corrs.append(decode_envelope(body).corr)
            assert corrs == expected
            assert tcp(c).queued_bytes("z") == 0


async def test_listening_on_a_taken_port_fails_cleanly() -> None:
    """Attaching a node on a port already in use raises NetworkError and leaves the node
    unattached."""
    async with running(TcpTransport(), ["a"]) as c:
        _, port = tcp(c).address_of("a")
        tcp(c).listen_on("b", port)
        with pytest.raises(NetworkError, match="cannot listen"):
            await c.network.attach("b", c.inboxes["a"])
        assert "b" not in c.network.nodes


async def test_address_book_rejects_confusing_local_and_remote() -> None:
    """A node attached here cannot also be registered as a remote peer, and removing a peer
    makes it unknown."""
    async with running(TcpTransport(), ["a"]) as c:
        with pytest.raises(NetworkError):
            tcp(c).add_peer("a", "127.0.0.1", 1)
        tcp(c).add_peer("z", "127.0.0.1", 1)
        assert tcp(c).addresses["z"] == ("127.0.0.1", 1)
        tcp(c).remove_peer("z")
        c.post(ping("a", "z", 1))
        await c.wait_drop("unknown_destination")
