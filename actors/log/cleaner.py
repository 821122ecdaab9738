"""Log compaction: Kafka's ``LogCleaner`` and ``LogCleanerManager``, as functions over a
``Log`` that the log manager calls on its cleaner timer (the clean itself a generator of
steps, ``cleaning``, which the log manager runs between its other messages).

``filthiest_log`` picks, among the compacted logs, the one with the largest dirty ratio
above its ``min.cleanable.dirty.ratio`` (or overdue by ``max.compaction.lag.ms``)
(``LogCleanerManager.grabFilthiestCompactedLog``); ``clean`` compacts it
(``Cleaner.clean``): a map of each key to its last offset over the dirty section (from the
last clean point up to the active segment, or the first segment younger than
``min.compaction.lag.ms``), then every segment below the map's end rewritten in groups of
at most ``segment.bytes`` into ``.cleaned`` segments that keep, of each keyed record,
only the latest of its key, and drop tombstones (a null value) in segments last written
more than ``delete.retention.ms`` before the previous clean point. A batch keeps its
offsets, leader epoch, producer fields, codec and last offset delta; one that lost
records is encoded again with its new count, timestamps and CRC. ``Log.replace_segments``
swaps each cleaned segment in through ``.swap`` files, which a restart completes.

Where kemu differs: the offset map has no size bound (Kafka's dedupe buffer may cut a
round short); control batches and transactional state are not looked at (kemu keeps no
transactions); a batch that loses all its records goes, also the last of its producer
(Kafka keeps an empty one there); there is one cleaner, run on the log manager's actor
in steps of ``CLEAN_STEP_BYTES`` (``cleaning``), without an I/O throttle.
docs/log-format.md ("Compaction").
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from actors.log.batch_codec import RecordsError, read_bytes, read_varint, write_bytes
from actors.log.compression import compress, decompress
from actors.log.partition_log import Log
from actors.log.records import (
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    CompressionType,
    TimestampType,
    sealed_batch,
    write_varint,
)
from actors.log.segment import LogSegment

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "CLEAN_STEP_BYTES",
    "CleanResult",
    "LogToClean",
    "clean",
    "cleaning",
    "filthiest_log",
    "log_to_clean",
]

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
"""A log dir's clean points: the offset each compacted log is clean below
(``LogCleanerManager.offsetCheckpointFile``), in the offset checkpoint format."""

_INT32_MAX = 2**31 - 1

CLEAN_STEP_BYTES = 1 << 20
"""How many bytes of batches a clean reads between two of its steps (``cleaning``): a
step of a 100 MB log's clean is tens of milliseconds of CPU, not the whole clean's
seconds (docs/log-format.md, "Compaction")."""

Steps = Generator[None, None, "CleanResult"]
"""A clean in steps: each ``next`` does the next ``CLEAN_STEP_BYTES`` of reading (and
the writing and swapping it leads to); the return value is the clean's result. Closing
it between steps abandons the clean: the ``.cleaned`` files of the group being written
are deleted, the groups already swapped in stay (each a whole clean of its segments)."""


@dataclass(frozen=True, slots=True)
class LogToClean:
    """A compacted log's dirty section (``LogToClean``): ``clean_bytes`` below the first
    dirty offset, ``cleanable_bytes`` from there to the first uncleanable offset.
    ``need_compaction_now``: a dirty segment is older than ``max.compaction.lag.ms``;
    ``force_checkpoint``: the checkpointed clean point was out of the log's range."""

    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool
    force_checkpoint: bool

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


@dataclass(slots=True)
class CleanResult:
    """What a clean did (``CleanerStats``): the new clean point (the first dirty offset of
    the next clean), the segments it rewrote, the records read and kept, the bytes before
    and after, and the ``.deleted`` files to remove after ``file.delete.delay.ms``."""

    end_offset: int
    segments: int = 0
    records_read: int = 0
    records_retained: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    deleted_files: list[Path] = field(default_factory=list)


