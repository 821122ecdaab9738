"""Topic and broker configs: Kafka 2.7's ``LogConfig`` and the broker configs kemu reads.

* ``TOPIC_CONFIGS``: every topic config of Kafka 2.7, in ``LogConfig``'s definition order,
  with its type, Kafka's own default, its validator and the broker config that supplies
  its default. ``validate_topic_config`` is ``LogConfig.validate`` with Kafka's messages.
* ``BROKER_CONFIGS`` and ``BrokerConfig``: the broker configs kemu accepts (those the
  controller and the admin paths read, plus those that supply topic defaults), typed, with
  ``KafkaConfig``'s defaults.
* ``topic_config_entries``: what DescribeConfigs reports for a topic: each config's
  effective value (topic override, else the broker's value, else Kafka's default) and its
  source, so that ``is_default`` answers ``--topics-with-overrides``.

Values are parsed as Kafka's ``ConfigDef.parseType`` parses them (Java trimming and number
syntax); errors carry ``ConfigException``'s text, "Invalid value <v> for configuration
<name>: <reason>".
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import Any, Final, TypeAlias

from actors.admin.limits import (
    DEFAULT_MAX_REPLICAS_PER_CLUSTER,
    DEFAULT_MAX_REPLICAS_PER_REQUEST,
    MAX_REPLICAS_PER_CLUSTER_CONFIG,
    MAX_REPLICAS_PER_REQUEST_CONFIG,
)
from protocol import jvm
from protocol.errors import ErrorCode, KafkaApiError, KemuError
from protocol.kafka_api import ConfigSource

__all__ = [
    "BROKER_CONFIGS",
    "TOPIC_CONFIGS",
    "TOPIC_CONFIG_SYNONYMS",
    "BrokerConfig",
    "ConfigEntry",
    "ConfigError",
    "ConfigKey",
    "ConfigOp",
    "ConfigSource",
    "ConfigValue",
    "ConfigValueType",
    "apply_topic_config_ops",
    "check_dynamic_broker_configs",
    "check_thread_pool_resize",
    "check_topic_config",
    "dynamic_default_entries",
    "requested_thread_count",
    "topic_config_entries",
    "topic_config_entry",
    "validate_topic_config",
]

ConfigValue: TypeAlias = "bool | int | float | str | tuple[str, ...] | None"
"""A parsed config value: ``bool`` (BOOLEAN), ``int`` (INT, SHORT, LONG), ``float``
(DOUBLE), ``str`` (STRING, CLASS: the class name), ``tuple[str, ...]`` (LIST); None for
"not set" where Kafka's default is null."""

LONG_MAX: Final = (1 << 63) - 1
INT_MAX: Final = (1 << 31) - 1


class ConfigError(KemuError):
    """A config name or value Kafka would refuse; the message is Kafka's text. (Topic
    configs checked for an API request raise ``KafkaApiError(INVALID_CONFIG)`` instead.)"""


class ConfigValueType(StrEnum):
    """``ConfigDef.Type``; the names are the ones Kafka prints ("Not a number of type LONG")."""

    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    INT = "INT"
    SHORT = "SHORT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    LIST = "LIST"
    CLASS = "CLASS"
    PASSWORD = "PASSWORD"  # noqa: S105 - the name of a type, not a secret


# =============================================================================== parsing


def _invalid(name: str, value: object, reason: str | None) -> ConfigError:
    """``new ConfigException(name, value, reason)``."""
    suffix = "" if reason is None else f": {reason}"
    return ConfigError(f"Invalid value {_java_string(value)} for configuration {name}{suffix}")


def _java_string(value: object) -> str:
    """``String.valueOf`` of the Java object Kafka would hold for ``value``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return jvm.java_bool(value)
    if isinstance(value, float):
        return jvm.java_double(value)
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_java_string(v) for v in value) + "]"
    return str(value)


def _java_class_name(value: object) -> str:
    if isinstance(value, bool):
        return "java.lang.Boolean"
    if isinstance(value, int):
        return "java.lang.Integer"
    if isinstance(value, float):
        return "java.lang.Double"
    if isinstance(value, str):
        return "java.lang.String"
    return type(value).__name__


_BITS = {ConfigValueType.SHORT: 16, ConfigValueType.INT: 32, ConfigValueType.LONG: 64}
_WIDTH = {
    ConfigValueType.SHORT: "a 16-bit integer (short)",
    ConfigValueType.INT: "a 32-bit integer",
    ConfigValueType.LONG: "a 64-bit integer (long)",
}
_INTEGER = re.compile(r"[+-]?\d+")  # Character.digit accepts any BMP decimal digit
_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fFdD]?", re.ASCII)
_HEX = re.compile(
    r"([+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?\d+)[fFdD]?", re.ASCII
)
_SPECIAL = {"NaN": float("nan"), "Infinity": float("inf")}
_COMMA_WITH_WHITESPACE = re.compile(r"\s*,\s*", re.ASCII)


def _parse_java_integer(text: str, bits: int) -> int | None:
    """``Integer.parseInt``/``Long.parseLong``/``Short.parseShort``, or None where Java
    throws ``NumberFormatException``."""
    if not _INTEGER.fullmatch(text) or any(ord(c) > 0xFFFF for c in text):
        return None
    value = int(text)
    return value if -(1 << (bits - 1)) <= value < (1 << (bits - 1)) else None


def _parse_java_double(text: str) -> float | None:
    """``Double.parseDouble`` (after trimming), or None where Java throws."""
    unsigned = text[1:] if text[:1] in "+-" else text
    if unsigned in _SPECIAL:
        return -_SPECIAL[unsigned] if text.startswith("-") else _SPECIAL[unsigned]
    if _DECIMAL.fullmatch(text):
        return float(text.rstrip("fFdD"))
    hexadecimal = _HEX.fullmatch(text)
    if hexadecimal:
        return float.fromhex(hexadecimal.group(1))
    return None


def parse_type(name: str, value: object, type_: ConfigValueType) -> ConfigValue:
    """``ConfigDef.parseType``: ``value`` (a string, or an already typed value) as
    ``type_``; raises ``ConfigError`` with Kafka's message."""
    if value is None:
        return None
    trimmed = jvm.java_trim(value) if isinstance(value, str) else None
    if type_ is ConfigValueType.BOOLEAN:
        if trimmed is not None:
            if jvm.java_equals_ignore_case(trimmed, "true"):
                return True
            if jvm.java_equals_ignore_case(trimmed, "false"):
                return False
        elif isinstance(value, bool):
            return value
        raise _invalid(name, value, "Expected value to be either true or false")
    if type_ in (ConfigValueType.STRING, ConfigValueType.PASSWORD):
        if trimmed is None:
            raise _invalid(
                name,
                value,
                f"Expected value to be a string, but it was a {_java_class_name(value)}",
            )
        return trimmed
    if type_ in _BITS:
        if trimmed is not None or (isinstance(value, int) and not isinstance(value, bool)):
            number = _parse_java_integer(
                trimmed if trimmed is not None else str(value), _BITS[type_]
            )
            if number is None:
                raise _invalid(name, value, f"Not a number of type {type_}")
            return number
        raise _invalid(
            name,
            value,
            f"Expected value to be {_WIDTH[type_]}, but it was a {_java_class_name(value)}",
        )
    if type_ is ConfigValueType.DOUBLE:
        if trimmed is not None:
            double = _parse_java_double(trimmed)
            if double is None:
                raise _invalid(name, value, f"Not a number of type {type_}")
            return double
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        raise _invalid(
            name, value, f"Expected value to be a double, but it was a {_java_class_name(value)}"
        )
    if type_ is ConfigValueType.LIST:
        if trimmed is not None:
            return tuple(_COMMA_WITH_WHITESPACE.split(trimmed)) if trimmed else ()
        if isinstance(value, tuple | list) and all(isinstance(v, str) for v in value):
            return tuple(value)
        raise _invalid(name, value, "Expected a comma separated list.")
    # CLASS: kemu loads no classes; a class is its name. Kafka fails to load "".
    if trimmed is None:
        raise _invalid(name, value, "Expected a Class instance or class name.")
    if not trimmed:
        raise _invalid(name, value, f"Class {value} could not be found.")
    return trimmed


