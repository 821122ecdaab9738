"""Every ZooKeeper path and payload of ZooKeeper-mode Kafka 2.7, byte for byte.

A ZooKeeper written by kemu must look exactly like one written by Kafka 2.7.2 (so that
``zkCli.sh``, Kafka's own tools and a diff against a real cluster's dump cannot tell them
apart), and kemu must read what Kafka writes. Paths are module constants and functions;
each JSON payload is a frozen struct with ``encode() -> bytes`` and ``decode(bytes)``.

Where the bytes come from
-------------------------
Kafka builds each payload as a Scala or Java map and serialises it with a default Jackson
``ObjectMapper`` (``kafka.utils.Json``): compact JSON, no spaces, non-ASCII written as
UTF-8, control characters escaped with upper-case hex. Jackson writes a map's entries in
the map's *iteration order*, so the key order of every payload is decided by the JVM
collection Kafka happened to use in ``core/src/main/scala/kafka/zk/ZkData.scala`` (tag
2.7.2, built with Scala 2.13.3, the default of its ``gradle.properties``):

* ``Map(k1 -> v1, ...)`` with at most four entries is Scala's ``Map1``..``Map4``, which
  iterate in insertion order: /controller, topic assignment (outer object), topic config
  (outer object), config change, preferred election, ISR change, log-dir event, cluster id,
  and the listener map of a broker with at most four listeners.
* ``Map(...)`` with five or more entries is Scala 2.13's CHAMP ``immutable.HashMap``,
  which iterates by the bits of an "improved" ``String.hashCode``: the partition state
  (``{"controller_epoch":..,"leader":..,"version":..,"leader_epoch":..,"isr":..}``).
* ``collection.mutable.Map(...)`` is Scala 2.13's ``mutable.HashMap``, iterated bucket by
  bucket: broker registration, feature znode, and the three partition maps of a topic
  assignment (so a topic with 12 or more partitions lists ``"11"`` before ``"0"``).
* ``java.util.Properties`` (topic config values) iterates like a ``ConcurrentHashMap`` on
  JDK 9+ and like a ``Hashtable`` on JDK 8: see ``Jdk``.
* ``Features.toMap`` is a ``java.util.HashMap``; each version range is a
  ``LinkedHashMap`` (min before max).
* The legacy reassignment znode is a Jackson-bound case class: declaration order.

Rather than hard-coding orders, the private ``_*_order`` functions below reproduce those
collections' iteration orders, so maps of any size come out as Kafka writes them. Their
output is pinned in the tests against payloads captured from real clusters. (Kafka's
Scala 2.12 build iterates its hash maps differently; we emulate the 2.13 build.)

Decoding accepts everything Kafka 2.7 writes, and the older versions it still reads, in any
key order; anything else raises ``ZkDataError`` naming the payload and the field. Versions
are checked only where Kafka's own decoder checks them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from enum import IntEnum, StrEnum
from typing import Annotated, Any, Final, Self, TypeAlias, cast

import msgspec

from protocol import jvm
from protocol.control import Endpoint, SecurityProtocol, TopicPartition
from protocol.errors import ZkDataError
from protocol.ids import BrokerId, ControllerEpoch, LeaderEpoch, TopicName

__all__ = [
    "ADMIN_PATH",
    "BROKERS_PATH",
    "BROKER_IDS_PATH",
    "BROKER_SEQID_PATH",
    "CLUSTER_ID_PATH",
    "CLUSTER_PATH",
    "CONFIG_CHANGES_PATH",
    "CONFIG_CHANGE_PREFIX",
    "CONFIG_CHANGE_SEQUENCE_PATH",
    "CONFIG_PATH",
    "CONSUMERS_PATH",
    "CONTROLLER_EPOCH_PATH",
    "CONTROLLER_PATH",
    "DELETE_TOPICS_PATH",
    "FEATURE_PATH",
    "ISR_CHANGE_NOTIFICATION_PATH",
    "ISR_CHANGE_PREFIX",
    "ISR_CHANGE_SEQUENCE_PATH",
    "LATEST_PRODUCER_ID_BLOCK_PATH",
    "LOG_DIR_EVENT_NOTIFICATION_PATH",
    "LOG_DIR_EVENT_PREFIX",
    "LOG_DIR_EVENT_SEQUENCE_PATH",
    "LOG_DIR_FAILURE_EVENT",
    "PERSISTENT_PATHS",
    "PREFERRED_REPLICA_ELECTION_PATH",
    "PRODUCER_ID_BLOCK_SIZE",
    "REASSIGN_PARTITIONS_PATH",
    "RESERVED_BROKER_MAX_ID",
    "TOPICS_PATH",
    "BrokerRegistration",
    "ClusterId",
    "ConfigChangeNotification",
    "ConfigType",
    "ControllerRegistration",
    "EntityConfig",
    "FeatureNode",
    "FeatureStatus",
    "FinalizedVersionRange",
    "IsrChangeNotification",
    "Jdk",
    "LeaderIsrAndControllerEpoch",
    "LogDirEvent",
    "PartitionReassignment",
    "PartitionReplicas",
    "PreferredReplicaElection",
    "ProducerIdBlock",
    "ReplicaAssignment",
    "SupportedVersionRange",
    "TopicAssignment",
    "broker_id_from_seqid_version",
    "broker_path",
    "config_change_path",
    "config_entity_path",
    "config_entity_type_path",
    "connection_string",
    "decode_controller_epoch",
    "delete_topic_path",
    "encode_controller_epoch",
    "isr_change_path",
    "log_dir_event_path",
    "parse_broker_id",
    "parse_connection_string",
    "partition_path",
    "partition_state_path",
    "sequence_number",
    "topic_config_path",
    "topic_partitions_path",
    "topic_path",
]

# =============================================================================== paths
# Names and values from ZkData.scala (objects ``*ZNode``).

CONTROLLER_PATH: Final = "/controller"
CONTROLLER_EPOCH_PATH: Final = "/controller_epoch"
BROKERS_PATH: Final = "/brokers"
BROKER_IDS_PATH: Final = "/brokers/ids"
BROKER_SEQID_PATH: Final = "/brokers/seqid"
TOPICS_PATH: Final = "/brokers/topics"
CONFIG_PATH: Final = "/config"
CONFIG_CHANGES_PATH: Final = "/config/changes"
CONFIG_CHANGE_PREFIX: Final = "config_change_"
CONFIG_CHANGE_SEQUENCE_PATH: Final = f"{CONFIG_CHANGES_PATH}/{CONFIG_CHANGE_PREFIX}"
"""Create a persistent-sequential node here; ZooKeeper appends a 10-digit sequence."""
ADMIN_PATH: Final = "/admin"
DELETE_TOPICS_PATH: Final = "/admin/delete_topics"
REASSIGN_PARTITIONS_PATH: Final = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION_PATH: Final = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION_PATH: Final = "/isr_change_notification"
ISR_CHANGE_PREFIX: Final = "isr_change_"
ISR_CHANGE_SEQUENCE_PATH: Final = f"{ISR_CHANGE_NOTIFICATION_PATH}/{ISR_CHANGE_PREFIX}"
LOG_DIR_EVENT_NOTIFICATION_PATH: Final = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX: Final = "log_dir_event_"
LOG_DIR_EVENT_SEQUENCE_PATH: Final = f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{LOG_DIR_EVENT_PREFIX}"
CLUSTER_PATH: Final = "/cluster"
CLUSTER_ID_PATH: Final = "/cluster/id"
FEATURE_PATH: Final = "/feature"
CONSUMERS_PATH: Final = "/consumers"
LATEST_PRODUCER_ID_BLOCK_PATH: Final = "/latest_producer_id_block"

RESERVED_BROKER_MAX_ID: Final = 1000
"""Default of ``reserved.broker.max.id``: generated broker ids start above it."""


class ConfigType(StrEnum):
    """The entity types under ``/config`` (``kafka.server.ConfigType``), in Kafka's order."""

    TOPIC = "topics"
    CLIENT = "clients"
    USER = "users"
    BROKER = "brokers"


