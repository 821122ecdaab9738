"""Replica assignment: where the replicas of new partitions go.

Kafka's ``AdminUtils.assignReplicasToBrokers`` and the broker selection around it
(``AdminZkClient.getBrokerMetadatas``, the start index of ``createNewPartitionsAssignment``),
as pure functions of a broker list. Randomness is injected: the start index and the shift
are drawn from the caller's seeded ``random.Random`` when not given, never from the global
RNG, so a seed fixes every assignment.

The goals, as Kafka states them: spread replicas evenly over brokers; for the partitions
led by a broker, spread their followers over the other brokers; and when every broker has
a rack, put each partition's replicas on distinct racks where possible.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from actors.admin.limits import DEFAULT_MAX_REPLICAS_PER_REQUEST, check_topic_replicas
from protocol import jvm
from protocol.errors import ErrorCode, KafkaApiError, KemuError
from protocol.ids import BrokerId

__all__ = [
    "NOT_ALL_RACKS_CLI_MESSAGE",
    "NOT_ALL_RACKS_MESSAGE",
    "AdminOperationError",
    "Assignment",
    "BrokerMetadata",
    "RackMode",
    "add_partitions_assignment",
    "assign_replicas",
    "broker_metadatas",
    "check_partition_addition",
    "partition_addition_start_index",
    "rack_alternated_brokers",
]

Assignment = dict[int, tuple[BrokerId, ...]]
"""Partition id -> replicas, leader (preferred replica) first."""

NOT_ALL_RACKS_MESSAGE = "Not all brokers have rack information for replica rack aware assignment."
"""``assignReplicasToBrokers`` given a mix of racked and rack-less brokers (CreateTopics)."""

NOT_ALL_RACKS_CLI_MESSAGE = (
    "Not all brokers have rack information. Add --disable-rack-aware in command line"
    " to make replica assignment without rack information."
)
"""``getBrokerMetadatas`` in Enforced mode (CLI ``--zookeeper``, CreatePartitions)."""


class AdminOperationError(KemuError):
    """Kafka's ``AdminOperationException``: an admin operation that cannot go on for a
    reason that is not a Kafka API error. ``error_code_for`` maps it to
    UNKNOWN_SERVER_ERROR (whose message Kafka does not send); the CLI prints the message."""


class RackMode(Enum):
    """Kafka's ``RackAwareMode``: how ``broker_metadatas`` treats rack information."""

    ENFORCED = "enforced"
    """Use racks; a mix of racked and rack-less brokers is an error (CLI, CreatePartitions)."""
    SAFE = "safe"
    """Use racks only if every broker has one (metadata auto-creation)."""
    DISABLED = "disabled"
    """Ignore racks (``--disable-rack-aware``)."""


@dataclass(frozen=True, slots=True)
class BrokerMetadata:
    """A broker as the assignment sees it: its id and its rack, if it has one."""

    id: BrokerId
    rack: str | None = None


def broker_metadatas(
    brokers: Sequence[BrokerMetadata], rack_mode: RackMode
) -> list[BrokerMetadata]:
    """``AdminZkClient.getBrokerMetadatas``: ``brokers`` (the registered ones) as
    ``rack_mode`` lets the assignment see them, sorted by id.

    Raises ``AdminOperationError`` (``NOT_ALL_RACKS_CLI_MESSAGE``) in Enforced mode when
    some but not all brokers have a rack.
    """
    racked = sum(1 for b in brokers if b.rack is not None)
    if rack_mode is RackMode.ENFORCED and 0 < racked < len(brokers):
        raise AdminOperationError(NOT_ALL_RACKS_CLI_MESSAGE)
    if rack_mode is RackMode.DISABLED or (rack_mode is RackMode.SAFE and racked < len(brokers)):
        brokers = [BrokerMetadata(b.id, None) for b in brokers]
    return sorted(brokers, key=lambda b: b.id)


