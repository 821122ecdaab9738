"""``kemu configs``: Kafka 2.7's ``kafka-configs.sh`` (``kafka.admin.ConfigCommand``) for
topics, through a broker (``--bootstrap-server``).

* ``--entity-type topics [--entity-name T] --describe [--all]``:
  ``describeResourceConfig``: for the topic (or every topic, internal ones too),
  ``Dynamic configs for topic T are:`` (``All configs`` with ``--all``), then one line per
  config whose source is DYNAMIC_TOPIC_CONFIG (every config with ``--all``):
  ``  k=v sensitive=false synonyms={SOURCE:name=value, ...}``.
* ``--entity-type topics --entity-name T --alter --add-config k=v,k2=[a,b]
  --delete-config k``: ``alterConfig``: a config to delete must be one the topic
  overrides (else ``Invalid config(s): k``), then one IncrementalAlterConfigs of SETs
  and DELETEs; ``Completed updating config for topic T.``

Bad input is one line on stderr and exit 1 (usage errors add the usage, as Kafka's
``printUsageAndDie``); a broker's refusal prints Kafka's two first lines of stderr
(``Error while executing config command with args '...'`` and the exception), exit 1.
Other entity types (brokers, broker-loggers, clients, users), ``--zookeeper`` and
``--add-config-file`` are not served (and not listed by ``--help``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final, TextIO

from cluster.cli.args import UsageError
from cluster.cli.client_tools import ToolError, command_options, run_tool
from cluster.cli.jopt import Option, Options, option_lines
from cluster.kafka.client import (
    AdminClientConfig,
    KafkaAdminClient,
    api_error,
    load_properties,
)
from protocol.errors import ErrorCode, KafkaApiError
from protocol.kafka_api import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
)

__all__ = ["main", "parse_configs_to_add"]

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
        "entity-name",
        "Name of entity (topic name/client id/user principal name/broker id)",
        "String",
    ),
    Option(
        "entity-type", "Type of entity (topics/clients/users/brokers/broker-loggers)", "String"
    ),
    Option("help", "Print usage information."),
    Option("version", "Display Kafka version."),
)  # fmt: skip
SUMMARY: Final = (
    "This tool helps to manipulate and describe entity config for a topic, client, user or broker"
)
USAGE: Final = "\n".join(["Option  Description", *option_lines(SPECS)])
BROKER_SUPPORTED_TYPES: Final = ("topics", "clients", "users", "brokers", "broker-loggers")
"""``ConfigCommand.BrokerSupportedConfigTypes``, in Kafka's order."""
_SOURCE_NAMES: Final = {
    ConfigSource.TOPIC_CONFIG: "DYNAMIC_TOPIC_CONFIG",  # ConfigEntry.ConfigSource's names
    ConfigSource.DYNAMIC_BROKER_CONFIG: "DYNAMIC_BROKER_CONFIG",
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    ConfigSource.STATIC_BROKER_CONFIG: "STATIC_BROKER_CONFIG",
    ConfigSource.DEFAULT_CONFIG: "DEFAULT_CONFIG",
    ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG: "DYNAMIC_BROKER_LOGGER_CONFIG",
    ConfigSource.UNKNOWN: "UNKNOWN",
}
_EXCEPTIONS: Final = {
    ErrorCode.INVALID_CONFIG: "InvalidConfigurationException",
    ErrorCode.INVALID_REQUEST: "InvalidRequestException",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "UnknownTopicOrPartitionException",
    ErrorCode.INVALID_TOPIC_EXCEPTION: "InvalidTopicException",
    ErrorCode.POLICY_VIOLATION: "PolicyViolationException",
}
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
    """``ConfigCommandOptions.checkArgs`` for what kemu serves: the entity type and name."""
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
    for entity_type in types:
        if entity_type not in BROKER_SUPPORTED_TYPES:
            raise ToolError(
                f"Invalid entity type {entity_type}, the entity type must be one of"
                f" {','.join(BROKER_SUPPORTED_TYPES)} with the --bootstrap-server argument"
            )
    if not types:
        raise ToolError("At least one entity type must be specified")
    if types != ["topics"]:
        raise ToolError("kemu configs serves --entity-type topics only")
    if not opts.has("bootstrap-server"):
        raise ToolError(
            "One of the required --bootstrap-server or --zookeeper arguments must be specified"
        )
    names = opts.values_of("entity-name")
    if opts.has("alter"):
        if not any(names):
            raise ToolError("an entity name must be specified with --alter of topics")
        if not opts.has("add-config") and not opts.has("delete-config"):
            raise ToolError(
                "At least one of --add-config, --add-config-file, or --delete-config must be"
                " specified with --alter"
            )
        if len(names) != len(types):
            raise ToolError("An entity name must be specified for every entity type")
    return types[0], names[0] if names else None


