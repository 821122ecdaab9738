"""Kafka's ZooKeeper operations (``KafkaZkClient``) over a ``StoreSession``.

Typed reads and writes of the znodes of Kafka's ``ZkData``: broker registration with its
epoch, the controller election multi-op, fenced controller writes (every write checks the
``/controller_epoch`` version, as ``KafkaZkClient.wrapRequestWithControllerEpochCheck``
does), topic assignments, partition states and topic configs. Payload formats live in
``protocol.zkdata``; this module only does the I/O.
"""

from __future__ import annotations

import base64
import contextlib
import random
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from actors.zk.store import StoreSession
from protocol import zkdata
from protocol.control import TopicPartition
from protocol.errors import (
    BadVersionError,
    KemuError,
    NodeExistsError,
    NoNodeError,
    StoreError,
    TransactionFailedError,
    ZkDataError,
)
from protocol.ids import BrokerId, ControllerEpoch, TopicName
from protocol.store import CheckOp, CreateOp, DeleteOp, OpResult, SetDataOp, SetDataResult, StoreOp


class ControllerMovedError(KemuError):
    """A fenced write failed its ``/controller_epoch`` check: another controller took over.
    The controller resigns when it sees this (Kafka's ``ControllerMovedException``)."""


@dataclass(frozen=True, slots=True)
class RegisteredBroker:
    registration: zkdata.BrokerRegistration
    epoch: int  # czxid of the ephemeral node


@dataclass(frozen=True, slots=True)
class PartitionState:
    state: zkdata.LeaderIsrAndControllerEpoch
    zk_version: int


# ----------------------------------------------------------------------- start-up


async def create_top_level_paths(session: StoreSession) -> None:
    """Make sure every persistent path a broker expects exists (KafkaZkClient)."""
    for path in zkdata.PERSISTENT_PATHS:
        if await session.exists(path) is None:
            with contextlib.suppress(NodeExistsError):  # another broker was first
                await session.create(path, make_parents=True)


async def get_or_create_cluster_id(session: StoreSession, rng: random.Random) -> str:
    """Read ``/cluster/id``, creating it once with a fresh id (Kafka: base64 of a UUID)."""
    try:
        data, _ = await session.get(zkdata.CLUSTER_ID_PATH)
        return zkdata.ClusterId.decode(data).cluster_id
    except NoNodeError:
        pass
    raw = uuid.UUID(int=rng.getrandbits(128)).bytes
    cluster_id = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    try:
        await session.create(
            zkdata.CLUSTER_ID_PATH,
            zkdata.ClusterId(cluster_id=cluster_id).encode(),
            make_parents=True,
        )
        return cluster_id
    except NodeExistsError:
        data, _ = await session.get(zkdata.CLUSTER_ID_PATH)
        return zkdata.ClusterId.decode(data).cluster_id


async def register_broker(
    session: StoreSession, broker_id: BrokerId, registration: zkdata.BrokerRegistration
) -> int:
    """Create ``/brokers/ids/<id>`` (ephemeral) as Kafka does, a multi-op "create empty +
    set data": return the node's czxid, the broker epoch. A node left by a previous
    session of ours is replaced; one owned by another live session is fatal."""
    path = zkdata.broker_path(broker_id)
    ops: list[StoreOp] = [
        CreateOp(path=path, data=b"", ephemeral=True),
        SetDataOp(path=path, data=registration.encode(), version=0),
    ]
    try:
        results = await session.multi(ops)
    except TransactionFailedError as exc:
        if not isinstance(exc.results[0], NodeExistsError):
            raise
        stat = await session.exists(path)
        if stat is not None and stat.ephemeral_owner == session.session_id:
            return stat.czxid
        owner = stat.ephemeral_owner if stat is not None else 0
        raise registered_elsewhere(path, owner, session.session_id) from None
    set_result = results[1]
    assert isinstance(set_result, SetDataResult)
    return set_result.stat.czxid


def registered_elsewhere(path: str, owner: int, session_id: int) -> NodeExistsError:
    """A broker's registration is another live session's: in the words of Kafka's
    ``KafkaZkClient.CheckedEphemeral.getAfterNodeExists``."""
    return NodeExistsError(
        f"Error while creating ephemeral at {path}, node already exists and owner"
        f" '{owner}' does not match current session '{session_id}'"
    )


async def get_brokers(
    session: StoreSession, *, watch: bool = False
) -> dict[BrokerId, RegisteredBroker]:
    """Every registered broker with its epoch; ``watch`` arms the child watch."""
    brokers: dict[BrokerId, RegisteredBroker] = {}
    for child in await session.children(zkdata.BROKER_IDS_PATH, watch=watch):
        broker_id = zkdata.parse_broker_id(child)
        try:
            data, stat = await session.get(zkdata.broker_path(broker_id))
        except NoNodeError:
            continue  # gone between listing and reading
        brokers[broker_id] = RegisteredBroker(zkdata.BrokerRegistration.decode(data), stat.czxid)
    return dict(sorted(brokers.items()))


# ----------------------------------------------------------------------- controller


