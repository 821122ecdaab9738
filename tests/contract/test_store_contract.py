"""The metadata-store contract: ZooKeeper's semantics, checked against every backend.

Each test gets ``store`` (embedded, or a real ZooKeeper) in a fresh chroot. Tests never
sleep: they wait for the next event of a session's stream with a deadline, and prove that
nothing else arrived by triggering a watch of their own and seeing its event come next
(events are delivered in order).
"""

from __future__ import annotations

import gc
import json
import os
import re
import subprocess
import sys
import weakref
from pathlib import Path

import anyio
import pytest

from actors.runtime.clock import VIRTUAL_EPOCH_MS, VirtualClock, run_virtual
from actors.zk.store import MetadataStore, StoreSession
from cluster.store.embedded import EmbeddedStore
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
from tests.support.served_store import ServedStore
from tests.support.store_factories import SessionFactory, StoreFactory, unique_chroot
from tests.support.store_scenario import scenario_trace
from tests.support.waiting import until

DEADLINE = 15.0  # seconds to wait for one event; generous for a real server's expiry
REPO = Path(__file__).resolve().parents[2]

CREATED = WatchKind.CREATED
DELETED = WatchKind.DELETED
DATA_CHANGED = WatchKind.DATA_CHANGED
CHILDREN_CHANGED = WatchKind.CHILDREN_CHANGED
_CONNECTION_STATES = (SessionState.CONNECTED, SessionState.SUSPENDED)


# ----------------------------------------------------------------------------- helpers


async def next_event(session: StoreSession) -> StoreEvent:
    """The session's next event, skipping the connection-state changes (CONNECTED,
    SUSPENDED) that a real client may report: the contract is about data and session life."""
    with anyio.fail_after(DEADLINE):
        while True:
            event = await session.events.receive()
            if isinstance(event, SessionEvent) and event.state in _CONNECTION_STATES:
                continue
            return event


async def expect_watch(session: StoreSession, path: str, kind: WatchKind) -> None:
    event = await next_event(session)
    assert event == WatchEvent(session_id=session.session_id, path=path, kind=kind)


async def expect_no_other_event(session: StoreSession, marker: str = "/marker") -> None:
    """Nothing is queued for ``session``: a watch armed and fired now is its next event."""
    await session.exists(marker, watch=True)
    await session.create(marker)
    await expect_watch(session, marker, CREATED)


async def expect_session_end(session: StoreSession, state: SessionState) -> None:
    event = await next_event(session)
    assert event == SessionEvent(session_id=session.session_id, state=state)


# ----------------------------------------------------------------------------- basics


@pytest.mark.asyncio
async def test_create_then_get_returns_data_and_a_fresh_stat(open_session: SessionFactory) -> None:
    """A new node holds its data with version 0 and czxid = mzxid = pzxid."""
    s = await open_session()
    assert await s.create("/a", b"hello") == "/a"
    data, stat = await s.get("/a")
    assert data == b"hello"
    assert stat.version == 0
    assert stat.cversion == 0
    assert stat.czxid == stat.mzxid == stat.pzxid
    assert stat.ctime == stat.mtime > 0
    assert stat.data_length == 5
    assert stat.num_children == 0
    assert stat.ephemeral_owner == 0


@pytest.mark.asyncio
async def test_set_bumps_version_and_mzxid_but_keeps_czxid(open_session: SessionFactory) -> None:
    """Each set bumps the data version and moves mzxid past czxid; get reads what set said."""
    s = await open_session()
    await s.create("/a", b"v0")
    _, before = await s.get("/a")
    first = await s.set("/a", b"v1")
    second = await s.set("/a", b"v22")
    assert (first.version, second.version) == (1, 2)
    assert before.czxid == first.czxid == second.czxid
    assert before.czxid < first.mzxid < second.mzxid
    assert second.mtime >= second.ctime
    assert second.data_length == 3
    data, stat = await s.get("/a")
    assert (data, stat) == (b"v22", second)


@pytest.mark.asyncio
async def test_child_changes_bump_parent_cversion_and_pzxid(open_session: SessionFactory) -> None:
    """Creating or deleting a child bumps the parent's cversion and pzxid, not its version."""
    s = await open_session()
    await s.create("/p")
    await s.create("/p/c1")
    _, parent = await s.get("/p")
    _, child = await s.get("/p/c1")
    assert (parent.cversion, parent.num_children, parent.version) == (1, 1, 0)
    assert parent.pzxid == child.czxid
    assert parent.mzxid == parent.czxid
    await s.delete("/p/c1")
    _, after = await s.get("/p")
    assert (after.cversion, after.num_children, after.version) == (2, 0, 0)
    assert after.pzxid > parent.pzxid
    assert after.mzxid == parent.mzxid


