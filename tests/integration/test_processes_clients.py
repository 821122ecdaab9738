"""Real Kafka admin clients against ``kemu up --processes`` (one OS process per broker),
on the embedded store served over TCP and on a real ZooKeeper: kafka-python,
confluent-kafka and aiokafka create topics (and add partitions); ``kcat -L`` then shows
every partition with a leader and ISR, the znodes say the same (assignment, state, config,
as Kafka writes them) and every replica has its log directory in its broker's log dir.
``kemu topics`` does the same through the store (``--zookeeper``) and over the wire.

One cluster serves the whole module per store: the tests create distinct topics and only
read what they created.
"""

from __future__ import annotations

import functools
import io
import json
import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from cluster.cli.topics import run_topic_command
from cluster.launch.connect import ClusterFile, open_store
from tests.support.kemu_commands import KemuUp, alive
from tests.support.waiting import wait_until
from tests.support.zookeeper import STORES, ZooKeeperServer

pytestmark = [
    pytest.mark.processes,
    pytest.mark.slow,
]  # kemu up --processes and real client processes

CLIENT_TIMEOUT_MS = 20_000
SETTLE_TIMEOUT = 30.0  # seconds for kcat to show a created topic complete


@dataclass
class Running:
    up: KemuUp
    info: ClusterFile

    @property
    def bootstrap(self) -> str:
        return self.info.bootstrap_servers


@pytest.fixture(scope="module", params=STORES)
def running(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Running]:
    """``kemu up --processes`` with three broker processes, on the embedded store (served
    over TCP to the broker processes) or on a real ZooKeeper under a fresh chroot."""
    tmp = tmp_path_factory.mktemp(f"processes-{request.param}")
    extra = ["--processes"]
    if request.param == "zookeeper":
        server: ZooKeeperServer = request.getfixturevalue("zookeeper_server")
        extra += ["--zookeeper", f"{server.hosts}/kemu-{uuid.uuid4().hex}"]
    up = KemuUp(tmp, *extra)
    pids: list[int] = []
    try:
        up.start()
        info = ClusterFile.read(up.cluster_file)
        assert info.processes
        pids = [b.pid for b in info.brokers]
        yield Running(up, info)
    finally:
        # Killed rather than stopped: a clean stop is test_processes.py's subject, and
        # killing takes no time whatever the brokers were doing.
        up.kill()
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


# ------------------------------------------------------------------ what every test checks