async def get_controller_id(session: StoreSession, *, watch: bool = False) -> BrokerId | None:
    """The active controller's id, or None. ``watch`` arms a data watch (fires on create)."""
    if watch:
        stat = await session.exists(zkdata.CONTROLLER_PATH, watch=True)
        if stat is None:
            return None
    try:
        data, _ = await session.get(zkdata.CONTROLLER_PATH, watch=watch)
    except NoNodeError:
        if watch:  # deleted between exists and get: re-arm on the missing node
            await session.exists(zkdata.CONTROLLER_PATH, watch=True)
        return None
    return zkdata.ControllerRegistration.decode(data).broker_id


async def read_or_create_controller_epoch(session: StoreSession) -> tuple[ControllerEpoch, int]:
    """``(epoch, zkVersion)`` of ``/controller_epoch``, created with ``0`` if absent."""
    try:
        data, stat = await session.get(zkdata.CONTROLLER_EPOCH_PATH)
        return zkdata.decode_controller_epoch(data), stat.version
    except NoNodeError:
        pass
    try:
        await session.create(
            zkdata.CONTROLLER_EPOCH_PATH, zkdata.encode_controller_epoch(ControllerEpoch(0))
        )
        return ControllerEpoch(0), 0
    except NodeExistsError:
        data, stat = await session.get(zkdata.CONTROLLER_EPOCH_PATH)
        return zkdata.decode_controller_epoch(data), stat.version


async def try_become_controller(
    session: StoreSession, broker_id: BrokerId, timestamp_ms: int
) -> tuple[ControllerEpoch, int]:
    """The election multi-op (``KafkaZkClient.registerControllerAndIncrementControllerEpoch``):
    create ``/controller`` (ephemeral) and bump ``/controller_epoch`` conditionally. Returns
    ``(new epoch, new epoch zkVersion)``; raises ``ControllerMovedError`` when another
    broker won."""
    epoch, zk_version = await read_or_create_controller_epoch(session)
    new_epoch = ControllerEpoch(epoch + 1)
    registration = zkdata.ControllerRegistration(broker_id=broker_id, timestamp=timestamp_ms)
    ops: list[StoreOp] = [
        CreateOp(path=zkdata.CONTROLLER_PATH, data=registration.encode(), ephemeral=True),
        SetDataOp(
            path=zkdata.CONTROLLER_EPOCH_PATH,
            data=zkdata.encode_controller_epoch(new_epoch),
            version=zk_version,
        ),
    ]
    try:
        results = await session.multi(ops)
    except TransactionFailedError as exc:
        failure = next((r for r in exc.results if r is not None), None)
        if not isinstance(failure, NodeExistsError | BadVersionError):
            raise
        # A retried multi after a connection loss may have succeeded for us already.
        current = await get_controller_id(session)
        data, stat = await session.get(zkdata.CONTROLLER_EPOCH_PATH)
        if current == broker_id and zkdata.decode_controller_epoch(data) == new_epoch:
            return new_epoch, stat.version
        raise ControllerMovedError(f"broker {broker_id} lost the controller election") from None
    return new_epoch, _set_stat_version(results[1])


def _set_stat_version(result: OpResult) -> int:
    assert isinstance(result, SetDataResult)
    return result.stat.version


async def fenced(
    session: StoreSession, epoch_zk_version: int, ops: Sequence[StoreOp]
) -> tuple[OpResult, ...]:
    """Run ``ops`` in one multi-op guarded by the controller-epoch zkVersion
    (``KafkaZkClient.wrapRequestWithControllerEpochCheck``). A failed guard raises
    ``ControllerMovedError``; a failed op raises its own error."""
    guarded: list[StoreOp] = [CheckOp(path=zkdata.CONTROLLER_EPOCH_PATH, version=epoch_zk_version)]
    guarded.extend(ops)
    try:
        results = await session.multi(guarded)
    except TransactionFailedError as exc:
        if exc.results and isinstance(exc.results[0], BadVersionError | NoNodeError):
            raise ControllerMovedError(
                "controller epoch changed: another controller is active"
            ) from None
        failure = next((r for r in exc.results if r is not None), None)
        assert failure is not None
        raise failure from None
    return results[1:]


def _fenced_outcome(
    outcome: tuple[OpResult, ...] | StoreError,
) -> tuple[OpResult, ...] | StoreError:
    """One ``multi_each`` outcome of a guarded multi, as ``fenced`` reports it: the ops'
    results, or the error of the failed op; a failed guard raises ``ControllerMovedError``."""
    if not isinstance(outcome, TransactionFailedError):
        return outcome if isinstance(outcome, StoreError) else outcome[1:]
    if outcome.results and isinstance(outcome.results[0], BadVersionError | NoNodeError):
        raise ControllerMovedError("controller epoch changed: another controller is active")
    failure = next((r for r in outcome.results if r is not None), None)
    assert failure is not None
    return failure


async def fenced_each(
    session: StoreSession, epoch_zk_version: int, batches: Sequence[Sequence[StoreOp]]
) -> list[tuple[OpResult, ...] | StoreError]:
    """``fenced`` for each of ``batches``, pipelined as Kafka sends a batch of guarded
    requests: every batch is its own guarded multi; the outcome of each is its results or
    its error. ``ControllerMovedError`` is raised, in order, at the first failed guard."""
    guard = CheckOp(path=zkdata.CONTROLLER_EPOCH_PATH, version=epoch_zk_version)
    outcomes = await session.multi_each([[guard, *ops] for ops in batches])
    return [_fenced_outcome(outcome) for outcome in outcomes]


