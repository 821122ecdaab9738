"""``kemu configs``: Kafka 2.7's ``kafka-configs.sh`` (``kafka.admin.ConfigCommand``) for
topics and brokers, through a broker (``--bootstrap-server``) or the metadata store
(``--zookeeper``); docs/configs.md.

* ``--bootstrap-server --describe [--all]``: ``describeResourceConfig``: for the entity
  (or every topic, internal ones too; or every broker, then the brokers' default),
  ``Dynamic configs for topic T are:`` / ``... for broker 0 are:`` (``All configs`` with
  ``--all``) or ``Default configs for brokers in the cluster are:``, then one line per
  config of the entity's own dynamic source (every config with ``--all``):
  ``  k=v sensitive=false synonyms={SOURCE:name=value, ...}``.
* ``--bootstrap-server --alter --add-config k=v,k2=[a,b] --delete-config k``:
  ``alterConfig``: a config to delete must be one the entity has (else ``Invalid
  config(s): k``); a topic's change is one IncrementalAlterConfigs of SETs and DELETEs, a
  broker's (or the default's) one AlterConfigs of its whole new dynamic set;
  ``Completed updating config for topic T.`` / ``... for broker 0.`` / ``Completed
  updating default config for brokers in the cluster.``
* ``--zookeeper``: ``describeConfigWithZk`` (``Configs for topic 't' are k=v,...``) and
  ``alterConfigWithZk`` (``Completed updating config for entity: topic 't'.``), with
  2.7's rule that only the replication quotas of a running broker change this way.

Bad input is one line on stderr and exit 1 (usage errors add the usage, as Kafka's
``printUsageAndDie``); a broker's refusal prints Kafka's two first lines of stderr
(``Error while executing config command with args '...'`` and the exception), exit 1.
Other entity types (broker-loggers, clients, users) and ``--add-config-file`` are not
served (the latter is not listed by ``--help``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final, TextIO

from actors.admin import ConfigError, check_dynamic_broker_configs, check_topic_config
from actors.broker.admin_manager import DEFAULT_ENTITY, check_quota_value
from actors.zk import kafka_zk
from actors.zk.store import MetadataStore, StoreSession
from cluster.cli.args import UsageError
from cluster.cli.client_tools import ToolError, command_options, run_tool, run_tool_async
from cluster.cli.jopt import Option, Options, java_parse_int, option_lines
from cluster.cli.store_command import with_session
from cluster.kafka.client import (
    AdminClientConfig,
    KafkaAdminClient,
    api_error,
    exception_class,
    load_properties,
)
from protocol import zkdata
from protocol.errors import ErrorCode, KafkaApiError
from protocol.ids import BrokerId, TopicName
from protocol.kafka_api import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
)

__all__ = ["main", "parse_configs_to_add", "run_configs_command"]

SPECS: Final = (
    Option(
        "add-config",
        "Key Value pairs of configs to add. Square brackets can be used to group values "
        "which contain commas: 'k1=v1,k2=[v1,v2,v2],k3=v3'.",
        "String",
    ),
    Option(
        "all",
        "List all configs for the given topic, broker, or broker-logger entity (includes "
        "static configuration when the entity type is brokers)",
    ),
    Option("alter", "Alter the configuration for the entity."),
    Option(
        "bootstrap-server",
        "The Kafka server to connect to. This is required for describing and altering "
        "broker configs.",
        "server to connect to",
    ),
    Option(
        "command-config",
        "Property file containing configs to be passed to Admin Client. This is used only "
        "with --bootstrap-server option for describing and altering broker configs.",
        "command config property file",
    ),
    Option("delete-config", "config keys to remove 'k1,k2'", "String"),
    Option("describe", "List configs for the given entity."),
    Option(
        "entity-default",
        "Default entity name for clients/users/brokers (applies to corresponding entity type"
        " in command line)",
    ),
    Option(
        "entity-name",
        "Name of entity (topic name/client id/user principal name/broker id)",
        "String",
    ),
    Option(
        "entity-type",
        "Type of entity (topics/clients/users/brokers/broker-loggers; kemu: topics and"
        " brokers only)",
        "String",
    ),
    Option("help", "Print usage information."),
    Option("version", "Display Kafka version."),
    Option(
        "zookeeper",
        "DEPRECATED. The connection string for the zookeeper connection in the form"
        " host:port. Multiple URLS can be given to allow fail-over. Replaced by"
        " --bootstrap-server, REQUIRED unless --bootstrap-server is given.",
        "urls",
    ),
)  # fmt: skip
SUMMARY: Final = (
    "This tool helps to manipulate and describe entity config for a topic, client, user or broker"
)
USAGE: Final = "\n".join(["Option  Description", *option_lines(SPECS)])
BROKER_SUPPORTED_TYPES: Final = ("topics", "clients", "users", "brokers", "broker-loggers")
"""``ConfigCommand.BrokerSupportedConfigTypes``, in Kafka's order."""
ZK_SUPPORTED_TYPES: Final = ("topics", "clients", "users", "brokers")
"""``ConfigCommand.ZkSupportedConfigTypes`` (``ConfigType.all``), in Kafka's order."""
SERVED_TYPES: Final = ("topics", "brokers")
ZK_UPDATABLE_WHILE_RUNNING: Final = (
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
)
"""``BrokerConfigsUpdatableUsingZooKeeperWhileBrokerRunning``: the replication quotas."""
_SOURCE_NAMES: Final = {
    ConfigSource.TOPIC_CONFIG: "DYNAMIC_TOPIC_CONFIG",  # ConfigEntry.ConfigSource's names
    ConfigSource.DYNAMIC_BROKER_CONFIG: "DYNAMIC_BROKER_CONFIG",
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    ConfigSource.STATIC_BROKER_CONFIG: "STATIC_BROKER_CONFIG",
    ConfigSource.DEFAULT_CONFIG: "DEFAULT_CONFIG",
    ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG: "DYNAMIC_BROKER_LOGGER_CONFIG",
    ConfigSource.UNKNOWN: "UNKNOWN",
}
_CONFIG_EXCEPTION: Final = "org.apache.kafka.common.config.ConfigException"
_OUTSIDE_BRACKETS: Final = r"(?=[^\]]*(?:\[|$))"
_PAIR_SEPARATOR: Final = re.compile("," + _OUTSIDE_BRACKETS)
_KEY_VALUE: Final = re.compile(r"\s*=\s*" + _OUTSIDE_BRACKETS)


