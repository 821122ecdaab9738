"""The types of the store contract suite's factory fixtures (``make_store``,
``open_session``), and the fresh chroot each of its tests runs in."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

from actors.zk.store import MetadataStore, StoreSession

StoreFactory = Callable[[str], Awaitable[MetadataStore]]
"""Opens another store on the same backend as ``store``, under the given chroot."""

SessionFactory = Callable[..., Awaitable[StoreSession]]
"""Opens a session (``name=``, ``on=`` another store) that the fixture cleans up."""


def unique_chroot() -> str:
    return f"/kemu-test-{uuid.uuid4().hex}"
