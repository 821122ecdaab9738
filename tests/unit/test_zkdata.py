"""ZooKeeper paths and payloads are byte-for-byte what Kafka 2.7 writes, and read back.

The expected bytes are literals. Where they come from is said next to each: payloads
captured from real clusters (``zkCli.sh get``), the formats documented in Kafka's
``ZkData.scala``, or the spec's node table (§1.2). Key orders that no capture shows are
pinned by the emulation of the JVM collection Kafka uses, whose other outputs the captures
confirm; ``test_jdk_collection_orders_match_this_machines_jvm`` checks the JDK part of that
emulation against a real JVM when one is installed.
"""

from __future__ import annotations

import contextlib
import json
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from protocol import jvm, zkdata
from protocol.control import Endpoint, SecurityProtocol, TopicPartition
from protocol.errors import ZkDataError
from protocol.ids import BrokerId, ControllerEpoch, LeaderEpoch, TopicName
from protocol.zkdata import (
    PERSISTENT_PATHS,
    BrokerRegistration,
    ClusterId,
    ConfigChangeNotification,
    ConfigType,
    ControllerRegistration,
    EntityConfig,
    FeatureNode,
    FeatureStatus,
    FinalizedVersionRange,
    IsrChangeNotification,
    Jdk,
    LeaderIsrAndControllerEpoch,
    LogDirEvent,
    PartitionReassignment,
    PartitionReplicas,
    PreferredReplicaElection,
    ReplicaAssignment,
    SupportedVersionRange,
    TopicAssignment,
)

T = TopicName


def plaintext(host: str, port: int, listener: str = "PLAINTEXT") -> Endpoint:
    return Endpoint(
        host=host, port=port, listener=listener, security_protocol=SecurityProtocol.PLAINTEXT
    )


def brokers(*ids: int) -> tuple[BrokerId, ...]:
    return tuple(BrokerId(i) for i in ids)


# =================================================================================== paths


def test_paths_are_kafkas() -> None:
    """Every path helper builds the path ZkData.scala names."""
    assert zkdata.CONTROLLER_PATH == "/controller"
    assert zkdata.CONTROLLER_EPOCH_PATH == "/controller_epoch"
    assert zkdata.broker_path(BrokerId(3)) == "/brokers/ids/3"
    assert zkdata.BROKER_SEQID_PATH == "/brokers/seqid"
    assert zkdata.topic_path(T("orders")) == "/brokers/topics/orders"
    assert zkdata.topic_partitions_path(T("orders")) == "/brokers/topics/orders/partitions"
    assert zkdata.partition_path(T("orders"), 2) == "/brokers/topics/orders/partitions/2"
    assert (
        zkdata.partition_state_path(T("orders"), 2) == "/brokers/topics/orders/partitions/2/state"
    )
    assert zkdata.topic_config_path(T("orders")) == "/config/topics/orders"
    assert (
        zkdata.config_entity_path(ConfigType.USER, "alice/clients/c1")
        == "/config/users/alice/clients/c1"
    )
    assert zkdata.CONFIG_CHANGE_SEQUENCE_PATH == "/config/changes/config_change_"
    assert zkdata.config_change_path("0000000007") == "/config/changes/config_change_0000000007"
    assert zkdata.delete_topic_path(T("orders")) == "/admin/delete_topics/orders"
    assert zkdata.REASSIGN_PARTITIONS_PATH == "/admin/reassign_partitions"
    assert zkdata.PREFERRED_REPLICA_ELECTION_PATH == "/admin/preferred_replica_election"
    assert zkdata.isr_change_path("0000000001") == "/isr_change_notification/isr_change_0000000001"
    assert (
        zkdata.log_dir_event_path("0000000000")
        == "/log_dir_event_notification/log_dir_event_0000000000"
    )
    assert zkdata.CLUSTER_ID_PATH == "/cluster/id"
    assert zkdata.FEATURE_PATH == "/feature"


def test_persistent_paths_are_zkdatas_list_in_order() -> None:
    """The paths a broker ensures at startup are ZkData.PersistentZkPaths, in its order."""
    assert PERSISTENT_PATHS == (
        "/consumers",
        "/brokers/ids",
        "/brokers/topics",
        "/config/changes",
        "/admin/delete_topics",
        "/brokers/seqid",
        "/isr_change_notification",
        "/latest_producer_id_block",
        "/log_dir_event_notification",
        "/config/topics",
        "/config/clients",
        "/config/users",
        "/config/brokers",
    )


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "x\x00"])
def test_a_name_that_is_not_one_path_segment_is_refused(name: str) -> None:
    """A topic name that would address another znode (or none) raises instead of escaping."""
    with pytest.raises(ZkDataError):
        zkdata.topic_path(T(name))
    with pytest.raises(ZkDataError):
        zkdata.delete_topic_path(T(name))


