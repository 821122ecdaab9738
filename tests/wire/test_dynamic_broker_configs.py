"""Dynamic broker configs (``DynamicBrokerConfig``) set through IncrementalAlterConfigs
against real in-process brokers: a cluster default (the empty broker name, through
kemu's admin client over the wire, as Kafka's ``Admin`` sends it; confluent-kafka and
kafka-python refuse a broker resource without an id) and a broker's own config
(confluent-kafka, sent to that broker) land in ``/config/brokers/<default>`` /
``/config/brokers/<id>`` with a ``/config/changes`` notification, every broker applies
them within that notification (traced ``broker_config_applied``), and they change
behaviour: ``min.insync.replicas`` refuses an acks=all Produce,
``unclean.leader.election.enable`` lets the controller elect an out-of-sync replica.
DescribeConfigs reports the dynamic sources and synonyms in 2.7's order. Bad input is
refused with Kafka's messages and changes nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported, not in __all__
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kafka.admin import ConfigResource as KpConfigResource  # type: ignore[import-untyped]
from kafka.admin import KafkaAdminClient as KafkaPythonAdmin

from actors.broker.broker import broker_ref
from cluster.kafka.client import KafkaAdminClient
from protocol import zkdata
from protocol.errors import ErrorCode
from protocol.kafka_api import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    ConfigResourceType,
    IncrementalAlterConfigsRequestData,
    IncrementalAlterConfigsResponseData,
)
from protocol.kafka_api import ConfigEntry as WireConfigEntry
from protocol.kafka_api import ConfigResource as WireConfigResource
from protocol.kafka_api import ConfigSource as WireConfigSource
from tests.support.configs import (
    create_assigned,
    create_topic,
    only_out_of_sync_replica_left,
    partition_state,
    produce_all,
    stored,
)
from tests.support.creation import Harness, running_cluster
from tests.support.hosting import hosted_fixture
from tests.support.waiting import eventually
from tests.support.zookeeper import STORES

pytestmark = pytest.mark.asyncio

WAIT = 20.0
DEFAULT = "<default>"


@hosted_fixture(params=STORES)
async def h(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Harness]:
    """Two brokers on the embedded store or on a real ZooKeeper (under a chroot of its own)."""
    server = request.getfixturevalue("zookeeper_server") if request.param == "zookeeper" else None
    async with running_cluster(tmp_path / "logs", server, brokers=2) as h:
        yield h


def broker_resource(name: str, configs: dict[str, str]) -> AlterConfigsResource:
    return AlterConfigsResource(
        resource_type=ConfigResourceType.BROKER,
        resource_name=name,
        configs=tuple(
            AlterableConfig(name=k, value=v, operation=AlterConfigOp.SET)
            for k, v in configs.items()
        ),
    )


async def alter_default(h: Harness, configs: dict[str, str], via: int = 0) -> None:
    """The cluster default, over the wire through broker ``via``."""
    async with KafkaAdminClient(f"127.0.0.1:{h.cluster.ports[via]}") as client:
        results = await client.incremental_alter_configs([broker_resource("", configs)])
    assert results[(ConfigResourceType.BROKER, "")].error_code is ErrorCode.NONE


def alter_own(h: Harness, broker: int, configs: dict[str, str]) -> None:
    """Broker ``broker``'s own configs, through confluent-kafka (sent to that broker)."""
    resource = ConfigResource(
        ConfigResource.Type.BROKER,
        str(broker),
        incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
            for k, v in configs.items()
        ],
    )
    client = AdminClient({"bootstrap.servers": f"127.0.0.1:{h.cluster.ports[0]}"})
    client.incremental_alter_configs([resource])[resource].result()


def describe(h: Harness, type_: Any, name: str) -> dict[str, Any]:
    resource = ConfigResource(type_, name)
    client = AdminClient({"bootstrap.servers": f"127.0.0.1:{h.cluster.ports[0]}"})
    configs: dict[str, Any] = client.describe_configs([resource])[resource].result()
    return configs


async def last_notification(h: Harness) -> tuple[str, dict[str, Any]]:
    name = sorted(await h.probe.children(zkdata.CONFIG_CHANGES_PATH))[-1]
    data, _ = await h.probe.get(f"{zkdata.CONFIG_CHANGES_PATH}/{name}")
    return name, json.loads(data)


async def applied(h: Harness, broker: int, notification: str) -> None:
    await h.sink.wait_for(
        lambda e: (
            e.type == "broker_config_applied"
            and e.fields.get("broker") == broker
            and e.fields.get("notification") == notification
        ),
        timeout=WAIT,
    )


