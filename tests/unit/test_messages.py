"""Every typed message of ``protocol`` survives the frame codec and stays an immutable value.

The strategies are built from each struct's own field types (``msgspec.inspect``), so a
message type added to any ``protocol`` module is covered without touching this file.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import msgspec
import msgspec.inspect as mi
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import protocol
from protocol.base import ActorRef, Message
from protocol.codec import CODEC_VERSION, decode_envelope, encode_envelope, message_types
from protocol.control import (
    EPOCH_DURING_DELETE,
    LEADER_DURING_DELETE,
    NO_EPOCH,
    NO_LEADER,
    ApiKey,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LiveLeader,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaResponse,
    TopicPartition,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from protocol.envelope import Envelope, EnvelopeKind
from protocol.errors import ErrorCode, FrameError
from protocol.ids import BrokerEpoch, BrokerId, ControllerEpoch, LeaderEpoch, TopicName

# Import every protocol module so that message_types() sees all their Message classes.
for _module in pkgutil.iter_modules(protocol.__path__):
    importlib.import_module(f"{protocol.__name__}.{_module.name}")

PROTOCOL_MESSAGES: tuple[type[Message], ...] = tuple(
    cls for cls in message_types() if cls.__module__.startswith("protocol.")
)

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)

_struct_strategies: dict[type[Any], st.SearchStrategy[Any]] = {}


def strategy_for(t: mi.Type) -> st.SearchStrategy[Any]:
    """A strategy for any value of the msgspec type ``t``; fails loudly on a type it does
    not know, so that a new field type is noticed here rather than silently skipped."""
    if isinstance(t, mi.IntType):
        low = t.ge if t.ge is not None else (t.gt + 1 if t.gt is not None else -(2**63))
        high = t.le if t.le is not None else (t.lt - 1 if t.lt is not None else 2**63 - 1)
        return st.integers(min_value=low, max_value=high)
    if isinstance(t, mi.StrType):
        if t.pattern is not None:
            return st.from_regex(t.pattern)
        return st.text(min_size=t.min_length or 0, max_size=t.max_length or 16)
    if isinstance(t, mi.BoolType):
        return st.booleans()
    if isinstance(t, mi.FloatType):
        return st.floats(allow_nan=False, allow_infinity=False)
    if isinstance(t, mi.BytesType):
        return st.binary(max_size=32)
    if isinstance(t, mi.NoneType):
        return st.none()
    if isinstance(t, mi.UUIDType):
        return st.uuids()
    if isinstance(t, mi.EnumType):
        return st.sampled_from(list(t.cls))
    if isinstance(t, mi.LiteralType):
        return st.sampled_from(t.values)
    if isinstance(t, mi.UnionType):
        return st.one_of(*(strategy_for(member) for member in t.types))
    if isinstance(t, mi.VarTupleType):
        return st.lists(strategy_for(t.item_type), max_size=4).map(tuple)
    if isinstance(t, mi.TupleType):
        return st.tuples(*(strategy_for(item) for item in t.item_types))
    if isinstance(t, mi.FrozenSetType):
        return st.frozensets(strategy_for(t.item_type), max_size=4)
    if isinstance(t, mi.StructType):
        if t.cls not in _struct_strategies:
            _struct_strategies[t.cls] = st.deferred(lambda: _builds(t))
        return _struct_strategies[t.cls]
    raise NotImplementedError(f"no strategy for {t!r}: teach strategy_for about it")


def _builds(t: mi.StructType) -> st.SearchStrategy[Any]:
    fields = {f.name: strategy_for(f.type) for f in t.fields}
    return st.builds(t.cls, **fields)


def message_strategy(cls: type[Message]) -> st.SearchStrategy[Any]:
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    return strategy_for(info)


actor_refs = st.builds(ActorRef, node=st.text(max_size=8), name=st.text(max_size=8))


def _ids(cls: type[Message]) -> str:
    return cls.__name__


def _walk(t: mi.Type, seen: set[type[Any]]) -> list[mi.Type]:
    """``t`` and every type nested in it."""
    out = [t]
    if isinstance(t, mi.StructType):
        if t.cls in seen:
            return out
        seen.add(t.cls)
        for f in t.fields:
            out += _walk(f.type, seen)
    elif isinstance(t, mi.UnionType):
        for member in t.types:
            out += _walk(member, seen)
    elif isinstance(t, mi.VarTupleType | mi.FrozenSetType):
        out += _walk(t.item_type, seen)
    elif isinstance(t, mi.TupleType):
        for item in t.item_types:
            out += _walk(item, seen)
    return out


# ------------------------------------------------------------------------- coverage


def test_the_round_trip_covers_every_control_and_store_message() -> None:
    """The generic round trip sees the control-plane and store messages, not just some."""
    names = {cls.__name__ for cls in PROTOCOL_MESSAGES}
    expected = {
        "LeaderAndIsrRequest",
        "LeaderAndIsrResponse",
        "UpdateMetadataRequest",
        "UpdateMetadataResponse",
        "StopReplicaRequest",
        "StopReplicaResponse",
        "ControlledShutdownRequest",
        "ControlledShutdownResponse",
        "ErrorReply",
        "CreateOp",
        "WatchEvent",
    }
    assert expected <= names


# ---------------------------------------------------------------------- round trips


@pytest.mark.parametrize("cls", PROTOCOL_MESSAGES, ids=_ids)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_message_round_trips_through_the_envelope_codec(
    cls: type[Message], data: st.DataObject
) -> None:
    """Any value of any protocol message decodes from its frame equal to what was sent."""
    message = data.draw(message_strategy(cls))
    envelope = Envelope(
        src=data.draw(actor_refs),
        dst=data.draw(actor_refs),
        corr=data.draw(st.integers(min_value=0, max_value=2**63 - 1)),
        kind=data.draw(st.sampled_from(EnvelopeKind)),
        payload=message,
    )
    decoded = decode_envelope(encode_envelope(envelope))
    assert decoded == envelope
    assert type(decoded.payload) is cls


# ---------------------------------------------------------------- immutable values


@pytest.mark.parametrize("cls", PROTOCOL_MESSAGES, ids=_ids)
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_messages_are_immutable(cls: type[Message], data: st.DataObject) -> None:
    """Assigning to any field of a message, or adding an attribute, raises."""
    message = data.draw(message_strategy(cls))
    for field in msgspec.structs.fields(cls):
        with pytest.raises(AttributeError):
            setattr(message, field.name, getattr(message, field.name))
    with pytest.raises(AttributeError):
        message.not_a_field = 1


@pytest.mark.parametrize("cls", PROTOCOL_MESSAGES, ids=_ids)
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_messages_are_hashable_values(cls: type[Message], data: st.DataObject) -> None:
    """A message hashes, and an equal copy (rebuilt from its frame) hashes the same."""
    message = data.draw(message_strategy(cls))
    copy = decode_envelope(
        encode_envelope(
            Envelope(
                src=ActorRef("a", "b"),
                dst=ActorRef("c", "d"),
                corr=0,
                kind=EnvelopeKind.TELL,
                payload=message,
            )
        )
    ).payload
    assert copy == message
    assert hash(copy) == hash(message)
    assert {message, copy} == {message}


@pytest.mark.parametrize("cls", PROTOCOL_MESSAGES, ids=_ids)
def test_message_fields_hold_no_mutable_containers(cls: type[Message]) -> None:
    """Sequences in messages are tuples: no list, dict, set or bytearray anywhere inside."""
    mutable = (mi.ListType, mi.DictType, mi.SetType, mi.ByteArrayType, mi.MemoryViewType)
    offenders = [t for t in _walk(mi.type_info(cls), set()) if isinstance(t, mutable)]
    assert offenders == []


# ------------------------------------------------------------------- failure paths


def _frame_with_payload(payload: object) -> bytes:
    """A frame body whose payload is ``payload`` as raw msgpack, bypassing the typed encoder."""
    ref = {"node": "n", "name": "a"}
    return msgspec.msgpack.encode([CODEC_VERSION, ref, ref, 7, "ask", payload])


def _stop_replica() -> StopReplicaRequest:
    return StopReplicaRequest(
        controller_id=BrokerId(1),
        controller_epoch=ControllerEpoch(3),
        broker_epoch=BrokerEpoch(42),
        partitions=(
            StopReplicaPartitionState(topic=TopicName("t"), partition=0, delete_partition=True),
            StopReplicaPartitionState(
                topic=TopicName("t"),
                partition=1,
                leader_epoch=EPOCH_DURING_DELETE,
                delete_partition=False,
            ),
        ),
    )


def test_a_well_formed_hand_built_frame_decodes() -> None:
    """The hand-built frames of the failure tests are valid when nothing is broken."""
    body = _frame_with_payload(msgspec.to_builtins(_stop_replica()))
    assert decode_envelope(body).payload == _stop_replica()


@pytest.mark.parametrize(
    ("mutate", "why"),
    [
        (lambda p: p.update(controller_epoch="3"), "a string where an int32 belongs"),
        (lambda p: p.pop("broker_epoch"), "a missing required field"),
        (lambda p: p["partitions"][0].update(delete_partition=1), "an int where a bool belongs"),
        (lambda p: p["partitions"][0].pop("topic"), "a nested struct missing a field"),
        (lambda p: p.update(type="NoSuchMessage"), "an unknown message tag"),
        (lambda p: p.update(partitions={"t": 0}), "a map where a tuple belongs"),
    ],
)
def test_a_malformed_payload_is_a_frame_error(mutate: Any, why: str) -> None:
    """A payload with a wrong type, a missing field or an unknown tag is refused whole."""
    payload = msgspec.to_builtins(_stop_replica())
    mutate(payload)
    with pytest.raises(FrameError):
        decode_envelope(_frame_with_payload(payload))


def test_an_unknown_error_code_is_a_frame_error() -> None:
    """Error codes decode into ErrorCode only: a number Kafka does not define is refused."""
    payload = msgspec.to_builtins(UpdateMetadataResponse(error_code=ErrorCode.NONE))
    payload["error_code"] = 30000
    with pytest.raises(FrameError):
        decode_envelope(_frame_with_payload(payload))


# -------------------------------------------------------- Kafka's numbers and shapes


def test_api_keys_and_sentinels_have_kafkas_numbers() -> None:
    """API keys 4-7 and the LeaderAndIsr sentinels carry Kafka's values."""
    keys = [LeaderAndIsrRequest.api_key, StopReplicaRequest.api_key]
    keys += [UpdateMetadataRequest.api_key, ControlledShutdownRequest.api_key]
    assert [int(key) for key in keys] == [4, 5, 6, 7]
    assert LeaderAndIsrResponse.api_key is ApiKey.LEADER_AND_ISR
    assert StopReplicaResponse.api_key is ApiKey.STOP_REPLICA
    assert UpdateMetadataResponse.api_key is ApiKey.UPDATE_METADATA
    assert ControlledShutdownResponse.api_key is ApiKey.CONTROLLED_SHUTDOWN
    assert (LeaderAndIsrRequest.api_version, StopReplicaRequest.api_version) == (4, 3)
    assert (UpdateMetadataRequest.api_version, ControlledShutdownRequest.api_version) == (6, 3)
    assert (NO_LEADER, LEADER_DURING_DELETE, NO_EPOCH, EPOCH_DURING_DELETE) == (-1, -2, -1, -2)