def _refusal(code: ErrorCode, message: str | None, argv: Sequence[str]) -> BrokerRefusal:
    exc = api_error(code, message)
    name = _EXCEPTIONS.get(code, "KafkaException")
    return BrokerRefusal(
        f"Error while executing config command with args '{' '.join(argv)}'\n"
        f"java.util.concurrent.ExecutionException: org.apache.kafka.common.errors.{name}: {exc}"
    )


async def _topic_configs(
    client: KafkaAdminClient, topic: str, argv: Sequence[str]
) -> tuple[ConfigEntry, ...]:
    resource = ConfigResource(resource_type=ConfigResourceType.TOPIC, resource_name=topic)
    results = await client.describe_configs([resource], include_synonyms=True)
    result = results[(ConfigResourceType.TOPIC, topic)]
    if result.error_code is not ErrorCode.NONE:
        raise _refusal(result.error_code, result.error_message, argv)
    return result.configs


def _value(value: str | None) -> str:
    return "null" if value is None else value


async def _describe(
    client: KafkaAdminClient, name: str | None, describe_all: bool, argv: Sequence[str], out: TextIO
) -> None:
    topics = [name] if name else list(await client.list_topics(include_internal=True))
    for topic in topics:
        out.write(f"{'All' if describe_all else 'Dynamic'} configs for topic {topic} are:\n")
        for entry in await _topic_configs(client, topic, argv):
            if not describe_all and entry.source is not ConfigSource.TOPIC_CONFIG:
                continue
            synonyms = ", ".join(
                f"{_SOURCE_NAMES[s.source]}:{s.name}={_value(s.value)}" for s in entry.synonyms
            )
            sensitive = "true" if entry.is_sensitive else "false"
            out.write(
                f"  {entry.name}={_value(entry.value)} sensitive={sensitive}"
                f" synonyms={{{synonyms}}}\n"
            )


async def _alter(
    client: KafkaAdminClient, opts: Options, topic: str, argv: Sequence[str], out: TextIO
) -> None:
    added = parse_configs_to_add(opts.value("add-config") or "") if opts.has("add-config") else {}
    deleted = [
        item.strip() for value in opts.values_of("delete-config") for item in value.split(",")
    ]
    current = {  # getResourceConfig without --all: the topic's own overrides
        e.name
        for e in await _topic_configs(client, topic, argv)
        if e.source is ConfigSource.TOPIC_CONFIG
    }
    unknown = [k for k in deleted if k not in current]
    if unknown:
        raise ToolError(f"Invalid config(s): {','.join(unknown)}")
    configs = (
        *(AlterableConfig(name=k, value=v, operation=AlterConfigOp.SET) for k, v in added.items()),
        *(AlterableConfig(name=k, value="", operation=AlterConfigOp.DELETE) for k in deleted),
    )
    resource = AlterConfigsResource(
        resource_type=ConfigResourceType.TOPIC, resource_name=topic, configs=configs
    )
    result = (await client.incremental_alter_configs([resource]))[(ConfigResourceType.TOPIC, topic)]
    if result.error_code is not ErrorCode.NONE:
        raise _refusal(result.error_code, result.error_message, argv)
    out.write(f"Completed updating config for topic {topic}.\n")


async def configs(argv: Sequence[str], *, out: TextIO) -> int:
    opts = command_options(argv, SPECS, SUMMARY, out)
    if opts is None:
        return 0
    _, name = _check_args(opts)
    config_file = opts.value("command-config")
    props = load_properties(Path(config_file)) if config_file else {}
    config = AdminClientConfig.from_properties(props)
    async with KafkaAdminClient(opts.value("bootstrap-server") or "", config) as client:
        try:
            if opts.has("alter"):
                assert name is not None
                await _alter(client, opts, name, argv, out)
            else:
                await _describe(client, name, opts.has("all"), argv, out)
        except KafkaApiError as exc:
            raise _refusal(exc.code, str(exc), argv) from None
    return 0


def main(argv: Sequence[str], *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``kemu configs ARGS``: run it and return the exit status."""
    output, error = out or sys.stdout, err or sys.stderr
    return run_tool(lambda: configs(argv, out=output), usage=USAGE, err=error, out=output)
