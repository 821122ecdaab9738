"""``kemu console-producer`` against real brokers, as Kafka 2.7's ``ConsoleProducer`` and
its producer's ``Sender`` behave: ``--max-block-ms`` is a ``Long``; the Produce request
carries ``--request-timeout-ms`` as its timeout; a request lost once sent (no answer within
``request.timeout.ms``, or its connection dropped) is an attempt counted against
``retries``; a batch of several records refused with MESSAGE_TOO_LARGE is split by
``batch.size`` and its pieces sent, one record alone is refused, and a piece that cannot
get smaller is sent again until ``delivery.timeout.ms`` expires it.

In-process brokers with their Kafka listeners; the tool runs in a thread with its own
event loop, as from the command line; what it sent is read from the brokers' trace, what
was stored from the log files.
"""

from __future__ import annotations

import io
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from kafka import KafkaProducer  # type: ignore[import-untyped]

from actors.runtime.tracer import MemorySink, Tracer
from cluster.cli import console_producer
from cluster.kafka.client import AdminClientConfig, KafkaAdminClient, KafkaDataClient
from cluster.kafka.records import batch_records, read_batches
from cluster.launch.cluster import Cluster, ClusterSpec
from protocol.errors import ErrorCode, KafkaApiError
from protocol.ids import BrokerId, TopicName
from protocol.kafka_api import CreatableTopic, PartitionAssignment, TopicConfig
from protocol.trace import TraceEvent
from tests.support.hosting import hosted_fixture
from tests.support.record_batches import client_batch
from tests.support.tool_logs import LOGGED_ERROR

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120)]

HOST = "127.0.0.1"
LIMIT = 1024  # the split tests' topic max.message.bytes
TOO_LARGE = (
    "org.apache.kafka.common.errors.RecordTooLargeException: The request included a message"
    " larger than the max message size the server will accept."
)
NETWORK = (
    "org.apache.kafka.common.errors.NetworkException: "
    "The server disconnected before a response was received."
)


@hosted_fixture()
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    """Two brokers; a replica stays in the ISR for a minute without fetching, so a Produce
    with acks=all to a partition whose follower is gone waits for its timeout."""
    spec = ClusterSpec(
        brokers=2,
        base_port=0,
        log_dir=tmp_path / "logs",
        config={"replica.lag.time.max.ms": "60000"},
    )
    tracer = Tracer()
    tracer.add_sink(MemorySink())
    async with anyio.create_task_group() as tg:
        running: Cluster = await tg.start(Cluster(spec, tracer=tracer).run)
        yield running
        tg.cancel_scope.cancel()


def bootstrap(cluster: Cluster) -> str:
    return f"{HOST}:{cluster.ports[0]}"


async def create(
    cluster: Cluster, name: str, replicas: tuple[int, ...] = (0,), **configs: str
) -> None:
    """Topic ``name``: one partition on ``replicas`` (the first its leader)."""
    topic = CreatableTopic(
        name=TopicName(name),
        num_partitions=-1,
        replication_factor=-1,
        assignments=(
            PartitionAssignment(partition=0, broker_ids=tuple(BrokerId(b) for b in replicas)),
        ),
        configs=tuple(TopicConfig(name=k.replace("_", "."), value=v) for k, v in configs.items()),
    )
    async with KafkaAdminClient(bootstrap(cluster)) as admin:
        (created,) = await admin.create_topics([topic])
    assert created.error_code is ErrorCode.NONE


def traced(cluster: Cluster) -> MemorySink:
    sink = MemorySink()
    cluster.tracer.add_sink(sink)
    return sink


def produces(sink: MemorySink, client_id: str = "console-producer") -> list[TraceEvent]:
    """The Produce requests the brokers traced from ``client_id``."""
    return [
        e
        for e in sink.of("event", "kafka_request")
        if e.fields["api_key"] == 0 and e.fields["client_id"] == client_id
    ]


