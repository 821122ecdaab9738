"""A leader's record checks over Kafka's wire (``LogValidator.validateKey`` and
``validateTimestamp``, answered as ``ReplicaManager.appendToLocalLog`` answers a
``RecordValidationException``): a record without a key on a compacted topic, and under
CreateTime a timestamp further from the broker's clock than the topic's
``message.timestamp.difference.max.ms``, refuse their whole batch; Produce v8 names each
refused record (``record_errors``) with the error message, older versions carry the code
alone; nothing of the batch reaches the log, and the request's other partitions are
appended. Real clients (confluent-kafka, kafka-python) get the same errors.

One in-process broker with its Kafka listener; requests are encoded and answers decoded
by kemu's codec (kio), the log files read from disk.
"""

from __future__ import annotations

import io
import struct
import time
import zlib
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import cramjam
import pytest
import zstandard
from aiokafka.record.default_records import (  # type: ignore[import-untyped]
    DefaultRecordBatch,
)
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer  # type: ignore[import-untyped]
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import (  # type: ignore[import-untyped]
    InvalidRecordError,
    InvalidTimestampError,
)

from actors.log.compression import xxh32
from actors.runtime.tracer import MemorySink, Tracer
from cluster.cli import console_producer
from cluster.kafka.apis import decode_response, encode_request
from cluster.kafka.client import AdminClientConfig, KafkaAdminClient, KafkaDataClient
from cluster.kafka.message_sets import write_message
from cluster.kafka.records import read_batches
from cluster.launch.cluster import Cluster, ClusterSpec
from protocol.errors import ErrorCode
from protocol.ids import TopicName
from protocol.kafka_api import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    ConfigResourceType,
    CreatableTopic,
    TopicConfig,
)
from protocol.kafka_data import (
    ProducePartitionData,
    ProducePartitionResponse,
    ProduceRequestData,
    ProduceResponseData,
    ProduceTopicData,
    RecordError,
)
from tests.support.hosting import hosted_fixture
from tests.support.raw_kafka import exchange
from tests.support.record_batches import client_batch, fix_crc, get_field, set_field
from tests.support.tool_logs import LOGGED_ERROR
from tests.support.waiting import eventually

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120)]

HOST = "127.0.0.1"
WAIT = 30.0
COMPACTED = "compacted"
BOUNDED = "bounded"
BOUND_MS = 60_000
KEY_ERROR = "Compacted topic cannot accept message without key in topic partition compacted-0."


@hosted_fixture()
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    spec = ClusterSpec(brokers=1, base_port=0, log_dir=tmp_path / "logs")
    tracer = Tracer()
    tracer.add_sink(MemorySink())
    async with anyio.create_task_group() as tg:
        running: Cluster = await tg.start(Cluster(spec, tracer=tracer).run)
        async with KafkaAdminClient(f"{HOST}:{running.ports[0]}") as client:
            results = await client.create_topics(
                [
                    topic(COMPACTED, {"cleanup.policy": "compact"}),
                    topic(BOUNDED, {"message.timestamp.difference.max.ms": str(BOUND_MS)}),
                ]
            )
        assert [r.error_code for r in results] == [ErrorCode.NONE] * 2
        yield running
        tg.cancel_scope.cancel()


def topic(name: str, configs: dict[str, str]) -> CreatableTopic:
    return CreatableTopic(
        name=TopicName(name),
        num_partitions=2,
        replication_factor=1,
        configs=tuple(TopicConfig(name=k, value=v) for k, v in configs.items()),
    )


def bootstrap(cluster: Cluster) -> str:
    return f"{HOST}:{cluster.ports[0]}"


def log_bytes(cluster: Cluster, name: str, partition: int) -> int:
    """The bytes of the partition's segments on disk."""
    logs = cluster.spec.log_dir
    return sum(p.stat().st_size for p in logs.glob(f"*/{name}-{partition}/*.log"))


async def produce(
    cluster: Cluster, version: int, name: str, batches: dict[int, bytes], *, acks: int = 1
) -> dict[int, ProducePartitionResponse]:
    """One Produce of ``version`` with a batch per partition; the answers by partition."""
    request = ProduceRequestData(
        acks=acks,
        timeout_ms=int(WAIT * 1000),
        topic_data=(
            ProduceTopicData(
                name=TopicName(name),
                partition_data=tuple(
                    ProducePartitionData(index=p, records=b) for p, b in batches.items()
                ),
            ),
        ),
    )
    frame = encode_request(request, api_version=version, correlation_id=7, client_id="t")
    answer = await exchange(HOST, cluster.ports[0], frame, timeout=WAIT)
    _, response = decode_response(0, version, answer[4:])
    assert isinstance(response, ProduceResponseData)
    (topic_response,) = response.responses
    return {p.index: p for p in topic_response.partition_responses}


@pytest.mark.parametrize("version", [8, 7, 3])
async def test_a_record_without_a_key_refuses_its_batch_on_a_compacted_topic(
    cluster: Cluster, version: int
) -> None:
    """Partition 0's batch has records 1 and 3 without a key: INVALID_RECORD, and on v8
    their indexes with Kafka's message and "One or more records have been rejected" (the
    log start offset from v5); its log stays empty while partition 1's keyed batch of the
    same request is appended."""
    before = log_bytes(cluster, COMPACTED, 1)
    keyed = client_batch([b"a", b"b"])
    refused = client_batch([b"v"] * 4, keys=[b"k0", None, b"k2", None])
    answers = await produce(cluster, version, COMPACTED, {0: refused, 1: keyed})
    assert answers[0].error_code is ErrorCode.INVALID_RECORD
    assert answers[0].base_offset == -1
    if version >= 8:
        assert answers[0].record_errors == (
            RecordError(batch_index=1, batch_index_error_message=KEY_ERROR),
            RecordError(batch_index=3, batch_index_error_message=KEY_ERROR),
        )
        assert answers[0].error_message == "One or more records have been rejected"
    else:
        assert answers[0].record_errors == ()
        assert answers[0].error_message is None
    assert answers[0].log_start_offset == (0 if version >= 5 else -1)
    assert answers[1].error_code is ErrorCode.NONE
    assert answers[1].record_errors == ()
    assert answers[1].error_message is None
    assert log_bytes(cluster, COMPACTED, 0) == 0
    assert log_bytes(cluster, COMPACTED, 1) == before + len(keyed)


async def test_a_gzip_batch_is_checked_for_keys_too(cluster: Cluster) -> None:
    """The compressed path (validateMessagesAndAssignOffsetsCompressed) checks keys as
    well: a gzip batch with a keyless record is refused the same way."""
    refused = client_batch([b"v"] * 3, keys=[b"k0", b"k1", None], codec=1)
    answers = await produce(cluster, 8, COMPACTED, {0: refused})
    assert answers[0].error_code is ErrorCode.INVALID_RECORD
    assert answers[0].record_errors == (
        RecordError(batch_index=2, batch_index_error_message=KEY_ERROR),
    )
    assert log_bytes(cluster, COMPACTED, 0) == 0


