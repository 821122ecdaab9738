"""ApiVersions: the table a Kafka 2.7.2 broker advertises, the table a kemu listener answers
(the APIs it serves, within 2.7.2's ranges), the answers to a request it cannot take, and
the client side's request and answer."""

from __future__ import annotations

import re
import struct
import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from cluster.kafka.codec import as_error_code, build, codec_versions, encode_body, response_schema
from cluster.kafka.framing import API_VERSIONS_KEY, read_response, request_frame
from protocol.errors import ErrorCode

API_VERSIONS_RANGE: Final = (0, 3)  # what a 2.7 broker answers; newer clients retry lower

KAFKA_2_7_API_VERSIONS: Final[Mapping[int, tuple[int, int]]] = types.MappingProxyType({
    0: (0, 8), 1: (0, 12), 2: (0, 5), 3: (0, 9), 4: (0, 4), 5: (0, 3), 6: (0, 6), 7: (0, 3),
    8: (0, 8), 9: (0, 7), 10: (0, 3), 11: (0, 7), 12: (0, 4), 13: (0, 4), 14: (0, 5),
    15: (0, 5), 16: (0, 4), 17: (0, 1), 18: (0, 3), 19: (0, 6), 20: (0, 5), 21: (0, 2),
    22: (0, 4), 23: (0, 3), 24: (0, 2), 25: (0, 2), 26: (0, 2), 27: (0, 0), 28: (0, 3),
    29: (0, 2), 30: (0, 2), 31: (0, 2), 32: (0, 3), 33: (0, 1), 34: (0, 1), 35: (0, 2),
    36: (0, 2), 37: (0, 3), 38: (0, 2), 39: (0, 2), 40: (0, 2), 41: (0, 2), 42: (0, 2),
    43: (0, 2), 44: (0, 1), 45: (0, 0), 46: (0, 0), 47: (0, 0), 48: (0, 0), 49: (0, 0),
    50: (0, 0), 51: (0, 0), 56: (0, 0), 57: (0, 0),
})  # fmt: skip
"""The ApiVersions table of a Kafka 2.7.2 broker (``ApiVersionsResponse.apiVersionsResponse``
over the enabled ``ApiKeys``: every version from 0 to the message schema's newest; the
Raft APIs 52-55 are disabled). kafka-python infers the broker's version from the table a
broker advertises (Fetch v12 means 2.7), so nothing past these ranges is advertised."""

KAFKA_2_7_API_NAMES: Final[Mapping[int, str]] = types.MappingProxyType({
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 4: "LeaderAndIsr",
    5: "StopReplica", 6: "UpdateMetadata", 7: "ControlledShutdown", 8: "OffsetCommit",
    9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat",
    13: "LeaveGroup", 14: "SyncGroup", 15: "DescribeGroups", 16: "ListGroups",
    17: "SaslHandshake", 18: "ApiVersions", 19: "CreateTopics", 20: "DeleteTopics",
    21: "DeleteRecords", 22: "InitProducerId", 23: "OffsetForLeaderEpoch",
    24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn", 26: "EndTxn", 27: "WriteTxnMarkers",
    28: "TxnOffsetCommit", 29: "DescribeAcls", 30: "CreateAcls", 31: "DeleteAcls",
    32: "DescribeConfigs", 33: "AlterConfigs", 34: "AlterReplicaLogDirs",
    35: "DescribeLogDirs", 36: "SaslAuthenticate", 37: "CreatePartitions",
    38: "CreateDelegationToken", 39: "RenewDelegationToken", 40: "ExpireDelegationToken",
    41: "DescribeDelegationToken", 42: "DeleteGroups", 43: "ElectLeaders",
    44: "IncrementalAlterConfigs", 45: "AlterPartitionReassignments",
    46: "ListPartitionReassignments", 47: "OffsetDelete", 48: "DescribeClientQuotas",
    49: "AlterClientQuotas", 50: "DescribeUserScramCredentials",
    51: "AlterUserScramCredentials", 52: "Vote", 53: "BeginQuorumEpoch",
    54: "EndQuorumEpoch", 55: "DescribeQuorum", 56: "AlterIsr", 57: "UpdateFeatures",
})  # fmt: skip
"""The name of each of Kafka 2.7.2's ``ApiKeys`` (``ApiKeys.name``), by id."""

