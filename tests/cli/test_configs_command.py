"""``kemu configs`` (kafka-configs.sh, ``ConfigCommand``) for topics against an
in-process broker: ``--alter --add-config/--delete-config`` and ``--describe`` in 2.7's
output, and bad input refused with one line and exit 1, changing nothing."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from actors.broker.broker import broker_ref
from cluster.cli.configs import main as configs_main
from cluster.cli.configs import parse_configs_to_add
from protocol import zkdata
from protocol.ids import TopicName
from protocol.kafka_api import CreatableTopic, CreateTopicsRequestData, CreateTopicsResponseData
from tests.support.creation import Harness, running_cluster
from tests.support.hosting import hosted_fixture


@hosted_fixture()
async def h(tmp_path: Path) -> AsyncIterator[Harness]:
    async with running_cluster(tmp_path / "logs", brokers=1) as h:
        yield h


async def run(h: Harness, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    argv = ["--bootstrap-server", f"127.0.0.1:{h.cluster.ports[0]}", *args]
    status = await anyio.to_thread.run_sync(lambda: configs_main(argv, out=out, err=err))
    return status, out.getvalue(), err.getvalue()


async def create(h: Harness, name: str) -> None:
    reply = await h.client.ask(
        broker_ref(0),
        CreateTopicsRequestData(
            topics=(CreatableTopic(name=TopicName(name), num_partitions=1, replication_factor=1),),
            timeout_ms=30_000,
        ),
    )
    assert isinstance(reply, CreateTopicsResponseData)


async def stored(h: Harness, topic: str) -> dict[str, str]:
    data, _ = await h.probe.get(zkdata.topic_config_path(TopicName(topic)))
    config: dict[str, str] = json.loads(data)["config"]
    return config


def test_add_config_splits_outside_brackets_as_kafka_does() -> None:
    assert parse_configs_to_add("k1=v1,k2=[a,b], k3 = v3 ") == {
        "k1": "v1",
        "k2": "a,b",
        "k3": "v3",
    }


@pytest.mark.asyncio
async def test_alter_then_describe_prints_what_kafka_configs_prints(h: Harness) -> None:
    """--alter adds two overrides (one a bracketed list) and deletes one, printing
    "Completed updating config for topic T."; --describe lists the dynamic ones with their
    synonyms (the override, then the broker default's), as ``describeResourceConfig``."""
    await create(h, "t")
    status, out, _ = await run(
        h,
        "--entity-type", "topics", "--entity-name", "t", "--alter",
        "--add-config", "min.insync.replicas=2,cleanup.policy=[compact,delete],retention.ms=5",
    )  # fmt: skip
    assert (status, out) == (0, "Completed updating config for topic t.\n")
    status, out, _ = await run(
        h, "--entity-type", "topics", "--entity-name", "t", "--alter",
        "--delete-config", "retention.ms",
    )  # fmt: skip
    assert status == 0
    assert await stored(h, "t") == {"min.insync.replicas": "2", "cleanup.policy": "compact,delete"}
    status, out, _ = await run(h, "--entity-type", "topics", "--entity-name", "t", "--describe")
    assert status == 0
    assert out == (
        "Dynamic configs for topic t are:\n"
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "cleanup.policy=compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}\n"
        "  min.insync.replicas=2 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "min.insync.replicas=2, DEFAULT_CONFIG:min.insync.replicas=1}\n"
    )


@pytest.mark.asyncio
async def test_bad_input_is_one_line_and_exit_1_changing_nothing(h: Harness) -> None:
    """Kafka's messages: deleting a config the topic does not override, a pair without
    '=', a missing action, another entity type; a broker's refusal (an unknown config
    name) as ConfigCommand's catch-all prints it. The stored config is unchanged."""
    await create(h, "u")
    base = ("--entity-type", "topics", "--entity-name", "u", "--alter")
    cases = [
        ((*base, "--delete-config", "retention.ms"), "Invalid config(s): retention.ms\n"),
        (
            (*base, "--add-config", "a"),
            'Invalid entity config: all configs to be added must be in the format "key=val".\n',
        ),
        (
            ("--entity-type", "topics", "--describe", "--alter"),
            "Command must include exactly one action: --describe, --alter\n",
        ),
        (
            ("--entity-type", "clients", "--describe"),
            "kemu configs serves --entity-type topics and brokers only\n",
        ),
        (
            ("--entity-type", "things", "--describe"),
            "Invalid entity type things, the entity type must be one of topics,clients,users,"
            "brokers,broker-loggers with the --bootstrap-server argument\n",
        ),
        (
            (*base, "--add-config", "x=1"),
            "org.apache.kafka.common.errors.InvalidConfigurationException: Unknown topic config"
            " name: x\n",
        ),
    ]
    for args, tail in cases:
        status, out, err = await run(h, *args)
        assert status == 1, args
        assert out == ""
        assert err.endswith(tail) or err.startswith(tail), (args, err)
    assert await stored(h, "u") == {}
