"""``kemu console-producer``: Kafka 2.7's ``kafka-console-producer.sh``
(``kafka.tools.ConsoleProducer``).

Each line of stdin becomes one record (its bytes, without the line end) sent to
``--topic``; EOF ends the tool. With ``--property parse.key=true`` a line is
``key<key.separator>value`` (separator a tab unless given; a line without one is an
error, as ``LineMessageReader`` says "No key found on line N"). A keyed record goes to
``murmur2(key) % partitions`` (``DefaultPartitioner``); unkeyed records stick to one
partition per batch (``StickyPartitionCache``). The lines that have arrived when stdin is
read are sent as one batch per partition: a terminal's as they are typed, a pipe's in
chunks.

Producer settings as the tool's ``producerProps`` builds them: the ``--producer.config``
file, then ``--producer-property``, then each option Kafka merges
(``CommandLineUtils.maybeMergeOptions``) wins when given on the command line, else the
property given wins over the option's default: ``acks`` (``--request-required-acks``, 1;
0, 1, -1 or all), ``request.timeout.ms`` (``--request-timeout-ms``, 1500: each send's
wait and the Produce request's timeout), ``retries`` (``--message-send-max-retries``, 3),
``retry.backoff.ms`` (``--retry-backoff-ms``, 100) and ``max.block.ms``
(``--max-block-ms``, 60000, a ``Long``: how long to wait for the topic's metadata).
``compression.type`` is ``--compression-codec``'s (none or gzip; gzip without a value),
``none`` without it, whatever the properties say, as ``producerProps`` puts it. A send
answered with a retriable error (a ``RetriableException``: no leader, not enough
replicas, a corrupt message, ...), or lost once sent (its connection dropped, or no
answer within ``request.timeout.ms``: a ``NetworkException``, as ``Sender`` fails a
disconnected request), is sent again after ``retry.backoff.ms``, at most ``retries``
times, then refused; a batch not answered within ``delivery.timeout.ms`` (120000, at
least ``linger.ms`` + ``request.timeout.ms`` as ``KafkaProducer`` checks it) of its
first send expires with a ``TimeoutException``. A batch of more than one record refused
with MESSAGE_TOO_LARGE is split by ``batch.size`` (16384) and the pieces sent
(``RecordAccumulator.splitAndReenqueue``). A send the broker refuses is logged on stderr as Kafka's
``ErrorLoggingCallback`` logs it through the tools' log4j layout (``[%d] %p %m
(%c)``), one entry per record, the exception's class and message on the next line (the
broker's Produce v8 ``error_message``, else the error's default message; a 2.7 producer
reads no ``record_errors``); the tool goes on with the rest of the input and exits 0, as
``ConsoleProducer`` does without ``--sync``.
"""

from __future__ import annotations

import datetime
import random
import sys
from collections.abc import Sequence
from typing import Final, Protocol, TextIO, cast

import anyio

from actors.log.records import CompressionType
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
from cluster.cli.jopt import Option, OptionError, Options, parse
from cluster.kafka.client import (
    ClientConfigError,
    KafkaDataClient,
    int_config,
    long_config,
    produce_exception,
)
from cluster.kafka.records import ProducerRecord
from protocol.errors import ErrorCode

__all__ = ["main", "murmur2", "partition_for_key", "producer_props"]

