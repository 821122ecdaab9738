"""The embedded metadata store: an in-memory ZooKeeper inside the process.

It keeps ZooKeeper's semantics (see ``actors.zk.store``) down to the details Kafka's
controller can observe:

* every write request takes one zxid, as ZooKeeper's transaction log does: a ``multi`` is
  one transaction (all its nodes share a czxid), closing or expiring a session is one
  transaction (its ephemerals go with that zxid), and a failed write still uses up its zxid
  (ZooKeeper logs an error transaction);
* a sequential node's suffix is the number of children ever created under its parent,
  ``%010d``: ZooKeeper's *internal* cversion, which counts creates only and which it
  reports as ``Stat.cversion = 2 * creates - num_children`` (creates plus deletes);
* watches are one-shot per (session, path, kind of watch) and fire in ZooKeeper's order (a
  create fires ``created`` on the node, then ``children_changed`` on its parent); deleting
  a node watched for both data and children sends that session a single ``deleted``, as the
  server suppresses the duplicate.

Sessions live until they are closed or expired: nothing here runs a timer. A session whose
owner dies is expired by whoever notices (``StoreServer`` for remote owners, chaos for
in-process ones) through ``expire_session``. There is no ``/zookeeper`` system node.

Everything is deterministic: session ids and zxids come from counters, times from the
injected clock, and nothing iterates a set of strings (whose order would depend on the hash
seed) without sorting it first. One ``_Server`` holds the tree; ``EmbeddedStore.chrooted``
gives more views of it, each under its own chroot, as several ZooKeeper clients with
different chroots share one ensemble.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import suppress
from enum import Enum
from typing import Any, ParamSpec, TypeVar, assert_never

import anyio.lowlevel
from anyio import BrokenResourceError, ClosedResourceError
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from actors.runtime.clock import Clock, RealClock
from actors.runtime.tracer import Tracer
from actors.zk.store import (
    HeldSessions,
    MetadataStore,
    StoreSession,
    check_data_size,
    new_event_stream,
    validate_path,
)
from protocol.errors import (
    BadArgumentsError,
    BadVersionError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
    StoreClosedError,
    StoreError,
    TransactionFailedError,
)
from protocol.store import (
    CheckOp,
    CheckResult,
    CreateOp,
    CreateResult,
    DeleteOp,
    DeleteResult,
    OpResult,
    SessionEvent,
    SessionState,
    SetDataOp,
    SetDataResult,
    Stat,
    StoreEvent,
    StoreOp,
    WatchEvent,
    WatchKind,
)
from protocol.trace import TraceKind

P = ParamSpec("P")
R = TypeVar("R")

ROOT = "/"


_CREATED = WatchKind.CREATED
_DELETED = WatchKind.DELETED
_DATA_CHANGED = WatchKind.DATA_CHANGED
_CHILDREN_CHANGED = WatchKind.CHILDREN_CHANGED

_Trigger = tuple[str, WatchKind]
"""A watch trigger recorded by a committed change: (full path, what happened)."""


# ----------------------------------------------------------------------------- paths


def _normalize_chroot(chroot: str) -> str:
    """'' for no chroot; otherwise a valid absolute path without a trailing slash."""
    if chroot in ("", ROOT):
        return ""
    validate_path(chroot)
    return chroot


def _split(full: str) -> tuple[str, str]:
    """(parent path, last component). A sequential path ending in '/' has an empty name."""
    cut = full.rfind("/")
    return (full[:cut] or ROOT), full[cut + 1 :]


def _join(parent: str, name: str) -> str:
    return parent + name if parent.endswith("/") else f"{parent}/{name}"


# ----------------------------------------------------------------------------- the tree


class _Node:
    """One znode. Its ``Stat`` is built on demand and cached until the node changes."""

    __slots__ = (
        "_stat",
        "children",
        "creates",
        "ctime",
        "czxid",
        "data",
        "mtime",
        "mzxid",
        "owner",
        "pzxid",
        "version",
    )

    def __init__(self, data: bytes, zxid: int, now: int, owner: int) -> None:
        self.data = data
        self.czxid = self.mzxid = self.pzxid = zxid
        self.ctime = self.mtime = now
        self.version = self.creates = 0
        self.owner = owner
        self.children: set[str] = set()
        self._stat: Stat | None = None

    def stat(self) -> Stat:
        if self._stat is None:
            self._stat = Stat(
                czxid=self.czxid,
                mzxid=self.mzxid,
                pzxid=self.pzxid,
                ctime=self.ctime,
                mtime=self.mtime,
                version=self.version,
                cversion=2 * self.creates - len(self.children),
                ephemeral_owner=self.owner,
                data_length=len(self.data),
                num_children=len(self.children),
            )
        return self._stat

    def touched(self) -> None:
        self._stat = None

    def save(self) -> tuple[bytes, int, int, int, int, int]:
        return (self.data, self.mzxid, self.pzxid, self.mtime, self.version, self.creates)

    def restore(self, saved: tuple[bytes, int, int, int, int, int]) -> None:
        self.data, self.mzxid, self.pzxid, self.mtime, self.version, self.creates = saved
        self._stat = None


class _Tree:
    """The znodes, keyed by full path, and the primitive changes ZooKeeper's DataTree makes.

    Each change records the watch triggers it causes in ``pending`` (the caller fires them
    once the request has committed) and, inside a transaction, how to undo it: a ``multi``
    is applied to the live tree and rolled back if one of its ops fails.
    """

    def __init__(self) -> None:
        self.nodes: dict[str, _Node] = {ROOT: _Node(b"", 0, 0, 0)}
        self.zxid = 0
        self.pending: list[_Trigger] = []
        self.ephemerals: dict[int, set[str]] = {}
        self._undo: list[Callable[[], None]] | None = None

    def next_zxid(self) -> int:
        self.zxid += 1
        return self.zxid

    def node(self, full: str) -> _Node:
        node = self.nodes.get(full)
        if node is None:
            raise NoNodeError(full)
        return node

    def create(
        self, full: str, data: bytes, *, owner: int, sequential: bool, zxid: int, now: int
    ) -> str:
        """Create ``full`` (plus the parent's creates count as suffix if sequential); checks in
        ZooKeeper's order: missing parent, existing node, ephemeral parent."""
        parent_path, name = _split(full)
        parent = self.nodes.get(parent_path)
        if parent is None:
            raise NoNodeError(parent_path)
        if sequential:
            name = f"{name}{parent.creates:010d}"
            full = f"{full}{parent.creates:010d}"
        if full in self.nodes:
            raise NodeExistsError(full)
        if parent.owner:
            raise NoChildrenForEphemeralsError(parent_path)
        self._remember(parent)
        self.nodes[full] = _Node(data, zxid, now, owner)
        parent.children.add(name)
        parent.creates += 1
        parent.pzxid = zxid
        parent.touched()
        if owner:
            self.ephemerals.setdefault(owner, set()).add(full)
        if self._undo is not None:
            self._undo.append(lambda: self._unlink(full, parent, name, owner))
        self.pending += ((full, _CREATED), (parent_path, _CHILDREN_CHANGED))
        return full

    def set(self, full: str, data: bytes, *, version: int, zxid: int, now: int) -> _Node:
        node = self.node(full)
        _check_version(full, node, version)
        self._remember(node)
        node.data = data
        node.version += 1
        node.mzxid = zxid
        node.mtime = now
        node.touched()
        self.pending.append((full, _DATA_CHANGED))
        return node

    def delete(self, full: str, *, version: int, zxid: int) -> None:
        """Delete one node; checks in ZooKeeper's order: missing, version, children."""
        if full == ROOT:
            raise BadArgumentsError("the root node cannot be deleted")
        node = self.node(full)
        _check_version(full, node, version)
        if node.children:
            raise NotEmptyError(full)
        parent_path, name = _split(full)
        parent = self.nodes[parent_path]
        self._remember(parent)
        self._unlink(full, parent, name, node.owner)
        parent.pzxid = zxid
        if self._undo is not None:
            self._undo.append(lambda: self._relink(full, node, parent, name))
        self.pending.append((full, _DELETED))
        self.pending.append((parent_path, _CHILDREN_CHANGED))

    def subtree(self, full: str) -> list[str]:
        """``full`` and everything under it, children before their parents, each level in
        reverse name order (as a deterministic ``deleteall``)."""
        order: list[str] = []
        stack = [full]
        while stack:
            path = stack.pop()
            order.append(path)
            stack.extend(_join(path, name) for name in sorted(self.nodes[path].children))
        order.reverse()
        return order

    # -- transactions

    def begin(self) -> None:
        self._undo = []

    def commit(self) -> None:
        self._undo = None

    def suspend(self) -> list[Callable[[], None]] | None:
        """Stop recording undo steps (for a transaction's last op); what ``resume`` takes."""
        undo, self._undo = self._undo, None
        return undo

    def resume(self, undo: list[Callable[[], None]] | None) -> None:
        self._undo = undo

    def rollback(self) -> None:
        undo, self._undo = self._undo or [], None
        for step in reversed(undo):
            step()

    def _remember(self, node: _Node) -> None:
        if self._undo is not None:
            saved = node.save()
            self._undo.append(lambda: node.restore(saved))

    def _unlink(self, full: str, parent: _Node, name: str, owner: int) -> None:
        del self.nodes[full]
        parent.children.discard(name)
        parent.touched()
        if owner:
            owned = self.ephemerals[owner]
            owned.discard(full)
            if not owned:
                del self.ephemerals[owner]

    def _relink(self, full: str, node: _Node, parent: _Node, name: str) -> None:
        self.nodes[full] = node
        parent.children.add(name)
        parent.touched()
        if node.owner:
            self.ephemerals.setdefault(node.owner, set()).add(full)


def _check_version(full: str, node: _Node, version: int) -> None:
    if version != -1 and version != node.version:
        raise BadVersionError(f"{full}: expected version {version}, found {node.version}")


# ----------------------------------------------------------------------------- watches


class _Watches:
    """ZooKeeper's two watch tables: path -> the sessions watching it, in arming order (a
    dict, so arming twice is one watch and the firing order is deterministic)."""

    def __init__(self) -> None:
        self.data: dict[str, dict[int, None]] = {}
        self.child: dict[str, dict[int, None]] = {}

    def arm(self, table: dict[str, dict[int, None]], full: str, session_id: int) -> None:
        watchers = table.get(full)
        if watchers is None:
            table[full] = {session_id: None}
        else:
            watchers[session_id] = None

    def disarm(self, table: dict[str, dict[int, None]], full: str, session_id: int) -> None:
        watchers = table.get(full)
        if watchers is not None:
            watchers.pop(session_id, None)
            if not watchers:
                del table[full]

    def take(self, full: str, kind: WatchKind) -> list[int]:
        """Remove and return the sessions a trigger fires for. A deletion fires data and
        child watches, but each session hears of it once (ZooKeeper's ``supress`` set)."""
        if kind is _CHILDREN_CHANGED:
            return list(self.child.pop(full, ()))
        fired = list(self.data.pop(full, ()))
        if kind is _DELETED:
            also = self.child.pop(full, None)
            if also:
                fired.extend(sid for sid in also if sid not in fired)
        return fired


# ----------------------------------------------------------------------------- server


class _Server:
    """What the views of one embedded ensemble share: the tree, the watches, the sessions,
    the zxid and session-id counters, the clock, the tracer and the injected latency."""

    def __init__(self, tracer: Tracer, clock: Clock, node: str) -> None:
        self.tree = _Tree()
        self.watches = _Watches()
        self.sessions: dict[int, EmbeddedSession] = {}
        self.tracer = tracer
        self.clock = clock
        self.node = node
        self.latency = 0.0
        self._last_session_id = 0

    def new_session_id(self) -> int:
        self._last_session_id += 1
        self.tree.next_zxid()  # createSession is a transaction
        return self._last_session_id

    def ensure_path(self, full: str) -> None:
        """Create ``full`` and its missing ancestors, persistent and empty, one transaction
        each (as Kafka's ``createRecursive`` does)."""
        if full == ROOT or full in self.tree.nodes:
            return
        self.ensure_path(_split(full)[0])
        zxid = self.tree.next_zxid()
        self.tree.create(full, b"", owner=0, sequential=False, zxid=zxid, now=self.clock.wall_ms())

    def fire_pending(self) -> None:
        """Deliver the watch events of everything committed since the last call, in order."""
        tree = self.tree
        if not tree.pending:
            return
        pending, tree.pending = tree.pending, []
        watches = self.watches
        if not watches.data and not watches.child:
            return
        for full, kind in pending:
            for sid in watches.take(full, kind):
                session = self.sessions.get(sid)
                if session is not None:
                    session.watch_fired(full, kind)

    def end_session(self, session: EmbeddedSession, state: SessionState) -> None:
        """Close or expire a session: drop its watches, delete its ephemerals in one
        transaction (firing other sessions' watches), then tell its owner and end its
        stream."""
        self.sessions.pop(session.session_id, None)
        session.drop_watches(self.watches)
        owned = self.tree.ephemerals.get(session.session_id, set())
        zxid = self.tree.next_zxid()
        for full in sorted(owned):
            self.tree.delete(full, version=-1, zxid=zxid)
            session.trace("delete_ephemeral", session.relative(full), "ok")
        self.fire_pending()
        session.finish(state)


# ----------------------------------------------------------------------------- sessions


class _Life(Enum):
    OPEN = "open"
    CLOSED = "closed"
    EXPIRED = "expired"


class EmbeddedSession(StoreSession):
    """A session on an ``EmbeddedStore``. Each call waits the store's latency, then runs to
    completion without yielding, so no other call interleaves with it: one request at a
    time, like ZooKeeper's request pipeline."""

    def __init__(
        self, store: EmbeddedStore, server: _Server, session_id: int, timeout: float, name: str
    ) -> None:
        self._store = store
        self._server = server
        self._id = session_id
        self._timeout = timeout
        self.name = name or f"session-{session_id}"
        self._chroot = store.chroot
        self._life = _Life.OPEN
        self._send: MemoryObjectSendStream[StoreEvent]
        self._recv: MemoryObjectReceiveStream[StoreEvent]
        self._send, self._recv = new_event_stream()
        self._data_watched: set[str] = set()
        self._child_watched: set[str] = set()

    # -- the StoreSession interface

    @property
    def session_id(self) -> int:
        return self._id

    @property
    def timeout(self) -> float:
        return self._timeout

    @property
    def events(self) -> MemoryObjectReceiveStream[StoreEvent]:
        return self._recv

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        await self._store._latency()
        return self._run(
            "create", path, self._create, path, data, ephemeral, sequential, make_parents
        )

    async def get(self, path: str, *, watch: bool = False) -> tuple[bytes, Stat]:
        await self._store._latency()
        return self._run("get", path, self._get, path, watch)

    async def set(self, path: str, data: bytes, *, version: int = -1) -> Stat:
        await self._store._latency()
        return self._run("set", path, self._set, path, data, version)

    async def delete(self, path: str, *, version: int = -1, recursive: bool = False) -> None:
        await self._store._latency()
        self._run("delete", path, self._delete, path, version, recursive)

    async def exists(self, path: str, *, watch: bool = False) -> Stat | None:
        await self._store._latency()
        return self._run("exists", path, self._exists, path, watch)

    async def children(self, path: str, *, watch: bool = False) -> tuple[str, ...]:
        await self._store._latency()
        return self._run("children", path, self._children, path, watch)

    async def multi(self, ops: Sequence[StoreOp]) -> tuple[OpResult, ...]:
        await self._store._latency()
        ops = tuple(ops)
        # Traced under the first op's path: in Kafka that is the /controller_epoch check.
        return self._run("multi", ops[0].path if ops else "", self._multi, ops)

    async def multi_each(
        self, batches: Sequence[Sequence[StoreOp]]
    ) -> list[tuple[OpResult, ...] | StoreError]:
        """Pipelined: without a configured latency, one scheduling point for the whole
        batch, then each multi as its own transaction (and trace), in order; with one,
        each waits it as a lone ``multi`` does."""
        if self._server.latency > 0:
            return await super().multi_each(batches)
        await anyio.lowlevel.checkpoint()
        outcomes: list[tuple[OpResult, ...] | StoreError] = []
        for each in batches:
            ops = tuple(each)
            try:
                outcomes.append(self._run("multi", ops[0].path if ops else "", self._multi, ops))
            except StoreError as exc:
                outcomes.append(exc)
        return outcomes

    async def create_each(self, creates: Sequence[tuple[str, bytes]]) -> list[str | StoreError]:
        """Pipelined as ``multi_each``: each create its own request (and trace), in order."""
        if self._server.latency > 0:
            return await super().create_each(creates)
        await anyio.lowlevel.checkpoint()
        outcomes: list[str | StoreError] = []
        for path, data in creates:
            try:
                outcomes.append(
                    self._run("create", path, self._create, path, data, False, False, False)
                )
            except StoreError as exc:
                outcomes.append(exc)
        return outcomes

    async def get_each(
        self, reads: Sequence[tuple[str, bool]]
    ) -> list[tuple[bytes, Stat] | StoreError]:
        """Pipelined as ``multi_each``: each read its own request (and trace), in order."""
        if self._server.latency > 0:
            return await super().get_each(reads)
        await anyio.lowlevel.checkpoint()
        outcomes: list[tuple[bytes, Stat] | StoreError] = []
        if self._life is not _Life.OPEN or self._chroot:
            for path, watch in reads:
                try:
                    outcomes.append(self._run("get", path, self._get, path, watch))
                except StoreError as exc:
                    outcomes.append(exc)
            return outcomes
        # ``_run`` of ``_get`` for each, inline: a new controller reads every partition's
        # state (100,000 reads at once). A read fires no watch, and nothing in this loop
        # ends the session.
        server = self._server
        nodes = server.tree.nodes
        emit = server.tracer.emit
        node_name, actor, session = server.node, self.name, self._id
        for path, watch in reads:
            node = nodes.get(path)
            try:
                validate_path(path)
                if node is None:
                    raise NoNodeError(path)
            except StoreError as exc:
                self.trace("get", path, type(exc).__name__)
                server.fire_pending()
                outcomes.append(exc)
                continue
            if watch:
                self._arm_data(path)
            outcomes.append((node.data, node.stat()))
            emit(
                TraceKind.STORE,
                node=node_name,
                actor=actor,
                type="get",
                path=path,
                result="ok",
                session=session,
            )
        return outcomes

    async def close(self) -> None:
        """Close at once, without waiting the latency and even from a cancelled scope: a
        node stopping gracefully must not leave its ephemerals behind (nothing here would
        ever time the session out)."""
        if self._life is _Life.OPEN:
            self.trace("close", "", "ok")
            self._server.end_session(self, SessionState.CLOSED)
        await anyio.lowlevel.cancel_shielded_checkpoint()

    # -- what the server calls

    def relative(self, full: str) -> str:
        """A full path as this session sees it, under its chroot."""
        if not self._chroot:
            return full
        return full[len(self._chroot) :] or ROOT

    def trace(self, op: str, path: str, result: str, **fields: Any) -> None:
        self._server.tracer.emit(
            TraceKind.STORE,
            node=self._server.node,
            actor=self.name,
            type=op,
            path=path,
            result=result,
            session=self._id,
            **fields,
        )

    def watch_fired(self, full: str, kind: WatchKind) -> None:
        if kind is _CHILDREN_CHANGED:
            self._child_watched.discard(full)
        elif kind is _DELETED:
            self._child_watched.discard(full)
            self._data_watched.discard(full)
        else:
            self._data_watched.discard(full)
        path = self.relative(full)
        self.trace("watch", path, "ok", event=kind.value)
        self._deliver(WatchEvent(session_id=self._id, path=path, kind=kind))

    def drop_watches(self, watches: _Watches) -> None:
        for full in self._data_watched:
            watches.disarm(watches.data, full, self._id)
        for full in self._child_watched:
            watches.disarm(watches.child, full, self._id)
        self._data_watched.clear()
        self._child_watched.clear()

    def finish(self, state: SessionState) -> None:
        """The session is over: tell the owner, then end the stream (buffered events stay
        readable until ``EndOfStream``)."""
        self._life = _Life.CLOSED if state is SessionState.CLOSED else _Life.EXPIRED
        self._deliver(SessionEvent(session_id=self._id, state=state))
        self._send.close()

    # -- internals

    def _deliver(self, event: StoreEvent) -> None:
        # If the owner closed its end of the stream, it no longer listens.
        with suppress(BrokenResourceError, ClosedResourceError):
            self._send.send_nowait(event)

    def _run(self, op: str, path: str, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run one request: check the session, apply it, trace it, then fire the watches
        its committed changes triggered (even if a later step of it failed, as when
        ``make_parents`` created parents before the node itself was refused)."""
        server = self._server
        try:
            if self._life is not _Life.OPEN:
                self._refuse()
            result = fn(*args, **kwargs)
        except StoreError as exc:
            self.trace(op, path, type(exc).__name__)
            server.fire_pending()
            raise
        # The hot path: emit directly rather than through ``trace``, and with no sink only
        # count the event (a bulk deletion makes 31,000 fenced multis).
        tracer = server.tracer
        if tracer.enabled:
            tracer.emit(
                TraceKind.STORE,
                node=server.node,
                actor=self.name,
                type=op,
                path=path,
                result="ok",
                session=self._id,
            )
        else:
            tracer.skip()
        if server.tree.pending:
            server.fire_pending()
        return result

    def _refuse(self) -> None:
        if self._life is _Life.EXPIRED:
            raise SessionExpiredError(f"session {self._id} has expired")
        raise StoreClosedError(f"session {self._id} is closed")

    def _full(self, path: str, *, sequential: bool = False) -> str:
        """The full path of ``path``. A sequential child of '/' stays inside the chroot
        (ZooKeeper's client would name a sibling of the chroot instead)."""
        if not self._chroot:
            return path
        return self._chroot if path == ROOT and not sequential else self._chroot + path

    def _create(
        self, path: str, data: bytes, ephemeral: bool, sequential: bool, make_parents: bool
    ) -> str:
        validate_path(path, sequential=sequential)
        check_data_size(data)
        full = self._full(path, sequential=sequential)
        server = self._server
        if make_parents:
            server.ensure_path(_split(full)[0])
        created = server.tree.create(
            full,
            data,
            owner=self._id if ephemeral else 0,
            sequential=sequential,
            zxid=server.tree.next_zxid(),
            now=server.clock.wall_ms(),
        )
        return self.relative(created)

    def _get(self, path: str, watch: bool) -> tuple[bytes, Stat]:
        validate_path(path)
        full = self._full(path)
        node = self._server.tree.node(full)
        if watch:
            self._arm_data(full)
        return node.data, node.stat()

    def _set(self, path: str, data: bytes, version: int) -> Stat:
        validate_path(path)
        check_data_size(data)
        tree = self._server.tree
        node = tree.set(
            self._full(path), data, version=version, zxid=tree.next_zxid(), now=self._now()
        )
        return node.stat()

    def _delete(self, path: str, version: int, recursive: bool) -> None:
        validate_path(path)
        if path == ROOT:
            raise BadArgumentsError("the root node cannot be deleted")
        tree = self._server.tree
        full = self._full(path)
        if not recursive:
            tree.delete(full, version=version, zxid=tree.next_zxid())
            return
        _check_version(full, tree.node(full), version)
        for each in tree.subtree(full):
            tree.delete(each, version=-1, zxid=tree.next_zxid())

    def _exists(self, path: str, watch: bool) -> Stat | None:
        validate_path(path)
        full = self._full(path)
        if watch:
            self._arm_data(full)
        node = self._server.tree.nodes.get(full)
        return None if node is None else node.stat()

    def _children(self, path: str, watch: bool) -> tuple[str, ...]:
        validate_path(path)
        full = self._full(path)
        node = self._server.tree.node(full)
        if watch:
            self._child_watched.add(full)
            self._server.watches.arm(self._server.watches.child, full, self._id)
        return tuple(sorted(node.children))

    def _multi(self, ops: tuple[StoreOp, ...]) -> tuple[OpResult, ...]:
        """All or nothing, as one transaction (one zxid): on the first failing op, undo the
        ops before it and drop the watch triggers they recorded. The last op records no
        undo (it changes nothing when it fails, and nothing follows it): a fenced write,
        the controller epoch's check then one change, records none."""
        tree = self._server.tree
        zxid = tree.next_zxid()
        now = self._now()
        mark = len(tree.pending)
        results: list[OpResult] = []
        last = len(ops) - 1
        tree.begin()
        for index, op in enumerate(ops):
            try:
                if index == last:
                    undo = tree.suspend()
                    try:
                        results.append(self._apply(op, zxid, now))
                    finally:
                        tree.resume(undo)
                else:
                    results.append(self._apply(op, zxid, now))
            except StoreError as exc:
                tree.rollback()
                del tree.pending[mark:]
                errors: list[StoreError | None] = [None] * len(ops)
                errors[index] = exc
                raise TransactionFailedError(tuple(errors)) from exc
        tree.commit()
        return tuple(results)

    def _apply(self, op: StoreOp, zxid: int, now: int) -> OpResult:
        tree = self._server.tree
        # An ``isinstance`` chain, the commonest op first: cheaper than a ``match`` of class
        # patterns with captures, which the 30,000 fenced writes of a bulk deletion pay.
        if isinstance(op, SetDataOp):
            path = op.path
            full = self._validated(path)
            check_data_size(op.data)
            node = tree.set(full, op.data, version=op.version, zxid=zxid, now=now)
            return SetDataResult(path=path, stat=node.stat())
        if isinstance(op, CheckOp):
            path = op.path
            full = self._validated(path)
            _check_version(full, tree.node(full), op.version)
            return CheckResult(path=path)
        if isinstance(op, DeleteOp):
            path = op.path
            full = self._validated(path)
            if path == ROOT:
                raise BadArgumentsError("the root node cannot be deleted")
            tree.delete(full, version=op.version, zxid=zxid)
            return DeleteResult(path=path)
        if isinstance(op, CreateOp):
            path, sequential = op.path, op.sequential
            validate_path(path, sequential=sequential)
            check_data_size(op.data)
            full = tree.create(
                self._full(path, sequential=sequential),
                op.data,
                owner=self._id if op.ephemeral else 0,
                sequential=sequential,
                zxid=zxid,
                now=now,
            )
            return CreateResult(path=self.relative(full))
        assert_never(op)

    def _validated(self, path: str) -> str:
        """The full path of ``path``, an op's on a node that should exist, refused as
        ``validate_path`` refuses it. Only a path naming no node is checked: a node's path
        was checked when it was created, and an absolute path that names one is valid."""
        full = self._full(path)
        if full not in self._server.tree.nodes or not path.startswith("/"):
            validate_path(path)
        return full

    def _arm_data(self, full: str) -> None:
        self._data_watched.add(full)
        self._server.watches.arm(self._server.watches.data, full, self._id)

    def _now(self) -> int:
        return self._server.clock.wall_ms()


# ----------------------------------------------------------------------------- store


class EmbeddedStore(MetadataStore):
    """An in-memory ZooKeeper. ``chrooted`` opens another view of the same tree.

    Each view holds the sessions opened through it until it has nothing left to do for
    them (``HeldSessions``): a session that ended and whose owner closed its ``events``
    is forgotten, so a store serving one session per request stays bounded; ``aclose``
    closes the rest."""

    def __init__(
        self,
        *,
        tracer: Tracer | None = None,
        clock: Clock | None = None,
        chroot: str = "",
        node: str = "store",
    ) -> None:
        server = _Server(tracer or Tracer(), clock or RealClock(), node)
        self._attach(server, chroot)

    def _attach(self, server: _Server, chroot: str) -> None:
        self._server = server
        self.chroot = _normalize_chroot(chroot)
        self._sessions: HeldSessions[EmbeddedSession] = HeldSessions()
        self._closed = False

    def chrooted(self, chroot: str) -> EmbeddedStore:
        """Another store on the same tree, sessions and counters, under ``chroot``."""
        view = EmbeddedStore.__new__(EmbeddedStore)
        view._attach(self._server, chroot)
        return view

    def set_latency(self, seconds: float) -> None:
        """Make every call wait ``seconds`` of the store's clock first (0: just yield)."""
        self._server.latency = max(0.0, seconds)

    async def _latency(self) -> None:
        """Every call starts here, so a call is a scheduling point and chaos can slow the
        store down."""
        latency = self._server.latency
        if latency > 0:
            await self._server.clock.sleep(latency)
        else:
            await anyio.lowlevel.checkpoint()

    async def open_session(
        self,
        *,
        timeout: float = 18.0,
        name: str = "",
    ) -> EmbeddedSession:
        """Open a session (creating the chroot node, with parents, if it is missing). The
        timeout is reported as asked: embedded sessions never time out by themselves."""
        await self._latency()
        if self._closed:
            raise StoreClosedError("the store is closed")
        if not timeout > 0:
            raise BadArgumentsError(f"session timeout must be positive, not {timeout}")
        server = self._server
        session_id = server.new_session_id()
        session = EmbeddedSession(self, server, session_id, timeout, name)
        if self.chroot:
            server.ensure_path(self.chroot)
            server.fire_pending()
        server.sessions[session_id] = session
        self._sessions.add(session)
        session.trace("open_session", "", "ok", timeout=timeout)
        return session

    async def expire_session(self, session_id: int) -> None:
        """Expire a session now (a no-op if it is already gone). Like ``close``, it runs to
        completion even from a cancelled scope."""
        session = self._server.sessions.get(session_id)
        if session is not None:
            session.trace("session_expired", "", "ok")
            self._server.end_session(session, SessionState.EXPIRED)
        await anyio.lowlevel.cancel_shielded_checkpoint()

    @property
    def held_sessions(self) -> int:
        """How many sessions opened here the store still holds: the open ones, and the
        ended ones whose owners have not closed ``events`` yet."""
        return self._sessions.count()

    async def aclose(self) -> None:
        """Close the sessions opened here and close the event streams their owners have
        not (read what you need from them first). Idempotent."""
        self._closed = True
        for session in self._sessions:
            await session.close()
        await self._sessions.release_all()
