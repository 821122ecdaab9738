"""One segment of a partition log (Kafka's ``LogSegment`` over its ``FileRecords``).

A segment is three files named after its base offset, zero-padded to 20 digits:
``<base>.log`` (record batches, back to back, as ``actors.log.records`` leaves them),
``<base>.index`` and ``<base>.timeindex`` (``actors.log.index``). Appends go to the end
of the ``.log`` in one ``pwritev``; every ``index.interval.bytes`` of appended bytes, the
append about to be written is indexed (its largest offset -> the position it starts at).
Reads find a position through the offset index (the floor entry) and a scan of batch
headers from there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from actors.log.channel import FileChannel, LogFiles
from actors.log.index import OffsetIndex, TimeIndex
from actors.log.records import (
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    check_stored_batch,
    last_offset_at,
    read_header,
    stored_record_timestamps,
    whole_batches_end,
)
from protocol.errors import KafkaApiError

__all__ = [
    "INDEX_SUFFIX",
    "LOG_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "LogSegment",
    "OffsetPosition",
    "SegmentConfig",
    "TimestampAndOffset",
    "segment_file_name",
]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
_SCAN_CHUNK = 1 << 16  # bytes read at a time when scanning batch headers


def segment_file_name(base_offset: int, suffix: str) -> str:
    """``Log.filenamePrefixFromOffset``: the base offset in 20 digits, then the suffix."""
    return f"{base_offset:020d}{suffix}"


class TimestampAndOffset(NamedTuple):
    """A record found by its timestamp (``FileRecords.TimestampAndOffset``): its
    timestamp, offset and the leader epoch of its batch (-1 for none)."""

    timestamp: int
    offset: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class SegmentConfig:
    """The topic configs a segment reads (Kafka's ``LogConfig``, the segment's part)."""

    index_interval_bytes: int = 4096
    max_index_size: int = 10 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class OffsetPosition:
    """Where the batch holding ``offset`` starts, and its size (``LogOffsetPosition``)."""

    offset: int
    position: int
    size: int


class LogSegment:
    """``<base>.log`` with its two indexes. ``now_ms`` is the injected clock: a segment
    without record timestamps ages from its creation time, read from it."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        config: SegmentConfig,
        files: LogFiles,
        now_ms: Callable[[], int],
        *,
        file_suffix: str = "",
    ) -> None:
        """Open the segment's files, creating the missing ones (an index just created is
        preallocated; an existing one is read). Nothing is checked and the ``.log`` is not
        read here: see ``sanity_check``, then ``load_largest_timestamp`` or ``recover``.
        ``file_suffix`` follows each file name: the log cleaner's ``.cleaned`` segment
        being written, or a ``.swap`` one being recovered (Kafka's ``LogSegment.open``)."""
        self.base_offset = base_offset
        self.config = config
        self.log_path = directory / (segment_file_name(base_offset, LOG_SUFFIX) + file_suffix)
        self.index_path = directory / (segment_file_name(base_offset, INDEX_SUFFIX) + file_suffix)
        self.time_index_path = directory / (
            segment_file_name(base_offset, TIME_INDEX_SUFFIX) + file_suffix
        )
        self.index_was_missing = not files.exists(self.index_path)
        self.time_index_was_missing = not files.exists(self.time_index_path)
        self._files = files
        self._now_ms = now_ms
        self._log: FileChannel = files.open(self.log_path)
        self.offset_index = OffsetIndex(self.index_path, base_offset, config.max_index_size, files)
        self.time_index = TimeIndex(self.time_index_path, base_offset, config.max_index_size, files)
        self.created_ms = now_ms()
        self.last_modified_ms = self.created_ms
        """When the ``.log`` was last written, by the log's clock (Kafka reads the file's
        modification time; kemu's starts when the segment is opened)."""
        self._bytes_since_last_index_entry = 0
        self._rolling_based_timestamp: int | None = None
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp_so_far = base_offset

    # -- views

    @property
    def size(self) -> int:
        return self._log.size

    def sanity_check(self) -> None:
        """Raise ``CorruptIndexError`` if an index cannot belong to this ``.log``."""
        self.offset_index.sanity_check(self.size)
        self.time_index.sanity_check()

    # -- append

    def append(
        self,
        largest_offset: int,
        largest_timestamp: int,
        offset_of_max_timestamp: int,
        chunks: Sequence[bytes | memoryview],
        size: int,
    ) -> None:
        """Write one append's batches at the end (``LogSegment.append``): the index gets an
        entry first if more than ``index.interval.bytes`` were written since the last one."""
        if not size:
            return
        position = self._log.size
        if position == 0:
            self._rolling_based_timestamp = largest_timestamp
        if not self.offset_index.can_append_offset(largest_offset):
            raise ValueError(
                f"offset {largest_offset} does not fit segment {self.base_offset}'s index"
            )
        self._log.append(chunks)
        self.last_modified_ms = self._now_ms()
        if largest_timestamp > self.max_timestamp_so_far:
            self.max_timestamp_so_far = largest_timestamp
            self.offset_of_max_timestamp_so_far = offset_of_max_timestamp
        if self._bytes_since_last_index_entry > self.config.index_interval_bytes:
            self.offset_index.append(largest_offset, position)
            self.time_index.maybe_append(
                self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far
            )
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += size

    def should_roll(
        self,
        *,
        messages_size: int,
        max_timestamp_in_messages: int,
        max_offset_in_messages: int,
        segment_bytes: int,
        segment_ms: int,
        roll_jitter_ms: int = 0,
    ) -> bool:
        """``LogSegment.shouldRoll``: full by size, old by record time (by creation time
        when the segment's first append had no timestamp), an index full, or the
        incoming offsets beyond an int32 from the base."""
        waited = self._time_waited_for_roll(max_timestamp_in_messages)
        return (
            self.size > segment_bytes - messages_size
            or (self.size > 0 and waited > segment_ms - roll_jitter_ms)
            or self.offset_index.is_full
            or self.time_index.is_full
            or not self.offset_index.can_append_offset(max_offset_in_messages)
        )

    def _time_waited_for_roll(self, message_timestamp: int) -> int:
        if self._rolling_based_timestamp is None and self._log.size:
            self._rolling_based_timestamp = self._first_batch().max_timestamp
        if self._rolling_based_timestamp is not None and self._rolling_based_timestamp >= 0:
            return message_timestamp - self._rolling_based_timestamp
        return self._now_ms() - self.created_ms

    # -- lookups

    def translate_offset(self, offset: int, start_position: int = 0) -> OffsetPosition | None:
        """The first batch whose last offset is at least ``offset``, from the index's floor
        entry on (``LogSegment.translateOffset``); ``None`` past the end."""
        _, position = self.offset_index.lookup(offset)
        return self._search_for_offset(offset, max(position, start_position))

    def _search_for_offset(self, offset: int, position: int) -> OffsetPosition | None:
        """``FileRecords.searchForOffsetWithSize``: a scan of batch headers."""
        size = self._log.size
        while size - position >= LOG_OVERHEAD:
            header = self._log.read(position, 27)
            if len(header) < 27:
                return None
            last, batch_size = last_offset_at(header, 0)
            if last >= offset:
                return OffsetPosition(last, position, batch_size)
            position += batch_size
        return None

    def batches_from(self, position: int = 0) -> list[BatchHeader]:
        """The headers of the whole batches from ``position`` to the end, one header read
        per batch (``FileLogInputStream``'s lazy batches)."""
        out: list[BatchHeader] = []
        size = self._log.size
        while size - position >= RECORD_BATCH_OVERHEAD:
            header = read_header(
                self._log.read(position, RECORD_BATCH_OVERHEAD), located_at=position
            )
            if header.size < RECORD_BATCH_OVERHEAD or header.size > size - position:
                break
            out.append(header)
            position += header.size
        return out

    def _first_batch(self) -> BatchHeader:
        return read_header(self._log.read(0, RECORD_BATCH_OVERHEAD))

    def first_batch_timestamp(self) -> int:
        """The first batch's max timestamp, -1 when empty (``getFirstBatchTimestamp``)."""
        return self._first_batch().max_timestamp if self.size >= RECORD_BATCH_OVERHEAD else -1

    def read_batch(self, header: BatchHeader) -> bytes:
        """The bytes of the batch ``header`` was read at (``batches_from``'s)."""
        return self._log.read(header.position, header.size)

    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        *,
        min_one_message: bool = False,
    ) -> tuple[int, bytes] | None:
        """The whole batches from the one holding ``start_offset``, at most ``max_size``
        bytes (but the first batch whole with ``min_one_message``) and none starting at or
        after ``max_position``: ``(position, bytes)``, or ``None`` when ``start_offset`` is
        past this segment's end (``LogSegment.read``)."""
        if max_size < 0:
            raise ValueError(f"invalid max size {max_size}")
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        limit = self.size if max_position is None else max_position
        adjusted = max(max_size, found.size) if min_one_message else max_size
        fetch_size = min(limit - found.position, adjusted)
        if fetch_size <= 0:
            return found.position, b""
        data = self._log.read(found.position, fetch_size)
        end = whole_batches_end(data)
        return found.position, data if end == len(data) else data[:end]

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int | None = None
    ) -> TimestampAndOffset | None:
        """The first record at or after ``timestamp`` from ``starting_offset``, via the
        time index then a scan of the batches from there, a compressed one's records
        decompressed (``LogSegment.findOffsetByTimestamp``,
        ``FileRecords.searchForTimestamp``)."""
        start = self.base_offset if starting_offset is None else starting_offset
        _, indexed_offset = self.time_index.lookup(timestamp)
        _, position = self.offset_index.lookup(max(indexed_offset, start))
        for header in self.batches_from(position):
            if header.max_timestamp < timestamp or header.last_offset < start:
                continue
            data = self._log.read(header.position, header.size)
            for offset, record_timestamp in stored_record_timestamps(data, header):
                if record_timestamp >= timestamp and offset >= start:
                    epoch = header.partition_leader_epoch
                    return TimestampAndOffset(record_timestamp, offset, epoch)
        return None

    def read_next_offset(self) -> int:
        """The offset after the last batch (``LogSegment.readNextOffset``)."""
        _, position = self.offset_index.lookup(self.offset_index.last_offset)
        headers = self.batches_from(position)
        return headers[-1].next_offset if headers else self.base_offset

    # -- changes

    def truncate_to(self, offset: int) -> int:
        """Cut everything from the batch holding ``offset`` on; the bytes cut
        (``LogSegment.truncateTo``)."""
        found = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.offset_index.resize(self.config.max_index_size)
        self.time_index.resize(self.config.max_index_size)
        cut = 0
        if found is not None:
            cut = self.size - found.position
            self._log.truncate(found.position)
            self.last_modified_ms = self._now_ms()
        if self.size == 0:
            self.created_ms = self._now_ms()
            self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        if self.max_timestamp_so_far >= 0:
            self.load_largest_timestamp()
        return cut

    def load_largest_timestamp(self) -> None:
        """The largest timestamp so far: the time index's last entry, then the batches
        after it (``LogSegment.loadLargestTimestamp``). For a segment opened from disk,
        once its indexes passed ``sanity_check``."""
        timestamp, offset = self.time_index.last_entry
        self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far = timestamp, offset
        _, position = self.offset_index.lookup(offset)
        for header in self.batches_from(position):
            if header.max_timestamp > self.max_timestamp_so_far:
                self.max_timestamp_so_far = header.max_timestamp
                self.offset_of_max_timestamp_so_far = header.last_offset

    def recover(self, on_batch: Callable[[BatchHeader], None] | None = None) -> int:
        """Rebuild the indexes from the ``.log`` and cut it at the first batch that is torn,
        fails its CRC or does not fit the offset range; the bytes cut
        (``LogSegment.recover``). ``on_batch`` sees each valid batch (the leader epoch
        cache's ``assign`` for new epochs)."""
        self.offset_index.reset()
        self.time_index.reset()
        valid_bytes = 0
        last_index_entry = 0
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp_so_far = self.base_offset
        interval = self.config.index_interval_bytes
        for header, data in self._valid_batches():
            if header.max_timestamp > self.max_timestamp_so_far:
                self.max_timestamp_so_far = header.max_timestamp
                self.offset_of_max_timestamp_so_far = header.last_offset
            if valid_bytes - last_index_entry > interval and not (
                self.offset_index.is_full or self.time_index.is_full
            ):
                # Full indexes are left sparser (lookups scan on from the floor entry):
                # after a truncation, recovery can index more batches than the appends
                # did, and a tiny segment.index.bytes would not hold them; Kafka, whose
                # indexes dwarf a segment, fails the load there.
                self.offset_index.append(header.last_offset, valid_bytes)
                self.time_index.maybe_append(
                    self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far
                )
                last_index_entry = valid_bytes
            valid_bytes += len(data)
            if on_batch is not None:
                on_batch(header)
        truncated = self.size - valid_bytes
        if truncated:
            self._log.truncate(valid_bytes)
        self.offset_index.trim_to_valid_size()
        self.time_index.maybe_append(
            self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, skip_full_check=True
        )
        self.time_index.trim_to_valid_size()
        self._bytes_since_last_index_entry = 0
        self._rolling_based_timestamp = None
        return truncated

    def _valid_batches(self) -> list[tuple[BatchHeader, bytes]]:
        """The batches from the start up to the first invalid one, each with its bytes."""
        out: list[tuple[BatchHeader, bytes]] = []
        position = 0
        size = self._log.size
        while size - position >= RECORD_BATCH_OVERHEAD:
            prefix = self._log.read(position, LOG_OVERHEAD)
            length = int.from_bytes(prefix[8:12], "big", signed=True)
            batch_size = length + LOG_OVERHEAD
            if batch_size < RECORD_BATCH_OVERHEAD or batch_size > size - position:
                break
            data = self._log.read(position, batch_size)
            try:
                header = check_stored_batch(data, located_at=position)
            except KafkaApiError:
                break
            if not self.offset_index.can_append_offset(header.last_offset):
                break
            out.append((header, data))
            position += batch_size
        return out

    def on_become_inactive(self) -> None:
        """The segment stops being the active one (``onBecomeInactiveSegment``): a last
        time index entry, then both indexes trimmed."""
        self.time_index.maybe_append(
            self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, skip_full_check=True
        )
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)

    def flush(self) -> None:
        """Force the ``.log`` and both indexes to disk (``LogSegment.flush``)."""
        self._log.flush()
        self.offset_index.flush()
        self.time_index.flush()

    def close(self) -> None:
        """``LogSegment.close``: a last time index entry, indexes trimmed, files closed."""
        if self._log.closed:
            return
        self.time_index.maybe_append(
            self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, skip_full_check=True
        )
        self.offset_index.close()
        self.time_index.close()
        self._log.close()

    def close_handlers(self) -> None:
        """Close the files without writing anything (``LogSegment.closeHandlers``)."""
        self.offset_index.close_handler()
        self.time_index.close_handler()
        self._log.close()

    def delete(self) -> None:
        """Close and remove the three files (``LogSegment.deleteIfExists``)."""
        self.close_handlers()
        for path in (self.log_path, self.index_path, self.time_index_path):
            self._files.delete(path)

    def read_all(self) -> bytes:
        """The whole ``.log`` (tests and tools)."""
        return self._log.read(0, self._log.size)

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self.size})"
