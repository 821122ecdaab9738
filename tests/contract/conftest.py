"""Fixtures of the store contract suite: one ``store`` per backend, each test in a fresh
chroot, so the same tests run against the embedded store and a real ZooKeeper."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from actors.zk.store import MetadataStore, StoreSession
from cluster.store.embedded import EmbeddedStore
from tests.support.served_store import ServedStore
from tests.support.store_factories import SessionFactory, StoreFactory, unique_chroot


def _zookeeper_store(request: pytest.FixtureRequest, chroot: str) -> MetadataStore:
    """A ZooKeeperStore on the session's ZooKeeper server (imported lazily, so the embedded
    half of the suite needs neither aiozk nor a server)."""
    from cluster.store.zookeeper import ZooKeeperStore

    server = request.getfixturevalue("zookeeper_server")
    return ZooKeeperStore(server.hosts, chroot=chroot)


@pytest_asyncio.fixture(
    params=["embedded", "served", pytest.param("zookeeper", marks=pytest.mark.zookeeper)]
)
async def store(request: pytest.FixtureRequest) -> AsyncIterator[MetadataStore]:
    """The store under test, in a chroot of its own."""
    chroot = unique_chroot()
    backend: MetadataStore
    if request.param == "embedded":
        backend = EmbeddedStore(chroot=chroot)
    elif request.param == "served":
        backend = await ServedStore(EmbeddedStore(chroot=chroot)).start()
    else:
        backend = _zookeeper_store(request, chroot)
    try:
        yield backend
    finally:
        await backend.aclose()


@pytest_asyncio.fixture
async def make_store(
    store: MetadataStore, request: pytest.FixtureRequest
) -> AsyncIterator[StoreFactory]:
    """Opens more stores on the backend of ``store`` (the same embedded tree, or the same
    ZooKeeper server), each under the chroot it is given; closes them afterwards."""
    opened: list[MetadataStore] = []

    async def factory(chroot: str) -> MetadataStore:
        other: MetadataStore
        if isinstance(store, EmbeddedStore):
            other = store.chrooted(chroot)
        elif isinstance(store, ServedStore):
            other = await ServedStore(store.embedded.chrooted(chroot)).start()
        else:
            other = _zookeeper_store(request, chroot)
        opened.append(other)
        return other

    try:
        yield factory
    finally:
        for other in reversed(opened):
            await other.aclose()


@pytest_asyncio.fixture
async def open_session(store: MetadataStore) -> AsyncIterator[SessionFactory]:
    """Opens sessions on ``store`` (or on another store, ``on=``); afterwards closes each
    one and its events stream, whatever state the test left it in."""
    opened: list[StoreSession] = []

    async def factory(name: str = "test", *, on: MetadataStore | None = None) -> StoreSession:
        session = await (on or store).open_session(name=name, timeout=10.0)
        opened.append(session)
        return session

    try:
        yield factory
    finally:
        for session in reversed(opened):
            await session.close()
            session.events.close()
