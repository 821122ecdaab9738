"""``kemu leader-election``: Kafka 2.7's ``kafka-leader-election.sh`` (``LeaderElection
Command``), with the ZooKeeper-path behaviour of ``kafka-preferred-replica-election.sh``.

``--election-type preferred`` with one of ``--topic T --partition P``,
``--all-topic-partitions`` or ``--path-to-json-file F`` (``{"partitions": [{"topic": ..,
"partition": ..}, ...]}``) writes ``/admin/preferred_replica_election`` with the partitions
that exist, as ``PreferredReplicaLeaderElectionCommand``'s ZooKeeper command does, and
prints what it printed; the active controller then moves each partition's leadership to
its preferred replica where it can and removes the znode (``actors.controller.
leader_election``). A partition that does not exist is reported and skipped; an election
already pending is refused ("... currently in progress ... Aborting operation").

Where the store is: ``--zookeeper ADDRESS`` (a ZooKeeper connection string, or
``embedded://HOST:PORT``), else the store of the running ``kemu up`` in the cluster file
(``--cluster-file``, default ``.kemu/cluster.json``).

``--bootstrap-server HOST:PORT`` is 2.7's own path (``LeaderElectionCommand``): an
ElectLeaders request (preferred or unclean; ``--all-topic-partitions`` sends null, every
partition) to the controller through the admin client (``default.api.timeout.ms`` 30 s,
``request.timeout.ms`` 15 s, as the tool sets them over ``--admin.config``), then
"Successfully completed leader election (TYPE) for partitions ...", "Valid replica already
elected for partitions ..." (which, as 2.7's tool does, lists the elected partitions, not
the ones that needed no election) and one "Error completing leader election ..." line per
failed partition; the sets print in Scala's ``mutable.HashSet``/``HashMap`` order. A failed
partition makes the command exit 1 with the first line of the exception 2.7's tool dies
with on stderr (``Exception in thread "main" kafka.common.AdminCommandFailedException: N
replica(s) could not be elected``; no stack trace). ``--election-type unclean`` needs
``--bootstrap-server``.

Option mistakes are Kafka's messages, one line on stderr, exit 1; a failed command prints
"Error: <message>" on stdout, exit 1, and writes nothing.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, TextIO

import anyio

from actors.zk import kafka_zk
from actors.zk.store import MetadataStore, StoreSession
from cluster.cli.args import UsageError
from cluster.cli.jopt import Option, Options, option_lines, parse
from cluster.cli.kafka_tools import duplicates, json_node
from cluster.cli.store_command import report_failure, store_address, with_session
from cluster.kafka.client import (
    AdminClientConfig,
    KafkaAdminClient,
    KafkaTimeoutError,
    java_exception,
    load_properties,
)
from protocol import jvm, zkdata
from protocol.control import TopicPartition
from protocol.errors import ErrorCode, KemuError, NodeExistsError
from protocol.ids import TopicName

__all__ = ["LeaderElectionError", "main", "run_leader_election_command"]

ELECTION_TYPES: Final = ("PREFERRED", "UNCLEAN")
ZOOKEEPER_WARNINGS: Final = (
    "Warning: --zookeeper is deprecated and will be removed in a future version of Kafka.\n"
    "Use --bootstrap-server instead to specify a broker to connect to.\n"
)
_SPECS: Final = (
    Option("bootstrap-server", "A hostname and port for the broker to connect to, in the form"
           " host:port.", "host:port"),
    Option("admin.config", "Configuration properties files to pass to the admin client",
           "config file"),
    Option("path-to-json-file", "The JSON file with the list of partition for which leader"
           " elections should be performed.", "Path to JSON file"),
    Option("topic", "Name of topic for which to perform an election.", "topic name"),
    Option("partition", "Partition id for which to perform an election. REQUIRED if --topic"
           " is specified.", "partition id"),
    Option("all-topic-partitions", "Perform election on all of the eligible topic"
           " partitions."),
    Option("election-type", "Type of election to attempt: \"preferred\" or \"unclean\"."
           " REQUIRED.", "election type"),
    Option("help", "Print usage information."),
    Option("version", "Display Kafka version."),
    Option("zookeeper", "kemu: the metadata store, HOST:PORT[/chroot] or"
           " embedded://HOST:PORT.", "urls"),
    Option("cluster-file", "kemu: the cluster file of a running `kemu up`"
           " (default .kemu/cluster.json).", "path"),
)  # fmt: skip


class LeaderElectionError(KemuError):
    """The command failed: "Error: <message>" on stdout, exit 1."""


# ============================================================================ options


def check_args(opts: Options) -> str:
    """``LeaderElectionCommand.validate`` (with kemu's store in place of the required
    --bootstrap-server) and the election type. Returns the type's name."""
    if not opts.has("election-type"):
        raise UsageError("Missing required option(s): election-type")
    exclusive = ("topic", "all-topic-partitions", "path-to-json-file")
    if sum(opts.has(name) for name in exclusive) != 1:
        raise UsageError(
            "One and only one of the following options is required: " + ", ".join(exclusive)
        )
    if opts.has("topic") and not opts.has("partition"):
        raise UsageError("Missing required option(s): partition")
    if opts.has("partition") and not opts.has("topic"):
        raise UsageError("Option partition is only allowed if topic is used")
    value = opts.value("election-type") or ""
    chosen = next((t for t in ELECTION_TYPES if t == value.upper()), None)
    if chosen is None:
        raise UsageError(f"Value [{value}] is not one of [{'|'.join(ELECTION_TYPES)}]")
    if opts.has("zookeeper") and opts.has("cluster-file"):
        raise UsageError('Option "[cluster-file]" can\'t be used with option "[zookeeper]"')
    if opts.has("bootstrap-server"):
        for other in ("zookeeper", "cluster-file"):
            if opts.has(other):
                raise UsageError(
                    f'Option "[bootstrap-server]" can\'t be used with option "[{other}]"'
                )
    elif chosen == "UNCLEAN":
        raise UsageError(
            "An unclean election needs --bootstrap-server (the ElectLeaders API);"
            " /admin/preferred_replica_election only holds preferred elections"
        )
    return chosen


