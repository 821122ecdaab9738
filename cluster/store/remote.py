"""The embedded store shared over the network.

``StoreServer`` is an actor that owns an ``EmbeddedStore`` and serves the ``Store*``
requests of ``protocol.store``; ``RemoteStore`` is the client side, a ``MetadataStore``
whose sessions live on another node (another process, over TCP). Like ZooKeeper, the
server expires a session that has not been heard from for its timeout: a client process
that is killed loses its ephemerals once the timeout passes, a clean close loses them at
once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from actors.runtime.actor import Actor, Context, Node
from actors.zk.store import HeldSessions, MetadataStore, StoreSession, new_event_stream
from cluster.store.embedded import EmbeddedStore
from protocol.base import ActorRef, Message
from protocol.errors import (
    AskTimeoutError,
    ConnectionLossError,
    RemoteError,
    SessionExpiredError,
    StoreClosedError,
    StoreError,
    TransactionFailedError,
    store_error,
)
from protocol.store import (
    OpResult,
    SessionEvent,
    SessionState,
    Stat,
    StoreChildren,
    StoreChildrenReply,
    StoreCloseSession,
    StoreCreate,
    StoreDataReply,
    StoreDelete,
    StoreDone,
    StoreEvent,
    StoreExists,
    StoreExpireSession,
    StoreFailure,
    StoreGet,
    StoreHeartbeat,
    StoreMulti,
    StoreMultiReply,
    StoreOp,
    StoreOpenSession,
    StorePathReply,
    StoreSessionOpened,
    StoreSet,
    StoreStatReply,
    WatchEvent,
)

STORE_ACTOR = "store"
INBOX_ACTOR = "store-sessions"
"""The actor of a ``RemoteStore``'s node that the server pushes session events to."""


class StoreTick(Message, frozen=True, kw_only=True):
    """Timer event of the store server: time to expire silent sessions."""

    local_only = True


@dataclass
class _Served:
    session: StoreSession
    owner: ActorRef
    last_heard: float


class StoreServer(Actor):
    """Serves an ``EmbeddedStore`` to sessions on other nodes."""

    def __init__(
        self,
        store: EmbeddedStore,
        name: str = STORE_ACTOR,
        *,
        tick: float = 0.5,
        owns_store: bool = True,
    ) -> None:
        super().__init__(name)
        self.store = store
        self._owns_store = owns_store
        self._tick = tick
        self._served: dict[int, _Served] = {}

    async def on_start(self) -> None:
        self.start_soon(self._ticker)

    async def on_stop(self) -> None:
        if self._owns_store:
            await self.store.aclose()

    async def _ticker(self) -> None:
        while True:
            await self.clock.sleep(self._tick)
            self.send_self(StoreTick())

    async def _pump(self, served: _Served) -> None:
        """Forward the session's watch and session events to its owner, in order; then
        close the stream (the server is its only reader), so the store forgets the
        session."""
        with served.session.events as events:
            async for event in events:
                self.node.send(self.ref, served.owner, event)

    async def receive(self, msg: Message, ctx: Context) -> Message | None:
        now = self.clock.now()
        match msg:
            case StoreTick():
                await self._expire_silent(now)
                return None
            case StoreOpenSession(timeout=timeout, name=name):
                session = await self.store.open_session(timeout=timeout, name=name)
                served = _Served(session, ActorRef(msg.owner_node, msg.owner_actor), now)
                self._served[session.session_id] = served
                self.start_soon(self._pump, served)
                return StoreSessionOpened(session_id=session.session_id, timeout=session.timeout)
            case StoreHeartbeat(session_id=sid):
                if sid in self._served:
                    self._served[sid].last_heard = now
                return None
            case StoreExpireSession(session_id=sid):
                self._served.pop(sid, None)
                await self.store.expire_session(sid)
                return StoreDone()
        return await self._call(msg, now)

    async def _call(self, msg: Message, now: float) -> Message:
        sid = getattr(msg, "session_id", None)
        served = self._served.get(sid) if isinstance(sid, int) else None
        if served is None:
            return StoreFailure(error="SessionExpiredError", message=f"no session {sid}")
        served.last_heard = now
        s = served.session
        try:
            match msg:
                case StoreCreate():
                    path = await s.create(
                        msg.path,
                        msg.data,
                        ephemeral=msg.ephemeral,
                        sequential=msg.sequential,
                        make_parents=msg.make_parents,
                    )
                    return StorePathReply(path=path)
                case StoreGet():
                    data, stat = await s.get(msg.path, watch=msg.watch)
                    return StoreDataReply(data=data, stat=stat)
                case StoreSet():
                    return StoreStatReply(stat=await s.set(msg.path, msg.data, version=msg.version))
                case StoreDelete():
                    await s.delete(msg.path, version=msg.version, recursive=msg.recursive)
                    return StoreDone()
                case StoreExists():
                    return StoreStatReply(stat=await s.exists(msg.path, watch=msg.watch))
                case StoreChildren():
                    return StoreChildrenReply(children=await s.children(msg.path, watch=msg.watch))
                case StoreMulti():
                    return StoreMultiReply(results=await s.multi(msg.ops))
                case StoreCloseSession():
                    self._served.pop(s.session_id, None)
                    await s.close()
                    return StoreDone()
        except TransactionFailedError as exc:
            names = tuple(None if r is None else type(r).__name__ for r in exc.results)
            return StoreFailure(error=type(exc).__name__, message=str(exc), op_errors=names)
        except StoreError as exc:
            return StoreFailure(error=type(exc).__name__, message=str(exc))
        raise TypeError(f"store server cannot handle {type(msg).__name__}")

    async def _expire_silent(self, now: float) -> None:
        for sid in sorted(self._served):
            served = self._served[sid]
            if now - served.last_heard > served.session.timeout:
                del self._served[sid]
                await self.store.expire_session(sid)