def to_text(value: ConfigValue, type_: ConfigValueType | None) -> str | None:
    """``ConfigDef.convertToString``: how DescribeConfigs renders a parsed value."""
    if value is None:
        return None
    if type_ is ConfigValueType.PASSWORD:
        return "[hidden]"
    if isinstance(value, tuple):
        return ",".join(value)
    return _java_string(value)


# ============================================================================ validators


@dataclass(frozen=True, slots=True)
class Range:
    """``ConfigDef.Range``: inclusive bounds, compared as doubles."""

    min: int | None = None
    max: int | None = None

    def ensure_valid(self, name: str, value: ConfigValue) -> None:
        if value is None:
            raise _invalid(name, None, "Value must be non-null")
        assert isinstance(value, int | float)
        if self.min is not None and float(value) < self.min:
            raise _invalid(name, value, f"Value must be at least {self.min}")
        if self.max is not None and float(value) > self.max:
            raise _invalid(name, value, f"Value must be no more than {self.max}")


@dataclass(frozen=True, slots=True)
class ValidString:
    """``ConfigDef.ValidString``: one of the listed strings, case-sensitive."""

    valid: tuple[str, ...]

    def ensure_valid(self, name: str, value: ConfigValue) -> None:
        if value not in self.valid:
            raise _invalid(name, value, f"String must be one of: {', '.join(self.valid)}")


@dataclass(frozen=True, slots=True)
class ValidList:
    """``ConfigDef.ValidList``: every element one of the listed strings."""

    valid: tuple[str, ...]

    def ensure_valid(self, name: str, value: ConfigValue) -> None:
        assert isinstance(value, tuple)
        for element in value:
            ValidString(self.valid).ensure_valid(name, element)


_LEGACY_VERSIONS: Final = ("0.8.0", "0.8.1", "0.8.2", "0.9.0")
_VERSIONS: Final = (
    *_LEGACY_VERSIONS,
    *(f"0.10.0-IV{i}" for i in range(2)),
    *(f"0.10.1-IV{i}" for i in range(3)),
    "0.10.2-IV0",
    *(f"0.11.0-IV{i}" for i in range(3)),
    "1.0-IV0",
    "1.1-IV0",
    *(f"2.0-IV{i}" for i in range(2)),
    *(f"2.1-IV{i}" for i in range(3)),
    *(f"2.2-IV{i}" for i in range(2)),
    *(f"2.3-IV{i}" for i in range(2)),
    *(f"2.4-IV{i}" for i in range(2)),
    "2.5-IV0",
    "2.6-IV0",
    *(f"2.7-IV{i}" for i in range(3)),
)
"""``ApiVersion.allVersions`` of Kafka 2.7, oldest first."""

LATEST_API_VERSION: Final = _VERSIONS[-1]
"""``2.7-IV2``: the default inter-broker protocol and message format version."""


def _short_version(version: str) -> str:
    return version.split("-")[0]


_VERSION_MAP: Final = {v: v for v in _VERSIONS} | {_short_version(v): v for v in _VERSIONS}


def api_version(text: str) -> str:
    """``ApiVersion(text).version``: the full version a version string names ("2.7" and
    "2.7.1" name "2.7-IV2"); ``ValueError`` with Kafka's message if none."""
    segments = text.split(".")
    while segments and not segments[-1]:  # Java's split drops trailing empty strings
        segments.pop()
    key = ".".join(segments[: 3 if text.startswith("0.") else 2])
    if key not in _VERSION_MAP:
        raise ValueError(f"Version `{text}` is not a valid version")
    return _VERSION_MAP[key]


@dataclass(frozen=True, slots=True)
class ApiVersionValidator:
    """``ApiVersionValidator``: a known inter-broker protocol / message format version."""

    def ensure_valid(self, name: str, value: ConfigValue) -> None:
        try:
            api_version(str(value))
        except ValueError as exc:
            raise _invalid(name, value, str(exc)) from None


_THROTTLED_REPLICA: Final = re.compile(r"(?:[0-9]+:[0-9]+)?", re.ASCII)


@dataclass(frozen=True, slots=True)
class ThrottledReplicaListValidator:
    """``ThrottledReplicaListValidator``: ``*`` first, or every element ``partition:broker``."""

    def ensure_valid(self, name: str, value: ConfigValue) -> None:
        assert isinstance(value, tuple)
        elements = [jvm.java_trim(v) for v in value]
        if not (all(_THROTTLED_REPLICA.fullmatch(e) for e in elements) or elements[:1] == ["*"]):
            raise _invalid(
                name,
                value,
                f"{name} must be the literal '*' or a list of replicas in the following format:"
                " [partitionId]:[brokerId],[partitionId]:[brokerId],...",
            )