def test_sequence_numbers_and_ids_parse_as_kafka_parses_them() -> None:
    """Sequence suffixes, broker-id children and generated ids follow Kafka's arithmetic."""
    assert zkdata.sequence_number("isr_change_0000000042", zkdata.ISR_CHANGE_PREFIX) == "0000000042"
    assert (
        zkdata.sequence_number("/config/changes/config_change_0000000001", "config_change_")
        == "0000000001"
    )
    assert zkdata.parse_broker_id("1001") == 1001
    assert zkdata.broker_id_from_seqid_version(1) == 1001  # first generated id
    with pytest.raises(ZkDataError):
        zkdata.parse_broker_id("one")
    with pytest.raises(ZkDataError):
        zkdata.parse_broker_id("2147483648")
    with pytest.raises(ZkDataError):
        zkdata.sequence_number("log_dir_event_1", zkdata.ISR_CHANGE_PREFIX)


# ========================================================================== exact bytes


def test_controller_znode_bytes() -> None:
    """/controller is ``{"version":1,"brokerid":N,"timestamp":"ms"}`` (ZkData.scala,
    ``ControllerZNode``)."""
    data = b'{"version":1,"brokerid":1001,"timestamp":"1620000000000"}'
    value = ControllerRegistration(broker_id=BrokerId(1001), timestamp=1620000000000)
    assert value.encode() == data
    assert ControllerRegistration.decode(data) == value


def test_controller_epoch_is_plain_decimal() -> None:
    """/controller_epoch holds ``1``, not JSON; Java's parseInt also reads a leading sign."""
    assert zkdata.encode_controller_epoch(ControllerEpoch(1)) == b"1"
    assert zkdata.decode_controller_epoch(b"17") == 17
    assert zkdata.decode_controller_epoch(b"+3") == 3


def test_broker_registration_v5_bytes() -> None:
    """A 2.7 broker (IBP 2.7, Scala 2.13 build) registers with this exact key order."""
    # Captured from kafka_2.13 brokers with IBP >= 2.7 (also the brief's example).
    data = (
        b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
        b'"endpoints":["PLAINTEXT://localhost:9092"],"jmx_port":-1,"port":9092,'
        b'"host":"localhost","version":5,"timestamp":"1620000000000"}'
    )
    value = BrokerRegistration(endpoints=(plaintext("localhost", 9092),), timestamp=1620000000000)
    assert value.encode() == data
    assert BrokerRegistration.decode(data) == value
    assert (value.host, value.port) == ("localhost", 9092)


def test_broker_registration_with_rack_listeners_and_features() -> None:
    """Rack, several listeners (IPv6 in brackets) and a supported feature take their places."""
    # Order from Scala 2.13's mutable.HashMap (rack between endpoints and jmx_port); the
    # listener map is a Map2 (insertion order); features a java.util.HashMap.
    data = (
        b'{"features":{"feature_a":{"min_version":1,"max_version":3}},'
        b'"listener_security_protocol_map":{"INTERNAL":"PLAINTEXT","EXTERNAL":"SASL_SSL"},'
        b'"endpoints":["INTERNAL://10.0.0.1:9092","EXTERNAL://[fe80::1%eth0]:9094"],'
        b'"rack":"rack-1","jmx_port":9999,"port":9092,"host":"10.0.0.1","version":5,'
        b'"timestamp":"1"}'
    )
    value = BrokerRegistration(
        endpoints=(
            plaintext("10.0.0.1", 9092, "INTERNAL"),
            Endpoint(
                host="fe80::1%eth0",
                port=9094,
                listener="EXTERNAL",
                security_protocol=SecurityProtocol.SASL_SSL,
            ),
        ),
        timestamp=1,
        jmx_port=9999,
        rack="rack-1",
        features={"feature_a": SupportedVersionRange(min_version=1, max_version=3)},
    )
    assert value.encode() == data
    assert BrokerRegistration.decode(data) == value


def test_broker_registration_v4_and_null_host() -> None:
    """IBP < 2.7 writes v4 (no features); without a PLAINTEXT endpoint host is null, port -1."""
    data = (
        b'{"listener_security_protocol_map":{"SSL":"SSL"},"endpoints":["SSL://b1:9093"],'
        b'"jmx_port":-1,"port":-1,"host":null,"version":4,"timestamp":"5"}'
    )
    value = BrokerRegistration(
        endpoints=(
            Endpoint(host="b1", port=9093, listener="SSL", security_protocol=SecurityProtocol.SSL),
        ),
        timestamp=5,
        version=4,
    )
    assert value.encode() == data
    assert BrokerRegistration.decode(data) == value
    bind_all = BrokerRegistration(endpoints=(plaintext("", 9092),), timestamp=5)
    assert b'"endpoints":["PLAINTEXT://:9092"]' in bind_all.encode()
    assert b'"host":null' in bind_all.encode()
    assert BrokerRegistration.decode(bind_all.encode()) == bind_all


