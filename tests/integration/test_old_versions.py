"""Clients of Kafka's oldest data-plane versions against ``kemu up``: kafka-python forced
to a 0.8.2 / 0.9 / 0.10 broker (``api_version``) produces message formats v0/v1 with
Produce v0-v2, consumes them with Fetch v0-v3 and asks ListOffsets v0, and so does kcat
without ApiVersions; a modern client (confluent-kafka) reads back what the old one wrote,
up-converted to v2 batches (``kemu dump-log`` shows them), and the old ones read what the
modern one wrote, down-converted.

One three-broker cluster (every broker in one process) serves the module; each test makes
topics of its own (one partition, three replicas).
"""

from __future__ import annotations

import re
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer  # type: ignore[import-untyped]
from kafka import TopicPartition as KpTopicPartition

from cluster.kafka.apis import decode_response, encode_request
from cluster.kafka.message_sets import write_message
from protocol.errors import ErrorCode
from protocol.ids import TopicName
from protocol.kafka_data import (
    FetchPartition,
    FetchPartitionData,
    FetchRequestData,
    FetchResponseData,
    FetchTopic,
    ProducePartitionData,
    ProducePartitionResponse,
    ProduceRequestData,
    ProduceResponseData,
    ProduceTopicData,
)
from tests.support.kemu_commands import KemuUp, kemu

pytestmark = [pytest.mark.processes, pytest.mark.slow, pytest.mark.timeout(180)]

CLIENT_WAIT = 30.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KemuUp]:
    up = KemuUp(tmp_path_factory.mktemp("old"))
    try:
        up.start()
        yield up
    finally:
        up.kill()


