"""Reading the state of a running cluster, and the conditions of ``wait``/``expect``.

Reads go through the run's own store session and client node (they show in the trace as
the run's, ``chaos``, and do not count as cluster activity); log directories are listed
directly. ``read_final`` gathers the ``FinalState`` the end-state invariants check.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import assert_never

from actors.broker.broker import broker_ref
from actors.invariants import (
    CacheView,
    FinalState,
    PartitionView,
    StoreView,
    check_final,
)
from actors.zk.store import StoreSession
from cluster.chaos.group import group_settled
from cluster.chaos.harness import Harness, Trigger
from cluster.chaos.metrics import read_metric
from cluster.chaos.model import (
    BrokerRegistered,
    BrokerUnregistered,
    ClusterReady,
    Condition,
    Converged,
    EventSeen,
    GroupSettled,
    MarkedForDeletion,
    MetricAt,
    NoPendingDeletions,
    PreferredLeaders,
    ReassignmentDone,
    TopicDeleted,
    TopicExists,
    TopicReady,
)
from cluster.launch.cluster import is_ready
from protocol import zkdata
from protocol.errors import AskTimeoutError, ErrorCode, NoNodeError, RemoteError
from protocol.ids import BrokerId, TopicName
from protocol.kafka_api import MetadataRequestData, MetadataResponseData

__all__ = [
    "condition_check",
    "read_cache",
    "read_final",
    "read_log_dirs",
    "read_store",
    "store_view",
]


# ----------------------------------------------------------------------------- reading


async def _children(session: StoreSession, path: str) -> tuple[str, ...]:
    try:
        return tuple(sorted(await session.children(path)))
    except NoNodeError:
        return ()


async def read_store(h: Harness) -> StoreView:
    """The controller, brokers, topics, partition states, configs and deletion markers."""
    return await store_view(h.session, controller=await h.controller())


async def store_view(session: StoreSession, *, controller: int | None) -> StoreView:
    """``read_store`` through any store session (e.g. a test's own on a ZooKeeper that a
    killed cluster left behind), with the controller read by the caller."""
    topics: dict[str, dict[int, tuple[int, ...]]] = {}
    partition_nodes: dict[str, tuple[int, ...]] = {}
    states: dict[str, dict[int, PartitionView]] = {}
    for topic in await _children(session, zkdata.TOPICS_PATH):
        name = TopicName(topic)
        try:
            data, _ = await session.get(zkdata.topic_path(name))
        except NoNodeError:
            continue
        assignment = zkdata.TopicAssignment.decode(data).partitions
        topics[topic] = {p: tuple(a.replicas) for p, a in sorted(assignment.items())}
        listed = await _children(session, zkdata.topic_partitions_path(name))
        partition_nodes[topic] = tuple(sorted(int(p) for p in listed))
        views: dict[int, PartitionView] = {}
        for partition in partition_nodes[topic]:
            try:
                raw, _ = await session.get(zkdata.partition_state_path(name, partition))
            except NoNodeError:
                continue
            if not raw:
                continue
            state = zkdata.LeaderIsrAndControllerEpoch.decode(raw)
            views[partition] = PartitionView(
                leader=int(state.leader),
                leader_epoch=int(state.leader_epoch),
                isr=tuple(int(b) for b in state.isr),
                replicas=topics[topic].get(partition, ()),
            )
        states[topic] = views
    brokers = tuple(sorted(int(b) for b in await _children(session, zkdata.BROKER_IDS_PATH)))
    configs = await _children(session, zkdata.config_entity_type_path(zkdata.ConfigType.TOPIC))
    return StoreView(
        controller=controller,
        brokers=brokers,
        topics=topics,
        partition_nodes=partition_nodes,
        states=states,
        configs=configs,
        deletions=await _children(session, zkdata.DELETE_TOPICS_PATH),
    )


async def _metadata(h: Harness, broker: int, topic: str | None) -> MetadataResponseData | None:
    if not h.is_running(broker):
        return None
    request = MetadataRequestData(
        topics=None if topic is None else (TopicName(topic),),
        allow_auto_topic_creation=False,
    )
    try:
        reply = await h.client.ask(broker_ref(broker), request, timeout=5.0)
    except (AskTimeoutError, RemoteError):
        return None
    return reply if isinstance(reply, MetadataResponseData) else None


def _cache_view(reply: MetadataResponseData) -> CacheView:
    return CacheView(
        controller=int(reply.controller_id),
        brokers=tuple(sorted(int(b.broker_id) for b in reply.brokers)),
        topics={
            t.name: {
                p.partition: PartitionView(
                    leader=int(p.leader),
                    leader_epoch=p.leader_epoch,
                    isr=tuple(int(b) for b in p.isr),
                    replicas=tuple(int(b) for b in p.replicas),
                )
                for p in sorted(t.partitions, key=lambda p: p.partition)
            }
            for t in sorted(reply.topics, key=lambda t: t.name)
            if t.error_code is not ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        },
    )


async def read_cache(h: Harness, broker: int) -> CacheView | None:
    """Broker ``broker``'s metadata cache, from its Metadata answer (None: no answer)."""
    reply = await _metadata(h, broker, None)
    return None if reply is None else _cache_view(reply)


