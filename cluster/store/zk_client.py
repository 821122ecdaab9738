"""aiozk's connection and session, subclassed where its behaviour does not suit us.

``AiozkSession`` reconnects, reports its state changes and watch notifications to its
owner (a ``SessionOwner``: the ``ZooKeeperSession`` in ``cluster.store.zookeeper``) and
decides nothing itself; ``_Connection`` notices its own death, reads replies in chunks and
records watch registrations in wire order. Each workaround, with the aiozk behaviour it
replaces and the test that pins it, is in docs/zookeeper-adapter.md.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from aiozk import exc as zk_exc
from aiozk import protocol as zk_proto
from aiozk.connection import Connection
from aiozk.retry import RetryPolicy
from aiozk.session import Session
from aiozk.states import SessionStateMachine, States

from actors.runtime.clock import Clock
from cluster.store import _jute
from protocol.errors import BadArgumentsError

# aiozk logs every connection loss at ERROR with a traceback (docs/zookeeper-adapter.md,
# "aiozk's logger").
logging.getLogger("aiozk").setLevel(logging.CRITICAL)

MAX_PACKET = 0xFFFFF  # the server's jute.maxbuffer: a longer request drops the connection
_REQUEST_OVERHEAD = 1024  # more than a create's or set's bytes besides its path and data
CONNECT_TIMEOUT = 2.0  # one connection attempt: TCP connect, srvr handshake, reconnect
RETRY_FIRST = 0.05  # reconnect backoff: first pause, doubling up to ...
_RETRY_MAX = 0.5  # ... this (aiozk: 2**n seconds up to 60)
CLOSE_TIMEOUT = 2.0  # the CloseRequest of a clean close
CALL_FRACTION = 2 / 3  # a call's bound, as a fraction of the session timeout
_SIZE = struct.Struct("!i")  # the length prefix of every frame
_READ_CHUNK = 256 * 1024  # bytes asked of the socket at once (many pipelined replies)
_REPLY_HEADER = struct.Struct("!iqi")  # xid, zxid, error code
_REPLY_HEADER_SIZE = _REPLY_HEADER.size


def check_packet(request: Any, *, path: str = "", data: bytes | None = None) -> None:
    """Refuse a request over the server's buffer. One carrying only ``path`` and ``data``
    (a create or set) is measured without being serialized when it is far below."""
    if data is not None and 4 * len(path) + len(data) + _REQUEST_OVERHEAD < MAX_PACKET:
        return
    check_serialized(len(request.serialize(0)))


def check_serialized(size: int) -> None:
    """Refuse a serialized request over the server's buffer."""
    if size > MAX_PACKET:
        raise BadArgumentsError(f"request of {size} bytes is over ZooKeeper's {MAX_PACKET}")


def discard(conn: Any) -> None:
    """Drop an aiozk connection now: pending requests fail with ``ConnectError``, its read
    loop is cancelled and its socket closed. Synchronous, idempotent."""
    if conn is None:
        return
    conn.closing = True
    task = conn.read_loop_task
    if task is not None and not task.done() and task is not asyncio.current_task():
        task.cancel()
    conn.abort()
    if conn.writer is not None:
        conn.writer.close()


class SessionOwner(Protocol):
    """What ``AiozkSession`` reports to, and asks, the session adapter that owns it. Its
    hooks run in aiozk's tasks (the repair loop, the heartbeat) or in the read loop."""

    @property
    def kemu_clock(self) -> Clock: ...

    def kemu_transition(self, previous: str, state: str) -> None:
        """aiozk's session state changed."""

    def kemu_notification(self, event: Any) -> None:
        """A watch notification, read off the wire in order."""

    async def kemu_reconnected(self) -> None:
        """Right after a (re)connection, before anything else is read from it."""

    async def kemu_hold_reconnect(self) -> None:
        """The repair loop waits here before reconnecting."""

    def kemu_wants_connection(self) -> bool:
        """Whether the repair loop should (re)connect at all."""

    def kemu_expiring(self) -> bool:
        """Whether the session is only being reconnected to close it on the server."""

    def kemu_task_failed(self, task: str, err: Exception) -> None:
        """One of aiozk's tasks failed with ``err``."""


