"""Real Kafka clients delete topics on a running 3-broker kemu cluster, unmodified:
kafka-python (DeleteTopics v5: a 2.7 broker has no v6, so no deletion by topic id),
confluent-kafka (v4) and aiokafka (v3); a broker that is not the controller forwards the
request; with delete.topic.enable=false each client gets its version's refusal and nothing
is written.

The clients' successful answers come once the controller's "deletion started"
UpdateMetadata (leader -2) has reached the controller broker's metadata cache, and the
topics then leave the cluster: that part needs the controller's TopicDeletionManager.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from kafka.protocol.admin import (  # type: ignore[import-untyped]
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)

from actors.runtime.tracer import MemorySink, Tracer
from cluster.kafka.client import KafkaAdminClient
from cluster.launch.cluster import Cluster, ClusterSpec
from protocol import zkdata
from protocol.errors import ErrorCode
from protocol.ids import TopicName
from protocol.kafka_api import CreatableTopic
from tests.support.fake_kafka import kp_decode, kp_frame
from tests.support.hosting import hosted_fixture
from tests.support.raw_kafka import exchange
from tests.support.waiting import eventually, in_threads

pytestmark = pytest.mark.asyncio

HOST = "127.0.0.1"
WAIT = 30.0  # seconds any one client session may take


class Running:
    """A running cluster, its trace, and what a test needs to reach it."""

    def __init__(self, cluster: Cluster, sink: MemorySink) -> None:
        self.cluster = cluster
        self.sink = sink

    def bootstrap(self, broker: int) -> str:
        return f"{HOST}:{self.cluster.ports[broker]}"

    async def create(self, *names: str) -> None:
        async with KafkaAdminClient(self.bootstrap(0)) as client:
            results = await client.create_topics(
                [
                    CreatableTopic(name=TopicName(n), num_partitions=2, replication_factor=2)
                    for n in names
                ]
            )
        assert [r.error_code for r in results] == [ErrorCode.NONE] * len(names)

    async def children(self, path: str) -> tuple[str, ...]:
        assert self.cluster.store is not None
        session = await self.cluster.store.open_session(timeout=10.0, name="probe")
        try:
            return await session.children(path)
        finally:
            await session.close()
            session.events.close()

    async def listed(self) -> tuple[TopicName, ...]:
        async with KafkaAdminClient(self.bootstrap(0)) as client:
            return tuple(sorted(await client.list_topics(include_internal=True)))

    def deletes_seen(self) -> set[tuple[str, int]]:
        """(node, version) of every DeleteTopics request a listener received."""
        return {
            (e.node, e.fields["api_version"])
            for e in self.sink.of("event", "kafka_request")
            if e.fields["api_key"] == 20
        }

    def marked_on(self) -> list[str]:
        """The nodes whose broker wrote a deletion marker, one entry per marker."""
        return [e.node for e in self.sink.of("event", "topic_marked_for_deletion")]


async def _running(tmp_path: Path, **config: str) -> AsyncIterator[Running]:
    sink = MemorySink()
    tracer = Tracer()
    tracer.add_sink(sink)
    spec = ClusterSpec(
        brokers=3,
        base_port=0,
        log_dir=tmp_path / "logs",
        config={"zookeeper.session.timeout.ms": "6000", **config},
    )
    async with anyio.create_task_group() as tg:
        cluster: Cluster = await tg.start(Cluster(spec, tracer=tracer).run)
        yield Running(cluster, sink)
        tg.cancel_scope.cancel()


@hosted_fixture()
async def running(tmp_path: Path) -> AsyncIterator[Running]:
    async for r in _running(tmp_path):
        yield r


@hosted_fixture()
async def deletion_disabled(tmp_path: Path) -> AsyncIterator[Running]:
    async for r in _running(tmp_path, **{"delete.topic.enable": "false"}):
        yield r


in_thread = in_threads(WAIT)


def confluent_delete(bootstrap: str, names: list[str]) -> dict[str, Any]:
    """confluent-kafka's delete_topics: each topic's result (None) or its error code."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    client = AdminClient({"bootstrap.servers": bootstrap})
    out: dict[str, Any] = {}
    for name, future in client.delete_topics(names, operation_timeout=20).items():
        try:
            out[name] = future.result(timeout=WAIT)
        except KafkaException as exc:
            out[name] = exc.args[0].code()
    return out


def kafka_python_delete(bootstrap: str, first: str, second: str) -> dict[str, Any]:
    """kafka-python's delete_topics: one topic, another, then an unknown name."""
    from kafka.admin import KafkaAdminClient as KpAdminClient  # type: ignore[import-untyped]
    from kafka.errors import UnknownTopicOrPartitionError  # type: ignore[import-untyped]

    client = KpAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20_000)
    try:
        out: dict[str, Any] = {}
        out["first"] = client.delete_topics([first], timeout_ms=20_000)["topics"]
        out["second"] = client.delete_topics([second], timeout_ms=20_000)["topics"]
        try:
            client.delete_topics(["nope"])
        except UnknownTopicOrPartitionError as exc:
            out["unknown"] = exc
        return out
    finally:
        client.close()


async def aiokafka_delete(bootstrap: str, names: list[str]) -> list[tuple[str, int]]:
    from aiokafka.admin import AIOKafkaAdminClient  # type: ignore[import-untyped]

    client = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20_000)
    with anyio.fail_after(WAIT):
        await client.start()
        try:
            response = await client.delete_topics(names, timeout_ms=20_000)
        finally:
            await client.close()
    return [(t[0], t[1]) for t in response.topic_error_codes]


