"""The TCP transport: failure paths (bad frames, restarts, unreachable and oversized) and
two-way connections (replies over the connection the asker opened, FIFO per link)."""

from __future__ import annotations

import socket
import struct
from typing import Any

import anyio
import pytest
from anyio.abc import SocketStream

from actors.runtime.actor import Actor, Context, Node
from actors.runtime.tracer import Tracer
from cluster.launch.ports import free_ports
from cluster.network import Endpoint, TcpTransport
from cluster.network import tcp as tcp_module
from protocol.base import Message
from protocol.codec import FrameReader, decode_envelope, frame
from protocol.envelope import Envelope
from protocol.errors import NetworkError
from tests.support.network import (
    WAIT,
    Cluster,
    Inbox,
    NetTestBulk,
    NetTestPing,
    NetTestPong,
    envelope,
    ping,
    running,
)

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
    """A loopback port nobody listens on, outside the ephemeral range (a server binds it
    later in the test)."""
    (port,) = free_ports(1)
    return port


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
                await anyio.sleep(0.001)  # pacing: the writer runs between batches; ends on a drop
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


# ---------------------------------------------------------------------- two-way connections


class _Echo(Actor):
    """Answers every request with the request itself."""

    async def receive(self, msg: Message, ctx: Context) -> Message | None:
        return msg


class _EchoInbox(Inbox):
    """A node that answers every ping with a pong as it arrives, from within the delivery
    (the reply is posted before the connection has handed over the next frame), and posts
    a ping of its own after every ``every`` of them; it records what it posts to whom."""

    def __init__(self, every: int = 0) -> None:
        super().__init__()
        self.every = every
        self.endpoint: Endpoint | None = None
        self.posted: dict[str, list[tuple[str, int]]] = {}

    def __call__(self, env: Envelope) -> None:
        super().__call__(env)
        assert self.endpoint is not None
        if isinstance(env.payload, NetTestPing):
            self._post(env.src.node, NetTestPong(seq=env.payload.seq))
            if self.every and len(self.received) % self.every == 0:
                self._post(env.src.node, NetTestPing(seq=10_000 + len(self.received)))

    def _post(self, dst: str, payload: NetTestPing | NetTestPong) -> None:
        assert self.endpoint is not None
        self.posted.setdefault(dst, []).append((type(payload).__name__, payload.seq))
        self.endpoint.post(envelope(self.endpoint.node_id, dst, payload))


def _typed(inbox: Inbox, src: str) -> list[tuple[str, int]]:
    """What a node received from ``src``: payload type and seq, in arrival order."""
    return [
        (type(e.payload).__name__, e.payload.seq)
        for e in inbox.received
        if e.src.node == src and isinstance(e.payload, NetTestPing | NetTestPong)
    ]


def _introduce(client: Cluster, server: Cluster, node: str) -> None:
    """Put ``server``'s node in ``client``'s address book (one way only)."""
    host, port = tcp(server).address_of(node)
    tcp(client).add_peer(node, host, port)


async def test_a_node_nobody_knows_gets_replies_over_its_own_connection() -> None:
    """A node of another process (network) that is in no address book of the server asks
    an actor there: the replies come back over the connection the asker opened, and the
    server opens no connection of its own."""
    async with (
        running(TcpTransport(), name="server") as server,
        running(TcpTransport(), name="client") as client,
        anyio.create_task_group() as tg,
    ):
        echo = _Echo("echo")
        await tg.start(Node("store", attach=server.network.attach).run, [echo])
        _introduce(client, server, "store")
        caller: Node = await tg.start(Node("kemu-cli-1234", attach=client.network.attach).run)
        for seq in range(3):
            reply = await caller.ask(echo.ref, NetTestPing(seq=seq), timeout=WAIT)
            assert reply == NetTestPing(seq=seq)

        assert "kemu-cli-1234" not in tcp(server).addresses
        assert tcp(server).connected == {"kemu-cli-1234"}
        (learned,) = server.events("event", "route_learned")
        assert (learned.node, learned.fields["via"]) == ("kemu-cli-1234", "store")
        assert server.events("event", "connected") == []  # it answered on the client's
        assert len(client.events("event", "connected")) == 1
        assert server.events("drop") == client.events("drop") == []
        tg.cancel_scope.cancel()


async def test_after_the_connected_node_goes_away_sends_to_it_are_dropped() -> None:
    """When the process of a node that reached us over its own connection stops, the route
    is forgotten: a later message to that node is dropped and traced at once."""
    async with running(TcpTransport(), ["srv"], name="server") as server:
        async with running(TcpTransport(), ["cli"], name="client") as client:
            _introduce(client, server, "srv")
            client.post(ping("cli", "srv", 1))
            await server.inboxes["srv"].wait_for(1)
            server.post(ping("srv", "cli", 2))
            await client.inboxes["cli"].wait_for(1)
            assert client.inboxes["cli"].seqs == [2]

        lost = await server.wait_event(lambda e: e.type == "route_lost")
        assert lost.node == "cli"
        assert tcp(server).connected == frozenset()
        server.post(ping("srv", "cli", 3))
        drop = await server.wait_drop("unknown_destination")
        assert drop.fields["dst"] == "cli/actor"
        await server.wait_settled()
        assert server.events("event", "connected") == []


