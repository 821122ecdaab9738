"""Messages between a broker and the rest of kemu that are not Kafka APIs."""

from __future__ import annotations

from protocol.base import Message
from protocol.control import TopicPartition
from protocol.controller import PartitionElectionResult
from protocol.ids import BrokerId, TopicName

__all__ = [
    "BrokerEpochChanged",
    "BrokerMetrics",
    "BrokerMetricsRequest",
    "BrokerStatus",
    "BrokerStatusRequest",
    "CompleteDelayedData",
    "ConfigChangesSeen",
    "DelayedDataExpired",
    "ElectionAnswered",
    "PurgatoryExpired",
]


class BrokerStatusRequest(Message, frozen=True, kw_only=True):
    """Ask a broker whether it is registered, and what it knows."""


class BrokerStatus(Message, frozen=True, kw_only=True):
    broker_id: BrokerId
    registered: bool
    broker_epoch: int
    session_id: int
    cluster_id: str
    controller_id: BrokerId
    live_brokers: tuple[BrokerId, ...]
    topics: tuple[TopicName, ...]


class BrokerMetricsRequest(Message, frozen=True, kw_only=True):
    """Ask a broker for its ``ReplicaManager``'s metrics."""


class BrokerMetrics(Message, frozen=True, kw_only=True):
    """A broker's ``ReplicaManager`` metrics under Kafka's names, (name, value) pairs."""

    broker_id: BrokerId
    gauges: tuple[tuple[str, int], ...]
    """LeaderCount, PartitionCount, OfflineReplicaCount, UnderReplicatedPartitions,
    UnderMinIsrPartitionCount, AtMinIsrPartitionCount."""
    meters: tuple[tuple[str, int], ...]
    """The counts of IsrExpandsPerSec, IsrShrinksPerSec, FailedIsrUpdatesPerSec."""


class PurgatoryExpired(Message, frozen=True, kw_only=True):
    """Timer event: a parked admin operation ran out of time."""

    local_only = True

    operation: int


class ElectionAnswered(Message, frozen=True, kw_only=True):
    """The broker's controller answered the ElectLeaders request ``operation`` (Kafka's
    ``ReplicaManager.electLeaders`` election callback): wait for the new leaders."""

    local_only = True

    operation: int
    results: tuple[PartitionElectionResult, ...]


class DelayedDataExpired(Message, frozen=True, kw_only=True):
    """Timer event: a parked Produce (acks=all) or Fetch reached its timeout."""

    local_only = True

    operation: int


class CompleteDelayedData(Message, frozen=True, kw_only=True):
    """The broker's reminder to itself: the leadership or ISR of these partitions
    changed, look at the Produce and Fetch requests parked on them."""

    local_only = True

    partitions: tuple[TopicPartition, ...]


class ConfigChangesSeen(Message, frozen=True, kw_only=True):
    """``/config/changes`` changed (or a new store session began): read the notifications
    not yet processed (``ZkNodeChangeNotificationListener``)."""

    local_only = True


class BrokerEpochChanged(Message, frozen=True, kw_only=True):
    """The controller component re-registered this broker after a store session expiry:
    its new broker epoch (the new znode's czxid)."""

    local_only = True

    epoch: int
