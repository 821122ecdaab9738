"""The consumer-group rules, over what a chaos run's group members trace (docs/chaos.md,
``cluster.chaos.group``): what the coordinator answered them, generation by generation.

* ``group_offsets_rise``: within one generation of a group, the committed offset of a
  partition never goes backwards: each commit the coordinator accepted
  (``consumer_committed`` with NONE) and each committed offset it answered an OffsetFetch
  with (``consumer_offsets_fetched``) is at least the highest accepted or answered before
  in that generation. A member's own reset of its position (``consumer_offset_reset``,
  ``auto.offset.reset``) starts the partition afresh in that generation.
* ``one_owner_per_partition``: the SyncGroup answers of one generation give each
  partition to at most one member (``consumer_assigned``).
* ``groups_settle``: at the end of a run, after the faults healed, the coordinator
  describes each group whose members were still running as Stable, with every partition
  of its topics owned by exactly one member (``consumer_group_settled``). A group whose
  topics were all deleted has no partition to own: Stable with nothing assigned is settled
  (as the ``group_settled`` condition has it).
"""

from __future__ import annotations

from typing import Final

from actors.invariants.base import CHAOS_NODE, TraceRule, Violation, violation_at
from protocol.trace import TraceEvent

__all__ = ["GROUP_EVENTS", "GroupOffsetsRise", "GroupsSettle", "OnePartitionOwner"]

GROUP_EVENTS: Final = (
    "consumer_committed",
    "consumer_offsets_fetched",
    "consumer_offset_reset",
    "consumer_assigned",
    "consumer_group_settled",
)
"""The chaos events the group rules read."""


def _member_event(event: TraceEvent, type_: str) -> bool:
    return event.node == CHAOS_NODE and event.kind == "event" and event.type == type_


class GroupOffsetsRise(TraceRule):
    """``group_offsets_rise`` (see the module doc)."""

    name = "group_offsets_rise"

    def __init__(self) -> None:
        # (group, generation, topic, partition) -> (highest offset, where it was seen)
        self._high: dict[tuple[str, int, str, int], tuple[int, str]] = {}

    def observe(self, event: TraceEvent) -> list[Violation]:
        f = event.fields
        if _member_event(event, "consumer_offset_reset"):
            key = (str(f["group"]), int(f["generation"]), str(f["topic"]), int(f["partition"]))
            self._high.pop(key, None)
            return []
        if _member_event(event, "consumer_committed"):
            seen = [(str(t), int(p), int(o)) for t, p, o, error in f["offsets"] if error == "NONE"]
            how = f"commit by {f['member']}"
        elif _member_event(event, "consumer_offsets_fetched"):
            seen = [(str(t), int(p), int(o)) for t, p, o in f["offsets"] if int(o) >= 0]
            how = f"offset fetch by {f['member']}"
        else:
            return []
        group, generation = str(f["group"]), int(f["generation"])
        out = []
        for topic, partition, offset in seen:
            key = (group, generation, topic, partition)
            before = self._high.get(key)
            if before is not None and offset < before[0]:
                out.append(
                    violation_at(
                        self.name,
                        f"group {group} generation {generation}: the committed offset of"
                        f" {topic}-{partition} went back from {before[0]} ({before[1]}) to"
                        f" {offset} ({how})",
                        event,
                    )
                )
                continue
            self._high[key] = (offset, how)
        return out


class OnePartitionOwner(TraceRule):
    """``one_owner_per_partition`` (see the module doc)."""

    name = "one_owner_per_partition"

    def __init__(self) -> None:
        # (group, generation, topic, partition) -> member id
        self._owner: dict[tuple[str, int, str, int], str] = {}

    def observe(self, event: TraceEvent) -> list[Violation]:
        if not _member_event(event, "consumer_assigned"):
            return []
        f = event.fields
        group, generation, member = str(f["group"]), int(f["generation"]), str(f["member_id"])
        out = []
        for topic, partition in f["partitions"]:
            key = (group, generation, str(topic), int(partition))
            owner = self._owner.setdefault(key, member)
            if owner != member:
                out.append(
                    violation_at(
                        self.name,
                        f"group {group} generation {generation}: {topic}-{partition} was given"
                        f" to {owner} and to {member}",
                        event,
                    )
                )
        return out


class GroupsSettle(TraceRule):
    """``groups_settle`` (see the module doc)."""

    name = "groups_settle"

    def observe(self, event: TraceEvent) -> list[Violation]:
        if not _member_event(event, "consumer_group_settled"):
            return []
        f = event.fields
        group = str(f["group"])
        problems = []
        if f["state"] != "Stable":
            problems.append(f"is {f['state']}, not Stable")
        owners: dict[tuple[str, int], list[str]] = {}
        for topic, partition, member in f["owners"]:
            owners.setdefault((str(topic), int(partition)), []).append(str(member))
        partitions = [(str(t), int(p)) for t, p in f["partitions"]]
        unowned = [f"{t}-{p}" for t, p in partitions if (t, p) not in owners]
        if unowned:
            problems.append(f"has no owner for {', '.join(unowned)}")
        shared = [f"{t}-{p}" for (t, p), ms in sorted(owners.items()) if len(ms) > 1]
        if shared:
            problems.append(f"gives {', '.join(shared)} to more than one member")
        unknown = [f"{t}-{p}" for (t, p) in sorted(owners) if (t, p) not in partitions]
        if unknown:
            problems.append(f"assigns {', '.join(unknown)}, which do not exist")
        return [
            violation_at(self.name, f"group {group} after the faults healed: {p}", event)
            for p in problems
        ]
