"""How many replicas one admin request, and the whole cluster, may hold (docs/limits.md).

Kafka 2.7 has no such bound: ``AdminManager.createTopics`` hands any partition count to
``AdminUtils.assignReplicasToBrokers``, which builds the whole assignment in memory
before anything else looks at its size (a request for 2^31-1 partitions runs the
controller broker out of heap). In kemu every broker shares one event loop, so the same
request would freeze the whole cluster. kemu therefore refuses, before any assignment is
built, a request whose replicas are more than the emulator can hold, with the code and
the wording Kafka itself later chose for the same guard
(``ReplicationControlManager.validateTotalNumberOfPartitions`` of the KRaft controller:
POLICY_VIOLATION, "Excessively large number of partitions per request."), counting
replicas rather than partitions because replicas are what take memory and time here.

Every count is computed from the request's numbers, never by building what they describe.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from protocol.errors import ErrorCode, KafkaApiError

__all__ = [
    "DEFAULT_MAX_REPLICAS_PER_CLUSTER",
    "DEFAULT_MAX_REPLICAS_PER_REQUEST",
    "MAX_REPLICAS_PER_CLUSTER_CONFIG",
    "MAX_REPLICAS_PER_REQUEST_CONFIG",
    "RequestedTopic",
    "check_cluster_replicas",
    "check_request_replicas",
    "check_topic_replicas",
    "requested_replicas",
]

MAX_REPLICAS_PER_REQUEST_CONFIG: Final = "kemu.max.replicas.per.request"
"""The broker config bounding the replicas one CreateTopics or CreatePartitions may add."""
MAX_REPLICAS_PER_CLUSTER_CONFIG: Final = "kemu.max.replicas.per.cluster"
"""The broker config bounding the replicas of every topic of the cluster together."""

DEFAULT_MAX_REPLICAS_PER_REQUEST: Final = 1_000_000
"""3.3 times the largest request the benches send (1,000 topics x 100 partitions x RF 3 =
300,000 replicas); the assignment of a request at the limit is planned in about 40 ms."""
DEFAULT_MAX_REPLICAS_PER_CLUSTER: Final = 2_000_000
"""6.7 times the scale bench's cluster (300,000 replicas: 0.5 GB peak with 3 brokers, 0.9 GB
with 100), so a full cluster stays within a few GB."""


def _refusal(what: str, requested: int, limit: int, config: str) -> KafkaApiError:
    return KafkaApiError(
        ErrorCode.POLICY_VIOLATION,
        f"Excessively large number of replicas {what}: {requested} requested, kemu's limit"
        f" is {limit} ({config}).",
    )


def check_topic_replicas(partitions: int, replication_factor: int, limit: int) -> None:
    """One topic's ``partitions`` new partitions of ``replication_factor`` replicas each,
    against the per-request ``limit``: POLICY_VIOLATION naming the limit if they are more.
    Called before their assignment is built (``assign_replicas``)."""
    requested = partitions * replication_factor
    if requested > limit:
        raise _refusal("per request", requested, limit, MAX_REPLICAS_PER_REQUEST_CONFIG)


@dataclass(frozen=True, slots=True)
class RequestedTopic:
    """One topic of a CreateTopics request as its numbers say, before any check:
    ``num_partitions`` and ``replication_factor`` (-1: the broker's default), and the
    sizes of its manual replica lists (empty: none)."""

    num_partitions: int
    replication_factor: int
    manual: Sequence[int] = ()


def requested_replicas(topic: RequestedTopic, num_partitions: int, replication_factor: int) -> int:
    """The replicas ``topic`` asks for: the sum of its manual lists, else its counts (a
    -1 replaced by the broker's ``num_partitions`` / ``replication_factor``). A count
    that is not positive asks for none: the topic's own checks refuse it."""
    if topic.manual:
        return sum(topic.manual)
    partitions = num_partitions if topic.num_partitions == -1 else topic.num_partitions
    rf = replication_factor if topic.replication_factor == -1 else topic.replication_factor
    return max(partitions, 0) * max(rf, 0)


def check_request_replicas(
    topics: Iterable[RequestedTopic],
    *,
    num_partitions: int,
    replication_factor: int,
    limit: int,
) -> int:
    """A whole CreateTopics request against the per-request ``limit``, as
    ``ReplicationControlManager.validateTotalNumberOfPartitions`` checks a request before
    any of its topics: POLICY_VIOLATION (for every topic of the request) if the replicas of
    all its topics together are more. ``num_partitions`` and ``replication_factor`` are
    the broker's defaults for the topics that say -1. Returns the total, for
    ``check_cluster_replicas``."""
    total = sum(requested_replicas(t, num_partitions, replication_factor) for t in topics)
    if total > limit:
        raise _refusal("per request", total, limit, MAX_REPLICAS_PER_REQUEST_CONFIG)
    return total


def check_cluster_replicas(existing: int, adding: int, limit: int) -> None:
    """``adding`` replicas to a cluster whose topics hold ``existing``, against the
    per-cluster ``limit``: POLICY_VIOLATION naming the limit if the sum is more."""
    if existing + adding > limit:
        raise _refusal(
            f"in the cluster ({existing} already, {adding} more)",
            existing + adding,
            limit,
            MAX_REPLICAS_PER_CLUSTER_CONFIG,
        )
