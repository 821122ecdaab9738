"""A follower fetcher's pure decisions (``actors.broker.replica_fetcher_state``): Kafka
2.7's ``getOffsetTruncationState``, the follower high watermark, fetch error handling and
``getFetcherId``."""

from __future__ import annotations

import pytest

from actors.broker.replica_fetcher_state import (
    FetchErrorAction,
    TruncationState,
    fetch_error_action,
    fetcher_id,
    follower_high_watermark,
    java_string_hash,
    truncation_state,
)
from protocol.errors import ErrorCode


def test_truncation_follows_kafkas_table() -> None:
    """Each row of getOffsetTruncationState: undefined end offset (the high watermark),
    undefined epoch and an epoch below every local one (the leader's end), another local
    epoch (its end, then ask again), the same epoch (the least of the three ends)."""
    common = {"log_end_offset": 20, "high_watermark": 7}
    assert truncation_state(
        leader_epoch=-1, leader_end_offset=-1, local_end_for_epoch=(3, 12), **common
    ) == TruncationState(7, completed=True)
    assert truncation_state(
        leader_epoch=-1, leader_end_offset=15, local_end_for_epoch=(3, 12), **common
    ) == TruncationState(15, completed=True)
    assert truncation_state(
        leader_epoch=2, leader_end_offset=25, local_end_for_epoch=None, **common
    ) == TruncationState(20, completed=True)
    assert truncation_state(
        leader_epoch=4, leader_end_offset=18, local_end_for_epoch=(3, 12), **common
    ) == TruncationState(12, completed=False)
    assert truncation_state(
        leader_epoch=3, leader_end_offset=18, local_end_for_epoch=(3, 12), **common
    ) == TruncationState(12, completed=True)
    assert truncation_state(
        leader_epoch=3, leader_end_offset=9, local_end_for_epoch=(3, 12), **common
    ) == TruncationState(9, completed=True)


def test_a_former_leader_cuts_what_it_wrote_alone_in_its_last_epoch() -> None:
    """KIP-101's case: the old leader wrote offsets 5-9 in epoch 1 that no follower had; the
    new leader (epoch 2, starting at 5) answers epoch 1 with (0, 5): the old leader's own
    epoch 0 ends at 5 too, so it truncates to 5."""
    # The old leader's cache: epoch 0 from 0, epoch 1 from 5; asked for its latest, 1, the
    # new leader's cache (epoch 0 from 0, epoch 2 from 5) answers (0, 5).
    state = truncation_state(
        leader_epoch=0,
        leader_end_offset=5,
        local_end_for_epoch=(0, 5),
        log_end_offset=10,
        high_watermark=5,
    )
    assert state == TruncationState(5, completed=True)


def test_the_follower_high_watermark_is_capped_by_its_log_end() -> None:
    """processPartitionData: min(leader high watermark, own log end)."""
    assert follower_high_watermark(30, 25) == 25
    assert follower_high_watermark(10, 25) == 10


@pytest.mark.parametrize(
    ("error", "sent", "current", "action"),
    [
        (ErrorCode.OFFSET_OUT_OF_RANGE, 3, 3, FetchErrorAction.TRUNCATE_OUT_OF_RANGE),
        (ErrorCode.FENCED_LEADER_EPOCH, 3, 3, FetchErrorAction.FAIL),
        (ErrorCode.FENCED_LEADER_EPOCH, 3, 4, FetchErrorAction.RETRY),
        (ErrorCode.UNKNOWN_LEADER_EPOCH, 3, 3, FetchErrorAction.RETRY),
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, 3, 3, FetchErrorAction.RETRY),
        (ErrorCode.KAFKA_STORAGE_ERROR, 3, 3, FetchErrorAction.RETRY),
    ],
)
def test_fetch_errors_are_handled_as_process_fetch_request_does(
    error: ErrorCode, sent: int, current: int, action: FetchErrorAction
) -> None:
    """Out of range truncates; fenced with an unchanged epoch fails the partition; the rest
    backs off and retries."""
    assert fetch_error_action(error, sent_leader_epoch=sent, current_leader_epoch=current) is action


def test_fetcher_ids_use_javas_string_hash() -> None:
    """getFetcherId: abs(31 * topic.hashCode + partition) % num.replica.fetchers, in Java's
    int arithmetic (Utils.abs(Integer.MIN_VALUE) is 0)."""
    assert java_string_hash("") == 0
    assert java_string_hash("abc") == 96354
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert java_string_hash("é€") == 233 * 31 + 0x20AC
    assert fetcher_id("polygenelubricants", 0, 7) == 0
    assert fetcher_id("abc", 2, 1) == 0
    assert fetcher_id("abc", 2, 5) == (31 * 96354 + 2) % 5
    # 31 * "hello".hashCode() overflows: Java's result is -1220935314, abs 1220935314.
    assert fetcher_id("hello", 0, 1_000_000_007) == 1220935314 % 1_000_000_007
