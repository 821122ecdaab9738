"""One partition as a broker replicating it sees it: Kafka's ``Partition``.

The log itself is the log manager's (``actors.log.manager``); a ``Partition`` holds what
the ``ReplicaManager`` decides with: the leader and its epoch, the replicas, the log's
start and end offsets as the last append or read left them, the high watermark and, on
the leader, the ISR state and each follower's fetch state as ``actors.broker.isr``'s
``LeaderIsr`` (whose pure decisions the ISR changes use).

* ``make_leader`` / ``make_follower`` (``Partition.makeLeader`` / ``makeFollower``).
* ``update_follower_fetch_state`` (``Partition.updateFollowerFetchState``).
* ``maybe_increment_high_watermark`` (``Partition.maybeIncrementLeaderHW``): the high
  watermark rises to ``isr.high_watermark_candidate`` (the least log end offset of the
  leader and of the followers in the maximal ISR or caught up within
  ``replica.lag.time.max.ms``); it never goes down while this broker leads in one epoch.
* ``check_enough_replicas_reach_offset`` (``Partition.checkEnoughReplicasReachOffset``):
  what a DelayedProduce waiting for an offset answers, if it can answer yet.
* ``set_isr_state``: an ISR change decided by ``LeaderIsr`` (a proposal, an AlterIsr
  answer) replaces the state.
"""

from __future__ import annotations

from dataclasses import dataclass

from actors.broker.isr import DEFAULT_REPLICA_LAG_TIME_MAX_MS, LeaderIsr, high_watermark_candidate
from protocol.control import LeaderAndIsrPartitionState, TopicPartition
from protocol.errors import ErrorCode
from protocol.ids import BrokerId

__all__ = ["DEFAULT_REPLICA_LAG_TIME_MAX_MS", "Partition"]


