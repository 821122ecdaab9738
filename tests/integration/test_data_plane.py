"""Produce, Fetch, ListOffsets, OffsetForLeaderEpoch and InitProducerId at the partition
leader (Kafka's ReplicaManager and Partition), against a real in-process cluster on the
embedded store.

The requests are the typed values the broker's Kafka listener hands it; batches are built
by a real client's code (``tests.support.record_batches``). Where a test plays the
follower itself, the real follower's fetches are dropped by a network rule and the test
sends the leader the very Fetch a replica fetcher sends (``replica_id`` = the follower's
broker id), which is what moves the high watermark.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from actors.broker.broker import broker_ref
from cluster.network.faults import Drop, Match
from protocol import zkdata
from protocol.errors import ErrorCode
from protocol.ids import TopicName
from protocol.kafka_api import (
    CreatableTopic,
    CreateTopicsRequestData,
    CreateTopicsResponseData,
    DeleteTopicsRequestData,
    TopicConfig,
)
from protocol.kafka_data import (
    DEBUG_REPLICA_ID,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    FetchPartition,
    FetchPartitionData,
    FetchRequestData,
    FetchResponseData,
    FetchTopic,
    InitProducerIdRequestData,
    InitProducerIdResponseData,
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequestData,
    ListOffsetsResponseData,
    ListOffsetsTopic,
    OffsetForLeaderEpochRequestData,
    OffsetForLeaderEpochResponseData,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
    ProducePartitionData,
    ProducePartitionResponse,
    ProduceRequestData,
    ProduceResponseData,
    ProduceTopicData,
)
from tests.support.creation import Harness, creatable, metadata_view, running_cluster
from tests.support.hosting import hosted_fixture
from tests.support.record_batches import client_batch, decode_batches
from tests.support.waiting import eventually

pytestmark = pytest.mark.asyncio

LONG = 20_000


@hosted_fixture()
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    async with running_cluster(tmp_path / "logs", brokers=2) as h:
        yield h


def silence_follower(h: Harness, follower: int = 1, leader: int = 0) -> None:
    """Drop every fetch and epoch request of ``follower``'s replica fetchers to ``leader``."""
    assert h.cluster.network is not None
    h.cluster.network.add_rule(
        Drop(
            match=Match.where(
                src=f"broker-{follower}",
                dst=f"broker-{leader}",
                types=(FetchRequestData, OffsetForLeaderEpochRequestData),
            )
        )
    )


async def make_topic(
    h: Harness, name: str, replicas: list[int], config: dict[str, str] | None = None
) -> None:
    """One partition on ``replicas`` (the first leads), then every broker's metadata
    shows its leader."""
    spec = creatable(name, {0: replicas})
    topic = CreatableTopic(
        name=spec.name,
        num_partitions=-1,
        replication_factor=-1,
        assignments=spec.assignments,
        configs=tuple(TopicConfig(name=k, value=v) for k, v in (config or {}).items()),
    )
    controller = await h.cluster.controller_id()
    reply = await h.client.ask(
        broker_ref(controller), CreateTopicsRequestData(topics=(topic,), timeout_ms=LONG)
    )
    assert isinstance(reply, CreateTopicsResponseData)
    assert reply.topics[0].error_code is ErrorCode.NONE
    h.topics[name] = {0: replicas}

    async def leaders() -> list[int]:
        views = [await metadata_view(h, b) for b in (0, 1)]
        return [view.get((name, 0), (-1, (), ()))[0] for view in views]

    await eventually(leaders, until=lambda found: found == [replicas[0]] * 2, timeout=30)


async def produce(
    h: Harness,
    name: str,
    records: bytes,
    *,
    acks: int = 1,
    to: int = 0,
    timeout_ms: int = LONG,
) -> ProducePartitionResponse:
    request = ProduceRequestData(
        acks=acks,
        timeout_ms=timeout_ms,
        topic_data=(
            ProduceTopicData(
                name=TopicName(name),
                partition_data=(ProducePartitionData(index=0, records=records),),
            ),
        ),
    )
    reply = await h.client.ask(broker_ref(to), request, timeout=30)
    assert isinstance(reply, ProduceResponseData)
    return reply.responses[0].partition_responses[0]


