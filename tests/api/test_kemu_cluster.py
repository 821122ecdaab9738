"""``KemuCluster``, every broker in this process: real clients produce and consume through
it, its broker commands are seen by a client's metadata, its errors are one
``KemuClusterError`` that changes nothing, and closing it leaves no thread, port or
temporary directory behind. Sync code and async code (``async with``) alike."""

from __future__ import annotations

import asyncio
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # type: ignore[import-untyped]
from aiokafka import TopicPartition as AioTopicPartition

from cluster import AsyncKemuCluster, KemuCluster, KemuClusterError
from cluster.launch.ports import bindable
from protocol.errors import ErrorCode
from tests.support.clients import (
    confluent_brokers,
    confluent_consume,
    confluent_leaders,
    confluent_produce,
    kafka_python_consume,
    kafka_python_produce,
)

SESSION_MS = 2000  # zookeeper.session.timeout.ms: a killed or paused broker goes in ~2 s
FAST = {"zookeeper.session.timeout.ms": SESSION_MS}


def kemu_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("kemu-cluster")}


def test_kafka_python_and_confluent_kafka_produce_and_consume(tmp_path: Path) -> None:
    """In one ``with`` line: a three-broker cluster whose ``create_topic`` returns with
    every partition led on every broker; kafka-python's records are read back by
    confluent-kafka and the other way round."""
    with KemuCluster(brokers=3, log_dir=tmp_path) as cluster:
        assert cluster.broker_ids == (0, 1, 2)
        assert len(cluster.bootstrap_servers.split(",")) == 3
        assert cluster.zookeeper_connect is None
        assert cluster.controller_id() in cluster.broker_ids
        cluster.create_topic("orders", partitions=3, replication_factor=3)
        for broker in cluster.broker_ids:  # each broker alone already knows every leader
            leaders = confluent_leaders(cluster.address_of(broker), "orders")
            assert sorted(leaders) == [0, 1, 2]
            assert all(leader in cluster.broker_ids for leader in leaders.values())

        sent = [f"kp-{i}".encode() for i in range(20)]
        kafka_python_produce(cluster.bootstrap_servers, "orders", sent)
        assert sorted(confluent_consume(cluster.bootstrap_servers, "orders", 3, 20)) == sorted(sent)

        cluster.create_topic("events", partitions=2, replication_factor=2)
        sent = [f"ck-{i}".encode() for i in range(20)]
        confluent_produce(cluster.bootstrap_servers, "events", sent)
        assert sorted(kafka_python_consume(cluster.bootstrap_servers, "events", 20)) == sorted(sent)


def test_stop_moves_leaders_away_and_start_brings_the_broker_back(tmp_path: Path) -> None:
    """``stop`` is a graceful stop: once it returns, a client's metadata has the broker
    gone and a new leader for the partition it led; ``start`` brings it back on its port,
    and the records written meanwhile are all there."""
    with KemuCluster(brokers=3, log_dir=tmp_path) as cluster:
        bootstrap = cluster.bootstrap_servers
        cluster.create_topic("moves", partitions=1, replication_factor=3)
        leader = confluent_leaders(bootstrap, "moves")[0]
        port = cluster.address_of(leader)

        note = cluster.stop(leader)

        assert note == f"broker {leader} stopped (graceful shutdown)"
        assert confluent_brokers(bootstrap) == set(cluster.broker_ids) - {leader}
        assert confluent_leaders(bootstrap, "moves")[0] not in (leader, -1)
        assert leader not in cluster.running_brokers()
        # Through the running brokers only: kafka-python 3.0.12 leaves the socket of a
        # refused connect open (its inet.connect raises without closing it).
        running = ",".join(cluster.address_of(b) for b in cluster.running_brokers())
        kafka_python_produce(running, "moves", [b"while-down"])

        cluster.start(leader)

        assert cluster.address_of(leader) == port
        assert confluent_brokers(bootstrap) == set(cluster.broker_ids)
        assert kafka_python_consume(cluster.address_of(leader), "moves", 1) == [b"while-down"]


