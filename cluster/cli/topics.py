"""``kemu topics``: Kafka 2.7's ``kafka-topics.sh`` (``kafka.admin.TopicCommand``).

Same options, same checks in the same order, same messages and output, byte for byte:

* Options are parsed as jopt-simple does (``cluster.cli.jopt``: ``--name value``,
  ``--name=value``, one or two dashes, unambiguous abbreviations, non-option words
  ignored). A parse error ends as jopt's message on stderr, exit 1.
* ``check_args`` is ``TopicCommandOptions.checkArgs``: a failure prints the message and
  the usage on stderr, exit 1. Of several clashing options the one reported is the first
  in the order Kafka's Scala sets iterate (``protocol.jvm``).
* The action runs as ``TopicCommand.main`` runs it: any error ends as one line
  "Error while executing topic command : <message>" on stdout (``println``), exit 1.
  Nothing is written once an input is found bad.

Two ways to reach the cluster, as in Kafka: ``--zookeeper`` reads and writes the metadata
store directly, as ``AdminZkClient`` does (validation from ``actors.admin``, brokers from
``/brokers/ids``, racks Enforced unless ``--disable-rack-aware``), and
``--bootstrap-server`` goes over the Kafka wire (``cluster.kafka.client``). kemu adds one
thing: with neither, the bootstrap servers of the running ``kemu up`` in the cluster file
(``--cluster-file``, default ``.kemu/cluster.json``). A store address is a ZooKeeper
connection string or ``embedded://HOST:PORT`` (``cluster.launch.connect.open_store``).
"""

from __future__ import annotations

import random
import re
import sys
import textwrap
import zlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, NoReturn, TextIO

import anyio
import structlog

from actors.admin import (
    TOPIC_CONFIGS,
    AdminOperationError,
    BrokerMetadata,
    RackMode,
    assign_replicas,
    broker_metadatas,
    has_collision_chars,
    is_internal,
    new_partitions_assignment,
    validate_topic_config,
    validate_topic_create,
    validate_topic_name,
)
from actors.zk import kafka_zk
from actors.zk.store import MetadataStore, StoreSession
from cluster.cli.args import UsageError
from cluster.cli.jopt import Option, OptionError, Options, java_parse_int, parse
from cluster.cli.store_command import report_failure, with_session
from cluster.kafka.client import (
    AdminClientConfig,
    KafkaAdminClient,
    api_error,
    load_properties,
)
from cluster.launch.connect import DEFAULT_CLUSTER_FILE, load_cluster_file
from protocol import zkdata
from protocol.control import TopicPartition
from protocol.errors import (
    ErrorCode,
    KafkaApiError,
    KemuError,
    NodeExistsError,
    NoNodeError,
    StoreError,
)
from protocol.ids import BrokerId, TopicName
from protocol.jvm import (
    java_hash_map_order,
    java_trim,
    scala_hash_set_order,
    scala_immutable_order,
)
from protocol.kafka_api import (
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    CreatableTopic,
    CreatePartitionsTopic,
    PartitionAssignment,
    TopicConfig,
)

__all__ = [
    "ERROR_PREFIX",
    "TopicCommandError",
    "TopicOptions",
    "UsageError",
    "check_args",
    "main",
    "parse_options",
    "run_topic_command",
]

log = structlog.get_logger("kemu.topics")

ERROR_PREFIX: Final = "Error while executing topic command : "
KAFKA_VERSION: Final = "2.7.2"
SHORT_MAX: Final = 32767

# =============================================================================== options


_CONFIG_HELP = (
    "A topic configuration override for the topic being created or altered. The following"
    " is a list of valid configurations: \n"
    + "".join(f"\t{name}\n" for name in TOPIC_CONFIGS)
    + "See the Kafka documentation for full details on the topic configs. It is supported"
    " only in combination with --create if --bootstrap-server option is used (the"
    " kafka-configs CLI supports altering topic configs with a --bootstrap-server option)."
)
_KAFKA_CONFIGS_HINT: Final = (
    " (the kafka-configs CLI supports altering topic configs with a --bootstrap-server option)"
)

