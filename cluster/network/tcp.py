"""The TCP transport: length-prefixed, typed frames (``protocol.codec``) over loopback.

Each attached node listens on its own port (127.0.0.1 and port 0 unless told otherwise).
An address book maps node ids to ``(host, port)``: ``listen`` fills it for the nodes of this
process, ``add_peer`` for nodes in other processes.

Sending: one outbound connection per destination node, opened when the first message for
it is sent and served by one writer task, which writes everything queued meanwhile in one
batch. ``send`` itself only encodes and queues (never blocks); the queue of a destination is
bounded in bytes. When a connection cannot be opened the queued messages are dropped as
``unreachable`` and the destination is left alone for a back-off (50 ms doubling to 1 s, like
Kafka's ``reconnect.backoff.ms``), during which messages to it are dropped at once; when a
connection breaks, the batch being written is dropped as ``connection_lost`` and the next
message reconnects. The remote side never writes on our outbound connection, so a reader
task on it notices at once when the other end closes.

Receiving: one task per accepted connection splits the stream into frames and decodes them.
A malformed, oversized or truncated frame closes that connection only, traced as an
``error`` of type ``bad_frame``; the listener keeps serving.

Socket errors are translated to ``NetworkError`` subclasses here and nowhere else.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import anyio
from anyio.abc import ByteStream, SocketAttribute, SocketStream, TaskGroup, TaskStatus
from anyio.streams.stapled import MultiListener

from actors.clock import Clock
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
_RECEIVE_BYTES = 256 * 1024
_WILDCARDS = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}  # noqa: S104 - a lookup

Address = tuple[str, int]


def _check_port(port: int) -> int:
    if not 0 <= port <= 65535:
        raise ValueError(f"not a TCP port: {port}")
    return port


def _fmt(address: Address) -> str:
    return f"{address[0]}:{address[1]}"


# ---------------------------------------------------------------------- socket boundary


async def _connect(address: Address) -> SocketStream:
    """A connection to ``address``; bounded by the caller's deadline."""
    host, port = address
    try:
        return await anyio.connect_tcp(host, port)
    except OSError as exc:
        raise UnreachableError(f"cannot connect to {_fmt(address)}: {exc!r}") from exc


async def _receive(stream: ByteStream) -> bytes:
    """The next chunk, or ``b""`` at the end of the stream."""
    try:
        return await stream.receive(_RECEIVE_BYTES)
    except anyio.EndOfStream:
        return b""
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
        raise NetworkError(f"connection lost: {exc.__cause__ or exc!r}") from exc


async def _send(stream: ByteStream, data: bytes) -> None:
    try:
        await stream.send(data)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
        raise NetworkError(f"connection lost: {exc.__cause__ or exc!r}") from exc


def _remote(stream: SocketStream) -> str:
    try:
        address = stream.extra(SocketAttribute.remote_address)  # noqa: S610 - not Django
    except (OSError, anyio.TypedAttributeLookupError):
        return "?"
    return address if isinstance(address, str) else f"{address[0]}:{address[1]}"


# ---------------------------------------------------------------------- state


class _Peer:
    """The outbound side towards one destination node: its queue and connection state.
    Only the writer task (``TcpTransport._drive``) takes from the queue."""

    __slots__ = (
        "_wake",
        "backoff",
        "broken",
        "down",
        "envelopes",
        "frames",
        "node",
        "queued_bytes",
        "retry",
        "unreachable",
    )

    def __init__(self, node: str, backoff: float) -> None:
        self.node = node
        self.envelopes: list[Envelope] = []
        self.frames: list[bytes] = []
        self.queued_bytes = 0
        self.broken = ""  # why the current connection must be given up ("" = it need not)
        self.down = False  # backing off after a failed connect: drop at once
        self.unreachable = ""  # the last connect failure
        self.backoff = backoff
        self.retry: anyio.CancelScope | None = None  # the back-off sleep, to cut it short
        self._wake: anyio.Event | None = None

    def push(self, envelope: Envelope, data: bytes) -> None:
        self.envelopes.append(envelope)
        self.frames.append(data)
        self.queued_bytes += len(data)
        if self._wake is not None:
            self._wake.set()

    def take(self) -> tuple[list[Envelope], list[bytes]]:
        envelopes, frames = self.envelopes, self.frames
        self.envelopes, self.frames, self.queued_bytes = [], [], 0
        return envelopes, frames

    def interrupt(self, reason: str) -> None:
        """Give up the current connection (and any back-off): the address changed or the
        other end went away."""
        self.broken = reason
        if self.retry is not None:
            self.retry.cancel()
        if self._wake is not None:
            self._wake.set()

    async def wait(self) -> None:
        """Until something is queued or the connection must be given up."""
        while not self.frames and not self.broken:
            self._wake = anyio.Event()
            try:
                await self._wake.wait()
            finally:
                self._wake = None


