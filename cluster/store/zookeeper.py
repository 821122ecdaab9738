"""The metadata store on a real ZooKeeper ensemble, through aiozk.

``ZooKeeperStore(hosts, chroot=...)`` opens one ZooKeeper session (one aiozk ``Session``,
hence one TCP connection) per ``StoreSession``, as Kafka gives each broker its own client.
``ZooKeeperSession`` is the adapter: it builds the requests, keeps the watches and decides
the session's life; around it, ``cluster.store.zk_client`` holds aiozk's patched
connection and session, ``zk_translate`` turns aiozk's errors and stats into ours,
``zk_watches`` keeps the armed watches, ``zk_pipeline`` sends pipelined batches,
``zk_expiry`` forces an expiry, and ``_jute`` encodes multi-ops. Only these modules
import aiozk. What the adapter does around aiozk, and why, is in
docs/zookeeper-adapter.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from enum import Enum
from types import TracebackType
from typing import Any, assert_never, cast

import anyio
from aiozk import protocol as zk_proto
from aiozk.features import Features
from aiozk.states import States
from anyio import BrokenResourceError, ClosedResourceError
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from actors.runtime.clock import Clock, RealClock
from actors.runtime.tracer import Tracer
from actors.zk.store import (
    ROOT,
    HeldSessions,
    MetadataStore,
    StoreSession,
    check_data_size,
    new_event_stream,
    validate_path,
)
from cluster.store import _jute
from cluster.store.zk_client import (
    CALL_FRACTION,
    CLOSE_TIMEOUT,
    AiozkSession,
    RawMulti,
    check_packet,
    discard,
)
from cluster.store.zk_expiry import kill_server_session
from cluster.store.zk_pipeline import Pipeline, run_pipeline
from cluster.store.zk_translate import multi_errors, stat_of, translate, translated
from cluster.store.zk_watches import ArmedWatches
from protocol.errors import (
    BadArgumentsError,
    ConnectionLossError,
    NodeExistsError,
    NoNodeError,
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
)
from protocol.trace import TraceKind

_OPEN_ACL = [zk_proto.UNRESTRICTED_ACCESS]

# Looked up when a forced expiry runs, so that tests can widen the expiry trick's window.
_kill_server_session = kill_server_session


def _parse_hosts(hosts: str) -> tuple[str, str]:
    """'h1:p1,h2:p2/chroot' -> ('h1:p1,h2:p2', '/chroot'), Kafka's connect-string form."""
    servers, slash, chroot = hosts.partition("/")
    if not servers.strip():
        raise BadArgumentsError(f"no ZooKeeper server in {hosts!r}")
    return servers, (slash + chroot if chroot else "")


def _normalize_chroot(chroot: str) -> str:
    """'' for no chroot; otherwise a valid absolute path without a trailing slash."""
    if chroot in ("", ROOT):
        return ""
    validate_path(chroot)
    return chroot


