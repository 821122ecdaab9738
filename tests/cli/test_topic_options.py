"""``kemu topics`` argument handling without a cluster: jopt-style parsing, every check of
``checkArgs`` with Kafka's message and exit status, and the pure parsers (replica
assignment, configs, topic regex) and JVM orders the output depends on."""

from __future__ import annotations

import io

import pytest

from cluster.cli.topics import (
    TopicCommandError,
    parse_options,
    parse_replica_assignment,
    parse_topic_configs_to_add,
    parse_topic_configs_to_delete,
    run_topic_command,
    select_topics,
)
from cluster.store.embedded import EmbeddedStore
from protocol.jvm import java_hash_map_order, java_list_hash, scala_hash_set_order

ZK = ["--zookeeper", "127.0.0.1:1"]  # never reached: every case fails its checks first
BS = ["--bootstrap-server", "127.0.0.1:1"]
RF1 = ["--replication-factor", "1"]


async def _run(*argv: str) -> tuple[int, str, str]:
    """Run with an empty embedded store standing in for the ZooKeeper of ``ZK``."""
    out, err = io.StringIO(), io.StringIO()
    store = EmbeddedStore()
    try:
        rc = await run_topic_command(list(argv), out=out, err=err, store=store)
    finally:
        await store.aclose()
    return rc, out.getvalue(), err.getvalue()


USAGE_CASES = [
    ([], "Create, delete, describe, or change a topic."),
    (["--help"], "This tool helps to create, delete, describe, or change a topic."),
    (
        ["--list", "--describe", *ZK],
        "Command must include exactly one action: --list, --describe, --create, --alter or"
        " --delete",
    ),
    (
        [*ZK],
        "Command must include exactly one action: --list, --describe, --create, --alter or"
        " --delete",
    ),
    (["--create", "--partitions", "1", *ZK], 'Missing required argument "[topic]"'),
    (["--delete", *ZK], 'Missing required argument "[topic]"'),
    (["--alter", *BS], 'Missing required argument "[topic]"'),
    (["--describe", "--if-exists", *ZK], 'Missing required argument "[topic]"'),
    (["--create", "--topic", "t", *ZK], 'Missing required argument "[partitions]"'),
    (
        ["--create", "--topic", "t", "--partitions", "1", *ZK],
        'Missing required argument "[replication-factor]"',
    ),
    (
        ["--alter", "--topic", "t", "--config", "a=b", *BS],
        'Option combination "[bootstrap-server],[config]" can\'t be used with option "[alter]"'
        " (the kafka-configs CLI supports altering topic configs with a --bootstrap-server"
        " option)",
    ),
    (["--alter", "--topic", "t", *BS], 'Missing required argument "[partitions]"'),
    (["--list", "--config", "a=b", *ZK], 'Option "[config]" can\'t be used with option "[list]"'),
    (
        ["--alter", "--topic", "t", "--delete-config", "a", "--partitions", "2", *BS],
        'Option "[delete-config]" can\'t be used with option "[bootstrap-server]"',
    ),
    (
        [
            *[
                "--create",
                "--topic",
                "t",
                "--delete-config",
                "a",
                "--partitions",
                "1",
                "--replication-factor",
                "1",
            ],
            *ZK,
        ],
        'Option "[delete-config]" can\'t be used with option "[create]"',
    ),
    (
        ["--describe", "--partitions", "2", *ZK],
        'Option "[partitions]" can\'t be used with option "[describe]"',
    ),
    (
        ["--alter", "--topic", "t", "--replication-factor", "2", *ZK],
        'Option "[replication-factor]" can\'t be used with option "[alter]"',
    ),
    (
        ["--delete", "--topic", "t", "--replica-assignment", "1:2", *ZK],
        'Option "[replica-assignment]" can\'t be used with option "[delete]"',
    ),
    (
        ["--create", "--topic", "t", "--replica-assignment", "1:2", "--partitions", "1", *ZK],
        'Option "[replica-assignment]" can\'t be used with option "[partitions]"',
    ),
    (
        [
            *["--create", "--topic", "t", "--replica-assignment", "1", "--replication-factor", "1"],
            *BS,
        ],
        'Option "[replica-assignment]" can\'t be used with option "[replication-factor]"',
    ),
    (
        ["--list", "--under-replicated-partitions", *ZK],
        'Option "[under-replicated-partitions]" can\'t be used with option "[list]"',
    ),
    (
        ["--describe", "--under-min-isr-partitions", *ZK],
        'Option "[under-min-isr-partitions]" can\'t be used with option "[zookeeper]"',
    ),
    (
        ["--describe", "--at-min-isr-partitions", *ZK],
        'Option "[at-min-isr-partitions]" can\'t be used with option "[zookeeper]"',
    ),
    (
        ["--describe", "--unavailable-partitions", "--topics-with-overrides", *BS],
        'Option "[unavailable-partitions]" can\'t be used with option "[topics-with-overrides]"',
    ),
    (
        ["--list", "--topics-with-overrides", *BS],
        'Option "[topics-with-overrides]" can\'t be used with option "[list]"',
    ),
    (
        ["--create", "--topic", "t", "--if-exists", *BS],
        'Option "[if-exists]" can\'t be used with option "[create]"',
    ),
    (
        ["--delete", "--topic", "t", "--if-not-exists", *BS],
        'Option "[if-not-exists]" can\'t be used with option "[delete]"',
    ),
    (
        ["--delete", "--topic", "t", "--exclude-internal", *BS],
        'Option "[exclude-internal]" can\'t be used with option "[delete]"',
    ),
    (
        ["--list", "--cluster-file", "x", *BS],
        'Option "[cluster-file]" can\'t be used with option "[bootstrap-server]"',
    ),
]


