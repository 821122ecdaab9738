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
* **The data a chaos run wrote and read** (``DataLedger``): every acknowledged record
  (``produce_result``) is judged against every read of its partition (``records_read``):
  a read showing another record at its offset, or a settled read whose high watermark
  stays at or below it, loses it, and the loss is classified (``Loss.cause``): ``acks_1``
  for a record acknowledged by the leader alone, ``unclean`` for one acknowledged by the
  ISR and lost after an unclean leader election of its partition (named), ``None`` for a
  loss nothing in Kafka's contract allows. The ledger also keeps what consumers saw at
  each offset: two reads showing two different records at one offset below the high
  watermark is a conflict (``OffsetConflict``), allowed only after an unclean election.
* **Replica logs** (``replica_log_violations``): once caught up, a follower's log is the
  leader's prefix, record for record; leader ∈ ISR ⊆ replicas with the ISR the store holds.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AcknowledgedWrite",
    "DataLedger",
    "HighWatermarkTracker",
    "Loss",
    "OffsetConflict",
    "UncleanElection",
    "high_watermark_regressions",
    "isr_change_violations",
    "lost_acknowledged_writes",
    "replica_log_violations",
]


class HighWatermarkTracker:
    """The last high watermark of each (broker, partition, leader epoch), fed
    ``high_watermark_moved`` events in trace order (``node`` and the fields ``topic``,
    ``partition``, ``leader_epoch``, ``from``, ``to``)."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, str, int, int], int] = {}

    def forget_topic(self, topic: str) -> None:
        """``topic`` was deleted: a topic of the same name starts again at epoch 0."""
        for key in [k for k in self._last if k[1] == topic]:
            del self._last[key]

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


# ----------------------------------------------------------------------------- the ledger


@dataclass(frozen=True, slots=True)
class UncleanElection:
    """A leader elected from outside the ISR (the controller's ``unclean_leader_elected``)."""

    leader: int
    leader_epoch: int
    seq: int
    ts: float

    def text(self) -> str:
        return (
            f"the unclean election of broker {self.leader} at leader epoch {self.leader_epoch}"
            f" (event {self.seq}, t={self.ts:.3f}s)"
        )


@dataclass(frozen=True, slots=True)
class _Ack:
    identity: str
    acks: int
    seq: int


@dataclass(frozen=True, slots=True)
class Loss:
    """An acknowledged record a read showed lost. ``cause``: ``acks_1``, ``unclean``
    (``election`` names it) or None (nothing allows it); ``now``: what the offset held in
    that read (None: the settled high watermark stayed at or below it)."""

    topic: str
    partition: int
    offset: int
    identity: str
    acks: int
    acked_seq: int
    now: str | None
    cause: str | None
    election: UncleanElection | None

    def text(self) -> str:
        acks = "all" if self.acks == -1 else str(self.acks)
        where = "is gone" if self.now is None else f"now holds {self.now}"
        text = (
            f"{self.topic}-{self.partition}: offset {self.offset}, {self.identity} "
            f"acknowledged with acks={acks} (event {self.acked_seq}), {where}"
        )
        if self.election is not None:
            text += f", after {self.election.text()}"
        return text


@dataclass(frozen=True, slots=True)
class OffsetConflict:
    """Two reads showed two different records at one offset below the high watermark;
    ``election``: an unclean election of the partition between the two reads."""

    topic: str
    partition: int
    offset: int
    before: str
    before_seq: int
    now: str
    election: UncleanElection | None

    def text(self) -> str:
        text = (
            f"{self.topic}-{self.partition}: offset {self.offset} was read as {self.before} "
            f"(event {self.before_seq}) and now as {self.now}"
        )
        if self.election is not None:
            text += f", after {self.election.text()}"
        return text


class DataLedger:
    """What a run wrote and read, per partition (see the module doc), fed in trace order.
    A topic's entries go when its deletion completes (a new topic of the name starts
    afresh)."""

    def __init__(self) -> None:
        self._acked: dict[tuple[str, int], dict[int, _Ack]] = {}
        self._seen: dict[tuple[str, int], dict[int, tuple[str, int]]] = {}
        self._unclean: dict[tuple[str, int], list[UncleanElection]] = {}

    def acknowledged(
        self,
        topic: str,
        partition: int,
        base_offset: int,
        identities: Iterable[str],
        *,
        acks: int,
        seq: int,
    ) -> list[Loss]:
        """A Produce answered without error: its records are at ``base_offset`` on. An
        earlier acknowledged record at one of those offsets is lost (returned): the
        partition's leader gave its offset to another record."""
        key = (topic, partition)
        acked = self._acked.setdefault(key, {})
        displaced: list[Loss] = []
        for i, identity in enumerate(identities):
            offset = base_offset + i
            before = acked.get(offset)
            if before is not None and before.identity != identity:
                displaced.append(self._loss(key, offset, before, identity))
            acked[offset] = _Ack(identity, acks, seq)
        return displaced

    def _loss(self, key: tuple[str, int], offset: int, ack: _Ack, now: str | None) -> Loss:
        election = self._election_after(key, ack.seq)
        cause = "acks_1" if ack.acks == 1 else ("unclean" if election is not None else None)
        return Loss(key[0], key[1], offset, ack.identity, ack.acks, ack.seq, now, cause, election)

    def unclean(self, topic: str, partition: int, election: UncleanElection) -> None:
        self._unclean.setdefault((topic, partition), []).append(election)

    def forget_topic(self, topic: str) -> None:
        for table in (self._acked, self._seen, self._unclean):
            for key in [k for k in table if k[0] == topic]:
                del table[key]

    def _election_after(self, key: tuple[str, int], seq: int) -> UncleanElection | None:
        """The first unclean election of the partition after event ``seq``."""
        return next((e for e in self._unclean.get(key, ()) if e.seq > seq), None)

    def read(
        self,
        topic: str,
        partition: int,
        records: Iterable[tuple[int, str]],
        *,
        high_watermark: int,
        log_start_offset: int = 0,
        settled: bool,
        seq: int,
    ) -> tuple[list[Loss], list[OffsetConflict]]:
        """A consumer read of the partition (``records`` below ``high_watermark``): the
        acknowledged records it shows lost (each reported once, then forgotten) and the
        offsets it shows holding another record than an earlier read did. ``settled``:
        the partition had settled, so an acknowledged offset at or above the high
        watermark is lost too."""
        key = (topic, partition)
        read = dict(records)
        losses: list[Loss] = []
        acked = self._acked.get(key, {})
        for offset, ack in sorted(acked.items()):
            now = read.get(offset)
            if now == ack.identity:
                continue
            if now is None and not (
                log_start_offset <= offset < high_watermark
                or (settled and offset >= high_watermark)
            ):
                continue
            losses.append(self._loss(key, offset, ack, now))
            del acked[offset]
        conflicts: list[OffsetConflict] = []
        seen = self._seen.setdefault(key, {})
        for offset, identity in sorted(read.items()):
            if offset >= high_watermark:
                continue
            before = seen.get(offset)
            if before is not None and before[0] != identity:
                conflicts.append(
                    OffsetConflict(
                        topic,
                        partition,
                        offset,
                        before[0],
                        before[1],
                        identity,
                        self._election_after(key, before[1]),
                    )
                )
            seen[offset] = (identity, seq)
        return losses, conflicts


# ----------------------------------------------------------------------------- replica logs


def replica_log_violations(fields: Mapping[str, Any]) -> list[str]:
    """One ``replica_logs_read`` event: the leader (if any) in the ISR, the ISR within
    the replicas, and, once ``caught_up``, every ISR follower's log the leader's, record
    for record, and its log end the leader's. (Before that a follower may still hold a
    tail its new leader never had, until it truncates: Kafka's ``ReplicaFetcherThread``
    does so after a leader change.)

    Of a ``compacted`` topic, each replica's log cleaner compacts its own log at its own
    time (Kafka's ``LogCleaner`` runs per broker): a follower may still hold a record
    that its leader cleaned away, and the other way round. What Kafka guarantees there
    is that an offset both hold is the same record: that is what is checked."""
    name = f"{fields['topic']}-{fields['partition']}"
    leader = int(fields["leader"])
    isr = [int(r) for r in fields["isr"]]
    replicas = [int(r) for r in fields["replicas"]]
    problems = [f"{name}: {p}" for p in _shape(leader, isr, replicas)] if leader >= 0 else []
    logs = {int(log["broker"]): log for log in fields["logs"]}
    own = logs.get(leader)
    if own is None or not fields.get("caught_up"):
        return problems
    theirs = {int(o): str(i) for o, i in own["records"]}
    compacted = bool(fields.get("compacted"))
    for broker, log in sorted(logs.items()):
        if broker == leader or broker not in isr:
            continue
        for offset, identity in log["records"]:
            held = theirs.get(int(offset))
            if held != identity and (held is not None or not compacted):
                problems.append(
                    f"{name}: follower {broker} holds {identity} at offset {offset}, "
                    f"leader {leader} holds {held if held is not None else 'nothing'}"
                )
                break
        if int(log["log_end_offset"]) != int(own["log_end_offset"]):
            problems.append(
                f"{name}: follower {broker} ends at {log['log_end_offset']} once caught up, "
                f"leader {leader} at {own['log_end_offset']}"
            )
    return problems


def _shape(leader: int, isr: Sequence[int], replicas: Sequence[int]) -> list[str]:
    problems = []
    if leader not in isr:
        problems.append(f"leader {leader} is not in the ISR {list(isr)}")
    outside = [r for r in isr if r not in replicas]
    if outside:
        problems.append(f"ISR members {outside} are not replicas {list(replicas)}")
    return problems
