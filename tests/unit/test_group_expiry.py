"""``GroupMetadata.removeExpiredOffsets``, case by case: which base time an offset's
retention counts from depends on the group's protocol type and state, and a consumer
group with members keeps the offsets of the topics it subscribes to."""

from __future__ import annotations

import struct

import pytest

from actors.group.group import Group, GroupState, Member
from actors.group.records import OffsetValue

RETENTION = 1_000


def subscription(*topics: str) -> bytes:
    """A consumer's ``ConsumerProtocolSubscription`` v0 naming ``topics``."""
    body = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        body += struct.pack(">h", len(topic)) + topic.encode()
    return body + struct.pack(">i", -1)


def offset(committed_at: int, expire_at: int | None = None) -> OffsetValue:
    return OffsetValue(
        offset=5, metadata="", commit_timestamp=committed_at, expire_timestamp=expire_at
    )


def consumer_group(*topics: str) -> Group:
    group = Group("g", state=GroupState.STABLE, protocol_type="consumer", protocol_name="range")
    group.members["m"] = Member(
        member_id="m",
        group_instance_id=None,
        client_id="c",
        client_host="/127.0.0.1",
        rebalance_timeout_ms=10_000,
        session_timeout_ms=10_000,
        protocol_type="consumer",
        protocols=(("range", subscription(*topics)),),
    )
    return group


def test_an_empty_group_counts_from_when_it_became_empty() -> None:
    group = Group(
        "g", state=GroupState.EMPTY, protocol_type="consumer", current_state_timestamp=5_000
    )
    group.offsets[("t", 0)] = offset(committed_at=0)
    assert group.remove_expired_offsets(5_999, RETENTION) == []
    assert group.remove_expired_offsets(6_000, RETENTION) == [("t", 0)]
    assert group.offsets == {}


def test_an_empty_group_without_a_state_time_counts_from_each_commit() -> None:
    group = Group("g", state=GroupState.EMPTY, protocol_type="consumer")
    group.offsets[("t", 0)] = offset(committed_at=0)
    group.offsets[("t", 1)] = offset(committed_at=500)
    assert group.remove_expired_offsets(1_200, RETENTION) == [("t", 0)]
    assert list(group.offsets) == [("t", 1)]


def test_a_consumer_group_with_members_keeps_its_subscribed_topics() -> None:
    group = consumer_group("kept")
    group.offsets[("kept", 0)] = offset(committed_at=0)
    group.offsets[("gone", 0)] = offset(committed_at=0)
    group.offsets[("gone", 1)] = offset(committed_at=900)
    assert group.remove_expired_offsets(1_000, RETENTION) == [("gone", 0)]
    assert sorted(group.offsets) == [("gone", 1), ("kept", 0)]


def test_a_group_that_never_had_members_counts_from_each_commit() -> None:
    group = Group("g", current_state_timestamp=0)  # only commits: assign() consumers
    group.offsets[("t", 0)] = offset(committed_at=100)
    assert group.remove_expired_offsets(1_099, RETENTION) == []
    assert group.remove_expired_offsets(1_100, RETENTION) == [("t", 0)]


@pytest.mark.parametrize("protocol_type", ["connect", "consumer"])
def test_an_active_group_whose_subscriptions_are_unknown_keeps_everything(
    protocol_type: str,
) -> None:
    group = consumer_group("t")
    group.protocol_type = protocol_type
    group.members["m"].protocols = (("range", b"\xff"),)  # unreadable for "consumer"
    group.offsets[("t", 0)] = offset(committed_at=0)
    assert group.remove_expired_offsets(10**9, RETENTION) == []


def test_a_commit_with_its_own_retention_expires_at_its_expire_timestamp() -> None:
    group = Group("g", state=GroupState.EMPTY, protocol_type="consumer", current_state_timestamp=0)
    group.offsets[("t", 0)] = offset(committed_at=0, expire_at=10_000)
    assert group.remove_expired_offsets(9_999, RETENTION) == []
    assert group.remove_expired_offsets(10_000, RETENTION) == [("t", 0)]


def test_an_offset_with_a_commit_in_flight_stays_and_keeps_the_group() -> None:
    group = Group("g", state=GroupState.EMPTY, protocol_type="consumer", current_state_timestamp=0)
    group.offsets[("t", 0)] = offset(committed_at=0)
    group.pending_commits[("t", 0)] += 1
    group.pending_commits[("t", 1)] += 1
    assert group.remove_expired_offsets(10**9, RETENTION) == []
    group.offsets.clear()
    assert group.has_offsets()