async def fetch(
    h: Harness,
    name: str,
    offset: int,
    *,
    replica_id: int = -1,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    to: int = 0,
    version: int = 12,
) -> FetchPartitionData:
    request = FetchRequestData(
        version=version,
        replica_id=replica_id,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        topics=(
            FetchTopic(
                topic=TopicName(name),
                partitions=(
                    FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20),
                ),
            ),
        ),
    )
    reply = await h.client.ask(broker_ref(to), request, timeout=30)
    assert isinstance(reply, FetchResponseData)
    assert reply.session_id == 0
    return reply.responses[0].partitions[0]


async def list_offset(
    h: Harness, name: str, timestamp: int, *, replica_id: int = -1, version: int = 5, to: int = 0
) -> ListOffsetsPartitionResponse:
    request = ListOffsetsRequestData(
        version=version,
        replica_id=replica_id,
        topics=(
            ListOffsetsTopic(
                name=TopicName(name),
                partitions=(ListOffsetsPartition(partition_index=0, timestamp=timestamp),),
            ),
        ),
    )
    reply = await h.client.ask(broker_ref(to), request, timeout=30)
    assert isinstance(reply, ListOffsetsResponseData)
    return reply.topics[0].partitions[0]


def values(data: FetchPartitionData) -> list[bytes | None]:
    return [v for batch in decode_batches(data.records) for v in batch.values]


async def test_produce_then_fetch_round_trip(harness: Harness) -> None:
    """acks=1 appends get consecutive offsets at the leader; a consumer reads them back
    with the high watermark, last stable offset and log start; a follower's broker
    answers NOT_LEADER_OR_FOLLOWER and writes nothing."""
    h = harness
    await make_topic(h, "orders", [0])
    first = await produce(h, "orders", client_batch([b"a", b"b"]))
    second = await produce(h, "orders", client_batch([b"c"]))
    assert (first.error_code, first.base_offset, second.base_offset) == (ErrorCode.NONE, 0, 2)
    got = await fetch(h, "orders", 0)
    assert values(got) == [b"a", b"b", b"c"]
    assert (got.high_watermark, got.last_stable_offset, got.log_start_offset) == (3, 3, 0)
    elsewhere = await produce(h, "orders", client_batch([b"x"]), to=1)
    assert elsewhere.error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (await fetch(h, "orders", 3)).records == b""


