"""``kemu console-consumer``: Kafka 2.7's ``kafka-console-consumer.sh``
(``kafka.tools.ConsoleConsumer``) with ``DefaultMessageFormatter``.

With a group (``--group``, or ``group.id`` in ``--consumer-property`` or
``--consumer.config``: all that are given must match, and none goes with
``--partition``) the consumer subscribes to ``--topic`` as a member of the group
(``cluster.kafka.consumer_group``): it reads the partitions the group assigns it, each
from the group's committed offset, or where ``auto.offset.reset`` says (latest; earliest
with ``--from-beginning``) when there is none; it commits its positions every
``auto.commit.interval.ms`` (5000) unless ``enable.auto.commit=false``, when the group
rebalances and when it ends, and then leaves the group.

Without a group the consumer assigns itself partitions, as Kafka's tool does with
``--partition``: the one given, or every partition of ``--topic`` (Kafka's tool would
join a group of a random name, committing nothing). Where each starts: ``--offset`` (a
number, ``earliest`` or ``latest``; with ``--partition`` only and not with
``--from-beginning``, as in Kafka), else the log start with ``--from-beginning``, else
the end. An offset the log no longer (or not yet)
has restarts at the log start or end as ``auto.offset.reset`` (earliest with
``--from-beginning``, latest otherwise) says.

Output as ``DefaultMessageFormatter``: per record, the fields asked with ``--property
print.timestamp|print.partition|print.offset|print.headers|print.key=true`` and the value
(``print.value``, true), separated by ``key.separator`` (a tab), each record ended by
``line.separator`` (a newline); a null key or value prints ``null.literal`` ("null").
Values are written as their bytes. The tool ends after ``--max-messages`` records, after
``--timeout-ms`` without a record, or on SIGINT/SIGTERM, and then prints "Processed a
total of N messages" on stderr.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final, TextIO

import anyio

from actors.log.records import TimestampType
from actors.runtime.clock import RealClock
from cluster.cli.args import UsageError
from cluster.cli.client_tools import (
    CLUSTER_OPTIONS,
    ToolError,
    admin_config,
    client_config,
    properties,
    run_tool,
    tool_bootstrap,
    usage_text,
)
from cluster.cli.jopt import Option, OptionError, Options, java_parse_int, parse
from cluster.kafka.client import (
    ClientConfigError,
    KafkaDataClient,
    api_error,
    int_config,
    load_properties,
)
from cluster.kafka.consumer_group import GroupConfig, GroupConsumer
from cluster.kafka.records import ConsumedRecord, RecordsError, batch_records, read_batches
from protocol.errors import ErrorCode
from protocol.kafka_data import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP

__all__ = ["main"]

SPECS: Final = (
    *CLUSTER_OPTIONS,
    Option("topic", "The topic id to consume on.", "topic"),
    Option(
        "partition", "The partition to consume from (all of the topic's without it).", "partition"
    ),
    Option(
        "offset",
        "The offset id to consume from (a non-negative number), or 'earliest' which means from"
        " beginning, or 'latest' which means from end (default: latest).",
        "consume offset",
    ),
    Option("from-beginning", "Start with the earliest message present in the log."),
    Option(
        "max-messages", "The maximum number of messages to consume before exiting.", "num_messages"
    ),
    Option("timeout-ms", "Exit if no message is available for this long (ms).", "timeout_ms"),
    Option("property", "The properties to initialize the message formatter.", "prop"),
    Option("consumer-property", "Consumer properties in the form key=value.", "consumer_prop"),
    Option("consumer.config", "Consumer config properties file.", "config file"),
    Option("group", "The consumer group id of the consumer.", "consumer group id"),
    Option(
        "isolation-level", "read_committed or read_uncommitted (the same in kemu).", "isolation"
    ),
)
USAGE: Final = usage_text(
    "This tool helps to read data from Kafka topics and outputs it to standard output.", SPECS
)
_TIMESTAMP_TYPES: Final = {
    TimestampType.CREATE_TIME: "CreateTime",
    TimestampType.LOG_APPEND_TIME: "LogAppendTime",
}  # ``TimestampType.name`` in Kafka
POLL_WAIT_MS: Final = 500  # the Fetch max_wait_ms of each round (fetch.max.wait.ms)


@dataclass(frozen=True)
class _Formatter:
    """``DefaultMessageFormatter`` and its properties."""

    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    null_literal: bytes = b"null"

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> _Formatter:
        def flag(name: str, default: bool) -> bool:
            return props.get(name, str(default)).strip().lower() == "true"

        return cls(
            print_timestamp=flag("print.timestamp", False),
            print_partition=flag("print.partition", False),
            print_offset=flag("print.offset", False),
            print_headers=flag("print.headers", False),
            print_key=flag("print.key", False),
            print_value=flag("print.value", True),
            key_separator=props.get("key.separator", "\t").encode(),
            line_separator=props.get("line.separator", "\n").encode(),
            headers_separator=props.get("headers.separator", ",").encode(),
            null_literal=props.get("null.literal", "null").encode(),
        )

    def format(self, partition: int, record: ConsumedRecord, timestamp_type: str) -> bytes:
        fields: list[bytes] = []
        if self.print_timestamp:
            fields.append(
                b"NO_TIMESTAMP"
                if record.timestamp_ms < 0
                else f"{timestamp_type}:{record.timestamp_ms}".encode()
            )
        if self.print_partition:
            fields.append(f"Partition:{partition}".encode())
        if self.print_offset:
            fields.append(f"Offset:{record.offset}".encode())
        if self.print_headers:
            fields.append(
                self.headers_separator.join(
                    name.encode() + b":" + (self.null_literal if value is None else value)
                    for name, value in record.headers
                )
                if record.headers
                else b"NO_HEADERS"
            )
        if self.print_key:
            fields.append(self.null_literal if record.key is None else record.key)
        if self.print_value:
            fields.append(self.null_literal if record.value is None else record.value)
        return self.key_separator.join(fields) + self.line_separator


def _start(opts: Options) -> tuple[int | None, int]:
    """The partition asked (None: all) and where to start: an offset, or -1 latest / -2
    earliest (``ConsoleConsumer.ConsumerConfig``'s checks)."""
    partition = opts.int_value("partition")
    text = opts.value("offset")
    if text is not None and partition is None:
        raise UsageError("The partition is required when offset is specified.")
    if text is not None and opts.has("from-beginning"):
        raise UsageError("Options from-beginning and offset cannot be specified together.")
    if partition is not None and partition < 0:
        raise UsageError(f"The partition must be non-negative, not {partition}")
    if text is None:
        return partition, EARLIEST_TIMESTAMP if opts.has("from-beginning") else LATEST_TIMESTAMP
    if text.lower() == "earliest":
        return partition, EARLIEST_TIMESTAMP
    if text.lower() == "latest":
        return partition, LATEST_TIMESTAMP
    number = java_parse_int(text)
    if number is None or number < 0:
        raise UsageError(
            f"The provided offset value '{text}' is incorrect. Valid values are 'earliest',"
            " 'latest', or a non-negative long."
        )
    return partition, number


def _group(opts: Options, partition: int | None) -> str | None:
    """The group id, given with ``--group``, ``group.id`` of ``--consumer-property`` or
    of ``--consumer.config``: every one given must be the same, and none with
    ``--partition`` (``ConsoleConsumer.ConsumerConfig``'s checks)."""
    config_file = opts.value("consumer.config")
    given = [
        opts.value("group"),
        properties(opts, "consumer-property").get("group.id"),
        load_properties(Path(config_file)).get("group.id") if config_file else None,
    ]
    ids = list(dict.fromkeys(g for g in given if g is not None))
    if len(ids) > 1:
        detected = "', '".join(ids)
        raise UsageError(
            "The group ids provided in different places (directly using '--group', via"
            " '--consumer-property', or via '--consumer.config') do not match. Detected group"
            f" ids: '{detected}'"
        )
    if ids and partition is not None:
        raise UsageError("Options group and partition cannot be specified together.")
    return ids[0] if ids else None


def _group_config(props: dict[str, str], reset: int) -> GroupConfig:
    """The consumer configs of a member, parsed as ``ConsumerConfig`` does."""
    auto_commit = props.get("enable.auto.commit", "true").strip().lower()
    if auto_commit not in ("true", "false"):
        raise ClientConfigError(
            f"Invalid value {props['enable.auto.commit']} for configuration enable.auto.commit:"
            " Expected value to be either true or false"
        )
    base = GroupConfig()
    return GroupConfig(
        session_timeout_ms=int_config(
            props, "session.timeout.ms", base.session_timeout_ms, minimum=0
        ),
        rebalance_timeout_ms=int_config(
            props, "max.poll.interval.ms", base.rebalance_timeout_ms, minimum=1
        ),
        heartbeat_interval_ms=int_config(
            props, "heartbeat.interval.ms", base.heartbeat_interval_ms, minimum=0
        ),
        auto_commit=auto_commit == "true",
        auto_commit_interval_ms=int_config(
            props, "auto.commit.interval.ms", base.auto_commit_interval_ms, minimum=0
        ),
        reset=reset,
        client_id=props["client.id"],
    )


async def _position(client: KafkaDataClient, topic: str, partition: int, timestamp: int) -> int:
    answer = await client.list_offset(topic, partition, timestamp)
    if answer.error_code is not ErrorCode.NONE:
        raise api_error(answer.error_code, None)
    return answer.offset


def _isolation_level(props: dict[str, str]) -> None:
    """``isolation.level`` is one of ConsumerConfig's two values (the consumer's
    ``ValidString``), or the consumer is never built. Both read the same here: kemu's
    brokers write no transactions, so every record is committed."""
    level = props.get("isolation.level", "read_uncommitted")
    if level not in ("read_committed", "read_uncommitted"):
        raise OptionError(
            f"Invalid value {level} for configuration isolation.level: String must be one"
            " of: read_committed, read_uncommitted"
        )


async def consume(argv: Sequence[str], *, stdout: BinaryIO, err: TextIO) -> int:
    opts = parse(argv, SPECS)
    if opts.has("help"):
        raise UsageError("")
    if not opts.has("topic"):
        raise UsageError("Exactly one of whitelist/topic is required.")
    topic = opts.value("topic") or ""
    partition, start = _start(opts)
    group = _group(opts, partition)
    max_messages = opts.int_value("max-messages")
    timeout_ms = opts.int_value("timeout-ms")
    formatter = _Formatter.from_properties(properties(opts, "property"))
    props = client_config(opts, "consumer-property", "consumer.config")
    reset = EARLIEST_TIMESTAMP if opts.has("from-beginning") else LATEST_TIMESTAMP
    reset_name = props.get(
        "auto.offset.reset", "earliest" if opts.has("from-beginning") else "latest"
    )
    if opts.has("from-beginning") and reset_name != "earliest":
        raise OptionError(
            f"Can't simultaneously specify --from-beginning and 'auto.offset.reset={reset_name}'"
            " to consumer"
        )
    if reset_name in ("earliest", "latest"):
        reset = EARLIEST_TIMESTAMP if reset_name == "earliest" else LATEST_TIMESTAMP
    if opts.has("isolation-level"):  # ConsoleConsumer: CommandLineUtils.maybeMergeOptions
        props["isolation.level"] = opts.value("isolation-level") or ""
    _isolation_level(props)
    props.setdefault("client.id", "console-consumer")
    config = _group_config(props, reset) if group is not None else None
    clock = RealClock()
    processed = 0
    try:
        async with (
            KafkaDataClient(
                tool_bootstrap(opts), admin_config(props, "default.api.timeout.ms"), clock=clock
            ) as client,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(_stop_on_signal, tg.cancel_scope)
            known = await client.partitions(topic)
            member = None
            if group is not None and config is not None:
                member = GroupConsumer(client, group, topic, config, clock)
            try:
                if member is not None:
                    await member.ensure_active()
                    positions = member.positions
                else:
                    wanted = sorted(known) if partition is None else [partition]
                    if partition is not None and partition not in known:
                        raise ToolError(f"Partition {partition} of topic {topic} does not exist")
                    positions = {
                        p: start if start >= 0 else await _position(client, topic, p, start)
                        for p in wanted
                    }
                beating = member.heartbeating() if member is not None else nullcontext()
                async with beating:
                    idle_since = clock.now()
                    while max_messages is None or processed < max_messages:
                        if member is not None:
                            await member.maintain()
                            positions = member.positions  # a new dict after a rebalance
                        if not positions:  # no partition assigned in this generation
                            await clock.sleep(POLL_WAIT_MS / 1000)
                            answers = {}
                        else:
                            answers = await client.fetch_positions(
                                topic, positions, max_wait_ms=POLL_WAIT_MS
                            )
                        before = processed
                        for p, answer in sorted(answers.items()):
                            if p not in positions:
                                continue
                            if answer.error_code is ErrorCode.OFFSET_OUT_OF_RANGE:
                                positions[p] = await _position(client, topic, p, reset)
                                continue
                            if answer.error_code is not ErrorCode.NONE:
                                continue  # retriable: the leader is learnt again next round
                            processed += _print(
                                answer.records,
                                p,
                                positions,
                                formatter,
                                stdout,
                                left=(None if max_messages is None else max_messages - processed),
                            )
                        stdout.flush()
                        idle_ms = (clock.now() - idle_since) * 1000
                        if processed > before:
                            idle_since = clock.now()
                        elif timeout_ms is not None and idle_ms >= timeout_ms:
                            break
            finally:
                if member is not None:
                    with anyio.CancelScope(shield=True):
                        await member.close()
            tg.cancel_scope.cancel()
    except RecordsError as exc:
        raise ToolError(f"Error processing message, terminating consumer process: {exc}") from exc
    finally:
        err.write(f"Processed a total of {processed} messages\n")
    return 0


def _print(
    records: bytes,
    partition: int,
    positions: dict[int, int],
    formatter: _Formatter,
    stdout: BinaryIO,
    *,
    left: int | None,
) -> int:
    """Write the records of one partition's fetched batches from its position, at most
    ``left`` of them, and move the position past what was written (past a batch's end
    only when all of it was); the number written."""
    written = 0
    for header in read_batches(records):
        kind = _TIMESTAMP_TYPES[header.timestamp_type]
        for record in batch_records(records, header):
            if record.offset < positions[partition]:
                continue  # a batch starts before the position
            if left is not None and written >= left:
                return written  # the rest is not consumed: not committed either
            stdout.write(formatter.format(partition, record, kind))
            written += 1
            positions[partition] = record.offset + 1
        positions[partition] = max(positions[partition], header.next_offset)
    return written


async def _stop_on_signal(scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            scope.cancel()
            return


def main(
    argv: Sequence[str],
    *,
    stdout: BinaryIO | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """``kemu console-consumer ARGS``: run it and return the exit status."""
    error = err or sys.stderr
    return run_tool(
        lambda: consume(argv, stdout=stdout or sys.stdout.buffer, err=error),
        usage=USAGE,
        err=error,
        out=out or sys.stdout,
    )
