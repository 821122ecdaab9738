"""``kemu consumer-groups``: Kafka 2.7's ``kafka-consumer-groups.sh``
(``kafka.admin.ConsumerGroupCommand``): ``--list``, ``--describe``, ``--delete``,
``--reset-offsets`` and ``--delete-offsets``, over the wire as Kafka's admin client does
it (FindCoordinator, then the group APIs at the coordinator; Metadata and ListOffsets).

* ``--list [--state [S,S]]``: ``listConsumerGroups`` (ListGroups at every broker), in the
  order of the admin client's ``HashMap`` of group ids; with ``--state`` ``GROUP STATE``
  rows (``printGroupStates``), filtered by the states named (case as Kafka's
  ``ConsumerGroupState`` names them).
* ``--describe (--group G... | --all-groups) [--offsets | --members [--verbose] |
  --state]``: the groups sorted by id (Kafka's ``TreeMap``), each as
  ``shouldPrintMemberState`` decides: a Dead group is ``Error: Consumer group 'G' does not
  exist.`` on stdout, an Empty one ``Consumer group 'G' has no active members.`` on stderr,
  a rebalancing one its warning on stderr. ``--offsets`` (the default) is
  ``collectGroupOffsets`` in ``printOffsets``' columns (one row per assigned partition,
  members with most partitions first, then one per other committed partition);
  ``--members`` is ``printMembers`` (``GROUP-INSTANCE-ID`` only when a member has one;
  ``--verbose`` adds ``ASSIGNMENT``, ``topic(0,1)`` per topic); ``--state`` is
  ``printStates`` (the coordinator as ``host:port (id)``).
* ``--delete (--group G... | --all-groups)``: DeleteGroups at each coordinator; Kafka's
  success line or its list of failures.
* ``--reset-offsets (--group G... | --all-groups) (--topic T[:P,P]... | --all-topics)
  (--to-earliest | --to-latest | --to-offset N | --shift-by N | --to-current |
  --to-datetime D | --by-duration PnDTnHnMnS | --from-file CSV) [--dry-run | --execute]
  [--export]``: ``resetOffsets``; ``--to-datetime`` and ``--by-duration`` take the first
  offset at or after the time (ListOffsets), the log end where there is none
  (``getLogTimestampOffsets``); ``--from-file`` (no scope needed) resets each group to
  its plan (``topic,partition,offset`` lines for one ``--group``, else
  ``group,topic,partition,offset``), clamped to the log, a group without a plan an
  ``Error: No reset plan`` line; ``--export`` prints the result as such CSV lines
  (``exportOffsetsToCsv``) instead of the table; a group neither Empty nor Dead is
  refused with 2.7's error line; ``--to-offset``, ``--shift-by`` and a plan's offsets are
  clamped to the log (``checkOffsetsRange``, its log4j WARN on stderr); ``--execute``
  commits with one OffsetCommit as no member (``alterConsumerGroupOffsets``); printed as
  ``printOffsetsToReset``.
* ``--delete-offsets --group G --topic T[:P,P]...``: ``deleteOffsets``: OffsetDelete at the
  coordinator (a topic without partitions: all of its partitions, from Metadata), then
  the top-level outcome and ``TOPIC PARTITION STATUS`` rows.
* ``--timeout MS`` (default 5000): every call's deadline (``withTimeoutMs``).

Where kemu differs from 2.7, on purpose (docs/kafka-wire.md, "kemu consumer-groups"):

* Bad input is one line and exit 1 and changes nothing, found before anything is asked
  of the cluster: a value that is not a number (Kafka converts ``--timeout``,
  ``--to-offset`` and ``--shift-by`` only when it uses them, and so prints a failed run), a
  partition list that does not parse (Kafka: its ``NumberFormatException`` and a stack
  trace, exit 0), a missing reset scope or scenario. A reset of several groups is planned
  for all of them before the first commit.
* A call that fails (the cluster does not answer within ``--timeout``, a broker's error)
  prints 2.7's ``Error: Executing consumer group command failed due to <exception>`` on
  stdout, without the stack trace, and exits 1 where 2.7 exits 0.
* Rows of one member, and ``--reset-offsets`` rows, come in partition order where Kafka's
  Scala maps order more than four entries by hash; ``--all-topics`` takes the committed
  partitions sorted.
* A ``--to-datetime`` that does not parse, a ``--by-duration`` that is not a Duration,
  and a ``--from-file`` that cannot be read or has a line that is not the plan's columns
  are bad input (2.7 meets them only when the reset runs); a date field out of its range
  is refused where ``SimpleDateFormat`` rolls it over. The missing-scenario message names
  the scenarios in kemu's order.
"""

from __future__ import annotations

import datetime
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TextIO

from actors.group import consumer_assignment
from cluster.cli.args import UsageError
from cluster.cli.client_tools import run_tool
from cluster.cli.jopt import Option, OptionError, Options, java_parse_int, option_lines, parse
from cluster.cli.offset_reset import (
    ResetPlan,
    datetime_ms,
    duration_ms,
    export_csv,
    java_split,
    read_reset_plan,
)
from cluster.cli.topics import KAFKA_VERSION
from cluster.kafka.client import (
    ERROR_MESSAGES,
    AdminClientConfig,
    KafkaClientError,
    KafkaDataClient,
    KafkaTimeoutError,
    exception_class,
    load_properties,
)
from protocol import jvm
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
    OffsetDeleteRequestData,
    OffsetDeleteResponseData,
    OffsetFetchRequestData,
    OffsetFetchResponseData,
    OffsetFetchTopic,
)
from protocol.ids import TopicName
from protocol.kafka_data import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP

