"""A running broker's replica fetchers resized by a dynamic ``num.replica.fetchers``
(``DynamicThreadPool.reconfigure`` -> ``AbstractFetcherManager.resizeThreadPool``), on
three in-process brokers (embedded store and real ZooKeeper): while a producer writes
acks=all without pause to a topic led by broker 0, the cluster default and the brokers'
own values are altered over the wire (IncrementalAlterConfigs), up and down. After each
change every follower has exactly the fetchers ``replica_fetcher-<id>-0`` that
``getFetcherId`` gives the topic's partitions over the new count, and at the end the
followers' log files are the leader's byte for byte, holding each acknowledged record
once, at consecutive offsets. A count that is not within half and double the current
one, or below 1, is refused with Kafka's INVALID_REQUEST and changes nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from actors.broker.replica_fetcher import fetcher_name
from actors.broker.replica_fetcher_state import fetcher_id
from cluster.kafka.client import KafkaAdminClient
from protocol.errors import ErrorCode
from protocol.ids import BrokerId
from protocol.kafka_api import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    ConfigResourceType,
)
from tests.support.configs import create_assigned, produce_record, stored
from tests.support.creation import Harness, running_cluster
from tests.support.hosting import hosted_fixture
from tests.support.record_batches import decode_batches
from tests.support.waiting import eventually
from tests.support.zookeeper import STORES

pytestmark = pytest.mark.asyncio

WAIT = 30.0
TOPIC = "moving"
PARTITIONS = 6
FOLLOWERS = (1, 2)


@hosted_fixture(params=STORES)
async def h(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Harness]:
    server = request.getfixturevalue("zookeeper_server") if request.param == "zookeeper" else None
    async with running_cluster(tmp_path / "logs", server, brokers=3) as h:
        yield h


def resource(name: str, value: str | None) -> AlterConfigsResource:
    """``num.replica.fetchers`` of broker ``name`` ("": the cluster default) set, or
    deleted for None."""
    return AlterConfigsResource(
        resource_type=ConfigResourceType.BROKER,
        resource_name=name,
        configs=(
            AlterableConfig(
                name="num.replica.fetchers",
                value=value,
                operation=AlterConfigOp.SET if value is not None else AlterConfigOp.DELETE,
            ),
        ),
    )


async def alter(h: Harness, name: str, value: str | None) -> tuple[ErrorCode, str | None]:
    async with KafkaAdminClient(f"127.0.0.1:{h.cluster.ports[0]}") as client:
        results = await client.incremental_alter_configs([resource(name, value)])
    result = results[(ConfigResourceType.BROKER, name)]
    return result.error_code, result.error_message


def expected(count: int) -> list[str]:
    """The fetchers a follower of every partition (all led by broker 0) runs."""
    ids = {fetcher_id(TOPIC, p, count) for p in range(PARTITIONS)}
    return sorted(fetcher_name(BrokerId(0), fid) for fid in ids)


def fetchers(h: Harness, broker: int) -> list[str]:
    names = h.cluster.nodes[broker].mailbox_depths()
    return sorted(n for n in names if n.startswith("replica_fetcher-"))


async def resized(h: Harness, since: int, counts: dict[int, int]) -> None:
    """Each broker of ``counts`` traced ``replica_fetchers_resized`` after event ``since``
    with its fetchers for that count, and runs exactly those."""
    for broker, count in counts.items():

        async def done(broker: int = broker, count: int = count) -> bool:
            return any(
                e.type == "replica_fetchers_resized"
                and e.fields.get("broker") == broker
                and e.fields.get("fetchers") == expected(count)
                for e in h.sink.events[since:]
            )

        await eventually(done, timeout=WAIT)
        assert fetchers(h, broker) == expected(count)


async def change(h: Harness, name: str, value: str | None, counts: dict[int, int]) -> None:
    since = len(h.sink.events)
    assert await alter(h, name, value) == (ErrorCode.NONE, None)
    await resized(h, since, counts)


def segments(h: Harness, broker: int, partition: int) -> bytes:
    directory = h.logs / f"broker-{broker}" / f"{TOPIC}-{partition}"
    return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))


async def test_fetchers_resize_at_run_time_without_losing_or_refetching_records(
    h: Harness,
) -> None:
    await create_assigned(h, TOPIC, PARTITIONS, [0, 1, 2])
    for broker in FOLLOWERS:

        async def running(b: int = broker) -> list[str]:
            return fetchers(h, b)

        assert await eventually(running, until=lambda n: n == expected(1), timeout=WAIT)

    acked: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    stop = anyio.Event()

    async def produce() -> None:
        n = 0
        while not stop.is_set():
            partition = n % PARTITIONS
            value = f"record-{n}".encode()
            response = await produce_record(h, TOPIC, partition, value, timeout=WAIT)
            assert response.error_code is ErrorCode.NONE
            assert response.base_offset == len(acked[partition])
            acked[partition].append(value)
            n += 1

    async def progress() -> None:
        """Two more records acknowledged on every partition (acks=all: both followers
        fetched them)."""
        target = sum(map(len, acked.values())) + 2 * PARTITIONS

        async def total() -> int:
            return sum(map(len, acked.values()))

        await eventually(total, until=lambda t: t >= target, timeout=WAIT)

    async with anyio.create_task_group() as tg:
        tg.start_soon(produce)
        await progress()
        for name, value, counts in (
            ("", "2", {1: 2, 2: 2}),  # the cluster default, doubled
            ("", "4", {1: 4, 2: 4}),
            ("1", "2", {1: 2}),  # broker 1's own, halved; broker 2 keeps 4
            ("", "2", {2: 2}),
            ("1", "1", {1: 1}),
            ("1", None, {1: 2}),  # back to the default
        ):
            await change(h, name, value, counts)
            await progress()
        stop.set()

    assert all(len(values) > 0 for values in acked.values())
    for partition in range(PARTITIONS):

        async def logs(p: int = partition) -> list[bytes]:
            return [segments(h, b, p) for b in (0, 1, 2)]

        files = await eventually(logs, until=lambda f: f[0] == f[1] == f[2], timeout=WAIT)
        records = [r for batch in decode_batches(files[0]) for r in batch.batch.records]
        assert [r.offset for r in records] == list(range(len(acked[partition])))
        assert [r.value for r in records] == acked[partition]


async def test_a_count_beyond_half_or_double_is_refused(h: Harness) -> None:
    """``DynamicThreadPool.validateReconfiguration`` through ``processReconfiguration``:
    the broker's answer is "Invalid dynamic configuration" (Kafka's own text names the
    bound only in its log), nothing is stored, the fetchers stay."""
    refused = (
        ErrorCode.INVALID_REQUEST,
        "Invalid config value for resource ConfigResource(type=BROKER, name='1'):"
        " Invalid dynamic configuration",
    )
    assert await alter(h, "1", "3") == refused  # more than double 1
    assert await alter(h, "1", "0") == refused
    assert await alter(h, "1", "-1") == refused
    assert await stored(h, "1") is None
    assert await alter(h, "", "3") == (
        ErrorCode.INVALID_REQUEST,
        "Invalid config value for resource ConfigResource(type=BROKER, name=''):"
        " Invalid dynamic configuration",
    )
    assert await stored(h, "<default>") is None
    await change_to_five(h)
    assert await alter(h, "1", "11") == refused  # more than double 5
    assert await alter(h, "1", "1") == refused  # less than half 5 (2, in Java's integers)
    assert await alter(h, "1", "2") == (ErrorCode.NONE, None)
    assert await alter(h, "1", "x") == (
        ErrorCode.INVALID_REQUEST,
        "Invalid config value for resource ConfigResource(type=BROKER, name='1'):"
        " Invalid value x for configuration num.replica.fetchers:"
        " Not a number of type INT",
    )


async def change_to_five(h: Harness) -> None:
    """Broker 1 at 5 fetchers per leader, in steps Kafka accepts (1, 2, 4, 5)."""
    for value in ("2", "4", "5"):
        since = len(h.sink.events)
        assert await alter(h, "1", value) == (ErrorCode.NONE, None)

        async def applied(since: int = since) -> bool:
            return any(
                e.type == "broker_config_applied" and e.fields.get("broker") == 1
                for e in h.sink.events[since:]
            )

        await eventually(applied, timeout=WAIT)