def rack_alternated_brokers(racks: Mapping[BrokerId, str]) -> list[BrokerId]:
    """The rack-alternated broker list (``AdminUtils.getRackAlternatedBrokerList``): brokers
    grouped by rack (ids ascending in a rack), racks in name order (Java string order), then
    round-robin over the racks taking each one's next broker. ``{0:r1, 1:r3, 2:r3, 3:r2,
    4:r2, 5:r1}`` gives ``0,3,1,5,4,2``."""
    by_rack: dict[str, list[BrokerId]] = {}
    for broker, rack in racks.items():
        by_rack.setdefault(rack, []).append(broker)
    columns = [sorted(by_rack[rack]) for rack in sorted(by_rack, key=jvm.utf16_sort_key)]
    depth = max((len(column) for column in columns), default=0)
    return [column[i] for i in range(depth) for column in columns if i < len(column)]


def assign_replicas(
    brokers: Sequence[BrokerMetadata],
    n_partitions: int,
    replication_factor: int,
    *,
    start_index: int | None = None,
    shift: int | None = None,
    start_partition_id: int = 0,
    rng: random.Random | None = None,
    rack_mode: RackMode | None = None,
    max_replicas: int = DEFAULT_MAX_REPLICAS_PER_REQUEST,
) -> Assignment:
    """Assign ``replication_factor`` replicas to each of ``n_partitions`` partitions
    numbered from ``start_partition_id`` (``AdminUtils.assignReplicasToBrokers``).

    ``brokers`` are used in the order given, unless ``rack_mode`` is set: then they first
    go through ``broker_metadatas`` (filtered and sorted by id, Enforced raising on mixed
    racks before anything else is checked), as on Kafka's ZooKeeper paths. ``rack_mode``
    None is ``AdminUtils.assignReplicasToBrokers`` on the brokers as they are, as the
    CreateTopics API calls it.

    ``start_index`` (position of partition ``start_partition_id``'s first replica) and
    ``shift`` (initial follower shift) are each drawn from ``rng`` in that order when None;
    Kafka draws the two independently. Kafka's "fixed start index" is both set to it.

    Preconditions, in Kafka's order: ``n_partitions`` <= 0 -> INVALID_PARTITIONS;
    ``replication_factor`` <= 0 or > the number of brokers -> INVALID_REPLICATION_FACTOR;
    some but not all brokers racked -> ``AdminOperationError`` (``NOT_ALL_RACKS_MESSAGE``).
    Then kemu's own bound, before anything is built: more than ``max_replicas`` replicas
    in all -> POLICY_VIOLATION (``check_topic_replicas``, docs/limits.md).
    """
    if rack_mode is not None:
        brokers = broker_metadatas(brokers, rack_mode)
    if n_partitions <= 0:
        raise KafkaApiError(
            ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."
        )
    if replication_factor <= 0:
        raise KafkaApiError(
            ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
        )
    if replication_factor > len(brokers):
        raise KafkaApiError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Replication factor: {replication_factor} larger than available brokers:"
            f" {len(brokers)}.",
        )
    if any(b.rack is None for b in brokers) and any(b.rack is not None for b in brokers):
        raise AdminOperationError(NOT_ALL_RACKS_MESSAGE)
    check_topic_replicas(n_partitions, replication_factor, max_replicas)
    for name, value in (("start_index", start_index), ("shift", shift)):
        if value is not None and value < 0:
            raise ValueError(f"{name} must be >= 0, not {value}")
    first_partition = max(0, start_partition_id)

    if all(b.rack is None for b in brokers):
        ids = [b.id for b in brokers]
        start, shift = _draw(start_index, shift, len(ids), rng)
        return _rack_unaware(ids, n_partitions, replication_factor, start, shift, first_partition)
    racks = {b.id: b.rack for b in brokers if b.rack is not None}
    arranged = rack_alternated_brokers(racks)
    start, shift = _draw(start_index, shift, len(arranged), rng)
    return _rack_aware(
        arranged, racks, n_partitions, replication_factor, start, shift, first_partition
    )


