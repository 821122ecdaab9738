"""Topic and broker configs follow Kafka 2.7's ``LogConfig``, ``KafkaConfig`` and
``ConfigDef``: the same names, types, defaults and validators, the same error texts, and
the values and sources DescribeConfigs reports.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.admin import (
    BROKER_CONFIGS,
    TOPIC_CONFIG_SYNONYMS,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigError,
    ConfigOp,
    ConfigSource,
    ConfigValueType,
    apply_topic_config_ops,
    broker_config_entries,
    check_dynamic_broker_configs,
    topic_config_entries,
    topic_config_entry,
    validate_topic_config,
)
from actors.admin.configs import LONG_MAX, api_version, parse_type
from protocol.errors import ErrorCode, KafkaApiError


def config_error(config: dict[str, str | None]) -> str | None:
    """The INVALID_CONFIG message ``validate_topic_config`` gives for ``config``."""
    with pytest.raises(KafkaApiError) as excinfo:
        validate_topic_config(config)
    assert excinfo.value.code is ErrorCode.INVALID_CONFIG
    return excinfo.value.detail


# ==================================================================== the topic configs


def test_topic_config_names_are_kafka_27s_in_definition_order() -> None:
    """The 26 ``LogConfig`` names, in the order ``ConfigDef.parse`` checks them."""
    assert list(TOPIC_CONFIGS) == [
        "segment.bytes",
        "segment.ms",
        "segment.jitter.ms",
        "segment.index.bytes",
        "flush.messages",
        "flush.ms",
        "retention.bytes",
        "retention.ms",
        "max.message.bytes",
        "index.interval.bytes",
        "delete.retention.ms",
        "min.compaction.lag.ms",
        "max.compaction.lag.ms",
        "file.delete.delay.ms",
        "min.cleanable.dirty.ratio",
        "cleanup.policy",
        "unclean.leader.election.enable",
        "min.insync.replicas",
        "compression.type",
        "preallocate",
        "message.format.version",
        "message.timestamp.type",
        "message.timestamp.difference.max.ms",
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
        "message.downconversion.enable",
    ]


def test_topic_config_synonyms_are_logconfigs() -> None:
    """``LogConfig.TopicConfigSynonyms``: the broker config behind each default."""
    assert dict(TOPIC_CONFIG_SYNONYMS) == {
        "segment.bytes": "log.segment.bytes",
        "segment.ms": "log.roll.ms",
        "segment.jitter.ms": "log.roll.jitter.ms",
        "segment.index.bytes": "log.index.size.max.bytes",
        "flush.messages": "log.flush.interval.messages",
        "flush.ms": "log.flush.interval.ms",
        "retention.bytes": "log.retention.bytes",
        "retention.ms": "log.retention.ms",
        "max.message.bytes": "message.max.bytes",
        "index.interval.bytes": "log.index.interval.bytes",
        "delete.retention.ms": "log.cleaner.delete.retention.ms",
        "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
        "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
        "file.delete.delay.ms": "log.segment.delete.delay.ms",
        "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
        "cleanup.policy": "log.cleanup.policy",
        "unclean.leader.election.enable": "unclean.leader.election.enable",
        "min.insync.replicas": "min.insync.replicas",
        "compression.type": "compression.type",
        "preallocate": "log.preallocate",
        "message.format.version": "log.message.format.version",
        "message.timestamp.type": "log.message.timestamp.type",
        "message.timestamp.difference.max.ms": "log.message.timestamp.difference.max.ms",
        "message.downconversion.enable": "log.message.downconversion.enable",
    }
    assert set(TOPIC_CONFIG_SYNONYMS.values()) <= set(BROKER_CONFIGS)


def test_file_delete_delay_definition() -> None:
    """``file.delete.delay.ms``: a LONG >= 0, default 60000 from
    ``log.segment.delete.delay.ms``."""
    key = TOPIC_CONFIGS["file.delete.delay.ms"]
    assert (key.type, key.default, key.server_default) == (
        ConfigValueType.LONG,
        60_000,
        "log.segment.delete.delay.ms",
    )
    assert BROKER_CONFIGS["log.segment.delete.delay.ms"].default == 60_000


def test_topic_defaults_are_valid_values_of_their_type() -> None:
    """Every Kafka default passes its own validator."""
    for name, key in TOPIC_CONFIGS.items():
        if key.validator is not None:
            key.validator.ensure_valid(name, key.default)


# ================================================================ validate_topic_config


def test_valid_config_returns_the_strings_as_given() -> None:
    """Valid values, even untrimmed ones, are stored as the client sent them."""
    config = {
        "retention.ms": " 86400000 ",
        "cleanup.policy": "compact, delete",
        "min.cleanable.dirty.ratio": "0.25",
        "compression.type": "lz4",
        "preallocate": "TRUE",
        "message.format.version": "2.7",
        "leader.replication.throttled.replicas": "0:1, 1:2",
        "follower.replication.throttled.replicas": "*",
        "message.timestamp.type": "LogAppendTime",
        "retention.bytes": "-5",
        "segment.ms": "+100",
    }
    assert validate_topic_config(config) == config
    assert validate_topic_config({}) == {}


def test_unknown_name_is_refused() -> None:
    """An unknown name: "Unknown topic config name: x", before any value is looked at."""
    assert config_error({"retention.ms": "x", "nope": "1"}) == "Unknown topic config name: nope"
    assert config_error({"b.nope": "1", "a.nope": "1"}) == "Unknown topic config name: b.nope"


def test_none_values_are_ignored() -> None:
    """Entries without a value are dropped, names unchecked, as Kafka's AlterConfigs does."""
    assert validate_topic_config({"nope": None, "retention.ms": None, "segment.ms": "5"}) == {
        "segment.ms": "5"
    }


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("retention.ms", "abc", "Not a number of type LONG"),
        ("retention.ms", "1_000", "Not a number of type LONG"),
        ("retention.ms", "9223372036854775808", "Not a number of type LONG"),
        ("retention.ms", "", "Not a number of type LONG"),
        ("retention.ms", "1.0", "Not a number of type LONG"),
        ("segment.bytes", "2147483648", "Not a number of type INT"),
        ("min.cleanable.dirty.ratio", "half", "Not a number of type DOUBLE"),
        ("min.cleanable.dirty.ratio", "1e", "Not a number of type DOUBLE"),
        ("preallocate", "yes", "Expected value to be either true or false"),
        ("preallocate", "", "Expected value to be either true or false"),
    ],
)
def test_unparsable_values_quote_the_raw_value(name: str, value: str, reason: str) -> None:
    """A value that does not parse as its type: ``ConfigException`` text with the value
    as sent."""
    assert (
        config_error({name: value}) == f"Invalid value {value} for configuration {name}: {reason}"
    )