PERSISTENT_PATHS: Final[tuple[str, ...]] = (
    CONSUMERS_PATH,
    BROKER_IDS_PATH,
    TOPICS_PATH,
    CONFIG_CHANGES_PATH,
    DELETE_TOPICS_PATH,
    BROKER_SEQID_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    LATEST_PRODUCER_ID_BLOCK_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    *(f"{CONFIG_PATH}/{t.value}" for t in ConfigType),
)
"""What every broker creates (with parents, ignoring NODEEXISTS) at startup, in the order
of ``ZkData.PersistentZkPaths``."""


def _segment(name: str, what: str) -> str:
    """``name`` as one path segment, or ``ZkDataError`` if ZooKeeper would reject it (or it
    would silently address another node)."""
    if name in ("", ".", "..") or "/" in name or "\x00" in name:
        raise ZkDataError(f"{what} {name!r} cannot be a ZooKeeper path segment")
    return name


def broker_path(broker_id: BrokerId) -> str:
    """``/brokers/ids/<id>``: the broker's ephemeral registration; its czxid is the broker
    epoch."""
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: TopicName) -> str:
    """``/brokers/topics/<t>``: the topic's replica assignment."""
    return f"{TOPICS_PATH}/{_segment(topic, 'topic')}"


def topic_partitions_path(topic: TopicName) -> str:
    return f"{topic_path(topic)}/partitions"


def partition_path(topic: TopicName, partition: int) -> str:
    return f"{TOPICS_PATH}/{_segment(topic, 'topic')}/partitions/{partition}"


def partition_state_path(topic: TopicName, partition: int) -> str:
    """``/brokers/topics/<t>/partitions/<p>/state``: leader, ISR and epochs; its zkVersion
    is LeaderAndIsr's ``zk_version``. (One format: a new controller reads every one.)"""
    return f"{TOPICS_PATH}/{_segment(topic, 'topic')}/partitions/{partition}/state"


def config_entity_type_path(entity_type: ConfigType) -> str:
    return f"{CONFIG_PATH}/{entity_type.value}"


def config_entity_path(entity_type: ConfigType, name: str) -> str:
    """``/config/<type>/<name>``. ``name`` is already sanitised (users and client ids are
    URL-encoded by Kafka; ``<user>/clients/<client>`` spans segments on purpose)."""
    if name == "" or name.startswith("/") or name.endswith("/"):
        raise ZkDataError(f"config entity name {name!r} cannot be a ZooKeeper path")
    for part in name.split("/"):
        _segment(part, "config entity name part")
    return f"{config_entity_type_path(entity_type)}/{name}"


def topic_config_path(topic: TopicName) -> str:
    """``/config/topics/<t>``: written for every topic at creation, even with no config.
    (``config_entity_path``'s own checks are those of one segment: made once here, as a
    LeaderAndIsr of a bulk creation reads a thousand topics' configs on every broker.)"""
    return f"{CONFIG_PATH}/{ConfigType.TOPIC.value}/{_segment(topic, 'topic')}"


def delete_topic_path(topic: TopicName) -> str:
    """``/admin/delete_topics/<t>``: marks the topic for deletion; it has no data."""
    return f"{DELETE_TOPICS_PATH}/{_segment(topic, 'topic')}"