class _SessionInbox(Actor):
    """Receives the events the server pushes for the live sessions of one ``RemoteStore``;
    a session leaves it when it ends (what arrives for it later is dropped)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.sessions: dict[int, RemoteSession] = {}

    async def receive(self, msg: Message, ctx: Context) -> Message | None:
        if isinstance(msg, WatchEvent | SessionEvent):
            session = self.sessions.get(msg.session_id)
            if session is not None:
                session._push(msg)
        return None


class RemoteSession(StoreSession):
    def __init__(self, store: RemoteStore, session_id: int, timeout: float) -> None:
        self._store = store
        self._id = session_id
        self._timeout = timeout
        self._send: MemoryObjectSendStream[StoreEvent]
        self._recv: MemoryObjectReceiveStream[StoreEvent]
        self._send, self._recv = new_event_stream()
        self._state = SessionState.CONNECTED
        self._heartbeat_scope = anyio.CancelScope()

    @property
    def session_id(self) -> int:
        return self._id

    @property
    def timeout(self) -> float:
        return self._timeout

    @property
    def events(self) -> MemoryObjectReceiveStream[StoreEvent]:
        return self._recv

    def _push(self, event: StoreEvent) -> None:
        if isinstance(event, SessionEvent):
            self._set_state(event.state)
            return
        if self._state is SessionState.CONNECTED:
            self._send.send_nowait(event)

    def _set_state(self, state: SessionState) -> None:
        if state is self._state or self._state in (SessionState.EXPIRED, SessionState.CLOSED):
            return
        self._state = state
        self._send.send_nowait(SessionEvent(session_id=self._id, state=state))
        if state in (SessionState.EXPIRED, SessionState.CLOSED):
            self._heartbeat_scope.cancel()
            self._send.close()
            self._store._forget(self._id)

    def _discard(self) -> None:
        self._heartbeat_scope.cancel()
        self._send.close()
        self._recv.close()
        self._store._forget(self._id)

    async def heartbeat(self) -> None:
        with self._heartbeat_scope:
            while True:
                await self._store.node.clock.sleep(self._timeout / 3)
                self._store.node.tell(self._store.server, StoreHeartbeat(session_id=self._id))

    async def _call(self, request: Message) -> Message:
        if self._state is SessionState.EXPIRED:
            raise SessionExpiredError(f"session {self._id} has expired")
        if self._state is SessionState.CLOSED:
            raise StoreClosedError(f"session {self._id} is closed")
        try:
            reply = await self._store.node.ask(self._store.server, request, timeout=self._timeout)
        except AskTimeoutError:
            self._set_state(SessionState.SUSPENDED)
            raise ConnectionLossError(
                f"store {self._store.server} did not answer within {self._timeout}s"
            ) from None
        except RemoteError as exc:
            raise StoreError(str(exc)) from None
        if self._state is SessionState.SUSPENDED:
            self._set_state(SessionState.CONNECTED)
        if isinstance(reply, StoreFailure):
            if reply.error == "SessionExpiredError":
                self._set_state(SessionState.EXPIRED)
            if reply.op_errors:
                raise TransactionFailedError(
                    tuple(
                        None if e is None else store_error(e, reply.message)
                        for e in reply.op_errors
                    )
                )
            raise store_error(reply.error, reply.message)
        return reply

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        reply = await self._call(
            StoreCreate(
                session_id=self._id,
                path=path,
                data=data,
                ephemeral=ephemeral,
                sequential=sequential,
                make_parents=make_parents,
            )
        )
        assert isinstance(reply, StorePathReply)
        return reply.path

    async def get(self, path: str, *, watch: bool = False) -> tuple[bytes, Stat]:
        reply = await self._call(StoreGet(session_id=self._id, path=path, watch=watch))
        assert isinstance(reply, StoreDataReply)
        return reply.data, reply.stat

    async def set(self, path: str, data: bytes, *, version: int = -1) -> Stat:
        reply = await self._call(
            StoreSet(session_id=self._id, path=path, data=data, version=version)
        )
        assert isinstance(reply, StoreStatReply)
        assert reply.stat is not None
        return reply.stat

    async def delete(self, path: str, *, version: int = -1, recursive: bool = False) -> None:
        await self._call(
            StoreDelete(session_id=self._id, path=path, version=version, recursive=recursive)
        )

    async def exists(self, path: str, *, watch: bool = False) -> Stat | None:
        reply = await self._call(StoreExists(session_id=self._id, path=path, watch=watch))
        assert isinstance(reply, StoreStatReply)
        return reply.stat

    async def children(self, path: str, *, watch: bool = False) -> tuple[str, ...]:
        reply = await self._call(StoreChildren(session_id=self._id, path=path, watch=watch))
        assert isinstance(reply, StoreChildrenReply)
        return reply.children

    async def multi(self, ops: Sequence[StoreOp]) -> tuple[OpResult, ...]:
        reply = await self._call(StoreMulti(session_id=self._id, ops=tuple(ops)))
        assert isinstance(reply, StoreMultiReply)
        return reply.results

    async def close(self) -> None:
        if self._state in (SessionState.CLOSED, SessionState.EXPIRED):
            return
        # Unreachable or already gone: the server expires it after its timeout.
        with contextlib.suppress(StoreError):
            await self._call(StoreCloseSession(session_id=self._id))
        self._set_state(SessionState.CLOSED)


class RemoteStore(MetadataStore):
    """A ``MetadataStore`` whose sessions are served by a ``StoreServer`` on another node."""

    def __init__(self, node: Node, server: ActorRef) -> None:
        self.node = node
        self.server = server
        self._sessions: HeldSessions[RemoteSession] = HeldSessions()
        self._inbox = _SessionInbox(INBOX_ACTOR)
        self._inbox_spawned = False

    async def open_session(
        self,
        *,
        timeout: float = 18.0,
        name: str = "",
    ) -> StoreSession:
        if not self._inbox_spawned:
            self._inbox_spawned = True
            await self.node.spawn(self._inbox)
        try:
            reply = await self.node.ask(
                self.server,
                StoreOpenSession(
                    timeout=timeout,
                    name=name,
                    owner_node=self.node.node_id,
                    owner_actor=self._inbox.name,
                ),
                timeout=timeout,
            )
        except AskTimeoutError:
            raise ConnectionLossError(f"store {self.server} did not answer") from None
        assert isinstance(reply, StoreSessionOpened)
        session = RemoteSession(self, reply.session_id, reply.timeout)
        self._inbox.sessions[session.session_id] = session
        self.node.task_group.start_soon(session.heartbeat)
        self._sessions.add(session)
        return session

    async def expire_session(self, session_id: int) -> None:
        await self.node.ask(self.server, StoreExpireSession(session_id=session_id))

    @property
    def held_sessions(self) -> int:
        """How many sessions opened here this client still holds (see ``HeldSessions``)."""
        return self._sessions.count()

    async def aclose(self) -> None:
        for session in self._sessions:
            await session.close()
        await self._sessions.release_all()

    def _forget(self, session_id: int) -> None:
        self._inbox.sessions.pop(session_id, None)

    def discard(self) -> None:
        """Drop every session locally without telling the server, as a crashed process
        does: the server expires them once their timeout passes."""
        for session in self._sessions:
            session._discard()