class BrokerRefusal(ToolError):
    """A broker answered the alteration or description with an error: Kafka's
    ``ExecutionException`` reaching ``main``'s catch-all."""


def parse_configs_to_add(text: str) -> dict[str, str]:
    """``parseConfigsToBeAdded``: pairs split at commas outside square brackets, each
    ``key=value`` (split at ``=`` outside brackets), keys trimmed, brackets dropped from
    values and values trimmed. Raises ``ToolError`` with Kafka's message for a pair that
    is not ``key=value``."""
    pairs = [_KEY_VALUE.split(item) for item in _PAIR_SEPARATOR.split(text)]
    if not all(len(pair) == 2 for pair in pairs):
        raise ToolError(
            'Invalid entity config: all configs to be added must be in the format "key=val".'
        )
    return {key.strip(): re.sub(r"\[?\]?", "", value).strip() for key, value in pairs}


def _check_args(opts: Options) -> tuple[str, str | None]:
    """``ConfigCommandOptions.checkArgs`` for what kemu serves: the entity type and name
    ("" for ``--entity-default``, None for none)."""
    actions = [a for a in ("alter", "describe") if opts.has(a)]
    if len(actions) != 1:
        raise UsageError("Command must include exactly one action: --describe, --alter")
    for used, clashing in (("alter", ("describe",)), ("describe", ("alter", "add-config",
                           "delete-config"))):  # fmt: skip
        if opts.has(used):
            for name in clashing:
                if opts.has(name):
                    raise UsageError(f'Option "[{used}]" can\'t be used with option "[{name}]"')
    types = list(opts.values_of("entity-type"))
    duplicates = [t for i, t in enumerate(types) if t in types[:i]]
    if duplicates:
        raise ToolError(f"Duplicate entity type(s) specified: {','.join(duplicates)}")
    bootstrap = opts.has("bootstrap-server")
    allowed, connect = (
        (BROKER_SUPPORTED_TYPES, "--bootstrap-server") if bootstrap
        else (ZK_SUPPORTED_TYPES, "--zookeeper")
    )  # fmt: skip
    for entity_type in types:
        if entity_type not in allowed:
            raise ToolError(
                f"Invalid entity type {entity_type}, the entity type must be one of"
                f" {','.join(allowed)} with the {connect} argument"
            )
    if not types:
        raise ToolError("At least one entity type must be specified")
    if len(types) > 1:
        raise ToolError("Only 'users' and 'clients' entity types may be specified together")
    if types[0] not in SERVED_TYPES:
        raise ToolError("kemu configs serves --entity-type topics and brokers only")
    if not bootstrap and not opts.has("zookeeper"):
        raise ToolError(
            "One of the required --bootstrap-server or --zookeeper arguments must be specified"
        )
    if bootstrap and opts.has("zookeeper"):
        raise ToolError("Only one of --bootstrap-server or --zookeeper must be specified")
    if opts.has("all") and opts.has("zookeeper"):
        raise ToolError("--bootstrap-server must be specified for --all")
    names = [*opts.values_of("entity-name"), *([""] if opts.has("entity-default") else [])]
    if types[0] == "brokers":
        for name in opts.values_of("entity-name"):
            if java_parse_int(name) is None:
                raise ToolError(
                    "The entity name for brokers must be a valid integer broker id, but it"
                    f" is: {name}"
                )
    if opts.has("alter"):
        if types[0] == "brokers":
            if not names:
                raise ToolError(
                    "an entity-name or default entity must be specified with --alter of users,"
                    " clients or brokers"
                )
        elif not any(names):
            raise ToolError("an entity name must be specified with --alter of topics")
        if not opts.has("add-config") and not opts.has("delete-config"):
            raise ToolError(
                "At least one of --add-config, --add-config-file, or --delete-config must be"
                " specified with --alter"
            )
    return types[0], names[0] if names else None