SPECS: Final = (
    *CLUSTER_OPTIONS,
    Option("topic", "REQUIRED: the topic id to produce messages to.", "topic"),
    Option(
        "property",
        "A mechanism to pass user-defined properties in the form key=value to the message"
        " reader (parse.key, key.separator, ignore.error).",
        "prop",
    ),
    Option("producer-property", "Producer properties in the form key=value.", "producer_prop"),
    Option("producer.config", "Producer config properties file.", "config file"),
    Option(
        "request-required-acks", "The required acks of the producer requests (default 1).", "acks"
    ),
    Option(
        "request-timeout-ms",
        "The ack timeout of the producer requests (default 1500).",
        "request timeout ms",
    ),
    Option(
        "max-block-ms",
        "The max time that the producer will block for during a send request (default 60000).",
        "max block on send",
    ),
    Option(
        "compression-codec",
        "The compression codec: either 'none' or 'gzip' (gzip if given without a value).",
        "compression-codec",
        optional=True,
    ),
    Option("sync", "If set, message send requests are sent synchronously (always, in kemu)."),
    Option(
        "message-send-max-retries",
        "The number of retries of a send answered with a retriable error before the producer"
        " gives up and drops the message (default 3).",
        "Integer",
    ),
    Option(
        "retry-backoff-ms",
        "How long to wait before each retry, the leader looked up again (default 100).",
        "Integer",
    ),
)
_MERGED: Final = (
    ("request-required-acks", "acks", "1", "String"),
    ("request-timeout-ms", "request.timeout.ms", "1500", "Integer"),
    ("message-send-max-retries", "retries", "3", "Integer"),
    ("retry-backoff-ms", "retry.backoff.ms", "100", "Integer"),
    ("max-block-ms", "max.block.ms", "60000", "Long"),
)
"""``ConsoleProducer.producerProps``'s ``CommandLineUtils.maybeMergeOptions`` calls (those
of the options kemu honours: option, property, the option's default, the option's jopt
type): an option given on the command line wins over the property, else a property given
wins over the option's default."""
USAGE: Final = usage_text(
    "This tool helps to read data from standard input and publish it to Kafka.", SPECS
)
READ_BYTES: Final = 1 << 16  # the most one read of stdin takes


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (a signed 32-bit result, as Java's int)."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    tail = length & ~3
    rest = length % 4
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    """``DefaultPartitioner``: ``toPositive(murmur2(key)) % numPartitions``."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def _acks(props: dict[str, str]) -> int:
    text = props["acks"]
    acks = {"all": -1, "-1": -1, "0": 0, "1": 1}.get(text.strip())
    if acks is None:
        raise OptionError(
            f"Invalid value {text} for configuration acks: String must be one of: all, -1, 0, 1"
        )
    return acks


def _codec_option(opts: Options) -> str:
    """``ProducerConfig.compressionCodec``: the option's value, ``gzip`` if it is given
    without one, ``none`` if it is not given."""
    if not opts.has("compression-codec"):
        return "none"
    return opts.value("compression-codec") or "gzip"


def _compression(props: dict[str, str]) -> CompressionType:
    text = props["compression.type"]
    codec = {"none": CompressionType.NONE, "gzip": CompressionType.GZIP}.get(text.strip())
    if codec is None:
        raise OptionError(f"kemu's console producer compresses with none or gzip, not {text}")
    return codec


def producer_props(opts: Options) -> dict[str, str]:
    """``ConsoleProducer.producerProps``: the ``--producer.config`` file, then
    ``--producer-property``; the codec put whatever the properties say (a
    ``compression.type`` property is overridden by ``--compression-codec`` or ``none``);
    ``client.id`` ``console-producer`` unless given; then each option of ``_MERGED``
    merged as ``CommandLineUtils.maybeMergeOptions`` does."""
    props = client_config(opts, "producer-property", "producer.config")
    props["compression.type"] = _codec_option(opts)
    props.setdefault("client.id", "console-producer")
    for option, key, default, kind in _MERGED:
        if opts.has(option) or key not in props:
            given = _typed_value(opts, option, kind)
            props[key] = default if given is None else str(given)
    return props


def _typed_value(opts: Options, option: str, kind: str) -> int | str | None:
    """The option's value as its jopt type reads it (``ofType``): a number that does not
    parse is jopt's "Cannot parse argument" error."""
    match kind:
        case "Integer":
            return opts.int_value(option)
        case "Long":
            return opts.long_value(option)
        case _:
            return opts.value(option)


class _LineReader:
    """``LineMessageReader``: lines to records, keys parsed if asked."""

    def __init__(self, props: dict[str, str]) -> None:
        self.parse_key = props.get("parse.key", "false").strip().lower() == "true"
        self.separator = props.get("key.separator", "\t").encode()
        self.line_number = 0

    def record(self, line: bytes, timestamp_ms: int) -> ProducerRecord:
        self.line_number += 1
        line = line.removesuffix(b"\n").removesuffix(b"\r")
        if not self.parse_key:
            return ProducerRecord(value=line, timestamp_ms=timestamp_ms)
        key, separator, value = line.partition(self.separator)
        if not separator:
            raise ToolError(
                f"No key found on line {self.line_number}: {line.decode(errors='replace')}"
            )
        return ProducerRecord(key=key, value=value, timestamp_ms=timestamp_ms)


class Stdin(Protocol):
    """What the producer reads lines from (``sys.stdin.buffer``, or a test's ``BytesIO``)."""

    def read1(self, size: int = -1, /) -> bytes: ...


class _Lines:
    """Stdin cut into lines, as much as has arrived at each read: whatever a pipe or a
    terminal holds when asked (one raw read, ``read1``) is one chunk of lines, so typed
    lines go out as they come and piped ones in batches. A last line without its newline
    is a line too."""

    def __init__(self, stdin: Stdin) -> None:
        self._stdin = stdin
        self._partial = b""

    async def next_chunk(self) -> list[bytes]:
        """The complete lines that arrived next (newlines kept); empty at EOF."""
        while True:
            data = await anyio.to_thread.run_sync(self._stdin.read1, READ_BYTES)
            if not data:
                last, self._partial = self._partial, b""
                return [last] if last else []
            *lines, self._partial = (self._partial + data).split(b"\n")
            if lines:
                return [line + b"\n" for line in lines]


async def produce(argv: Sequence[str], *, stdin: Stdin, err: TextIO) -> int:
    opts = parse(argv, SPECS)
    if opts.has("help"):
        raise UsageError("")
    if not opts.has("topic"):
        raise UsageError('Missing required argument "[topic]"')
    topic = opts.value("topic") or ""
    reader = _LineReader(properties(opts, "property"))
    props = producer_props(opts)
    acks = _acks(props)
    compression = _compression(props)
    retries = int_config(props, "retries", 0, minimum=0)
    delivery_timeout_ms = _delivery_timeout_ms(props)
    batch_size = int_config(props, "batch.size", 16_384, minimum=0)
    clock = RealClock()
    rng = random.Random()
    async with KafkaDataClient(
        tool_bootstrap(opts), admin_config(props, "max.block.ms"), clock=clock
    ) as client:
        count = await _partition_count(client, topic)
        sticky = rng.randrange(count)
        chunks = _Lines(stdin)
        while lines := await chunks.next_chunk():
            by_partition: dict[int, list[ProducerRecord]] = {}
            for line in lines:
                record = reader.record(line, clock.wall_ms())
                partition = sticky if record.key is None else partition_for_key(record.key, count)
                by_partition.setdefault(partition, []).append(record)
            for partition, records in by_partition.items():
                results = await client.send(
                    topic,
                    partition,
                    records,
                    acks=acks,
                    compression=compression,
                    retries=retries,
                    delivery_timeout_ms=delivery_timeout_ms,
                    batch_size=batch_size,
                )
                for result in results:
                    if result.error_code is not ErrorCode.NONE:
                        exception = produce_exception(result.error_code, result.error_message)
                        _log_failed_sends(err, topic, result.records, exception)
            sticky = rng.randrange(count)  # StickyPartitionCache.nextPartition: a new batch
    return 0


def _delivery_timeout_ms(props: dict[str, str]) -> int:
    """``KafkaProducer.configureDeliveryTimeout``: ``delivery.timeout.ms`` (120000), at
    least ``linger.ms`` (the tool's ``--timeout`` default, 1000) plus
    ``request.timeout.ms``: a smaller value given is refused, the default raised to it."""
    linger_ms = long_config(props, "linger.ms", 1000, minimum=0)
    request_timeout_ms = int_config(props, "request.timeout.ms", 30_000, minimum=0)
    floor = min(linger_ms + request_timeout_ms, 2**31 - 1)
    delivery_timeout_ms = int_config(props, "delivery.timeout.ms", 120_000, minimum=0)
    if delivery_timeout_ms >= floor:
        return delivery_timeout_ms
    if "delivery.timeout.ms" in props:
        raise ClientConfigError(
            "delivery.timeout.ms should be equal to or larger than linger.ms + request.timeout.ms"
        )
    return floor


def _log_failed_sends(
    err: TextIO, topic: str, records: Sequence[ProducerRecord], exception: str
) -> None:
    """``ErrorLoggingCallback.onCompletion`` for each record of a failed batch (key and
    value as sizes: the console producer does not log them as strings), as log4j's
    ``ConsoleAppender`` prints an ERROR with its exception (an ``ApiException`` has no
    stack trace)."""
    for record in records:
        key = "null" if record.key is None else f"{len(record.key)} bytes"
        value = "null" if record.value is None else f"{len(record.value)} bytes"
        now = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
        err.write(
            f"[{now}] ERROR Error when sending message to topic {topic} with key: {key}, "
            f"value: {value} with error: "
            "(org.apache.kafka.clients.producer.internals.ErrorLoggingCallback)\n"
            f"{exception}\n"
        )


async def _partition_count(client: KafkaDataClient, topic: str) -> int:
    """The topic's partition count, once Metadata has one (auto-creating the topic where
    the brokers allow it, as a producer's Metadata request does)."""
    partitions = await client.partitions(topic, auto_create=True)
    return len(partitions)


def main(
    argv: Sequence[str],
    *,
    stdin: Stdin | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """``kemu console-producer ARGS``: run it and return the exit status."""
    error = err or sys.stderr
    return run_tool(
        lambda: produce(argv, stdin=stdin or cast(Stdin, sys.stdin.buffer), err=error),
        usage=USAGE,
        err=error,
        out=out or sys.stdout,
    )
