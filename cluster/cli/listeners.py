"""``kemu up --listeners`` and ``--advertised-listeners``: one Kafka listener in Kafka's
``listeners`` syntax (``NAME://HOST:PORT``, parsed as ``kafka.cluster.EndPoint`` does).

kemu serves PLAINTEXT only: it has no TLS and no SASL, so a listener of another security
protocol is refused rather than served as something it is not. A listener name is a
security protocol's name (Kafka's default ``listener.security.protocol.map``); any other
is refused with Kafka's message. An empty host binds every interface. A listener that is
not on loopback is reachable by anyone who can reach the machine, with no authentication:
``loopback`` tells whether to warn about it.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass

from protocol.errors import KemuError

# kafka.cluster.EndPoint's uriParseExp, matched against the whole value.
_ENDPOINT = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SERVED_PROTOCOL = "PLAINTEXT"
NON_ROUTABLE = "0.0.0.0"  # noqa: S104 - the address Kafka refuses to advertise


class ListenerError(KemuError):
    """A ``--listeners`` or ``--advertised-listeners`` value kemu cannot serve (exit 1, as
    a Kafka broker refuses its ``listeners`` config at start-up)."""


@dataclass(frozen=True)
class Listener:
    host: str  # "" = every interface
    port: int  # broker i uses port + i; 0 = any free port


def parse_listener(option: str, value: str) -> Listener:
    """One PLAINTEXT listener out of ``value`` (``ListenerError`` with one line otherwise)."""
    where = f"{option} {value}"
    endpoints = [part.strip() for part in value.split(",") if part.strip()]
    if len(endpoints) != 1:
        raise ListenerError(f"{where}: kemu serves exactly one listener, PLAINTEXT://HOST:PORT")
    match = _ENDPOINT.fullmatch(endpoints[0])
    if match is None:
        raise ListenerError(f"{where}: Unable to parse {endpoints[0]} to a broker endpoint")
    name, host, port_text = match.groups()
    name = name.upper()  # ListenerName.normalised
    if name not in SECURITY_PROTOCOLS:
        raise ListenerError(f"{where}: No security protocol defined for listener {name}")
    if name != SERVED_PROTOCOL:
        raise ListenerError(
            f"{where}: kemu serves PLAINTEXT only (it has no TLS and no SASL), not {name}"
        )
    port = int(port_text)
    if not 0 <= port <= 65535:
        raise ListenerError(f"{where}: port {port} is not a TCP port (0-65535)")
    return Listener(host=host, port=port)


def parse_advertised(value: str) -> Listener:
    """``--advertised-listeners``: as a listener, but never the non-routable 0.0.0.0
    (Kafka's ``KafkaConfig.validateValues``)."""
    listener = parse_listener("--advertised-listeners", value)
    check_routable("--advertised-listeners", value, listener.host)
    return listener


def check_routable(option: str, value: str, host: str) -> None:
    """A host clients are told to connect to must not be 0.0.0.0: a listener on it with
    nothing else advertised is refused, as Kafka refuses it."""
    if host == NON_ROUTABLE:
        raise ListenerError(
            f"{option} {value}: advertised.listeners cannot use the nonroutable meta-address"
            " 0.0.0.0. Use a routable IP address."
        )


def loopback(host: str) -> bool:
    """Whether ``host`` is on loopback only (every address it resolves to): "" (every
    interface), 0.0.0.0 or an address of a network interface are not."""
    if not host:
        return False
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return False  # it cannot be bound either; the listener says so
    addresses = {str(info[4][0]).split("%", 1)[0] for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)