__all__ = ["main"]

MISSING: Final = "-"
SPECS: Final = (
    Option("all-groups", "Apply to all consumer groups."),
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
        "delete-offsets",
        "Delete offsets of consumer group. Supports one consumer group at the time, and "
        "multiple topics.",
    ),
    Option(
        "describe",
        "Describe consumer group and list offset lag (number of messages not yet "
        "processed) related to given group.",
    ),
    Option(
        "by-duration",
        "Reset offsets to offset by duration from current timestamp. Format: 'PnDTnHnMnS'",
        "duration",
    ),
    Option(
        "dry-run",
        "Only show results without executing changes on Consumer Groups. Supported "
        "operations: reset-offsets.",
    ),
    Option("execute", "Execute operation. Supported operations: reset-offsets."),
    Option(
        "export",
        "Export operation execution to a CSV file. Supported operations: reset-offsets.",
    ),
    Option("from-file", "Reset offsets to values defined in CSV file.", "path to CSV file"),
    Option("group", "The consumer group we wish to act on.", "consumer group"),
    Option("help", "Print usage information."),
    Option("list", "List all consumer groups."),
    Option(
        "members",
        "Describe members of the group. This option may be used with '--describe' and "
        "'--bootstrap-server' options only. Example: --bootstrap-server localhost:9092 "
        "--describe --group group1 --members",
    ),
    Option(
        "offsets",
        "Describe the group and list all topic partitions in the group along with their "
        "offset lag. This is the default sub-action of and may be used with '--describe' "
        "and '--bootstrap-server' options only. Example: --bootstrap-server localhost:9092 "
        "--describe --group group1 --offsets",
    ),
    Option(
        "reset-offsets",
        "Reset offsets of consumer group. Supports one consumer group at the time, and "
        "instances should be inactive. Has 2 execution options: --dry-run (the default) to "
        "plan which offsets to reset, and --execute to update the offsets. Additionally, the "
        "--export option is used to export the results to a CSV format. You must choose one "
        "of the following reset specifications: --to-datetime, --by-period, --to-earliest, "
        "--to-latest, --shift-by, --from-file, --to-current. To define the scope use "
        "--all-topics or --topic. One scope must be specified unless you use '--from-file'.",
    ),
    Option(
        "shift-by",
        "Reset offsets shifting current offset by 'n', where 'n' can be positive or "
        "negative.",
        "number-of-offsets",
    ),
    Option(
        "state",
        "When specified with '--describe', includes the state of the group. Example: "
        "--bootstrap-server localhost:9092 --describe --group group1 --state When "
        "specified with '--list', it displays the state of all groups. It can also be used "
        "to list groups with specific states. Example: --bootstrap-server localhost:9092 "
        "--list --state Stable,Empty This option may be used with '--describe', '--list' "
        "and '--bootstrap-server' options only.",
        "String",
        optional=True,
    ),
    Option(
        "timeout",
        "The timeout that can be set for some use cases. For example, it can be used when "
        "describing the group to specify the maximum amount of time in milliseconds to wait "
        "before the group stabilizes (when the group is just created, or is going through "
        "some changes). (default: 5000)",
        "timeout (ms)",
    ),
    Option("to-current", "Reset offsets to current offset."),
    Option(
        "to-datetime",
        "Reset offsets to offset from datetime. Format: 'YYYY-MM-DDTHH:mm:SS.sss'",
        "datetime",
    ),
    Option("to-earliest", "Reset offsets to earliest offset."),
    Option("to-latest", "Reset offsets to latest offset."),
    Option("to-offset", "Reset offsets to a specific offset.", "offset"),
    Option(
        "topic",
        "The topic whose consumer group information should be deleted or topic whose "
        "should be included in the reset offset process. In `reset-offsets` case, "
        "partitions can be specified using this format: `topic1:0,1,2`, where 0,1,2 are "
        "the partition to be included in the process. Reset-offsets also supports multiple "
        "topic inputs.",
        "topic",
    ),
    Option(
        "verbose",
        "Provide additional information, if any, when describing the group. This option "
        "may be used with '--offsets'/'--members'/'--state' and '--bootstrap-server' "
        "options only. Example: --bootstrap-server localhost:9092 --describe --group group1 "
        "--members --verbose",
    ),
    Option("version", "Display Kafka version."),
)  # fmt: skip
SUMMARY: Final = (
    "This tool helps to list all consumer groups, describe a consumer group, delete "
    "consumer group info, or reset consumer group offsets."
)
USAGE: Final = "\n".join(["Option  Description", *option_lines(SPECS)])
DEFAULT_TIMEOUT_MS: Final = 5000
STATES: Final = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")
"""``ConsumerGroupState``'s names, ``Unknown`` aside."""
ACTIONS: Final = ("list", "describe", "delete", "reset-offsets", "delete-offsets")
SCENARIOS: Final = (
    "to-offset",
    "to-earliest",
    "to-latest",
    "to-current",
    "shift-by",
    "to-datetime",
    "by-duration",
    "from-file",
)
"""The reset scenarios, as the missing-scenario message names them."""
_SCENARIO_CHECKS: Final = (
    "to-offset",
    "to-datetime",
    "by-duration",
    "to-earliest",
    "to-latest",
    "to-current",
    "shift-by",
    "from-file",
)
"""``checkArgs``' order of the ``checkInvalidArgs`` calls between scenarios."""
NO_EXECUTE_WARNING: Final = (
    "WARN: No action will be performed as the --execute option is missing.In a future major "
    "release, the default behavior of this command will be to prompt the user before "
    "executing the reset rather than doing a dry run. You should add the --dry-run option "
    "explicitly if you are scripting this command and want to keep the current default "
    "behavior without prompting."
)
GROUP_MESSAGES: Final = {
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: (
        "The coordinator is loading and hence can't process requests."
    ),
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    ErrorCode.NOT_COORDINATOR: "This is not the correct coordinator.",
    ErrorCode.ILLEGAL_GENERATION: "Specified group generation id is not valid.",
    ErrorCode.INVALID_GROUP_ID: "The configured groupId is invalid.",
    ErrorCode.UNKNOWN_MEMBER_ID: "The coordinator is not aware of this member.",
    ErrorCode.REBALANCE_IN_PROGRESS: "The group is rebalancing, so a rejoin is needed.",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
    ErrorCode.NON_EMPTY_GROUP: "The group is not empty.",
    ErrorCode.GROUP_ID_NOT_FOUND: "The group id does not exist.",
    ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC: (
        "Deleting offsets of a topic is forbidden while the consumer group is actively "
        "subscribed to it."
    ),
}
"""``Errors.java``'s messages of the group errors (the others: ``ERROR_MESSAGES``)."""
TP = tuple[str, int]


