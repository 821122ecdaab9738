"""``multi_each``: many independent multi-ops at once (pipelined on ZooKeeper), each its
own transaction, with the outcomes of running them one after the other, in order.

The first tests run on every backend (the ``store`` fixture of this suite); the last ones
need the ZooKeeper adapter itself: its trace, its send window, and an outage while a
pipelined batch is in flight.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pytest
import pytest_asyncio
from aiozk import protocol as zk_proto

from actors.runtime.tracer import MemorySink, Tracer
from cluster.store import _jute, zk_pipeline
from cluster.store.zookeeper import ZooKeeperStore
from protocol.errors import (
    BadArgumentsError,
    BadVersionError,
    ConnectionLossError,
    NodeExistsError,
    NoNodeError,
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
    StoreOp,
    WatchEvent,
    WatchKind,
)
from tests.support.store_factories import SessionFactory
from tests.support.zookeeper import ZooKeeperServer

DEADLINE = 10.0


def failed_op(outcome: tuple[OpResult, ...] | StoreError) -> StoreError | None:
    """The error of the op that failed a multi (None if the multi succeeded)."""
    if not isinstance(outcome, StoreError):
        return None
    assert isinstance(outcome, TransactionFailedError)
    return next(r for r in outcome.results if r is not None)


@pytest.mark.asyncio
async def test_each_multi_is_its_own_transaction_run_in_order(
    open_session: SessionFactory,
) -> None:
    """Later multis see earlier ones (a child after its parent); a failed multi changes
    nothing and does not stop the ones after it; every outcome is in its place."""
    s = await open_session()
    await s.create("/d", b"v0")
    batches: list[list[StoreOp]] = [
        [CreateOp(path="/p", data=b"parent")],
        [CreateOp(path="/p/c")],  # needs the multi before it
        [CreateOp(path="/p")],  # NodeExists
        [CheckOp(path="/d", version=7), CreateOp(path="/x")],  # BadVersion: no /x
        [CreateOp(path="/missing/c")],  # NoNode
        [SetDataOp(path="/d", data=b"v1", version=0), DeleteOp(path="/p/c")],
        [CheckOp(path="/d", version=1), CreateOp(path="/p/c2")],
    ]
    outcomes = await s.multi_each(batches)
    assert len(outcomes) == len(batches)
    assert outcomes[0] == (CreateResult(path="/p"),)
    assert outcomes[1] == (CreateResult(path="/p/c"),)
    assert isinstance(failed_op(outcomes[2]), NodeExistsError)
    assert isinstance(failed_op(outcomes[3]), BadVersionError)
    assert isinstance(failed_op(outcomes[4]), NoNodeError)
    set_result, delete_result = outcomes[5]  # type: ignore[misc]
    assert isinstance(set_result, SetDataResult)
    assert set_result.stat.version == 1
    assert delete_result == DeleteResult(path="/p/c")
    assert outcomes[6] == (CheckResult(path="/d"), CreateResult(path="/p/c2"))
    assert await s.exists("/x") is None
    assert await s.children("/p") == ("c2",)
    assert (await s.get("/d"))[0] == b"v1"


@pytest.mark.asyncio
async def test_a_multi_that_cannot_be_sent_fails_alone(open_session: SessionFactory) -> None:
    """A bad path or oversized data fails its own multi (naming the op) before anything
    is sent; the multis around it still run."""
    s = await open_session()
    outcomes = await s.multi_each(
        [
            [CreateOp(path="/a")],
            [CreateOp(path="/b"), CreateOp(path="relative")],
            [CreateOp(path="/c", data=b"x" * (1024 * 1024 + 1))],
            [CreateOp(path="/d")],
        ]
    )
    assert outcomes[0] == (CreateResult(path="/a"),)
    assert isinstance(outcomes[1], TransactionFailedError)
    assert outcomes[1].results[0] is None
    assert isinstance(outcomes[1].results[1], BadArgumentsError)
    assert isinstance(failed_op(outcomes[2]), BadArgumentsError)
    assert outcomes[3] == (CreateResult(path="/d"),)
    assert await s.children("/") == ("a", "d")


@pytest.mark.asyncio
async def test_a_batch_larger_than_any_window_keeps_its_order(
    open_session: SessionFactory,
) -> None:
    """More multis than two send windows, each creating a child of the one before: all
    succeed, in order."""
    s = await open_session()
    paths = ["/n"]
    count = 2 * zk_pipeline.WINDOW + 100  # chains of 50 nodes, each from /n
    for i in range(count - 1):
        paths.append(f"{paths[-1] if i % 50 else '/n'}/{i}")
    outcomes = await s.multi_each([[CreateOp(path=p)] for p in paths])
    assert outcomes == [(CreateResult(path=p),) for p in paths]
    under = len(range(0, count - 1, 50))  # the chains' first nodes: i = 0, 50, 100, ...
    assert len(await s.children("/n")) == under


@pytest.mark.asyncio
async def test_a_closed_session_fails_every_multi_of_a_batch(
    open_session: SessionFactory,
) -> None:
    """On a closed session each multi of a batch fails with StoreClosedError."""
    s = await open_session()
    await s.close()
    outcomes = await s.multi_each([[CreateOp(path="/a")], [CreateOp(path="/b")]])
    assert [type(o) for o in outcomes] == [StoreClosedError, StoreClosedError]


@pytest.mark.asyncio
async def test_get_each_reads_in_order_and_arms_the_watches_asked_for(
    open_session: SessionFactory,
) -> None:
    """Each read's outcome in its place (data and stat, NoNode, a bad path); a watch is
    armed only where asked, and fires once as a lone ``get``'s does."""
    s = await open_session()
    other = await open_session("other")
    await s.create("/a", b"1")
    await s.create("/b", b"2")
    outcomes = await s.get_each([("/a", True), ("/missing", False), ("bad", False), ("/b", False)])
    a, missing, bad, b = outcomes
    assert not isinstance(a, StoreError)
    assert a[0] == b"1"
    assert a[1] == (await s.exists("/a"))
    assert isinstance(missing, NoNodeError)
    assert isinstance(bad, BadArgumentsError)
    assert not isinstance(b, StoreError)
    assert b[0] == b"2"
    await other.set("/b", b"3")  # not watched: no event
    await other.set("/a", b"4")
    with anyio.fail_after(DEADLINE):
        event = await s.events.receive()
    assert event == WatchEvent(session_id=s.session_id, path="/a", kind=WatchKind.DATA_CHANGED)


