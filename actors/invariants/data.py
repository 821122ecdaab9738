"""Reusable invariant checkers for the data plane (docs/chaos.md, "Invariants"): pure
functions over values and trace fields, as ``leadership`` is for the control plane. Each
returns the violations it found, one line each (empty when all hold).

* **High watermark per tenure** (``high_watermark_regressions``): a leader's high
  watermark never goes down while it leads in one leader epoch (Kafka's
  ``Log.maybeIncrementHighWatermark`` only raises it); a new leader may start lower.
  Fed the brokers' ``high_watermark_moved`` events.
* **ISR shape after AlterIsr** (``isr_change_violations``): an ISR written for a leader
  contains it, is not empty, has no duplicates and lies within the replicas; the leader
  epoch does not change with it. Fed the controller's ``isr_altered`` events.
* **Durability** (``lost_acknowledged_writes``): a record acknowledged with acks=all
  stays at its offset in the final log of the partition's leader, with its value, unless
  the partition had an unclean election (then losing it is Kafka's behaviour).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AcknowledgedWrite",
    "HighWatermarkTracker",
    "high_watermark_regressions",
    "isr_change_violations",
    "lost_acknowledged_writes",
]


class HighWatermarkTracker:
    """The last high watermark of each (broker, partition, leader epoch), fed
    ``high_watermark_moved`` events in trace order (``node`` and the fields ``topic``,
    ``partition``, ``leader_epoch``, ``from``, ``to``)."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, str, int, int], int] = {}

    def observe(self, node: str, fields: Mapping[str, Any]) -> str | None:
        """The regression this move shows, if any."""
        topic, partition = str(fields["topic"]), int(fields["partition"])
        epoch, to = int(fields["leader_epoch"]), int(fields["to"])
        name = f"{topic}-{partition}"
        if to < int(fields["from"]):
            return f"{name}: high watermark on {node} went from {fields['from']} to {to}"
        key = (node, topic, partition, epoch)
        previous = self._last.get(key)
        self._last[key] = to if previous is None else max(previous, to)
        if previous is not None and to < previous:
            return (
                f"{name}: high watermark on {node} fell from {previous} to {to} "
                f"within leader epoch {epoch}"
            )
        return None


def high_watermark_regressions(events: Iterable[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """Every regression of ``HighWatermarkTracker`` over ``(node, fields)`` pairs."""
    tracker = HighWatermarkTracker()
    return [p for node, fields in events if (p := tracker.observe(node, fields)) is not None]


def isr_change_violations(
    fields: Mapping[str, Any], replicas: Sequence[int], previous_leader_epoch: int | None
) -> list[str]:
    """One ``isr_altered`` event against the partition's ``replicas`` and the leader epoch
    the controller had cached before (None: unknown)."""
    name = f"{fields['topic']}-{fields['partition']}"
    leader, isr = int(fields["leader"]), [int(r) for r in fields["to_isr"]]
    problems: list[str] = []
    if not isr:
        problems.append(f"{name}: AlterIsr wrote an empty ISR")
    if len(set(isr)) != len(isr):
        problems.append(f"{name}: AlterIsr wrote duplicate ISR members {isr}")
    if leader not in isr:
        problems.append(f"{name}: AlterIsr wrote ISR {isr} without its leader {leader}")
    outside = [r for r in isr if r not in replicas]
    if outside:
        problems.append(f"{name}: AlterIsr wrote ISR members {outside} outside {list(replicas)}")
    epoch = int(fields["leader_epoch"])
    if previous_leader_epoch is not None and epoch != previous_leader_epoch:
        problems.append(
            f"{name}: AlterIsr changed the leader epoch from {previous_leader_epoch} to {epoch}"
        )
    return problems


@dataclass(frozen=True, slots=True)
class AcknowledgedWrite:
    """A record a producer was told is written with acks=all: where, and its value."""

    topic: str
    partition: int
    offset: int
    value: bytes | None


def lost_acknowledged_writes(
    acknowledged: Iterable[AcknowledgedWrite],
    final_logs: Mapping[tuple[str, int], Mapping[int, bytes | None]],
    unclean: Collection[tuple[str, int]] = (),
) -> list[str]:
    """Each acknowledged record missing from, or changed in, the final log of its
    partition's leader (``final_logs``: offset → value), except in partitions that had an
    unclean election (``unclean``) or no longer exist (not in ``final_logs``: deleted)."""
    problems: list[str] = []
    for write in acknowledged:
        key = (write.topic, write.partition)
        if key in unclean or key not in final_logs:
            continue
        log = final_logs[key]
        name = f"{write.topic}-{write.partition}"
        if write.offset not in log:
            problems.append(f"{name}: acknowledged offset {write.offset} is gone")
        elif log[write.offset] != write.value:
            problems.append(
                f"{name}: offset {write.offset} holds {log[write.offset]!r}, "
                f"acknowledged as {write.value!r}"
            )
    return problems