def config_change_path(sequence: str) -> str:
    return f"{CONFIG_CHANGE_SEQUENCE_PATH}{sequence}"


def isr_change_path(sequence: str) -> str:
    return f"{ISR_CHANGE_SEQUENCE_PATH}{sequence}"


def log_dir_event_path(sequence: str) -> str:
    return f"{LOG_DIR_EVENT_SEQUENCE_PATH}{sequence}"


def sequence_number(path_or_name: str, prefix: str) -> str:
    """The sequence suffix of a sequential node's name or path, as Kafka extracts it
    (everything after the last occurrence of ``prefix``)."""
    at = path_or_name.rfind(prefix)
    if at < 0:
        raise ZkDataError(f"{path_or_name!r} is not a {prefix!r} sequential node")
    return path_or_name[at + len(prefix) :]


def parse_broker_id(child: str) -> BrokerId:
    """A child name of ``/brokers/ids`` as a broker id (Java ``toInt`` semantics)."""
    return BrokerId(_parse_java_int(child, "broker id", bits=32))


def broker_id_from_seqid_version(
    version: int, reserved_max_id: int = RESERVED_BROKER_MAX_ID
) -> BrokerId:
    """The id a broker generates: the zkVersion ``/brokers/seqid`` got from its unconditional
    setData, plus ``reserved.broker.max.id``."""
    return BrokerId(version + reserved_max_id)


# ===================================================================== JSON, as Jackson

_Json: TypeAlias = "bool | int | str | Sequence[_Json] | Mapping[str, _Json] | None"

# Jackson's default escapes (CharTypes.sOutputEscapes128): the two-character forms for
# these, ``\u00XX`` with upper-case hex for the other control characters, nothing else.
_SHORT_ESCAPES: Final = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}
_NEEDS_ESCAPE: Final = re.compile(r'["\\\x00-\x1f]')


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    return _SHORT_ESCAPES.get(char) or f"\\u{ord(char):04X}"


def _write(value: _Json, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, str):
        out.append('"' + _NEEDS_ESCAPE.sub(_escape, value) + '"')
    elif isinstance(value, Mapping):
        out.append("{")
        for i, (key, item) in enumerate(value.items()):
            if i:
                out.append(",")
            _write(key, out)
            out.append(":")
            _write(item, out)
        out.append("}")
    else:
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(item, out)
        out.append("]")


def _dumps(value: _Json) -> bytes:
    """Compact JSON as ``ObjectMapper.writeValueAsBytes`` writes it: maps in the order given."""
    out: list[str] = []
    _write(value, out)
    try:
        return "".join(out).encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate: Jackson refuses it too
        raise ZkDataError(f"cannot encode a string with a lone surrogate: {exc}") from None


def _reorder(mapping: Mapping[str, _Json], order: Iterable[str]) -> dict[str, _Json]:
    return {key: mapping[key] for key in order}


def _scala_mutable_map(
    mapping: Mapping[str, _Json], *, initial_capacity: int = 16
) -> dict[str, _Json]:
    return _reorder(
        mapping, jvm.scala_mutable_map_order(list(mapping), initial_capacity=initial_capacity)
    )


def _scala_map_capacity(entries: int) -> int:
    """The capacity ``mutable.Map(kv*)`` (``HashMap.from``) gives a table for ``entries``."""
    return int((entries + 1) / 0.75)


class Jdk(IntEnum):
    """The JDK the emulated Kafka runs on. It only matters for ``java.util.Properties``
    (topic and other entity configs): JDK 8 iterates it as a ``Hashtable``, JDK 9+ as a
    ``ConcurrentHashMap``. JDK 11, the usual runtime of Kafka 2.7, is the default."""

    JDK8 = 8
    JDK11 = 11


# ===================================================================== JSON, read back


def _preview(data: bytes) -> str:
    text = bytes(data[:200]).decode("utf-8", "replace")
    return text + ("..." if len(data) > 200 else "")


_JAVA_INT: Final = re.compile(r"[+-]?[0-9]+")


def _parse_java_int(text: str, what: str, *, bits: int) -> int:
    """Java's ``Integer.parseInt``/``Long.parseLong`` on ``text``: an optional sign, ASCII
    digits, within range."""
    if not _JAVA_INT.fullmatch(text):
        raise ZkDataError(f"{what} {text!r} is not a decimal integer")
    value = int(text)
    if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        raise ZkDataError(f"{what} {text!r} is out of range for a {bits}-bit integer")
    return value


_INT32_MIN: Final = -(1 << 31)
_INT32_MAX: Final = (1 << 31) - 1