@pytest.mark.asyncio
async def test_create_each_creates_in_order_each_with_its_own_outcome(
    open_session: SessionFactory,
) -> None:
    """Each create's outcome in its place (its path, NodeExists, NoNode for a missing
    parent, a bad path); a later create sees an earlier one; a child watch fires."""
    s = await open_session()
    other = await open_session("other")
    await s.create("/m")
    await s.create("/m/old")
    assert await other.children("/m", watch=True) == ("old",)
    outcomes = await s.create_each(
        [("/m/a", b"1"), ("/m/old", b""), ("/none/x", b""), ("bad", b""), ("/m/a/b", b"2")]
    )
    a, old, none, bad, ab = outcomes
    assert (a, ab) == ("/m/a", "/m/a/b")
    assert isinstance(old, NodeExistsError)
    assert isinstance(none, NoNodeError)
    assert isinstance(bad, BadArgumentsError)
    assert (await s.get("/m/a"))[0] == b"1"
    assert sorted(await s.children("/m")) == ["a", "old"]
    with anyio.fail_after(DEADLINE):
        event = await other.events.receive()
    assert event == WatchEvent(
        session_id=other.session_id, path="/m", kind=WatchKind.CHILDREN_CHANGED
    )


# ----------------------------------------------------------------- the ZooKeeper adapter


def test_multis_are_encoded_as_aiozk_encodes_them() -> None:
    """The adapter's own multi encoding (``_jute``) is byte for byte aiozk's."""
    acl = [zk_proto.UNRESTRICTED_ACCESS]
    theirs = zk_proto.TransactionRequest()
    theirs.add(zk_proto.CheckVersionRequest(path="/controller_epoch", version=3))
    path = "/brokers/topics/é-0/partitions/0/state"
    ephemeral = zk_proto.Create2Request(path=path, data=b'{"v":1}', acl=acl)
    ephemeral.set_flags(ephemeral=True, sequential=False, container=False)
    theirs.add(ephemeral)
    sequential = zk_proto.CreateRequest(path=path, data=b'{"v":1}', acl=acl)
    sequential.set_flags(ephemeral=False, sequential=True, container=False)
    theirs.add(sequential)
    theirs.add(zk_proto.SetDataRequest(path="/a", data=b"", version=-1))
    theirs.add(zk_proto.DeleteRequest(path="/a/b", version=5))
    ours = _jute.multi_request(
        42,
        [
            _jute.check_op("/controller_epoch", 3),
            _jute.create_op(path, b'{"v":1}', 1),
            _jute.create_op(path, b'{"v":1}', 2, opcode=_jute.OP_CREATE),
            _jute.set_data_op("/a", b"", -1),
            _jute.delete_op("/a/b", 5),
        ],
    )
    assert ours == theirs.serialize(42)


