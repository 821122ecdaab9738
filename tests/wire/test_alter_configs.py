"""AlterConfigs and IncrementalAlterConfigs of topics (``AdminManager.alterConfigs`` /
``incrementalAlterConfigs``) through confluent-kafka's, kafka-python's and aiokafka's admin
clients, against real in-process brokers: the overrides land in ``/config/topics/<t>`` in
Kafka's JSON with a ``/config/changes`` notification, every broker applies them (traced
``topic_config_applied``), DescribeConfigs reports them as DYNAMIC_TOPIC_CONFIG, and a
raised ``min.insync.replicas`` refuses acks=all once a broker is down. Bad input is
refused per resource with Kafka's codes and messages, and changes nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from aiokafka.admin import AIOKafkaAdminClient  # type: ignore[import-untyped]
from aiokafka.admin.config_resource import (  # type: ignore[import-untyped]
    ConfigResource as AioConfigResource,
)
from aiokafka.admin.config_resource import ConfigResourceType as AioResourceType
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported, not in __all__
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)
from kafka.admin import ConfigResource as KpConfigResource  # type: ignore[import-untyped]
from kafka.admin import KafkaAdminClient

from actors.broker.broker import broker_ref
from protocol import zkdata
from protocol.errors import ErrorCode
from protocol.ids import TopicName
from protocol.kafka_api import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsRequestData,
    AlterConfigsResource,
    AlterConfigsResponseData,
    ConfigResourceType,
    IncrementalAlterConfigsRequestData,
    IncrementalAlterConfigsResponseData,
)
from protocol.trace import TraceEvent
from tests.support.configs import (
    create_topic,
    only_out_of_sync_replica_left,
    partition_state,
    produce_all,
)
from tests.support.creation import Harness, running_cluster
from tests.support.hosting import hosted_fixture
from tests.support.waiting import eventually
from tests.support.zookeeper import STORES

pytestmark = pytest.mark.asyncio

WAIT = 20.0
SET_OP, APPEND_OP = AlterConfigOpType.SET, AlterConfigOpType.APPEND


@hosted_fixture(params=STORES)
async def h(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Harness]:
    """Two brokers on the embedded store or on a real ZooKeeper (under a chroot of its own)."""
    server = request.getfixturevalue("zookeeper_server") if request.param == "zookeeper" else None
    async with running_cluster(tmp_path / "logs", server, brokers=2) as h:
        yield h


def admin(h: Harness) -> AdminClient:
    return AdminClient({"bootstrap.servers": f"127.0.0.1:{h.cluster.ports[0]}"})


def kafka_python(h: Harness) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{h.cluster.ports[0]}")


def kp_alter(port: int, topic: str, configs: dict[str, str], incremental: bool) -> Any:
    """kafka-python's alter_configs of one topic, through the broker at ``port``."""
    client = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}")
    try:
        resource = KpConfigResource("TOPIC", topic, configs)
        return client.alter_configs([resource], incremental=incremental)
    finally:
        client.close()


def describe(h: Harness, name: str) -> dict[str, Any]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    client = admin(h)  # kept until the answer: a collected client destroys its handle
    configs: dict[str, Any] = client.describe_configs([resource])[resource].result()
    return configs


def incremental_alter(h: Harness, resource: ConfigResource) -> None:
    client = admin(h)
    client.incremental_alter_configs([resource])[resource].result()


async def stored(h: Harness, topic: str) -> dict[str, Any]:
    data, _ = await h.probe.get(zkdata.topic_config_path(TopicName(topic)))
    parsed: dict[str, Any] = json.loads(data)
    return parsed


async def notifications(h: Harness) -> list[tuple[str, dict[str, Any]]]:
    names = sorted(await h.probe.children(zkdata.CONFIG_CHANGES_PATH))
    return [
        (n, json.loads((await h.probe.get(f"{zkdata.CONFIG_CHANGES_PATH}/{n}"))[0])) for n in names
    ]


async def applied(h: Harness, broker: int, notification: str) -> None:
    """Wait for ``broker``'s trace of having applied ``notification``."""
    await h.sink.wait_for(
        lambda e: (
            e.type == "topic_config_applied"
            and e.fields.get("broker") == broker
            and e.fields.get("notification") == notification
        ),
        timeout=WAIT,
    )


