"""The decisions of a follower's replica fetcher, as pure functions: Kafka 2.7's
``AbstractFetcherThread.getOffsetTruncationState``, the follower's high watermark
(``ReplicaFetcherThread.processPartitionData``), what a fetch error makes the fetcher do
(``AbstractFetcherThread.processFetchRequest``), and which fetcher a partition goes to
(``AbstractFetcherManager.getFetcherId``).

The fetcher actor (``actors.broker.replica_fetcher``) asks the leader and its own log and
calls these; it does no arithmetic of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from protocol.errors import ErrorCode
from protocol.jvm import java_string_hash

__all__ = [
    "FetchErrorAction",
    "TruncationState",
    "fetch_error_action",
    "fetcher_id",
    "follower_high_watermark",
    "java_string_hash",
    "truncation_state",
]

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@dataclass(frozen=True, slots=True)
class TruncationState:
    """Kafka's ``OffsetTruncationState``: truncate the local log to ``offset``; when not
    ``completed``, ask the leader again with the (new) latest local epoch (KIP-279)."""

    offset: int
    completed: bool


def truncation_state(
    *,
    leader_epoch: int,
    leader_end_offset: int,
    local_end_for_epoch: tuple[int, int] | None,
    log_end_offset: int,
    high_watermark: int,
) -> TruncationState:
    """Where to truncate after the leader answered OffsetForLeaderEpoch with
    ``(leader_epoch, leader_end_offset)`` (``getOffsetTruncationState``).

    ``local_end_for_epoch`` is the local log's ``endOffsetFor(leader_epoch)``: the largest
    local epoch at most ``leader_epoch`` and where it ends, None when the local epoch cache
    has no such epoch.

    ======================================  ===============================================
    the leader's answer                     truncate to
    ======================================  ===============================================
    end offset undefined                    the high watermark, done
    epoch undefined (an old leader)         min(leader end, log end), done
    no local epoch at most the leader's     min(leader end, log end), done
    the local epoch differs                 min(local end, log end), ask again
    the same epoch                          min(local end, leader end, log end), done
    ======================================  ===============================================
    """
    if leader_end_offset == UNDEFINED_EPOCH_OFFSET:
        return TruncationState(high_watermark, completed=True)
    if leader_epoch == UNDEFINED_EPOCH or local_end_for_epoch is None:
        return TruncationState(min(leader_end_offset, log_end_offset), completed=True)
    local_epoch, local_end = local_end_for_epoch
    if local_epoch == UNDEFINED_EPOCH:
        return TruncationState(min(leader_end_offset, log_end_offset), completed=True)
    if local_epoch != leader_epoch:
        return TruncationState(min(local_end, log_end_offset), completed=False)
    return TruncationState(min(local_end, leader_end_offset, log_end_offset), completed=True)


def follower_high_watermark(leader_high_watermark: int, log_end_offset: int) -> int:
    """A follower's high watermark after a fetch: the leader's, capped at its own log end
    (``ReplicaFetcherThread.processPartitionData``)."""
    return min(leader_high_watermark, log_end_offset)


class FetchErrorAction(Enum):
    """What a partition error in a fetch answer makes the fetcher do."""

    TRUNCATE_OUT_OF_RANGE = "truncate_out_of_range"
    """``handleOutOfRangeError``: re-read the leader's offsets and truncate to them."""
    RETRY = "retry"
    """Back off ``replica.fetch.backoff.ms`` and fetch again."""
    FAIL = "fail"
    """Stop fetching the partition until a LeaderAndIsr (``markPartitionFailed``; also
    what a storage error while appending locally does)."""


def fetch_error_action(
    error: ErrorCode, *, sent_leader_epoch: int, current_leader_epoch: int
) -> FetchErrorAction:
    """``processFetchRequest``'s error cases: OFFSET_OUT_OF_RANGE re-reads the leader's
    offsets; FENCED_LEADER_EPOCH fails the partition when the fetcher's epoch is still the
    one it sent (``onPartitionFenced``: the leader is ahead of what this broker was told),
    else a LeaderAndIsr came meanwhile and it fetches again; every other error
    (UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, a storage error on the leader, ...)
    backs off and retries."""
    if error is ErrorCode.OFFSET_OUT_OF_RANGE:
        return FetchErrorAction.TRUNCATE_OUT_OF_RANGE
    if error is ErrorCode.FENCED_LEADER_EPOCH and sent_leader_epoch == current_leader_epoch:
        return FetchErrorAction.FAIL
    return FetchErrorAction.RETRY


def fetcher_id(topic: str, partition: int, num_fetchers: int) -> int:
    """``AbstractFetcherManager.getFetcherId``: ``Utils.abs(31 * topic.hashCode +
    partition) % num.replica.fetchers``, in Java's 32-bit arithmetic (``Utils.abs`` of
    the minimum int is 0). Every partition of a LeaderAndIsr asks this: the topic's hash
    is memoised (``protocol.jvm.java_string_hash``), not computed per partition."""
    value = (31 * java_string_hash(topic) + partition) & 0xFFFFFFFF
    if value >= 1 << 31:
        value -= 1 << 32
    magnitude = 0 if value == -(1 << 31) else abs(value)
    return magnitude % num_fetchers