async def delete_controller_fenced(session: StoreSession, epoch_zk_version: int) -> None:
    """Resign: remove ``/controller`` if we still hold the epoch."""
    with contextlib.suppress(ControllerMovedError, NoNodeError):
        await fenced(session, epoch_zk_version, [DeleteOp(path=zkdata.CONTROLLER_PATH)])


# ----------------------------------------------------------------------- topics


async def get_all_topics(session: StoreSession, *, watch: bool = False) -> tuple[TopicName, ...]:
    return tuple(TopicName(t) for t in await session.children(zkdata.TOPICS_PATH, watch=watch))


async def get_topic_assignment(
    session: StoreSession, topic: TopicName, *, watch: bool = False
) -> dict[int, zkdata.ReplicaAssignment] | None:
    """A topic's replica assignment (None if the topic znode does not exist)."""
    try:
        if watch:
            await session.exists(zkdata.topic_path(topic), watch=True)
        data, _ = await session.get(zkdata.topic_path(topic), watch=watch)
    except NoNodeError:
        return None
    return dict(sorted(zkdata.TopicAssignment.decode(data).partitions.items()))


async def get_assignments(
    session: StoreSession, topics: Iterable[TopicName]
) -> dict[TopicName, dict[int, zkdata.ReplicaAssignment]]:
    """The assignments of ``topics`` that exist, read as one pipelined batch (Kafka's
    ``getReplicaAssignmentForTopics``); any other failure than a missing topic raises."""
    topics = list(topics)
    outcomes = await session.get_each([(zkdata.topic_path(t), False) for t in topics])
    out: dict[TopicName, dict[int, zkdata.ReplicaAssignment]] = {}
    decoded: dict[bytes, list[tuple[int, zkdata.ReplicaAssignment]]] = {}  # shapes repeat
    for topic, outcome in zip(topics, outcomes, strict=True):
        if isinstance(outcome, NoNodeError):
            continue
        if isinstance(outcome, StoreError):
            raise outcome
        data, _ = outcome
        if data not in decoded:
            decoded[data] = sorted(zkdata.TopicAssignment.decode(data).partitions.items())
        out[topic] = dict(decoded[data])
    return out


async def get_partition_state(session: StoreSession, tp: TopicPartition) -> PartitionState | None:
    try:
        data, stat = await session.get(
            zkdata.partition_state_path(TopicName(tp.topic), tp.partition)
        )
    except NoNodeError:
        return None
    if not data:
        return None
    return PartitionState(zkdata.LeaderIsrAndControllerEpoch.decode(data), stat.version)


async def get_partition_states(
    session: StoreSession, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, PartitionState]:
    """The states of ``partitions`` that have one, read as one pipelined batch (Kafka's
    ``getTopicPartitionStatesRaw``); any other failure than a missing znode raises."""
    partitions = list(partitions)
    path = zkdata.partition_state_path
    outcomes = await session.get_each([(path(tp.topic, tp.partition), False) for tp in partitions])
    out: dict[TopicPartition, PartitionState] = {}
    decode = zkdata.LeaderIsrAndControllerEpoch.decode
    # Most znodes hold the same bytes as some other (a few thousand leader, epoch and ISR
    # combinations among 100,000 partitions): each is decoded once, the frozen state shared.
    decoded: dict[bytes, zkdata.LeaderIsrAndControllerEpoch] = {}
    for tp, outcome in zip(partitions, outcomes, strict=True):
        if isinstance(outcome, NoNodeError):
            continue
        if isinstance(outcome, StoreError):
            raise outcome
        data, stat = outcome
        if data:
            state = decoded.get(data)
            if state is None:
                state = decoded[data] = decode(data)
            out[tp] = PartitionState(state, stat.version)
    return out


async def get_topic_config(session: StoreSession, topic: TopicName) -> dict[str, str]:
    try:
        data, _ = await session.get(zkdata.topic_config_path(topic))
    except NoNodeError:
        return {}
    return dict(zkdata.EntityConfig.decode(data).config)


async def get_topic_configs(
    session: StoreSession, topics: Sequence[TopicName]
) -> dict[TopicName, dict[str, str] | StoreError]:
    """``get_topic_config`` of each topic, read as one pipelined batch: its configs ({}
    when it has no config znode), or the error its read met."""
    outcomes = await session.get_each([(zkdata.topic_config_path(t), False) for t in topics])
    out: dict[TopicName, dict[str, str] | StoreError] = {}
    decoded: dict[bytes, dict[str, str]] = {}  # most topics' znodes hold the same bytes
    for topic, outcome in zip(topics, outcomes, strict=True):
        if isinstance(outcome, NoNodeError):
            out[topic] = {}
        elif isinstance(outcome, StoreError):
            out[topic] = outcome
        else:
            data = outcome[0]
            config = decoded.get(data)
            if config is None:
                config = decoded[data] = dict(zkdata.EntityConfig.decode(data).config)
            out[topic] = dict(config)  # each its own: callers may change theirs
    return out


async def entities_with_config(
    session: StoreSession, entity_type: zkdata.ConfigType
) -> tuple[str, ...]:
    """``KafkaZkClient.getAllEntitiesWithConfig``: the children of ``/config/<type>``
    (none when it does not exist)."""
    try:
        return tuple(await session.children(zkdata.config_entity_type_path(entity_type)))
    except NoNodeError:
        return ()