async def test_a_timestamp_far_from_the_broker_clock_refuses_its_batch(cluster: Cluster) -> None:
    """With message.timestamp.difference.max.ms at a minute, a record stamped a day ago
    is INVALID_TIMESTAMP: v8 names it with its offset and the window it missed, the
    other records of the batch are not appended either, and a batch of records stamped
    now is appended."""
    now = int(time.time() * 1000)
    day_ago = now - 86_400_000
    refused = client_batch([b"a", b"b", b"c"], timestamps=[now, day_ago, now])
    answers = await produce(
        cluster, 8, BOUNDED, {0: refused, 1: client_batch([b"x"], timestamps=[now])}
    )
    (error,) = answers[0].record_errors
    assert answers[0].error_code is ErrorCode.INVALID_TIMESTAMP
    assert answers[0].error_message == (
        "One or more records have been rejected due to invalid timestamp"
    )
    assert error.batch_index == 1
    message = error.batch_index_error_message or ""
    assert message.startswith(f"Timestamp {day_ago} of message with offset 1 is out of range. ")
    low, high = message.split("[")[1].rstrip("]").split(", ")
    assert int(high) - int(low) == 2 * BOUND_MS
    assert int(low) - BOUND_MS <= now <= int(high)  # the broker's clock, not the test's
    assert answers[1].error_code is ErrorCode.NONE
    assert log_bytes(cluster, BOUNDED, 0) == 0
    legacy = await produce(cluster, 7, BOUNDED, {0: refused})
    assert legacy[0].error_code is ErrorCode.INVALID_TIMESTAMP
    assert legacy[0].record_errors == ()
    assert log_bytes(cluster, BOUNDED, 0) == 0
    async with KafkaDataClient(bootstrap(cluster)) as client:
        fresh = int(time.time() * 1000)
        accepted = await client.produce(BOUNDED, 0, client_batch([b"a"], timestamps=[fresh]))
    assert (accepted.error_code, accepted.base_offset) == (ErrorCode.NONE, 0)


def confluent_delivery(
    bootstrap: str, topic: str, partition: int, key: bytes | None = None, timestamp: int = 0
) -> KafkaError | None:
    """One record produced by confluent-kafka (librdkafka), stamped now unless
    ``timestamp``: its delivery error."""
    errors: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "retries": 0})
    producer.produce(
        topic,
        value=b"v",
        key=key,
        partition=partition,
        timestamp=timestamp,
        on_delivery=lambda err, _msg: errors.append(err),
    )
    producer.flush(WAIT)
    assert len(errors) == 1, "no delivery report within the wait"
    return errors[0]


def kafka_python_send(bootstrap: str, topic: str, **record: object) -> Exception | None:
    """One record produced by kafka-python: what its future raises, if anything."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0, retries=0)
    try:
        producer.send(topic, **record).get(timeout=WAIT)
    except Exception as exc:  # the error is what the test looks at
        return exc
    finally:
        producer.close()
    return None


async def test_real_clients_get_the_errors(cluster: Cluster) -> None:
    """confluent-kafka and kafka-python producing a record without a key to a compacted
    topic get INVALID_RECORD, one stamped a day ago to the bounded topic
    INVALID_TIMESTAMP; a keyed record on the compacted topic is delivered."""
    address = bootstrap(cluster)
    day_ago = int(time.time() * 1000) - 86_400_000

    def confluent() -> tuple[KafkaError | None, ...]:
        return (
            confluent_delivery(address, COMPACTED, 0),
            confluent_delivery(address, BOUNDED, 0, timestamp=day_ago),
            confluent_delivery(address, COMPACTED, 1, key=b"k"),
        )

    keyless, old, delivered = await anyio.to_thread.run_sync(confluent)
    assert [e.code() if e else None for e in (keyless, old, delivered)] == [
        KafkaError.INVALID_RECORD,
        KafkaError.INVALID_TIMESTAMP,
        None,
    ]

    def kafka_python() -> tuple[Exception | None, ...]:
        return (
            kafka_python_send(address, COMPACTED, value=b"v", partition=0),
            kafka_python_send(address, BOUNDED, value=b"v", partition=0, timestamp_ms=day_ago),
        )

    keyless_kp, old_kp = await anyio.to_thread.run_sync(kafka_python)
    assert isinstance(keyless_kp, InvalidRecordError)
    assert isinstance(old_kp, InvalidTimestampError)
    assert log_bytes(cluster, COMPACTED, 0) == 0
    assert log_bytes(cluster, BOUNDED, 0) == 0


async def test_the_bound_follows_topic_and_broker_config_changes(cluster: Cluster) -> None:
    """IncrementalAlterConfigs deleting the topic's bound makes the broker default
    (Long.MaxValue) apply, and a record a day old goes in; the dynamic broker default
    ``log.message.timestamp.difference.max.ms`` set for all brokers bounds the topic
    again (``DynamicLogConfig``)."""
    day_ago = int(time.time() * 1000) - 86_400_000
    old = client_batch([b"v"], timestamps=[day_ago])

    async def answer() -> ErrorCode:
        return (await produce(cluster, 8, BOUNDED, {0: old}))[0].error_code

    async with KafkaAdminClient(bootstrap(cluster)) as client:
        results = await client.incremental_alter_configs(
            [alter(ConfigResourceType.TOPIC, BOUNDED, None, AlterConfigOp.DELETE)]
        )
        assert [r.error_code for r in results.values()] == [ErrorCode.NONE]
        await eventually(answer, until=lambda code: code is ErrorCode.NONE, timeout=WAIT)
        results = await client.incremental_alter_configs(
            [alter(ConfigResourceType.BROKER, "", str(BOUND_MS), AlterConfigOp.SET)]
        )
        assert [r.error_code for r in results.values()] == [ErrorCode.NONE]
        await eventually(
            answer, until=lambda code: code is ErrorCode.INVALID_TIMESTAMP, timeout=WAIT
        )


def alter(
    kind: ConfigResourceType, name: str, value: str | None, op: AlterConfigOp
) -> AlterConfigsResource:
    """One config of ``name`` altered: the topic's own, or a broker's default."""
    config = (
        "message.timestamp.difference.max.ms"
        if kind is ConfigResourceType.TOPIC
        else "log.message.timestamp.difference.max.ms"
    )
    return AlterConfigsResource(
        resource_type=kind,
        resource_name=name,
        configs=(AlterableConfig(name=config, value=value, operation=op),),
    )


async def test_produce_v2_messages_are_checked_once_up_converted(cluster: Cluster) -> None:
    """A Produce v2's message set (format v1) is held to the same checks
    (``LogValidator.convertAndAssignOffsetsNonCompressed`` validates each record as it
    converts it): a message without a key on the compacted topic is INVALID_RECORD, one
    stamped a day ago on the bounded topic INVALID_TIMESTAMP; nothing is written."""
    keyless = bytearray()
    write_message(keyless, 0, 1, key=b"k", value=b"v", timestamp=int(time.time() * 1000))
    write_message(keyless, 1, 1, key=None, value=b"v", timestamp=int(time.time() * 1000))
    answers = await produce(cluster, 2, COMPACTED, {0: bytes(keyless)})
    assert answers[0].error_code is ErrorCode.INVALID_RECORD
    old = bytearray()
    write_message(old, 0, 1, key=None, value=b"v", timestamp=int(time.time() * 1000) - 86_400_000)
    answers = await produce(cluster, 2, BOUNDED, {0: bytes(old)})
    assert answers[0].error_code is ErrorCode.INVALID_TIMESTAMP
    assert log_bytes(cluster, COMPACTED, 0) == log_bytes(cluster, BOUNDED, 0) == 0


async def test_refusals_after_the_partition_is_found_carry_the_log_start(
    cluster: Cluster,
) -> None:
    """``ReplicaManager.appendToLocalLog`` answers the partition's log start offset for
    every failure but its known ones: NOT_ENOUGH_REPLICAS (acks=all, one replica in the
    ISR of a topic asking for two; nothing written) and OUT_OF_ORDER_SEQUENCE_NUMBER
    carry it, as the record checks' refusals do."""
    async with KafkaAdminClient(bootstrap(cluster)) as client:
        results = await client.create_topics([topic("guarded", {"min.insync.replicas": "2"})])
    assert [r.error_code for r in results] == [ErrorCode.NONE]
    answers = await produce(cluster, 8, "guarded", {0: client_batch([b"v"])}, acks=-1)
    assert answers[0].error_code is ErrorCode.NOT_ENOUGH_REPLICAS
    assert (answers[0].base_offset, answers[0].log_start_offset) == (-1, 0)
    assert log_bytes(cluster, "guarded", 0) == 0
    now = [int(time.time() * 1000)]
    first = client_batch(
        [b"a"], timestamps=now, producer_id=4242, producer_epoch=0, base_sequence=0
    )
    answers = await produce(cluster, 8, BOUNDED, {1: first}, acks=-1)
    assert answers[1].error_code is ErrorCode.NONE
    gap = client_batch([b"b"], timestamps=now, producer_id=4242, producer_epoch=0, base_sequence=5)
    answers = await produce(cluster, 8, BOUNDED, {1: gap}, acks=-1)
    assert answers[1].error_code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert (answers[1].base_offset, answers[1].log_start_offset) == (-1, 0)


