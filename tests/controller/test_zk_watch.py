"""Watch dispatch: local handlers, watches armed by reads, session re-initialisation."""

from __future__ import annotations

import anyio

from actors.runtime.clock import VirtualClock, run_virtual
from actors.zk.watch import ChildWatch, DataWatch, StateCallbacks, WatchRouter, ZkConnection
from cluster.store.embedded import EmbeddedStore
from protocol.store import SessionState, WatchEvent, WatchKind
from tests.support.waiting import until


def test_the_router_calls_the_handler_for_the_path_and_kind() -> None:
    """Created/deleted/changed go to the data handler, children_changed to the child handler."""
    seen: list[str] = []
    router = WatchRouter()
    router.register_data(
        "/a",
        DataWatch(
            on_create=lambda: seen.append("create"),
            on_delete=lambda: seen.append("delete"),
            on_change=lambda: seen.append("change"),
        ),
    )
    router.register_children("/a", ChildWatch(lambda: seen.append("children")))
    for kind in WatchKind:
        assert router.route(WatchEvent(session_id=1, path="/a", kind=kind))
    assert seen == ["create", "delete", "change", "children"]
    assert not router.route(WatchEvent(session_id=1, path="/b", kind=WatchKind.CREATED))
    router.unregister_data("/a")
    assert not router.route(WatchEvent(session_id=1, path="/a", kind=WatchKind.DELETED))


def test_reads_arm_watches_only_for_registered_handlers() -> None:
    """get/exists arm a data watch and children a child watch only when a handler is registered."""

    async def body() -> None:
        store = EmbeddedStore(clock=VirtualClock())
        admin = await store.open_session(name="admin")
        conn = ZkConnection(store, name="b0")
        seen: list[str] = []
        async with anyio.create_task_group() as tg:
            await tg.start(conn.run)
            await admin.create("/watched", b"1")
            await admin.create("/ignored", b"1")
            conn.register_data("/watched", DataWatch(on_change=lambda: seen.append("watched")))
            conn.register_children("/watched", ChildWatch(lambda: seen.append("children")))
            await conn.session.get("/watched")
            await conn.session.get("/ignored")
            await conn.session.children("/watched")
            await admin.set("/watched", b"2")
            await admin.set("/ignored", b"2")
            await admin.create("/watched/kid")
            await until(lambda: len(seen) == 2)
            assert seen == ["watched", "children"]
            await admin.set("/watched", b"3")  # one-shot: not re-armed by any read
            assert await conn.register_data_and_check_existence(
                "/ignored", DataWatch(on_delete=lambda: seen.append("gone"))
            )
            await admin.delete("/ignored")
            await until(lambda: len(seen) == 3)
            # Watches are dispatched in order: "gone" came with nothing before it from the
            # second set of /watched, whose watch had fired already.
            assert seen == ["watched", "children", "gone"]
            tg.cancel_scope.cancel()
        await store.aclose()

    run_virtual(body)


def test_an_expired_session_is_replaced_between_the_state_handlers() -> None:
    """On expiry: before-handlers run (and are awaited), a new session opens, after-handlers run;
    registered handlers keep working on the new session once it re-reads."""

    async def body() -> None:
        store = EmbeddedStore(clock=VirtualClock())
        admin = await store.open_session(name="admin")
        await admin.create("/node", b"0")
        conn = ZkConnection(store, name="b0", clock=VirtualClock())
        order: list[str] = []
        release = anyio.Event()

        async def before() -> None:
            order.append("before")
            await release.wait()
            order.append("released")

        conn.register_state(
            "test",
            StateCallbacks(
                before=before,
                after=lambda: order.append("after"),
                on_state=lambda s: order.append(s.value),
            ),
        )
        seen: list[str] = []
        conn.register_data("/node", DataWatch(on_change=lambda: seen.append("change")))
        async with anyio.create_task_group() as tg:
            await tg.start(conn.run)
            first = conn.session.session_id
            await store.expire_session(first)
            await until(lambda: len(order) == 2)
            assert order == [SessionState.EXPIRED.value, "before"]
            assert conn.session.session_id == first  # not replaced while "before" waits
            release.set()
            await until(lambda: order[-1] == "after")
            assert order[-2:] == ["released", "after"]
            assert conn.session.session_id != first
            assert conn.sessions_opened == 2
            await conn.session.get("/node")  # re-arm on the new session
            await admin.set("/node", b"1")
            await until(lambda: seen == ["change"])
            await conn.session.close()
            await until(lambda: order[-1] == SessionState.CLOSED.value)
        await store.aclose()

    run_virtual(body)


def test_a_failing_handler_does_not_stop_the_dispatcher() -> None:
    """A handler that raises is traced; the next watch event is still dispatched."""

    async def body() -> None:
        store = EmbeddedStore(clock=VirtualClock())
        admin = await store.open_session(name="admin")
        await admin.create("/a", b"0")
        await admin.create("/b", b"0")
        traced: list[str] = []
        conn = ZkConnection(store, name="b0", trace=lambda kind, type_, **f: traced.append(type_))
        seen: list[str] = []

        def boom() -> None:
            raise ValueError("handler bug")

        conn.register_data("/a", DataWatch(on_change=boom))
        conn.register_data("/b", DataWatch(on_change=lambda: seen.append("b")))
        async with anyio.create_task_group() as tg:
            await tg.start(conn.run)
            await conn.session.get("/a")
            await conn.session.get("/b")
            await admin.set("/a", b"1")
            await admin.set("/b", b"1")
            await until(lambda: seen == ["b"])
            assert traced == ["watch_handler_failed"]  # /a's event came first, and failed
            tg.cancel_scope.cancel()
        await store.aclose()

    run_virtual(body)
