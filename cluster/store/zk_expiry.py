"""Forced session expiry: ZooKeeper's classic test trick, on a connection of its own.

A second connection takes the session over with its id and password and closes it, so the
server deletes its ephemerals (firing other sessions' watches) exactly as on expiry. The
owner's side (holding its own client off meanwhile, telling the owner) is
``ZooKeeperSession.kemu_expire``; see docs/zookeeper-adapter.md, "Forced expiry".
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from aiozk import exc as zk_exc
from aiozk import protocol as zk_proto
from aiozk.connection import Connection

from actors.runtime.clock import Clock
from cluster.store.zk_client import CLOSE_TIMEOUT, CONNECT_TIMEOUT, RETRY_FIRST, discard


async def kill_server_session(
    servers: str,
    session_id: int,
    password: bytes,
    session_timeout: float,
    clock: Clock,
    *,
    taken: Callable[[], Awaitable[None]] | None = None,
) -> bool:
    """ZooKeeper's classic expiry trick: connect with the session's id and password (the
    server moves the session to this connection), then close it. Returns True once the
    server has no such session; retries while it cannot tell (the caller bounds it).
    ``taken`` is awaited between the two steps (tests widen the window with it)."""
    hosts = [h.rsplit(":", 1) for h in servers.split(",")]
    while True:
        for host, port in hosts:
            conn = Connection(host, int(port), watch_handler=lambda _: None, read_timeout=None)
            try:
                await asyncio.wait_for(conn.connect(), CONNECT_TIMEOUT)
                reply = await asyncio.wait_for(
                    conn.send_connect(
                        zk_proto.ConnectRequest(
                            protocol_version=0,
                            last_seen_zxid=0,
                            timeout=int(session_timeout * 1000),
                            session_id=session_id,
                            password=password,
                            read_only=False,
                        )
                    ),
                    CONNECT_TIMEOUT,
                )
                if reply is None:
                    continue
                if reply[1].session_id != 0:  # the session is ours now: close it
                    conn.start_read_loop()
                    if taken is not None:
                        await taken()
                    await asyncio.wait_for(conn.send(zk_proto.CloseRequest(), xid=1), CLOSE_TIMEOUT)
            except (TimeoutError, OSError, zk_exc.ZKError):
                continue
            finally:
                discard(conn)
            return True
        await clock.sleep(RETRY_FIRST)