async def test_a_duplicate_batch_answers_its_first_offsets_and_timestamp(
    cluster: Cluster,
) -> None:
    """An idempotent producer's batch sent again (same producer, epoch and sequences) is
    answered as ``Log.append`` answers a duplicate: the offsets it was written at, the
    log start, and as log append time the batch's timestamp as written (its largest
    record timestamp, under CreateTime too); nothing is written the second time."""
    now = int(time.time() * 1000)
    batch = client_batch(
        [b"a", b"b"],
        timestamps=[now, now + 5],
        producer_id=777,
        producer_epoch=0,
        base_sequence=0,
    )
    before = log_bytes(cluster, BOUNDED, 0)
    first = (await produce(cluster, 8, BOUNDED, {0: batch}, acks=-1))[0]
    assert (first.error_code, first.log_append_time_ms) == (ErrorCode.NONE, -1)
    again = (await produce(cluster, 8, BOUNDED, {0: batch}, acks=-1))[0]
    assert again.error_code is ErrorCode.NONE
    assert again.base_offset == first.base_offset
    assert (again.log_append_time_ms, again.log_start_offset) == (now + 5, 0)
    assert log_bytes(cluster, BOUNDED, 0) == before + len(batch)


async def test_a_malformed_batch_is_refused_for_itself_before_its_sequence_is_checked(
    cluster: Cluster,
) -> None:
    """``Log.append`` validates a batch's records before the idempotent producer's
    checks: a batch repeating one already written (same producer, epoch and sequences)
    whose CRC does not match is CORRUPT_MESSAGE, one with a record stamped a day ago
    INVALID_TIMESTAMP, and one with both a sequence gap and that record INVALID_TIMESTAMP
    too, not OUT_OF_ORDER_SEQUENCE_NUMBER; none of them writes anything, and the intact
    batch sent again is still answered as the duplicate it is."""
    now = int(time.time() * 1000)
    day_ago = now - 86_400_000

    def batch(stamp: int, sequence: int = 0) -> bytes:
        return client_batch(
            [b"a", b"b"],
            timestamps=[now, stamp],
            producer_id=778,
            producer_epoch=0,
            base_sequence=sequence,
        )

    first = (await produce(cluster, 8, BOUNDED, {1: batch(now)}, acks=-1))[1]
    assert first.error_code is ErrorCode.NONE
    before = log_bytes(cluster, BOUNDED, 1)
    broken = set_field(batch(now), "crc", get_field(batch(now), "crc") ^ 1)
    for sent, code in [
        (broken, ErrorCode.CORRUPT_MESSAGE),
        (batch(day_ago), ErrorCode.INVALID_TIMESTAMP),
        (batch(day_ago, sequence=7), ErrorCode.INVALID_TIMESTAMP),
    ]:
        (answer,) = (await produce(cluster, 8, BOUNDED, {1: sent}, acks=-1)).values()
        assert (answer.error_code, answer.base_offset) == (code, -1)
    again = (await produce(cluster, 8, BOUNDED, {1: batch(now)}, acks=-1))[1]
    assert (again.error_code, again.base_offset) == (ErrorCode.NONE, first.base_offset)
    assert log_bytes(cluster, BOUNDED, 1) == before


def first_segment(cluster: Cluster, name: str, partition: int) -> bytes:
    (path,) = cluster.spec.log_dir.glob(f"*/{name}-{partition}/00000000000000000000.log")
    return path.read_bytes()


async def test_a_compressed_batch_is_stored_with_its_records_max_timestamp(
    cluster: Cluster,
) -> None:
    """A gzip batch whose header understates its max timestamp is stored with its
    records' largest (``validateMessagesAndAssignOffsetsCompressed`` sets it in place),
    so ListOffsets for that timestamp finds the batch, and in it its first record at or
    after the timestamp."""
    now = int(time.time() * 1000)
    stamps = [now, now + 9_000, now + 1_000]
    sent = fix_crc(
        set_field(
            client_batch([b"a", b"b", b"c"], timestamps=stamps, codec=1), "max_timestamp", now - 1
        )
    )
    answers = await produce(cluster, 8, BOUNDED, {1: sent})
    assert answers[1].error_code is ErrorCode.NONE
    stored = first_segment(cluster, BOUNDED, 1)
    at = len(stored) - len(sent)  # the batch just written is the segment's last
    assert get_field(stored, "max_timestamp", at=at) == now + 9_000
    assert stored[at + 61 :] == sent[61:]
    async with KafkaDataClient(bootstrap(cluster)) as client:
        found = await client.list_offset(BOUNDED, 1, now + 5_000)
    assert (found.error_code, found.offset) == (ErrorCode.NONE, answers[1].base_offset + 1)


STAMPS = (0, 30, 10, 20, 40)
"""Milliseconds after the test's start of the records of one compressed batch."""
CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def kafka_python_batch(address: str, name: str, codec: str, start: int) -> None:
    """``STAMPS`` records in one batch (sent within a long linger, then flushed); values
    that compress, as kafka-python sends a batch uncompressed when it would not shrink."""
    producer = KafkaProducer(bootstrap_servers=address, compression_type=codec, linger_ms=60_000)
    try:
        futures = [
            producer.send(name, value=b"%d" % i * 100, partition=0, timestamp_ms=start + t)
            for i, t in enumerate(STAMPS)
        ]
        producer.flush(timeout=WAIT)
        for future in futures:
            future.get(timeout=WAIT)
    finally:
        producer.close()