def _message(code: ErrorCode) -> str:
    return GROUP_MESSAGES.get(code) or ERROR_MESSAGES.get(code, code.name)


def _exception(code: ErrorCode, message: str | None = None) -> str:
    """The ``toString`` of the exception Kafka's client raises for ``code``."""
    return f"{exception_class(code)}: {message or _message(code)}"


def _unrepresentable(group: str) -> KafkaApiError:
    """``KafkaAdminClient.groupIdIsUnrepresentable``: an empty group id."""
    return KafkaApiError(
        ErrorCode.INVALID_GROUP_ID,
        f"The given group id '{group}' cannot be represented in a request.",
    )


def _thrown(error: KafkaClientError | KafkaApiError) -> str:
    """The exception a failed admin call leaves (``ExecutionException.getMessage``)."""
    if isinstance(error, KafkaApiError):
        return _exception(error.code, error.detail)
    if isinstance(error, KafkaTimeoutError):
        return f"org.apache.kafka.common.errors.TimeoutException: {error}"
    return f"org.apache.kafka.common.KafkaException: {error}"


# ============================================================================ checkArgs


def _long(opts: Options, name: str) -> int | None:
    """The option's value as a Java ``Long`` (``ofType(Long)``)."""
    text = opts.value(name)
    if text is None:
        return None
    if re.fullmatch(r"[+-]?[0-9]+", text) and -(2**63) <= int(text) < 2**63:
        return int(text)
    raise OptionError(f"Cannot parse argument '{text}' of option {name}")


@dataclass(frozen=True, slots=True)
class TopicArg:
    """One ``--topic``: a topic and the partitions listed after its colon (None: all)."""

    topic: str
    partitions: tuple[int, ...] | None


def _topic_args(opts: Options) -> list[TopicArg]:
    """Each ``--topic`` as ``T`` or ``T:P,P`` (``partition.toInt``: a number that does not
    parse is ``NumberFormatException``'s message)."""
    out = []
    for arg in opts.values_of("topic"):
        if ":" not in arg:
            out.append(TopicArg(arg, None))
            continue
        parts = java_split(arg, ":")
        listed = java_split(parts[1], ",") if len(parts) > 1 else [""]
        numbers = []
        for text in listed:
            number = java_parse_int(text)
            if number is None:
                raise OptionError(f'For input string: "{text}"')
            numbers.append(number)
        out.append(TopicArg(parts[0] if parts else "", tuple(numbers)))
    return out


_AVAILABLE_IF: Final = {"members": ("describe",), "verbose": ("describe",),
                        "offsets": ("describe",), "state": ("describe", "list")}  # fmt: skip
"""jopt's ``availableIf``: the options each of these needs one of."""


def _unavailable(opts: Options) -> None:
    """``OptionParser.ensureAllowedIfsSatisfied``: the options given without what they
    need, in the order of jopt's ``HashMap`` keyed by each option's names
    (``List.hashCode``; four keys stay in a table of 16)."""

    def bucket(name: str) -> int:
        h = jvm.java_list_hash([name]) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & 15

    names = [n for n in sorted(_AVAILABLE_IF, key=bucket) if opts.has(n)]
    needs = _AVAILABLE_IF
    forbidden = [n for n in names if not any(opts.has(a) for a in needs[n])]
    if forbidden:
        listed = ", ".join(forbidden)
        raise OptionError(
            f"Option(s) [{listed}] are unavailable given other options on the command line"
        )


