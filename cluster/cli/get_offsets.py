"""``kemu get-offsets``: Kafka 2.7's ``kafka.tools.GetOffsetShell`` (``kafka-run-class.sh
kafka.tools.GetOffsetShell``; the ``kafka-get-offsets.sh`` wrapper came in 3.0).

For ``--topic`` (one name) and ``--partitions`` (a comma-separated list, default all):
``--time`` -1 the latest offset (the high watermark, what ``endOffsets`` gives), -2 the
earliest (the log start, ``beginningOffsets``), or a timestamp in ms (the first offset
whose record is at least that recent, ``offsetsForTimes``; blank when there is none). One
line per partition, ``<topic>:<partition>:<offset>``, by partition. 2.7 takes
``--broker-list``; kemu also takes ``--bootstrap-server`` (as 3.0 does) or the cluster
file.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Final, TextIO

from cluster.cli.args import UsageError
from cluster.cli.client_tools import (
    CLUSTER_OPTIONS,
    ToolError,
    run_tool,
    tool_bootstrap,
    usage_text,
)
from cluster.cli.jopt import Option, parse
from cluster.kafka.client import AdminClientConfig, KafkaDataClient, api_error
from protocol.errors import ErrorCode
from protocol.kafka_data import LATEST_TIMESTAMP

__all__ = ["main"]

SPECS: Final = (
    *CLUSTER_OPTIONS,
    Option("topic", "REQUIRED: The topic to get offset from.", "topic"),
    Option(
        "partitions",
        "comma separated list of partition ids. If not specified, it will find offsets for"
        " all partitions",
        "partition ids",
    ),
    Option(
        "time",
        "timestamp of the offsets before that (-1 latest, -2 earliest).",
        "timestamp/-1(latest)/-2(earliest)",
    ),
    Option("offsets", "number of offsets returned (ignored, as in 2.7)", "count"),
    Option("max-wait-ms", "The max amount of time each fetch request waits (ignored).", "ms"),
)
USAGE: Final = usage_text("An interactive shell for getting topic offsets.", SPECS)


async def get_offsets(argv: Sequence[str], *, out: TextIO, err: TextIO) -> int:
    opts = parse(argv, SPECS)
    if opts.has("help"):
        raise UsageError("")
    if not opts.has("topic"):
        raise UsageError('Missing required argument "[topic]"')
    topic = opts.value("topic") or ""
    text = opts.value("time") or str(LATEST_TIMESTAMP)
    try:
        timestamp = int(text)
    except ValueError:
        raise UsageError(f"Cannot parse argument '{text}' of option time") from None
    wanted: list[int] | None = None
    listed = opts.value("partitions")
    if listed:
        try:
            wanted = sorted({int(p) for p in listed.split(",")})
        except ValueError:
            raise UsageError(f"Invalid partition list: {listed}") from None
    async with KafkaDataClient(tool_bootstrap(opts), AdminClientConfig()) as client:
        partitions = await client.partitions(topic)
        if wanted is None:
            wanted = sorted(partitions)
        missing = [p for p in wanted if p not in partitions]
        if missing:
            raise ToolError(
                f"Error: Could not find partitions {','.join(map(str, missing))} of topic {topic}"
            )
        for partition in wanted:
            if partitions[partition].leader < 0:
                err.write(
                    f"Error: partition {partition} does not have a leader. Skip getting offsets\n"
                )
                continue
            answer = await client.list_offset(topic, partition, timestamp)
            if answer.error_code is not ErrorCode.NONE:
                raise api_error(answer.error_code, None)
            offset = "" if answer.offset < 0 else str(answer.offset)
            out.write(f"{topic}:{partition}:{offset}\n")
    return 0


def main(argv: Sequence[str], *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``kemu get-offsets ARGS``: run it and return the exit status."""
    output, error = out or sys.stdout, err or sys.stderr
    return run_tool(
        lambda: get_offsets(argv, out=output, err=error), usage=USAGE, err=error, out=output
    )
