"""Real Kafka clients produce and consume through kemu's brokers, unmodified: kcat
(``-P``, ``-C -e``), confluent-kafka's Producer (acks=all, idempotence, gzip/snappy/lz4)
and Consumer (assign), kafka-python and aiokafka, and kemu's own console tools as
processes (console-producer, console-consumer, get-offsets, dump-log). Against ``kemu up``
(every broker in one process) and ``kemu up --processes`` (one process per broker).

Topics have three partitions on all three brokers (replication factor 3), so acks=all
waits for the followers' fetches. Every record comes back with its key, value and
headers, in order within its partition, at consecutive offsets from 0; batches are stored
as the client compressed them. One cluster serves the module per launch mode; each test
makes topics of its own.
"""

from __future__ import annotations

import asyncio
import os
import re
import selectors
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # type: ignore[import-untyped]
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer  # type: ignore[import-untyped]
from kafka import TopicPartition as KpTopicPartition

from actors.log.records import CompressionType
from cluster.kafka.records import read_batches
from tests.support.kemu_commands import REPO, KemuUp, kemu

pytestmark = [
    pytest.mark.processes,
    pytest.mark.slow,
    pytest.mark.timeout(180),
]  # kemu up (and broker processes) as children, real clients

PARTITIONS = 3
REPLICATION = 3
COUNT = 30
CLIENT_WAIT = 30.0  # seconds any one client may take to produce or consume everything

Row = tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]
"""partition, offset, key, value, headers."""


@pytest.fixture(scope="module", params=["in-process", "processes"])
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KemuUp]:
    """A three-broker ``kemu up``, its brokers in its own process or one process each."""
    extra = ("--processes",) if request.param == "processes" else ()
    up = KemuUp(tmp_path_factory.mktemp(request.param), *extra)
    try:
        up.start()
        yield up
    finally:
        up.kill()


def new_topic(cluster: KemuUp, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    created = kemu(
        "topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", name,
        "--partitions", str(PARTITIONS), "--replication-factor", str(REPLICATION),
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    return name


def sent(prefix: str) -> list[tuple[bytes, bytes, tuple[tuple[str, bytes], ...]]]:
    """The records each test sends: keyed, with two headers each."""
    return [
        (
            f"{prefix}-k{i}".encode(),
            f"{prefix}-v{i}".encode(),
            (("n", b"%d" % i), ("src", prefix.encode())),
        )
        for i in range(COUNT)
    ]


def check_received(
    rows: list[Row], records: list[tuple[bytes, bytes, tuple[tuple[str, bytes], ...]]]
) -> None:
    """Everything sent came back once, each partition at offsets 0, 1, ... in send order,
    every key in one partition."""
    assert sorted((k, v, h) for _, _, k, v, h in rows) == sorted(records)
    order = {key: i for i, (key, _, _) in enumerate(records)}
    for partition in range(PARTITIONS):
        mine = sorted((o, k) for p, o, k, _, _ in rows if p == partition)
        assert [o for o, _ in mine] == list(range(len(mine)))
        assert [order[k] for _, k in mine if k is not None] == sorted(
            order[k] for _, k in mine if k is not None
        )
    partition_of = {k: p for p, _, k, _, _ in rows}
    assert len(partition_of) == len(records)


def stored_codecs(cluster: KemuUp, topic: str) -> set[int]:
    """The compression codec of every batch the brokers' segments hold for ``topic``."""
    codecs = set()
    for segment in cluster.cluster_file.parent.glob(f"logs/broker-*/{topic}-*/*.log"):
        data = segment.read_bytes()
        codecs |= {batch.compression for batch in read_batches(data)}
    return codecs


# ---------------------------------------------------------------------- kcat


def test_kcat_produces_and_consumes_keys_and_headers(cluster: KemuUp) -> None:
    """``kcat -P -K: -H`` sends keyed records with headers; ``kcat -C -e`` reads every one
    back and stops at the end of each partition."""
    topic = new_topic(cluster, "kcat")
    lines = "".join(f"k{i}:v{i}\n" for i in range(COUNT))
    produced = subprocess.run(
        ["kcat", "-b", cluster.bootstrap, "-P", "-t", topic, "-K:", "-H", "a=1", "-H", "b=2"],
        input=lines, capture_output=True, text=True, timeout=CLIENT_WAIT, check=False,
    )  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        ["kcat", "-b", cluster.bootstrap, "-C", "-t", topic, "-e", "-f", "%p|%o|%k|%s|%h\n"],
        capture_output=True, text=True, timeout=CLIENT_WAIT, check=False,
    )  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    rows = [line.split("|") for line in consumed.stdout.splitlines()]
    assert sorted((k, v, h) for _, _, k, v, h in rows) == sorted(
        (f"k{i}", f"v{i}", "a=1,b=2") for i in range(COUNT)
    )
    for partition in range(PARTITIONS):
        offsets = [int(o) for p, o, _, _, _ in rows if int(p) == partition]
        assert offsets == list(range(len(offsets)))


def test_kcat_produces_without_acks(cluster: KemuUp) -> None:
    """``kcat -P -X acks=0`` gets no answers and needs none: every record arrives, and a
    consumer (``-c``: until it has them all) reads them back."""
    topic = new_topic(cluster, "acks0")
    lines = "".join(f"v{i}\n" for i in range(COUNT))
    produced = subprocess.run(
        ["kcat", "-b", cluster.bootstrap, "-P", "-t", topic, "-X", "acks=0"],
        input=lines, capture_output=True, text=True, timeout=CLIENT_WAIT, check=False,
    )  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        ["kcat", "-b", cluster.bootstrap, "-C", "-t", topic, "-c", str(COUNT), "-f", "%s\n"],
        capture_output=True, text=True, timeout=CLIENT_WAIT, check=False,
    )  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(consumed.stdout.splitlines()) == sorted(f"v{i}" for i in range(COUNT))