_SPECS: Final[tuple[Option, ...]] = (
    Option(
        "bootstrap-server",
        "REQUIRED: The Kafka server to connect to. In case of providing this, a direct"
        " Zookeeper connection won't be required.",
        "server to connect to",
    ),
    Option(
        "command-config",
        "Property file containing configs to be passed to Admin Client. This is used only"
        " with --bootstrap-server option for describing and altering broker configs.",
        "command config property file",
    ),
    Option(
        "zookeeper",
        "DEPRECATED, The connection string for the zookeeper connection in the form"
        " host:port. Multiple hosts can be given to allow fail-over. (kemu: also"
        " embedded://HOST:PORT, the embedded store of a running `kemu up`)",
        "hosts",
    ),
    Option("list", "List all available topics."),
    Option("create", "Create a new topic."),
    Option("delete", "Delete a topic"),
    Option(
        "alter",
        "Alter the number of partitions, replica assignment, and/or configuration for the topic.",
    ),
    Option("describe", "List details for the given topics."),
    Option(
        "topic",
        "The topic to create, alter, describe or delete. It also accepts a regular"
        " expression, except for --create option. Put topic name in double quotes and use"
        " the '\\' prefix to escape regular expression symbols; e.g. \"test\\.topic\".",
        "topic",
    ),
    Option("config", _CONFIG_HELP, "name=value"),
    Option(
        "delete-config",
        "A topic configuration override to be removed for an existing topic (see the list of"
        " configurations under the --config option). Not supported with the"
        " --bootstrap-server option.",
        "name",
    ),
    Option(
        "partitions",
        "The number of partitions for the topic being created or altered (WARNING: If"
        " partitions are increased for a topic that has a key, the partition logic or"
        " ordering of the messages will be affected). If not supplied for create, defaults"
        " to the cluster default.",
        "# of partitions",
    ),
    Option(
        "replication-factor",
        "The replication factor for each partition in the topic being created. If not"
        " supplied, defaults to the cluster default.",
        "replication factor",
    ),
    Option(
        "replica-assignment",
        "A list of manual partition-to-broker assignments for the topic being created or altered.",
        "broker_id_for_part1_replica1 : broker_id_for_part1_replica2 ,"
        " broker_id_for_part2_replica1 : broker_id_for_part2_replica2 , ...",
    ),
    Option(
        "under-replicated-partitions",
        "if set when describing topics, only show under replicated partitions",
    ),
    Option(
        "unavailable-partitions",
        "if set when describing topics, only show partitions whose leader is not available",
    ),
    Option(
        "under-min-isr-partitions",
        "if set when describing topics, only show partitions whose isr count is less than"
        " the configured minimum. Not supported with the --zookeeper option.",
    ),
    Option(
        "at-min-isr-partitions",
        "if set when describing topics, only show partitions whose isr count is equal to the"
        " configured minimum. Not supported with the --zookeeper option.",
    ),
    Option(
        "topics-with-overrides",
        "if set when describing topics, only show topics that have overridden configs",
    ),
    Option(
        "if-exists",
        "if set when altering or deleting or describing topics, the action will only"
        " execute if the topic exists.",
    ),
    Option(
        "if-not-exists",
        "if set when creating topics, the action will only execute if the topic does not"
        " already exist.",
    ),
    Option("disable-rack-aware", "Disable rack aware replica assignment"),
    Option("force", "Suppress console prompts"),
    Option(
        "exclude-internal",
        "exclude internal topics when running list or describe command. The internal topics"
        " will be listed by default",
    ),
    Option("help", "Print usage information."),
    Option("version", "Display Kafka version."),
    Option(
        "cluster-file",
        "kemu: the cluster file of a running `kemu up`, whose brokers are used when neither"
        f" --bootstrap-server nor --zookeeper is given (default: {DEFAULT_CLUSTER_FILE})",
        "path",
    ),
)
_BY_NAME: Final[Mapping[str, Option]] = {spec.name: spec for spec in _SPECS}

ACTIONS: Final = ("create", "list", "alter", "describe", "delete")
_TOPIC_LEVEL: Final = ("alter", "create", "describe", "list", "delete")  # Kafka's set literal
_REPORTS: Final = (
    "under-replicated-partitions",
    "under-min-isr-partitions",
    "at-min-isr-partitions",
    "unavailable-partitions",
)


class IllegalArgumentError(KemuError):
    """An ``IllegalArgumentException`` thrown before the command runs: message, exit 1."""


class TopicCommandError(KemuError):
    """An error inside the command: "Error while executing topic command : <message>"."""


class TopicOptions(Options):
    """A parsed command line, with the options TopicCommand's services read most."""

    @property
    def topic(self) -> str | None:
        return self.value("topic")

    @property
    def if_exists(self) -> bool:
        return self.has("if-exists")

    @property
    def exclude_internal(self) -> bool:
        return self.has("exclude-internal")


def parse_options(argv: Sequence[str]) -> TopicOptions:
    """jopt-simple's parse of ``argv``; raises ``OptionError`` with jopt's message."""
    parsed = parse(argv, _SPECS)
    return TopicOptions(parsed.values, parsed.arg_count)


def usage() -> str:
    """The option table jopt-simple prints (its layout, approximately: kemu's wrapping)."""
    rows = []
    for spec in sorted(_SPECS, key=lambda s: s.name):
        left = f"--{spec.name}" + (f" <{spec.argument}>" if spec.argument else "")
        rows.append((left, spec.description))
    width = max(len(left) for left, _ in rows) + 1
    width = min(width, 41)
    lines = [f"{'Option':<{width}}Description", f"{'------':<{width}}-----------"]
    for left, description in rows:
        wrapped: list[str] = []
        for paragraph in description.split("\n"):
            wrapped.extend(textwrap.wrap(paragraph, 40) or [""])
        first, *rest = wrapped
        if len(left) >= width:
            lines.append(left)
            lines.append(" " * width + first)
        else:
            lines.append(f"{left:<{width}}{first}")
        lines.extend(" " * (width + 2) + line for line in rest)
    return "\n".join(lines)


# ============================================================================ checkArgs


def _die(message: str) -> NoReturn:
    raise UsageError(message)


def _require(opts: TopicOptions, *names: str) -> None:
    """``CommandLineUtils.checkRequiredArgs``."""
    for name in names:
        if not opts.has(name):
            _die(f'Missing required argument "{_BY_NAME[name]}"')


def _hash_set(names: Sequence[str]) -> list[str]:
    """A Scala ``HashSet`` of option specs, in its iteration order."""
    by_hash = {_BY_NAME[n].hash: n for n in names}
    return [by_hash[h] for h in scala_hash_set_order(list(by_hash))]


def _invalid(opts: TopicOptions, used: str, invalid: Sequence[str]) -> None:
    """``CommandLineUtils.checkInvalidArgs`` over options already in iteration order."""
    if opts.has(used):
        for name in invalid:
            if opts.has(name):
                _die(f'Option "{_BY_NAME[used]}" can\'t be used with option "{_BY_NAME[name]}"')


