"""``kemu configs`` (kafka-configs.sh, ``ConfigCommand``) for brokers over the wire and
for topics and brokers over the metadata store (``--zookeeper``: a real ZooKeeper, the
embedded store handed in-process, and the embedded store over TCP): 2.7's output, and
bad input refused with one line and exit 1, changing nothing."""

from __future__ import annotations

import io
import json
from collections.abc import Awaitable, Callable

import pytest

from cluster.cli.configs import run_configs_command
from protocol.errors import NoNodeError
from tests.support.topics_harness import WIRE, Harness, Result
from tests.support.waiting import eventually

pytestmark = pytest.mark.asyncio


async def wire(h: Harness, *argv: str) -> Result:
    out, err = io.StringIO(), io.StringIO()
    rc = await run_configs_command([*argv, "--bootstrap-server", h.bootstrap], out=out, err=err)
    return Result(rc, out.getvalue(), err.getvalue())


async def zk(h: Harness, *argv: str) -> Result:
    out, err = io.StringIO(), io.StringIO()
    if h.zookeeper is not None:
        full, store = [*argv, "--zookeeper", h.zookeeper], None
    else:
        full, store = [*argv, "--zookeeper", "embedded://in-process"], h.store
    rc = await run_configs_command(full, out=out, err=err, store=store)
    return Result(rc, out.getvalue(), err.getvalue())


async def stored(h: Harness, path: str) -> dict[str, str] | None:
    try:
        config: dict[str, str] = json.loads(await h.read(path))["config"]
    except NoNodeError:
        return None
    return config


async def settled(probe: Callable[[], Awaitable[Result]], expected: str) -> Result:
    """The describe output once the brokers applied the change (a condition with a
    deadline: the broker answers from the config it applied)."""
    return await eventually(probe, until=lambda r: r.out == expected)


async def test_brokers_over_the_wire(embedded_cluster: Harness) -> None:
    """The brokers' default and broker 0's own config altered and described as 2.7's tool
    prints them (AlterConfigs of the whole dynamic set; ``describeResourceConfig``)."""
    h = embedded_cluster
    default = ("--entity-type", "brokers", "--entity-default")
    r = await wire(h, *default, "--alter", "--add-config", "min.insync.replicas=2")
    assert (r.rc, r.out, r.err) == (
        0,
        "Completed updating default config for brokers in the cluster.\n",
        "",
    )
    assert await stored(h, "/config/brokers/<default>") == {"min.insync.replicas": "2"}
    expected = (
        "Default configs for brokers in the cluster are:\n"
        "  min.insync.replicas=2 sensitive=false"
        " synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=2}\n"
    )
    await settled(lambda: wire(h, *default, "--describe"), expected)

    own = ("--entity-type", "brokers", "--entity-name", "0")
    r = await wire(h, *own, "--alter", "--add-config", "log.retention.ms=1000")
    assert (r.rc, r.out) == (0, "Completed updating config for broker 0.\n")
    expected = (
        "Dynamic configs for broker 0 are:\n"
        "  log.retention.ms=1000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
        "log.retention.ms=1000, DEFAULT_CONFIG:log.retention.hours=168}\n"
    )
    await settled(lambda: wire(h, *own, "--describe"), expected)
    r = await wire(h, "--entity-type", "brokers", "--describe")
    assert r.out == (
        "Dynamic configs for broker 0 are:\n"
        "  log.retention.ms=1000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
        "log.retention.ms=1000, DEFAULT_CONFIG:log.retention.hours=168}\n"
        "Dynamic configs for broker 1 are:\n"
        "Dynamic configs for broker 2 are:\n"
        "Default configs for brokers in the cluster are:\n"
        "  min.insync.replicas=2 sensitive=false"
        " synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=2}\n"
    )
    r = await wire(h, *own, "--alter", "--delete-config", "log.retention.ms")
    assert (r.rc, r.out) == (0, "Completed updating config for broker 0.\n")
    assert await stored(h, "/config/brokers/0") == {}


async def test_broker_bad_input_over_the_wire(embedded_cluster: Harness) -> None:
    h = embedded_cluster
    before = await h.snapshot()
    own = ("--entity-type", "brokers", "--entity-name", "0")
    cases = [
        (("--entity-type", "brokers", "--entity-name", "x", "--describe"),
         "The entity name for brokers must be a valid integer broker id, but it is: x\n"),
        (("--entity-type", "brokers", "--alter", "--add-config", "a=1"),
         "an entity-name or default entity must be specified with --alter of users, clients"
         " or brokers\n"),
        ((*own, "--alter", "--delete-config", "min.insync.replicas"),
         "Invalid config(s): min.insync.replicas\n"),
        ((*own, "--alter", "--add-config", "num.partitions=3"),
         "org.apache.kafka.common.errors.InvalidRequestException: Invalid config value for"
         " resource ConfigResource(type=BROKER, name='0'): Cannot update these configs"
         " dynamically: Set(num.partitions)\n"),
        ((*own, "--alter", "--add-config", "min.insync.replicas=0"),
         "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1\n"),
        (("--entity-type", "users", "--describe"),
         "kemu configs serves --entity-type topics and brokers only\n"),
    ]  # fmt: skip
    for args, tail in cases:
        r = await wire(h, *args)
        assert (r.rc, r.out) == (1, ""), args
        assert r.err.endswith(tail), (args, r.err)
    assert await h.snapshot() == before


