"""``kemu consumer-groups``: Kafka 2.7's ``kafka-consumer-groups.sh``
(``kafka.admin.ConsumerGroupCommand``), its ``--list``, ``--describe`` (the offsets view)
and ``--delete``.

* ``--list``: ``listConsumerGroups`` (ListGroups at every broker), one group id a line.
* ``--describe --group G``: ``collectGroupOffsets``: DescribeGroups and OffsetFetch at
  the group's coordinator, ListOffsets (latest) at each partition's leader; a blank line,
  then ``GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST
  CLIENT-ID`` in ``printOffsets``' format (group, topic, consumer id and host columns at
  least 15 wide), one row per partition a member is assigned (members with most
  partitions first, partitions in order), then one per other committed partition with
  ``-`` for the member; ``-`` for what is unknown. An Empty group is noted on stderr
  (``Consumer group 'G' has no active members.``), a rebalancing one too; a Dead one is
  ``Error: Consumer group 'G' does not exist.`` on stdout.
* ``--delete --group G``: DeleteGroups at the coordinator; ``Deletion of requested
  consumer groups ('G') was successful.`` or Kafka's list of failures with each
  exception.

As in Kafka 2.7 these outcomes exit 0; options that do not parse and a cluster that does
not answer exit 1 with one line. ``--members``, ``--state``, ``--all-groups``,
``--reset-offsets`` and ``--delete-offsets`` are not served (and not listed by
``--help``).
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final, TextIO

from cluster.cli.args import UsageError
from cluster.cli.client_tools import run_tool
from cluster.cli.jopt import Option, option_lines, parse
from cluster.cli.topics import KAFKA_VERSION
from cluster.kafka.client import (
    AdminClientConfig,
    KafkaClientError,
    KafkaDataClient,
    load_properties,
)
from protocol.errors import ErrorCode, KafkaApiError
from protocol.group import (
    DeleteGroupsRequestData,
    DeleteGroupsResponseData,
    DescribedGroup,
    DescribeGroupsRequestData,
    DescribeGroupsResponseData,
    OffsetFetchRequestData,
    OffsetFetchResponseData,
)
from protocol.kafka_data import LATEST_TIMESTAMP

__all__ = ["assignment_partitions", "main"]

MISSING: Final = "-"
SPECS: Final = (
    Option(
        "bootstrap-server",
        "REQUIRED: The server(s) to connect to.",
        "server to connect to",
    ),
    Option(
        "command-config",
        "Property file containing configs to be passed to Admin Client and Consumer.",
        "command config property file",
    ),
    Option(
        "delete",
        "Pass in groups to delete topic partition offsets and ownership information over "
        "the entire consumer group. For instance --group g1 --group g2",
    ),
    Option(
        "describe",
        "Describe consumer group and list offset lag (number of messages not yet "
        "processed) related to given group.",
    ),
    Option("group", "The consumer group we wish to act on.", "consumer group"),
    Option("help", "Print usage information."),
    Option("list", "List all consumer groups."),
    Option("version", "Display Kafka version."),
)  # fmt: skip
SUMMARY: Final = (
    "This tool helps to list all consumer groups, describe a consumer group, delete "
    "consumer group info, or reset consumer group offsets."
)
USAGE: Final = "\n".join(["Option  Description", *option_lines(SPECS)])
_ERROR_NAMES: Final = {
    ErrorCode.NON_EMPTY_GROUP: ("GroupNotEmptyException", "The group is not empty."),
    ErrorCode.GROUP_ID_NOT_FOUND: ("GroupIdNotFoundException", "The group id does not exist."),
    ErrorCode.INVALID_GROUP_ID: ("InvalidGroupIdException", "The configured groupId is invalid."),
}

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def assignment_partitions(data: bytes) -> list[tuple[str, int]]:
    """The partitions of a consumer's assignment (``ConsumerProtocol.
    deserializeAssignment``: int16 version, then topics, each a string and int32
    partitions); empty bytes or ones that do not read are no partitions."""
    try:
        at = _I16.size
        (topics,) = _I32.unpack_from(data, at)
        at += _I32.size
        out = []
        for _ in range(topics):
            (length,) = _I16.unpack_from(data, at)
            at += _I16.size
            topic = data[at : at + length].decode()
            at += length
            (count,) = _I32.unpack_from(data, at)
            at += _I32.size
            for _ in range(count):
                out.append((topic, _I32.unpack_from(data, at)[0]))
                at += _I32.size
        return out
    except (struct.error, UnicodeDecodeError):
        return []


Row = tuple[str, str, str, str, str, str, str, str, str]


async def _describe(client: KafkaDataClient, group: str, out: TextIO, err: TextIO) -> None:
    described = await client.group_request(
        group, DescribeGroupsRequestData(groups=(group,)), DescribeGroupsResponseData
    )
    (summary,) = described.groups
    if summary.error_code is not ErrorCode.NONE:
        raise KafkaApiError(summary.error_code)
    fetched = await client.group_request(
        group, OffsetFetchRequestData(group_id=group, topics=None), OffsetFetchResponseData
    )
    committed: dict[tuple[str, int], int] = {
        (str(t.name), p.partition_index): p.committed_offset
        for t in fetched.topics
        for p in t.partitions
        if p.committed_offset >= 0
    }
    rows = await _rows(client, group, summary, committed)
    state = summary.group_state
    if state == "Dead":
        out.write(f"\nError: Consumer group '{group}' does not exist.\n")
        return
    if state == "Empty":
        err.write(f"\nConsumer group '{group}' has no active members.\n")
    elif state in ("PreparingRebalance", "CompletingRebalance"):
        err.write(f"\nWarning: Consumer group '{group}' is rebalancing.\n")
    if not rows:
        return
    widths = [max(15, *(len(r[i]) for r in rows)) for i in (0, 1, 6, 7)]
    fmt = (
        f"{{:<{widths[0]}}} {{:<{widths[1]}}} {{:<10}} {{:<15}} {{:<15}} {{:<15}} "
        f"{{:<{widths[2]}}} {{:<{widths[3]}}} {{}}"
    )
    header = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
              "CONSUMER-ID", "HOST", "CLIENT-ID")  # fmt: skip
    out.write("\n" + fmt.format(*header) + "\n")
    for row in rows:
        out.write(fmt.format(*row) + "\n")


async def _rows(
    client: KafkaDataClient,
    group: str,
    summary: DescribedGroup,
    committed: dict[tuple[str, int], int],
) -> list[Row]:
    """``collectGroupOffsets``' rows."""
    members = [
        (m, sorted(assignment_partitions(m.member_assignment), key=lambda tp: tp[1]))
        for m in summary.members
    ]
    members = [(m, parts) for m, parts in members if parts]
    members.sort(key=lambda item: -len(item[1]))
    rows: list[Row] = []
    assigned: set[tuple[str, int]] = set()
    for member, parts in members:
        for topic, partition in parts:
            assigned.add((topic, partition))
            rows.append(
                await _row(
                    client,
                    group,
                    topic,
                    partition,
                    committed.get((topic, partition)),
                    (member.member_id, member.client_host, member.client_id),
                )
            )
    for (topic, partition), offset in sorted(committed.items()):
        if (topic, partition) not in assigned:
            rows.append(
                await _row(client, group, topic, partition, offset, (MISSING, MISSING, MISSING))
            )
    return rows