class _Connection(Connection):  # type: ignore[misc]  # aiozk is untyped
    """An aiozk connection that reports its own death ("Connection loss"), records the last
    zxid the server replied with, and runs watch registrations in wire order ("Watches")."""

    def __init__(self, host: str, port: int, session: AiozkSession) -> None:
        super().__init__(
            host, port, watch_handler=session.event_dispatch, read_timeout=session.read_timeout
        )
        self._session = session
        self._on_reply: dict[int, Callable[[Any], None]] = {}
        self._inbox = bytearray()  # read off the socket, not yet taken as replies

    def send(self, request: Any, xid: int | None = None) -> Any:
        future = super().send(request, xid=xid)
        on_reply = getattr(request, "kemu_on_reply", None)
        if on_reply is not None and xid is not None and not future.done():
            self._on_reply[xid] = on_reply
        return future

    def send_pipelined(self, requests: Sequence[tuple[int, Any, bytes]]) -> list[Any]:
        """Pipelining: register ``(xid, request, serialized)`` requests, in order, and write
        them to the socket at once (one write instead of one per request). Returns one
        future per request, as ``send`` does; on a closing connection they fail at once."""
        loop = asyncio.get_running_loop()
        futures = []
        frames = []
        for xid, request, payload in requests:
            future = loop.create_future()
            futures.append(future)
            if self.closing:
                future.set_exception(zk_exc.ConnectError(self.host, self.port))
                continue
            self.opcode_xref[xid] = request.opcode
            self.pending[xid] = future
            on_reply = getattr(request, "kemu_on_reply", None)
            if on_reply is not None:
                self._on_reply[xid] = on_reply
            frames.append(_SIZE.pack(len(payload)))
            frames.append(payload)
        if frames:
            try:
                self.writer.write(b"".join(frames))
            except Exception:  # as aiozk's send: the connection is dropped, futures fail
                self.abort()
        return futures

    async def _frame(self) -> bytes:
        """Pipelining: the next reply (without its length prefix), cut from what was read in
        chunks (aiozk reads each reply in three bounded reads, a task per read through
        ``asyncio.wait_for``; pipelined replies come many per chunk). As aiozk: waiting for
        a reply to start has no bound, the rest of it must come within the read timeout;
        a closed socket ends the read loop."""
        inbox = self._inbox
        while len(inbox) < _SIZE.size:
            chunk = await self.reader.read(_READ_CHUNK)
            if not chunk:
                raise ConnectionAbortedError
            inbox += chunk
        (size,) = _SIZE.unpack_from(inbox)
        end = _SIZE.size + size
        if len(inbox) < end:
            try:
                async with asyncio.timeout(self.read_timeout):
                    while len(inbox) < end:
                        chunk = await self.reader.read(max(end - len(inbox), _READ_CHUNK))
                        if not chunk:
                            raise zk_exc.UnfinishedRead
                        inbox += chunk
            except TimeoutError:
                raise zk_exc.UnfinishedRead from None
        frame = bytes(inbox[_SIZE.size : end])
        del inbox[:end]
        return frame

    async def read_response(self, initial_connect: bool = False) -> Any:
        # aiozk's, with replies cut from chunks and a multi's, a child listing's and a
        # read's parsed by ``_jute`` ("Pipelining", "Multi-ops"); connect and close replies
        # have no reply header.
        frame = await self._frame()
        if initial_connect or self.pending_specials[zk_proto.CLOSE_XID]:
            return None, None, zk_proto.ConnectResponse.deserialize(frame)
        xid, zxid, error_code = _REPLY_HEADER.unpack_from(frame)
        response: Any
        if error_code:
            self.opcode_xref.pop(xid)
            response = zk_exc.get_response_error(error_code)
        elif xid == zk_proto.WATCH_XID:
            response = zk_proto.WatchEvent.deserialize(frame[_REPLY_HEADER_SIZE:])
        else:
            opcode = self.opcode_xref.pop(xid)
            payload = frame[_REPLY_HEADER_SIZE:]
            if opcode == _jute.OP_MULTI:
                response = _jute.parse_multi_reply(payload)
            elif opcode == _jute.OP_GET_CHILDREN:
                response = _jute.parse_children_reply(payload)
            elif opcode == _jute.OP_GET_DATA:
                response = _jute.parse_data_reply(payload)
            else:
                response = zk_proto.response_xref[opcode].deserialize(payload)
        if xid is not None and xid > 0:
            if zxid is not None and zxid > self._session.kemu_last_zxid:
                self._session.kemu_last_zxid = zxid
            on_reply = self._on_reply.pop(xid, None)
            if on_reply is not None:
                on_reply(response)
        return xid, zxid, response

    async def read_loop(self) -> None:
        # aiozk's loop returns on EOF without a word; an exception out of it (a reply it
        # cannot match, a bug in our notification handling) ends the connection too.
        try:
            await super().read_loop()
        except Exception as err:
            self._session.kemu_owner.kemu_task_failed("zookeeper_read_loop", err)
        if not self.closing:
            self.abort()
            self._session.kemu_connection_lost(self)


class RawMulti:
    """A multi-op request already encoded ("Multi-ops"), sent through aiozk as its own
    requests are: ``Session.send`` and ``Connection.send`` only use these members."""

    __slots__ = ("_ops",)
    opcode = _jute.OP_MULTI
    special_xid = None
    writes_data = True

    def __init__(self, ops: list[bytes]) -> None:
        self._ops = ops

    def serialize(self, xid: int | None = None) -> bytes:
        return _jute.multi_request(xid or 0, self._ops)


class _StateMachine(SessionStateMachine):  # type: ignore[misc]  # aiozk is untyped
    """aiozk's session states, with a hook called after every transition."""

    def __init__(self, session: Any, hook: Callable[[str, str], None]) -> None:
        super().__init__(session=session)
        self._hook = hook

    def transition_to(self, state: str) -> None:
        previous = self.current_state
        super().transition_to(state)
        self._hook(previous, state)