def _topic_level_without(*removed: str, plus: Sequence[str] = ()) -> list[str]:
    """``allTopicLevelOpts -- Set(removed) ++ plus``: a HashSet."""
    kept = [n for n in _TOPIC_LEVEL if n not in removed]
    return _hash_set(kept + [n for n in plus if n not in kept])


def _report_clashes(report: str, *, zookeeper_too: bool) -> list[str]:
    """``allTopicLevelOpts -- Set(describeOpt) ++ allReplicationReportOpts - report +
    topicsWithOverridesOpt (+ zkConnectOpt)``."""
    names = [n for n in _TOPIC_LEVEL if n != "describe"]
    names += [r for r in _REPORTS if r != report]
    names.append("topics-with-overrides")
    if zookeeper_too:
        names.append("zookeeper")
    return _hash_set(names)


def check_args(opts: TopicOptions) -> None:
    """``TopicCommandOptions.checkArgs``, in its order. Raises ``UsageError`` (message and
    usage) or ``IllegalArgumentError`` (message only). ``--version`` is the caller's
    (it comes right after ``--help``).

    kemu's one difference: with neither ``--bootstrap-server`` nor ``--zookeeper`` the
    cluster file gives the bootstrap servers, so the checks below see that case as
    ``--bootstrap-server``; ``--cluster-file`` cannot be combined with either."""
    if opts.arg_count == 0:
        _die("Create, delete, describe, or change a topic.")
    if opts.has("help"):
        _die("This tool helps to create, delete, describe, or change a topic.")
    if sum(1 for action in ACTIONS if opts.has(action)) != 1:
        _die(
            "Command must include exactly one action: --list, --describe, --create, --alter"
            " or --delete"
        )
    if opts.has("bootstrap-server") and opts.has("zookeeper"):
        raise IllegalArgumentError(
            "Only one of --bootstrap-server or --zookeeper must be specified"
        )
    _invalid(opts, "cluster-file", ["bootstrap-server", "zookeeper"])
    if not opts.has("zookeeper") and not opts.has("bootstrap-server"):
        opts = TopicOptions({**opts.values, "bootstrap-server": ("",)}, opts.arg_count)
    has = opts.has
    if has("describe") and has("if-exists"):
        _require(opts, "topic")
    if not has("list") and not has("describe"):
        _require(opts, "topic")
    if has("create") and not has("replica-assignment") and has("zookeeper"):
        _require(opts, "partitions", "replication-factor")
    if has("bootstrap-server") and has("alter"):
        if has("config"):  # checkInvalidArgsSet(Set(bootstrap, config), Set(alter), hint)
            _die(
                'Option combination "[bootstrap-server],[config]" can\'t be used with option'
                f' "[alter]"{_KAFKA_CONFIGS_HINT}'
            )
        _require(opts, "partitions")
    _invalid(opts, "config", _topic_level_without("alter", "create"))
    _invalid(opts, "delete-config", _topic_level_without("alter", plus=["bootstrap-server"]))
    _invalid(opts, "partitions", _topic_level_without("alter", "create"))
    _invalid(opts, "replication-factor", _topic_level_without("create"))
    _invalid(opts, "replica-assignment", _topic_level_without("create", "alter"))
    if has("create"):
        _invalid(opts, "replica-assignment", ["partitions", "replication-factor"])
    for report, zookeeper_too in (
        ("under-replicated-partitions", False),
        ("under-min-isr-partitions", True),  # not supported with --zookeeper
        ("at-min-isr-partitions", True),
        ("unavailable-partitions", False),
    ):
        _invalid(opts, report, _report_clashes(report, zookeeper_too=zookeeper_too))
    topics_with_overrides = [n for n in _TOPIC_LEVEL if n != "describe"] + list(_REPORTS)
    _invalid(opts, "topics-with-overrides", _hash_set(topics_with_overrides))
    _invalid(opts, "if-exists", _topic_level_without("alter", "delete", "describe"))
    _invalid(opts, "if-not-exists", _topic_level_without("create"))
    _invalid(opts, "exclude-internal", _topic_level_without("list", "describe"))


# ====================================================================== shared helpers


def _java_split(text: str, separator: str) -> list[str]:
    """``String.split`` with a one-character literal: trailing empty strings removed."""
    parts = text.split(separator)
    if len(parts) == 1:
        return parts
    while parts and parts[-1] == "":
        parts.pop()
    return parts


_CONFIG_SEPARATOR = re.compile(r"[ \t\n\x0b\f\r]*=[ \t\n\x0b\f\r]*")


def _java_regex_split(pattern: re.Pattern[str], text: str) -> list[str]:
    parts = pattern.split(text)
    if len(parts) == 1:
        return parts
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _properties_order(props: Mapping[str, str]) -> dict[str, str]:
    """``props`` as a ``java.util.Properties`` filled in ``props``' order iterates (JDK 11:
    a ``ConcurrentHashMap``). ``zkdata.EntityConfig`` knows that order: it writes it."""
    keys = zkdata.EntityConfig.decode(zkdata.EntityConfig(config=dict(props)).encode()).config
    return {key: props[key] for key in keys}


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """``TopicCommand.parseReplicaAssignment``: ``b1:b2,b3:b4`` -> partition i's replicas
    (a ``LinkedHashMap``). Raises ``TopicCommandError`` with Kafka's messages."""
    assignment: dict[int, list[int]] = {}
    for i, group in enumerate(_java_split(text, ",")):
        brokers: list[int] = []
        for item in _java_split(group, ":"):
            number = java_parse_int(java_trim(item))
            if number is None:
                raise TopicCommandError(f'For input string: "{java_trim(item)}"')
            brokers.append(number)
        distinct = list(dict.fromkeys(brokers))
        duplicates = [b for b in scala_immutable_order(distinct) if brokers.count(b) > 1]
        if duplicates:
            raise TopicCommandError(
                "Partition replica lists may not contain duplicate entries:"
                f" {','.join(map(str, duplicates))}"
            )
        assignment[i] = brokers
        if len(assignment[i]) != len(assignment[0]):
            # Kafka concatenates the Array[Int] itself: the JVM prints its type and identity
            # hash. kemu prints a stable stand-in of the same shape.
            identity = zlib.crc32(group.encode()) & 0x7FFFFFFF
            raise TopicCommandError(
                f"Partition {i} has different replication factor: [I@{identity:x}"
            )
    return assignment