def test_api_metadata_is_not_a_field_on_the_wire() -> None:
    """``api_key``/``api_version`` are class constants, not encoded fields."""
    names = {f.name for f in msgspec.structs.fields(LeaderAndIsrRequest)}
    assert "api_key" not in names
    assert "api_version" not in names


def test_stop_replica_leader_epoch_defaults_to_no_epoch() -> None:
    """A StopReplica partition without a known leader epoch is sent with -1."""
    state = StopReplicaPartitionState(topic=TopicName("t"), partition=2, delete_partition=False)
    assert state.leader_epoch == NO_EPOCH
    assert state.topic_partition == TopicPartition(TopicName("t"), 2)


def test_topic_partitions_order_by_topic_then_partition() -> None:
    """TopicPartition sorts by topic name, then numerically by partition, and prints as t-p."""
    tps = [
        TopicPartition(TopicName("b"), 0),
        TopicPartition(TopicName("a"), 10),
        TopicPartition(TopicName("a"), 2),
    ]
    assert sorted(tps) == [tps[2], tps[1], tps[0]]
    assert str(tps[1]) == "a-10"
    assert len({TopicPartition(TopicName("a"), 1), TopicPartition(TopicName("a"), 1)}) == 1


def test_leader_and_isr_request_keeps_every_spec_field() -> None:
    """A LeaderAndIsr partition state carries what §3.5 lists, with is_new defaulting false."""
    state = LeaderAndIsrPartitionState(
        topic=TopicName("t"),
        partition=0,
        controller_epoch=ControllerEpoch(1),
        leader=BrokerId(1),
        leader_epoch=LeaderEpoch(0),
        isr=(BrokerId(1), BrokerId(2)),
        zk_version=0,
        replicas=(BrokerId(1), BrokerId(2)),
    )
    request = LeaderAndIsrRequest(
        controller_id=BrokerId(1),
        controller_epoch=ControllerEpoch(1),
        broker_epoch=BrokerEpoch(25),
        partition_states=(state,),
        live_leaders=(LiveLeader(broker_id=BrokerId(1), host="localhost", port=9092),),
    )
    assert (state.is_new, state.adding_replicas, state.removing_replicas) == (False, (), ())
    assert request.partition_states[0].topic_partition == TopicPartition(TopicName("t"), 0)
    response = LeaderAndIsrResponse(error_code=ErrorCode.STALE_CONTROLLER_EPOCH)
    assert response.partition_errors == ()
    assert StopReplicaResponse(error_code=ErrorCode.NONE).partition_errors == ()