@pytest.mark.parametrize(
    "data",
    [
        # Captured from a Scala 2.12 build of Kafka (its hash maps iterate differently).
        b'{"listener_security_protocol_map":{"SASL_SSL":"SASL_SSL","SSL":"SSL"},"endpoints":'
        b'["SASL_SSL://my-broker.host:9193","SSL://my-broker.host:9093"],"rack":"us-east-1d",'
        b'"jmx_port":9999,"host":null,"timestamp":"1542127633364","port":-1,"version":4}',
        # The v3 example of ZkData.scala's comment (no listener map: listener = protocol).
        b'{"version":3,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
        b'"endpoints":["SASL_SSL://my-broker.host:9193","SSL://my-broker.host:9093"],"rack":"us-east-1d"}',
    ],
)
def test_broker_registrations_written_by_other_builds_decode(data: bytes) -> None:
    """Registrations in another key order, or of version 3, read the same endpoints and rack."""
    value = BrokerRegistration.decode(data)
    assert [(e.listener, e.host, e.port, e.security_protocol) for e in value.endpoints] == [
        ("SASL_SSL", "my-broker.host", 9193, SecurityProtocol.SASL_SSL),
        ("SSL", "my-broker.host", 9093, SecurityProtocol.SSL),
    ]
    assert value.rack == "us-east-1d"
    assert value.jmx_port == 9999


def test_broker_registration_v1_and_v2_decode() -> None:
    """Version 1 has only host and port (PLAINTEXT); version 2 adds endpoints."""
    v1 = BrokerRegistration.decode(
        b'{"version":1,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2"}'
    )
    assert v1.endpoints == (plaintext("localhost", 9092),)
    assert v1.version == 1
    v2 = BrokerRegistration.decode(
        b'{"version":2,"host":"h","port":9092,"jmx_port":-1,"timestamp":"3",'
        b'"endpoints":["plaintext://h:9092","SSL://h:9093"]}'
    )
    assert v2.endpoints == (
        plaintext("h", 9092),
        Endpoint(host="h", port=9093, listener="SSL", security_protocol=SecurityProtocol.SSL),
    )


def test_topic_assignment_bytes() -> None:
    """/brokers/topics/<t> is v2 with empty adding/removing maps (``TopicZNode.encode``)."""
    data = (
        b'{"version":2,"partitions":{"0":[1,2],"1":[2,0]},'
        b'"adding_replicas":{},"removing_replicas":{}}'
    )
    value = TopicAssignment(
        partitions={
            0: ReplicaAssignment(replicas=brokers(1, 2)),
            1: ReplicaAssignment(replicas=brokers(2, 0)),
        }
    )
    assert value.encode() == data
    assert TopicAssignment.decode(data) == value


def test_topic_assignment_with_twelve_partitions_lists_them_in_hash_order() -> None:
    """From 12 partitions Kafka's mutable.HashMap puts "11" first, not numeric order."""
    # The partitions map as captured from a real 12-partition topic.
    data = (
        b'{"version":2,"partitions":{"11":[1,3,4],"0":[0,1,2],"1":[1,2,3],"2":[2,3,4],"3":[3,4,0],'
        b'"4":[4,0,1],"5":[0,2,3],"6":[1,3,4],"7":[2,4,0],"8":[3,0,1],"9":[4,1,2],"10":[1,2,3]},'
        b'"adding_replicas":{},"removing_replicas":{}}'
    )
    replicas = [(0, 1, 2), (1, 2, 3), (2, 3, 4), (3, 4, 0), (4, 0, 1), (0, 2, 3)]
    replicas += [(1, 3, 4), (2, 4, 0), (3, 0, 1), (4, 1, 2), (1, 2, 3), (1, 3, 4)]
    value = TopicAssignment(
        partitions={p: ReplicaAssignment(replicas=brokers(*r)) for p, r in enumerate(replicas)}
    )
    assert value.encode() == data
    assert TopicAssignment.decode(data) == value


