"""The per-API translations between the codec's objects and kemu's plain values
(``protocol.kafka_api``): requests and responses, for the server and the client side, and
the error response of each API."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, Final

from cluster.kafka.codec import (
    _NO_THROTTLE,
    _broker_ids,
    _build,
    _config_source,
    _error_code,
    _fields,
    _has_field,
    _millis,
    _response_schema,
    _topic_id,
)
from cluster.kafka.framing import KafkaRequest, _read_response, _request_frame
from protocol.errors import ErrorCode, FrameError
from protocol.ids import BrokerId, TopicName
from protocol.kafka_api import (
    NO_AUTHORIZED_OPERATIONS,
    BrokerEndpoint,
    ClientApiKey,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ConfigSynonym,
    ConfigValueType,
    CreatableTopic,
    CreatePartitionsRequestData,
    CreatePartitionsResponseData,
    CreatePartitionsTopic,
    CreateTopicResult,
    CreateTopicsRequestData,
    CreateTopicsResponseData,
    DeleteTopicResult,
    DeleteTopicsRequestData,
    DeleteTopicsResponseData,
    DescribeClusterRequestData,
    DescribeClusterResponseData,
    DescribeConfigsRequestData,
    DescribeConfigsResponseData,
    DescribeConfigsResult,
    KafkaApiRequestData,
    KafkaApiResponseData,
    MetadataRequestData,
    MetadataResponseData,
    PartitionAssignment,
    PartitionMetadata,
    TopicConfig,
    TopicErrorResult,
    TopicMetadata,
    TopicRef,
)


def _default(kafka_type: str | None, nested: Any, field_type: Any) -> Any:
    """A neutral value for a required field, or raises ``LookupError``."""
    if typing.get_origin(field_type) is tuple:
        return ()
    if isinstance(field_type, types.UnionType) and type(None) in typing.get_args(field_type):
        return None
    if nested is not None:
        raise LookupError("a required nested entity has no neutral value")
    neutral: dict[str | None, Any] = {
        "bool": False,
        "string": "",
        "uuid": None,
        "timedelta_i32": _NO_THROTTLE,
        "timedelta_i64": _NO_THROTTLE,
    }
    if kafka_type in neutral:
        return neutral[kafka_type]
    if kafka_type is not None and kafka_type.startswith(("int", "uint", "float")):
        return 0
    raise LookupError(f"no neutral value for a {kafka_type} field")


def _generic_error_response(request: KafkaRequest, code: ErrorCode, message: str | None) -> Any:
    """For a response schema with a top-level ``error_code`` and nothing else that needs a
    value: the error, and neutral values elsewhere. ``None`` where the schema cannot."""
    cls = _response_schema(request.api_key, request.api_version)
    if not _has_field(cls, "error_code"):
        return None
    types_by_name = {f.name: f.type for f in dataclasses.fields(cls)}
    values: dict[str, Any] = {"error_code": code, "error_message": message}
    try:
        for name, kafka_type, nested, required in _fields(cls):
            if required and name not in values:
                values[name] = _default(kafka_type, nested, types_by_name[name])
    except LookupError:
        return None
    return _build(cls, values)


def error_response(
    request: KafkaRequest, code: ErrorCode, message: str | None = None
) -> Any | None:
    """The response Kafka's ``getErrorResponse`` gives: for the admin APIs every topic or
    resource of the request gets ``code``; for other APIs, where the response schema has a
    top-level error code, that. ``None`` when the schema cannot carry an error."""
    try:
        data = request_data(request)
    except ValueError:
        return _generic_error_response(request, code, message)
    answer: KafkaApiResponseData
    match data:
        case MetadataRequestData():
            topics = tuple(
                TopicMetadata(name=t.name or TopicName(""), topic_id=t.topic_id, error_code=code)
                for t in data.topics or ()
            )
            answer = MetadataResponseData(
                brokers=(), cluster_id="", controller_id=BrokerId(-1), topics=topics
            )
        case CreateTopicsRequestData():
            answer = CreateTopicsResponseData(
                topics=tuple(
                    CreateTopicResult(name=t.name, error_code=code, error_message=message)
                    for t in data.topics
                )
            )
        case DeleteTopicsRequestData():
            answer = DeleteTopicsResponseData(
                topics=tuple(
                    DeleteTopicResult(
                        name=t.name, topic_id=t.topic_id, error_code=code, error_message=message
                    )
                    for t in data.topics
                )
            )
        case DescribeConfigsRequestData():
            answer = DescribeConfigsResponseData(
                results=tuple(
                    DescribeConfigsResult(
                        resource_type=r.resource_type,
                        resource_name=r.resource_name,
                        error_code=code,
                        error_message=message,
                    )
                    for r in data.resources
                )
            )
        case CreatePartitionsRequestData():
            answer = CreatePartitionsResponseData(
                results=tuple(
                    TopicErrorResult(name=t.name, error_code=code, error_message=message)
                    for t in data.topics
                )
            )
        case DescribeClusterRequestData():
            answer = DescribeClusterResponseData(
                cluster_id="",
                controller_id=BrokerId(-1),
                brokers=(),
                error_code=code,
                error_message=message,
                endpoint_type=data.endpoint_type,
            )
        case _:
            typing.assert_never(data)
    return build_response(request, answer)


def request_data(request: KafkaRequest) -> KafkaApiRequestData:
    """kemu's plain value for a client admin request. Raises ``ValueError`` for an API
    this module has no plain values for."""
    body, version = request.body, request.api_version
    match request.api_key:
        case ClientApiKey.METADATA:
            return _metadata_request(body, version)
        case ClientApiKey.CREATE_TOPICS:
            return CreateTopicsRequestData(
                topics=tuple(_creatable_topic(t) for t in body.topics),
                timeout_ms=_millis(body.timeout),
                validate_only=bool(getattr(body, "validate_only", False)),
            )
        case ClientApiKey.DELETE_TOPICS:
            if hasattr(body, "topics"):  # v6+: by name or by id
                refs = tuple(
                    TopicRef(
                        name=None if t.name is None else TopicName(t.name),
                        topic_id=_topic_id(t.topic_id),
                    )
                    for t in body.topics
                )
            else:
                refs = tuple(TopicRef(name=TopicName(n)) for n in body.topic_names)
            return DeleteTopicsRequestData(topics=refs, timeout_ms=_millis(body.timeout))
        case ClientApiKey.DESCRIBE_CONFIGS:
            return DescribeConfigsRequestData(
                resources=tuple(
                    ConfigResource(
                        resource_type=int(r.resource_type),
                        resource_name=r.resource_name,
                        configuration_keys=(
                            None if r.configuration_keys is None else tuple(r.configuration_keys)
                        ),
                    )
                    for r in body.resources
                ),
                include_synonyms=bool(getattr(body, "include_synonyms", False)),
                include_documentation=bool(getattr(body, "include_documentation", False)),
            )
        case ClientApiKey.CREATE_PARTITIONS:
            return CreatePartitionsRequestData(
                topics=tuple(
                    CreatePartitionsTopic(
                        name=TopicName(t.name),
                        count=int(t.count),
                        assignments=(
                            None
                            if t.assignments is None
                            else tuple(_broker_ids(a.broker_ids) for a in t.assignments)
                        ),
                    )
                    for t in body.topics
                ),
                timeout_ms=_millis(body.timeout),
                validate_only=bool(body.validate_only),
            )
        case ClientApiKey.DESCRIBE_CLUSTER:
            return DescribeClusterRequestData(
                include_cluster_authorized_operations=bool(
                    body.include_cluster_authorized_operations
                ),
                endpoint_type=int(getattr(body, "endpoint_type", 1)),
            )
    raise ValueError(f"API {request.api_key} has no plain request values")


def _metadata_request(body: Any, version: int) -> MetadataRequestData:
    topics: tuple[TopicRef, ...] | None
    if body.topics is None or (version == 0 and not body.topics):
        topics = None  # every topic
    else:
        topics = tuple(
            TopicRef(
                name=None if t.name is None else TopicName(t.name),
                topic_id=_topic_id(getattr(t, "topic_id", None)),
            )
            for t in body.topics
        )
    return MetadataRequestData(
        topics=topics,
        allow_auto_topic_creation=bool(getattr(body, "allow_auto_topic_creation", True)),
        include_cluster_authorized_operations=bool(
            getattr(body, "include_cluster_authorized_operations", False)
        ),
        include_topic_authorized_operations=bool(
            getattr(body, "include_topic_authorized_operations", False)
        ),
    )


def _creatable_topic(topic: Any) -> CreatableTopic:
    return CreatableTopic(
        name=TopicName(topic.name),
        num_partitions=int(topic.num_partitions),
        replication_factor=int(topic.replication_factor),
        assignments=tuple(
            PartitionAssignment(
                partition=int(a.partition_index), broker_ids=_broker_ids(a.broker_ids)
            )
            for a in topic.assignments
        ),
        configs=tuple(TopicConfig(name=c.name, value=c.value) for c in topic.configs),
    )


def build_response(request: KafkaRequest, data: KafkaApiResponseData) -> Any:
    """The response object answering ``request`` (of its API and version) with ``data``.
    What the version cannot carry is dropped. Raises ``TypeError`` when ``data`` answers
    another API."""
    key, version = request.api_key, request.api_version
    expected = _RESPONSE_TYPES.get(key)
    if expected is None or not isinstance(data, expected):
        raise TypeError(f"{type(data).__name__} does not answer API {key}")
    cls = _response_schema(key, version)
    values: dict[str, Any]
    match data:
        case MetadataResponseData():
            values = _metadata_values(data)
        case CreateTopicsResponseData():
            values = {
                "throttle_time": data.throttle_time_ms,
                "topics": [_create_topic_values(t) for t in data.topics],
            }
        case DeleteTopicsResponseData():
            values = {
                "throttle_time": data.throttle_time_ms,
                "responses": [
                    {
                        "name": t.name,
                        "topic_id": t.topic_id,
                        "error_code": _deletion_error(t.error_code, version),
                        "error_message": t.error_message,
                    }
                    for t in data.topics
                ],
            }
        case DescribeConfigsResponseData():
            asked = request_data(request)
            assert isinstance(asked, DescribeConfigsRequestData)
            values = {
                "throttle_time": data.throttle_time_ms,
                "results": [
                    {
                        "error_code": r.error_code,
                        "error_message": r.error_message,
                        "resource_type": r.resource_type,
                        "resource_name": r.resource_name,
                        "configs": [_config_values(c, asked) for c in r.configs],
                    }
                    for r in data.results
                ],
            }
        case CreatePartitionsResponseData():
            values = {
                "throttle_time": data.throttle_time_ms,
                "results": [
                    {"name": r.name, "error_code": r.error_code, "error_message": r.error_message}
                    for r in data.results
                ],
            }
        case DescribeClusterResponseData():
            values = {
                "throttle_time": data.throttle_time_ms,
                "error_code": data.error_code,
                "error_message": data.error_message,
                "endpoint_type": data.endpoint_type,
                "cluster_id": data.cluster_id,
                "controller_id": data.controller_id,
                "brokers": [
                    {
                        "broker_id": b.broker_id,
                        "host": b.host,
                        "port": b.port,
                        "rack": b.rack,
                        "is_fenced": False,
                    }
                    for b in data.brokers
                ],
                "cluster_authorized_operations": data.cluster_authorized_operations,
            }
        case _:
            typing.assert_never(data)
    return _build(cls, values)


def _deletion_error(code: ErrorCode, version: int) -> ErrorCode:
    """TOPIC_DELETION_DISABLED came with DeleteTopics v3: Kafka tells older clients
    INVALID_REQUEST instead (``handleDeleteTopicsRequest``)."""
    if code is ErrorCode.TOPIC_DELETION_DISABLED and version < 3:
        return ErrorCode.INVALID_REQUEST
    return code


_RESPONSE_TYPES: Final[Mapping[int, type]] = {
    ClientApiKey.METADATA: MetadataResponseData,
    ClientApiKey.CREATE_TOPICS: CreateTopicsResponseData,
    ClientApiKey.DELETE_TOPICS: DeleteTopicsResponseData,
    ClientApiKey.DESCRIBE_CONFIGS: DescribeConfigsResponseData,
    ClientApiKey.CREATE_PARTITIONS: CreatePartitionsResponseData,
    ClientApiKey.DESCRIBE_CLUSTER: DescribeClusterResponseData,
}


def _broker_values(broker: BrokerEndpoint) -> dict[str, Any]:
    return {
        "node_id": broker.broker_id,
        "host": broker.host,
        "port": broker.port,
        "rack": broker.rack,
    }


def _metadata_values(data: MetadataResponseData) -> dict[str, Any]:
    return {
        "throttle_time": data.throttle_time_ms,
        "brokers": [_broker_values(b) for b in data.brokers],
        "cluster_id": data.cluster_id,
        "controller_id": data.controller_id,
        "topics": [
            {
                "error_code": t.error_code,
                "name": t.name,
                "topic_id": t.topic_id,
                "is_internal": t.is_internal,
                "partitions": [
                    {
                        "error_code": p.error_code,
                        "partition_index": p.partition,
                        "leader_id": p.leader,
                        "leader_epoch": p.leader_epoch,
                        "replica_nodes": p.replicas,
                        "isr_nodes": p.isr,
                        "offline_replicas": p.offline_replicas,
                    }
                    for p in t.partitions
                ],
                "topic_authorized_operations": t.authorized_operations,
            }
            for t in data.topics
        ],
        "cluster_authorized_operations": data.cluster_authorized_operations,
    }


def _create_topic_values(result: CreateTopicResult) -> dict[str, Any]:
    return {
        "name": result.name,
        "topic_id": result.topic_id,
        "error_code": result.error_code,
        "error_message": result.error_message,
        "num_partitions": result.num_partitions,
        "replication_factor": result.replication_factor,
        "configs": (
            None
            if result.configs is None
            else [
                {
                    "name": c.name,
                    "value": c.value,
                    "read_only": c.read_only,
                    "config_source": c.source,
                    "is_sensitive": c.is_sensitive,
                }
                for c in result.configs
            ]
        ),
    }


def _config_values(entry: ConfigEntry, asked: DescribeConfigsRequestData) -> dict[str, Any]:
    synonyms: tuple[ConfigSynonym, ...] = entry.synonyms if asked.include_synonyms else ()
    return {
        "name": entry.name,
        "value": entry.value,
        "read_only": entry.read_only,
        "config_source": entry.source,
        "is_sensitive": entry.is_sensitive,
        "synonyms": [{"name": s.name, "value": s.value, "source": s.source} for s in synonyms],
        "config_type": entry.value_type,
        "documentation": entry.documentation if asked.include_documentation else None,
    }


def api_key_of(data: KafkaApiRequestData) -> ClientApiKey:
    """The API a plain request value belongs to."""
    match data:
        case MetadataRequestData():
            return ClientApiKey.METADATA
        case CreateTopicsRequestData():
            return ClientApiKey.CREATE_TOPICS
        case DeleteTopicsRequestData():
            return ClientApiKey.DELETE_TOPICS
        case DescribeConfigsRequestData():
            return ClientApiKey.DESCRIBE_CONFIGS
        case CreatePartitionsRequestData():
            return ClientApiKey.CREATE_PARTITIONS
        case DescribeClusterRequestData():
            return ClientApiKey.DESCRIBE_CLUSTER
        case _:
            typing.assert_never(data)


def encode_request(
    data: KafkaApiRequestData, *, api_version: int, correlation_id: int, client_id: str | None
) -> bytes:
    """A whole request frame (size prefix included) carrying ``data`` as ``api_version``
    of its API. What the version cannot carry is dropped; raises ``TypeError`` when the
    version lacks something the request needs (e.g. topic ids before DeleteTopics v6)."""
    return _request_frame(
        int(api_key_of(data)), api_version, correlation_id, client_id, _request_values(data)
    )


def _request_values(data: KafkaApiRequestData) -> dict[str, Any]:
    """The inverse of ``request_data``: field values by the schema's names."""
    match data:
        case MetadataRequestData():
            return {
                "topics": (
                    None
                    if data.topics is None
                    else [{"name": t.name, "topic_id": t.topic_id} for t in data.topics]
                ),
                "allow_auto_topic_creation": data.allow_auto_topic_creation,
                "include_cluster_authorized_operations": data.include_cluster_authorized_operations,
                "include_topic_authorized_operations": data.include_topic_authorized_operations,
            }
        case CreateTopicsRequestData():
            return {
                "topics": [
                    {
                        "name": t.name,
                        "num_partitions": t.num_partitions,
                        "replication_factor": t.replication_factor,
                        "assignments": [
                            {"partition_index": a.partition, "broker_ids": a.broker_ids}
                            for a in t.assignments
                        ],
                        "configs": [{"name": c.name, "value": c.value} for c in t.configs],
                    }
                    for t in data.topics
                ],
                "timeout": data.timeout_ms,
                "validate_only": data.validate_only,
            }
        case DeleteTopicsRequestData():
            return {
                "topic_names": data.names,
                "topics": [{"name": t.name, "topic_id": t.topic_id} for t in data.topics],
                "timeout": data.timeout_ms,
            }
        case DescribeConfigsRequestData():
            return {
                "resources": [
                    {
                        "resource_type": r.resource_type,
                        "resource_name": r.resource_name,
                        "configuration_keys": r.configuration_keys,
                    }
                    for r in data.resources
                ],
                "include_synonyms": data.include_synonyms,
                "include_documentation": data.include_documentation,
            }
        case CreatePartitionsRequestData():
            return {
                "topics": [
                    {
                        "name": t.name,
                        "count": t.count,
                        "assignments": (
                            None
                            if t.assignments is None
                            else [{"broker_ids": a} for a in t.assignments]
                        ),
                    }
                    for t in data.topics
                ],
                "timeout": data.timeout_ms,
                "validate_only": data.validate_only,
            }
        case DescribeClusterRequestData():
            return {
                "include_cluster_authorized_operations": data.include_cluster_authorized_operations,
                "endpoint_type": data.endpoint_type,
            }
        case _:
            typing.assert_never(data)


