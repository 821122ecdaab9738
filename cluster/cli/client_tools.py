"""What kemu's versions of Kafka's console tools share (``console-producer``,
``console-consumer``, ``get-offsets``): where the cluster is, the ``key=value``
properties of ``--property`` / ``--producer-property`` / ``--consumer-property`` and
their config files, and running a tool to one exit status.

Every tool reaches the cluster with ``--bootstrap-server`` (or Kafka's older
``--broker-list``); kemu adds one thing, as ``kemu topics`` does: with neither, the
bootstrap servers of the running ``kemu up`` in the cluster file (``--cluster-file``,
default ``.kemu/cluster.json``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TextIO

import anyio

from cluster.cli.args import UsageError
from cluster.cli.jopt import Option, OptionError, Options, option_lines, parse
from cluster.cli.store_command import report_failure
from cluster.cli.topics import KAFKA_VERSION
from cluster.kafka.client import AdminClientConfig, int_config, load_properties, long_config
from cluster.launch.connect import load_cluster_file
from protocol.errors import KemuError

__all__ = [
    "CLUSTER_OPTIONS",
    "ToolError",
    "admin_config",
    "client_config",
    "command_options",
    "properties",
    "run_tool",
    "run_tool_async",
    "tool_bootstrap",
    "usage_text",
]

CLUSTER_OPTIONS: tuple[Option, ...] = (
    Option("bootstrap-server", "The server(s) to connect to: HOST:PORT[,HOST:PORT...].", "server"),
    Option("broker-list", "Deprecated: the same as --bootstrap-server.", "server"),
    Option(
        "cluster-file",
        "kemu: the cluster file of a running `kemu up`, used when no server is given"
        " (default .kemu/cluster.json).",
        "path",
    ),
    Option("help", "Print usage information."),
)


class ToolError(KemuError):
    """A tool cannot go on: its one line, then exit status 1."""


def command_options(
    argv: Sequence[str], specs: Sequence[Option], summary: str, out: TextIO
) -> Options | None:
    """A Kafka admin tool's parsed command line, as ``CommandDefaultOptions`` with
    ``printHelpAndExitIfNeeded``: no argument or ``--help`` is the usage (``UsageError``
    with ``summary``); ``--version`` prints Kafka's version and gives None (exit 0)."""
    opts = parse(argv, specs)
    if not opts.arg_count or opts.has("help"):
        raise UsageError(summary)
    if opts.has("version"):
        out.write(f"{KAFKA_VERSION} (Commit:kemu)\n")
        return None
    return opts


def usage_text(summary: str, specs: Sequence[Option]) -> str:
    return "\n".join([summary, "Option  Description", *option_lines(specs)])


def properties(opts: Options, name: str) -> dict[str, str]:
    """The ``key=value`` values of a repeatable option (a later key wins); a value
    without ``=`` is a usage error, as Kafka's ``CommandLineUtils.parseKeyValueArgs``."""
    out: dict[str, str] = {}
    for item in opts.values_of(name):
        key, equals, value = item.partition("=")
        if not equals or not key:
            raise OptionError(f"Invalid command line properties: {item} (expected key=value)")
        out[key.strip()] = value.strip()
    return out


def client_config(opts: Options, props_option: str, file_option: str) -> dict[str, str]:
    """A client's properties: those of the config file, then the command line's."""
    config_file = opts.value(file_option)
    props = load_properties(Path(config_file)) if config_file else {}
    props.update(properties(opts, props_option))
    return props


def tool_bootstrap(opts: Options) -> str:
    """The bootstrap servers: ``--bootstrap-server``, ``--broker-list``, or the cluster
    file's."""
    servers = opts.value("bootstrap-server") or opts.value("broker-list")
    if servers:
        return servers
    cluster_file = opts.value("cluster-file")
    return load_cluster_file(Path(cluster_file) if cluster_file else None).bootstrap_servers


_LONG_CONFIGS = frozenset({"max.block.ms"})
"""The deadline configs that are a ``LONG`` in Kafka's ``ProducerConfig`` (the consumer's
``default.api.timeout.ms`` is an ``INT``)."""


def admin_config(props: Mapping[str, str], timeout_name: str) -> AdminClientConfig:
    """The client config of a tool: Kafka's names, ``timeout_name`` (``max.block.ms`` for a
    producer, ``default.api.timeout.ms`` for a consumer) as every call's deadline, parsed
    as Kafka's config of that name (at least 0)."""
    base = AdminClientConfig.from_properties(props)
    if timeout_name in props:
        parse = long_config if timeout_name in _LONG_CONFIGS else int_config
        deadline = parse(props, timeout_name, base.default_api_timeout_ms, minimum=0)
        return dataclasses.replace(base, default_api_timeout_ms=deadline)
    return base


def run_tool(run: Callable[[], Awaitable[int]], *, usage: str, err: TextIO, out: TextIO) -> int:
    """Run a tool on an event loop of its own (``run_tool_async``)."""
    return anyio.run(lambda: run_tool_async(run, usage=usage, err=err, out=out))


async def run_tool_async(
    run: Callable[[], Awaitable[int]], *, usage: str, err: TextIO, out: TextIO
) -> int:
    """Run a tool: a usage error prints its line and the usage on stderr; a ``KemuError``
    (the cluster unreachable, a Kafka error, bad input found late) its one line; each
    exits 1."""
    try:
        return await run()
    except OptionError as exc:
        err.write(f"{exc}\n")
        return 1
    except UsageError as exc:  # --help is one without a message
        err.write(f"{exc}\n{usage}\n" if str(exc) else f"{usage}\n")
        return 1
    except (KemuError, BaseExceptionGroup) as exc:
        return report_failure(exc, out, err)