@pytest.mark.asyncio
async def test_exists_returns_the_stat_or_none(open_session: SessionFactory) -> None:
    """exists returns the node's Stat when it is there and None when it is not."""
    s = await open_session()
    assert await s.exists("/a") is None
    await s.create("/a", b"x")
    _, stat = await s.get("/a")
    assert await s.exists("/a") == stat


@pytest.mark.asyncio
async def test_children_are_returned_sorted(open_session: SessionFactory) -> None:
    """children lists the names (not paths) of a node's children, sorted."""
    s = await open_session()
    await s.create("/p")
    for name in ("b", "c10", "a", "c2"):
        await s.create(f"/p/{name}")
    assert await s.children("/p") == ("a", "b", "c10", "c2")
    assert await s.children("/p/a") == ()


@pytest.mark.asyncio
async def test_ephemeral_node_records_its_owner(open_session: SessionFactory) -> None:
    """An ephemeral node's ephemeral_owner is its session's id; a persistent node's is 0."""
    s = await open_session()
    await s.create("/e", ephemeral=True)
    await s.create("/p")
    _, eph = await s.get("/e")
    _, per = await s.get("/p")
    assert eph.ephemeral_owner == s.session_id
    assert per.ephemeral_owner == 0


@pytest.mark.asyncio
async def test_sessions_have_distinct_ids(open_session: SessionFactory) -> None:
    """Every session has its own non-zero id and a positive timeout."""
    a = await open_session("a")
    b = await open_session("b")
    assert a.session_id != b.session_id
    assert 0 not in (a.session_id, b.session_id)
    assert a.timeout > 0


# ----------------------------------------------------------------------------- errors


@pytest.mark.asyncio
async def test_create_of_an_existing_node_raises_node_exists(open_session: SessionFactory) -> None:
    """Creating a path that exists fails with NodeExistsError and keeps the old data."""
    s = await open_session()
    await s.create("/a", b"old")
    with pytest.raises(NodeExistsError):
        await s.create("/a", b"new")
    assert (await s.get("/a"))[0] == b"old"


@pytest.mark.asyncio
async def test_calls_on_missing_nodes_raise_no_node(open_session: SessionFactory) -> None:
    """get, set, delete, children and create-under-a-missing-parent raise NoNodeError."""
    s = await open_session()
    with pytest.raises(NoNodeError):
        await s.create("/missing/child")
    with pytest.raises(NoNodeError):
        await s.get("/missing")
    with pytest.raises(NoNodeError):
        await s.set("/missing", b"x")
    with pytest.raises(NoNodeError):
        await s.delete("/missing")
    with pytest.raises(NoNodeError):
        await s.children("/missing")
    assert await s.exists("/missing") is None


@pytest.mark.asyncio
async def test_delete_of_a_node_with_children_raises_not_empty(
    open_session: SessionFactory,
) -> None:
    """A node with children is not deleted without ``recursive``."""
    s = await open_session()
    await s.create("/p")
    await s.create("/p/c")
    with pytest.raises(NotEmptyError):
        await s.delete("/p")
    assert await s.children("/p") == ("c",)


@pytest.mark.asyncio
async def test_conditional_set_and_delete_check_the_version(open_session: SessionFactory) -> None:
    """set and delete with a version apply only at that version; -1 means any version."""
    s = await open_session()
    await s.create("/a", b"v0")
    with pytest.raises(BadVersionError):
        await s.set("/a", b"x", version=1)
    assert (await s.set("/a", b"v1", version=0)).version == 1
    assert (await s.set("/a", b"v2", version=-1)).version == 2
    with pytest.raises(BadVersionError):
        await s.delete("/a", version=1)
    assert (await s.get("/a"))[0] == b"v2"
    await s.delete("/a", version=2)
    assert await s.exists("/a") is None


@pytest.mark.asyncio
async def test_ephemeral_nodes_cannot_have_children(open_session: SessionFactory) -> None:
    """Creating a child of an ephemeral node raises NoChildrenForEphemeralsError."""
    s = await open_session()
    await s.create("/e", ephemeral=True)
    with pytest.raises(NoChildrenForEphemeralsError):
        await s.create("/e/child")
    with pytest.raises(NoChildrenForEphemeralsError):
        await s.create("/e/child", ephemeral=True)
    assert await s.children("/e") == ()


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "path", ["", "relative", "/trailing/", "/double//slash", "/dot/./x", "/dot/../x", "/ctl\x01"]
)
async def test_invalid_paths_raise_bad_arguments(open_session: SessionFactory, path: str) -> None:
    """Paths ZooKeeper's client refuses (relative, trailing '/', empty, '.' or '..'
    components, control characters) raise BadArgumentsError."""
    s = await open_session()
    with pytest.raises(BadArgumentsError):
        await s.create(path)
    with pytest.raises(BadArgumentsError):
        await s.get(path)
    with pytest.raises(BadArgumentsError):
        await s.exists(path)