def kafka_python_lookups(
    address: str, name: str, times: list[int]
) -> list[tuple[int | None, int | None]]:
    """kafka-python's ``offsets_for_times`` for each of ``times``: (offset, timestamp)."""
    consumer = KafkaConsumer(bootstrap_servers=address, request_timeout_ms=int(WAIT * 1000))
    try:
        out: list[tuple[int | None, int | None]] = []
        for at in times:
            found = consumer.offsets_for_times({KpTopicPartition(name, 0): at})
            answer = found[KpTopicPartition(name, 0)]
            out.append((None, None) if answer is None else (answer.offset, answer.timestamp))
        return out
    finally:
        consumer.close()


def confluent_batch(address: str, name: str, codec: str, start: int) -> None:
    """``STAMPS`` records in one batch from librdkafka (a long linger, then a flush)."""
    errors: list[KafkaError | None] = []
    producer = Producer(
        {"bootstrap.servers": address, "compression.type": codec, "linger.ms": 60_000}
    )
    for i, t in enumerate(STAMPS):
        producer.produce(
            name,
            value=b"%d" % i * 100,
            partition=0,
            timestamp=start + t,
            on_delivery=lambda err, _msg: errors.append(err),
        )
    producer.flush(WAIT)
    assert errors == [None] * len(STAMPS)


def confluent_lookups(address: str, name: str, times: list[int]) -> list[tuple[int, int | None]]:
    """confluent-kafka's ``offsets_for_times`` for each of ``times``: (offset, epoch)."""
    consumer = Consumer({"bootstrap.servers": address, "group.id": "lookups"})
    try:
        out: list[tuple[int, int | None]] = []
        for at in times:
            (found,) = consumer.offsets_for_times([TopicPartition(name, 0, at)], timeout=WAIT)
            assert found.error is None
            out.append((found.offset, found.leader_epoch))
        return out
    finally:
        consumer.close()


@pytest.mark.parametrize(
    ("client", "codec"),
    [
        ("kafka-python", "gzip"),
        ("kafka-python", "zstd"),
        ("confluent-kafka", "lz4"),
        ("confluent-kafka", "snappy"),
    ],
)
async def test_offsets_for_times_finds_the_record_inside_a_compressed_batch(
    cluster: Cluster, client: str, codec: str
) -> None:
    """A real client's ``offsets_for_times`` on a topic holding one compressed batch of
    records with distinct, unordered timestamps gets the first record at or after each
    time, with that record's timestamp and the batch's leader epoch
    (``LogSegment.findOffsetByTimestamp`` reads inside the batch), not the batch's
    base offset; a time past them all gets none."""
    name = f"times-{client}-{codec}"
    async with KafkaAdminClient(bootstrap(cluster)) as admin:
        (created,) = await admin.create_topics([topic(name, {})])
    assert created.error_code is ErrorCode.NONE
    address = bootstrap(cluster)
    start = int(time.time() * 1000)
    produce_batch = kafka_python_batch if client == "kafka-python" else confluent_batch
    await anyio.to_thread.run_sync(produce_batch, address, name, codec, start)
    (batch,) = read_batches(first_segment(cluster, name, 0))
    assert (batch.compression, batch.records_count) == (CODECS[codec], len(STAMPS))
    times = [start - 1, start + 5, start + 15, start + 25, start + 31, start + 41]
    if client == "kafka-python":
        answers = await anyio.to_thread.run_sync(kafka_python_lookups, address, name, times)
        assert answers == [
            (0, start),
            (1, start + 30),
            (1, start + 30),
            (1, start + 30),
            (4, start + 40),
            (None, None),
        ]
    else:
        epochs = await anyio.to_thread.run_sync(confluent_lookups, address, name, times)
        assert epochs == [(0, 0), (1, 0), (1, 0), (1, 0), (4, 0), (-1, None)]


async def test_compressed_records_that_do_not_read_get_kafkas_codes(cluster: Cluster) -> None:
    """Produce v8 batches whose compressed records a 2.7 broker cannot read: bytes that
    are not gzip under the gzip codec, UNKNOWN_SERVER_ERROR (its stream's
    ``KafkaException``); a gzip stream cut inside the records, INVALID_RECORD (the
    ``EOFException`` is a premature EOF); a snappy, lz4 or zstd stream missing its last
    byte, UNKNOWN_SERVER_ERROR (``SnappyInputStream``, ``KafkaLZ4BlockInputStream`` and
    ``ZstdInputStream`` throw a plain ``IOException`` for a source cut short); all
    with the log start offset and no message, and nothing written. A Produce v2 with a
    v1 gzip wrapper whose value is not gzip: UNKNOWN_SERVER_ERROR too."""
    now = [int(time.time() * 1000)] * 3
    gzip = client_batch([b"a", b"b", b"c"], timestamps=now, codec=1)
    garbled = bytearray(gzip)
    garbled[61:63] = b"PK"  # not the gzip magic
    records = zlib.decompress(gzip[61:], 16 + zlib.MAX_WBITS)
    squeezer = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
    cut = (squeezer.compress(records) + squeezer.flush())[:-20]
    truncated = fix_crc(set_field(gzip[:61] + cut, "batch_length", 49 + len(cut)))
    last_byte_cut = [  # the records all decompress; the stream's end does not
        fix_crc(set_field(whole[:-1], "batch_length", len(whole) - 13))
        for whole in (
            client_batch([b"a", b"b", b"c"], timestamps=now, codec=codec) for codec in (2, 3, 4)
        )
    ]
    before = log_bytes(cluster, BOUNDED, 0)
    for batch, code in [
        (fix_crc(bytes(garbled)), ErrorCode.UNKNOWN_SERVER_ERROR),
        (truncated, ErrorCode.INVALID_RECORD),
        *((cut_batch, ErrorCode.UNKNOWN_SERVER_ERROR) for cut_batch in last_byte_cut),
    ]:
        (answer,) = (await produce(cluster, 8, BOUNDED, {0: batch})).values()
        assert (answer.error_code, answer.base_offset) == (code, -1)
        assert (answer.log_start_offset, answer.error_message) == (0, None)
        assert answer.record_errors == ()
    wrapper = bytearray()
    write_message(wrapper, 0, 1, key=None, value=b"not gzip", timestamp=now[0], attributes=1)
    legacy = await produce(cluster, 2, BOUNDED, {0: bytes(wrapper)})
    assert legacy[0].error_code is ErrorCode.UNKNOWN_SERVER_ERROR
    assert log_bytes(cluster, BOUNDED, 0) == before