def kcat_partitions(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    """kcat's partitions of ``topic`` (empty when kcat failed or does not know it yet)."""
    out = subprocess.run(
        ["kcat", "-L", "-J", "-b", bootstrap, "-t", topic, "-m", "5"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if out.returncode != 0:
        return []
    topics = {t["topic"]: t for t in json.loads(out.stdout).get("topics", [])}
    found = topics.get(topic, {})
    if found.get("error"):
        return []
    return sorted(found.get("partitions", []), key=lambda p: p["partition"])


async def read_znodes(info: ClusterFile, topic: str) -> tuple[Any, dict[int, Any], Any]:
    """The topic's assignment JSON, each partition's state JSON, and its config JSON."""
    secret = info.secret_bytes if info.store.startswith("embedded://") else None
    async with open_store(info.store, name="test-probe", secret=secret) as store:
        session = await store.open_session(timeout=10.0, name="probe")
        try:
            assignment = json.loads((await session.get(f"/brokers/topics/{topic}"))[0])
            states = {
                int(p): json.loads(
                    (await session.get(f"/brokers/topics/{topic}/partitions/{p}/state"))[0]
                )
                for p in assignment["partitions"]
            }
            config = json.loads((await session.get(f"/config/topics/{topic}"))[0])
        finally:
            await session.close()
    return assignment, states, config


def check_created(
    cluster: Running,
    topic: str,
    partitions: int,
    rf: int,
    *,
    replicas: dict[int, list[int]] | None = None,
    config: dict[str, str] | None = None,
) -> None:
    """kcat shows ``partitions`` partitions of ``rf`` replicas, each led by its first
    replica with ISR = replicas; the znodes say the same, the config is as given, and each
    replica's log directory exists."""

    def complete(found: list[dict[str, Any]]) -> bool:
        return len(found) == partitions and all(
            p["leader"] == p["replicas"][0]["id"] and len(p["isrs"]) == rf for p in found
        )

    listed = wait_until(lambda: kcat_partitions(cluster.bootstrap, topic), complete, SETTLE_TIMEOUT)
    seen = {p["partition"]: [r["id"] for r in p["replicas"]] for p in listed}
    assert {len(r) for r in seen.values()} == {rf}
    for found in listed:
        assert sorted(i["id"] for i in found["isrs"]) == sorted(seen[found["partition"]])
    if replicas is not None:
        assert seen == replicas
    assignment, states, stored_config = anyio.run(read_znodes, cluster.info, topic)
    assert assignment["version"] == 2
    assert {int(p): r for p, r in assignment["partitions"].items()} == seen
    assert (assignment["adding_replicas"], assignment["removing_replicas"]) == ({}, {})
    for partition, state in states.items():
        assert state["leader"] == seen[partition][0]
        assert sorted(state["isr"]) == sorted(seen[partition])
        assert state["controller_epoch"] >= 1
    assert stored_config == {"version": 1, "config": config or {}}
    log_dirs = {b.id: Path(b.log_dir) for b in cluster.info.brokers}
    missing = [
        f"broker {b}: {topic}-{p}"
        for p, brokers in seen.items()
        for b in brokers
        if not (log_dirs[b] / f"{topic}-{p}").is_dir()
    ]
    assert missing == []


# ------------------------------------------------------------------ the clients


def test_kafka_python_creates_a_topic_and_adds_partitions(running: Running) -> None:
    """kafka-python's KafkaAdminClient: create 3 x RF 2, then grow to 4 partitions."""
    from kafka.admin import (  # type: ignore[import-untyped]
        KafkaAdminClient,
        NewPartitions,
        NewTopic,
    )

    client = KafkaAdminClient(
        bootstrap_servers=running.bootstrap, request_timeout_ms=CLIENT_TIMEOUT_MS
    )
    try:
        client.create_topics([NewTopic("kp", num_partitions=3, replication_factor=2)])
        check_created(running, "kp", 3, 2)
        client.create_partitions({"kp": NewPartitions(4)})
    finally:
        client.close()
    check_created(running, "kp", 4, 2)


def test_confluent_kafka_creates_a_topic_with_a_config(running: Running) -> None:
    """confluent-kafka's AdminClient: 4 partitions x RF 3 with retention.ms=1000."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    client = AdminClient({"bootstrap.servers": running.bootstrap})
    futures = client.create_topics(
        [NewTopic("ck", 4, 3, config={"retention.ms": "1000"})],
        request_timeout=CLIENT_TIMEOUT_MS / 1000,
    )
    for future in futures.values():
        assert future.result(timeout=CLIENT_TIMEOUT_MS / 1000) is None
    check_created(running, "ck", 4, 3, config={"retention.ms": "1000"})


def test_aiokafka_creates_a_topic_with_a_manual_assignment(running: Running) -> None:
    """aiokafka's AIOKafkaAdminClient: replicas placed by hand."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # type: ignore[import-untyped]

    placement = {0: [2, 0], 1: [0, 1], 2: [1, 2]}

    async def create() -> None:
        client = AIOKafkaAdminClient(
            bootstrap_servers=running.bootstrap, request_timeout_ms=CLIENT_TIMEOUT_MS
        )
        await client.start()
        try:
            topic = NewTopic(
                "aio", num_partitions=-1, replication_factor=-1, replica_assignments=placement
            )
            await client.create_topics([topic])
        finally:
            await client.close()

    anyio.run(create, backend="asyncio")
    check_created(running, "aio", 3, 2, replicas=placement)


def test_kcat_lists_the_brokers_and_the_controller(running: Running) -> None:
    """kcat -L sees the three broker processes' listeners and the cluster's controller."""
    out = subprocess.run(
        ["kcat", "-L", "-J", "-b", running.bootstrap, "-m", "5"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    listing = json.loads(out.stdout)
    assert sorted((b["id"], b["name"]) for b in listing["brokers"]) == sorted(
        (b.id, f"{b.host}:{b.port}") for b in running.info.brokers
    )
    assert listing["controllerid"] in {b.id for b in running.info.brokers}


def topics(*argv: str) -> tuple[int, str]:
    """``kemu topics ARGV`` in this process (the command reaches the cluster as a separate
    process would: over TCP to its store or its listeners); exit status and stdout."""
    out, err = io.StringIO(), io.StringIO()
    rc = anyio.run(functools.partial(run_topic_command, list(argv), out=out, err=err))
    assert err.getvalue() == ""
    return rc, out.getvalue()


def test_kemu_topics_creates_on_both_paths(running: Running) -> None:
    """`kemu topics --create` through the store (`--zookeeper` at the cluster's store
    address) and over the wire (`--bootstrap-server`), and `--alter` through the store:
    the broker processes act on both."""
    store = ["--zookeeper", running.info.store]
    created = topics("--create", "--topic", "cli-zk", "--replica-assignment", "1:2,2:0",
                     "--config", "cleanup.policy=compact", *store)  # fmt: skip
    assert created == (0, "Created topic cli-zk.\n")
    check_created(
        running, "cli-zk", 2, 2, replicas={0: [1, 2], 1: [2, 0]},
        config={"cleanup.policy": "compact"},
    )  # fmt: skip
    assert topics("--alter", "--topic", "cli-zk", "--partitions", "3", *store)[0] == 0
    check_created(running, "cli-zk", 3, 2, config={"cleanup.policy": "compact"})
    wire = ["--bootstrap-server", running.bootstrap]
    created = topics("--create", "--topic", "cli-wire", "--partitions", "2",
                     "--replication-factor", "3", *wire)  # fmt: skip
    assert created == (0, "Created topic cli-wire.\n")
    check_created(running, "cli-wire", 2, 3)