class _Object:
    """Typed, Kafka-strict access to one JSON object of a payload (``DecodeJson``: an Int
    must be a JSON integer within 32 bits, a String a JSON string). Every failure names
    the payload, the field and shows the raw bytes."""

    def __init__(self, value: object, what: str, data: bytes) -> None:
        if not isinstance(value, dict):
            raise ZkDataError(f"{what}: expected a JSON object in {_preview(data)!r}")
        self.fields: dict[str, Any] = value
        self.what = what
        self.data = data

    @classmethod
    def parse(cls, data: bytes, what: str) -> _Object:
        try:
            value = msgspec.json.decode(data)
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:  # a string not in UTF-8
            raise ZkDataError(f"{what}: not valid JSON ({exc}): {_preview(data)!r}") from None
        return cls(value, what, data)

    def fail(self, key: str, expected: str) -> ZkDataError:
        found = self.fields.get(key, "nothing")
        return ZkDataError(
            f"{self.what}: field {key!r} must be {expected}, found {found!r} "
            f"in {_preview(self.data)!r}"
        )

    def has(self, key: str) -> bool:
        return key in self.fields

    def _int(self, value: object, key: str, bits: int) -> int:
        if type(value) is not int or not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
            raise self.fail(key, f"a {bits}-bit integer")
        return value

    def int32(self, key: str) -> int:
        return self._int(self.fields.get(key), key, 32)

    def string(self, key: str) -> str:
        value = self.fields.get(key)
        if not isinstance(value, str):
            raise self.fail(key, "a string")
        return value

    def optional_str(self, key: str) -> str | None:
        value = self.fields.get(key)
        if value is not None and not isinstance(value, str):
            raise self.fail(key, "a string or null")
        return value

    def int32_list(self, key: str) -> tuple[int, ...]:
        return self.int32_list_value(self.fields.get(key), key)

    def int32_list_value(self, value: object, key: str) -> tuple[int, ...]:
        if not isinstance(value, list):
            raise self.fail(key, "an array of 32-bit integers")
        if all(type(item) is int and _INT32_MIN <= item <= _INT32_MAX for item in value):
            return tuple(value)  # the common case, checked in one pass
        return tuple(self._int(item, key, 32) for item in value)

    def str_list(self, key: str) -> tuple[str, ...]:
        value = self.fields.get(key)
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self.fail(key, "an array of strings")
        return tuple(value)

    def child(self, key: str) -> _Object:
        value = self.fields.get(key)
        if not isinstance(value, dict):
            raise self.fail(key, "a JSON object")
        return _Object(value, f"{self.what} {key}", self.data)

    def children(self, key: str) -> list[_Object]:
        value = self.fields.get(key)
        if not isinstance(value, list):
            raise self.fail(key, "an array of JSON objects")
        return [_Object(item, f"{self.what} {key}[{i}]", self.data) for i, item in enumerate(value)]

    def timestamp(self, key: str) -> int:
        """Kafka writes ms timestamps as decimal strings (``timestamp.toString``)."""
        value = self.fields.get(key)
        if isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value):
            return _parse_java_int(value, f"{self.what}: {key}", bits=64)
        if type(value) is int:
            return self._int(value, key, 64)
        raise self.fail(key, "a timestamp in ms, as a decimal string")

    def version(self, *, at_least: int = 1) -> int:
        version = self.int32("version")
        if version < at_least:
            raise ZkDataError(
                f"{self.what}: unsupported version {version} in {_preview(self.data)!r}"
            )
        return version


# ========================================================== /controller, /controller_epoch


class ControllerRegistration(msgspec.Struct, frozen=True, kw_only=True):
    """``/controller``: which broker is the active controller (ephemeral, its session)."""

    broker_id: BrokerId
    timestamp: int
    """When it was elected, in ms since the epoch (from the node's injected clock)."""

    def encode(self) -> bytes:
        # ControllerZNode.encode: Map(version, brokerid, timestamp) -> Map3, insertion order.
        return _dumps({"version": 1, "brokerid": self.broker_id, "timestamp": str(self.timestamp)})

    @classmethod
    def decode(cls, data: bytes) -> Self:
        obj = _Object.parse(data, CONTROLLER_PATH)
        return cls(broker_id=BrokerId(obj.int32("brokerid")), timestamp=obj.timestamp("timestamp"))


def encode_controller_epoch(epoch: ControllerEpoch) -> bytes:
    """``/controller_epoch`` holds the epoch as plain decimal text, not JSON."""
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes) -> ControllerEpoch:
    """The controller epoch (``new String(bytes).toInt``)."""
    try:
        text = bytes(data).decode("ascii")
    except UnicodeDecodeError:
        raise ZkDataError(
            f"{CONTROLLER_EPOCH_PATH}: not a decimal integer: {_preview(data)!r}"
        ) from None
    return ControllerEpoch(_parse_java_int(text, CONTROLLER_EPOCH_PATH, bits=32))


# ====================================================================== /brokers/ids/<id>

_ENDPOINT: Final = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")
"""``EndPoint.uriParseExp`` (Scala's pattern match is a full match)."""


def connection_string(endpoint: Endpoint) -> str:
    """``LISTENER://host:port`` as ``EndPoint.connectionString`` writes it: IPv6 hosts in
    brackets, the null (empty) host as nothing."""
    if endpoint.host == "":
        hostport = f":{endpoint.port}"
    elif ":" in endpoint.host:
        hostport = f"[{endpoint.host}]:{endpoint.port}"
    else:
        hostport = f"{endpoint.host}:{endpoint.port}"
    return f"{endpoint.listener}://{hostport}"


def parse_connection_string(
    text: str, protocols: Mapping[str, SecurityProtocol] | None = None
) -> Endpoint:
    """``EndPoint.createEndPoint``: the listener name is upper-cased, and its security
    protocol looked up in ``protocols`` (the registration's listener map), or taken from
    the listener name when the registration has no map (versions before 4)."""
    match = _ENDPOINT.fullmatch(text)
    if match is None:
        raise ZkDataError(f"unable to parse {text!r} to a broker endpoint")
    listener = match.group(1).upper()
    if protocols is None:
        protocols = {p.name: p for p in SecurityProtocol}
    protocol = protocols.get(listener)
    if protocol is None:
        raise ZkDataError(f"no security protocol defined for listener {listener!r}")
    port = _parse_java_int(match.group(3), f"port of endpoint {text!r}", bits=32)
    return Endpoint(host=match.group(2), port=port, listener=listener, security_protocol=protocol)


