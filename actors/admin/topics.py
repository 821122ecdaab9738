"""Topic names (``Topic.validate``), and the checks of topic creation and partition addition
(``AdminManager.createTopics``, ``AdminManager.createPartitions``, ``AdminZkClient``), with
Kafka 2.7's error codes and messages.

Pure functions of the state they are given (the topics in ZooKeeper, the brokers, the
current assignment); the caller reads that state and writes the outcome. The order of the
checks is Kafka's, so a request with several faults gets the error Kafka would give:

* CreateTopics (``KafkaApis`` then ``AdminManager.createTopics``): ``duplicate_topics``
  (request level), then per topic ``plan_create_topic``: ``check_create_topic_request``,
  defaults, the assignment (``assign_replicas``) and ``validate_topic_create``.
* CLI ``--zookeeper`` create (``AdminZkClient.createTopic``): ``assign_replicas`` with
  ``rack_mode``, then ``validate_topic_create``.
* CreatePartitions: ``duplicate_topics`` and the deletion queue (request level), then
  ``validate_create_partitions``; the CLI ``--zookeeper`` alter uses
  ``new_partitions_assignment``.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from actors.admin.assignment import (
    Assignment,
    BrokerMetadata,
    RackMode,
    add_partitions_assignment,
    assign_replicas,
    broker_metadatas,
    check_partition_addition,
)
from actors.admin.configs import BrokerConfig, validate_topic_config
from actors.admin.limits import DEFAULT_MAX_REPLICAS_PER_REQUEST, check_topic_replicas
from protocol import jvm
from protocol.errors import ErrorCode, KafkaApiError
from protocol.ids import BrokerId
from protocol.zkdata import ReplicaAssignment

__all__ = [
    "DUPLICATE_CREATE_PARTITIONS_MESSAGE",
    "DUPLICATE_CREATE_TOPIC_MESSAGE",
    "GROUP_METADATA_TOPIC_NAME",
    "INTERNAL_TOPICS",
    "MAX_NAME_LENGTH",
    "NO_NUM_PARTITIONS",
    "NO_REPLICATION_FACTOR",
    "QUEUED_FOR_DELETION_MESSAGE",
    "TRANSACTION_STATE_TOPIC_NAME",
    "TopicCreation",
    "check_create_topic_request",
    "collides",
    "duplicate_topics",
    "has_collision_chars",
    "is_internal",
    "is_valid_topic_name",
    "new_partitions_assignment",
    "plan_create_topic",
    "resolve_counts",
    "validate_create_partitions",
    "validate_topic_create",
    "validate_topic_name",
]

# ================================================================== names (Topic.java)

MAX_NAME_LENGTH: Final = 249
GROUP_METADATA_TOPIC_NAME: Final = "__consumer_offsets"
TRANSACTION_STATE_TOPIC_NAME: Final = "__transaction_state"
INTERNAL_TOPICS: Final = frozenset({GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME})
_LEGAL = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def validate_topic_name(name: str) -> None:
    """``Topic.validate``: raises ``KafkaApiError(INVALID_TOPIC_EXCEPTION)`` with Kafka's
    message for an empty name, ``.`` or ``..``, more than 249 UTF-16 units, or a character
    other than ASCII letters, digits, ``.``, ``_`` and ``-``."""
    if not name:
        _invalid_topic("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        _invalid_topic('Topic name cannot be "." or ".."')
    if jvm.java_length(name) > MAX_NAME_LENGTH:
        _invalid_topic(
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters,"
            f" topic name: {name}"
        )
    if not _LEGAL.issuperset(name):
        _invalid_topic(
            f'Topic name "{name}" is illegal, it contains a character other than'
            " ASCII alphanumerics, '.', '_' and '-'"
        )


def is_valid_topic_name(name: str) -> bool:
    """Whether ``validate_topic_name`` accepts ``name``: a name some topic could have."""
    try:
        validate_topic_name(name)
    except KafkaApiError:
        return False
    return True


def _invalid_topic(message: str) -> None:
    raise KafkaApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, message)


def is_internal(name: str) -> bool:
    """``__consumer_offsets`` and ``__transaction_state``."""
    return name in INTERNAL_TOPICS


def has_collision_chars(name: str) -> bool:
    """The name contains ``.`` or ``_``, which metric names do not tell apart."""
    return "." in name or "_" in name


def collides(a: str, b: str) -> bool:
    """``Topic.hasCollision``: equal once every ``.`` is read as ``_``."""
    return a.replace(".", "_") == b.replace(".", "_")


# ============================================================================ CreateTopics

NO_NUM_PARTITIONS: Final = -1
"""CreateTopics ``num_partitions`` meaning "the broker's ``num.partitions``"."""
NO_REPLICATION_FACTOR: Final = -1
"""CreateTopics ``replication_factor`` meaning "the broker's ``default.replication.factor``"."""
DUPLICATE_CREATE_TOPIC_MESSAGE: Final = "Found multiple entries for this topic."
"""INVALID_REQUEST message for each entry of a name listed twice in CreateTopics."""
DUPLICATE_CREATE_PARTITIONS_MESSAGE: Final = "Duplicate topic in request."
"""INVALID_REQUEST message for a name listed twice in CreatePartitions."""
QUEUED_FOR_DELETION_MESSAGE: Final = "The topic is queued for deletion."
"""INVALID_TOPIC_EXCEPTION message of CreatePartitions for a topic being deleted."""


def duplicate_topics(names: Iterable[str]) -> frozenset[str]:
    """The names listed more than once in a CreateTopics or CreatePartitions request;
    every entry with such a name is refused (INVALID_REQUEST), none is processed."""
    seen: set[str] = set()
    repeated: set[str] = set()
    for name in names:
        (repeated if name in seen else seen).add(name)
    return frozenset(repeated)


def check_create_topic_request(
    name: str,
    *,
    num_partitions: int,
    replication_factor: int,
    assignment: Mapping[int, Sequence[int]],
    config: Mapping[str, str | None],
    in_metadata_cache: bool,
) -> None:
    """The first per-topic checks of ``AdminManager.createTopics``:
    the topic in this broker's metadata cache -> TOPIC_ALREADY_EXISTS; config entries
    with a null value -> INVALID_REQUEST; counts and a manual ``assignment`` both given ->
    INVALID_REQUEST. An empty ``assignment`` means none."""
    if in_metadata_cache:
        raise KafkaApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    nulls = [key for key, value in config.items() if value is None]
    if nulls:
        raise KafkaApiError(
            ErrorCode.INVALID_REQUEST,
            f"Null value not supported for topic configs : {','.join(nulls)}",
        )
    counts_given = (
        num_partitions != NO_NUM_PARTITIONS or replication_factor != NO_REPLICATION_FACTOR
    )
    if counts_given and assignment:
        raise KafkaApiError(
            ErrorCode.INVALID_REQUEST,
            "Both numPartitions or replicationFactor and replicasAssignments were set. "
            "Both cannot be used at the same time.",
        )


def resolve_counts(
    num_partitions: int, replication_factor: int, broker: BrokerConfig
) -> tuple[int, int]:
    """-1 replaced by ``num.partitions`` / ``default.replication.factor`` (Kafka keeps the
    latter as a Java short)."""
    if num_partitions == NO_NUM_PARTITIONS:
        num_partitions = broker.num_partitions
    if replication_factor == NO_REPLICATION_FACTOR:
        replication_factor = ((broker.default_replication_factor + 0x8000) & 0xFFFF) - 0x8000
    return num_partitions, replication_factor


def validate_topic_create(
    name: str,
    assignment: Mapping[int, Sequence[int]],
    existing_topics: Collection[str],
    config: Mapping[str, str],
) -> dict[str, str]:
    """``AdminZkClient.validateTopicCreate``; returns the config to store.

    In order: the name (``validate_topic_name``); ``name`` in ``existing_topics`` (the
    children of ``/brokers/topics``, which still lists topics being deleted) ->
    TOPIC_ALREADY_EXISTS; a name with ``.`` or ``_`` colliding with existing topics ->
    INVALID_TOPIC_EXCEPTION naming them in ``existing_topics``' order; replica lists of
    different sizes, a replica list with a duplicate, or partition ids that are not
    0..n-1 (Kafka's check: the non-negative ids sum to n(n-1)/2, in 32-bit arithmetic) ->
    INVALID_REPLICA_ASSIGNMENT; then ``validate_topic_config`` (INVALID_CONFIG). Brokers
    are not checked: a manual assignment may name brokers that do not exist.
    """
    validate_topic_name(name)
    if name in existing_topics:
        raise KafkaApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    if has_collision_chars(name):
        colliding = [topic for topic in existing_topics if collides(name, topic)]
        if colliding:
            _invalid_topic(f"Topic '{name}' collides with existing topics: {', '.join(colliding)}")
    # Each check is about one replica list alone, so it is made once per distinct list
    # (an automatic assignment repeats a few lists over all its partitions).
    distinct = set(map(tuple, assignment.values()))
    if len({len(replicas) for replicas in distinct}) != 1:
        raise KafkaApiError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "All partitions should have the same number of replicas",
        )
    if any(len(set(replicas)) != len(replicas) for replicas in distinct):
        raise KafkaApiError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Duplicate replica assignment found: {jvm.scala_hash_map_string(assignment)}",
        )
    n = len(assignment)
    expected_sum = _java_int_div2(_int32(n * (n - 1)))
    counted = assignment if min(assignment) >= 0 else [p for p in assignment if p >= 0]
    if _int32(sum(counted)) != expected_sum:
        raise KafkaApiError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "partitions should be a consecutive 0-based integer sequence",
        )
    return validate_topic_config(config)


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def _java_int_div2(value: int) -> int:
    return -(-value // 2) if value < 0 else value // 2


@dataclass(frozen=True, slots=True)
class TopicCreation:
    """What to write for a topic that passed every check: its assignment (partition ->
    replicas) and its config (``/config/topics/<t>``, possibly empty)."""

    assignment: Assignment
    config: dict[str, str] = field(default_factory=dict)


def plan_create_topic(
    name: str,
    *,
    num_partitions: int = NO_NUM_PARTITIONS,
    replication_factor: int = NO_REPLICATION_FACTOR,
    assignment: Mapping[int, Sequence[int]] | None = None,
    config: Mapping[str, str | None] | None = None,
    metadata_topics: Collection[str],
    existing_topics: Collection[str],
    alive_brokers: Sequence[BrokerMetadata],
    broker_config: BrokerConfig,
    rng: random.Random,
    rack_mode: RackMode | None = None,
) -> TopicCreation:
    """One topic of a CreateTopics request, checked as ``AdminManager.createTopics`` does
    (up to ``validateTopicCreate``; the create-topic policy is the caller's).

    ``metadata_topics``: the topics in this broker's metadata cache; ``existing_topics``:
    the children of ``/brokers/topics``; ``alive_brokers``: the metadata cache's live
    brokers with their racks, in its order. Without a manual ``assignment`` the replicas
    are placed by ``assign_replicas`` with a start drawn from ``rng``; a manual one is used
    as given. Raises ``KafkaApiError`` with the code and message Kafka answers with, or
    ``AdminOperationError`` (UNKNOWN_SERVER_ERROR) for partly racked brokers.

    ``rack_mode`` is passed to ``assign_replicas``: None for CreateTopics; metadata
    auto-creation (``KafkaApis.createTopic``) uses ``RackMode.SAFE`` over the registered
    brokers.

    More replicas than the broker's ``kemu.max.replicas.per.request`` (a manual
    assignment's lists as given; automatic counts once Kafka's own checks of them passed)
    -> POLICY_VIOLATION, before any assignment is built (docs/limits.md).
    """
    manual = dict(assignment or {})
    given_config = dict(config or {})
    check_create_topic_request(
        name,
        num_partitions=num_partitions,
        replication_factor=replication_factor,
        assignment=manual,
        config=given_config,
        in_metadata_cache=name in metadata_topics,
    )
    partitions, rf = resolve_counts(num_partitions, replication_factor, broker_config)
    limit = broker_config.kemu_max_replicas_per_request
    if manual:
        check_topic_replicas(1, sum(len(replicas) for replicas in manual.values()), limit)
        planned = {p: tuple(BrokerId(b) for b in replicas) for p, replicas in manual.items()}
    else:
        planned = assign_replicas(
            alive_brokers, partitions, rf, rng=rng, rack_mode=rack_mode, max_replicas=limit
        )
    stored = {k: v for k, v in given_config.items() if v is not None}
    return TopicCreation(planned, validate_topic_create(name, planned, existing_topics, stored))


# ======================================================================= CreatePartitions


def new_partitions_assignment(
    topic: str,
    existing: Mapping[int, Sequence[int]],
    brokers: Sequence[BrokerMetadata],
    num_partitions: int,
    replica_assignment: Mapping[int, Sequence[int]] | None = None,
    *,
    max_replicas: int = DEFAULT_MAX_REPLICAS_PER_REQUEST,
) -> Assignment:
    """``AdminZkClient.createNewPartitionsAssignment``: the assignment of the partitions
    that take ``topic`` to ``num_partitions``.

    ``brokers``: the registered brokers as ``broker_metadatas`` returns them. Checks, in
    order: partition 0 missing -> ``AdminOperationError``; no increase ->
    INVALID_PARTITIONS; then each list of ``replica_assignment`` (in its order): empty or
    with a duplicate -> INVALID_REPLICA_ASSIGNMENT, naming an unregistered broker ->
    BROKER_NOT_AVAILABLE; then sizes other than partition 0's ->
    INVALID_REPLICA_ASSIGNMENT. Without ``replica_assignment``: ``add_partitions_assignment``,
    whose new replicas ``max_replicas`` bounds (POLICY_VIOLATION, docs/limits.md).
    """
    partition0 = check_partition_addition(topic, existing, num_partitions)
    if replica_assignment is None:
        return add_partitions_assignment(
            brokers, existing, num_partitions, topic=topic, max_replicas=max_replicas
        )
    ids = list(dict.fromkeys(b.id for b in brokers))
    available = set(ids)
    for partition, replicas in replica_assignment.items():
        listed = ", ".join(map(str, replicas))
        if not replicas:
            raise KafkaApiError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Cannot have replication factor of 0 for partition id {partition}.",
            )
        if len(set(replicas)) != len(replicas):
            raise KafkaApiError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Duplicate brokers not allowed in replica assignment: {listed}"
                f" for partition id {partition}.",
            )
        if not available.issuperset(replicas):
            raise KafkaApiError(
                ErrorCode.BROKER_NOT_AVAILABLE,
                f"Some brokers specified for partition id {partition} are not available."
                f" Specified brokers: {listed}, available brokers:"
                f" {', '.join(map(str, jvm.scala_immutable_order(ids)))}.",
            )
    bad = sorted((p, len(r)) for p, r in replica_assignment.items() if len(r) != len(partition0))
    if bad:
        raise KafkaApiError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Inconsistent replication factor between partitions, partition 0 has"
            f" {len(partition0)} while partitions [{', '.join(str(p) for p, _ in bad)}] have"
            f" replication factors [{', '.join(str(n) for _, n in bad)}], respectively.",
        )
    return {p: tuple(BrokerId(b) for b in replicas) for p, replicas in replica_assignment.items()}


def validate_create_partitions(
    topic: str,
    existing: Mapping[int, ReplicaAssignment],
    count: int,
    assignments: Sequence[Sequence[int]] | None,
    brokers: Sequence[BrokerMetadata],
    *,
    max_replicas: int = DEFAULT_MAX_REPLICAS_PER_REQUEST,
) -> Assignment:
    """One topic of a CreatePartitions request (``AdminManager.createPartitions``): the
    assignment of its new partitions, or Kafka's error.

    ``existing``: the topic's full assignment from ``/brokers/topics/<t>`` (empty if the
    topic does not exist); ``count``: the requested partition count; ``assignments``: the
    manual replica lists, one per new partition, or None; ``brokers``: the registered
    brokers (``/brokers/ids``), which go through ``broker_metadatas`` in Enforced mode first
    (partly racked -> ``AdminOperationError``).

    Then, in order: a partition being reassigned -> REASSIGNMENT_IN_PROGRESS; no
    assignment -> UNKNOWN_TOPIC_OR_PARTITION; fewer or as many partitions as now ->
    INVALID_PARTITIONS; manual lists naming unknown brokers, or not one per new partition
    -> INVALID_REPLICA_ASSIGNMENT; then ``new_partitions_assignment``. The new replicas
    (the manual lists as given, or the new partitions times partition 0's replication
    factor) are bounded by ``max_replicas`` (the broker's
    ``kemu.max.replicas.per.request``): more -> POLICY_VIOLATION before any assignment is
    built (docs/limits.md).
    """
    registered = broker_metadatas(brokers, RackMode.ENFORCED)
    if any(a.adding_replicas or a.removing_replicas for a in existing.values()):
        raise KafkaApiError(
            ErrorCode.REASSIGNMENT_IN_PROGRESS,
            f"A partition reassignment is in progress for the topic '{topic}'.",
        )
    if not existing:
        raise KafkaApiError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist."
        )
    current = len(existing)
    if count < current:
        raise KafkaApiError(
            ErrorCode.INVALID_PARTITIONS,
            f"Topic currently has {current} partitions, which is higher than the requested"
            f" {count}.",
        )
    if count == current:
        raise KafkaApiError(
            ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions."
        )
    manual: dict[int, Sequence[int]] | None = None
    if assignments is not None:
        check_topic_replicas(1, sum(len(replicas) for replicas in assignments), max_replicas)
        listed = list(dict.fromkeys(b for replicas in assignments for b in replicas))
        unknown = jvm.scala_set_after_removal(listed, (b.id for b in registered))
        if unknown:
            raise KafkaApiError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.",
            )
        if len(assignments) != count - current:
            raise KafkaApiError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Increasing the number of partitions by {count - current} but"
                f" {len(assignments)} assignments provided.",
            )
        by_partition = {current + i: replicas for i, replicas in enumerate(assignments)}
        # Kafka builds an immutable Map, so it checks the partitions in that map's order.
        manual = {p: by_partition[p] for p in jvm.scala_immutable_order(list(by_partition))}
    replicas = {p: a.replicas for p, a in existing.items()}
    return new_partitions_assignment(
        topic, replicas, registered, count, manual, max_replicas=max_replicas
    )