def decode_response(
    api_key: int, api_version: int, frame: bytes
) -> tuple[int, KafkaApiResponseData]:
    """The correlation id and plain values of a response frame (no size prefix) to a
    request of ``api_key`` and ``api_version``; raises ``FrameError`` if it cannot be read."""
    correlation_id, body = _read_response(api_key, api_version, frame)
    try:
        return correlation_id, _response_data(api_key, body)
    except (TypeError, ValueError) as exc:
        raise FrameError(f"unexpected response of API {api_key} v{api_version}: {exc!r}") from exc


def _response_data(api_key: int, body: Any) -> KafkaApiResponseData:
    """The inverse of ``build_response``: fields a version lacks take their defaults."""
    throttle = _millis(getattr(body, "throttle_time", 0))
    match api_key:
        case ClientApiKey.METADATA:
            return MetadataResponseData(
                brokers=tuple(_broker_endpoint(b) for b in body.brokers),
                cluster_id=getattr(body, "cluster_id", None) or "",
                controller_id=BrokerId(int(getattr(body, "controller_id", -1))),
                topics=tuple(_topic_metadata(t) for t in body.topics),
                throttle_time_ms=throttle,
            )
        case ClientApiKey.CREATE_TOPICS:
            return CreateTopicsResponseData(
                topics=tuple(_create_topic_result(t) for t in body.topics),
                throttle_time_ms=throttle,
            )
        case ClientApiKey.DELETE_TOPICS:
            return DeleteTopicsResponseData(
                topics=tuple(
                    DeleteTopicResult(
                        name=None if r.name is None else TopicName(r.name),
                        topic_id=_topic_id(getattr(r, "topic_id", None)),
                        error_code=_error_code(r.error_code),
                        error_message=getattr(r, "error_message", None),
                    )
                    for r in body.responses
                ),
                throttle_time_ms=throttle,
            )
        case ClientApiKey.DESCRIBE_CONFIGS:
            return DescribeConfigsResponseData(
                results=tuple(
                    DescribeConfigsResult(
                        resource_type=int(r.resource_type),
                        resource_name=r.resource_name,
                        error_code=_error_code(r.error_code),
                        error_message=r.error_message,
                        configs=tuple(_config_entry(c) for c in r.configs),
                    )
                    for r in body.results
                ),
                throttle_time_ms=throttle,
            )
        case ClientApiKey.CREATE_PARTITIONS:
            return CreatePartitionsResponseData(
                results=tuple(
                    TopicErrorResult(
                        name=TopicName(r.name),
                        error_code=_error_code(r.error_code),
                        error_message=getattr(r, "error_message", None),
                    )
                    for r in body.results
                ),
                throttle_time_ms=throttle,
            )
        case ClientApiKey.DESCRIBE_CLUSTER:
            return DescribeClusterResponseData(
                cluster_id=body.cluster_id,
                controller_id=BrokerId(int(body.controller_id)),
                brokers=tuple(
                    BrokerEndpoint(
                        broker_id=BrokerId(int(b.broker_id)),
                        host=b.host,
                        port=int(b.port),
                        rack=b.rack,
                    )
                    for b in body.brokers
                ),
                error_code=_error_code(body.error_code),
                error_message=body.error_message,
                endpoint_type=int(getattr(body, "endpoint_type", 1)),
                cluster_authorized_operations=int(body.cluster_authorized_operations),
                throttle_time_ms=throttle,
            )
    raise ValueError(f"API {api_key} has no plain response values")


