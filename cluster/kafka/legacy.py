"""The schemas of API versions Kafka 2.7.2 serves that the codec no longer has.

The codec (kio) is generated from Kafka 4's message schemas, which dropped the oldest
versions of several APIs. Each missing version here is the codec's oldest version of the
same API without the fields that came later (the "versions" of each field in Kafka
2.7.2's ``clients/src/main/resources/common/message/*.json``); DescribeConfigs v0 also
has ``is_default`` where later versions have ``config_source``. None of these versions is
flexible, so their header versions are those of the entities they derive from (request
header v1, response header v0).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, Final

from kio.index import load_request_schema, load_response_schema
from kio.static.primitive import i16, i32, i64

_CLASS_VARS = ("__type__", "__flexible__", "__api_key__", "__header_schema__")


def _entity_of(field_type: Any) -> tuple[Any, Any] | None:
    """For a field holding entities: (the entity class, a function rebuilding the field's
    type around another entity class); None for a field of primitives."""
    if typing.get_origin(field_type) is tuple:
        inner = typing.get_args(field_type)[0]
        if dataclasses.is_dataclass(inner):
            return inner, lambda cls: tuple[cls, ...]  # type: ignore[valid-type]
        return None
    if isinstance(field_type, types.UnionType):
        args = [a for a in typing.get_args(field_type) if a is not type(None)]
        if len(args) == 1 and _entity_of(args[0]) is not None:
            entity, rebuild = _entity_of(args[0])  # type: ignore[misc]
            return entity, lambda cls: rebuild(cls) | None
        return None
    if dataclasses.is_dataclass(field_type):
        return field_type, lambda cls: cls
    return None


def derive(
    cls: Any,
    version: int,
    *,
    drop: frozenset[str] = frozenset(),
    replace: Mapping[str, tuple[str, Any, str]] | None = None,
    add: Mapping[str, tuple[Any, str, Any]] | None = None,
) -> Any:
    """``cls`` as the entity of an older ``version``: without the fields named in ``drop``
    (dotted paths into nested entities, e.g. ``topics.error_message``), with each field
    of ``replace`` (a dotted path -> name, Python type, Kafka type) put in its place, and
    each field of ``add`` (a dotted path -> Python type, Kafka type, default) added after
    its entity's other fields (a field only the old version has)."""
    replace = replace or {}
    add = add or {}
    fields: list[tuple[str, Any, dataclasses.Field[Any]]] = []
    for f in dataclasses.fields(cls):
        if f.name in drop:
            continue
        if f.name in replace:
            name, py_type, kafka_type = replace[f.name]
            fields.append((name, py_type, dataclasses.field(metadata={"kafka_type": kafka_type})))
            continue
        field_type: Any = f.type
        entity = _entity_of(field_type)
        prefix = f.name + "."
        inner_drop = frozenset(d[len(prefix) :] for d in drop if d.startswith(prefix))
        inner_replace = {k[len(prefix) :]: v for k, v in replace.items() if k.startswith(prefix)}
        inner_add = {k[len(prefix) :]: v for k, v in add.items() if k.startswith(prefix)}
        if entity is not None and (inner_drop or inner_replace or inner_add):
            nested, rebuild = entity
            field_type = rebuild(
                derive(nested, version, drop=inner_drop, replace=inner_replace, add=inner_add)
            )
        kwargs: dict[str, Any] = {"metadata": f.metadata}
        if f.default is not dataclasses.MISSING:
            kwargs["default"] = f.default
        if f.default_factory is not dataclasses.MISSING:
            kwargs["default_factory"] = f.default_factory
        fields.append((f.name, field_type, dataclasses.field(**kwargs)))
    for name, (py_type, kafka_type, default) in add.items():
        if "." not in name:
            meta = {"kafka_type": kafka_type}
            fields.append((name, py_type, dataclasses.field(metadata=meta, default=default)))
    namespace = {name: getattr(cls, name) for name in _CLASS_VARS}
    namespace["__version__"] = i16(version)
    namespace["__module__"] = __name__
    return dataclasses.make_dataclass(
        cls.__name__,
        fields,
        namespace=namespace,
        frozen=True,
        slots=True,
        kw_only=True,
    )


def _request(
    api_key: int,
    base: int,
    version: int,
    drop: frozenset[str] = frozenset(),
    add: Mapping[str, tuple[Any, str, Any]] | None = None,
) -> Any:
    return derive(load_request_schema(api_key, base), version, drop=drop, add=add)


def _response(
    api_key: int,
    base: int,
    version: int,
    drop: frozenset[str] = frozenset(),
    replace: Mapping[str, tuple[str, Any, str]] | None = None,
) -> Any:
    return derive(load_response_schema(api_key, base), version, drop=drop, replace=replace)


_THROTTLE = frozenset({"throttle_time"})