def test_kill_is_seen_once_the_session_expires_and_start_waits_for_it(tmp_path: Path) -> None:
    """``kill`` crashes a broker with no graceful step: a client's metadata still lists it
    until its store session expires, then not; ``start`` returns with it registered again."""
    with KemuCluster(brokers=3, config=FAST, log_dir=tmp_path) as cluster:
        bootstrap = cluster.bootstrap_servers
        cluster.create_topic("crash", partitions=1, replication_factor=3)
        victim = confluent_leaders(bootstrap, "crash")[0]

        cluster.kill(victim)

        assert victim not in cluster.running_brokers()
        cluster.wait_until(lambda: victim not in confluent_brokers(bootstrap), timeout=15)
        new_leader = cluster.wait_until(
            lambda: confluent_leaders(bootstrap, "crash")[0] not in (victim, -1), timeout=15
        )
        assert new_leader

        cluster.start(victim)

        assert confluent_brokers(bootstrap) == set(cluster.broker_ids)


def test_pause_freezes_a_broker_until_resume(tmp_path: Path) -> None:
    """``pause`` freezes a broker whole: its session expires and clients see it gone;
    after ``resume`` it registers again and clients see it back."""
    with KemuCluster(brokers=3, config=FAST, log_dir=tmp_path) as cluster:
        others = ",".join(cluster.address_of(b) for b in (0, 1))
        cluster.pause(2)

        assert cluster.running_brokers() == (0, 1)
        cluster.wait_until(lambda: 2 not in confluent_brokers(others), timeout=15)

        cluster.resume(2)

        cluster.wait_until(lambda: confluent_brokers(others) == {0, 1, 2}, timeout=15)
        assert cluster.running_brokers() == (0, 1, 2)


def test_refused_commands_and_topics_raise_one_error_and_change_nothing(tmp_path: Path) -> None:
    """A command ``kemu broker`` would refuse, and a topic the controller refuses, raise
    ``KemuClusterError`` (with the Kafka error code for a topic); the cluster is as before."""
    with KemuCluster(brokers=3, log_dir=tmp_path) as cluster:
        cluster.create_topic("taken")
        with pytest.raises(KemuClusterError, match=r"no broker 7 in this cluster"):
            cluster.stop(7)
        with pytest.raises(KemuClusterError, match=r"broker 1 is not paused \(running\)"):
            cluster.resume(1)
        with pytest.raises(KemuClusterError, match=r"broker 0 is already running"):
            cluster.start(0)
        with pytest.raises(KemuClusterError, match="TOPIC_ALREADY_EXISTS") as exists:
            cluster.create_topic("taken", partitions=2)
        assert exists.value.code is ErrorCode.TOPIC_ALREADY_EXISTS
        with pytest.raises(KemuClusterError) as too_many:
            cluster.create_topic("wide", replication_factor=4)
        assert too_many.value.code is ErrorCode.INVALID_REPLICATION_FACTOR

        assert cluster.running_brokers() == (0, 1, 2)
        assert cluster.partition_leaders("taken").keys() == {0}
        with pytest.raises(KemuClusterError, match="does not host this topic-partition"):
            cluster.partition_leaders("wide")


def test_close_leaves_no_thread_port_or_temporary_directory() -> None:
    """After the ``with`` block the cluster's thread is gone, every listener's port can be
    bound again, the temporary log directory is removed, and the object refuses to be used
    or opened again."""
    before = kemu_threads()
    with KemuCluster(brokers=3) as cluster:
        ports = [int(a.rsplit(":", 1)[1]) for a in cluster.bootstrap_servers.split(",")]
        log_dir = cluster.log_dir
        assert (log_dir / "broker-0").is_dir()
        assert len(kemu_threads() - before) == 1
    assert kemu_threads() == before
    assert all(bindable(port) for port in ports)
    assert not log_dir.exists()
    with pytest.raises(KemuClusterError, match="not running"):
        cluster.controller_id()
    with pytest.raises(KemuClusterError, match="already opened"):
        cluster.open()