async def test_incremental_alter_is_stored_announced_applied_and_described(h: Harness) -> None:
    """confluent-kafka's incremental_alter_configs: SET of min.insync.replicas and an
    APPEND to cleanup.policy (its default "delete", then the new item) land in
    ``/config/topics/orders`` as ``{"version":1,"config":{...}}``, one sequential
    notification ``{"version":2,"entity_path":"topics/orders"}`` follows, both brokers
    apply it, and DescribeConfigs shows the values as DYNAMIC_TOPIC_CONFIG. A DELETE then
    drops an override: described from the default again."""
    await anyio.to_thread.run_sync(create_topic, h, "orders")
    before = await notifications(h)
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        "orders",
        incremental_configs=[
            ConfigEntry("min.insync.replicas", "2", incremental_operation=SET_OP),
            ConfigEntry("cleanup.policy", "compact", incremental_operation=APPEND_OP),
        ],
    )
    await anyio.to_thread.run_sync(incremental_alter, h, resource)
    assert await stored(h, "orders") == {
        "version": 1,
        "config": {"min.insync.replicas": "2", "cleanup.policy": "delete,compact"},
    }
    after = await notifications(h)
    assert len(after) == len(before) + 1
    name, payload = after[-1]
    assert name.startswith("config_change_")
    assert payload == {"version": 2, "entity_path": "topics/orders"}
    for broker in (0, 1):
        await applied(h, broker, name)
    configs = await anyio.to_thread.run_sync(describe, h, "orders")
    for key, value in (("min.insync.replicas", "2"), ("cleanup.policy", "delete,compact")):
        assert configs[key].value == value
        assert configs[key].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    dropped = ConfigResource(
        ConfigResource.Type.TOPIC,
        "orders",
        incremental_configs=[
            ConfigEntry("cleanup.policy", None, incremental_operation=AlterConfigOpType.DELETE)
        ],
    )
    await anyio.to_thread.run_sync(incremental_alter, h, dropped)
    assert (await stored(h, "orders"))["config"] == {"min.insync.replicas": "2"}
    configs = await anyio.to_thread.run_sync(describe, h, "orders")
    assert configs["cleanup.policy"].value == "delete"
    assert configs["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value


async def test_raised_min_insync_replicas_refuses_acks_all_with_a_broker_down(
    h: Harness,
) -> None:
    """kafka-python's AlterConfigs raises min.insync.replicas to 2 on a topic whose
    follower's broker is stopped: acks=all was accepted with the ISR down to the leader,
    and once the leader's broker has applied the change it is NOT_ENOUGH_REPLICAS."""
    await anyio.to_thread.run_sync(create_topic, h, "guarded")
    h.cluster.stop_broker(1)
    assert await h.cluster.wait_stopped(1, timeout=WAIT)
    await eventually(lambda: produce_all(h, "guarded"), until=lambda c: c is ErrorCode.NONE)
    before = len(await notifications(h))
    await anyio.to_thread.run_sync(
        kp_alter, h.cluster.ports[0], "guarded", {"min.insync.replicas": "2"}, False
    )
    after = await notifications(h)
    assert len(after) == before + 1
    await applied(h, 0, after[-1][0])
    assert await produce_all(h, "guarded") is ErrorCode.NOT_ENOUGH_REPLICAS


def topic_resource(name: str, *configs: AlterableConfig) -> AlterConfigsResource:
    return AlterConfigsResource(
        resource_type=ConfigResourceType.TOPIC, resource_name=name, configs=configs
    )


def op(name: str, value: str | None, operation: AlterConfigOp) -> AlterableConfig:
    return AlterableConfig(name=name, value=value, operation=operation)


SET, DELETE, APPEND = AlterConfigOp.SET, AlterConfigOp.DELETE, AlterConfigOp.APPEND
BAD_VALUE = (
    "Invalid config value for resource ConfigResource(type=TOPIC, name='t'): Invalid value 0"
    " for configuration min.insync.replicas: Value must be at least 1"
)


async def test_bad_alterations_are_refused_per_resource_and_change_nothing(h: Harness) -> None:
    """Each resource fails on its own, with AdminManager's code and message: an unknown
    topic, an unknown config name (INVALID_CONFIG, ``LogConfig.validateNames``), a value
    out of range (its ConfigException, wrapped as INVALID_REQUEST), APPEND to a config
    that is not a list, a name given twice, a null value; a broker config (kemu has no
    dynamic broker configs: refused as Kafka refuses a static one); validate_only of a
    good change succeeds. Nothing is written: the topic's config znode and
    ``/config/changes`` are as before."""
    await anyio.to_thread.run_sync(create_topic, h, "t")
    config_before, changes_before = await stored(h, "t"), await notifications(h)
    request = IncrementalAlterConfigsRequestData(
        resources=(
            topic_resource("nope", op("retention.ms", "1", SET)),
            topic_resource("t", op("retention.ms", "1", SET), op("x", "1", SET)),
        ),
    )
    reply = await h.client.ask(broker_ref(0), request)
    assert isinstance(reply, IncrementalAlterConfigsResponseData)
    assert [(r.resource_name, r.error_code, r.error_message) for r in reply.results] == [
        ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'nope' does not exist."),
        ("t", ErrorCode.INVALID_CONFIG, "Unknown topic config name: x"),
    ]
    cases = [
        (op("min.insync.replicas", "0", SET), ErrorCode.INVALID_REQUEST, BAD_VALUE),
        (
            op("retention.ms", "5", APPEND),
            ErrorCode.INVALID_REQUEST,
            "Config value append is not allowed for config key: retention.ms",
        ),
        (
            op("retention.ms", None, SET),
            ErrorCode.INVALID_REQUEST,
            "Null value not supported for : SET:retention.ms",
        ),
    ]
    for entry, code, message in cases:
        one = IncrementalAlterConfigsRequestData(resources=(topic_resource("t", entry),))
        answer = await h.client.ask(broker_ref(1), one)
        assert isinstance(answer, IncrementalAlterConfigsResponseData)
        assert (answer.results[0].error_code, answer.results[0].error_message) == (code, message)
    twice = IncrementalAlterConfigsRequestData(
        resources=(topic_resource("t", op("a", "1", SET), op("a", None, DELETE)),)
    )
    answer = await h.client.ask(broker_ref(0), twice)
    assert isinstance(answer, IncrementalAlterConfigsResponseData)
    assert answer.results[0].error_message == "Error due to duplicate config keys : a"
    whole = AlterConfigsRequestData(
        resources=(
            topic_resource("t", op("min.insync.replicas", "2", SET)),
            AlterConfigsResource(
                resource_type=ConfigResourceType.BROKER,
                resource_name="0",
                configs=(op("num.partitions", "1", SET),),
            ),
        ),
        validate_only=True,
    )
    answered = await h.client.ask(broker_ref(0), whole)
    assert isinstance(answered, AlterConfigsResponseData)
    assert [(r.error_code, r.error_message) for r in answered.results] == [
        (ErrorCode.NONE, None),
        (
            ErrorCode.INVALID_REQUEST,
            "Invalid config value for resource ConfigResource(type=BROKER, name='0'): Cannot"
            " update these configs dynamically: Set(num.partitions)",
        ),
    ]
    assert await stored(h, "t") == config_before
    assert await notifications(h) == changes_before
    configs = await anyio.to_thread.run_sync(describe, h, "t")
    assert configs["min.insync.replicas"].source == ConfigSource.DEFAULT_CONFIG.value


async def test_enabling_unclean_election_elects_an_offline_partitions_leader(h: Harness) -> None:
    """``processTopicUncleanLeaderElectionEnable``: the partition's ISR shrank to broker 0,
    broker 0 crashed, broker 1 (out of the ISR) came back as the only broker: the
    partition stays leaderless. Setting the topic's unclean.leader.election.enable
    through kafka-python makes the controller elect broker 1 at once."""
    await only_out_of_sync_replica_left(h, "lost")
    unclean = {"unclean.leader.election.enable": "true"}
    await anyio.to_thread.run_sync(kp_alter, h.cluster.ports[1], "lost", unclean, True)
    await h.sink.wait_for(lambda e: e.type == "topic_unclean_leader_election_enabled", timeout=WAIT)
    elected = await eventually(
        lambda: partition_state(h, "lost"), until=lambda s: s.leader == 1, timeout=WAIT
    )
    assert elected.isr == (1,)


def applied_event(topic: bool, broker: int, notification: str) -> Callable[[TraceEvent], bool]:
    """The trace of ``broker`` applying a topic's (or a broker's) config notification."""
    kind = "topic_config_applied" if topic else "broker_config_applied"
    return lambda e: (
        e.type == kind
        and e.fields.get("broker") == broker
        and e.fields.get("notification") == notification
    )


async def test_aiokafka_alters_and_describes_a_topic_and_a_broker(h: Harness) -> None:
    """aiokafka's admin client: one AlterConfigs of a topic's whole set and one of broker
    1's (which it sends to broker 1) are stored, announced and applied (the topic's by
    both brokers, broker 1's by broker 1);
    DescribeConfigs with synonyms (the broker's sent to broker 1) reports them as
    DYNAMIC_TOPIC_CONFIG and DYNAMIC_BROKER_CONFIG, the broker's with its static and
    default synonyms after it; and a config aiokafka sets that a broker cannot change at
    run time is refused per resource with Kafka's message, nothing stored."""
    await anyio.to_thread.run_sync(create_topic, h, "orders")
    before = len(await notifications(h))
    client = AIOKafkaAdminClient(
        bootstrap_servers=f"127.0.0.1:{h.cluster.ports[0]}", request_timeout_ms=int(WAIT * 1000)
    )
    with anyio.fail_after(WAIT):
        await client.start()
        try:
            altered = await client.alter_configs(
                [
                    AioConfigResource(
                        AioResourceType.TOPIC, "orders", {"min.insync.replicas": "2"}
                    ),
                    AioConfigResource(
                        AioResourceType.BROKER, "1", {"log.segment.delete.delay.ms": "1000"}
                    ),
                ]
            )
            news = (await notifications(h))[before:]
            for name, payload in news:  # a topic's by every broker, broker 1's by broker 1
                topic = payload["entity_path"].startswith("topics/")
                for broker in (0, 1) if topic else (1,):
                    await h.sink.wait_for(applied_event(topic, broker, name), timeout=WAIT)
            described = await client.describe_configs(
                [
                    AioConfigResource(
                        AioResourceType.TOPIC, "orders", {"min.insync.replicas": None}
                    ),
                    AioConfigResource(
                        AioResourceType.BROKER, "1", {"log.segment.delete.delay.ms": None}
                    ),
                ],
                include_synonyms=True,
            )
            refused = await client.alter_configs(
                [AioConfigResource(AioResourceType.BROKER, "1", {"broker.id": "7"})]
            )
        finally:
            await client.close()
    answers = sorted(
        (resource[3], resource[0]) for response in altered for resource in response.resources
    )
    assert answers == [("1", 0), ("orders", 0)]
    assert sorted(payload["entity_path"] for _, payload in news) == ["brokers/1", "topics/orders"]
    assert await stored(h, "orders") == {"version": 1, "config": {"min.insync.replicas": "2"}}

    entries = {
        resource[3]: resource[4] for response in described for resource in response.resources
    }
    (topic_entry,) = entries["orders"]
    assert topic_entry[:2] == ("min.insync.replicas", "2")
    assert topic_entry[3] == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    (broker_entry,) = entries["1"]
    assert broker_entry[:2] == ("log.segment.delete.delay.ms", "1000")
    assert broker_entry[3] == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    synonyms = [(name, source) for name, _, source in broker_entry[5]]
    assert synonyms[0] == ("log.segment.delete.delay.ms", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert synonyms[-1][1] == ConfigSource.DEFAULT_CONFIG.value

    ((error, message, _, name),) = [r for response in refused for r in response.resources if r[3]]
    assert (name, error) == ("1", ErrorCode.INVALID_REQUEST)
    assert message == (
        "Invalid config value for resource ConfigResource(type=BROKER, name='1'): "
        "Cannot update these configs dynamically: Set(broker.id)"
    )  # AdminManager.alterConfigs wraps the ConfigException
    data, _ = await h.probe.get(zkdata.config_entity_path(zkdata.ConfigType.BROKER, "1"))
    assert json.loads(data) == {"version": 1, "config": {"log.segment.delete.delay.ms": "1000"}}
    assert len(await notifications(h)) == before + 2
