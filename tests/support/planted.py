"""Deliberately broken controller variants that several suites plant (with
``monkeypatch.setattr`` or ``planted``) to show their checks catch the breakage."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from actors.controller.states import ReplicaState
from actors.controller.topic_deletion import REASON_OFFLINE_REPLICAS, TopicDeletionManager
from protocol.ids import TopicName


async def deletion_without_delete_phase(
    self: TopicDeletionManager, topics: Sequence[TopicName]
) -> None:
    """``TopicDeletionManager.on_partition_deletion`` minus phase 2 (ReplicaDeletionStarted,
    i.e. StopReplica with delete=true): replicas stop but are never deleted."""
    ctx = self.context
    replicas = [r for t in sorted(topics) for r in ctx.replicas_for_topic(t)]
    dead = [r for r in replicas if not ctx.is_replica_online(r.replica, r.topic_partition)]
    redo = [
        r
        for r in replicas
        if r not in dead and ctx.replica_state(r) is not ReplicaState.DELETION_SUCCESSFUL
    ]
    rsm = self.replica_state_machine
    await rsm.handle_state_changes(dead, ReplicaState.DELETION_INELIGIBLE)
    await rsm.handle_state_changes(redo, ReplicaState.OFFLINE)
    if dead:
        self.mark_topic_ineligible_for_deletion(
            {TopicName(r.topic) for r in dead}, REASON_OFFLINE_REPLICAS
        )


@contextmanager
def no_delete_phase() -> Iterator[None]:
    """``deletion_without_delete_phase`` planted for the duration (for module-scoped
    fixtures, which cannot use ``monkeypatch``)."""
    original = TopicDeletionManager.on_partition_deletion
    TopicDeletionManager.on_partition_deletion = deletion_without_delete_phase  # type: ignore[method-assign]
    try:
        yield
    finally:
        TopicDeletionManager.on_partition_deletion = original  # type: ignore[method-assign]