@pytest.mark.asyncio
async def test_data_over_one_mebibyte_is_refused_and_nothing_is_written(
    open_session: SessionFactory,
) -> None:
    """A node's data is limited to 1 MiB, as ZooKeeper's jute.maxbuffer: more is refused."""
    s = await open_session()
    too_big = b"x" * (1024 * 1024 + 1)
    with pytest.raises(BadArgumentsError):
        await s.create("/big", too_big)
    assert await s.exists("/big") is None
    await s.create("/big", b"small")
    with pytest.raises(BadArgumentsError):
        await s.set("/big", too_big)
    assert (await s.get("/big"))[0] == b"small"


@pytest.mark.asyncio
async def test_the_root_cannot_be_deleted(open_session: SessionFactory) -> None:
    """Deleting '/' (the chroot) raises BadArgumentsError and leaves the tree alone."""
    s = await open_session()
    await s.create("/a")
    with pytest.raises(BadArgumentsError):
        await s.delete("/")
    assert await s.children("/") == ("a",)


# ----------------------------------------------------------------------------- variants


@pytest.mark.asyncio
async def test_make_parents_creates_missing_parents(open_session: SessionFactory) -> None:
    """make_parents creates the missing ancestors, persistent and empty, even for an
    ephemeral leaf, and keeps the ancestors that exist."""
    s = await open_session()
    await s.create("/x", b"keep")
    assert await s.create("/x/y/z", b"leaf", ephemeral=True, make_parents=True) == "/x/y/z"
    data, y = await s.get("/x/y")
    assert (data, y.ephemeral_owner) == (b"", 0)
    assert (await s.get("/x"))[0] == b"keep"
    data, z = await s.get("/x/y/z")
    assert (data, z.ephemeral_owner) == (b"leaf", s.session_id)
    with pytest.raises(NodeExistsError):
        await s.create("/x/y/z", make_parents=True)


@pytest.mark.asyncio
async def test_recursive_delete_removes_the_subtree(open_session: SessionFactory) -> None:
    """delete(recursive=True) removes a node and everything under it, nothing else."""
    s = await open_session()
    for path in ("/r/a/b", "/r/a/c", "/r/d", "/keep/e"):
        await s.create(path, make_parents=True)
    await s.delete("/r", recursive=True)
    assert await s.exists("/r") is None
    assert await s.children("/") == ("keep",)
    assert await s.children("/keep") == ("e",)


@pytest.mark.asyncio
async def test_sequential_suffix_counts_the_children_ever_created(
    open_session: SessionFactory,
) -> None:
    """A sequential node's suffix is the number of children ever created under its parent
    (ZooKeeper's internal cversion: unlike Stat.cversion it ignores deletions), 10 digits,
    zero-padded, so names only grow."""
    s = await open_session()
    await s.create("/q")
    first = await s.create("/q/n-", sequential=True)
    second = await s.create("/q/n-", b"x", sequential=True, ephemeral=True)
    await s.create("/q/other")
    await s.delete("/q/other")
    _, parent = await s.get("/q")
    assert parent.cversion == 4
    third = await s.create("/q/n-", sequential=True)
    assert (first, second, third) == ("/q/n-0000000000", "/q/n-0000000001", "/q/n-0000000003")
    assert all(re.fullmatch(r"/q/n-\d{10}", p) for p in (first, second, third))
    assert await s.children("/q") == ("n-0000000000", "n-0000000001", "n-0000000003")
    assert (await s.get(second))[1].ephemeral_owner == s.session_id


# ----------------------------------------------------------------------------- multi


@pytest.mark.asyncio
async def test_multi_applies_every_op_and_returns_one_result_each(
    open_session: SessionFactory,
) -> None:
    """A successful multi applies all its ops and returns a typed result per op."""
    s = await open_session()
    await s.create("/m", b"v0")
    await s.create("/gone")
    await s.create("/seq")
    results = await s.multi(
        [
            CheckOp(path="/m", version=0),
            CreateOp(path="/m/a", data=b"a"),
            CreateOp(path="/seq/n-", sequential=True),
            SetDataOp(path="/m", data=b"v1", version=0),
            DeleteOp(path="/gone"),
        ]
    )
    assert results[0] == CheckResult(path="/m")
    assert results[1] == CreateResult(path="/m/a")
    assert results[2] == CreateResult(path="/seq/n-0000000000")
    assert isinstance(results[3], SetDataResult)
    assert (results[3].path, results[3].stat.version) == ("/m", 1)
    assert results[4] == DeleteResult(path="/gone")
    data, stat = await s.get("/m")
    assert (data, stat) == (b"v1", results[3].stat)
    assert (await s.get("/m/a"))[0] == b"a"
    assert await s.exists("/gone") is None


