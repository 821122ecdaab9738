"""Kafka's ``TopicDeletionManager``: what happens to a topic between its
``/admin/delete_topics/<t>`` marker and the removal of its znodes.

A queued topic moves through the two state machines:

* ``on_topic_deletion``: its partitions Offline → NonExistent, then an UpdateMetadata of all
  its partitions to every broker (leader -2: brokers drop the topic from their caches);
* ``on_partition_deletion``: replicas on dead brokers → ReplicaDeletionIneligible (the
  topic becomes ineligible: deletion paused); live ones → OfflineReplica (phase 1:
  StopReplica(delete=false) and the ISR shrink), then → ReplicaDeletionStarted (phase 2:
  StopReplica(delete=true), whose responses come back as
  ``TopicDeletionStopReplicaResponseReceived`` events);
* a successful response → ReplicaDeletionSuccessful; an error, or the replica's broker
  dying → ReplicaDeletionIneligible;
* once every replica is ReplicaDeletionSuccessful, ``complete_delete_topics`` removes the
  replicas and the znodes (``/brokers/topics/<t>``, ``/config/topics/<t>``, the marker).

Progress is purely event driven: ``resume_deletions`` runs after every enqueue, success,
failure and resumption, and once on failover. There is no timer. A paused topic resumes
when a broker hosting one of its replicas starts, when a reassignment of one of its
partitions completes, or when a new controller takes over.

With ``delete.topic.enable=false`` nothing is ever queued: markers are removed and the
topics left alone (``KafkaController.processTopicDeletion`` and
``TopicDeletionManager.init`` with ``isDeleteTopicEnabled`` false).

The manager holds no state of its own: the three deletion sets live in the
``ControllerContext`` (reset on resignation), the replica states in the replica state
machine. Its I/O goes through a ``DeletionClient`` (the controller) so that tests can watch
what it asks for.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol

import structlog

from actors.controller.context import ControllerContext
from actors.controller.model import PartitionAndReplica
from actors.controller.partition_state_machine import PartitionStateMachine
from actors.controller.replica_state_machine import ReplicaStateMachine
from actors.controller.states import PartitionState, ReplicaState
from actors.runtime.tracer import TraceFn
from protocol.control import TopicPartition
from protocol.ids import TopicName
from protocol.zkdata import ReplicaAssignment

log = structlog.get_logger("kemu.controller.topic_deletion")

REASON_OFFLINE_REPLICAS = "offline replicas"
REASON_REPLICA_DELETION_FAILURE = "replica deletion failure"
REASON_REASSIGNMENT = "topic reassignment in progress"


class DeletionClient(Protocol):
    """What the deletion manager asks of the controller (Kafka's ``DeletionClient``)."""

    async def delete_topics(self, topics: Sequence[TopicName]) -> None:
        """For each topic, in order: remove ``/brokers/topics/<t>`` (recursively),
        ``/config/topics/<t>`` and ``/admin/delete_topics/<t>``, every write fenced by the
        controller epoch (the topics' writes pipelined)."""

    async def delete_topic_deletions(self, topics: Sequence[TopicName]) -> None:
        """Remove the ``/admin/delete_topics/<t>`` markers (fenced)."""

    def mute_partition_modifications(self, topic: TopicName) -> None:
        """Stop watching ``/brokers/topics/<t>``: a re-created topic must be seen through
        ``TopicChange`` first, not as a modification of the deleted one."""

    async def send_metadata_update(self, partitions: Sequence[TopicPartition]) -> None:
        """UpdateMetadata of ``partitions`` to every live or shutting-down broker."""


class TopicDeletionManager:
    def __init__(
        self,
        context: ControllerContext,
        replica_state_machine: ReplicaStateMachine,
        partition_state_machine: PartitionStateMachine,
        client: DeletionClient,
        *,
        delete_topic_enable: bool,
        trace: TraceFn | None = None,
    ) -> None:
        self.context = context
        self.replica_state_machine = replica_state_machine
        self.partition_state_machine = partition_state_machine
        self.client = client
        self.enabled = delete_topic_enable
        self._trace = trace

    # ------------------------------------------------------------------ entry points

    async def init(
        self, initial_to_delete: Iterable[TopicName], initial_ineligible: Iterable[TopicName]
    ) -> None:
        """Failover (``onControllerFailover`` step 5, ``init``): queue the marked topics and pause
        those that cannot progress now; with deletion disabled, remove the markers instead."""
        to_delete = set(initial_to_delete)
        log.info(
            "topic_deletion_init",
            to_delete=sorted(to_delete),
            ineligible=sorted(initial_ineligible),
        )
        if self.enabled:
            self.context.topics_to_be_deleted.update(to_delete)
            self.context.topics_ineligible_for_deletion.update(set(initial_ineligible) & to_delete)
        elif to_delete:
            log.info("topic_deletion_disabled_removing_markers", topics=sorted(to_delete))
            await self.client.delete_topic_deletions(sorted(to_delete))

    async def try_topic_deletion(self) -> None:
        """Failover (``onControllerFailover`` step 10, ``tryTopicDeletion``): restart whatever
        deletion can progress."""
        if self.enabled:
            await self.resume_deletions()

    async def enqueue_topics_for_deletion(
        self,
        topics: Iterable[TopicName],
        *,
        ineligible: Iterable[TopicName] = (),
        reason: str = REASON_REASSIGNMENT,
    ) -> None:
        """Queue ``topics`` and start what can start. ``ineligible`` topics (a partition
        being reassigned) are queued paused. Kafka 2.7 marks them ineligible *before*
        queueing them, which does nothing for a topic not queued yet, so its deletion starts
        in the middle of the reassignment; kemu pauses it, as Kafka intends (a reassigning
        topic is ineligible for deletion), and resumes it when the reassignment
        completes."""
        if not self.enabled:
            return
        new = set(topics)
        self.context.topics_to_be_deleted.update(new)
        self._event("topic_deletion_enqueued", topics=sorted(new))
        self.mark_topic_ineligible_for_deletion(set(ineligible) & new, reason)
        await self.resume_deletions()

    async def resume_deletion_for_topics(self, topics: Iterable[TopicName]) -> None:
        """A broker hosting a replica started, or a reassignment completed."""
        if not self.enabled:
            return
        resumed = set(topics) & self.context.topics_to_be_deleted
        # A topic with a partition still being reassigned stays paused until its
        # reassignment completes (``onPartitionReassignment`` marks it ineligible), even when
        # a broker hosting it restarts.
        resumed -= {TopicName(tp.topic) for tp in self.context.partitions_being_reassigned}
        if resumed:
            self.context.topics_ineligible_for_deletion -= resumed
            self._event("topic_deletion_resumed", topics=sorted(resumed))
            await self.resume_deletions()

    def mark_topic_ineligible_for_deletion(self, topics: Iterable[TopicName], reason: str) -> None:
        if not self.enabled:
            return
        halted = set(topics) & self.context.topics_to_be_deleted
        new = halted - self.context.topics_ineligible_for_deletion
        self.context.topics_ineligible_for_deletion |= halted
        if new:
            self._event("topic_deletion_halted", topics=sorted(new), reason=reason)

    async def fail_replica_deletion(self, replicas: Iterable[PartitionAndReplica]) -> None:
        """A StopReplica(delete=true) failed, or the replica's broker or log dir went
        offline while its topic is queued: the replica → ReplicaDeletionIneligible and the
        topic paused."""
        if not self.enabled:
            return
        failed = sorted(self._queued_replicas(replicas))
        if not failed:
            return
        topics = {TopicName(r.topic) for r in failed}
        log.info("replica_deletion_failed", replicas=[str(r) for r in failed])
        await self.replica_state_machine.handle_state_changes(
            failed, ReplicaState.DELETION_INELIGIBLE
        )
        self.mark_topic_ineligible_for_deletion(topics, REASON_REPLICA_DELETION_FAILURE)
        await self.resume_deletions()

    async def complete_replica_deletion(self, replicas: Iterable[PartitionAndReplica]) -> None:
        """A StopReplica(delete=true) succeeded: the replica → ReplicaDeletionSuccessful.
        The replicas are handed over unsorted (``handle_state_changes`` sorts each broker's
        group itself) and listed, sorted, only when the DEBUG line is logged: a bulk
        deletion's answers bring 30,000 of them."""
        done = self._queued_replicas(replicas)
        if not done:
            return
        if log.is_enabled_for(logging.DEBUG):
            log.debug("replica_deletion_successful", replicas=[str(r) for r in sorted(done)])
        await self.replica_state_machine.handle_state_changes(
            done, ReplicaState.DELETION_SUCCESSFUL
        )
        await self.resume_deletions()

    # ------------------------------------------------------------------ queries

    def is_topic_queued_for_deletion(self, topic: str) -> bool:
        return self.enabled and self.context.is_topic_queued_for_deletion(topic)

    def is_topic_ineligible_for_deletion(self, topic: str) -> bool:
        return not self.enabled or topic in self.context.topics_ineligible_for_deletion

    def is_topic_deletion_in_progress(self, topic: str) -> bool:
        """Some replica of the topic waits for its StopReplica(delete=true) answer."""
        return self.enabled and self._any_replica_in(topic, ReplicaState.DELETION_STARTED)

    def is_topic_eligible_for_deletion(self, topic: str) -> bool:
        return (
            self.is_topic_queued_for_deletion(topic)
            and not self.is_topic_deletion_in_progress(topic)
            and not self.is_topic_ineligible_for_deletion(topic)
        )

    # ------------------------------------------------------------------ the algorithm

    async def resume_deletions(self) -> None:
        """Kafka's ``resumeDeletions``: complete the topics whose replicas are all deleted, retry
        the paused replicas of topics with nothing in flight, start the eligible topics."""
        ctx = self.context
        queued = sorted(ctx.topics_to_be_deleted)
        if queued:
            log.info("handling_topic_deletions", topics=queued)
        complete: list[TopicName] = []
        retry: list[TopicName] = []
        start: list[TopicName] = []
        for topic in queued:
            # Each topic's replica states are gathered once for the checks below (every
            # queued topic is looked at on every resumption, as in Kafka). A replica whose
            # deletion is in flight settles them all: the topic is neither complete, nor to
            # retry, nor to start; the states are read no further (a bulk deletion's
            # resumptions find most topics so, each StopReplica answer resuming them all).
            states: set[ReplicaState] = set()
            for state in self._replica_states(topic):
                if state is ReplicaState.DELETION_STARTED:
                    break
                states.add(state)
            else:
                if states <= {ReplicaState.DELETION_SUCCESSFUL}:
                    complete.append(topic)  # then no longer queued, so not eligible
                    continue
                if ReplicaState.DELETION_INELIGIBLE in states:
                    retry.append(topic)
                if self.is_topic_queued_for_deletion(
                    topic
                ) and not self.is_topic_ineligible_for_deletion(topic):
                    start.append(topic)
        if complete:
            await self.complete_delete_topics(complete)
        if retry:
            await self._retry_deletion_for_ineligible_replicas(retry)
        if start:
            await self.on_topic_deletion(start)

    async def _retry_deletion_for_ineligible_replicas(self, topics: list[TopicName]) -> None:
        """Paused replicas go back to OfflineReplica; ``on_partition_deletion`` re-sends both
        phases to them once their topic is eligible again."""
        replicas = [
            r
            for topic in topics
            for r in self.context.replicas_for_topic(topic)
            if self.context.replica_state(r) is ReplicaState.DELETION_INELIGIBLE
        ]
        log.info("retrying_ineligible_replicas", replicas=[str(r) for r in replicas])
        await self.replica_state_machine.handle_state_changes(replicas, ReplicaState.OFFLINE)

    async def on_topic_deletion(self, topics: Sequence[TopicName]) -> None:
        ctx = self.context
        fresh = sorted(set(topics) - ctx.topics_with_deletion_started)
        self._event("topic_deletion_started", topics=sorted(topics), fresh=fresh)
        if fresh:
            partitions = [tp for topic in fresh for tp in ctx.partitions_for_topic(topic)]
            psm = self.partition_state_machine
            await psm.handle_state_changes(partitions, PartitionState.OFFLINE)
            await psm.handle_state_changes(partitions, PartitionState.NON_EXISTENT)
            # After the transitions, so that the offline-partition count forgets them.
            ctx.topics_with_deletion_started.update(fresh)
        # Leader -2 for all of them: brokers drop the topics from their metadata caches.
        await self.client.send_metadata_update(
            [tp for topic in sorted(topics) for tp in ctx.partitions_for_topic(topic)]
        )
        await self.on_partition_deletion(topics)

    async def on_partition_deletion(self, topics: Sequence[TopicName]) -> None:
        ctx = self.context
        dead: list[PartitionAndReplica] = []
        redo: list[PartitionAndReplica] = []
        ineligible: set[TopicName] = set()
        for topic in sorted(topics):
            for replica in ctx.replicas_for_topic(topic):
                if ctx.is_replica_online(replica.replica, replica.topic_partition):
                    if ctx.replica_state(replica) is not ReplicaState.DELETION_SUCCESSFUL:
                        redo.append(replica)
                else:
                    dead.append(replica)
                    ineligible.add(topic)
        rsm = self.replica_state_machine
        await rsm.handle_state_changes(dead, ReplicaState.DELETION_INELIGIBLE)
        # Phase 1: stop serving (StopReplica delete=false, ISR shrink); phase 2: delete.
        await rsm.handle_state_changes(redo, ReplicaState.OFFLINE)
        await rsm.handle_state_changes(redo, ReplicaState.DELETION_STARTED)
        if ineligible:
            self.mark_topic_ineligible_for_deletion(ineligible, REASON_OFFLINE_REPLICAS)

    async def complete_delete_topics(self, topics: Sequence[TopicName]) -> None:
        """``completeDeleteTopic`` of each topic, in order, with one difference: the
        topics' znodes go in one pipelined batch (each topic's in Kafka's order, its
        marker last) instead of one store round trip per znode, so each step runs for all
        of the topics before the next: partition watches muted, the deleted replicas →
        NonExistent, the topics dequeued, their znodes removed, the topics forgotten."""
        ctx = self.context
        for topic in topics:
            self.client.mute_partition_modifications(topic)
        deleted = [
            r
            for topic in topics
            for r in ctx.replicas_for_topic(topic)
            if ctx.replica_state(r) is ReplicaState.DELETION_SUCCESSFUL
        ]
        await self.replica_state_machine.handle_state_changes(deleted, ReplicaState.NON_EXISTENT)
        for topic in topics:
            ctx.topics_to_be_deleted.discard(topic)
            ctx.topics_with_deletion_started.discard(topic)
        await self.client.delete_topics(topics)
        for topic in topics:
            ctx.remove_topic(topic)
            log.info("topic_deletion_completed", topic=topic)
            self._event("topic_deletion_completed", topic=topic)

    # ------------------------------------------------------------------ helpers

    def _queued_replicas(
        self, replicas: Iterable[PartitionAndReplica]
    ) -> list[PartitionAndReplica]:
        """Those of ``replicas`` (each once, in the order given) of a queued topic that are
        still assigned: a late StopReplica answer for a replica a reassignment already
        removed (and moved to NonExistent) is not this manager's to record. A topic's
        queue and assignments are looked up once for the replicas of it given in a row
        (a StopReplica answer lists each topic's partitions together)."""
        if not self.enabled:
            return []
        queued = self.context.topics_to_be_deleted
        assignments = self.context.partition_assignments
        kept: list[PartitionAndReplica] = []
        topic: TopicName | None = None
        partitions: dict[int, ReplicaAssignment] | None = None
        for replica in dict.fromkeys(replicas):
            tp = replica.topic_partition
            if tp.topic != topic:
                topic = tp.topic
                partitions = assignments.get(topic) if topic in queued else None
            if partitions is None:
                continue
            assignment = partitions.get(tp.partition)
            if assignment is not None and replica.replica in assignment.replicas:
                kept.append(replica)
        return kept

    def _replica_states(self, topic: str) -> Iterator[ReplicaState]:
        """The states of the topic's replicas (in no particular order), read as they are
        consumed."""
        ctx = self.context
        name = TopicName(topic)
        return (
            ctx.replica_state(PartitionAndReplica(TopicPartition(name, p), r))
            for p, assignment in ctx.partition_assignments.get(name, {}).items()
            for r in assignment.replicas
        )

    def _all_replicas_in(self, topic: str, state: ReplicaState) -> bool:
        return all(s is state for s in self._replica_states(topic))

    def _any_replica_in(self, topic: str, state: ReplicaState) -> bool:
        return any(s is state for s in self._replica_states(topic))

    def _event(self, name: str, **fields: object) -> None:
        if self._trace is not None:
            self._trace("event", name, **fields)
