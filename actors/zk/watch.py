"""Watch dispatch over a store session, as Kafka's ``ZooKeeperClient`` does it.

Kafka keeps a local table of handlers: *data handlers* by path (created / deleted / data
changed) and *child handlers* by path (children changed), plus *state handlers* told when
the session is lost and re-established. Registering a handler is purely local; the watch
itself is armed by the next read of that path: ``get``/``exists`` arm a data watch when a
data handler is registered, ``children`` arms a child watch when a child handler is. Every
handler therefore re-reads its path when it runs, which re-arms the watch. Handlers never
do work themselves: they only enqueue an event for their owner (the controller's event
queue, a broker's mailbox).

* ``WatchRouter``: the handler tables and the routing of one ``WatchEvent``.
* ``WatchedSession``: a ``StoreSession`` that arms watches the way Kafka does (by the
  registered handlers), so the typed operations of ``actors.zk.kafka_zk`` work unchanged.
* ``ZkConnection``: a broker's connection to the store. It owns the current session, runs
  one dispatcher task per session reading its ``events`` stream, and on expiry re-opens a
  session between the state handlers' ``before_initializing_session`` and
  ``after_initializing_session`` (Kafka's ``reinitialize``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Container, Sequence
from typing import Any, Protocol

import anyio
import structlog
from anyio.abc import TaskStatus

from actors.runtime.clock import Clock, RealClock
from actors.runtime.tracer import TraceFn
from actors.zk.store import ForwardingSession, MetadataStore, StoreSession
from protocol.errors import StoreError
from protocol.store import (
    SessionEvent,
    SessionState,
    Stat,
    WatchEvent,
    WatchKind,
)

log = structlog.get_logger("kemu.zk_watch")

REINITIALIZE_BACKOFF = 1.0
"""Seconds between attempts to open a new session after expiry (the store is down)."""


class DataHandler(Protocol):
    """Kafka's ``ZNodeChangeHandler``: told what happened to one path. Only enqueues."""

    def on_create(self) -> None: ...

    def on_delete(self) -> None: ...

    def on_change(self) -> None: ...


class ChildHandler(Protocol):
    """Kafka's ``ZNodeChildChangeHandler``: the children of one path changed. Only enqueues."""

    def on_children(self) -> None: ...


class StateHandler(Protocol):
    """Kafka's ``StateChangeHandler``: told around a session re-initialisation.

    ``before_initializing_session`` may wait (the controller waits until its ``Expire``
    event has started, so every earlier event has been processed before the new session
    exists); ``after_initializing_session`` only enqueues.
    """

    async def before_initializing_session(self) -> None: ...

    def after_initializing_session(self) -> None: ...

    def on_state(self, state: SessionState) -> None: ...


