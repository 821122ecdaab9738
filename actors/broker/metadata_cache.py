"""A broker's metadata cache: what the controller last told it (UpdateMetadata).

Kafka's ``MetadataCache``: live brokers with their endpoints and racks, the controller id,
and every partition's leader, ISR, replicas and offline replicas. A broker learns cluster
metadata only this way (``MetadataCache.updateMetadata``). Partitions sent with leader
``LEADER_DURING_DELETE`` are removed, and a topic goes when its last partition goes. Pure
data: the broker actor owns one and is its only writer.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from protocol.control import (
    LEADER_DURING_DELETE,
    NO_LEADER,
    UpdateMetadataBroker,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from protocol.ids import BrokerId, TopicName


class TopicPartitions(Mapping[int, UpdateMetadataPartitionState]):
    """One topic's partition states, indexed by partition number: a list with holes rather
    than a dict, since every broker holds every partition (100 brokers x 100,000
    partitions are 10 million entries: a dict costs about 47 bytes an entry, a list slot 8;
    the states themselves are shared by the brokers, as the controller sent them). A new
    topic's table starts as a tuple that the brokers of one process share (``of``), copied
    into the table's own list at its first change."""

    __slots__ = ("_count", "_states")

    def __init__(self) -> None:
        self._states: (
            list[UpdateMetadataPartitionState | None] | tuple[UpdateMetadataPartitionState, ...]
        ) = []
        self._count = 0

    @classmethod
    def of(cls, states: tuple[UpdateMetadataPartitionState, ...]) -> TopicPartitions:
        """A table holding ``states``, which are partitions 0, 1, ... in order (a new
        topic as the controller announces it: the tuple is shared as it is)."""
        table = cls()
        table._states = states
        table._count = len(states)
        return table

    def _own(self) -> list[UpdateMetadataPartitionState | None]:
        """The table's list to change (a shared tuple copied first)."""
        states = self._states
        if isinstance(states, tuple):
            states = self._states = list(states)
        return states

    def put(self, state: UpdateMetadataPartitionState) -> None:
        states, partition = self._own(), state.partition
        if partition < len(states):  # a known partition's new state, or a hole filled
            if states[partition] is None:
                self._count += 1
            states[partition] = state
            return
        if partition > len(states):
            states.extend([None] * (partition - len(states)))
        states.append(state)  # the next one: how a new topic's partitions come
        self._count += 1

    def put_range(
        self, states: tuple[UpdateMetadataPartitionState, ...], start: int, end: int
    ) -> None:
        """``put`` of ``states[start:end]``, none of them a deletion: a run of one topic's
        states in an UpdateMetadata (a new controller's names every partition, each
        broker applying it)."""
        table, count = self._own(), self._count
        for index in range(start, end):
            state = states[index]
            partition = state.partition
            size = len(table)
            if partition < size:
                if table[partition] is None:
                    count += 1
                table[partition] = state
                continue
            if partition > size:
                table.extend([None] * (partition - size))
            table.append(state)
            count += 1
        self._count = count

    def remove(self, partition: int) -> None:
        states = self._own()
        if partition < len(states) and states[partition] is not None:
            states[partition] = None
            self._count -= 1

    def __getitem__(self, partition: int) -> UpdateMetadataPartitionState:
        states = self._states
        state = states[partition] if 0 <= partition < len(states) else None
        if state is None:
            raise KeyError(partition)
        return state

    def get(self, partition: int, default: object = None) -> UpdateMetadataPartitionState | None:  # type: ignore[override]
        """The state of ``partition``, or ``default`` (as a Mapping's ``get``)."""
        states = self._states
        state = states[partition] if 0 <= partition < len(states) else None
        return default if state is None else state  # type: ignore[return-value]

    def __iter__(self) -> Iterator[int]:
        return (p for p, state in enumerate(self._states) if state is not None)

    def __len__(self) -> int:
        return self._count

    def values(self) -> list[UpdateMetadataPartitionState]:  # type: ignore[override]
        return [state for state in self._states if state is not None]

    def items(self) -> list[tuple[int, UpdateMetadataPartitionState]]:  # type: ignore[override]
        return [(p, state) for p, state in enumerate(self._states) if state is not None]

    def __repr__(self) -> str:
        return f"TopicPartitions({dict(self.items())!r})"


_NO_PARTITIONS = TopicPartitions()

TopicRun = tuple[TopicName, int, int, bool, bool]
"""One topic's consecutive states in an UpdateMetadata: the topic, where they start and
end, whether they are its partitions 0, 1, ... in order with none deleted, and whether
one of them is a deletion."""

_last_runs: tuple[tuple[UpdateMetadataPartitionState, ...], tuple[TopicRun, ...]] = ((), ())


def topic_runs(states: tuple[UpdateMetadataPartitionState, ...]) -> tuple[TopicRun, ...]:
    """The runs of ``states``. The controller sends one tuple of states to every broker
    (``ControllerBrokerRequestBatch``: the partition states are shared), so the runs of the
    last tuple are kept: the brokers of one process find them once, not once each (100
    brokers x 100,000 partitions). The tuple is kept with them, so its identity cannot be
    taken by another one meanwhile."""
    global _last_runs  # a memo of a pure function of an immutable value
    last = _last_runs  # one read: the key and its runs together
    if last[0] is states:
        return last[1]
    runs: list[TopicRun] = []
    start = 0
    topic: TopicName | None = None
    whole, deletes = True, False
    for index, state in enumerate(states):
        if state.topic != topic:
            if topic is not None:
                runs.append((topic, start, index, whole, deletes))
            topic, start, whole, deletes = state.topic, index, True, False
        if state.leader == LEADER_DURING_DELETE:
            whole, deletes = False, True
        elif whole and state.partition != index - start:
            whole = False
    if topic is not None:
        runs.append((topic, start, len(states), whole, deletes))
    _last_runs = (states, tuple(runs))
    return _last_runs[1]