async def change_topic_config(
    session: StoreSession, topic: TopicName, config: Mapping[str, str]
) -> str:
    """``AdminZkClient.changeTopicConfig``'s writes (``change_entity_config`` of the topic).
    Returns the notification's name."""
    return await change_entity_config(session, zkdata.ConfigType.TOPIC, topic, config)


async def get_entity_config(
    session: StoreSession, entity_type: zkdata.ConfigType, name: str
) -> dict[str, str]:
    """``AdminZkClient.fetchEntityConfig``: ``/config/<type>/<name>``'s overrides ({} when
    it has no znode)."""
    try:
        data, _ = await session.get(zkdata.config_entity_path(entity_type, name))
    except NoNodeError:
        return {}
    return dict(zkdata.EntityConfig.decode(data).config)


async def change_entity_config(
    session: StoreSession, entity_type: zkdata.ConfigType, name: str, config: Mapping[str, str]
) -> str:
    """``AdminZkClient.changeEntityConfig``'s writes: ``/config/<type>/<name>`` set (created
    if missing, ``setOrCreateEntityConfigs``), then a ``/config/changes/config_change_<seq>``
    notification naming ``<type>/<name>`` (``createConfigChangeNotification``). Returns the
    notification's name."""
    path = zkdata.config_entity_path(entity_type, name)
    payload = zkdata.EntityConfig(config=dict(config)).encode()
    try:
        await session.set(path, payload)
    except NoNodeError:
        try:
            await session.create(path, payload, make_parents=True)
        except NodeExistsError:
            await session.set(path, payload)
    notification = zkdata.ConfigChangeNotification.for_entity(entity_type, name)
    created = await session.create(
        zkdata.CONFIG_CHANGE_SEQUENCE_PATH,
        notification.encode(),
        sequential=True,
        make_parents=True,
    )
    return created.rsplit("/", 1)[-1]


async def config_change_names(session: StoreSession, *, watch: bool = False) -> list[str]:
    """The notifications under ``/config/changes``, oldest first (their sequence order)."""
    try:
        names = await session.children(zkdata.CONFIG_CHANGES_PATH, watch=watch)
    except NoNodeError:
        return []
    return sorted(n for n in names if n.startswith(zkdata.CONFIG_CHANGE_PREFIX))


async def get_config_change(
    session: StoreSession, name: str
) -> zkdata.ConfigChangeNotification | None:
    """One notification, or None if it is gone (purged) or cannot be read."""
    try:
        data, _ = await session.get(
            zkdata.config_change_path(name[len(zkdata.CONFIG_CHANGE_PREFIX) :])
        )
    except NoNodeError:
        return None
    try:
        return zkdata.ConfigChangeNotification.decode(data)
    except ZkDataError:
        return None


CHANGE_EXPIRATION_MS: Final = 15 * 60 * 1000
"""``ZkNodeChangeNotificationListener``'s ``changeExpirationMs``: how long a change
notification is kept after it was created."""


async def purge_obsolete_config_changes(
    session: StoreSession, now_ms: int, names: Sequence[str]
) -> list[str]:
    """``ZkNodeChangeNotificationListener.purgeObsoleteNotifications``: each of ``names``
    created more than ``CHANGE_EXPIRATION_MS`` before ``now_ms`` is deleted (one gone
    meanwhile is skipped). Returns the names deleted, in order."""
    purged = []
    for name in sorted(names):
        path = zkdata.config_change_path(name[len(zkdata.CONFIG_CHANGE_PREFIX) :])
        try:
            _, stat = await session.get(path)
            if now_ms - stat.ctime > CHANGE_EXPIRATION_MS:
                await session.delete(path)
                purged.append(name)
        except NoNodeError:
            continue
    return purged


def assignment_payload(assignment: Mapping[int, Sequence[int]]) -> bytes:
    """The v2 JSON of ``/brokers/topics/<t>`` for a plain assignment (no reassignment)."""
    return zkdata.TopicAssignment(
        partitions={
            p: zkdata.ReplicaAssignment(replicas=tuple(BrokerId(b) for b in replicas))
            for p, replicas in sorted(assignment.items())
        }
    ).encode()


async def write_topic(
    session: StoreSession,
    topic: TopicName,
    assignment: Mapping[int, Sequence[int]],
    config: Mapping[str, str],
) -> None:
    """AdminZkClient.createTopicWithAssignment: write the config (create or set, always),
    then create the assignment znode (``NodeExistsError`` if the topic exists)."""
    config_path = zkdata.topic_config_path(topic)
    payload = zkdata.EntityConfig(config=dict(config)).encode()
    try:
        await session.create(config_path, payload, make_parents=True)
    except NodeExistsError:
        await session.set(config_path, payload)
    await session.create(
        zkdata.topic_path(topic), assignment_payload(assignment), make_parents=True
    )


@dataclass(frozen=True, slots=True)
class TopicWrite:
    """One topic for ``write_topics``: its assignment and its config overrides."""

    topic: TopicName
    assignment: Mapping[int, Sequence[int]]
    config: Mapping[str, str]


def _single_op_outcome(outcome: tuple[OpResult, ...] | StoreError) -> StoreError | None:
    """The error of a one-op ``multi_each`` outcome (the op's own, not the transaction's),
    or None when it succeeded."""
    if isinstance(outcome, TransactionFailedError):
        return next((r for r in outcome.results if r is not None), outcome)
    return outcome if isinstance(outcome, StoreError) else None