async def test_bad_requests_get_their_error_and_change_nothing(harness: Harness) -> None:
    """Unknown topic, acks=2, a corrupt batch and a fetch past the log end each answer
    their Kafka code; the log is unchanged afterwards."""
    h = harness
    await make_topic(h, "bad", [0])
    assert (await produce(h, "nope", client_batch([b"a"]))).error_code is (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    assert (await produce(h, "bad", client_batch([b"a"]), acks=2)).error_code is (
        ErrorCode.INVALID_REQUIRED_ACKS
    )
    corrupt = bytearray(client_batch([b"a"]))
    corrupt[-1] ^= 1
    assert (await produce(h, "bad", bytes(corrupt))).error_code is ErrorCode.CORRUPT_MESSAGE
    assert (await fetch(h, "bad", 5)).error_code is ErrorCode.OFFSET_OUT_OF_RANGE
    latest = await list_offset(h, "bad", LATEST_TIMESTAMP)
    assert (latest.error_code, latest.offset) == (ErrorCode.NONE, 0)


async def test_acks_all_waits_for_the_follower_and_consumers_see_only_below_hw(
    harness: Harness,
) -> None:
    """With the ISR {0, 1}, an acks=all produce is answered only once the follower has
    fetched past its records (the high watermark passed them); until then consumers see
    nothing of it, and a follower sees it up to the log end."""
    h = harness
    silence_follower(h)
    await make_topic(h, "acked", [0, 1])
    answer: list[ProducePartitionResponse] = []

    async def producer() -> None:
        answer.append(await produce(h, "acked", client_batch([b"a", b"b"]), acks=-1))

    async with anyio.create_task_group() as tg:
        tg.start_soon(producer)
        await eventually(lambda: _leo(h, "acked"), until=lambda leo: leo == 2, timeout=10)
        assert answer == []
        assert (await fetch(h, "acked", 0)).records == b""  # above the high watermark
        follower = await fetch(h, "acked", 0, replica_id=1)  # a follower reads to the LEO
        assert values(follower) == [b"a", b"b"]
        assert follower.high_watermark == 0
        assert answer == []
        caught_up = await fetch(h, "acked", 2, replica_id=1)
        assert caught_up.records == b""
    assert answer[0].error_code is ErrorCode.NONE
    assert answer[0].base_offset == 0
    consumer = await fetch(h, "acked", 0)
    assert (values(consumer), consumer.high_watermark) == ([b"a", b"b"], 2)


async def _leo(h: Harness, name: str) -> int:
    return (await list_offset(h, name, LATEST_TIMESTAMP, replica_id=-2)).offset


async def offsets_before(
    h: Harness, name: str, timestamp: int, most: int, *, replica_id: int = -1, to: int = 0
) -> ListOffsetsPartitionResponse:
    """ListOffsets v0: up to ``most`` offsets before ``timestamp``."""
    asked = ListOffsetsPartition(partition_index=0, timestamp=timestamp, max_num_offsets=most)
    request = ListOffsetsRequestData(
        version=0,
        replica_id=replica_id,
        topics=(ListOffsetsTopic(name=TopicName(name), partitions=(asked,)),),
    )
    reply = await h.client.ask(broker_ref(to), request, timeout=30)
    assert isinstance(reply, ListOffsetsResponseData)
    return reply.topics[0].partitions[0]


async def test_list_offsets_v0_caps_a_consumers_offsets_at_the_high_watermark(
    harness: Harness,
) -> None:
    """``Partition.legacyFetchOffsetsForTimestamp``: a consumer's offsets above the high
    watermark are replaced by it; a debugging consumer (-2) gets the log end, from the
    follower too; a consumer asking the follower is NOT_LEADER_OR_FOLLOWER."""
    h = harness
    silence_follower(h)
    await make_topic(h, "before", [0, 1])
    assert (await produce(h, "before", client_batch([b"a", b"b", b"c"]))).base_offset == 0
    consumer = await offsets_before(h, "before", LATEST_TIMESTAMP, 5)
    # the log end (3) becomes the high watermark (0), ahead of the segment's base, also 0
    assert (consumer.error_code, consumer.old_style_offsets) == (ErrorCode.NONE, (0, 0))
    debug = await offsets_before(h, "before", LATEST_TIMESTAMP, 5, replica_id=DEBUG_REPLICA_ID)
    assert debug.old_style_offsets == (3, 0)
    assert (await offsets_before(h, "before", EARLIEST_TIMESTAMP, 5)).old_style_offsets == (0,)
    assert (await offsets_before(h, "before", LATEST_TIMESTAMP, 0)).old_style_offsets == ()
    negative = await offsets_before(h, "before", LATEST_TIMESTAMP, -1)
    assert negative.error_code is ErrorCode.UNKNOWN_SERVER_ERROR
    follower = await offsets_before(h, "before", LATEST_TIMESTAMP, 5, to=1)
    assert follower.error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    from_follower = await offsets_before(
        h, "before", EARLIEST_TIMESTAMP, 5, replica_id=DEBUG_REPLICA_ID, to=1
    )
    assert (from_follower.error_code, from_follower.old_style_offsets) == (ErrorCode.NONE, (0,))
    unknown = await offsets_before(h, "nope", LATEST_TIMESTAMP, 1)
    assert unknown.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_old_fetches_of_a_zstd_topic_or_without_down_conversion_are_refused(
    harness: Harness,
) -> None:
    """``KafkaApis.maybeConvertFetchedData``: before Fetch v10 a topic whose
    ``compression.type`` is zstd is UNSUPPORTED_COMPRESSION_TYPE; before v4 a consumer's
    records of a topic with ``message.downconversion.enable=false`` are
    UNSUPPORTED_VERSION, a follower's are not, nor an empty read."""
    h = harness
    await make_topic(h, "zstd", [0], {"compression.type": "zstd"})
    assert (await produce(h, "zstd", client_batch([b"a"]))).base_offset == 0
    assert (await fetch(h, "zstd", 0, version=9)).error_code is (
        ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    )
    assert values(await fetch(h, "zstd", 0, version=10)) == [b"a"]
    await make_topic(h, "kept", [0], {"message.downconversion.enable": "false"})
    assert (await fetch(h, "kept", 0, version=3)).error_code is ErrorCode.NONE  # nothing yet
    assert (await produce(h, "kept", client_batch([b"b"]))).base_offset == 0
    refused = await fetch(h, "kept", 0, version=3)
    assert (refused.error_code, refused.high_watermark) == (ErrorCode.UNSUPPORTED_VERSION, -1)
    assert values(await fetch(h, "kept", 0, version=3, replica_id=1)) == [b"b"]
    assert values(await fetch(h, "kept", 0, version=4)) == [b"b"]


async def test_acks_all_times_out_without_the_follower_and_keeps_the_write(
    harness: Harness,
) -> None:
    """A follower that never fetches lets an acks=all produce time out
    (REQUEST_TIMED_OUT); the records stay in the leader's log."""
    h = harness
    silence_follower(h)
    await make_topic(h, "slow", [0, 1])
    answer = await produce(h, "slow", client_batch([b"a"]), acks=-1, timeout_ms=200)
    assert answer.error_code is ErrorCode.REQUEST_TIMED_OUT
    assert await _leo(h, "slow") == 1


async def test_min_insync_replicas_refuses_acks_all_before_the_append(harness: Harness) -> None:
    """With min.insync.replicas above the ISR size, acks=all is NOT_ENOUGH_REPLICAS and
    nothing is written; acks=1 is not concerned."""
    h = harness
    await make_topic(h, "guarded", [0, 1], {"min.insync.replicas": "3"})
    refused = await produce(h, "guarded", client_batch([b"a"]), acks=-1)
    assert refused.error_code is ErrorCode.NOT_ENOUGH_REPLICAS
    assert await _leo(h, "guarded") == 0
    assert (await produce(h, "guarded", client_batch([b"a"]), acks=1)).base_offset == 0


async def test_a_parked_fetch_wakes_on_append(harness: Harness) -> None:
    """A consumer fetch at the log end with max_wait_ms waits, and is answered with the
    records as soon as a produce makes them visible, long before its wait is over."""
    h = harness
    await make_topic(h, "waiting", [0])
    got: list[FetchPartitionData] = []

    async def consumer() -> None:
        got.append(await fetch(h, "waiting", 0, max_wait_ms=20_000))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(consumer)
            await eventually(lambda: _parked(h), until=lambda parked: parked >= 1, timeout=10)
            assert got == []
            await produce(h, "waiting", client_batch([b"hello"]))
    assert values(got[0]) == [b"hello"]


async def _parked(h: Harness) -> int:
    return len(h.sink.of("event", "data_request_parked"))


async def test_idempotent_producer_duplicates_and_gaps(harness: Harness) -> None:
    """InitProducerId grants ids from a block reserved in /latest_producer_id_block; a
    retried batch answers its original offset, a sequence gap is
    OUT_OF_ORDER_SEQUENCE_NUMBER."""
    h = harness
    await make_topic(h, "idem", [0])
    granted = await h.client.ask(
        broker_ref(0), InitProducerIdRequestData(transaction_timeout_ms=60_000), timeout=30
    )
    assert isinstance(granted, InitProducerIdResponseData)
    assert (granted.error_code, granted.producer_epoch) == (ErrorCode.NONE, 0)
    other = await h.client.ask(
        broker_ref(1), InitProducerIdRequestData(transaction_timeout_ms=60_000), timeout=30
    )
    assert isinstance(other, InitProducerIdResponseData)
    assert other.producer_id != granted.producer_id
    data, _ = await h.probe.get(zkdata.LATEST_PRODUCER_ID_BLOCK_PATH)
    assert zkdata.ProducerIdBlock.decode(data).block_end == 1999  # two blocks reserved
    pid = granted.producer_id

    def batch(values: list[bytes], sequence: int) -> bytes:
        return client_batch(values, producer_id=pid, producer_epoch=0, base_sequence=sequence)

    assert (await produce(h, "idem", batch([b"a", b"b"], 0), acks=-1)).base_offset == 0
    assert (await produce(h, "idem", batch([b"c"], 2), acks=-1)).base_offset == 2
    retried = await produce(h, "idem", batch([b"a", b"b"], 0), acks=-1)
    assert (retried.error_code, retried.base_offset) == (ErrorCode.NONE, 0)
    gap = await produce(h, "idem", batch([b"d"], 9), acks=-1)
    assert gap.error_code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert values(await fetch(h, "idem", 0)) == [b"a", b"b", b"c"]


async def test_list_offsets_and_offset_for_leader_epoch(harness: Harness) -> None:
    """ListOffsets answers the log start, the high watermark and the first record at or
    after a timestamp; OffsetForLeaderEpoch the end of the leader's epoch (its log end)."""
    h = harness
    await make_topic(h, "offsets", [0])
    await produce(h, "offsets", client_batch([b"a", b"b"], timestamps=[1000, 2000]))
    await produce(h, "offsets", client_batch([b"c"], timestamps=[3000]))
    assert (await list_offset(h, "offsets", EARLIEST_TIMESTAMP)).offset == 0
    assert (await list_offset(h, "offsets", LATEST_TIMESTAMP)).offset == 3
    found = await list_offset(h, "offsets", 1500)
    assert (found.offset, found.timestamp, found.leader_epoch) == (1, 2000, 0)
    assert (await list_offset(h, "offsets", 9000)).offset == -1
    reply = await h.client.ask(
        broker_ref(0),
        OffsetForLeaderEpochRequestData(
            replica_id=1,
            topics=(
                OffsetForLeaderTopic(
                    topic=TopicName("offsets"),
                    partitions=(OffsetForLeaderPartition(partition=0, leader_epoch=0),),
                ),
            ),
        ),
        timeout=30,
    )
    assert isinstance(reply, OffsetForLeaderEpochResponseData)
    result = reply.topics[0].partitions[0]
    assert (result.error_code, result.leader_epoch, result.end_offset) == (ErrorCode.NONE, 0, 3)


async def test_a_restarted_broker_keeps_its_records_and_offsets_continue(
    harness: Harness,
) -> None:
    """After a graceful restart the leader's log is reopened: its records are read back
    and the next produce continues at the log end."""
    h = harness
    await make_topic(h, "durable", [0])
    await produce(h, "durable", client_batch([b"a", b"b"]))
    h.cluster.stop_broker(0)
    assert await h.cluster.wait_stopped(0, timeout=30)
    await h.cluster.start_broker(0)

    async def offset() -> ProducePartitionResponse:
        return await produce(h, "durable", client_batch([b"c"]))

    answer = await eventually(offset, until=lambda r: r.error_code is ErrorCode.NONE, timeout=30)
    assert answer.base_offset == 2
    assert values(await fetch(h, "durable", 0)) == [b"a", b"b", b"c"]


async def test_deleting_a_topic_with_records_renames_its_log(harness: Harness) -> None:
    """A topic with records is deleted as an empty one: its log directory, segment and
    all, is renamed ``-delete``."""
    h = harness
    await make_topic(h, "gone", [0])
    await produce(h, "gone", client_batch([b"a"]))
    controller = await h.cluster.controller_id()
    await h.client.ask(
        broker_ref(controller),
        DeleteTopicsRequestData(topics=(TopicName("gone"),), timeout_ms=LONG),
        timeout=30,
    )
    broker_dir = h.logs / "broker-0"

    def renamed() -> list[Path]:
        return [d for d in broker_dir.rglob("gone-0.*-delete") if d.is_dir()]

    async def probe() -> list[Path]:
        return renamed()

    found = await eventually(probe, until=bool, timeout=30)
    assert (found[0] / "00000000000000000000.log").stat().st_size > 0
    assert not [d for d in broker_dir.rglob("gone-0") if d.is_dir()]


async def test_the_follower_replicates_and_acks_all_completes(harness: Harness) -> None:
    """With the follower's replica fetcher running, acks=all is answered once it has the
    records; the follower's log then holds them at the same offsets."""
    h = harness
    await make_topic(h, "replicated", [0, 1])
    answer = await produce(h, "replicated", client_batch([b"a", b"b"]), acks=-1)
    assert (answer.error_code, answer.base_offset) == (ErrorCode.NONE, 0)
    copy = await fetch(h, "replicated", 0, replica_id=-2, to=1)  # a debugging read of broker 1
    assert values(copy) == [b"a", b"b"]
    assert [b.batch.partition_leader_epoch for b in decode_batches(copy.records)] == [0]


async def test_a_new_leader_below_its_epoch_start_has_no_latest_offset(tmp_path: Path) -> None:
    """Broker 2 stops fetching; record a reaches the leader (0) and follower 1, but the
    high watermark stays at 0 (broker 2 is still in the ISR). Broker 0 stops: broker 1
    leads from offset 1, its high watermark 0 below that start. A consumer's latest
    offset, and a timestamp with no record below the high watermark, are then
    OFFSET_NOT_AVAILABLE at v5 and LEADER_NOT_AVAILABLE before (Partition.
    fetchOffsetForTimestamp, KafkaApis.handleListOffsetRequestV1AndAbove); the earliest
    offset is still answered."""
    async with running_cluster(tmp_path / "logs", brokers=3) as h:
        await make_topic(h, "lag", [0, 1, 2])
        silence_follower(h, follower=2, leader=0)
        silence_follower(h, follower=2, leader=1)
        assert (await produce(h, "lag", client_batch([b"a"]))).error_code is ErrorCode.NONE

        async def on_broker_1() -> list[bytes | None]:
            return values(await fetch(h, "lag", 0, replica_id=DEBUG_REPLICA_ID, to=1))

        await eventually(on_broker_1, until=lambda got: got == [b"a"], timeout=30)
        h.cluster.stop_broker(0)
        assert await h.cluster.wait_stopped(0, timeout=30)

        async def leader() -> int:
            return (await metadata_view(h, 1)).get(("lag", 0), (-1, (), ()))[0]

        await eventually(leader, until=lambda found: found == 1, timeout=30)

        async def answer(timestamp: int, version: int) -> tuple[ErrorCode, int]:
            got = await list_offset(h, "lag", timestamp, version=version, to=1)
            return got.error_code, got.offset

        unavailable = (ErrorCode.OFFSET_NOT_AVAILABLE, -1)
        assert await answer(LATEST_TIMESTAMP, 5) == unavailable
        assert await answer(0, 5) == unavailable  # record a is above the high watermark
        assert await answer(LATEST_TIMESTAMP, 1) == (ErrorCode.LEADER_NOT_AVAILABLE, -1)
        assert await answer(0, 4) == (ErrorCode.LEADER_NOT_AVAILABLE, -1)
        assert await answer(EARLIEST_TIMESTAMP, 5) == (ErrorCode.NONE, 0)