@pytest.mark.asyncio
@pytest.mark.parametrize(("argv", "message"), USAGE_CASES)
async def test_argument_checks_print_kafkas_message_and_the_usage(
    argv: list[str], message: str
) -> None:
    """Each checkArgs failure prints Kafka's message then the option table on stderr, exit 1."""
    rc, out, err = await _run(*argv)
    assert rc == 1
    assert out == ""
    first, second, *_ = err.splitlines()
    assert first == message
    assert second.startswith("Option ")
    assert second.endswith("Description")


@pytest.mark.asyncio
async def test_both_connections_is_an_illegal_argument_without_usage() -> None:
    """--bootstrap-server with --zookeeper is IllegalArgumentException: one line, exit 1."""
    rc, out, err = await _run("--list", *BS, *ZK)
    assert (rc, out, err) == (
        1,
        "",
        "Only one of --bootstrap-server or --zookeeper must be specified\n",
    )


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--list", "--bogus", *ZK], "bogus is not a recognized option"),
        (["--list", *ZK, "--topic"], "Option topic requires an argument"),
        (["--list=yes", *ZK], "Option list does not take an argument"),
        (["--li", *ZK, "--topi", "t"], "topi is not a recognized option"),
    ],
)
async def test_parse_errors_are_jopts_one_line(argv: list[str], message: str) -> None:
    """jopt-simple's parse errors end as its message alone on stderr, exit 1."""
    assert await _run(*argv) == (1, "", message + "\n")


def test_abbreviations_single_dash_and_equals_forms_are_accepted() -> None:
    """Options parse as jopt parses them: unique prefixes, one or two dashes, name=value."""
    opts = parse_options(["-lis", "--topic=a.b", "--zoo", "z", "stray", "--config", "x=y"])
    assert opts.has("list")
    assert opts.value("topic") == "a.b"
    assert opts.value("zookeeper") == "z"
    assert opts.values_of("config") == ("x=y",)


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--create", "--topic", "t", "--partitions", "x", "--replication-factor", "1"],
            "Cannot parse argument 'x' of option partitions",
        ),
        (
            ["--create", "--topic", "t", "--topic", "u", "--partitions", "1"],
            "Found multiple arguments for option topic, but you asked for only one",
        ),
        (
            ["--create", "--topic", "t", "--config", "retention.ms", "--partitions", "1"],
            "requirement failed: Invalid topic config: all configs to be added must be in the"
            ' format "key=val".',
        ),
    ],
)
async def test_bad_values_fail_inside_the_command(argv: list[str], message: str) -> None:
    """Bad option values surface where Kafka reads them: "Error while executing topic command"."""
    rc, out, err = await _run(*argv, "--replication-factor", "1", *ZK)
    assert (rc, err) == (1, "")
    assert out == f"Error while executing topic command : {message}\n"


