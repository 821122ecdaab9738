"""``kemu reassign-partitions``: Kafka 2.7's ``kafka-reassign-partitions.sh``
(``ReassignPartitionsCommand``) on its ZooKeeper path.

``--execute --reassignment-json-file F`` checks the file as Kafka does (same messages),
checks that its partitions and brokers exist, refuses to run while
``/admin/reassign_partitions`` exists, prints the current assignment of those partitions
(to roll back with), and writes the znode; the active controller then carries the
reassignment out and removes the znode (``actors.controller.reassignment``).
``--verify --reassignment-json-file F`` prints the state of each partition of the file
(complete, still in progress, or not reassigned to what the file says) and, once nothing
is in progress, clears the replication throttles of the brokers and topics involved.

Where the store is: ``--zookeeper ADDRESS`` (a ZooKeeper connection string, or
``embedded://HOST:PORT`` for the embedded store of a ``kemu up``), else the store of the
running ``kemu up`` in the cluster file (``--cluster-file``, default ``.kemu/cluster.json``).
``--list --bootstrap-server S`` asks the active controller (ListPartitionReassignments) and
prints "Current partition reassignments:" and a line per partition in flight, as
``curReassignmentsToString`` does. ``--execute``, ``--verify`` and ``--cancel`` over
``--bootstrap-server``, ``--generate`` and the throttle options are refused.

Output follows Kafka: messages on stdout; a failed command prints "Error: <message>" (a
refusal to run over an existing reassignment, its message alone) and exits 1. A command
line that does not parse, or breaks the option rules, is one line on stderr, exit 1.
Nothing is written once an input is found bad.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TextIO

import anyio

from actors.controller.reassignment import scala_map_entries
from actors.zk import kafka_zk
from actors.zk.store import MetadataStore, StoreSession
from cluster.cli.args import UsageError
from cluster.cli.jopt import Option, Options, option_lines, parse
from cluster.cli.kafka_tools import duplicates, json_node
from cluster.cli.store_command import report_failure, store_address, with_session
from cluster.kafka.client import KafkaAdminClient, api_error
from protocol import jvm, zkdata
from protocol.control import TopicPartition
from protocol.errors import ErrorCode, KemuError, NodeExistsError, NoNodeError
from protocol.ids import BrokerId, TopicName

__all__ = ["ReassignCommandError", "main", "run_reassign_command"]

ANY_LOG_DIR: Final = "any"
CANNOT_EXECUTE_BECAUSE_OF_EXISTING: Final = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to"
    " override this and create a new partition assignment in addition to the existing one."
    " The --additional flag can also be used to change the throttle by resubmitting the"
    " current reassignment."
)
ZOOKEEPER_DEPRECATED: Final = (
    "Warning: --zookeeper is deprecated, and will be removed in a future version of Kafka."
)
VERIFY_ON_ZOOKEEPER: Final = (
    "Warning: because you are using the deprecated --zookeeper option, the results may be"
    " incomplete.  Use --bootstrap-server instead for more accurate results."
)
BROKER_THROTTLES: Final = (
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
)
TOPIC_THROTTLES: Final = (
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
)

_ACTIONS: Final = ("generate", "execute", "verify", "cancel", "list")
_SPECS: Final = (
    Option("verify", "Verify if the reassignment completed as specified by the"
           " --reassignment-json-file option."),
    Option("generate", "Generate a candidate partition reassignment configuration."),
    Option("execute", "Kick off the reassignment as specified by the"
           " --reassignment-json-file option."),
    Option("cancel", "Cancel an active reassignment."),
    Option("list", "List all active partition reassignments."),
    Option("bootstrap-server", "the server(s) to use for bootstrapping.",
           "Server(s) to use for bootstrapping"),
    Option("command-config", "Property file containing configs to be passed to Admin Client.",
           "Admin client property file"),
    Option("zookeeper", "The connection string for the zookeeper connection in the form"
           " host:port (or embedded://HOST:PORT).", "urls"),
    Option("reassignment-json-file", "The JSON file with the partition reassignment"
           " configuration.", "manual assignment json file path"),
    Option("topics-to-move-json-file", "Generate a reassignment configuration to move the"
           " partitions of the specified topics.", "topics to reassign json file path"),
    Option("broker-list", "The list of brokers to which the partitions need to be"
           " reassigned.", "brokerlist"),
    Option("disable-rack-aware", "Disable rack aware replica assignment"),
    Option("throttle", "The movement of partitions between brokers will be throttled to"
           " this value (bytes/sec).", "throttle"),
    Option("replica-alter-log-dirs-throttle", "The movement of replicas between log"
           " directories on the same broker will be throttled to this value (bytes/sec).",
           "replicaAlterLogDirsThrottle"),
    Option("timeout", "The maximum time in ms to wait for log directory replica assignment"
           " to begin.", "timeout"),
    Option("additional", "Execute this reassignment in addition to any other ongoing ones."),
    Option("preserve-throttles", "Do not modify broker or topic throttles."),
    Option("help", "Print usage information."),
    Option("version", "Display Kafka version."),
    Option("cluster-file", "kemu: the cluster file of a running `kemu up`"
           " (default .kemu/cluster.json).", "path"),
)  # fmt: skip
_BY_NAME: Final = {spec.name: spec for spec in _SPECS}
_REQUIRED: Final = {
    "verify": ("reassignment-json-file",),
    "generate": ("topics-to-move-json-file", "broker-list"),
    "execute": ("reassignment-json-file",),
    "cancel": ("reassignment-json-file",),
    "list": (),
}
_PERMITTED: Final = {
    "verify": ("bootstrap-server", "command-config", "preserve-throttles", "zookeeper"),
    "generate": (
        "bootstrap-server",
        "broker-list",
        "command-config",
        "disable-rack-aware",
        "zookeeper",
    ),
    "execute": (
        "additional",
        "bootstrap-server",
        "command-config",
        "throttle",
        "replica-alter-log-dirs-throttle",
        "timeout",
        "zookeeper",
    ),
    "cancel": ("bootstrap-server", "command-config", "preserve-throttles", "timeout"),
    "list": ("bootstrap-server", "command-config"),
}
_BOOTSTRAP_ONLY: Final = (
    "additional",
    "cancel",
    "command-config",
    "replica-alter-log-dirs-throttle",
    "list",
    "timeout",
)


class ReassignCommandError(KemuError):
    """The command failed: printed as "Error: <message>" (Kafka's main), exit 1."""


class TerseReassignmentError(KemuError):
    """A failure printed as its message alone (Kafka's TerseReassignmentFailureException)."""


# ============================================================================ options


def check_args(opts: Options) -> str:
    """``validateAndParseArgs``: the action, the connection, the required and permitted
    options. Returns the action."""
    actions = [a for a in _ACTIONS if opts.has(a)]
    if len(actions) != 1:
        raise UsageError(
            "Command must include exactly one action: " + ", ".join(f"--{a}" for a in _ACTIONS)
        )
    (action,) = actions
    # kemu: the cluster file stands in for --zookeeper when neither is given.
    for name in _REQUIRED[action]:
        if not opts.has(name):
            raise UsageError(f'Missing required argument "{_BY_NAME[name]}"')
    allowed = {action, *_REQUIRED[action], *_PERMITTED[action], "cluster-file"}
    for name in opts.values:
        if name not in allowed:
            raise UsageError(f'Option "{_BY_NAME[name]}" can\'t be used with action "[{action}]"')
    if not opts.has("bootstrap-server"):
        for name in _BOOTSTRAP_ONLY:
            if opts.has(name):
                raise UsageError(f'You must specify --bootstrap-server when using "[{name}]"')
    if opts.has("cluster-file") and opts.has("zookeeper"):
        raise UsageError('Option "[cluster-file]" can\'t be used with option "[zookeeper]"')
    # kemu's limits: --list over the wire; the other actions on the ZooKeeper path only.
    if action == "list":
        if opts.has("command-config"):
            raise UsageError("kemu reassign-partitions does not read --command-config")
        return action
    if opts.has("bootstrap-server"):
        raise UsageError(
            "kemu reassign-partitions takes --bootstrap-server only with --list: use"
            " --zookeeper, or neither to use the cluster file's store"
        )
    if action not in ("execute", "verify"):
        raise UsageError(
            f"kemu reassign-partitions supports --execute, --verify and --list, not --{action}"
        )
    return action


# ============================================================================ JSON


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ReassignCommandError(f"Expected JSON object, received {json_node(value)}")
    return value


def _array(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ReassignCommandError(f"Expected JSON array, received {json_node(value)}")
    return value


def _field(obj: dict[str, Any], name: str) -> Any:
    if name not in obj:
        raise ReassignCommandError(f"No such field exists: `{name}`")
    return obj[name]


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not -(2**31) <= value < 2**31:
        raise ReassignCommandError(f"Int expected, received {json_node(value)}")
    return value


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise ReassignCommandError(f"String expected, received {json_node(value)}")
    return value


def _int_list(value: Any) -> list[int]:
    if not isinstance(value, list):
        raise ReassignCommandError(f"JSON array expected, received {json_node(value)}")
    return [_int(v) for v in value]


def _str_list(value: Any) -> list[str]:
    if not isinstance(value, list):
        raise ReassignCommandError(f"JSON array expected, received {json_node(value)}")
    return [_str(v) for v in value]


@dataclass(frozen=True)
class ReassignmentFile:
    """``parsePartitionReassignmentData``: the partitions in file order (duplicates kept,
    to be reported), and the replicas given a log dir other than "any"."""

    partitions: tuple[tuple[TopicPartition, tuple[BrokerId, ...]], ...]
    log_dirs: tuple[tuple[TopicPartition, BrokerId, str], ...]


def parse_reassignment(text: str) -> ReassignmentFile:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ReassignCommandError("The input string is not a valid JSON") from exc
    version = _int(_object(data)["version"]) if "version" in _object(data) else 1
    if version != 1:
        raise ReassignCommandError(f"Not supported version field value {version}")
    partitions: list[tuple[TopicPartition, tuple[BrokerId, ...]]] = []
    log_dirs: list[tuple[TopicPartition, BrokerId, str]] = []
    for entry in _array(data["partitions"]) if "partitions" in data else []:
        fields = _object(entry)
        tp = TopicPartition(
            TopicName(_str(_field(fields, "topic"))), _int(_field(fields, "partition"))
        )
        replicas = _int_list(_field(fields, "replicas"))
        dirs = _str_list(fields["log_dirs"]) if "log_dirs" in fields else None
        if dirs is None:
            dirs = [ANY_LOG_DIR] * len(replicas)
        if len(replicas) != len(dirs):
            raise ReassignCommandError(
                f"Size of replicas list {_scala_list(replicas)} is different from size of"
                f" log dirs list {_scala_list(dirs)} for partition {tp}"
            )
        partitions.append((tp, tuple(BrokerId(r) for r in replicas)))
        log_dirs += [
            (tp, BrokerId(r), d) for r, d in zip(replicas, dirs, strict=True) if d != ANY_LOG_DIR
        ]
    return ReassignmentFile(tuple(partitions), tuple(log_dirs))


def _scala_list(items: Iterable[object]) -> str:
    return "List(" + ", ".join(str(i) for i in items) + ")"


def parse_execute_args(
    text: str,
) -> tuple[list[tuple[TopicPartition, tuple[BrokerId, ...]]], ReassignmentFile]:
    """``parseExecuteAssignmentArgs``: the proposed reassignment as Kafka's ``toMap``
    iterates it, with Kafka's checks of the file."""
    parsed = parse_reassignment(text)
    if not parsed.partitions:
        raise ReassignCommandError("Partition reassignment list cannot be empty")
    if any(not replicas for _, replicas in parsed.partitions):
        raise ReassignCommandError("Partition replica list cannot be empty")
    dup_partitions = duplicates([tp for tp, _ in parsed.partitions])
    if dup_partitions:
        raise ReassignCommandError(
            "Partition reassignment contains duplicate topic partitions: "
            + ",".join(str(tp) for tp in dup_partitions)
        )
    dup_replicas = [
        (tp, duplicates(list(replicas)))
        for tp, replicas in parsed.partitions
        if duplicates(list(replicas))
    ]
    if dup_replicas:
        raise ReassignCommandError(
            "Partition replica lists may not contain duplicate entries: "
            + ". ".join(
                f"{tp} contains multiple entries for {','.join(str(r) for r in dups)}"
                for tp, dups in dup_replicas
            )
        )
    return scala_map_entries(list(parsed.partitions)), parsed


def format_as_reassignment_json(assignment: dict[TopicPartition, tuple[BrokerId, ...]]) -> str:
    """``formatAsReassignmentJson`` with every log dir "any": sorted by topic, partition."""
    entries = [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "replicas": list(assignment[tp]),
            "log_dirs": [ANY_LOG_DIR] * len(assignment[tp]),
        }
        for tp in sorted(assignment, key=lambda t: (t.topic, t.partition))
    ]
    return json.dumps(
        {"version": 1, "partitions": entries}, separators=(",", ":"), ensure_ascii=False
    )


# ============================================================================ the actions


class ZkReassignCommand:
    """The ZooKeeper path of ``ReassignPartitionsCommand``, on one store session."""

    def __init__(self, session: StoreSession, out: TextIO, *, zookeeper_warnings: bool) -> None:
        self._session = session
        self._out = out
        self._warn = zookeeper_warnings

    def _print(self, line: str) -> None:
        self._out.write(line + "\n")

    async def _current(
        self, topics: Iterable[TopicName]
    ) -> dict[TopicPartition, tuple[BrokerId, ...]]:
        """``getReplicaAssignmentForTopics``: every replica (adding ones included)."""
        found: dict[TopicPartition, tuple[BrokerId, ...]] = {}
        for topic in sorted(set(topics)):
            assignment = await kafka_zk.get_topic_assignment(self._session, topic) or {}
            for p, a in assignment.items():
                found[TopicPartition(topic, p)] = a.replicas
        return found

    async def execute(self, text: str, throttle: str | None) -> None:
        proposed, parsed = parse_execute_args(text)
        if parsed.log_dirs:
            raise ReassignCommandError(
                "bootstrap-server needs to be provided when replica reassignments are present."
            )
        if throttle is not None and throttle.strip() != "-1":
            raise ReassignCommandError(
                "kemu does not emulate replication throttles: run without --throttle"
            )
        topics = [TopicName(tp.topic) for tp, _ in proposed]
        existing = await self._current(topics)
        missing = [tp for tp, _ in proposed if tp not in existing]
        if missing:
            raise ReassignCommandError(
                "The proposed assignment contains non-existent partitions: " + _scala_list(missing)
            )
        brokers = set(await kafka_zk.get_brokers(self._session))
        unknown = [b for _, replicas in proposed for b in replicas if b not in brokers]
        if unknown:
            distinct = list(dict.fromkeys(unknown))
            raise ReassignCommandError(
                "The proposed assignment contains non-existent brokerIDs: "
                + ",".join(str(b) for b in jvm.scala_immutable_order(distinct))
            )
        if await self._session.exists(zkdata.REASSIGN_PARTITIONS_PATH) is not None:
            raise TerseReassignmentError(CANNOT_EXECUTE_BECAUSE_OF_EXISTING)
        wanted = {tp for tp, _ in proposed}
        current = {tp: r for tp, r in existing.items() if tp in wanted}
        self._print(
            "Current partition replica assignment\n\n"
            + format_as_reassignment_json(current)
            + "\n\nSave this to use as the --reassignment-json-file option during rollback"
        )
        payload = zkdata.PartitionReassignment(
            partitions=tuple(
                zkdata.PartitionReplicas(
                    topic=TopicName(tp.topic), partition=tp.partition, replicas=replicas
                )
                for tp, replicas in proposed
            )
        )
        try:
            await kafka_zk.create_partition_reassignment(self._session, payload)
        except NodeExistsError:  # another tool was faster
            raise TerseReassignmentError(CANNOT_EXECUTE_BECAUSE_OF_EXISTING) from None
        started = sorted(wanted, key=lambda t: (t.topic, t.partition))
        self._print(
            "Successfully started partition reassignment"
            + ("" if len(started) == 1 else "s")
            + " for "
            + ",".join(str(tp) for tp in started)
        )

    async def verify(self, text: str, preserve_throttles: bool) -> None:
        parsed = parse_reassignment(text)
        if parsed.log_dirs:
            raise ReassignCommandError(
                "bootstrap-server needs to be provided when replica reassignments are present."
            )
        if self._warn:
            self._print(VERIFY_ON_ZOOKEEPER)
        try:
            pending = await kafka_zk.get_partition_reassignment(self._session)
        except KemuError:
            pending = None  # Kafka ignores a znode it cannot read
        moving = {
            TopicPartition(p.topic, p.partition) for p in (pending.partitions if pending else ())
        }
        targets = dict(parsed.partitions)
        current = await self._current(TopicName(tp.topic) for tp in targets)
        lines = ["Status of partition reassignment:"]
        for tp in sorted(targets, key=lambda t: (t.topic, t.partition)):
            now = current.get(tp, ())
            if tp in moving:
                lines.append(f"Reassignment of partition {tp} is still in progress.")
            elif now == targets[tp]:
                lines.append(f"Reassignment of partition {tp} is complete.")
            else:
                lines.append(
                    f"There is no active reassignment of partition {tp}, but replica set is"
                    f" {','.join(map(str, now))} rather than"
                    f" {','.join(map(str, targets[tp]))}."
                )
        self._print("\n".join(lines))
        if not moving and not preserve_throttles:
            await self._clear_all_throttles(parsed.partitions)

    async def _clear_all_throttles(
        self, targets: Sequence[tuple[TopicPartition, tuple[BrokerId, ...]]]
    ) -> None:
        """``clearAllThrottles``: the throttle configs of the live brokers and the target
        replicas' brokers, and of the file's topics, removed where set."""
        active = list(await kafka_zk.get_brokers(self._session))
        targeted = [b for _, replicas in targets for b in replicas]
        brokers = jvm.scala_immutable_order(list(dict.fromkeys([*active, *targeted])))
        self._print(
            "Clearing broker-level throttles on broker"
            + ("" if len(brokers) == 1 else "s")
            + " "
            + ",".join(map(str, brokers))
        )
        for broker in brokers:
            await self._remove_configs(zkdata.ConfigType.BROKER, str(broker), BROKER_THROTTLES)
        topics = list(dict.fromkeys(tp.topic for tp, _ in targets))
        ordered = jvm.scala_immutable_order(topics)
        self._print(
            "Clearing topic-level throttles on topic"
            + ("" if len(ordered) == 1 else "s")
            + " "
            + ",".join(ordered)
        )
        for topic in ordered:
            await self._remove_configs(zkdata.ConfigType.TOPIC, topic, TOPIC_THROTTLES)

    async def _remove_configs(
        self, entity: zkdata.ConfigType, name: str, keys: Sequence[str]
    ) -> None:
        path = f"{zkdata.CONFIG_PATH}/{entity.value}/{name}"
        try:
            data, _ = await self._session.get(path)
        except NoNodeError:
            return
        config = dict(zkdata.EntityConfig.decode(data).config)
        if not any(key in config for key in keys):
            return
        for key in keys:
            config.pop(key, None)
        await self._session.set(path, zkdata.EntityConfig(config=config).encode())
        await self._session.create(
            zkdata.CONFIG_CHANGE_SEQUENCE_PATH,
            zkdata.ConfigChangeNotification.for_entity(entity, name).encode(),
            sequential=True,
            make_parents=True,
        )


# ============================================================================ running it


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except FileNotFoundError as exc:
        raise ReassignCommandError(path) from exc  # NoSuchFileException's message
    except OSError as exc:
        raise ReassignCommandError(f"{path}: {exc.strerror}") from exc


async def run_reassign_command(
    argv: Sequence[str],
    *,
    out: TextIO,
    err: TextIO,
    store: MetadataStore | None = None,
) -> int:
    """Run ``kemu reassign-partitions ARGV``; returns the exit status. ``store``, if given,
    is used instead of opening the store's address (tests, in-process clusters)."""
    try:
        opts = parse(argv, _SPECS)
        if opts.has("help") or not opts.values:
            out.write(_usage())
            return 0
        action = check_args(opts)
        if action == "list":
            bootstrap = opts.value("bootstrap-server")
            assert bootstrap is not None
            out.write(await current_reassignments(bootstrap) + "\n")
            return 0
        json_file = opts.value("reassignment-json-file")
        assert json_file is not None
        zookeeper = opts.value("zookeeper")
        cluster_file = opts.value("cluster-file")
        throttle = opts.value("throttle")
    except UsageError as exc:  # OptionError too: one line on stderr
        err.write(f"{exc}\n")
        return 1
    except (KemuError, BaseExceptionGroup) as exc:
        return report_failure(exc, out, err, on_stdout=[])
    if zookeeper is not None:
        out.write(ZOOKEEPER_DEPRECATED + "\n")
    try:
        text = _read(json_file)
        address = store_address(zookeeper, cluster_file)
        await with_session(
            address,
            store,
            "kemu-reassign",
            lambda session: _run(session, action, text, opts, out, throttle, zookeeper is not None),
            cluster_file=cluster_file,
        )
        return 0
    except (KemuError, BaseExceptionGroup) as exc:
        return report_failure(
            exc,
            out,
            err,
            on_stdout=[(TerseReassignmentError, ""), (ReassignCommandError, "Error: ")],
        )


async def current_reassignments(bootstrap: str) -> str:
    """``curReassignmentsToString``: every reassignment in flight, by topic then
    partition, as the active controller lists it."""
    async with KafkaAdminClient(bootstrap) as client:
        listed = await client.list_partition_reassignments()
    if listed.error_code is not ErrorCode.NONE:
        raise api_error(listed.error_code, listed.error_message)
    moving = sorted(((t.name, p.partition_index), p) for t in listed.topics for p in t.partitions)
    if not moving:
        return "No partition reassignments found."
    lines = ["Current partition reassignments:"]
    for (topic, partition), p in moving:
        adding = f" adding: {','.join(map(str, p.adding_replicas))}." if p.adding_replicas else ""
        removing = (
            f" removing: {','.join(map(str, p.removing_replicas))}." if p.removing_replicas else ""
        )
        lines.append(
            f"{topic}-{partition}: replicas: {','.join(map(str, p.replicas))}.{adding}{removing}"
        )
    return "\n".join(lines)


async def _run(
    session: StoreSession,
    action: str,
    text: str,
    opts: Options,
    out: TextIO,
    throttle: str | None,
    zookeeper: bool,
) -> None:
    command = ZkReassignCommand(session, out, zookeeper_warnings=zookeeper)
    if action == "execute":
        await command.execute(text, throttle)
    else:
        await command.verify(text, opts.has("preserve-throttles"))


def _usage() -> str:
    header = "This tool helps to move topic partitions between replicas."
    return "\n".join([header, "", *option_lines(_SPECS)]) + "\n"


def main(argv: Sequence[str], *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``kemu reassign-partitions ARGS``: run it and return the exit status."""
    return anyio.run(
        lambda: run_reassign_command(argv, out=out or sys.stdout, err=err or sys.stderr)
    )