@dataclass(slots=True)
class Partition:
    """A partition hosted by ``local`` (see the module docstring). ``isr_state`` is the
    leader's ISR and follower state, None on a follower (followers keep no ISR)."""

    tp: TopicPartition
    local: BrokerId
    leader: BrokerId
    leader_epoch: int
    partition_epoch: int
    """The partition state znode's version (``zkVersion``)."""
    replicas: tuple[BrokerId, ...]
    log_start_offset: int = 0
    log_end_offset: int = 0
    high_watermark: int = 0
    isr_state: LeaderIsr | None = None

    @property
    def is_leader(self) -> bool:
        return self.isr_state is not None

    @property
    def isr(self) -> tuple[BrokerId, ...]:
        """The committed ISR (empty on a follower)."""
        return () if self.isr_state is None else self.isr_state.isr

    @property
    def maximal_isr(self) -> tuple[BrokerId, ...]:
        return () if self.isr_state is None else self.isr_state.maximal_isr

    @property
    def leader_epoch_start_offset(self) -> int:
        return -1 if self.isr_state is None else self.isr_state.leader_epoch_start_offset

    # -- LeaderAndIsr (Partition.makeLeader / makeFollower)

    def make_leader(
        self,
        state: LeaderAndIsrPartitionState,
        *,
        log_start_offset: int,
        log_end_offset: int,
        high_watermark: int,
        now_ms: int,
    ) -> None:
        """This broker leads from ``state``'s epoch on (``LeaderIsr.become_leader``: the
        epoch starts at the log end, followers of the ISR caught up now). A broker that
        was not leader takes the checkpointed high watermark (a new leader's may be
        behind its predecessor's) until the followers' fetches move it."""
        previous = self.isr_state
        self._take(state)
        self.log_start_offset, self.log_end_offset = log_start_offset, log_end_offset
        if previous is None:
            self.high_watermark = min(max(high_watermark, log_start_offset), log_end_offset)
        self.isr_state = LeaderIsr.become_leader(
            self.tp,
            leader=self.local,
            leader_epoch=state.leader_epoch,
            replicas=state.replicas,
            isr=state.isr,
            zk_version=state.zk_version,
            log_end_offset=log_end_offset,
            now_ms=now_ms,
            previous=previous,
        )

    def make_follower(
        self,
        state: LeaderAndIsrPartitionState,
        *,
        log_start_offset: int,
        log_end_offset: int,
        high_watermark: int,
    ) -> None:
        """Another broker leads: no ISR nor follower state is kept; the high watermark
        is what this broker has (its fetcher moves it)."""
        self._take(state)
        self.isr_state = None
        self.log_start_offset, self.log_end_offset = log_start_offset, log_end_offset
        self.high_watermark = min(max(high_watermark, log_start_offset), log_end_offset)

    def _take(self, state: LeaderAndIsrPartitionState) -> None:
        self.leader = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.zk_version
        self.replicas = tuple(state.replicas)

    def set_isr_state(self, isr_state: LeaderIsr) -> None:
        """An ISR decision of ``LeaderIsr`` (a proposal in flight, an AlterIsr answer)."""
        if self.isr_state is None:
            raise ValueError(f"{self.tp}: only a leader keeps an ISR")
        self.isr_state = isr_state
        self.partition_epoch = isr_state.zk_version

    # -- the leader's bookkeeping

    def on_log_offsets(self, log_start_offset: int, log_end_offset: int) -> None:
        """The log's offsets after an append or at a read."""
        self.log_start_offset = max(self.log_start_offset, log_start_offset)
        self.log_end_offset = log_end_offset

    def on_log_start(self, log_start_offset: int) -> None:
        """The log's start moved without an append or a read (retention)."""
        self.log_start_offset = max(self.log_start_offset, log_start_offset)

    def update_follower_fetch_state(
        self,
        replica: BrokerId,
        *,
        fetch_offset: int,
        follower_log_start_offset: int,
        leader_log_end_offset: int,
        now_ms: int,
    ) -> bool:
        """A follower fetched at ``fetch_offset`` while the leader's log ended at
        ``leader_log_end_offset``; False if ``replica`` is not a follower here."""
        state = self.isr_state
        if state is None or replica not in state.followers:
            return False
        self.isr_state = state.on_follower_fetch(
            replica,
            fetch_offset=fetch_offset,
            follower_log_start_offset=follower_log_start_offset,
            fetch_time_ms=now_ms,
            leader_log_end_offset=leader_log_end_offset,
        )
        return True

    def maybe_increment_high_watermark(self, now_ms: int, replica_lag_time_max_ms: int) -> bool:
        """Raise the high watermark to ``high_watermark_candidate``; whether it moved.
        The candidate is at most the leader's log end: with the high watermark there
        already (every new leader of an empty log, each idle partition a follower's fetch
        reaches) it cannot rise, and the followers are not looked at."""
        if self.isr_state is None or self.log_end_offset <= self.high_watermark:
            return False
        candidate = high_watermark_candidate(
            self.isr_state, self.log_end_offset, now_ms, replica_lag_time_max_ms
        )
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    def check_enough_replicas_reach_offset(
        self, required_offset: int, min_insync_replicas: int
    ) -> ErrorCode | None:
        """A DelayedProduce's answer for this partition, None while it must wait: not the
        leader any more, NOT_LEADER_OR_FOLLOWER; the high watermark reached, NONE, or
        NOT_ENOUGH_REPLICAS_AFTER_APPEND if the maximal ISR is below
        ``min.insync.replicas``."""
        if not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.high_watermark < required_offset:
            return None
        if len(self.maximal_isr) < min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE

    def fence(self, current_leader_epoch: int) -> ErrorCode | None:
        """The fencing of a request naming the epoch it knows (KIP-320): older,
        FENCED_LEADER_EPOCH; newer, UNKNOWN_LEADER_EPOCH; -1 skips the check."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return None
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return ErrorCode.UNKNOWN_LEADER_EPOCH