@pytest.mark.asyncio
async def test_multi_is_one_transaction(open_session: SessionFactory) -> None:
    """The ops of a multi see each other's effects and commit under a single zxid."""
    s = await open_session()
    await s.multi(
        [
            CreateOp(path="/t"),
            CreateOp(path="/t/child"),
            SetDataOp(path="/t/child", data=b"x", version=0),
        ]
    )
    _, parent = await s.get("/t")
    data, child = await s.get("/t/child")
    assert (data, child.version) == (b"x", 1)
    assert parent.czxid == child.czxid == child.mzxid == parent.pzxid


@pytest.mark.asyncio
async def test_a_failing_check_makes_the_multi_change_nothing(
    open_session: SessionFactory,
) -> None:
    """When a check fails, the ops before it are rolled back: data, versions and children
    are as they were, and the error names the check."""
    s = await open_session()
    await s.create("/m", b"v0")
    _, before = await s.get("/m")
    with pytest.raises(TransactionFailedError) as failure:
        await s.multi(
            [
                CreateOp(path="/m/a"),
                SetDataOp(path="/m", data=b"v1"),
                CheckOp(path="/m", version=99),
            ]
        )
    errors = failure.value.results
    assert len(errors) == 3
    assert errors[0] is None
    assert errors[1] is None
    assert isinstance(errors[2], BadVersionError)
    assert await s.get("/m") == (b"v0", before)
    assert await s.exists("/m/a") is None
    assert await s.children("/m") == ()


@pytest.mark.asyncio
async def test_a_failing_last_change_makes_the_multi_change_nothing(
    open_session: SessionFactory,
) -> None:
    """When the last op, a change, fails, the ops before it are rolled back and the failing
    op itself changed nothing."""
    s = await open_session()
    await s.create("/m", b"v0")
    await s.create("/n", b"n0")
    _, m_before = await s.get("/m")
    _, n_before = await s.get("/n")
    for last in (SetDataOp(path="/n", data=b"n1", version=7), DeleteOp(path="/n", version=7)):
        with pytest.raises(TransactionFailedError) as failure:
            await s.multi([CreateOp(path="/m/a"), SetDataOp(path="/m", data=b"v1"), last])
        assert failure.value.results[:2] == (None, None)
        assert isinstance(failure.value.results[2], BadVersionError)
        assert await s.get("/m") == (b"v0", m_before)
        assert await s.get("/n") == (b"n0", n_before)
        assert await s.children("/m") == ()


@pytest.mark.asyncio
@pytest.mark.parametrize("path", ["relative", "/trailing/", "/double//slash", "/dot/../x"])
async def test_multi_ops_on_invalid_paths_raise_bad_arguments(
    open_session: SessionFactory, path: str
) -> None:
    """A check, set or delete of a path ZooKeeper's client refuses fails the multi with
    BadArgumentsError for that op, and changes nothing."""
    s = await open_session()
    await s.create("/x", b"x")
    for bad in (
        CheckOp(path=path, version=0),
        SetDataOp(path=path, data=b"y"),
        DeleteOp(path=path),
    ):
        with pytest.raises(TransactionFailedError) as failure:
            await s.multi([SetDataOp(path="/x", data=b"z"), bad])
        assert failure.value.results[0] is None
        assert isinstance(failure.value.results[1], BadArgumentsError)
        assert (await s.get("/x"))[0] == b"x"


@pytest.mark.asyncio
async def test_multi_results_name_the_failing_op(open_session: SessionFactory) -> None:
    """The failing op gets its own error class, every other op None, nothing is created."""
    s = await open_session()
    await s.create("/exists")
    cases: list[tuple[StoreOp, type[StoreError]]] = [
        (CreateOp(path="/missing/x"), NoNodeError),
        (CreateOp(path="/exists"), NodeExistsError),
        (DeleteOp(path="/missing"), NoNodeError),
        (CheckOp(path="/missing", version=0), NoNodeError),
    ]
    for bad, error in cases:
        with pytest.raises(TransactionFailedError) as failure:
            await s.multi([CreateOp(path="/t1"), bad, CreateOp(path="/t2")])
        results = failure.value.results
        assert results[0] is None
        assert results[2] is None
        assert isinstance(results[1], error)
        assert await s.children("/") == ("exists",)


