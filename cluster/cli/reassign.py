"""``kemu reassign-partitions``: Kafka 2.7's ``kafka-reassign-partitions.sh``
(``ReassignPartitionsCommand``), on both of its paths.

``--bootstrap-server S`` is 2.7's own path, through the admin client
(``cluster.cli.reassign_admin``): ``--generate``, ``--execute`` (with ``--additional``,
``--throttle``, ``--replica-alter-log-dirs-throttle``, ``--timeout``), ``--verify`` and
``--cancel`` (with ``--preserve-throttles``), ``--list``, and ``--command-config``.

``--zookeeper ADDRESS`` (a ZooKeeper connection string, or ``embedded://HOST:PORT`` for the
embedded store of a ``kemu up``), or neither (the store of the running ``kemu up`` in the
cluster file, ``--cluster-file``, default ``.kemu/cluster.json``), is the deprecated
ZooKeeper path: ``--generate``; ``--execute`` checks the file as Kafka does, checks that
its partitions and brokers exist, refuses to run while ``/admin/reassign_partitions``
exists, prints the current assignment of those partitions (to roll back with), writes the
throttles of ``--throttle`` to ``/config/topics/<t>`` and ``/config/brokers/<id>`` (each
with a change notification) and writes the znode; the active controller then carries the
reassignment out and removes the znode (``actors.controller.reassignment``). ``--verify``
prints the state of each partition of the file and, once nothing is in progress, clears the
replication throttles of the brokers and topics involved.

The throttles are written as 2.7 writes them, and read back by ``kemu configs``, but kemu's
replication does not enforce their rates (docs/kafka-wire.md, "Reassignment throttles").

Output follows Kafka: messages on stdout; a failed command prints "Error: <message>" (a
refusal to run over an existing reassignment, its message alone) and exits 1. A command
line that does not parse, or breaks the option rules, is one line on stderr, exit 1.
Nothing is written once an input is found bad.
"""

from __future__ import annotations

import random
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final, TextIO

import anyio

from actors.admin.assignment import (
    AdminOperationError,
    BrokerMetadata,
    RackMode,
    broker_metadatas,
)
from actors.zk import kafka_zk
from actors.zk.store import MetadataStore, StoreSession
from cluster.cli.args import UsageError
from cluster.cli.jopt import Option, OptionError, Options, option_lines, parse
from cluster.cli.reassign_admin import (
    CANNOT_EXECUTE_BECAUSE_OF_EXISTING,
    YOU_MUST_RUN_VERIFY_PERIODICALLY,
    AdminReassignCommand,
)
from cluster.cli.reassign_plan import (
    BROKER_THROTTLES,
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    TOPIC_THROTTLES,
    ReassignCommandError,
    TerseReassignmentError,
    calculate_assignment,
    clearing_line,
    current_assignment_text,
    follower_throttles,
    generate_text,
    leader_throttles,
    parse_execute_args,
    parse_generate_args,
    parse_reassignment,
    partition_state_line,
    proposed_move_map,
    reassigning_brokers,
    scala_list,
    sorted_partitions,
    throttled_entities,
)
from cluster.cli.store_command import report_failure, store_address, with_session
from cluster.kafka.client import (
    AdminClientConfig,
    ClientConfigError,
    KafkaAdminClient,
    KafkaTimeoutError,
    load_properties,
)
from protocol import jvm, zkdata
from protocol.control import TopicPartition
from protocol.errors import KafkaApiError, KemuError, NodeExistsError
from protocol.ids import BrokerId, TopicName

__all__ = [
    "CANNOT_EXECUTE_BECAUSE_OF_EXISTING",
    "ReassignCommandError",
    "ZkReassignCommand",
    "main",
    "run_reassign_command",
]