Validator: TypeAlias = (
    "Range | ValidString | ValidList | ApiVersionValidator | ThrottledReplicaListValidator"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigKey:
    """One config's definition (``ConfigDef.ConfigKey``)."""

    name: str
    type: ConfigValueType
    default: ConfigValue
    """Kafka's default, parsed (None: no default, "null")."""
    validator: Validator | None = None
    server_default: str | None = None
    """For topic configs: the broker config that supplies the default (``LogConfig``'s
    server default property)."""

    def parse(self, value: object) -> ConfigValue:
        """``ConfigDef.parseValue`` for a set value: parse, then validate."""
        parsed = parse_type(self.name, value, self.type)
        if self.validator is not None:
            self.validator.ensure_valid(self.name, parsed)
        return parsed


# ========================================================================= topic configs

_T = ConfigValueType
_COMPRESSION_TYPES: Final = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
"""``BrokerCompressionCodec.brokerCompressionOptions``, in Kafka's order."""
_CLEANUP_POLICIES: Final = ("compact", "delete")
_TIMESTAMP_TYPES: Final = ("CreateTime", "LogAppendTime")
_RECORD_OVERHEAD_V0: Final = 14
_THROTTLED_LEADER: Final = "leader.replication.throttled.replicas"
_THROTTLED_FOLLOWER: Final = "follower.replication.throttled.replicas"


def _table(*keys: ConfigKey) -> dict[str, ConfigKey]:
    return {key.name: key for key in keys}


def _topic(
    name: str,
    type_: ConfigValueType,
    default: ConfigValue,
    server_default: str,
    validator: Validator | None = None,
) -> ConfigKey:
    return ConfigKey(
        name=name, type=type_, default=default, validator=validator, server_default=server_default
    )


TOPIC_CONFIGS: Final[Mapping[str, ConfigKey]] = _table(
    _topic("segment.bytes", _T.INT, 1 << 30, "log.segment.bytes", Range(_RECORD_OVERHEAD_V0)),
    _topic("segment.ms", _T.LONG, 604_800_000, "log.roll.ms", Range(1)),
    _topic("segment.jitter.ms", _T.LONG, 0, "log.roll.jitter.ms", Range(0)),
    _topic("segment.index.bytes", _T.INT, 10 * 1024 * 1024, "log.index.size.max.bytes", Range(0)),
    _topic("flush.messages", _T.LONG, LONG_MAX, "log.flush.interval.messages", Range(0)),
    _topic("flush.ms", _T.LONG, LONG_MAX, "log.flush.interval.ms", Range(0)),
    _topic("retention.bytes", _T.LONG, -1, "log.retention.bytes"),
    _topic("retention.ms", _T.LONG, 604_800_000, "log.retention.ms", Range(-1)),
    _topic("max.message.bytes", _T.INT, 1024 * 1024 + 12, "message.max.bytes", Range(0)),
    _topic("index.interval.bytes", _T.INT, 4096, "log.index.interval.bytes", Range(0)),
    _topic("delete.retention.ms", _T.LONG, 86_400_000, "log.cleaner.delete.retention.ms", Range(0)),
    _topic("min.compaction.lag.ms", _T.LONG, 0, "log.cleaner.min.compaction.lag.ms", Range(0)),
    _topic(
        "max.compaction.lag.ms", _T.LONG, LONG_MAX, "log.cleaner.max.compaction.lag.ms", Range(1)
    ),
    _topic("file.delete.delay.ms", _T.LONG, 60_000, "log.segment.delete.delay.ms", Range(0)),
    _topic(
        "min.cleanable.dirty.ratio", _T.DOUBLE, 0.5, "log.cleaner.min.cleanable.ratio", Range(0, 1)
    ),
    _topic(
        "cleanup.policy", _T.LIST, ("delete",), "log.cleanup.policy", ValidList(_CLEANUP_POLICIES)
    ),
    _topic("unclean.leader.election.enable", _T.BOOLEAN, False, "unclean.leader.election.enable"),
    _topic("min.insync.replicas", _T.INT, 1, "min.insync.replicas", Range(1)),
    _topic(
        "compression.type",
        _T.STRING,
        "producer",
        "compression.type",
        ValidString(_COMPRESSION_TYPES),
    ),
    _topic("preallocate", _T.BOOLEAN, False, "log.preallocate"),
    _topic(
        "message.format.version",
        _T.STRING,
        LATEST_API_VERSION,
        "log.message.format.version",
        ApiVersionValidator(),
    ),
    _topic(
        "message.timestamp.type",
        _T.STRING,
        "CreateTime",
        "log.message.timestamp.type",
        ValidString(_TIMESTAMP_TYPES),
    ),
    _topic(
        "message.timestamp.difference.max.ms",
        _T.LONG,
        LONG_MAX,
        "log.message.timestamp.difference.max.ms",
        Range(0),
    ),
    _topic(_THROTTLED_LEADER, _T.LIST, (), _THROTTLED_LEADER, ThrottledReplicaListValidator()),
    _topic(_THROTTLED_FOLLOWER, _T.LIST, (), _THROTTLED_FOLLOWER, ThrottledReplicaListValidator()),
    _topic("message.downconversion.enable", _T.BOOLEAN, True, "log.message.downconversion.enable"),
)
"""Every topic config of Kafka 2.7, in ``LogConfig``'s definition order (the order in
which ``ConfigDef.parse`` checks them, so the first bad value reported is Kafka's)."""

TOPIC_CONFIG_SYNONYMS: Final[Mapping[str, str]] = {
    name: key.server_default
    for name, key in TOPIC_CONFIGS.items()
    if key.server_default is not None and name not in (_THROTTLED_LEADER, _THROTTLED_FOLLOWER)
}
"""``LogConfig.TopicConfigSynonyms``: topic config -> the broker config whose value is its
default (the throttled-replica lists have none)."""


def validate_topic_config(config: Mapping[str, str | None]) -> dict[str, str]:
    """``LogConfig.validate`` as CreateTopics answers it: names, then values in definition
    order, then the compaction-lag relation. Returns the config to store (the strings as
    given).

    Entries whose value is None are ignored, as Kafka's AlterConfigs drops them (a
    CreateTopics request with one is refused before this: ``null_config_names``).

    Raises ``KafkaApiError(INVALID_CONFIG)``: "Unknown topic config name: x" (the first
    unknown name in ``config``'s order), a ``ConfigException`` text for a bad value, or
    "conflict topic config setting min.compaction.lag.ms (a) > max.compaction.lag.ms (b)".
    """
    try:
        return check_topic_config(config)
    except ConfigError as exc:
        raise KafkaApiError(ErrorCode.INVALID_CONFIG, str(exc)) from None


def check_topic_config(config: Mapping[str, str | None]) -> dict[str, str]:
    """``LogConfig.validate`` with its exceptions apart: an unknown name or the
    compaction-lag conflict raise ``KafkaApiError(INVALID_CONFIG)`` (Kafka's
    ``InvalidConfigurationException``), a bad value ``ConfigError`` (its
    ``ConfigException``, which AlterConfigs answers differently)."""
    given = {name: value for name, value in config.items() if value is not None}
    for name in given:
        if name not in TOPIC_CONFIGS:
            raise KafkaApiError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
    parsed = _parse_topic_config(given)
    min_lag, max_lag = parsed["min.compaction.lag.ms"], parsed["max.compaction.lag.ms"]
    assert isinstance(min_lag, int)
    assert isinstance(max_lag, int)
    if min_lag > max_lag:
        raise KafkaApiError(
            ErrorCode.INVALID_CONFIG,
            f"conflict topic config setting min.compaction.lag.ms ({min_lag}) >"
            f" max.compaction.lag.ms ({max_lag})",
        )
    return given


class ConfigOp(IntEnum):
    """``AlterConfigOp.OpType``."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


def apply_topic_config_ops(
    current: Mapping[str, str],
    ops: Sequence[tuple[str, str | None, ConfigOp]],
    keys: Mapping[str, ConfigKey] | None = None,
) -> dict[str, str]:
    """``AdminManager.prepareIncrementalConfigs`` for a topic: ``current`` overrides with
    each ``(name, value, op)`` applied in order. APPEND and SUBTRACT work on the value's
    comma-separated items (the override, else Kafka's default), only for LIST configs.

    Raises ``KafkaApiError``: INVALID_REQUEST "Config value append is not allowed for
    config key: x" (or subtract) for a config that is not a list; UNKNOWN_SERVER_ERROR for
    APPEND or SUBTRACT of a name that is no topic config (Kafka's lookup throws
    ``NoSuchElementException`` there, before ``LogConfig.validate`` could name it).
    ``keys``: the definitions to look names up in (a broker's: ``BROKER_CONFIGS``);
    the topic configs by default."""
    table = TOPIC_CONFIGS if keys is None else keys
    config = dict(current)
    for name, value, op in ops:
        if op is ConfigOp.SET:
            assert value is not None
            config[name] = value
        elif op is ConfigOp.DELETE:
            config.pop(name, None)
        else:
            assert value is not None
            key = table.get(name)
            if key is None:
                raise KafkaApiError(ErrorCode.UNKNOWN_SERVER_ERROR, f"key not found: {name}")
            verb = "append" if op is ConfigOp.APPEND else "subtract"
            if key.type is not ConfigValueType.LIST:
                raise KafkaApiError(
                    ErrorCode.INVALID_REQUEST,
                    f"Config value {verb} is not allowed for config key: {name}",
                )
            old = config.get(name)
            if old is None:
                old = to_text(key.default, ConfigValueType.LIST) or ""
            items = java_split(old)
            if op is ConfigOp.APPEND:
                items += java_split(value)
            else:
                for removed in java_split(value):  # Scala's List.diff: one each
                    if removed in items:
                        items.remove(removed)
            config[name] = ",".join(items)
    return config


def java_split(text: str) -> list[str]:
    """``String.split(",")``: trailing empty strings dropped, but "" is [""]."""
    if not text:
        return [""]
    items = text.split(",")
    while items and not items[-1]:
        items.pop()
    return items


def _parse_topic_config(given: Mapping[str, str]) -> dict[str, ConfigValue]:
    """``ConfigDef.parse``: every topic config, set or default, in definition order."""
    return {
        name: key.parse(given[name]) if name in given else key.default
        for name, key in TOPIC_CONFIGS.items()
    }


# ======================================================================== broker configs


def _broker(
    name: str, type_: ConfigValueType, default: ConfigValue, validator: Validator | None = None
) -> ConfigKey:
    return ConfigKey(name=name, type=type_, default=default, validator=validator)


BROKER_CONFIGS: Final[Mapping[str, ConfigKey]] = _table(
    # Topics, controller and cluster behaviour.
    _broker("num.partitions", _T.INT, 1, Range(1)),
    _broker("default.replication.factor", _T.INT, 1),
    _broker("delete.topic.enable", _T.BOOLEAN, True),
    _broker("auto.create.topics.enable", _T.BOOLEAN, True),
    _broker("unclean.leader.election.enable", _T.BOOLEAN, False),
    _broker("auto.leader.rebalance.enable", _T.BOOLEAN, True),
    _broker("leader.imbalance.check.interval.seconds", _T.LONG, 300),
    _broker("leader.imbalance.per.broker.percentage", _T.INT, 10),
    _broker("controlled.shutdown.enable", _T.BOOLEAN, True),
    _broker("controlled.shutdown.max.retries", _T.INT, 3),
    _broker("controlled.shutdown.retry.backoff.ms", _T.LONG, 5000),
    _broker("request.timeout.ms", _T.INT, 30_000),
    _broker("controller.socket.timeout.ms", _T.INT, 30_000),
    _broker("zookeeper.session.timeout.ms", _T.INT, 18_000),
    # None: zookeeper.session.timeout.ms (KafkaConfig.zkConnectionTimeoutMs)
    _broker("zookeeper.connection.timeout.ms", _T.INT, None),
    _broker("reserved.broker.max.id", _T.INT, 1000, Range(0)),
    _broker("broker.id.generation.enable", _T.BOOLEAN, True),
    _broker("create.topic.policy.class.name", _T.CLASS, None),
    # Replication (ReplicaManager, ReplicaFetcherThread).
    _broker("replica.lag.time.max.ms", _T.LONG, 30_000),
    _broker("replica.socket.timeout.ms", _T.INT, 30_000),
    _broker("replica.fetch.max.bytes", _T.INT, 1024 * 1024, Range(0)),
    _broker("replica.fetch.wait.max.ms", _T.INT, 500),
    _broker("replica.fetch.backoff.ms", _T.INT, 1000, Range(0)),
    _broker("replica.fetch.min.bytes", _T.INT, 1),
    _broker("replica.fetch.response.max.bytes", _T.INT, 10 * 1024 * 1024, Range(0)),
    # Range(1) is kemu's: Kafka 2.7 accepts 0 and then fails every makeFollowers (a
    # fetcher id modulo 0); kemu refuses it at start-up.
    _broker("num.replica.fetchers", _T.INT, 1, Range(1)),
    # Kafka 3.8's internal config (KAFKA-16552): the least wait, after start-up, before the
    # log manager's first sweep of deleted logs (Kafka 2.7 hard-codes 30 s). For tests.
    _broker("log.initial.task.delay.ms", _T.LONG, 30_000, Range(0)),
    # The group coordinator and its offsets topic (KafkaConfig's group.* and offsets.*).
    _broker("offsets.topic.num.partitions", _T.INT, 50, Range(1)),
    _broker("offsets.topic.replication.factor", _T.SHORT, 3, Range(1)),
    _broker("offsets.topic.segment.bytes", _T.INT, 104_857_600, Range(1)),
    _broker("offsets.commit.timeout.ms", _T.INT, 5000, Range(1)),
    _broker("offset.metadata.max.bytes", _T.INT, 4096),
    _broker("group.min.session.timeout.ms", _T.INT, 6000),
    _broker("group.max.session.timeout.ms", _T.INT, 1_800_000),
    _broker("group.initial.rebalance.delay.ms", _T.INT, 3000),
    _broker("group.max.size", _T.INT, INT_MAX, Range(1)),
    _broker("offsets.retention.minutes", _T.INT, 7 * 24 * 60, Range(1)),
    _broker("offsets.retention.check.interval.ms", _T.LONG, 600_000, Range(1)),
    # kemu's own bounds on what one request and the whole cluster may hold
    # (actors/admin/limits.py, docs/limits.md); Kafka 2.7 has none.
    _broker(MAX_REPLICAS_PER_REQUEST_CONFIG, _T.INT, DEFAULT_MAX_REPLICAS_PER_REQUEST, Range(1)),
    _broker(MAX_REPLICAS_PER_CLUSTER_CONFIG, _T.INT, DEFAULT_MAX_REPLICAS_PER_CLUSTER, Range(1)),
    # The defaults of topic configs (KafkaServer.copyKafkaConfigToLog).
    _broker("log.segment.bytes", _T.INT, 1 << 30, Range(_RECORD_OVERHEAD_V0)),
    _broker("log.roll.ms", _T.LONG, None),
    _broker("log.roll.hours", _T.INT, 24 * 7, Range(1)),
    _broker("log.roll.jitter.ms", _T.LONG, None),
    _broker("log.roll.jitter.hours", _T.INT, 0, Range(0)),
    _broker("log.index.size.max.bytes", _T.INT, 10 * 1024 * 1024, Range(4)),
    _broker("log.flush.interval.messages", _T.LONG, LONG_MAX, Range(1)),
    _broker("log.flush.interval.ms", _T.LONG, None),
    _broker("log.flush.scheduler.interval.ms", _T.LONG, LONG_MAX),
    _broker("log.retention.bytes", _T.LONG, -1),
    _broker("log.retention.ms", _T.LONG, None),
    _broker("log.retention.minutes", _T.INT, None),
    _broker("log.retention.hours", _T.INT, 24 * 7),
    _broker("log.retention.check.interval.ms", _T.LONG, 300_000, Range(1)),
    _broker("message.max.bytes", _T.INT, 1024 * 1024 + 12, Range(0)),
    _broker("log.index.interval.bytes", _T.INT, 4096, Range(0)),
    _broker("log.cleaner.delete.retention.ms", _T.LONG, 86_400_000),
    _broker("log.cleaner.min.compaction.lag.ms", _T.LONG, 0),
    _broker("log.cleaner.max.compaction.lag.ms", _T.LONG, LONG_MAX),
    _broker("log.segment.delete.delay.ms", _T.LONG, 60_000, Range(0)),
    _broker("log.cleaner.min.cleanable.ratio", _T.DOUBLE, 0.5),
    _broker("log.cleaner.enable", _T.BOOLEAN, True),
    _broker("log.cleaner.backoff.ms", _T.LONG, 15_000, Range(0)),
    _broker("log.cleanup.policy", _T.LIST, ("delete",), ValidList(_CLEANUP_POLICIES)),
    _broker("min.insync.replicas", _T.INT, 1, Range(1)),
    _broker("compression.type", _T.STRING, "producer"),
    _broker("log.preallocate", _T.BOOLEAN, False),
    _broker("log.message.format.version", _T.STRING, LATEST_API_VERSION, ApiVersionValidator()),
    _broker("log.message.timestamp.type", _T.STRING, "CreateTime", ValidString(_TIMESTAMP_TYPES)),
    _broker("log.message.timestamp.difference.max.ms", _T.LONG, LONG_MAX),
    _broker("log.message.downconversion.enable", _T.BOOLEAN, True),
)
"""The broker configs kemu accepts, with ``KafkaConfig``'s types, defaults and validators.
``BrokerConfig`` has one field per entry, named with ``_`` for ``.``."""

_MS_PER_MINUTE: Final = 60 * 1000
_MS_PER_HOUR: Final = 60 * _MS_PER_MINUTE


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerConfig:
    """A broker's configuration: the ``BROKER_CONFIGS`` values, typed.

    Build it with ``from_overrides`` (names and values checked as Kafka checks them);
    ``explicit`` holds the names that were set, which DescribeConfigs reports as
    STATIC_BROKER_CONFIG rather than DEFAULT_CONFIG.
    """

    num_partitions: int = 1
    default_replication_factor: int = 1
    delete_topic_enable: bool = True
    auto_create_topics_enable: bool = True
    unclean_leader_election_enable: bool = False
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    leader_imbalance_per_broker_percentage: int = 10
    controlled_shutdown_enable: bool = True
    controlled_shutdown_max_retries: int = 3
    controlled_shutdown_retry_backoff_ms: int = 5000
    request_timeout_ms: int = 30_000
    controller_socket_timeout_ms: int = 30_000
    zookeeper_session_timeout_ms: int = 18_000
    zookeeper_connection_timeout_ms: int | None = None
    reserved_broker_max_id: int = 1000
    broker_id_generation_enable: bool = True
    create_topic_policy_class_name: str | None = None
    replica_lag_time_max_ms: int = 30_000
    replica_socket_timeout_ms: int = 30_000
    replica_fetch_max_bytes: int = 1024 * 1024
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_backoff_ms: int = 1000
    replica_fetch_min_bytes: int = 1
    replica_fetch_response_max_bytes: int = 10 * 1024 * 1024
    num_replica_fetchers: int = 1
    log_initial_task_delay_ms: int = 30_000
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = 104_857_600
    offsets_commit_timeout_ms: int = 5000
    offset_metadata_max_bytes: int = 4096
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3000
    group_max_size: int = INT_MAX
    offsets_retention_minutes: int = 7 * 24 * 60
    offsets_retention_check_interval_ms: int = 600_000
    kemu_max_replicas_per_request: int = DEFAULT_MAX_REPLICAS_PER_REQUEST
    kemu_max_replicas_per_cluster: int = DEFAULT_MAX_REPLICAS_PER_CLUSTER
    log_segment_bytes: int = 1 << 30
    log_roll_ms: int | None = None
    log_roll_hours: int = 24 * 7
    log_roll_jitter_ms: int | None = None
    log_roll_jitter_hours: int = 0
    log_index_size_max_bytes: int = 10 * 1024 * 1024
    log_flush_interval_messages: int = LONG_MAX
    log_flush_interval_ms: int | None = None
    log_flush_scheduler_interval_ms: int = LONG_MAX
    log_retention_bytes: int = -1
    log_retention_ms: int | None = None
    log_retention_minutes: int | None = None
    log_retention_hours: int = 24 * 7
    log_retention_check_interval_ms: int = 300_000
    message_max_bytes: int = 1024 * 1024 + 12
    log_index_interval_bytes: int = 4096
    log_cleaner_delete_retention_ms: int = 86_400_000
    log_cleaner_min_compaction_lag_ms: int = 0
    log_cleaner_max_compaction_lag_ms: int = LONG_MAX
    log_segment_delete_delay_ms: int = 60_000
    log_cleaner_min_cleanable_ratio: float = 0.5
    log_cleaner_enable: bool = True
    log_cleaner_backoff_ms: int = 15_000
    log_cleanup_policy: tuple[str, ...] = ("delete",)
    min_insync_replicas: int = 1
    compression_type: str = "producer"
    log_preallocate: bool = False
    log_message_format_version: str = LATEST_API_VERSION
    log_message_timestamp_type: str = "CreateTime"
    log_message_timestamp_difference_max_ms: int = LONG_MAX
    log_message_downconversion_enable: bool = True
    explicit: frozenset[str] = frozenset()
    static: tuple[tuple[str, str], ...] = ()
    """The configs set at start-up, as text (``staticBrokerConfigs``), in the order given."""
    dynamic_broker: tuple[tuple[str, str], ...] = ()
    """``/config/brokers/<id>`` as applied (``currentDynamicBrokerConfigs``)."""
    dynamic_default: tuple[tuple[str, str], ...] = ()
    """``/config/brokers/<default>`` as applied (``currentDynamicDefaultConfigs``)."""

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, object]) -> BrokerConfig:
        """The defaults with ``overrides`` (Kafka config names -> strings, or values of the
        config's type) applied. Raises ``ConfigError``: "Unknown broker config name: x"
        (kemu refuses names it does not know, where Kafka would only log them), Kafka's
        ``ConfigException`` text for a bad value, "requirement failed: ..." where
        ``KafkaConfig.validateValues`` refuses a combination, or the topic-config error
        for a value that makes an invalid topic default."""
        for name in overrides:
            if name not in BROKER_CONFIGS:
                raise ConfigError(
                    f"Unknown broker config name: {name}. Known names: "
                    + ", ".join(sorted(BROKER_CONFIGS))
                )
        # Any: the table decides each value's type; tests pin it to the field's.
        values: dict[str, Any] = {
            _field(name): key.parse(overrides[name])
            for name, key in BROKER_CONFIGS.items()
            if name in overrides
        }
        texts = {n: to_text(values[_field(n)], BROKER_CONFIGS[n].type) for n in overrides}
        static = tuple((n, text) for n, text in texts.items() if text is not None)
        config = dataclasses.replace(cls(), **values, explicit=frozenset(overrides), static=static)
        config._check()
        return config

    def reconfigured(
        self, default: Mapping[str, str], per_broker: Mapping[str, str]
    ) -> BrokerConfig:
        """``DynamicBrokerConfig.updateCurrentConfig``: this broker's static configs, then
        the cluster's dynamic defaults (``default``), then its own dynamic configs
        (``per_broker``), each layer removing the synonyms of the names it sets
        (``overrideProps``: a dynamic ``log.retention.hours`` beats a static
        ``log.retention.ms``). Stored values that are not dynamic broker configs kemu
        applies (quotas, names it does not know) are kept for DescribeConfigs only; a value
        that does not parse is dropped (``removeInvalidConfigs``). Call it on the static
        config (the one ``from_overrides`` built). Raises ``ConfigError`` with
        ``KafkaConfig``'s text when the result breaks one of its rules ("requirement
        failed: ...", from the ``new KafkaConfig`` of ``processReconfiguration``); the
        caller keeps the config it had."""
        layers = [_valid_dynamic(default), _valid_dynamic(per_broker)]
        values: dict[str, Any] = {_field(name): self.value(name) for name in BROKER_CONFIGS}
        for layer in layers:
            for name, value in layer.items():
                if name not in BROKER_CONFIGS:
                    continue
                for synonym in broker_config_synonyms(name):  # back to Kafka's default
                    if synonym in BROKER_CONFIGS:
                        values[_field(synonym)] = BROKER_CONFIGS[synonym].default
                values[_field(name)] = BROKER_CONFIGS[name].parse(value)
        config = dataclasses.replace(
            self,
            **values,
            explicit=self.explicit,
            static=self.static,
            dynamic_broker=tuple(layers[1].items()),
            dynamic_default=tuple(layers[0].items()),
        )
        config._check()
        return config

    def _check(self) -> None:
        """``KafkaConfig.validateValues`` (the parts about these configs), then the topic
        defaults through the topic validators, as ``LogConfig`` re-checks them."""
        requirements = (
            (self.log_roll_time_millis >= 1, "log.roll.ms must be equal or greater than 1"),
            (
                self.log_roll_time_jitter_millis >= 0,
                "log.roll.jitter.ms must be equal or greater than 0",
            ),
            (
                self.log_retention_time_millis >= 1 or self.log_retention_time_millis == -1,
                "log.retention.ms must be unlimited (-1) or, equal or greater than 1",
            ),
            (
                self.replica_fetch_wait_max_ms <= self.replica_socket_timeout_ms,
                "replica.socket.timeout.ms should always be at least replica.fetch.wait.max.ms"
                " to prevent unnecessary socket timeouts",
            ),
            (
                self.replica_fetch_wait_max_ms <= self.replica_lag_time_max_ms,
                "replica.fetch.wait.max.ms should always be less than or equal to"
                " replica.lag.time.max.ms to prevent frequent changes in ISR",
            ),
            (
                self.compression_type.lower() in _COMPRESSION_TYPES,
                f"compression.type : {self.compression_type} is not valid. Valid options are "
                + ",".join(_COMPRESSION_TYPES),
            ),
        )
        for holds, message in requirements:
            if not holds:
                raise ConfigError(f"requirement failed: {message}")
        for name, value in self.topic_defaults().items():
            validator = TOPIC_CONFIGS[name].validator
            if validator is not None:
                validator.ensure_valid(name, value)

    def value(self, name: str) -> ConfigValue:
        """The value of broker config ``name`` (a ``BROKER_CONFIGS`` name)."""
        if name not in BROKER_CONFIGS:
            raise KeyError(name)
        value: ConfigValue = getattr(self, _field(name))
        return value

    @property
    def log_roll_time_millis(self) -> int:
        """``log.roll.ms``, else ``log.roll.hours`` in ms."""
        if self.log_roll_ms is not None:
            return self.log_roll_ms
        return self.log_roll_hours * _MS_PER_HOUR

    @property
    def log_roll_time_jitter_millis(self) -> int:
        if self.log_roll_jitter_ms is not None:
            return self.log_roll_jitter_ms
        return self.log_roll_jitter_hours * _MS_PER_HOUR

    @property
    def log_flush_interval_millis(self) -> int:
        """``log.flush.interval.ms``, else ``log.flush.scheduler.interval.ms``."""
        if self.log_flush_interval_ms is not None:
            return self.log_flush_interval_ms
        return self.log_flush_scheduler_interval_ms

    @property
    def log_retention_time_millis(self) -> int:
        """``log.retention.ms``, else minutes, else hours, in ms; any negative is -1."""
        if self.log_retention_ms is not None:
            millis = self.log_retention_ms
        elif self.log_retention_minutes is not None:
            millis = self.log_retention_minutes * _MS_PER_MINUTE
        else:
            millis = self.log_retention_hours * _MS_PER_HOUR
        return -1 if millis < 0 else millis

    def topic_defaults(self) -> dict[str, ConfigValue]:
        """``KafkaServer.copyKafkaConfigToLog``: the value each topic config takes when the
        topic does not override it (the throttled-replica lists are not copied)."""
        return {
            "segment.bytes": self.log_segment_bytes,
            "segment.ms": self.log_roll_time_millis,
            "segment.jitter.ms": self.log_roll_time_jitter_millis,
            "segment.index.bytes": self.log_index_size_max_bytes,
            "flush.messages": self.log_flush_interval_messages,
            "flush.ms": self.log_flush_interval_millis,
            "retention.bytes": self.log_retention_bytes,
            "retention.ms": self.log_retention_time_millis,
            "max.message.bytes": self.message_max_bytes,
            "index.interval.bytes": self.log_index_interval_bytes,
            "delete.retention.ms": self.log_cleaner_delete_retention_ms,
            "min.compaction.lag.ms": self.log_cleaner_min_compaction_lag_ms,
            "max.compaction.lag.ms": self.log_cleaner_max_compaction_lag_ms,
            "file.delete.delay.ms": self.log_segment_delete_delay_ms,
            "min.cleanable.dirty.ratio": self.log_cleaner_min_cleanable_ratio,
            "cleanup.policy": self.log_cleanup_policy,
            "min.insync.replicas": self.min_insync_replicas,
            "compression.type": self.compression_type,
            "unclean.leader.election.enable": self.unclean_leader_election_enable,
            "preallocate": self.log_preallocate,
            "message.format.version": api_version(self.log_message_format_version),
            "message.timestamp.type": self.log_message_timestamp_type,
            "message.timestamp.difference.max.ms": self.log_message_timestamp_difference_max_ms,
            "message.downconversion.enable": self.log_message_downconversion_enable,
        }


def _field(name: str) -> str:
    return name.replace(".", "_")


# ===================================================================== effective values


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One config of a topic as DescribeConfigs reports it."""

    name: str
    value: ConfigValue
    """The effective value, parsed."""
    text: str | None
    """The value as DescribeConfigs sends it (``ConfigDef.convertToString``)."""
    source: ConfigSource
    type: ConfigValueType | None
    """None for a name that is not a topic config (found in a stored override)."""
    synonyms: tuple[tuple[str, str | None, ConfigSource], ...] = ()
    """``(name, value, source)`` (``AdminManager.createTopicConfigEntry``): the override
    itself if there is one, then the broker synonyms of its default, set ones first."""

    @property
    def is_default(self) -> bool:
        """``ConfigEntry.isDefault``: what ``kafka-topics --describe`` leaves out of
        "Configs:" and what ``--topics-with-overrides`` looks past."""
        return self.source is ConfigSource.DEFAULT_CONFIG


def topic_config_entry(
    name: str, overrides: Mapping[str, str], broker: BrokerConfig
) -> ConfigEntry:
    """Topic config ``name`` of a topic whose stored overrides (``/config/topics/<t>``) are
    ``overrides``: the override if there is one (TOPIC_CONFIG); else the broker's value,
    reported as STATIC_BROKER_CONFIG if the broker config named exactly as the synonym was
    set, DEFAULT_CONFIG otherwise (Kafka reports ``log.retention.hours=24`` as a default
    for ``retention.ms``, though it supplies the value); else Kafka's default.

    Raises ``ConfigError`` if the stored override is not a valid value.
    """
    return _topic_config_entry(name, overrides, broker, None)


def _topic_config_entry(
    name: str,
    overrides: Mapping[str, str],
    broker: BrokerConfig,
    defaults: Mapping[str, ConfigValue] | None,
) -> ConfigEntry:
    """``topic_config_entry``, given ``broker.topic_defaults()`` if already computed."""
    key = TOPIC_CONFIGS.get(name)
    if key is None:
        if name not in overrides:
            raise KeyError(name)
        raw = overrides[name]
        return ConfigEntry(name, raw, raw, ConfigSource.TOPIC_CONFIG, None)
    if name in overrides:
        value = key.parse(overrides[name])
        source = ConfigSource.TOPIC_CONFIG
    elif name in TOPIC_CONFIG_SYNONYMS:
        value = (broker.topic_defaults() if defaults is None else defaults)[name]
        server_synonyms = _broker_config_synonyms(broker, TOPIC_CONFIG_SYNONYMS[name])
        source = server_synonyms[0][2] if server_synonyms else ConfigSource.DEFAULT_CONFIG
    else:
        value = key.default
        source = ConfigSource.DEFAULT_CONFIG
    text = to_text(value, key.type)
    server = TOPIC_CONFIG_SYNONYMS.get(name)
    synonyms: tuple[tuple[str, str | None, ConfigSource], ...] = ()
    if server is not None and server in BROKER_CONFIGS:
        synonyms = _broker_config_entry(broker, server).synonyms
    if name in overrides:
        synonyms = ((name, text, ConfigSource.TOPIC_CONFIG), *synonyms)
    return ConfigEntry(name, value, text, source, key.type, synonyms)


def topic_config_entries(
    overrides: Mapping[str, str], broker: BrokerConfig
) -> tuple[ConfigEntry, ...]:
    """Every topic config (definition order), then any stored override that is not a
    topic config (Kafka's DescribeConfigs reports those too, as given)."""
    names = [*TOPIC_CONFIGS, *(n for n in overrides if n not in TOPIC_CONFIGS)]
    defaults = broker.topic_defaults()  # once, not once per config
    return tuple(_topic_config_entry(name, overrides, broker, defaults) for name in names)


# ===================================================================== a broker's configs

_BROKER_SYNONYM_GROUPS: Final = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)


def broker_config_synonyms(name: str) -> tuple[str, ...]:
    """``DynamicBrokerConfig.brokerConfigSynonyms``: the names that set the same value, in
    precedence order (``log.flush.interval.ms`` falls back to the scheduler interval)."""
    if name == "log.flush.interval.ms":
        return (name, "log.flush.scheduler.interval.ms")
    for group in _BROKER_SYNONYM_GROUPS:
        if name in group:
            return group
    return (name,)


DYNAMIC_BROKER_CONFIGS: Final = frozenset(
    {v for v in TOPIC_CONFIG_SYNONYMS.values() if v != "log.message.format.version"}
    | {"num.replica.fetchers"}
)
"""The broker configs of ``BROKER_CONFIGS`` that Kafka 2.7 can change at run time
(``DynamicBrokerConfig.AllDynamicConfigs``: the topic defaults but the message format,
and the thread pools): every other is read-only in DescribeConfigs."""


@dataclass(frozen=True, slots=True)
class BrokerConfigEntry:
    """One config of a broker as DescribeConfigs reports it
    (``AdminManager.createBrokerConfigEntry``, per broker)."""

    name: str
    text: str | None
    source: ConfigSource
    type: ConfigValueType | None
    """None for a stored dynamic config kemu does not type (a replication quota)."""
    read_only: bool
    synonyms: tuple[tuple[str, str, ConfigSource], ...]
    """``(name, value, source)``: the synonyms that have a value, the set ones first, then
    the defaults, from the described name on."""


def broker_config_entries(config: BrokerConfig) -> tuple[BrokerConfigEntry, ...]:
    """Every broker config kemu has (definition order) with its value, its source (set at
    start-up: STATIC_BROKER_CONFIG, else DEFAULT_CONFIG, as the first of its synonyms with
    a value decides) and whether it is read-only."""
    known = tuple(_broker_config_entry(config, name) for name in BROKER_CONFIGS)
    return known + tuple(
        _untyped_entry(name, text, ConfigSource.DYNAMIC_BROKER_CONFIG)
        for name, text in config.dynamic_broker
        if name not in BROKER_CONFIGS
    )


def _untyped_entry(name: str, text: str, source: ConfigSource) -> BrokerConfigEntry:
    """A stored dynamic config kemu does not type: ``KafkaConfig.configType`` has no type
    for it, and it is read-only as every name outside ``AllDynamicConfigs``."""
    return BrokerConfigEntry(
        name=name, text=text, source=source, type=None, read_only=True,
        synonyms=((name, text, source),),
    )  # fmt: skip


def _broker_config_synonyms(
    config: BrokerConfig, name: str
) -> tuple[tuple[str, str, ConfigSource], ...]:
    """``AdminManager.configSynonyms``: the synonyms of ``name`` that have a value, the
    per-broker dynamic ones first, then the cluster's dynamic defaults, the static
    configs and Kafka's defaults, from the described name on."""
    names = broker_config_synonyms(name)
    defaults = {
        n: _default_text(BROKER_CONFIGS[n].default)
        for n in names
        if n in BROKER_CONFIGS and BROKER_CONFIGS[n].default is not None
    }
    layers = (
        (dict(config.dynamic_broker), ConfigSource.DYNAMIC_BROKER_CONFIG),
        (dict(config.dynamic_default), ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        (dict(config.static), ConfigSource.STATIC_BROKER_CONFIG),
        (defaults, ConfigSource.DEFAULT_CONFIG),
    )
    found = [(n, layer[n], source) for layer, source in layers for n in names if n in layer]
    while found and found[0][0] != name:  # configSynonyms' dropWhile
        found.pop(0)
    return tuple(found)


def _broker_config_entry(config: BrokerConfig, name: str) -> BrokerConfigEntry:
    key = BROKER_CONFIGS[name]
    found = _broker_config_synonyms(config, name)
    return BrokerConfigEntry(
        name=name,
        text=to_text(config.value(name), key.type),
        source=found[0][2] if found else ConfigSource.DEFAULT_CONFIG,
        type=key.type,
        read_only=name not in DYNAMIC_BROKER_CONFIGS,
        synonyms=found,
    )


def dynamic_default_entries(config: BrokerConfig) -> tuple[BrokerConfigEntry, ...]:
    """DescribeConfigs of the empty broker name: the cluster's dynamic defaults only
    (``currentDynamicDefaultConfigs``), each with the synonyms of that source alone."""
    entries: list[BrokerConfigEntry] = []
    for name, text in config.dynamic_default:
        key = BROKER_CONFIGS.get(name)
        if key is None:
            entries.append(_untyped_entry(name, text, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
            continue
        synonyms = tuple(
            s
            for s in _broker_config_synonyms(config, name)
            if s[2] is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        )
        entries.append(
            BrokerConfigEntry(
                name=name,
                text=text,
                source=ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                type=key.type,
                read_only=name not in DYNAMIC_BROKER_CONFIGS,
                synonyms=synonyms,
            )
        )
    return tuple(entries)


def _valid_dynamic(stored: Mapping[str, str]) -> dict[str, str]:
    """``removeInvalidConfigs``: the stored dynamic configs whose values parse; names
    kemu does not type are kept as they are."""
    kept = {}
    for name, value in stored.items():
        key = BROKER_CONFIGS.get(name)
        if key is not None:
            try:
                key.parse(value)
            except ConfigError:
                continue
        kept[name] = value
    return kept


_THREAD_COUNTS: Final = frozenset({"num.replica.fetchers"})
"""The thread counts of ``DynamicThreadPool`` that kemu has: ``KafkaConfig`` gives them
no validator (kemu refuses a count below 1 in a static config only); a dynamic one is
checked by ``check_thread_pool_resize``."""


def check_dynamic_broker_configs(config: Mapping[str, str]) -> None:
    """``DynamicBrokerConfig.validateConfigs`` for a broker's (or the cluster default's)
    new dynamic configs: a broker config that cannot change at run time is refused
    ("Cannot update these configs dynamically: Set(a, b)"), then every value is parsed
    and validated as its type (``DynamicConfig.Broker.validate``). kemu serves no
    per-broker-only configs (the listener and security ones), so every dynamic config may
    be set per broker or as the cluster's default. Names kemu does not know are refused as
    not dynamic: kemu cannot tell Kafka's other configs from custom ones."""
    fixed = [n for n in config if n not in DYNAMIC_BROKER_CONFIGS]
    if fixed:
        raise ConfigError(f"Cannot update these configs dynamically: Set({', '.join(fixed)})")
    for name, value in config.items():
        if name in _THREAD_COUNTS:
            parse_type(name, value, ConfigValueType.INT)
        else:
            BROKER_CONFIGS[name].parse(value)


def requested_thread_count(
    name: str, new: BrokerConfig, default: Mapping[str, str], per_broker: Mapping[str, str]
) -> int:
    """The count ``name`` that the dynamic layers ``default`` and ``per_broker`` give the
    config ``new`` made from them, including one below 1 (which ``reconfigured`` drops)."""
    raw = per_broker.get(name, default.get(name))
    value = new.value(name) if raw is None else parse_type(name, raw, ConfigValueType.INT)
    assert isinstance(value, int)
    return value


def check_thread_pool_resize(name: str, old: int, new: int) -> None:
    """``DynamicThreadPool.validateReconfiguration``: a thread count that changes must be
    at least 1, at least half the current one and at most double it (Java's integer
    half: from 3, 1 is allowed). Raises ``ConfigError`` with Kafka's text;
    ``processReconfiguration`` wraps it as "Invalid dynamic configuration"."""
    if new == old:
        return
    error = f"Dynamic thread count update validation failed for {name}={new}"
    if new <= 0:
        raise ConfigError(f"{error}, value should be at least 1")
    if new < old // 2:
        raise ConfigError(f"{error}, value should be at least half the current value {old}")
    if new > old * 2:
        raise ConfigError(
            f"{error}, value should not be greater than double the current value {old}"
        )


def _default_text(value: ConfigValue) -> str:
    """A default as ``convertToStringMapWithPasswordValues`` renders it (lists joined)."""
    text = to_text(value, None)
    assert text is not None
    return text