async def run_tool(cluster: Cluster, name: str, lines: bytes, *options: str) -> tuple[int, str]:
    """``kemu console-producer`` to topic ``name`` with ``lines`` on stdin: its exit
    status and what it wrote on stderr."""
    err = io.StringIO()
    argv = ["--bootstrap-server", bootstrap(cluster), "--topic", name, *options]
    status = await anyio.to_thread.run_sync(
        lambda: console_producer.main(argv, stdin=io.BytesIO(lines), err=err)
    )
    return status, err.getvalue()


def stored(cluster: Cluster, name: str) -> list[list[bytes | None]]:
    """The values of each batch in partition 0's log, on every replica that has it (the
    leader's first)."""
    out: list[list[bytes | None]] = []
    for segment in sorted(cluster.spec.log_dir.glob(f"*/{name}-0/*.log")):
        data = segment.read_bytes()
        out += [[r.value for r in batch_records(data, h)] for h in read_batches(data)]
    return out


# ------------------------------------------------------------------ --max-block-ms


async def test_max_block_ms_above_an_int_is_accepted(cluster: Cluster) -> None:
    """``--max-block-ms`` is a ``Long`` option (and ``max.block.ms`` a LONG config): a
    value above 2^31-1 is taken and the line is sent and stored."""
    await create(cluster, "long-block")
    status, err = await run_tool(cluster, "long-block", b"a\n", "--max-block-ms", "3000000000")
    assert (status, err) == (0, "")
    assert stored(cluster, "long-block") == [[b"a"]]
    status, err = await run_tool(
        cluster, "long-block", b"b\n", "--producer-property", "max.block.ms=9000000000"
    )
    assert (status, err) == (0, "")
    assert stored(cluster, "long-block") == [[b"a"], [b"b"]]


# ------------------------------------------------------------------ --request-timeout-ms


@pytest.mark.parametrize(
    ("options", "timeout_ms"),
    [
        ((), 1500),
        (("--request-timeout-ms", "2345"), 2345),
        (("--producer-property", "request.timeout.ms=3456"), 3456),
        (("--producer-property", "request.timeout.ms=3456", "--request-timeout-ms", "4567"), 4567),
    ],
    ids=["default", "option", "property", "option-over-property"],
)
async def test_the_produce_request_carries_the_request_timeout(
    cluster: Cluster, options: tuple[str, ...], timeout_ms: int
) -> None:
    """The Produce request's ``timeout_ms`` is the producer's ``request.timeout.ms``:
    ``--request-timeout-ms`` when given, else the property, else the tool's 1500."""
    name = f"timeout-{timeout_ms}"
    await create(cluster, name)
    sink = traced(cluster)
    assert await run_tool(cluster, name, b"a\n", *options) == (0, "")
    assert [e.fields["timeout_ms"] for e in produces(sink)] == [timeout_ms]


# ------------------------------------------------------------------ lost requests


async def follower_gone(cluster: Cluster, name: str) -> None:
    """Topic ``name`` led by broker 0 with broker 1 in its ISR, then broker 1 crashed: a
    Produce with acks=all waits for broker 1 until its timeout."""
    await create(cluster, name, replicas=(0, 1))
    await cluster.crash_broker(1)


KAFKA_PYTHON_UNANSWERED = """
import sys
from kafka import KafkaProducer
producer = KafkaProducer(
    bootstrap_servers=sys.argv[1], client_id="lost-kafka-python", acks="all", retries=2,
    request_timeout_ms=300, retry_backoff_ms=10, delivery_timeout_ms=60_000,
)
try:
    producer.send("unanswered", b"a", partition=0).get(timeout=30)
except Exception as exc:
    print(type(exc).__name__)
producer.close(timeout=5)
"""