def test_unparsable_values_are_quoted_untrimmed() -> None:
    """Kafka parses the trimmed value but prints the original."""
    assert config_error({"retention.ms": " abc "}) == (
        "Invalid value  abc  for configuration retention.ms: Not a number of type LONG"
    )


AT_LEAST = "Value must be at least"
POLICIES = "String must be one of: compact, delete"
THROTTLED = (
    " must be the literal '*' or a list of replicas in the following format:"
    " [partitionId]:[brokerId],[partitionId]:[brokerId],..."
)
LEADER_THROTTLED = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED = "follower.replication.throttled.replicas"


@pytest.mark.parametrize(
    ("name", "value", "shown", "reason"),
    [
        ("segment.bytes", "13", "13", f"{AT_LEAST} 14"),
        ("segment.ms", "0", "0", f"{AT_LEAST} 1"),
        ("retention.ms", "-2", "-2", f"{AT_LEAST} -1"),
        ("retention.ms", " -2", "-2", f"{AT_LEAST} -1"),
        ("min.insync.replicas", "0", "0", f"{AT_LEAST} 1"),
        ("file.delete.delay.ms", "-1", "-1", f"{AT_LEAST} 0"),
        ("max.compaction.lag.ms", "0", "0", f"{AT_LEAST} 1"),
        ("min.cleanable.dirty.ratio", "1.5", "1.5", "Value must be no more than 1"),
        ("min.cleanable.dirty.ratio", "2", "2.0", "Value must be no more than 1"),
        ("min.cleanable.dirty.ratio", "-1e-5", "-1.0E-5", f"{AT_LEAST} 0"),
        ("cleanup.policy", "compact,remove", "remove", POLICIES),
        ("cleanup.policy", "compact,", "", POLICIES),
        ("cleanup.policy", "Compact", "Compact", POLICIES),
        (
            "compression.type",
            "GZIP",
            "GZIP",
            "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer",
        ),
        (
            "message.timestamp.type",
            "createtime",
            "createtime",
            "String must be one of: CreateTime, LogAppendTime",
        ),
        ("message.format.version", "abc", "abc", "Version `abc` is not a valid version"),
        ("message.format.version", "2.8", "2.8", "Version `2.8` is not a valid version"),
        (LEADER_THROTTLED, "1:2,x", "[1:2, x]", LEADER_THROTTLED + THROTTLED),
        (FOLLOWER_THROTTLED, "1:2,*", "[1:2, *]", FOLLOWER_THROTTLED + THROTTLED),
    ],
)
def test_invalid_values_get_kafkas_message(name: str, value: str, shown: str, reason: str) -> None:
    """Values that parse but fail the validator print the parsed value (a Java double as
    Java prints it, a list as Java's ``List.toString``)."""
    assert (
        config_error({name: value}) == f"Invalid value {shown} for configuration {name}: {reason}"
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("min.cleanable.dirty.ratio", "NaN"),  # NaN is neither < 0 nor > 1 for Kafka either
        ("min.cleanable.dirty.ratio", "0.5d"),
        ("min.cleanable.dirty.ratio", ".5"),
        ("min.cleanable.dirty.ratio", "0x0.8p0"),
        ("leader.replication.throttled.replicas", "*,anything"),
        ("leader.replication.throttled.replicas", ""),
        ("cleanup.policy", ""),
        ("cleanup.policy", "delete,compact"),
        ("message.format.version", "0.10.0"),
        ("message.format.version", "0.8.2.1"),
        ("message.format.version", "2.7-IV1"),
        ("message.format.version", "2.5.1"),
        ("unclean.leader.election.enable", " False "),
        ("retention.bytes", "-9223372036854775808"),
        ("segment.ms", "\u0661\u0662"),  # Java's parseLong takes any decimal digit
    ],
)
def test_values_java_accepts_are_accepted(name: str, value: str) -> None:
    """Edge values that Kafka's Java parsing accepts pass here too."""
    assert validate_topic_config({name: value}) == {name: value}