def _draw(
    start_index: int | None, shift: int | None, n_brokers: int, rng: random.Random | None
) -> tuple[int, int]:
    """The start index and shift: given, or drawn from ``rng`` (start first)."""
    if (start_index is None or shift is None) and rng is None:
        raise ValueError("assign_replicas needs rng= unless start_index and shift are both given")
    if start_index is None:
        assert rng is not None
        start_index = rng.randrange(n_brokers)
    if shift is None:
        assert rng is not None
        shift = rng.randrange(n_brokers)
    return start_index, shift


def _replica_index(first: int, shift: int, j: int, n_brokers: int) -> int:
    """Position of follower ``j``: ``1 + (shift + j) mod (n-1)`` after the first replica,
    so never on it."""
    return (first + 1 + (shift + j) % (n_brokers - 1)) % n_brokers


def _repeated(
    replicas: Iterator[tuple[BrokerId, ...]],
    n_brokers: int,
    n_partitions: int,
    first_partition: int,
) -> Assignment:
    """The assignment of ``n_partitions`` partitions from ``first_partition``, given the
    replicas of each in turn (``replicas``, from ``first_partition`` on).

    Both of Kafka's placements repeat every n(n-1) partitions for n brokers: a partition's
    replicas depend only on its position modulo n and on the follower shift modulo n-1,
    and the shift grows by one every n partitions. So only the first period is computed,
    one partition at a time as Kafka does, and the rest repeats it (the same tuples,
    shared), without a Python step per partition: a 1,000,000-replica request is planned
    in tens of milliseconds instead of most of a second, while the whole cluster waits.
    """
    period = n_brokers * (n_brokers - 1) if n_brokers > 1 else 1
    head = list(itertools.islice(replicas, min(period, n_partitions)))
    ids = range(first_partition, first_partition + n_partitions)
    return dict(zip(ids, itertools.islice(itertools.cycle(head), n_partitions), strict=True))


def _rack_unaware(
    ids: Sequence[BrokerId],
    n_partitions: int,
    replication_factor: int,
    start: int,
    shift: int,
    first_partition: int,
) -> Assignment:
    def replicas(shift: int) -> Iterator[tuple[BrokerId, ...]]:
        n = len(ids)
        for partition in itertools.count(first_partition):
            if partition > 0 and partition % n == 0:
                shift += 1
            first = (partition + start) % n
            followers = (
                ids[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1)
            )
            yield (ids[first], *followers)

    return _repeated(replicas(shift), len(ids), n_partitions, first_partition)


def _rack_aware(
    arranged: Sequence[BrokerId],
    racks: Mapping[BrokerId, str],
    n_partitions: int,
    replication_factor: int,
    start: int,
    shift: int,
    first_partition: int,
) -> Assignment:
    return _repeated(
        _rack_aware_replicas(arranged, racks, replication_factor, start, shift, first_partition),
        len(arranged),
        n_partitions,
        first_partition,
    )


def _rack_aware_replicas(
    arranged: Sequence[BrokerId],
    racks: Mapping[BrokerId, str],
    replication_factor: int,
    start: int,
    shift: int,
    first_partition: int,
) -> Iterator[tuple[BrokerId, ...]]:
    n = len(arranged)
    n_racks = len(set(racks.values()))
    for partition in itertools.count(first_partition):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        leader = arranged[first]
        replicas = [leader]
        racks_used = {racks[leader]}
        brokers_used = {leader}
        k = 0
        for _ in range(replication_factor - 1):
            # Take the next candidate whose rack has no replica yet (unless every rack has
            # one) and that holds no replica yet (unless every broker does). Terminates:
            # the candidates cycle through all the other positions.
            while True:
                broker = arranged[_replica_index(first, shift * n_racks, k, n)]
                k += 1
                rack = racks[broker]
                if (rack not in racks_used or len(racks_used) == n_racks) and (
                    broker not in brokers_used or len(brokers_used) == n
                ):
                    replicas.append(broker)
                    racks_used.add(rack)
                    brokers_used.add(broker)
                    break
        yield tuple(replicas)


