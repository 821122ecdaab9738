"""The table of per-API codecs (``cluster.kafka.apis``): every plain request and response
type of ``protocol.kafka_api`` has exactly one codec, the versions it serves are ones the
codec decodes and are Kafka 2.7.2's, and the brokers and the admin client read their
versions from it."""

from __future__ import annotations

import typing

from cluster.kafka import CODECS, KAFKA_2_7_API_VERSIONS, SERVED_API_VERSIONS, api_key_of
from cluster.kafka.apis import advertised_api_versions, codec_of
from cluster.kafka.client import CLIENT_MAX_VERSIONS
from cluster.kafka.codec import codec_versions
from cluster.launch.cluster import SUPPORTED_APIS
from protocol.kafka_api import (
    ClientApiKey,
    KafkaApiRequestData,
    KafkaApiResponseData,
    MetadataRequestData,
)


def test_every_plain_request_and_response_type_has_one_codec() -> None:
    """Each member of ``KafkaApiRequestData`` and ``KafkaApiResponseData`` belongs to one
    codec of the table, keyed by its own API key (what ``assert_never`` pinned in the five
    match blocks the table replaced)."""
    requests = typing.get_args(KafkaApiRequestData)
    responses = typing.get_args(KafkaApiResponseData)
    assert sorted(c.request_type.__name__ for c in CODECS.values()) == sorted(
        t.__name__ for t in requests
    )
    assert sorted(c.response_type.__name__ for c in CODECS.values()) == sorted(
        t.__name__ for t in responses
    )
    for key, codec in CODECS.items():
        assert int(codec.api_key) == key
    metadata = MetadataRequestData(topics=None)
    assert codec_of(metadata) is CODECS[ClientApiKey.METADATA]
    assert api_key_of(metadata) is ClientApiKey.METADATA


def test_served_versions_are_decodable_and_what_brokers_advertise() -> None:
    """Every served range lies within what the codec library decodes, a 2.7 client's
    version within it, and the brokers advertise exactly the table's ranges."""
    for key, (low, high) in SERVED_API_VERSIONS.items():
        decodable = codec_versions(key)
        assert decodable is not None
        assert decodable[0] <= low <= high <= decodable[1]
        assert low <= CODECS[key].client_version <= high
    assert dict(SERVED_API_VERSIONS) == dict(SUPPORTED_APIS)


LOW_VERSIONS_NOT_SERVED = {
    ClientApiKey.OFFSET_COMMIT: 2,  # v0-v1: v0 keeps offsets in ZooKeeper; kio decodes neither
    ClientApiKey.OFFSET_FETCH: 1,  # v0 reads offsets from ZooKeeper; kio does not decode it
}
"""The served APIs whose oldest 2.7.2 versions kemu does not serve (docs/kafka-wire.md),
and the first version it serves."""


def test_each_served_api_is_served_in_every_version_kafka_2_7_serves() -> None:
    """Each API of the table is one Kafka 2.7.2 has, served from v0 (but for the documented
    gaps) up to 2.7.2's newest version, never past it; the brokers advertise exactly that,
    and ApiVersions v0-3."""
    for key, (low, high) in SERVED_API_VERSIONS.items():
        kafka_low, kafka_high = KAFKA_2_7_API_VERSIONS[key]
        assert high == kafka_high, ClientApiKey(key)
        assert low == LOW_VERSIONS_NOT_SERVED.get(ClientApiKey(key), kafka_low), ClientApiKey(key)
    assert advertised_api_versions(SUPPORTED_APIS) == {**SERVED_API_VERSIONS, 18: (0, 3)}


def test_the_admin_client_caps_each_api_at_a_2_7_clients_version() -> None:
    """The client's caps are the table's, plus ApiVersions v3 (Kafka 2.7's
    ``ApiVersionsRequest`` max): what a 2.7 admin client, producer and consumer send."""
    assert CLIENT_MAX_VERSIONS == {
        ClientApiKey.PRODUCE: 8,
        ClientApiKey.FETCH: 12,
        ClientApiKey.LIST_OFFSETS: 5,
        ClientApiKey.INIT_PRODUCER_ID: 4,
        ClientApiKey.OFFSET_FOR_LEADER_EPOCH: 3,
        ClientApiKey.API_VERSIONS: 3,
        ClientApiKey.METADATA: 9,
        ClientApiKey.CREATE_TOPICS: 6,
        ClientApiKey.DELETE_TOPICS: 5,
        ClientApiKey.DESCRIBE_CONFIGS: 3,
        ClientApiKey.DESCRIBE_LOG_DIRS: 2,
        ClientApiKey.ALTER_CONFIGS: 1,
        ClientApiKey.INCREMENTAL_ALTER_CONFIGS: 1,
        ClientApiKey.CREATE_PARTITIONS: 3,
        ClientApiKey.FIND_COORDINATOR: 3,
        ClientApiKey.JOIN_GROUP: 7,
        ClientApiKey.SYNC_GROUP: 5,
        ClientApiKey.HEARTBEAT: 4,
        ClientApiKey.LEAVE_GROUP: 4,
        ClientApiKey.OFFSET_COMMIT: 8,
        ClientApiKey.OFFSET_FETCH: 7,
        ClientApiKey.LIST_GROUPS: 4,
        ClientApiKey.DESCRIBE_GROUPS: 5,
        ClientApiKey.DELETE_GROUPS: 2,
        ClientApiKey.ELECT_LEADERS: 2,
        ClientApiKey.ALTER_PARTITION_REASSIGNMENTS: 0,
        ClientApiKey.LIST_PARTITION_REASSIGNMENTS: 0,
        ClientApiKey.OFFSET_DELETE: 0,
    }