async def write_topics(
    session: StoreSession, topics: Sequence[TopicWrite]
) -> list[StoreError | None]:
    """``write_topic`` for each of ``topics``, pipelined: every config is created (set
    where it already exists), then every assignment znode is created, each write its own
    request, all in flight at once (``multi_each``). The outcome of each topic, in order:
    None when written, or the error ``write_topic`` would have raised for it
    (``NodeExistsError``: the topic exists). A write refused for a missing parent is
    retried alone through ``write_topic``, which makes the parents."""
    outcomes: list[StoreError | None] = [None] * len(topics)
    payloads = [zkdata.EntityConfig(config=dict(t.config)).encode() for t in topics]
    created = await session.multi_each(
        [
            [CreateOp(path=zkdata.topic_config_path(t.topic), data=payload)]
            for t, payload in zip(topics, payloads, strict=True)
        ]
    )
    to_set: list[int] = []
    alone: list[int] = []
    for i, outcome in enumerate(created):
        error = _single_op_outcome(outcome)
        if isinstance(error, NodeExistsError):
            to_set.append(i)
        elif isinstance(error, NoNodeError):
            alone.append(i)
        else:
            outcomes[i] = error
    set_results = await session.multi_each(
        [
            [SetDataOp(path=zkdata.topic_config_path(topics[i].topic), data=payloads[i])]
            for i in to_set
        ]
    )
    for i, outcome in zip(to_set, set_results, strict=True):
        outcomes[i] = _single_op_outcome(outcome)
    retried = set(alone)
    ready = [i for i, error in enumerate(outcomes) if error is None and i not in retried]
    # Generated assignments repeat (a few shapes over the same brokers): encode each once.
    encoded: dict[tuple[tuple[int, tuple[int, ...]], ...], bytes] = {}
    batches: list[list[StoreOp]] = []
    for i in ready:
        assignment = topics[i].assignment
        key = tuple((p, tuple(replicas)) for p, replicas in assignment.items())
        if key not in encoded:
            encoded[key] = assignment_payload(assignment)
        batches.append([CreateOp(path=zkdata.topic_path(topics[i].topic), data=encoded[key])])
    assigned = await session.multi_each(batches)
    for i, outcome in zip(ready, assigned, strict=True):
        error = _single_op_outcome(outcome)
        if isinstance(error, NoNodeError):
            alone.append(i)
        else:
            outcomes[i] = error
    for i in sorted(alone):
        try:
            await write_topic(session, topics[i].topic, topics[i].assignment, topics[i].config)
        except StoreError as exc:
            outcomes[i] = exc
    return outcomes


async def set_topic_assignment(
    session: StoreSession, topic: TopicName, assignment: Mapping[int, Sequence[int]]
) -> None:
    """Overwrite ``/brokers/topics/<t>`` (partition addition: any version, not fenced)."""
    await session.set(zkdata.topic_path(topic), assignment_payload(assignment))


# ----------------------------------------------------------------------- controller writes
#
# Every write the controller makes goes through ``fenced`` (Kafka's
# ``expectedControllerEpochZkVersion`` on every ``KafkaZkClient`` write): a failed
# ``/controller_epoch`` check raises ``ControllerMovedError`` and the controller resigns.


async def get_broker(session: StoreSession, broker_id: BrokerId) -> RegisteredBroker | None:
    """One registered broker with its epoch (arms a data watch when the session does)."""
    try:
        data, stat = await session.get(zkdata.broker_path(broker_id))
    except NoNodeError:
        return None
    return RegisteredBroker(zkdata.BrokerRegistration.decode(data), stat.czxid)


async def create_partition_paths(
    session: StoreSession, epoch_zk_version: int, partitions: Iterable[TopicPartition]
) -> None:
    """``createTopicPartitions`` + ``createTopicPartition``: the persistent parents of the
    state znodes, fenced. A parent that exists is fine; one whose topic vanished is left
    for the state creation to report (Kafka ignores these results too)."""
    partitions = sorted(set(partitions))
    parents = [zkdata.topic_partitions_path(t) for t in sorted({tp.topic for tp in partitions})]
    parents += [zkdata.partition_path(tp.topic, tp.partition) for tp in partitions]
    outcomes = await fenced_each(session, epoch_zk_version, [[CreateOp(path=p)] for p in parents])
    for outcome in outcomes:
        if isinstance(outcome, StoreError) and not isinstance(
            outcome, NodeExistsError | NoNodeError
        ):
            raise outcome


async def create_partition_states(
    session: StoreSession,
    epoch_zk_version: int,
    states: Mapping[TopicPartition, zkdata.LeaderIsrAndControllerEpoch],
) -> dict[TopicPartition, StoreError | None]:
    """``createTopicPartitionStatesRaw``: ``create_partition_state`` of every partition,
    pipelined (one guarded create each); maps each partition to its error, or None when
    its state znode was created (zkVersion 0). A failed guard raises
    ``ControllerMovedError``."""
    encoded: dict[zkdata.LeaderIsrAndControllerEpoch, bytes] = {}  # a few distinct states
    for state in states.values():
        if state not in encoded:
            encoded[state] = state.encode()
    outcomes = await fenced_each(
        session,
        epoch_zk_version,
        [
            [
                CreateOp(
                    path=zkdata.partition_state_path(TopicName(tp.topic), tp.partition),
                    data=encoded[state],
                )
            ]
            for tp, state in states.items()
        ],
    )
    return {
        tp: outcome if isinstance(outcome, StoreError) else None
        for tp, outcome in zip(states, outcomes, strict=True)
    }