def two_blocks(now: list[int]) -> tuple[list[bytes], list[bytes]]:
    """Records ``a``, ``b``, ``c`` (timestamps ``now``) uncompressed as two blocks for a
    stream, the first two records and the third; then the same with ``b`` broken (its
    header count -1)."""
    plain = client_batch([b"a", b"b", b"c"], timestamps=now)[61:]
    records, position = [], 0
    for _ in range(3):  # each record's length is one varint byte
        end = position + 1 + (plain[position] >> 1)
        records.append(plain[position:end])
        position = end
    broken = records[1][:-1] + b"\x01"  # its header count, -1
    return [records[0] + records[1], records[2]], [records[0] + broken, records[2]]


def zstd_in_blocks(
    blocks: list[bytes], *, cut: int = 0, reserved: bool = False, checksum: bool = True
) -> bytes:
    """``blocks`` as one zstd frame with a checksum, each ending a zstd block of its own,
    the last ``cut`` bytes dropped; ``reserved``: the second block of the reserved type
    (it does not decompress); not ``checksum``: the checksum's last byte flipped."""
    squeezer = zstandard.ZstdCompressor(write_checksum=True).compressobj()
    parts = [
        squeezer.compress(block) + squeezer.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
        for block in blocks
    ]
    packed = bytearray(b"".join(parts) + squeezer.flush())
    if reserved:
        packed[len(parts[0])] |= 0x06  # block type 3
    if not checksum:
        packed[-1] ^= 0xFF
    return bytes(packed[: len(packed) - cut])


async def test_a_cut_zstd_stream_is_read_up_to_the_cut(cluster: Cluster) -> None:
    """Produce v8 zstd batches of three records, the first two in one zstd block and the
    third in another, as a 2.7 broker reads them (``ZstdInputStream`` hands out the
    blocks before a cut, then throws an ``IOException``): cut inside the third record's
    block or inside the frame's checksum, with the records before the cut sound,
    UNKNOWN_SERVER_ERROR (the ``KafkaException`` the iterator makes of the exception);
    with the second record broken (a negative header count) before the cut,
    INVALID_RECORD, as the same stream whole. The same with the third record's block
    not decompressing (of the reserved type) or a checksum that does not match: the
    blocks before them are handed out too. Nothing is written."""
    now = [int(time.time() * 1000)] * 3
    sound, wrong = two_blocks(now)
    header = client_batch([b"a", b"b", b"c"], timestamps=now, codec=4)[:61]

    def batch(payload: bytes) -> bytes:
        return fix_crc(set_field(header + payload, "batch_length", 49 + len(payload)))

    before = log_bytes(cluster, BOUNDED, 0)
    for payload, code in [
        (zstd_in_blocks(sound, cut=7), ErrorCode.UNKNOWN_SERVER_ERROR),  # in the last block
        (zstd_in_blocks(sound, cut=2), ErrorCode.UNKNOWN_SERVER_ERROR),  # in the checksum
        (zstd_in_blocks(wrong, cut=7), ErrorCode.INVALID_RECORD),
        (zstd_in_blocks(wrong, cut=2), ErrorCode.INVALID_RECORD),
        (zstd_in_blocks(wrong), ErrorCode.INVALID_RECORD),
        (zstd_in_blocks(sound, reserved=True), ErrorCode.UNKNOWN_SERVER_ERROR),
        (zstd_in_blocks(sound, checksum=False), ErrorCode.UNKNOWN_SERVER_ERROR),
        (zstd_in_blocks(wrong, reserved=True), ErrorCode.INVALID_RECORD),
        (zstd_in_blocks(wrong, checksum=False), ErrorCode.INVALID_RECORD),
    ]:
        (answer,) = (await produce(cluster, 8, BOUNDED, {0: batch(payload)})).values()
        assert (answer.error_code, answer.base_offset) == (code, -1)
    (answer,) = (await produce(cluster, 8, BOUNDED, {0: batch(zstd_in_blocks(sound))})).values()
    assert (answer.error_code, answer.base_offset) == (ErrorCode.NONE, 0)
    assert log_bytes(cluster, BOUNDED, 0) > before


def snappy_in_chunks(chunks: list[bytes]) -> bytes:
    """``chunks`` in the xerial framing (``SnappyOutputStream``), each a block of its own:
    ``bytes`` are taken as they are (an already compressed or broken block)."""
    out = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for chunk in chunks:
        packed = bytes(cramjam.snappy.compress_raw(chunk))
        out += struct.pack(">i", len(packed)) + packed
    return out


def lz4_in_blocks(
    blocks: list[bytes],
    *,
    cut: int = 0,
    header_checksum: int = 0,
    block_checksums: bool = False,
    broken_block_checksum: bool = False,
) -> bytes:
    """``blocks`` as one LZ4 frame with a content checksum, each an lz4 block of its own,
    the last ``cut`` bytes dropped; ``header_checksum`` XORed into the header checksum;
    ``block_checksums``: each block followed by its checksum, the last block's wrong if
    ``broken_block_checksum``."""
    # version 01, independent blocks, content checksum, perhaps block checksums
    descriptor = bytes([0x64 | (0x10 if block_checksums else 0), 0x40])
    checksum = (xxh32(descriptor) >> 8 & 0xFF) ^ header_checksum
    out = struct.pack("<I", 0x184D2204) + descriptor + bytes([checksum])
    for index, block in enumerate(blocks):
        packed = bytes(cramjam.lz4.compress_block(block, store_size=False))
        out += struct.pack("<I", len(packed)) + packed
        if block_checksums:
            wrong = broken_block_checksum and index == len(blocks) - 1
            out += struct.pack("<I", xxh32(packed) ^ wrong)
    out += struct.pack("<II", 0, xxh32(b"".join(blocks)))
    return out[: len(out) - cut]


async def test_a_legacy_lz4_wrapper_header_checksum_is_checked_from_format_v1(
    cluster: Cluster,
) -> None:
    """A v1 message compressed with lz4 whose frame header checksum does not match is
    UNKNOWN_SERVER_ERROR (``KafkaLZ4BlockInputStream``'s constructor throws); the same
    frame in a v0 message is taken, as Kafka skips that checksum for format v0 only (its
    0.8 writers computed it wrongly); the sound v1 frame is taken."""
    now = int(time.time() * 1000)

    def wrapper(magic: int, header_checksum: int) -> bytes:
        inner = bytearray()
        write_message(inner, 0, magic, key=None, value=b"v", timestamp=now)
        out = bytearray()
        frame = lz4_in_blocks([bytes(inner)], header_checksum=header_checksum)
        write_message(out, 0, magic, key=None, value=frame, timestamp=now, attributes=3)
        return bytes(out)

    before = log_bytes(cluster, BOUNDED, 0)
    (refused,) = (await produce(cluster, 2, BOUNDED, {0: wrapper(1, 0x5A)})).values()
    assert refused.error_code is ErrorCode.UNKNOWN_SERVER_ERROR
    assert log_bytes(cluster, BOUNDED, 0) == before
    for version, magic in ((1, 0), (2, 1)):
        checksum = 0x5A if magic == 0 else 0
        (taken,) = (
            await produce(cluster, version, BOUNDED, {0: wrapper(magic, checksum)})
        ).values()
        assert taken.error_code is ErrorCode.NONE, (version, magic)
    assert log_bytes(cluster, BOUNDED, 0) > before


