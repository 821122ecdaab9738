"""Consumer groups with real clients against an in-process three-broker cluster: the
group coordinator (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch) as confluent-kafka, kafka-python and aiokafka consumers use it
with ``subscribe``.

``__consumer_offsets`` is created on the first FindCoordinator (50 partitions,
replication factor 3 on three brokers); ``group.initial.rebalance.delay.ms`` is 0, as
Kafka's own tests and its shipped ``server.properties`` set it, so a lone member's first
rebalance completes at once. The synchronous clients run in worker threads.
"""

from __future__ import annotations

import datetime
import io
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
from aiokafka import AIOKafkaConsumer  # type: ignore[import-untyped]
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import NewTopic as CkNewTopic  # type: ignore[attr-defined]
from kafka import KafkaAdminClient, KafkaConsumer  # type: ignore[import-untyped]

from actors.runtime.clock import RealClock
from cluster.cli.consumer_groups import main as consumer_groups_main
from cluster.kafka.client import KafkaDataClient
from cluster.kafka.consumer_group import GroupConfig, GroupConsumer
from protocol.errors import ErrorCode
from tests.support.creation import Harness, running_cluster
from tests.support.hosting import hosted_fixture
from tests.support.kemu_commands import REPO, running_up
from tests.support.waiting import eventually, in_threads, until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

WAIT = 90.0
PARTITIONS = 3
COUNT = 30
CONFIG = {"group.initial.rebalance.delay.ms": "0"}


@hosted_fixture()
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    async with running_cluster(tmp_path / "logs", config=CONFIG) as h:
        yield h


def bootstrap(h: Harness) -> str:
    return ",".join(f"127.0.0.1:{port}" for _, port in sorted(h.cluster.ports.items()))


in_thread = in_threads(WAIT)


def create_and_fill(servers: str, topic: str) -> None:
    """A topic of three partitions on all three brokers with COUNT keyed records."""
    admin = AdminClient({"bootstrap.servers": servers})
    futures = admin.create_topics([CkNewTopic(topic, PARTITIONS, 3)], operation_timeout=30)
    futures[topic].result(timeout=60)
    producer = Producer({"bootstrap.servers": servers, "acks": "all"})
    for i in range(COUNT):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
    assert producer.flush(60) == 0


def confluent_consume(servers: str, topic: str, group: str, want: int) -> list[bytes]:
    """Subscribe, read ``want`` records, commit what was read synchronously and close
    (leaving the group)."""
    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        while len(values) < want:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            values.append(msg.value() or b"")
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return values