def test_first_bad_value_in_definition_order_is_reported() -> None:
    """``ConfigDef.parse`` walks the definitions, so segment.bytes is checked before
    retention.ms whatever the request's order."""
    message = config_error({"retention.ms": "x", "segment.bytes": "y"})
    assert message == "Invalid value y for configuration segment.bytes: Not a number of type INT"


def test_compaction_lag_conflict() -> None:
    """``min.compaction.lag.ms`` above ``max.compaction.lag.ms`` is refused after parsing."""
    assert config_error({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}) == (
        "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"
    )
    assert validate_topic_config({"min.compaction.lag.ms": "10"}) == {"min.compaction.lag.ms": "10"}


@given(st.integers(-1, LONG_MAX))
def test_any_long_from_minus_one_is_a_valid_retention(value: int) -> None:
    """retention.ms takes every long >= -1."""
    assert validate_topic_config({"retention.ms": str(value)}) == {"retention.ms": str(value)}


@given(st.one_of(st.integers(max_value=-(1 << 63) - 1), st.integers(min_value=1 << 63)))
def test_numbers_outside_long_are_not_numbers(value: int) -> None:
    """Beyond 64 bits Java's parseLong fails: "Not a number of type LONG"."""
    assert config_error({"retention.bytes": str(value)}) == (
        f"Invalid value {value} for configuration retention.bytes: Not a number of type LONG"
    )


@given(st.text(min_size=1).filter(lambda name: name not in TOPIC_CONFIGS))
def test_every_other_name_is_unknown(name: str) -> None:
    """No name outside the table is accepted."""
    assert config_error({name: "1"}) == f"Unknown topic config name: {name}"