async def create_partition_state(
    session: StoreSession,
    epoch_zk_version: int,
    tp: TopicPartition,
    state: zkdata.LeaderIsrAndControllerEpoch,
) -> int:
    """Create ``.../partitions/<p>/state`` (fenced); returns its zkVersion (0). Raises
    ``NodeExistsError`` if it exists, ``NoNodeError`` if its parents do not."""
    path = zkdata.partition_state_path(TopicName(tp.topic), tp.partition)
    await fenced(session, epoch_zk_version, [CreateOp(path=path, data=state.encode())])
    return 0


async def update_partition_state(
    session: StoreSession,
    epoch_zk_version: int,
    tp: TopicPartition,
    state: zkdata.LeaderIsrAndControllerEpoch,
    expected_zk_version: int,
) -> int:
    """Conditionally overwrite a state znode (fenced); returns its new zkVersion. Raises
    ``BadVersionError`` when someone else wrote it since ``expected_zk_version``."""
    path = zkdata.partition_state_path(TopicName(tp.topic), tp.partition)
    results = await fenced(
        session,
        epoch_zk_version,
        [SetDataOp(path=path, data=state.encode(), version=expected_zk_version)],
    )
    return _set_stat_version(results[0])


async def update_partition_states(
    session: StoreSession,
    epoch_zk_version: int,
    updates: Mapping[TopicPartition, tuple[zkdata.LeaderIsrAndControllerEpoch, int]],
) -> dict[TopicPartition, int | StoreError]:
    """``updateLeaderAndIsr``: ``update_partition_state`` of every partition, pipelined (one
    guarded conditional set each, in order); maps each partition to its state znode's new
    zkVersion, or to its error (``BadVersionError``: someone else wrote it since the
    expected version). A failed guard raises ``ControllerMovedError``."""
    if not updates:
        return {}
    outcomes = await fenced_each(
        session,
        epoch_zk_version,
        [
            [
                SetDataOp(
                    path=zkdata.partition_state_path(TopicName(tp.topic), tp.partition),
                    data=state.encode(),
                    version=expected_zk_version,
                )
            ]
            for tp, (state, expected_zk_version) in updates.items()
        ],
    )
    return {
        tp: outcome if isinstance(outcome, StoreError) else _set_stat_version(outcome[0])
        for tp, outcome in zip(updates, outcomes, strict=True)
    }


async def set_topic_assignment_fenced(
    session: StoreSession,
    epoch_zk_version: int,
    topic: TopicName,
    assignment: Mapping[int, zkdata.ReplicaAssignment],
) -> None:
    """Overwrite ``/brokers/topics/<t>`` with a full assignment, as the controller does
    (restoring an assignment during deletion, reassignment), fenced."""
    payload = zkdata.TopicAssignment(partitions=dict(sorted(assignment.items()))).encode()
    await fenced(
        session, epoch_zk_version, [SetDataOp(path=zkdata.topic_path(topic), data=payload)]
    )


async def delete_children_fenced(session: StoreSession, epoch_zk_version: int, parent: str) -> int:
    """Delete every child of ``parent`` (notification nodes), each fenced; returns how
    many were deleted. A missing parent or child is fine."""
    try:
        children = await session.children(parent)
    except NoNodeError:
        return 0
    deleted = 0
    for child in children:
        with contextlib.suppress(NoNodeError):
            await fenced(session, epoch_zk_version, [DeleteOp(path=f"{parent}/{child}")])
            deleted += 1
    return deleted


async def get_feature_node(session: StoreSession) -> tuple[zkdata.FeatureNode, int] | None:
    """``/feature`` and its zkVersion, or None."""
    try:
        data, stat = await session.get(zkdata.FEATURE_PATH)
    except NoNodeError:
        return None
    return zkdata.FeatureNode.decode(data), stat.version


async def ensure_feature_versioning_enabled(session: StoreSession) -> zkdata.FeatureNode:
    """``enableFeatureVersioning`` (IBP >= 2.7-IV0): create ``/feature`` enabled if absent,
    or switch a disabled one to enabled (Kafka writes these unfenced)."""
    current = await get_feature_node(session)
    enabled = zkdata.FeatureNode(status=zkdata.FeatureStatus.ENABLED, features={})
    if current is None:
        try:
            await session.create(zkdata.FEATURE_PATH, enabled.encode())
            return enabled
        except NodeExistsError:
            current = await get_feature_node(session)
            if current is None:  # pragma: no cover - created and deleted in between
                return enabled
    node, _ = current
    if node.status is zkdata.FeatureStatus.ENABLED:
        return node
    updated = zkdata.FeatureNode(status=zkdata.FeatureStatus.ENABLED, features=node.features)
    await session.set(zkdata.FEATURE_PATH, updated.encode())
    return updated


# ----------------------------------------------------------------------- producer ids