def partition_addition_start_index(
    broker_ids_sorted: Sequence[int], first_replica_of_p0: int
) -> int:
    """Start index (and initial shift) for new partitions, as
    ``AdminZkClient.createNewPartitionsAssignment`` computes it: the position in the
    id-sorted broker list of the first broker whose id is >= partition 0's first replica, or
    0 if there is none."""
    return next((i for i, b in enumerate(broker_ids_sorted) if b >= first_replica_of_p0), 0)


def check_partition_addition(
    topic: str, existing: Mapping[int, Sequence[int]], num_partitions: int
) -> tuple[int, ...]:
    """The first checks of ``createNewPartitionsAssignment``, in Kafka's order; returns
    partition 0's replicas.

    Partition 0 missing -> ``AdminOperationError``; ``num_partitions`` not above the
    current count -> INVALID_PARTITIONS.
    """
    if 0 not in existing:
        raise AdminOperationError(
            f"Unexpected existing replica assignment for topic '{topic}', partition id 0 is"
            f" missing. Assignment: {_scala_assignment_string(existing)}"
        )
    if num_partitions - len(existing) <= 0:
        raise KafkaApiError(
            ErrorCode.INVALID_PARTITIONS,
            "The number of partitions for a topic can only be increased. "
            f"Topic {topic} currently has {len(existing)} partitions, "
            f"{num_partitions} would not be an increase.",
        )
    return tuple(existing[0])


def add_partitions_assignment(
    brokers: Sequence[BrokerMetadata],
    existing: Mapping[int, Sequence[int]],
    num_partitions: int,
    *,
    topic: str,
    rack_mode: RackMode | None = None,
    max_replicas: int = DEFAULT_MAX_REPLICAS_PER_REQUEST,
) -> Assignment:
    """Automatic assignment of the partitions that take ``topic`` from ``len(existing)`` to
    ``num_partitions`` partitions (``AdminZkClient.createNewPartitionsAssignment``): RF is
    partition 0's, the start index and shift come from partition 0's first replica, ids
    continue the existing ones.

    ``brokers`` as for ``assign_replicas`` (Kafka passes the registered brokers through
    ``broker_metadatas`` in Enforced mode: pass ``rack_mode=RackMode.ENFORCED`` or
    brokers already so filtered). Raises as ``broker_metadatas`` (if ``rack_mode``), then
    as ``check_partition_addition``, then as ``assign_replicas`` (``max_replicas`` bounds
    the new replicas).
    """
    if rack_mode is not None:  # Kafka reads the brokers before looking at the topic
        brokers = broker_metadatas(brokers, rack_mode)
    partition0 = check_partition_addition(topic, existing, num_partitions)
    if not partition0:  # Kafka takes ``.head`` of the empty list
        raise AdminOperationError("head of empty list")
    start = partition_addition_start_index([b.id for b in brokers], partition0[0])
    return assign_replicas(
        brokers,
        num_partitions - len(existing),
        len(partition0),
        start_index=start,
        shift=start,
        start_partition_id=len(existing),
        max_replicas=max_replicas,
    )


def _scala_assignment_string(existing: Mapping[int, Sequence[int]]) -> str:
    """``toString`` of the ``Map[Int, ReplicaAssignment]`` Kafka prints (no partition of it
    is being reassigned when this is reached)."""
    keys = jvm.scala_immutable_order(list(existing))
    entries = ", ".join(
        f"{p} -> ReplicaAssignment(replicas={','.join(map(str, existing[p]))},"
        " addingReplicas=, removingReplicas=)"
        for p in keys
    )
    return f"{'Map' if len(keys) <= 4 else 'HashMap'}({entries})"
