"""The adapter's translation between Kafka frames and kemu's plain values, for every version.

Requests are encoded and responses decoded by kafka-python's protocol classes, a second
implementation of Kafka's schemas, so these tests do not check the codec against itself.
"""

from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.admin import (  # type: ignore[import-untyped]
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    ListGroupsResponse,
)
from kafka.protocol.broker_version_data import (  # type: ignore[import-untyped]
    infer_broker_version_from_api_versions,
)
from kafka.protocol.metadata import MetadataRequest, MetadataResponse  # type: ignore[import-untyped]

from cluster.kafka.listener import (
    KAFKA_2_7_API_VERSIONS,
    KafkaRequest,
    UnsupportedApiError,
    advertised_api_versions,
    build_response,
    decode_request,
    encode_response,
    error_response,
    request_data,
)
from protocol.errors import ErrorCode, FrameError
from protocol.ids import BrokerId, TopicName
from protocol.kafka_api import (
    BrokerEndpoint,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
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
    DescribeConfigsRequestData,
    DescribeConfigsResponseData,
    DescribeConfigsResult,
    MetadataRequestData,
    MetadataResponseData,
    PartitionAssignment,
    PartitionMetadata,
    TopicConfig,
    TopicErrorResult,
    TopicMetadata,
)
from tests.support.fake_kafka import SUPPORTED, kp_decode, kp_frame

B1, B2, B3 = BrokerId(1), BrokerId(2), BrokerId(3)
TOPIC = TopicName("orders")


def decoded(frame: bytes) -> KafkaRequest:
    """A kafka-python frame through the adapter's decoder, as the listener would see it."""
    return decode_request(frame[4:], advertised_api_versions(SUPPORTED))


def asked(api_key: int, version: int, body: Any = None) -> KafkaRequest:
    return KafkaRequest(
        api_key=api_key, api_version=version, correlation_id=42, client_id="t", body=body
    )


def answer(request: KafkaRequest, data: Any, response_cls: Any) -> dict[str, Any]:
    """``data`` built into ``request``'s response, encoded, and decoded by kafka-python."""
    correlation_id, body = kp_decode(
        response_cls, request.api_version, encode_response(request, build_response(request, data))
    )
    assert correlation_id == request.correlation_id
    return body


# ---------------------------------------------------------------------- ApiVersions table


def test_advertised_table_is_what_is_served_within_kafka_2_7() -> None:
    """The advertised table holds the served APIs only, each within a 2.7 broker's range
    (a served range past 2.7's is cut, an API 2.7 lacks is left out), and ApiVersions."""
    table = advertised_api_versions(SUPPORTED)
    assert table == {
        0: (3, 8),
        3: (0, 9),
        18: (0, 3),
        19: (0, 6),
        20: (0, 5),
        32: (0, 3),
        37: (0, 3),
    }
    assert advertised_api_versions({3: (0, 12), 20: (1, 6), 60: (0, 1)}) == {
        3: (0, 9),
        18: (0, 3),
        20: (1, 5),
    }
    served = {0: (3, 8), 1: (4, 12), 3: (0, 9)}  # what kafka-python looks at
    assert infer_broker_version_from_api_versions(advertised_api_versions(served)) == (2, 7)
    for key, (low, high) in table.items():
        assert KAFKA_2_7_API_VERSIONS[key][0] <= low <= high <= KAFKA_2_7_API_VERSIONS[key][1]


def test_handler_ranges_must_be_decodable() -> None:
    """A handler claiming versions the codec cannot decode, or ApiVersions, is refused."""
    with pytest.raises(ValueError, match="codec"):
        advertised_api_versions({0: (0, 99)})  # no codec decodes Produce v99
    with pytest.raises(ValueError, match="ApiVersions"):
        advertised_api_versions({18: (0, 3)})


# ---------------------------------------------------------------------- requests