def _cleanable_offsets(log: Log, last_clean: int | None, now_ms: int) -> tuple[int, int, bool]:
    """``LogCleanerManager.cleanableOffsets``: the first dirty offset (the checkpoint, or
    the log start when there is none or it is out of the log's range), the first
    uncleanable one (the active segment's base, or the first dirty segment holding a
    record younger than ``min.compaction.lag.ms``), and whether the checkpoint was reset."""
    start = log.log_start_offset
    if last_clean is None or last_clean < start or last_clean > log.log_end_offset:
        first_dirty, forced = start, True
    else:
        first_dirty, forced = last_clean, False
    uncleanable = log.active_segment.base_offset
    lag = max(log.config.min_compaction_lag_ms, 0)
    if lag > 0:
        for segment in log.segments_between(first_dirty, log.active_segment.base_offset):
            if _largest_timestamp(segment) > now_ms - lag:
                uncleanable = min(uncleanable, segment.base_offset)
                break
    return first_dirty, max(first_dirty, uncleanable), forced


def _largest_timestamp(segment: LogSegment) -> int:
    if segment.max_timestamp_so_far >= 0:
        return segment.max_timestamp_so_far
    return segment.last_modified_ms


def _max_compaction_delay(log: Log, first_dirty: int, now_ms: int) -> int:
    """``LogCleanerManager.maxCompactionDelay``: how long past ``max.compaction.lag.ms``
    the earliest dirty non-active segment's first batch is (0: not overdue)."""
    clean_until = now_ms - max(log.config.max_compaction_lag_ms, 0)
    if clean_until <= 0:  # the default lag, Long.MAX_VALUE: no segment is overdue
        return 0
    dirty = log.segments_between(first_dirty, log.active_segment.base_offset)
    stamps = [t for t in (s.first_batch_timestamp() for s in dirty) if t > 0]
    if not stamps:
        return 0
    earliest = min(stamps)
    return clean_until - earliest if earliest < clean_until else 0


def log_to_clean(log: Log, last_clean: int | None, now_ms: int) -> LogToClean:
    """A compacted log's dirty section now, from its checkpointed clean point."""
    first_dirty, uncleanable, forced = _cleanable_offsets(log, last_clean, now_ms)
    clean_bytes = sum(s.size for s in log.segments_between(-1, first_dirty))
    cleanable_bytes = sum(s.size for s in log.segments_between(first_dirty, uncleanable))
    return LogToClean(
        log=log,
        first_dirty_offset=first_dirty,
        first_uncleanable_offset=uncleanable,
        clean_bytes=clean_bytes,
        cleanable_bytes=cleanable_bytes,
        need_compaction_now=_max_compaction_delay(log, first_dirty, now_ms) > 0,
        force_checkpoint=forced,
    )


def filthiest_log(candidates: Sequence[LogToClean]) -> LogToClean | None:
    """``grabFilthiestCompactedLog``'s choice among the compacted logs: of those with
    bytes, the ones overdue with something to clean or whose dirty ratio is above their
    ``min.cleanable.dirty.ratio``, the one with the largest ratio (the first of equals)."""
    best: LogToClean | None = None
    for candidate in candidates:
        if candidate.total_bytes <= 0:
            continue
        if not (
            (candidate.need_compaction_now and candidate.cleanable_bytes > 0)
            or candidate.cleanable_ratio > candidate.log.config.min_cleanable_ratio
        ):
            continue
        if best is None or candidate.cleanable_ratio > best.cleanable_ratio:
            best = candidate
    return best


# -- records


@dataclass(frozen=True, slots=True)
class _Record:
    """One record of a batch, its fields as stored: ``headers`` is the raw header count
    and headers, kept byte for byte."""

    offset_delta: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: bytes


def _payload(header: BatchHeader, batch: bytes) -> bytes:
    """The batch's records, decompressed."""
    payload = batch[RECORD_BATCH_OVERHEAD:]
    if header.compression != CompressionType.NONE:
        payload = decompress(header.compression, payload)
    return payload


def _records(header: BatchHeader, payload: bytes) -> list[_Record]:
    records = []
    position = 0
    for _ in range(header.records_count):
        length, position = read_varint(payload, position)
        end = position + length
        at = position + 1  # attributes, unused
        timestamp_delta, at = read_varint(payload, at)
        offset_delta, at = read_varint(payload, at)
        key, at = read_bytes(payload, at)
        value, at = read_bytes(payload, at)
        records.append(
            _Record(
                offset_delta, header.first_timestamp + timestamp_delta, key, value, payload[at:end]
            )
        )
        position = end
    return records


