"""``kemu zk ls|get|tree PATH``: look into the metadata store of a running cluster.

The store is the one named by ``--zookeeper`` (a ZooKeeper connection string, or
``embedded://HOST:PORT`` for the embedded store a ``kemu up`` serves), else the ``store`` of
the cluster file (``--cluster-file``, default ``.kemu/cluster.json``).

* ``ls PATH``: the children of PATH, one per line (sorted, as the store returns them).
* ``get PATH``: the data (UTF-8 text, or ``hex:`` and the bytes in hex when it is not
  printable text), then one stat line: ``czxid``, ``mzxid``, ``version``, ``cversion``,
  ``ephemeralOwner``, ``numChildren`` (zxids and the owner in hex, as ``zkCli`` prints them).
* ``tree PATH``: PATH and everything under it, one node per line, indented two spaces a level.

A missing node is one line on stderr ("Node does not exist: PATH"), exit 1; so is any
other store error.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final, TextIO

import anyio

from actors.zk.store import MetadataStore, StoreSession, validate_path
from cluster.launch.connect import load_cluster_file, open_store
from protocol.errors import KemuError, NoNodeError, unwrap_kemu_error
from protocol.store import Stat

__all__ = ["COMMANDS", "format_data", "format_stat", "run_zk_command", "zk_main"]

COMMANDS: Final = ("ls", "get", "tree")


class ZkCommandError(KemuError):
    """A ``kemu zk`` failure, printed as one line."""


def format_data(data: bytes) -> str:
    """Text when the bytes are printable UTF-8 (newlines and tabs allowed), else hex."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "hex:" + data.hex()
    if any(not (c.isprintable() or c in "\n\t") for c in text):
        return "hex:" + data.hex()
    return text


def format_stat(stat: Stat) -> str:
    return (
        f"czxid=0x{stat.czxid:x} mzxid=0x{stat.mzxid:x} version={stat.version}"
        f" cversion={stat.cversion} ephemeralOwner=0x{stat.ephemeral_owner:x}"
        f" numChildren={stat.num_children}"
    )


def _child(parent: str, name: str) -> str:
    return f"{parent.rstrip('/')}/{name}"


async def _ls(session: StoreSession, path: str, out: TextIO) -> None:
    for child in await session.children(path):
        out.write(child + "\n")


async def _get(session: StoreSession, path: str, out: TextIO) -> None:
    data, stat = await session.get(path)
    out.write(format_data(data) + "\n")
    out.write(format_stat(stat) + "\n")


async def _tree(session: StoreSession, path: str, out: TextIO) -> None:
    if await session.exists(path) is None:
        raise NoNodeError(path)
    out.write(path + "\n")

    async def walk(node: str, depth: int) -> None:
        try:
            children = await session.children(node)
        except NoNodeError:  # removed while we walk
            return
        for name in children:
            out.write("  " * depth + name + "\n")
            await walk(_child(node, name), depth + 1)

    await walk(path, 1)


@asynccontextmanager
async def _store(
    address: str, store: MetadataStore | None, cluster_file: Path | None
) -> AsyncIterator[MetadataStore]:
    if store is not None:
        yield store
        return
    async with open_store(address, name="kemu-zk", cluster_file=cluster_file) as opened:
        yield opened


async def run_zk_command(
    command: str,
    path: str,
    *,
    address: str,
    out: TextIO,
    store: MetadataStore | None = None,
    cluster_file: Path | None = None,
) -> None:
    """Run one command against the store at ``address`` (or ``store``, if given). Raises
    ``KemuError`` subclasses; a missing node is ``ZkCommandError``."""
    if command not in COMMANDS:
        raise ZkCommandError(f"unknown command {command!r}: one of {', '.join(COMMANDS)}")
    validate_path(path)
    action = {"ls": _ls, "get": _get, "tree": _tree}[command]
    with unwrap_kemu_error():  # open_store's task group wraps what its body raises
        async with _store(address, store, cluster_file) as opened:
            session = await opened.open_session(timeout=30.0, name="kemu-zk")
            try:
                await action(session, path, out)
            except NoNodeError:
                raise ZkCommandError(f"Node does not exist: {path}") from None
            finally:
                with anyio.CancelScope(shield=True):
                    await session.close()
                session.events.close()


def zk_main(
    command: str,
    path: str,
    *,
    zookeeper: str | None,
    cluster_file: str | None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """``kemu zk``: returns the exit status; errors are one line on ``err``."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        address = zookeeper
        path_of_file = Path(cluster_file) if cluster_file else None
        if address is None:
            address = load_cluster_file(path_of_file).store
            if not address:
                raise ZkCommandError("the cluster file names no store")
        resolved = address
        anyio.run(
            lambda: run_zk_command(
                command, path, address=resolved, out=out, cluster_file=path_of_file
            )
        )
    except KemuError as exc:
        err.write(f"Error: {exc}\n")
        return 1
    return 0