def test_a_given_log_dir_is_kept(tmp_path: Path) -> None:
    """A ``log_dir`` given is the root of the brokers' log dirs and outlives the cluster,
    with the topic's partition directories in it."""
    with KemuCluster(brokers=2, log_dir=tmp_path / "logs") as cluster:
        cluster.create_topic("kept", partitions=2, replication_factor=2)
    assert sorted(p.name for p in (tmp_path / "logs" / "broker-1").glob("kept-*")) == [
        "kept-0",
        "kept-1",
    ]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"brokers": 0}, "brokers: a positive number of brokers, not 0"),
        ({"config": {"no.such.config": 1}}, "Unknown broker config name: no.such.config"),
        ({"config": {"num.partitions": "many"}}, "Invalid value many for configuration"),
        ({"racks": ["a", "b", "c", "d"]}, r"racks: no broker 3 in a cluster of 3"),
    ],
)
def test_bad_arguments_are_refused_before_anything_starts(
    arguments: dict[str, object], message: str
) -> None:
    """Arguments that could only fail raise ``KemuClusterError`` at construction: no
    thread was started."""
    before = kemu_threads()
    with pytest.raises(KemuClusterError, match=message):
        KemuCluster(**arguments)  # type: ignore[arg-type]
    assert kemu_threads() == before


def test_a_failed_start_is_one_error_and_leaves_nothing(tmp_path: Path) -> None:
    """A cluster that cannot start (its log dir root is a file) raises one
    ``KemuClusterError`` naming the cause, with no thread left behind."""
    root = tmp_path / "a-file"
    root.write_text("not a directory")
    before = kemu_threads()
    with (
        pytest.raises(KemuClusterError, match=r"did not start: .*Not a directory"),
        KemuCluster(brokers=2, log_dir=root),
    ):
        pass
    assert kemu_threads() == before
    assert root.read_text() == "not a directory"


def test_wait_until_wakes_on_the_clusters_events_not_on_a_timer() -> None:
    """``wait_until`` calls its condition again when the cluster changes, not on a timer:
    on an idle cluster, once at the start and once at the deadline, then ``TimeoutError``
    naming the last value; a controller kill is seen as soon as the session expiry is
    traced, with a handful of calls over the seconds of waiting."""
    with KemuCluster(brokers=2, config=FAST) as cluster:
        idle_calls: list[float] = []

        def nothing() -> tuple[int, ...]:
            idle_calls.append(time.monotonic())
            return ()

        with pytest.raises(TimeoutError, match=r"within 1s; last value: \(\)"):
            cluster.wait_until(nothing, timeout=1)
        assert len(idle_calls) == 2
        assert idle_calls[1] - idle_calls[0] > 0.9

        controller = cluster.controller_id()
        survivor = 1 - controller
        calls: list[int] = []

        def moved() -> int:
            calls.append(1)
            return cluster.controller_id() == survivor

        cluster.kill(controller)
        killed = time.monotonic()

        assert cluster.wait_until(moved, timeout=15)
        took = time.monotonic() - killed
        # The session expires SESSION_MS after the kill; then the store's writes, the
        # election and the UpdateMetadata requests each wake the wait at once.
        assert SESSION_MS / 1000 - 0.5 < took < SESSION_MS / 1000 + 2
        assert len(calls) < 40  # a 20 ms poll would have called it ~100 times


def test_wait_until_returns_the_first_true_value() -> None:
    """The value returned is the condition's own; a condition true at once is called
    once."""
    with KemuCluster(brokers=1) as cluster:
        calls: list[int] = []

        def at_once() -> dict[str, int]:
            calls.append(1)
            return {"leader": cluster.controller_id()}

        assert cluster.wait_until(at_once, timeout=5) == {"leader": 0}
        assert len(calls) == 1


@pytest.mark.asyncio
async def test_async_with_serves_aiokafka_and_commands_do_not_block_the_loop(
    tmp_path: Path,
) -> None:
    """``async with KemuCluster()`` gives the async view: aiokafka produces and consumes
    on the caller's loop, ``stop`` is awaited while that loop keeps running, and
    ``wait_until`` takes a coroutine function."""
    async with KemuCluster(brokers=3, log_dir=tmp_path) as cluster:
        assert isinstance(cluster, AsyncKemuCluster)
        await cluster.create_topic("aio", partitions=1, replication_factor=3)
        producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
        await producer.start()
        try:
            for i in range(5):
                await producer.send_and_wait("aio", f"a-{i}".encode())
        finally:
            await producer.stop()

        leader = (await cluster.partition_leaders("aio"))[0]
        await cluster.stop(leader)

        async def moved() -> bool:
            leaders = await cluster.partition_leaders("aio")
            return leaders[0] not in (leader, -1)

        assert await cluster.wait_until(moved, timeout=10)
        consumer = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap_servers)
        await consumer.start()
        try:
            partition = AioTopicPartition("aio", 0)
            consumer.assign([partition])
            await consumer.seek_to_beginning(partition)
            batch = await consumer.getmany(partition, timeout_ms=10_000, max_records=5)
            assert [r.value for r in batch[partition]] == [f"a-{i}".encode() for i in range(5)]
        finally:
            await consumer.stop()
        assert await cluster.controller_id() != leader
    assert not kemu_threads()