_SOFTWARE_NAME_VERSION: Final = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")
"""``ApiVersionsRequest.SOFTWARE_NAME_VERSION_PATTERN``."""


def advertised_api_versions(
    served: Mapping[int, tuple[int, int]],
) -> dict[int, tuple[int, int]]:
    """The ApiVersions table a listener answers: ApiVersions itself (v0-3), and each API
    the handler serves with its versions within Kafka 2.7.2's (an API 2.7.2 lacks is not
    advertised). Raises ``ValueError`` for a served range the codec cannot decode."""
    if API_VERSIONS_KEY in served:
        raise ValueError("ApiVersions is answered by the listener, not the handler")
    table: dict[int, tuple[int, int]] = {API_VERSIONS_KEY: API_VERSIONS_RANGE}
    for key, (low, high) in served.items():
        codec = codec_versions(key)
        if codec is None or low > high or low < codec[0] or high > codec[1]:
            raise ValueError(f"API {key} v{low}-{high}: the codec decodes only {codec}")
        kafka = KAFKA_2_7_API_VERSIONS.get(key)
        if kafka is None:
            continue
        low, high = max(low, kafka[0]), min(high, kafka[1])
        if low <= high:
            table[key] = (low, high)
    return dict(sorted(table.items()))


def valid_api_versions_request(version: int, body: Any) -> bool:
    """``ApiVersionsRequest.isValid``: from v3 the client's software name and version must
    match Kafka's pattern, or the answer is INVALID_REQUEST."""
    if version < 3:
        return True
    return all(
        _SOFTWARE_NAME_VERSION.fullmatch(value or "") is not None
        for value in (body.client_software_name, body.client_software_version)
    )


@dataclass(frozen=True, slots=True)
class ApiVersionsAnswer:
    """A decoded ApiVersions response: its error and the broker's version table."""

    correlation_id: int
    error_code: ErrorCode
    api_versions: Mapping[int, tuple[int, int]]


def encode_api_versions_body(
    version: int, table: Mapping[int, tuple[int, int]], error: ErrorCode = ErrorCode.NONE
) -> bytes:
    """An ApiVersions response body of ``version`` advertising ``table``, with ``error``."""
    cls = response_schema(API_VERSIONS_KEY, version)
    values = {
        "error_code": error,
        "throttle_time": 0,
        "api_keys": [
            {"api_key": key, "min_version": low, "max_version": high}
            for key, (low, high) in sorted(table.items())
        ],
    }
    return encode_body(build(cls, values))


def codec_api_versions(api_key: int) -> tuple[int, int] | None:
    """The versions of an API the codec can encode and decode (None: an unknown key)."""
    return codec_versions(api_key)


def encode_api_versions_request(
    *,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    software_name: str = "kemu",
    software_version: str = "0",
) -> bytes:
    """A whole ApiVersions request frame (size prefix included)."""
    return request_frame(
        API_VERSIONS_KEY,
        api_version,
        correlation_id,
        client_id,
        {"client_software_name": software_name, "client_software_version": software_version},
    )


def decode_api_versions_response(api_version: int, frame: bytes) -> ApiVersionsAnswer:
    """An ApiVersions response frame (no size prefix). A broker that does not know
    ``api_version`` answers UNSUPPORTED_VERSION in a v0 body, read as such."""
    if len(frame) >= 6 and struct.unpack_from(">h", frame, 4)[0] == ErrorCode.UNSUPPORTED_VERSION:
        api_version = 0
    correlation_id, body = read_response(API_VERSIONS_KEY, api_version, frame)
    return ApiVersionsAnswer(
        correlation_id=correlation_id,
        error_code=as_error_code(body.error_code),
        api_versions=types.MappingProxyType(
            {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in body.api_keys}
        ),
    )