# ---------------------------------------------------------------------- confluent-kafka


def row_of(message: Any) -> Row:
    """A confluent-kafka message as a row (its accessors are typed loosely)."""
    headers: Any = message.headers() or ()
    return (message.partition(), message.offset(), message.key(), message.value(), tuple(headers))


@pytest.mark.parametrize("compression", ["gzip", "snappy", "lz4", "zstd"])
def test_confluent_kafka_idempotent_producer_and_assigned_consumer(
    cluster: KemuUp, compression: str
) -> None:
    """confluent-kafka's idempotent Producer with acks=all delivers every record without an
    error; its batches are stored with the codec it chose (lz4 needs the broker to have
    FindCoordinator: librdkafka's feature map enables its LZ4 feature on that API, a
    0.8.2 broker's mark); a Consumer with ``assign`` from the beginning reads them all
    back, and so does kemu's console-consumer, which decompresses librdkafka's gzip,
    snappy, lz4 and zstd itself; dump-log --print-data-log prints every stored record's
    value with the codec's name."""
    topic = new_topic(cluster, f"ck-{compression}")
    records = sent(compression)
    failures: list[Any] = []
    producer = Producer({
        "bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
        "compression.type": compression, "message.timeout.ms": int(CLIENT_WAIT * 1000),
        "linger.ms": 5,
    })  # fmt: skip
    for key, value, headers in records:
        producer.produce(
            topic, key=key, value=value, headers=list(headers),
            on_delivery=lambda error, _message: failures.append(error) if error else None,
        )  # fmt: skip
    assert producer.flush(CLIENT_WAIT) == 0
    assert failures == []
    assert stored_codecs(cluster, topic) == {int(CompressionType[compression.upper()])}
    consumer = Consumer({
        "bootstrap.servers": cluster.bootstrap, "group.id": f"g-{topic}",
        "enable.auto.commit": False,
    })  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        rows: list[Row] = []
        deadline = time.monotonic() + CLIENT_WAIT
        while len(rows) < COUNT and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue  # errors here are the group coordinator's, which kemu lacks
            rows.append(row_of(message))
    finally:
        consumer.close()
    check_received(rows, records)
    printed = tool(
        "console-consumer", "--bootstrap-server", cluster.bootstrap, "--topic", topic,
        "--from-beginning", "--max-messages", str(COUNT), "--property", "print.key=true",
    )  # fmt: skip
    assert printed.returncode == 0, printed.stderr
    assert sorted(printed.stdout.splitlines()) == sorted(
        f"{k.decode()}\t{v.decode()}" for k, v, _ in records
    )
    leaders = sorted(cluster.cluster_file.parent.glob(f"logs/broker-*/{topic}-*/*.log"))
    payloads: set[str] = set()
    for segment in leaders:
        dumped = tool("dump-log", "--files", str(segment), "--print-data-log")
        assert dumped.returncode == 0, dumped.stderr
        assert f"compresscodec: {compression.upper()}" in dumped.stdout
        payloads |= set(re.findall(r" payload: (\S+)$", dumped.stdout, re.MULTILINE))
    assert payloads == {v.decode() for _, v, _ in records}