class SupportedVersionRange(msgspec.Struct, frozen=True, kw_only=True):
    """The versions of a feature a broker supports (KIP-584); both at least 1."""

    min_version: int
    max_version: int


class FinalizedVersionRange(msgspec.Struct, frozen=True, kw_only=True):
    """The cluster-wide finalised version levels of a feature (KIP-584)."""

    min_version_level: int
    max_version_level: int


def _features_json(
    features: Mapping[str, tuple[int, int]], labels: tuple[str, str]
) -> dict[str, _Json]:
    # Features.toMap: Collectors.toMap -> java.util.HashMap; each range is a LinkedHashMap.
    ranges = {name: {labels[0]: low, labels[1]: high} for name, (low, high) in features.items()}
    return _reorder(ranges, jvm.java_hash_map_order(list(ranges)))


def _read_features(obj: _Object, key: str, labels: tuple[str, str]) -> dict[str, tuple[int, int]]:
    """A features map, checked as ``BaseVersionRange`` checks it (shorts, 1 <= min <= max)."""
    out: dict[str, tuple[int, int]] = {}
    features = obj.child(key)
    for name in features.fields:
        entry = features.child(name)
        low, high = entry.int32(labels[0]), entry.int32(labels[1])
        if not 1 <= low <= high < (1 << 15):
            raise ZkDataError(
                f"{obj.what}: invalid version range {low}..{high} for feature {name!r}"
            )
        out[name] = (low, high)
    return out


_SUPPORTED_LABELS: Final = ("min_version", "max_version")
_FINALIZED_LABELS: Final = ("min_version_level", "max_version_level")


class BrokerRegistration(msgspec.Struct, frozen=True, kw_only=True):
    """``/brokers/ids/<id>``: a live broker's endpoints, rack and supported features.

    Kafka 2.7 writes version 5 (IBP >= 2.7) or 4; decoding also reads versions 1 to 3.
    The top-level ``host``/``port`` are derived, as in Kafka, from the first PLAINTEXT
    endpoint (null and -1 without one); only ``endpoints`` is read back.
    """

    endpoints: tuple[Endpoint, ...]
    timestamp: int
    """Registration time in ms (the node's injected clock)."""
    jmx_port: int = -1
    rack: str | None = None
    features: dict[str, SupportedVersionRange] = {}
    """Supported features by name; insertion order feeds the JVM order Kafka writes."""
    version: int = 5

    @property
    def host(self) -> str | None:
        plaintext = self._plaintext()
        return (plaintext.host or None) if plaintext is not None else None

    @property
    def port(self) -> int:
        plaintext = self._plaintext()
        return plaintext.port if plaintext is not None else -1

    def _plaintext(self) -> Endpoint | None:
        return next(
            (e for e in self.endpoints if e.security_protocol is SecurityProtocol.PLAINTEXT), None
        )

    def encode(self) -> bytes:
        # BrokerIdZNode.encode: collection.mutable.Map of six keys, then rack (v3+), the
        # listener map (v4+) and features (v5+) added: a Scala mutable.HashMap's order.
        fields: dict[str, _Json] = {
            "version": self.version,
            "host": self.host,
            "port": self.port,
            "endpoints": [connection_string(e) for e in self.endpoints],
            "jmx_port": self.jmx_port,
            "timestamp": str(self.timestamp),
        }
        if self.rack is not None and self.version >= 3:
            fields["rack"] = self.rack
        if self.version >= 4:
            # advertisedEndpoints.map(...).toMap: an immutable Map (insertion order up to 4).
            protocols = {e.listener: e.security_protocol.name for e in self.endpoints}
            fields["listener_security_protocol_map"] = _reorder(
                protocols, jvm.scala_immutable_order(list(protocols))
            )
        if self.version >= 5:
            fields["features"] = _features_json(
                {name: (r.min_version, r.max_version) for name, r in self.features.items()},
                _SUPPORTED_LABELS,
            )
        return _dumps(_scala_mutable_map(fields, initial_capacity=_scala_map_capacity(6)))

    @classmethod
    def decode(cls, data: bytes) -> Self:
        """``BrokerIdZNode.decode``: v1 has only host and port; v2+ has endpoints, resolved
        through the listener map when there is one."""
        obj = _Object.parse(data, "broker registration")
        version = obj.version(at_least=1)
        jmx_port = obj.int32("jmx_port")
        if version == 1:
            endpoints: tuple[Endpoint, ...] = (
                Endpoint(
                    host=obj.string("host"),
                    port=obj.int32("port"),
                    listener=SecurityProtocol.PLAINTEXT.name,
                    security_protocol=SecurityProtocol.PLAINTEXT,
                ),
            )
        else:
            protocols: dict[str, SecurityProtocol] | None = None
            if obj.has("listener_security_protocol_map"):
                listeners = obj.child("listener_security_protocol_map")
                protocols = {}
                for listener in listeners.fields:
                    name = listeners.string(listener).upper()  # SecurityProtocol.forName
                    if name not in SecurityProtocol.__members__:
                        raise ZkDataError(
                            f"broker registration: unknown security protocol {name!r}"
                        )
                    protocols[listener] = SecurityProtocol[name]
            endpoints = tuple(
                parse_connection_string(s, protocols) for s in obj.str_list("endpoints")
            )
        features: dict[str, SupportedVersionRange] = {}
        if obj.has("features") and obj.fields["features"] is not None:
            features = {
                name: SupportedVersionRange(min_version=low, max_version=high)
                for name, (low, high) in _read_features(obj, "features", _SUPPORTED_LABELS).items()
            }
        return cls(
            endpoints=endpoints,
            timestamp=obj.timestamp("timestamp"),
            jmx_port=jmx_port,
            rack=obj.optional_str("rack"),
            features=features,
            version=version,
        )


