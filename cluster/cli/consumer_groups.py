"""``kemu consumer-groups``: Kafka 2.7's ``kafka-consumer-groups.sh``
(``kafka.admin.ConsumerGroupCommand``), its ``--list``, ``--describe`` (the offsets view),
``--delete`` and ``--reset-offsets``.

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

* ``--reset-offsets --group G (--topic T[:P,P] | --all-topics) (--to-earliest |
  --to-latest | --to-offset N | --shift-by N | --to-current) [--dry-run | --execute]``:
  ``resetOffsets``: a group neither Empty nor Dead is refused (``Error: Assignments can
  only be reset if the group 'G' is inactive, but the current state is Stable.`` on
  stdout, then the header alone); otherwise the new offsets from ListOffsets and
  OffsetFetch, ``--to-offset``/``--shift-by`` clamped to the log start and end
  (``checkOffsetsRange``, its log4j warning on stderr), committed with one OffsetCommit
  as no member (generation -1, as ``alterConsumerGroupOffsets``) only with
  ``--execute``; printed as ``printOffsetsToReset``. Rows come in the order of the
  partitions asked (``--all-topics``: the committed ones sorted), where Kafka's Scala
  map orders more than four by hash. A partition list that does not parse is one line
  and exit 1 (Kafka prints its ``NumberFormatException`` and a stack trace, exit 0);
  the missing-scenario message names only the served scenarios.

As in Kafka 2.7 these outcomes exit 0; options that do not parse and a cluster that does
not answer exit 1 with one line. ``--members``, ``--state``, ``--all-groups``,
``--delete-offsets``, ``--to-datetime``, ``--by-duration``, ``--from-file`` and
``--export`` are not served (and not listed by ``--help``).
"""

from __future__ import annotations

import datetime
import re
import struct
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final, TextIO

from cluster.cli.args import UsageError
from cluster.cli.client_tools import run_tool
from cluster.cli.jopt import Option, OptionError, Options, java_parse_int, option_lines, parse
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
    OffsetCommitPartition,
    OffsetCommitRequestData,
    OffsetCommitResponseData,
    OffsetCommitTopic,
    OffsetFetchRequestData,
    OffsetFetchResponseData,
)
from protocol.ids import TopicName
from protocol.kafka_data import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP

__all__ = ["assignment_partitions", "main"]