def test_multi_replies_are_read_as_aiozk_reads_them() -> None:
    """A multi reply (results and error codes) parses to what aiozk parses."""
    header = _jute._MULTI_HEADER
    stat = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
    path = "/t/ü"
    reply = b"".join(
        [
            header.pack(_jute.OP_CHECK, False, 0),
            header.pack(_jute.OP_CREATE2, False, 0),
            _jute._INT.pack(len(path.encode())),
            path.encode(),
            _jute._STAT.pack(*stat),
            header.pack(_jute.OP_CREATE, False, 0),
            _jute._INT.pack(2),
            b"/x",
            header.pack(_jute.OP_SET_DATA, False, 0),
            _jute._STAT.pack(*stat),
            header.pack(_jute.OP_DELETE, False, 0),
            header.pack(-1, False, -101),
            _jute._INT.pack(-101),
            header.pack(-1, True, -1),
        ]
    )
    theirs = zk_proto.TransactionResponse.deserialize(reply).responses
    ours = _jute.parse_multi_reply(reply).responses
    assert len(ours) == len(theirs) == 6
    assert ours[1].path == theirs[1].path == path  # type: ignore[union-attr]
    assert ours[2].path == theirs[2].path == "/x"  # type: ignore[union-attr]
    for mine, aiozk_stat in ((ours[1], theirs[1].stat), (ours[3], theirs[3].stat)):
        assert mine.stat is not None  # type: ignore[union-attr]
        assert mine.stat == _jute.RawStat(  # type: ignore[union-attr]
            **{name: getattr(aiozk_stat, name) for name in _jute.RawStat.__struct_fields__}
        )
    assert ours[5] == -101
    assert theirs[5].error_code == -101
    assert _jute.parse_multi_reply(reply).failed
    assert not _jute.parse_multi_reply(header.pack(-1, True, -1)).failed


def test_child_listings_are_read_as_aiozk_reads_them() -> None:
    """A ``getChildren`` reply parses to aiozk's list of names (none, one, many)."""
    for names in ([], ["ü"], [f"topic-{i}" for i in range(300)]):
        encoded = [n.encode() for n in names]
        reply = _jute._INT.pack(len(names)) + b"".join(_jute._INT.pack(len(e)) + e for e in encoded)
        theirs = zk_proto.GetChildrenResponse.deserialize(reply).children
        assert _jute.parse_children_reply(reply).children == theirs == names


def test_reads_are_read_as_aiozk_reads_them() -> None:
    """A ``getData`` reply parses to aiozk's data and stat (null, empty, some data)."""
    stat = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
    for size, data in ((-1, b""), (0, b""), (3, "\x00ü".encode())):
        reply = _jute._INT.pack(size) + data + _jute._STAT.pack(*stat)
        theirs = zk_proto.GetDataResponse.deserialize(reply)
        ours = _jute.parse_data_reply(reply)
        assert ours.data == theirs.data == (None if size < 0 else data)
        assert ours.stat == _jute.RawStat(
            **{name: getattr(theirs.stat, name) for name in _jute.RawStat.__struct_fields__}
        )
        assert ours.stat.version == 5


@pytest.fixture
def own_server() -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer() as server:
        yield server


@pytest.fixture
def sink() -> MemorySink:
    return MemorySink()


@pytest_asyncio.fixture
async def zk_store(own_server: ZooKeeperServer, sink: MemorySink) -> AsyncIterator[ZooKeeperStore]:
    tracer = Tracer()
    tracer.add_sink(sink)
    store = ZooKeeperStore(own_server.hosts, chroot="/pipelining", tracer=tracer)
    try:
        yield store
    finally:
        with anyio.fail_after(DEADLINE):
            await store.aclose()


@pytest.mark.zookeeper
@pytest.mark.asyncio
async def test_each_pipelined_multi_is_traced_in_order(
    zk_store: ZooKeeperStore, sink: MemorySink
) -> None:
    """Each multi of a pipelined batch is one ``multi`` trace event, in batch order, with
    its own outcome, as if sent alone."""
    s = await zk_store.open_session(timeout=10.0, name="tracer")
    await s.create("/t")
    before = len(sink.events)
    batches: list[list[StoreOp]] = [[CreateOp(path=f"/t/{i}")] for i in range(600)]
    batches[300] = [CheckOp(path="/t", version=9), CreateOp(path="/t/never")]
    outcomes = await s.multi_each(batches)
    multis = [e for e in sink.events[before:] if e.type == "multi"]
    assert [(e.fields["path"], e.fields["result"]) for e in multis] == [
        (b[0].path, "ok" if i != 300 else "TransactionFailedError") for i, b in enumerate(batches)
    ]
    assert isinstance(failed_op(outcomes[300]), BadVersionError)
    assert len(await s.children("/t")) == 599