@pytest.mark.asyncio
async def test_async_wait_until_wakes_on_events_while_the_callers_loop_runs() -> None:
    """The async ``wait_until`` waits for the cluster's events in a worker thread: the
    caller's loop keeps running meanwhile, a coroutine condition is seen true once the
    killed controller's session expiry is traced, and an unmet one ends in
    ``TimeoutError``."""
    async with KemuCluster(brokers=2, config=FAST) as cluster:
        controller = await cluster.controller_id()
        ticks = 0
        stop_ticking = asyncio.Event()

        async def tick() -> None:
            nonlocal ticks
            while not stop_ticking.is_set():
                ticks += 1
                await asyncio.sleep(0.05)

        async def moved() -> bool:
            return await cluster.controller_id() == 1 - controller

        ticker = asyncio.create_task(tick())
        await cluster.kill(controller)
        killed = time.monotonic()
        assert await cluster.wait_until(moved, timeout=15)
        took = time.monotonic() - killed
        stop_ticking.set()
        await ticker
        assert SESSION_MS / 1000 - 0.5 < took < SESSION_MS / 1000 + 2
        assert ticks >= 10  # the caller's loop ran all along

        with pytest.raises(TimeoutError, match=r"within 0.3s; last value: False"):
            await cluster.wait_until(lambda: False, timeout=0.3)


def test_a_three_broker_cluster_is_ready_within_a_second_of_cpu() -> None:
    """``with KemuCluster(brokers=3)`` returns with every broker registered and agreeing
    on the controller after well under a second of this process's CPU (the cluster's
    thread included; its wall time on an idle machine, 0.3-0.4 s)."""
    began = time.process_time()
    with KemuCluster(brokers=3) as cluster:
        ready = time.process_time() - began
        assert cluster.controller_id() in cluster.broker_ids
        assert cluster.running_brokers() == (0, 1, 2)
    assert ready < 1.0, f"{ready:.2f}s of CPU"


OWNER = """\
import sys
from cluster import KemuCluster
cluster = KemuCluster(brokers=2, processes=sys.argv[1] == "processes").open()
print(cluster.log_dir, cluster._reaper.pid, flush=True)
sys.stdin.read()
"""
"""A program that opens a ``KemuCluster`` without ``log_dir``, prints the temporary log
directory and its reaper's pid, and waits for the test to SIGKILL it."""


def wait_gone(pid: int, timeout: float) -> bool:
    """Whether process ``pid`` (not necessarily a child) exits within ``timeout``
    seconds, waited on with a pidfd."""
    try:
        descriptor = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([descriptor], [], [], timeout)
        return bool(readable)
    finally:
        os.close(descriptor)


@pytest.mark.parametrize(
    "mode",
    ["in-process", pytest.param("processes", marks=[pytest.mark.slow, pytest.mark.processes])],
)
def test_the_temporary_directory_goes_when_its_owner_is_sigkilled(mode: str) -> None:
    """A process that opened a ``KemuCluster`` without ``log_dir`` and is SIGKILLed (no
    close, no exit handler) leaves no temporary log directory behind: its reaper, waiting
    on a pipe that the kill closes, removes it (with broker processes, once they stopped
    writing into it) and exits."""
    with subprocess.Popen(
        [sys.executable, "-c", OWNER, mode],
        cwd=Path(__file__).resolve().parents[2],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    ) as owner:
        try:
            assert owner.stdout is not None
            directory, reaper = owner.stdout.readline().decode().split()
            log_dir = Path(directory)
            assert (log_dir / "broker-1").is_dir()
            assert not wait_gone(int(reaper), 0)
        finally:
            owner.kill()
    assert wait_gone(int(reaper), 60)
    assert not log_dir.exists()
