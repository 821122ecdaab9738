"""A metadata store wrapped so that a test can act at an exact point of another actor's
writes: after each successful ``multi`` of any session, the test's hooks run
synchronously, in the writer's own task, before the writer goes on.

That makes "crash the controller after it wrote the k-th state znode" deterministic on
both stores: a hook that crashes the writer's node does so before its next store call,
which is a scheduling point where the cancellation lands. ``multi_each`` is the
one-multi-at-a-time default of ``StoreSession`` (the embedded store's pipelined version
would run every multi without yielding, so nothing could come between them). A hook may
also ``pause`` the session: its next multis wait until the test ``resume``s it, so that
the test can act (expire the session, elect another controller) while the writer is held.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import anyio

from actors.zk.store import ForwardingSession, MetadataStore, StoreSession
from protocol.errors import StoreError
from protocol.store import OpResult, StoreOp

MultiHook = Callable[["HookedSession", Sequence[StoreOp]], None]
"""Called with the session and the ops of each ``multi`` that succeeded."""


class HookedSession(ForwardingSession):
    def __init__(self, inner: StoreSession, name: str, store: HookedStore) -> None:
        super().__init__(inner)
        self.name = name
        self._store = store
        self._gate: anyio.Event | None = None

    def pause(self) -> None:
        """Hold every later ``multi`` of this session until ``resume``."""
        if self._gate is None:
            self._gate = anyio.Event()

    def resume(self) -> None:
        gate, self._gate = self._gate, None
        if gate is not None:
            gate.set()

    async def multi(self, ops: Sequence[StoreOp]) -> tuple[OpResult, ...]:
        if self._gate is not None:
            await self._gate.wait()
        results = await self.inner.multi(ops)
        for hook in list(self._store.multi_hooks):
            hook(self, ops)
        return results

    async def multi_each(
        self, batches: Sequence[Sequence[StoreOp]]
    ) -> list[tuple[OpResult, ...] | StoreError]:
        # One multi at a time through ``multi`` (see the module doc), not the inner
        # store's pipelined version.
        return await StoreSession.multi_each(self, batches)


class HookedStore(MetadataStore):
    """``inner`` with ``multi_hooks`` run after every successful multi of its sessions."""

    def __init__(self, inner: MetadataStore) -> None:
        self.inner = inner
        self.multi_hooks: list[MultiHook] = []
        self.sessions: dict[int, HookedSession] = {}

    async def open_session(self, *, timeout: float = 18.0, name: str = "") -> StoreSession:
        session = HookedSession(
            await self.inner.open_session(timeout=timeout, name=name), name, self
        )
        self.sessions[session.session_id] = session
        return session

    def session_of(self, session_id: int) -> HookedSession:
        return self.sessions[session_id]

    async def expire_session(self, session_id: int) -> None:
        await self.inner.expire_session(session_id)

    async def aclose(self) -> None:
        await self.inner.aclose()
