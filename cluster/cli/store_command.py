"""What the admin commands that work on the metadata store share: where the store is, one
session on it for the command's body, and the one line a failure ends as.

The store is ``--zookeeper ADDRESS`` (a ZooKeeper connection string, or
``embedded://HOST:PORT``), else the store of the running ``kemu up`` in the cluster file
(``--cluster-file``, default ``.kemu/cluster.json``); a ``MetadataStore`` handed in by the
caller (tests, in-process clusters) stands in for the one at that address. An embedded
store takes a command only with its cluster's secret, which is in that cluster file too
(``cluster.launch.connect.store_secret``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TextIO, TypeVar

import anyio

from actors.zk.store import MetadataStore, StoreSession
from cluster.launch.connect import load_cluster_file, open_store
from protocol.errors import KemuError, sole_error

__all__ = ["report_failure", "store_address", "with_session"]

T = TypeVar("T")


def store_address(zookeeper: str | None, cluster_file: str | None) -> str:
    """``--zookeeper``'s address, else the store of the cluster file (``--cluster-file``,
    or the default one); a missing or bad cluster file is a ``KemuError``."""
    if zookeeper is not None:
        return zookeeper
    return load_cluster_file(Path(cluster_file) if cluster_file else None).store


async def with_session(
    address: str,
    store: MetadataStore | None,
    name: str,
    body: Callable[[StoreSession], Awaitable[T]],
    *,
    cluster_file: str | None = None,
) -> T:
    """``body`` on a session of ``store``, or of the store at ``address`` if none is given
    (an embedded one with the secret of ``cluster_file``, default ``.kemu/cluster.json``);
    the session (and a store opened here) is closed however ``body`` ends."""
    if store is not None:
        return await _on_session(store, name, body)
    path = Path(cluster_file) if cluster_file else None
    async with open_store(address, name=name, cluster_file=path) as opened:
        return await _on_session(opened, name, body)


async def _on_session(
    store: MetadataStore, name: str, body: Callable[[StoreSession], Awaitable[T]]
) -> T:
    session = await store.open_session(timeout=30.0, name=name)
    try:
        return await body(session)
    finally:
        with anyio.CancelScope(shield=True):
            await session.close()
        session.events.close()


def report_failure(
    error: KemuError | BaseExceptionGroup[BaseException],
    out: TextIO,
    err: TextIO,
    on_stdout: Sequence[tuple[type[KemuError], str]] = (),
) -> int:
    """A failed command's one line; returns the exit status, 1. The error (inside the
    single-error groups ``open_store``'s task group wraps it in) is printed on stdout after
    the prefix paired with the first of ``on_stdout``'s types it is; any other ``KemuError``
    (reaching the cluster failed) on stderr. Anything else is raised again."""
    leaf = sole_error(error)
    for kind, prefix in on_stdout:
        if isinstance(leaf, kind):
            out.write(f"{prefix}{leaf}\n")
            return 1
    if isinstance(leaf, KemuError):
        err.write(f"{leaf}\n")
        return 1
    raise error