def _invalid(opts: Options, used: str, others: Sequence[str]) -> None:
    """``CommandLineUtils.checkInvalidArgs``."""
    if opts.has(used):
        for name in others:
            if opts.has(name):
                raise UsageError(f'Option "[{used}]" can\'t be used with option "[{name}]"')


def check_args(opts: Options, err: TextIO) -> str:
    """``ConsumerGroupCommandOptions.checkArgs`` then ``main``'s one-action rule, and the
    values kemu converts before the first call; returns the action."""
    if not opts.has("bootstrap-server"):
        raise UsageError('Missing required argument "[bootstrap-server]"')
    scope = not opts.has("group") and not opts.has("all-groups")
    if opts.has("describe"):
        if scope:
            raise UsageError("Option [describe] takes one of these options: [group], [all-groups]")
        if sum(opts.has(o) for o in ("members", "offsets", "state")) > 1:
            raise UsageError(
                "Option [describe] takes at most one of these options: [members], [offsets], "
                "[state]"
            )
        if opts.has("state") and opts.values_of("state") != ("",):
            raise UsageError("Option [describe] does not take a value for [state]")
    if opts.has("delete"):
        if scope:
            raise UsageError("Option [delete] takes one of these options: [group], [all-groups]")
        if opts.has("topic"):
            raise UsageError(
                "The consumer does not support topic-specific offset deletion from a consumer "
                "group."
            )
    if opts.has("delete-offsets") and (not opts.has("group") or not opts.has("topic")):
        raise UsageError("Option [delete-offsets] takes the following options: [group], [topic]")
    if opts.has("reset-offsets"):
        if opts.has("dry-run") and opts.has("execute"):
            raise UsageError("Option [reset-offsets] only accepts one of [execute] and [dry-run]")
        if not opts.has("dry-run") and not opts.has("execute"):
            err.write(NO_EXECUTE_WARNING + "\n")
        if scope:
            raise UsageError(
                "Option [reset-offsets] takes one of these options: [group], [all-groups]"
            )
        given = [s for s in _SCENARIO_CHECKS if opts.has(s)]
        if len(given) > 1:
            raise UsageError(f'Option "[{given[0]}]" can\'t be used with option "[{given[1]}]"')
    _invalid(opts, "group", ["all-groups"])
    _invalid(opts, "group", ["list"])
    _invalid(opts, "topic", ["list", "describe"])
    actions = [a for a in ACTIONS if opts.has(a)]
    if len(actions) != 1:
        raise UsageError(
            "Command must include exactly one action: --list, --describe, --delete, "
            "--reset-offsets, --delete-offsets"
        )
    if actions[0] == "reset-offsets":
        if not opts.has("all-topics") and not opts.has("topic") and not opts.has("from-file"):
            raise UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
        if not any(opts.has(s) for s in SCENARIOS):
            raise UsageError(
                "Option '[reset-offsets]' requires one of the following scenarios: "
                + ", ".join(f"[{s}]" for s in SCENARIOS)
            )
        _long(opts, "to-offset")
        _long(opts, "shift-by")
        if opts.has("to-datetime"):
            datetime_ms(opts.value("to-datetime") or "")
        if opts.has("by-duration"):
            duration_ms(opts.value("by-duration") or "")
        if opts.has("from-file"):
            read_reset_plan(opts.value("from-file") or "", opts.values_of("group"))
    if actions[0] in ("reset-offsets", "delete-offsets"):
        _topic_args(opts)
    if actions[0] == "list" and opts.value("state"):
        _states(opts.value("state") or "")
    _long(opts, "timeout")
    return actions[0]


def _states(text: str) -> list[str]:
    """``consumerGroupStatesFromString``: comma-separated state names."""
    states = [s.strip() for s in text.split(",")]
    if any(s not in STATES for s in states):
        raise UsageError(f"Invalid state list '{text}'. Valid states are: {', '.join(STATES)}")
    return states


# ============================================================================ the calls


async def _described(client: KafkaDataClient, group: str) -> DescribedGroup:
    """DescribeGroups of one group at its coordinator."""
    if not group:
        raise _unrepresentable(group)
    described = await client.group_request(
        group, DescribeGroupsRequestData(groups=(group,)), DescribeGroupsResponseData
    )
    (summary,) = described.groups
    if summary.error_code is not ErrorCode.NONE:
        raise KafkaApiError(summary.error_code, _message(summary.error_code))
    return summary


async def _committed(client: KafkaDataClient, group: str) -> dict[TP, int]:
    """``listConsumerGroupOffsets``: the group's committed offsets."""
    fetched = await client.group_request(
        group, OffsetFetchRequestData(group_id=group, topics=None), OffsetFetchResponseData
    )
    if fetched.error_code is not ErrorCode.NONE:
        raise KafkaApiError(fetched.error_code, _message(fetched.error_code))
    return {
        (str(t.name), p.partition_index): p.committed_offset
        for t in fetched.topics
        for p in t.partitions
        if p.committed_offset >= 0
    }


async def _log_offset(client: KafkaDataClient, tp: TP, at: int) -> int:
    return (await client.list_offset(tp[0], tp[1], at)).offset


