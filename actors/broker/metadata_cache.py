"""A broker's metadata cache: what the controller last told it (UpdateMetadata).

Kafka's ``MetadataCache``: live brokers with their endpoints and racks, the controller id,
and every partition's leader, ISR, replicas and offline replicas. A broker learns cluster
metadata only this way (``MetadataCache.updateMetadata``). Partitions sent with leader
``LEADER_DURING_DELETE`` are removed, and a topic goes when its last partition goes. Pure
data: the broker actor owns one and is its only writer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from protocol.control import (
    LEADER_DURING_DELETE,
    NO_LEADER,
    UpdateMetadataBroker,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from protocol.ids import BrokerId, TopicName


@dataclass
class MetadataCache:
    controller_id: BrokerId | None = None
    brokers: dict[BrokerId, UpdateMetadataBroker] = field(default_factory=dict)
    topics: dict[TopicName, dict[int, UpdateMetadataPartitionState]] = field(default_factory=dict)

    def replica_count(self) -> int:
        """The replicas of every partition in the cache (``kemu.max.replicas.per.cluster``)."""
        return sum(len(s.replicas) for ps in self.topics.values() for s in ps.values())

    def update(self, request: UpdateMetadataRequest) -> set[TopicName]:
        """Apply an UpdateMetadata; return the topics it mentioned (to poke purgatories)."""
        self.controller_id = request.controller_id
        self.brokers = {b.id: b for b in sorted(request.live_brokers, key=lambda b: b.id)}
        touched: set[TopicName] = set()
        for state in request.partition_states:
            touched.add(state.topic)
            partitions = self.topics.setdefault(state.topic, {})
            if state.leader == LEADER_DURING_DELETE:
                partitions.pop(state.partition, None)
                if not partitions:
                    del self.topics[state.topic]
            else:
                partitions[state.partition] = state
        return touched

    # -- queries

    def contains(self, topic: str) -> bool:
        return topic in self.topics

    def topic_names(self) -> list[TopicName]:
        return sorted(self.topics)

    def partitions(self, topic: str) -> Mapping[int, UpdateMetadataPartitionState]:
        return self.topics.get(TopicName(topic), {})

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
