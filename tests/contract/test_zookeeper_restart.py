"""ZooKeeperStore across server outages: a real server stopped and started again.

Each test runs its own server (``ZooKeeperServer``), so stopping it disturbs no other test.
Nothing sleeps: tests wait for the session's next event or call outcome with a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import anyio
import pytest
import pytest_asyncio
from aiozk import exc as zk_exc

from actors.runtime.tracer import MemorySink, Tracer
from cluster.store import zookeeper
from cluster.store.zookeeper import ZooKeeperStore
from protocol.errors import ConnectionLossError, SessionExpiredError, StoreError
from protocol.store import SessionEvent, SessionState, StoreEvent, WatchEvent, WatchKind
from protocol.trace import TraceEvent
from tests.support.zookeeper import ZooKeeperServer

# Each test stops and starts a ZooKeeper server of its own (a JVM): seconds apiece.
pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]

DEADLINE = 10.0  # seconds for any one expected outcome (generous for a busy machine)
SHORT = 2.0  # session timeout when a test waits for expiry (the server's minimum is 1 s)
LONG = 8.0  # session timeout when a test restarts the server inside it
HOLD = 1.0  # how long a forced expiry keeps the session before closing it (one test)


@pytest.fixture
def server() -> Iterator[ZooKeeperServer]:
    """A ZooKeeper server of this test's own, on a free port."""
    with ZooKeeperServer() as own:
        yield own


@pytest.fixture
def sink() -> MemorySink:
    return MemorySink()


@pytest_asyncio.fixture
async def store(server: ZooKeeperServer, sink: MemorySink) -> AsyncIterator[ZooKeeperStore]:
    tracer = Tracer()
    tracer.add_sink(sink)
    zk = ZooKeeperStore(server.hosts, chroot="/restart", tracer=tracer)
    try:
        yield zk
    finally:
        with anyio.fail_after(DEADLINE):
            await zk.aclose()


async def next_event(events: anyio.abc.ObjectReceiveStream[StoreEvent]) -> StoreEvent:
    with anyio.fail_after(DEADLINE):
        return await events.receive()


def traced(sink: MemorySink, type_: str, **fields: object) -> list[TraceEvent]:
    return [
        e
        for e in sink.of("store", type_)
        if all(e.fields.get(key) == value for key, value in fields.items())
    ]


@pytest.mark.asyncio
async def test_calls_during_an_outage_raise_connection_loss(
    server: ZooKeeperServer, store: ZooKeeperStore, sink: MemorySink
) -> None:
    """While the server is down the owner sees SUSPENDED and calls (here three at once)
    raise ConnectionLossError within a bounded time: two thirds of the session timeout."""
    session = await store.open_session(timeout=3.0, name="owner")
    await session.create("/e", ephemeral=True)
    server.stop()
    event = await next_event(session.events)
    assert event == SessionEvent(session_id=session.session_id, state=SessionState.SUSPENDED)
    failures: list[BaseException] = []

    async def expect_loss(call: Callable[[], Awaitable[object]]) -> None:
        with pytest.raises(ConnectionLossError) as raised:
            await call()
        failures.append(raised.value)

    with anyio.fail_after(session.timeout):
        async with anyio.create_task_group() as tg:
            tg.start_soon(expect_loss, lambda: session.get("/e"))
            tg.start_soon(expect_loss, lambda: session.create("/other"))
            tg.start_soon(expect_loss, lambda: session.children("/"))
    assert len(failures) == 3
    assert traced(sink, "get", path="/e", result="ConnectionLossError")


@pytest.mark.asyncio
async def test_the_loss_of_the_server_is_noticed_at_once(
    server: ZooKeeperServer, store: ZooKeeperStore
) -> None:
    """When the server goes away, a call in flight raises ConnectionLossError and an idle
    session reports SUSPENDED at once, not after a call's bound or a heartbeat timeout:
    the loss is noticed when the socket closes."""
    busy = await store.open_session(timeout=LONG, name="busy")
    idle = await store.open_session(timeout=LONG, name="idle")
    await busy.create("/a")
    outcome: list[StoreError] = []

    async def read_until_it_fails() -> None:
        while True:
            try:
                await busy.get("/a")
            except StoreError as err:
                outcome.append(err)
                return

    # The stop itself takes ~0.4 s; a call's bound is 5.3 s, a heartbeat's over 5 s.
    with anyio.fail_after(3.0):
        async with anyio.create_task_group() as tg:
            tg.start_soon(read_until_it_fails)
            await anyio.to_thread.run_sync(server.stop)
        suspended = await idle.events.receive()
    assert suspended == SessionEvent(session_id=idle.session_id, state=SessionState.SUSPENDED)
    assert len(outcome) == 1
    assert isinstance(outcome[0], ConnectionLossError)