async def test_a_request_unanswered_in_time_counts_as_a_retry(cluster: Cluster) -> None:
    """A Produce not answered within ``request.timeout.ms`` fails as a disconnected
    request does (NETWORK_EXCEPTION, ``Sender.handleProduceResponse``) and counts
    against ``retries``: with 2 retries the batch goes three times, then the error is
    raised; nothing is answered by the waiting leader meanwhile. kafka-python's producer
    with the same settings sends three times too."""
    await follower_gone(cluster, "unanswered")
    sink = traced(cluster)
    config = AdminClientConfig(client_id="lost", request_timeout_ms=300, retry_backoff_ms=10)
    async with KafkaDataClient(bootstrap(cluster), config) as client:
        with pytest.raises(KafkaApiError) as raised:
            await client.produce(
                "unanswered", 0, client_batch([b"a"]), acks=-1, timeout_ms=60_000, retries=2
            )
    assert raised.value.code is ErrorCode.NETWORK_EXCEPTION
    assert len(produces(sink, "lost")) == 3

    # In a process of its own: kafka-python leaks the socket of its refused connection to
    # the crashed broker (where it refreshes its metadata after a timeout).
    sent = await anyio.run_process(
        [sys.executable, "-c", KAFKA_PYTHON_UNANSWERED, bootstrap(cluster)], check=False
    )
    assert (sent.returncode, sent.stdout) == (0, b"RequestTimedOutError\n"), sent.stderr
    assert len(produces(sink, "lost-kafka-python")) == 3


async def test_the_tool_counts_unanswered_requests_as_retries(cluster: Cluster) -> None:
    """``kemu console-producer`` with acks=all and ``--request-timeout-ms`` 300 to a
    partition whose follower is gone: each Produce times out (the client's or the
    leader's timeout, whichever comes first, both retriable) and counts as one of
    ``--message-send-max-retries``; after the last the record is logged and the tool
    exits 0."""
    await follower_gone(cluster, "tool-unanswered")
    sink = traced(cluster)
    status, err = await run_tool(
        cluster,
        "tool-unanswered",
        b"a\n",
        *("--request-required-acks", "all", "--request-timeout-ms", "300"),
        *("--message-send-max-retries", "2", "--retry-backoff-ms", "10"),
    )
    assert status == 0
    logged = [m.group("exception") for m in LOGGED_ERROR.finditer(err)]
    timed_out = "org.apache.kafka.common.errors.TimeoutException: The request timed out."
    assert len(logged) == 1
    assert logged[0] in (NETWORK, timed_out)
    assert len(produces(sink)) == 3


async def test_a_connection_dropped_under_a_request_counts_as_a_retry(cluster: Cluster) -> None:
    """The leader stops while the tool's Produce waits in it: the dropped connection
    fails the request as ``NetworkException`` at once, an attempt like an answered one;
    with no retry left the record is logged (before any timeout) and the tool exits 0."""
    await follower_gone(cluster, "dropped")
    sink = traced(cluster)
    async with anyio.create_task_group() as tg:

        async def stop_leader_once_sent() -> None:
            await sink.wait_for(
                lambda e: (
                    e.type == "kafka_request"
                    and e.fields.get("api_key") == 0
                    and e.fields.get("client_id") == "dropped"
                ),
                timeout=30,
            )
            await cluster.crash_broker(0)

        tg.start_soon(stop_leader_once_sent)
        started = time.monotonic()
        status, err = await run_tool(
            cluster,
            "dropped",
            b"a\n",
            *("--request-required-acks", "all", "--request-timeout-ms", "60000"),
            *("--message-send-max-retries", "0", "--producer-property", "client.id=dropped"),
        )
        elapsed = time.monotonic() - started
    assert status == 0
    assert [m.group("exception") for m in LOGGED_ERROR.finditer(err)] == [NETWORK]
    assert len(produces(sink, "dropped")) == 1
    assert elapsed < 30  # the drop ended it, not the request's 60 s timeout


# ------------------------------------------------------------------ MESSAGE_TOO_LARGE


