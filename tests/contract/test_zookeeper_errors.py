"""ZooKeeperStore's error translation: what a real server answers, as kemu's errors.

The adapter raises ``protocol.errors`` types only, each chained to the aiozk error it
translates (docs/zookeeper-adapter.md, "Error translation"), so a traceback still shows
what the server said.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import pytest_asyncio
from aiozk import exc as zk_exc

from cluster.store.zookeeper import ZooKeeperSession, ZooKeeperStore
from protocol.errors import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    StoreError,
    TransactionFailedError,
)
from protocol.store import CheckOp, CreateOp, StoreOp
from tests.support.store_factories import unique_chroot
from tests.support.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.zookeeper


@pytest_asyncio.fixture
async def session(zookeeper_server: ZooKeeperServer) -> AsyncIterator[ZooKeeperSession]:
    store = ZooKeeperStore(zookeeper_server.hosts, chroot=unique_chroot())
    try:
        yield await store.open_session(timeout=10.0, name="errors")
    finally:
        await store.aclose()


@pytest.mark.asyncio
async def test_server_errors_are_ours_chained_to_aiozks(session: ZooKeeperSession) -> None:
    """Each error answer of the server is raised as its ``StoreError`` subclass, naming
    the path, with aiozk's error as its cause."""
    await session.create("/a", b"")
    await session.create("/a/b", b"")
    cases: list[tuple[Callable[[], Awaitable[object]], type[StoreError], type[Exception]]] = [
        (lambda: session.get("/missing"), NoNodeError, zk_exc.NoNode),
        (lambda: session.create("/a", b""), NodeExistsError, zk_exc.NodeExists),
        (lambda: session.set("/a", b"x", version=7), BadVersionError, zk_exc.BadVersion),
        (lambda: session.delete("/a"), NotEmptyError, zk_exc.NotEmpty),
    ]
    for call, ours, theirs in cases:
        with pytest.raises(ours) as raised:
            await call()
        assert isinstance(raised.value.__cause__, theirs)
        assert "/a" in str(raised.value) or "/missing" in str(raised.value)
    assert await session.children("/a") == ("b",)  # nothing was changed


@pytest.mark.asyncio
async def test_a_failed_multi_names_only_its_failing_op(session: ZooKeeperSession) -> None:
    """In a failed multi, the op the server refused gets its error and the others none
    (the server's rolled-back and runtime-inconsistency codes are not errors of theirs)."""
    await session.create("/epoch", b"")
    ops: list[StoreOp] = [
        CreateOp(path="/x"),
        CheckOp(path="/epoch", version=3),
        CreateOp(path="/y"),
    ]
    with pytest.raises(TransactionFailedError) as raised:
        await session.multi(ops)
    errors = raised.value.results
    assert [type(e) if e is not None else None for e in errors] == [None, BadVersionError, None]
    assert await session.exists("/x") is None