@pytest.mark.asyncio
async def test_restart_within_the_timeout_resumes_the_session(
    server: ZooKeeperServer, store: ZooKeeperStore
) -> None:
    """A server back within the session timeout resumes the same session: the owner sees
    SUSPENDED then CONNECTED, its ephemerals are still there, and a watch armed before the
    outage still fires once, with no spurious events."""
    owner = await store.open_session(timeout=LONG, name="owner")
    await owner.create("/e", b"mine", ephemeral=True)
    await owner.create("/watched", b"v0")
    await owner.get("/watched", watch=True)
    await owner.children("/", watch=True)
    server.stop()
    suspended = await next_event(owner.events)
    assert suspended == SessionEvent(session_id=owner.session_id, state=SessionState.SUSPENDED)
    server.start()
    connected = await next_event(owner.events)
    assert connected == SessionEvent(session_id=owner.session_id, state=SessionState.CONNECTED)
    data, stat = await owner.get("/e")
    assert (data, stat.ephemeral_owner) == (b"mine", owner.session_id)
    # Re-arming sent no event of its own: a marker's watch fires next, then the child
    # watch on "/" armed before the outage, then the data watch.
    await owner.exists("/marker", watch=True)
    await owner.create("/marker")
    await owner.set("/watched", b"v1")
    expected = [("/marker", WatchKind.CREATED), ("/", WatchKind.CHILDREN_CHANGED)]
    expected.append(("/watched", WatchKind.DATA_CHANGED))
    for path, kind in expected:
        fired = await next_event(owner.events)
        assert fired == WatchEvent(session_id=owner.session_id, path=path, kind=kind)


@pytest.mark.asyncio
async def test_changes_during_the_outage_fire_the_watches_on_reconnect(
    server: ZooKeeperServer, store: ZooKeeperStore
) -> None:
    """A watched node that another session deletes while this one is cut off fires
    ``deleted`` once this session reconnects (watches are re-armed with SetWatches)."""
    owner = await store.open_session(timeout=LONG, name="owner")
    await owner.create("/victim")
    await owner.exists("/victim", watch=True)
    server.stop()
    assert (await next_event(owner.events)).state is SessionState.SUSPENDED  # type: ignore[union-attr]
    server.start()
    other = await store.open_session(timeout=LONG, name="other")
    # The owner may already be back; either way its watch fires exactly once.
    await other.delete("/victim")
    events = [await next_event(owner.events), await next_event(owner.events)]
    assert SessionEvent(session_id=owner.session_id, state=SessionState.CONNECTED) in events
    assert WatchEvent(session_id=owner.session_id, path="/victim", kind=WatchKind.DELETED) in events


@pytest.mark.asyncio
async def test_an_outage_longer_than_the_timeout_expires_the_session(
    server: ZooKeeperServer, store: ZooKeeperStore, sink: MemorySink
) -> None:
    """Suspended for longer than its timeout, a session expires for its owner (EXPIRED,
    then the end of the stream; calls raise SessionExpiredError); once the server is back
    the old session is closed there too, so its ephemerals vanish."""
    owner = await store.open_session(timeout=SHORT, name="owner")
    await owner.create("/e", ephemeral=True)
    await owner.create("/kept")
    server.stop()
    assert await next_event(owner.events) == SessionEvent(
        session_id=owner.session_id, state=SessionState.SUSPENDED
    )
    assert await next_event(owner.events) == SessionEvent(
        session_id=owner.session_id, state=SessionState.EXPIRED
    )
    with anyio.fail_after(DEADLINE), pytest.raises(anyio.EndOfStream):
        await owner.events.receive()
    with pytest.raises(SessionExpiredError):
        await owner.get("/kept")
    assert traced(sink, "session_expired", cause="suspended")

    server.start()
    watcher = await store.open_session(timeout=LONG, name="watcher")
    if await watcher.exists("/e", watch=True) is not None:
        deleted = await next_event(watcher.events)
        assert deleted == WatchEvent(
            session_id=watcher.session_id, path="/e", kind=WatchKind.DELETED
        )
    assert await watcher.exists("/e") is None
    assert await watcher.exists("/kept") is not None


@pytest.mark.asyncio
async def test_an_expired_session_closed_during_the_outage_is_expired_by_the_server(
    server: ZooKeeperServer, store: ZooKeeperStore
) -> None:
    """If the owner closes its expired session while the server is still down, the server
    expires the session itself after the restart: the ephemerals still vanish."""
    owner = await store.open_session(timeout=SHORT, name="owner")
    await owner.create("/e", ephemeral=True)
    server.stop()
    states = [(await next_event(owner.events)).state for _ in range(2)]  # type: ignore[union-attr]
    assert states == [SessionState.SUSPENDED, SessionState.EXPIRED]
    with anyio.fail_after(DEADLINE):
        await owner.close()
    server.start()
    watcher = await store.open_session(timeout=LONG, name="watcher")
    if await watcher.exists("/e", watch=True) is not None:
        deleted = await next_event(watcher.events)
        assert deleted == WatchEvent(
            session_id=watcher.session_id, path="/e", kind=WatchKind.DELETED
        )


