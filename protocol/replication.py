"""Messages of a broker's replica fetchers (Kafka's ``ReplicaFetcherManager`` and its
``ReplicaFetcherThread`` s), between the broker's actors.

The broker's fetcher manager hands partitions to the fetcher of their leader
(``AddFetcherPartitions``, on becoming follower) and takes them back
(``RemoveFetcherPartitions``, on becoming leader, StopReplica, or a leader change; an
ask of it is answered ``FetcherPartitionsRemoved`` once no fetcher works on them);
``LeaderAnswered`` hands a fetcher its leader's answer, which it awaits with its mailbox
free, and ``FetcherContinue`` resumes its local work between two slices of partitions;
``FetcherStatusRequest`` reads a fetcher's partition states (for tests and tools);
``ResizeFetcherPool`` gives the manager a new ``num.replica.fetchers``, for which it takes
every fetcher's partitions with their states (``TakeFetcherPartitions``, answered
``FetcherPartitionsTaken``) and hands them out again; ``IsrExpiration`` is the leader's
ISR-expiration timer. What travels to the leader are Kafka's own OffsetForLeaderEpoch
and Fetch requests (``protocol.kafka_data``) with the follower's id as ``replica_id``.
"""

from __future__ import annotations

from enum import StrEnum

import msgspec

from protocol.base import Message
from protocol.control import TopicPartition
from protocol.ids import BrokerId

__all__ = [
    "AddFetcherPartitions",
    "FetcherContinue",
    "FetcherPartitionsRemoved",
    "FetcherPartitionsTaken",
    "FetcherStatus",
    "FetcherStatusRequest",
    "FetcherWork",
    "InitialFetchState",
    "IsrExpiration",
    "LeaderAnswered",
    "PartitionFetchState",
    "RemoveFetcherPartitions",
    "ReplicaState",
    "ResizeFetcherPool",
    "TakeFetcherPartitions",
]


class InitialFetchState(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Where a new follower starts (Kafka's ``InitialFetchState``): its ``leader`` and
    ``leader_epoch`` from the LeaderAndIsr, and ``fetch_offset``, the local high watermark
    (truncation comes first and may move it)."""

    partition: TopicPartition
    leader: BrokerId
    leader_epoch: int
    fetch_offset: int


class ReplicaState(StrEnum):
    """Kafka's ``ReplicaState`` of a fetched partition, plus ``failed``
    (``markPartitionFailed``: no more fetching until the next LeaderAndIsr)."""

    TRUNCATING = "truncating"
    FETCHING = "fetching"
    FAILED = "failed"


class PartitionFetchState(msgspec.Struct, frozen=True, kw_only=True):
    """Kafka's ``PartitionFetchState``: the next offset to fetch, the leader epoch the
    fetcher believes in, its state, and until when (clock seconds) it is delayed after an
    error (``replica.fetch.backoff.ms``); 0 when not delayed."""

    partition: TopicPartition
    fetch_offset: int
    leader_epoch: int
    state: ReplicaState
    delayed_until: float = 0.0
    log_start_offset: int = -1
    """The local log start as last seen (-1: not yet)."""
    high_watermark: int = -1
    """The follower high watermark last recorded (-1: none yet)."""


class AddFetcherPartitions(Message, frozen=True, kw_only=True):
    """Fetch these partitions from their leader (``addPartitions``). A partition already
    fetched at the same leader epoch keeps its state; otherwise it starts truncating."""

    partitions: tuple[InitialFetchState, ...]


class RemoveFetcherPartitions(Message, frozen=True, kw_only=True):
    """Stop fetching these partitions (``removeFetcherForPartitions``). Asked, it is
    answered ``FetcherPartitionsRemoved`` once every fetcher has dropped them, none of
    them in the middle of its local log work on one (Kafka's fetcher holds its
    ``partitionMapLock`` for that work, and the removal takes the lock)."""

    partitions: tuple[TopicPartition, ...]


class FetcherPartitionsRemoved(Message, frozen=True, kw_only=True):
    """The answer to an asked ``RemoveFetcherPartitions``."""


class FetcherWork(Message, frozen=True, kw_only=True):
    """A fetcher's own wake-up: run one round (``doWork``)."""

    local_only = True


class LeaderAnswered(Message, frozen=True, kw_only=True):
    """A fetcher's own message: the leader's answer to its request number ``call`` (None
    when the leader did not answer in time or refused), brought by the helper task that
    asked, so that the fetcher's mailbox stays free while the request is out."""

    local_only = True
    call: int
    reply: Message | None


class FetcherContinue(Message, frozen=True, kw_only=True):
    """A fetcher's own message: go on with the local work of its round (step number
    ``call``), after the messages that came meanwhile (a removal among them)."""

    local_only = True
    call: int


class IsrExpiration(Message, frozen=True, kw_only=True):
    """A broker's own timer (Kafka's ``isr-expiration`` task, every
    ``replica.lag.time.max.ms`` / 2): look for ISR followers that stopped catching up."""

    local_only = True


class FetcherStatusRequest(Message, frozen=True, kw_only=True):
    """Ask a fetcher for its ``FetcherStatus``."""


class FetcherStatus(Message, frozen=True, kw_only=True):
    """A fetcher's source broker and the state of each of its partitions, sorted."""

    leader: BrokerId
    partitions: tuple[PartitionFetchState, ...]


class ResizeFetcherPool(Message, frozen=True, kw_only=True):
    """The broker's ``num.replica.fetchers`` changed at run time
    (``DynamicThreadPool.reconfigure``): the manager re-hashes every partition to the new
    count of fetchers per leader (``AbstractFetcherManager.resizeThreadPool``)."""

    local_only = True
    num_fetchers: int


class TakeFetcherPartitions(Message, frozen=True, kw_only=True):
    """Ask a fetcher to drop every partition it fetches (all but the failed ones) and
    answer their states (``partitionsAndOffsets`` then ``removeFetcherForPartitions``,
    in one step), none in the middle of its local log work."""

    local_only = True


class FetcherPartitionsTaken(Message, frozen=True, kw_only=True):
    """The answer to ``TakeFetcherPartitions``: the states the fetcher dropped, and the
    failed partitions it keeps."""

    partitions: tuple[PartitionFetchState, ...]
    failed: tuple[TopicPartition, ...]
