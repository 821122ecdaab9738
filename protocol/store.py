"""Metadata-store values: Stat, multi-op operations and results, watch and session events.

They are protocol values because they cross actor boundaries: the embedded store is itself
an actor that brokers in other processes reach over the network.
"""

from __future__ import annotations

from enum import StrEnum

import msgspec

from protocol.base import Message


class Stat(msgspec.Struct, frozen=True, kw_only=True):
    """ZooKeeper's Stat of a node."""

    czxid: int
    mzxid: int
    pzxid: int
    ctime: int  # ms since the Unix epoch (the store's clock)
    mtime: int
    version: int  # data version: bumped by every set
    cversion: int  # children version: bumped by every child create/delete
    aversion: int = 0
    ephemeral_owner: int = 0  # session id of the owner, 0 for persistent nodes
    data_length: int = 0
    num_children: int = 0


# -- multi-op operations (also usable alone)


class CheckOp(Message, frozen=True, kw_only=True):
    path: str
    version: int


class CreateOp(Message, frozen=True, kw_only=True):
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequential: bool = False


class SetDataOp(Message, frozen=True, kw_only=True):
    path: str
    data: bytes
    version: int = -1


class DeleteOp(Message, frozen=True, kw_only=True):
    path: str
    version: int = -1


StoreOp = CheckOp | CreateOp | SetDataOp | DeleteOp


class CheckResult(Message, frozen=True, kw_only=True):
    path: str


class CreateResult(Message, frozen=True, kw_only=True):
    path: str  # the created path (with the sequence suffix for sequential nodes)


class SetDataResult(Message, frozen=True, kw_only=True):
    path: str
    stat: Stat


class DeleteResult(Message, frozen=True, kw_only=True):
    path: str


OpResult = CheckResult | CreateResult | SetDataResult | DeleteResult


# -- events delivered to a session's owner, in order


class WatchKind(StrEnum):
    CREATED = "created"
    DELETED = "deleted"
    DATA_CHANGED = "data_changed"
    CHILDREN_CHANGED = "children_changed"


class WatchEvent(Message, frozen=True, kw_only=True):
    """A one-shot watch fired. Watches carry no data: the owner re-reads (and re-arms)."""

    session_id: int
    path: str
    kind: WatchKind


class SessionState(StrEnum):
    CONNECTED = "connected"
    SUSPENDED = "suspended"  # connection lost; the session may still be alive
    EXPIRED = "expired"  # the session is gone, with its ephemerals and watches
    CLOSED = "closed"  # closed by its owner


class SessionEvent(Message, frozen=True, kw_only=True):
    session_id: int
    state: SessionState


StoreEvent = WatchEvent | SessionEvent


# -- the embedded store served over the network (cluster.store.remote)
#
# A client node opens a session with ``StoreOpenSession`` (naming the actor that receives
# the session's pushed ``WatchEvent``/``SessionEvent``s), keeps it alive with
# ``StoreHeartbeat`` tells (the server expires a session not heard from for its timeout,
# as ZooKeeper does), and calls operations with the ``Store*`` requests below.


class StoreOpenSession(Message, frozen=True, kw_only=True):
    timeout: float
    name: str
    owner_node: str
    owner_actor: str


class StoreSessionOpened(Message, frozen=True, kw_only=True):
    session_id: int
    timeout: float


class StoreHeartbeat(Message, frozen=True, kw_only=True):
    session_id: int


class StoreCreate(Message, frozen=True, kw_only=True):
    session_id: int
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequential: bool = False
    make_parents: bool = False


class StoreGet(Message, frozen=True, kw_only=True):
    session_id: int
    path: str
    watch: bool = False


class StoreSet(Message, frozen=True, kw_only=True):
    session_id: int
    path: str
    data: bytes
    version: int = -1


class StoreDelete(Message, frozen=True, kw_only=True):
    session_id: int
    path: str
    version: int = -1
    recursive: bool = False


class StoreExists(Message, frozen=True, kw_only=True):
    session_id: int
    path: str
    watch: bool = False


class StoreChildren(Message, frozen=True, kw_only=True):
    session_id: int
    path: str
    watch: bool = False


class StoreMulti(Message, frozen=True, kw_only=True):
    session_id: int
    ops: tuple[StoreOp, ...]


class StoreCloseSession(Message, frozen=True, kw_only=True):
    session_id: int


class StoreExpireSession(Message, frozen=True, kw_only=True):
    session_id: int


StoreRequest = (
    StoreCreate
    | StoreGet
    | StoreSet
    | StoreDelete
    | StoreExists
    | StoreChildren
    | StoreMulti
    | StoreCloseSession
    | StoreExpireSession
)


class StorePathReply(Message, frozen=True, kw_only=True):
    path: str


class StoreDataReply(Message, frozen=True, kw_only=True):
    data: bytes
    stat: Stat


class StoreStatReply(Message, frozen=True, kw_only=True):
    stat: Stat | None


class StoreChildrenReply(Message, frozen=True, kw_only=True):
    children: tuple[str, ...]


class StoreMultiReply(Message, frozen=True, kw_only=True):
    results: tuple[OpResult, ...]


class StoreDone(Message, frozen=True, kw_only=True):
    pass


class StoreFailure(Message, frozen=True, kw_only=True):
    """A store call failed: ``error`` is the StoreError class name; for a failed multi,
    ``op_errors`` names each op's error (``None`` for ops that did not fail)."""

    error: str
    message: str
    op_errors: tuple[str | None, ...] = ()