async def _log_end(client: KafkaDataClient, tp: TP) -> int | None:
    """The partition's log end offset, or None if no leader answers it."""
    try:
        return await _log_offset(client, tp, LATEST_TIMESTAMP)
    except (KafkaClientError, KafkaApiError):
        return None


async def _group_ids(client: KafkaDataClient) -> list[str]:
    """``listConsumerGroups``: the ids in the order of the admin client's ``HashMap``."""
    return jvm.java_hash_map_order([g.group_id for g in await client.list_groups()])


def _in_results_order(groups: Sequence[str]) -> list[str]:
    """The order of ``describedGroups`` / ``deletedGroups``: a ``HashMap`` copied from
    the ``HashMap`` ``createFutures`` collects the distinct ids into."""
    first = jvm.java_hash_map_order(list(dict.fromkeys(groups)))
    return jvm.java_hash_map_order(first, initial_capacity=int(len(first) / 0.75 + 1.0))


def _state_note(group: str, state: str, rows: int, out: TextIO, err: TextIO) -> bool:
    """``shouldPrintMemberState``: the note on the group's state; whether rows follow."""
    if state == "Dead":
        out.write(f"\nError: Consumer group '{group}' does not exist.\n")
        return False
    if state == "Empty":
        err.write(f"\nConsumer group '{group}' has no active members.\n")
    elif state in ("PreparingRebalance", "CompletingRebalance"):
        err.write(f"\nWarning: Consumer group '{group}' is rebalancing.\n")
    return rows > 0


def _left(width: int) -> str:
    return f"{{:<{width}}}"


# ---------------------------------------------------------------------------- --list


async def _list(client: KafkaDataClient, opts: Options, out: TextIO) -> None:
    if not opts.has("state"):
        for group in await _group_ids(client):
            out.write(f"{group}\n")
        return
    text = opts.value("state") or ""
    states = _states(text) if text else []
    listed = {g.group_id: g.group_state or "Unknown" for g in await client.list_groups(states)}
    rows = [(g, listed[g]) for g in jvm.java_hash_map_order(list(listed))]
    width = max(15, *(len(g) for g, _ in rows)) if rows else 15
    line = _left(width) + " {}\n"
    out.write(line.format("GROUP", "STATE"))
    for group, state in rows:
        out.write(line.format(group, state))


# ---------------------------------------------------------------------------- --describe

OffsetRow = tuple[str, str, str, str, str, str, str, str, str]


async def _describe_offsets(client: KafkaDataClient, group: str, out: TextIO, err: TextIO) -> None:
    summary = await _described(client, group)
    committed = await _committed(client, group)
    rows = await _offset_rows(client, group, summary, committed)
    if not _state_note(group, summary.group_state, len(rows), out, err):
        return
    widths = [max(15, *(len(r[i]) for r in rows)) for i in (0, 1, 6, 7)]
    fmt = " ".join(
        [_left(widths[0]), _left(widths[1]), _left(10), _left(15), _left(15), _left(15),
         _left(widths[2]), _left(widths[3]), "{}"]
    )  # fmt: skip
    header = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
              "CONSUMER-ID", "HOST", "CLIENT-ID")  # fmt: skip
    out.write("\n" + fmt.format(*header) + "\n")
    for row in rows:
        out.write(fmt.format(*row) + "\n")


async def _offset_rows(
    client: KafkaDataClient, group: str, summary: DescribedGroup, committed: dict[TP, int]
) -> list[OffsetRow]:
    """``collectGroupOffsets``' rows."""
    members = [
        (m, sorted(consumer_assignment(m.member_assignment), key=lambda tp: tp[1]))
        for m in summary.members
    ]
    members = [(m, parts) for m, parts in members if parts]
    members.sort(key=lambda item: -len(item[1]))
    rows: list[OffsetRow] = []
    assigned: set[TP] = set()
    for member, parts in members:
        for tp in parts:
            assigned.add(tp)
            who = (member.member_id, member.client_host, member.client_id)
            rows.append(await _offset_row(client, group, tp, committed.get(tp), who))
    for tp, offset in sorted(committed.items()):
        if tp not in assigned:
            rows.append(await _offset_row(client, group, tp, offset, (MISSING,) * 3))
    return rows


async def _offset_row(
    client: KafkaDataClient, group: str, tp: TP, offset: int | None, who: tuple[str, ...]
) -> OffsetRow:
    end = await _log_end(client, tp)
    lag = None if offset is None or end is None else end - offset
    shown = [MISSING if v is None else str(v) for v in (offset, end, lag)]
    return (group, tp[0], str(tp[1]), shown[0], shown[1], shown[2], who[0], who[1], who[2])


async def _describe_members(
    client: KafkaDataClient, group: str, verbose: bool, out: TextIO, err: TextIO
) -> None:
    """``collectGroupMembers`` printed as ``printMembers``."""
    summary = await _described(client, group)
    members = summary.members
    if not _state_note(group, summary.group_state, len(members), out, err):
        return
    instance = any(m.group_instance_id for m in members)
    header = ["GROUP", "CONSUMER-ID", *(["GROUP-INSTANCE-ID"] if instance else []), "HOST",
              "CLIENT-ID"]  # fmt: skip
    least = [15, 15, *([17] if instance else []), 15, 15]
    rows = [
        [group, m.member_id, *([m.group_instance_id or ""] if instance else []), m.client_host,
         m.client_id]
        for m in members
    ]  # fmt: skip
    widths = [max(w, *(len(row[i]) for row in rows)) for i, w in enumerate(least)]
    fmt = " ".join(_left(w) for w in widths) + " {:<15} "
    out.write("\n" + fmt.format(*header, "#PARTITIONS") + ("ASSIGNMENT" if verbose else "") + "\n")
    for member, row in zip(members, rows, strict=True):
        partitions = consumer_assignment(member.member_assignment)
        tail = _assignment_text(partitions) if verbose else ""
        out.write(fmt.format(*row, len(partitions)) + tail + "\n")