def kafka_python_consume(servers: str, topic: str, group: str) -> list[bytes]:
    """kafka-python with subscribe: every record, then a synchronous commit."""
    consumer = KafkaConsumer(
        bootstrap_servers=servers,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=WAIT * 1000,
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        for record in consumer:
            values.append(record.value)
            if len(values) == COUNT:
                break
        consumer.commit()
    finally:
        consumer.close()
    return values


async def aiokafka_consume(servers: str, topic: str, group: str) -> list[bytes]:
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=servers,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    values: list[bytes] = []
    try:
        with anyio.fail_after(WAIT):
            async for record in consumer:
                values.append(record.value)
                if len(values) == COUNT:
                    break
        await consumer.commit()
    finally:
        await consumer.stop()
    return values


def committed(servers: str, topic: str, group: str) -> list[int]:
    """The group's committed offset of each partition, as a consumer reads it."""
    consumer = Consumer({"bootstrap.servers": servers, "group.id": group})
    try:
        parts = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        return [tp.offset for tp in consumer.committed(parts, timeout=30)]
    finally:
        consumer.close()


async def new_topic(h: Harness) -> str:
    topic = f"groups-{uuid.uuid4().hex[:8]}"
    await in_thread(create_and_fill, bootstrap(h), topic)
    return topic


ALL = sorted(f"v{i}".encode() for i in range(COUNT))


@pytest.mark.asyncio
async def test_confluent_consumer_resumes_from_its_groups_commit(harness: Harness) -> None:
    """A confluent-kafka consumer with subscribe reads a third of the records and
    commits; the next consumer of the group starts at the commit and reads exactly the
    rest, while one of another group reads everything."""
    topic = await new_topic(harness)
    servers = bootstrap(harness)
    first = await in_thread(confluent_consume, servers, topic, "g-confluent", 10)
    rest = await in_thread(confluent_consume, servers, topic, "g-confluent", COUNT - 10)
    assert sorted(first + rest) == ALL
    assert sum(await in_thread(committed, servers, topic, "g-confluent")) == COUNT
    again = await in_thread(confluent_consume, servers, topic, "g-other", COUNT)
    assert sorted(again) == ALL


@pytest.mark.asyncio
async def test_kafka_python_and_aiokafka_consume_as_groups(harness: Harness) -> None:
    """kafka-python and aiokafka consumers with subscribe each read every record as
    their group's member and commit the end of each partition."""
    topic = await new_topic(harness)
    servers = bootstrap(harness)
    assert sorted(await in_thread(kafka_python_consume, servers, topic, "g-kp")) == ALL
    with anyio.fail_after(WAIT):
        assert sorted(await aiokafka_consume(servers, topic, "g-aio")) == ALL
    for group in ("g-kp", "g-aio"):
        assert sum(await in_thread(committed, servers, topic, group)) == COUNT


class Member:
    """A kafka-python consumer polling in a worker thread until told to stop, keeping
    the assignment it last saw."""

    def __init__(self, servers: str, topic: str, group: str) -> None:
        self.servers, self.topic, self.group = servers, topic, group
        self.assignment: frozenset[int] | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        consumer = KafkaConsumer(
            bootstrap_servers=self.servers,
            group_id=self.group,
            auto_offset_reset="earliest",
            heartbeat_interval_ms=500,
        )
        try:
            # kafka-python's group leader assigns from its cluster metadata, then compares
            # that with a snapshot of its subscription's metadata taken by the first
            # Metadata answer after subscribe(). A join before that answer (the first poll
            # under load) assigns from metadata without the topic, or rebalances a second
            # time once the answer comes (a lone member seen "rebalancing" after it held
            # every partition; one such second assignment lost by the client when a poll
            # timed out during it). So the member asks for the metadata once subscribed
            # (topics() always asks) and joins only once it holds the topic.
            consumer.subscribe([self.topic])
            while not self.stop.is_set() and self.topic not in consumer.topics():
                self.stop.wait(0.1)
            while not self.stop.is_set():
                # A poll that times out while its JoinGroup or SyncGroup is answered makes
                # kafka-python 3.0.12 join again (its finished join task is not read):
                # a poll long enough for a whole rebalance under load avoids that.
                consumer.poll(timeout_ms=1000)
                self.assignment = frozenset(tp.partition for tp in consumer.assignment())
        finally:
            consumer.close()  # LeaveGroup

    async def owns_all(self) -> None:
        """Wait until every partition of the topic is assigned to this member."""

        async def assigned() -> frozenset[int] | None:
            return self.assignment

        await eventually(assigned, until=lambda a: a == frozenset(range(PARTITIONS)), timeout=WAIT)


@pytest.mark.asyncio
async def test_a_group_rebalances_when_a_member_joins_and_when_it_leaves(
    harness: Harness,
) -> None:
    """One member holds all three partitions; a second member's join splits them between
    the two (disjoint, both non-empty); when it leaves, the first holds all three
    again."""
    topic = await new_topic(harness)
    servers = bootstrap(harness)
    first, second = Member(servers, topic, "g-rebalance"), Member(servers, topic, "g-rebalance")
    everything = frozenset(range(PARTITIONS))

    async def view() -> tuple[frozenset[int] | None, frozenset[int] | None]:
        return first.assignment, second.assignment

    def split(seen: tuple[frozenset[int] | None, frozenset[int] | None]) -> bool:
        a, b = seen
        return bool(a) and bool(b) and a | b == everything and not a & b  # type: ignore[operator]

    async with anyio.create_task_group() as tg:
        try:
            tg.start_soon(partial_thread, first.run)
            await eventually(view, until=lambda seen: seen[0] == everything, timeout=WAIT)
            tg.start_soon(partial_thread, second.run)
            await eventually(view, until=split, timeout=WAIT)
            second.stop.set()
            await eventually(
                view,
                until=lambda seen: seen[0] == everything and seen[1] is not None,
                timeout=WAIT,
            )
        finally:
            # On a failed wait too: an abandoned member thread would poll (and reconnect
            # to the stopped cluster) for ever, leaking sockets into later tests.
            first.stop.set()
            second.stop.set()


async def partial_thread(fn: Callable[[], None]) -> None:
    with anyio.fail_after(WAIT * 3):
        await anyio.to_thread.run_sync(fn, abandon_on_cancel=True)


@pytest.mark.processes
@pytest.mark.parametrize("mode", ["in-process", "processes"])
def test_subscribe_against_kemu_up(tmp_path: Path, mode: str) -> None:
    """Against ``kemu up`` (its own defaults: no initial rebalance delay, offsets topic
    with three replicas) and ``kemu up --processes``: a confluent-kafka consumer with
    subscribe reads half the records and commits, and its successor in the group reads
    exactly the other half; kafka-python's consumer of another group reads them all."""
    extra = ("--processes",) if mode == "processes" else ()
    with running_up(tmp_path, *extra) as up:
        topic = f"groups-{uuid.uuid4().hex[:8]}"
        create_and_fill(up.bootstrap, topic)
        first = confluent_consume(up.bootstrap, topic, "g-up", COUNT // 2)
        rest = confluent_consume(up.bootstrap, topic, "g-up", COUNT - COUNT // 2)
        assert sorted(first + rest) == ALL
        assert sorted(kafka_python_consume(up.bootstrap, topic, "g-up-kp")) == ALL


def admin_view(servers: str, group: str) -> dict[str, Any]:
    """What confluent-kafka's and kafka-python's admin clients say of the groups."""
    admin = AdminClient({"bootstrap.servers": servers})
    listed = admin.list_consumer_groups(request_timeout=30).result(timeout=60)
    described = admin.describe_consumer_groups([group])[group].result(timeout=60)
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    committed = offsets[group].result(timeout=60).topic_partitions
    kp = KafkaAdminClient(bootstrap_servers=servers)
    try:
        kp_listed = kp.list_groups()
        kp_described = kp.describe_groups([group])
    finally:
        kp.close()
    return {
        "listed": sorted((g.group_id, g.state.name) for g in listed.valid),
        "state": described.state.name,
        "committed": sum(tp.offset for tp in committed),
        "kp_listed": kp_listed,
        "kp_state": kp_described[group]["group_state"],
    }


def kp_delete(servers: str, group: str) -> Any:
    kp = KafkaAdminClient(bootstrap_servers=servers)
    try:
        return kp.delete_groups([group])
    finally:
        kp.close()


@pytest.mark.asyncio
async def test_admin_clients_list_describe_and_delete_groups(harness: Harness) -> None:
    """After a consumer read and committed everything and left, confluent-kafka's and
    kafka-python's admin clients list the group as Empty, describe it, read its
    committed offsets; kafka-python deletes it and it is listed no more."""
    topic = await new_topic(harness)
    servers = bootstrap(harness)
    await in_thread(confluent_consume, servers, topic, "g-admin", COUNT)
    view = await in_thread(admin_view, servers, "g-admin")
    assert view == {
        "listed": [("g-admin", "EMPTY")],
        "state": "EMPTY",
        "committed": COUNT,
        "kp_listed": [{"group_id": "g-admin", "protocol_type": "consumer", "group_state": "Empty"}],
        "kp_state": "Empty",
    }
    assert await in_thread(kp_delete, servers, "g-admin") == {"g-admin": "OK"}
    admin = AdminClient({"bootstrap.servers": servers})
    listed = await in_thread(lambda: admin.list_consumer_groups().result(timeout=60))
    assert [g.group_id for g in listed.valid] == []


def kemu_consumer_groups(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = consumer_groups_main(list(argv), out=out, err=err)
    return status, out.getvalue(), err.getvalue()


@pytest.mark.asyncio
async def test_kemu_consumer_groups_lists_describes_and_deletes(harness: Harness) -> None:
    """``kemu consumer-groups`` as kafka-consumer-groups.sh: --list names the group;
    --describe of the Empty group notes it has no active members and shows each
    committed partition with its log end and lag; with a live member its rows carry the
    member; a group that does not exist is Kafka's error; --delete refuses the active
    group and deletes the empty one."""
    topic = await new_topic(harness)
    servers = bootstrap(harness)
    await in_thread(confluent_consume, servers, topic, "g-cli", 10)
    base = ("--bootstrap-server", servers)

    assert await in_thread(kemu_consumer_groups, *base, "--list") == (0, "g-cli\n", "")
    status, out, err = await in_thread(
        kemu_consumer_groups, *base, "--describe", "--group", "g-cli"
    )
    assert (status, err) == (0, "\nConsumer group 'g-cli' has no active members.\n")
    lines = out.split("\n")
    assert lines[0] == ""
    assert lines[1].split() == [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    assert lines[1].startswith("GROUP           " + "TOPIC".ljust(len(topic)) + " PARTITION  ")
    rows = [line.split() for line in lines[2:] if line]
    # Only the partitions the consumer read from have a commit; they are listed in order.
    assert [r[:2] for r in rows] == [["g-cli", topic]] * len(rows)
    assert [int(r[2]) for r in rows] == sorted({int(r[2]) for r in rows})
    assert sum(int(r[3]) for r in rows) == 10
    assert all(int(r[5]) == int(r[4]) - int(r[3]) and r[6:] == ["-", "-", "-"] for r in rows)

    member = Member(servers, topic, "g-cli")
    async with anyio.create_task_group() as tg:
        try:
            tg.start_soon(partial_thread, member.run)

            await member.owns_all()
            status, out, err = await in_thread(
                kemu_consumer_groups, *base, "--describe", "--group", "g-cli"
            )
            rows = [line.split() for line in out.split("\n")[2:] if line]
            assert (status, err, len(rows)) == (0, "", PARTITIONS)
            assert sum(int(r[4]) for r in rows) == COUNT
            assert {r[6].split("-")[0] for r in rows} == {"kafka"}  # kafka-python-<version>-<uuid>
            assert {r[7] for r in rows} == {"/127.0.0.1"}
            refused = await in_thread(kemu_consumer_groups, *base, "--delete", "--group", "g-cli")
            assert refused == (
                0,
                "\nError: Deletion of some consumer groups failed:\n"
                "* Group 'g-cli' could not be deleted due to: "
                "org.apache.kafka.common.errors.GroupNotEmptyException: The group is not empty.\n",
                "",
            )
        finally:
            member.stop.set()  # on a failure too: no member thread outlives the test

    async def state() -> str:
        return (await in_thread(kemu_consumer_groups, *base, "--describe", "--group", "g-cli"))[2]

    await eventually(state, until=lambda e: "has no active members" in e, timeout=WAIT)
    assert await in_thread(kemu_consumer_groups, *base, "--delete", "--group", "g-cli") == (
        0,
        "Deletion of requested consumer groups ('g-cli') was successful.\n",
        "",
    )
    assert await in_thread(kemu_consumer_groups, *base, "--describe", "--group", "g-cli") == (
        0,
        "\nError: Consumer group 'g-cli' does not exist.\n",
        "",
    )
    assert await in_thread(kemu_consumer_groups, *base, "--list") == (0, "", "")
    status, out, err = await in_thread(kemu_consumer_groups, *base, "--group", "g-cli")
    assert (status, out) == (1, "")
    assert err.startswith(
        "Command must include exactly one action: --list, --describe, --delete, "
        "--reset-offsets, --delete-offsets\n"
    )


def fill_evenly(servers: str, topic: str, per_partition: int) -> None:
    """A topic of three partitions with ``per_partition`` records written to each."""
    admin = AdminClient({"bootstrap.servers": servers})
    futures = admin.create_topics([CkNewTopic(topic, PARTITIONS, 3)], operation_timeout=30)
    futures[topic].result(timeout=60)
    producer = Producer({"bootstrap.servers": servers, "acks": "all"})
    for p in range(PARTITIONS):
        for i in range(per_partition):
            producer.produce(topic, value=f"v{p}-{i}".encode(), partition=p)
    assert producer.flush(60) == 0


def reset_table(group: str, rows: list[tuple[str, int, int]]) -> str:
    """``printOffsetsToReset``' output: a blank line, the header, a row per partition."""
    line = "{:<30} {:<30} {:<10} {:<15}\n"
    return (
        "\n"
        + line.format("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
        + "".join(line.format(group, t, p, o) for t, p, o in rows)
    )


NO_EXECUTE = (
    "WARN: No action will be performed as the --execute option is missing.In a future major "
    "release, the default behavior of this command will be to prompt the user before "
    "executing the reset rather than doing a dry run. You should add the --dry-run option "
    "explicitly if you are scripting this command and want to keep the current default "
    "behavior without prompting.\n"
)
CLAMP = re.compile(
    r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] WARN New offset \((-?\d+)\) is (higher than "
    r"latest|lower than earliest) offset for topic partition (\S+)\. Value will be set to "
    r"(\d+) \(kafka\.admin\.ConsumerGroupCommand\$\)"
)


@pytest.mark.asyncio
async def test_kemu_consumer_groups_resets_offsets(harness: Harness) -> None:
    """``--reset-offsets`` as kafka-consumer-groups.sh: a plan (dry run, the default with
    Kafka's warning) commits nothing; ``--execute`` commits through OffsetCommit what a
    real consumer then reads; offsets out of the log are clamped to its start or end with
    Kafka's warning; a Stable group is refused; bad input exits 1 and changes nothing."""
    servers = bootstrap(harness)
    topic = f"reset-{uuid.uuid4().hex[:8]}"
    await in_thread(fill_evenly, servers, topic, 10)
    await in_thread(confluent_consume, servers, topic, "g-reset", COUNT)
    assert await in_thread(committed, servers, topic, "g-reset") == [10, 10, 10]
    base = ("--bootstrap-server", servers, "--reset-offsets", "--group", "g-reset")

    every = [(topic, p, 0) for p in range(PARTITIONS)]
    planned = await in_thread(kemu_consumer_groups, *base, "--topic", topic, "--to-earliest")
    assert planned == (0, reset_table("g-reset", every), NO_EXECUTE)
    assert await in_thread(committed, servers, topic, "g-reset") == [10, 10, 10]

    executed = await in_thread(
        kemu_consumer_groups, *base, "--topic", f"{topic}:0,2", "--to-offset", "4", "--execute"
    )
    assert executed == (0, reset_table("g-reset", [(topic, 0, 4), (topic, 2, 4)]), "")
    assert await in_thread(committed, servers, topic, "g-reset") == [4, 10, 4]

    status, out, err = await in_thread(
        kemu_consumer_groups, *base, "--all-topics", "--shift-by", "3", "--execute"
    )
    assert (status, out) == (
        0,
        reset_table("g-reset", [(topic, 0, 7), (topic, 1, 10), (topic, 2, 7)]),
    )
    assert [m.groups() for m in CLAMP.finditer(err)] == [
        ("13", "higher than latest", f"{topic}-1", "10")
    ]
    assert len(err.splitlines()) == 1
    assert await in_thread(committed, servers, topic, "g-reset") == [7, 10, 7]

    status, out, err = await in_thread(
        kemu_consumer_groups, *base, "--topic", f"{topic}:1", "--to-offset", "-5", "--dry-run"
    )
    assert (status, out) == (0, reset_table("g-reset", [(topic, 1, 0)]))
    assert [m.groups() for m in CLAMP.finditer(err)] == [
        ("-5", "lower than earliest", f"{topic}-1", "0")
    ]
    current = await in_thread(
        kemu_consumer_groups, *base, "--all-topics", "--to-current", "--dry-run"
    )
    assert current == (
        0,
        reset_table("g-reset", [(topic, 0, 7), (topic, 1, 10), (topic, 2, 7)]),
        "",
    )
    # A group that does not exist (Dead) is reset too: the commit creates it.
    fresh = ("--bootstrap-server", servers, "--reset-offsets", "--group", "g-fresh")
    latest = await in_thread(
        kemu_consumer_groups, *fresh, "--topic", topic, "--to-latest", "--execute"
    )
    assert latest == (0, reset_table("g-fresh", [(topic, p, 10) for p in range(PARTITIONS)]), "")
    assert await in_thread(committed, servers, topic, "g-fresh") == [10, 10, 10]
    # A consumer of the group starts where the reset put it.
    await in_thread(kemu_consumer_groups, *base, "--all-topics", "--to-offset", "8", "--execute")
    values = await in_thread(confluent_consume, servers, topic, "g-reset", 6)
    assert sorted(values) == sorted(f"v{p}-{i}".encode() for p in range(PARTITIONS) for i in (8, 9))

    # Bad input: one line (and the usage), exit 1, nothing committed.
    for argv, first in [
        (("--topic", topic, "--to-earliest", "--dry-run", "--execute"),
         "Option [reset-offsets] only accepts one of [execute] and [dry-run]"),
        (("--topic", topic, "--to-earliest", "--to-latest", "--execute"),
         'Option "[to-earliest]" can\'t be used with option "[to-latest]"'),
        (("--topic", topic, "--to-offset", "x", "--execute"),
         "Cannot parse argument 'x' of option to-offset"),
        (("--to-earliest", "--execute"),
         "One of the reset scopes should be defined: --all-topics, --topic."),
        (("--topic", topic, "--execute"),
         "Option '[reset-offsets]' requires one of the following scenarios: [to-offset], "
         "[to-earliest], [to-latest], [to-current], [shift-by], [to-datetime], "
         "[by-duration], [from-file]"),
        (("--topic", f"{topic}:one", "--to-earliest", "--execute"), 'For input string: "one"'),
    ]:  # fmt: skip
        status, out, err = await in_thread(kemu_consumer_groups, *base, *argv)
        assert (status, out, err.splitlines()[0]) == (1, "", first), argv
    status, out, err = await in_thread(
        kemu_consumer_groups,
        *fresh[:-1],
        "g-none",
        "--topic",
        topic,
        "--shift-by",
        "1",
        "--execute",
    )
    assert (status, out, err.splitlines()[0]) == (
        1,
        "",
        f"Cannot shift offset for partition {topic}-0 since there is no current committed offset",
    )
    for argv, first in [
        (("--describe", "--topic", topic),
         'Option "[topic]" can\'t be used with option "[describe]"'),
        (("--delete", "--topic", topic),
         "The consumer does not support topic-specific offset deletion from a consumer group."),
    ]:  # fmt: skip
        status, out, err = await in_thread(
            kemu_consumer_groups, "--bootstrap-server", servers, "--group", "g-reset", *argv
        )
        assert (status, out, err.splitlines()[0]) == (1, "", first), argv
    status, out, err = await in_thread(kemu_consumer_groups, "--help")
    served = {line.split()[0] for line in err.splitlines()[2:]}
    assert {"--reset-offsets", "--to-offset", "--shift-by", "--all-topics"} <= served
    assert {"--to-datetime", "--by-duration", "--from-file", "--export"} <= served
    assert await in_thread(committed, servers, topic, "g-reset") == [10, 10, 10]
    assert await in_thread(committed, servers, topic, "g-none") == [-1001] * PARTITIONS

    member = Member(servers, topic, "g-reset")
    async with anyio.create_task_group() as tg:
        try:
            tg.start_soon(partial_thread, member.run)
            await member.owns_all()
            refused = await in_thread(
                kemu_consumer_groups, *base, "--all-topics", "--to-earliest", "--execute"
            )
        finally:
            member.stop.set()  # on a failure too: no member thread outlives the test
    assert refused == (
        0,
        "\nError: Assignments can only be reset if the group 'g-reset' is inactive, but the "
        "current state is Stable.\n" + reset_table("g-reset", []),
        "",
    )


def fill_hourly(servers: str, topic: str, now_ms: int) -> None:
    """A topic of three partitions, each with ten records stamped 10, 9, ... 1 hours
    before ``now_ms`` (the record at offset i: ``10 - i`` hours before)."""
    admin = AdminClient({"bootstrap.servers": servers})
    futures = admin.create_topics([CkNewTopic(topic, PARTITIONS, 3)], operation_timeout=30)
    futures[topic].result(timeout=60)
    producer = Producer({"bootstrap.servers": servers, "acks": "all"})
    for p in range(PARTITIONS):
        for i in range(10):
            stamp = now_ms - (10 - i) * 3_600_000
            producer.produce(topic, value=f"v{p}-{i}".encode(), partition=p, timestamp=stamp)
    assert producer.flush(60) == 0


@pytest.mark.asyncio
async def test_kemu_consumer_groups_resets_by_time_from_a_file_and_exports(
    harness: Harness, tmp_path: Path
) -> None:
    """``--to-datetime`` and ``--by-duration`` reset to the first record at or after the
    time (ListOffsets by timestamp), the log end past the last; ``--from-file`` applies a
    CSV plan (one group's ``topic,partition,offset`` lines, or ``group,...`` lines for
    several), clamped to the log, without a scope, and names a group it has no plan for;
    ``--export`` prints the result as that CSV; bad dates, durations and files exit 1
    before anything is asked."""
    servers = bootstrap(harness)
    topic = f"times-{uuid.uuid4().hex[:8]}"
    now_ms = int(time.time() * 1000)
    await in_thread(fill_hourly, servers, topic, now_ms)
    base = ("--bootstrap-server", servers, "--reset-offsets", "--group", "g-time")
    third = datetime.datetime.fromtimestamp((now_ms - 7 * 3_600_000) / 1000, datetime.UTC)
    east = third.astimezone(datetime.timezone(datetime.timedelta(hours=2)))
    utc_text = third.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]  # no zone: UTC
    east_text = east.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "+02:00"
    cases = [
        (("--to-datetime", utc_text), 3),
        (("--to-datetime", east_text), 3),
        (("--to-datetime", "2999-01-01T00:00:00.000"), 10),
        (("--by-duration", "PT5H30M"), 5),
        (("--by-duration", "P1D"), 0),
        (("--by-duration", "PT30M"), 10),
    ]
    for scenario, offset in cases:
        planned = await in_thread(
            kemu_consumer_groups, *base, "--topic", topic, *scenario, "--dry-run"
        )
        rows = [(topic, p, offset) for p in range(PARTITIONS)]
        assert planned == (0, reset_table("g-time", rows), ""), scenario
    executed = await in_thread(
        kemu_consumer_groups, *base, "--topic", topic, "--by-duration", "PT5H30M", "--execute"
    )
    assert executed[0] == 0
    assert await in_thread(committed, servers, topic, "g-time") == [5, 5, 5]

    exported = await in_thread(
        kemu_consumer_groups, *base, "--all-topics", "--to-earliest", "--export", "--dry-run"
    )
    assert exported == (0, "".join(f"{topic},{p},0\n" for p in range(PARTITIONS)) + "\n", "")

    plan = tmp_path / "plan.csv"
    plan.write_text(f"{topic},0,2\n{topic},2,99\n{topic},0,1\n")
    status, out, err = await in_thread(
        kemu_consumer_groups, *base, "--from-file", str(plan), "--execute"
    )
    assert (status, out) == (0, reset_table("g-time", [(topic, 0, 1), (topic, 2, 10)]))
    assert [m.groups() for m in CLAMP.finditer(err)] == [
        ("99", "higher than latest", f"{topic}-2", "10")
    ]
    assert await in_thread(committed, servers, topic, "g-time") == [1, 5, 10]

    both = tmp_path / "both.csv"
    both.write_text(f"g-a,{topic},1,4\ng-b,{topic},1,6\n")
    groups = ("--group", "g-a", "--group", "g-b")
    status, out, err = await in_thread(
        kemu_consumer_groups, *base[:3], *groups, "--from-file", str(both), "--export",
        "--execute",
    )  # fmt: skip
    assert (status, err) == (0, "")
    assert sorted(out.splitlines()) == ["", f"g-a,{topic},1,4", f"g-b,{topic},1,6"]
    assert out.endswith("\n\n")
    assert (await in_thread(committed, servers, topic, "g-a"))[1] == 4
    assert (await in_thread(committed, servers, topic, "g-b"))[1] == 6
    status, out, _ = await in_thread(
        kemu_consumer_groups, *base[:3], "--group", "g-a", "--group", "g-none",
        "--from-file", str(both), "--dry-run",
    )  # fmt: skip
    assert status == 0
    assert "\nError: No reset plan for group g-none found\n" in out
    assert f"g-a                            {topic}" in out

    bad = tmp_path / "bad.csv"
    bad.write_text(f"{topic},0,2\n{topic},x,3\n")
    for wrong, first in [
        (("--topic", topic, "--to-datetime", "2020-01-01"),
         "Error parsing timestamp. It does not contain a 'T' according to ISO8601 format"),
        (("--topic", topic, "--to-datetime", "2020-01-01T00:00:00"),
         'Unparseable date: "2020-01-01T00:00:00Z"'),
        (("--topic", topic, "--by-duration", "5h"), "Text cannot be parsed to a Duration"),
        (("--from-file", str(tmp_path / "nope.csv")),
         f"Cannot read the reset plan {tmp_path / 'nope.csv'}: No such file or directory"),
        (("--from-file", str(bad)),
         f"{bad}:2: expected topic,partition,offset, not '{topic},x,3'"),
        (("--topic", topic, "--to-datetime", utc_text, "--from-file", str(plan)),
         'Option "[to-datetime]" can\'t be used with option "[from-file]"'),
    ]:  # fmt: skip
        status, out, err = await in_thread(kemu_consumer_groups, *base, *wrong, "--execute")
        assert (status, out, err.splitlines()[0]) == (1, "", first), wrong
    assert await in_thread(committed, servers, topic, "g-time") == [1, 5, 10]


def member_rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.split("\n")[2:] if line]


@pytest.mark.asyncio
async def test_kemu_consumer_groups_members_state_all_groups_and_delete_offsets(
    harness: Harness,
) -> None:
    """The rest of 2.7's tool against an Empty group (a confluent-kafka consumer's commits)
    and a Stable one (a live kafka-python member): ``--list --state`` with and without a
    filter; ``--describe --members [--verbose]`` and ``--state`` in 2.7's columns;
    ``--all-groups`` for --describe (groups sorted, each with its note), --reset-offsets
    (the Stable group refused, the Empty one reset) and --delete (the live group's failure
    and the other's success in one answer); ``--delete-offsets`` drops exactly the named
    partitions' commits, reports a missing topic as ``Not Provided``, and is refused for
    the partitions a live member subscribes to."""
    topic = await new_topic(harness)
    servers = bootstrap(harness)
    await in_thread(confluent_consume, servers, topic, "g-idle", COUNT)
    idle = await in_thread(committed, servers, topic, "g-idle")
    assert sum(idle) == COUNT
    base = ("--bootstrap-server", servers)
    member = Member(servers, topic, "g-live")
    async with anyio.create_task_group() as tg:
        try:
            tg.start_soon(partial_thread, member.run)
            await member.owns_all()

            status, out, err = await in_thread(kemu_consumer_groups, *base, "--list", "--state")
            assert (status, err) == (0, "")
            lines = out.splitlines()
            assert lines[0] == "GROUP           STATE"
            assert sorted(lines[1:]) == ["g-idle          Empty", "g-live          Stable"]
            stable = await in_thread(
                kemu_consumer_groups, *base, "--list", "--state", "Stable,Dead"
            )
            assert stable == (0, "GROUP           STATE\ng-live          Stable\n", "")

            status, out, err = await in_thread(
                kemu_consumer_groups, *base, "--describe", "--group", "g-live", "--members"
            )
            ((group, consumer, host, client, partitions),) = member_rows(out)
            assert (status, err, group, host, partitions) == (0, "", "g-live", "/127.0.0.1", "3")
            assert consumer.startswith(client + "-")  # kafka-python-<version>-<uuid>
            width = max(15, len(consumer))
            assert out.split("\n")[1] == (
                "GROUP           " + "CONSUMER-ID".ljust(width) + " HOST            "
                + "CLIENT-ID".ljust(max(15, len(client))) + " #PARTITIONS     "
            )  # fmt: skip
            status, out, err = await in_thread(
                kemu_consumer_groups,
                *base,
                "--describe",
                "--group",
                "g-live",
                "--members",
                "--verbose",
            )
            assert (status, err) == (0, "")
            assert out.split("\n")[1].endswith(" #PARTITIONS     ASSIGNMENT")
            assert out.split("\n")[2].endswith(f" 3               {topic}(0,1,2)")

            status, out, err = await in_thread(
                kemu_consumer_groups, *base, "--describe", "--group", "g-live", "--state"
            )
            assert (status, err) == (0, "")
            header, row = out.split("\n")[1:3]
            host_port, broker = row.split()[1], int(row.split()[2].strip("()"))
            assert host_port == f"127.0.0.1:{harness.cluster.ports[broker]}"
            coordinator = f"{host_port} ({broker})"
            column = max(25, len(coordinator))
            assert header == (
                "GROUP".ljust(column) + " COORDINATOR (ID)          ASSIGNMENT-STRATEGY  "
                "STATE           #MEMBERS"
            )
            assert row == (
                "g-live".ljust(column) + f" {coordinator:<25} range                "
                "Stable          1"
            )
            assert out == f"\n{header}\n{row}\n"

            # --all-groups: sorted by id; the Empty group's note on stderr, its rows too.
            status, out, err = await in_thread(
                kemu_consumer_groups, *base, "--describe", "--all-groups"
            )
            assert (status, err) == (0, "\nConsumer group 'g-idle' has no active members.\n")
            rows = [line.split()[0] for line in out.splitlines() if line]
            idle_rows = ["g-idle"] * sum(1 for n in idle if n)
            assert rows == ["GROUP", *idle_rows, "GROUP"] + ["g-live"] * PARTITIONS
            missing = await in_thread(
                kemu_consumer_groups, *base, "--describe", "--group", "g-none", "--members"
            )
            assert missing == (0, "\nError: Consumer group 'g-none' does not exist.\n", "")

            refused = await in_thread(
                kemu_consumer_groups,
                *base,
                "--delete-offsets",
                "--group",
                "g-live",
                "--topic",
                topic,
            )
            subscribed = (
                "Error: org.apache.kafka.common.errors.GroupSubscribedToTopicException: "
                "Deleting offsets of a topic is forbidden while the consumer group is "
                "actively subscribed to it."
            )
            assert refused == (
                0,
                "\nError: Encounter some partition level error, see the follow-up details:\n"
                "\n" + offsets_table([(topic, str(p), subscribed) for p in range(PARTITIONS)]),
                "",
            )

            status, out, err = await in_thread(
                kemu_consumer_groups,
                *base,
                "--reset-offsets",
                "--all-groups",
                "--all-topics",
                "--to-earliest",
                "--execute",
            )
            assert (status, err) == (0, "")
            assert out.startswith(
                "\nError: Assignments can only be reset if the group 'g-live' is inactive, "
                "but the current state is Stable.\n"
            )
            assert out.endswith(
                reset_table("g-idle", [(topic, p, 0) for p in range(PARTITIONS) if idle[p]])
            )
            assert await in_thread(committed, servers, topic, "g-idle") == [
                0 if n else -1001 for n in idle
            ]

            deleted = await in_thread(kemu_consumer_groups, *base, "--delete", "--all-groups")
            assert deleted == (
                0,
                "\nError: Deletion of some consumer groups failed:\n"
                "* Group 'g-live' could not be deleted due to: "
                "org.apache.kafka.common.errors.GroupNotEmptyException: The group is not empty.\n"
                "\nThese consumer groups were deleted successfully: 'g-idle'\n",
                "",
            )
        finally:
            member.stop.set()  # on a failure too: no member thread outlives the test

    # --delete-offsets of an Empty group: only the named partition's commit goes; a topic
    # that does not exist is a row of its own and does not fail the request.
    await in_thread(confluent_consume, servers, topic, "g-drop", COUNT)
    before = await in_thread(committed, servers, topic, "g-drop")
    dropped = next(p for p in range(PARTITIONS) if before[p] > 0)
    answer = await in_thread(
        kemu_consumer_groups,
        *base,
        "--delete-offsets",
        "--group",
        "g-drop",
        "--topic",
        f"{topic}:{dropped}",
        "--topic",
        "no-such-topic",
    )
    assert answer == (
        0,
        f"Request succeed for deleting offsets with topic {topic}:{dropped}, no-such-topic "
        "group g-drop\n\n"
        + offsets_table(
            [
                (topic, str(dropped), "Successful"),  # rows by topic + partition, as text
                (
                    "no-such-topic",
                    "Not Provided",
                    "Error: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
                    "This server does not host this topic-partition.",
                ),
            ]
        ),
        "",
    )
    after = await in_thread(committed, servers, topic, "g-drop")
    assert after == [-1001 if p == dropped else before[p] for p in range(PARTITIONS)]
    gone = await in_thread(
        kemu_consumer_groups, *base, "--delete-offsets", "--group", "g-none", "--topic", topic
    )
    not_found = (
        "Error: org.apache.kafka.common.errors.GroupIdNotFoundException: "
        "The group id does not exist."
    )
    assert gone == (
        0,
        "\nError: 'g-none' does not exist.\n\n"
        + offsets_table([(topic, str(p), not_found) for p in range(PARTITIONS)]),
        "",
    )


def offsets_table(rows: list[tuple[str, str, str]]) -> str:
    """``deleteOffsets``' table: the header, then a row per partition."""
    line = "{:<30} {:<15} {:<15}\n"
    return line.format("TOPIC", "PARTITION", "STATUS") + "".join(line.format(*r) for r in rows)


# ----------------------------------------------------------------- kemu console-consumer --group


class ConsoleMember:
    """A ``kemu console-consumer --group`` process; its stdout lines as they come."""

    def __init__(self, servers: str, topic: str, group: str) -> None:
        self.argv = [
            sys.executable, "-m", "cluster.cli", "console-consumer", "--bootstrap-server",
            servers, "--topic", topic, "--group", group, "--from-beginning",
            "--property", "print.partition=true", "--consumer-property",
            "heartbeat.interval.ms=200",
        ]  # fmt: skip
        self.lines: list[str] = []
        self.process: anyio.abc.Process | None = None

    async def run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        async with await anyio.open_process(self.argv, cwd=REPO) as process:
            self.process = process
            task_status.started()
            assert process.stdout is not None
            buffered = b""
            async for chunk in process.stdout:
                buffered += chunk
                *done, buffered = buffered.split(b"\n")
                self.lines += [line.decode() for line in done]

    def partitions(self) -> set[int]:
        return {int(line.split("\t")[0].removeprefix("Partition:")) for line in self.lines}

    def values(self) -> list[str]:
        return [line.split("\t")[1] for line in self.lines]

    async def interrupt(self) -> tuple[int, str]:
        """SIGINT, then its exit status and stderr."""
        process = self.process
        assert process is not None
        assert process.stderr is not None
        process.send_signal(signal.SIGINT)
        err = b""
        with anyio.fail_after(WAIT):
            async for chunk in process.stderr:
                err += chunk
            status = await process.wait()
        return status, err.decode()

    def kill(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.kill()


def produce(servers: str, topic: str, values: list[str]) -> None:
    producer = Producer({"bootstrap.servers": servers, "acks": "all"})
    for i, value in enumerate(values):
        producer.produce(topic, key=f"k{i}".encode(), value=value.encode())
    assert producer.flush(60) == 0


def members_owning(servers: str, group: str) -> list[int]:
    """How many partitions each member of the group owns (Stable groups only)."""
    admin = AdminClient({"bootstrap.servers": servers})
    described = admin.describe_consumer_groups([group])[group].result(timeout=60)
    if described.state.name != "STABLE":
        return []
    return sorted(len(m.assignment.topic_partitions) for m in described.members)


@pytest.mark.asyncio
async def test_console_consumers_share_a_group_and_commit(harness: Harness) -> None:
    """Two ``kemu console-consumer --group`` processes split a topic's partitions (each its
    part, together every record once); when one ends, the other takes every partition;
    what they consumed is committed (``kemu consumer-groups --describe``: no lag) and a
    confluent-kafka consumer of the group resumes after it."""
    servers = bootstrap(harness)
    topic = f"console-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": servers})
    created = admin.create_topics([CkNewTopic(topic, PARTITIONS, 3)], operation_timeout=30)
    await in_thread(lambda: created[topic].result(timeout=60))
    first, second = (
        ConsoleMember(servers, topic, "g-console"),
        ConsoleMember(servers, topic, "g-console"),
    )
    async with anyio.create_task_group() as tg:
        try:
            await tg.start(first.run)
            await tg.start(second.run)
            await eventually(
                lambda: in_thread(members_owning, servers, "g-console"),
                until=lambda owning: owning == [1, 2],
                timeout=WAIT,
                interval=0.2,
            )
            batch = [f"a{i}" for i in range(COUNT)]
            await in_thread(produce, servers, topic, batch)
            await until(lambda: len(first.lines) + len(second.lines) >= COUNT, timeout=WAIT)
            assert sorted(first.values() + second.values()) == sorted(batch)
            assert first.partitions()
            assert second.partitions()
            assert not first.partitions() & second.partitions()
            status, err = await first.interrupt()
            assert (status, err) == (0, f"Processed a total of {len(first.lines)} messages\n")
            await eventually(
                lambda: in_thread(members_owning, servers, "g-console"),
                until=lambda owning: owning == [PARTITIONS],
                timeout=WAIT,
                interval=0.2,
            )
            before = len(second.lines)
            later = [f"b{i}" for i in range(COUNT)]
            await in_thread(produce, servers, topic, later)
            await until(lambda: len(second.lines) >= before + COUNT, timeout=WAIT)
            assert sorted(second.values()[before:]) == sorted(later)
            assert second.partitions() == set(range(PARTITIONS))
            status, err = await second.interrupt()
            assert (status, err) == (0, f"Processed a total of {len(second.lines)} messages\n")
        finally:
            first.kill()
            second.kill()
    assert sum(await in_thread(committed, servers, topic, "g-console")) == 2 * COUNT
    status, out, err = await in_thread(
        kemu_consumer_groups, "--bootstrap-server", servers, "--describe", "--group", "g-console"
    )
    assert (status, err) == (0, "\nConsumer group 'g-console' has no active members.\n")
    rows = [line.split() for line in out.splitlines() if line.startswith("g-console ")]
    assert len(rows) == PARTITIONS
    assert all(row[5] == "0" for row in rows), out  # LAG: every record consumed is committed
    await in_thread(produce, servers, topic, [f"c{i}" for i in range(10)])
    resumed = await in_thread(confluent_consume, servers, topic, "g-console", 10)
    assert sorted(resumed) == sorted(f"c{i}".encode() for i in range(10))


def console_consume(servers: str, topic: str, group: str, count: int) -> tuple[int, str, str]:
    done = subprocess.run(
        [
            sys.executable, "-m", "cluster.cli", "console-consumer", "--bootstrap-server",
            servers, "--topic", topic, "--group", group, "--from-beginning",
            "--max-messages", str(count),
        ],
        cwd=REPO, capture_output=True, text=True, timeout=WAIT, check=False,
    )  # fmt: skip
    return done.returncode, done.stdout, done.stderr


@pytest.mark.asyncio
async def test_console_consumer_commits_only_what_it_printed(harness: Harness) -> None:
    """``--max-messages`` ends a member within a fetched batch: it commits the position
    after the last record it printed, not the batch's end, so the next member of the
    group prints the rest, each record once."""
    topic = await new_topic(harness)
    servers = bootstrap(harness)
    status, first, err = await in_thread(console_consume, servers, topic, "g-max", 5)
    assert (status, err) == (0, "Processed a total of 5 messages\n")
    assert sum(await in_thread(committed, servers, topic, "g-max")) == 5
    status, rest, err = await in_thread(console_consume, servers, topic, "g-max", COUNT - 5)
    assert (status, err) == (0, f"Processed a total of {COUNT - 5} messages\n")
    assert sorted((first + rest).split()) == sorted(f"v{i}" for i in range(COUNT))
    assert sum(await in_thread(committed, servers, topic, "g-max")) == COUNT


@pytest.mark.asyncio
async def test_group_consumer_heartbeats_through_a_fetch_longer_than_its_session(
    harness: Harness,
) -> None:
    """``GroupConsumer`` heartbeats from a task of its own, on a connection of its own to
    the coordinator: a Fetch to the coordinator's broker that waits longer than
    ``session.timeout.ms`` (6000, the broker's minimum) neither holds the heartbeats back
    nor lets the coordinator expire the member, which keeps its generation."""
    topic = await new_topic(harness)
    clock = RealClock()
    config = GroupConfig(session_timeout_ms=6000, heartbeat_interval_ms=500, auto_commit=False)
    async with KafkaDataClient(bootstrap(harness), clock=clock) as client:
        member = GroupConsumer(client, "g-heartbeats", topic, config, clock)
        await member.ensure_active()
        assert sorted(member.positions) == list(range(PARTITIONS))
        generation = member.generation
        metadata = await client.metadata([topic])
        where = {b.broker_id: (b.host, b.port) for b in metadata.brokers}
        (found,) = metadata.topics
        led = [p.partition for p in found.partitions if where[p.leader] == member.coordinator]
        assert led, "the coordinator leads a partition of a topic on all three brokers"
        end = {p: member.positions[p] for p in led[:1]}  # latest: no record comes
        try:
            async with member.heartbeating():
                started = clock.now()
                answers = await client.fetch_positions(topic, end, max_wait_ms=8000)
                waited = clock.now() - started
                beats = member.heartbeats
            assert waited >= 7.5
            assert [a.error_code for a in answers.values()] == [ErrorCode.NONE]
            assert beats >= 8  # about one every 500 ms through the 8 s fetch
            await member.maintain()  # nothing asks it to rejoin
            assert (member.rejoin, member.generation) == (False, generation)
        finally:
            await member.close()