async def allocate_producer_id_block(
    session: StoreSession, broker_id: BrokerId, size: int = zkdata.PRODUCER_ID_BLOCK_SIZE
) -> zkdata.ProducerIdBlock:
    """Reserve the next ``size`` producer ids in ``/latest_producer_id_block``, as
    ``ProducerIdManager.getNewProducerIdBlock``: read the last block (an empty node: none
    yet, the first block starts at 0), write the next one conditionally on the version
    read, and on a conflict read again and retry."""
    while True:
        try:
            data, stat = await session.get(zkdata.LATEST_PRODUCER_ID_BLOCK_PATH)
        except NoNodeError:
            with contextlib.suppress(NodeExistsError):
                await session.create(zkdata.LATEST_PRODUCER_ID_BLOCK_PATH, b"")
            continue
        start = zkdata.ProducerIdBlock.decode(data).block_end + 1 if data else 0
        block = zkdata.ProducerIdBlock(
            broker=broker_id, block_start=start, block_end=start + size - 1
        )
        try:
            await session.set(
                zkdata.LATEST_PRODUCER_ID_BLOCK_PATH, block.encode(), version=stat.version
            )
        except BadVersionError:
            continue  # another broker took this block: read again
        return block


# ----------------------------------------------------------------------- topic deletion


async def get_topic_deletions(session: StoreSession) -> tuple[TopicName, ...]:
    """The topics marked under ``/admin/delete_topics`` (none when the path is missing)."""
    try:
        return tuple(TopicName(t) for t in await session.children(zkdata.DELETE_TOPICS_PATH))
    except NoNodeError:
        return ()


async def delete_recursive_fenced(session: StoreSession, epoch_zk_version: int, path: str) -> None:
    """Kafka's ``deleteRecursive`` for the controller: children first (in name order), each
    node deleted by its own fenced multi-op. A node already gone is fine."""
    try:
        children = await session.children(path)
    except NoNodeError:
        return
    for child in sorted(children):
        await delete_recursive_fenced(session, epoch_zk_version, f"{path}/{child}")
    with contextlib.suppress(NoNodeError):
        await fenced(session, epoch_zk_version, [DeleteOp(path=path)])


async def delete_topic_deletions_fenced(
    session: StoreSession, epoch_zk_version: int, topics: Iterable[TopicName]
) -> None:
    """Remove the ``/admin/delete_topics/<t>`` markers of ``topics`` (fenced)."""
    for topic in topics:
        with contextlib.suppress(NoNodeError):
            await fenced(
                session, epoch_zk_version, [DeleteOp(path=zkdata.delete_topic_path(topic))]
            )


async def delete_topic_fenced(
    session: StoreSession, epoch_zk_version: int, topic: TopicName
) -> None:
    """The end of a deletion (``TopicDeletionManager.completeDeleteTopic``), in Kafka's order: the
    topic znode and its partitions, its config, then its marker; every write fenced."""
    await delete_recursive_fenced(session, epoch_zk_version, zkdata.topic_path(topic))
    with contextlib.suppress(NoNodeError):
        await fenced(session, epoch_zk_version, [DeleteOp(path=zkdata.topic_config_path(topic))])
    await delete_topic_deletions_fenced(session, epoch_zk_version, (topic,))


BATCHED_TOPIC_DELETE_MAX_PARTITIONS = 1000
"""A topic of more partitions is deleted znode by znode (its one multi would be large)."""


async def delete_topics_fenced(
    session: StoreSession, epoch_zk_version: int, topics: Mapping[TopicName, Iterable[int]]
) -> None:
    """``delete_topic_fenced`` of each topic, pipelined: a topic's znodes, in the order
    ``delete_topic_fenced`` deletes them (each partition's state then its znode, by name,
    then ``/partitions``, the topic znode, its config, its marker last), go in one guarded
    multi of its own, the multis of all the topics in flight at once. ``topics`` maps each
    topic to the partitions the controller knows, which are those its znode holds; a topic
    whose multi fails (its znodes are not exactly those: a partition never created, a
    config missing) is then deleted alone by ``delete_topic_fenced``, which reads what is
    there. A failed guard raises ``ControllerMovedError``."""
    batched: list[TopicName] = []
    batches: list[list[StoreOp]] = []
    alone: list[TopicName] = []
    for topic, partitions in topics.items():
        names = sorted(str(p) for p in partitions)  # deleteRecursive goes in name order
        if len(names) > BATCHED_TOPIC_DELETE_MAX_PARTITIONS:
            alone.append(topic)
            continue
        parent = zkdata.topic_partitions_path(topic)
        ops: list[StoreOp] = []
        for name in names:
            ops.append(DeleteOp(path=f"{parent}/{name}/state"))
            ops.append(DeleteOp(path=f"{parent}/{name}"))
        ops.append(DeleteOp(path=parent))
        ops.append(DeleteOp(path=zkdata.topic_path(topic)))
        ops.append(DeleteOp(path=zkdata.topic_config_path(topic)))
        ops.append(DeleteOp(path=zkdata.delete_topic_path(topic)))
        batched.append(topic)
        batches.append(ops)
    outcomes = await fenced_each(session, epoch_zk_version, batches) if batches else []
    alone += [
        t for t, outcome in zip(batched, outcomes, strict=True) if isinstance(outcome, StoreError)
    ]
    for topic in alone:
        await delete_topic_fenced(session, epoch_zk_version, topic)


# ----------------------------------------------------------------------- reassignment and
# preferred replica election (the legacy admin znodes, ``ReassignPartitionsZNode`` and
# ``PreferredReplicaElectionZNode``)


