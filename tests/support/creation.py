"""A real in-process cluster for creation tests, and what "the creation is complete"
means: every partition has a state znode whose leader is a live broker in its ISR, every
replica on a live broker has its log directory, and every live broker's metadata cache
agrees with the store.

``running_cluster`` starts three (or more) brokers on a ``HookedStore`` around the
embedded store or a real ZooKeeper, so a test can stop the controller at an exact point
of its writes (``stop_after_states``).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from actors.broker.broker import broker_node_id, broker_ref
from actors.invariants.leadership import leadership_violations
from actors.runtime.actor import Node
from actors.runtime.clock import RealClock
from actors.runtime.tracer import MemorySink, Tracer
from actors.zk import kafka_zk
from actors.zk.store import MetadataStore, StoreSession
from cluster.launch.cluster import Cluster, ClusterSpec
from cluster.store.embedded import EmbeddedStore
from protocol import zkdata
from protocol.control import TopicPartition
from protocol.errors import ErrorCode
from protocol.ids import BrokerId, TopicName
from protocol.kafka_api import (
    CreatableTopic,
    MetadataRequestData,
    MetadataResponseData,
    PartitionAssignment,
)
from protocol.store import CreateOp, StoreOp
from tests.support.hooked_store import HookedSession, HookedStore
from tests.support.waiting import eventually
from tests.support.zookeeper import ZooKeeperServer

STATE_PATH = re.compile(r"^/brokers/topics/([^/]+)/partitions/(\d+)/state$")

Assignment = dict[int, list[int]]


@dataclass
class Harness:
    cluster: Cluster
    store: HookedStore
    probe: StoreSession  # a session of the test's own, on the unhooked store
    client: Node  # asks brokers as a Kafka client's request would
    logs: Path
    sink: MemorySink
    topics: dict[str, Assignment] = field(default_factory=dict)

    def running(self) -> list[int]:
        return sorted(b for b, n in self.cluster.nodes.items() if n.running)


@asynccontextmanager
async def running_cluster(
    logs: Path,
    zookeeper: ZooKeeperServer | None = None,
    *,
    brokers: int = 3,
    racks: Mapping[int, str] | None = None,
    config: Mapping[str, str] | None = None,
) -> AsyncIterator[Harness]:
    """``brokers`` brokers on a hooked store (the embedded one, or ``zookeeper`` under a
    fresh chroot) with Kafka listeners on free ports and every trace event kept; a client
    node to ask brokers from and a probe session of the test's own."""
    tracer = Tracer()
    sink = MemorySink()
    tracer.add_sink(sink)
    clock = RealClock()
    inner: MetadataStore
    if zookeeper is not None:
        from cluster.store.zookeeper import ZooKeeperStore

        address = f"{zookeeper.hosts}/kemu-{uuid.uuid4().hex}"
        inner = ZooKeeperStore(address, tracer=tracer, clock=clock)
    else:
        inner = EmbeddedStore(tracer=tracer, clock=clock)
    store = HookedStore(inner)
    spec = ClusterSpec(
        brokers=brokers,
        base_port=0,
        log_dir=logs,
        racks=dict(racks or {}),
        config={"zookeeper.session.timeout.ms": "2000", **(config or {})},
    )
    async with anyio.create_task_group() as tg:
        cluster: Cluster = await tg.start(
            Cluster(spec, tracer=tracer, clock=clock, store=store).run
        )
        assert cluster.network is not None
        client = Node("client", attach=cluster.network.attach, tracer=tracer, clock=clock)
        await tg.start(client.run)
        probe = await inner.open_session(name="probe")
        try:
            yield Harness(cluster, store, probe, client, logs, sink)
        finally:
            await probe.close()
            client.stop()
            tg.cancel_scope.cancel()


# ------------------------------------------------------------------ stopping the controller


@dataclass
class StopPoint:
    """Set once ``broker``'s session created its ``count``-th watched state znode."""

    broker: int
    count: int
    reached: anyio.Event = field(default_factory=anyio.Event)
    states: list[str] = field(default_factory=list)


def stop_after_states(
    h: Harness, broker: int, action: str, topics: Sequence[str], count: int
) -> StopPoint:
    """Watch the state znodes of ``topics`` that ``broker``'s session creates (its
    controller's writes); right after the ``count``-th, in the controller's own task,
    ``pause`` that session's writes (its next multi waits until the test ``resume``s the
    session) and, for ``crash``, crash the broker's node too."""
    point = StopPoint(broker, count)
    watched = set(topics)

    def hook(session: HookedSession, ops: Sequence[StoreOp]) -> None:
        if session.name != broker_node_id(broker) or point.reached.is_set():
            return
        for op in ops:
            match = STATE_PATH.match(op.path) if isinstance(op, CreateOp) else None
            if match is not None and match.group(1) in watched:
                point.states.append(op.path)
        if len(point.states) >= count:
            # Held first: a crash alone would cancel the controller at its next await,
            # after a ZooKeeper client has already sent that next request.
            session.pause()
            if action == "crash":
                # Cluster.crash_broker's steps, done here without awaiting: the listener
                # goes first, so that a client mid-request sees its connection drop (as
                # from a killed process) rather than an answer from a dying broker.
                h.cluster._stop_listener(broker)  # no synchronous public crash exists
                h.cluster.nodes[broker].crash()
            h.store.multi_hooks.remove(hook)
            point.reached.set()

    h.store.multi_hooks.append(hook)
    return point