@pytest.mark.asyncio
async def test_a_successful_multi_fires_watches(open_session: SessionFactory) -> None:
    """Watches on nodes a multi creates, changes or deletes fire once it commits."""
    s = await open_session()
    await s.create("/d", b"x")
    await s.create("/gone")
    assert await s.exists("/new", watch=True) is None
    await s.get("/d", watch=True)
    await s.exists("/gone", watch=True)
    await s.multi([CreateOp(path="/new"), SetDataOp(path="/d", data=b"y"), DeleteOp(path="/gone")])
    await expect_watch(s, "/new", CREATED)
    await expect_watch(s, "/d", DATA_CHANGED)
    await expect_watch(s, "/gone", DELETED)


@pytest.mark.asyncio
async def test_a_failed_multi_fires_no_watch(open_session: SessionFactory) -> None:
    """A multi that fails fires none of the watches its rolled-back ops would have fired,
    and leaves them armed."""
    s = await open_session()
    await s.create("/d", b"x")
    assert await s.exists("/new", watch=True) is None
    await s.get("/d", watch=True)
    with pytest.raises(TransactionFailedError):
        await s.multi(
            [
                CreateOp(path="/new"),
                SetDataOp(path="/d", data=b"y"),
                CheckOp(path="/d", version=42),
            ]
        )
    await s.set("/d", b"z")
    await expect_watch(s, "/d", DATA_CHANGED)
    await expect_no_other_event(s)


# ----------------------------------------------------------------------------- watches


@pytest.mark.asyncio
async def test_exists_watch_on_a_missing_node_fires_created(open_session: SessionFactory) -> None:
    """exists(watch) on a missing node arms a watch that fires ``created``."""
    s = await open_session()
    assert await s.exists("/a", watch=True) is None
    await s.create("/a")
    await expect_watch(s, "/a", CREATED)


@pytest.mark.asyncio
async def test_data_watch_fires_data_changed_on_set(open_session: SessionFactory) -> None:
    """get(watch) and exists(watch) arm a data watch that a set fires as ``data_changed``."""
    s = await open_session()
    await s.create("/a")
    await s.create("/b")
    await s.get("/a", watch=True)
    await s.exists("/b", watch=True)
    await s.set("/a", b"1")
    await expect_watch(s, "/a", DATA_CHANGED)
    await s.set("/b", b"1")
    await expect_watch(s, "/b", DATA_CHANGED)


@pytest.mark.asyncio
async def test_data_watch_fires_deleted_on_delete(open_session: SessionFactory) -> None:
    """A data watch fires ``deleted`` when its node is deleted."""
    s = await open_session()
    await s.create("/a")
    await s.get("/a", watch=True)
    await s.delete("/a")
    await expect_watch(s, "/a", DELETED)


@pytest.mark.asyncio
async def test_child_watch_fires_children_changed(open_session: SessionFactory) -> None:
    """children(watch) fires ``children_changed`` when a child is created or deleted, and
    not when the node's own data changes."""
    s = await open_session()
    await s.create("/p")
    await s.create("/p/old")
    assert await s.children("/p", watch=True) == ("old",)
    await s.set("/p", b"data")
    await s.create("/p/new")
    await expect_watch(s, "/p", CHILDREN_CHANGED)
    assert await s.children("/p", watch=True) == ("new", "old")
    await s.delete("/p/old")
    await expect_watch(s, "/p", CHILDREN_CHANGED)
    await expect_no_other_event(s)


@pytest.mark.asyncio
async def test_child_watch_fires_deleted_when_the_node_goes(open_session: SessionFactory) -> None:
    """A child watch fires ``deleted`` when the watched node itself is deleted."""
    s = await open_session()
    await s.create("/p")
    await s.children("/p", watch=True)
    await s.delete("/p")
    await expect_watch(s, "/p", DELETED)


@pytest.mark.asyncio
async def test_watches_are_one_shot(open_session: SessionFactory) -> None:
    """A watch fires once; later changes are not reported until it is armed again."""
    s = await open_session()
    await s.create("/a")
    await s.get("/a", watch=True)
    await s.set("/a", b"1")
    await s.set("/a", b"2")
    await expect_watch(s, "/a", DATA_CHANGED)
    await expect_no_other_event(s)
    await s.get("/a", watch=True)
    await s.delete("/a")
    await expect_watch(s, "/a", DELETED)