def _ancestors(full: str) -> list[str]:
    """'/a/b/c' -> ['/a', '/a/b'] (not the root, not the path itself)."""
    parts = full.strip("/").split("/")[:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


class _CallScope:
    """A call's cancel scope, known to its session while the call runs: the session
    cancels it when it expires or is closed (``_cancel_calls``), and the block ends."""

    __slots__ = ("_calls", "_scope")

    def __init__(self, calls: set[anyio.CancelScope]) -> None:
        self._calls = calls
        self._scope = anyio.CancelScope()

    def __enter__(self) -> None:
        self._calls.add(self._scope)
        self._scope.__enter__()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        try:
            return self._scope.__exit__(exc_type, exc, tb)
        finally:
            self._calls.discard(self._scope)


class _Life(Enum):
    CONNECTING = "connecting"  # opening: no session id yet
    ALIVE = "alive"  # connected or suspended
    EXPIRING = "expiring"  # expired for the owner; the server may still have it
    EXPIRED = "expired"  # gone on the server too (or the server cannot be told)
    CLOSED = "closed"  # closed by the owner


class ZooKeeperSession(StoreSession):
    """One ZooKeeper session. Calls are safe from several tasks at once. Its ``kemu_*``
    members are for its aiozk session (a ``zk_client.SessionOwner``), its pipelined
    batches (a ``zk_pipeline.PipelineHost``) and its store; nothing else calls them."""

    def __init__(self, store: ZooKeeperStore, timeout: float, name: str) -> None:
        self._store = store
        self._chroot = store.chroot
        self.kemu_clock = store.clock
        self._requested_timeout = timeout
        self.name = name
        self._id = 0
        self._life = _Life.CONNECTING
        self._send: MemoryObjectSendStream[StoreEvent]
        self._recv: MemoryObjectReceiveStream[StoreEvent]
        self._send, self._recv = new_event_stream()
        self._watches = ArmedWatches()
        self._calls: set[anyio.CancelScope] = set()
        self._expiry: asyncio.TimerHandle | None = None
        self._expiry_cause = "server"  # what a trace of its expiry names as the cause
        # Set while a forced expiry holds the session on another connection to close it:
        # our own client must not take the session back meanwhile (see kemu_expire).
        self._killing: asyncio.Event | None = None
        self._last_check: tuple[tuple[str, int], bytes] = (("", 0), b"")  # see _op_bytes
        self._checked = CheckResult(path="")  # see _op_result
        self._features_of: tuple[Any, bool] = (None, True)  # see _creates_with_stat
        self._zk = AiozkSession(store.servers, timeout, self)

    # -- the StoreSession interface

    @property
    def session_id(self) -> int:
        return self._id

    @property
    def timeout(self) -> float:
        return float(self._zk.timeout)

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
        with self._traced("create", path):
            validate_path(path, sequential=sequential)
            check_data_size(data)
            full = self._full(path)
            request = self._create_request(full, data, ephemeral=ephemeral, sequential=sequential)
            check_packet(request, path=full, data=data)
            try:
                response = await self._call(request, path)
            except NoNodeError:
                if not make_parents:
                    raise
                # As Kafka's createRecursive: parents persistent and empty, then retry.
                for parent in _ancestors(full):
                    with suppress(NodeExistsError):
                        await self._call(self._create_request(parent, b""), parent)
                response = await self._call(
                    self._create_request(full, data, ephemeral=ephemeral, sequential=sequential),
                    path,
                )
            return self._own(response.path)

    async def get(self, path: str, *, watch: bool = False) -> tuple[bytes, Stat]:
        with self._traced("get", path):
            validate_path(path)
            full = self._full(path)
            request = zk_proto.GetDataRequest(path=full, watch=watch)
            if watch:
                request.kemu_on_reply = self._arms_data(full)
            response = await self._call(request, path)
            return response.data or b"", stat_of(response.stat)

    async def set(self, path: str, data: bytes, *, version: int = -1) -> Stat:
        with self._traced("set", path):
            validate_path(path)
            check_data_size(data)
            full = self._full(path)
            request = zk_proto.SetDataRequest(path=full, data=data, version=version)
            check_packet(request, path=full, data=data)
            response = await self._call(request, path)
            return stat_of(response.stat)

    async def delete(self, path: str, *, version: int = -1, recursive: bool = False) -> None:
        with self._traced("delete", path):
            validate_path(path)
            if path == ROOT:
                raise BadArgumentsError("the root node cannot be deleted")
            full = self._full(path)
            if recursive:
                # As ZooKeeper's deleteall: children first, not atomic; the version (if
                # any) is checked before anything is deleted, and again on the node itself.
                if version != -1:
                    await self._call(zk_proto.CheckVersionRequest(path=full, version=version), path)
                await self._delete_children(full)
            await self._call(zk_proto.DeleteRequest(path=full, version=version), path)

    async def exists(self, path: str, *, watch: bool = False) -> Stat | None:
        with self._traced("exists", path):
            validate_path(path)
            full = self._full(path)
            request = zk_proto.ExistsRequest(path=full, watch=watch)
            if watch:
                request.kemu_on_reply = self._arms_data(full, or_exist=True)
            try:
                response = await self._call(request, path)
            except NoNodeError:
                return None
            return stat_of(response.stat)

    async def children(self, path: str, *, watch: bool = False) -> tuple[str, ...]:
        with self._traced("children", path):
            validate_path(path)
            full = self._full(path)
            request = zk_proto.GetChildrenRequest(path=full, watch=watch)
            if watch:
                request.kemu_on_reply = self._arms_child(full)
            response = await self._call(request, path)
            return tuple(sorted(response.children))

    async def multi(self, ops: Sequence[StoreOp]) -> tuple[OpResult, ...]:
        ops = tuple(ops)
        # Traced under the first op's path (in Kafka: the /controller_epoch check).
        with self._traced("multi", ops[0].path if ops else "", ops=len(ops)):
            request = self._transaction(ops)
            check_packet(request)
            response = await self._call(request, ops[0].path if ops else ROOT)
            return self._multi_results(ops, response)

    async def multi_each(
        self, batches: Sequence[Sequence[StoreOp]]
    ) -> list[tuple[OpResult, ...] | StoreError]:
        """Pipelined (``cluster.store.zk_pipeline``), as Kafka's
        ``retryRequestsUntilConnected`` sends a batch: the multis are written in order,
        many per socket write. The server runs a session's requests in the order they were
        sent, each multi its own transaction, so every outcome is what it would be one
        multi after the other; each is traced, in order, as a lone ``multi`` is. See
        ``run_pipeline`` for lost connections."""
        how = Pipeline(
            op="multi",
            path=lambda ops: ops[0].path if ops else "",
            fields=lambda ops: {"ops": len(ops)},
            request=self._transaction,
            finish=self._multi_results,
            lone=self._lone_multi,
        )
        return await run_pipeline(self, [tuple(ops) for ops in batches], how)

    async def get_each(
        self, reads: Sequence[tuple[str, bool]]
    ) -> list[tuple[bytes, Stat] | StoreError]:
        """Pipelined as ``multi_each``: each ``(path, watch)`` read as ``get``
        reads it, arming its watch when its reply is read; traced as a lone ``get``."""
        how = Pipeline(
            op="get",
            path=lambda read: read[0],
            fields=lambda read: {},
            request=self._get_request,
            finish=lambda read, response: (response.data or b"", stat_of(response.stat)),
            lone=self._lone_get,
        )
        return await run_pipeline(self, list(reads), how)

    async def create_each(self, creates: Sequence[tuple[str, bytes]]) -> list[str | StoreError]:
        """Pipelined as ``multi_each``: each ``(path, data)`` created as ``create``
        creates a persistent node (parents not made); traced as a lone ``create``."""
        how = Pipeline(
            op="create",
            path=lambda create: create[0],
            fields=lambda create: {},
            request=self._create_each_request,
            finish=lambda create, response: self._own(response.path),
            lone=self._lone_create,
        )
        return await run_pipeline(self, list(creates), how)

    def _create_each_request(self, create: tuple[str, bytes]) -> Any:
        path, data = create
        validate_path(path)
        check_data_size(data)
        full = self._full(path)
        request = self._create_request(full, data)
        check_packet(request, path=full, data=data)
        return request

    async def _lone_create(self, create: tuple[str, bytes]) -> str | StoreError:
        path, data = create
        try:
            return await self.create(path, data)
        except StoreError as err:
            return err

    async def _lone_multi(self, ops: tuple[StoreOp, ...]) -> tuple[OpResult, ...] | StoreError:
        try:
            return await self.multi(ops)
        except StoreError as err:
            return err

    async def _lone_get(self, read: tuple[str, bool]) -> tuple[bytes, Stat] | StoreError:
        path, watch = read
        try:
            return await self.get(path, watch=watch)
        except StoreError as err:
            return err

    def _get_request(self, read: tuple[str, bool]) -> Any:
        path, watch = read
        validate_path(path)
        full = self._full(path)
        request = zk_proto.GetDataRequest(path=full, watch=watch)
        if watch:
            request.kemu_on_reply = self._arms_data(full)
        return request

    def _transaction(self, ops: tuple[StoreOp, ...]) -> RawMulti:
        """The multi-op request of ``ops``, encoded by ``_jute``; ``TransactionFailedError``
        naming the op that cannot be sent (a bad path, data too big)."""
        create = _jute.OP_CREATE2 if self._creates_with_stat() else _jute.OP_CREATE
        encoded: list[bytes] = []
        for index, op in enumerate(ops):
            try:
                encoded.append(self._op_bytes(op, create))
            except StoreError as err:
                errors: list[StoreError | None] = [None] * len(ops)
                errors[index] = err
                raise TransactionFailedError(tuple(errors)) from err
        return RawMulti(encoded)

    def _multi_results(
        self, ops: tuple[StoreOp, ...], response: _jute.MultiReply
    ) -> tuple[OpResult, ...]:
        replies = response.responses
        if response.failed:
            raise TransactionFailedError(multi_errors([op.path for op in ops], replies))
        # A multi that did not fail holds no error code (``_jute.MultiReply``).
        done = cast("tuple[_jute.OpReply, ...]", replies)
        op_result = self._op_result
        return tuple([op_result(op, r) for op, r in zip(ops, done, strict=True)])

    async def close(self) -> None:
        """Close the session: the server deletes its ephemerals before it answers. Runs to
        completion (bounded) even from a cancelled scope; idempotent."""
        life = self._life
        if life is _Life.CLOSED:
            return
        self._life = _Life.CLOSED
        self._stop_expiry_timer()
        self._cancel_calls()
        with anyio.CancelScope(shield=True):
            if life is _Life.ALIVE and self._zk.state == States.CONNECTED:
                with anyio.move_on_after(CLOSE_TIMEOUT), suppress(Exception):
                    await self._zk.send(zk_proto.CloseRequest())
            await self._teardown()
        self._store.forget(self)
        if life is _Life.ALIVE:
            self.trace("close", "", "ok")
            self._finish(SessionState.CLOSED)

    # -- what the store calls

    async def kemu_open(self) -> None:
        """Connect and get a session id, or raise ``ConnectionLossError`` after the
        requested timeout."""
        try:
            with anyio.fail_after(self._requested_timeout):
                await self._zk.start()
        except BaseException as err:
            with anyio.CancelScope(shield=True):
                await self._teardown()
            self._life = _Life.CLOSED
            self._send.close()
            self._recv.close()
            if isinstance(err, TimeoutError):
                raise ConnectionLossError(
                    f"no ZooKeeper session from {self._store.servers} "
                    f"within {self._requested_timeout} s"
                ) from None
            raise
        self.name = self.name or f"session-{self._id}"

    async def kemu_ensure_path(self, full: str) -> None:
        """Create ``full`` and its ancestors (persistent, empty) by absolute path."""
        for each in [*_ancestors(full), full]:
            with suppress(NodeExistsError):
                await self._call(self._create_request(each, b""), each)

    async def kemu_expire(self) -> None:
        """Expire now, for real: have the server close the session (deleting its
        ephemerals), then tell the owner, as ZooKeeper does: a client hears of its expiry
        only from a server that already expired it, so the owner's next session never
        finds its old ephemerals (a broker re-registering at once would fail with
        NODEEXISTS otherwise)."""
        if self._life not in (_Life.ALIVE, _Life.EXPIRING):
            return
        gone = False
        self._expiry_cause = "forced"  # whoever notices first traces it so
        # Taking the session over drops our own client's connection; were it to reconnect
        # before the CloseRequest went out, it would take the session back, and the two
        # could trade it until the deadline with the session never closed (its owner's
        # heartbeats would then keep it, and its ephemerals, alive for good).
        killing = self._killing = asyncio.Event()
        try:
            with anyio.move_on_after(max(self.timeout, CLOSE_TIMEOUT)):
                gone = await _kill_server_session(
                    self._store.servers, self._id, self._zk.password, self.timeout, self.kemu_clock
                )
        finally:
            self._killing = None
            killing.set()
        if self._life is _Life.ALIVE:  # aiozk may have seen the expiry first (LOST)
            self.trace("session_expired", "", "ok", cause="forced")
            self._expire(server_dead=gone)
        elif gone and self._life is _Life.EXPIRING:
            self._life = _Life.EXPIRED
        if self._life is _Life.EXPIRING and self._zk.state == States.CONNECTED:
            # Not closed on the server, and our client holds the session still: close it
            # through that connection (the repair loop only does so on reconnecting).
            await self._close_expired_on_server()

    async def kemu_hold_reconnect(self) -> None:
        """The repair loop waits here before reconnecting while a forced expiry runs."""
        killing = self._killing
        if killing is not None:
            await killing.wait()

    # -- what the aiozk session calls (in its own tasks, or in the read loop)

    def kemu_task_failed(self, task: str, err: Exception) -> None:
        """One of aiozk's tasks (``zookeeper_read_loop``, ``zookeeper_heartbeat``) failed."""
        self._store.tracer.emit(
            TraceKind.ERROR,
            node=self._store.name,
            actor=self.name,
            type=task,
            error=repr(err),
            session=self._id,
        )

    def kemu_wants_connection(self) -> bool:
        return self._life in (_Life.CONNECTING, _Life.ALIVE, _Life.EXPIRING)

    def kemu_expiring(self) -> bool:
        return self._life is _Life.EXPIRING

    def kemu_transition(self, previous: str, state: str) -> None:
        """aiozk's session state changed (docs/zookeeper-adapter.md, "Session expiry")."""
        zk = self._zk
        if state == States.SUSPENDED:
            discard(zk.conn)  # its pending requests fail now: ConnectionLossError
            if self._life is _Life.ALIVE:
                self.trace("session_state", "", "ok", state=SessionState.SUSPENDED.value)
                self._deliver(SessionEvent(session_id=self._id, state=SessionState.SUSPENDED))
                self._stop_expiry_timer()
                loop = asyncio.get_running_loop()
                self._expiry = loop.call_later(
                    zk.timeout / self.kemu_clock.rate, self._expire_suspended
                )
        elif state == States.CONNECTED:
            if self._life is _Life.CONNECTING:
                self._id = zk.session_id
                self._life = _Life.ALIVE
            elif self._life is _Life.ALIVE:
                self._stop_expiry_timer()
                self.trace("session_state", "", "ok", state=SessionState.CONNECTED.value)
                self._deliver(SessionEvent(session_id=self._id, state=SessionState.CONNECTED))
        elif state == States.LOST and self._life in (_Life.ALIVE, _Life.EXPIRING):
            if self._life is _Life.ALIVE:
                self.trace("session_expired", "", "ok", cause=self._expiry_cause)
            self._expire(server_dead=True)

    def kemu_notification(self, event: Any) -> None:
        """A watch notification, read off the wire in order (see "Watches")."""
        if self._life is not _Life.ALIVE or event.type == -1:  # -1: a state event; unused
            return
        kind = self._watches.fire(event)
        if kind is None:
            return
        path = self._relative(event.path)
        if path is None:
            return
        self.trace("watch", path, "ok", event=kind.value)
        self._deliver(WatchEvent(session_id=self._id, path=path, kind=kind))

    async def kemu_reconnected(self) -> None:
        """Runs in aiozk's repair loop right after a (re)connection: re-arm the watches,
        or close the session on the server if it has expired for its owner."""
        zk = self._zk
        if self._life is _Life.EXPIRING:
            await self._close_expired_on_server()
            return
        if self._life is not _Life.ALIVE:
            return
        try:
            for request in self._watches.set_watches_requests(zk.kemu_last_zxid):
                try:
                    await asyncio.wait_for(zk.send(request), zk.timeout)
                finally:
                    zk.retry_policy.clear(request)
        except asyncio.CancelledError:
            raise
        except Exception:  # the new connection failed already: the next one re-arms
            zk.kemu_connection_lost(zk.conn)

    async def _close_expired_on_server(self) -> None:
        """Expired for its owner, connected to a server that still has it: close it
        there, and stop the client."""
        zk = self._zk
        with suppress(Exception):
            await asyncio.wait_for(zk.send(zk_proto.CloseRequest()), CLOSE_TIMEOUT)
        self._life = _Life.EXPIRED
        zk.closing = True  # ends the repair loop and the heartbeat
        discard(zk.conn)

    # -- internals: calls

    async def _call(self, request: Any, path: str) -> Any:
        """Send one request and translate the outcome. Bounded; a call in flight when the
        session expires or is closed raises at once."""
        self._ensure_usable()
        zk = self._zk
        try:
            with self.kemu_cancellable():
                try:
                    with anyio.fail_after(zk.timeout * CALL_FRACTION), translated(path):
                        return await zk.send(request)
                except TimeoutError as exc:
                    raise ConnectionLossError(
                        f"{path}: no answer from ZooKeeper within "
                        f"{zk.timeout * CALL_FRACTION:.1f} s"
                    ) from exc
                except SessionExpiredError as exc:
                    raise self.kemu_server_expired(path) from exc.__cause__
            self._ensure_usable()  # the scope was cancelled: the session is over
            raise ConnectionLossError(path)  # pragma: no cover - unreachable
        finally:
            zk.retry_policy.clear(request)

    def kemu_cancellable(self) -> _CallScope:
        """A block that ends quietly when the session expires or is closed."""
        return _CallScope(self._calls)

    @property
    def kemu_zk(self) -> AiozkSession:
        return self._zk

    def kemu_alive(self) -> bool:
        return self._life is _Life.ALIVE

    def kemu_server_expired(self, path: str) -> StoreError:
        """The server answered SESSIONEXPIRED: the session is over for good."""
        self.trace("session_expired", "", "ok", cause="server")
        self._expire(server_dead=True)
        return SessionExpiredError(path)

    def _ensure_usable(self) -> None:
        if self._life is not _Life.ALIVE:
            raise self.kemu_unusable_error()

    def kemu_unusable_error(self) -> StoreError:
        if self._life is _Life.CLOSED:
            return StoreClosedError(f"session {self._id:#x} is closed")
        return SessionExpiredError(f"session {self._id:#x} has expired")

    def _cancel_calls(self) -> None:
        for scope in self._calls:
            scope.cancel()

    async def _delete_children(self, full: str) -> None:
        try:
            response = await self._call(zk_proto.GetChildrenRequest(path=full, watch=False), full)
        except NoNodeError:
            return
        for name in sorted(response.children, reverse=True):
            child = f"{full}/{name}"
            await self._delete_children(child)
            with suppress(NoNodeError):
                await self._call(zk_proto.DeleteRequest(path=child, version=-1), child)

    def _creates_with_stat(self) -> bool:
        """Whether the server knows ``create2`` (3.5+), which also returns the stat: known
        once per connection (aiozk's ``Features`` is built anew on every call, and every
        multi asks)."""
        conn = self._zk.conn
        if conn is not None and conn is self._features_of[0]:
            return self._features_of[1]
        version = conn.version_info if conn is not None else None
        if version is None:
            return True
        creates = bool(Features(version).create_with_stat)
        self._features_of = (conn, creates)
        return creates

    def _create_request(
        self, full: str, data: bytes, *, ephemeral: bool = False, sequential: bool = False
    ) -> Any:
        cls = zk_proto.Create2Request if self._creates_with_stat() else zk_proto.CreateRequest
        request = cls(path=full, data=data, acl=_OPEN_ACL)
        request.set_flags(ephemeral=ephemeral, sequential=sequential, container=False)
        return request

    def _op_bytes(self, op: StoreOp, create: int) -> bytes:
        """One op of a multi, encoded (``create``: the create opcode the server takes)."""
        match op:
            case CheckOp(path=path, version=version):
                # The same check (the controller epoch's) guards every multi of a batch.
                if self._last_check[0] != (path, version):
                    validate_path(path)
                    self._last_check = ((path, version), _jute.check_op(self._full(path), version))
                return self._last_check[1]
            case CreateOp(path=path, data=data, ephemeral=ephemeral, sequential=sequential):
                validate_path(path, sequential=sequential)
                check_data_size(data)
                flags = (1 if ephemeral else 0) | (2 if sequential else 0)
                return _jute.create_op(self._full(path), data, flags, opcode=create)
            case SetDataOp(path=path, data=data, version=version):
                validate_path(path)
                check_data_size(data)
                return _jute.set_data_op(self._full(path), data, version)
            case DeleteOp(path=path, version=version):
                validate_path(path)
                if path == ROOT:
                    raise BadArgumentsError("the root node cannot be deleted")
                return _jute.delete_op(self._full(path), version)
            case _:
                assert_never(op)

    def _op_result(self, op: StoreOp, reply: _jute.OpReply) -> OpResult:
        match op:
            case CheckOp(path=path):
                # The same check (the controller epoch's) guards every multi of a batch.
                if self._checked.path != path:
                    self._checked = CheckResult(path=path)
                return self._checked
            case CreateOp():
                assert reply.path is not None
                return CreateResult(path=self._own(reply.path))
            case SetDataOp(path=path):
                assert reply.stat is not None
                return SetDataResult(path=path, stat=stat_of(reply.stat))
            case DeleteOp(path=path):
                return DeleteResult(path=path)
            case _:
                assert_never(op)

    # -- internals: watches

    def _arms_data(self, full: str, *, or_exist: bool = False) -> Callable[[Any], None]:
        """What the reply to a get/exists with a watch does when it is read."""

        def on_reply(reply: Any) -> None:
            if self._life is not _Life.ALIVE:
                return
            if not isinstance(reply, Exception):
                self._watches.armed_data(full, existed=True)
            elif or_exist and isinstance(translate(reply, full), NoNodeError):
                self._watches.armed_data(full, existed=False)

        return on_reply

    def _arms_child(self, full: str) -> Callable[[Any], None]:
        def on_reply(reply: Any) -> None:
            if self._life is _Life.ALIVE and not isinstance(reply, Exception):
                self._watches.armed_child(full)

        return on_reply

    # -- internals: session life

    def _expire_suspended(self) -> None:
        """Timer: suspended for a whole session timeout ("Session expiry")."""
        self._expiry = None
        if self._life is _Life.ALIVE:
            self.trace("session_expired", "", "ok", cause="suspended")
            self._expire(server_dead=False)

    def _expire(self, *, server_dead: bool) -> None:
        """The session is over for its owner: calls fail, watches are dropped, the owner
        gets EXPIRED and its stream ends. Unless the server is known to have dropped it,
        the repair loop keeps going, to close it on the server when it can."""
        was_alive = self._life is _Life.ALIVE
        self._life = _Life.EXPIRED if server_dead else _Life.EXPIRING
        if server_dead:
            self._zk.closing = True  # ends the repair loop and the heartbeat
        self._stop_expiry_timer()
        self._cancel_calls()
        self._watches.clear()
        if was_alive:
            self._finish(SessionState.EXPIRED)

    def _finish(self, state: SessionState) -> None:
        self._deliver(SessionEvent(session_id=self._id, state=state))
        self._send.close()

    def _stop_expiry_timer(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None

    async def _teardown(self) -> None:
        """Stop aiozk without its ``close`` ("Shutdown"): cancel its tasks, close its socket."""
        zk = self._zk
        zk.closing = True
        conn = zk.conn
        tasks = [
            t
            for t in (zk.repair_loop_task, zk.heartbeat_task, conn and conn.read_loop_task)
            if t is not None and not t.done() and t is not asyncio.current_task()
        ]
        for task in tasks:
            task.cancel()
        discard(conn)
        if tasks:
            await asyncio.wait(tasks, timeout=1.0)
        if zk.heartbeat_handle is not None:
            zk.heartbeat_handle.cancel()
            zk.heartbeat_handle = None
        zk.started = False

    # -- internals: paths, events, traces

    def _full(self, path: str) -> str:
        if not self._chroot:
            return path
        return self._chroot if path == ROOT else self._chroot + path

    def _relative(self, full: str) -> str | None:
        """A server path as the owner sees it; None if outside the chroot."""
        if not self._chroot:
            return full
        if full == self._chroot:
            return ROOT
        if full.startswith(self._chroot + "/"):
            return full[len(self._chroot) :]
        return None

    def _own(self, full: str) -> str:
        """A path the server returned for one of our requests, under our chroot."""
        path = self._relative(full)
        if path is None:
            raise StoreError(f"ZooKeeper returned {full!r}, outside the chroot {self._chroot!r}")
        return path

    def _deliver(self, event: StoreEvent) -> None:
        # If the owner closed its end of the stream, it no longer listens.
        with suppress(BrokenResourceError, ClosedResourceError):
            self._send.send_nowait(event)

    @property
    def tracer(self) -> Tracer:
        return self._store.tracer

    def trace(self, op: str, path: str, result: str, **fields: Any) -> None:
        self._store.tracer.emit(
            TraceKind.STORE,
            node=self._store.name,
            actor=self.name,
            type=op,
            path=path,
            result=result,
            session=self._id,
            **fields,
        )

    @contextmanager
    def _traced(self, op: str, path: str, **fields: Any) -> Iterator[None]:
        try:
            yield
        except StoreError as err:
            self.trace(op, path, type(err).__name__, **fields)
            raise
        self.trace(op, path, "ok", **fields)


# ----------------------------------------------------------------------------- store


class ZooKeeperStore(MetadataStore):
    """Sessions on a ZooKeeper ensemble (``hosts`` as 'h1:p1,h2:p2', optionally followed
    by '/chroot' as in Kafka's ``zookeeper.connect``), within ``chroot``.

    ``_sessions`` are the sessions to close at ``aclose`` (open or expired, not closed);
    ``_opened`` are those whose streams it may still have to release (``HeldSessions``):
    a session that ended and whose owner closed its ``events`` is in neither."""

    def __init__(
        self,
        hosts: str,
        *,
        chroot: str = "",
        tracer: Tracer | None = None,
        clock: Clock | None = None,
        name: str = "zk",
    ) -> None:
        servers, suffix = _parse_hosts(hosts)
        self.servers = servers
        self.chroot = _normalize_chroot(suffix + _normalize_chroot(chroot))
        self.tracer = tracer or Tracer()
        self.clock = clock or RealClock()
        self.name = name
        self._sessions: dict[int, ZooKeeperSession] = {}  # open or expired, not closed
        self._opened: HeldSessions[ZooKeeperSession] = HeldSessions()
        self._chroot_ready = not self.chroot
        self._closed = False

    async def open_session(
        self,
        *,
        timeout: float = 18.0,
        name: str = "",
    ) -> ZooKeeperSession:
        """Open a session (creating the chroot, with parents, if it is missing). The server
        may negotiate another timeout (``session.timeout`` tells). Raises
        ``ConnectionLossError`` if no server gives a session within ``timeout``."""
        if self._closed:
            raise StoreClosedError("the store is closed")
        if not timeout > 0:
            raise BadArgumentsError(f"session timeout must be positive, not {timeout}")
        session = ZooKeeperSession(self, timeout, name)
        try:
            await session.kemu_open()
            if not self._chroot_ready:
                await session.kemu_ensure_path(self.chroot)
                self._chroot_ready = True
        except StoreError as err:
            await session.close()
            session.events.close()
            self.tracer.emit(
                TraceKind.STORE,
                node=self.name,
                actor=name,
                type="open_session",
                path="",
                result=type(err).__name__,
                session=0,
            )
            raise
        self._sessions[session.session_id] = session
        self._opened.add(session)
        session.trace("open_session", "", "ok", timeout=session.timeout)
        return session

    async def expire_session(self, session_id: int) -> None:
        """Expire a session opened here, for real (a no-op if it is already gone): when
        this returns the server has deleted its ephemerals (unless it could not be reached
        within the session timeout) and then its owner got EXPIRED. Runs to completion
        even from a cancelled scope."""
        session = self._sessions.get(session_id)
        if session is None:
            await anyio.lowlevel.cancel_shielded_checkpoint()
            return
        with anyio.CancelScope(shield=True):
            await session.kemu_expire()

    @property
    def held_sessions(self) -> int:
        """How many sessions opened here the store still holds for ``aclose``: the open
        and expired ones, and the closed ones whose owners have not closed ``events``."""
        return self._opened.count()

    async def aclose(self) -> None:
        """Close every session opened here and close the event streams their owners have
        not. Idempotent."""
        self._closed = True
        for session in list(self._sessions.values()):
            await session.close()
        await self._opened.release_all()

    def forget(self, session: ZooKeeperSession) -> None:
        """A session closed: it is no longer the store's to close or expire."""
        if self._sessions.get(session.session_id) is session:
            del self._sessions[session.session_id]
