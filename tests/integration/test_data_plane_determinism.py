"""Data traffic on the virtual clock: the same seed gives the same trace, byte for byte.

An in-process cluster of two brokers (no Kafka listeners) on the embedded store and the
virtual clock: a topic replicated on both, acks=all produces answered through the real
replica fetcher, a consumer fetch, an idempotent producer. Run twice, the traces (every
send, delivery, store operation, log directory operation and data-plane event) match.
"""

from __future__ import annotations

import io
from pathlib import Path

import anyio
import msgspec

from actors.broker.broker import broker_ref
from actors.runtime.actor import Node
from actors.runtime.clock import VirtualClock, run_virtual
from actors.runtime.tracer import Tracer
from cluster.launch.cluster import Cluster, ClusterSpec
from cluster.store.embedded import EmbeddedStore
from protocol.errors import ErrorCode
from protocol.ids import TopicName
from protocol.kafka_api import CreateTopicsRequestData, CreateTopicsResponseData
from protocol.kafka_data import (
    FetchPartition,
    FetchRequestData,
    FetchResponseData,
    FetchTopic,
    InitProducerIdRequestData,
    InitProducerIdResponseData,
    ProducePartitionData,
    ProduceRequestData,
    ProduceResponseData,
    ProduceTopicData,
)
from protocol.trace import TraceEvent
from tests.support.creation import creatable
from tests.support.record_batches import client_batch, decode_batches

TOPIC = TopicName("events")


def produce_request(records: bytes) -> ProduceRequestData:
    return ProduceRequestData(
        acks=-1,
        timeout_ms=30_000,
        topic_data=(
            ProduceTopicData(
                name=TOPIC, partition_data=(ProducePartitionData(index=0, records=records),)
            ),
        ),
    )


async def traffic(logs: Path) -> tuple[bytes, list[bytes | None]]:
    """The run's trace and what a consumer read at its end."""
    out = io.BytesIO()
    encoder = msgspec.json.Encoder()

    def sink(event: TraceEvent) -> None:
        out.write(encoder.encode(event) + b"\n")

    tracer = Tracer()
    tracer.add_sink(sink)
    clock = VirtualClock()
    store = EmbeddedStore(tracer=tracer, clock=clock)
    spec = ClusterSpec(brokers=2, log_dir=logs, listeners=False, seed=7)
    async with anyio.create_task_group() as tg:
        cluster: Cluster = await tg.start(
            Cluster(spec, tracer=tracer, clock=clock, store=store).run
        )
        assert cluster.network is not None
        client = Node("client", attach=cluster.network.attach, tracer=tracer, clock=clock, seed=7)
        await tg.start(client.run)
        await cluster.wait_ready()
        controller = await cluster.controller_id()
        created = await client.ask(
            broker_ref(controller),
            CreateTopicsRequestData(topics=(creatable(TOPIC, {0: [0, 1]}),), timeout_ms=30_000),
            timeout=60,
        )
        assert isinstance(created, CreateTopicsResponseData)
        granted = await client.ask(
            broker_ref(1), InitProducerIdRequestData(transaction_timeout_ms=60_000), timeout=60
        )
        assert isinstance(granted, InitProducerIdResponseData)
        for i in range(5):
            batch = client_batch(
                [f"v{i}".encode()],
                producer_id=granted.producer_id,
                producer_epoch=0,
                base_sequence=i,
            )
            while True:  # until the leader's metadata and its follower are in place
                answer = await client.ask(broker_ref(0), produce_request(batch), timeout=60)
                assert isinstance(answer, ProduceResponseData)
                code = answer.responses[0].partition_responses[0].error_code
                if code is ErrorCode.NONE:
                    break
                await clock.sleep(0.1)
        fetched = await client.ask(
            broker_ref(0),
            FetchRequestData(
                max_wait_ms=0,
                min_bytes=1,
                topics=(
                    FetchTopic(
                        topic=TOPIC,
                        partitions=(
                            FetchPartition(
                                partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                            ),
                        ),
                    ),
                ),
            ),
            timeout=60,
        )
        assert isinstance(fetched, FetchResponseData)
        records = fetched.responses[0].partitions[0].records
        trace = out.getvalue()  # up to here: the teardown's order is not the traffic's
        client.stop()
        tg.cancel_scope.cancel()
    return trace, [v for d in decode_batches(records) for v in d.values]


def test_data_traffic_traces_identically_for_one_seed(tmp_path: Path) -> None:
    """Two runs of the same produce/replicate/fetch traffic give byte-identical traces."""
    first, read = run_virtual(lambda: traffic(tmp_path / "one"))
    second, _ = run_virtual(lambda: traffic(tmp_path / "two"))
    assert read == [b"v0", b"v1", b"v2", b"v3", b"v4"]
    assert b"high_watermark_moved" in first
    assert first.replace(b"/two/", b"/one/") == second.replace(b"/two/", b"/one/")