def test_topic_assignment_during_a_reassignment() -> None:
    """Only partitions being reassigned appear in adding/removing_replicas."""
    data = (
        b'{"version":2,"partitions":{"0":[3,1,2],"1":[2,3]},"adding_replicas":{"0":[3]},'
        b'"removing_replicas":{"0":[2]}}'
    )
    value = TopicAssignment(
        partitions={
            0: ReplicaAssignment(
                replicas=brokers(3, 1, 2), adding_replicas=brokers(3), removing_replicas=brokers(2)
            ),
            1: ReplicaAssignment(replicas=brokers(2, 3)),
        }
    )
    assert value.encode() == data
    assert TopicAssignment.decode(data) == value


def test_topic_assignment_v1_and_v3_decode() -> None:
    """Version 1 (no adding/removing) and 2.8's version 3 (with topic_id) read as v2 does."""
    expected = TopicAssignment(partitions={0: ReplicaAssignment(replicas=brokers(1))})
    assert TopicAssignment.decode(b'{"version":1,"partitions":{"0":[1]}}') == expected
    v3 = (
        b'{"version":3,"topic_id":"q0nKq1TrSKSpQ9SgBsq0Tw","partitions":{"0":[1]},'
        b'"adding_replicas":{},"removing_replicas":{}}'
    )
    assert TopicAssignment.decode(v3) == expected


def test_partition_state_bytes() -> None:
    """The state znode's keys come out in CHAMP order, as captured from real clusters."""
    data = b'{"controller_epoch":1,"leader":0,"version":1,"leader_epoch":0,"isr":[0]}'
    value = LeaderIsrAndControllerEpoch(
        leader=BrokerId(0),
        leader_epoch=LeaderEpoch(0),
        isr=brokers(0),
        controller_epoch=ControllerEpoch(1),
    )
    assert value.encode() == data
    assert LeaderIsrAndControllerEpoch.decode(data) == value
    no_leader = LeaderIsrAndControllerEpoch(
        leader=BrokerId(-1),
        leader_epoch=LeaderEpoch(4),
        isr=brokers(),
        controller_epoch=ControllerEpoch(2),
    )
    assert (
        no_leader.encode()
        == b'{"controller_epoch":2,"leader":-1,"version":1,"leader_epoch":4,"isr":[]}'
    )


def test_topic_config_bytes() -> None:
    """/config/topics/<t> is ``{"version":1,"config":{...}}``, written even when empty."""
    assert EntityConfig().encode() == b'{"version":1,"config":{}}'
    assert EntityConfig.decode(b'{"version":1,"config":{}}') == EntityConfig()


def test_topic_config_key_order_on_jdk8_and_jdk11() -> None:
    """Properties iterate as a Hashtable on JDK 8 and as a ConcurrentHashMap on JDK 9+."""
    # __consumer_offsets' config, inserted in GroupMetadataManager's order. The JDK 8 bytes
    # are a capture (zkCli.sh get /config/topics/__consumer_offsets); the JDK 11 order is
    # the ConcurrentHashMap's, checked against a JVM by the oracle test below.
    value = EntityConfig(
        config={
            "cleanup.policy": "compact",
            "segment.bytes": "104857600",
            "compression.type": "producer",
        }
    )
    assert value.encode(jdk=Jdk.JDK8) == (
        b'{"version":1,"config":{"segment.bytes":"104857600","compression.type":"producer","cleanup.policy":"compact"}}'
    )
    assert value.encode() == (
        b'{"version":1,"config":{"compression.type":"producer","cleanup.policy":"compact","segment.bytes":"104857600"}}'
    )
    assert EntityConfig.decode(value.encode()) == value


def test_strings_are_escaped_as_jackson_escapes_them() -> None:
    """Quotes, backslashes and control characters are escaped (upper-case hex), UTF-8 is raw."""
    value = EntityConfig(config={"k": 'a"b\\c\n\t\x01\x1f/é💡'})
    assert (
        value.encode()
        == b'{"version":1,"config":{"k":"a\\"b\\\\c\\n\\t\\u0001\\u001F/\xc3\xa9\xf0\x9f\x92\xa1"}}'
    )
    assert EntityConfig.decode(value.encode()) == value


def test_a_lone_surrogate_cannot_be_encoded() -> None:
    """A string Jackson would refuse to write (a lone surrogate) raises ZkDataError."""
    with pytest.raises(ZkDataError):
        ClusterId(cluster_id="\ud800").encode()


def test_config_change_notification_bytes() -> None:
    """Config changes are v2 ``entity_path`` notifications; v1 ones still decode."""
    data = b'{"version":2,"entity_path":"topics/orders"}'
    value = ConfigChangeNotification.for_entity(ConfigType.TOPIC, "orders")
    assert value.encode() == data
    assert ConfigChangeNotification.decode(data) == value
    v1 = b'{"version":1,"entity_type":"topics","entity_name":"orders"}'
    assert ConfigChangeNotification.decode(v1) == value