# ================================================================= /brokers/topics/<t>


class ReplicaAssignment(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """The replicas of one partition; during a reassignment, the ones being added and
    removed (``replicas`` then holds the union, target replicas first)."""

    replicas: tuple[BrokerId, ...]
    adding_replicas: tuple[BrokerId, ...] = ()
    removing_replicas: tuple[BrokerId, ...] = ()


class TopicAssignment(msgspec.Struct, frozen=True, kw_only=True):
    """``/brokers/topics/<t>``: the replica assignment of every partition (version 2).

    A partition whose ``adding_replicas``/``removing_replicas`` are empty is simply absent
    from those JSON maps, as Kafka writes them.
    """

    partitions: dict[int, ReplicaAssignment]

    def encode(self) -> bytes:
        # TopicZNode.encode: Map(version, partitions, adding_replicas, removing_replicas) is a
        # Map4 (insertion order); each inner map is an empty mutable.Map grown one partition
        # at a time, so its keys come out in Scala mutable.HashMap order, not numerically.
        replicas = {str(p): list(a.replicas) for p, a in self.partitions.items()}
        adding = {
            str(p): list(a.adding_replicas) for p, a in self.partitions.items() if a.adding_replicas
        }
        removing = {
            str(p): list(a.removing_replicas)
            for p, a in self.partitions.items()
            if a.removing_replicas
        }
        return _dumps(
            {
                "version": 2,
                "partitions": _scala_mutable_map(replicas),
                "adding_replicas": _scala_mutable_map(adding),
                "removing_replicas": _scala_mutable_map(removing),
            }
        )

    @classmethod
    def decode(cls, data: bytes) -> Self:
        """``TopicZNode.decode``: reads v1 (no adding/removing), v2 and 2.8's v3 (whose
        ``topic_id`` it ignores, like 2.7); adding/removing entries of partitions that are
        not in ``partitions`` are ignored, as Kafka does."""
        obj = _Object.parse(data, "topic assignment")
        replicas = obj.child("partitions")
        adding = obj.child("adding_replicas") if obj.has("adding_replicas") else None
        removing = obj.child("removing_replicas") if obj.has("removing_replicas") else None

        def extra(maps: _Object | None, key: str) -> tuple[BrokerId, ...]:
            if maps is None or key not in maps.fields:
                return ()
            return tuple(BrokerId(b) for b in maps.int32_list(key))

        partitions: dict[int, ReplicaAssignment] = {}
        for key in replicas.fields:
            partition = _parse_java_int(key, "topic assignment: partition", bits=32)
            partitions[partition] = ReplicaAssignment(
                replicas=tuple(BrokerId(b) for b in replicas.int32_list(key)),
                adding_replicas=extra(adding, key),
                removing_replicas=extra(removing, key),
            )
        return cls(partitions=partitions)


# ========================================== /brokers/topics/<t>/partitions/<p>/state


_PARTITION_STATE_KEYS: Final = ("version", "leader", "leader_epoch", "controller_epoch", "isr")


_Int32: TypeAlias = Annotated[int, msgspec.Meta(ge=-(1 << 31), lt=1 << 31)]


class _PartitionStateWire(msgspec.Struct):
    """The fields of a state znode ``LeaderIsrAndControllerEpoch.decode`` reads, typed as
    its strict reading requires them (JSON integers within 32 bits)."""

    leader: _Int32
    leader_epoch: _Int32
    isr: tuple[_Int32, ...]
    controller_epoch: _Int32


_PARTITION_STATE_DECODER: Final = msgspec.json.Decoder(_PartitionStateWire)

_PARTITION_STATE_FORMAT: Final = (
    "{{"
    + ",".join(f'"{key}":{{{key}}}' for key in jvm.scala_immutable_order(_PARTITION_STATE_KEYS))
    + "}}"
)
"""A state znode's JSON with its values left to ``str.format``, its keys in the order of
Kafka's five-entry immutable Map."""


class LeaderIsrAndControllerEpoch(msgspec.Struct, frozen=True, kw_only=True):
    """A partition's state znode: its leader (``NO_LEADER`` = -1 for none), leader epoch,
    ISR, and the epoch of the controller that wrote it. The znode's zkVersion, which Kafka
    pairs with it, comes from the ``Stat``, not from the data."""

    leader: BrokerId
    leader_epoch: LeaderEpoch
    isr: tuple[BrokerId, ...]
    controller_epoch: ControllerEpoch

    def encode(self) -> bytes:
        # TopicPartitionStateZNode.encode: a five-entry immutable Map, i.e. a CHAMP HashMap.
        # Every value is an int or a list of ints, so the JSON is formatted directly (the
        # same bytes ``_dumps`` writes): one is written per partition state change, its
        # keys in the one order the map's hash gives them (``_PARTITION_STATE_FORMAT``).
        isr = ",".join([str(int(b)) for b in self.isr])
        return _PARTITION_STATE_FORMAT.format(
            version=1,
            leader=int(self.leader),
            leader_epoch=int(self.leader_epoch),
            controller_epoch=int(self.controller_epoch),
            isr=f"[{isr}]",
        ).encode()

    @classmethod
    def decode(cls, data: bytes) -> Self:
        # A new controller reads every partition's state: a well-formed one is decoded
        # by msgspec against the typed shape in one call; anything it refuses goes the
        # strict way below, which names the offending field.
        try:
            wire = _PARTITION_STATE_DECODER.decode(data)
        except (msgspec.DecodeError, UnicodeDecodeError):
            pass
        else:
            return cls(
                leader=BrokerId(wire.leader),
                leader_epoch=LeaderEpoch(wire.leader_epoch),
                isr=cast("tuple[BrokerId, ...]", wire.isr),  # BrokerId is int at run time
                controller_epoch=ControllerEpoch(wire.controller_epoch),
            )
        obj = _Object.parse(data, "partition state")
        return cls(
            leader=BrokerId(obj.int32("leader")),
            leader_epoch=LeaderEpoch(obj.int32("leader_epoch")),
            isr=tuple(BrokerId(b) for b in obj.int32_list("isr")),
            controller_epoch=ControllerEpoch(obj.int32("controller_epoch")),
        )


# ======================================================================= /config/<type>/<name>


class EntityConfig(msgspec.Struct, frozen=True, kw_only=True):
    """``/config/<type>/<name>`` (e.g. ``/config/topics/<t>``): the entity's overrides.

    ``config`` is Kafka's ``java.util.Properties``: its insertion order (the request's order
    at creation; the previous znode's order, then new keys, on alteration) decides the key
    order Kafka writes, so keep it. Equality ignores the order, like ``Properties.equals``.
    """

    config: dict[str, str] = {}

    def encode(self, *, jdk: Jdk = Jdk.JDK11) -> bytes:
        # ConfigEntityZNode.encode: Map(version, config) is a Map2 (insertion order); the
        # config is a Properties, iterated as the JDK iterates it (see Jdk).
        keys = list(self.config)
        order = (
            jvm.java_hashtable_order(keys)
            if jdk is Jdk.JDK8
            else jvm.java_concurrent_hash_map_order(keys)
        )
        return _dumps({"version": 1, "config": {key: self.config[key] for key in order}})

    @classmethod
    def decode(cls, data: bytes) -> Self:
        """Every value must be a string (Kafka's ``to[String]``)."""
        config = _Object.parse(data, "entity config").child("config")
        return cls(config={key: config.string(key) for key in config.fields})


class ConfigChangeNotification(msgspec.Struct, frozen=True, kw_only=True):
    """``/config/changes/config_change_<seq>``: tells every broker to re-read one entity's
    config. ``entity_path`` is ``<type>/<sanitised name>``, e.g. ``topics/orders``."""

    entity_path: str

    @classmethod
    def for_entity(cls, entity_type: ConfigType, name: str) -> Self:
        return cls(entity_path=f"{entity_type.value}/{name}")

    def encode(self) -> bytes:
        # ConfigEntityChangeNotificationSequenceZNode.encode: Map2, insertion order.
        return _dumps({"version": 2, "entity_path": self.entity_path})

    @classmethod
    def decode(cls, data: bytes) -> Self:
        """Version 2, or version 1 (``entity_type`` topics/clients + ``entity_name``),
        as ``DynamicConfigManager`` reads them."""
        obj = _Object.parse(data, "config change notification")
        version = obj.int32("version")
        if version == 2:
            return cls(entity_path=obj.string("entity_path"))
        if version == 1:
            entity_type = obj.string("entity_type")
            if entity_type not in (ConfigType.TOPIC, ConfigType.CLIENT):
                raise obj.fail("entity_type", "'topics' or 'clients' in a version 1 notification")
            return cls(entity_path=f"{entity_type}/{obj.string('entity_name')}")
        raise ZkDataError(
            f"config change notification has unsupported version {version}, "
            "supported versions are 1 and 2"
        )


# ====================================================== /admin/reassign_partitions etc.


class PartitionReplicas(msgspec.Struct, frozen=True, kw_only=True):
    """One partition's target replicas in a legacy ZooKeeper-triggered reassignment."""

    topic: TopicName
    partition: int
    replicas: tuple[BrokerId, ...]


class PartitionReassignment(msgspec.Struct, frozen=True, kw_only=True):
    """``/admin/reassign_partitions`` (deprecated since 2.4, still honoured by the 2.7
    controller, which rewrites it as partitions complete)."""

    partitions: tuple[PartitionReplicas, ...]

    def as_dict(self) -> dict[TopicPartition, tuple[BrokerId, ...]]:
        """By partition; a partition listed twice keeps its last entry, as Kafka's ``toMap``."""
        return {TopicPartition(p.topic, p.partition): p.replicas for p in self.partitions}

    def encode(self) -> bytes:
        # LegacyPartitionAssignment(version, partitions) and ReplicaAssignment(topic,
        # partition, replicas) are Jackson-bound case classes: declaration order.
        return _dumps(
            {
                "version": 1,
                "partitions": [
                    {"topic": p.topic, "partition": p.partition, "replicas": list(p.replicas)}
                    for p in self.partitions
                ],
            }
        )

    @classmethod
    def decode(cls, data: bytes) -> Self:
        obj = _Object.parse(data, "partition reassignment")
        return cls(
            partitions=tuple(
                PartitionReplicas(
                    topic=TopicName(entry.string("topic")),
                    partition=entry.int32("partition"),
                    replicas=tuple(BrokerId(b) for b in entry.int32_list("replicas")),
                )
                for entry in obj.children("partitions")
            )
        )


def _encode_partition_list(partitions: Iterable[TopicPartition]) -> bytes:
    # PreferredReplicaElectionZNode / IsrChangeNotificationSequenceZNode: Map2(version,
    # partitions), each partition a Map2(topic, partition): insertion order throughout.
    return _dumps(
        {
            "version": 1,
            "partitions": [{"topic": tp.topic, "partition": tp.partition} for tp in partitions],
        }
    )


def _decode_partition_list(data: bytes, what: str) -> tuple[TopicPartition, ...]:
    obj = _Object.parse(data, what)
    return tuple(
        TopicPartition(TopicName(entry.string("topic")), entry.int32("partition"))
        for entry in obj.children("partitions")
    )


class PreferredReplicaElection(msgspec.Struct, frozen=True, kw_only=True):
    """``/admin/preferred_replica_election``: partitions whose preferred replica should
    lead (legacy tool). Kafka treats the list as a set."""

    partitions: tuple[TopicPartition, ...]

    def encode(self) -> bytes:
        return _encode_partition_list(self.partitions)

    @classmethod
    def decode(cls, data: bytes) -> Self:
        return cls(partitions=_decode_partition_list(data, "preferred replica election"))


class IsrChangeNotification(msgspec.Struct, frozen=True, kw_only=True):
    """``/isr_change_notification/isr_change_<seq>``: partitions whose ISR a leader changed
    (only written with IBP < 2.7-IV2, where leaders update the state znode themselves)."""

    partitions: tuple[TopicPartition, ...]

    def encode(self) -> bytes:
        return _encode_partition_list(self.partitions)

    @classmethod
    def decode(cls, data: bytes) -> Self:
        return cls(partitions=_decode_partition_list(data, "ISR change notification"))


# ================================================== /log_dir_event_notification, /cluster


LOG_DIR_FAILURE_EVENT: Final = 1


class LogDirEvent(msgspec.Struct, frozen=True, kw_only=True):
    """``/log_dir_event_notification/log_dir_event_<seq>``: a broker lost a log directory."""

    broker_id: BrokerId
    event: int = LOG_DIR_FAILURE_EVENT

    def encode(self) -> bytes:
        # LogDirEventNotificationSequenceZNode.encode: Map3, insertion order.
        return _dumps({"version": 1, "broker": self.broker_id, "event": self.event})

    @classmethod
    def decode(cls, data: bytes) -> Self:
        obj = _Object.parse(data, "log dir event")
        event = obj.int32("event") if obj.has("event") else LOG_DIR_FAILURE_EVENT
        return cls(broker_id=BrokerId(obj.int32("broker")), event=event)


class ClusterId(msgspec.Struct, frozen=True, kw_only=True):
    """``/cluster/id``: the cluster id (22 characters of URL-safe base64 of a UUID), written
    once by the first broker. Its ``version`` is the *string* ``"1"``."""

    cluster_id: str

    def encode(self) -> bytes:
        # ClusterIdZNode.toJson: Map2(version -> "1", id), insertion order.
        return _dumps({"version": "1", "id": self.cluster_id})

    @classmethod
    def decode(cls, data: bytes) -> Self:
        """Only ``id`` is read, as ``ClusterIdZNode.fromJson`` does."""
        return cls(cluster_id=_Object.parse(data, CLUSTER_ID_PATH).string("id"))


# ============================================================ /latest_producer_id_block


PRODUCER_ID_BLOCK_SIZE: Final = 1000
"""``ProducerIdManager.PidBlockSize``: the producer ids a broker reserves at a time."""


class ProducerIdBlock(msgspec.Struct, frozen=True, kw_only=True):
    """``/latest_producer_id_block``: the last block of producer ids a broker reserved,
    bounds inclusive (``ProducerIdManager``); the bounds are written as decimal strings."""

    broker: int
    block_start: int
    block_end: int

    def encode(self) -> bytes:
        # ProducerIdManager.generateProducerIdBlockJson: version, broker, start, end.
        return _dumps(
            {
                "version": 1,
                "broker": self.broker,
                "block_start": str(self.block_start),
                "block_end": str(self.block_end),
            }
        )

    @classmethod
    def decode(cls, data: bytes) -> Self:
        node = _Object.parse(data, LATEST_PRODUCER_ID_BLOCK_PATH)
        try:
            start, end = int(node.string("block_start")), int(node.string("block_end"))
        except ValueError:
            raise node.fail("block_start", "decimal strings") from None
        return cls(broker=node.int32("broker"), block_start=start, block_end=end)


# ============================================================================= /feature


class FeatureStatus(IntEnum):
    """``FeatureZNodeStatus``: whether feature versioning (KIP-584) is in force; the
    controller writes ENABLED when the IBP is at least 2.7-IV0."""

    DISABLED = 0
    ENABLED = 1


class FeatureNode(msgspec.Struct, frozen=True, kw_only=True):
    """``/feature``: the cluster-wide finalised features, written by the controller."""

    status: FeatureStatus
    features: dict[str, FinalizedVersionRange] = {}

    def encode(self) -> bytes:
        # FeatureZNode.encode: collection.mutable.Map of three keys (a table of 8).
        fields: dict[str, _Json] = {
            "version": 1,
            "status": int(self.status),
            "features": _features_json(
                {n: (r.min_version_level, r.max_version_level) for n, r in self.features.items()},
                _FINALIZED_LABELS,
            ),
        }
        return _dumps(_scala_mutable_map(fields, initial_capacity=_scala_map_capacity(3)))

    @classmethod
    def decode(cls, data: bytes) -> Self:
        """``FeatureZNode.decode``: version >= 1, a features map and a known status are
        required."""
        obj = _Object.parse(data, FEATURE_PATH)
        obj.version(at_least=1)
        features = _read_features(obj, "features", _FINALIZED_LABELS)
        status = obj.int32("status")
        if status not in FeatureStatus._value2member_map_:
            raise obj.fail("status", "0 (disabled) or 1 (enabled)")
        return cls(
            status=FeatureStatus(status),
            features={
                name: FinalizedVersionRange(min_version_level=low, max_version_level=high)
                for name, (low, high) in features.items()
            },
        )