def read_log_dirs(log_dir: Path) -> tuple[str, ...]:
    """The directory names in a broker's log dir (sorted; none if it does not exist)."""
    try:
        with os.scandir(log_dir) as entries:
            return tuple(sorted(e.name for e in entries if e.is_dir()))
    except FileNotFoundError:
        return ()


def read_broker_log_dirs(h: Harness, broker: int) -> tuple[str, ...]:
    """The directory names in every log dir of a broker, together (sorted)."""
    return tuple(sorted(name for d in h.log_dirs(broker) for name in read_log_dirs(d)))


async def read_final(h: Harness) -> FinalState:
    running = tuple(h.running())
    caches = {b: await read_cache(h, b) for b in running}
    return FinalState(
        store=await read_store(h),
        running=running,
        caches=caches,
        log_dirs={b: read_broker_log_dirs(h, b) for b in range(h.brokers)},
    )


# ----------------------------------------------------------------------------- conditions


def condition_check(h: Harness, condition: Condition) -> Callable[[], Awaitable[bool]]:
    """A check of ``condition`` against the cluster as it is when called. An ``event``
    condition is armed now, over the events recorded so far and from now on."""
    match condition:
        case TopicExists(topic=topic):
            return lambda: _exists(h, zkdata.topic_path(TopicName(topic)))
        case TopicReady(topic=topic):
            return lambda: _topic_ready(h, topic)
        case TopicDeleted(topic=topic):
            return lambda: _topic_deleted(h, topic)
        case MarkedForDeletion(topic=topic):
            return lambda: _exists(h, zkdata.delete_topic_path(TopicName(topic)))
        case NoPendingDeletions():
            return lambda: _no_pending_deletions(h)
        case ClusterReady():
            return lambda: _cluster_ready(h)
        case BrokerRegistered(broker=broker):
            return lambda: _exists(h, zkdata.broker_path(BrokerId(broker)))
        case BrokerUnregistered(broker=broker):
            return lambda: _absent(h, zkdata.broker_path(BrokerId(broker)))
        case Converged():
            return lambda: converged(h)
        case EventSeen(pattern=pattern):
            trigger = h.recorder.arm((pattern,), past=True)
            return lambda: _fired(trigger)
        case ReassignmentDone(topic=topic, assignment=assignment):
            return lambda: _reassignment_done(h, topic, assignment or {})
        case PreferredLeaders(topic=topic):
            return lambda: _preferred_leaders(h, topic)
        case GroupSettled(group=group, members=members):
            return lambda: group_settled(h, group, members)
        case MetricAt():
            return lambda: _metric(h, condition)
        case _:
            assert_never(condition)


async def _metric(h: Harness, condition: MetricAt) -> bool:
    value = await read_metric(h, condition.name, condition.broker)
    return value is not None and condition.holds(value)


async def _fired(trigger: Trigger) -> bool:
    return trigger.event is not None


async def _exists(h: Harness, path: str) -> bool:
    return await h.session.exists(path) is not None


async def _absent(h: Harness, path: str) -> bool:
    return await h.session.exists(path) is None


async def _no_pending_deletions(h: Harness) -> bool:
    return not await _children(h.session, zkdata.DELETE_TOPICS_PATH)


