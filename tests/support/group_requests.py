"""JoinGroup requests as a consumer sends them, for the tests that form groups."""

from __future__ import annotations

from typing import Any

from protocol.group import JoinGroupProtocol, JoinGroupRequestData


def consumer_join(
    group: str, member_id: str = "", *, metadata: bytes = b"", **extra: Any
) -> JoinGroupRequestData:
    """A consumer's JoinGroup of ``group`` (protocol ``range``, 10 s timeouts); ``extra``
    sets the other fields (client id and host, API version, instance id)."""
    return JoinGroupRequestData(
        group_id=group,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        member_id=member_id,
        protocol_type="consumer",
        protocols=(JoinGroupProtocol(name="range", metadata=metadata),),
        **extra,
    )
