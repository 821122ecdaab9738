"""The client-facing Kafka admin APIs as kemu's own typed values.

Real Kafka clients (kcat, kafka-python, confluent-kafka, aiokafka) talk to a broker over the
Kafka wire protocol. ``cluster.kafka.listener`` decodes their requests with the wire codec library
and turns them into the plain values below; the broker answers with the values below and
the adapter encodes them into the response of the version the client asked for. Nothing
outside that adapter sees the codec's types.

Each request type holds what every version of its API can carry; fields a version lacks
take their Kafka default. Each response type holds what the newest supported version can
carry; the adapter drops what an older version cannot say (error messages before they
existed, partition counts and configs in CreateTopics before v5) and, as Kafka does,
answers INVALID_REQUEST where DeleteTopics before v3 cannot say TOPIC_DELETION_DISABLED.

===========================  =======  ========================================================
API                          key      request / response values
===========================  =======  ========================================================
Metadata                     3        ``MetadataRequestData`` / ``MetadataResponseData``
CreateTopics                 19       ``CreateTopicsRequestData`` / ``CreateTopicsResponseData``
DeleteTopics                 20       ``DeleteTopicsRequestData`` / ``DeleteTopicsResponseData``
DescribeConfigs              32       ``DescribeConfigsRequestData`` / ``...ResponseData``
CreatePartitions             37       ``CreatePartitionsRequestData`` / ``...ResponseData``
ElectLeaders                 43       ``ElectLeadersRequestData`` / ``...ResponseData``
AlterPartitionReassignments  45       ``AlterPartitionReassignmentsRequestData`` / ``...``
ListPartitionReassignments   46       ``ListPartitionReassignmentsRequestData`` / ``...``
===========================  =======  ========================================================

The data-plane APIs (Produce, Fetch, ListOffsets, InitProducerId, OffsetForLeaderEpoch)
have their values in ``protocol.kafka_data``; the unions below include them.

The request and response values are ``Message`` subclasses, so a broker can forward an
admin request to the controller over kemu's own network unchanged.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

import msgspec

from protocol.base import Message
from protocol.errors import ErrorCode
from protocol.group import GroupResponseData, KafkaGroupRequestData
from protocol.ids import BrokerId, TopicName
from protocol.kafka_data import KafkaDataRequestData, KafkaDataResponseData

__all__ = [
    "NO_AUTHORIZED_OPERATIONS",
    "AlterConfigOp",
    "AlterConfigsRequestData",
    "AlterConfigsResource",
    "AlterConfigsResponseData",
    "AlterConfigsResult",
    "AlterPartitionReassignmentsRequestData",
    "AlterPartitionReassignmentsResponseData",
    "AlterableConfig",
    "BrokerEndpoint",
    "ClientApiKey",
    "ConfigEntry",
    "ConfigResource",
    "ConfigResourceType",
    "ConfigSource",
    "ConfigSynonym",
    "ConfigValueType",
    "CreatableTopic",
    "CreatePartitionsRequestData",
    "CreatePartitionsResponseData",
    "CreatePartitionsTopic",
    "CreateTopicResult",
    "CreateTopicsRequestData",
    "CreateTopicsResponseData",
    "DeleteTopicResult",
    "DeleteTopicsRequestData",
    "DeleteTopicsResponseData",
    "DescribableLogDirTopic",
    "DescribeConfigsRequestData",
    "DescribeConfigsResponseData",
    "DescribeConfigsResult",
    "DescribeLogDirsPartition",
    "DescribeLogDirsRequestData",
    "DescribeLogDirsResponseData",
    "DescribeLogDirsResult",
    "DescribeLogDirsTopic",
    "ElectLeadersPartitionResult",
    "ElectLeadersRequestData",
    "ElectLeadersResponseData",
    "ElectLeadersTopic",
    "ElectLeadersTopicResult",
    "IncrementalAlterConfigsRequestData",
    "IncrementalAlterConfigsResponseData",
    "KafkaApiRequestData",
    "KafkaApiResponseData",
    "ListPartitionReassignmentsRequestData",
    "ListPartitionReassignmentsResponseData",
    "ListReassignmentsTopic",
    "MetadataRequestData",
    "MetadataResponseData",
    "OngoingPartitionReassignment",
    "OngoingTopicReassignment",
    "PartitionAssignment",
    "PartitionMetadata",
    "ReassignablePartition",
    "ReassignablePartitionResponse",
    "ReassignableTopic",
    "ReassignableTopicResponse",
    "TopicConfig",
    "TopicErrorResult",
    "TopicMetadata",
    "elect_leaders_error",
]

NO_AUTHORIZED_OPERATIONS: Final = -(2**31)
"""Kafka's ``authorized_operations`` value when the client did not ask for them."""