def test_reassignment_bytes() -> None:
    """The legacy reassignment znode lists topic, partition, replicas in declaration order."""
    data = b'{"version":1,"partitions":[{"topic":"foo","partition":1,"replicas":[1,2,3]}]}'
    value = PartitionReassignment(
        partitions=(PartitionReplicas(topic=T("foo"), partition=1, replicas=brokers(1, 2, 3)),)
    )
    assert value.encode() == data
    assert PartitionReassignment.decode(data) == value
    assert value.as_dict() == {TopicPartition(T("foo"), 1): brokers(1, 2, 3)}


def test_preferred_election_and_isr_change_bytes() -> None:
    """Both list partitions as ``{"topic":..,"partition":..}`` under version 1."""
    data = b'{"version":1,"partitions":[{"topic":"t","partition":0},{"topic":"u","partition":3}]}'
    tps = (TopicPartition(T("t"), 0), TopicPartition(T("u"), 3))
    assert PreferredReplicaElection(partitions=tps).encode() == data
    assert PreferredReplicaElection.decode(data).partitions == tps
    assert IsrChangeNotification(partitions=tps).encode() == data
    assert IsrChangeNotification.decode(data).partitions == tps


def test_log_dir_event_bytes() -> None:
    """A log-dir failure notification names the broker and event 1."""
    data = b'{"version":1,"broker":2,"event":1}'
    assert LogDirEvent(broker_id=BrokerId(2)).encode() == data
    assert LogDirEvent.decode(data) == LogDirEvent(broker_id=BrokerId(2))


def test_cluster_id_bytes() -> None:
    """/cluster/id's version is the string "1" (the example of ZkData.scala)."""
    data = b'{"version":"1","id":"3bjYkEdwQ7WLZZue8vBorw"}'
    assert ClusterId(cluster_id="3bjYkEdwQ7WLZZue8vBorw").encode() == data
    assert ClusterId.decode(data) == ClusterId(cluster_id="3bjYkEdwQ7WLZZue8vBorw")


def test_feature_znode_bytes() -> None:
    """/feature puts features first (mutable.HashMap order, as captured from a 2.7 cluster)."""
    data = b'{"features":{},"version":1,"status":1}'
    assert FeatureNode(status=FeatureStatus.ENABLED).encode() == data
    assert FeatureNode.decode(data) == FeatureNode(status=FeatureStatus.ENABLED)
    with_feature = FeatureNode(
        status=FeatureStatus.ENABLED,
        features={
            "group_coordinator": FinalizedVersionRange(min_version_level=1, max_version_level=2)
        },
    )
    assert with_feature.encode() == (
        b'{"features":{"group_coordinator":{"min_version_level":1,"max_version_level":2}},"version":1,"status":1}'
    )


# ============================================================================ round trips

int32s = st.integers(min_value=-(2**31), max_value=2**31 - 1)
int64s = st.integers(min_value=-(2**63), max_value=2**63 - 1)
broker_ids = int32s.map(BrokerId)
broker_lists = st.lists(broker_ids, max_size=5).map(tuple)
names = st.text(max_size=12)
topics = st.from_regex(r"[a-zA-Z0-9._-]{1,20}", fullmatch=True).map(TopicName)
host_names = st.from_regex(r"[0-9a-zA-Z\-%._]{0,15}", fullmatch=True)
ipv6_hosts = st.from_regex(r"[0-9a-f]{0,4}(:[0-9a-f]{0,4}){1,7}(%[a-z0-9]{1,4})?", fullmatch=True)
listener_names = st.from_regex(r"[A-Z][A-Z0-9_]{0,11}", fullmatch=True)
ranges = st.tuples(st.integers(1, 2**15 - 1), st.integers(1, 2**15 - 1)).map(sorted)


@st.composite
def broker_registrations(draw: st.DrawFn) -> BrokerRegistration:
    version = draw(st.integers(min_value=2, max_value=5))
    if version >= 4:  # the listener map says which protocol each listener uses
        listeners = draw(st.lists(listener_names, unique=True, max_size=7))
        protocols = [draw(st.sampled_from(SecurityProtocol)) for _ in listeners]
    else:  # no map: a listener is named after its protocol
        protocols = draw(st.lists(st.sampled_from(SecurityProtocol), unique=True, max_size=4))
        listeners = [p.name for p in protocols]
    endpoints = tuple(
        Endpoint(
            host=draw(host_names | ipv6_hosts),
            port=draw(int32s),
            listener=listener,
            security_protocol=protocol,
        )
        for listener, protocol in zip(listeners, protocols, strict=True)
    )
    features: dict[str, SupportedVersionRange] = {}
    if version >= 5:
        for name, (low, high) in draw(st.dictionaries(names, ranges, max_size=5)).items():
            features[name] = SupportedVersionRange(min_version=low, max_version=high)
    return BrokerRegistration(
        endpoints=endpoints,
        timestamp=draw(int64s),
        jmx_port=draw(int32s),
        rack=draw(st.none() | names) if version >= 3 else None,
        features=features,
        version=version,
    )


