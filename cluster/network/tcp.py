"""The TCP transport: length-prefixed, typed frames (``protocol.codec``) over loopback.

Each attached node listens on its own port (127.0.0.1 and port 0 unless told otherwise).
An address book maps node ids to ``(host, port)``: ``listen`` fills it for the nodes of this
process, ``add_peer`` for nodes in other processes.

Built on asyncio ``Protocol``s, for speed, as the one deliberate exception to anyio streams
in kemu: ``data_received`` decodes frames and hands each envelope over synchronously, and
``send`` writes the frame into the connection at once, with no task hop per frame either
way. Background work (connecting, backing off) still runs in the transport's task group.

Connections are two-way. Frames go both ways on every connection, with the same framing:
when a frame arrives on a connection another process (or this one) opened to us, the node
it comes from (``envelope.src.node``) becomes reachable over that connection, so a node
that is in nobody's address book here (a CLI process's node calling our store) still gets
its replies, and an ask/reply pays for one connection, not two.

Routes: ``send`` picks the connection towards a destination node, in this order:

1. our outbound connection to it, while it is up or being opened with frames waiting for
   it (frames queued behind a connection being opened never get overtaken);
2. else a live connection that node opened to us (the first one its frames arrived on;
   while it lives every frame to the node goes on it);
3. else its address-book entry, or, for a transport given a ``resolver``, the address the
   resolver finds when the connection is opened: open an outbound connection (below);
4. else drop it as ``unknown_destination``.

A resolver (``kemu broker run``: a broker's peers are wherever their registrations in
ZooKeeper say, ``cluster.launch.directory``) is asked afresh each time a connection to a
node outside the address book is opened, so a peer that came back elsewhere is found
there; a node it does not know is ``unknown_destination`` for the frames queued, and the
destination backs off as after a failed connect.

Since an outbound connection is only opened under rule 3, a node's frames never go on two
connections at once: the route of a destination changes only when the connection in use
died, or was left idle (an outbound connection that is up stays preferred while it lives).
Together with one outbound connection per destination, this keeps FIFO order per (source
node, destination node) link. When a connection the node opened to us closes, the route is
forgotten (traced as a ``route_lost`` event, its learning as ``route_learned``): another
connection of that node takes over, or later messages use the address book, or are dropped.

Sending on an outbound connection: one per destination node, opened by a connector task
when the first message for it is sent. ``send`` encodes and never blocks: while the
connection is up it writes the frame straight into it (the transport's and the kernel's
buffers coalesce); it queues frames only while the connection is being opened, or while
the connection's write buffer is over its high-water mark (``pause_writing``) until it
drains (``resume_writing``). That queue is bounded in bytes per destination. When a
connection cannot be opened the queued messages are dropped as ``unreachable`` and the
destination is left alone for a back-off (50 ms doubling to 1 s, like Kafka's
``reconnect.backoff.ms``), during which messages to it are dropped at once (unless it is
connected to us: then they go over that connection). When a connection breaks, a frame
whose write fails is dropped as ``connection_lost`` (frames already accepted into the
connection's buffers are lost with it, as bytes in a socket buffer always are), frames
still queued go out on the next connection, and the next message reconnects. Whatever the
other end writes on it is delivered like frames on any connection; its end of stream or an
error ends it.

Sending on a connection a node opened to us works the same way without the connecting:
the frames queued while it is paused are bounded in bytes per connection; when it ends,
they are sent again by the rules above.

Receiving: every connection splits the stream into frames and decodes them as they
arrive. A malformed, oversized or truncated frame closes that connection only, traced as an
``error`` of type ``bad_frame``; the listener keeps serving.

Authentication: a transport given the cluster's ``secret`` opens every connection with
the handshake of ``cluster.network.auth``, both ways: its listeners challenge each
connection they accept and take nothing from it (no frame is decoded, no route learned)
until it answered with proof of the secret, within ``handshake_timeout``; a connection
that answers wrong, too late, or closes half-way through its answer is closed, traced as an
``error`` of type ``auth_refused`` with its peer, and logged once per peer host and
minute (an attacker looping does not flood the log). Its connectors answer the challenges
of the endpoints they connect to and send frames only once the endpoint accepted them and
proved it knows the secret too; a refusal is a connect failure like any other
(``connect_failed``, then the back-off). A transport without a secret does no handshake:
in-process clusters and tests whose both ends are its own.

Socket errors are translated to ``NetworkError`` subclasses here and nowhere else.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Any, cast

import anyio
import structlog
from anyio.abc import TaskGroup, TaskStatus

from actors.runtime.clock import Clock
from actors.runtime.freeze import outside_nodes
from cluster.network.auth import (
    ANSWER_BYTES,
    CHALLENGE_BYTES,
    HANDSHAKE_TIMEOUT,
    VERDICT_BYTES,
    AuthError,
    Challenge,
    client_answer,
    server_verdict,
)
from cluster.network.transport import DropReason, Transport, TransportEvents
from protocol.codec import MAX_FRAME_BYTES, FrameReader, decode_envelope, frame
from protocol.envelope import Envelope
from protocol.errors import FrameError, NetworkError, UnreachableError
from protocol.trace import TraceKind

DEFAULT_HOST = "127.0.0.1"
MAX_QUEUED_BYTES = 64 * 1024 * 1024  # per destination, like a socket send buffer, but ours
CONNECT_TIMEOUT = 10.0  # Kafka's socket.connection.setup.timeout.ms
RECONNECT_BACKOFF = 0.05  # Kafka's reconnect.backoff.ms
RECONNECT_BACKOFF_MAX = 1.0  # Kafka's reconnect.backoff.max.ms
_WILDCARDS = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}  # noqa: S104 - a lookup

_WRITE_FAILED = "connection lost: the write failed"
_NOT_ACCEPTED = "the endpoint closed the connection instead of accepting us: it refused the secret"
REFUSAL_LOG_INTERVAL = 60.0  # seconds: one log line per peer host and interval, however many

log = structlog.get_logger("kemu.network")

Address = tuple[str, int]
Resolver = Callable[[str], Awaitable["Address | None"]]
"""Where a node outside the address book listens now (None: nowhere known)."""


def _check_port(port: int) -> int:
    if not 0 <= port <= 65535:
        raise ValueError(f"not a TCP port: {port}")
    return port


def _fmt(address: Address) -> str:
    return f"{address[0]}:{address[1]}"


# ---------------------------------------------------------------------- socket boundary


async def _listen(
    factory: Callable[[], asyncio.Protocol], node_id: str, host: str, port: int
) -> tuple[asyncio.Server, int]:
    """A listening server and its bound port."""
    loop = asyncio.get_running_loop()
    try:
        server = await loop.create_server(factory, host, port)
    except OSError as exc:
        raise NetworkError(f"node {node_id!r} cannot listen on {host}:{port}: {exc}") from exc
    return server, int(server.sockets[0].getsockname()[1])


async def _connect(factory: Callable[[], _Link], address: Address) -> _Link:
    """A connection to ``address``; bounded by the caller's deadline."""
    host, port = address
    loop = asyncio.get_running_loop()
    try:
        _, link = await loop.create_connection(factory, host, port)
    except OSError as exc:
        raise UnreachableError(f"cannot connect to {_fmt(address)}: {exc!r}") from exc
    return link