def _assignment_text(partitions: Sequence[TP]) -> str:
    """``printMembers``' ASSIGNMENT: ``topic(0,1)`` per topic, sorted; ``-`` if none."""
    if not partitions:
        return MISSING
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    texts = [f"{t}({','.join(str(p) for p in sorted(ps))})" for t, ps in by_topic.items()]
    return ", ".join(sorted(texts, key=jvm.utf16_sort_key))


async def _describe_state(client: KafkaDataClient, group: str, out: TextIO, err: TextIO) -> None:
    """``collectGroupState`` printed as ``printStates`` (whose first column is as wide as
    the coordinator's)."""
    summary = await _described(client, group)
    if not _state_note(group, summary.group_state, 1, out, err):
        return
    found = await client.find_coordinator(group)
    coordinator = f"{found.host}:{found.port} ({found.node_id})"
    fmt = " ".join([_left(max(25, len(coordinator))), _left(25), _left(20), _left(15), "{}"])
    out.write("\n" + fmt.format("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE",
                                "#MEMBERS"))  # fmt: skip
    out.write("\n" + fmt.format(group, coordinator, summary.protocol_data, summary.group_state,
                                len(summary.members)) + "\n")  # fmt: skip


async def _describe(client: KafkaDataClient, opts: Options, out: TextIO, err: TextIO) -> None:
    groups = await _group_ids(client) if opts.has("all-groups") else opts.values_of("group")
    for group in sorted(set(groups), key=jvm.utf16_sort_key):
        if opts.has("members"):
            await _describe_members(client, group, opts.has("verbose"), out, err)
        elif opts.has("state"):
            await _describe_state(client, group, out, err)
        else:
            await _describe_offsets(client, group, out, err)


# ---------------------------------------------------------------------------- --delete


async def _delete(client: KafkaDataClient, opts: Options, out: TextIO) -> None:
    """``deleteGroups``: DeleteGroups at each group's coordinator."""
    groups = await _group_ids(client) if opts.has("all-groups") else opts.values_of("group")
    results: dict[str, str | None] = {}
    for group in _in_results_order(groups):
        if not group:
            results[group] = _thrown(_unrepresentable(group))
            continue
        response = await client.group_request(
            group, DeleteGroupsRequestData(groups_names=(group,)), DeleteGroupsResponseData
        )
        code = response.results[0].error_code
        results[group] = None if code is ErrorCode.NONE else _exception(code)
    order = jvm.scala_mutable_map_order(list(results))  # the result's mutable.Map
    done = [g for g in order if results[g] is None]
    failed = [g for g in order if results[g] is not None]
    if not failed:
        names = ", ".join(f"'{g}'" for g in done) or "''"
        out.write(f"Deletion of requested consumer groups ({names}) was successful.\n")
        return
    out.write("\nError: Deletion of some consumer groups failed:\n")
    for group in failed:
        out.write(f"* Group '{group}' could not be deleted due to: {results[group]}\n")
    if done:
        names = ", ".join(f"'{g}'" for g in done)
        out.write(f"\nThese consumer groups were deleted successfully: {names}\n")


# ---------------------------------------------------------------------------- --reset-offsets


async def _partitions_to_reset(
    client: KafkaDataClient, opts: Options, committed: dict[TP, int]
) -> list[TP]:
    """``getPartitionsToReset``: the group's committed partitions for ``--all-topics``,
    else each ``--topic`` (``T:0,1`` its listed partitions, ``T`` all of them)."""
    if opts.has("all-topics"):
        return sorted(committed)
    out: list[TP] = []
    for arg in _topic_args(opts):
        if arg.partitions is None:
            out += [(arg.topic, p) for p in await _topic_partitions(client, arg.topic)]
        else:
            out += [(arg.topic, p) for p in arg.partitions]
    return out


async def _topic_partitions(client: KafkaDataClient, topic: str) -> list[int]:
    """``describeTopics``: the topic's partitions (an unknown topic's error raised)."""
    described = await client.describe_topics([topic])
    return sorted(p.partition for p in described[TopicName(topic)].partitions)


async def _in_range(client: KafkaDataClient, tp: TP, offset: int, err: TextIO) -> int:
    """``checkOffsetsRange``: an offset past the log end is the log end, one before the
    log start the log start (each with Kafka's warning on stderr)."""
    end = await _log_offset(client, tp, LATEST_TIMESTAMP)
    start = await _log_offset(client, tp, EARLIEST_TIMESTAMP)
    if offset > end:
        bound, side = end, "higher than latest"
    elif offset < start:
        bound, side = start, "lower than earliest"
    else:
        return offset
    now = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
    err.write(
        f"[{now}] WARN New offset ({offset}) is {side} offset for topic partition "
        f"{tp[0]}-{tp[1]}. Value will be set to {bound} (kafka.admin.ConsumerGroupCommand$)\n"
    )
    return bound


