"""Idempotent producers' state of one partition log: Kafka's ``ProducerStateManager``.

For each producer id that wrote to the log, the producer epoch and the sequence ranges
and offsets of its last five batches (``ProducerStateEntry.NumBatchesToRetain``). A
leader checks each client batch against it before the append, as Kafka 2.7's
``ProducerAppendInfo`` does for a client's append:

1. **Duplicate.** Same epoch and the same (first, last) sequence as a retained batch: the
   append succeeds with that batch's offsets and writes nothing (a retry whose answer
   was lost). DUPLICATE_SEQUENCE_NUMBER is never answered.
2. **Older epoch:** INVALID_PRODUCER_EPOCH.
3. **Newer epoch:** the first sequence must be 0, else OUT_OF_ORDER_SEQUENCE_NUMBER.
4. **Same epoch:** the first sequence must follow the last one (``Int.MaxValue`` wraps to
   0), else OUT_OF_ORDER_SEQUENCE_NUMBER.

A producer with no state here is accepted at any sequence (its state was lost, as after
retention; kemu never answers UNKNOWN_PRODUCER_ID). A follower's appends and the log's
own batches (read again when the log is opened) update the state without checks.

kemu keeps no ``.snapshot`` files: the log manager rebuilds a log's state from its batch
headers the first time the log is opened after a start-up (docs/log-format.md).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Final

from actors.log.records import BatchHeader
from protocol.errors import ErrorCode, KafkaApiError

__all__ = ["BATCHES_RETAINED", "BatchMetadata", "ProducerEntry", "ProducerStateManager"]

BATCHES_RETAINED: Final = 5
"""``ProducerStateEntry.NumBatchesToRetain``: the batches a duplicate is looked for in."""
_MAX_SEQUENCE: Final = 0x7FFFFFFF


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """A retained batch: its sequence range, offsets and timestamp (``BatchMetadata``)."""

    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    """One producer's epoch and last batches, oldest first (``ProducerStateEntry``)."""

    producer_id: int
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_RETAINED))

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1

    def duplicate_of(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.epoch:
            return None
        last = _last_sequence(header)
        for batch in self.batches:
            if batch.first_sequence == header.base_sequence and batch.last_sequence == last:
                return batch
        return None


def _last_sequence(header: BatchHeader) -> int:
    """The batch's last sequence, wrapping past ``Int.MaxValue`` (``DefaultRecordBatch``)."""
    last = header.base_sequence + header.last_offset_delta
    return last - _MAX_SEQUENCE - 1 if last > _MAX_SEQUENCE else last


def _in_sequence(last: int, next_first: int) -> bool:
    return next_first == last + 1 or (next_first == 0 and last == _MAX_SEQUENCE)


class ProducerStateManager:
    """The producers of one partition log, by producer id."""

    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries: dict[int, ProducerEntry] = {}

    def check(self, header: BatchHeader, partition: str) -> BatchMetadata | None:
        """Check a client batch before a leader appends it: the retained batch it
        duplicates (then nothing is to be written), None when it may be appended;
        ``KafkaApiError`` with INVALID_PRODUCER_EPOCH or OUT_OF_ORDER_SEQUENCE_NUMBER."""
        if not header.has_producer_id:
            return None
        entry = self.entries.get(header.producer_id)
        if entry is None:
            return None
        duplicate = entry.duplicate_of(header)
        if duplicate is not None:
            return duplicate
        if header.producer_epoch < entry.epoch:
            raise KafkaApiError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"Epoch of producer {header.producer_id} at offset in {partition} is "
                f"{header.producer_epoch}, which is smaller than the last seen epoch "
                f"{entry.epoch}",
            )
        if header.producer_epoch > entry.epoch:
            if header.base_sequence != 0:
                raise KafkaApiError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"Invalid sequence number for new epoch of producer {header.producer_id} "
                    f"at offset in partition {partition}: {header.producer_epoch} (request "
                    f"epoch), {header.base_sequence} (seq. number), {entry.epoch} "
                    "(current producer epoch)",
                )
            return None
        if entry.batches and not _in_sequence(entry.last_sequence, header.base_sequence):
            raise KafkaApiError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"Out of order sequence number for producer {header.producer_id} at offset "
                f"in partition {partition}: {header.base_sequence} (incoming seq. number), "
                f"{entry.last_sequence} (current end sequence number)",
            )
        return None

    def update(self, header: BatchHeader, first_offset: int, timestamp: int) -> None:
        """Record a batch written at ``first_offset`` (a leader's after ``check``, a
        follower's or a reloaded one as they are)."""
        if not header.has_producer_id:
            return
        entry = self.entries.get(header.producer_id)
        if entry is None or header.producer_epoch != entry.epoch:
            entry = ProducerEntry(header.producer_id, header.producer_epoch)
            self.entries[header.producer_id] = entry
        entry.batches.append(
            BatchMetadata(
                first_sequence=header.base_sequence,
                last_sequence=_last_sequence(header),
                first_offset=first_offset,
                last_offset=first_offset + header.last_offset_delta,
                timestamp=timestamp,
            )
        )

    def clear(self) -> None:
        self.entries.clear()