async def test_a_cut_snappy_or_lz4_stream_is_read_up_to_the_cut(cluster: Cluster) -> None:
    """Produce v8 snappy and lz4 batches of three records, the first two in one block and
    the third in another, as a 2.7 broker reads them (snappy-java's ``SnappyInputStream``
    and ``KafkaLZ4BlockInputStream`` hand out the blocks before a cut, then throw an
    ``IOException``). Cut inside the last block, inside the lz4 frame's content checksum,
    or (snappy) with a last chunk that does not decompress: with the records before it
    sound, UNKNOWN_SERVER_ERROR; with the second record broken (a negative header count),
    INVALID_RECORD, as the same stream whole; the same with an lz4 block whose checksum
    does not match ("Block checksum mismatch"). An lz4 frame whose header checksum does
    not match is UNKNOWN_SERVER_ERROR, records broken or not (the reader's constructor
    throws: only message format v0 skips that checksum). A snappy stream cut inside the
    last chunk's length just ends there (the reader finds no next chunk): the missing
    third record is INVALID_RECORD (a premature EOF). Nothing is written; the sound
    streams whole are, lz4 with block checksums too."""
    now = [int(time.time() * 1000)] * 3
    sound, wrong = two_blocks(now)

    def batch(codec: int, payload: bytes) -> bytes:
        header = client_batch([b"a", b"b", b"c"], timestamps=now, codec=codec)[:61]
        return fix_crc(set_field(header + payload, "batch_length", 49 + len(payload)))

    def snappy(blocks: list[bytes], *, cut: int = 0, garbled: bool = False) -> bytes:
        whole = snappy_in_chunks(blocks)
        if garbled:  # the last chunk's varint length says more than the block holds
            last = len(snappy_in_chunks(blocks[:1])) + 4
            whole = whole[:last] + b"\xff\xff\x03" + whole[last + 3 :]
        return whole[: len(whole) - cut]

    in_length = len(snappy_in_chunks(sound)) - len(snappy_in_chunks(sound[:1])) - 2
    unknown, invalid = ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.INVALID_RECORD
    cases = [
        (2, snappy(sound, cut=2), unknown),  # in the last chunk
        (2, snappy(sound, garbled=True), unknown),
        (2, snappy(sound, cut=in_length), invalid),  # in the last chunk's length
        (2, snappy(wrong, cut=2), invalid),
        (2, snappy(wrong, garbled=True), invalid),
        (2, snappy(wrong, cut=in_length), invalid),
        (2, snappy(wrong), invalid),
        (3, lz4_in_blocks(sound, cut=10), unknown),  # in the last block
        (3, lz4_in_blocks(sound, cut=2), unknown),  # in the content checksum
        (3, lz4_in_blocks(wrong, cut=10), invalid),
        (3, lz4_in_blocks(wrong, cut=2), invalid),
        (3, lz4_in_blocks(wrong), invalid),
        (3, lz4_in_blocks(sound, header_checksum=1), unknown),  # read by no record
        (3, lz4_in_blocks(wrong, header_checksum=1), unknown),
        (3, lz4_in_blocks(sound, block_checksums=True, broken_block_checksum=True), unknown),
        (3, lz4_in_blocks(wrong, block_checksums=True, broken_block_checksum=True), invalid),
    ]
    before = log_bytes(cluster, BOUNDED, 0)
    for codec, payload, code in cases:
        (answer,) = (await produce(cluster, 8, BOUNDED, {0: batch(codec, payload)})).values()
        assert (codec, answer.error_code, answer.base_offset) == (codec, code, -1)
    assert log_bytes(cluster, BOUNDED, 0) == before
    for codec, payload in [
        (2, snappy(sound)),
        (3, lz4_in_blocks(sound)),
        (3, lz4_in_blocks(sound, block_checksums=True)),
    ]:
        (answer,) = (await produce(cluster, 8, BOUNDED, {0: batch(codec, payload)})).values()
        assert answer.error_code is ErrorCode.NONE
    assert log_bytes(cluster, BOUNDED, 0) > before


def split_records(plain: bytes) -> list[bytes]:
    """The records of an uncompressed v2 payload, each as its bytes."""
    records, position = [], 0
    while position < len(plain):
        length, shift, start = 0, 0, position
        while True:  # the record's length, a zigzag varint
            byte = plain[position]
            position += 1
            length |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        position += length >> 1
        records.append(plain[start:position])
    return records


def lz4_frame(
    blocks: list[bytes], *, flg: int = 0x60, bd: int = 0x40, extra: bytes = b"", stored: int = -1
) -> bytes:
    """``blocks`` as one LZ4 frame with the descriptor ``flg``, ``bd`` (then ``extra``) and
    its header checksum, each an lz4 block of its own, the one at index ``stored`` stored
    as it is."""
    descriptor = bytes([flg, bd]) + extra
    out = struct.pack("<I", 0x184D2204) + descriptor + bytes([xxh32(descriptor) >> 8 & 0xFF])
    for index, block in enumerate(blocks):
        if index == stored:
            out += struct.pack("<I", 0x80000000 | len(block)) + block
            continue
        packed = bytes(cramjam.lz4.compress_block(block, store_size=False))
        out += struct.pack("<I", len(packed)) + packed
    return out + struct.pack("<I", 0)


async def test_an_lz4_frame_is_checked_as_kafkas_reader_checks_it(cluster: Cluster) -> None:
    """Produce v8 lz4 batches of three records as a 2.7 broker reads them
    (``KafkaLZ4BlockInputStream``). A header its constructor refuses is
    UNKNOWN_SERVER_ERROR, records broken or not: a dictionary id (``FLG`` calls that bit
    reserved), the other reserved FLG bit, dependent blocks (which cramjam reads), version
    2, BD's reserved bits, a block size id of 3. With 64 KiB blocks, a third record of 70
    KB in a block of its own, stored or compressed: the block is larger than the maximum,
    or decompresses past it, and the reader throws an ``IOException`` once it needs it:
    UNKNOWN_SERVER_ERROR with the two records before it sound, INVALID_RECORD with the
    second broken. The same records in 256 KiB blocks are written. A frame holding the
    three records followed by another frame is written: the reader stops at the first
    frame's end mark. Nothing else is written."""
    now = [int(time.time() * 1000)] * 3
    values = [b"a", b"b", b"c" * 70_000]
    sound = split_records(client_batch(values, timestamps=now)[61:])
    wrong = [sound[0], sound[1][:-1] + b"\x01", sound[2]]  # b's header count, -1
    header = client_batch(values, timestamps=now, codec=3)[:61]

    def batch(payload: bytes) -> bytes:
        return fix_crc(set_field(header + payload, "batch_length", 49 + len(payload)))

    def blocks(records: list[bytes]) -> list[bytes]:
        return [records[0] + records[1], records[2]]

    unknown, invalid = ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.INVALID_RECORD
    cases = [
        *(
            (lz4_frame(blocks(records), **descriptor), unknown)
            for records in (sound, wrong)
            for descriptor in (
                {"flg": 0x61, "extra": b"\x01\x00\x00\x00"},  # a dictionary id
                {"flg": 0x62},
                {"flg": 0x40},  # dependent blocks
                {"flg": 0xA0},  # version 2
                {"bd": 0x41},
                {"bd": 0xC0},
                {"bd": 0x30},
            )
        ),
        (lz4_frame(blocks(sound), stored=1), unknown),  # larger than 64 KiB
        (lz4_frame(blocks(sound)), unknown),  # decompresses past 64 KiB
        (lz4_frame(blocks(wrong), stored=1), invalid),
        (lz4_frame(blocks(wrong)), invalid),
    ]
    before = log_bytes(cluster, BOUNDED, 0)
    for index, (payload, code) in enumerate(cases):
        (answer,) = (await produce(cluster, 8, BOUNDED, {0: batch(payload)})).values()
        assert (index, answer.error_code, answer.base_offset) == (index, code, -1)
    assert log_bytes(cluster, BOUNDED, 0) == before
    for payload in [
        lz4_frame(blocks(sound), bd=0x60, stored=1),
        lz4_frame(blocks(sound), bd=0x60),
        lz4_frame([b"".join(sound)], bd=0x60) + lz4_frame([b"more"]),
    ]:
        (answer,) = (await produce(cluster, 8, BOUNDED, {0: batch(payload)})).values()
        assert answer.error_code is ErrorCode.NONE
        assert log_bytes(cluster, BOUNDED, 0) > before
        before = log_bytes(cluster, BOUNDED, 0)


