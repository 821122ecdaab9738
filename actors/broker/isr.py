"""A partition leader's view of its followers and ISR: Kafka 2.7's ``Replica`` fetch state
and ``Partition``'s ISR decisions (``maybeExpandIsr``, ``maybeShrinkIsr``,
``maybeIncrementLeaderHW``), as pure values and functions.

The broker owns one ``LeaderIsr`` per partition it leads and replaces it as things happen
(a follower fetch, the ISR-expiration timer, an AlterIsr answer, a new LeaderAndIsr); the
functions here decide, the broker does the I/O: it queues the ``AlterIsrPartition`` a
decision returns with the ``AlterIsrManager`` (``actors.broker.alter_isr_manager``) and
feeds the controller's answer back through ``LeaderIsr.on_alter_isr_result``.

ISR state (Kafka's ``IsrState``): the committed ISR (what the last LeaderAndIsr or AlterIsr
answer said), and at most one change in flight: a pending expand (one follower joining)
or a pending shrink (followers leaving). While a change is in flight no other is proposed.
The *maximal* ISR, which the high watermark waits for, counts a joining follower already
and leaving ones still: a pending expand is the committed ISR plus the new member, a
pending shrink the committed ISR. A change answered with a fatal partition error
(UNKNOWN_TOPIC_OR_PARTITION, FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION) stays pending
until the next LeaderAndIsr resets the state, as in 2.7.

Follower fetch state (``Replica.updateFetchState``): its log end offset is the fetch
offset; its last caught-up time becomes the fetch time when it fetched from the leader's
log end, else the previous fetch's time when it fetched from the leader's log end as of
that previous fetch (never decreasing).

Out of sync (``Partition.getOutOfSyncReplicas``): an ISR follower whose log end offset
differs from the leader's and that has not caught up for more than
``replica.lag.time.max.ms``. Caught up enough to join (``isFollowerAtHighwatermark``): its
log end offset reaches the leader's high watermark and the start offset of the leader's
epoch, and it is an assigned replica.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from enum import Enum
from typing import Final

import msgspec

from protocol.control import AlterIsrPartition, AlterIsrPartitionResult, TopicPartition
from protocol.errors import ErrorCode
from protocol.ids import BrokerId, LeaderEpoch, TopicName

__all__ = [
    "DEFAULT_REPLICA_LAG_TIME_MAX_MS",
    "FATAL_ALTER_ISR_ERRORS",
    "NEVER_MS",
    "FollowerState",
    "IsrUpdate",
    "LeaderIsr",
    "high_watermark_candidate",
]

DEFAULT_REPLICA_LAG_TIME_MAX_MS = 30_000
"""``replica.lag.time.max.ms`` (Kafka 2.5 and later)."""

NEVER_MS: Final = -(1 << 62)
"""A time that never was: a follower that never caught up, a fetch that never came. Every
time here is the broker's clock in ms (``Clock.now``, monotonic, on the leader's fetch
path and its ISR-expiration timer alike). Kafka writes 0 there and reads wall time, where
0 is long ago; on a monotonic or virtual clock that starts near 0 it is not, and such a
follower would count as caught up for the first ``replica.lag.time.max.ms``."""

FATAL_ALTER_ISR_ERRORS = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.INVALID_UPDATE_VERSION,
    }
)
"""Partition errors after which 2.7 leaves the change pending until the next LeaderAndIsr."""


class IsrUpdate(Enum):
    """How an answered ISR change is metered: the ``ReplicaManager`` meter it marks."""

    EXPAND = "IsrExpandsPerSec"
    SHRINK = "IsrShrinksPerSec"
    FAILED = "FailedIsrUpdatesPerSec"


class FollowerState(msgspec.Struct, frozen=True, kw_only=True):
    """Kafka's ``Replica`` as a leader keeps it for one follower. ``log_end_offset`` -1:
    not known yet (no fetch since this broker became leader); times are ``NEVER_MS``
    until they happen."""

    log_end_offset: int = -1
    log_start_offset: int = -1
    last_caught_up_time_ms: int = NEVER_MS
    last_fetch_leader_log_end_offset: int = -1
    last_fetch_time_ms: int = NEVER_MS

    def after_fetch(
        self,
        *,
        fetch_offset: int,
        follower_log_start_offset: int,
        fetch_time_ms: int,
        leader_log_end_offset: int,
    ) -> FollowerState:
        """``Replica.updateFetchState`` for an error-free fetch at ``fetch_offset``."""
        caught_up = self.last_caught_up_time_ms
        if fetch_offset >= leader_log_end_offset:
            caught_up = max(caught_up, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            caught_up = max(caught_up, self.last_fetch_time_ms)
        return FollowerState(
            log_end_offset=fetch_offset,
            log_start_offset=follower_log_start_offset,
            last_caught_up_time_ms=caught_up,
            last_fetch_leader_log_end_offset=leader_log_end_offset,
            last_fetch_time_ms=fetch_time_ms,
        )


class LeaderIsr(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A led partition's ISR state and followers (see the module docstring).

    ``zk_version`` is the state znode version the committed ISR came from;
    ``pending_isr`` the ISR proposed to the controller (None: nothing in flight);
    ``stuck``: a proposal got a fatal answer and no change may be proposed until the next
    LeaderAndIsr (``reset``).
    """

    partition: TopicPartition
    leader: BrokerId
    leader_epoch: LeaderEpoch
    replicas: tuple[BrokerId, ...]
    isr: tuple[BrokerId, ...]
    zk_version: int
    leader_epoch_start_offset: int
    followers: Mapping[BrokerId, FollowerState] = msgspec.field(default_factory=dict)
    pending_isr: tuple[BrokerId, ...] | None = None
    stuck: bool = False

    @classmethod
    def become_leader(
        cls,
        partition: TopicPartition,
        *,
        leader: BrokerId,
        leader_epoch: LeaderEpoch,
        replicas: Sequence[BrokerId],
        isr: Sequence[BrokerId],
        zk_version: int,
        log_end_offset: int,
        now_ms: int,
        previous: LeaderIsr | None = None,
    ) -> LeaderIsr:
        """``Partition.makeLeader``: the ISR and zkVersion from the LeaderAndIsr, nothing
        pending, the epoch starting at the log end; ISR followers count as caught up now,
        the others never, and every follower's last fetch is taken as now at the epoch's
        start (``Replica.resetLastCaughtUpTime``); follower offsets are kept only if this
        broker already led."""
        kept = previous.followers if previous is not None else {}
        followers: dict[BrokerId, FollowerState] = {}
        for r in replicas:
            if r == leader:
                continue
            caught_up = now_ms if r in isr else NEVER_MS
            known = kept.get(r)
            if known is None:  # a new leader's followers: built once, not copied
                followers[r] = FollowerState(
                    last_caught_up_time_ms=caught_up,
                    last_fetch_leader_log_end_offset=log_end_offset,
                    last_fetch_time_ms=now_ms,
                )
                continue
            followers[r] = msgspec.structs.replace(
                known,
                last_caught_up_time_ms=caught_up,
                last_fetch_leader_log_end_offset=log_end_offset,
                last_fetch_time_ms=now_ms,
            )
        return cls(
            partition=partition,
            leader=leader,
            leader_epoch=leader_epoch,
            replicas=tuple(replicas),
            isr=tuple(isr),
            zk_version=zk_version,
            leader_epoch_start_offset=log_end_offset,
            followers=followers,
        )

    # ------------------------------------------------------------------ views

    @property
    def in_flight(self) -> bool:
        return self.pending_isr is not None

    @property
    def maximal_isr(self) -> tuple[BrokerId, ...]:
        """What the high watermark waits for: a joining follower counts already, leaving
        ones still count (Kafka's ``IsrState.maximalIsr``)."""
        pending = self.pending_isr
        if pending is None:
            return self.isr
        return (*self.isr, *(r for r in pending if r not in self.isr))

    # ------------------------------------------------------------------ followers

    def on_follower_fetch(
        self,
        follower: BrokerId,
        *,
        fetch_offset: int,
        follower_log_start_offset: int,
        fetch_time_ms: int,
        leader_log_end_offset: int,
    ) -> LeaderIsr:
        """``Partition.updateFollowerFetchState``: a fetch from a broker that is not an
        assigned follower changes nothing."""
        known = self.followers.get(follower)
        if known is None:
            return self
        followers = dict(self.followers)
        followers[follower] = known.after_fetch(
            fetch_offset=fetch_offset,
            follower_log_start_offset=follower_log_start_offset,
            fetch_time_ms=fetch_time_ms,
            leader_log_end_offset=leader_log_end_offset,
        )
        return msgspec.structs.replace(self, followers=followers)

    # ------------------------------------------------------------------ decisions

    def expand_candidate(self, follower: BrokerId, high_watermark: int) -> BrokerId | None:
        """``Partition.needsExpandIsr``: ``follower`` if it should join the ISR now."""
        state = self.followers.get(follower)
        if state is None or self.in_flight or self.stuck or follower in self.isr:
            return None
        leo = state.log_end_offset
        if leo >= high_watermark and leo >= self.leader_epoch_start_offset:
            return follower
        return None

    def out_of_sync_replicas(
        self, leader_log_end_offset: int, now_ms: int, max_lag_ms: int
    ) -> tuple[BrokerId, ...]:
        """``Partition.getOutOfSyncReplicas``: ISR followers behind the leader's log end
        and not caught up within ``max_lag_ms``. The leader is never one of them."""
        out = []
        for r in self.isr:
            state = self.followers.get(r)
            if r == self.leader or state is None:
                continue
            behind = state.log_end_offset != leader_log_end_offset
            if behind and now_ms - state.last_caught_up_time_ms > max_lag_ms:
                out.append(r)
        return tuple(out)

    def propose_expand(self, follower: BrokerId) -> tuple[LeaderIsr, AlterIsrPartition]:
        """``Partition.expandIsr``: the new state (pending) and the item to send."""
        return self._propose((*self.isr, follower))

    def propose_shrink(self, leaving: Iterable[BrokerId]) -> tuple[LeaderIsr, AlterIsrPartition]:
        """``Partition.shrinkIsr``: the new state (pending) and the item to send."""
        gone = set(leaving)
        return self._propose(tuple(r for r in self.isr if r not in gone))

    def maybe_expand(
        self, follower: BrokerId, high_watermark: int
    ) -> tuple[LeaderIsr, AlterIsrPartition | None]:
        """``Partition.maybeExpandIsr`` after a fetch of ``follower``."""
        if self.expand_candidate(follower, high_watermark) is None:
            return self, None
        return self.propose_expand(follower)

    def maybe_shrink(
        self, leader_log_end_offset: int, now_ms: int, max_lag_ms: int
    ) -> tuple[LeaderIsr, AlterIsrPartition | None]:
        """``Partition.maybeShrinkIsr``, run by the ISR-expiration timer."""
        if self.in_flight or self.stuck:
            return self, None
        out = self.out_of_sync_replicas(leader_log_end_offset, now_ms, max_lag_ms)
        if not out:
            return self, None
        return self.propose_shrink(out)

    def _propose(self, isr: tuple[BrokerId, ...]) -> tuple[LeaderIsr, AlterIsrPartition]:
        item = AlterIsrPartition(
            topic=TopicName(self.partition.topic),
            partition=self.partition.partition,
            leader_epoch=self.leader_epoch,
            new_isr=isr,
            current_isr_version=self.zk_version,
        )
        return msgspec.structs.replace(self, pending_isr=isr), item

    # ------------------------------------------------------------------ answers

    def on_alter_isr_result(self, result: AlterIsrPartitionResult) -> LeaderIsr:
        """``Partition.handleAlterIsrResponse`` for this partition's answer.

        A fatal error leaves the change pending (``stuck``); another error withdraws it so
        that the next decision proposes again (2.7.2 means to re-send it, but its re-queue
        fails while the old item is still queued and the change stays pending: kemu does
        what was meant). A success is ignored when it answers
        another leader epoch or an older zkVersion (a LeaderAndIsr overtook it);
        otherwise its ISR and version are committed.
        """
        if self.pending_isr is None:
            return self
        if result.error_code in FATAL_ALTER_ISR_ERRORS:
            return msgspec.structs.replace(self, stuck=True)
        if result.error_code is not ErrorCode.NONE:
            return msgspec.structs.replace(self, pending_isr=None)
        if result.leader_epoch != self.leader_epoch or result.current_isr_version < self.zk_version:
            return self
        return msgspec.structs.replace(
            self, isr=result.isr, zk_version=result.current_isr_version, pending_isr=None
        )


def high_watermark_candidate(
    state: LeaderIsr,
    leader_log_end_offset: int,
    now_ms: int,
    max_lag_ms: int,
) -> int:
    """``Partition.maybeIncrementLeaderHW``'s candidate: the leader's log end, lowered to
    the log end of every follower behind it that is in the maximal ISR or caught up
    within ``max_lag_ms``. The broker applies it only if it is above the current high
    watermark (a leader's high watermark never goes down)."""
    candidate = leader_log_end_offset
    maximal = set(state.maximal_isr)
    for r, follower in state.followers.items():
        leo = follower.log_end_offset  # -1 when unknown: the candidate cannot rise then
        if leo < candidate and (
            r in maximal or now_ms - follower.last_caught_up_time_ms <= max_lag_ms
        ):
            candidate = leo
    return candidate
