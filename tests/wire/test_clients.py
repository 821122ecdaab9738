"""Real Kafka clients administer topics through the listeners, unmodified.

Three listeners share a fake cluster whose controller is broker 2, so every client must
find the controller in the metadata and connect to a second listener for its admin
requests. The synchronous clients run in worker threads with their own timeouts.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # type: ignore[import-untyped]
from confluent_kafka import KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported, not in __all__
    AdminClient,
    ConfigResource,
    NewPartitions,
)
from confluent_kafka.admin import NewTopic as CkNewTopic  # type: ignore[attr-defined]
from kafka.admin import ConfigResource as KpConfigResource  # type: ignore[import-untyped]
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.admin import NewPartitions as KpNewPartitions
from kafka.errors import TopicAlreadyExistsError  # type: ignore[import-untyped]

from protocol.ids import BrokerId, TopicName
from protocol.kafka_api import CreatableTopic, TopicConfig
from tests.support.fake_kafka import CLUSTER_ID, WAIT, FakeCluster, FakeHandler, fake_cluster
from tests.support.waiting import in_threads

pytestmark = pytest.mark.asyncio

TIMEOUT_MS = 10_000  # every client's own request timeout, below the test's WAIT


in_thread = in_threads(WAIT)


def seed_topic(cluster: FakeCluster, name: str, partitions: int, replication: int) -> None:
    """A topic put straight into the fake cluster, as if another client had created it."""
    result = FakeHandler(cluster, BrokerId(1)).create(
        CreatableTopic(
            name=TopicName(name),
            num_partitions=partitions,
            replication_factor=replication,
            configs=(TopicConfig(name="retention.ms", value="1000"),),
        ),
        validate_only=False,
    )
    assert result.error_code == 0


def requests_seen(cluster: FakeCluster) -> set[tuple[str, int, int]]:
    """(node, api key, api version) of every request the listeners received."""
    return {
        (e.node, e.fields["api_key"], e.fields["api_version"])
        for e in cluster.sink.of(type="kafka_request")
    }


# ---------------------------------------------------------------------- kcat


async def test_kcat_lists_brokers_and_topics() -> None:
    """``kcat -L -J`` lists the three advertised brokers, the controller and the topics."""
    async with fake_cluster() as cluster:
        seed_topic(cluster, "orders", partitions=3, replication=2)
        with anyio.fail_after(WAIT):
            done = await anyio.run_process(
                ["kcat", "-L", "-J", "-b", cluster.bootstrap, "-m", "10"], check=False
            )
        assert done.returncode == 0, done.stderr.decode()
        listing = json.loads(done.stdout)
        assert listing["controllerid"] == 2
        assert {(b["id"], b["name"]) for b in listing["brokers"]} == {
            (b.broker_id, f"{b.host}:{b.port}") for b in cluster.brokers
        }
        (orders,) = listing["topics"]
        assert orders["topic"] == "orders"
        replicas = [[r["id"] for r in p["replicas"]] for p in orders["partitions"]]
        assert replicas == [list(r) for r in cluster.topics[TopicName("orders")].replicas]
        assert [p["leader"] for p in orders["partitions"]] == [r[0] for r in replicas]
        assert ("broker-1", 18, 3) in requests_seen(cluster)
        assert ("broker-1", 3, 4) in requests_seen(cluster)


# ---------------------------------------------------------------------- kafka-python


def kafka_python_session(bootstrap: str) -> dict[str, Any]:
    """Every admin call kafka-python makes against the fake cluster, results collected."""
    client = KafkaAdminClient(
        bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_MS, client_id="kp-test"
    )
    try:
        out: dict[str, Any] = {}
        out["created"] = client.create_topics(
            {
                "orders": {"num_partitions": 3, "replication_factor": 2},
                "pinned": {
                    "assignments": {0: [1, 2], 1: [2, 3]},
                    "configs": {"retention.ms": "1000"},
                },
            }
        )
        try:
            client.create_topics({"orders": {"num_partitions": 1, "replication_factor": 1}})
        except TopicAlreadyExistsError as exc:
            out["duplicate"] = exc
        out["listed"] = client.list_topics()
        out["described"] = client.describe_topics(["orders"])
        out["partitions"] = client.create_partitions({"orders": KpNewPartitions(5)})
        out["configs"] = client.describe_configs(
            [KpConfigResource(ConfigResourceType.TOPIC, "pinned")]
        )
        out["cluster"] = client.describe_cluster()
        out["deleted"] = client.delete_topics(["orders"])
        out["listed_after"] = client.list_topics()
        return out
    finally:
        client.close()


async def test_kafka_python_admin_client() -> None:
    """kafka-python creates, lists, describes, grows, configures and deletes topics."""
    async with fake_cluster() as cluster:
        out = await in_thread(kafka_python_session, cluster.bootstrap)
        created = {t["name"]: t for t in out["created"]["topics"]}
        assert {n: t["error_code"] for n, t in created.items()} == {"orders": 0, "pinned": 0}
        assert (created["orders"]["num_partitions"], created["orders"]["replication_factor"]) == (
            3,
            2,
        )
        assert created["pinned"]["configs"]["retention.ms"]["value"] == "1000"
        assert "already exists" in str(out["duplicate"])
        assert sorted(out["listed"]) == ["orders", "pinned"]
        (orders,) = out["described"]
        assert len(orders["partitions"]) == 3
        assert all(p["leader_id"] in (1, 2, 3) for p in orders["partitions"])
        assert out["configs"]["topic"]["pinned"]["retention.ms"]["value"] == "1000"
        assert out["cluster"]["cluster_id"] == CLUSTER_ID
        assert out["cluster"]["controller_id"] == 2
        assert len(out["cluster"]["brokers"]) == 3
        assert [t["error_code"] for t in out["deleted"]["topics"]] == [0]
        assert out["listed_after"] == ["pinned"]
        assert len(cluster.topics[TopicName("pinned")].replicas) == 2
        seen = requests_seen(cluster)
        for key, version in ((19, 6), (37, 3), (20, 5)):  # sent to the controller
            assert {n for n, k, v in seen if (k, v) == (key, version)} == {"broker-2"}
        for key, version in ((32, 3), (3, 9)):  # sent to any broker (describe_cluster: Metadata)
            assert any(s[1:] == (key, version) for s in seen), (key, version)
        assert cluster.sink.of(type="kafka_api_versions_too_new")  # it asked v4 first


# ---------------------------------------------------------------------- confluent-kafka


def confluent_session(bootstrap: str) -> dict[str, Any]:
    """Every admin call confluent-kafka makes against the fake cluster, results collected."""
    client = AdminClient({"bootstrap.servers": bootstrap, "client.id": "ck-test"})
    timeout = TIMEOUT_MS / 1000
    out: dict[str, Any] = {}
    futures = client.create_topics(
        [
            CkNewTopic("orders", num_partitions=3, replication_factor=2),
            CkNewTopic(
                "pinned",
                num_partitions=2,
                replica_assignment=[[1, 2], [2, 3]],
                config={"retention.ms": "1000"},
            ),
        ],
        request_timeout=timeout,
    )
    out["created"] = {name: f.result(timeout=timeout) for name, f in futures.items()}
    duplicate = client.create_topics(
        [CkNewTopic("orders", num_partitions=1, replication_factor=1)], request_timeout=timeout
    )
    try:
        duplicate["orders"].result(timeout=timeout)
    except KafkaException as exc:
        out["duplicate"] = exc.args[0]
    metadata = client.list_topics(timeout=timeout)
    out["listed"] = {
        name: sorted(t.partitions[p].replicas for p in t.partitions)
        for name, t in metadata.topics.items()
    }
    out["metadata"] = (metadata.cluster_id, metadata.controller_id, sorted(metadata.brokers))
    grown = client.create_partitions([NewPartitions("orders", 5)], request_timeout=timeout)
    out["partitions"] = {name: f.result(timeout=timeout) for name, f in grown.items()}
    configs = client.describe_configs(
        [ConfigResource(ConfigResource.Type.TOPIC, "pinned")], request_timeout=timeout
    )
    out["configs"] = {
        resource.name: {k: e.value for k, e in f.result(timeout=timeout).items()}
        for resource, f in configs.items()
    }
    described = client.describe_cluster(request_timeout=timeout).result(timeout=timeout)
    out["cluster"] = (
        described.cluster_id,
        described.controller.id,
        sorted(n.id for n in described.nodes),
    )
    deleted = client.delete_topics(["orders"], request_timeout=timeout)
    out["deleted"] = {name: f.result(timeout=timeout) for name, f in deleted.items()}
    out["listed_after"] = sorted(client.list_topics(timeout=timeout).topics)
    return out


async def test_confluent_kafka_admin_client() -> None:
    """confluent-kafka creates, lists, grows, configures, describes and deletes topics."""
    async with fake_cluster() as cluster:
        out = await in_thread(confluent_session, cluster.bootstrap)
        assert out["created"] == {"orders": None, "pinned": None}
        assert out["duplicate"].code() == 36  # TOPIC_ALREADY_EXISTS
        assert out["listed"]["pinned"] == [[1, 2], [2, 3]]
        assert len(out["listed"]["orders"]) == 3
        assert out["metadata"] == (CLUSTER_ID, 2, [1, 2, 3])
        assert out["partitions"] == {"orders": None}
        assert out["configs"]["pinned"]["retention.ms"] == "1000"
        assert out["cluster"] == (CLUSTER_ID, 2, [1, 2, 3])
        assert out["deleted"] == {"orders": None}
        assert out["listed_after"] == ["pinned"]
        assert [len(r) for r in cluster.topics[TopicName("pinned")].replicas] == [2, 2]
        seen = requests_seen(cluster)
        for key, version in ((19, 4), (37, 2), (32, 1), (20, 4), (3, 9)):
            assert any(s[1:] == (key, version) for s in seen), (key, version)
        for key in (19, 37, 20):  # sent to the controller
            assert {n for n, k, _ in seen if k == key} == {"broker-2"}


# ---------------------------------------------------------------------- aiokafka


async def test_aiokafka_admin_client() -> None:
    """aiokafka creates, describes and deletes topics from inside the event loop."""
    async with fake_cluster() as cluster:
        client = AIOKafkaAdminClient(
            bootstrap_servers=cluster.bootstrap, request_timeout_ms=TIMEOUT_MS
        )
        with anyio.fail_after(WAIT):
            await client.start()
            try:
                created = await client.create_topics(
                    [
                        NewTopic("orders", 3, 2),
                        NewTopic("pinned", -1, -1, replica_assignments={0: [1, 2], 1: [3, 1]}),
                    ]
                )
                described = await client.describe_topics(["orders", "pinned"])
                deleted = await client.delete_topics(["orders"])
                listed = await client.list_topics()
            finally:
                await client.close()
        assert [(t[0], t[1]) for t in created.topic_errors] == [("orders", 0), ("pinned", 0)]
        by_name = {t["topic"]: t for t in described}
        assert len(by_name["orders"]["partitions"]) == 3
        assert [p["replicas"] for p in by_name["pinned"]["partitions"]] == [[1, 2], [3, 1]]
        assert [tuple(t) for t in deleted.topic_error_codes] == [("orders", 0)]
        assert listed == ["pinned"]
        seen = requests_seen(cluster)
        for key, version in ((18, 0), (19, 3), (20, 3), (3, 5)):
            assert any(s[1:] == (key, version) for s in seen), (key, version)
        assert {n for n, k, _ in seen if k in (19, 20)} == {"broker-2"}  # the controller