async def state_znodes(h: Harness) -> list[str]:
    """The state znodes of the harness's topics that exist now."""
    found = []
    for topic, assignment in h.topics.items():
        for partition in assignment:
            path = zkdata.partition_state_path(TopicName(topic), partition)
            if await h.probe.exists(path) is not None:
                found.append(path)
    return sorted(found)


def log_dirs(h: Harness) -> list[str]:
    """``broker-<id>/<topic>-<p>`` of the harness's topics on disk."""
    return sorted(
        f"{d.parent.name}/{d.name}"
        for topic in h.topics
        for d in h.logs.glob(f"broker-*/{topic}-*")
        if d.is_dir()
    )


# ------------------------------------------------------------------ what "complete" means


async def metadata_view(
    h: Harness, broker: int
) -> dict[tuple[str, int], tuple[int, tuple[int, ...], tuple[int, ...]]]:
    """What ``broker``'s metadata cache says of the harness's topics: (leader, replicas,
    ISR) per partition."""
    request = MetadataRequestData(
        topics=tuple(TopicName(t) for t in h.topics),
        allow_auto_topic_creation=False,
    )
    reply = await h.client.ask(broker_ref(broker), request, timeout=5.0)
    assert isinstance(reply, MetadataResponseData)
    return {
        (t.name, p.partition): (p.leader, p.replicas, p.isr)
        for t in reply.topics
        if t.error_code is ErrorCode.NONE
        for p in t.partitions
    }


async def creation_problems(h: Harness, live: Sequence[int]) -> list[str]:
    """Everything that keeps the creation of the harness's topics from being complete
    among the ``live`` brokers (empty when it is)."""
    problems: list[str] = []
    expected: dict[tuple[str, int], tuple[int, tuple[int, ...], tuple[int, ...]]] = {}
    for topic, assignment in h.topics.items():
        stored = await kafka_zk.get_topic_assignment(h.probe, TopicName(topic))
        if stored is None:
            problems.append(f"{topic}: no topic znode")
            continue
        if {p: list(a.replicas) for p, a in stored.items()} != assignment:
            problems.append(f"{topic}: assignment {stored} is not {assignment}")
        for partition, replicas in assignment.items():
            name = f"{topic}-{partition}"
            state = await kafka_zk.get_partition_state(
                h.probe, TopicPartition(TopicName(topic), partition)
            )
            if state is None:
                problems.append(f"{name}: no state znode")
                continue
            leader, isr = state.state.leader, state.state.isr
            if leader not in live:
                problems.append(f"{name}: leader {leader} is not a live broker {list(live)}")
            problems += leadership_violations(name, replicas, leader, isr)
            expected[(topic, partition)] = (leader, tuple(replicas), isr)
            for replica in replicas:
                if replica in live and not (h.logs / f"broker-{replica}" / name).is_dir():
                    problems.append(f"{name}: no log directory on broker {replica}")
    for broker in live:
        view = await metadata_view(h, broker)
        if view != expected:
            differing = sorted(
                k for k in expected.keys() | view.keys() if view.get(k) != expected.get(k)
            )
            problems.append(f"broker {broker}'s metadata differs from the store on {differing[:5]}")
    return problems


async def wait_for_new_controller(h: Harness, old: int, live: Sequence[int]) -> int:
    """Until every live broker names the same live controller other than ``old``."""

    async def controllers() -> set[int]:
        return {getattr(await h.cluster.status(b), "controller_id", -1) for b in live}

    agreed = await eventually(
        controllers,
        until=lambda ids: len(ids) == 1 and next(iter(ids)) in live and old not in ids,
        timeout=30,
    )
    return next(iter(agreed))


async def wait_until_complete(h: Harness, live: Sequence[int]) -> None:
    async def probe() -> list[str]:
        return await creation_problems(h, live)

    assert await eventually(probe, until=lambda problems: not problems, timeout=30) == []


def spread(topic_index: int, partitions: int) -> Assignment:
    """RF 2 over the three brokers, shifted per topic so every broker leads some."""
    return {p: [(p + topic_index) % 3, (p + topic_index + 1) % 3] for p in range(partitions)}


async def write_topics_as_zookeeper_path(h: Harness, topics: dict[str, Assignment]) -> None:
    """``kafka-topics --zookeeper --create`` of several topics at once: their config and
    assignment znodes in one transaction, so the controller sees them in one TopicChange."""
    ops: list[StoreOp] = []
    for topic, assignment in topics.items():
        ops.append(
            CreateOp(
                path=zkdata.topic_config_path(TopicName(topic)),
                data=zkdata.EntityConfig(config={}).encode(),
            )
        )
        ops.append(
            CreateOp(
                path=zkdata.topic_path(TopicName(topic)),
                data=kafka_zk.assignment_payload(assignment),
            )
        )
    await h.probe.multi(ops)


def creatable(topic: str, assignment: Assignment) -> CreatableTopic:
    return CreatableTopic(
        name=TopicName(topic),
        num_partitions=-1,
        replication_factor=-1,
        assignments=tuple(
            PartitionAssignment(partition=p, broker_ids=tuple(BrokerId(b) for b in replicas))
            for p, replicas in assignment.items()
        ),
    )