@pytest.mark.asyncio
async def test_arming_a_watch_twice_yields_one_event(open_session: SessionFactory) -> None:
    """get(watch) and exists(watch) on one path, twice each, are one data watch: one event."""
    s = await open_session()
    await s.create("/a")
    for _ in range(2):
        await s.get("/a", watch=True)
        await s.exists("/a", watch=True)
    await s.children("/a", watch=True)
    await s.children("/a", watch=True)
    await s.set("/a", b"1")
    await expect_watch(s, "/a", DATA_CHANGED)
    await s.create("/a/c")
    await expect_watch(s, "/a", CHILDREN_CHANGED)
    await expect_no_other_event(s)


@pytest.mark.asyncio
async def test_deleting_a_node_watched_for_data_and_children_fires_once(
    open_session: SessionFactory,
) -> None:
    """A session watching a node's data and children hears of its deletion once."""
    s = await open_session()
    await s.create("/a")
    await s.get("/a", watch=True)
    await s.children("/a", watch=True)
    await s.delete("/a")
    await expect_watch(s, "/a", DELETED)
    await expect_no_other_event(s)


@pytest.mark.asyncio
async def test_create_fires_created_then_the_parents_children_changed(
    open_session: SessionFactory,
) -> None:
    """A create fires the node's ``created`` before its parent's ``children_changed``;
    a delete fires ``deleted`` before ``children_changed``."""
    s = await open_session()
    await s.create("/p")
    await s.exists("/p/a", watch=True)
    await s.children("/p", watch=True)
    await s.create("/p/a")
    await expect_watch(s, "/p/a", CREATED)
    await expect_watch(s, "/p", CHILDREN_CHANGED)
    await s.exists("/p/a", watch=True)
    await s.children("/p", watch=True)
    await s.delete("/p/a")
    await expect_watch(s, "/p/a", DELETED)
    await expect_watch(s, "/p", CHILDREN_CHANGED)


@pytest.mark.asyncio
async def test_watches_fire_for_changes_by_other_sessions(open_session: SessionFactory) -> None:
    """Each watching session gets its own event, with its own session id, whoever made the
    change; a session that did not watch gets nothing."""
    a = await open_session("a")
    b = await open_session("b")
    writer = await open_session("writer")
    await a.exists("/n", watch=True)
    await b.exists("/n", watch=True)
    await writer.create("/n")
    await expect_watch(a, "/n", CREATED)
    await expect_watch(b, "/n", CREATED)
    await expect_no_other_event(writer, "/writer-marker")


# ----------------------------------------------------------------------------- session end


@pytest.mark.asyncio
async def test_close_removes_ephemerals_at_once(open_session: SessionFactory) -> None:
    """Closing a session deletes its ephemerals, firing other sessions' watches (in an
    order ZooKeeper leaves open: it walks a hash set), and keeps its persistent nodes."""
    owner = await open_session("owner")
    watcher = await open_session("watcher")
    await owner.create("/e", ephemeral=True)
    await owner.create("/kept")
    await watcher.create("/p")
    await owner.create("/p/e2", ephemeral=True)
    await watcher.exists("/e", watch=True)
    await watcher.children("/p", watch=True)
    await owner.close()
    fired = {await next_event(watcher), await next_event(watcher)}
    assert fired == {
        WatchEvent(session_id=watcher.session_id, path="/e", kind=DELETED),
        WatchEvent(session_id=watcher.session_id, path="/p", kind=CHILDREN_CHANGED),
    }
    assert await watcher.exists("/e") is None
    assert await watcher.children("/") == ("kept", "p")
    assert await watcher.children("/p") == ()


@pytest.mark.asyncio
async def test_a_closed_session_ends_its_stream_and_refuses_calls(
    open_session: SessionFactory,
) -> None:
    """After close the owner reads SessionEvent(CLOSED), then the end of the stream; later
    calls raise StoreClosedError, and closing again is harmless."""
    s = await open_session()
    await s.create("/a")
    await s.close()
    await expect_session_end(s, SessionState.CLOSED)
    with anyio.fail_after(DEADLINE), pytest.raises(anyio.EndOfStream):
        await s.events.receive()
    with pytest.raises(StoreClosedError):
        await s.get("/a")
    with pytest.raises(StoreClosedError):
        await s.create("/b")
    await s.close()


@pytest.mark.asyncio
async def test_expiry_removes_ephemerals_and_tells_the_owner(
    store: MetadataStore, open_session: SessionFactory
) -> None:
    """An expired session's ephemerals vanish (other sessions' watches fire ``deleted``),
    its persistent nodes stay, its owner gets SessionEvent(EXPIRED), and its own watches
    are dropped: nothing follows EXPIRED but the end of the stream."""
    owner = await open_session("owner")
    watcher = await open_session("watcher")
    await owner.create("/e", ephemeral=True)
    await owner.create("/kept")
    await owner.get("/kept", watch=True)
    await watcher.exists("/e", watch=True)
    await store.expire_session(owner.session_id)
    await expect_session_end(owner, SessionState.EXPIRED)
    await expect_watch(watcher, "/e", DELETED)
    assert await watcher.exists("/e") is None
    await watcher.set("/kept", b"changed")
    with anyio.fail_after(DEADLINE), pytest.raises(anyio.EndOfStream):
        await owner.events.receive()


