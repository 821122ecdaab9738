"""aiozk's errors and stats as ours (see docs/zookeeper-adapter.md)."""

from __future__ import annotations

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
from protocol.store import (
    Stat,
)

# aiozk's response errors -> ours (CONVENTIONS #3: translated once, here).
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
# Multi-op reply codes of the ops that did not fail themselves (rolled back, and
# ZooKeeper's RUNTIMEINCONSISTENCY for the ops after the failing one).
_MULTI_BYSTANDER_CODES = (zk_exc.RolledBack.error_code, zk_exc.RuntimeInconsistency.error_code)


def _translate(err: BaseException, path: str) -> StoreError:
    """A foreign exception as one of ours."""
    if isinstance(err, StoreError):
        return err
    mapped = _ERRORS.get(type(err))
    if mapped is not None:
        return mapped(path)
    if isinstance(err, _CONNECTION_ERRORS):
        return ConnectionLossError(f"{path}: {type(err).__name__}: {err}")
    return StoreError(f"{path}: zookeeper error {type(err).__name__}: {err}")


def _stat(s: Any) -> Stat:
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