def test_replica_assignment_parsing_follows_kafka() -> None:
    """Groups by ',' and brokers by ':' (trimmed), with Kafka's errors for bad groups."""
    assert parse_replica_assignment(" 1 : 2 ,3:4,") == {0: [1, 2], 1: [3, 4]}
    with pytest.raises(TopicCommandError, match=r"duplicate entries: 2$"):
        parse_replica_assignment("1:2:2")
    with pytest.raises(
        TopicCommandError, match=r"^Partition 1 has different replication factor: \[I@"
    ):
        parse_replica_assignment("1:2,3")
    with pytest.raises(TopicCommandError, match=r'^For input string: "a"$'):
        parse_replica_assignment("1:a")


def test_config_parsing_validates_names_then_values_and_warns_on_format_version() -> None:
    """--config pairs split on '=' (with spaces), names and values checked as LogConfig does."""
    out = io.StringIO()
    configs = parse_topic_configs_to_add(["retention.ms = 1000", "message.format.version=2.7"], out)
    assert configs == {"retention.ms": "1000", "message.format.version": "2.7"}
    assert out.getvalue().startswith(
        "WARNING: The configuration message.format.version=2.7 is specified."
    )
    with pytest.raises(TopicCommandError, match=r"^Unknown topic config name: nope$"):
        parse_topic_configs_to_add(["nope=1"], io.StringIO())
    with pytest.raises(
        TopicCommandError,
        match=r"^Invalid value x for configuration retention\.ms: Not a number of type LONG$",
    ):
        parse_topic_configs_to_add(["retention.ms=x"], io.StringIO())
    with pytest.raises(TopicCommandError, match=r"^Unknown topic config name: nope$"):
        parse_topic_configs_to_delete(["nope"])


def test_topic_regex_is_kafkas_include_list() -> None:
    """--topic is trimmed, ',' means '|', quotes are stripped, and whole names must match."""
    topics = ["test.topic", "test-topic", "__consumer_offsets", "other"]
    assert select_topics(topics, "test.topic", exclude_internal=False) == [
        "test-topic",
        "test.topic",
    ]
    assert select_topics(topics, '"test\\.topic"', exclude_internal=False) == ["test.topic"]
    assert select_topics(topics, "other, test-topic", exclude_internal=False) == [
        "other",
        "test-topic",
    ]
    assert select_topics(topics, None, exclude_internal=True) == [
        "other",
        "test-topic",
        "test.topic",
    ]
    with pytest.raises(TopicCommandError, match=r"^\[ is an invalid regex\.$"):
        select_topics(topics, "[", exclude_internal=False)


def test_jvm_orders_match_known_java_and_scala_results() -> None:
    """HashMap and Scala HashSet orders reproduce what the JVM prints for known inputs."""
    # new HashMap<>() with these keys iterates them so (hash buckets 0..15 in order).
    assert java_hash_map_order(["retention.ms", "cleanup.policy"]) == [
        "cleanup.policy",
        "retention.ms",
    ]
    assert java_list_hash(["a"]) == 31 + 97
    ints = list(range(5))
    # Scala 2.13: HashSet(0, 1, 2, 3, 4).toList == List(0, 1, 2, 3, 4)... by improved hash.
    assert sorted(scala_hash_set_order(ints)) == ints


@pytest.mark.asyncio
async def test_version_is_printed_before_the_action_checks() -> None:
    """--version prints Kafka's version and exits 0, as printHelpAndExitIfNeeded does."""
    assert await _run("--version") == (0, "2.7.2 (Commit:kemu)\n", "")
