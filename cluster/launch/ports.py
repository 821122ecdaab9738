"""Free TCP ports for servers that another process binds later.

A launcher that must tell every broker where the others listen (``kemu up --processes``),
or start a ZooKeeper or Spark server on a port it names, picks the ports before the
servers bind them. A port taken with ``bind(host, 0)`` comes from the kernel's ephemeral
range (``net.ipv4.ip_local_port_range``), the same range every outgoing connection on the
machine takes its local port from: between the pick and the server's bind, any client
connecting anywhere can be given that port, and the server then fails with "address
already in use". (A restarted broker process binds its old port again, so the window is
the whole life of the cluster.) The ports here are picked outside that range, at random,
and checked bindable while held together: only another process picking a fixed port the
same way can still collide with them.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

PORT_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
DEFAULT_EPHEMERAL = (32768, 60999)  # Linux's default ip_local_port_range
LOWEST = 10_000  # below: ports that well-known services tend to hold


def ephemeral_range(path: Path = PORT_RANGE_FILE) -> tuple[int, int]:
    """The kernel's ephemeral port range (inclusive); Linux's default if unreadable."""
    try:
        low, high = (int(field) for field in path.read_text().split())
    except (OSError, ValueError):
        return DEFAULT_EPHEMERAL
    return low, high


def candidate_ports(ephemeral: tuple[int, int]) -> list[range]:
    """The ranges a fixed port is picked from: everything from ``LOWEST`` up that is not
    ephemeral; the whole unprivileged range if that leaves nothing."""
    low, high = ephemeral
    ranges = [r for r in (range(LOWEST, min(low, 65536)), range(max(high + 1, LOWEST), 65536))]
    ranges = [r for r in ranges if len(r) > 0]
    return ranges or [range(1024, 65536)]


def free_ports(
    count: int,
    host: str = "127.0.0.1",
    *,
    run: int = 1,
    rng: random.Random | None = None,
    tries: int = 1000,
) -> list[int]:
    """``count`` distinct free TCP ports on ``host`` outside the ephemeral range; with
    ``run`` > 1, the first ports of ``count`` runs of ``run`` consecutive free ports (a
    ZooKeeper ensemble's client, quorum and election ports). Raises ``RuntimeError`` if
    ``tries`` random picks find too few."""
    rng = rng or random.Random()
    ranges = candidate_ports(ephemeral_range())
    weights = [len(r) for r in ranges]
    held: list[socket.socket] = []
    found: list[int] = []
    try:
        for _ in range(tries):
            (span,) = rng.choices(ranges, weights)
            if len(span) < run:
                continue
            first = rng.randrange(span.start, span.stop - run + 1)
            sockets = _hold(host, range(first, first + run))
            if sockets is None:
                continue
            held += sockets
            found.append(first)
            if len(found) == count:
                return found
    finally:
        for sock in held:
            sock.close()
    raise RuntimeError(
        f"no {count} free ports on {host} outside the ephemeral range in {tries} tries"
    )


def _hold(host: str, ports: range) -> list[socket.socket] | None:
    """Sockets bound to every port of ``ports`` on ``host``, or None if one is taken (or
    held already by this pick)."""
    sockets: list[socket.socket] = []
    for port in ports:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind((host, port))
        except OSError:
            sock.close()
            for taken in sockets:
                taken.close()
            return None
        sockets.append(sock)
    return sockets


def bindable(port: int, host: str = "127.0.0.1") -> bool:
    """Whether ``port`` on ``host`` can be bound right now (nobody listens on it)."""
    sockets = _hold(host, range(port, port + 1))
    for sock in sockets or []:
        sock.close()
    return sockets is not None