async def describe_wire(h: Harness, name: str) -> dict[str, WireConfigEntry]:
    """A broker's configs (or the cluster default's, for "") with their synonyms, through
    kemu's admin client (confluent-kafka keys synonyms by name, folding same-name ones)."""
    resource = WireConfigResource(resource_type=ConfigResourceType.BROKER, resource_name=name)
    async with KafkaAdminClient(f"127.0.0.1:{h.cluster.ports[1]}") as client:
        results = await client.describe_configs([resource], include_synonyms=True)
    result = results[(ConfigResourceType.BROKER, name)]
    assert result.error_code is ErrorCode.NONE
    return {e.name: e for e in result.configs}


async def test_min_insync_default_then_a_brokers_own_value(h: Harness) -> None:
    """The cluster default ``min.insync.replicas=3`` reaches both brokers with its
    notification, and the leader on broker 0 refuses acks=all (ISR of 2 < 3); a topic
    without an override reports it as DYNAMIC_DEFAULT_BROKER_CONFIG. Broker 0's own
    ``min.insync.replicas=1`` then wins over the default there (DYNAMIC_BROKER_CONFIG,
    synonyms per-broker, default, Kafka's default: ``AdminManager.configSynonyms``)."""
    await anyio.to_thread.run_sync(create_topic, h, "t")
    await eventually(lambda: produce_all(h, "t"), until=lambda c: c is ErrorCode.NONE)

    await alter_default(h, {"min.insync.replicas": "3"}, via=1)
    assert await stored(h, DEFAULT) == {"version": 1, "config": {"min.insync.replicas": "3"}}
    name, body = await last_notification(h)
    assert body == {"version": 2, "entity_path": f"brokers/{DEFAULT}"}
    await applied(h, 0, name)
    await applied(h, 1, name)
    assert await produce_all(h, "t") is ErrorCode.NOT_ENOUGH_REPLICAS

    topic = await anyio.to_thread.run_sync(describe, h, ConfigResource.Type.TOPIC, "t")
    assert topic["min.insync.replicas"].value == "3"
    assert (
        ConfigSource(topic["min.insync.replicas"].source)
        is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    )
    [entry] = (await describe_wire(h, "")).values()
    assert (entry.name, entry.value, entry.source, entry.read_only) == (
        "min.insync.replicas",
        "3",
        WireConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
        False,
    )
    assert [(s.name, s.value) for s in entry.synonyms] == [("min.insync.replicas", "3")]

    await anyio.to_thread.run_sync(alter_own, h, 0, {"min.insync.replicas": "1"})
    assert await stored(h, "0") == {"version": 1, "config": {"min.insync.replicas": "1"}}
    name, body = await last_notification(h)
    assert body == {"version": 2, "entity_path": "brokers/0"}
    await applied(h, 0, name)
    assert await produce_all(h, "t") is ErrorCode.NONE
    own = await anyio.to_thread.run_sync(describe, h, ConfigResource.Type.BROKER, "0")
    entry = own["min.insync.replicas"]
    assert (entry.value, ConfigSource(entry.source), entry.is_read_only) == (
        "1",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
        False,
    )
    own_entries = await describe_wire(h, "0")
    assert [(s.name, s.value, s.source) for s in own_entries["min.insync.replicas"].synonyms] == [
        ("min.insync.replicas", "1", WireConfigSource.DYNAMIC_BROKER_CONFIG),
        ("min.insync.replicas", "3", WireConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("min.insync.replicas", "1", WireConfigSource.DEFAULT_CONFIG),
    ]
    assert own["num.partitions"].is_read_only


async def test_a_retention_default_reaches_topics_without_overrides(h: Harness) -> None:
    """A dynamic ``log.retention.ms`` (``log.retention.hours`` is not dynamic in 2.7) is
    the broker's value with its synonyms from the dynamic default down to Kafka's
    default hours, and the ``retention.ms`` of a topic without an override."""
    await alter_default(h, {"log.retention.ms": "7200000"})
    name, _ = await last_notification(h)
    await applied(h, 0, name)
    own = await describe_wire(h, "0")
    assert [(s.name, s.value, s.source) for s in own["log.retention.ms"].synonyms] == [
        ("log.retention.ms", "7200000", WireConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.hours", "168", WireConfigSource.DEFAULT_CONFIG),
    ]
    assert own["log.retention.hours"].read_only
    await anyio.to_thread.run_sync(create_topic, h, "r")
    topic = await anyio.to_thread.run_sync(describe, h, ConfigResource.Type.TOPIC, "r")
    entry = topic["retention.ms"]
    assert (entry.value, ConfigSource(entry.source)) == (
        "7200000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"num.partitions": "2"}, "Cannot update these configs dynamically: Set(num.partitions)"),
        ({"min.insync.replicas": "x"},
         "Invalid value x for configuration min.insync.replicas: Not a number of type INT"),
        ({"min.insync.replicas": "0"},
         "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"),
        ({"log.retention.ms": "0"}, "requirement failed: log.retention.ms must be unlimited (-1)"
         " or, equal or greater than 1"),
        ({"log.retention.hours": "1"},
         "Cannot update these configs dynamically: Set(log.retention.hours)"),
    ],
)  # fmt: skip
async def test_bad_dynamic_configs_change_nothing(
    h: Harness, configs: dict[str, str], message: str
) -> None:
    """A config 2.7 cannot change at run time, a value of the wrong type or out of range,
    a value the broker's config refuses: INVALID_REQUEST with Kafka's message, for the
    cluster default and for a broker's own, nothing stored, no notification. validate_only
    of a good value stores nothing either."""
    before = sorted(await h.probe.children(zkdata.CONFIG_CHANGES_PATH))
    for name in ("", "0"):
        request = IncrementalAlterConfigsRequestData(resources=(broker_resource(name, configs),))
        answer = await h.client.ask(broker_ref(0), request)
        assert isinstance(answer, IncrementalAlterConfigsResponseData)
        result = answer.results[0]
        assert (result.error_code, result.error_message) == (
            ErrorCode.INVALID_REQUEST,
            f"Invalid config value for resource ConfigResource(type=BROKER, name='{name}'):"
            f" {message}",
        )
    request = IncrementalAlterConfigsRequestData(
        resources=(broker_resource("", {"min.insync.replicas": "2"}),), validate_only=True
    )
    answer = await h.client.ask(broker_ref(0), request)
    assert isinstance(answer, IncrementalAlterConfigsResponseData)
    assert answer.results[0].error_code is ErrorCode.NONE
    assert await stored(h, DEFAULT) is None
    assert await stored(h, "0") is None
    assert sorted(await h.probe.children(zkdata.CONFIG_CHANGES_PATH)) == before


async def test_unclean_default_elects_an_out_of_sync_replica(h: Harness) -> None:
    """``enableDefaultUncleanLeaderElection``: the partition's ISR shrank to broker 0,
    broker 0 crashed, broker 1 (out of the ISR) came back alone: no leader. The cluster
    default ``unclean.leader.election.enable=true``, sent through broker 1, reaches its
    controller, which elects broker 1."""
    await only_out_of_sync_replica_left(h, "lost")
    await alter_default(h, {"unclean.leader.election.enable": "true"}, via=1)
    await h.sink.wait_for(
        lambda e: e.type == "unclean_leader_election_default" and e.fields.get("enabled") is True,
        timeout=WAIT,
    )
    elected = await eventually(
        lambda: partition_state(h, "lost"), until=lambda s: s.leader == 1, timeout=WAIT
    )
    assert elected.isr == (1,)


async def test_a_segment_bytes_default_rolls_open_logs(h: Harness) -> None:
    """``DynamicLogConfig.updateLogsConfig``: a cluster default ``log.segment.bytes`` of
    100 reaches the open log of a topic without an override on its leader, which then
    rolls a new segment for each batch that does not fit (the default 1 GiB never would)."""
    await anyio.to_thread.run_sync(create_topic, h, "s")
    await eventually(lambda: produce_all(h, "s"), until=lambda c: c is ErrorCode.NONE)
    segments = sorted((h.logs / "broker-0" / "s-0").glob("*.log"))
    assert len(segments) == 1
    await alter_default(h, {"log.segment.bytes": "100"})
    name, _ = await last_notification(h)
    await applied(h, 0, name)
    for _ in range(3):
        assert await produce_all(h, "s") is ErrorCode.NONE
    assert len(sorted((h.logs / "broker-0" / "s-0").glob("*.log"))) >= 3


async def test_a_delete_delay_default_reaches_the_log_manager(tmp_path: Path) -> None:
    """A cluster default ``log.segment.delete.delay.ms=0`` (2.7's default is 60 s) makes
    the log manager remove a deleted topic's renamed log at once: the traced removal comes
    within the wait, where the default delay would hold it for a minute."""
    async with running_cluster(
        tmp_path / "logs", brokers=1, config={"log.initial.task.delay.ms": "0"}
    ) as h:
        await alter_default(h, {"log.segment.delete.delay.ms": "0"})
        name, _ = await last_notification(h)
        await applied(h, 0, name)
        client = AdminClient({"bootstrap.servers": f"127.0.0.1:{h.cluster.ports[0]}"})
        await anyio.to_thread.run_sync(
            lambda: client.create_topics([NewTopic("gone", 1, 1)])["gone"].result()
        )
        await anyio.to_thread.run_sync(lambda: client.delete_topics(["gone"])["gone"].result())
        await h.sink.wait_for(
            lambda e: e.type == "remove" and e.fields.get("topic") == "gone",
            timeout=WAIT,
        )


def kp_alter_own(port: int, broker: int, configs: dict[str, str]) -> Any:
    """kafka-python's incremental alter_configs of broker ``broker``'s own configs (sent
    to that broker), without its describe-first name check."""
    client = KafkaPythonAdmin(bootstrap_servers=f"127.0.0.1:{port}")
    try:
        resource = KpConfigResource("BROKER", str(broker), configs)
        return client.alter_configs([resource], incremental=True, raise_on_unknown=False)
    finally:
        client.close()


async def test_kafka_python_sets_a_brokers_own_config(h: Harness) -> None:
    """kafka-python sends broker 1's resource to broker 1: stored in
    ``/config/brokers/1``, applied by broker 1 with its notification, described there as
    DYNAMIC_BROKER_CONFIG; broker 0 keeps Kafka's default."""
    await anyio.to_thread.run_sync(
        kp_alter_own, h.cluster.ports[0], 1, {"unclean.leader.election.enable": "true"}
    )
    assert await stored(h, "1") == {
        "version": 1,
        "config": {"unclean.leader.election.enable": "true"},
    }
    name, body = await last_notification(h)
    assert body == {"version": 2, "entity_path": "brokers/1"}
    await applied(h, 1, name)
    own = await describe_wire(h, "1")
    entry = own["unclean.leader.election.enable"]
    assert (entry.value, entry.source) == ("true", WireConfigSource.DYNAMIC_BROKER_CONFIG)
    other = await describe_wire(h, "0")
    assert other["unclean.leader.election.enable"].source is WireConfigSource.DEFAULT_CONFIG


async def test_append_to_a_list_broker_config(h: Harness) -> None:
    """``prepareIncrementalConfigs`` with ``KafkaConfig``'s keys: APPEND to the LIST
    ``log.cleanup.policy`` starts from Kafka's default ("delete"); APPEND to an INT is
    refused with Kafka's message and changes nothing."""

    def op(name: str, value: str) -> AlterConfigsResource:
        return AlterConfigsResource(
            resource_type=ConfigResourceType.BROKER,
            resource_name="",
            configs=(AlterableConfig(name=name, value=value, operation=AlterConfigOp.APPEND),),
        )

    for resource, code, message in (
        (op("log.cleanup.policy", "compact"), ErrorCode.NONE, None),
        (op("min.insync.replicas", "2"), ErrorCode.INVALID_REQUEST,
         "Config value append is not allowed for config key: min.insync.replicas"),
    ):  # fmt: skip
        answer = await h.client.ask(
            broker_ref(0), IncrementalAlterConfigsRequestData(resources=(resource,))
        )
        assert isinstance(answer, IncrementalAlterConfigsResponseData)
        assert (answer.results[0].error_code, answer.results[0].error_message) == (code, message)
    assert await stored(h, DEFAULT) == {
        "version": 1,
        "config": {"log.cleanup.policy": "delete,compact"},
    }


async def test_a_brokers_own_num_replica_fetchers_applies_when_it_starts(h: Harness) -> None:
    """``DynamicBrokerConfig.initialize``: broker 1's own ``num.replica.fetchers=2``,
    stored while it runs, is read before its replica fetcher manager is built when it
    starts again, so it follows a topic's two partitions (fetcher ids 0 and 1, as
    ``getFetcherId`` spreads consecutive partitions) with one fetcher each. (A running
    broker's fetchers are resized at once: tests/wire/test_replica_fetcher_resize.py.)"""
    await anyio.to_thread.run_sync(alter_own, h, 1, {"num.replica.fetchers": "2"})
    name, _ = await last_notification(h)
    await applied(h, 1, name)
    h.cluster.stop_broker(1)
    assert await h.cluster.wait_stopped(1, timeout=WAIT)
    await h.cluster.start_broker(1)
    await create_assigned(h, "fetched", 2, [0, 1])

    async def fetchers() -> list[str]:
        names = h.cluster.nodes[1].mailbox_depths()
        return sorted(n for n in names if n.startswith("replica_fetcher-"))

    assert await eventually(fetchers, until=lambda n: len(n) == 2, timeout=WAIT) == [
        "replica_fetcher-0-0",
        "replica_fetcher-1-0",
    ]
