"""One raw Kafka request over TCP, for tests that encode frames themselves (with
kafka-python's protocol classes) and send them to a chosen listener."""

from __future__ import annotations

import struct

import anyio


async def exchange(host: str, port: int, frame: bytes, *, timeout: float = 10.0) -> bytes:
    """Send one request frame on a new connection; return the whole response frame (size
    prefix included), or b"" if the listener closed the connection instead."""
    with anyio.fail_after(timeout):
        async with await anyio.connect_tcp(host, port) as stream:
            await stream.send(frame)
            data = b""
            while len(data) < 4 or len(data) - 4 < struct.unpack_from(">i", data)[0]:
                try:
                    data += await stream.receive()
                except anyio.EndOfStream:
                    return b""
            return data