@pytest.mark.parametrize("version", range(10))
def test_metadata_request_every_version(version: int) -> None:
    """Metadata requests of every version say which topics they want, or all of them."""
    topic = MetadataRequest.MetadataRequestTopic
    everything = MetadataRequest(version=version, topics=[] if version == 0 else None)
    assert metadata_asked(everything).topics is None
    named = MetadataRequest(version=version, topics=[topic(name=TOPIC)])
    assert metadata_asked(named).topics == (TOPIC,)
    if version >= 1:
        assert metadata_asked(MetadataRequest(version=version, topics=[])).topics == ()
    if version >= 4:
        no_auto = MetadataRequest(version=version, topics=None, allow_auto_topic_creation=False)
        assert metadata_asked(no_auto) == MetadataRequestData(
            topics=None, allow_auto_topic_creation=False
        )


def metadata_asked(request: Any) -> MetadataRequestData:
    data = request_data(decoded(kp_frame(request)))
    assert isinstance(data, MetadataRequestData)
    return data


@pytest.mark.parametrize("version", range(7))
def test_create_topics_request_every_version(version: int) -> None:
    """CreateTopics requests keep counts, assignments, configs, timeout and validate_only."""
    creatable = CreateTopicsRequest.CreatableTopic
    request = CreateTopicsRequest(
        version=version,
        topics=[
            creatable(name="a", num_partitions=3, replication_factor=2, assignments=[], configs=[]),
            creatable(
                name="b",
                num_partitions=-1,
                replication_factor=-1,
                assignments=[
                    creatable.CreatableReplicaAssignment(partition_index=0, broker_ids=[1, 2]),
                    creatable.CreatableReplicaAssignment(partition_index=1, broker_ids=[2, 3]),
                ],
                configs=[
                    creatable.CreatableTopicConfig(name="retention.ms", value="1000"),
                    creatable.CreatableTopicConfig(name="cleanup.policy", value=None),
                ],
            ),
        ],
        timeout_ms=4500,
        validate_only=version >= 1,  # v1 adds it
    )
    assert request_data(decoded(kp_frame(request))) == CreateTopicsRequestData(
        topics=(
            CreatableTopic(name=TopicName("a"), num_partitions=3, replication_factor=2),
            CreatableTopic(
                name=TopicName("b"),
                num_partitions=-1,
                replication_factor=-1,
                assignments=(
                    PartitionAssignment(partition=0, broker_ids=(B1, B2)),
                    PartitionAssignment(partition=1, broker_ids=(B2, B3)),
                ),
                configs=(
                    TopicConfig(name="retention.ms", value="1000"),
                    TopicConfig(name="cleanup.policy", value=None),
                ),
            ),
        ),
        timeout_ms=4500,
        validate_only=version >= 1,
    )


@pytest.mark.parametrize("version", range(6))
def test_delete_topics_request_every_version(version: int) -> None:
    """DeleteTopics requests name their topics (a topic may be named twice)."""
    request = DeleteTopicsRequest(version=version, topic_names=["a", "b", "a"], timeout_ms=3000)
    assert request_data(decoded(kp_frame(request))) == DeleteTopicsRequestData(
        topics=(TopicName("a"), TopicName("b"), TopicName("a")), timeout_ms=3000
    )


@pytest.mark.parametrize("version", range(4))
def test_create_partitions_request_every_version(version: int) -> None:
    """CreatePartitions requests keep the new count and any replica lists for new partitions."""
    topic = CreatePartitionsRequest.CreatePartitionsTopic
    request = CreatePartitionsRequest(
        version=version,
        topics=[
            topic(name="a", count=4, assignments=None),
            topic(
                name="b",
                count=3,
                assignments=[topic.CreatePartitionsAssignment(broker_ids=[3, 1])],
            ),
        ],
        timeout_ms=2000,
        validate_only=False,
    )
    assert request_data(decoded(kp_frame(request))) == CreatePartitionsRequestData(
        topics=(
            CreatePartitionsTopic(name=TopicName("a"), count=4),
            CreatePartitionsTopic(name=TopicName("b"), count=3, assignments=((B3, B1),)),
        ),
        timeout_ms=2000,
    )


