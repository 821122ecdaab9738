"""Control-plane messages between the controller and brokers (Kafka API keys 4 to 7).

These are the requests the active controller sends to every live broker, and the one a
broker sends to the controller when it shuts down cleanly. They mirror the fields of Kafka
2.7's ``clients/src/main/resources/common/message/*.json`` schemas at the versions a 2.7
controller sends with the default inter-broker protocol (``2.7-IV2``):

=========================  =======  ========  ==============================================
Message                    API key  Version   What we emulate
=========================  =======  ========  ==============================================
``LeaderAndIsrRequest``    4        v4        per-partition leader, ISR, zkVersion, replicas,
                                              adding/removing replicas, ``isNew``; the
                                              endpoints of every leader in ``live_leaders``.
                                              (v5, Kafka 2.8, adds a full/incremental
                                              ``Type`` and topic ids; a 2.7 controller never
                                              sends them, so there is no ``type`` field.)
``StopReplicaRequest``     5        v3        one request per broker that mixes
                                              ``delete_partition`` true and false, each
                                              partition with its own leader epoch:
                                              ``EPOCH_DURING_DELETE`` (-2) for a topic queued
                                              for deletion, else the cached leader epoch,
                                              else ``NO_EPOCH`` (-1).
``UpdateMetadataRequest``  6        v6        partition states with offline replicas (a topic
                                              queued for deletion is sent with leader
                                              ``LEADER_DURING_DELETE``), and the full list of
                                              live-or-shutting-down brokers with endpoints
                                              and rack.
``ControlledShutdown...``  7        v3        broker id and broker epoch; the answer lists the
                                              partitions the broker still leads.
``AlterIsrRequest``        56       v0        a partition leader's proposed ISR per partition
                                              with the leader epoch and the state znode's
                                              version it was based on; the answer is the
                                              ISR written (or the current one) per
                                              partition, or why not.
=========================  =======  ========  ==============================================

Kafka groups partitions by topic on the wire; here each partition entry carries its topic,
which is what the controller's request batch and the broker's handlers work with. Every
request carries the controller's id and epoch and the *target* broker's epoch (the czxid of
its ``/brokers/ids/<id>`` znode), so that a broker can reject a stale controller
(``STALE_CONTROLLER_EPOCH``) or a request meant for a previous incarnation of itself
(``STALE_BROKER_EPOCH``).
"""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar, Final

import msgspec

from protocol.base import Message
from protocol.errors import ErrorCode
from protocol.ids import BrokerEpoch, BrokerId, ControllerEpoch, LeaderEpoch, TopicName

__all__ = [
    "EPOCH_DURING_DELETE",
    "INITIAL_LEADER_EPOCH",
    "INITIAL_ZK_VERSION",
    "LEADER_DURING_DELETE",
    "NO_EPOCH",
    "NO_LEADER",
    "AlterIsrPartition",
    "AlterIsrPartitionResult",
    "AlterIsrRequest",
    "AlterIsrResponse",
    "ApiKey",
    "ControlledShutdownRequest",
    "ControlledShutdownResponse",
    "Endpoint",
    "LeaderAndIsrPartitionState",
    "LeaderAndIsrRequest",
    "LeaderAndIsrResponse",
    "LiveLeader",
    "PartitionError",
    "SecurityProtocol",
    "StopReplicaPartitionState",
    "StopReplicaRequest",
    "StopReplicaResponse",
    "TopicPartition",
    "UpdateMetadataBroker",
    "UpdateMetadataPartitionState",
    "UpdateMetadataRequest",
    "UpdateMetadataResponse",
]

# The sentinels of Kafka's ``kafka.api.LeaderAndIsr`` object, with the same numbers.
NO_LEADER: Final = BrokerId(-1)
"""A partition without a leader (state znode ``"leader":-1``)."""
LEADER_DURING_DELETE: Final = BrokerId(-2)
"""The leader UpdateMetadata announces for a partition of a topic queued for deletion."""
NO_EPOCH: Final = LeaderEpoch(-1)
"""StopReplica's leader epoch when the controller knows none: the broker accepts it."""
EPOCH_DURING_DELETE: Final = LeaderEpoch(-2)
"""StopReplica's leader epoch for a topic queued for deletion: the broker always accepts it."""
INITIAL_LEADER_EPOCH: Final = LeaderEpoch(0)
INITIAL_ZK_VERSION: Final = 0


class ApiKey(IntEnum):
    """Kafka's API keys of the control-plane requests (``ApiKeys.java``)."""

    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    ALTER_ISR = 56


class SecurityProtocol(IntEnum):
    """Kafka's ``SecurityProtocol`` with its wire ids; the names are what ZooKeeper stores."""

    PLAINTEXT = 0
    SSL = 1
    SASL_PLAINTEXT = 2
    SASL_SSL = 3