def test_api_versions() -> None:
    """``ApiVersion.apply``: short versions name the latest sub-version."""
    assert api_version("2.7") == "2.7-IV2"
    assert api_version("2.7.1") == "2.7-IV2"
    assert api_version("2.7.") == "2.7-IV2"
    assert api_version("2.6") == "2.6-IV0"
    assert api_version("0.10.0") == "0.10.0-IV1"
    assert api_version("0.10.0-IV0") == "0.10.0-IV0"
    assert api_version("0.8.2.1") == "0.8.2"
    assert api_version("1.0") == "1.0-IV0"
    for bad in ["", "2", "2.8", "0.10", "abc", ".2.7"]:
        with pytest.raises(ValueError, match="is not a valid version"):
            api_version(bad)


def test_parse_type_of_typed_values() -> None:
    """Typed values (as from YAML) are taken as Java objects would be."""
    assert parse_type("x", True, ConfigValueType.BOOLEAN) is True
    assert parse_type("x", 5, ConfigValueType.LONG) == 5
    assert parse_type("x", 5, ConfigValueType.DOUBLE) == 5.0
    assert parse_type("x", ["a", "b"], ConfigValueType.LIST) == ("a", "b")
    assert parse_type("x", None, ConfigValueType.INT) is None
    with pytest.raises(ConfigError) as excinfo:
        parse_type("x", True, ConfigValueType.INT)
    assert str(excinfo.value) == (
        "Invalid value true for configuration x: Expected value to be a 32-bit integer,"
        " but it was a java.lang.Boolean"
    )
    with pytest.raises(ConfigError, match="Expected value to be a string"):
        parse_type("x", 1, ConfigValueType.STRING)
    with pytest.raises(ConfigError) as excinfo:
        parse_type("x", "", ConfigValueType.CLASS)
    assert str(excinfo.value) == "Invalid value  for configuration x: Class  could not be found."
    with pytest.raises(ConfigError, match="Not a number of type INT"):
        parse_type("x", 1 << 31, ConfigValueType.INT)


# ========================================================================= broker configs


def test_broker_config_fields_match_the_table() -> None:
    """One typed field per known broker config, with the table's default."""
    fields = {f.name for f in dataclasses.fields(BrokerConfig)} - {
        "explicit",
        "static",
        "dynamic_broker",
        "dynamic_default",
    }
    assert fields == {name.replace(".", "_") for name in BROKER_CONFIGS}
    defaults = BrokerConfig()
    for name, key in BROKER_CONFIGS.items():
        assert defaults.value(name) == key.default, name
        assert type(defaults.value(name)) is type(key.default), name
    with pytest.raises(KeyError):
        defaults.value("explicit")


def test_broker_defaults_are_kafkas() -> None:
    """The spec's §0 defaults."""
    config = BrokerConfig.from_overrides({})
    assert config == BrokerConfig()
    assert (config.num_partitions, config.default_replication_factor) == (1, 1)
    assert config.delete_topic_enable is True
    assert config.auto_create_topics_enable is True
    assert config.log_segment_delete_delay_ms == 60_000
    assert config.unclean_leader_election_enable is False
    assert config.auto_leader_rebalance_enable is True
    assert config.leader_imbalance_check_interval_seconds == 300
    assert config.leader_imbalance_per_broker_percentage == 10
    assert config.controlled_shutdown_enable is True
    assert config.controlled_shutdown_max_retries == 3
    assert config.controlled_shutdown_retry_backoff_ms == 5000
    assert config.request_timeout_ms == 30_000
    assert config.controller_socket_timeout_ms == 30_000
    assert config.zookeeper_session_timeout_ms == 18_000
    assert config.reserved_broker_max_id == 1000
    assert config.broker_id_generation_enable is True
    assert config.create_topic_policy_class_name is None
    assert config.log_retention_time_millis == 604_800_000
    assert config.explicit == frozenset()
    replication = (
        config.replica_lag_time_max_ms,
        config.replica_socket_timeout_ms,
        config.replica_fetch_max_bytes,
        config.replica_fetch_wait_max_ms,
        config.replica_fetch_min_bytes,
        config.replica_fetch_response_max_bytes,
        config.replica_fetch_backoff_ms,
        config.num_replica_fetchers,
    )
    assert replication == (30_000, 30_000, 1_048_576, 500, 1, 10_485_760, 1000, 1)


