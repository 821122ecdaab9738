"""The controller's in-memory view of the cluster (Kafka's ``ControllerContext``).

Only the controller's event task touches it. Collections of ids and partitions are sets
for membership, but everything that iterates them sorts first, so the controller's
decisions and the requests it sends never depend on hash order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from actors.controller.model import Leadership, PartitionAndReplica
from actors.controller.states import PartitionState, ReplicaState
from protocol import zkdata
from protocol.control import TopicPartition
from protocol.ids import BrokerId, ControllerEpoch, TopicName


@dataclass(frozen=True, slots=True)
class Broker:
    """A registered broker as the controller caches it: id, endpoints, rack, features."""

    id: BrokerId
    registration: zkdata.BrokerRegistration


EMPTY_ASSIGNMENT = zkdata.ReplicaAssignment(replicas=())


def is_being_reassigned(assignment: zkdata.ReplicaAssignment) -> bool:
    return bool(assignment.adding_replicas or assignment.removing_replicas)


def target_replicas(assignment: zkdata.ReplicaAssignment) -> tuple[BrokerId, ...]:
    """The replicas a reassignment ends with: all of them but the ones being removed."""
    removing = set(assignment.removing_replicas)
    return tuple(r for r in assignment.replicas if r not in removing)


def remove_replica(
    assignment: zkdata.ReplicaAssignment, replica: BrokerId
) -> zkdata.ReplicaAssignment:
    if not (assignment.adding_replicas or assignment.removing_replicas):
        # no reassignment (a deletion's 30,000 replicas): the other two stay empty
        return zkdata.ReplicaAssignment(
            replicas=tuple([r for r in assignment.replicas if r != replica])
        )
    return zkdata.ReplicaAssignment(
        replicas=tuple(r for r in assignment.replicas if r != replica),
        adding_replicas=tuple(r for r in assignment.adding_replicas if r != replica),
        removing_replicas=tuple(r for r in assignment.removing_replicas if r != replica),
    )


class ControllerContext:
    """Epoch, brokers, topics, assignments, leaderships and the two state maps."""

    def __init__(self) -> None:
        self.epoch = ControllerEpoch(0)
        self.epoch_zk_version = 0
        self._live_brokers: dict[BrokerId, Broker] = {}
        self._live_broker_epochs: dict[BrokerId, int] = {}
        self._live_or_shutting_down_ids: frozenset[BrokerId] | None = None
        self.shutting_down_broker_ids: set[BrokerId] = set()
        self.all_topics: set[TopicName] = set()
        self.partition_assignments: dict[TopicName, dict[int, zkdata.ReplicaAssignment]] = {}
        self._leadership: dict[TopicPartition, Leadership] = {}
        self.partition_states: dict[TopicPartition, PartitionState] = {}
        self.replica_states: dict[PartitionAndReplica, ReplicaState] = {}
        self.partitions_being_reassigned: set[TopicPartition] = set()
        self.replicas_on_offline_dirs: dict[BrokerId, set[TopicPartition]] = {}
        self.topics_to_be_deleted: set[TopicName] = set()
        self.topics_with_deletion_started: set[TopicName] = set()
        self.topics_ineligible_for_deletion: set[TopicName] = set()
        self.offline_partition_count = 0
        self.unclean_leader_elections = 0
        """The count of ``ControllerStats``' UncleanLeaderElectionsPerSec meter: like
        Kafka's ``ControllerContext.stats``, kept across resignations (``reset``)."""

    # ------------------------------------------------------------------ brokers

    def set_live_brokers(self, brokers: Mapping[BrokerId, tuple[Broker, int]]) -> None:
        self._live_brokers.clear()
        self._live_broker_epochs.clear()
        self._live_or_shutting_down_ids = None
        self.add_live_brokers(brokers)

    def add_live_brokers(self, brokers: Mapping[BrokerId, tuple[Broker, int]]) -> None:
        for broker_id, (broker, epoch) in sorted(brokers.items()):
            self._live_brokers[broker_id] = broker
            self._live_broker_epochs[broker_id] = epoch
        self._live_or_shutting_down_ids = None

    def remove_live_brokers(self, broker_ids: Iterable[BrokerId]) -> None:
        for broker_id in broker_ids:
            self._live_brokers.pop(broker_id, None)
            self._live_broker_epochs.pop(broker_id, None)
        self._live_or_shutting_down_ids = None

    def update_broker_metadata(self, broker: Broker) -> None:
        if broker.id in self._live_brokers:
            self._live_brokers[broker.id] = broker

    @property
    def live_broker_ids(self) -> frozenset[BrokerId]:
        """Registered brokers that are not shutting down."""
        return frozenset(self._live_broker_epochs) - self.shutting_down_broker_ids

    @property
    def live_or_shutting_down_broker_ids(self) -> frozenset[BrokerId]:
        ids = self._live_or_shutting_down_ids
        if ids is None:  # made once per change of the live brokers, not once per call
            ids = self._live_or_shutting_down_ids = frozenset(self._live_broker_epochs)
        return ids

    @property
    def live_or_shutting_down_brokers(self) -> tuple[Broker, ...]:
        return tuple(self._live_brokers[b] for b in sorted(self._live_brokers))

    def live_or_shutting_down_broker(self, broker_id: BrokerId) -> Broker | None:
        return self._live_brokers.get(broker_id)

    @property
    def live_broker_epochs(self) -> Mapping[BrokerId, int]:
        return self._live_broker_epochs

    def is_replica_online(
        self, broker_id: BrokerId, tp: TopicPartition, *, include_shutting_down: bool = False
    ) -> bool:
        """A replica is online when its broker is live (optionally: or shutting down) and
        the partition is not on one of its failed log directories."""
        if include_shutting_down:
            broker_online = broker_id in self._live_broker_epochs
        else:
            broker_online = (
                broker_id in self._live_broker_epochs
                and broker_id not in self.shutting_down_broker_ids
            )
        return broker_online and tp not in self.replicas_on_offline_dirs.get(broker_id, ())

    def offline_replicas(
        self, tp: TopicPartition, replicas: Iterable[BrokerId]
    ) -> tuple[BrokerId, ...]:
        """Those of ``replicas`` of ``tp`` that are not online (``is_replica_online``), in
        their order: what UpdateMetadata calls the partition's offline replicas."""
        live = self._live_broker_epochs
        shutting_down = self.shutting_down_broker_ids
        offline_dirs = self.replicas_on_offline_dirs
        if not shutting_down and not offline_dirs:  # the common case, one test a replica
            return tuple([r for r in replicas if r not in live])
        return tuple(
            r
            for r in replicas
            if r not in live
            or r in shutting_down
            or (offline_dirs and tp in offline_dirs.get(r, ()))
        )

    def online_replicas(
        self, tp: TopicPartition, *, include_shutting_down: bool = False
    ) -> frozenset[BrokerId]:
        return frozenset(
            r
            for r in self.partition_replica_assignment(tp)
            if self.is_replica_online(r, tp, include_shutting_down=include_shutting_down)
        )

    # ------------------------------------------------------------------ topics and assignments

    def partition_replica_assignment(self, tp: TopicPartition) -> tuple[BrokerId, ...]:
        return self.partition_full_replica_assignment(tp).replicas

    def partition_full_replica_assignment(self, tp: TopicPartition) -> zkdata.ReplicaAssignment:
        partitions = self.partition_assignments.get(tp.topic)
        if partitions is None:
            return EMPTY_ASSIGNMENT
        return partitions.get(tp.partition, EMPTY_ASSIGNMENT)

    def update_partition_full_replica_assignment(
        self, tp: TopicPartition, assignment: zkdata.ReplicaAssignment
    ) -> None:
        self.partition_assignments.setdefault(TopicName(tp.topic), {})[tp.partition] = assignment

    def partitions_for_topic(self, topic: TopicName) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for p in sorted(self.partition_assignments.get(topic, {}))]

    @property
    def all_partitions(self) -> list[TopicPartition]:
        return [
            TopicPartition(topic, p)
            for topic in sorted(self.partition_assignments)
            for p in sorted(self.partition_assignments[topic])
        ]

    def replicas_for_partitions(
        self, partitions: Iterable[TopicPartition]
    ) -> list[PartitionAndReplica]:
        return [
            PartitionAndReplica(tp, r)
            for tp in sorted(set(partitions))
            for r in self.partition_replica_assignment(tp)
        ]

    def replicas_for_topic(self, topic: TopicName) -> list[PartitionAndReplica]:
        return self.replicas_for_partitions(self.partitions_for_topic(topic))

    def replicas_on_brokers(self, broker_ids: Iterable[BrokerId]) -> list[PartitionAndReplica]:
        wanted = set(broker_ids)
        return [
            PartitionAndReplica(tp, r)
            for tp in self.all_partitions
            for r in self.partition_replica_assignment(tp)
            if r in wanted
        ]

    def topics_with_offline_replicas(self) -> set[TopicName]:
        """The topics of ``all_topics`` with a replica that is not online
        (``is_replica_online``): those whose deletion cannot progress now."""
        live = self._live_broker_epochs
        shutting_down = self.shutting_down_broker_ids
        offline_dirs = self.replicas_on_offline_dirs
        found: set[TopicName] = set()
        for topic in self.all_topics:
            for partition, assignment in self.partition_assignments.get(topic, {}).items():
                replicas = assignment.replicas
                if any(r not in live or r in shutting_down for r in replicas) or (
                    offline_dirs
                    and any(
                        TopicPartition(topic, partition) in offline_dirs.get(r, ())
                        for r in replicas
                    )
                ):
                    found.add(topic)
                    break
        return found

    def set_all_topics(self, topics: Iterable[TopicName]) -> None:
        self.all_topics = set(topics)

    def remove_topic(self, topic: TopicName) -> None:
        self.topics_to_be_deleted.discard(topic)
        self.topics_with_deletion_started.discard(topic)
        self.topics_ineligible_for_deletion.discard(topic)
        self.all_topics.discard(topic)
        for partition in self.partition_assignments.pop(topic, {}):
            tp = TopicPartition(topic, partition)
            self._leadership.pop(tp, None)
            # NonExistent is the absence of an entry (a deleted topic's partitions end there).
            if self.partition_states.get(tp) is PartitionState.NON_EXISTENT:
                del self.partition_states[tp]

    # ------------------------------------------------------------------ deletion bookkeeping

    def is_topic_queued_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted

    def is_topic_deletion_in_progress(self, topic: str) -> bool:
        return topic in self.topics_with_deletion_started

    # ------------------------------------------------------------------ leadership

    def leadership(self, tp: TopicPartition) -> Leadership | None:
        return self._leadership.get(tp)

    def put_leadership(self, tp: TopicPartition, leadership: Leadership) -> None:
        self._leadership[tp] = leadership

    def clear_leadership(self) -> None:
        self._leadership.clear()

    @property
    def leaderships(self) -> Mapping[TopicPartition, Leadership]:
        return self._leadership

    @property
    def partitions_with_leaders(self) -> list[TopicPartition]:
        """Partitions with leadership info whose topic is not queued for deletion."""
        return sorted(
            tp for tp in self._leadership if not self.is_topic_queued_for_deletion(tp.topic)
        )

    @property
    def partitions_with_offline_leader(self) -> list[TopicPartition]:
        return sorted(
            tp
            for tp, leadership in self._leadership.items()
            if not self.is_replica_online(leadership.leader, tp)
            and not self.is_topic_queued_for_deletion(tp.topic)
        )

    def partition_leaders_on_broker(self, broker_id: BrokerId) -> list[TopicPartition]:
        return sorted(
            tp
            for tp, leadership in self._leadership.items()
            if not self.is_topic_queued_for_deletion(tp.topic)
            and leadership.leader == broker_id
            and len(self.partition_replica_assignment(tp)) > 1
        )

    @property
    def preferred_replica_imbalance_count(self) -> int:
        """Partitions (not queued for deletion) whose leader is not the preferred replica
        (computed; Kafka maintains it incrementally)."""
        count = 0
        for tp, leadership in self._leadership.items():
            if self.is_topic_queued_for_deletion(tp.topic):
                continue
            assignment = self.partition_full_replica_assignment(tp)
            if not assignment.replicas:
                continue
            preferred = assignment.replicas[0]
            if is_being_reassigned(assignment) and preferred in assignment.adding_replicas:
                balanced = preferred not in leadership.isr
            else:
                balanced = leadership.leader == preferred
            count += 0 if balanced else 1
        return count

    # ------------------------------------------------------------------ states

    def partition_state(self, tp: TopicPartition) -> PartitionState:
        return self.partition_states.get(tp, PartitionState.NON_EXISTENT)

    def put_partition_state(self, tp: TopicPartition, state: PartitionState) -> None:
        states = self.partition_states
        previous = states.get(tp, PartitionState.NON_EXISTENT)
        states[tp] = state
        if previous is not state:  # an unchanged state leaves the count as it is
            self._update_offline_count(tp, previous, state)

    def put_partition_state_if_absent(self, tp: TopicPartition, state: PartitionState) -> None:
        if tp not in self.partition_states:
            self.put_partition_state(tp, state)

    def _update_offline_count(
        self, tp: TopicPartition, previous: PartitionState, state: PartitionState
    ) -> None:
        if (previous is PartitionState.OFFLINE) is (state is PartitionState.OFFLINE):
            return  # neither into nor out of Offline
        if self.is_topic_deletion_in_progress(tp.topic):
            return
        if state is PartitionState.OFFLINE:
            self.offline_partition_count += 1
        else:
            self.offline_partition_count -= 1

    def partitions_in_states(
        self, states: Iterable[PartitionState], topic: TopicName | None = None
    ) -> list[TopicPartition]:
        wanted = set(states)
        return sorted(
            tp
            for tp, s in self.partition_states.items()
            if s in wanted and (topic is None or tp.topic == topic)
        )

    def replica_state(self, replica: PartitionAndReplica) -> ReplicaState:
        return self.replica_states.get(replica, ReplicaState.NON_EXISTENT)

    def put_replica_state(self, replica: PartitionAndReplica, state: ReplicaState) -> None:
        self.replica_states[replica] = state

    def remove_replica_state(self, replica: PartitionAndReplica) -> None:
        self.replica_states.pop(replica, None)

    # ------------------------------------------------------------------ reset

    def reset(self) -> None:
        """On resignation: forget everything (Kafka's ``resetContext``)."""
        self.topics_to_be_deleted.clear()
        self.topics_with_deletion_started.clear()
        self.topics_ineligible_for_deletion.clear()
        self.shutting_down_broker_ids.clear()
        self.epoch = ControllerEpoch(0)
        self.epoch_zk_version = 0
        self.all_topics.clear()
        self.partition_assignments.clear()
        self._leadership.clear()
        self.partitions_being_reassigned.clear()
        self.replicas_on_offline_dirs.clear()
        self.partition_states.clear()
        self.replica_states.clear()
        self.offline_partition_count = 0
        self._live_brokers.clear()
        self._live_broker_epochs.clear()
        self._live_or_shutting_down_ids = None