def _broker_endpoint(broker: Any) -> BrokerEndpoint:
    return BrokerEndpoint(
        broker_id=BrokerId(int(broker.node_id)),
        host=broker.host,
        port=int(broker.port),
        rack=getattr(broker, "rack", None),
    )


def _topic_metadata(topic: Any) -> TopicMetadata:
    return TopicMetadata(
        name=TopicName(topic.name or ""),
        topic_id=_topic_id(getattr(topic, "topic_id", None)),
        error_code=_error_code(topic.error_code),
        is_internal=bool(getattr(topic, "is_internal", False)),
        partitions=tuple(
            PartitionMetadata(
                partition=int(p.partition_index),
                leader=BrokerId(int(p.leader_id)),
                leader_epoch=int(getattr(p, "leader_epoch", -1)),
                replicas=_broker_ids(p.replica_nodes),
                isr=_broker_ids(p.isr_nodes),
                offline_replicas=_broker_ids(getattr(p, "offline_replicas", ())),
                error_code=_error_code(p.error_code),
            )
            for p in topic.partitions
        ),
        authorized_operations=int(
            getattr(topic, "topic_authorized_operations", NO_AUTHORIZED_OPERATIONS)
        ),
    )


def _create_topic_result(result: Any) -> CreateTopicResult:
    configs = getattr(result, "configs", None)
    return CreateTopicResult(
        name=TopicName(result.name),
        error_code=_error_code(result.error_code),
        error_message=getattr(result, "error_message", None),
        topic_id=_topic_id(getattr(result, "topic_id", None)),
        num_partitions=int(getattr(result, "num_partitions", -1)),
        replication_factor=int(getattr(result, "replication_factor", -1)),
        configs=(
            None
            if configs is None
            else tuple(
                ConfigEntry(
                    name=c.name,
                    value=c.value,
                    read_only=bool(c.read_only),
                    source=_config_source(getattr(c, "config_source", -1)),
                    is_sensitive=bool(c.is_sensitive),
                )
                for c in configs
            )
        ),
    )


def _config_entry(entry: Any) -> ConfigEntry:
    """One DescribeConfigs entry. Before v1 there was no source, only ``is_default``."""
    if hasattr(entry, "config_source"):
        source = _config_source(entry.config_source)
    elif getattr(entry, "is_default", False):
        source = ConfigSource.DEFAULT_CONFIG
    else:
        source = ConfigSource.UNKNOWN
    try:
        value_type = ConfigValueType(int(getattr(entry, "config_type", 0)))
    except ValueError:
        value_type = ConfigValueType.UNKNOWN
    return ConfigEntry(
        name=entry.name,
        value=entry.value,
        read_only=bool(entry.read_only),
        source=source,
        is_sensitive=bool(entry.is_sensitive),
        synonyms=tuple(
            ConfigSynonym(name=s.name, value=s.value, source=_config_source(s.source))
            for s in getattr(entry, "synonyms", ())
        ),
        value_type=value_type,
        documentation=getattr(entry, "documentation", None),
    )
