"""``KafkaAdminClient.request_broker``, what a chaos run's workload uses to reach a broker
process's listener: one request to one broker on a kept connection, and a broker that
refuses the connection or is gone is ``KafkaClientError`` with nothing left open."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cluster.kafka.client import KafkaAdminClient, KafkaClientError
from protocol.kafka_api import MetadataRequestData, MetadataResponseData
from tests.support.hosting import hosted_fixture
from tests.support.topics_harness import Harness, running_harness

pytestmark = pytest.mark.asyncio


@hosted_fixture()
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    async for running in running_harness(tmp_path, None):
        yield running


def address(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    return host, int(port)


async def test_one_request_to_one_broker_and_its_connection_is_kept(harness: Harness) -> None:
    """Two Metadata requests to the first broker's listener are answered on one
    connection, naming every broker."""
    where = address(harness.bootstrap)
    async with KafkaAdminClient(harness.bootstrap) as client:
        first = await client.request_broker(where, MetadataRequestData(topics=()), timeout=10)
        second = await client.request_broker(where, MetadataRequestData(topics=()), timeout=10)
        assert isinstance(first, MetadataResponseData)
        assert isinstance(second, MetadataResponseData)
        assert sorted(b.broker_id for b in first.brokers) == [0, 1, 2]
        assert list(client._connections) == [where]


async def test_a_refused_connection_is_a_client_error() -> None:
    """Nobody listens on the port: ``KafkaClientError`` naming the address, no connection
    kept."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with KafkaAdminClient([("127.0.0.1", port)]) as client:
        with pytest.raises(KafkaClientError, match=f"127.0.0.1:{port}"):
            await client.request_broker(
                ("127.0.0.1", port), MetadataRequestData(topics=()), timeout=5
            )
        assert client._connections == {}
