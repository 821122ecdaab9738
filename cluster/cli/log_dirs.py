"""``kemu log-dirs``: Kafka 2.7's ``kafka-log-dirs.sh`` (``kafka.admin.LogDirsCommand``).

``--describe --bootstrap-server S [--broker-list 0,1] [--topic-list t1,t2]
[--command-config F]`` asks each broker (every broker of the cluster when no list is
given) for its log directories (DescribeLogDirs for every partition) and prints
``Querying brokers for log directories information``, ``Received log directory
information from brokers 0,1,2``, then one line of JSON, as ``formatAsJson``:
``{"version":1,"brokers":[{"broker":0,"logDirs":[{"logDir":"/d","error":null,
"partitions":[{"partition":"t-0","size":0,"offsetLag":0,"isFuture":false}]}]}]}``; a
directory that is offline has the exception's class as its ``error`` and no partitions;
``--topic-list`` keeps the partitions of those topics.

Kafka prints brokers, directories and partitions in the order of its hash maps; kemu
prints brokers as listed (ascending when asked of the whole cluster), directories in each
broker's configured order and partitions sorted by topic and partition. A broker id that
is not in the cluster is one line and exit 1 at once (Kafka's client waits out its
timeout for a node assignment, then dies with the exception's stack trace).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TextIO

from cluster.cli.args import UsageError
from cluster.cli.client_tools import ToolError, command_options, run_tool
from cluster.cli.jopt import Option, option_lines
from cluster.kafka.client import (
    AdminClientConfig,
    KafkaAdminClient,
    KafkaClientError,
    exception_class,
    load_properties,
)
from protocol.errors import ErrorCode
from protocol.ids import BrokerId
from protocol.kafka_api import DescribeLogDirsResponseData

__all__ = ["log_dirs_json", "main"]

SPECS: Final = (
    Option(
        "bootstrap-server",
        "REQUIRED: the server(s) to use for bootstrapping",
        "The server(s) to use for bootstrapping",
    ),
    Option(
        "broker-list",
        'The list of brokers to be queried in the form "0,1,2". All brokers in the cluster '
        "will be queried if no broker list is specified",
        "Broker list",
    ),
    Option(
        "command-config",
        "Property file containing configs to be passed to Admin Client.",
        "Admin client property file",
    ),
    Option("describe", "Describe the specified log directories on the specified brokers."),
    Option("help", "Print usage information."),
    Option(
        "topic-list",
        'The list of topics to be queried in the form "topic1,topic2,topic3". All topics '
        "will be queried if no topic list is specified",
        "Topic list",
    ),
    Option("version", "Display Kafka version."),
)
SUMMARY: Final = "This tool helps to query log directory usage on the specified brokers."
USAGE: Final = "\n".join(["Option  Description", *option_lines(SPECS)])


def log_dirs_json(
    answers: Mapping[BrokerId, DescribeLogDirsResponseData], topics: frozenset[str]
) -> str:
    """``LogDirsCommand.formatAsJson``: the brokers' log dirs with their partitions (those
    of ``topics`` only, unless it is empty), compact JSON."""
    brokers: list[dict[str, Any]] = []
    for broker_id, answer in answers.items():
        dirs = []
        for result in answer.results:
            code = result.error_code  # LogDirDescription.error: the code's exception class
            error = None if code is ErrorCode.NONE else exception_class(code)
            partitions = sorted(
                (str(t.name), p.partition_index, p.partition_size, p.offset_lag, p.is_future_key)
                for t in result.topics
                if not topics or t.name in topics
                for p in t.partitions
            )
            dirs.append(
                {
                    "logDir": result.log_dir,
                    "error": error,
                    "partitions": [
                        {
                            "partition": f"{topic}-{index}",
                            "size": size,
                            "offsetLag": lag,
                            "isFuture": future,
                        }
                        for topic, index, size, lag, future in partitions
                    ],
                }
            )
        brokers.append({"broker": int(broker_id), "logDirs": dirs})
    return json.dumps({"version": 1, "brokers": brokers}, separators=(",", ":"))


def _ids(text: str) -> list[int]:
    """``brokerListStr.split(',').filter(!_.isEmpty).map(_.toInt)``."""
    out = []
    for item in text.split(","):
        if not item:
            continue
        try:
            out.append(int(item))
        except ValueError:
            raise ToolError(f'For input string: "{item}"') from None
    return out


async def log_dirs(argv: Sequence[str], *, out: TextIO) -> int:
    opts = command_options(argv, SPECS, SUMMARY, out)
    if opts is None:
        return 0
    for required in ("bootstrap-server", "describe"):
        if not opts.has(required):
            raise UsageError(f'Missing required argument "[{required}]"')
    topics = frozenset(t for t in (opts.value("topic-list") or "").split(",") if t)
    listed = opts.value("broker-list")
    requested = None if listed is None else _ids(listed)
    config_file = opts.value("command-config")
    props = load_properties(Path(config_file)) if config_file else {}
    props.setdefault("client.id", "log-dirs-tool")
    config = AdminClientConfig.from_properties(props)
    async with KafkaAdminClient(opts.value("bootstrap-server") or "", config) as client:
        if requested is None:
            view = await client.describe_cluster()
            requested = sorted(int(b.broker_id) for b in view.brokers)
        out.write("Querying brokers for log directories information\n")
        try:
            answers = await client.describe_log_dirs(requested)
        except KafkaClientError as exc:
            raise ToolError(str(exc)) from None
    out.write(
        f"Received log directory information from brokers {','.join(str(b) for b in requested)}\n"
    )
    out.write(log_dirs_json(answers, topics) + "\n")
    return 0


def main(argv: Sequence[str], *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``kemu log-dirs ARGS``: run it and return the exit status."""
    output, error = out or sys.stdout, err or sys.stderr
    return run_tool(lambda: log_dirs(argv, out=output), usage=USAGE, err=error, out=output)
