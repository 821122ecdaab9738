"""The pure half of ``kemu reassign-partitions`` (Kafka 2.7's ``ReassignPartitionsCommand``),
shared by its ZooKeeper path (``cluster.cli.reassign``) and its admin-client path
(``cluster.cli.reassign_admin``): the two JSON files it reads (a reassignment, the topics to
move) with Kafka's checks and messages, the JSON it prints, the candidate assignment of
``--generate`` (``calculateAssignment``), the replication throttles of ``--throttle``
(``calculateProposedMoveMap`` and the leader/follower throttled-replica lists), and what
``--verify`` prints of each partition and of the throttles it clears.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from actors.admin.assignment import BrokerMetadata, assign_replicas
from actors.controller.reassignment import scala_map_entries
from cluster.cli.kafka_tools import duplicates, json_node
from protocol import jvm
from protocol.control import TopicPartition
from protocol.errors import KemuError
from protocol.ids import BrokerId, TopicName

__all__ = [
    "ANY_LOG_DIR",
    "BROKER_THROTTLES",
    "FOLLOWER_RATE",
    "FOLLOWER_REPLICAS",
    "LEADER_RATE",
    "LEADER_REPLICAS",
    "LOG_DIR_RATE",
    "TOPIC_THROTTLES",
    "Ongoing",
    "PartitionMove",
    "ReassignCommandError",
    "ReassignmentFile",
    "TerseReassignmentError",
    "calculate_assignment",
    "clearing_line",
    "current_assignment_text",
    "follower_throttles",
    "format_as_reassignment_json",
    "generate_text",
    "leader_throttles",
    "parse_execute_args",
    "parse_generate_args",
    "parse_reassignment",
    "partition_state_line",
    "proposed_move_map",
    "reassigning_brokers",
    "scala_list",
    "sorted_partitions",
    "throttled_entities",
]

ANY_LOG_DIR: Final = "any"
LEADER_RATE: Final = "leader.replication.throttled.rate"
FOLLOWER_RATE: Final = "follower.replication.throttled.rate"
LOG_DIR_RATE: Final = "replica.alter.log.dirs.io.max.bytes.per.second"
BROKER_THROTTLES: Final = (LEADER_RATE, FOLLOWER_RATE, LOG_DIR_RATE)
"""``brokerLevelThrottles``: ``DynamicConfig.Broker``'s three rates."""
LEADER_REPLICAS: Final = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS: Final = "follower.replication.throttled.replicas"
TOPIC_THROTTLES: Final = (LEADER_REPLICAS, FOLLOWER_REPLICAS)
"""``topicLevelThrottles``: ``LogConfig``'s two throttled-replica lists."""


class ReassignCommandError(KemuError):
    """The command failed: printed as "Error: <message>" (Kafka's main), exit 1."""


class TerseReassignmentError(KemuError):
    """A failure printed as its message alone (Kafka's TerseReassignmentFailureException)."""


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
                f"Size of replicas list {scala_list(replicas)} is different from size of"
                f" log dirs list {scala_list(dirs)} for partition {tp}"
            )
        partitions.append((tp, tuple(BrokerId(r) for r in replicas)))
        log_dirs += [
            (tp, BrokerId(r), d) for r, d in zip(replicas, dirs, strict=True) if d != ANY_LOG_DIR
        ]
    return ReassignmentFile(tuple(partitions), tuple(log_dirs))


def scala_list(items: Iterable[object]) -> str:
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