def test_from_overrides_parses_and_remembers_names() -> None:
    """Strings and typed values are parsed; the names given are kept as ``explicit``."""
    config = BrokerConfig.from_overrides(
        {
            "delete.topic.enable": "false",
            "num.partitions": 3,
            "log.segment.delete.delay.ms": " 1000 ",
            "log.cleanup.policy": "compact,delete",
            "create.topic.policy.class.name": "org.example.Policy",
        }
    )
    assert config.delete_topic_enable is False
    assert config.num_partitions == 3
    assert config.log_segment_delete_delay_ms == 1000
    assert config.log_cleanup_policy == ("compact", "delete")
    assert config.create_topic_policy_class_name == "org.example.Policy"
    assert config.explicit == {
        "delete.topic.enable",
        "num.partitions",
        "log.segment.delete.delay.ms",
        "log.cleanup.policy",
        "create.topic.policy.class.name",
    }


def test_unknown_broker_config_is_a_clear_error() -> None:
    """kemu refuses names it does not know, and lists the ones it does."""
    with pytest.raises(ConfigError) as excinfo:
        BrokerConfig.from_overrides({"delete.topics.enable": "false"})
    message = str(excinfo.value)
    assert message.startswith("Unknown broker config name: delete.topics.enable. Known names: ")
    assert "delete.topic.enable" in message


RETENTION_REQUIREMENT = (
    "requirement failed: log.retention.ms must be unlimited (-1) or, equal or greater than 1"
)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"num.partitions": "0"},
            "Invalid value 0 for configuration num.partitions: Value must be at least 1",
        ),
        (
            {"delete.topic.enable": "no"},
            "Invalid value no for configuration delete.topic.enable:"
            " Expected value to be either true or false",
        ),
        (
            {"zookeeper.session.timeout.ms": "1e3"},
            "Invalid value 1e3 for configuration zookeeper.session.timeout.ms:"
            " Not a number of type INT",
        ),
        ({"log.retention.ms": "0"}, RETENTION_REQUIREMENT),
        ({"log.retention.minutes": "0"}, RETENTION_REQUIREMENT),
        ({"log.roll.ms": "0"}, "requirement failed: log.roll.ms must be equal or greater than 1"),
        (
            {"log.roll.jitter.ms": "-1"},
            "requirement failed: log.roll.jitter.ms must be equal or greater than 0",
        ),
        (
            {"compression.type": "bogus"},
            "requirement failed: compression.type : bogus is not valid."
            " Valid options are uncompressed,zstd,lz4,snappy,gzip,producer",
        ),
        (
            {"log.cleaner.min.cleanable.ratio": "2"},
            "Invalid value 2.0 for configuration min.cleanable.dirty.ratio:"
            " Value must be no more than 1",
        ),
        (
            {"log.message.format.version": "3.0"},
            "Invalid value 3.0 for configuration log.message.format.version:"
            " Version `3.0` is not a valid version",
        ),
        (
            {"replica.fetch.wait.max.ms": "40000"},
            "requirement failed: replica.socket.timeout.ms should always be at least"
            " replica.fetch.wait.max.ms to prevent unnecessary socket timeouts",
        ),
        (
            {"replica.fetch.wait.max.ms": "2000", "replica.lag.time.max.ms": "1000"},
            "requirement failed: replica.fetch.wait.max.ms should always be less than or"
            " equal to replica.lag.time.max.ms to prevent frequent changes in ISR",
        ),
        (
            {"replica.fetch.max.bytes": "-1"},
            "Invalid value -1 for configuration replica.fetch.max.bytes: Value must be at least 0",
        ),
        (
            {"num.replica.fetchers": "0"},
            "Invalid value 0 for configuration num.replica.fetchers: Value must be at least 1",
        ),
        (
            {"log.cleaner.delete.retention.ms": "-1"},
            "Invalid value -1 for configuration delete.retention.ms: Value must be at least 0",
        ),
    ],
)
def test_bad_broker_values_are_refused(overrides: dict[str, str], message: str) -> None:
    """Bad values fail as Kafka's config parsing, ``validateValues`` or the log config
    built from them would."""
    with pytest.raises(ConfigError) as excinfo:
        BrokerConfig.from_overrides(overrides)
    assert str(excinfo.value) == message