@pytest.mark.asyncio
async def test_an_expired_session_refuses_calls(
    store: MetadataStore, open_session: SessionFactory
) -> None:
    """Every call on an expired session raises SessionExpiredError; a new session works."""
    s = await open_session()
    await s.create("/a")
    await store.expire_session(s.session_id)
    await expect_session_end(s, SessionState.EXPIRED)
    with pytest.raises(SessionExpiredError):
        await s.get("/a")
    with pytest.raises(SessionExpiredError):
        await s.create("/b")
    with pytest.raises(SessionExpiredError):
        await s.multi([CheckOp(path="/a", version=0)])
    fresh = await open_session("fresh")
    assert await fresh.exists("/a") is not None
    assert await fresh.exists("/b") is None


# ----------------------------------------------------------------------------- session lifetime


def held_sessions(store: MetadataStore) -> int:
    """How many sessions ``store`` still holds: for the served store, the client's and the
    server-side embedded store's together (a session is held on both sides)."""
    if isinstance(store, ServedStore):
        assert store.remote is not None
        return store.remote.held_sessions + store.embedded.held_sessions
    from cluster.store.zookeeper import ZooKeeperStore

    assert isinstance(store, EmbeddedStore | ZooKeeperStore)
    return store.held_sessions


async def wait_held(store: MetadataStore, expected: int) -> None:
    """Wait until ``store`` holds ``expected`` sessions (the served store's server forgets a
    session once its pump has read the end of its stream)."""
    await until(lambda: held_sessions(store) == expected, timeout=DEADLINE)


# Sessions opened and ended per backend: many on the embedded store, fewer where each one
# is a real connection (a ZooKeeper session, a served session's round trips).
_CHURN_EMBEDDED = 5000
_CHURN_ELSEWHERE = 200


@pytest.mark.asyncio
async def test_a_store_forgets_sessions_that_ended_once_their_streams_are_closed(
    store: MetadataStore, open_session: SessionFactory
) -> None:
    """Sessions opened and closed (or expired) whose owners closed their ``events`` are not
    retained by the store (nothing else keeps them alive either), while a session that is
    still open, and the stream of one that ended but is still being read, keep working."""
    keeper = await open_session("keeper")
    await keeper.exists("/after", watch=True)
    baseline = held_sessions(store)
    lingering = await store.open_session(name="lingering", timeout=10.0)
    await lingering.create("/lingering", ephemeral=True)
    kept_events = lingering.events
    await lingering.close()
    del lingering  # its owner keeps reading the stream, not the session

    churn = _CHURN_EMBEDDED if isinstance(store, EmbeddedStore) else _CHURN_ELSEWHERE
    gone: list[weakref.ref[StoreSession]] = []
    for i in range(churn):
        session = await store.open_session(name=f"churn-{i}", timeout=10.0)
        if i % 50 == 0:
            await session.create(f"/churn-{i}", ephemeral=True)
            gone.append(weakref.ref(session))
        if i % 100 == 1:
            await store.expire_session(session.session_id)
            await expect_session_end(session, SessionState.EXPIRED)
            await session.close()
        else:
            await session.close()
            await expect_session_end(session, SessionState.CLOSED)
        session.events.close()
        del session
    await wait_held(store, baseline + 1)  # the lingering session: its stream is open
    gc.collect()
    assert [ref for ref in gone if ref() is not None] == []

    await keeper.create("/after")
    await expect_watch(keeper, "/after", CREATED)
    with anyio.fail_after(DEADLINE):
        event = await kept_events.receive()
        while isinstance(event, SessionEvent) and event.state in _CONNECTION_STATES:
            event = await kept_events.receive()
        assert isinstance(event, SessionEvent)
        assert event.state is SessionState.CLOSED
        with pytest.raises(anyio.EndOfStream):
            await kept_events.receive()
    kept_events.close()
    await wait_held(store, baseline)


