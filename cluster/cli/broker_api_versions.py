"""``kemu broker-api-versions``: Kafka 2.7's ``kafka-broker-api-versions.sh``
(``kafka.admin.BrokerApiVersionsCommand``).

It asks the bootstrap servers, in turn, for Metadata; then each broker of the answer for
its ApiVersions, and prints one block per broker as ``NodeApiVersions.toString(true)``
does: ``host:port (id: N rack: R) -> (`` then one line per API key, ascending, each
``Name(key): min to max [usable: v]`` (``min`` alone when both are equal), where the
usable version is the newest both the broker and the tool (a 2.7 client: Kafka 2.7.2's
table) know, ``[unusable: node too new]`` or ``[unusable: node too old]`` when there is
none; ``Name(key): UNSUPPORTED`` for each API a 2.7 client knows and the broker does not
advertise, ``UNKNOWN(key): ...`` for a key it does not know; ``)`` after the last. A
broker whose ApiVersions fails gets ``... -> ERROR: <the error>``. When no bootstrap
server answers Metadata, one line, ``Request METADATA failed on brokers List(...)``
(Kafka's exception, without the JVM's stack trace), and exit status 1.

Kafka prints the brokers in its ``Map``'s order: the order of the Metadata answer for up
to four brokers, a hash order beyond; kemu always keeps the Metadata answer's order.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final, TextIO

from cluster.cli.args import UsageError
from cluster.cli.client_tools import ToolError, command_options, run_tool
from cluster.cli.jopt import Option, option_lines
from cluster.kafka.apis import KAFKA_2_7_API_NAMES, KAFKA_2_7_API_VERSIONS
from cluster.kafka.client import (
    AdminClientConfig,
    KafkaClientError,
    load_properties,
    node_api_versions,
    node_metadata,
    parse_bootstrap_servers,
)
from protocol.errors import KafkaApiError
from protocol.kafka_api import BrokerEndpoint

__all__ = ["api_versions_text", "main"]

REQUEST_TIMEOUT_MS: Final = 5000  # the command's own default (AdminClient.DefaultRequestTimeoutMs)

SPECS: Final = (
    Option(
        "bootstrap-server",
        "REQUIRED: The server to connect to.",
        "server(s) to use for bootstrapping",
    ),
    Option(
        "command-config",
        "A property file containing configs to be passed to Admin Client.",
        "command config property file",
    ),
    Option("help", "Print usage information."),
    Option("version", "Display Kafka version."),
)
SUMMARY: Final = "This tool helps to retrieve broker version information."
USAGE: Final = "\n".join(["Option  Description", *option_lines(SPECS)])
"""What ``printUsageAndDie`` prints after its message."""
FAILURES: Final = (KafkaClientError, KafkaApiError)


def node_text(host: str, port: int, node_id: int, rack: str | None) -> str:
    """``Node.toString``."""
    return f"{host}:{port} (id: {node_id} rack: {'null' if rack is None else rack})"


def _versions_text(key: int, low: int, high: int) -> str:
    """``NodeApiVersions.apiVersionToText``."""
    name = KAFKA_2_7_API_NAMES.get(key)
    text = f"{name}({key}): " if name is not None else f"UNKNOWN({key}): "
    text += str(low) if low == high else f"{low} to {high}"
    if name is None:
        return text
    latest = KAFKA_2_7_API_VERSIONS.get(key, (0, 0))[1]  # 52-55: disabled, v0 in 2.7.2
    if latest < low:
        return f"{text} [unusable: node too new]"
    if high < 0:
        return f"{text} [unusable: node too old]"
    return f"{text} [usable: {min(latest, high)}]"


def api_versions_text(table: Mapping[int, tuple[int, int]]) -> str:
    """``NodeApiVersions.toString(true)`` of a broker's ApiVersions table, for a 2.7
    client: every key it advertises and every API a 2.7 client knows, by key."""
    lines = {key: _versions_text(key, low, high) for key, (low, high) in table.items()}
    for key in KAFKA_2_7_API_VERSIONS:  # ApiKeys.enabledApis
        lines.setdefault(key, f"{KAFKA_2_7_API_NAMES[key]}({key}): UNSUPPORTED")
    return "(\n\t" + ",\n\t".join(lines[key] for key in sorted(lines)) + "\n)"


async def broker_api_versions(argv: Sequence[str], *, out: TextIO) -> int:
    opts = command_options(argv, SPECS, SUMMARY, out)
    if opts is None:
        return 0
    if not opts.has("bootstrap-server"):
        raise UsageError('Missing required argument "[bootstrap-server]"')
    config_file = opts.value("command-config")
    props = load_properties(Path(config_file)) if config_file else {}
    props.setdefault("request.timeout.ms", str(REQUEST_TIMEOUT_MS))
    config = AdminClientConfig.from_properties(props)
    bootstrap = parse_bootstrap_servers(opts.value("bootstrap-server") or "")
    brokers = await _all_brokers(bootstrap, config)
    for broker in brokers:
        node = node_text(broker.host, broker.port, int(broker.broker_id), broker.rack)
        try:
            table = await node_api_versions((broker.host, broker.port), config)
        except FAILURES as exc:
            out.write(f"{node} -> ERROR: {exc}\n")
            continue
        out.write(f"{node} -> {api_versions_text(table)}\n")
    return 0


async def _all_brokers(
    bootstrap: Sequence[tuple[str, int]], config: AdminClientConfig
) -> tuple[BrokerEndpoint, ...]:
    """``findAllBrokers``: the brokers of the first bootstrap server's Metadata answer."""
    for address in bootstrap:
        try:
            return (await node_metadata(address, config)).brokers
        except FAILURES:
            continue
    nodes = ", ".join(
        node_text(host, port, -1 - index, None) for index, (host, port) in enumerate(bootstrap)
    )
    raise ToolError(f"Request METADATA failed on brokers List({nodes})")


def main(argv: Sequence[str], *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``kemu broker-api-versions ARGS``: run it and return the exit status."""
    output, error = out or sys.stdout, err or sys.stderr
    return run_tool(
        lambda: broker_api_versions(argv, out=output), usage=USAGE, err=error, out=output
    )