async def _new_offsets(
    client: KafkaDataClient,
    opts: Options,
    group: str,
    err: TextIO,
    out: TextIO,
    plan: ResetPlan | None,
) -> list[tuple[str, int, int]]:
    """``prepareOffsetsToReset`` (``plan``: the ``--from-file`` one)."""
    committed = await _committed(client, group)
    scoped = opts.has("all-topics") or opts.has("topic")
    partitions = await _partitions_to_reset(client, opts, committed) if scoped else []
    if plan is not None:
        wanted = plan.get(group)
        if wanted is None:
            out.write(f"\nError: No reset plan for group {group} found\n")
            return []
        return [(t, p, await _in_range(client, (t, p), o, err)) for (t, p), o in wanted.items()]
    timestamp = _reset_timestamp(opts)
    out_offsets: list[tuple[str, int, int]] = []
    for tp in partitions:
        current = committed.get(tp)
        if opts.has("to-offset"):
            offset = await _in_range(client, tp, _long(opts, "to-offset") or 0, err)
        elif timestamp is not None:  # getLogTimestampOffsets: none at or after it: the end
            offset = await _log_offset(client, tp, timestamp)
            if offset == -1:
                offset = await _log_offset(client, tp, LATEST_TIMESTAMP)
        elif opts.has("to-earliest"):
            offset = await _log_offset(client, tp, EARLIEST_TIMESTAMP)
        elif opts.has("to-latest"):
            offset = await _log_offset(client, tp, LATEST_TIMESTAMP)
        elif opts.has("shift-by"):
            if current is None:
                raise UsageError(
                    f"Cannot shift offset for partition {tp[0]}-{tp[1]} since there is "
                    "no current committed offset"
                )
            offset = await _in_range(client, tp, current + (_long(opts, "shift-by") or 0), err)
        elif current is not None:  # --to-current
            offset = current
        else:
            offset = await _log_offset(client, tp, LATEST_TIMESTAMP)
        out_offsets.append((tp[0], tp[1], offset))
    return out_offsets


def _reset_timestamp(opts: Options) -> int | None:
    """The time ``--to-datetime`` names, or ``--by-duration`` before now, in epoch ms."""
    if opts.has("to-datetime"):
        return datetime_ms(opts.value("to-datetime") or "")
    if opts.has("by-duration"):
        now_ms = int(datetime.datetime.now(datetime.UTC).timestamp() * 1000)
        return now_ms - duration_ms(opts.value("by-duration") or "")
    return None


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
                raise KafkaApiError(p.error_code, _message(p.error_code))


async def _reset(client: KafkaDataClient, opts: Options, out: TextIO, err: TextIO) -> None:
    """``resetOffsets`` then ``printOffsetsToReset``: only an Empty or Dead group is reset;
    another is Kafka's error line and no rows. Every group is planned before any commit."""
    groups = await _group_ids(client) if opts.has("all-groups") else opts.values_of("group")
    order = jvm.scala_immutable_order(_in_results_order(groups))  # foldLeft into a Map
    plan = None
    if opts.has("from-file"):
        plan = read_reset_plan(opts.value("from-file") or "", opts.values_of("group"))
    planned: list[tuple[str, list[tuple[str, int, int]]]] = []
    for group in order:
        summary = await _described(client, group)
        if summary.group_state not in ("Empty", "Dead"):
            out.write(
                f"\nError: Assignments can only be reset if the group '{group}' is inactive, "
                f"but the current state is {summary.group_state}.\n"
            )
            planned.append((group, []))
            continue
        planned.append((group, await _new_offsets(client, opts, group, err, out, plan)))
    if opts.has("execute"):
        for group, offsets in planned:
            if offsets:
                await _commit(client, group, offsets)
    if opts.has("export"):  # exportOffsetsToCsv, then println
        out.write(export_csv(planned, single=len(opts.values_of("group")) == 1) + "\n")
        return
    if not planned:
        return
    row = "{:<30} {:<30} {:<10} {:<15}"
    out.write("\n" + row.format("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET") + "\n")
    for group, offsets in planned:
        for topic, partition, offset in offsets:
            out.write(row.format(group, topic, partition, offset) + "\n")


# ---------------------------------------------------------------------------- --delete-offsets

_TOP_LEVEL: Final = {
    ErrorCode.INVALID_GROUP_ID: "'{group}' is not valid.",
    ErrorCode.GROUP_ID_NOT_FOUND: "'{group}' does not exist.",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Access to '{group}' is not authorized.",
    ErrorCode.NON_EMPTY_GROUP: (
        "Deleting offsets of a consumer group '{group}' is forbidden if the group is not empty."
    ),
    ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC: (
        "Encounter some partition level error, see the follow-up details:"
    ),
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: (
        "Encounter some partition level error, see the follow-up details:"
    ),
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: (
        "Encounter some partition level error, see the follow-up details:"
    ),
}
"""``deleteOffsets``' line for each top-level outcome (the others: an unknown error)."""