def _refusal(code: ErrorCode, message: str | None, argv: Sequence[str]) -> BrokerRefusal:
    exc = api_error(code, message)
    name = exception_class(code, "org.apache.kafka.common.errors.KafkaException")
    return BrokerRefusal(
        f"Error while executing config command with args '{' '.join(argv)}'\n"
        f"java.util.concurrent.ExecutionException: {name}: {exc}"
    )


def _resource(entity_type: str, name: str) -> ConfigResource:
    kind = ConfigResourceType.TOPIC if entity_type == "topics" else ConfigResourceType.BROKER
    return ConfigResource(resource_type=kind, resource_name=name)


def _dynamic_source(entity_type: str, name: str) -> ConfigSource:
    """The source ``getResourceConfig`` keeps without ``--all``."""
    if entity_type == "topics":
        return ConfigSource.TOPIC_CONFIG
    return (
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        if not name
        else ConfigSource.DYNAMIC_BROKER_CONFIG
    )


async def _resource_configs(
    client: KafkaAdminClient, entity_type: str, name: str, describe_all: bool, argv: Sequence[str]
) -> tuple[ConfigEntry, ...]:
    """``getResourceConfig``: the entity's configs (with synonyms), the dynamic ones of
    its own source unless ``describe_all``."""
    resource = _resource(entity_type, name)
    results = await client.describe_configs([resource], include_synonyms=True)
    result = results[(resource.resource_type, name)]
    if result.error_code is not ErrorCode.NONE:
        raise _refusal(result.error_code, result.error_message, argv)
    source = _dynamic_source(entity_type, name)
    return tuple(e for e in result.configs if describe_all or e.source is source)


def _value(value: str | None) -> str:
    return "null" if value is None else value


async def _describe(
    client: KafkaAdminClient,
    entity_type: str,
    name: str | None,
    describe_all: bool,
    argv: Sequence[str],
    out: TextIO,
) -> None:
    """``describeResourceConfig``: the entity, else every topic (internal ones too) or
    every broker and then the brokers' default."""
    if name is not None:
        entities = [name]
    elif entity_type == "topics":
        entities = list(await client.list_topics(include_internal=True))
    else:
        view = await client.describe_cluster()
        entities = [*(str(b.broker_id) for b in view.brokers), ""]
    for entity in entities:
        if entity_type == "brokers" and not entity:
            out.write("Default configs for brokers in the cluster are:\n")
        else:
            kind = "All" if describe_all else "Dynamic"
            out.write(f"{kind} configs for {entity_type[:-1]} {entity} are:\n")
        for entry in await _resource_configs(client, entity_type, entity, describe_all, argv):
            synonyms = ", ".join(
                f"{_SOURCE_NAMES[s.source]}:{s.name}={_value(s.value)}" for s in entry.synonyms
            )
            sensitive = "true" if entry.is_sensitive else "false"
            out.write(
                f"  {entry.name}={_value(entry.value)} sensitive={sensitive}"
                f" synonyms={{{synonyms}}}\n"
            )