async def test_an_appended_snappy_stream_of_an_old_version_stops_the_read(
    cluster: Cluster,
) -> None:
    """Produce v8 snappy batches of three records, the first two in one chunk, then the
    header of an appended stream, then the third in a chunk, as a 2.7 broker reads them
    (snappy-java 1.1.7.7's ``SnappyInputStream.hasNextChunk``): an appended header of
    version 0 (or -1) throws "incompatible codec version" once the reader needs the third
    record, UNKNOWN_SERVER_ERROR with the records before it sound, INVALID_RECORD with the
    second broken; so does a negative chunk length there. Of version 1 (whatever its
    compatible version), the stream goes on and the batch is written."""
    now = [int(time.time() * 1000)] * 3
    sound, wrong = two_blocks(now)
    header = client_batch([b"a", b"b", b"c"], timestamps=now, codec=2)[:61]

    def batch(payload: bytes) -> bytes:
        return fix_crc(set_field(header + payload, "batch_length", 49 + len(payload)))

    def appended(blocks: list[bytes], version: int, compatible: int = 1) -> bytes:
        second = snappy_in_chunks(blocks[1:])
        return (
            snappy_in_chunks(blocks[:1])
            + second[:8]
            + struct.pack(">ii", version, compatible)
            + second[16:]
        )

    def negative(blocks: list[bytes]) -> bytes:
        return snappy_in_chunks(blocks[:1]) + struct.pack(">i", -5) + b"\0" * 8

    unknown, invalid = ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.INVALID_RECORD
    cases = [
        (appended(sound, 0), unknown),
        (appended(sound, -1), unknown),
        (negative(sound), unknown),
        (appended(wrong, 0), invalid),
        (negative(wrong), invalid),
    ]
    before = log_bytes(cluster, BOUNDED, 0)
    for index, (payload, code) in enumerate(cases):
        (answer,) = (await produce(cluster, 8, BOUNDED, {0: batch(payload)})).values()
        assert (index, answer.error_code, answer.base_offset) == (index, code, -1)
    assert log_bytes(cluster, BOUNDED, 0) == before
    for payload in [appended(sound, 1), appended(sound, 2, 7)]:
        (answer,) = (await produce(cluster, 8, BOUNDED, {0: batch(payload)})).values()
        assert answer.error_code is ErrorCode.NONE
        assert log_bytes(cluster, BOUNDED, 0) > before
        before = log_bytes(cluster, BOUNDED, 0)


async def test_console_producer_logs_refused_sends_as_kafkas_tool(cluster: Cluster) -> None:
    """``kemu console-producer`` to a compacted topic without ``parse.key``: each record
    of the refused batch is logged as ``ErrorLoggingCallback`` logs it through the tools'
    log4j layout, the producer's exception on the next line (class and the broker's
    Produce v8 ``error_message``), and the tool exits 0 as Kafka's does without
    ``--sync``; a keyed line to the same topic is appended."""
    err = io.StringIO()
    argv = ["--bootstrap-server", bootstrap(cluster), "--topic", COMPACTED]

    def run(lines: bytes, *extra: str) -> int:
        return console_producer.main([*argv, *extra], stdin=io.BytesIO(lines), err=err)

    assert await anyio.to_thread.run_sync(run, b"a\nbc\n") == 0
    logged = [m.groupdict() for m in LOGGED_ERROR.finditer(err.getvalue())]
    assert "".join(m.group(0) for m in LOGGED_ERROR.finditer(err.getvalue())) == err.getvalue()
    exception = (
        "org.apache.kafka.common.InvalidRecordException: One or more records have been rejected"
    )
    assert logged == [
        {"topic": COMPACTED, "key": "null", "value": "1 bytes", "exception": exception},
        {"topic": COMPACTED, "key": "null", "value": "2 bytes", "exception": exception},
    ]
    err.seek(0)
    err.truncate()
    before = sum(log_bytes(cluster, COMPACTED, p) for p in (0, 1))
    keyed = await anyio.to_thread.run_sync(
        lambda: run(b"k:v\n", "--property", "parse.key=true", "--property", "key.separator=:")
    )
    assert (keyed, err.getvalue()) == (0, "")
    assert sum(log_bytes(cluster, COMPACTED, p) for p in (0, 1)) > before


@pytest.mark.parametrize(
    ("retries", "attempts"),
    [
        ((), 4),
        (("--producer-property", "retries=0"), 1),
        (("--producer-property", "retries=2"), 3),
        (("--message-send-max-retries", "1", "--retry-backoff-ms", "10"), 2),
    ],
    ids=["default", "property-0", "property-2", "option-1"],
)
async def test_console_producer_retries_a_retriable_error_then_logs_it(
    cluster: Cluster, retries: tuple[str, ...], attempts: int
) -> None:
    """``kemu console-producer`` with acks=all to a partition whose ISR is below
    ``min.insync.replicas`` sends its batch again on NOT_ENOUGH_REPLICAS as often as the
    producer's ``retries`` allow (``--message-send-max-retries``, 3 by default, as
    ``ConsoleProducer``), then logs the record with Kafka's exception and exits 0;
    nothing is written."""
    name = f"short-isr-{attempts}"
    status, err, sink = await console_produce_below_min_isr(
        cluster, name, ["--producer-property", "acks=all", *retries]
    )
    assert status == 0
    logged = [m.groupdict() for m in LOGGED_ERROR.finditer(err)]
    assert logged == [
        {"topic": name, "key": "1 bytes", "value": "1 bytes", "exception": NOT_ENOUGH_REPLICAS}
    ]
    assert console_produces(sink) == attempts
    assert sum(log_bytes(cluster, name, p) for p in (0, 1)) == 0