MISSING: Final = "-"
SPECS: Final = (
    Option("all-topics", "Consider all topics assigned to a group in the `reset-offsets` process."),
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
    Option(
        "dry-run",
        "Only show results without executing changes on Consumer Groups. Supported "
        "operations: reset-offsets.",
    ),
    Option("execute", "Execute operation. Supported operations: reset-offsets."),
    Option("group", "The consumer group we wish to act on.", "consumer group"),
    Option("help", "Print usage information."),
    Option("list", "List all consumer groups."),
    Option(
        "reset-offsets",
        "Reset offsets of consumer group. Supports one consumer group at the time, and "
        "instances should be inactive. Has 2 execution options: --dry-run (the default) to "
        "plan which offsets to reset, and --execute to update the offsets. You must choose "
        "one of the following reset specifications: --to-earliest, --to-latest, "
        "--to-offset, --shift-by, --to-current. To define the scope use --all-topics or "
        "--topic.",
    ),
    Option(
        "shift-by",
        "Reset offsets shifting current offset by 'n', where 'n' can be positive or "
        "negative.",
        "number-of-offsets",
    ),
    Option("to-current", "Reset offsets to current offset."),
    Option("to-earliest", "Reset offsets to earliest offset."),
    Option("to-latest", "Reset offsets to latest offset."),
    Option("to-offset", "Reset offsets to a specific offset.", "offset"),
    Option(
        "topic",
        "The topic whose consumer group information should be included in the reset "
        "offset process. Partitions can be specified using this format: `topic1:0,1,2`, "
        "where 0,1,2 are the partition to be included in the process. Reset-offsets also "
        "supports multiple topic inputs.",
        "topic",
    ),
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


async def _summary(client: KafkaDataClient, group: str) -> DescribedGroup:
    """DescribeGroups of one group at its coordinator."""
    described = await client.group_request(
        group, DescribeGroupsRequestData(groups=(group,)), DescribeGroupsResponseData
    )
    (summary,) = described.groups
    if summary.error_code is not ErrorCode.NONE:
        raise KafkaApiError(summary.error_code)
    return summary


async def _describe(client: KafkaDataClient, group: str, out: TextIO, err: TextIO) -> None:
    summary = await _summary(client, group)
    committed = await _committed(client, group)
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


SCENARIOS: Final = ("to-offset", "to-earliest", "to-latest", "to-current", "shift-by")
NO_EXECUTE_WARNING: Final = (
    "WARN: No action will be performed as the --execute option is missing.In a future major "
    "release, the default behavior of this command will be to prompt the user before "
    "executing the reset rather than doing a dry run. You should add the --dry-run option "
    "explicitly if you are scripting this command and want to keep the current default "
    "behavior without prompting."
)


def _long(opts: Options, name: str) -> int | None:
    """The option's value as a Java ``Long`` (``ofType(Long)``)."""
    text = opts.value(name)
    if text is None:
        return None
    if re.fullmatch(r"[+-]?[0-9]+", text) and -(2**63) <= int(text) < 2**63:
        return int(text)
    raise OptionError(f"Cannot parse argument '{text}' of option {name}")


def _check_reset_args(opts: Options, err: TextIO) -> None:
    """``ConsumerGroupCommandOptions.checkArgs``' part for ``--reset-offsets``."""
    if opts.has("dry-run") and opts.has("execute"):
        raise UsageError("Option [reset-offsets] only accepts one of [execute] and [dry-run]")
    if not opts.has("dry-run") and not opts.has("execute"):
        err.write(NO_EXECUTE_WARNING + "\n")
    given = [s for s in SCENARIOS if opts.has(s)]
    if len(given) > 1:
        raise UsageError(f'Option "[{given[0]}]" can\'t be used with option "[{given[1]}]"')


async def _committed(client: KafkaDataClient, group: str) -> dict[tuple[str, int], int]:
    fetched = await client.group_request(
        group, OffsetFetchRequestData(group_id=group, topics=None), OffsetFetchResponseData
    )
    return {
        (str(t.name), p.partition_index): p.committed_offset
        for t in fetched.topics
        for p in t.partitions
        if p.committed_offset >= 0
    }


async def _partitions_to_reset(
    client: KafkaDataClient, opts: Options, group: str
) -> list[tuple[str, int]]:
    """``getPartitionsToReset``: the group's committed partitions for ``--all-topics``,
    else each ``--topic`` (``T:0,1`` its listed partitions, ``T`` all of them)."""
    if opts.has("all-topics"):
        return sorted(await _committed(client, group))
    if not opts.has("topic"):
        raise UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
    out: list[tuple[str, int]] = []
    for arg in opts.values_of("topic"):
        topic, colon, listed = arg.partition(":")
        if not colon:
            out += [(topic, p) for p in sorted(await client.partitions(topic))]
            continue
        for text in listed.split(","):
            number = java_parse_int(text)
            if number is None:
                raise OptionError(f'For input string: "{text}"')
            out.append((topic, number))
    return out


async def _log_offset(client: KafkaDataClient, topic: str, partition: int, at: int) -> int:
    return (await client.list_offset(topic, partition, at)).offset


async def _in_range(
    client: KafkaDataClient, topic: str, partition: int, offset: int, err: TextIO
) -> int:
    """``checkOffsetsRange``: an offset past the log end is the log end, one before the
    log start the log start (each with Kafka's warning on stderr)."""
    end = await _log_offset(client, topic, partition, LATEST_TIMESTAMP)
    start = await _log_offset(client, topic, partition, EARLIEST_TIMESTAMP)
    if offset > end:
        bound, side = end, "higher than latest"
    elif offset < start:
        bound, side = start, "lower than earliest"
    else:
        return offset
    now = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
    err.write(
        f"[{now}] WARN New offset ({offset}) is {side} offset for topic partition "
        f"{topic}-{partition}. Value will be set to {bound} (kafka.admin.ConsumerGroupCommand$)\n"
    )
    return bound


async def _new_offsets(
    client: KafkaDataClient, opts: Options, group: str, err: TextIO
) -> list[tuple[str, int, int]]:
    """``prepareOffsetsToReset`` for the served scenarios."""
    partitions = await _partitions_to_reset(client, opts, group)
    committed = await _committed(client, group)
    out: list[tuple[str, int, int]] = []
    for topic, partition in partitions:
        if opts.has("to-offset"):
            wanted = _long(opts, "to-offset") or 0
            offset = await _in_range(client, topic, partition, wanted, err)
        elif opts.has("to-earliest"):
            offset = await _log_offset(client, topic, partition, EARLIEST_TIMESTAMP)
        elif opts.has("to-latest"):
            offset = await _log_offset(client, topic, partition, LATEST_TIMESTAMP)
        elif opts.has("shift-by"):
            current = committed.get((topic, partition))
            if current is None:
                raise UsageError(
                    f"Cannot shift offset for partition {topic}-{partition} since there is "
                    "no current committed offset"
                )
            shifted = current + (_long(opts, "shift-by") or 0)
            offset = await _in_range(client, topic, partition, shifted, err)
        elif opts.has("to-current"):
            current = committed.get((topic, partition))
            if current is None:
                current = await _log_offset(client, topic, partition, LATEST_TIMESTAMP)
            offset = current
        else:
            raise UsageError(
                "Option '[reset-offsets]' requires one of the following scenarios: "
                + ", ".join(f"[{s}]" for s in SCENARIOS)
            )
        out.append((topic, partition, offset))
    return out


async def _commit(client: KafkaDataClient, group: str, offsets: list[tuple[str, int, int]]) -> None:
    """``alterConsumerGroupOffsets``: one OffsetCommit as no member (generation -1)."""
    topics: dict[str, list[OffsetCommitPartition]] = {}
    for topic, partition, offset in offsets:
        topics.setdefault(topic, []).append(
            OffsetCommitPartition(partition_index=partition, committed_offset=offset)
        )
    request = OffsetCommitRequestData(
        group_id=group,
        topics=tuple(
            OffsetCommitTopic(name=TopicName(t), partitions=tuple(ps)) for t, ps in topics.items()
        ),
    )
    response = await client.group_request(group, request, OffsetCommitResponseData)
    for t in response.topics:
        for p in t.partitions:
            if p.error_code is not ErrorCode.NONE:
                raise KafkaApiError(p.error_code)


async def _reset(
    client: KafkaDataClient, opts: Options, groups: Sequence[str], out: TextIO, err: TextIO
) -> None:
    """``resetOffsets`` then ``printOffsetsToReset``: only an Empty or Dead group is reset;
    another is Kafka's error line and no rows."""
    planned: list[tuple[str, list[tuple[str, int, int]]]] = []
    for group in groups:
        summary = await _summary(client, group)
        if summary.group_state not in ("Empty", "Dead"):
            out.write(
                f"\nError: Assignments can only be reset if the group '{group}' is inactive, "
                f"but the current state is {summary.group_state}.\n"
            )
            planned.append((group, []))
            continue
        offsets = await _new_offsets(client, opts, group, err)
        if opts.has("execute") and offsets:
            await _commit(client, group, offsets)
        planned.append((group, offsets))
    if not planned:
        return
    row = "{:<30} {:<30} {:<10} {:<15}"
    out.write("\n" + row.format("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET") + "\n")
    for group, offsets in planned:
        for topic, partition, offset in offsets:
            out.write(row.format(group, topic, partition, offset) + "\n")


async def consumer_groups(argv: Sequence[str], *, out: TextIO, err: TextIO) -> int:
    opts = parse(argv, SPECS)
    if not opts.arg_count or opts.has("help"):
        raise UsageError(SUMMARY)
    if opts.has("version"):
        out.write(f"{KAFKA_VERSION} (Commit:kemu)\n")
        return 0
    actions = [a for a in ("list", "describe", "delete", "reset-offsets") if opts.has(a)]
    if len(actions) != 1:
        raise UsageError(
            "Command must include exactly one action: --list, --describe, --delete, "
            "--reset-offsets, --delete-offsets"
        )
    if not opts.has("bootstrap-server"):
        raise UsageError('Missing required argument "[bootstrap-server]"')
    if actions[0] == "reset-offsets":
        _check_reset_args(opts, err)
    if opts.has("topic") and actions[0] in ("list", "describe"):
        raise UsageError(f'Option "[topic]" can\'t be used with option "[{actions[0]}]"')
    if opts.has("topic") and actions[0] == "delete":
        raise UsageError(
            "The consumer does not support topic-specific offset deletion from a consumer group."
        )
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
            case "reset-offsets":
                await _reset(client, opts, groups, out, err)
            case _:
                await _delete(client, groups, out)
    return 0


def main(argv: Sequence[str], *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``kemu consumer-groups ARGS``: run it and return the exit status."""
    output, error = out or sys.stdout, err or sys.stderr
    return run_tool(
        lambda: consumer_groups(argv, out=output, err=error), usage=USAGE, err=error, out=output
    )