def _changes(opts: Options) -> tuple[dict[str, str], list[str]]:
    added = parse_configs_to_add(opts.value("add-config") or "") if opts.has("add-config") else {}
    deleted = [
        item.strip() for value in opts.values_of("delete-config") for item in value.split(",")
    ]
    return added, deleted


async def _alter(
    client: KafkaAdminClient,
    opts: Options,
    entity_type: str,
    name: str,
    argv: Sequence[str],
    out: TextIO,
) -> None:
    """``alterConfig``: a config to delete must be one the entity has as its own dynamic
    config (else ``Invalid config(s): k``); a topic's change is one IncrementalAlterConfigs
    of SETs and DELETEs, a broker's (or the brokers' default) one AlterConfigs of its whole
    new dynamic set, as 2.7's tool sends them."""
    added, deleted = _changes(opts)
    current = {
        e.name: e.value for e in await _resource_configs(client, entity_type, name, False, argv)
    }
    unknown = [k for k in deleted if k not in current]
    if unknown:
        raise ToolError(f"Invalid config(s): {','.join(unknown)}")
    if entity_type == "topics":
        configs = (
            *(AlterableConfig(name=k, value=v, operation=AlterConfigOp.SET)
              for k, v in added.items()),
            *(AlterableConfig(name=k, value="", operation=AlterConfigOp.DELETE) for k in deleted),
        )  # fmt: skip
    else:
        entries = {**current, **added}
        for k in deleted:
            entries.pop(k, None)
        configs = tuple(AlterableConfig(name=k, value=v) for k, v in entries.items())
    resource = AlterConfigsResource(
        resource_type=_resource(entity_type, name).resource_type,
        resource_name=name,
        configs=configs,
    )
    if entity_type == "topics":
        answers = await client.incremental_alter_configs([resource])
    else:
        answers = await client.alter_configs([resource])
    result = answers[(resource.resource_type, name)]
    if result.error_code is not ErrorCode.NONE:
        raise _refusal(result.error_code, result.error_message, argv)
    if name:
        out.write(f"Completed updating config for {entity_type[:-1]} {name}.\n")
    else:
        out.write(f"Completed updating default config for {entity_type} in the cluster.\n")


# ------------------------------------------------------------------ --zookeeper


def _zk_entity(entity_type: str, name: str) -> str:
    """``ConfigEntity.toString``: ``topic 't'``, ``brokers '0'``, ``default brokers``."""
    kind = "topic" if entity_type == "topics" else entity_type
    return f"default {kind}" if name == DEFAULT_ENTITY else f"{kind} '{name}'"


async def _zk_describe(
    session: StoreSession, entity_type: str, name: str | None, out: TextIO
) -> None:
    """``describeConfigWithZk``: each entity's stored config (the one named, else every
    entity with a config znode), ``Configs for topic 't' are k=v,k2=v2``."""
    kind = zkdata.ConfigType(entity_type)
    if name is not None:
        entities = [name or DEFAULT_ENTITY]
    else:
        entities = sorted(await kafka_zk.entities_with_config(session, kind))
    for entity in entities:
        config = await kafka_zk.get_entity_config(session, kind, entity)
        pairs = ",".join(f"{k}={v}" for k, v in config.items())
        out.write(f"Configs for {_zk_entity(entity_type, entity)} are {pairs}\n")


def _catch_all(argv: Sequence[str], exception: str, message: str) -> ToolError:
    """What ``ConfigCommand.main``'s catch-all prints for an exception other than
    ``IllegalArgumentException`` and ``InvalidConfigurationException``: the command line,
    then the exception (the first line of its stack trace)."""
    return ToolError(
        f"Error while executing config command with args '{' '.join(argv)}'\n{exception}: {message}"
    )


