"""Bad ``kemu topics`` input on both paths (``--zookeeper`` on a real ZooKeeper and on the
embedded store, ``--bootstrap-server`` over the wire): Kafka's message, Kafka's exit
status, and not one znode written or changed. One cluster serves the whole module, with
the topics ``existing`` (2 partitions), ``a.b`` and ``__consumer_offsets``."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest

from tests.support.hosting import hosted_fixture
from tests.support.topics_harness import STORE, WIRE, Harness, running_harness
from tests.support.zookeeper import STORES, ZooKeeperServer

ERR = "Error while executing topic command : "
WARN_COLLIDE = (
    "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore"
    " ('_') could collide. To avoid issues it is best to use either, but not both.\n"
)
WARN_PARTITIONS = (
    "WARNING: If partitions are increased for a topic that has a key, the partition logic or"
    " ordering of the messages will be affected\n"
)
LONG = "x" * 250
ILLEGAL = (
    'Topic name "bad name" is illegal, it contains a character other than ASCII'
    " alphanumerics, '.', '_' and '-'"
)


def create(topic: str, *more: str) -> list[str]:
    return ["--create", "--topic", topic, *more]


def alter(topic: str, partitions: str, *more: str) -> list[str]:
    return ["--alter", "--topic", topic, "--partitions", partitions, *more]


def counts(partitions: str, rf: str) -> list[str]:
    return ["--partitions", partitions, "--replication-factor", rf]


@hosted_fixture(
    scope="module",
    loop_scope="module",
    params=STORES,
)
async def shared(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Harness]:
    """One cluster for the module, with the topics the cases need already there."""
    server: ZooKeeperServer | None = (
        request.getfixturevalue("zookeeper_server") if request.param == "zookeeper" else None
    )
    async for harness in running_harness(tmp_path_factory.mktemp("bad-input"), server):
        for argv in (
            create("existing", *counts("2", "2")),
            create("a.b", *counts("1", "1")),
            create("__consumer_offsets", *counts("1", "1")),
        ):
            result = await harness.topics(*argv, via=STORE)
            assert result.rc == 0, result
        yield harness


# (argv, via, expected stdout or a regex of it, expected stderr's first line)
CASES: list[tuple[str, list[str], str, str, str]] = [
    ("bad-name", create("bad name", *counts("1", "1")), STORE, ERR + ILLEGAL + "\n", ""),
    (
        "name-250",
        create(LONG, *counts("1", "1")),
        STORE,
        f"{ERR}Topic name is illegal, it can't be longer than 249 characters, topic name: {LONG}\n",
        "",
    ),
    (
        "dot",
        create(".", *counts("1", "1")),
        STORE,
        WARN_COLLIDE + ERR + 'Topic name cannot be "." or ".."\n',
        "",
    ),
    (
        "partitions-0",
        create("p0", *counts("0", "1")),
        STORE,
        ERR + "Number of partitions must be larger than 0.\n",
        "",
    ),
    (
        "partitions-neg",
        create("p0", *counts("-1", "1")),
        STORE,
        ERR + "Number of partitions must be larger than 0.\n",
        "",
    ),
    (
        "rf-0",
        create("r0", *counts("1", "0")),
        STORE,
        ERR + "Replication factor must be larger than 0.\n",
        "",
    ),
    (
        "rf-neg",
        create("r0", *counts("1", "-1")),
        STORE,
        ERR + "Replication factor must be larger than 0.\n",
        "",
    ),
    (
        "rf-too-big",
        create("r4", *counts("1", "4")),
        STORE,
        ERR + "Replication factor: 4 larger than available brokers: 3.\n",
        "",
    ),
    (
        "rf-short-max",
        create("r4", *counts("1", "32768")),
        STORE,
        ERR + "Replication factor: 32768 larger than available brokers: 3.\n",
        "",
    ),
    (
        "duplicate-broker",
        create("m", "--replica-assignment", "0:0,1:2"),
        STORE,
        ERR + "Partition replica lists may not contain duplicate entries: 0\n",
        "",
    ),
    (
        "uneven-rf",
        create("m", "--replica-assignment", "0:1,2"),
        STORE,
        "re:"
        + re.escape(ERR + "Partition 1 has different replication factor: [I@")
        + "[0-9a-f]+\n",
        "",
    ),
    (
        "unknown-config",
        create("c", *counts("1", "1"), "--config", "foo=bar"),
        STORE,
        ERR + "Unknown topic config name: foo\n",
        "",
    ),
    (
        "malformed-config",
        create("c", *counts("1", "1"), "--config", "retention.ms"),
        STORE,
        ERR + "requirement failed: Invalid topic config: all configs to be added must be in the"
        ' format "key=val".\n',
        "",
    ),
    (
        "bad-config-value",
        create("c", *counts("1", "1"), "--config", "retention.ms=abc"),
        STORE,
        ERR + "Invalid value abc for configuration retention.ms: Not a number of type LONG\n",
        "",
    ),
    (
        "exists",
        create("existing", *counts("1", "1")),
        STORE,
        ERR + "Topic 'existing' already exists.\n",
        "",
    ),
    (
        "collides",
        create("a_b", *counts("1", "1")),
        STORE,
        WARN_COLLIDE + ERR + "Topic 'a_b' collides with existing topics: a.b\n",
        "",
    ),
    (
        "assignment-with-partitions",
        create("m", "--replica-assignment", "0:1", "--partitions", "1"),
        STORE,
        "",
        'Option "[replica-assignment]" can\'t be used with option "[partitions]"',
    ),
    (
        "assignment-with-rf",
        create("m", "--replica-assignment", "0:1", "--replication-factor", "2"),
        STORE,
        "",
        'Option "[replica-assignment]" can\'t be used with option "[replication-factor]"',
    ),
    (
        "alter-missing",
        ["--alter", "--topic", "nope", "--partitions", "3"],
        STORE,
        ERR + "Topic 'nope' does not exist as expected\n",
        "",
    ),
    (
        "describe-missing",
        ["--describe", "--topic", "nope"],
        STORE,
        ERR + "Topic 'nope' does not exist as expected\n",
        "",
    ),
    (
        "delete-missing",
        ["--delete", "--topic", "nope"],
        STORE,
        ERR + "Topic 'nope' does not exist as expected\n",
        "",
    ),
    (
        "decrease",
        ["--alter", "--topic", "existing", "--partitions", "1"],
        STORE,
        WARN_PARTITIONS + ERR + "The number of partitions for a topic can only be increased."
        " Topic existing currently has 2 partitions, 1 would not be an increase.\n",
        "",
    ),
    (
        "same-count",
        ["--alter", "--topic", "existing", "--partitions", "2"],
        STORE,
        WARN_PARTITIONS + ERR + "The number of partitions for a topic can only be increased."
        " Topic existing currently has 2 partitions, 2 would not be an increase.\n",
        "",
    ),
    (
        "unknown-broker",
        alter("existing", "3", "--replica-assignment", "0:1,1:2,5:6"),
        STORE,
        WARN_PARTITIONS + ERR + "Some brokers specified for partition id 2 are not available."
        " Specified brokers: 5, 6, available brokers: 0, 1, 2.\n",
        "",
    ),
    (
        "internal-partitions",
        ["--alter", "--topic", "__consumer_offsets", "--partitions", "3"],
        STORE,
        ERR + "The number of partitions for the internal topic __consumer_offsets cannot be"
        " changed.\n",
        "",
    ),
    ("if-not-exists", create("existing", *counts("1", "1"), "--if-not-exists"), STORE, "", ""),
    (
        "alter-if-exists",
        ["--alter", "--topic", "nope", "--partitions", "3", "--if-exists"],
        STORE,
        "",
        "",
    ),
    ("describe-if-exists", ["--describe", "--topic", "nope", "--if-exists"], STORE, "", ""),
    ("delete-if-exists", ["--delete", "--topic", "nope", "--if-exists"], STORE, "", ""),
    # over the wire: the broker's checks and messages, or the client's own
    ("w-bad-name", create("bad name", *counts("1", "1")), WIRE, ERR + ILLEGAL + "\n", ""),
    (
        "w-name-250",
        create(LONG, *counts("1", "1")),
        WIRE,
        f"{ERR}Topic name is illegal, it can't be longer than 249 characters, topic name: {LONG}\n",
        "",
    ),
    (
        "w-partitions-0",
        create("p0", *counts("0", "1")),
        WIRE,
        ERR + "The partitions must be greater than 0\n",
        "",
    ),
    (
        "w-rf-0",
        create("r0", *counts("1", "0")),
        WIRE,
        ERR + "The replication factor must be between 1 and 32767 inclusive\n",
        "",
    ),
    (
        "w-rf-short-max",
        create("r0", *counts("1", "32768")),
        WIRE,
        ERR + "The replication factor must be between 1 and 32767 inclusive\n",
        "",
    ),
    (
        "w-rf-too-big",
        create("r4", *counts("1", "4")),
        WIRE,
        ERR + "Replication factor: 4 larger than available brokers: 3.\n",
        "",
    ),
    (
        "w-duplicate-broker",
        create("m", "--replica-assignment", "0:0"),
        WIRE,
        ERR + "Partition replica lists may not contain duplicate entries: 0\n",
        "",
    ),
    (
        "w-unknown-config",
        create("c", "--config", "foo=bar"),
        WIRE,
        ERR + "Unknown topic config name: foo\n",
        "",
    ),
    (
        "w-exists",
        create("existing"),
        WIRE,
        ERR + "Topic 'existing' already exists.\n",
        "",
    ),
    ("w-if-not-exists", create("existing", "--if-not-exists"), WIRE, "", ""),
    (
        "w-collides",
        create("a_b"),
        WIRE,
        WARN_COLLIDE + ERR + "Topic 'a_b' collides with existing topics: a.b\n",
        "",
    ),
    (
        "w-decrease",
        ["--alter", "--topic", "existing", "--partitions", "1"],
        WIRE,
        ERR + "Topic currently has 2 partitions, which is higher than the requested 1.\n",
        "",
    ),
    (
        "w-same-count",
        ["--alter", "--topic", "existing", "--partitions", "2"],
        WIRE,
        ERR + "Topic already has 2 partitions.\n",
        "",
    ),
    (
        "w-too-few-groups",
        alter("existing", "4", "--replica-assignment", "0:1,1:2,2:0"),
        WIRE,
        ERR + "Increasing the number of partitions by 2 but 1 assignments provided.\n",
        "",
    ),
    (
        "w-alter-missing",
        ["--alter", "--topic", "nope", "--partitions", "3"],
        WIRE,
        ERR + "Topic 'nope' does not exist as expected\n",
        "",
    ),
    (
        "w-describe-missing",
        ["--describe", "--topic", "nope"],
        WIRE,
        ERR + "Topic 'nope' does not exist as expected\n",
        "",
    ),
    (
        "w-delete-missing",
        ["--delete", "--topic", "nope"],
        WIRE,
        ERR + "Topic 'nope' does not exist as expected\n",
        "",
    ),
]


@pytest.mark.asyncio(loop_scope="module")  # the loop of the module's shared cluster
@pytest.mark.parametrize(
    ("argv", "via", "out", "err"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
async def test_bad_input_prints_kafkas_message_and_writes_nothing(
    shared: Harness, argv: list[str], via: str, out: str, err: str
) -> None:
    """A bad command prints exactly Kafka's output, exits as Kafka does, and leaves every
    znode as it was."""
    before = await shared.snapshot()
    result = await shared.topics(*argv, via=via)
    assert result.rc == (1 if out.startswith(("re:", ERR)) or ERR in out or err else 0)
    if out.startswith("re:"):
        assert re.fullmatch(out[3:], result.out), result.out
    else:
        assert result.out == out
    if err:
        assert result.err.splitlines()[0] == err
    else:
        assert result.err == ""
    assert await shared.snapshot() == before