class TopicPartition(msgspec.Struct, frozen=True, order=True, gc=False):
    """A partition of a topic. Ordered by topic, then partition, so sets of them sort the
    way Kafka's tools print them."""

    topic: TopicName
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"  # Kafka's TopicPartition.toString


class PartitionError(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """The outcome for one partition in a LeaderAndIsr or StopReplica response."""

    topic: TopicName
    partition: int
    error_code: ErrorCode

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


# --------------------------------------------------------------------- LeaderAndIsr (4)


class LeaderAndIsrPartitionState(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """What a replica must know to become leader or follower of one partition.

    ``controller_epoch`` is the epoch of the controller that wrote this leadership (from the
    state znode), not necessarily the sender's; ``zk_version`` is the state znode's version,
    which the leader needs for its own conditional ISR updates.
    """

    topic: TopicName
    partition: int
    controller_epoch: ControllerEpoch
    leader: BrokerId
    leader_epoch: LeaderEpoch
    isr: tuple[BrokerId, ...]
    zk_version: int
    replicas: tuple[BrokerId, ...]
    adding_replicas: tuple[BrokerId, ...] = ()
    removing_replicas: tuple[BrokerId, ...] = ()
    is_new: bool = False

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class LiveLeader(msgspec.Struct, frozen=True, kw_only=True):
    """Where a leader named in a LeaderAndIsr request can be reached (inter-broker listener),
    so that a new follower can start fetching before UpdateMetadata arrives."""

    broker_id: BrokerId
    host: str
    port: int


class LeaderAndIsrRequest(Message, frozen=True, kw_only=True):
    """Controller → broker: become leader or follower of these partitions (API key 4, v4)."""

    api_key: ClassVar[ApiKey] = ApiKey.LEADER_AND_ISR
    api_version: ClassVar[int] = 4

    controller_id: BrokerId
    controller_epoch: ControllerEpoch
    broker_epoch: BrokerEpoch
    partition_states: tuple[LeaderAndIsrPartitionState, ...]
    live_leaders: tuple[LiveLeader, ...]


class LeaderAndIsrResponse(Message, frozen=True, kw_only=True):
    """Broker → controller: a top-level error (e.g. STALE_CONTROLLER_EPOCH, in which case
    nothing was applied) and one error per partition otherwise."""

    api_key: ClassVar[ApiKey] = ApiKey.LEADER_AND_ISR
    api_version: ClassVar[int] = 4

    error_code: ErrorCode
    partition_errors: tuple[PartitionError, ...] = ()


# ------------------------------------------------------------------- StopReplica (5)


class StopReplicaPartitionState(msgspec.Struct, frozen=True, kw_only=True):
    """One partition to stop replicating; with ``delete_partition`` its log is deleted too.

    The broker accepts the request for a hosted partition only if ``leader_epoch`` is
    ``EPOCH_DURING_DELETE`` (-2), ``NO_EPOCH`` (-1), or newer than the epoch it has;
    otherwise it answers FENCED_LEADER_EPOCH for that partition.
    """

    topic: TopicName
    partition: int
    leader_epoch: LeaderEpoch = NO_EPOCH
    delete_partition: bool

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class StopReplicaRequest(Message, frozen=True, kw_only=True):
    """Controller → broker: stop (and maybe delete) replicas (API key 5, v3).

    With v3 one request per broker mixes ``delete_partition`` true and false; only the
    delete=true partitions of topics whose deletion has started are reported back to the
    deletion manager.
    """

    api_key: ClassVar[ApiKey] = ApiKey.STOP_REPLICA
    api_version: ClassVar[int] = 3

    controller_id: BrokerId
    controller_epoch: ControllerEpoch
    broker_epoch: BrokerEpoch
    partitions: tuple[StopReplicaPartitionState, ...]


class StopReplicaResponse(Message, frozen=True, kw_only=True):
    """Broker → controller: the top-level error and one error per partition."""

    api_key: ClassVar[ApiKey] = ApiKey.STOP_REPLICA
    api_version: ClassVar[int] = 3

    error_code: ErrorCode
    partition_errors: tuple[PartitionError, ...] = ()


# ---------------------------------------------------------------- UpdateMetadata (6)


class UpdateMetadataPartitionState(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A partition as every broker's metadata cache should see it.

    For a topic queued for deletion the controller sends ``leader=LEADER_DURING_DELETE``
    with the ISR kept and ``leader_epoch``/``zk_version`` at their initial values, so that
    brokers stop serving it before its replicas are deleted.
    """

    topic: TopicName
    partition: int
    controller_epoch: ControllerEpoch
    leader: BrokerId
    leader_epoch: LeaderEpoch
    isr: tuple[BrokerId, ...]
    zk_version: int
    replicas: tuple[BrokerId, ...]
    offline_replicas: tuple[BrokerId, ...] = ()

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class Endpoint(msgspec.Struct, frozen=True, kw_only=True):
    """One advertised listener of a broker. ``listener`` is the listener name (upper case,
    as Kafka normalises it); an empty ``host`` is Kafka's null host (bind-all listener)."""

    host: str
    port: int
    listener: str
    security_protocol: SecurityProtocol


class UpdateMetadataBroker(msgspec.Struct, frozen=True, kw_only=True):
    """A live (or shutting-down) broker as announced to every metadata cache."""

    id: BrokerId
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None


class UpdateMetadataRequest(Message, frozen=True, kw_only=True):
    """Controller → broker: refresh the metadata cache (API key 6, v6).

    ``live_brokers`` is always the full list; ``partition_states`` may be empty (the first
    request after a failover only announces the brokers).
    """

    api_key: ClassVar[ApiKey] = ApiKey.UPDATE_METADATA
    api_version: ClassVar[int] = 6

    controller_id: BrokerId
    controller_epoch: ControllerEpoch
    broker_epoch: BrokerEpoch
    partition_states: tuple[UpdateMetadataPartitionState, ...] = ()
    live_brokers: tuple[UpdateMetadataBroker, ...]


class UpdateMetadataResponse(Message, frozen=True, kw_only=True):
    """Broker → controller: NONE, or why the update was refused."""

    api_key: ClassVar[ApiKey] = ApiKey.UPDATE_METADATA
    api_version: ClassVar[int] = 6

    error_code: ErrorCode


# ------------------------------------------------------------ ControlledShutdown (7)


class ControlledShutdownRequest(Message, frozen=True, kw_only=True):
    """Broker → controller: move my leaderships away before I stop (API key 7, v3).

    A broker epoch older than the controller's cached one is refused (STALE_BROKER_EPOCH).
    """

    api_key: ClassVar[ApiKey] = ApiKey.CONTROLLED_SHUTDOWN
    api_version: ClassVar[int] = 3

    broker_id: BrokerId
    broker_epoch: BrokerEpoch


class ControlledShutdownResponse(Message, frozen=True, kw_only=True):
    """Controller → broker: the partitions the broker still leads. The broker retries
    (up to ``controlled.shutdown.max.retries``) until the error is NONE and none remain."""

    api_key: ClassVar[ApiKey] = ApiKey.CONTROLLED_SHUTDOWN
    api_version: ClassVar[int] = 3

    error_code: ErrorCode
    remaining_partitions: tuple[TopicPartition, ...] = ()


# ---------------------------------------------------------------------- AlterIsr (56)


class AlterIsrPartition(msgspec.Struct, frozen=True, kw_only=True):
    """One partition's proposed ISR: ``leader_epoch`` is the epoch the leader holds,
    ``current_isr_version`` the zkVersion of the state znode its ISR came from (the
    controller writes conditionally on it)."""

    topic: TopicName
    partition: int
    leader_epoch: LeaderEpoch
    new_isr: tuple[BrokerId, ...]
    current_isr_version: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class AlterIsrRequest(Message, frozen=True, kw_only=True):
    """Partition leader → controller: change these ISRs (API key 56, v0; Kafka's
    ``AlterIsrManager`` sends every queued change of a broker in one request).

    ``broker_id`` is the leader asking (the leader the controller writes), ``broker_epoch``
    its registration's czxid: an unknown broker or another epoch than the controller's is
    answered STALE_BROKER_EPOCH as a whole.
    """

    api_key: ClassVar[ApiKey] = ApiKey.ALTER_ISR
    api_version: ClassVar[int] = 0

    broker_id: BrokerId
    broker_epoch: BrokerEpoch
    partitions: tuple[AlterIsrPartition, ...]


class AlterIsrPartitionResult(msgspec.Struct, frozen=True, kw_only=True):
    """One partition's answer: with ``error_code`` NONE, the leader, leader epoch, ISR and
    state znode version now in force (the leader commits them); otherwise
    UNKNOWN_TOPIC_OR_PARTITION, FENCED_LEADER_EPOCH or INVALID_UPDATE_VERSION and the
    other fields at their sentinels."""

    topic: TopicName
    partition: int
    error_code: ErrorCode = ErrorCode.NONE
    leader: BrokerId = NO_LEADER
    leader_epoch: LeaderEpoch = NO_EPOCH
    isr: tuple[BrokerId, ...] = ()
    current_isr_version: int = -1

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class AlterIsrResponse(Message, frozen=True, kw_only=True):
    """Controller → partition leader: a top-level error (NOT_CONTROLLER,
    STALE_BROKER_EPOCH: nothing was looked at, the leader sends again) or one result per
    partition."""

    api_key: ClassVar[ApiKey] = ApiKey.ALTER_ISR
    api_version: ClassVar[int] = 0

    error_code: ErrorCode
    partitions: tuple[AlterIsrPartitionResult, ...] = ()