# ---------------------------------------------------------------------- kafka-python


def test_kafka_python_producer_and_consumer(cluster: KemuUp) -> None:
    """kafka-python's KafkaProducer (acks=all, gzip) gets an offset for every record; its
    KafkaConsumer, assigned every partition from the beginning, reads them all back."""
    topic = new_topic(cluster, "kp")
    records = sent("kp")
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap, acks="all", compression_type="gzip",
        request_timeout_ms=int(CLIENT_WAIT * 1000),
    )  # fmt: skip
    try:
        futures = [producer.send(topic, key=k, value=v, headers=list(h)) for k, v, h in records]
        metadata = [f.get(timeout=CLIENT_WAIT) for f in futures]
    finally:
        producer.close()
    assert all(m.offset >= 0 for m in metadata)
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap, enable_auto_commit=False, group_id=None,
        consumer_timeout_ms=5000,
    )  # fmt: skip
    try:
        consumer.assign([KpTopicPartition(topic, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        rows: list[Row] = []
        deadline = time.monotonic() + CLIENT_WAIT
        while len(rows) < COUNT and time.monotonic() < deadline:
            for message in consumer:
                rows.append(
                    (
                        message.partition,
                        message.offset,
                        message.key,
                        message.value,
                        tuple(message.headers),
                    )
                )
    finally:
        consumer.close()
    check_received(rows, records)


# ---------------------------------------------------------------------- aiokafka


async def aiokafka_session(bootstrap: str, topic: str, records: list[Any]) -> list[Row]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    try:
        for key, value, headers in records:
            await producer.send_and_wait(topic, key=key, value=value, headers=list(headers))
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    rows: list[Row] = []
    try:
        consumer.assign([KpTopicPartition(topic, p) for p in range(PARTITIONS)])
        await consumer.seek_to_beginning()
        while len(rows) < len(records):
            batches = await consumer.getmany(timeout_ms=500)
            for messages in batches.values():
                rows += [
                    (m.partition, m.offset, m.key, m.value, tuple(m.headers)) for m in messages
                ]
    finally:
        await consumer.stop()
    return rows


def test_aiokafka_idempotent_producer_and_consumer(cluster: KemuUp) -> None:
    """aiokafka's idempotent producer (acks=all) sends every record; its consumer, assigned
    every partition from the beginning, reads them all back."""
    topic = new_topic(cluster, "aio")
    records = sent("aio")
    rows = asyncio.run(
        asyncio.wait_for(aiokafka_session(cluster.bootstrap, topic, records), CLIENT_WAIT)
    )
    check_received(rows, records)


# ---------------------------------------------------------------------- kemu's console tools


def tool(*argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cluster.cli", *argv], input=stdin, cwd=REPO,
        capture_output=True, text=True, timeout=CLIENT_WAIT * 2, check=False,
    )  # fmt: skip


def test_console_tools_produce_consume_list_offsets_and_dump_the_log(cluster: KemuUp) -> None:
    """console-producer sends keyed lines (partitioned by murmur2, as Kafka's producer
    would); console-consumer prints them back with their partitions, offsets and keys;
    get-offsets gives each partition's end and start; every replica's segment holds the
    same bytes, and dump-log prints its batch and records as kafka-dump-log.sh does."""
    topic = new_topic(cluster, "console")
    server = ["--bootstrap-server", cluster.bootstrap]
    lines = "".join(f"key{i}:value{i}\n" for i in range(COUNT))
    produced = tool(
        "console-producer", *server, "--topic", topic, "--property", "parse.key=true",
        "--property", "key.separator=:", "--producer-property", "acks=all", stdin=lines,
    )  # fmt: skip
    assert (produced.returncode, produced.stderr) == (0, "")
    consumed = tool(
        "console-consumer", *server, "--topic", topic, "--from-beginning",
        "--max-messages", str(COUNT), "--property", "print.key=true",
        "--property", "print.partition=true", "--property", "print.offset=true",
    )  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stderr == f"Processed a total of {COUNT} messages\n"
    printed = [line.split("\t") for line in consumed.stdout.splitlines()]
    assert sorted((k, v) for _, _, k, v in printed) == sorted(
        (f"key{i}", f"value{i}") for i in range(COUNT)
    )
    rows = sorted(
        (int(p.removeprefix("Partition:")), int(o.removeprefix("Offset:")), k, v)
        for p, o, k, v in printed
    )
    counts = {p: sum(1 for row in rows if row[0] == p) for p in range(PARTITIONS)}
    for partition in range(PARTITIONS):  # in send order, at offsets 0, 1, ...
        mine = [(o, int(k.removeprefix("key"))) for p, o, k, _ in rows if p == partition]
        assert [o for o, _ in mine] == list(range(counts[partition]))
        assert [i for _, i in mine] == sorted(i for _, i in mine)
    ends = tool("get-offsets", *server, "--topic", topic)
    assert (ends.returncode, ends.stdout) == (
        0, "".join(f"{topic}:{p}:{counts[p]}\n" for p in range(PARTITIONS)),
    )  # fmt: skip
    starts = tool("get-offsets", *server, "--topic", topic, "--time", "-2")
    assert starts.stdout == "".join(f"{topic}:{p}:0\n" for p in range(PARTITIONS))
    busiest = max(counts, key=lambda p: counts[p])
    segments = sorted(cluster.cluster_file.parent.glob(f"logs/broker-*/{topic}-{busiest}/*.log"))
    assert len(segments) == REPLICATION  # acks=all: every replica has the batch, as sent
    assert len({s.read_bytes() for s in segments}) == 1
    segment = segments[0]
    dumped = tool("dump-log", "--files", str(segment), "--print-data-log")
    assert dumped.returncode == 0, dumped.stderr
    out = dumped.stdout.splitlines()
    assert out[:2] == [f"Dumping {segment}", "Starting offset: 0"]
    batch = re.fullmatch(
        rf"baseOffset: 0 lastOffset: {counts[busiest] - 1} count: {counts[busiest]}"
        r" baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1"
        r" partitionLeaderEpoch: 0 isTransactional: false isControl: false position: 0"
        r" CreateTime: \d+ size: (\d+) magic: 2 compresscodec: NONE crc: \d+ isvalid: true",
        out[2],
    )
    assert batch is not None, out[2]
    assert int(batch[1]) == segment.stat().st_size  # one batch: the whole segment
    expected = [(o, k, v) for p, o, k, v in rows if p == busiest]
    assert len(out) == 3 + len(expected)
    for line, (offset, key, value) in zip(out[3:], expected, strict=True):
        assert re.fullmatch(
            rf"\| offset: {offset} CreateTime: \d+ keysize: {len(key)} valuesize: {len(value)}"
            rf" sequence: -1 headerKeys: \[\] key: {key} payload: {value}",
            line,
        ), line


def test_console_consumer_follows_the_end_until_interrupted(cluster: KemuUp) -> None:
    """Without --from-beginning the console consumer starts at the end and prints what is
    produced after it started; SIGINT ends it with exit 0 and the count on stderr."""
    topic = new_topic(cluster, "follow")
    server = ["--bootstrap-server", cluster.bootstrap]
    tool("console-producer", *server, "--topic", topic, stdin="before\n")
    consumer = subprocess.Popen(
        [sys.executable, "-m", "cluster.cli", "console-consumer", *server, "--topic", topic],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert consumer.stdout is not None
        os.set_blocking(consumer.stdout.fileno(), False)
        seen = b""
        deadline = time.monotonic() + CLIENT_WAIT
        while b"\n" not in seen:  # until the consumer is at the end, each try may land before it
            assert time.monotonic() < deadline, "the console consumer printed nothing"
            tool("console-producer", *server, "--topic", topic, stdin="after\n")
            with selectors.DefaultSelector() as selector:
                selector.register(consumer.stdout, selectors.EVENT_READ)
                if selector.select(1.0):
                    seen += consumer.stdout.read() or b""
        consumer.send_signal(signal.SIGINT)
        rest, err = consumer.communicate(timeout=CLIENT_WAIT)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    lines = (seen + rest).decode().splitlines()
    assert lines
    assert set(lines) == {"after"}
    assert consumer.returncode == 0
    assert err.decode() == f"Processed a total of {len(lines)} messages\n"