def parse_topic_configs_to_add(values: Sequence[str], out: TextIO) -> dict[str, str]:
    """``TopicCommand.parseTopicConfigsToBeAdded``: ``key=val`` pairs, validated as
    ``LogConfig.validate`` does; warns about ``message.format.version``."""
    pairs = [_java_regex_split(_CONFIG_SEPARATOR, value) for value in values]
    if not all(len(pair) == 2 for pair in pairs):
        raise TopicCommandError(
            "requirement failed: Invalid topic config: all configs to be added must be in the"
            ' format "key=val".'
        )
    props: dict[str, str] = {}
    for key, value in pairs:
        props[java_trim(key)] = java_trim(value)
    _validate_configs(props)
    if "message.format.version" in props:
        out.write(
            "WARNING: The configuration message.format.version="
            f"{props['message.format.version']} is specified. This configuration will be"
            " ignored if the version is newer than the inter.broker.protocol.version"
            " specified in the broker.\n"
        )
    return props


def _validate_configs(props: Mapping[str, str]) -> None:
    """``LogConfig.validate``: names in the Properties' order, then values."""
    try:
        validate_topic_config(_properties_order(props))
    except KafkaApiError as exc:
        raise TopicCommandError(str(exc)) from None


def parse_topic_configs_to_delete(values: Sequence[str]) -> list[str]:
    """``TopicCommand.parseTopicConfigsToBeDeleted``: names, checked to be topic configs."""
    names = [java_trim(value) for value in values]
    for name in _properties_order(dict.fromkeys(names, "")):
        if name not in TOPIC_CONFIGS:
            raise TopicCommandError(f"Unknown topic config name: {name}")
    return names


@dataclass
class CommandTopic:
    """``CommandTopicPartition``: what a create or an alter asks for."""

    name: str
    partitions: int | None
    replication_factor: int | None
    replica_assignment: dict[int, list[int]] | None
    configs_to_add: dict[str, str]
    configs_to_delete: list[str]
    rack_mode: RackMode
    if_not_exists: bool

    @classmethod
    def from_options(cls, opts: TopicOptions, out: TextIO) -> CommandTopic:
        """Built in Kafka's order, so a bad value is reported as Kafka reports it."""
        name = opts.topic
        if name is None:  # checkArgs requires it for create and alter
            raise TopicCommandError("None.get")
        partitions = opts.int_value("partitions")
        replication_factor = opts.int_value("replication-factor")
        raw_assignment = opts.value("replica-assignment")
        assignment = parse_replica_assignment(raw_assignment) if raw_assignment else None
        configs = parse_topic_configs_to_add(opts.values_of("config"), out)
        deleted = parse_topic_configs_to_delete(opts.values_of("delete-config"))
        return cls(
            name=name,
            partitions=partitions,
            replication_factor=replication_factor,
            replica_assignment=assignment,
            configs_to_add=configs,
            configs_to_delete=deleted,
            rack_mode=RackMode.DISABLED if opts.has("disable-rack-aware") else RackMode.ENFORCED,
            if_not_exists=opts.has("if-not-exists"),
        )


def _topic_filter(raw: str) -> re.Pattern[str]:
    """``TopicFilter``/``IncludeList``: trim, ',' -> '|', no spaces, no surrounding
    quotes; matched against whole names."""
    regex = java_trim(raw).replace(",", "|").replace(" ", "")
    regex = re.sub(r"""^["']+""", "", regex)
    regex = re.sub(r"""["']+$""", "", regex)
    try:
        return re.compile(regex)
    except re.error as exc:
        raise TopicCommandError(f"{regex} is an invalid regex.") from exc


def select_topics(
    all_topics: Sequence[str], include: str | None, *, exclude_internal: bool
) -> list[str]:
    """``doGetTopics``: ``all_topics`` sorted, filtered by the ``--topic`` regex."""
    ordered = sorted(all_topics)
    if include is None:
        return [t for t in ordered if not (exclude_internal and is_internal(t))]
    pattern = _topic_filter(include)
    return [
        t for t in ordered if pattern.fullmatch(t) and not (exclude_internal and is_internal(t))
    ]


def _ensure_topic_exists(found: Sequence[str], requested: str | None, required: bool) -> None:
    if requested is not None and required and not found:
        raise TopicCommandError(f"Topic '{requested}' does not exist as expected")


_COLLISION_WARNING: Final = (
    "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore"
    " ('_') could collide. To avoid issues it is best to use either, but not both.\n"
)
_ALTER_CONFIG_WARNING: Final = (
    "WARNING: Altering topic configuration from this script has been deprecated and may be"
    " removed in future releases.\n"
    "         Going forward, please use kafka-configs.sh for this functionality\n"
)
_PARTITIONS_WARNING: Final = (
    "WARNING: If partitions are increased for a topic that has a key, the partition logic or"
    " ordering of the messages will be affected\n"
)


