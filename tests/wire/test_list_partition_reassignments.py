"""ListPartitionReassignments v0 on a running 3-broker cluster: a reassignment started through
``/admin/reassign_partitions`` whose new replica's broker is down stays in flight, and
kemu's client and kafka-python list it from the controller's context (replicas, adding,
removing); a partition asked for that is not being reassigned is left out; a broker whose
controller is not the active one answers NOT_CONTROLLER with Kafka's message; ``kemu topics
--describe`` shows its adding and removing replicas and does not count it under-replicated;
``kemu reassign-partitions --list`` prints it; once the broker is back the reassignment
completes and the list is empty."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from actors.zk import kafka_zk
from cluster.cli.reassign import run_reassign_command
from cluster.cli.topics import run_topic_command
from cluster.kafka.client import KafkaAdminClient
from cluster.launch.cluster import Cluster
from protocol import zkdata
from protocol.errors import ErrorCode
from protocol.ids import BrokerId, TopicName
from protocol.kafka_api import (
    CreatableTopic,
    ListPartitionReassignmentsRequestData,
    ListPartitionReassignmentsResponseData,
    PartitionAssignment,
)
from tests.support.hosting import hosted_fixture
from tests.support.quiet_cluster import quiet_three_brokers
from tests.support.waiting import eventually, in_threads
from tests.support.zookeeper import STORES

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]

HOST = "127.0.0.1"
WAIT = 30.0


@hosted_fixture(params=STORES)
async def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Cluster]:
    server = request.getfixturevalue("zookeeper_server") if request.param == "zookeeper" else None
    async for running in quiet_three_brokers(tmp_path, server):
        yield running


in_thread = in_threads(WAIT)


def kafka_python_list(bootstrap: str) -> dict[tuple[str, int], dict[str, list[int]]]:
    from kafka.admin import KafkaAdminClient as KpAdminClient  # type: ignore[import-untyped]

    client = KpAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20_000)
    try:
        listed = client.list_partition_reassignments()
    finally:
        client.close()
    return {(tp.topic, tp.partition): value for tp, value in listed.items()}


async def topics_describe(bootstrap: str, *argv: str) -> list[str]:
    """``kemu topics --describe ARGV --bootstrap-server BOOTSTRAP``'s lines (exit 0)."""
    out, err = io.StringIO(), io.StringIO()
    rc = await run_topic_command(
        ["--describe", *argv, "--bootstrap-server", bootstrap], out=out, err=err
    )
    assert (rc, err.getvalue()) == (0, "")
    return out.getvalue().splitlines()


async def reassign_list(bootstrap: str) -> str:
    """``kemu reassign-partitions --list --bootstrap-server BOOTSTRAP``'s output (exit 0)."""
    out, err = io.StringIO(), io.StringIO()
    rc = await run_reassign_command(["--list", "--bootstrap-server", bootstrap], out=out, err=err)
    assert (rc, err.getvalue()) == (0, "")
    return out.getvalue()


def rows(response: ListPartitionReassignmentsResponseData) -> list[tuple[Any, ...]]:
    return [
        (t.name, p.partition_index, p.replicas, p.adding_replicas, p.removing_replicas)
        for t in response.topics
        for p in t.partitions
    ]


async def test_a_halted_reassignment_is_listed_until_it_completes(cluster: Cluster) -> None:
    """r-0 on [a] is reassigned to [a, b] with b stopped: listed as replicas [a, b],
    adding [b], removing []; the untouched s-0 is not listed; a non-controller says
    NOT_CONTROLLER; b started again, the list empties."""
    c = await cluster.controller_id()
    a, b = (c + 1) % 3, (c + 2) % 3
    bootstrap = f"{HOST}:{cluster.ports[c]}"
    async with KafkaAdminClient(bootstrap) as client:
        created = await client.create_topics(
            [
                CreatableTopic(
                    name=TopicName(name),
                    num_partitions=-1,
                    replication_factor=-1,
                    assignments=(PartitionAssignment(partition=0, broker_ids=(BrokerId(a),)),),
                )
                for name in ("r", "s")
            ]
        )
        assert [t.error_code for t in created] == [ErrorCode.NONE] * 2
        assert rows(await client.list_partition_reassignments()) == []
    cluster.stop_broker(b)
    assert await cluster.wait_stopped(b, timeout=WAIT)
    assert cluster.store is not None
    session = await cluster.store.open_session(timeout=10.0, name="probe")
    try:
        await kafka_zk.create_partition_reassignment(
            session,
            zkdata.PartitionReassignment(
                partitions=(
                    zkdata.PartitionReplicas(
                        topic=TopicName("r"), partition=0, replicas=(BrokerId(a), BrokerId(b))
                    ),
                )
            ),
        )
    finally:
        await session.close()
        session.events.close()

    async with KafkaAdminClient(bootstrap) as client:
        listed = await eventually(
            client.list_partition_reassignments, until=lambda r: bool(r.topics)
        )
        assert listed.error_code is ErrorCode.NONE
        assert rows(listed) == [("r", 0, (a, b), (b,), ())]
        some = await client.list_partition_reassignments([("s", 0), ("r", 0), ("nope", 3)])
        assert rows(some) == [("r", 0, (a, b), (b,), ())]
        refused = await client.request_broker(
            (HOST, cluster.ports[a]),
            ListPartitionReassignmentsRequestData(topics=None),
            timeout=WAIT,
        )
    assert refused == ListPartitionReassignmentsResponseData(
        error_code=ErrorCode.NOT_CONTROLLER,
        error_message="This is not the correct controller for this cluster.",
    )
    described = await topics_describe(bootstrap, "--topic", "r")
    assert described[0].startswith("Topic: r\tPartitionCount: 1\tReplicationFactor: 1\t")
    assert described[1:] == [
        f"\tTopic: r\tPartition: 0\tLeader: {a}\tReplicas: {a},{b}\tIsr: {a}"
        f"\tAdding Replicas: {b}\tRemoving Replicas: "
    ]
    assert (await topics_describe(bootstrap, "--topic", "s"))[1:] == [
        f"\tTopic: s\tPartition: 0\tLeader: {a}\tReplicas: {a}\tIsr: {a}"
    ]
    assert await reassign_list(bootstrap) == (
        f"Current partition reassignments:\nr-0: replicas: {a},{b}. adding: {b}.\n"
    )
    # testIsNotUnderReplicatedWhenAdding: the ISR covers the replicas being kept.
    assert await topics_describe(bootstrap, "--under-replicated-partitions") == []
    kp = await in_thread(kafka_python_list, bootstrap)
    assert kp == {("r", 0): {"replicas": [a, b], "adding_replicas": [b], "removing_replicas": []}}

    await cluster.start_broker(b)
    async with KafkaAdminClient(bootstrap) as client:
        await eventually(
            client.list_partition_reassignments, until=lambda r: not r.topics, timeout=WAIT
        )
    assert await reassign_list(bootstrap) == "No partition reassignments found.\n"