async def _delete_offsets(client: KafkaDataClient, opts: Options, out: TextIO) -> None:
    """``deleteOffsets``: the partitions listed, and every partition of each topic given
    without a list (a topic that cannot be described is a ``Not Provided`` row), dropped
    with one OffsetDelete at the coordinator."""
    group = opts.value("group") or ""
    args = _topic_args(opts)
    statuses: dict[TP, str | None] = {}
    partitions = [(a.topic, p) for a in args if a.partitions is not None for p in a.partitions]
    for arg in args:
        if arg.partitions is None:
            try:
                partitions += [(arg.topic, p) for p in await _topic_partitions(client, arg.topic)]
            except KafkaApiError as exc:
                statuses[(arg.topic, -1)] = _thrown(exc)
    partitions = list(dict.fromkeys(partitions))
    top, errors = await _offset_delete(client, group, partitions)
    failed = _thrown(_unrepresentable(group)) if not group else _exception(top)
    for tp in partitions:
        if top is not ErrorCode.NONE:
            statuses[tp] = failed
        elif tp not in errors:  # getSubLevelError
            statuses[tp] = (
                "java.lang.IllegalArgumentException: Offset deletion result for partition "
                f'"{tp[0]}-{tp[1]}" was not included in the response'
            )
        elif errors[tp] is not ErrorCode.NONE:
            statuses[tp] = _exception(errors[tp])
        else:
            statuses[tp] = None
    if top is ErrorCode.NONE:  # DeleteConsumerGroupOffsetsResult.all: the first failure
        failures = [errors.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR) for tp in partitions]
        top = next((c for c in failures if c is not ErrorCode.NONE), ErrorCode.NONE)
    topics = ", ".join(opts.values_of("topic"))
    if top is ErrorCode.NONE:
        out.write(f"Request succeed for deleting offsets with topic {topics} group {group}\n")
    else:
        line = _TOP_LEVEL.get(top, "Encounter some unknown error: {code}")
        out.write("\nError: " + line.format(group=group, code=top.name) + "\n")
    row = "{:<30} {:<15} {:<15}\n"
    out.write("\n" + row.format("TOPIC", "PARTITION", "STATUS"))
    for tp in sorted(statuses, key=lambda t: jvm.utf16_sort_key(t[0] + str(t[1]))):
        status = statuses[tp]
        out.write(
            row.format(
                tp[0],
                tp[1] if tp[1] >= 0 else "Not Provided",
                "Successful" if status is None else f"Error: {status}",
            )
        )


async def _offset_delete(
    client: KafkaDataClient, group: str, partitions: Sequence[TP]
) -> tuple[ErrorCode, dict[TP, ErrorCode]]:
    """``deleteConsumerGroupOffsets``: the group-level error, and each partition's."""
    if not group:
        return ErrorCode.INVALID_GROUP_ID, {}
    topics: dict[str, list[int]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(partition)
    request = OffsetDeleteRequestData(
        group_id=group,
        topics=tuple(
            OffsetFetchTopic(name=TopicName(t), partition_indexes=tuple(ps))
            for t, ps in topics.items()
        ),
    )
    response = await client.group_request(group, request, OffsetDeleteResponseData)
    errors = {
        (str(t.name), p.partition_index): p.error_code
        for t in response.topics
        for p in t.partitions
    }
    return response.error_code, errors


# ============================================================================ the command


def _client_config(opts: Options) -> AdminClientConfig:
    """The ``--command-config`` properties, with ``--timeout`` as every call's deadline
    (``withTimeoutMs``: the value's ``intValue``)."""
    config_file = opts.value("command-config")
    base = AdminClientConfig.from_properties(
        load_properties(Path(config_file)) if config_file else {}
    )
    given = _long(opts, "timeout")
    timeout = max(0, jvm.signed32(DEFAULT_TIMEOUT_MS if given is None else given))
    return AdminClientConfig(
        client_id=base.client_id,
        request_timeout_ms=min(base.request_timeout_ms, timeout),
        default_api_timeout_ms=timeout,
        retry_backoff_ms=base.retry_backoff_ms,
    )


async def consumer_groups(argv: Sequence[str], *, out: TextIO, err: TextIO) -> int:
    opts = parse(argv, SPECS)
    _unavailable(opts)
    if not opts.arg_count or opts.has("help"):
        raise UsageError(SUMMARY)
    if opts.has("version"):
        out.write(f"{KAFKA_VERSION} (Commit:kemu)\n")
        return 0
    action = check_args(opts, err)
    config = _client_config(opts)
    try:
        async with KafkaDataClient(opts.value("bootstrap-server") or "", config) as client:
            match action:
                case "list":
                    await _list(client, opts, out)
                case "describe":
                    await _describe(client, opts, out, err)
                case "delete":
                    await _delete(client, opts, out)
                case "reset-offsets":
                    await _reset(client, opts, out, err)
                case _:
                    await _delete_offsets(client, opts, out)
    except (KafkaClientError, KafkaApiError) as exc:
        out.write(f"\nError: Executing consumer group command failed due to {_thrown(exc)}\n")
        return 1
    return 0


def main(argv: Sequence[str], *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``kemu consumer-groups ARGS``: run it and return the exit status."""
    output, error = out or sys.stdout, err or sys.stderr
    return run_tool(
        lambda: consumer_groups(argv, out=output, err=error), usage=USAGE, err=error, out=output
    )
