"""The broker configs kemu takes through AlterConfigs and IncrementalAlterConfigs:
``DynamicConfig.Broker``'s replication quotas, which ``kafka-reassign-partitions
--throttle`` sets. confluent-kafka sends a broker's resource to that broker (as Kafka's
client does); the values land in ``/config/brokers/<id>`` (``<default>`` for the cluster
default) in Kafka's JSON with a change notification. Bad values, APPEND, and broker
configs 2.7 cannot change at run time are refused with Kafka's messages and change
nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported, not in __all__
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
)

from actors.broker.broker import broker_ref
from protocol import zkdata
from protocol.errors import ErrorCode
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
from tests.support.configs import stored
from tests.support.creation import Harness, running_cluster
from tests.support.hosting import hosted_fixture

pytestmark = pytest.mark.asyncio

RATE = "leader.replication.throttled.rate"


@hosted_fixture()
async def h(tmp_path: Path) -> AsyncIterator[Harness]:
    async with running_cluster(tmp_path / "logs", brokers=2) as h:
        yield h


async def notified(h: Harness) -> list[str]:
    names = sorted(await h.probe.children(zkdata.CONFIG_CHANGES_PATH))
    return [
        json.loads((await h.probe.get(f"{zkdata.CONFIG_CHANGES_PATH}/{n}"))[0])["entity_path"]
        for n in names
    ]


def confluent_set_rates(h: Harness, broker: str) -> None:
    """confluent-kafka's incremental_alter_configs of the broker's two rates, bootstrapped
    at broker 0 (broker 1's resource must go to broker 1)."""
    client = AdminClient({"bootstrap.servers": f"127.0.0.1:{h.cluster.ports[0]}"})
    resource = ConfigResource(
        ConfigResource.Type.BROKER,
        broker,
        incremental_configs=[
            ConfigEntry(RATE, "1000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry(
                "follower.replication.throttled.rate",
                "2000",
                incremental_operation=AlterConfigOpType.SET,
            ),
        ],
    )
    client.incremental_alter_configs([resource])[resource].result()


def entry(name: str, value: str | None, operation: AlterConfigOp) -> AlterableConfig:
    return AlterableConfig(name=name, value=value, operation=operation)


def broker_resource(name: str, *configs: AlterableConfig) -> AlterConfigsResource:
    return AlterConfigsResource(
        resource_type=ConfigResourceType.BROKER, resource_name=name, configs=configs
    )


async def test_quotas_are_stored_with_a_notification(h: Harness) -> None:
    """SET through confluent-kafka on broker 1 (asked at broker 0) and a DELETE: stored in
    Kafka's JSON, one notification each; AlterConfigs on the cluster default replaces the
    whole set of ``/config/brokers/<default>``."""
    await anyio.to_thread.run_sync(confluent_set_rates, h, "1")
    assert await stored(h, "1") == {
        "version": 1,
        "config": {RATE: "1000", "follower.replication.throttled.rate": "2000"},
    }
    assert await stored(h, "0") is None
    assert (await notified(h))[-1:] == ["brokers/1"]
    delete = IncrementalAlterConfigsRequestData(
        resources=(broker_resource("1", entry(RATE, None, AlterConfigOp.DELETE)),)
    )
    answer = await h.client.ask(broker_ref(1), delete)
    assert isinstance(answer, IncrementalAlterConfigsResponseData)
    assert answer.results[0].error_code is ErrorCode.NONE
    assert await stored(h, "1") == {
        "version": 1,
        "config": {"follower.replication.throttled.rate": "2000"},
    }
    whole = AlterConfigsRequestData(
        resources=(
            broker_resource(
                "", entry("replica.alter.log.dirs.io.max.bytes.per.second", "5", AlterConfigOp.SET)
            ),
        )
    )
    answered = await h.client.ask(broker_ref(0), whole)
    assert isinstance(answered, AlterConfigsResponseData)
    assert answered.results[0].error_code is ErrorCode.NONE
    assert await stored(h, "<default>") == {
        "version": 1,
        "config": {"replica.alter.log.dirs.io.max.bytes.per.second": "5"},
    }
    assert (await notified(h))[-3:] == ["brokers/1", "brokers/1", "brokers/<default>"]


def refused(value: str, reason: str) -> str:
    return (
        "Invalid config value for resource ConfigResource(type=BROKER, name='0'): Invalid"
        f" value {value} for configuration {RATE}: {reason}"
    )


@pytest.mark.parametrize(
    ("configs", "code", "message"),
    [
        ([entry(RATE, "fast", AlterConfigOp.SET)], ErrorCode.INVALID_REQUEST,
         refused("fast", "Not a number of type LONG")),
        ([entry(RATE, "-1", AlterConfigOp.SET)], ErrorCode.INVALID_REQUEST,
         refused("-1", "Value must be at least 0")),
        ([entry(RATE, "1", AlterConfigOp.APPEND)], ErrorCode.UNKNOWN_SERVER_ERROR, None),
        ([entry(RATE, "1", AlterConfigOp.SUBTRACT)], ErrorCode.UNKNOWN_SERVER_ERROR, None),
        ([entry(RATE, "1", AlterConfigOp.SET),
          entry("delete.topic.enable", "false", AlterConfigOp.SET)],
         ErrorCode.INVALID_REQUEST,
         "Invalid config value for resource ConfigResource(type=BROKER, name='0'): Cannot"
         " update these configs dynamically: Set(delete.topic.enable)"),
    ],
)  # fmt: skip
async def test_bad_quotas_change_nothing(
    h: Harness, configs: list[AlterableConfig], code: ErrorCode, message: str | None
) -> None:
    before = await notified(h)
    request = IncrementalAlterConfigsRequestData(resources=(broker_resource("0", *configs),))
    answer = await h.client.ask(broker_ref(0), request)
    assert isinstance(answer, IncrementalAlterConfigsResponseData)
    assert (answer.results[0].error_code, answer.results[0].error_message) == (code, message)
    assert await stored(h, "0") is None
    assert await notified(h) == before