def _lost(exc: Exception | None) -> str:
    """Why a connection ended: an error, or the other end closing it."""
    return f"connection lost: {exc!r}" if exc else "closed by the peer"


def _truncated(pending: int) -> str:
    return f"truncated frame: the connection closed {pending} bytes into a frame"


def _remote(transport: asyncio.BaseTransport) -> str:
    address = transport.get_extra_info("peername")
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    return "?" if not address else str(address)


# ---------------------------------------------------------------------- connections


class _Backlog:
    """Frames waiting to be written, with their envelopes (to account for each one)."""

    __slots__ = ("envelopes", "frames", "queued_bytes")

    def __init__(self) -> None:
        self.envelopes: list[Envelope] = []
        self.frames: list[bytes] = []
        self.queued_bytes = 0

    def push(self, envelope: Envelope, data: bytes) -> None:
        self.envelopes.append(envelope)
        self.frames.append(data)
        self.queued_bytes += len(data)

    def take(self) -> tuple[list[Envelope], list[bytes]]:
        envelopes, frames = self.envelopes, self.frames
        self.envelopes, self.frames, self.queued_bytes = [], [], 0
        return envelopes, frames


class _Inbound(_Backlog, asyncio.Protocol):
    """One accepted connection: frames are cut out and handed over as the bytes arrive, and
    the nodes they come from are reachable over it (``sources``). Its backlog holds what
    waits for it to drain while it is paused."""

    __slots__ = (
        "_answer",
        "_arrived",
        "_challenge",
        "_deadline",
        "_owner",
        "_reader",
        "gone",
        "paused",
        "server",
        "sources",
        "transport",
        "why",
    )
    transport: asyncio.Transport  # from connection_made on

    def __init__(self, owner: TcpTransport, server: _Server) -> None:
        super().__init__()
        self._owner = owner
        self.server = server
        self._arrived = owner._arrived
        self._reader = FrameReader(max_bytes=owner._max_frame_bytes)
        self.sources: set[str] = set()  # nodes whose frames arrived here
        self.paused = False  # the write buffer is over its high-water mark
        self.gone = False  # no longer a route: closing or closed
        self.why = ""
        self._challenge: Challenge | None = None  # while the peer has not answered it
        self._answer = b""  # the part of its answer read so far
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        if self.server.closed:  # accepted just as the listener closed
            self.gone = True
            self.transport.abort()
            return
        self.server.connections.add(self)
        secret = self._owner._secret
        if secret is not None:
            self._challenge = Challenge(secret)
            self.transport.write(self._challenge.wire)
            self._deadline = asyncio.get_running_loop().call_later(
                self._owner._handshake_timeout, self._too_late
            )

    def data_received(self, data: bytes) -> None:
        if self._challenge is not None:
            data = self._answered(data)
            if not data:
                return
        arrived, sources = self._arrived, self.sources
        try:
            for body in self._reader.feed(data):
                envelope = decode_envelope(body)
                if envelope.src.node not in sources:  # before delivering: it may reply at once
                    self._owner._learn(self, envelope.src.node)
                arrived(envelope)
        except FrameError as exc:
            self._fail("bad_frame", str(exc))
            return
        except Exception as exc:  # a bug must cost this connection only, not the listener
            self._fail("connection_failed", repr(exc))
            return
        if self._reader.error is not None:  # a size over the limit after those frames
            self._fail("bad_frame", str(self._reader.error))

    def eof_received(self) -> bool:
        if self._challenge is not None and self._answer:
            self._refuse(f"closed {len(self._answer)} bytes into its answer to the challenge")
        elif self._reader.pending:
            self._fail("bad_frame", _truncated(self._reader.pending))
        else:  # a connection that said nothing asked for nothing: no refusal to tell
            self._owner._forget(self, "closed by the peer")
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_deadline()
        self.server.connections.discard(self)
        self._owner._forget(self, _lost(exc))

    def _answered(self, data: bytes) -> bytes:
        """Read the peer's answer to our challenge out of ``data``; once it is whole, accept
        the peer (and return the bytes after it: its first frames) or refuse it."""
        answer = self._answer + data
        challenge = self._challenge
        if len(answer) < ANSWER_BYTES or challenge is None:
            self._answer = answer
            return b""
        self._challenge, self._answer = None, b""
        self._stop_deadline()
        verdict = challenge.verdict(answer[:ANSWER_BYTES])
        if verdict is None:
            self._refuse("wrong answer to the challenge: it does not know the cluster's secret")
            return b""
        self.transport.write(verdict)
        return answer[ANSWER_BYTES:]

    def _too_late(self) -> None:
        self._deadline = None
        if self._challenge is not None and not self.gone:
            self._refuse(f"no answer to the challenge within {self._owner._handshake_timeout:g} s")

    def _stop_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _refuse(self, detail: str) -> None:
        """Close a peer that did not prove the secret; nothing it sent is acted on."""
        self._challenge = None
        self._stop_deadline()
        peer = _remote(self.transport)
        self.transport.abort()
        self._owner._refused(self.server.node, peer, detail)
        self._owner._forget(self, f"auth_refused: {detail}")

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self._owner._flush_inbound(self)

    def abort(self, why: str) -> None:
        """Close now; nothing more is delivered from it or written to it."""
        self.transport.abort()
        self._owner._forget(self, why)

    def _fail(self, what: str, detail: str) -> None:
        peer = _remote(self.transport)
        self.transport.abort()
        self._owner._report(TraceKind.ERROR, what, node=self.server.node, peer=peer, detail=detail)
        self._owner._forget(self, f"{what}: {detail}")