async def _zk_alter(
    session: StoreSession,
    opts: Options,
    entity_type: str,
    name: str,
    argv: Sequence[str],
    out: TextIO,
) -> None:
    """``alterConfigWithZk``: for brokers, a config other than the replication quotas only
    while the broker (or, for the default, every broker) is down; a deleted config must be
    stored (``Invalid config(s): k``); then ``AdminZkClient.changeConfigs``: a topic must
    exist and its new set pass ``LogConfig.validate``, a broker's quotas must be LONGs of
    at least 0; written with a change notification."""
    added, deleted = _changes(opts)
    entity = name or DEFAULT_ENTITY
    kind = zkdata.ConfigType(entity_type)
    if entity_type == "brokers":
        dynamic = [k for k in added if k not in ZK_UPDATABLE_WHILE_RUNNING]
        if dynamic:
            message = (
                "requirement failed: --bootstrap-server option must be specified to update"
                f" broker configs Set({', '.join(dynamic)})"
            )
            info = (
                " Broker configuration updates using ZooKeeper are supported for bootstrapping"
                " before brokers are started to enable encrypted password configs to be stored"
                " in ZooKeeper."
            )
            running = await kafka_zk.get_brokers(session)
            if name and BrokerId(int(name)) in running:
                raise ToolError(f"{message} when broker {name} is running.{info}")
            if not name and running:
                raise ToolError(f"{message} for default cluster if any broker is running.{info}")
    config = await kafka_zk.get_entity_config(session, kind, entity)
    unknown = [k for k in deleted if k not in config]
    if unknown:
        raise ToolError(f"Invalid config(s): {','.join(unknown)}")
    config.update(added)
    for k in deleted:
        config.pop(k, None)
    if entity_type == "topics":
        topic = TopicName(name)
        if await kafka_zk.get_topic_assignment(session, topic) is None:
            raise _catch_all(
                argv,
                "org.apache.kafka.common.errors.UnknownTopicOrPartitionException",
                f"Topic '{name}' does not exist.",
            )
        try:
            check_topic_config(config)
        except KafkaApiError as exc:  # InvalidConfigurationException: its message alone
            raise ToolError(str(exc)) from None
        except ConfigError as exc:
            raise _catch_all(argv, _CONFIG_EXCEPTION, str(exc)) from None
        await kafka_zk.change_topic_config(session, topic, config)
    else:
        for k, v in config.items():
            try:
                if k in ZK_UPDATABLE_WHILE_RUNNING:
                    check_quota_value(k, v)
                else:
                    check_dynamic_broker_configs({k: v})
            except ConfigError as exc:
                raise _catch_all(argv, _CONFIG_EXCEPTION, str(exc)) from None
        await kafka_zk.change_entity_config(session, kind, entity, config)
    out.write(f"Completed updating config for entity: {_zk_entity(entity_type, entity)}.\n")


async def configs(argv: Sequence[str], *, out: TextIO, store: MetadataStore | None = None) -> int:
    opts = command_options(argv, SPECS, SUMMARY, out)
    if opts is None:
        return 0
    entity_type, name = _check_args(opts)
    if opts.has("zookeeper"):

        async def run(session: StoreSession) -> None:
            if opts.has("alter"):
                assert name is not None
                await _zk_alter(session, opts, entity_type, name, argv, out)
            else:
                await _zk_describe(session, entity_type, name, out)

        await with_session(opts.value("zookeeper") or "", store, "kemu-configs", run)
        return 0
    config_file = opts.value("command-config")
    props = load_properties(Path(config_file)) if config_file else {}
    config = AdminClientConfig.from_properties(props)
    async with KafkaAdminClient(opts.value("bootstrap-server") or "", config) as client:
        try:
            if opts.has("alter"):
                assert name is not None
                await _alter(client, opts, entity_type, name, argv, out)
            else:
                await _describe(client, entity_type, name, opts.has("all"), argv, out)
        except KafkaApiError as exc:
            raise _refusal(exc.code, str(exc), argv) from None
    return 0


async def run_configs_command(
    argv: Sequence[str], *, out: TextIO, err: TextIO, store: MetadataStore | None = None
) -> int:
    """``kemu configs ARGS`` on the running event loop; ``store`` stands in for the one
    ``--zookeeper`` names (tests, in-process clusters)."""
    return await run_tool_async(
        lambda: configs(argv, out=out, store=store), usage=USAGE, err=err, out=out
    )


def main(argv: Sequence[str], *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``kemu configs ARGS``: run it and return the exit status."""
    output, error = out or sys.stdout, err or sys.stderr
    return run_tool(lambda: configs(argv, out=output), usage=USAGE, err=error, out=output)