# ============================================================================ the partitions


def parse_election_data(text: str) -> list[TopicPartition]:
    """``parseReplicaElectionData``: the partitions in file order, duplicates refused."""
    try:
        data: Any = json.loads(text)
    except ValueError as exc:
        raise LeaderElectionError("Replica election data is empty") from exc
    if not isinstance(data, dict):
        raise LeaderElectionError(f"Expected JSON object, received {json_node(data)}")
    if "partitions" not in data:
        raise LeaderElectionError('Replica election data is missing "partitions" field')
    entries = data["partitions"]
    if not isinstance(entries, list):
        raise LeaderElectionError(f"Expected JSON array, received {json_node(entries)}")
    partitions: list[TopicPartition] = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise LeaderElectionError(f"Expected JSON object, received {json_node(entry)}")
        for name in ("topic", "partition"):
            if name not in entry:
                raise LeaderElectionError(f"No such field exists: `{name}`")
        topic, partition = entry["topic"], entry["partition"]
        if not isinstance(topic, str):
            raise LeaderElectionError(f"String expected, received {json_node(topic)}")
        if isinstance(partition, bool) or not isinstance(partition, int):
            raise LeaderElectionError(f"Int expected, received {json_node(partition)}")
        partitions.append(TopicPartition(TopicName(topic), partition))
    repeated = duplicates(partitions)
    if repeated:
        raise LeaderElectionError(
            "Replica election data contains duplicate partitions: "
            + ",".join(str(tp) for tp in repeated)
        )
    return partitions