def test_retention_resolution() -> None:
    """ms beats minutes beats hours; any negative is -1 (unlimited)."""
    assert BrokerConfig(log_retention_hours=24).log_retention_time_millis == 86_400_000
    assert BrokerConfig(log_retention_minutes=2).log_retention_time_millis == 120_000
    both = BrokerConfig(log_retention_minutes=2, log_retention_ms=5)
    assert both.log_retention_time_millis == 5
    negative = BrokerConfig.from_overrides({"log.retention.ms": "-5"})
    assert negative.log_retention_time_millis == -1
    assert BrokerConfig(log_roll_hours=1).log_roll_time_millis == 3_600_000
    assert BrokerConfig(log_roll_ms=7).log_roll_time_millis == 7
    assert BrokerConfig(log_flush_scheduler_interval_ms=9).log_flush_interval_millis == 9


def test_topic_defaults_come_from_the_broker() -> None:
    """``copyKafkaConfigToLog``: computed values, a normalised message format version."""
    defaults = BrokerConfig.from_overrides(
        {"log.retention.hours": "24", "log.message.format.version": "2.6"}
    ).topic_defaults()
    assert defaults["retention.ms"] == 86_400_000
    assert defaults["message.format.version"] == "2.6-IV0"
    assert defaults["file.delete.delay.ms"] == 60_000
    assert set(defaults) == set(TOPIC_CONFIG_SYNONYMS)


# ====================================================================== effective values


def test_unset_config_is_the_default() -> None:
    """No override, no broker setting: the default, reported as DEFAULT_CONFIG."""
    entry = topic_config_entry("retention.ms", {}, BrokerConfig())
    assert (entry.value, entry.text, entry.source) == (
        604_800_000,
        "604800000",
        ConfigSource.DEFAULT_CONFIG,
    )
    assert entry.is_default
    assert entry.type is ConfigValueType.LONG


def test_override_is_a_topic_config_rendered_by_kafka() -> None:
    """An override is TOPIC_CONFIG; the text is Kafka's rendering of the parsed value."""
    overrides = {
        "cleanup.policy": "compact, delete",
        "min.cleanable.dirty.ratio": "1",
        "preallocate": "TRUE",
    }
    broker = BrokerConfig()
    policy = topic_config_entry("cleanup.policy", overrides, broker)
    assert (policy.value, policy.text, policy.source) == (
        ("compact", "delete"),
        "compact,delete",
        ConfigSource.TOPIC_CONFIG,
    )
    assert not policy.is_default
    assert topic_config_entry("min.cleanable.dirty.ratio", overrides, broker).text == "1.0"
    assert topic_config_entry("preallocate", overrides, broker).text == "true"


def test_broker_setting_of_the_synonym_is_a_static_broker_config() -> None:
    """``log.retention.ms`` set on the broker: retention.ms is STATIC_BROKER_CONFIG, which
    ``kafka-topics --describe`` shows as non-default."""
    broker = BrokerConfig.from_overrides(
        {"log.retention.ms": "1000", "log.segment.delete.delay.ms": "5"}
    )
    retention = topic_config_entry("retention.ms", {}, broker)
    assert (retention.value, retention.source) == (1000, ConfigSource.STATIC_BROKER_CONFIG)
    assert not retention.is_default
    delay = topic_config_entry("file.delete.delay.ms", {}, broker)
    assert (delay.text, delay.source) == ("5", ConfigSource.STATIC_BROKER_CONFIG)


def test_broker_setting_of_another_synonym_is_reported_as_default() -> None:
    """Kafka drops synonyms before the exact name: ``log.retention.hours=24`` supplies
    retention.ms yet the entry is DEFAULT_CONFIG."""
    broker = BrokerConfig.from_overrides({"log.retention.hours": "24"})
    entry = topic_config_entry("retention.ms", {}, broker)
    assert (entry.value, entry.source) == (86_400_000, ConfigSource.DEFAULT_CONFIG)