class ClientApiKey(IntEnum):
    """The API keys of the client-facing requests kemu's brokers answer (``ApiKeys.java``)."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47


class ConfigResourceType(IntEnum):
    """``ConfigResource.Type`` wire ids (DescribeConfigs ``resource_type``)."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8


class ConfigSource(IntEnum):
    """``DescribeConfigsResponse.ConfigSource`` wire ids."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


class ConfigValueType(IntEnum):
    """``DescribeConfigsResponse.ConfigType`` wire ids (DescribeConfigs v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class _Value(msgspec.Struct, frozen=True, kw_only=True):
    """Base of the plain values nested inside requests and responses."""


# ------------------------------------------------------------------------ shared pieces


class TopicErrorResult(_Value, frozen=True, kw_only=True):
    """The outcome for one topic (CreatePartitions)."""

    name: TopicName
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None


class BrokerEndpoint(_Value, frozen=True, kw_only=True):
    """A live broker as clients see it: where to connect, and its rack."""

    broker_id: BrokerId
    host: str
    port: int
    rack: str | None = None


class ConfigSynonym(_Value, frozen=True, kw_only=True):
    name: str
    value: str | None
    source: ConfigSource


class ConfigEntry(_Value, frozen=True, kw_only=True):
    """One config as DescribeConfigs and CreateTopics (v5+) describe it."""

    name: str
    value: str | None
    read_only: bool = False
    source: ConfigSource = ConfigSource.DEFAULT_CONFIG
    is_sensitive: bool = False
    synonyms: tuple[ConfigSynonym, ...] = ()
    value_type: ConfigValueType = ConfigValueType.UNKNOWN
    documentation: str | None = None


# ------------------------------------------------------------------------ Metadata (3)


class MetadataRequestData(Message, frozen=True, kw_only=True):
    """``topics`` is ``None`` for every topic (v0: an empty list; v1+: null); an empty tuple
    (v1+) asks for brokers and the controller only."""

    topics: tuple[TopicName, ...] | None
    allow_auto_topic_creation: bool = True
    include_cluster_authorized_operations: bool = False
    include_topic_authorized_operations: bool = False


class PartitionMetadata(_Value, frozen=True, kw_only=True, gc=False):
    partition: int
    leader: BrokerId
    leader_epoch: int = -1
    replicas: tuple[BrokerId, ...] = ()
    isr: tuple[BrokerId, ...] = ()
    offline_replicas: tuple[BrokerId, ...] = ()
    error_code: ErrorCode = ErrorCode.NONE


class TopicMetadata(_Value, frozen=True, kw_only=True):
    name: TopicName
    error_code: ErrorCode = ErrorCode.NONE
    is_internal: bool = False
    partitions: tuple[PartitionMetadata, ...] = ()
    authorized_operations: int = NO_AUTHORIZED_OPERATIONS


class MetadataResponseData(Message, frozen=True, kw_only=True):
    """``cluster_id`` is never null: confluent-kafka's ``describe_cluster`` crashes on one.
    ``controller_id`` must be a live, advertised broker, or admin clients give up."""

    brokers: tuple[BrokerEndpoint, ...]
    cluster_id: str
    controller_id: BrokerId
    topics: tuple[TopicMetadata, ...] = ()
    cluster_authorized_operations: int = NO_AUTHORIZED_OPERATIONS
    throttle_time_ms: int = 0


# -------------------------------------------------------------------- CreateTopics (19)


class PartitionAssignment(_Value, frozen=True, kw_only=True):
    partition: int
    broker_ids: tuple[BrokerId, ...]


class TopicConfig(_Value, frozen=True, kw_only=True):
    """A config a client asks to set; a null value is a request error
    (``AdminManager.createTopics``: "Null value not supported for topic configs")."""

    name: str
    value: str | None


class CreatableTopic(_Value, frozen=True, kw_only=True):
    """-1/-1 for ``num_partitions``/``replication_factor`` means the broker defaults, or
    that ``assignments`` is given."""

    name: TopicName
    num_partitions: int
    replication_factor: int
    assignments: tuple[PartitionAssignment, ...] = ()
    configs: tuple[TopicConfig, ...] = ()


class CreateTopicsRequestData(Message, frozen=True, kw_only=True):
    topics: tuple[CreatableTopic, ...]
    timeout_ms: int
    validate_only: bool = False


class CreateTopicResult(_Value, frozen=True, kw_only=True):
    """On success (v5+) the resolved partition count, replication factor and configs; on
    error -1, -1 and no configs (``AdminManager.createTopics``)."""

    name: TopicName
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    num_partitions: int = -1
    replication_factor: int = -1
    configs: tuple[ConfigEntry, ...] | None = None


class CreateTopicsResponseData(Message, frozen=True, kw_only=True):
    topics: tuple[CreateTopicResult, ...]
    throttle_time_ms: int = 0


# -------------------------------------------------------------------- DeleteTopics (20)


class DeleteTopicsRequestData(Message, frozen=True, kw_only=True):
    """Topics by name; a topic may be named more than once."""

    topics: tuple[TopicName, ...]
    timeout_ms: int


class DeleteTopicResult(_Value, frozen=True, kw_only=True):
    """One entry's outcome, in the request's order."""

    name: TopicName
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None


class DeleteTopicsResponseData(Message, frozen=True, kw_only=True):
    topics: tuple[DeleteTopicResult, ...]
    throttle_time_ms: int = 0


# ----------------------------------------------------------------- DescribeConfigs (32)


class ConfigResource(_Value, frozen=True, kw_only=True):
    """``resource_type`` is a ``ConfigResourceType`` id, kept as sent so that an unknown one
    can be echoed back. ``configuration_keys`` ``None`` asks for every config."""

    resource_type: int
    resource_name: str
    configuration_keys: tuple[str, ...] | None = None


class DescribeConfigsRequestData(Message, frozen=True, kw_only=True):
    resources: tuple[ConfigResource, ...]
    include_synonyms: bool = False
    include_documentation: bool = False


class DescribeConfigsResult(_Value, frozen=True, kw_only=True):
    resource_type: int
    resource_name: str
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    configs: tuple[ConfigEntry, ...] = ()


class DescribeConfigsResponseData(Message, frozen=True, kw_only=True):
    results: tuple[DescribeConfigsResult, ...]
    throttle_time_ms: int = 0


# ------------------------------------------ AlterConfigs (33), IncrementalAlterConfigs (44)


class AlterConfigOp(IntEnum):
    """``AlterConfigOp.OpType`` wire ids (IncrementalAlterConfigs ``config_operation``)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class AlterableConfig(_Value, frozen=True, kw_only=True):
    """One config of an alteration. ``operation`` is an ``AlterConfigOp`` id, kept as sent
    (AlterConfigs has none: every entry is a SET of the whole new config)."""

    name: str
    value: str | None
    operation: int = AlterConfigOp.SET


class AlterConfigsResource(_Value, frozen=True, kw_only=True):
    """``resource_type`` is a ``ConfigResourceType`` id, kept as sent."""

    resource_type: int
    resource_name: str
    configs: tuple[AlterableConfig, ...]


class AlterConfigsResult(_Value, frozen=True, kw_only=True):
    resource_type: int
    resource_name: str
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None


class AlterConfigsRequestData(Message, frozen=True, kw_only=True):
    """AlterConfigs: each resource's whole new set of overrides."""

    resources: tuple[AlterConfigsResource, ...]
    validate_only: bool = False


class AlterConfigsResponseData(Message, frozen=True, kw_only=True):
    results: tuple[AlterConfigsResult, ...]
    throttle_time_ms: int = 0


class IncrementalAlterConfigsRequestData(Message, frozen=True, kw_only=True):
    """IncrementalAlterConfigs: each resource's operations on its current overrides."""

    resources: tuple[AlterConfigsResource, ...]
    validate_only: bool = False


class IncrementalAlterConfigsResponseData(Message, frozen=True, kw_only=True):
    results: tuple[AlterConfigsResult, ...]
    throttle_time_ms: int = 0


# ---------------------------------------------------------------- CreatePartitions (37)


class CreatePartitionsTopic(_Value, frozen=True, kw_only=True):
    """``count`` is the new total; ``assignments`` (one replica list per new partition)
    is ``None`` to let the broker assign."""

    name: TopicName
    count: int
    assignments: tuple[tuple[BrokerId, ...], ...] | None = None


class CreatePartitionsRequestData(Message, frozen=True, kw_only=True):
    topics: tuple[CreatePartitionsTopic, ...]
    timeout_ms: int
    validate_only: bool = False


class CreatePartitionsResponseData(Message, frozen=True, kw_only=True):
    results: tuple[TopicErrorResult, ...]
    throttle_time_ms: int = 0


# ---------------------------------------------------------------- ElectLeaders (43)


class ElectLeadersTopic(_Value, frozen=True, kw_only=True):
    topic: TopicName
    partitions: tuple[int, ...]


class ElectLeadersRequestData(Message, frozen=True, kw_only=True):
    """``topic_partitions`` None: every partition (the broker's metadata cache's).
    ``election_type`` is the wire byte (0 preferred, 1 unclean; v0 carries none: 0)."""

    topic_partitions: tuple[ElectLeadersTopic, ...] | None
    election_type: int = 0
    timeout_ms: int = 60000


class ElectLeadersPartitionResult(_Value, frozen=True, kw_only=True):
    partition_id: int
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None


class ElectLeadersTopicResult(_Value, frozen=True, kw_only=True):
    topic: TopicName
    partition_results: tuple[ElectLeadersPartitionResult, ...]


class ElectLeadersResponseData(Message, frozen=True, kw_only=True):
    results: tuple[ElectLeadersTopicResult, ...]
    error_code: ErrorCode = ErrorCode.NONE
    """Top level (v1+)."""
    throttle_time_ms: int = 0


def elect_leaders_error(
    req: ElectLeadersRequestData, code: ErrorCode, message: str | None
) -> ElectLeadersResponseData:
    """``ElectLeadersRequest.getErrorResponse``: ``code`` at the top level and for each
    partition asked for."""
    return ElectLeadersResponseData(
        error_code=code,
        results=tuple(
            ElectLeadersTopicResult(
                topic=t.topic,
                partition_results=tuple(
                    ElectLeadersPartitionResult(
                        partition_id=p, error_code=code, error_message=message
                    )
                    for p in t.partitions
                ),
            )
            for t in req.topic_partitions or ()
        ),
    )


# ---------------------------------------------------------------- AlterPartitionReassignments (45)


class ReassignablePartition(_Value, frozen=True, kw_only=True):
    """``replicas`` None: cancel the partition's reassignment in flight."""

    partition_index: int
    replicas: tuple[BrokerId, ...] | None


class ReassignableTopic(_Value, frozen=True, kw_only=True):
    name: TopicName
    partitions: tuple[ReassignablePartition, ...]


class AlterPartitionReassignmentsRequestData(Message, frozen=True, kw_only=True):
    topics: tuple[ReassignableTopic, ...]
    timeout_ms: int = 60000


class ReassignablePartitionResponse(_Value, frozen=True, kw_only=True):
    partition_index: int
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None


class ReassignableTopicResponse(_Value, frozen=True, kw_only=True):
    name: TopicName
    partitions: tuple[ReassignablePartitionResponse, ...]


class AlterPartitionReassignmentsResponseData(Message, frozen=True, kw_only=True):
    responses: tuple[ReassignableTopicResponse, ...] = ()
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    throttle_time_ms: int = 0


# ---------------------------------------------------------------- ListPartitionReassignments (46)


class ListReassignmentsTopic(_Value, frozen=True, kw_only=True):
    name: TopicName
    partition_indexes: tuple[int, ...]


class ListPartitionReassignmentsRequestData(Message, frozen=True, kw_only=True):
    """``topics`` None: every partition being reassigned."""

    topics: tuple[ListReassignmentsTopic, ...] | None
    timeout_ms: int = 60000


class OngoingPartitionReassignment(_Value, frozen=True, kw_only=True):
    partition_index: int
    replicas: tuple[BrokerId, ...]
    adding_replicas: tuple[BrokerId, ...]
    removing_replicas: tuple[BrokerId, ...]


class OngoingTopicReassignment(_Value, frozen=True, kw_only=True):
    name: TopicName
    partitions: tuple[OngoingPartitionReassignment, ...]


class ListPartitionReassignmentsResponseData(Message, frozen=True, kw_only=True):
    topics: tuple[OngoingTopicReassignment, ...] = ()
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    throttle_time_ms: int = 0


class DescribableLogDirTopic(_Value, frozen=True, kw_only=True):
    topic: TopicName
    partitions: tuple[int, ...]


class DescribeLogDirsRequestData(Message, frozen=True, kw_only=True):
    """``topics`` None: every partition hosted by the broker."""

    topics: tuple[DescribableLogDirTopic, ...] | None = None


class DescribeLogDirsPartition(_Value, frozen=True, kw_only=True):
    partition_index: int
    partition_size: int
    offset_lag: int
    is_future_key: bool = False


class DescribeLogDirsTopic(_Value, frozen=True, kw_only=True):
    name: TopicName
    partitions: tuple[DescribeLogDirsPartition, ...]


class DescribeLogDirsResult(_Value, frozen=True, kw_only=True):
    error_code: ErrorCode
    log_dir: str
    topics: tuple[DescribeLogDirsTopic, ...] = ()


class DescribeLogDirsResponseData(Message, frozen=True, kw_only=True):
    results: tuple[DescribeLogDirsResult, ...] = ()
    throttle_time_ms: int = 0


KafkaApiRequestData = (
    MetadataRequestData
    | DescribeLogDirsRequestData
    | AlterPartitionReassignmentsRequestData
    | ListPartitionReassignmentsRequestData
    | ElectLeadersRequestData
    | CreateTopicsRequestData
    | DeleteTopicsRequestData
    | DescribeConfigsRequestData
    | AlterConfigsRequestData
    | IncrementalAlterConfigsRequestData
    | CreatePartitionsRequestData
    | KafkaDataRequestData
    | KafkaGroupRequestData
)
"""Every client request kemu's brokers answer, as ``cluster.kafka.listener.request_data``
returns it."""

KafkaApiResponseData = (
    MetadataResponseData
    | DescribeLogDirsResponseData
    | AlterPartitionReassignmentsResponseData
    | ListPartitionReassignmentsResponseData
    | ElectLeadersResponseData
    | CreateTopicsResponseData
    | DeleteTopicsResponseData
    | DescribeConfigsResponseData
    | AlterConfigsResponseData
    | IncrementalAlterConfigsResponseData
    | CreatePartitionsResponseData
    | KafkaDataResponseData
    | GroupResponseData
)
"""Every answer ``cluster.kafka.listener.build_response`` turns into a wire response."""