def sorted_partitions(partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
    """``sortWith(compareTopicPartitions)``: by topic, then partition."""
    return sorted(partitions, key=lambda tp: (tp.topic, tp.partition))


def current_assignment_text(
    proposed: Iterable[TopicPartition], current: Mapping[TopicPartition, Sequence[int]]
) -> str:
    """``currentPartitionReplicaAssignmentToString``: the current replicas of the proposed
    partitions, to roll back with."""
    wanted = set(proposed)
    kept = {tp: tuple(BrokerId(r) for r in r_) for tp, r_ in current.items() if tp in wanted}
    return (
        "Current partition replica assignment\n\n"
        + format_as_reassignment_json(kept)
        + "\n\nSave this to use as the --reassignment-json-file option during rollback"
    )


# ============================================================================ --generate


def parse_topics_data(text: str) -> list[str]:
    """``parseTopicsData``: the topics of a ``--topics-to-move-json-file``, in file order."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ReassignCommandError("The input string is not a valid JSON") from exc
    version = _int(_object(data)["version"]) if "version" in _object(data) else 1
    if version != 1:
        raise ReassignCommandError(f"Not supported version field value {version}")
    entries = _array(data["topics"]) if "topics" in data else []
    return [_str(_field(_object(entry), "topic")) for entry in entries]


def parse_generate_args(topics_json: str, broker_list: str) -> tuple[list[int], list[str]]:
    """``parseGenerateAssignmentArgs``: the brokers of ``--broker-list`` (Java's
    ``split(',')`` and ``toInt``) and the topics to move, each without duplicates."""
    words = broker_list.split(",")
    while words and not words[-1]:  # String.split drops trailing empty strings
        words.pop()
    brokers: list[int] = []
    for word in words:
        if not re.fullmatch(r"[+-]?[0-9]+", word) or not -(2**31) <= int(word) < 2**31:
            raise ReassignCommandError(f'For input string: "{word}"')
        brokers.append(int(word))
    repeated = duplicates(brokers)
    if repeated:
        raise ReassignCommandError(
            "Broker list contains duplicate entries: " + ",".join(map(str, repeated))
        )
    topics = parse_topics_data(topics_json)
    repeated_topics = duplicates(topics)
    if repeated_topics:
        raise ReassignCommandError(
            "List of topics to reassign contains duplicate entries: " + ",".join(repeated_topics)
        )
    return brokers, topics


def calculate_assignment(
    current: Mapping[TopicPartition, Sequence[int]],
    brokers: Sequence[BrokerMetadata],
    rng: random.Random,
) -> dict[TopicPartition, tuple[BrokerId, ...]]:
    """``calculateAssignment``: each topic's partitions assigned afresh over ``brokers``
    (``assignReplicasToBrokers``, its start index and shift drawn from ``rng``), with the
    replication factor of its first partition."""
    by_topic: dict[str, dict[int, Sequence[int]]] = {}
    for tp, replicas in current.items():
        by_topic.setdefault(tp.topic, {})[tp.partition] = replicas
    proposed: dict[TopicPartition, tuple[BrokerId, ...]] = {}
    for topic in sorted(by_topic):
        partitions = by_topic[topic]
        factor = len(partitions[min(partitions)])
        assigned = assign_replicas(brokers, len(partitions), factor, rng=rng)
        for partition, replicas in assigned.items():
            proposed[TopicPartition(TopicName(topic), partition)] = replicas
    return proposed


def generate_text(
    current: Mapping[TopicPartition, Sequence[int]],
    proposed: Mapping[TopicPartition, Sequence[int]],
) -> str:
    """What ``generateAssignment`` prints: the current assignment, a blank line, the
    proposed one."""

    def as_json(assignment: Mapping[TopicPartition, Sequence[int]]) -> str:
        return format_as_reassignment_json(
            {tp: tuple(BrokerId(r) for r in rs) for tp, rs in assignment.items()}
        )

    return (
        f"Current partition replica assignment\n{as_json(current)}\n\n"
        f"Proposed partition reassignment configuration\n{as_json(proposed)}"
    )


# ============================================================================ throttles


@dataclass(frozen=True)
class Ongoing:
    """A reassignment in flight, as ListPartitionReassignments lists it."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()


@dataclass
class PartitionMove:
    """``PartitionMove``: where a partition's data is read from and copied to."""

    sources: set[int] = field(default_factory=set)
    destinations: set[int] = field(default_factory=set)


MoveMap = dict[str, dict[int, PartitionMove]]


def proposed_move_map(
    ongoing: Mapping[TopicPartition, Ongoing],
    proposed: Mapping[TopicPartition, Sequence[int]],
    current: Mapping[TopicPartition, Sequence[int]],
) -> MoveMap:
    """``calculateProposedMoveMap``: the reassignments in flight (their replicas both
    sources and destinations, adding ones destinations, removing ones not), overwritten by
    the proposed ones (their target replicas destinations); the current replicas of each
    partition are sources; a source is never also a destination."""
    moves: MoveMap = {}
    for tp, reassignment in ongoing.items():
        move = PartitionMove(set(reassignment.replicas), set(reassignment.replicas))
        move.destinations |= set(reassignment.adding)
        move.destinations -= set(reassignment.removing)
        moves.setdefault(tp.topic, {})[tp.partition] = move
    for tp, replicas in proposed.items():
        moves.setdefault(tp.topic, {})[tp.partition] = PartitionMove(set(), set(replicas))
    for topic, partitions in moves.items():
        for partition, move in partitions.items():
            move.sources |= set(current.get(TopicPartition(TopicName(topic), partition), ()))
            move.destinations -= move.sources
    return moves


def _throttled(moves: MoveMap, pick: str) -> dict[str, str]:
    """Each topic's ``partition:broker`` list, as a ``TreeSet`` of strings orders it."""
    out: dict[str, str] = {}
    for topic, partitions in moves.items():
        entries = {
            f"{partition}:{broker}"
            for partition, move in partitions.items()
            for broker in (move.sources if pick == "sources" else move.destinations)
        }
        out[topic] = ",".join(sorted(entries, key=lambda s: s.encode("utf-16-be")))
    return out


def leader_throttles(moves: MoveMap) -> dict[str, str]:
    """``calculateLeaderThrottles``: the replicas data is read from, per topic."""
    return _throttled(moves, "sources")


def follower_throttles(moves: MoveMap) -> dict[str, str]:
    """``calculateFollowerThrottles``: the replicas data is copied to, per topic."""
    return _throttled(moves, "destinations")


def reassigning_brokers(moves: MoveMap) -> list[int]:
    """``calculateReassigningBrokers``: every source and destination broker, ascending."""
    return sorted(
        {b for partitions in moves.values() for m in partitions.values() for b in m.sources}
        | {b for partitions in moves.values() for m in partitions.values() for b in m.destinations}
    )


# ============================================================================ --verify


def partition_state_line(
    tp: TopicPartition, in_progress: bool, replicas: Sequence[int], target: Sequence[int]
) -> str:
    """``partitionReassignmentStatesToString``: one partition of ``--verify``, its
    reassignment still in progress, complete (its replicas the target's), or neither."""
    if in_progress:
        return f"Reassignment of partition {tp} is still in progress."
    if tuple(replicas) == tuple(target):
        return f"Reassignment of partition {tp} is complete."
    return (
        f"There is no active reassignment of partition {tp}, but replica set is"
        f" {','.join(map(str, replicas))} rather than {','.join(map(str, target))}."
    )


def throttled_entities(
    live: Iterable[int], targets: Sequence[tuple[TopicPartition, Sequence[int]]]
) -> tuple[list[int], list[TopicName]]:
    """``clearAllThrottles``' brokers (every live one, then every target replica's) and
    topics (the file's), each in the order Scala's immutable set of them iterates."""
    targeted = [b for _, replicas in targets for b in replicas]
    brokers = jvm.scala_immutable_order(list(dict.fromkeys([*live, *targeted])))
    topics = jvm.scala_immutable_order(list(dict.fromkeys(tp.topic for tp, _ in targets)))
    return brokers, topics


def clearing_line(level: str, names: Sequence[object]) -> str:
    """``clearAllThrottles``' line before it clears the ``level``'s (broker or topic)
    throttles of ``names``."""
    plural = "" if len(names) == 1 else "s"
    return f"Clearing {level}-level throttles on {level}{plural} " + ",".join(map(str, names))