async def test_topics_and_brokers_over_the_store(store_cluster: Harness) -> None:
    """``alterConfigWithZk`` / ``describeConfigWithZk``: a topic's config and a broker's
    replication quota written straight to the store with a notification, and printed as
    ``Configs for topic 't' are k=v``."""
    h = store_cluster
    await h.topics("--create", "--topic", "t", "--partitions", "1", via=WIRE)
    r = await zk(h, "--entity-type", "topics", "--entity-name", "t", "--alter",
                 "--add-config", "retention.ms=5000,cleanup.policy=[compact,delete]")  # fmt: skip
    assert (r.rc, r.out, r.err) == (0, "Completed updating config for entity: topic 't'.\n", "")
    assert await stored(h, "/config/topics/t") == {
        "retention.ms": "5000",
        "cleanup.policy": "compact,delete",
    }
    r = await zk(h, "--entity-type", "topics", "--entity-name", "t", "--describe")
    assert r.out == "Configs for topic 't' are cleanup.policy=compact,delete,retention.ms=5000\n"
    rate = "leader.replication.throttled.rate"
    r = await zk(h, "--entity-type", "brokers", "--entity-name", "1", "--alter",
                 "--add-config", f"{rate}=100")  # fmt: skip
    assert (r.rc, r.out) == (0, "Completed updating config for entity: brokers '1'.\n")
    r = await zk(h, "--entity-type", "brokers", "--describe")
    assert r.out == f"Configs for brokers '1' are {rate}=100\n"
    notes = await h.children("/config/changes")
    last = json.loads(await h.read(f"/config/changes/{sorted(notes)[-1]}"))
    assert last == {"version": 2, "entity_path": "brokers/1"}


async def test_store_bad_input(store_cluster: Harness) -> None:
    h = store_cluster
    await h.topics("--create", "--topic", "u", "--partitions", "1", via=WIRE)
    before = await h.snapshot()
    running = (
        " Broker configuration updates using ZooKeeper are supported for bootstrapping before"
        " brokers are started to enable encrypted password configs to be stored in ZooKeeper.\n"
    )
    cases = [
        (("--entity-type", "brokers", "--entity-name", "0", "--alter", "--add-config",
          "min.insync.replicas=2"),
         "requirement failed: --bootstrap-server option must be specified to update broker"
         " configs Set(min.insync.replicas) when broker 0 is running." + running),
        (("--entity-type", "brokers", "--entity-default", "--alter", "--add-config",
          "min.insync.replicas=2"),
         "requirement failed: --bootstrap-server option must be specified to update broker"
         " configs Set(min.insync.replicas) for default cluster if any broker is running."
         + running),
        (("--entity-type", "topics", "--entity-name", "u", "--alter", "--delete-config", "x"),
         "Invalid config(s): x\n"),
        (("--entity-type", "topics", "--entity-name", "nope", "--alter", "--add-config",
          "retention.ms=1"),
         "\norg.apache.kafka.common.errors.UnknownTopicOrPartitionException: Topic 'nope'"
         " does not exist.\n"),
        (("--entity-type", "topics", "--entity-name", "u", "--alter", "--add-config",
          "retention.ms=abc"),
         "\norg.apache.kafka.common.config.ConfigException: Invalid value abc for"
         " configuration retention.ms: Not a number of type LONG\n"),
        (("--entity-type", "topics", "--entity-name", "u", "--alter", "--add-config", "x=1"),
         "Unknown topic config name: x\n"),
        (("--entity-type", "brokers", "--entity-name", "1", "--alter", "--add-config",
          "leader.replication.throttled.rate=-1"),
         "\norg.apache.kafka.common.config.ConfigException: Invalid value -1 for configuration"
         " leader.replication.throttled.rate: Value must be at least 0\n"),
        (("--entity-type", "topics", "--entity-name", "u", "--describe", "--all"),
         "--bootstrap-server must be specified for --all\n"),
        (("--entity-type", "broker-loggers", "--describe"),
         "Invalid entity type broker-loggers, the entity type must be one of topics,clients,"
         "users,brokers with the --zookeeper argument\n"),
    ]  # fmt: skip
    for args, tail in cases:
        r = await zk(h, *args)
        assert (r.rc, r.out) == (1, ""), args
        assert r.err.endswith(tail), (args, r.err)
        if tail.startswith("\n"):  # ConfigCommand.main's catch-all: the command line first
            assert r.err.startswith("Error while executing config command with args '--entity")
    assert await h.snapshot() == before