class _Server:
    """The listener of one node of this process and the connections it accepted."""

    __slots__ = ("address", "closed", "connections", "listener", "node")

    def __init__(self, node: str) -> None:
        self.node = node
        self.address: Address = ("", 0)
        self.listener: asyncio.Server | None = None
        self.connections: set[_Inbound] = set()
        self.closed = False

    def close(self) -> None:
        """Stop listening and drop every accepted connection, now (no frame of them is
        delivered after this, and they are no one's route any more)."""
        self.closed = True
        if self.listener is not None:
            self.listener.close()  # closes the listening socket at once, on both loops
        for connection in list(self.connections):
            connection.abort(f"node {self.node!r} stopped listening")
        self.connections.clear()


class _Link(asyncio.Protocol):
    """Our outbound connection towards one destination node. Frames the other end writes on
    it are delivered as they arrive; its end of stream or an error ends it."""

    __slots__ = (
        "_arrived",
        "_challenge",
        "_handshake",
        "_owner",
        "_reader",
        "_secret",
        "address",
        "authenticated",
        "closed",
        "paused",
        "peer",
        "settled",
        "transport",
        "why",
    )
    transport: asyncio.Transport  # from connection_made on (before create_connection returns)

    def __init__(self, owner: TcpTransport, peer: _Peer, address: Address) -> None:
        self._owner = owner
        self._arrived = owner._arrived
        self._reader = FrameReader(max_bytes=owner._max_frame_bytes)
        self.peer = peer
        self.address = address
        self.paused = False  # the write buffer is over its high-water mark
        self.closed = False  # connection_lost was called
        self.why = ""
        self._secret = owner._secret
        self._challenge = b""  # the endpoint's challenge, once read and answered
        self._handshake = b""  # handshake bytes read and not used yet
        self.authenticated = self._secret is None  # frames may flow
        self.settled = asyncio.Event()  # the handshake is over, either way
        if self.authenticated:
            self.settled.set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if not self.authenticated:
            data = self._shake(data)
            if not data:
                return
        arrived = self._arrived
        try:
            for body in self._reader.feed(data):
                arrived(decode_envelope(body))
        except FrameError as exc:
            self._fail("bad_frame", str(exc))
            return
        except Exception as exc:  # a bug must cost this connection only
            self._fail("connection_failed", repr(exc))
            return
        if self._reader.error is not None:  # a size over the limit after those frames
            self._fail("bad_frame", str(self._reader.error))

    def eof_received(self) -> bool:
        if self._reader.pending:
            self._fail("bad_frame", _truncated(self._reader.pending))
        if not self.authenticated:
            self.why = self.why or (_NOT_ACCEPTED if self._challenge else "closed by the peer")
        self.why = self.why or "closed by the peer"
        self.settled.set()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.why = self.why or _lost(exc)
        self.settled.set()
        self._owner._link_lost(self.peer, self)

    def _shake(self, data: bytes) -> bytes:
        """Our side of the handshake (``cluster.network.auth``): answer the endpoint's
        challenge, then check its verdict; the bytes after the verdict (frames) once it
        accepted us, else nothing."""
        assert self._secret is not None
        buffered = self._handshake + data
        try:
            if not self._challenge:
                if len(buffered) < CHALLENGE_BYTES:
                    self._handshake = buffered
                    return b""
                challenge, buffered = buffered[:CHALLENGE_BYTES], buffered[CHALLENGE_BYTES:]
                self.transport.write(client_answer(self._secret, challenge))
                self._challenge = challenge
            if len(buffered) < VERDICT_BYTES:
                self._handshake = buffered
                return b""
            server_verdict(self._secret, self._challenge, buffered[:VERDICT_BYTES])
        except AuthError as exc:
            self.why = f"handshake failed: {exc}"
            self.transport.abort()
            self.settled.set()
            return b""
        self._handshake = b""
        self.authenticated = True
        self.settled.set()
        return buffered[VERDICT_BYTES:]

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self._owner._flush(self.peer, self)

    def _fail(self, what: str, detail: str) -> None:
        self.why = self.why or f"{what}: {detail}"
        self.transport.abort()
        self._owner._report(
            TraceKind.ERROR, what, node=self.peer.node, address=_fmt(self.address), detail=detail
        )