@dataclass(slots=True)
class _Server:
    """The listener of one node of this process, and what closing it waits for."""

    address: Address
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    stopped: anyio.Event = field(default_factory=anyio.Event)


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
    ) -> None:
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
        self._closing: dict[str, _Server] = {}  # detached, listener not closed yet
        self._peers: dict[str, _Peer] = {}
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
        peer = self._peers.get(node_id)
        if peer is not None and previous != (host, port):
            peer.interrupt(f"address changed to {host}:{port}")

    def remove_peer(self, node_id: str) -> None:
        """Forget a remote node: messages to it are dropped as ``unknown_destination``."""
        if node_id in self._servers:
            raise NetworkError(f"node {node_id!r} is attached here, not a remote peer")
        if self._book.pop(node_id, None) is not None and node_id in self._peers:
            self._peers[node_id].interrupt("peer removed")

    @property
    def addresses(self) -> Mapping[str, Address]:
        """The address book: every reachable node, local or remote."""
        return MappingProxyType(self._book)

    def address_of(self, node_id: str) -> Address:
        """Where a node listens (its bound port, for a local node started on port 0)."""
        try:
            return self._book[node_id]
        except KeyError:
            raise UnreachableError(f"no address for node {node_id!r}") from None

    def queued_bytes(self, node_id: str) -> int:
        """Bytes waiting to be written towards a node (queue depth, for metrics)."""
        peer = self._peers.get(node_id)
        return 0 if peer is None else peer.queued_bytes

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
                self._drop_queued(peer, DropReason.NETWORK_STOPPED, "")
            self._peers.clear()
            for node_id in self._servers:
                self._book.pop(node_id, None)
            self._servers.clear()
            self._closing.clear()
            self._arrived = self._dropped = self._report = _not_running

    def _task_group(self) -> TaskGroup:
        if self._tg is None:
            raise NetworkError("the TCP transport is not running")
        return self._tg

    # -------------------------------------------------------------- receiving side

    async def listen(self, node_id: str) -> None:
        tg = self._task_group()
        if node_id in self._servers:
            raise NetworkError(f"node {node_id!r} is already listening")
        if node_id in self._book:
            raise NetworkError(f"node {node_id!r} is a remote peer at {_fmt(self._book[node_id])}")
        closing = self._closing.pop(node_id, None)
        if closing is not None:  # a node attaching again: let its old port go first
            await closing.stopped.wait()
        host, port = self._listen_at.get(node_id, (self._host, 0))
        try:
            listener = await anyio.create_tcp_listener(local_host=host, local_port=port)
        except OSError as exc:
            raise NetworkError(f"node {node_id!r} cannot listen on {host}:{port}: {exc}") from exc
        port = int(listener.extra(SocketAttribute.local_port))  # noqa: S610 - not Django
        bound = (_WILDCARDS.get(host, host), port)
        server: _Server = await tg.start(self._serve, node_id, listener, bound)
        self._servers[node_id] = server
        self._book[node_id] = bound
        peer = self._peers.get(node_id)
        if peer is not None:  # a restarted node: don't make its senders wait out a back-off
            peer.interrupt("destination restarted")

    def unlisten(self, node_id: str) -> None:
        server = self._servers.pop(node_id, None)
        if server is None:
            return
        if self._book.get(node_id) == server.address:
            del self._book[node_id]
        peer = self._peers.get(node_id)
        if peer is not None:
            peer.interrupt("destination detached")
        server.scope.cancel()  # closes the listener and every connection it accepted
        self._closing[node_id] = server

    async def _serve(
        self,
        node_id: str,
        listener: MultiListener[SocketStream],
        address: Address,
        *,
        task_status: TaskStatus[_Server] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Accept connections for one node until its scope is cancelled; every connection
        is served in this task's group, so cancelling it closes them all."""
        server = _Server(address)
        try:
            with server.scope:
                async with listener, anyio.create_task_group() as connections:
                    task_status.started(server)
                    handler = functools.partial(self._serve_connection, node_id)
                    try:
                        await listener.serve(handler, connections)
                    except* OSError as failures:  # accept() failed, e.g. out of descriptors
                        self._report(
                            TraceKind.ERROR,
                            "listener_failed",
                            node=node_id,
                            address=_fmt(address),
                            detail=repr(failures.exceptions[0]),
                        )
        finally:
            server.stopped.set()
            if self._closing.get(node_id) is server:
                del self._closing[node_id]

    async def _serve_connection(self, node_id: str, stream: SocketStream) -> None:
        """Read frames off one accepted connection and hand each envelope over. A bad frame
        closes this connection only."""
        async with stream:
            try:
                await self._read_frames(stream)
            except FrameError as exc:
                peer = _remote(stream)
                self._report(TraceKind.ERROR, "bad_frame", node=node_id, peer=peer, detail=str(exc))
            except NetworkError:
                pass  # the sender went away; it accounts for what it lost
            except Exception as exc:  # a bug must cost this connection only, not the listener
                peer = _remote(stream)
                self._report(
                    TraceKind.ERROR, "connection_failed", node=node_id, peer=peer, detail=repr(exc)
                )

    async def _read_frames(self, stream: SocketStream) -> None:
        """Until the end of the stream; raises ``FrameError`` on a bad or truncated frame."""
        reader = FrameReader(max_bytes=self._max_frame_bytes)
        arrived = self._arrived
        while chunk := await _receive(stream):
            for body in reader.feed(chunk):
                arrived(decode_envelope(body))
        if reader.pending:
            raise FrameError(
                f"truncated frame: the connection closed {reader.pending} bytes into a frame"
            )

    # -------------------------------------------------------------- sending side

    def send(self, envelope: Envelope) -> None:
        node = envelope.dst.node
        if node not in self._book:
            self._dropped(envelope, DropReason.UNKNOWN_DESTINATION, "")
            return
        peer = self._peers.get(node)
        if peer is None:
            peer = self._peers[node] = _Peer(node, self._backoff_min)
            self._task_group().start_soon(self._drive, peer)
        if peer.down:
            self._dropped(envelope, DropReason.UNREACHABLE, peer.unreachable)
            return
        try:
            data = frame(envelope, max_bytes=self._max_frame_bytes)
        except FrameError as exc:
            self._dropped(envelope, DropReason.FRAME_TOO_LARGE, str(exc))
            return
        if peer.queued_bytes and peer.queued_bytes + len(data) > self._max_queued_bytes:
            self._dropped(envelope, DropReason.SEND_BUFFER_FULL, f"{peer.queued_bytes} queued")
            return
        peer.push(envelope, data)

    async def _drive(self, peer: _Peer) -> None:
        """The writer task of one destination: connect when there is something to send,
        write batches until the connection breaks, back off when it cannot connect."""
        while True:
            await peer.wait()
            peer.broken = ""
            if not peer.frames:
                continue
            address = self._book.get(peer.node)
            if address is None:
                self._drop_queued(peer, DropReason.UNKNOWN_DESTINATION, "")
                continue
            try:
                stream = await self._open(address)
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
            why = await self._pump(peer, stream)
            self._report(
                TraceKind.EVENT, "disconnected", node=peer.node, address=_fmt(address), detail=why
            )

    async def _open(self, address: Address) -> SocketStream:
        try:
            with anyio.fail_after(self._connect_timeout):
                return await _connect(address)
        except TimeoutError:
            raise UnreachableError(
                f"cannot connect to {_fmt(address)} within {self._connect_timeout} s"
            ) from None

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

    async def _pump(self, peer: _Peer, stream: SocketStream) -> str:
        """Write queued frames until the connection must be given up; say why."""
        async with stream, anyio.create_task_group() as tg:
            tg.start_soon(self._watch, peer, stream)
            why = await self._write(peer, stream)
            tg.cancel_scope.cancel()
        return why

    async def _write(self, peer: _Peer, stream: SocketStream) -> str:
        while True:
            await peer.wait()
            if peer.broken:
                return peer.broken
            envelopes, frames = peer.take()
            try:
                await _send(stream, frames[0] if len(frames) == 1 else b"".join(frames))
            except NetworkError as exc:
                for envelope in envelopes:
                    self._dropped(envelope, DropReason.CONNECTION_LOST, str(exc))
                return str(exc)

    @staticmethod
    async def _watch(peer: _Peer, stream: SocketStream) -> None:
        """The other end never writes on this connection, so whatever ``receive`` returns
        (end of stream, an error, stray bytes) means the connection is over."""
        try:
            data = await _receive(stream)
        except NetworkError as exc:
            peer.interrupt(str(exc))
        else:
            peer.interrupt("unexpected bytes from the peer" if data else "closed by the peer")

    def _drop_queued(self, peer: _Peer, reason: DropReason, detail: str) -> None:
        envelopes, _ = peer.take()
        for envelope in envelopes:
            self._dropped(envelope, reason, detail)