@pytest.mark.asyncio
async def test_forced_expiry_is_a_real_expiry(
    server: ZooKeeperServer, store: ZooKeeperStore, sink: MemorySink
) -> None:
    """expire_session makes the server expire the session: its ephemerals are gone when
    the call returns (another session's watch fires), the owner gets EXPIRED only then,
    and a new session of the same owner works."""
    owner = await store.open_session(timeout=LONG, name="owner")
    watcher = await store.open_session(timeout=LONG, name="watcher")
    await owner.create("/e", ephemeral=True)
    await watcher.exists("/e", watch=True)
    with anyio.fail_after(DEADLINE):
        await store.expire_session(owner.session_id)
    assert await watcher.exists("/e") is None
    assert await next_event(watcher.events) == WatchEvent(
        session_id=watcher.session_id, path="/e", kind=WatchKind.DELETED
    )
    # The owner may first see its connection drop (the server handed the session to
    # the killing connection); it does not come back (see the next test).
    event = await next_event(owner.events)
    if event == SessionEvent(session_id=owner.session_id, state=SessionState.SUSPENDED):
        event = await next_event(owner.events)
    assert event == SessionEvent(session_id=owner.session_id, state=SessionState.EXPIRED)
    with pytest.raises(SessionExpiredError):
        await owner.create("/e", ephemeral=True)
    again = await store.open_session(timeout=LONG, name="owner")
    await again.create("/e", ephemeral=True)
    assert traced(sink, "session_expired", cause="forced", session=owner.session_id)


@pytest.mark.asyncio
async def test_the_owner_does_not_take_back_a_session_being_expired(
    server: ZooKeeperServer,
    store: ZooKeeperStore,
    sink: MemorySink,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The expiry trick moves the session to a connection of its own, which drops the
    owner's. Were the owner's client to reconnect before the session is closed, it would
    take the session back (within milliseconds), the two would trade it until the
    deadline, and the session and its ephemerals would outlive the expiry for good (a
    crashed controller's ``/controller`` with them). Here the killing connection holds
    the session for a while before closing it: the owner stays away, and the expiry is
    real."""
    owner = await store.open_session(timeout=LONG, name="owner")
    watcher = await store.open_session(timeout=LONG, name="watcher")
    await owner.create("/e", ephemeral=True)

    def owner_state(state: SessionState) -> Callable[[TraceEvent], bool]:
        return lambda e: (
            e.type == "session_state"
            and e.fields.get("session") == owner.session_id
            and e.fields.get("state") == state.value
        )

    async def hold_the_session() -> None:
        await sink.wait_for(owner_state(SessionState.SUSPENDED), DEADLINE)
        with contextlib.suppress(TimeoutError):  # the owner coming back ends the wait
            await sink.wait_for(owner_state(SessionState.CONNECTED), HOLD)

    kill = functools.partial(zookeeper._kill_server_session, taken=hold_the_session)
    monkeypatch.setattr(zookeeper, "_kill_server_session", kill)
    with anyio.fail_after(DEADLINE):
        await store.expire_session(owner.session_id)
    assert not traced(sink, "session_state", state="connected", session=owner.session_id)
    assert await watcher.exists("/e") is None
    assert [await next_event(owner.events), await next_event(owner.events)] == [
        SessionEvent(session_id=owner.session_id, state=SessionState.SUSPENDED),
        SessionEvent(session_id=owner.session_id, state=SessionState.EXPIRED),
    ]


@pytest.mark.asyncio
async def test_a_ping_answered_with_an_error_does_not_fail_the_heartbeat_task(
    store: ZooKeeperStore, sink: MemorySink, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ping can get an error reply (the session moved to another connection, or
    expired, under it). aiozk re-raised it out of its heartbeat task, which nobody
    awaits: asyncio reported "Task exception was never retrieved" (seen in a CI log of
    the real-mode campaign). The heartbeat task ends cleanly, the error is traced, and
    the session goes on with its next ping."""
    owner = await store.open_session(timeout=LONG, name="owner")
    zk = owner._zk  # the aiozk session under the kemu one
    connection = zk.conn
    real_send = connection.send

    def send(request: object, xid: int | None = None) -> object:
        if type(request).__name__ != "PingRequest":
            return real_send(request, xid=xid)
        moved: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        moved.set_exception(zk_exc.SessionMoved())
        return moved

    monkeypatch.setattr(connection, "send", send)
    zk.create_heartbeat()
    with anyio.fail_after(DEADLINE):
        await zk.heartbeat_task  # raised SessionMoved before
    assert [e.fields["error"] for e in sink.of("error", "zookeeper_heartbeat")] == [
        "SessionMoved()"
    ]
    monkeypatch.undo()
    assert zk.heartbeat_handle is not None  # the next ping is scheduled
    await owner.create("/still", b"")  # and the session works


@pytest.mark.asyncio
async def test_nothing_hangs_while_the_server_is_down(
    server: ZooKeeperServer, store: ZooKeeperStore
) -> None:
    """With the server down, opening a session raises ConnectionLossError after its
    timeout, and closing a session or the store returns promptly."""
    session = await store.open_session(timeout=LONG, name="owner")
    server.stop()
    with anyio.fail_after(SHORT + DEADLINE), pytest.raises(ConnectionLossError):
        await store.open_session(timeout=SHORT, name="late")
    with anyio.fail_after(1.0):
        await session.close()
        await store.aclose()