async def test_a_closed_route_falls_back_to_the_address_book() -> None:
    """A node reachable both ways is answered over its own connection while that lives;
    once it closes, the address book is used and a connection of our own is opened."""
    async with (
        running(TcpTransport(), ["srv"], name="server") as server,
        running(TcpTransport(), ["cli"], name="client") as client,
    ):
        _introduce(client, server, "srv")
        _introduce(server, client, "cli")
        client.post(ping("cli", "srv", 1))
        await server.inboxes["srv"].wait_for(1)
        server.post(ping("srv", "cli", 2))
        await client.inboxes["cli"].wait_for(1)
        assert server.events("event", "connected") == []  # the route comes first

        tcp(client).remove_peer("srv")  # closes the client's connection
        await server.wait_event(lambda e: e.type == "route_lost")
        server.post(ping("srv", "cli", 3))
        await client.inboxes["cli"].wait_for(2)
        assert client.inboxes["cli"].seqs == [2, 3]
        assert [e.node for e in server.events("event", "connected")] == ["cli"]


@pytest.mark.parametrize("server_knows_client", [False, True], ids=["one-way", "both-ways"])
async def test_round_trips_keep_fifo_order_both_ways(server_knows_client: bool) -> None:
    """Many requests from two nodes of another process, each answered from within its
    delivery, with messages of the server's own in between: every link keeps its order,
    and the server answers over the connection the clients opened (it opens none)."""
    count = 1500
    async with (
        running(TcpTransport(), name="server") as server,
        running(TcpTransport(), ["c1", "c2"], name="client") as client,
    ):
        echo = _EchoInbox(every=7)
        echo.endpoint = await server.network.attach("srv", echo)
        _introduce(client, server, "srv")
        if server_knows_client:
            _introduce(server, client, "c1")
            _introduce(server, client, "c2")
        for seq in range(count):
            client.post(ping("c1", "srv", seq))
            client.post(ping("c2", "srv", count + seq))
        await echo.wait_for(2 * count)
        for node in ("c1", "c2"):
            expected = len(echo.posted[node])  # all posted: every request was answered
            await client.inboxes[node].wait_for(expected)
        assert echo.seqs_from("c1") == list(range(count))
        assert echo.seqs_from("c2") == list(range(count, 2 * count))
        for node in ("c1", "c2"):
            assert _typed(client.inboxes[node], "srv") == echo.posted[node]
        assert len(echo.posted["c1"]) + len(echo.posted["c2"]) > 2 * count  # its own too
        assert server.events("event", "connected") == []
        assert server.events("drop") == client.events("drop") == []


async def test_a_connected_node_that_stops_reading_pauses_then_drops() -> None:
    """Back-pressure on a connection a node opened to us: when it stops reading, later
    messages to it wait in a bounded queue and, past its limit, are dropped as
    send_buffer_full; once it reads again every message not dropped arrives, in order."""
    limit = 1 << 20
    async with (
        running(TcpTransport(max_queued_bytes=limit), ["b"]) as c,
        await _raw_connection(c, "b") as stream,
    ):
        await stream.send(frame(ping("z", "b", 0)))  # z is known by its connection only
        await c.wait_event(lambda e: e.type == "route_learned" and e.node == "z")
        posted = 0
        while not c.events("drop"):  # z does not read: the socket buffers fill, then the queue
            await anyio.sleep(0.001)  # pacing: the writer runs between batches; ends on a drop
            for _ in range(16):
                posted += 1
                c.post(envelope("b", "z", NetTestBulk(data=b"x" * 65536), corr=posted))
            assert tcp(c).queued_bytes("z") <= limit
            assert posted < 10_000, "never dropped"
        assert tcp(c).queued_bytes("z") > 0  # queued behind the paused connection
        assert {e.fields["reason"] for e in c.events("drop")} == {"send_buffer_full"}
        dropped = {e.corr for e in c.events("drop")}
        expected = [n for n in range(1, posted + 1) if n not in dropped]

        reader, corrs = FrameReader(), list[int]()
        with anyio.fail_after(10):
            while len(corrs) < len(expected):
                for body in reader.feed(await stream.receive()):
                    corrs.append(decode_envelope(body).corr)
        assert corrs == expected
        assert tcp(c).queued_bytes("z") == 0