def _keys(header: BatchHeader, payload: bytes) -> list[tuple[int, bytes | None, bool]]:
    """The offset delta, key and whether it is a tombstone (a null value) of each record
    of a batch: what the key map and ``_retain`` read, without copying the values and
    headers (``_records`` reads them, for a batch that is written again)."""
    keys = []
    position = 0
    for _ in range(header.records_count):
        length, position = read_varint(payload, position)
        end = position + length
        _, at = read_varint(payload, position + 1)  # past the attributes: the timestamp
        offset_delta, at = read_varint(payload, at)
        key, at = read_bytes(payload, at)
        value_length, at = read_varint(payload, at)
        if at + max(value_length, 0) > end or end > len(payload):
            raise RecordsError("a record field runs past its record")
        keys.append((offset_delta, key, value_length < 0))
        position = end
    return keys


def _rebuilt_batch(header: BatchHeader, kept: list[_Record]) -> bytes:
    """``MemoryRecords.filterTo``'s ``buildRetainedRecordsInto``: the batch with only
    ``kept``, its base offset and last offset delta unchanged (``overrideLastOffset``),
    its count, first and max timestamps and CRC new, compressed with its own codec."""
    first = kept[0].timestamp
    body = bytearray()
    for record in kept:
        one = bytearray(b"\x00")
        write_varint(one, record.timestamp - first)
        write_varint(one, record.offset_delta)
        write_bytes(one, record.key)
        write_bytes(one, record.value)
        one += record.headers
        write_varint(body, len(one))
        body += one
    payload = bytes(body)
    if header.compression != CompressionType.NONE:
        payload = compress(header.compression, payload)
    if header.timestamp_type is TimestampType.LOG_APPEND_TIME:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = max(r.timestamp for r in kept)
    return sealed_batch(
        payload,
        base_offset=header.base_offset,
        leader_epoch=header.partition_leader_epoch,
        attributes=header.attributes,
        last_offset_delta=header.last_offset_delta,
        first_timestamp=first,
        max_timestamp=max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        records_count=len(kept),
    )


# -- cleaning (Cleaner.clean, buildOffsetMap, cleanSegments)


class _Budget:
    """The bytes a clean may still read before its next step (``CLEAN_STEP_BYTES``)."""

    def __init__(self, step_bytes: int) -> None:
        self.step_bytes = step_bytes
        self.left = step_bytes

    def spent(self, size: int) -> bool:
        """Count ``size`` bytes read; whether the step is over (then a new one begins)."""
        self.left -= size
        if self.left > 0:
            return False
        self.left = self.step_bytes
        return True


def _build_offset_map(
    log: Log, start: int, end: int, offsets: dict[bytes, int], budget: _Budget
) -> Generator[None, None, int]:
    """``Cleaner.buildOffsetMap``: each key's last offset at or above ``start`` in the
    segments from the one holding ``start`` up to ``end``, into ``offsets``; returns the
    map's latest offset (each segment's last offset, a gap at its end included)."""
    latest = -1
    all_segments = log.segments
    for segment in log.segments_between(start, end):
        i = all_segments.index(segment)
        next_base = (
            all_segments[i + 1].base_offset if i + 1 < len(all_segments) else log.log_end_offset
        )
        for header in segment.batches_from(0):
            if header.last_offset < start:
                continue
            if not header.is_control:
                base = header.base_offset
                payload = _payload(header, segment.read_batch(header))
                for delta, key, _ in _keys(header, payload):
                    if key is not None and base + delta >= start:
                        offsets[key] = base + delta
            latest = max(latest, header.last_offset)
            if budget.spent(header.size):
                yield
        latest = max(latest, next_base - 1)
    return latest


def _group_segments(
    segments: list[LogSegment], max_size: int, max_index_size: int, uncleanable: int
) -> list[list[LogSegment]]:
    """``Cleaner.groupSegmentsBySize``: consecutive segments whose total size fits
    ``segment.bytes``, indexes ``segment.index.bytes``, and offsets an int32 from the
    group's base."""
    groups = []
    rest = list(segments)
    while rest:
        group = [rest.pop(0)]
        size = group[0].size
        index_size = group[0].offset_index.entries * 8
        time_index_size = group[0].time_index.entries * 12
        while rest:
            candidate = rest[0]
            last_offset = (
                rest[1].base_offset - 1
                if len(rest) > 1
                else max(uncleanable - 1, candidate.base_offset)
            )
            if (
                size + candidate.size > max_size
                or index_size + candidate.offset_index.entries * 8 > max_index_size
                or time_index_size + candidate.time_index.entries * 12 > max_index_size
                or last_offset - group[0].base_offset > _INT32_MAX
            ):
                break
            size += candidate.size
            index_size += candidate.offset_index.entries * 8
            time_index_size += candidate.time_index.entries * 12
            group.append(rest.pop(0))
        groups.append(group)
    return groups