async def console_produce_below_min_isr(
    cluster: Cluster, name: str, options: list[str]
) -> tuple[int, str, MemorySink]:
    """Create topic ``name`` with ``min.insync.replicas`` 2 (its ISR is one replica here),
    then send it one keyed line with ``kemu console-producer`` and ``options``, its
    brokers traced: the tool's exit status, what it logged, and the trace."""
    async with KafkaAdminClient(bootstrap(cluster)) as admin:
        (created,) = await admin.create_topics([topic(name, {"min.insync.replicas": "2"})])
    assert created.error_code is ErrorCode.NONE
    sink = MemorySink()
    cluster.tracer.add_sink(sink)
    err = io.StringIO()
    argv = ["--bootstrap-server", bootstrap(cluster), "--topic", name]
    argv += ["--property", "parse.key=true", *options]
    status = await anyio.to_thread.run_sync(
        lambda: console_producer.main(argv, stdin=io.BytesIO(b"k\tv\n"), err=err)
    )
    return status, err.getvalue(), sink


def console_produces(sink: MemorySink, client_id: str = "console-producer") -> int:
    """The Produce requests the brokers traced from ``client_id``."""
    return sum(
        1
        for e in sink.of("event", "kafka_request")
        if e.fields["api_key"] == 0 and e.fields["client_id"] == client_id
    )


@pytest.mark.parametrize(
    ("acks", "written", "attempts"),
    [
        (("--producer-property", "acks=all", "--request-required-acks", "1"), True, 1),
        (("--request-required-acks", "all", "--producer-property", "acks=1"), False, 4),
    ],
    ids=["option-1-over-property-all", "option-all-over-property-1"],
)
async def test_console_producer_acks_option_given_wins_over_the_property(
    cluster: Cluster, acks: tuple[str, ...], written: bool, attempts: int
) -> None:
    """``--request-required-acks`` given on the command line wins over ``acks`` given as a
    producer property, either way round (``CommandLineUtils.maybeMergeOptions``): to a
    partition whose ISR is below ``min.insync.replicas``, acks 1 is written with one
    Produce, acks all is refused with NOT_ENOUGH_REPLICAS after the default 3 retries and
    logged."""
    name = f"acks-{attempts}-{len(acks)}-{written}"
    status, err, sink = await console_produce_below_min_isr(
        cluster, name, ["--retry-backoff-ms", "10", *acks]
    )
    assert status == 0
    logged = [m.group("exception") for m in LOGGED_ERROR.finditer(err)]
    assert logged == ([] if written else [NOT_ENOUGH_REPLICAS])
    assert console_produces(sink) == attempts
    assert (sum(log_bytes(cluster, name, p) for p in (0, 1)) > 0) == written


NOT_ENOUGH_REPLICAS = (
    "org.apache.kafka.common.errors.NotEnoughReplicasException: "
    "Messages are rejected since there are fewer in-sync replicas than required."
)


@pytest.mark.parametrize(
    ("codec", "compression"),
    [
        (("--producer-property", "compression.type=gzip"), 0),
        (("--compression-codec", "--producer-property", "compression.type=none"), 1),
        (("--compression-codec", "gzip"), 1),
    ],
    ids=["property-gzip-overridden", "option-without-value", "option-gzip"],
)
async def test_console_producer_compresses_as_the_codec_option_says(
    cluster: Cluster, codec: tuple[str, ...], compression: int
) -> None:
    """``ConsoleProducer.producerProps`` puts ``compression.type`` from
    ``--compression-codec`` (gzip when given without a value) and ``none`` without it,
    whatever the producer properties say: the stored batch has that codec."""
    name = f"codec-{len(codec)}-{compression}"
    async with KafkaAdminClient(bootstrap(cluster)) as admin:
        (created,) = await admin.create_topics([topic(name, {})])
    assert created.error_code is ErrorCode.NONE
    err = io.StringIO()
    argv = ["--bootstrap-server", bootstrap(cluster), "--topic", name, *codec]
    status = await anyio.to_thread.run_sync(
        lambda: console_producer.main(argv, stdin=io.BytesIO(b"a\nb\n"), err=err)
    )
    assert (status, err.getvalue()) == (0, "")
    (stored,) = [first_segment(cluster, name, p) for p in (0, 1) if log_bytes(cluster, name, p) > 0]
    batch = DefaultRecordBatch(bytearray(stored))
    assert batch.validate_crc()
    assert batch.compression_type == compression
    assert [r.value for r in batch] == [b"a", b"b"]


async def test_a_corrupt_message_is_retried_as_kafkas_producer_retries_it(
    cluster: Cluster,
) -> None:
    """CORRUPT_MESSAGE is a ``CorruptRecordException``, a ``RetriableException``: the data
    client sends the batch again as often as ``retries`` allows (``Sender.canRetry``),
    then answers with it; nothing is written."""
    sink = MemorySink()
    cluster.tracer.add_sink(sink)
    sent = client_batch([b"a"])
    broken = set_field(sent, "crc", get_field(sent, "crc") ^ 1)
    config = AdminClientConfig(client_id="corrupt", retry_backoff_ms=10)
    before = log_bytes(cluster, BOUNDED, 0)
    async with KafkaDataClient(bootstrap(cluster), config) as client:
        answer = await client.produce(BOUNDED, 0, broken, retries=2)
    assert answer.error_code is ErrorCode.CORRUPT_MESSAGE
    assert console_produces(sink, "corrupt") == 3
    assert log_bytes(cluster, BOUNDED, 0) == before


async def test_a_compressed_batch_with_misnumbered_records_is_rebuilt(cluster: Cluster) -> None:
    """Records whose offset deltas are not 0..n-1 make Kafka rebuild the batch
    (``validateMessagesAndAssignOffsetsCompressed`` turns ``inPlaceAssignment`` off;
    ``buildRecordsAndAssignOffsets``): the stored batch, read by aiokafka's reader, holds
    the same records at consecutive offsets, gzip, its max timestamp the records'
    largest, its CRC right; the answer's base offset is its first."""
    now = int(time.time() * 1000)
    sent = client_batch(  # offset deltas 0, 0, 2, as some old clients numbered them
        [b"v0", b"v300", b"v200"],
        timestamps=[now, now + 300, now + 200],
        key=b"k",
        codec=1,
        offsets=[0, 0, 2],
        headers=[("h", b"x")],
    )
    (answer,) = (await produce(cluster, 8, BOUNDED, {1: sent})).values()
    assert answer.error_code is ErrorCode.NONE
    stored = first_segment(cluster, BOUNDED, 1)
    at = position = 0
    while position < len(stored):  # the last batch of the segment
        at, position = position, position + 12 + get_field(stored, "batch_length", at=position)
    batch = DefaultRecordBatch(bytearray(stored[at:]))
    assert batch.validate_crc()
    assert (batch.base_offset, batch.compression_type, batch.max_timestamp) == (
        answer.base_offset,
        1,
        now + 300,
    )
    records = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch]
    first = answer.base_offset
    assert records == [
        (first, now, b"k", b"v0", [("h", b"x")]),
        (first + 1, now + 300, b"k", b"v300", [("h", b"x")]),
        (first + 2, now + 200, b"k", b"v200", [("h", b"x")]),
    ]