async def get_partition_reassignment(
    session: StoreSession,
) -> zkdata.PartitionReassignment | None:
    """``/admin/reassign_partitions`` as written, or None when there is none. A payload
    that is not a reassignment raises ``ZkDataError`` (Kafka logs it and ignores it)."""
    try:
        data, _ = await session.get(zkdata.REASSIGN_PARTITIONS_PATH)
    except NoNodeError:
        return None
    return zkdata.PartitionReassignment.decode(data)


async def create_partition_reassignment(
    session: StoreSession, reassignment: zkdata.PartitionReassignment
) -> None:
    """The admin tool's write (``createPartitionReassignment``): create the znode, and its
    parents if needed. ``NodeExistsError`` while another reassignment is pending."""
    await session.create(zkdata.REASSIGN_PARTITIONS_PATH, reassignment.encode(), make_parents=True)


async def set_or_create_partition_reassignment_fenced(
    session: StoreSession, epoch_zk_version: int, reassignment: zkdata.PartitionReassignment
) -> None:
    """The controller's rewrite of the pending partitions (any version; created if it
    vanished), fenced."""
    payload = reassignment.encode()
    try:
        await fenced(
            session,
            epoch_zk_version,
            [SetDataOp(path=zkdata.REASSIGN_PARTITIONS_PATH, data=payload)],
        )
    except NoNodeError:
        await fenced(
            session,
            epoch_zk_version,
            [CreateOp(path=zkdata.REASSIGN_PARTITIONS_PATH, data=payload)],
        )


async def delete_partition_reassignment_fenced(
    session: StoreSession, epoch_zk_version: int
) -> None:
    """Remove ``/admin/reassign_partitions`` once nothing in it is pending (fenced; a node
    already gone is fine)."""
    with contextlib.suppress(NoNodeError):
        await fenced(session, epoch_zk_version, [DeleteOp(path=zkdata.REASSIGN_PARTITIONS_PATH)])


async def get_preferred_replica_election(session: StoreSession) -> tuple[TopicPartition, ...]:
    """The partitions listed in ``/admin/preferred_replica_election`` (none when absent)."""
    try:
        data, _ = await session.get(zkdata.PREFERRED_REPLICA_ELECTION_PATH)
    except NoNodeError:
        return ()
    return zkdata.PreferredReplicaElection.decode(data).partitions


async def create_preferred_replica_election(
    session: StoreSession, election: zkdata.PreferredReplicaElection
) -> None:
    """The admin tool's write; ``NodeExistsError`` while another election is pending."""
    await session.create(
        zkdata.PREFERRED_REPLICA_ELECTION_PATH, election.encode(), make_parents=True
    )


async def delete_preferred_replica_election_fenced(
    session: StoreSession, epoch_zk_version: int
) -> None:
    """Remove ``/admin/preferred_replica_election`` (fenced; already gone is fine)."""
    with contextlib.suppress(NoNodeError):
        await fenced(
            session, epoch_zk_version, [DeleteOp(path=zkdata.PREFERRED_REPLICA_ELECTION_PATH)]
        )


# ---------------------------------------------------------------- /log_dir_event_notification


async def propagate_log_dir_event(session: StoreSession, broker_id: BrokerId) -> str:
    """``KafkaZkClient.propagateLogDirEvent``: a persistent sequential
    ``/log_dir_event_notification/log_dir_event_<seq>`` naming the broker that lost a log
    directory. Returns the notification's sequence number."""
    created = await session.create(
        zkdata.LOG_DIR_EVENT_SEQUENCE_PATH,
        zkdata.LogDirEvent(broker_id=broker_id).encode(),
        sequential=True,
    )
    return zkdata.sequence_number(created, zkdata.LOG_DIR_EVENT_PREFIX)


async def get_log_dir_event_notifications(session: StoreSession) -> list[str]:
    """``getAllLogDirEventNotifications``: the sequence numbers of the notifications, in
    order (none when the path is missing)."""
    try:
        names = await session.children(zkdata.LOG_DIR_EVENT_NOTIFICATION_PATH)
    except NoNodeError:
        return []
    return sorted(
        zkdata.sequence_number(n, zkdata.LOG_DIR_EVENT_PREFIX)
        for n in names
        if n.startswith(zkdata.LOG_DIR_EVENT_PREFIX)
    )


async def get_broker_ids_from_log_dir_events(
    session: StoreSession, sequence_numbers: Sequence[str]
) -> list[BrokerId]:
    """``getBrokerIdsFromLogDirEvents``: the broker each notification names; one gone
    meanwhile or unreadable is skipped."""
    broker_ids = []
    for sequence in sequence_numbers:
        try:
            data, _ = await session.get(zkdata.log_dir_event_path(sequence))
            broker_ids.append(zkdata.LogDirEvent.decode(data).broker_id)
        except (NoNodeError, ZkDataError):
            continue
    return broker_ids


async def delete_log_dir_event_notifications_fenced(
    session: StoreSession, epoch_zk_version: int, sequence_numbers: Sequence[str]
) -> None:
    """``deleteLogDirEventNotifications``: the processed notifications go (each fenced;
    one already gone is fine)."""
    for sequence in sequence_numbers:
        with contextlib.suppress(NoNodeError):
            await fenced(
                session, epoch_zk_version, [DeleteOp(path=zkdata.log_dir_event_path(sequence))]
            )