def test_throttled_replica_lists_default_to_empty() -> None:
    """The throttled-replica lists have no broker default: empty text, DEFAULT_CONFIG."""
    entry = topic_config_entry("leader.replication.throttled.replicas", {}, BrokerConfig())
    assert (entry.value, entry.text, entry.source) == ((), "", ConfigSource.DEFAULT_CONFIG)


def test_entries_cover_every_config_and_stray_overrides() -> None:
    """All 26 configs in order, then stored names that are not topic configs, as given."""
    entries = topic_config_entries({"retention.ms": "5", "stray": "x"}, BrokerConfig())
    assert [e.name for e in entries] == [*TOPIC_CONFIGS, "stray"]
    stray = entries[-1]
    assert (stray.value, stray.text, stray.source, stray.type) == (
        "x",
        "x",
        ConfigSource.TOPIC_CONFIG,
        None,
    )
    assert [e.name for e in entries if not e.is_default] == ["retention.ms", "stray"]
    assert all(e.is_default for e in topic_config_entries({}, BrokerConfig()))
    texts = {e.name: e.text for e in topic_config_entries({}, BrokerConfig())}
    assert texts["flush.messages"] == "9223372036854775807"
    assert texts["min.cleanable.dirty.ratio"] == "0.5"
    assert texts["message.format.version"] == "2.7-IV2"
    assert texts["unclean.leader.election.enable"] == "false"


def test_invalid_stored_override_and_unknown_name() -> None:
    """A stored value Kafka could not parse is an error; an unknown, unstored name is a
    KeyError."""
    with pytest.raises(ConfigError, match="Not a number of type LONG"):
        topic_config_entry("retention.ms", {"retention.ms": "soon"}, BrokerConfig())
    with pytest.raises(KeyError):
        topic_config_entry("nope", {}, BrokerConfig())