@pytest.mark.asyncio
async def test_aclose_ends_the_stream_of_every_session_still_open(
    make_store: StoreFactory,
) -> None:
    """``aclose`` closes the sessions still open: a reader blocked on one's stream reads
    SessionEvent(CLOSED) and then the end of the stream; the store then holds nothing."""
    other = await make_store(unique_chroot())
    sessions = [await other.open_session(name=f"live-{i}", timeout=10.0) for i in range(3)]
    ended = await other.open_session(name="ended", timeout=10.0)
    await ended.close()
    read: dict[int, list[StoreEvent]] = {}

    async def reader(session: StoreSession) -> None:
        seen = read.setdefault(session.session_id, [])
        async for event in session.events:
            seen.append(event)

    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            for session in sessions:
                tg.start_soon(reader, session)
            await until(  # every reader is blocked on its stream
                lambda: all(s.events.statistics().tasks_waiting_receive for s in sessions)
            )
            await other.aclose()
    for session in sessions:
        ends = [
            e
            for e in read[session.session_id]
            if not (isinstance(e, SessionEvent) and e.state in _CONNECTION_STATES)
        ]
        assert ends == [SessionEvent(session_id=session.session_id, state=SessionState.CLOSED)]
    assert held_sessions(other) == 0


# ----------------------------------------------------------------------------- chroot


@pytest.mark.asyncio
async def test_stores_in_different_chroots_do_not_see_each_other(
    make_store: StoreFactory, open_session: SessionFactory
) -> None:
    """Two stores on one backend with different chroots each see only their own nodes,
    under paths relative to their chroot (watch events included)."""
    left = await open_session("left", on=await make_store(unique_chroot()))
    right = await open_session("right", on=await make_store(unique_chroot()))
    await right.exists("/shared-name", watch=True)
    assert await left.create("/shared-name", b"left") == "/shared-name"
    assert await right.exists("/shared-name") is None
    assert await right.children("/") == ()
    await right.create("/shared-name", b"right")
    await expect_watch(right, "/shared-name", CREATED)
    assert (await left.get("/shared-name"))[0] == b"left"
    assert await left.children("/") == ("shared-name",)


@pytest.mark.asyncio
async def test_the_chroot_is_created_with_parents_on_first_session(
    make_store: StoreFactory, open_session: SessionFactory
) -> None:
    """Opening a session under a chroot that does not exist creates it (with parents)."""
    outer = unique_chroot()
    inner = await open_session("inner", on=await make_store(f"{outer}/deep/er"))
    await inner.create("/leaf")
    above = await open_session("above", on=await make_store(outer))
    assert await above.children("/") == ("deep",)
    assert await above.children("/deep/er") == ("leaf",)


# ----------------------------------------------------------------------------- embedded only


def test_embedded_store_runs_are_identical_under_virtual_time() -> None:
    """Two runs of one call sequence under run_virtual give identical Stats and traces,
    with times from the virtual clock."""
    first, second = scenario_trace(), scenario_trace()
    assert first == second
    run = json.loads(first)
    assert run["stats"][0]["mtime"] == VIRTUAL_EPOCH_MS + 1500
    types = {event["type"] for event in run["trace"]}
    assert {"watch", "session_expired", "multi", "delete_ephemeral"} <= types


def test_embedded_store_runs_do_not_depend_on_the_hash_seed() -> None:
    """The same call sequence gives the same trace whatever PYTHONHASHSEED is (nothing
    iterates a set of strings in hash order)."""
    outputs = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-m", "tests.support.store_scenario"],
            cwd=REPO,
            env=env,
            capture_output=True,
            check=True,
        )
        outputs.add(done.stdout)
    assert len(outputs) == 1


def test_embedded_latency_delays_every_call_on_the_store_clock() -> None:
    """set_latency makes each call take that long on the store's clock; 0 restores yield-only
    calls."""

    async def main() -> tuple[float, float]:
        clock = VirtualClock()
        store = EmbeddedStore(clock=clock)
        session = await store.open_session()
        store.set_latency(0.25)
        start = clock.now()
        await session.create("/a")
        await session.get("/a")
        slow = clock.now() - start
        store.set_latency(0)
        start = clock.now()
        await session.get("/a")
        fast = clock.now() - start
        await store.aclose()
        return slow, fast

    slow, fast = run_virtual(main)
    assert slow == pytest.approx(0.5)
    assert fast == 0


def test_embedded_close_works_from_a_cancelled_scope() -> None:
    """Closing a session inside a cancelled scope still removes its ephemerals (a node
    stopping gracefully must not leave them behind)."""

    async def main() -> Stat | None:
        store = EmbeddedStore(clock=VirtualClock())
        owner = await store.open_session(name="owner")
        other = await store.open_session(name="other")
        await owner.create("/e", ephemeral=True)
        with anyio.CancelScope() as scope:
            scope.cancel()
            await owner.close()
        stat = await other.exists("/e")
        await store.aclose()
        return stat

    assert run_virtual(main) is None
