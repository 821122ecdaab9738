"""The metadata-store interface, with ZooKeeper's semantics.

It lives in ``actors`` because brokers and the controller (actors) depend on it; the
implementations live in ``cluster.store`` (embedded, served over the network, ZooKeeper).

A ``MetadataStore`` opens sessions; a ``StoreSession`` is what a broker holds (one each,
as one ZooKeeper client per broker). Paths are absolute within the store's chroot.

Semantics every implementation keeps (the contract suite in tests/contract checks them):

* ``create`` of an existing path raises ``NodeExistsError``; of a path whose parent is
  missing raises ``NoNodeError`` unless ``make_parents`` (parents are created persistent,
  empty); under an ephemeral parent raises ``NoChildrenForEphemeralsError``. Sequential
  nodes get a 10-digit zero-padded suffix counting the creates under the parent (as
  ZooKeeper does; not Stat.cversion, which also counts deletes).
* ``set``/``delete`` with ``version`` >= 0 are conditional (``BadVersionError``); -1 means
  any version. ``delete`` of a node with children raises ``NotEmptyError`` unless
  ``recursive`` (children first, not atomic, as ZooKeeper's ``deleteall``).
* ``children`` returns names sorted.
* ``multi`` is all or nothing: it returns one result per op, or raises
  ``TransactionFailedError`` whose ``results`` name the failing op.
* Watches are one-shot per (session, path, kind), armed by ``get``/``exists`` (data watch:
  fires ``created``, ``deleted``, ``data_changed``) and ``children`` (child watch: fires
  ``children_changed``, or ``deleted`` when the node goes). They are delivered, in order,
  on the session's ``events`` stream, together with ``SessionEvent``s.
* When a session expires its ephemerals vanish (firing the watches of other sessions), its
  watches are dropped, its owner gets ``SessionEvent(EXPIRED)``, and every later call
  raises ``SessionExpiredError``. Calls while the store is unreachable raise
  ``ConnectionLossError`` after a bounded wait; nothing hangs.
* A session's ``events`` stream belongs to its owner, who closes it when done reading
  (after ``close``, or once it has read the end of the stream). A store holds on to a
  session only while it may still have to close it or release its stream: once the
  session has ended (closed, or expired) and its owner has closed ``events``, the store
  forgets it, so a long-lived store that opens a session per request does not grow.
  ``aclose`` closes the sessions still open and closes the streams their owners have not
  (after letting readers see the end of the stream); a stream is never closed under a
  reader before that.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Generic, TypeVar

import anyio
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from protocol.errors import BadArgumentsError, StoreError
from protocol.store import OpResult, Stat, StoreEvent, StoreOp

ROOT = "/"

MAX_DATA_BYTES = 1024 * 1024
"""A node's data limit (ZooKeeper's ``jute.maxbuffer`` default): larger is BadArguments."""

# Characters ZooKeeper's PathUtils.validatePath refuses (besides NUL).
_BAD_PATH_CHARS = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\uf8ff\ufff0-\uffff]")


def validate_path(path: str, *, sequential: bool = False) -> None:
    """Refuse what ZooKeeper's client refuses: relative paths, a trailing '/' (allowed only
    before a sequence suffix), empty, '.' or '..' components, and control characters."""
    if not path.startswith("/"):
        raise BadArgumentsError(f"path must start with '/': {path!r}")
    checked = path + "1" if sequential else path
    if checked == ROOT:
        return
    if checked.endswith("/"):
        raise BadArgumentsError(f"path must not end with '/': {path!r}")
    if "//" in checked:
        raise BadArgumentsError(f"empty path component: {path!r}")
    if "/." in checked and any(c in (".", "..") for c in checked.split("/")):
        raise BadArgumentsError(f"relative path component: {path!r}")
    # A printable ASCII path holds none of them: two C checks before the pattern's scan
    # (the controller writes 200,000 partition znodes in a bulk creation).
    if not (checked.isascii() and checked.isprintable()) and _BAD_PATH_CHARS.search(checked):
        raise BadArgumentsError(f"invalid character in path: {path!r}")


def check_data_size(data: bytes) -> None:
    if len(data) > MAX_DATA_BYTES:
        raise BadArgumentsError(
            f"data of {len(data)} bytes is over the {MAX_DATA_BYTES}-byte limit"
        )


def new_event_stream() -> tuple[
    MemoryObjectSendStream[StoreEvent], MemoryObjectReceiveStream[StoreEvent]
]:
    """The events stream of a session. Unbounded on purpose: the store never waits on a
    slow owner (as ZooKeeper's client queues watch events); its depth is observable via
    ``statistics().current_buffer_used``."""
    return anyio.create_memory_object_stream[StoreEvent](max_buffer_size=math.inf)


class StoreSession(ABC):
    """One session on the store. Every call may raise a ``StoreError`` subclass."""

    @property
    @abstractmethod
    def session_id(self) -> int: ...

    @property
    @abstractmethod
    def timeout(self) -> float:
        """The negotiated session timeout in seconds."""

    @property
    @abstractmethod
    def events(self) -> MemoryObjectReceiveStream[StoreEvent]:
        """Watch and session events for this session, in the order they happened."""

    @abstractmethod
    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        """Create a node; return its path (with the sequence suffix if sequential)."""

    @abstractmethod
    async def get(self, path: str, *, watch: bool = False) -> tuple[bytes, Stat]: ...

    @abstractmethod
    async def set(self, path: str, data: bytes, *, version: int = -1) -> Stat: ...

    @abstractmethod
    async def delete(self, path: str, *, version: int = -1, recursive: bool = False) -> None: ...

    @abstractmethod
    async def exists(self, path: str, *, watch: bool = False) -> Stat | None: ...

    @abstractmethod
    async def children(self, path: str, *, watch: bool = False) -> tuple[str, ...]: ...

    @abstractmethod
    async def multi(self, ops: Sequence[StoreOp]) -> tuple[OpResult, ...]: ...

    async def multi_each(
        self, batches: Sequence[Sequence[StoreOp]]
    ) -> list[tuple[OpResult, ...] | StoreError]:
        """Several independent multi-ops, in order, each its own transaction, as Kafka
        pipelines a batch of requests (``retryRequestsUntilConnected``): the outcome of
        each is its results or the ``StoreError`` it raised. A store may send them all at
        once; this default runs them one after the other."""
        outcomes: list[tuple[OpResult, ...] | StoreError] = []
        for ops in batches:
            try:
                outcomes.append(await self.multi(ops))
            except StoreError as exc:
                outcomes.append(exc)
        return outcomes

    async def create_each(self, creates: Sequence[tuple[str, bytes]]) -> list[str | StoreError]:
        """``create`` of each ``(path, data)`` (a persistent node, parents not made), in
        order, as Kafka pipelines a batch of requests: the outcome of each is its path or
        the ``StoreError`` it raised. A store may send them all at once; this default
        creates them one after the other."""
        outcomes: list[str | StoreError] = []
        for path, data in creates:
            try:
                outcomes.append(await self.create(path, data))
            except StoreError as exc:
                outcomes.append(exc)
        return outcomes

    async def get_each(
        self, reads: Sequence[tuple[str, bool]]
    ) -> list[tuple[bytes, Stat] | StoreError]:
        """``get`` of each ``(path, watch)``, in order, as Kafka pipelines a batch of reads:
        the outcome of each is its data and stat or the ``StoreError`` it raised. A store
        may send them all at once; this default reads them one after the other."""
        outcomes: list[tuple[bytes, Stat] | StoreError] = []
        for path, watch in reads:
            try:
                outcomes.append(await self.get(path, watch=watch))
            except StoreError as exc:
                outcomes.append(exc)
        return outcomes

    @abstractmethod
    async def close(self) -> None:
        """Close the session: its ephemerals vanish at once. Idempotent."""

    async def __aenter__(self) -> StoreSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class ForwardingSession(StoreSession):
    """A session that hands every call to ``inner`` (its pipelined ``multi_each`` and
    ``get_each`` included): the base of wrappers that change a few calls only (watch
    arming, test hooks). Subclasses override what they change."""

    def __init__(self, inner: StoreSession) -> None:
        self.inner = inner

    @property
    def session_id(self) -> int:
        return self.inner.session_id

    @property
    def timeout(self) -> float:
        return self.inner.timeout

    @property
    def events(self) -> MemoryObjectReceiveStream[StoreEvent]:
        return self.inner.events

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        return await self.inner.create(
            path, data, ephemeral=ephemeral, sequential=sequential, make_parents=make_parents
        )

    async def get(self, path: str, *, watch: bool = False) -> tuple[bytes, Stat]:
        return await self.inner.get(path, watch=watch)

    async def set(self, path: str, data: bytes, *, version: int = -1) -> Stat:
        return await self.inner.set(path, data, version=version)

    async def delete(self, path: str, *, version: int = -1, recursive: bool = False) -> None:
        await self.inner.delete(path, version=version, recursive=recursive)

    async def exists(self, path: str, *, watch: bool = False) -> Stat | None:
        return await self.inner.exists(path, watch=watch)

    async def children(self, path: str, *, watch: bool = False) -> tuple[str, ...]:
        return await self.inner.children(path, watch=watch)

    async def multi(self, ops: Sequence[StoreOp]) -> tuple[OpResult, ...]:
        return await self.inner.multi(ops)

    async def multi_each(
        self, batches: Sequence[Sequence[StoreOp]]
    ) -> list[tuple[OpResult, ...] | StoreError]:
        return await self.inner.multi_each(batches)

    async def create_each(self, creates: Sequence[tuple[str, bytes]]) -> list[str | StoreError]:
        return await self.inner.create_each(creates)

    async def get_each(
        self, reads: Sequence[tuple[str, bool]]
    ) -> list[tuple[bytes, Stat] | StoreError]:
        return await self.inner.get_each(reads)

    async def close(self) -> None:
        await self.inner.close()


S = TypeVar("S", bound=StoreSession)


class HeldSessions(Generic[S]):
    """The sessions a store opened and may still have to close or whose ``events`` it may
    still have to release at ``aclose``, in opening order. A session is dropped once it has
    ended (its stream's sending side closed) and its owner has closed the receiving side:
    nothing is left to do for it. The check runs when the list has doubled since the last
    one (amortized constant time per ``add``), and on ``count``."""

    _FIRST_PRUNE = 16

    def __init__(self) -> None:
        self._held: list[S] = []
        self._prune_at = self._FIRST_PRUNE

    def add(self, session: S) -> None:
        self._held.append(session)
        if len(self._held) >= self._prune_at:
            self._prune()
            self._prune_at = max(self._FIRST_PRUNE, 2 * len(self._held))

    def count(self) -> int:
        """How many sessions are held now (checked first): the open ones, and the ended
        ones whose owners have not closed ``events`` yet."""
        self._prune()
        return len(self._held)

    def __iter__(self) -> Iterator[S]:
        return iter(list(self._held))

    async def release_all(self) -> None:
        """Close every held session's ``events`` (the store shuts down, its sessions are
        closed) and forget them. First let readers see the end of the stream: a reader
        woken by a session's last event needs two turns (one to take it, one for the
        checkpoint of its next ``receive``) before it reads ``EndOfStream``."""
        for _ in range(2):
            await anyio.lowlevel.cancel_shielded_checkpoint()
        for session in self._held:
            session.events.close()
        self._held.clear()
        self._prune_at = self._FIRST_PRUNE

    def _prune(self) -> None:
        self._held = [s for s in self._held if not _done_with(s)]


def _done_with(session: StoreSession) -> bool:
    """Ended, and its owner closed its events stream: neither end is open any more."""
    stats = session.events.statistics()
    return stats.open_send_streams == 0 and stats.open_receive_streams == 0


class MetadataStore(ABC):
    """Opens sessions on one store (embedded or ZooKeeper), within an optional chroot."""

    @abstractmethod
    async def open_session(
        self,
        *,
        timeout: float = 18.0,
        name: str = "",
    ) -> StoreSession:
        """Open a new session. ``name`` labels it in traces (e.g. ``broker-1``)."""

    @abstractmethod
    async def expire_session(self, session_id: int) -> None:
        """Expire a session now, as ZooKeeper does when its timeout passes (fault injection)."""

    @abstractmethod
    async def aclose(self) -> None:
        """Close every session opened here and release resources."""