replica_assignments = st.builds(
    ReplicaAssignment,
    replicas=broker_lists,
    adding_replicas=broker_lists,
    removing_replicas=broker_lists,
)
topic_partitions = st.builds(TopicPartition, topics, int32s)
finalized = ranges.map(
    lambda r: FinalizedVersionRange(min_version_level=r[0], max_version_level=r[1])
)

ROUND_TRIPS: dict[str, st.SearchStrategy[Any]] = {
    "controller": st.builds(ControllerRegistration, broker_id=broker_ids, timestamp=int64s),
    "broker": broker_registrations(),
    "topic": st.builds(
        TopicAssignment, partitions=st.dictionaries(int32s, replica_assignments, max_size=40)
    ),
    "state": st.builds(
        LeaderIsrAndControllerEpoch,
        leader=broker_ids,
        leader_epoch=int32s.map(LeaderEpoch),
        isr=broker_lists,
        controller_epoch=int32s.map(ControllerEpoch),
    ),
    "config": st.builds(EntityConfig, config=st.dictionaries(names, names, max_size=40)),
    "config_change": st.builds(ConfigChangeNotification, entity_path=names),
    "reassignment": st.builds(
        PartitionReassignment,
        partitions=st.lists(
            st.builds(PartitionReplicas, topic=topics, partition=int32s, replicas=broker_lists),
            max_size=5,
        ).map(tuple),
    ),
    "preferred": st.builds(
        PreferredReplicaElection, partitions=st.lists(topic_partitions, max_size=5).map(tuple)
    ),
    "isr_change": st.builds(
        IsrChangeNotification, partitions=st.lists(topic_partitions, max_size=5).map(tuple)
    ),
    "log_dir_event": st.builds(LogDirEvent, broker_id=broker_ids, event=int32s),
    "cluster_id": st.builds(ClusterId, cluster_id=names),
    "feature": st.builds(
        FeatureNode,
        status=st.sampled_from(FeatureStatus),
        features=st.dictionaries(names, finalized, max_size=5),
    ),
}


@pytest.mark.parametrize("kind", ROUND_TRIPS)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_payloads_round_trip(kind: str, data: st.DataObject) -> None:
    """decode(encode(x)) == x for every payload, and the bytes are compact JSON."""
    value = data.draw(ROUND_TRIPS[kind])
    encoded = value.encode()
    assert type(value).decode(encoded) == value
    # Compact JSON with the same escapes as Python's (which differ only in the case of
    # \\u hex digits, so compare lengths): no whitespace, nothing escaped that need not be.
    python = json.dumps(json.loads(encoded), ensure_ascii=False, separators=(",", ":"))
    assert len(python.encode()) == len(encoded)


@settings(max_examples=100, deadline=None)
@given(config=st.dictionaries(names, names, max_size=30))
def test_topic_config_round_trips_on_jdk8(config: dict[str, str]) -> None:
    """The JDK 8 key order reads back to the same config."""
    value = EntityConfig(config=config)
    assert EntityConfig.decode(value.encode(jdk=Jdk.JDK8)) == value


@given(epoch=int32s)
def test_controller_epoch_round_trips(epoch: int) -> None:
    """Any 32-bit epoch reads back from its decimal text."""
    assert (
        zkdata.decode_controller_epoch(zkdata.encode_controller_epoch(ControllerEpoch(epoch)))
        == epoch
    )


@given(keys=st.lists(names, unique=True, max_size=60))
def test_encoding_reorders_keys_but_keeps_all_of_them(keys: list[str]) -> None:
    """Whatever the insertion order, a map is written with exactly its own keys."""
    encoded = EntityConfig(config=dict.fromkeys(keys, "v")).encode()
    assert sorted(json.loads(encoded)["config"]) == sorted(keys)


# ========================================================================= malformed input