def new_topic(cluster: KemuUp, prefix: str, *config: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    settings = [arg for c in config for arg in ("--config", c)]
    created = kemu(
        "topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", name,
        "--partitions", "1", "--replication-factor", "3", *settings,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    return name


def produce_modern(cluster: KemuUp, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    """confluent-kafka (Produce v7+, magic-v2 batches), acks=all."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    failures: list[object] = []
    for key, value in records:
        producer.produce(topic, key=key, value=value, on_delivery=lambda e, _m: failures.append(e))
    assert producer.flush(CLIENT_WAIT) == 0
    assert failures == [None] * len(records)


def old_consumer(cluster: KemuUp, api_version: tuple[int, ...]) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=cluster.bootstrap, api_version=api_version, group_id=None,
        enable_auto_commit=False, consumer_timeout_ms=3000,
        request_timeout_ms=int(CLIENT_WAIT * 1000),
    )  # fmt: skip


def test_list_offsets_v0_answers_the_earliest_and_latest_offsets(cluster: KemuUp) -> None:
    """kafka-python as a 0.9 client (ListOffsets v0, ``max_num_offsets`` 1) reads the log
    start and the high watermark of records a modern producer wrote."""
    topic = new_topic(cluster, "lo0")
    produce_modern(cluster, topic, [(b"k%d" % i, b"v%d" % i) for i in range(7)])
    consumer = old_consumer(cluster, (0, 9))
    try:
        tp = KpTopicPartition(topic, 0)
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 7}
    finally:
        consumer.close()


Row = tuple[int, bytes | None, bytes | None, int]
"""offset, key, value, timestamp."""


def consume_modern(cluster: KemuUp, topic: str, count: int) -> list[Row]:
    """confluent-kafka's Consumer, assigned the partition from the beginning."""
    consumer = Consumer({
        "bootstrap.servers": cluster.bootstrap, "group.id": f"g-{topic}",
        "enable.auto.commit": False,
    })  # fmt: skip
    rows: list[Row] = []
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + CLIENT_WAIT
        while len(rows) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            offset = message.offset()
            assert offset is not None
            rows.append((offset, message.key(), message.value(), message.timestamp()[1]))
    finally:
        consumer.close()
    return rows


def dump_log(cluster: KemuUp, topic: str) -> list[str]:
    """``kemu dump-log --print-data-log`` of the leader's first segment (every replica
    holds the same bytes under acks=all)."""
    segment = sorted(cluster.cluster_file.parent.glob(f"logs/broker-*/{topic}-0/*.log"))[0]
    dumped = kemu("dump-log", "--files", str(segment), "--print-data-log")
    assert dumped.returncode == 0, dumped.stderr
    return dumped.stdout.splitlines()


@pytest.mark.parametrize(("api_version", "magic"), [((0, 8, 2), 0), ((0, 9), 0), ((0, 10, 1), 1)])
@pytest.mark.parametrize("compression", [None, "gzip"])
def test_old_producers_write_what_a_modern_consumer_reads(
    cluster: KemuUp, api_version: tuple[int, ...], magic: int, compression: str | None
) -> None:
    """kafka-python as a 0.8.2 (Produce v0), 0.9 (v1) or 0.10.1 (v2) producer sends keyed
    messages of format v0 or v1, plain or gzip; the broker stores them as v2 batches
    (``kemu dump-log``: magic 2, the codec kept) at offsets 0..n-1, and confluent-kafka
    reads every key and value back, with the v1 timestamps (v0 has none)."""
    topic = new_topic(cluster, "p" + "".join(map(str, api_version)))
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap, api_version=api_version, acks="all",
        compression_type=compression, linger_ms=20, request_timeout_ms=int(CLIENT_WAIT * 1000),
    )  # fmt: skip
    sent = [(b"k%d" % i, b"value-%d" % i, 1_700_000_000_000 + i) for i in range(12)]
    try:
        futures = [
            producer.send(topic, key=k, value=v, partition=0, timestamp_ms=t) for k, v, t in sent
        ]
        offsets = [f.get(timeout=CLIENT_WAIT).offset for f in futures]
    finally:
        producer.close()
    assert sorted(offsets) == list(range(len(sent)))
    rows = consume_modern(cluster, topic, len(sent))
    assert [(o, k, v) for o, k, v, _ in rows] == [(i, k, v) for i, (k, v, _) in enumerate(sent)]
    if magic == 1:
        assert [t for _, _, _, t in rows] == [t for _, _, t in sent]
    dumped = dump_log(cluster, topic)
    batches = [line for line in dumped if line.startswith("baseOffset:")]
    assert batches
    codec = (compression or "none").upper()
    assert all(" magic: 2 " in b and f"compresscodec: {codec} " in b for b in batches)
    payloads = re.findall(r" payload: (\S+)$", "\n".join(dumped), re.MULTILINE)
    assert payloads == [v.decode() for _, v, _ in sent]


def produce_raw(
    cluster: KemuUp, topic: str, records: bytes, version: int
) -> ProducePartitionResponse:
    """One Produce of ``version`` (acks=1) with ``records`` for partition 0 to its leader,
    over a socket of its own; the partition's answer."""
    request = ProduceRequestData(
        acks=1,
        timeout_ms=10_000,
        topic_data=(
            ProduceTopicData(
                name=TopicName(topic),
                partition_data=(ProducePartitionData(index=0, records=records),),
            ),
        ),
    )
    data = ask_leader(cluster, topic, request, version)
    assert isinstance(data, ProduceResponseData)
    return data.responses[0].partition_responses[0]


def ask_leader(
    cluster: KemuUp, topic: str, request: ProduceRequestData | FetchRequestData, version: int
) -> object:
    """``request`` sent as ``version`` to partition 0's leader over a socket of its own;
    its answer in plain values."""
    key = 0 if isinstance(request, ProduceRequestData) else 1
    frame = encode_request(request, api_version=version, correlation_id=7, client_id="raw")
    with socket.create_connection(leader_address(cluster, topic), timeout=CLIENT_WAIT) as sock:
        sock.sendall(frame)
        size = int.from_bytes(_read_exactly(sock, 4), "big")
        answer = _read_exactly(sock, size)
    return decode_response(key, version, answer)[1]


def leader_address(cluster: KemuUp, topic: str) -> tuple[str, int]:
    """Where partition 0's leader listens, from confluent-kafka's metadata."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    metadata = producer.list_topics(topic, timeout=CLIENT_WAIT)
    leader = metadata.topics[topic].partitions[0].leader
    broker = metadata.brokers[leader]
    return broker.host, broker.port


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "the broker closed the connection"
        data += chunk
    return data


def test_a_corrupt_legacy_message_is_refused_and_nothing_is_written(cluster: KemuUp) -> None:
    """A message whose CRC32 does not match is CORRUPT_MESSAGE in every old version, and
    the log stays as it was: a good message after it lands at offset 0 (a partial one
    before it is no message at all, answered without an offset)."""
    topic = new_topic(cluster, "crc")
    good = bytearray()
    write_message(good, 0, 1, key=b"k", value=b"good", timestamp=1_700_000_000_000)
    bad = bytearray(good)
    bad[-1] ^= 0xFF
    for version in (0, 1, 2):
        answer = produce_raw(cluster, topic, bytes(bad), version)
        assert answer.error_code is ErrorCode.CORRUPT_MESSAGE
    # no whole message (Log.append: nothing to append): no error, no offset
    nothing = produce_raw(cluster, topic, bytes(good[:-1]), 1)
    assert (nothing.error_code, nothing.base_offset) == (ErrorCode.NONE, -1)
    written = produce_raw(cluster, topic, bytes(good), 2)
    assert (written.error_code, written.base_offset) == (ErrorCode.NONE, 0)
    rows = consume_modern(cluster, topic, 1)
    assert [(o, k, v) for o, k, v, _ in rows] == [(0, b"k", b"good")]
    consumer = old_consumer(cluster, (0, 9))
    try:
        tp = KpTopicPartition(topic, 0)
        assert consumer.end_offsets([tp]) == {tp: 1}
    finally:
        consumer.close()


@pytest.mark.parametrize("fallback", ["0.9.0", "0.10.0"])
@pytest.mark.parametrize("codec", ["none", "snappy", "lz4"])
def test_kcat_as_an_old_producer(cluster: KemuUp, fallback: str, codec: str) -> None:
    """kcat (librdkafka) without ApiVersions, as a client of a 0.9.0 broker (Produce v1,
    message format v0) or 0.10.0 (Produce v2, format v1), compressing with its own snappy
    or lz4: a modern consumer reads every keyed record back, stored in that codec."""
    topic = new_topic(cluster, f"kcat-{codec}")
    # values that compress well: librdkafka sends a batch its codec does not shrink plain
    lines = "".join(f"k{i}:v{i}{'.' * 200}\n" for i in range(20))
    produced = subprocess.run(
        ["kcat", "-b", cluster.bootstrap, "-P", "-t", topic, "-p", "0", "-K:", "-z", codec,
         "-X", "api.version.request=false", "-X", f"broker.version.fallback={fallback}"],
        input=lines, capture_output=True, text=True, timeout=CLIENT_WAIT, check=False,
    )  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    rows = consume_modern(cluster, topic, 20)
    expected = [(i, b"k%d" % i, b"v%d" % i + b"." * 200) for i in range(20)]
    assert [(o, k, v) for o, k, v, _ in rows] == expected
    batches = [line for line in dump_log(cluster, topic) if line.startswith("baseOffset:")]
    assert all(f"compresscodec: {codec.upper()} " in b and " magic: 2 " in b for b in batches)


# ---------------------------------------------------------------------- Fetch v0-v3

MODERN = [(b"k%d" % i, b"value-%d" % i, 1_700_000_000_000 + 7 * i) for i in range(25)]


def produce_modern_with_headers(cluster: KemuUp, topic: str, compression: str) -> None:
    """confluent-kafka: keyed records with a header each, CreateTime timestamps."""
    producer = Producer({
        "bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 20,
        "compression.type": compression,
    })  # fmt: skip
    failures: list[object] = []
    for key, value, timestamp in MODERN:
        producer.produce(
            topic, key=key, value=value, partition=0, timestamp=timestamp,
            headers=[("h", b"dropped")], on_delivery=lambda e, _m: failures.append(e),
        )  # fmt: skip
    assert producer.flush(CLIENT_WAIT) == 0
    assert failures == [None] * len(MODERN)


def consume_old(
    cluster: KemuUp, topic: str, api_version: tuple[int, ...], **config: int
) -> list[tuple[int, bytes | None, bytes | None, int, list[object]]]:
    """kafka-python as an old consumer, assigned partition 0 from the beginning."""
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap, api_version=api_version, group_id=None,
        enable_auto_commit=False, consumer_timeout_ms=3000, **config,
    )  # fmt: skip
    rows: list[tuple[int, bytes | None, bytes | None, int, list[object]]] = []
    try:
        tp = KpTopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        deadline = time.monotonic() + CLIENT_WAIT
        while len(rows) < len(MODERN) and time.monotonic() < deadline:
            rows += [
                (m.offset, m.key, m.value, m.timestamp, list(m.headers or [])) for m in consumer
            ]
    finally:
        consumer.close()
    return rows


@pytest.mark.parametrize(("api_version", "magic"), [((0, 8, 2), 0), ((0, 9), 0), ((0, 10, 1), 1)])
@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_old_consumers_read_what_a_modern_producer_wrote(
    cluster: KemuUp, api_version: tuple[int, ...], magic: int, compression: str
) -> None:
    """kafka-python as a 0.8.2 (Fetch v0), 0.9 (v1) or 0.10.1 (v3, with ``max_bytes``)
    consumer reads confluent-kafka's v2 batches down-converted to format v0 or v1: every
    key and value at its offset, the v1 timestamps, no headers (format v0/v1 has none)."""
    topic = new_topic(cluster, "f" + "".join(map(str, api_version)))
    produce_modern_with_headers(cluster, topic, compression)
    rows = consume_old(cluster, topic, api_version)
    assert [(o, k, v) for o, k, v, _, _ in rows] == [
        (i, k, v) for i, (k, v, _) in enumerate(MODERN)
    ]
    assert all(h == [] for *_, h in rows)
    if magic == 1:
        assert [t for _, _, _, t, _ in rows] == [t for _, _, t in MODERN]


def test_fetch_v3_max_bytes_still_returns_a_whole_message_set(cluster: KemuUp) -> None:
    """With ``fetch_max_bytes`` and ``max_partition_fetch_bytes`` of 1 byte, each Fetch v3
    still answers the first batch whole, down-converted (KIP-74), so the consumer makes
    progress through every record."""
    topic = new_topic(cluster, "fmax")
    produce_modern_with_headers(cluster, topic, "none")
    rows = consume_old(cluster, topic, (0, 10, 1), fetch_max_bytes=1, max_partition_fetch_bytes=1)
    assert [o for o, *_ in rows] == list(range(len(MODERN)))


@pytest.mark.parametrize("fallback", ["0.9.0", "0.10.0"])
@pytest.mark.parametrize("codec", ["snappy", "lz4"])
def test_kcat_as_an_old_consumer(cluster: KemuUp, fallback: str, codec: str) -> None:
    """kcat without ApiVersions, as a client of a 0.9.0 broker (Fetch v1, format v0) or
    0.10.0 (Fetch v2, format v1), reads confluent-kafka's snappy or lz4 batches, each
    down-converted to one wrapper of the same codec (lz4 of format v0 with Kafka's broken
    header checksum)."""
    topic = new_topic(cluster, f"kc-{codec}")
    produce_modern_with_headers(cluster, topic, codec)
    consumed = subprocess.run(
        ["kcat", "-b", cluster.bootstrap, "-C", "-t", topic, "-p", "0", "-e",
         "-f", "%o|%k|%s\\n",
         "-X", "api.version.request=false", "-X", f"broker.version.fallback={fallback}"],
        capture_output=True, text=True, timeout=CLIENT_WAIT, check=False,
    )  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == [
        f"{i}|{k.decode()}|{v.decode()}" for i, (k, v, _) in enumerate(MODERN)
    ]


def fetch_raw(cluster: KemuUp, topic: str, version: int) -> FetchPartitionData:
    """One Fetch of ``version`` from offset 0 of partition 0, at its leader."""
    request = FetchRequestData(
        max_wait_ms=0,
        min_bytes=0,
        topics=(
            FetchTopic(
                topic=TopicName(topic),
                partitions=(
                    FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20),
                ),
            ),
        ),
    )
    data = ask_leader(cluster, topic, request, version)
    assert isinstance(data, FetchResponseData)
    return data.responses[0].partitions[0]


def test_down_conversion_disabled_is_unsupported_version_for_old_fetches(
    cluster: KemuUp,
) -> None:
    """``message.downconversion.enable=false``: a Fetch v0-v3 of records is
    UNSUPPORTED_VERSION (no offsets, no records), a v4 one is answered as usual."""
    topic = new_topic(cluster, "noconv", "message.downconversion.enable=false")
    produce_modern(cluster, topic, [(b"k", b"v")])
    for version in (0, 1, 2, 3):
        old = fetch_raw(cluster, topic, version)
        assert (old.error_code, old.high_watermark, old.records) == (
            ErrorCode.UNSUPPORTED_VERSION,
            -1,
            b"",
        )
    new = fetch_raw(cluster, topic, 4)
    assert (new.error_code, new.high_watermark) == (ErrorCode.NONE, 1)
    assert new.records