async def test_a_bad_frame_on_our_own_connection_closes_it() -> None:
    """Bytes the destination writes back on our connection are frames like any: a bad one
    closes that connection with a traced bad_frame error, and the next message to the
    destination opens a new one."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        async with running(TcpTransport(), ["a"]) as c:
            tcp(c).add_peer("z", "127.0.0.1", port)
            c.post(ping("a", "z", 1))
            await c.wait_event(lambda e: e.type == "connected")
            connection, _ = listener.accept()
            with connection:
                connection.sendall(struct.pack(">I", 2**31))
                error = await c.wait_event(lambda e: e.type == "bad_frame")
                await c.wait_event(lambda e: e.type == "disconnected")
            assert error.node == "z"
            assert "exceeds the limit" in error.fields["detail"]
            c.post(ping("a", "z", 2))
            await c.wait_event(lambda e: len(c.events("event", "connected")) == 2)
            second, _ = listener.accept()  # waiting in the backlog already
            reader, received = FrameReader(), list[Envelope]()
            async with await SocketStream.from_socket(second) as stream:
                with anyio.fail_after(5):
                    while not received:
                        received += map(decode_envelope, reader.feed(await stream.receive()))
            assert received == [ping("a", "z", 2)]


async def test_messages_waiting_for_our_connection_are_not_overtaken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Messages queued while our connection to a node is being opened stay ahead of later
    ones even if that node connects to us meanwhile: the link keeps the connection it was
    given until that connection dies."""
    gate = anyio.Event()
    real_connect = tcp_module._connect

    async def slow_connect(factory: Any, address: tuple[str, int]) -> Any:
        if address == gated:
            await gate.wait()
        return await real_connect(factory, address)

    monkeypatch.setattr(tcp_module, "_connect", slow_connect)
    async with (
        running(TcpTransport(), ["srv"], name="server") as server,
        running(TcpTransport(), ["cli"], name="client") as client,
    ):
        _introduce(server, client, "cli")
        _introduce(client, server, "srv")
        gated = tcp(client).address_of("cli")
        server.post(ping("srv", "cli", 1))
        server.post(ping("srv", "cli", 2))  # both wait for the connection being opened
        client.post(ping("cli", "srv", 100))
        await server.wait_event(lambda e: e.type == "route_learned" and e.node == "cli")
        server.post(ping("srv", "cli", 3))  # the route exists now, but 1 and 2 wait
        assert tcp(server).queued_bytes("cli") > 0
        gate.set()
        await client.inboxes["cli"].wait_for(3)
        server.post(ping("srv", "cli", 4))  # our connection is up: it stays in use
        await client.inboxes["cli"].wait_for(4)
        assert client.inboxes["cli"].seqs == [1, 2, 3, 4]
        assert len(server.events("event", "connected")) == 1


async def test_a_connected_node_is_reached_while_we_back_off() -> None:
    """When our connection to a node cannot be opened, messages to it are dropped as
    unreachable during the back-off, unless the node connected to us meanwhile: then they
    go over its connection."""
    async with (
        running(TcpTransport(reconnect_backoff=30), ["srv"], name="server") as server,
        running(TcpTransport(), ["cli"], name="client") as client,
    ):
        tcp(server).add_peer("cli", "127.0.0.1", await _free_port())  # a wrong address
        server.post(ping("srv", "cli", 1))
        await server.wait_drop("unreachable")
        server.post(ping("srv", "cli", 2))  # backing off: dropped at once
        assert [e.fields["reason"] for e in server.events("drop")] == ["unreachable"] * 2

        _introduce(client, server, "srv")
        client.post(ping("cli", "srv", 100))
        await server.inboxes["srv"].wait_for(1)
        server.post(ping("srv", "cli", 3))
        await client.inboxes["cli"].wait_for(1)
        assert client.inboxes["cli"].seqs == [3]
        assert len(server.events("drop")) == 2


async def test_a_resolver_finds_nodes_outside_the_address_book_afresh_on_each_connect() -> None:
    """A transport given a resolver asks it where a node outside its address book is when
    it opens a connection: an unknown node's messages are dropped as unknown_destination
    (then the transport backs off), a known one's are delivered, and once the node moved
    (listening elsewhere) the next connection goes to where the resolver says now."""
    tracer = Tracer()
    where: dict[str, tuple[str, int]] = {}
    asked: list[str] = []

    async def resolve(node: str) -> tuple[str, int] | None:
        asked.append(node)
        return where.get(node)

    transport = TcpTransport(reconnect_backoff=0.05, resolver=resolve)
    async with running(transport, ["a"], tracer=tracer) as one:
        one.post(ping("a", "b", 1))
        await one.wait_drop("unknown_destination")
        assert asked == ["b"]
        await one.wait_event(lambda e: e.type == "backoff_ended")

        async with running(TcpTransport(), ["b"], tracer=tracer, name="net2") as two:
            where["b"] = tcp(two).address_of("b")
            one.post(ping("a", "b", 2))
            await two.inboxes["b"].wait_for(1)
            assert two.inboxes["b"].seqs == [2]
        await one.wait_event(lambda e: e.type == "disconnected" and e.node == "b")

        async with running(TcpTransport(), ["b"], tracer=tracer, name="net3") as three:
            assert tcp(three).address_of("b") != where["b"]
            where["b"] = tcp(three).address_of("b")
            one.post(ping("a", "b", 3))
            await three.inboxes["b"].wait_for(1)
            assert three.inboxes["b"].seqs == [3]
        assert asked == ["b", "b", "b"]
        assert "b" not in tcp(one).addresses  # resolved each time, never written in the book