async def _topic_ready(h: Harness, topic: str) -> bool:
    assignment = await _assignment(h, topic)
    if assignment is None:
        return False
    partitions = sorted(assignment)
    leaders = await _leaders(h, topic, partitions)
    if leaders is None or any(leader < 0 for leader in leaders.values()):
        return False
    for broker in h.running():
        reply = await _metadata(h, broker, topic)
        if reply is None or not reply.topics:
            return False
        seen = reply.topics[0]
        if seen.error_code is not ErrorCode.NONE or len(seen.partitions) != len(partitions):
            return False
        if any(p.error_code is not ErrorCode.NONE for p in seen.partitions):
            return False
    return True


async def _topic_deleted(h: Harness, topic: str) -> bool:
    name = TopicName(topic)
    if await _exists(h, zkdata.topic_path(name)):
        return False
    if await _exists(h, zkdata.delete_topic_path(name)):
        return False
    prefix = f"{topic}-"
    for broker in h.running():
        reply = await _metadata(h, broker, topic)
        if reply is None:
            return False
        if any(t.error_code is not ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for t in reply.topics):
            return False
        for entry in read_broker_log_dirs(h, broker):
            if entry.startswith(prefix) and entry[len(prefix) :].isdigit():
                return False
    return True


async def _assignment(h: Harness, topic: str) -> dict[int, zkdata.ReplicaAssignment] | None:
    try:
        data, _ = await h.session.get(zkdata.topic_path(TopicName(topic)))
    except NoNodeError:
        return None
    return zkdata.TopicAssignment.decode(data).partitions


async def _leaders(h: Harness, topic: str, partitions: Iterable[int]) -> dict[int, int] | None:
    """Each partition's leader in its state znode (None: a partition has no state)."""
    leaders: dict[int, int] = {}
    for partition in partitions:
        try:
            raw, _ = await h.session.get(zkdata.partition_state_path(TopicName(topic), partition))
        except NoNodeError:
            return None
        if not raw:
            return None
        leaders[partition] = int(zkdata.LeaderIsrAndControllerEpoch.decode(raw).leader)
    return leaders


async def _cached_partitions(h: Harness, topic: str) -> list[dict[int, PartitionView]] | None:
    """``topic``'s partitions in every running broker's metadata cache (None: a broker
    did not answer or does not know the topic)."""
    views: list[dict[int, PartitionView]] = []
    for broker in h.running():
        reply = await _metadata(h, broker, topic)
        if reply is None:
            return None
        cached = _cache_view(reply).topics.get(topic)
        if cached is None:
            return None
        views.append(cached)
    return views


async def _reassignment_done(h: Harness, topic: str, target: Mapping[int, Sequence[int]]) -> bool:
    """See ``ReassignmentDone``; the caches must show the final replicas too."""
    assignment = await _assignment(h, topic)
    if assignment is None:
        return False
    if any(a.adding_replicas or a.removing_replicas for a in assignment.values()):
        return False
    for partition, wanted in target.items():
        current = assignment.get(partition)
        if current is None or tuple(current.replicas) != tuple(wanted):
            return False
    try:
        raw, _ = await h.session.get(zkdata.REASSIGN_PARTITIONS_PATH)
    except NoNodeError:
        pass
    else:
        pending = zkdata.PartitionReassignment.decode(raw).partitions
        if any(p.topic == topic for p in pending):
            return False
    caches = await _cached_partitions(h, topic)
    if caches is None:
        return False
    replicas = {p: tuple(int(b) for b in a.replicas) for p, a in assignment.items()}
    return all({p: v.replicas for p, v in cache.items()} == replicas for cache in caches)


async def _preferred_leaders(h: Harness, topic: str) -> bool:
    """See ``PreferredLeaders``."""
    assignment = await _assignment(h, topic)
    if assignment is None:
        return False
    preferred = {p: int(a.replicas[0]) for p, a in assignment.items() if a.replicas}
    if await _leaders(h, topic, sorted(assignment)) != preferred:
        return False
    caches = await _cached_partitions(h, topic)
    if caches is None:
        return False
    return all({p: v.leader for p, v in cache.items()} == preferred for cache in caches)


async def _cluster_ready(h: Harness) -> bool:
    running = h.running()
    if not running:
        return False
    return is_ready([await h.status(b) for b in running], running)


async def converged(h: Harness) -> bool:
    """The end-state invariants hold now (all but the acknowledged-creation one, which
    needs the whole run's trace)."""
    return not check_final(await read_final(h))