LINES = [b"%03d-" % i + b"x" * 95 for i in range(40)]  # 100 bytes each, 40 records


async def test_a_batch_too_large_is_split_by_batch_size(cluster: Cluster) -> None:
    """40 lines of 100 bytes go as one batch (about 4.5 KB) to a topic whose
    ``max.message.bytes`` is 1024: refused with MESSAGE_TOO_LARGE, the batch is split by
    ``batch.size`` (900 here: pieces of at most 7 records) and every piece is stored, in
    order, nothing logged; the pieces are new batches sent once each. kafka-python's
    producer, which splits in halves instead, ends with the same records stored."""
    await create(cluster, "split", max_message_bytes=str(LIMIT))
    sink = traced(cluster)
    status, err = await run_tool(
        cluster, "split", b"\n".join(LINES) + b"\n", "--producer-property", "batch.size=900"
    )
    assert (status, err) == (0, "")
    batches = stored(cluster, "split")
    assert [v for b in batches for v in b] == LINES
    assert all(len(b) <= 7 for b in batches)
    assert len(produces(sink)) == 1 + len(batches)

    await create(cluster, "split-kafka-python", max_message_bytes=str(LIMIT))

    def kafka_python() -> None:
        producer = KafkaProducer(bootstrap_servers=bootstrap(cluster), linger_ms=50)
        try:
            futures = [producer.send("split-kafka-python", line, partition=0) for line in LINES]
            for future in futures:  # not flush(): kafka-python's waits on the split batch
                future.get(timeout=30)
        finally:
            producer.close(timeout=10)

    await anyio.to_thread.run_sync(kafka_python)
    assert [v for b in stored(cluster, "split-kafka-python") for v in b] == LINES


async def test_one_record_too_large_is_refused_without_a_split(cluster: Cluster) -> None:
    """A batch of one record over ``max.message.bytes`` cannot be split: it is refused
    with ``RecordTooLargeException`` after one Produce (not a retriable error), logged,
    and the tool goes on to store the next line."""
    await create(cluster, "one-large", max_message_bytes=str(LIMIT))
    sink = traced(cluster)
    status, err = await run_tool(cluster, "one-large", b"y" * 2000 + b"\n")
    assert status == 0
    logged = [m.groupdict() for m in LOGGED_ERROR.finditer(err)]
    assert logged == [
        {"topic": "one-large", "key": "null", "value": "2000 bytes", "exception": TOO_LARGE}
    ]
    assert len(produces(sink)) == 1
    assert stored(cluster, "one-large") == []


async def test_a_batch_that_split_cannot_shrink_expires(cluster: Cluster) -> None:
    """With the default ``batch.size`` (16384) a 4.5 KB batch splits into itself: as
    Kafka's ``Sender`` does, it is sent again and again until ``delivery.timeout.ms``
    (here 1500 ms, allowed by ``linger.ms`` 0 + ``request.timeout.ms`` 200) expires it;
    each record is logged with the ``TimeoutException`` of an expired batch."""
    await create(cluster, "no-shrink", max_message_bytes=str(LIMIT))
    sink = traced(cluster)
    status, err = await run_tool(
        cluster,
        "no-shrink",
        b"\n".join(LINES) + b"\n",
        *("--request-timeout-ms", "200", "--producer-property", "linger.ms=0"),
        *("--producer-property", "delivery.timeout.ms=1500"),
    )
    assert status == 0
    logged = [m.group("exception") for m in LOGGED_ERROR.finditer(err)]
    assert len(logged) == len(LINES)
    expired = (
        "org.apache.kafka.common.errors.TimeoutException: Expiring 40 record(s) for no-shrink-0:"
    )
    assert all(
        e.startswith(expired) and e.endswith(" ms has passed since batch creation") for e in logged
    )
    waited = int(logged[0].removeprefix(expired).split(" ")[0])
    assert waited >= 1500
    assert len(produces(sink)) > 1
    assert stored(cluster, "no-shrink") == []