async def _row(
    client: KafkaDataClient,
    group: str,
    topic: str,
    partition: int,
    offset: int | None,
    member: tuple[str, str, str],
) -> Row:
    try:
        end: int | None = (await client.list_offset(topic, partition, LATEST_TIMESTAMP)).offset
    except (KafkaClientError, KafkaApiError):
        end = None
    lag = None if offset is None or end is None else end - offset
    return (
        group,
        topic,
        str(partition),
        MISSING if offset is None else str(offset),
        MISSING if end is None else str(end),
        MISSING if lag is None else str(lag),
        *member,
    )


async def _delete(client: KafkaDataClient, groups: Sequence[str], out: TextIO) -> None:
    failed: list[tuple[str, ErrorCode]] = []
    for group in groups:
        response = await client.group_request(
            group, DeleteGroupsRequestData(groups_names=(group,)), DeleteGroupsResponseData
        )
        code = response.results[0].error_code
        if code is not ErrorCode.NONE:
            failed.append((group, code))
    if not failed:
        names = ", ".join(f"'{g}'" for g in groups)
        out.write(f"Deletion of requested consumer groups ({names}) was successful.\n")
        return
    out.write("Error: Deletion of some consumer groups failed:\n")
    for group, code in failed:
        name, message = _ERROR_NAMES.get(code, ("KafkaException", code.name))
        out.write(
            f"* Group '{group}' could not be deleted due to: "
            f"org.apache.kafka.common.errors.{name}: {message}\n"
        )
    done = [g for g in groups if g not in {f for f, _ in failed}]
    if done:
        out.write(
            "\nThese consumer groups were deleted successfully: "
            + ", ".join(f"'{g}'" for g in done)
            + "\n"
        )


async def consumer_groups(argv: Sequence[str], *, out: TextIO, err: TextIO) -> int:
    opts = parse(argv, SPECS)
    if not opts.arg_count or opts.has("help"):
        raise UsageError(SUMMARY)
    if opts.has("version"):
        out.write(f"{KAFKA_VERSION} (Commit:kemu)\n")
        return 0
    actions = [a for a in ("list", "describe", "delete") if opts.has(a)]
    if len(actions) != 1:
        raise UsageError(
            "Command must include exactly one action: --list, --describe, --delete, "
            "--reset-offsets, --delete-offsets"
        )
    if not opts.has("bootstrap-server"):
        raise UsageError('Missing required argument "[bootstrap-server]"')
    groups = opts.values_of("group")
    if actions[0] != "list" and not groups:
        raise UsageError(f"Option [{actions[0]}] takes one of these options: [all-groups], [group]")
    config_file = opts.value("command-config")
    props = load_properties(Path(config_file)) if config_file else {}
    config = AdminClientConfig.from_properties(props)
    async with KafkaDataClient(opts.value("bootstrap-server") or "", config) as client:
        match actions[0]:
            case "list":
                for listed in await client.list_groups():
                    out.write(f"{listed.group_id}\n")
            case "describe":
                for group in groups:
                    await _describe(client, group, out, err)
            case _:
                await _delete(client, groups, out)
    return 0


def main(argv: Sequence[str], *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``kemu consumer-groups ARGS``: run it and return the exit status."""
    output, error = out or sys.stdout, err or sys.stderr
    return run_tool(
        lambda: consumer_groups(argv, out=output, err=error), usage=USAGE, err=error, out=output
    )