_last_slices: tuple[
    tuple[UpdateMetadataPartitionState, ...], dict[int, tuple[UpdateMetadataPartitionState, ...]]
] = ((), {})


def _run_states(
    states: tuple[UpdateMetadataPartitionState, ...], start: int, end: int
) -> tuple[UpdateMetadataPartitionState, ...]:
    """``states[start:end]``, one tuple for every broker of the process that applies the
    same request (kept as ``topic_runs`` keeps its runs: 100 brokers x 1,000 new topics
    would copy every state a hundred times)."""
    global _last_slices  # a memo of a pure function of an immutable value
    last = _last_slices
    if last[0] is not states:
        last = _last_slices = (states, {})
    run = last[1].get(start)
    if run is None:
        run = last[1][start] = tuple(states[start:end])  # a tuple: never changed
    return run


class MetadataUpdate(NamedTuple):
    """What one UpdateMetadata changed: the topics it mentioned and the partitions it
    deleted (announced with ``LEADER_DURING_DELETE``), in the request's order."""

    touched: set[TopicName]
    deleted: tuple[tuple[TopicName, int], ...]


@dataclass
class MetadataCache:
    controller_id: BrokerId | None = None
    brokers: dict[BrokerId, UpdateMetadataBroker] = field(default_factory=dict)
    topics: dict[TopicName, TopicPartitions] = field(default_factory=dict)
    updates: int = 0
    """How many UpdateMetadata requests were applied: a reader that polls the cache (the
    failover bench) looks at it again only when this changed."""

    def replica_count(self) -> int:
        """The replicas of every partition in the cache (``kemu.max.replicas.per.cluster``)."""
        return sum(len(s.replicas) for ps in self.topics.values() for s in ps.values())

    def update(self, request: UpdateMetadataRequest) -> MetadataUpdate:
        """Apply an UpdateMetadata; return the topics it mentioned (to poke purgatories)
        and the partitions it deleted. The controller sends a topic's partitions together:
        a new topic's run of partitions 0, 1, ... becomes its table as it is (one copy of
        the run), any other run is applied a state at a time (in one call when it deletes
        nothing)."""
        self.updates += 1
        self.controller_id = request.controller_id
        self.brokers = {b.id: b for b in sorted(request.live_brokers, key=lambda b: b.id)}
        touched: set[TopicName] = set()
        deleted: list[tuple[TopicName, int]] = []
        topics = self.topics
        states = request.partition_states
        for topic, start, end, whole, deletes in topic_runs(states):
            touched.add(topic)
            partitions = topics.get(topic)
            if partitions is None and whole:
                topics[topic] = TopicPartitions.of(_run_states(states, start, end))
                continue
            if not deletes:  # a known topic's run, or a new one's out of order
                if partitions is None:
                    partitions = topics[topic] = TopicPartitions()
                partitions.put_range(states, start, end)
                continue
            for state in states[start:end]:
                if partitions is None:
                    partitions = topics[topic] = TopicPartitions()
                if state.leader == LEADER_DURING_DELETE:
                    deleted.append((topic, state.partition))
                    partitions.remove(state.partition)
                    if not partitions:
                        del topics[topic]
                        partitions = None  # a later state of this topic makes a new table
                else:
                    partitions.put(state)
        return MetadataUpdate(touched, tuple(deleted))

    # -- queries

    def contains(self, topic: str) -> bool:
        return topic in self.topics

    def topic_names(self) -> list[TopicName]:
        return sorted(self.topics)

    def partitions(self, topic: str) -> Mapping[int, UpdateMetadataPartitionState]:
        return self.topics.get(TopicName(topic), _NO_PARTITIONS)

    def all_partitions_have_leaders(self, topic: str, expected: int | None = None) -> bool:
        """``DelayedCreatePartitions``' condition: every partition present with a leader
        (≠ -1)."""
        partitions = self.topics.get(TopicName(topic))
        if not partitions:
            return False
        if expected is not None and len(partitions) < expected:
            return False
        return all(p.leader != NO_LEADER for p in partitions.values())

    def alive_brokers(self) -> list[UpdateMetadataBroker]:
        return [self.brokers[b] for b in sorted(self.brokers)]

    def alive_broker_ids(self) -> list[BrokerId]:
        return sorted(self.brokers)

    def racks(self) -> dict[BrokerId, str | None]:
        return {b.id: b.rack for b in self.alive_brokers()}

    def offline_replicas(self, topic: str, partition: int) -> tuple[BrokerId, ...]:
        state = self.partitions(topic).get(partition)
        return () if state is None else state.offline_replicas

    def topics_matching(self, names: Iterable[str]) -> list[TopicName]:
        wanted = set(names)
        return [t for t in self.topic_names() if t in wanted]