_PRODUCE_V3 = frozenset({"transactional_id"})
_FETCH_V4 = frozenset({"isolation_level"})
_FETCH_V4_RESPONSE = frozenset(
    {"responses.partitions.last_stable_offset", "responses.partitions.aborted_transactions"}
)

REQUESTS: Final[Mapping[tuple[int, int], Any]] = types.MappingProxyType({
    # Produce: v3 adds transactional_id (v0-v2 carry message formats v0/v1)
    (0, 0): _request(0, 3, 0, _PRODUCE_V3),
    (0, 1): _request(0, 3, 1, _PRODUCE_V3),
    (0, 2): _request(0, 3, 2, _PRODUCE_V3),
    # Fetch: v3 adds max_bytes, v4 isolation_level
    (1, 0): _request(1, 4, 0, _FETCH_V4 | {"max_bytes"}),
    (1, 1): _request(1, 4, 1, _FETCH_V4 | {"max_bytes"}),
    (1, 2): _request(1, 4, 2, _FETCH_V4 | {"max_bytes"}),
    (1, 3): _request(1, 4, 3, _FETCH_V4),
    # ListOffsets: v0 has max_num_offsets (default 1), v1 drops it
    (2, 0): _request(2, 1, 0, add={"topics.partitions.max_num_offsets": (i32, "int32", i32(1))}),
    # CreateTopics: v1 adds validate_only
    (19, 0): _request(19, 2, 0, frozenset({"validate_only"})),
    (19, 1): _request(19, 2, 1),
    # DeleteTopics: versions 0-3 are the same
    (20, 0): _request(20, 1, 0),
    # OffsetForLeaderEpoch: v1 is v0; v2 adds current_leader_epoch
    (23, 0): _request(23, 2, 0, frozenset({"topics.partitions.current_leader_epoch"})),
    (23, 1): _request(23, 2, 1, frozenset({"topics.partitions.current_leader_epoch"})),
    # DescribeConfigs: v1 adds include_synonyms
    (32, 0): _request(32, 1, 0, frozenset({"include_synonyms"})),
    # DescribeLogDirs: v1 is v0 (only the throttling behaviour changed)
    (35, 0): _request(35, 1, 0),
})  # fmt: skip
"""(API key, version) -> the request schema of a version the codec lacks."""

RESPONSES: Final[Mapping[tuple[int, int], Any]] = types.MappingProxyType({
    # Produce: v1 adds throttle_time, v2 log_append_time; v3 is v2
    (0, 0): _response(0, 3, 0, _THROTTLE | {"responses.partition_responses.log_append_time"}),
    (0, 1): _response(0, 3, 1, frozenset({"responses.partition_responses.log_append_time"})),
    (0, 2): _response(0, 3, 2),
    # Fetch: v1 adds throttle_time, v4 last_stable_offset and aborted_transactions
    (1, 0): _response(1, 4, 0, _THROTTLE | _FETCH_V4_RESPONSE),
    (1, 1): _response(1, 4, 1, _FETCH_V4_RESPONSE),
    (1, 2): _response(1, 4, 2, _FETCH_V4_RESPONSE),
    (1, 3): _response(1, 4, 3, _FETCH_V4_RESPONSE),
    # ListOffsets: v0 answers a list of offsets where v1 has one timestamp and offset
    (2, 0): _response(
        2,
        1,
        0,
        frozenset({"topics.partitions.offset"}),
        {"topics.partitions.timestamp": ("old_style_offsets", tuple[i64, ...], "int64")},
    ),
    # CreateTopics: v1 adds error_message, v2 throttle_time
    (19, 0): _response(19, 2, 0, _THROTTLE | {"topics.error_message"}),
    (19, 1): _response(19, 2, 1, _THROTTLE),
    # DeleteTopics: v1 adds throttle_time
    (20, 0): _response(20, 1, 0, _THROTTLE),
    # OffsetForLeaderEpoch: v1 adds leader_epoch, v2 throttle_time
    (23, 0): _response(23, 2, 0, _THROTTLE | {"topics.partitions.leader_epoch"}),
    (23, 1): _response(23, 2, 1, _THROTTLE),
    # DescribeConfigs: v1 has config_source and synonyms where v0 has is_default
    (32, 0): _response(
        32,
        1,
        0,
        frozenset({"results.configs.synonyms"}),
        {"results.configs.config_source": ("is_default", bool, "bool")},
    ),
    # DescribeLogDirs: v1 is v0
    (35, 0): _response(35, 1, 0),
})  # fmt: skip
"""(API key, version) -> the response schema of a version the codec lacks."""


def legacy_versions(api_key: int) -> tuple[int, ...]:
    """The versions of ``api_key`` this module adds."""
    return tuple(sorted(v for k, v in REQUESTS if k == api_key))