@pytest.mark.parametrize("version", range(4))
def test_describe_configs_request_every_version(version: int) -> None:
    """DescribeConfigs requests keep resources, the keys asked for (null = all) and flags."""
    resource = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest(
        version=version,
        resources=[
            resource(resource_type=2, resource_name="a", configuration_keys=None),
            resource(resource_type=4, resource_name="1", configuration_keys=["num.partitions"]),
        ],
        include_synonyms=version >= 1,
        include_documentation=version >= 3,
    )
    assert request_data(decoded(kp_frame(request))) == DescribeConfigsRequestData(
        resources=(
            ConfigResource(resource_type=ConfigResourceType.TOPIC, resource_name="a"),
            ConfigResource(
                resource_type=ConfigResourceType.BROKER,
                resource_name="1",
                configuration_keys=("num.partitions",),
            ),
        ),
        include_synonyms=version >= 1,
        include_documentation=version >= 3,
    )


# ---------------------------------------------------------------------- responses

BROKERS = (
    BrokerEndpoint(broker_id=B1, host="127.0.0.1", port=9092, rack="r1"),
    BrokerEndpoint(broker_id=B2, host="127.0.0.1", port=9093),
)


@pytest.mark.parametrize("version", range(10))
def test_metadata_response_every_version(version: int) -> None:
    """Metadata responses of every version carry what that version can say."""
    data = MetadataResponseData(
        brokers=BROKERS,
        cluster_id="WvVkBy7lTxCaNcNI2HbUbw",
        controller_id=B2,
        topics=(
            TopicMetadata(
                name=TOPIC,
                partitions=(
                    PartitionMetadata(
                        partition=0,
                        leader=B1,
                        leader_epoch=4,
                        replicas=(B1, B2),
                        isr=(B1,),
                        offline_replicas=(B2,),
                    ),
                ),
            ),
            TopicMetadata(name=TopicName("gone"), error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ),
    )
    body = answer(asked(3, version), data, MetadataResponse)
    assert [(b["node_id"], b["port"]) for b in body["brokers"]] == [(1, 9092), (2, 9093)]
    assert body.get("controller_id") == (2 if version >= 1 else None)
    assert body.get("cluster_id") == ("WvVkBy7lTxCaNcNI2HbUbw" if version >= 2 else None)
    assert body["brokers"][0].get("rack") == ("r1" if version >= 1 else None)
    found, missing = body["topics"]
    assert (found["name"], found["error_code"]) == ("orders", 0)
    assert (missing["name"], missing["error_code"]) == ("gone", 3)
    (partition,) = found["partitions"]
    assert (partition["leader_id"], partition["replica_nodes"], partition["isr_nodes"]) == (
        1,
        [1, 2],
        [1],
    )
    assert partition.get("offline_replicas") == ([2] if version >= 5 else None)
    assert partition.get("leader_epoch") == (4 if version >= 7 else None)


@pytest.mark.parametrize("version", range(7))
def test_create_topics_response_every_version(version: int) -> None:
    """CreateTopics responses carry errors, messages from v1, and from v5 the resolved
    counts and configs."""
    data = CreateTopicsResponseData(
        topics=(
            CreateTopicResult(
                name=TOPIC,
                num_partitions=3,
                replication_factor=2,
                configs=(
                    ConfigEntry(
                        name="retention.ms", value="1000", source=ConfigSource.TOPIC_CONFIG
                    ),
                ),
            ),
            CreateTopicResult(
                name=TopicName("dup"),
                error_code=ErrorCode.TOPIC_ALREADY_EXISTS,
                error_message="Topic 'dup' already exists.",
            ),
        )
    )
    created, failed = answer(asked(19, version), data, CreateTopicsResponse)["topics"]
    assert (created["name"], created["error_code"]) == ("orders", 0)
    assert failed["error_code"] == 36
    assert failed.get("error_message") == ("Topic 'dup' already exists." if version >= 1 else None)
    if version >= 5:
        assert (created["num_partitions"], created["replication_factor"]) == (3, 2)
        ((config),) = created["configs"]
        assert (config["name"], config["value"], config["config_source"]) == (
            "retention.ms",
            "1000",
            1,
        )
        assert (failed["num_partitions"], failed["replication_factor"]) == (-1, -1)
    else:
        assert "num_partitions" not in created


@pytest.mark.parametrize("version", range(6))
def test_delete_topics_response_every_version(version: int) -> None:
    """DeleteTopics responses carry per-topic errors, and messages from v5."""
    data = DeleteTopicsResponseData(
        topics=(
            DeleteTopicResult(name=TOPIC),
            DeleteTopicResult(
                name=TopicName("gone"),
                error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                error_message="This server does not host this topic-partition.",
            ),
        )
    )
    deleted, failed = answer(asked(20, version), data, DeleteTopicsResponse)["responses"]
    assert (deleted["name"], deleted["error_code"], failed["error_code"]) == ("orders", 0, 3)
    assert failed.get("error_message") == (
        "This server does not host this topic-partition." if version >= 5 else None
    )


@pytest.mark.parametrize("version", range(4))
def test_create_partitions_response_every_version(version: int) -> None:
    """CreatePartitions responses carry per-topic errors and messages."""
    data = CreatePartitionsResponseData(
        results=(
            TopicErrorResult(name=TOPIC),
            TopicErrorResult(
                name=TopicName("a"),
                error_code=ErrorCode.INVALID_PARTITIONS,
                error_message="Topic currently has 3 partitions, which is higher than the "
                "requested 2.",
            ),
        )
    )
    ok, failed = answer(asked(37, version), data, CreatePartitionsResponse)["results"]
    assert (ok["name"], ok["error_code"], failed["error_code"]) == ("orders", 0, 37)
    assert failed["error_message"].startswith("Topic currently has 3 partitions")


@pytest.mark.parametrize("version", range(4))
@pytest.mark.parametrize("with_extras", [False, True])
def test_describe_configs_response_every_version(version: int, with_extras: bool) -> None:
    """DescribeConfigs responses carry entries; synonyms and docs only when asked for."""
    resource = DescribeConfigsRequest.DescribeConfigsResource
    request = decoded(
        kp_frame(
            DescribeConfigsRequest(
                version=version,
                resources=[resource(resource_type=2, resource_name="orders")],
                include_synonyms=with_extras and version >= 1,
                include_documentation=with_extras and version >= 3,
            )
        )
    )
    entry = ConfigEntry(
        name="retention.ms",
        value="1000",
        source=ConfigSource.TOPIC_CONFIG,
        synonyms=(
            ConfigSynonym(name="log.retention.ms", value="5", source=ConfigSource.DEFAULT_CONFIG),
        ),
        value_type=ConfigValueType.LONG,
        documentation="How long to keep.",
    )
    data = DescribeConfigsResponseData(
        results=(
            DescribeConfigsResult(
                resource_type=ConfigResourceType.TOPIC, resource_name="orders", configs=(entry,)
            ),
        )
    )
    (result,) = answer(request, data, DescribeConfigsResponse)["results"]
    assert (result["resource_type"], result["resource_name"], result["error_code"]) == (
        2,
        "orders",
        0,
    )
    (config,) = result["configs"]
    assert (config["name"], config["value"]) == ("retention.ms", "1000")
    if version == 0:  # no source, no synonyms: is_default, which Kafka 2.7.2 leaves false
        assert config["is_default"] is False
        assert "config_source" not in config
        assert "synonyms" not in config
        return
    assert config["config_source"] == 1
    assert len(config["synonyms"]) == (1 if with_extras else 0)
    if version >= 3:
        assert config["config_type"] == ConfigValueType.LONG
        expected_doc = "How long to keep." if with_extras else None
        assert config["documentation"] == expected_doc


def test_a_response_must_answer_its_request() -> None:
    """Plain values for another API, or a response of another version, are refused."""
    metadata = MetadataResponseData(brokers=BROKERS, cluster_id="c", controller_id=B1)
    with pytest.raises(TypeError):
        build_response(asked(19, 5), metadata)
    with pytest.raises(TypeError):
        encode_response(asked(3, 8), build_response(asked(3, 9), metadata))


# ---------------------------------------------------------------------- error responses


def test_error_response_gives_every_topic_the_error() -> None:
    """An admin request's error response names every topic it asked about, as Kafka's does."""
    creatable = CreateTopicsRequest.CreatableTopic
    request = decoded(
        kp_frame(
            CreateTopicsRequest(
                version=6,
                topics=[
                    creatable(
                        name=n, num_partitions=1, replication_factor=1, assignments=[], configs=[]
                    )
                    for n in ("a", "b")
                ],
                timeout_ms=1000,
            )
        )
    )
    response = error_response(request, ErrorCode.UNKNOWN_SERVER_ERROR, "boom")
    _, body = kp_decode(CreateTopicsResponse, 6, encode_response(request, response))
    assert [(t["name"], t["error_code"], t["error_message"]) for t in body["topics"]] == [
        ("a", -1, "boom"),
        ("b", -1, "boom"),
    ]


def test_error_response_for_other_apis_where_the_schema_allows() -> None:
    """Other APIs get a top-level error where their schema has one, and nothing otherwise."""
    list_groups = asked(16, 3)
    response = error_response(list_groups, ErrorCode.UNSUPPORTED_VERSION)
    _, body = kp_decode(ListGroupsResponse, 3, encode_response(list_groups, response))
    assert (body["error_code"], body["groups"]) == (35, [])
    assert (
        error_response(asked(34, 1), ErrorCode.UNSUPPORTED_VERSION) is None
    )  # AlterReplicaLogDirs


# ---------------------------------------------------------------------- refusals


def test_unadvertised_and_malformed_requests_are_refused() -> None:
    """Unknown keys and versions raise UnsupportedApiError; undecodable frames FrameError."""
    table = advertised_api_versions(SUPPORTED)
    frame = kp_frame(MetadataRequest(version=9, topics=None))[4:]
    with pytest.raises(UnsupportedApiError) as unknown:
        decode_request(b"\x03\xe7\x00\x00\x00\x00\x00\x07\xff\xff", table)
    assert (unknown.value.api_key, unknown.value.correlation_id) == (999, 7)
    with pytest.raises(UnsupportedApiError):
        decode_request(frame[:2] + b"\x00\x0a" + frame[4:], table)  # Metadata v10: 2.8's
    with pytest.raises(FrameError):
        decode_request(frame[:6], table)
    with pytest.raises(FrameError):
        decode_request(frame[:-3], table)


def test_unknown_tagged_fields_are_skipped_as_kafka_does() -> None:
    """Tagged fields the schema does not know, in the header or the body (librdkafka sends
    one in Metadata v9), are skipped as Kafka's readers do (``readUnknownTaggedField``):
    the request reads as it would without them; a size past the frame is still refused."""
    table = advertised_api_versions(SUPPORTED)
    frame = kp_frame(MetadataRequest(version=9, topics=None))[4:]
    plain = decode_request(frame, table)
    assert frame.endswith(b"\x00")  # no tagged fields: add ones the schema does not know
    body_tags = frame[:-1] + b"\x02\x63\x01\x00\x00\x00"  # tag 99 (1 byte), tag 0 (none)
    assert decode_request(body_tags, table) == plain
    header_end = 8 + 2 + len("wire-test")  # key, version, correlation id, client id
    assert frame[header_end] == 0  # the header's tagged fields: none
    header_tags = frame[:header_end] + b"\x01\x05\x02ab" + frame[header_end + 1 :]
    assert decode_request(header_tags, table) == plain
    with pytest.raises(FrameError, match="tagged field 99"):
        decode_request(frame[:-1] + b"\x01\x63\x09\x00", table)