CLIENT_ID: Final = "reassign-partitions-tool"
ZOOKEEPER_IGNORED: Final = (
    "Warning: ignoring deprecated --zookeeper option because --bootstrap-server was"
    " specified.  The --zookeeper option will be removed in a future version of Kafka."
)
ZOOKEEPER_DEPRECATED: Final = (
    "Warning: --zookeeper is deprecated, and will be removed in a future version of Kafka."
)
VERIFY_ON_ZOOKEEPER: Final = (
    "Warning: because you are using the deprecated --zookeeper option, the results may be"
    " incomplete.  Use --bootstrap-server instead for more accurate results."
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
    for other in ("zookeeper", "bootstrap-server"):
        if opts.has("cluster-file") and opts.has(other):
            raise UsageError(f'Option "[cluster-file]" can\'t be used with option "[{other}]"')
    for name in ("throttle", "replica-alter-log-dirs-throttle", "timeout"):
        long_value(opts, name)
    return action


def long_value(opts: Options, name: str, default: int = -1) -> int:
    """The value of an ``ofType(Long)`` option (jopt's message if it is not a Java
    ``long``), or ``default``."""
    text = opts.value(name)
    if text is None:
        return default
    if not re.fullmatch(r"[+-]?[0-9]+", text) or not -(2**63) <= int(text) < 2**63:
        raise OptionError(f"Cannot parse argument '{text}' of option {name}")
    return int(text)


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

    async def generate(
        self, topics_json: str, broker_list: str, rack_aware: bool, rng: random.Random
    ) -> None:
        """``generateAssignment(zkClient, ...)``: the registered brokers of the list (a
        mix of racked and rack-less ones refused unless ``--disable-rack-aware``)."""
        brokers, topics = parse_generate_args(topics_json, broker_list)
        current = await self._current(TopicName(t) for t in topics)
        registered = await kafka_zk.get_brokers(self._session)
        listed = [
            BrokerMetadata(b, r.registration.rack) for b, r in registered.items() if b in brokers
        ]
        mode = RackMode.ENFORCED if rack_aware else RackMode.DISABLED
        try:
            proposed = calculate_assignment(current, broker_metadatas(listed, mode), rng)
        except (AdminOperationError, KafkaApiError) as exc:
            raise ReassignCommandError(str(exc)) from None
        self._print(generate_text(current, proposed))

    async def execute(self, text: str, throttle: int) -> None:
        """``executeAssignment(zkClient, ...)``."""
        proposed, parsed = parse_execute_args(text)
        if parsed.log_dirs:
            raise ReassignCommandError(
                "bootstrap-server needs to be provided when replica reassignments are present."
            )
        topics = [TopicName(tp.topic) for tp, _ in proposed]
        existing = await self._current(topics)
        missing = [tp for tp, _ in proposed if tp not in existing]
        if missing:
            raise ReassignCommandError(
                "The proposed assignment contains non-existent partitions: " + scala_list(missing)
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
        self._print(current_assignment_text(wanted, existing))
        if throttle >= 0:
            self._print(YOU_MUST_RUN_VERIFY_PERIODICALLY)
            await self._set_throttles(dict(proposed), existing, throttle)
            self._print(f"The inter-broker throttle limit was set to {throttle} B/s")
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
        started = sorted_partitions(wanted)
        self._print(
            "Successfully started partition reassignment"
            + ("" if len(started) == 1 else "s")
            + " for "
            + ",".join(str(tp) for tp in started)
        )

    async def _set_throttles(
        self,
        proposed: dict[TopicPartition, tuple[BrokerId, ...]],
        current: dict[TopicPartition, tuple[BrokerId, ...]],
        throttle: int,
    ) -> None:
        """``modifyTopicThrottles`` and ``modifyBrokerThrottles`` (zkClient): each moved
        topic's throttled-replica lists, then each reassigning broker's two rates, added to
        the entity's stored config and written with a change notification."""
        moves = proposed_move_map({}, proposed, current)
        leaders, followers = leader_throttles(moves), follower_throttles(moves)
        for topic in sorted(moves):
            config = await kafka_zk.get_entity_config(self._session, zkdata.ConfigType.TOPIC, topic)
            config[LEADER_REPLICAS] = leaders[topic]
            config[FOLLOWER_REPLICAS] = followers[topic]
            await kafka_zk.change_entity_config(
                self._session, zkdata.ConfigType.TOPIC, topic, config
            )
        for broker in reassigning_brokers(moves):
            config = await kafka_zk.get_entity_config(
                self._session, zkdata.ConfigType.BROKER, str(broker)
            )
            config[LEADER_RATE] = str(throttle)
            config[FOLLOWER_RATE] = str(throttle)
            await kafka_zk.change_entity_config(
                self._session, zkdata.ConfigType.BROKER, str(broker), config
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
        lines += [
            partition_state_line(tp, tp in moving, current.get(tp, ()), targets[tp])
            for tp in sorted_partitions(targets)
        ]
        self._print("\n".join(lines))
        if not moving and not preserve_throttles:
            await self._clear_all_throttles(parsed.partitions)

    async def _clear_all_throttles(
        self, targets: Sequence[tuple[TopicPartition, tuple[BrokerId, ...]]]
    ) -> None:
        """``clearAllThrottles``: the throttle configs of the live brokers and the target
        replicas' brokers, and of the file's topics, removed where set."""
        active = await kafka_zk.get_brokers(self._session)
        brokers, topics = throttled_entities(active, targets)
        self._print(clearing_line("broker", brokers))
        for broker in brokers:
            await self._remove_configs(zkdata.ConfigType.BROKER, str(broker), BROKER_THROTTLES)
        self._print(clearing_line("topic", topics))
        for topic in topics:
            await self._remove_configs(zkdata.ConfigType.TOPIC, topic, TOPIC_THROTTLES)

    async def _remove_configs(
        self, entity: zkdata.ConfigType, name: str, keys: Sequence[str]
    ) -> None:
        config = await kafka_zk.get_entity_config(self._session, entity, name)
        if not any(key in config for key in keys):
            return
        for key in keys:
            config.pop(key, None)
        await kafka_zk.change_entity_config(self._session, entity, name, config)


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
    rng: random.Random | None = None,
) -> int:
    """Run ``kemu reassign-partitions ARGV``; returns the exit status. ``store``, if given,
    is used instead of opening the store's address (tests, in-process clusters); ``rng``
    draws ``--generate``'s start index and shift (Kafka's are random)."""
    try:
        opts = parse(argv, _SPECS)
        if opts.has("help") or not opts.values:
            out.write(_usage())
            return 0
        action = check_args(opts)
    except UsageError as exc:  # OptionError too: one line on stderr
        err.write(f"{exc}\n")
        return 1
    draw = rng or random.Random()
    try:
        if opts.has("bootstrap-server"):
            if opts.has("zookeeper"):
                out.write(ZOOKEEPER_IGNORED + "\n")
            await _run_admin(opts, action, out, draw)
            return 0
        zookeeper = opts.value("zookeeper")
        cluster_file = opts.value("cluster-file")
        if zookeeper is not None:
            out.write(ZOOKEEPER_DEPRECATED + "\n")
        text = _read(_input_file(opts, action))
        await with_session(
            store_address(zookeeper, cluster_file),
            store,
            "kemu-reassign",
            lambda session: _handle_action(
                ZkReassignCommand(session, out, zookeeper_warnings=opts.has("zookeeper")),
                opts,
                action,
                text,
                draw,
            ),
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


def _input_file(opts: Options, action: str) -> str:
    name = "topics-to-move-json-file" if action == "generate" else "reassignment-json-file"
    path = opts.value(name)
    assert path is not None  # check_args: required
    return path


async def _run_admin(opts: Options, action: str, out: TextIO, rng: random.Random) -> None:
    """The admin client of ``main``: ``--command-config``'s properties, the tool's
    client id."""
    bootstrap = opts.value("bootstrap-server")
    assert bootstrap is not None
    config_file = opts.value("command-config")
    try:
        props = load_properties(Path(config_file)) if config_file else {}
        config = AdminClientConfig.from_properties({"client.id": CLIENT_ID, **props})
    except ClientConfigError as exc:  # Utils.loadProps, AdminClientConfig: inside main's try
        raise ReassignCommandError(str(exc)) from None
    try:
        async with KafkaAdminClient(bootstrap, config) as client:
            command = AdminReassignCommand(client, out)
            if action == "list":
                await command.list()
            else:
                await _handle_action(command, opts, action, _read(_input_file(opts, action)), rng)
    except KafkaTimeoutError as exc:  # an admin call's .get() that timed out
        raise ReassignCommandError(
            f"org.apache.kafka.common.errors.TimeoutException: {exc}"
        ) from None


async def _handle_action(
    command: AdminReassignCommand | ZkReassignCommand,
    opts: Options,
    action: str,
    text: str,
    rng: random.Random,
) -> None:
    """``handleAction``, on either path: the action's file (``text``) and options handed
    to the command. ``check_args`` lets ``--cancel`` and ``--execute``'s admin-only
    options through only with ``--bootstrap-server``."""
    preserve = opts.has("preserve-throttles")
    match action:
        case "verify":
            await command.verify(text, preserve)
        case "generate":
            broker_list = opts.value("broker-list")
            assert broker_list is not None  # check_args: required
            await command.generate(text, broker_list, not opts.has("disable-rack-aware"), rng)
        case "execute":
            if isinstance(command, AdminReassignCommand):
                await command.execute(
                    text,
                    opts.has("additional"),
                    long_value(opts, "throttle"),
                    long_value(opts, "replica-alter-log-dirs-throttle"),
                )
            else:
                await command.execute(text, long_value(opts, "throttle"))
        case _:
            assert isinstance(command, AdminReassignCommand)  # check_args: bootstrap only
            await command.cancel(text, preserve)


def _usage() -> str:
    header = "This tool helps to move topic partitions between replicas."
    return "\n".join([header, "", *option_lines(_SPECS)]) + "\n"


def main(argv: Sequence[str], *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``kemu reassign-partitions ARGS``: run it and return the exit status."""
    return anyio.run(
        lambda: run_reassign_command(argv, out=out or sys.stdout, err=err or sys.stderr)
    )