@pytest.mark.zookeeper
@pytest.mark.asyncio
async def test_each_pipelined_create_is_traced_as_a_lone_create(
    zk_store: ZooKeeperStore, sink: MemorySink
) -> None:
    """Each create of ``create_each`` is one ``create`` trace event, in order, with its
    own outcome (the deletion markers of a DeleteTopics are recognised by it)."""
    s = await zk_store.open_session(timeout=10.0, name="tracer")
    await s.create("/c")
    before = len(sink.events)
    creates = [(f"/c/{i}", b"") for i in range(300)]
    creates[100] = ("/c/0", b"")
    outcomes = await s.create_each(creates)
    traced = [e for e in sink.events[before:] if e.type == "create"]
    assert [(e.fields["path"], e.fields["result"]) for e in traced] == [
        (path, "ok" if i != 100 else "NodeExistsError") for i, (path, _) in enumerate(creates)
    ]
    assert isinstance(outcomes[100], NodeExistsError)
    assert len(await s.children("/c")) == 299


@pytest.mark.slow  # stops and starts a ZooKeeper server of its own
@pytest.mark.zookeeper
@pytest.mark.asyncio
async def test_an_outage_during_a_pipelined_batch_fails_what_was_not_answered(
    own_server: ZooKeeperServer, zk_store: ZooKeeperStore
) -> None:
    """The server stops while a long batch is in flight: the call returns within its bound;
    a prefix of the batch succeeded, in order, and every later multi failed with
    ConnectionLossError (its outcome unknown, as for a lone call) — none is lost or
    reordered. After the restart, exactly the reported prefix is on the server."""
    s = await zk_store.open_session(timeout=4.0, name="writer")
    await s.create("/w")
    stopped = anyio.Event()
    outcomes: list[tuple[OpResult, ...] | StoreError] = []

    async def write() -> None:
        outcomes.extend(await s.multi_each([[CreateOp(path=f"/w/{i:05}")] for i in range(20_000)]))

    async def stop_midway() -> None:
        # Stop once the batch is being applied (the first child fired a watch).
        probe = await zk_store.open_session(timeout=4.0, name="probe")
        await probe.children("/w", watch=True)
        with anyio.fail_after(DEADLINE):
            event = await probe.events.receive()
        assert event == WatchEvent(
            session_id=probe.session_id, path="/w", kind=WatchKind.CHILDREN_CHANGED
        )
        await probe.close()
        own_server.stop()
        stopped.set()

    with anyio.fail_after(2 * DEADLINE):
        async with anyio.create_task_group() as tg:
            tg.start_soon(write)
            tg.start_soon(stop_midway)
    assert stopped.is_set()
    assert len(outcomes) == 20_000
    done = [i for i, o in enumerate(outcomes) if not isinstance(o, StoreError)]
    assert done == list(range(len(done)))  # a prefix
    assert 0 < len(done) < 20_000
    assert all(isinstance(o, ConnectionLossError) for o in outcomes[len(done) :])
    own_server.start()
    check = await zk_store.open_session(timeout=4.0, name="check")
    created = await check.children("/w")
    # Some of the failed ones may have been applied before the server went (unknown
    # outcome), but never one out of order: the server holds a prefix of the batch.
    assert created == tuple(f"{i:05}" for i in range(len(created)))
    assert len(created) >= len(done)


@pytest.mark.slow  # stalls a ZooKeeper server of its own for a session timeout
@pytest.mark.zookeeper
@pytest.mark.asyncio
async def test_replies_given_up_on_are_retrieved_when_the_connection_fails_them(
    own_server: ZooKeeperServer, zk_store: ZooKeeperStore
) -> None:
    """The server stalls (SIGSTOP) while a long batch is in flight: the batch returns
    within its bound, every unanswered multi lost (ConnectionLossError). Those requests'
    replies were given up on; when the connection is then dropped and fails them, no
    future is left with an exception nobody retrieved (asyncio would report each one)."""
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    s = await zk_store.open_session(timeout=2.0, name="writer")
    await s.create("/s")
    probe = await zk_store.open_session(timeout=4.0, name="probe")
    await probe.children("/s", watch=True)

    async def stall_once_applied() -> None:
        with anyio.fail_after(DEADLINE):
            await probe.events.receive()  # the batch is being applied
        own_server.pause()

    outcomes: list[tuple[OpResult, ...] | StoreError] = []
    try:
        with anyio.fail_after(2 * DEADLINE):
            async with anyio.create_task_group() as tg:
                tg.start_soon(stall_once_applied)
                batch = [[CreateOp(path=f"/s/{i:05}")] for i in range(20_000)]
                outcomes.extend(await s.multi_each(batch))
        assert isinstance(outcomes[-1], ConnectionLossError)
        suspended = SessionEvent(session_id=s.session_id, state=SessionState.SUSPENDED)
        with anyio.fail_after(DEADLINE):  # the writer's connection is dropped meanwhile
            while await s.events.receive() != suspended:
                pass
    finally:
        own_server.resume()
        loop.set_exception_handler(None)
    await s.close()
    await probe.close()
    gc.collect()
    assert [c["message"] for c in reported] == []