MALFORMED: list[tuple[Any, bytes, str]] = [
    (ControllerRegistration.decode, b"", "not valid JSON"),
    (ControllerRegistration.decode, b"\xff\xfe", "not valid JSON"),
    (ControllerRegistration.decode, b"[1,2]", "expected a JSON object"),
    (ControllerRegistration.decode, b'{"version":1,"timestamp":"1"}', "'brokerid'"),
    (ControllerRegistration.decode, b'{"version":1,"brokerid":"1","timestamp":"1"}', "'brokerid'"),
    (ControllerRegistration.decode, b'{"version":1,"brokerid":true,"timestamp":"1"}', "'brokerid'"),
    (ControllerRegistration.decode, b'{"version":1,"brokerid":1.0,"timestamp":"1"}', "'brokerid'"),
    (
        ControllerRegistration.decode,
        b'{"version":1,"brokerid":2147483648,"timestamp":"1"}',
        "'brokerid'",
    ),
    (
        ControllerRegistration.decode,
        b'{"version":1,"brokerid":1,"timestamp":"soon"}',
        "'timestamp'",
    ),
    (zkdata.decode_controller_epoch, b"", "not a decimal integer"),
    (zkdata.decode_controller_epoch, b" 1", "not a decimal integer"),
    (zkdata.decode_controller_epoch, b"1.0", "not a decimal integer"),
    (zkdata.decode_controller_epoch, b"2147483648", "out of range"),
    (zkdata.decode_controller_epoch, b"\xd9\xa1", "not a decimal integer"),
    (
        BrokerRegistration.decode,
        b'{"version":0,"jmx_port":-1,"timestamp":"1"}',
        "unsupported version 0",
    ),
    (BrokerRegistration.decode, b'{"version":5,"timestamp":"1","endpoints":[]}', "'jmx_port'"),
    (BrokerRegistration.decode, b'{"version":5,"jmx_port":-1,"timestamp":"1"}', "'endpoints'"),
    (
        BrokerRegistration.decode,
        b'{"version":5,"jmx_port":-1,"timestamp":"1","endpoints":["PLAINTEXT:/h:1"]}',
        "broker endpoint",
    ),
    (
        BrokerRegistration.decode,
        b'{"version":5,"jmx_port":-1,"timestamp":"1","endpoints":["X://h:1"],"listener_security_protocol_map":{}}',
        "no security protocol defined for listener 'X'",
    ),
    (
        BrokerRegistration.decode,
        b'{"version":2,"jmx_port":-1,"timestamp":"1","endpoints":["INTERNAL://h:1"]}',
        "no security protocol defined for listener 'INTERNAL'",
    ),
    (
        BrokerRegistration.decode,
        b'{"version":5,"jmx_port":-1,"timestamp":"1","endpoints":[],"listener_security_protocol_map":{"A":"TLS"}}',
        "unknown security protocol 'TLS'",
    ),
    (
        BrokerRegistration.decode,
        b'{"version":5,"jmx_port":-1,"timestamp":"1","endpoints":["PLAINTEXT://h:99999999999"]}',
        "out of range",
    ),
    (
        BrokerRegistration.decode,
        b'{"version":5,"jmx_port":-1,"timestamp":"1","endpoints":[],"features":{"f":{"min_version":2,"max_version":1}}}',
        "invalid version range",
    ),
    (
        BrokerRegistration.decode,
        b'{"version":5,"jmx_port":-1,"timestamp":"1","endpoints":[],"rack":7}',
        "'rack'",
    ),
    (TopicAssignment.decode, b'{"version":2}', "'partitions'"),
    (TopicAssignment.decode, b'{"version":2,"partitions":{"zero":[1]}}', "partition 'zero'"),
    (TopicAssignment.decode, b'{"version":2,"partitions":{"0":[1,"2"]}}', "'0'"),
    (
        TopicAssignment.decode,
        b'{"version":2,"partitions":{"0":[1]},"adding_replicas":[]}',
        "'adding_replicas'",
    ),
    (
        LeaderIsrAndControllerEpoch.decode,
        b'{"leader":1,"leader_epoch":0,"isr":[1]}',
        "'controller_epoch'",
    ),
    (
        LeaderIsrAndControllerEpoch.decode,
        b'{"controller_epoch":1,"leader":1,"leader_epoch":0,"isr":1}',
        "'isr'",
    ),
    (EntityConfig.decode, b'{"version":1}', "'config'"),
    (EntityConfig.decode, b'{"version":1,"config":{"retention.ms":1000}}', "'retention.ms'"),
    (
        ConfigChangeNotification.decode,
        b'{"version":3,"entity_path":"topics/t"}',
        "unsupported version 3",
    ),
    (
        ConfigChangeNotification.decode,
        b'{"version":1,"entity_type":"users","entity_name":"u"}',
        "'entity_type'",
    ),
    (ConfigChangeNotification.decode, b'{"version":2}', "'entity_path'"),
    (
        PartitionReassignment.decode,
        b'{"version":1,"partitions":[{"topic":"t","replicas":[1]}]}',
        "'partition'",
    ),
    (PartitionReassignment.decode, b'{"version":1,"partitions":{}}', "'partitions'"),
    (PreferredReplicaElection.decode, b'{"version":1,"partitions":[{"partition":0}]}', "'topic'"),
    (IsrChangeNotification.decode, b'{"version":1,"partitions":[7]}', "expected a JSON object"),
    (LogDirEvent.decode, b'{"version":1,"event":1}', "'broker'"),
    (ClusterId.decode, b'{"version":"1","id":null}', "'id'"),
    (FeatureNode.decode, b'{"version":0,"status":1,"features":{}}', "unsupported version 0"),
    (FeatureNode.decode, b'{"version":1,"status":1}', "'features'"),
    (FeatureNode.decode, b'{"version":1,"features":{}}', "'status'"),
    (FeatureNode.decode, b'{"version":1,"status":2,"features":{}}', "'status'"),
]