class _HandshakeFailed(Exception):
    """The session handshake failed without a verdict on the session: try again."""


class AiozkSession(Session):  # type: ignore[misc]  # aiozk is untyped
    """aiozk's session with our retry policy, reconnection, watches and expiry
    (docs/zookeeper-adapter.md). ``owner`` decides; this class only reports."""

    # Set by aiozk's __init__; declared for mypy.
    conn: Any
    timeout: Any
    session_id: Any
    password: Any

    def __init__(self, servers: str, timeout: float, owner: SessionOwner) -> None:
        super().__init__(
            servers,
            timeout,
            RetryPolicy.n_times(1),  # no resend after a reconnect
            False,  # allow_read_only
            None,  # read_timeout: aiozk's default (3 s per partial read)
        )
        self.state = _StateMachine(self, owner.kemu_transition)
        self.kemu_owner = owner
        self.kemu_last_zxid = 0
        self._next_host = 0
        self._failures = 0

    # -- connecting ("Reconnection")

    async def repair_loop(self) -> None:
        owner = self.kemu_owner
        while not self.closing:
            await self.state.wait_for(States.SUSPENDED, States.LOST)
            await owner.kemu_hold_reconnect()
            if self.closing or not owner.kemu_wants_connection():
                return
            await self.find_server(allow_read_only=False)
            try:
                await asyncio.wait_for(self.establish_session(), self.timeout)
            except zk_exc.SessionLost:  # the server has no such session: owner notified
                discard(self.conn)
                continue
            except (TimeoutError, _HandshakeFailed, OSError, zk_exc.ZKError):
                discard(self.conn)
                self._failures += 1
                continue
            self._failures = 0
            self.state.transition_to(States.CONNECTED)
            self.conn.start_read_loop()
            await self.set_existing_watches()

    async def find_server(self, allow_read_only: bool) -> None:
        """Try each server in turn (round robin, no global RNG) with a short backoff."""
        delay = RETRY_FIRST
        if self._failures:
            await self.kemu_owner.kemu_clock.sleep(min(_RETRY_MAX, delay * 2**self._failures))
        while True:
            for _ in range(len(self.hosts)):
                host, port = self.hosts[self._next_host % len(self.hosts)]
                self._next_host += 1
                conn = await self.make_connection(host, port)
                if conn is not None:
                    old, self.conn = self.conn, conn
                    if old is not conn:
                        discard(old)
                    return
            await self.kemu_owner.kemu_clock.sleep(delay)
            delay = min(delay * 2, _RETRY_MAX)

    async def make_connection(self, host: str, port: Any) -> Any:
        conn = _Connection(host, int(port), self)
        try:
            await asyncio.wait_for(conn.connect(), CONNECT_TIMEOUT)
        except (TimeoutError, OSError, zk_exc.ZKError):
            discard(conn)
            return None
        return conn

    async def establish_session(self) -> None:
        owner = self.kemu_owner
        reply = await self.conn.send_connect(
            zk_proto.ConnectRequest(
                protocol_version=0,
                # an old session is only being closed: any zxid will do
                last_seen_zxid=0 if owner.kemu_expiring() else self.kemu_last_zxid,
                timeout=int(self.timeout * 1000),
                session_id=self.session_id or 0,
                password=self.password,
                read_only=False,
            )
        )
        if reply is None:  # aiozk: read error; it would give up the session here
            raise _HandshakeFailed
        _, response = reply
        if response.session_id == 0:  # the server has no such session (any more)
            if self.state != States.LOST:
                self.state.transition_to(States.LOST)
            raise zk_exc.SessionLost
        self.session_id = response.session_id
        self.password = response.password
        self.timeout = response.timeout / 1000

    def kemu_connection_lost(self, conn: Any) -> None:
        """The read loop of ``conn`` ended without being asked to ("Connection loss")."""
        if conn is self.conn and not self.closing and self.state == States.CONNECTED:
            self.state.transition_to(States.SUSPENDED)

    def kemu_request_failed(self, conn: Any, err: BaseException) -> None:
        """A request sent on ``conn`` failed with ``err``: as aiozk's ``Session.send``, a
        write on a dead connection suspends the session."""
        if (
            isinstance(err, zk_exc.ConnectError)
            and conn is self.conn
            and self.state == States.CONNECTED
        ):
            self.state.transition_to(States.SUSPENDED)

    async def heartbeat(self) -> None:
        """aiozk's ping re-raises any failure but a connection loss or a timeout,
        and nobody awaits its task: an error reply (the session moved to another
        connection or expired under the ping) ended it with an exception never
        retrieved. Such a ping is traced and dropped; what the connection does next (the
        server closes it) is what the session goes by."""
        try:
            await super().heartbeat()
        except Exception as err:
            self.kemu_owner.kemu_task_failed("zookeeper_heartbeat", err)

    # -- watches ("Watches")

    def event_dispatch(self, event: Any) -> None:
        self.kemu_owner.kemu_notification(event)

    async def set_existing_watches(self) -> None:
        await self.kemu_owner.kemu_reconnected()