async def raw_delete(
    running: Running, broker: int, version: int, names: list[str], timeout_ms: int
) -> list[tuple[str, int]]:
    """A DeleteTopics request of ``version`` sent straight to ``broker``'s listener."""
    request = DeleteTopicsRequest(version=version, topic_names=names, timeout_ms=timeout_ms)
    frame = await exchange(HOST, running.cluster.ports[broker], kp_frame(request), timeout=WAIT)
    assert frame, "the broker closed the connection"
    _, body = kp_decode(DeleteTopicsResponse, version, frame)
    return [(r["name"], r["error_code"]) for r in body["responses"]]


# ---------------------------------------------------------------------- deletion


async def test_real_clients_delete_topics_and_the_topics_leave_the_cluster(
    running: Running,
) -> None:
    """Each client deletes its topics and is told NONE, or
    UNKNOWN_TOPIC_OR_PARTITION for a topic that does not exist; afterwards only the kept
    topic is listed, and no topic znode or marker of the deleted ones remains."""
    await running.create("ck", "kp-id", "kp-name", "aio", "kept")
    controller = await running.cluster.controller_id()
    bootstrap = running.bootstrap(next(b for b in range(3) if b != controller))

    confluent = await in_thread(confluent_delete, bootstrap, ["ck", "nope"])
    assert confluent == {"ck": None, "nope": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}

    kp = await in_thread(kafka_python_delete, bootstrap, "kp-id", "kp-name")
    assert [(t["name"], t["error_code"]) for t in kp["first"]] == [("kp-id", 0)]
    assert [(t["name"], t["error_code"]) for t in kp["second"]] == [("kp-name", 0)]
    assert "UnknownTopicOrPartitionError" in repr(kp["unknown"])

    assert await aiokafka_delete(bootstrap, ["aio", "nope"]) == [("aio", 0), ("nope", 3)]

    seen = running.deletes_seen()
    assert {v for _, v in seen} == {3, 4, 5}
    assert {n for n, _ in seen} == {f"broker-{controller}"}  # the clients find the controller
    # Every broker drops the topics from its cache, the controller's first.
    await eventually(running.listed, until=lambda t: t == ("kept",), timeout=20)
    await eventually(
        lambda: running.children(zkdata.TOPICS_PATH), until=lambda t: t == ("kept",), timeout=20
    )
    await eventually(
        lambda: running.children(zkdata.DELETE_TOPICS_PATH), until=lambda t: t == (), timeout=20
    )


async def test_a_broker_that_is_not_the_controller_forwards_delete_topics(
    running: Running,
) -> None:
    """DeleteTopics sent to a broker that is not the controller is answered as the
    controller answers it (never NOT_CONTROLLER): the marker is written by the controller's
    broker. With timeout 0 the answer is REQUEST_TIMED_OUT at once; with a timeout it
    comes once the topic has left the controller broker's cache. Either way the topic goes."""
    await running.create("now", "later")
    controller = await running.cluster.controller_id()
    other = next(b for b in range(3) if b != controller)

    assert await raw_delete(running, other, 4, ["now", "nope"], timeout_ms=0) == [
        ("now", ErrorCode.REQUEST_TIMED_OUT),
        ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert running.marked_on() == [f"broker-{controller}"]
    assert running.deletes_seen() == {(f"broker-{other}", 4)}

    assert await raw_delete(running, other, 0, ["later"], timeout_ms=20_000) == [
        ("later", ErrorCode.NONE)
    ]
    assert running.marked_on() == [f"broker-{controller}"] * 2
    status = await running.cluster.status(controller)
    assert status is not None
    assert "later" not in status.topics

    async def controller_topics() -> tuple[str, ...]:
        status = await running.cluster.status(controller)
        return () if status is None else tuple(status.topics)

    # The topic answered REQUEST_TIMED_OUT is deleted all the same.
    await eventually(controller_topics, until=lambda topics: "now" not in topics, timeout=20)


# ---------------------------------------------------------------------- deletion disabled


async def test_with_deletion_disabled_every_client_is_refused_and_nothing_is_written(
    deletion_disabled: Running,
) -> None:
    """delete.topic.enable=false: TOPIC_DELETION_DISABLED for the clients of v3 and later
    (confluent-kafka v4, kafka-python v5, aiokafka v3), INVALID_REQUEST for a v2 request;
    no marker is written and the topic stays."""
    running = deletion_disabled
    await running.create("stays")
    bootstrap = running.bootstrap(0)
    disabled = ErrorCode.TOPIC_DELETION_DISABLED

    assert await in_thread(confluent_delete, bootstrap, ["stays"]) == {"stays": disabled}

    def kafka_python() -> str:
        from kafka.admin import KafkaAdminClient as KpAdminClient
        from kafka.errors import TopicDeletionDisabledError

        client = KpAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20_000)
        try:
            with pytest.raises(TopicDeletionDisabledError) as refused:
                client.delete_topics(["stays"])
            return repr(refused.value)
        finally:
            client.close()

    assert "error_code=73" in await in_thread(kafka_python)
    assert await aiokafka_delete(bootstrap, ["stays"]) == [("stays", disabled)]
    assert await raw_delete(running, 0, 2, ["stays"], timeout_ms=1000) == [
        ("stays", ErrorCode.INVALID_REQUEST)
    ]

    assert running.marked_on() == []
    assert await running.children(zkdata.DELETE_TOPICS_PATH) == ()
    assert await running.listed() == ("stays",)