def test_broker_entries_list_synonyms_from_the_described_name_on() -> None:
    """``configSynonyms``: the synonyms with a value, set ones first then defaults, from
    the described name on: log.roll.ms (unset, no default) set through log.roll.hours has
    none and is a default; log.roll.hours lists its set value then its default."""
    config = BrokerConfig.from_overrides({"log.roll.hours": "2"})
    entries = {e.name: e for e in broker_config_entries(config)}
    roll_ms, roll_hours = entries["log.roll.ms"], entries["log.roll.hours"]
    assert (roll_ms.text, roll_ms.source, roll_ms.synonyms) == (
        None,
        ConfigSource.DEFAULT_CONFIG,
        (),
    )
    assert roll_hours.synonyms == (
        ("log.roll.hours", "2", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.roll.hours", "168", ConfigSource.DEFAULT_CONFIG),
    )
    assert roll_hours.read_only
    assert not roll_ms.read_only  # segment.ms's synonym: dynamic in Kafka
    assert entries["log.cleanup.policy"].text == "delete"


def test_incremental_ops_work_on_the_override_or_the_default_as_kafka_does() -> None:
    """``prepareIncrementalConfigs``: APPEND extends the override (else the default's
    items), SUBTRACT removes one occurrence of each item, DELETE drops the override, SET
    replaces; APPEND to the empty default keeps Java's leading empty item; a non-list
    config or an unknown name is refused."""
    assert apply_topic_config_ops({}, [("cleanup.policy", "compact", ConfigOp.APPEND)]) == {
        "cleanup.policy": "delete,compact"
    }
    stored = {"cleanup.policy": "compact,delete,compact", "retention.ms": "5"}
    assert apply_topic_config_ops(
        stored,
        [
            ("cleanup.policy", "compact", ConfigOp.SUBTRACT),
            ("retention.ms", None, ConfigOp.DELETE),
            ("segment.ms", "9", ConfigOp.SET),
        ],
    ) == {"cleanup.policy": "delete,compact", "segment.ms": "9"}
    throttled = "leader.replication.throttled.replicas"
    assert apply_topic_config_ops({}, [(throttled, "0:1", ConfigOp.APPEND)]) == {throttled: ",0:1"}
    with pytest.raises(KafkaApiError) as refused:
        apply_topic_config_ops({}, [("retention.ms", "1", ConfigOp.SUBTRACT)])
    assert refused.value.code is ErrorCode.INVALID_REQUEST
    assert str(refused.value) == "Config value subtract is not allowed for config key: retention.ms"
    with pytest.raises(KafkaApiError) as unknown:
        apply_topic_config_ops({}, [("nope", "1", ConfigOp.APPEND)])
    assert unknown.value.code is ErrorCode.UNKNOWN_SERVER_ERROR


# ================================================================ dynamic broker configs


def test_reconfigured_layers_static_default_and_own_configs() -> None:
    """``updateCurrentConfig``: the broker's own dynamic value beats the cluster default,
    which beats the static one; a dynamic ``log.retention.ms`` wins over a static
    ``log.retention.hours`` (``overrideProps`` drops the synonyms below it); a stored value
    that does not parse is dropped (``removeInvalidConfigs``); a quota is kept for
    DescribeConfigs only. The static config itself is unchanged."""
    static = BrokerConfig.from_overrides({"min.insync.replicas": "2", "log.retention.hours": "1"})
    config = static.reconfigured(
        {"min.insync.replicas": "3", "log.retention.ms": "7", "num.replica.fetchers": "x"},
        {"min.insync.replicas": "4", "leader.replication.throttled.rate": "10"},
    )
    assert (config.min_insync_replicas, config.log_retention_time_millis) == (4, 7)
    assert config.num_replica_fetchers == 1
    assert config.dynamic_default == (("min.insync.replicas", "3"), ("log.retention.ms", "7"))
    assert dict(config.dynamic_broker)["leader.replication.throttled.rate"] == "10"
    assert static.min_insync_replicas == 2
    entries = {e.name: e for e in broker_config_entries(config)}
    assert entries["min.insync.replicas"].synonyms == (
        ("min.insync.replicas", "4", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("min.insync.replicas", "3", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("min.insync.replicas", "2", ConfigSource.STATIC_BROKER_CONFIG),
        ("min.insync.replicas", "1", ConfigSource.DEFAULT_CONFIG),
    )
    quota = entries["leader.replication.throttled.rate"]
    assert (quota.text, quota.source, quota.type, quota.read_only) == (
        "10",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
        None,
        True,
    )
    assert static.reconfigured({}, {}) == static


def test_reconfigured_refuses_what_kafka_config_refuses() -> None:
    with pytest.raises(ConfigError, match=r"requirement failed: log\.retention\.ms must be"):
        BrokerConfig().reconfigured({"log.retention.ms": "0"}, {})


def test_check_dynamic_broker_configs_messages() -> None:
    with pytest.raises(ConfigError) as excinfo:
        check_dynamic_broker_configs({"num.partitions": "1", "log.retention.hours": "1"})
    assert str(excinfo.value) == (
        "Cannot update these configs dynamically: Set(num.partitions, log.retention.hours)"
    )
    with pytest.raises(ConfigError, match="Value must be at least 1"):
        check_dynamic_broker_configs({"min.insync.replicas": "0"})
    check_dynamic_broker_configs({"unclean.leader.election.enable": "true"})


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("-1", "Value must be at least 0"),
        ("x", "Not a number of type LONG"),
        ("9223372036854775808", "Not a number of type LONG"),
    ],
)
def test_message_timestamp_difference_max_ms_is_a_long_of_at_least_0(value: str, why: str) -> None:
    """``message.timestamp.difference.max.ms``: a LONG >= 0 (``LogConfig``'s
    ``atLeast(0)``), from 0 to Long.MaxValue; anything else INVALID_CONFIG in
    ``ConfigException``'s words."""
    name = "message.timestamp.difference.max.ms"
    for good in ("0", str(LONG_MAX)):
        assert validate_topic_config({name: good}) == {name: good}
    with pytest.raises(KafkaApiError) as raised:
        validate_topic_config({name: value})
    assert raised.value.code is ErrorCode.INVALID_CONFIG
    assert str(raised.value) == f"Invalid value {value} for configuration {name}: {why}"
