"""The group coordinator (Kafka's ``GroupCoordinator`` and ``GroupMetadataManager``): one
actor per broker, its groups' state, and the records it keeps in ``__consumer_offsets``."""

from actors.group.coordinator import GROUP_COORDINATOR_ACTOR, GroupConfig, GroupCoordinator
from actors.group.group import (
    Group,
    GroupState,
    Member,
    consumer_assignment,
    consumer_subscription,
)
from actors.group.records import java_string_hash, partition_for

__all__ = [
    "GROUP_COORDINATOR_ACTOR",
    "Group",
    "GroupConfig",
    "GroupCoordinator",
    "GroupState",
    "Member",
    "consumer_assignment",
    "consumer_subscription",
    "java_string_hash",
    "partition_for",
]
