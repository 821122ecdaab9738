"""A request for more replicas than kemu can hold is refused at once, through real clients,
and the cluster keeps answering.

Kafka 2.7 would build the whole assignment of ``NewTopic('dos', 2147483647, 1)`` before
looking at its size; in kemu every broker shares one event loop, so that would freeze the
cluster. kemu refuses it before any assignment is built, with POLICY_VIOLATION and a
message naming ``kemu.max.replicas.per.request`` (docs/limits.md), and every broker
answers Metadata within 100 ms while and after it does.
"""

from __future__ import annotations

import gc
import socket
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from kafka.admin import KafkaAdminClient as KpAdminClient  # type: ignore[import-untyped]

from cluster.kafka.client import KafkaAdminClient
from cluster.launch.cluster import Cluster
from protocol.errors import ErrorCode
from protocol.ids import TopicName
from protocol.kafka_api import CreatableTopic
from tests.support.hosting import hosted_fixture
from tests.support.kemu_child import metadata_round_trip
from tests.support.topics_harness import STORE, WIRE, Harness, running_harness
from tests.support.waiting import in_threads

pytestmark = pytest.mark.asyncio

HOST = "127.0.0.1"
WAIT = 30.0  # seconds any one client call may take
HUGE = 2**31 - 1  # the largest partition count the protocol can carry
PROMPT = 0.1  # seconds every broker must answer Metadata in, during and after


@hosted_fixture()
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    """A running 3-broker cluster on the embedded store, with its listeners."""
    async for running in running_harness(tmp_path, None):
        yield running


in_thread = in_threads(WAIT)


class MetadataProbe:
    """Asks every broker for Metadata, one after the other on a connection each, from a
    thread of its own (so a frozen event loop shows as a slow answer), until stopped; then
    one more round, so "after" is measured too. ``worst`` is the slowest answer seen."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self.worst = 0.0
        self.rounds = 0
        self._stop = threading.Event()

    def run(self) -> None:
        sockets = [socket.create_connection((HOST, port), timeout=WAIT) for port in self.ports]
        try:
            correlation = 0
            while True:
                last = self._stop.is_set()
                for sock in sockets:
                    correlation += 1
                    self.worst = max(self.worst, metadata_round_trip(sock, correlation))
                self.rounds += 1
                if last:
                    return
        finally:
            for sock in sockets:
                sock.close()

    def stop(self) -> None:
        self._stop.set()


@asynccontextmanager
async def probing(cluster: Cluster) -> AsyncIterator[MetadataProbe]:
    """A ``MetadataProbe`` of every broker, running for the duration of the block.

    The cluster shares this process with the whole test session, whose heap is far larger
    than a ``kemu up`` process's: one full collection of it holds the GIL, stalling every
    thread (the cluster's loop, the client's, the probe's) for hundreds of milliseconds,
    which is the test runner's pause, not the cluster's. So the heap the session built
    before the block is frozen for its duration (``gc.freeze``); what the cluster and the
    clients allocate meanwhile is still collected as usual."""
    probe = MetadataProbe([cluster.ports[b] for b in sorted(cluster.ports)])
    gc.collect()
    gc.freeze()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(in_thread, probe.run)
            try:
                yield probe
            finally:
                probe.stop()
    finally:
        gc.unfreeze()


def kafka_python_create(bootstrap: str, partitions: int, validate_only: bool) -> tuple[int, str]:
    """kafka-python's create_topics of ``dos`` (RF 1): the error code and message of its
    one result."""
    client = KpAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        response = client.create_topics(
            {"dos": {"num_partitions": partitions, "replication_factor": 1}},
            validate_only=validate_only,
            raise_errors=False,
        )
    finally:
        client.close()
    (result,) = response["topics"]
    return int(result["error_code"]), str(result["error_message"])


def kafka_python_add_partitions(bootstrap: str, topic: str, count: int) -> tuple[int, str]:
    """kafka-python's create_partitions taking ``topic`` to ``count`` partitions: the error
    code and message of its one result."""
    client = KpAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        response = client.create_partitions({topic: count}, raise_errors=False)
    finally:
        client.close()
    (result,) = response.results
    return int(result.error_code), str(result.error_message)


async def create_small(harness: Harness, name: str) -> None:
    async with KafkaAdminClient(harness.bootstrap) as client:
        (result,) = await client.create_topics(
            [CreatableTopic(name=TopicName(name), num_partitions=1, replication_factor=3)]
        )
    assert result.error_code == ErrorCode.NONE


async def refused_at_once(
    harness: Harness, broker: int, call: Callable[..., tuple[int, str]], *args: object
) -> str:
    """Runs the client ``call`` against ``broker``'s listener while a ``MetadataProbe``
    runs; checks the answer is POLICY_VIOLATION naming the limit, every broker answered
    Metadata within ``PROMPT`` during and after, and nothing was written. Returns the
    message."""
    assert harness.cluster is not None
    before = await harness.snapshot()
    async with probing(harness.cluster) as probe:
        code, message = await in_thread(call, f"{HOST}:{harness.cluster.ports[broker]}", *args)
    assert code == ErrorCode.POLICY_VIOLATION, message
    assert "kemu.max.replicas.per.request" in message
    assert probe.rounds >= 2
    assert probe.worst < PROMPT, f"a broker took {probe.worst * 1000:.0f} ms to answer"
    assert await harness.snapshot() == before
    return message


@pytest.mark.parametrize("validate_only", [True, False], ids=["validate-only", "create"])
async def test_a_topic_of_two_billion_partitions_is_refused_at_once(
    harness: Harness, validate_only: bool
) -> None:
    """kafka-python's CreateTopics of 2^31-1 partitions (validate-only or not), sent to a
    broker that forwards it to the controller, gets POLICY_VIOLATION naming the limit;
    nothing is written, and every broker answers Metadata within 100 ms throughout."""
    message = await refused_at_once(harness, 1, kafka_python_create, HUGE, validate_only)
    assert f"{HUGE} requested" in message


async def test_adding_two_billion_partitions_is_refused_at_once(harness: Harness) -> None:
    """kafka-python's CreatePartitions taking a 1-partition topic (RF 3) to 2^31-1 gets
    POLICY_VIOLATION naming the limit; nothing is written, and every broker answers
    Metadata within 100 ms throughout."""
    await create_small(harness, "grow")
    message = await refused_at_once(harness, 2, kafka_python_add_partitions, "grow", HUGE)
    assert f"{(HUGE - 1) * 3} requested" in message


@pytest.mark.parametrize("via", [WIRE, STORE])
async def test_kafka_topics_create_of_two_billion_partitions_is_refused(
    harness: Harness, via: str
) -> None:
    """``kemu topics --create --partitions 2147483647`` is refused on both of its paths
    (CreateTopics, and the ``--zookeeper`` path that assigns in the command itself), with
    one error line naming the limit, a non-zero exit, and nothing written."""
    before = await harness.snapshot()
    result = await harness.topics(
        "--create",
        "--topic",
        "dos",
        "--partitions",
        str(HUGE),
        "--replication-factor",
        "1",
        via=via,
    )
    assert result.rc != 0
    # TopicCommand prints its one error line on stdout.
    (line,) = result.lines
    assert line.startswith("Error while executing topic command : Excessively large number")
    assert "kemu.max.replicas.per.request" in line
    assert await harness.snapshot() == before