class DataWatch:
    """A data handler made of callables (the usual case: each one enqueues an event)."""

    __slots__ = ("_on_change", "_on_create", "_on_delete")

    def __init__(
        self,
        *,
        on_create: Callable[[], None] | None = None,
        on_delete: Callable[[], None] | None = None,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self._on_create = on_create
        self._on_delete = on_delete
        self._on_change = on_change

    def on_create(self) -> None:
        if self._on_create is not None:
            self._on_create()

    def on_delete(self) -> None:
        if self._on_delete is not None:
            self._on_delete()

    def on_change(self) -> None:
        if self._on_change is not None:
            self._on_change()


class ChildWatch:
    """A child handler made of one callable."""

    __slots__ = ("_on_children",)

    def __init__(self, on_children: Callable[[], None]) -> None:
        self._on_children = on_children

    def on_children(self) -> None:
        self._on_children()


class WatchRouter:
    """The handler tables (one data handler and one child handler per path, as in Kafka:
    registering again replaces) and the state handlers by name."""

    def __init__(self) -> None:
        self._data: dict[str, DataHandler] = {}
        self._child: dict[str, ChildHandler] = {}
        self._state: dict[str, StateHandler] = {}

    # -- registration (local only: the next read arms the watch)

    def register_data(self, path: str, handler: DataHandler) -> None:
        self._data[path] = handler

    def unregister_data(self, path: str) -> None:
        self._data.pop(path, None)

    def register_children(self, path: str, handler: ChildHandler) -> None:
        self._child[path] = handler

    def unregister_children(self, path: str) -> None:
        self._child.pop(path, None)

    def register_state(self, name: str, handler: StateHandler) -> None:
        self._state[name] = handler

    def unregister_state(self, name: str) -> None:
        self._state.pop(name, None)

    def has_data(self, path: str) -> bool:
        return path in self._data

    @property
    def watched_data(self) -> Container[str]:
        """The paths with a data handler (``has_data`` of a batch of reads)."""
        return self._data

    def has_children(self, path: str) -> bool:
        return path in self._child

    @property
    def state_handlers(self) -> tuple[StateHandler, ...]:
        return tuple(self._state[name] for name in sorted(self._state))

    # -- routing

    def route(self, event: WatchEvent) -> bool:
        """Call the handler registered for the event's path and kind; False if none is
        (the watch outlived its handler, e.g. after a resignation)."""
        match event.kind:
            case WatchKind.CHILDREN_CHANGED:
                child = self._child.get(event.path)
                if child is None:
                    return False
                child.on_children()
                return True
            case WatchKind.CREATED | WatchKind.DELETED | WatchKind.DATA_CHANGED:
                # As Kafka's watcher does, a deletion goes to the data handler only.
                data = self._data.get(event.path)
                if data is None:
                    return False
                if event.kind is WatchKind.CREATED:
                    data.on_create()
                elif event.kind is WatchKind.DELETED:
                    data.on_delete()
                else:
                    data.on_change()
                return True


class WatchedSession(ForwardingSession):
    """A session whose reads arm watches as Kafka's ``ZooKeeperClient.shouldWatch`` does:
    ``get``/``exists`` arm a data watch, and ``children`` a child watch, whenever a
    handler is registered for the path (or the caller asks explicitly)."""

    def __init__(self, session: StoreSession, router: WatchRouter) -> None:
        super().__init__(session)
        self._router = router

    @property
    def raw(self) -> StoreSession:
        return self.inner

    async def get(self, path: str, *, watch: bool = False) -> tuple[bytes, Stat]:
        return await self.inner.get(path, watch=watch or self._router.has_data(path))

    async def exists(self, path: str, *, watch: bool = False) -> Stat | None:
        return await self.inner.exists(path, watch=watch or self._router.has_data(path))

    async def children(self, path: str, *, watch: bool = False) -> tuple[str, ...]:
        return await self.inner.children(path, watch=watch or self._router.has_children(path))

    async def get_each(
        self, reads: Sequence[tuple[str, bool]]
    ) -> list[tuple[bytes, Stat] | StoreError]:
        watched = self._router.watched_data
        return await self.inner.get_each(
            [(path, watch or path in watched) for path, watch in reads]
        )


class ZkConnection:
    """One broker's connection to the metadata store (Kafka's ``ZooKeeperClient``).

    Start ``run`` in the node's task group (``await tg.start(conn.run)``): it opens the
    first session (unless one was given), reports readiness, then dispatches that
    session's events; after an expiry it runs the state handlers around opening a new
    session and dispatches that one. ``session`` is always the current session, wrapped
    so that reads arm the watches of registered handlers. Handlers survive session
    changes (the tables are local), watches do not: owners re-read to re-arm.
    """

    def __init__(
        self,
        store: MetadataStore | None,
        *,
        name: str = "",
        session_timeout: float = 18.0,
        clock: Clock | None = None,
        session: StoreSession | None = None,
        trace: TraceFn | None = None,
    ) -> None:
        if store is None and session is None:
            raise ValueError("a ZkConnection needs a store or a session")
        self._store = store
        self.name = name
        self._session_timeout = session_timeout
        self._clock = clock or RealClock()
        self._trace = trace
        self.router = WatchRouter()
        self._session: WatchedSession | None = (
            WatchedSession(session, self.router) if session is not None else None
        )
        self.sessions_opened = 0
        self.running = False

    @property
    def session(self) -> WatchedSession:
        if self._session is None:
            raise RuntimeError(f"zk connection {self.name!r} has no session yet (start run)")
        return self._session

    # -- handler registration (delegates to the router)

    def register_data(self, path: str, handler: DataHandler) -> None:
        self.router.register_data(path, handler)

    def unregister_data(self, path: str) -> None:
        self.router.unregister_data(path)

    def register_children(self, path: str, handler: ChildHandler) -> None:
        self.router.register_children(path, handler)

    def unregister_children(self, path: str) -> None:
        self.router.unregister_children(path)

    def register_state(self, name: str, handler: StateHandler) -> None:
        self.router.register_state(name, handler)

    def unregister_state(self, name: str) -> None:
        self.router.unregister_state(name)

    async def register_data_and_check_existence(self, path: str, handler: DataHandler) -> bool:
        """Kafka's ``registerZNodeChangeHandlerAndCheckExistence``: register, then arm the
        data watch with an ``exists``; returns whether the node exists."""
        self.register_data(path, handler)
        return await self.session.exists(path) is not None

    # -- the dispatcher

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        if self.running:
            raise RuntimeError(f"zk connection {self.name!r} is already running")
        self.running = True
        try:
            if self._session is None:
                self._session = WatchedSession(await self._open(), self.router)
            task_status.started()
            while True:
                expired = await self._dispatch(self._session)
                if not expired or self._store is None:
                    return  # closed by its owner, or nothing to open a new session with
                # The dispatcher was the expired session's only reader: closing its stream
                # lets the store forget it.
                self._session.events.close()
                await self._reinitialize()
        finally:
            self.running = False

    async def _dispatch(self, session: WatchedSession) -> bool:
        """Route this session's events until it ends; True if it expired. Each event is
        its own error boundary: a failing handler is logged and the next event goes on."""
        async for event in session.events:
            if isinstance(event, WatchEvent):
                try:
                    routed = self.router.route(event)
                except Exception as exc:
                    self._failed("watch_handler_failed", exc, path=event.path)
                    continue
                if not routed:
                    self._emit("watch_unhandled", path=event.path, watch=event.kind.value)
                continue
            assert isinstance(event, SessionEvent)
            for handler in self.router.state_handlers:
                try:
                    handler.on_state(event.state)
                except Exception as exc:
                    self._failed("state_handler_failed", exc, state=event.state.value)
            if event.state is SessionState.EXPIRED:
                return True
            if event.state is SessionState.CLOSED:
                return False
        return False

    async def _reinitialize(self) -> None:
        self._emit("session_reinitializing")
        for handler in self.router.state_handlers:
            try:
                await handler.before_initializing_session()
            except Exception as exc:
                self._failed("state_handler_failed", exc, step="before_initializing_session")
        while True:
            try:
                raw = await self._open()
                break
            except StoreError as exc:
                self._emit("session_open_failed", error=type(exc).__name__)
                await self._clock.sleep(REINITIALIZE_BACKOFF)
        self._session = WatchedSession(raw, self.router)
        self._emit("session_reinitialized", session=raw.session_id)
        for handler in self.router.state_handlers:
            try:
                handler.after_initializing_session()
            except Exception as exc:
                self._failed("state_handler_failed", exc, step="after_initializing_session")

    async def _open(self) -> StoreSession:
        if self._store is None:
            raise RuntimeError(f"zk connection {self.name!r} was given a session, not a store")
        session = await self._store.open_session(timeout=self._session_timeout, name=self.name)
        self.sessions_opened += 1
        return session

    def _emit(self, type_: str, **fields: Any) -> None:
        if self._trace is not None:
            self._trace("event", type_, **fields)

    def _failed(self, type_: str, exc: Exception, **fields: Any) -> None:
        log.error(type_, connection=self.name, error=repr(exc), **fields)
        if self._trace is not None:
            self._trace("error", type_, error=type(exc).__name__, detail=str(exc), **fields)


async def _noop() -> None:
    return None


class StateCallbacks:
    """A state handler made of callables."""

    __slots__ = ("_after", "_before", "_on_state")

    def __init__(
        self,
        *,
        before: Callable[[], Awaitable[None]] | None = None,
        after: Callable[[], None] | None = None,
        on_state: Callable[[SessionState], None] | None = None,
    ) -> None:
        self._before = before or _noop
        self._after = after
        self._on_state = on_state

    async def before_initializing_session(self) -> None:
        await self._before()

    def after_initializing_session(self) -> None:
        if self._after is not None:
            self._after()

    def on_state(self, state: SessionState) -> None:
        if self._on_state is not None:
            self._on_state(state)
