"""The data plane benchmark: confluent-kafka against ``kemu up`` and against librdkafka's
mock cluster, side by side in one run.

``python -m cluster.bench.data [--messages N]`` starts ``kemu up`` (3
brokers in one process, a fresh log dir under a temporary directory) and measures, each
against kemu and then against librdkafka's mock cluster (``test.mock.num.brokers=3`` in
the client's own configuration: brokers inside the client process that acknowledge
without replicating or writing to disk, the ceiling of what the client can send):

* produce throughput: a ``Producer`` with acks=all, linger.ms 5, 100-byte values, a
  topic of ``P`` partitions with replication factor 3, ``N`` messages from the first
  ``produce`` to the end of ``flush`` (MB/s of values, messages/s), and their ratio;
* produce-to-consume latency: one message at a time, every 5 ms, read by a ``Consumer``
  assigned to the partition at its end; each value carries its send time
  (``time.perf_counter`` of this process), p50 and p99 of receive minus send;
* a consumer reading the produced log from the beginning: every partition from its log
  start to the end it had when the read began (MB/s of values; the mock cluster keeps
  only a partition's latest segments, so it may hold fewer than were produced).

Prints the measurements as it goes (stderr gets the children's logs), then one JSON line,
``DataResult``. ``cluster.bench.suite`` runs it in a child process as row [10].
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported, not in __all__
    AdminClient,
    NewTopic,
)

from cluster.bench.process import exit_with
from cluster.bench.scale import fast_tmp
from cluster.cli.progress import CountProgress, count_progress

__all__ = ["DataResult", "Side", "main"]

# Bench code measures wall time on purpose: it is the one place that must.
_now = time.perf_counter

VALUE_BYTES = 100
LATENCY_MESSAGES = 1_000
LATENCY_INTERVAL = 0.005
WAIT = 120.0  # the longest any one phase may take before the bench gives up
MOCK = {"test.mock.num.brokers": 3}
MOCK_PARTITIONS = 4  # the partitions of a topic the mock cluster creates
PRODUCER = {"acks": "all", "linger.ms": 5}
THROUGHPUT_GOAL = 0.5
"""kemu's produce MB/s over the mock cluster's, at least."""


class Side(msgspec.Struct, frozen=True, kw_only=True):
    """What one cluster measured."""

    produce_seconds: float
    produce_messages: int
    latency_p50_ms: float
    latency_p99_ms: float
    consume_seconds: float
    consume_messages: int

    @property
    def produce_mb_s(self) -> float:
        return self.produce_messages * VALUE_BYTES / self.produce_seconds / 1e6

    @property
    def produce_msgs_s(self) -> float:
        return self.produce_messages / self.produce_seconds

    @property
    def consume_mb_s(self) -> float:
        return self.consume_messages * VALUE_BYTES / self.consume_seconds / 1e6


class DataResult(msgspec.Struct, frozen=True, kw_only=True):
    messages: int
    partitions: int
    kemu: Side
    mock: Side

    @property
    def ratio(self) -> float:
        return self.kemu.produce_mb_s / self.mock.produce_mb_s


# ---------------------------------------------------------------------------- phases


def _produce(client: dict[str, Any], topic: str, messages: int, line: CountProgress) -> float:
    """Seconds to produce and flush ``messages`` values, every one acknowledged (``line``
    counts them, a thousand at a time)."""
    failed: list[object] = []
    acknowledged = 0

    def delivered(error: object, _message: object) -> None:
        nonlocal acknowledged
        if error is not None:
            failed.append(error)
        acknowledged += 1
        if acknowledged % 1000 == 0:
            line.advance(1000)

    producer = Producer({**client, **PRODUCER, "on_delivery": delivered})
    value = b"v" * VALUE_BYTES
    t0 = _now()
    sent = 0
    while sent < messages:
        try:
            producer.produce(topic, value)
        except BufferError:  # the client's queue is full: let it drain
            producer.poll(0.01)
            continue
        sent += 1
        if sent % 1000 == 0:
            producer.poll(0)
    if producer.flush(WAIT) != 0:
        raise RuntimeError(f"{producer.flush(0)} messages were not delivered in {WAIT:g} s")
    seconds = _now() - t0
    line.advance(acknowledged % 1000)
    if failed:
        raise RuntimeError(f"{len(failed)} messages failed, the first: {failed[0]}")
    return seconds


def _latency(client: dict[str, Any], topic: str) -> tuple[float, float]:
    """p50 and p99, in ms, of produce-to-consume for single messages on partition 0."""
    consumer = Consumer({**client, "group.id": "kemu-bench", "enable.auto.commit": False})
    producer = Producer({**client, **PRODUCER})
    latencies: list[float] = []
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=WAIT)
        consumer.assign([TopicPartition(topic, 0, end)])
        for _ in range(LATENCY_MESSAGES):
            producer.produce(topic, struct.pack(">d", _now()).ljust(VALUE_BYTES, b"."), partition=0)
            producer.poll(0)
            until = _now() + LATENCY_INTERVAL
            while True:
                message = consumer.poll(max(0.0, until - _now()))
                if message is not None and message.error() is None:
                    value = message.value()
                    assert value is not None
                    latencies.append(_now() - struct.unpack_from(">d", value)[0])
                if _now() >= until:
                    break
        producer.flush(WAIT)
        deadline = _now() + WAIT
        while len(latencies) < LATENCY_MESSAGES and _now() < deadline:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                value = message.value()
                assert value is not None
                latencies.append(_now() - struct.unpack_from(">d", value)[0])
    finally:
        consumer.close()
    if len(latencies) < LATENCY_MESSAGES:
        raise RuntimeError(f"{len(latencies)} of {LATENCY_MESSAGES} latency messages arrived")
    cuts = statistics.quantiles(latencies, n=100)
    return cuts[49] * 1000, cuts[98] * 1000


def _consume(client: dict[str, Any], topic: str, partitions: int) -> tuple[float, int]:
    """Seconds for one consumer to read every partition from its log start to its end as
    it was when the read began, and the messages read (the mock cluster keeps only the
    latest segments of a partition: it may hold fewer than were produced)."""
    consumer = Consumer({**client, "group.id": "kemu-bench-read", "enable.auto.commit": False})
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=WAIT)[1]
            for p in range(partitions)
        }
        t0 = _now()
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        seen = 0
        behind = {p for p, end in ends.items() if end > 0}
        deadline = t0 + WAIT
        while behind:
            for message in consumer.consume(10_000, 0.5):
                if message.error() is None:
                    seen += 1
                    partition, offset = message.partition(), message.offset()
                    if (
                        partition is not None
                        and offset is not None
                        and offset + 1 >= ends[partition]
                    ):
                        behind.discard(partition)
            if _now() > deadline:
                raise RuntimeError(f"read {seen} messages in {WAIT:g} s, not to the end")
        return _now() - t0, seen
    finally:
        consumer.close()


def measure(
    client: dict[str, Any], topic: str, partitions: int, messages: int, line: CountProgress
) -> Side:
    produce = _produce(client, topic, messages, line)
    p50, p99 = _latency(client, topic)
    consume, read = _consume(client, topic, partitions)
    return Side(
        produce_seconds=produce,
        produce_messages=messages,
        latency_p50_ms=p50,
        latency_p99_ms=p99,
        consume_seconds=consume,
        consume_messages=read,
    )


# ---------------------------------------------------------------------------- clusters


def _kemu_up(root: Path) -> tuple[subprocess.Popen[bytes], str]:
    """A ``kemu up`` of 3 brokers in a child process, and its bootstrap servers."""
    cluster_file = root / "cluster.json"
    command = [sys.executable, "-m", "cluster.cli.main", "up", "--brokers", "3", "--port", "0"]
    command += ["--log-dir", str(root / "logs"), "--cluster-file", str(cluster_file)]
    command += ["--parent-pid", str(os.getpid())]  # it stops if the benchmark is killed
    # S603: the command is this interpreter running kemu itself, with paths we made.
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=None)  # noqa: S603
    deadline = _now() + WAIT
    while not cluster_file.exists():
        if child.poll() is not None or _now() > deadline:
            child.kill()
            raise RuntimeError("kemu up did not start")
        time.sleep(0.05)
    brokers = json.loads(cluster_file.read_text())["brokers"]
    return child, ",".join(f"{b['host']}:{b['port']}" for b in brokers)


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=3)], operation_timeout=30
    )
    for future in futures.values():
        future.result(WAIT)


def run(messages: int, partitions: int, *, quiet: bool = True) -> DataResult:
    """Both sides, kemu up first. Unless ``quiet``, a progress line counts the messages
    produced and acknowledged, on both sides, on a terminal stderr."""
    topic = "bench"
    with (
        count_progress(2 * messages, label="[10] produced", unit="messages", quiet=quiet) as line,
        tempfile.TemporaryDirectory(dir=fast_tmp()) as tmp,
    ):
        child, bootstrap = _kemu_up(Path(tmp))
        try:
            _create_topic(bootstrap, topic, partitions)
            kemu = measure({"bootstrap.servers": bootstrap}, topic, partitions, messages, line)
        finally:
            child.send_signal(signal.SIGINT)
            child.wait(WAIT)
        mock_client: dict[str, Any] = {**MOCK, "bootstrap.servers": ""}
        # The mock cluster lives in the client that configures it: one client creates the
        # topic and keeps the cluster alive while the others reach it by its bootstrap.
        holder = Producer(mock_client)
        try:
            servers = _mock_bootstrap(holder)
            _auto_create(servers, topic, partitions)
            mock = measure({"bootstrap.servers": servers}, topic, partitions, messages, line)
        finally:
            holder.flush(0)
    return DataResult(messages=messages, partitions=partitions, kemu=kemu, mock=mock)


def _auto_create(servers: str, topic: str, partitions: int) -> None:
    """The mock cluster has no controller for CreateTopics: it creates a topic when its
    metadata is first asked, with ``MOCK_PARTITIONS`` partitions on 3 replicas."""
    if partitions != MOCK_PARTITIONS:
        raise ValueError(f"the mock cluster makes topics of {MOCK_PARTITIONS} partitions")
    metadata = Producer({"bootstrap.servers": servers}).list_topics(topic, timeout=WAIT)
    found = metadata.topics[topic]
    if found.error is not None or len(found.partitions) != partitions:
        raise RuntimeError(f"the mock cluster's topic: {found.error}, {len(found.partitions)}")


def _mock_bootstrap(holder: Producer) -> str:
    """The listeners of the mock cluster ``holder`` started (from its metadata)."""
    metadata = holder.list_topics(timeout=WAIT)
    return ",".join(f"{b.host}:{b.port}" for b in metadata.brokers.values())


def report(result: DataResult) -> None:
    for name, side in (("kemu up", result.kemu), ("mock", result.mock)):
        print(
            f"  {name:<8} produce {side.produce_mb_s:>7.2f} MB/s {side.produce_msgs_s:>10,.0f}"
            f" msgs/s   latency p50 {side.latency_p50_ms:>6.1f} ms p99"
            f" {side.latency_p99_ms:>6.1f} ms   read from the start"
            f" {side.consume_mb_s:>7.2f} MB/s"
        )
    verdict = "OK" if result.ratio >= THROUGHPUT_GOAL else f"BELOW GOAL ({THROUGHPUT_GOAL:g}x)"
    print(f"  produce MB/s, kemu / mock: {result.ratio:.2f}x  {verdict}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kemu-bench-data", description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000, help="messages produced")
    parser.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    args = parser.parse_args(argv)
    if args.messages < 1:
        parser.error("--messages must be >= 1")
    os.environ.setdefault("PYTHONHASHSEED", "0")
    result = run(args.messages, MOCK_PARTITIONS, quiet=args.quiet)
    report(result)
    sys.stdout.flush()
    print(msgspec.json.encode(result).decode())
    return 0


if __name__ == "__main__":
    exit_with(main)