def clean(to_clean: LogToClean) -> CleanResult:
    """``Cleaner.clean`` of one log at once: ``cleaning``'s steps, one after the other."""
    steps = cleaning(to_clean)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result: CleanResult = done.value
            return result


def cleaning(to_clean: LogToClean, step_bytes: int = CLEAN_STEP_BYTES) -> Steps:
    """``Cleaner.clean`` of one log, in steps of ``step_bytes`` read: tombstones in
    segments last written more than ``delete.retention.ms`` before the last clean
    segment's last write go; the segments below the map's end are rewritten, group by
    group, and swapped in. The result's ``end_offset`` is the log's new clean point.

    Between two steps the log may take appends (to its active segment, above what the
    clean reads) and reads; any other change (a truncation, a new log start, a deletion,
    a close) must close the clean first, as Kafka's ``LogCleanerManager.
    abortAndPauseCleaning`` aborts one."""
    log = to_clean.log
    budget = _Budget(step_bytes)
    below = log.segments_between(-1, to_clean.first_dirty_offset)
    below = [s for s in below if s.base_offset < to_clean.first_dirty_offset]
    horizon = below[-1].last_modified_ms - log.config.delete_retention_ms if below else 0
    offsets: dict[bytes, int] = {}
    latest = yield from _build_offset_map(
        log, to_clean.first_dirty_offset, to_clean.first_uncleanable_offset, offsets, budget
    )
    result = CleanResult(end_offset=latest + 1)
    groups = _group_segments(
        log.segments_between(0, result.end_offset),
        log.config.segment_bytes,
        log.config.max_index_size,
        to_clean.first_uncleanable_offset,
    )
    for group in groups:
        yield from _clean_segments(log, group, offsets, latest, horizon, result, budget)
    return result


def _clean_segments(
    log: Log,
    group: list[LogSegment],
    offsets: dict[bytes, int],
    latest: int,
    horizon: int,
    result: CleanResult,
    budget: _Budget,
) -> Generator[None, None, None]:
    """``Cleaner.cleanSegments``: ``group`` rewritten into one ``.cleaned`` segment
    (``cleanInto``, ``shouldRetainRecord``), then swapped in (within one step)."""
    cleaned = log.new_cleaned_segment(group[0].base_offset)
    try:
        for segment in group:
            retain_deletes = segment.last_modified_ms > horizon
            for header in segment.batches_from(0):
                if budget.spent(header.size):
                    yield
                data = segment.read_batch(header)
                result.bytes_read += len(data)
                kept_data, max_timestamp = data, header.max_timestamp
                if header.is_control:
                    result.records_read += header.records_count
                    result.records_retained += header.records_count
                else:
                    payload = _payload(header, data)
                    base = header.base_offset
                    retained = [
                        _retain(base + delta, key, tombstone, offsets, latest, retain_deletes)
                        for delta, key, tombstone in _keys(header, payload)
                    ]
                    result.records_read += len(retained)
                    count = sum(retained)
                    result.records_retained += count
                    if not count:
                        continue
                    if count < len(retained):  # read whole only to be written again
                        records = _records(header, payload)
                        kept = [r for r, keep in zip(records, retained, strict=True) if keep]
                        kept_data = _rebuilt_batch(header, kept)
                        max_timestamp = int.from_bytes(kept_data[35:43], "big", signed=True)
                cleaned.append(
                    header.last_offset,
                    max_timestamp,
                    header.last_offset,
                    [kept_data],
                    len(kept_data),
                )
                result.bytes_written += len(kept_data)
    except BaseException:
        cleaned.delete()
        raise
    result.deleted_files += log.replace_segments(cleaned, group)
    result.segments += len(group)


def _retain(
    offset: int,
    key: bytes | None,
    tombstone: bool,
    offsets: dict[bytes, int],
    latest: int,
    retain_deletes: bool,
) -> bool:
    """``Cleaner.shouldRetainRecord``: past the map's latest offset, kept; a keyed record,
    kept if no later record of its key is in the map and it has a value or tombstones
    are still kept; a record without a key goes."""
    if offset > latest:
        return True
    if key is None:
        return False
    return offset >= offsets.get(key, -1) and (not tombstone or retain_deletes)