class ScalaSet:
    """A Scala ``immutable.Set[TopicPartition]`` as Kafka's tool builds it: ``Set1``..
    ``Set4`` (insertion order, printed ``Set(...)``) or, from five elements, a CHAMP
    ``HashSet`` (printed ``HashSet(...)``), which stays one when filtered."""

    def __init__(self, items: Sequence[TopicPartition], *, hashed: bool | None = None) -> None:
        distinct = list(dict.fromkeys(items))
        self.hashed = len(distinct) > 4 if hashed is None else hashed
        self.items = (
            jvm.scala_champ_order(
                distinct, [jvm.java_topic_partition_hash(t.topic, t.partition) for t in distinct]
            )
            if self.hashed
            else distinct
        )

    def filter(self, keep: set[TopicPartition]) -> ScalaSet:
        return ScalaSet([t for t in self.items if t in keep], hashed=self.hashed)

    def mk_string(self, sep: str) -> str:
        return sep.join(str(t) for t in self.items)

    def __str__(self) -> str:
        return ("HashSet(" if self.hashed else "Set(") + self.mk_string(", ") + ")"

    def znode_order(self) -> list[TopicPartition]:
        """``PreferredReplicaElectionZNode.encode``'s order: the set mapped to Java maps
        {topic, partition}, a new set of them (a HashSet orders by the maps' hashes)."""
        if not self.hashed:
            return list(self.items)
        topic_key = jvm.java_string_hash("topic")
        partition_key = jvm.java_string_hash("partition")
        hashes = [
            jvm.signed32(
                (topic_key ^ jvm.java_string_hash(t.topic)) + (partition_key ^ t.partition)
            )
            for t in self.items
        ]
        return jvm.scala_champ_order(list(self.items), hashes)


# ============================================================================ the ZooKeeper path


async def elect_preferred_leaders(
    session: StoreSession, requested: list[TopicPartition] | None, out: TextIO
) -> None:
    """``PreferredReplicaLeaderElectionCommand.ZkCommand.electPreferredLeaders``."""
    if requested is not None:
        topics = sorted({TopicName(tp.topic) for tp in requested})
    else:
        topics = sorted(await kafka_zk.get_all_topics(session))
    existing: set[TopicPartition] = set()
    for topic, partitions in (await kafka_zk.get_assignments(session, topics)).items():
        existing.update(TopicPartition(topic, p) for p in partitions)
    if requested is None:
        valid = ScalaSet(sorted(existing, key=lambda t: (t.topic, t.partition)))
        invalid = ScalaSet([])
    else:
        asked = ScalaSet(requested)
        valid = asked.filter(existing)
        invalid = asked.filter({tp for tp in asked.items if tp not in existing})
    election = zkdata.PreferredReplicaElection(partitions=tuple(valid.znode_order()))
    try:
        await kafka_zk.create_preferred_replica_election(session, election)
    except NodeExistsError:
        pending = await kafka_zk.get_preferred_replica_election(session)
        raise LeaderElectionError(
            "Preferred replica leader election currently in progress for "
            + ScalaSet(list(pending)).mk_string(",")
            + ". Aborting operation"
        ) from None
    out.write(f"Created preferred replica election path with {valid.mk_string(',')}\n")
    out.write(f"Successfully started preferred replica election for partitions {valid}\n")
    for tp in invalid.items:
        out.write(
            f"Skipping preferred replica leader election for partition {tp} since it"
            " doesn't exist.\n"
        )


# ============================================================================ the admin client path


class ElectionCommandFailed(KemuError):
    """2.7's tool dies with this exception: its first line on stderr, exit 1."""


def _scala_mutable(partitions: Sequence[TopicPartition]) -> list[TopicPartition]:
    return jvm.scala_mutable_order(
        list(partitions),
        [jvm.java_topic_partition_hash(tp.topic, tp.partition) for tp in partitions],
    )


