"""DescribeConfigs of a broker (``AdminManager.describeConfigs``, resource type BROKER)
through confluent-kafka's admin client, against real in-process brokers started with a
few broker configs set."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported, not in __all__
    AdminClient,
    ConfigResource,
    ConfigSource,
)

from actors.broker.broker import broker_ref
from protocol.errors import ErrorCode
from protocol.kafka_api import ConfigResource as ConfigResourceData
from protocol.kafka_api import (
    ConfigResourceType,
    DescribeConfigsRequestData,
    DescribeConfigsResponseData,
)
from tests.support.creation import Harness, running_cluster
from tests.support.hosting import hosted_fixture

pytestmark = pytest.mark.asyncio

SET = {"replica.lag.time.max.ms": "20000", "log.retention.hours": "48"}


@hosted_fixture()
async def h(tmp_path: Path) -> AsyncIterator[Harness]:
    async with running_cluster(tmp_path / "logs", brokers=1, config=SET) as h:
        yield h


def describe(port: int, name: str) -> dict[str, Any]:
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
    resource = ConfigResource(ConfigResource.Type.BROKER, name)
    futures = admin.describe_configs([resource], request_timeout=20)
    configs: dict[str, Any] = futures[resource].result()
    return configs


async def test_a_broker_describes_its_replication_configs_as_kafka_does(h: Harness) -> None:
    """Broker 0 lists the replication configs with Kafka's defaults and sources: a set one
    is STATIC_BROKER_CONFIG with itself as its first synonym, an unset one DEFAULT_CONFIG;
    num.replica.fetchers can change at run time in Kafka, the others are read-only; a value
    set through a synonym (log.retention.hours) is the source of log.retention.ms's
    synonyms, whose own value is unset (null)."""
    configs = await anyio.to_thread.run_sync(describe, h.cluster.ports[0], "0")
    expected = {
        "replica.lag.time.max.ms": "20000",
        "replica.socket.timeout.ms": "30000",
        "replica.fetch.max.bytes": "1048576",
        "replica.fetch.wait.max.ms": "500",
        "replica.fetch.min.bytes": "1",
        "replica.fetch.response.max.bytes": "10485760",
        "replica.fetch.backoff.ms": "1000",
        "num.replica.fetchers": "1",
    }
    assert {n: configs[n].value for n in expected} == expected
    lag = configs["replica.lag.time.max.ms"]
    assert lag.source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert list(lag.synonyms) == ["replica.lag.time.max.ms"]  # static, then default
    assert configs["replica.fetch.wait.max.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert lag.is_read_only
    assert not configs["num.replica.fetchers"].is_read_only
    assert not configs["min.insync.replicas"].is_read_only  # a topic default: dynamic
    retention = configs["log.retention.ms"]
    assert retention.value is None
    assert retention.source == ConfigSource.DEFAULT_CONFIG.value  # none of its own set
    hours = configs["log.retention.hours"]
    assert (hours.value, hours.source) == ("48", ConfigSource.STATIC_BROKER_CONFIG.value)


async def test_another_broker_id_or_a_non_number_is_an_invalid_request(h: Harness) -> None:
    """A broker answers only for its own id, or for the empty name (the cluster's dynamic
    defaults, none here); another id and a name that is not a number fail with
    INVALID_REQUEST and Kafka's messages. (The clients route a broker's resource to that
    broker and refuse an empty name themselves: the request as the codec decodes it.)"""
    names = ("", "7", "x")
    asked = DescribeConfigsRequestData(
        resources=tuple(
            ConfigResourceData(resource_type=ConfigResourceType.BROKER, resource_name=n)
            for n in names
        )
    )
    reply = await h.client.ask(broker_ref(0), asked)
    assert isinstance(reply, DescribeConfigsResponseData)
    assert [(r.resource_name, r.error_code, r.error_message, r.configs) for r in reply.results] == [
        ("", ErrorCode.NONE, None, ()),
        (
            "7",
            ErrorCode.INVALID_REQUEST,
            "Unexpected broker id, expected 0 or empty string, but received 7",
            (),
        ),
        ("x", ErrorCode.INVALID_REQUEST, "Broker id must be an integer, but it is: x", ()),
    ]