class _Peer(_Backlog):
    """The outbound side towards one destination node: its connection, the frames queued
    while there is none (or it is paused), and the connector's state."""

    __slots__ = (
        "backoff",
        "broken",
        "connecting",
        "down",
        "link",
        "node",
        "retry",
        "unreachable",
    )

    def __init__(self, node: str, backoff: float) -> None:
        super().__init__()
        self.node = node
        self.link: _Link | None = None  # the connection, while it is up
        self.connecting = False  # a connector task runs (connecting or backing off)
        self.broken = ""  # why the connection being opened must be given up ("" = it need not)
        self.down = False  # backing off after a failed connect: drop at once
        self.unreachable = ""  # the last connect failure
        self.backoff = backoff
        self.retry: anyio.CancelScope | None = None  # the back-off sleep, to cut it short

    @property
    def in_use(self) -> bool:
        """Whether the outbound connection is this node's route: it is up, or frames wait
        for it to open (or to reopen)."""
        return self.link is not None or bool(self.frames)


def _not_running(*args: Any, **kwargs: Any) -> None:
    raise NetworkError("the TCP transport is not running")


# ---------------------------------------------------------------------- the transport


class TcpTransport(Transport):
    """Frames over TCP between networks, in this process or others."""

    def __init__(
        self,
        *,
        host: str = DEFAULT_HOST,
        ports: Mapping[str, int] | None = None,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        max_queued_bytes: int = MAX_QUEUED_BYTES,
        connect_timeout: float = CONNECT_TIMEOUT,
        reconnect_backoff: float = RECONNECT_BACKOFF,
        reconnect_backoff_max: float = RECONNECT_BACKOFF_MAX,
        secret: bytes | None = None,
        handshake_timeout: float = HANDSHAKE_TIMEOUT,
        resolver: Resolver | None = None,
    ) -> None:
        """``secret``: the cluster's secret, which every connection must prove both ways
        (see "Authentication" above); None for a transport that does no handshake.
        ``resolver``: finds the nodes the address book does not hold (see "Routes")."""
        if secret is not None and len(secret) < 16:
            raise ValueError("a cluster secret has at least 16 bytes")
        self._secret = secret
        self._handshake_timeout = handshake_timeout
        self._resolver = resolver
        self._refusals: dict[str, tuple[float, int]] = {}  # per peer host: last logged, since
        self._host = host
        self._listen_at: dict[str, Address] = {
            n: (host, _check_port(p)) for n, p in (ports or {}).items()
        }
        self._max_frame_bytes = max_frame_bytes
        self._max_queued_bytes = max_queued_bytes
        self._connect_timeout = connect_timeout
        self._backoff_min = reconnect_backoff
        self._backoff_max = reconnect_backoff_max
        self._book: dict[str, Address] = {}
        self._servers: dict[str, _Server] = {}
        self._peers: dict[str, _Peer] = {}
        self._routes: dict[str, _Inbound] = {}  # nodes reachable over a connection they opened
        self._tg: TaskGroup | None = None
        self._clock: Clock | None = None
        self._arrived: Callable[[Envelope], None] = _not_running
        self._dropped: Callable[[Envelope, DropReason, str], None] = _not_running
        self._report: Callable[..., None] = _not_running

    # -------------------------------------------------------------- address book

    def listen_on(self, node_id: str, port: int, *, host: str | None = None) -> None:
        """Where a node of this process will listen when it attaches (default: port 0)."""
        self._listen_at[node_id] = (host or self._host, _check_port(port))

    def add_peer(self, node_id: str, host: str, port: int) -> None:
        """Make a node of another process reachable at ``host:port``."""
        if node_id in self._servers:
            raise NetworkError(f"node {node_id!r} is attached here, not a remote peer")
        previous = self._book.get(node_id)
        self._book[node_id] = (host, _check_port(port))
        if previous != (host, port):
            self._interrupt(node_id, f"address changed to {host}:{port}")

    def remove_peer(self, node_id: str) -> None:
        """Forget the address of a remote node: messages to it are dropped as
        ``unknown_destination``, unless it is connected to us (then they go over that
        connection while it lasts)."""
        if node_id in self._servers:
            raise NetworkError(f"node {node_id!r} is attached here, not a remote peer")
        if self._book.pop(node_id, None) is not None:
            self._interrupt(node_id, "peer removed")

    @property
    def addresses(self) -> Mapping[str, Address]:
        """The address book: every node with a known address, local or remote."""
        return MappingProxyType(self._book)

    @property
    def connected(self) -> frozenset[str]:
        """The nodes reachable over a connection they opened to us (learned routes)."""
        return frozenset(self._routes)

    def address_of(self, node_id: str) -> Address:
        """Where a node listens (its bound port, for a local node started on port 0)."""
        try:
            return self._book[node_id]
        except KeyError:
            raise UnreachableError(f"no address for node {node_id!r}") from None

    def queued_bytes(self, node_id: str) -> int:
        """Bytes waiting to be written towards a node (queue depth, for metrics); for a node
        reached over a connection it opened, those waiting on that connection."""
        peer = self._peers.get(node_id)
        if peer is not None and peer.queued_bytes:
            return peer.queued_bytes
        route = self._routes.get(node_id)
        return 0 if route is None else route.queued_bytes

    # -------------------------------------------------------------- life cycle

    async def run(
        self,
        events: TransportEvents,
        clock: Clock,
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        if self._tg is not None:
            raise NetworkError("this transport already serves a network")
        self._clock = clock
        self._arrived, self._dropped, self._report = events.arrived, events.dropped, events.report
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                task_status.started()
                await anyio.sleep_forever()
        finally:
            self._tg = None
            for peer in self._peers.values():
                link, peer.link = peer.link, None
                if link is not None:
                    link.transport.abort()
                self._drop_queued(peer, DropReason.NETWORK_STOPPED, "")
            self._peers.clear()
            self._routes.clear()  # closing the servers below drops what waits on them
            for node_id, server in self._servers.items():
                server.close()
                self._book.pop(node_id, None)
            self._servers.clear()
            self._arrived = self._dropped = self._report = _not_running

    def _task_group(self) -> TaskGroup:
        if self._tg is None:
            raise NetworkError("the TCP transport is not running")
        return self._tg

    # -------------------------------------------------------------- receiving side

    async def listen(self, node_id: str) -> None:
        self._task_group()  # raises unless running
        if node_id in self._servers:
            raise NetworkError(f"node {node_id!r} is already listening")
        if node_id in self._book:
            raise NetworkError(f"node {node_id!r} is a remote peer at {_fmt(self._book[node_id])}")
        host, port = self._listen_at.get(node_id, (self._host, 0))
        server = _Server(node_id)
        server.listener, port = await _listen(
            functools.partial(_Inbound, self, server), node_id, host, port
        )
        server.address = (_WILDCARDS.get(host, host), port)
        if self._tg is None or node_id in self._servers:  # stopped, or attached meanwhile
            server.close()
            raise NetworkError(f"node {node_id!r} cannot listen: the transport stopped")
        self._servers[node_id] = server
        self._book[node_id] = server.address
        # A restarted node: don't make its senders wait out a back-off.
        self._interrupt(node_id, "destination restarted")

    def unlisten(self, node_id: str) -> None:
        server = self._servers.pop(node_id, None)
        if server is None:
            return
        if self._book.get(node_id) == server.address:
            del self._book[node_id]
        self._interrupt(node_id, "destination detached")
        server.close()  # the listener and every connection it accepted

    def _learn(self, connection: _Inbound, node: str) -> None:
        """A frame from ``node`` arrived on ``connection``: it can be reached over it."""
        if connection.gone:
            return
        connection.sources.add(node)
        if node not in self._routes:
            self._routes[node] = connection
            self._report(
                TraceKind.EVENT,
                "route_learned",
                node=node,
                via=connection.server.node,
                peer=_remote(connection.transport),
            )

    def _refused(self, node: str, peer: str, detail: str) -> None:
        """Trace a refused connection; log it, once per peer host and interval."""
        self._report(TraceKind.ERROR, "auth_refused", node=node, peer=peer, detail=detail)
        host = peer.rpartition(":")[0] or peer
        now = self._clock.now() if self._clock is not None else 0.0
        logged, since = self._refusals.get(host, (float("-inf"), 0))
        if now - logged < REFUSAL_LOG_INTERVAL:
            self._refusals[host] = (logged, since + 1)
            return
        self._refusals[host] = (now, 0)
        log.warning(
            "auth_refused", node=node, peer=peer, detail=detail, refused_since_last_log=since
        )

    def _forget(self, connection: _Inbound, why: str) -> None:
        """A connection a node opened to us is going away: it is no one's route any more
        (another connection of the same node takes over, if there is one), and the frames
        waiting on it are sent again (or dropped, when the transport stops)."""
        if connection.gone:
            return
        connection.gone = True
        connection.why = why
        routes = self._routes
        for node in connection.sources:
            if routes.get(node) is not connection:
                continue
            other = self._another_route(node)
            if other is not None:
                routes[node] = other
                continue
            del routes[node]
            self._report(
                TraceKind.EVENT, "route_lost", node=node, via=connection.server.node, detail=why
            )
        envelopes, _ = connection.take()
        for envelope in envelopes:
            if self._tg is None:
                self._dropped(envelope, DropReason.NETWORK_STOPPED, "")
            else:
                self.send(envelope)

    def _another_route(self, node: str) -> _Inbound | None:
        """A live connection, other than the one in use, that ``node``'s frames came on."""
        for server in self._servers.values():
            for connection in server.connections:
                if (
                    not connection.gone
                    and node in connection.sources
                    and not connection.transport.is_closing()
                ):
                    return connection
        return None

    # -------------------------------------------------------------- sending side

    def send(self, envelope: Envelope) -> None:
        peer = self._peers.get(envelope.dst.node)
        connection: _Link | _Inbound | None
        if peer is not None and (peer.link is not None or peer.frames):
            connection = peer.link  # the outbound connection is in use: stay on it
        else:
            connection = self._routes.get(envelope.dst.node)  # one the node opened to us
        if connection is not None and not connection.paused:
            transport = connection.transport
            if not transport.is_closing():  # the hot path: straight into the connection
                try:
                    data = frame(envelope, max_bytes=self._max_frame_bytes)
                except FrameError as exc:
                    self._dropped(envelope, DropReason.FRAME_TOO_LARGE, str(exc))
                    return
                transport.write(data)
                if transport.is_closing():  # the write failed: the connection broke under it
                    detail = connection.why or _WRITE_FAILED
                    self._dropped(envelope, DropReason.CONNECTION_LOST, detail)
                return
        self._send_queued(envelope, peer)

    def _send_queued(self, envelope: Envelope, peer: _Peer | None) -> None:
        """``send`` when the frame cannot be written at once: no connection (yet), or one
        that is paused or going away."""
        node = envelope.dst.node
        if peer is None or not peer.in_use:
            route = self._routes.get(node)
            if route is not None:
                if route.transport.is_closing():  # going away: forget it, take the next route
                    self._forget(route, route.why or _WRITE_FAILED)
                    self.send(envelope)
                else:  # paused: wait for it to drain
                    self._enqueue(route, envelope)
                return
        if node not in self._book and self._resolver is None:
            self._dropped(envelope, DropReason.UNKNOWN_DESTINATION, "")
            return
        if peer is None:
            peer = self._peers[node] = _Peer(node, self._backoff_min)
        if peer.down:
            self._dropped(envelope, DropReason.UNREACHABLE, peer.unreachable)
            return
        if self._enqueue(peer, envelope) and peer.link is None:
            self._start_connector(peer)

    def _enqueue(self, backlog: _Backlog, envelope: Envelope) -> bool:
        """Queue a frame to be written later, within the bound; whether it was queued."""
        try:
            data = frame(envelope, max_bytes=self._max_frame_bytes)
        except FrameError as exc:
            self._dropped(envelope, DropReason.FRAME_TOO_LARGE, str(exc))
            return False
        queued = backlog.queued_bytes
        if queued and queued + len(data) > self._max_queued_bytes:
            self._dropped(envelope, DropReason.SEND_BUFFER_FULL, f"{queued} queued")
            return False
        backlog.push(envelope, data)
        return True

    def _start_connector(self, peer: _Peer) -> None:
        if not peer.connecting:
            peer.connecting = True
            # It connects for every local node: whichever posted first must not own it.
            outside_nodes(self._task_group().start_soon, self._connector, peer)

    async def _connector(self, peer: _Peer) -> None:
        """The connector task of one destination: connect while frames are queued and no
        connection is up, then write them; back off when it cannot connect."""
        try:
            while peer.frames and peer.link is None:
                peer.broken = ""
                address = await self._address(peer.node)
                if address is None:
                    self._drop_queued(peer, DropReason.UNKNOWN_DESTINATION, "")
                    if self._resolver is None:
                        return
                    peer.unreachable = f"no address known for node {peer.node!r}"
                    self._report(
                        TraceKind.EVENT, "unresolved", node=peer.node, backoff=peer.backoff
                    )
                    await self._back_off(peer)  # don't ask the resolver once per message
                    self._report(TraceKind.EVENT, "backoff_ended", node=peer.node)
                    continue
                try:
                    link = await self._open(peer, address)
                except UnreachableError as exc:
                    peer.unreachable = str(exc)
                    self._drop_queued(peer, DropReason.UNREACHABLE, peer.unreachable)
                    self._report(
                        TraceKind.EVENT,
                        "connect_failed",
                        node=peer.node,
                        address=_fmt(address),
                        detail=peer.unreachable,
                        backoff=peer.backoff,
                    )
                    await self._back_off(peer)
                    self._report(TraceKind.EVENT, "backoff_ended", node=peer.node)
                    continue
                peer.backoff = self._backoff_min
                self._report(TraceKind.EVENT, "connected", node=peer.node, address=_fmt(address))
                peer.link = link
                if peer.broken:  # interrupted while connecting
                    self._disconnect(peer, peer.broken)
                elif link.closed:  # ended before we got to use it
                    self._link_lost(peer, link)
                else:
                    self._flush(peer, link)
        finally:
            peer.connecting = False

    async def _address(self, node: str) -> Address | None:
        """The address book's entry for ``node``, else the resolver's answer (bounded by
        the connect timeout)."""
        address = self._book.get(node)
        if address is not None or self._resolver is None:
            return address
        with anyio.move_on_after(self._connect_timeout):
            return await self._resolver(node)
        return None

    async def _open(self, peer: _Peer, address: Address) -> _Link:
        """A connection to ``address`` that has passed the handshake (if there is one)."""
        try:
            with anyio.fail_after(self._connect_timeout):
                link = await _connect(functools.partial(_Link, self, peer, address), address)
                try:
                    await link.settled.wait()
                except BaseException:  # too late, or cancelled: the connection goes with it
                    link.transport.abort()
                    raise
        except TimeoutError:
            raise UnreachableError(
                f"cannot connect to {_fmt(address)} within {self._connect_timeout} s"
            ) from None
        if not link.authenticated:
            link.transport.abort()
            raise UnreachableError(f"cannot connect to {_fmt(address)}: {link.why}")
        return link

    async def _back_off(self, peer: _Peer) -> None:
        assert self._clock is not None
        peer.down = True
        try:
            with anyio.CancelScope() as peer.retry:
                await self._clock.sleep(peer.backoff)
        finally:
            peer.retry = None
            peer.down = False
        peer.backoff = min(peer.backoff * 2, self._backoff_max)

    def _flush(self, peer: _Peer, link: _Link) -> None:
        """Write the queued frames into the connection, if it is (still) writable."""
        if peer.link is link:
            self._write_backlog(peer, link.transport, link.paused, link.why)

    def _flush_inbound(self, connection: _Inbound) -> None:
        """Write what waits on a connection a node opened to us, now that it drained."""
        if not connection.gone:
            self._write_backlog(connection, connection.transport, connection.paused, "")

    def _write_backlog(
        self, backlog: _Backlog, transport: asyncio.Transport, paused: bool, why: str
    ) -> None:
        if not backlog.frames or paused or transport.is_closing():
            return
        envelopes, frames = backlog.take()
        transport.write(frames[0] if len(frames) == 1 else b"".join(frames))
        if transport.is_closing():  # the write failed: the connection broke under it
            for envelope in envelopes:
                self._dropped(envelope, DropReason.CONNECTION_LOST, why or _WRITE_FAILED)

    def _interrupt(self, node_id: str, reason: str) -> None:
        """Give up the connection towards a node (or its back-off): the address changed or
        the other end went away. Frames still queued go out on the next connection."""
        peer = self._peers.get(node_id)
        if peer is None:
            return
        if peer.link is not None:
            self._disconnect(peer, reason)
        elif peer.connecting:
            peer.broken = reason
            if peer.retry is not None:
                peer.retry.cancel()

    def _disconnect(self, peer: _Peer, reason: str) -> None:
        """Close the connection of ``peer`` (what it holds is still written first)."""
        link, peer.link = peer.link, None
        assert link is not None
        link.why = link.why or reason
        link.transport.close()
        self._report(
            TraceKind.EVENT,
            "disconnected",
            node=peer.node,
            address=_fmt(link.address),
            detail=reason,
        )
        if peer.frames:
            self._start_connector(peer)

    def _link_lost(self, peer: _Peer, link: _Link) -> None:
        """A connection ended (``connection_lost``); the next message reconnects, or the
        frames still queued do now."""
        if peer.link is not link:
            return  # given up already
        peer.link = None
        self._report(
            TraceKind.EVENT,
            "disconnected",
            node=peer.node,
            address=_fmt(link.address),
            detail=link.why,
        )
        if peer.frames:
            self._start_connector(peer)

    def _drop_queued(self, peer: _Peer, reason: DropReason, detail: str) -> None:
        envelopes, _ = peer.take()
        for envelope in envelopes:
            self._dropped(envelope, reason, detail)