@pytest.mark.parametrize(("decode", "data", "message"), MALFORMED)
def test_malformed_payloads_raise_zkdataerror(decode: Any, data: bytes, message: str) -> None:
    """Malformed bytes raise ZkDataError whose message names what is wrong."""
    with pytest.raises(ZkDataError) as caught:
        decode(data)
    assert message in str(caught.value)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=64) | st.text(max_size=64).map(str.encode))
@example(data=b'"\x80"')  # a JSON string that is not UTF-8 (msgspec: UnicodeDecodeError)
@example(data=b'{"version":1,"brokerid":"\xff"}')
def test_arbitrary_bytes_either_decode_or_raise_zkdataerror(data: bytes) -> None:
    """No input makes a decoder raise anything but ZkDataError."""
    decoders = [
        ControllerRegistration.decode,
        zkdata.decode_controller_epoch,
        BrokerRegistration.decode,
        TopicAssignment.decode,
        LeaderIsrAndControllerEpoch.decode,
        EntityConfig.decode,
        ConfigChangeNotification.decode,
        PartitionReassignment.decode,
        PreferredReplicaElection.decode,
        LogDirEvent.decode,
        ClusterId.decode,
        FeatureNode.decode,
    ]
    for decode in decoders:
        with contextlib.suppress(ZkDataError):
            decode(data)


# ============================================================== the JVM as the oracle

_ORACLE = """
import java.io.*;
import java.util.*;
public class Oracle {
  public static void main(String[] args) throws Exception {
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
    String line;
    while ((line = in.readLine()) != null) {
      String[] keys = line.isEmpty() ? new String[0] : line.split("\\t", -1);
      Properties properties = new Properties();
      Hashtable<String, String> table = new Hashtable<>();
      HashMap<String, String> hash = new HashMap<>();
      for (String k : keys) { properties.setProperty(k, "v"); table.put(k, "v"); hash.put(k, "v"); }
      StringBuilder out = new StringBuilder();
      for (Object k : properties.keySet()) out.append(k).append('\\t');
      out.append('|');
      for (String k : table.keySet()) out.append(k).append('\\t');
      out.append('|');
      for (String k : hash.keySet()) out.append(k).append('\\t');
      System.out.println(out);
    }
  }
}
"""


@pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK (javac, java)")
def test_jdk_collection_orders_match_this_machines_jvm(tmp_path: Path) -> None:
    """The emulated orders of Properties (JDK 9+), Hashtable and HashMap are the JVM's own."""
    (tmp_path / "Oracle.java").write_text(_ORACLE)
    subprocess.run(["javac", "Oracle.java"], cwd=tmp_path, check=True, capture_output=True)
    rng = random.Random(2021)
    alphabet = "abcdefghijklmnopqrstuvwxyz.-_0123456789"
    cases = [
        list(
            dict.fromkeys(
                "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 16))) for _ in range(n)
            )
        )
        for n in [*range(40), 50, 64, 100, 250]
    ]
    cases.append(["cleanup.policy", "segment.bytes", "compression.type"])
    stdin = "".join("\t".join(keys) + "\n" for keys in cases)
    run = subprocess.run(
        ["java", "-cp", str(tmp_path), "Oracle"],
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
    )
    for keys, line in zip(cases, run.stdout.splitlines(), strict=True):
        properties, table, hash_map = (
            [k for k in part.split("\t") if k] for part in line.split("|")
        )
        assert jvm.java_concurrent_hash_map_order(keys) == properties
        assert jvm.java_hashtable_order(keys) == table
        assert jvm.java_hash_map_order(keys) == hash_map
