"""aiozk's errors and stats as ours: the one place where a foreign type becomes a kemu one.

Every aiozk exception a call can meet becomes a ``protocol.errors.StoreError`` here
(``translate``, ``translated``), chained to the original; every aiozk ``Stat`` becomes a
``protocol.store.Stat`` (``stat_of``). See docs/zookeeper-adapter.md, "Error translation".
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from aiozk import exc as zk_exc

from protocol.errors import (
    BadArgumentsError,
    BadVersionError,
    ConnectionLossError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
    StoreError,
)
from protocol.store import Stat

# aiozk's response errors -> ours.
_ERRORS: dict[type[Any], type[StoreError]] = {
    zk_exc.NoNode: NoNodeError,
    zk_exc.NodeExists: NodeExistsError,
    zk_exc.BadVersion: BadVersionError,
    zk_exc.NotEmpty: NotEmptyError,
    zk_exc.NoChildrenForEphemerals: NoChildrenForEphemeralsError,
    zk_exc.BadArguments: BadArgumentsError,
    zk_exc.SessionExpired: SessionExpiredError,
    zk_exc.ConnectionLoss: ConnectionLossError,
    zk_exc.OperationTimeout: ConnectionLossError,
    zk_exc.SessionMoved: ConnectionLossError,
}
# Everything that means "the connection failed; the outcome is unknown".
_CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    zk_exc.ConnectError,
    zk_exc.FailedRetry,
    zk_exc.TimeoutError,
    zk_exc.SessionLost,
    zk_exc.UnfinishedRead,
    OSError,
    TimeoutError,
    EOFError,
)
FOREIGN_ERRORS: tuple[type[BaseException], ...] = (zk_exc.ZKError, OSError, EOFError)
"""What a request sent through aiozk can fail with, besides our own errors."""

# Multi-op reply codes of the ops that did not fail themselves (rolled back, and
# ZooKeeper's RUNTIMEINCONSISTENCY for the ops after the failing one).
_MULTI_BYSTANDER_CODES = (zk_exc.RolledBack.error_code, zk_exc.RuntimeInconsistency.error_code)


def translate(err: BaseException, path: str) -> StoreError:
    """A foreign exception as one of ours (ours are returned as they are)."""
    if isinstance(err, StoreError):
        return err
    mapped = _ERRORS.get(type(err))
    if mapped is not None:
        return mapped(path)
    if isinstance(err, _CONNECTION_ERRORS):
        return ConnectionLossError(f"{path}: {type(err).__name__}: {err}")
    return StoreError(f"{path}: zookeeper error {type(err).__name__}: {err}")


@contextmanager
def translated(path: str) -> Iterator[None]:
    """Raise what the block raises of ``FOREIGN_ERRORS`` as ours, chained to it."""
    try:
        yield
    except FOREIGN_ERRORS as exc:
        raise translate(exc, path) from exc


def multi_errors(paths: Sequence[str], replies: Sequence[object]) -> tuple[StoreError | None, ...]:
    """The per-op errors of a failed multi whose ops are on ``paths``. The server answers
    a failed multi with a rolled-back code (0) for the ops before the failing one, its
    error, then a runtime-inconsistency code (-2) for the ops after it: keep only the real
    error, on its op."""
    codes = [(i, r) for i, r in enumerate(replies) if isinstance(r, int)]
    failed, code = next(((i, c) for i, c in codes if c not in _MULTI_BYSTANDER_CODES), codes[0])
    errors: list[StoreError | None] = [None] * len(paths)
    errors[failed] = translate(zk_exc.get_response_error(code), paths[failed])
    return tuple(errors)


def stat_of(s: Any) -> Stat:
    """aiozk's ``Stat`` as ours."""
    return Stat(
        czxid=s.created_zxid,
        mzxid=s.last_modified_zxid,
        pzxid=s.last_modified_children,
        ctime=s.created,
        mtime=s.modified,
        version=s.version,
        cversion=s.child_version,
        aversion=s.acl_version,
        ephemeral_owner=s.ephemeral_owner,
        data_length=s.data_length,
        num_children=s.num_children,
    )