async def elect_through_brokers(
    bootstrap: str,
    props: dict[str, str],
    election_type: str,
    requested: list[TopicPartition] | None,
    out: TextIO,
) -> None:
    """``LeaderElectionCommand.electLeaders`` through the admin client."""
    config = AdminClientConfig.from_properties(
        {**props, "default.api.timeout.ms": "30000", "request.timeout.ms": "15000"}
    )
    try:
        async with KafkaAdminClient(bootstrap, config) as client:
            response = await client.elect_leaders(
                ELECTION_TYPES.index(election_type),
                None if requested is None else [(tp.topic, tp.partition) for tp in requested],
            )
    except KafkaTimeoutError:
        out.write("Timeout waiting for election results\n")
        raise ElectionCommandFailed(
            'Exception in thread "main" kafka.common.AdminCommandFailedException:'
            " Timeout waiting for election results"
        ) from None
    if response.error_code is ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
        out.write("Not authorized to perform leader election\n")
        raise ElectionCommandFailed(
            'Exception in thread "main" kafka.common.AdminCommandFailedException:'
            " Not authorized to perform leader election"
        )
    if response.error_code is not ErrorCode.NONE:
        raise ElectionCommandFailed(
            'Exception in thread "main" java.util.concurrent.ExecutionException: '
            + java_exception(response.error_code, None)
        )
    succeeded: list[TopicPartition] = []
    failed: dict[TopicPartition, str] = {}
    for topic in response.results:
        for p in topic.partition_results:
            tp = TopicPartition(TopicName(topic.topic), p.partition_id)
            if p.error_code is ErrorCode.NONE:
                succeeded.append(tp)
            elif p.error_code is not ErrorCode.ELECTION_NOT_NEEDED:
                failed[tp] = java_exception(p.error_code, p.error_message)
    noop = any(
        p.error_code is ErrorCode.ELECTION_NOT_NEEDED
        for topic in response.results
        for p in topic.partition_results
    )
    elected = ", ".join(str(tp) for tp in _scala_mutable(succeeded))
    if succeeded:
        out.write(
            f"Successfully completed leader election ({election_type}) for partitions {elected}\n"
        )
    if noop:
        # 2.7's tool prints the elected partitions here too (succeeded.mkString).
        out.write(f"Valid replica already elected for partitions {elected}\n")
    if failed:
        for tp in _scala_mutable(list(failed)):
            out.write(
                f"Error completing leader election ({election_type}) for partition: {tp}:"
                f" {failed[tp]}\n"
            )
        raise ElectionCommandFailed(
            'Exception in thread "main" kafka.common.AdminCommandFailedException:'
            f" {len(failed)} replica(s) could not be elected"
        )


# ============================================================================ running it


def _requested(opts: Options) -> list[TopicPartition] | None:
    path = opts.value("path-to-json-file")
    if path is not None:
        try:
            text = Path(path).read_text()
        except FileNotFoundError as exc:
            raise LeaderElectionError(path) from exc
        except OSError as exc:
            raise LeaderElectionError(f"{path}: {exc.strerror}") from exc
        return parse_election_data(text)
    topic = opts.value("topic")
    if topic is not None:
        partition = opts.int_value("partition")
        assert partition is not None
        return [TopicPartition(TopicName(topic), partition)]
    return None


async def run_leader_election_command(
    argv: Sequence[str],
    *,
    out: TextIO,
    err: TextIO,
    store: MetadataStore | None = None,
) -> int:
    """Run ``kemu leader-election ARGV``; returns the exit status. ``store``, if given, is
    used instead of opening the store's address (tests, in-process clusters)."""
    try:
        opts = parse(argv, _SPECS)
        if opts.has("help") or not opts.values:
            out.write(_usage())
            return 0
        election_type = check_args(opts)
        opts.int_value("partition")  # a bad number is a parse error, before anything runs
        zookeeper = opts.value("zookeeper")
        cluster_file = opts.value("cluster-file")
        bootstrap = opts.value("bootstrap-server")
    except UsageError as exc:  # OptionError too: one line on stderr
        err.write(f"{exc}\n")
        return 1
    if bootstrap is not None:
        try:
            config_file = opts.value("admin.config")
            props = load_properties(Path(config_file)) if config_file else {}
            requested = _requested(opts)
            await elect_through_brokers(bootstrap, props, election_type, requested, out)
            return 0
        except (KemuError, BaseExceptionGroup) as exc:
            return report_failure(exc, out, err, on_stdout=[(LeaderElectionError, "Error: ")])
    if zookeeper is not None:
        out.write(ZOOKEEPER_WARNINGS)
    try:
        requested = _requested(opts)
        address = store_address(zookeeper, cluster_file)
        await with_session(
            address,
            store,
            "kemu-leader-election",
            lambda session: elect_preferred_leaders(session, requested, out),
            cluster_file=cluster_file,
        )
        return 0
    except (KemuError, BaseExceptionGroup) as exc:
        return report_failure(exc, out, err, on_stdout=[(LeaderElectionError, "Error: ")])


def _usage() -> str:
    header = (
        "This tool attempts to elect a new leader for a set of topic partitions. The type of"
        " elections supported are preferred replicas and unclean replicas."
    )
    return "\n".join([header, "", *option_lines(_SPECS)]) + "\n"


def main(argv: Sequence[str], *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``kemu leader-election ARGS``: run it and return the exit status."""
    return anyio.run(
        lambda: run_leader_election_command(argv, out=out or sys.stdout, err=err or sys.stderr)
    )