@dataclass(frozen=True)
class _Reassignment:
    """``PartitionReassignment`` as ``listPartitionReassignments`` returns it."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


def _replication_factor(replicas: Sequence[int], reassignment: _Reassignment | None) -> int:
    """``TopicCommand.getReplicationFactor``: while a reassignment is in progress (some
    replica of the partition is still being added or removed) the factor is its target
    replicas less those being added; a reassignment that finished between the two reads
    is ignored."""
    if reassignment is not None and set(replicas) & (
        set(reassignment.adding) | set(reassignment.removing)
    ):
        return len([r for r in reassignment.replicas if r not in reassignment.adding])
    return len(replicas)


@dataclass(frozen=True)
class _PartitionView:
    """``PartitionDescription``: one partition as describe sees it."""

    topic: str
    partition: int
    leader: int | None
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    min_isr: int | None
    marked_for_deletion: bool
    reassignment: _Reassignment | None = None

    def line(self) -> str:
        leader = "none" if self.leader is None else str(self.leader)
        moving = (
            ""
            if self.reassignment is None
            else f"\tAdding Replicas: {','.join(map(str, self.reassignment.adding))}"
            f"\tRemoving Replicas: {','.join(map(str, self.reassignment.removing))}"
        )
        return (
            f"\tTopic: {self.topic}\tPartition: {self.partition}\tLeader: {leader}"
            f"\tReplicas: {','.join(map(str, self.replicas))}"
            f"\tIsr: {','.join(map(str, self.isr))}"
            + moving
            + ("\tMarkedForDeletion: true" if self.marked_for_deletion else "")
        )

    def under_replicated(self) -> bool:
        return _replication_factor(self.replicas, self.reassignment) - len(self.isr) > 0

    def under_min_isr(self) -> bool:
        return self.leader is None or (self.min_isr is not None and len(self.isr) < self.min_isr)

    def at_min_isr(self) -> bool:
        return self.min_isr is not None and len(self.isr) == self.min_isr

    def unavailable(self, live: set[int]) -> bool:
        return self.leader is None or self.leader not in live


@dataclass(frozen=True)
class _DescribeOptions:
    opts: TopicOptions
    live: set[int]

    @property
    def configs(self) -> bool:
        return not any(self.opts.has(r) for r in _REPORTS)

    @property
    def partitions(self) -> bool:
        return not self.opts.has("topics-with-overrides")

    def wants(self, p: _PartitionView) -> bool:
        has = self.opts.has
        return (
            self.configs
            or (has("under-replicated-partitions") and p.under_replicated())
            or (has("unavailable-partitions") and p.unavailable(self.live))
            or (has("under-min-isr-partitions") and p.under_min_isr())
            or (has("at-min-isr-partitions") and p.at_min_isr())
        )


def _topic_line(
    topic: str, partitions: int, rf: int, configs: Sequence[tuple[str, str | None]], marked: bool
) -> str:
    """``TopicDescription.printDescription`` (2.7: no topic id)."""
    rendered = ",".join(f"{k}={'null' if v is None else v}" for k, v in configs)
    return (
        f"Topic: {topic}\tPartitionCount: {partitions}\tReplicationFactor: {rf}"
        f"\tConfigs: {rendered}" + ("\tMarkedForDeletion: true" if marked else "")
    )


def _in_config_order(entries: Sequence[tuple[str, str | None]]) -> list[tuple[str, str | None]]:
    """The entries of an admin-client ``Config`` (a ``HashMap`` by name) as it iterates."""
    by_name = dict(entries)
    return [(name, by_name[name]) for name in java_hash_map_order(list(by_name))]


# ====================================================================== the ZooKeeper path


class ZkTopicService:
    """``ZookeeperTopicService``: reads and writes the metadata store as ``AdminZkClient``
    and ``KafkaZkClient`` do."""

    def __init__(self, session: StoreSession, out: TextIO, rng: random.Random) -> None:
        self._session = session
        self._out = out
        self._rng = rng

    def _print(self, line: str) -> None:
        self._out.write(line + "\n")

    async def _all_topics(self) -> tuple[TopicName, ...]:
        """``getAllTopicsInCluster``: no ``/brokers/topics`` yet means no topics."""
        try:
            return await kafka_zk.get_all_topics(self._session)
        except NoNodeError:
            return ()

    async def get_topics(self, include: str | None, *, exclude_internal: bool) -> list[str]:
        topics = await self._all_topics()
        return select_topics(topics, include, exclude_internal=exclude_internal)

    async def _marked_for_deletion(self, topic: str) -> bool:
        return await self._session.exists(zkdata.delete_topic_path(TopicName(topic))) is not None

    async def _registered(self) -> dict[BrokerId, kafka_zk.RegisteredBroker]:
        """``getAllBrokersInCluster``: no ``/brokers/ids`` yet means no brokers."""
        try:
            return await kafka_zk.get_brokers(self._session)
        except NoNodeError:
            return {}

    async def _brokers(self) -> list[BrokerMetadata]:
        registered = await self._registered()
        return [BrokerMetadata(b, r.registration.rack) for b, r in registered.items()]

    async def create(self, topic: CommandTopic) -> None:
        try:
            if topic.replica_assignment is not None:
                assignment = {
                    p: tuple(BrokerId(b) for b in replicas)
                    for p, replicas in topic.replica_assignment.items()
                }
            else:
                assert topic.partitions is not None  # checkArgs requires both
                assert topic.replication_factor is not None
                brokers = broker_metadatas(await self._brokers(), topic.rack_mode)
                assignment = assign_replicas(
                    brokers, topic.partitions, topic.replication_factor, rng=self._rng
                )
            existing = await self._all_topics()
            config = validate_topic_create(topic.name, assignment, existing, topic.configs_to_add)
            try:
                await kafka_zk.write_topic(self._session, TopicName(topic.name), assignment, config)
            except NodeExistsError:
                raise KafkaApiError(
                    ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' already exists."
                ) from None
            self._print(f"Created topic {topic.name}.")
        except KafkaApiError as exc:
            if not (exc.code is ErrorCode.TOPIC_ALREADY_EXISTS and topic.if_not_exists):
                raise

    async def list(self, opts: TopicOptions) -> None:
        for topic in await self.get_topics(opts.topic, exclude_internal=opts.exclude_internal):
            if await self._marked_for_deletion(topic):
                self._print(f"{topic} - marked for deletion")
            else:
                self._print(topic)

    async def alter(self, opts: TopicOptions) -> None:
        topics = await self.get_topics(opts.topic, exclude_internal=opts.exclude_internal)
        tp = CommandTopic.from_options(opts, self._out)
        _ensure_topic_exists(topics, opts.topic, not opts.if_exists)
        for name in topics:
            topic = TopicName(name)
            configs = await kafka_zk.get_topic_config(self._session, topic)
            if opts.has("config") or opts.has("delete-config"):
                self._out.write(_ALTER_CONFIG_WARNING)
                merged = dict(configs)
                merged.update(_properties_order(tp.configs_to_add))
                for key in tp.configs_to_delete:
                    merged.pop(key, None)
                await self._change_topic_config(topic, merged)
                self._print(f"Updated config for topic {topic}.")
            if tp.partitions is not None:
                await self._add_partitions(topic, tp)

    async def _change_topic_config(self, topic: TopicName, config: dict[str, str]) -> None:
        """``AdminZkClient.changeTopicConfig``: validate, write, notify the brokers."""
        validate_topic_name(topic)
        if await self._session.exists(zkdata.topic_path(topic)) is None:
            raise AdminOperationError(f'Topic "{topic}" does not exist.')
        _validate_configs(config)
        await kafka_zk.change_topic_config(self._session, topic, config)

    async def _add_partitions(self, topic: TopicName, tp: CommandTopic) -> None:
        assert tp.partitions is not None
        if is_internal(topic):
            raise TopicCommandError(
                f"The number of partitions for the internal topic {topic} cannot be changed."
            )
        self._out.write(_PARTITIONS_WARNING)
        existing = await kafka_zk.get_topic_assignment(self._session, topic)
        if not existing:
            raise KafkaApiError(
                ErrorCode.INVALID_TOPIC_EXCEPTION, f"The topic {topic} does not exist"
            )
        manual = {
            p: replicas
            for index, (p, replicas) in enumerate((tp.replica_assignment or {}).items())
            if index >= len(existing)
        }
        brokers = broker_metadatas(await self._brokers(), RackMode.ENFORCED)
        added = new_partitions_assignment(
            topic,
            {p: a.replicas for p, a in existing.items()},
            brokers,
            tp.partitions,
            manual or None,
        )
        full = dict(existing)
        full.update({p: zkdata.ReplicaAssignment(replicas=r) for p, r in added.items()})
        payload = zkdata.TopicAssignment(partitions=dict(sorted(full.items()))).encode()
        try:
            await self._session.set(zkdata.topic_path(topic), payload)
        except NoNodeError as exc:
            raise AdminOperationError(str(exc)) from None
        self._print("Adding partitions succeeded!")

    async def describe(self, opts: TopicOptions) -> None:
        topics = await self.get_topics(opts.topic, exclude_internal=opts.exclude_internal)
        _ensure_topic_exists(topics, opts.topic, not opts.if_exists)
        live = set(map(int, await self._registered()))
        describe = _DescribeOptions(opts, live)
        for name in topics:
            topic = TopicName(name)
            assignment = await kafka_zk.get_topic_assignment(self._session, topic)
            if not assignment:
                self._print(f"Topic {topic} doesn't exist!")
                continue
            marked = await self._marked_for_deletion(topic)
            if describe.configs:
                configs = await kafka_zk.get_topic_config(self._session, topic)
                if not opts.has("topics-with-overrides") or configs:
                    first = assignment[min(assignment)]
                    entries = _in_config_order(list(_properties_order(configs).items()))
                    self._print(
                        _topic_line(topic, len(assignment), len(first.replicas), entries, marked)
                    )
            if describe.partitions:
                for p, replicas in sorted(assignment.items()):
                    state = await kafka_zk.get_partition_state(
                        self._session, TopicPartition(topic, p)
                    )
                    leader: int | None = None
                    isr: tuple[int, ...] = ()
                    if state is not None:
                        isr = tuple(state.state.isr)
                        if state.state.leader != -1:
                            leader = int(state.state.leader)
                    view = _PartitionView(
                        topic, p, leader, tuple(replicas.replicas), isr, None, marked
                    )
                    if describe.wants(view):
                        self._print(view.line())

    async def delete(self, opts: TopicOptions) -> None:
        topics = await self.get_topics(opts.topic, exclude_internal=opts.exclude_internal)
        _ensure_topic_exists(topics, opts.topic, not opts.if_exists)
        for topic in topics:
            if is_internal(topic):
                raise AdminOperationError(
                    f"Topic {topic} is a kafka internal topic and is not allowed to be marked"
                    " for deletion."
                )
            try:
                await self._session.create(
                    zkdata.delete_topic_path(TopicName(topic)), make_parents=True
                )
            except NodeExistsError:
                self._print(f"Topic {topic} is already marked for deletion.")
                continue
            except StoreError:
                raise AdminOperationError(f"Error while deleting topic {topic}") from None
            self._print(f"Topic {topic} is marked for deletion.")
            self._print("Note: This will have no impact if delete.topic.enable is not set to true.")


# ====================================================================== the wire path


class AdminTopicService:
    """``AdminClientTopicService``: the same commands over the Kafka wire."""

    def __init__(self, client: KafkaAdminClient, out: TextIO) -> None:
        self._client = client
        self._out = out

    def _print(self, line: str) -> None:
        self._out.write(line + "\n")

    async def get_topics(self, include: str | None, *, exclude_internal: bool) -> list[str]:
        names = await self._client.list_topics(include_internal=not exclude_internal)
        return select_topics(names, include, exclude_internal=exclude_internal)

    async def create(self, topic: CommandTopic) -> None:
        rf = topic.replication_factor
        if rf is not None and not 1 <= rf <= SHORT_MAX:
            raise TopicCommandError(
                f"The replication factor must be between 1 and {SHORT_MAX} inclusive"
            )
        if topic.partitions is not None and topic.partitions < 1:
            raise TopicCommandError("The partitions must be greater than 0")
        assignments: tuple[PartitionAssignment, ...] = ()
        partitions, replication_factor = topic.partitions, rf
        if topic.replica_assignment is not None:  # NewTopic(name, replicasAssignments)
            partitions = replication_factor = None
            assignments = tuple(
                PartitionAssignment(partition=p, broker_ids=tuple(BrokerId(b) for b in replicas))
                for p, replicas in topic.replica_assignment.items()
            )
        new_topic = CreatableTopic(
            name=TopicName(topic.name),
            num_partitions=-1 if partitions is None else partitions,
            replication_factor=-1 if replication_factor is None else replication_factor,
            assignments=assignments,
            configs=tuple(TopicConfig(name=k, value=v) for k, v in topic.configs_to_add.items()),
        )
        (result,) = await self._client.create_topics([new_topic])
        if result.error_code is not ErrorCode.NONE:
            if result.error_code is ErrorCode.TOPIC_ALREADY_EXISTS and topic.if_not_exists:
                return
            raise api_error(result.error_code, result.error_message)
        self._print(f"Created topic {topic.name}.")

    async def list(self, opts: TopicOptions) -> None:
        topics = await self.get_topics(opts.topic, exclude_internal=opts.exclude_internal)
        self._print("\n".join(topics))

    async def alter(self, opts: TopicOptions) -> None:
        tp = CommandTopic.from_options(opts, self._out)
        topics = await self.get_topics(opts.topic, exclude_internal=opts.exclude_internal)
        _ensure_topic_exists(topics, opts.topic, not opts.if_exists)
        if not topics:
            return
        assert tp.partitions is not None  # checkArgs requires it
        current: dict[TopicName, int] = {}
        if tp.replica_assignment is not None:
            described = await self._client.describe_topics(topics)
            current = {name: len(t.partitions) for name, t in described.items()}
        requests = []
        for name in topics:
            assignments = None
            if tp.replica_assignment is not None:
                start = current[TopicName(name)]
                assignments = tuple(
                    tuple(BrokerId(b) for b in replicas)
                    for index, replicas in enumerate(tp.replica_assignment.values())
                    if index >= start
                )
            requests.append(
                CreatePartitionsTopic(
                    name=TopicName(name), count=tp.partitions, assignments=assignments
                )
            )
        results = await self._client.create_partitions(requests)
        for result in results:
            if result.error_code is not ErrorCode.NONE:
                raise api_error(result.error_code, result.error_message)

    async def describe(self, opts: TopicOptions) -> None:
        topics = await self.get_topics(opts.topic, exclude_internal=opts.exclude_internal)
        _ensure_topic_exists(topics, opts.topic, not opts.if_exists)
        if not topics:
            return
        configs = await self._client.describe_configs(
            [
                ConfigResource(resource_type=ConfigResourceType.TOPIC, resource_name=t)
                for t in topics
            ]
        )
        cluster = await self._client.describe_cluster()
        live = {int(b.broker_id) for b in cluster.brokers}
        described = await self._client.describe_topics(topics)
        describe = _DescribeOptions(opts, live)
        moving = await self._reassignments(
            [(t, p.partition) for t, td in described.items() for p in td.partitions]
        )
        # DescribeTopicsResult.all() collects the topics into a HashMap sized for them.
        order = java_hash_map_order(list(described), initial_capacity=len(described))
        for name in order:
            td = described[TopicName(name)]
            result = configs.get((int(ConfigResourceType.TOPIC), name))
            if result is None:
                raise api_error(ErrorCode.UNKNOWN_SERVER_ERROR, None)
            if result.error_code is not ErrorCode.NONE:
                raise api_error(result.error_code, result.error_message)
            entries = _in_config_order([(c.name, c.value) for c in result.configs])
            by_name = {c.name: c for c in result.configs}
            overrides = [
                (k, v) for k, v in entries if by_name[k].source is not ConfigSource.DEFAULT_CONFIG
            ]
            partitions = sorted(td.partitions, key=lambda p: p.partition)
            if describe.configs and (not opts.has("topics-with-overrides") or overrides):
                rf = (
                    _replication_factor(
                        tuple(map(int, partitions[0].replicas)),
                        moving.get((name, partitions[0].partition)),
                    )
                    if partitions
                    else 0
                )
                self._print(_topic_line(name, len(partitions), rf, overrides, False))
            if describe.partitions:
                min_isr_entry = by_name.get("min.insync.replicas")
                min_isr = (
                    None
                    if min_isr_entry is None or min_isr_entry.value is None
                    else int(min_isr_entry.value)
                )
                for p in partitions:
                    leader = None if p.leader == -1 or p.leader not in live else int(p.leader)
                    view = _PartitionView(
                        name,
                        p.partition,
                        leader,
                        tuple(map(int, p.replicas)),
                        tuple(map(int, p.isr)),
                        min_isr,
                        False,
                        moving.get((name, p.partition)),
                    )
                    if describe.wants(view):
                        self._print(view.line())

    async def _reassignments(
        self, partitions: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], _Reassignment]:
        """``TopicCommand.listAllReassignments``: the reassignments in flight among
        ``partitions``; a broker that does not serve the API (or refuses it as
        unauthorized) means none."""
        if not partitions:
            return {}
        listed = await self._client.list_partition_reassignments(partitions)
        if listed.error_code in (
            ErrorCode.UNSUPPORTED_VERSION,
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        ):
            return {}
        if listed.error_code is not ErrorCode.NONE:
            raise api_error(listed.error_code, listed.error_message)
        return {
            (t.name, p.partition_index): _Reassignment(
                tuple(map(int, p.replicas)),
                tuple(map(int, p.adding_replicas)),
                tuple(map(int, p.removing_replicas)),
            )
            for t in listed.topics
            for p in t.partitions
        }

    async def delete(self, opts: TopicOptions) -> None:
        topics = await self.get_topics(opts.topic, exclude_internal=opts.exclude_internal)
        _ensure_topic_exists(topics, opts.topic, not opts.if_exists)
        if not topics:
            return
        for result in await self._client.delete_topics(topics):
            if result.error_code is not ErrorCode.NONE:
                raise api_error(result.error_code, result.error_message)


# ============================================================================ running


_Service = ZkTopicService | AdminTopicService


async def _run_action(service: _Service, opts: TopicOptions, out: TextIO) -> None:
    if opts.has("create"):
        topic = CommandTopic.from_options(opts, out)
        if has_collision_chars(topic.name):
            out.write(_COLLISION_WARNING)
        await service.create(topic)
    elif opts.has("alter"):
        await service.alter(opts)
    elif opts.has("list"):
        await service.list(opts)
    elif opts.has("describe"):
        await service.describe(opts)
    elif opts.has("delete"):
        await service.delete(opts)


async def _guarded(action: Callable[[], Awaitable[None]], out: TextIO) -> int:
    """``TopicCommand.main``'s try, which catches every ``Throwable``: any error is one
    line on stdout, exit 1 (the traceback only in the debug log)."""
    try:
        await action()
    except Exception as exc:  # the CLI's boundary, as Kafka's `case e: Throwable`
        log.debug("topic_command_failed", exc_info=True)
        out.write(f"{ERROR_PREFIX}{exc}\n")
        return 1
    return 0


async def run_topic_command(
    argv: Sequence[str],
    *,
    out: TextIO,
    err: TextIO,
    store: MetadataStore | None = None,
    rng: random.Random | None = None,
) -> int:
    """Run ``kemu topics`` with ``argv``; returns the exit status. ``store``, if given, is
    used for ``--zookeeper`` instead of opening its address (tests, in-process clusters)."""
    try:
        opts = parse_options(argv)
        if opts.arg_count and not opts.has("help") and opts.has("version"):
            out.write(f"{KAFKA_VERSION} (Commit:kemu)\n")  # printHelpAndExitIfNeeded's order
            return 0
        check_args(opts)
    except OptionError as exc:
        err.write(f"{exc}\n")
        return 1
    except UsageError as exc:
        err.write(f"{exc}\n{usage()}\n")
        return 1
    except IllegalArgumentError as exc:
        err.write(f"{exc}\n")
        return 1
    try:
        zookeeper = opts.value("zookeeper")
        bootstrap = opts.value("bootstrap-server")
        command_config = opts.value("command-config")
        cluster_file = opts.value("cluster-file")
    except OptionError as exc:
        err.write(f"{exc}\n")
        return 1
    rng = rng or random.Random()
    try:
        if zookeeper is not None:
            return await _with_store(zookeeper, store, opts, out, rng, cluster_file)
        if bootstrap is None:
            bootstrap = load_cluster_file(
                Path(cluster_file) if cluster_file else None
            ).bootstrap_servers
        props = load_properties(Path(command_config)) if command_config else {}
        config = AdminClientConfig.from_properties(props)
        async with KafkaAdminClient(bootstrap, config) as client:
            service = AdminTopicService(client, out)
            return await _guarded(lambda: _run_action(service, opts, out), out)
    except (KemuError, BaseExceptionGroup) as exc:
        return report_failure(exc, out, err)  # reaching the cluster failed: outside Kafka's try


async def _with_store(
    address: str,
    store: MetadataStore | None,
    opts: TopicOptions,
    out: TextIO,
    rng: random.Random,
    cluster_file: str | None,
) -> int:
    async def run(session: StoreSession) -> int:
        service = ZkTopicService(session, out, rng)
        return await _guarded(lambda: _run_action(service, opts, out), out)

    return await with_session(address, store, "kemu-topics", run, cluster_file=cluster_file)


def main(argv: Sequence[str], *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``kemu topics ARGS``: run it and return the exit status."""
    return anyio.run(lambda: run_topic_command(argv, out=out or sys.stdout, err=err or sys.stderr))
