"""One partition's log: its directory of segments (Kafka's ``Log``).

The log appends as a leader (``append_as_leader``: records checked and given offsets,
``actors.log.records``) or as a follower (``append_as_follower``: the leader's batches as
they are), rolling to a new segment when the active one is full by size, by record age or
by index; it reads whole batches for Fetch; it truncates (a follower's divergent tail, or
everything), advances its start offset and deletes the segments below it, deletes the
segments retention no longer keeps (``deleteOldSegments``), and flushes up to a recovery
point. Its ``leader-epoch-checkpoint`` is kept by a
``LeaderEpochFileCache``.

Opening a log loads it as ``Log.loadSegments`` does: stale files are removed, every
segment is opened, a segment with a missing or corrupt index is rebuilt, and unless the
log directory was shut down cleanly (``.kafka_cleanshutdown``, which the log manager
reads) every segment from the one holding the recovery point on is recovered: read batch
by batch and cut at the first torn or corrupt one, the later segments deleted.

Everything is synchronous and deterministic: files go through the injected ``LogFiles``
(``actors.log.channel``) and time comes from the injected ``now_ms``. docs/log-format.md
describes the files and where kemu differs from Kafka.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from actors.log.channel import LogFiles
from actors.log.index import CorruptIndexError
from actors.log.leader_epoch import LEADER_EPOCH_CHECKPOINT, EpochEntry, LeaderEpochFileCache
from actors.log.producer_state import ProducerStateManager
from actors.log.records import (
    LONG_MAX,
    NO_TIMESTAMP,
    BatchHeader,
    RecordChecks,
    TimestampType,
    ValidatedRecords,
    assign_offsets,
    check_follower_batches,
)
from actors.log.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    SegmentConfig,
    TimestampAndOffset,
)
from protocol.errors import ErrorCode, KafkaApiError
from protocol.kafka_data import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP

__all__ = [
    "CLEANED_SUFFIX",
    "CLEAN_SHUTDOWN_FILE",
    "SWAP_SUFFIX",
    "FetchDataInfo",
    "Log",
    "LogAppendInfo",
    "LogConfig",
    "had_clean_shutdown",
    "mark_clean_shutdown",
]

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
"""Created in a log directory by a clean shutdown; its presence at start-up skips recovery
(``Log.CleanShutdownFile``). The log manager creates it after closing every log and
deletes it once all logs are loaded (``LogManager.shutdown`` / ``loadLogs``)."""

CLEANED_SUFFIX = ".cleaned"
"""The log cleaner's segment being written (``Log.CleanedFileSuffix``)."""
SWAP_SUFFIX = ".swap"
"""A cleaned segment, whole and flushed, replacing older ones (``Log.SwapFileSuffix``)."""
DELETED_SUFFIX = ".deleted"
_SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)


def _largest_timestamp(segment: LogSegment) -> int:
    """``LogSegment.largestTimestamp``: the largest record timestamp, else the last write."""
    if segment.max_timestamp_so_far >= 0:
        return segment.max_timestamp_so_far
    return segment.last_modified_ms


def _rename_segment_files(
    files: LogFiles, directory: Path, base_offset: int, old_suffix: str, new_suffix: str
) -> None:
    """``LogSegment.changeFileSuffixes``: the ``.log`` first, then its indexes (an index
    that is not there is skipped: loading rebuilds it)."""
    for suffix in _SEGMENT_SUFFIXES:
        source = directory / f"{base_offset:020d}{suffix}{old_suffix}"
        if suffix == LOG_SUFFIX or files.exists(source):
            files.rename(source, directory / f"{base_offset:020d}{suffix}{new_suffix}")


def had_clean_shutdown(files: LogFiles, log_dir: Path) -> bool:
    """Whether ``log_dir`` holds the clean-shutdown marker."""
    return files.exists(log_dir / CLEAN_SHUTDOWN_FILE)


def mark_clean_shutdown(files: LogFiles, log_dir: Path, *, present: bool) -> None:
    """Create the marker (``present``: every log of the dir closed) or delete it (every
    log of the dir loaded)."""
    path = log_dir / CLEAN_SHUTDOWN_FILE
    if present:
        files.write_file(path, b"")
    else:
        files.delete(path)


@dataclass(frozen=True, slots=True)
class LogConfig:
    """The topic configs a log reads, with Kafka 2.7's defaults (``LogConfig``):
    ``segment.bytes``, ``segment.ms``, ``segment.jitter.ms`` (a fixed jitter here, the
    caller draws it), ``segment.index.bytes``, ``index.interval.bytes``,
    ``max.message.bytes``, ``message.timestamp.type``,
    ``message.timestamp.difference.max.ms``, ``retention.ms`` and ``retention.bytes``
    (negative: unlimited), ``file.delete.delay.ms`` (how long retention's ``.deleted``
    segment files wait, ``Log.deleteSegmentFiles``; its broker default is
    ``log.segment.delete.delay.ms``) and whether ``cleanup.policy`` holds ``delete`` and
    ``compact`` (a leader then refuses records without a key; the log cleaner compacts
    it, reading ``delete.retention.ms``, ``min.compaction.lag.ms``,
    ``max.compaction.lag.ms`` and ``min.cleanable.dirty.ratio``)."""

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 60 * 60 * 1000
    roll_jitter_ms: int = 0
    max_index_size: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    max_message_bytes: int = 1024 * 1024 + 12
    timestamp_type: TimestampType = TimestampType.CREATE_TIME
    timestamp_difference_max_ms: int = LONG_MAX
    retention_ms: int = 7 * 24 * 60 * 60 * 1000
    retention_bytes: int = -1
    file_delete_delay_ms: int = 60_000
    delete: bool = True
    compact: bool = False
    delete_retention_ms: int = 24 * 60 * 60 * 1000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_ratio: float = 0.5

    def __post_init__(self) -> None:
        if self.segment_bytes < 14:  # LegacyRecord.RECORD_OVERHEAD_V0, Kafka's minimum
            raise ValueError(f"segment.bytes must be at least 14, not {self.segment_bytes}")
        if self.max_index_size < 12:
            raise ValueError(f"segment.index.bytes must be at least 12, not {self.max_index_size}")
        if (
            min(
                self.segment_ms,
                self.index_interval_bytes,
                self.max_message_bytes,
                self.timestamp_difference_max_ms,
                self.file_delete_delay_ms,
            )
            < 0
        ):
            raise ValueError(
                "segment.ms, index.interval.bytes, max.message.bytes, "
                "message.timestamp.difference.max.ms, file.delete.delay.ms: not negative"
            )

    @property
    def segment(self) -> SegmentConfig:
        return SegmentConfig(self.index_interval_bytes, self.max_index_size)


@dataclass(frozen=True, slots=True)
class LogAppendInfo:
    """What an append did (Kafka's ``LogAppendInfo``): the offsets it was given, its
    largest timestamp and where it is, the broker time under LogAppendTime (else -1),
    the log start offset after it, its batches and bytes."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    log_start_offset: int
    batch_count: int
    valid_bytes: int
    duplicate: bool = False
    """A batch an idempotent producer sent again: nothing was written, the offsets and
    log append time are those the batch was first written with."""


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    """A read (Kafka's ``FetchDataInfo``): whole batches from the one holding
    ``fetch_offset``, as the log stores them; empty at the end of what may be read."""

    fetch_offset: int
    segment_base_offset: int
    position: int
    records: bytes


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _guarded(method: Callable[Concatenate[Log, _P], _R]) -> Callable[Concatenate[Log, _P], _R]:
    """Kafka's ``LogDirFailureChannel`` at the scale of one log: an ``OSError`` fails the
    log and goes on to the caller (the log manager takes the log directory offline);
    every later call is KAFKA_STORAGE_ERROR. A file half-written when the error came is
    left for recovery at the next open."""

    @functools.wraps(method)
    def guarded(self: Log, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        if self.failure is not None:
            raise KafkaApiError(
                ErrorCode.KAFKA_STORAGE_ERROR,
                f"The log {self.directory} is offline after an I/O error: {self.failure}",
            )
        try:
            return method(self, *args, **kwargs)
        except OSError as exc:
            self.failure = exc
            raise

    return guarded


class Log:
    """One partition directory. Public state: ``log_start_offset``, ``log_end_offset``,
    ``recovery_point``; ``leader_epoch_cache``; ``recovered_segments`` (the base offsets
    of the segments recovery read at open, for tests and traces); ``failure``, the
    ``OSError`` that took the log offline, if one did."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig | None = None,
        *,
        files: LogFiles | None = None,
        now_ms: Callable[[], int],
        recovery_point: int = 0,
        log_start_offset: int = 0,
        had_clean_shutdown: bool = False,
    ) -> None:
        """Open (or create) the log in ``directory``. ``recovery_point`` and
        ``log_start_offset`` come from the log directory's checkpoints; with
        ``had_clean_shutdown`` nothing is recovered."""
        self.directory = directory
        self.config = config or LogConfig()
        self._files = files or LogFiles()
        self._now_ms = now_ms
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self.recovered_segments: list[int] = []
        self.recovery_point = recovery_point
        self.log_start_offset = log_start_offset
        self.log_end_offset = 0
        self.failure: OSError | None = None
        self._files.mkdir(directory)
        self.leader_epoch_cache = LeaderEpochFileCache(
            directory / LEADER_EPOCH_CHECKPOINT, self._files, lambda: self.log_end_offset
        )
        self._load(had_clean_shutdown=had_clean_shutdown)

    # -- loading (Log.loadSegments, Log.recoverLog)

    def _load(self, *, had_clean_shutdown: bool) -> None:
        self._complete_swaps(self._remove_temp_files())
        names = self._files.listdir(self.directory)
        bases = []
        for name in names:
            path = self.directory / name
            stem, dot, suffix = name.partition(".")
            if not (
                dot and stem.isdigit() and len(stem) == 20 and f".{suffix}" in _SEGMENT_SUFFIXES
            ):
                continue
            if suffix == "log":
                bases.append(int(stem))
            elif not self._files.exists(self.directory / f"{stem}{LOG_SUFFIX}"):
                self._files.delete(path)  # an index without its .log
        for base in sorted(bases):
            segment = LogSegment(
                self.directory, base, self.config.segment, self._files, self._now_ms
            )
            if self._indexes_usable(segment):
                segment.load_largest_timestamp()
            else:
                self._recover_segment(segment)
            self._add_segment(segment)
        if not had_clean_shutdown:
            self._recover_log()
        if self._segments and self._segments[-1].read_next_offset() < self.log_start_offset:
            for segment in list(self._segments):
                self._remove_segment(segment)
        if not self._segments:
            self._add_segment(self._new_segment(self.log_start_offset))
        self.log_end_offset = self.active_segment.read_next_offset()
        self.recovery_point = self.log_end_offset
        self.active_segment.resize_indexes(self.config.max_index_size)
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        self.log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)
        self.leader_epoch_cache.truncate_from_start(self.log_start_offset)

    def _remove_temp_files(self) -> list[int]:
        """``Log.removeTempFilesAndCollectSwapFiles``: ``.deleted`` and ``.cleaned`` files
        and ``.tmp`` checkpoint writes a crash cut short are removed; a ``.swap`` index
        goes with the index files of its base (rebuilt from the ``.log`` then); the base
        offsets of the ``.log.swap`` files are returned, whose swap a crash interrupted."""
        swaps = []
        for name in self._files.listdir(self.directory):
            path = self.directory / name
            if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, ".tmp")):
                self._files.delete(path)
            elif name.endswith(SWAP_SUFFIX):
                stem, _, suffix = name.partition(".")
                if not (stem.isdigit() and len(stem) == 20):
                    continue
                if suffix == f"log{SWAP_SUFFIX}":
                    swaps.append(int(stem))
                else:
                    self._files.delete(path)
                    for index_suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                        self._files.delete(self.directory / f"{stem}{index_suffix}")
        return sorted(swaps)

    def _complete_swaps(self, swaps: list[int]) -> None:
        """``Log.completeSwapOperations``: a ``.swap`` segment is whole (the cleaner
        flushed it before the rename), so its swap is finished: its indexes rebuilt, the
        segments it replaces (from its base offset to its next offset) deleted, and its
        files renamed to the segment's own names."""
        for base in swaps:
            swap = LogSegment(
                self.directory,
                base,
                self.config.segment,
                self._files,
                self._now_ms,
                file_suffix=SWAP_SUFFIX,
            )
            swap.recover()
            next_offset = max(swap.read_next_offset(), base + 1)
            swap.close()
            for name in self._files.listdir(self.directory):
                stem, dot, suffix = name.partition(".")
                if (
                    dot
                    and stem.isdigit()
                    and len(stem) == 20
                    and f".{suffix}" in _SEGMENT_SUFFIXES
                    and base <= int(stem) < next_offset
                ):
                    self._files.delete(self.directory / name)
            _rename_segment_files(self._files, self.directory, base, SWAP_SUFFIX, "")

    @staticmethod
    def _indexes_usable(segment: LogSegment) -> bool:
        """Both index files were there and pass their sanity checks (else Kafka's
        ``loadSegmentFiles`` rebuilds them by recovering the segment)."""
        if segment.index_was_missing or segment.time_index_was_missing:
            return False
        try:
            segment.sanity_check()
        except CorruptIndexError:
            return False
        return True

    def _recover_log(self) -> None:
        """Recover every segment from the one holding the recovery point; after one that
        had to be cut, the later segments go (``Log.recoverLog``)."""
        start = max(0, bisect.bisect_right(self._bases, self.recovery_point) - 1)
        unflushed = self._segments[start:]
        for i, segment in enumerate(unflushed):
            if self._recover_segment(segment) > 0:
                for later in unflushed[i + 1 :]:
                    self._remove_segment(later)
                break

    def _recover_segment(self, segment: LogSegment) -> int:
        self.recovered_segments.append(segment.base_offset)
        return segment.recover(self._assign_epoch_of)

    def _assign_epoch_of(self, batch: BatchHeader) -> None:
        """A recovered batch of a newer leader epoch starts that epoch
        (``LogSegment.recover``)."""
        epoch = batch.partition_leader_epoch
        latest = self.leader_epoch_cache.latest_epoch
        if epoch >= 0 and (latest is None or epoch > latest):
            self.leader_epoch_cache.assign(epoch, batch.base_offset)

    # -- segments

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    def _new_segment(self, base_offset: int) -> LogSegment:
        return LogSegment(
            self.directory, base_offset, self.config.segment, self._files, self._now_ms
        )

    def _add_segment(self, segment: LogSegment) -> None:
        self._segments.append(segment)
        self._bases.append(segment.base_offset)

    def _remove_segment(self, segment: LogSegment) -> None:
        i = self._segments.index(segment)
        del self._segments[i]
        del self._bases[i]
        segment.delete()

    def segments_between(self, from_offset: int, to_offset: int) -> list[LogSegment]:
        """``Log.logSegments(from, to)``: the segments from the one holding ``from_offset``
        (the first if none does) up to those starting before ``to_offset``."""
        first = max(0, self._segment_for(from_offset))
        return [s for s in self._segments[first:] if s.base_offset < to_offset]

    def new_cleaned_segment(self, base_offset: int) -> LogSegment:
        """An empty ``<base>.log.cleaned`` with its indexes, any earlier one removed
        (``LogCleaner.createNewCleanedSegment``)."""
        for suffix in _SEGMENT_SUFFIXES:
            self._files.delete(self.directory / f"{base_offset:020d}{suffix}{CLEANED_SUFFIX}")
        return LogSegment(
            self.directory,
            base_offset,
            self.config.segment,
            self._files,
            self._now_ms,
            file_suffix=CLEANED_SUFFIX,
        )

    @_guarded
    def replace_segments(self, cleaned: LogSegment, old: list[LogSegment]) -> list[Path]:
        """Swap ``cleaned`` (written by the log cleaner, based at ``old[0]``'s base
        offset) in for the consecutive segments ``old`` (``Log.replaceSegments``), in two
        phases that a crash at any point leaves recoverable: ``cleaned`` is flushed and
        renamed ``.swap`` (from then on, loading finishes the swap); the old segments'
        files are renamed ``.deleted``; the ``.swap`` files take the segment's names. It
        keeps the last old segment's last write time. The ``.deleted`` files are
        returned: the caller removes them after ``file.delete.delay.ms``."""
        base = old[0].base_offset
        if cleaned.base_offset != base:
            raise ValueError(f"a cleaned segment at {cleaned.base_offset} cannot replace {base}")
        last_modified = old[-1].last_modified_ms
        cleaned.on_become_inactive()
        cleaned.flush()
        cleaned.close()
        _rename_segment_files(self._files, self.directory, base, CLEANED_SUFFIX, SWAP_SUFFIX)
        position = self._segments.index(old[0])
        renamed = self._rename_deleted(old)
        _rename_segment_files(self._files, self.directory, base, SWAP_SUFFIX, "")
        segment = self._new_segment(base)
        segment.load_largest_timestamp()
        segment.last_modified_ms = last_modified
        self._segments.insert(position, segment)
        self._bases.insert(position, base)
        return renamed

    def _rename_deleted(self, segments: list[LogSegment]) -> list[Path]:
        """Take ``segments`` out of the log and rename their files ``.deleted`` (Kafka's
        asynchronous ``deleteSegmentFiles``); the renamed files."""
        renamed: list[Path] = []
        for segment in segments:
            i = self._segments.index(segment)
            del self._segments[i]
            del self._bases[i]
            segment.close_handlers()
            for path in (segment.log_path, segment.index_path, segment.time_index_path):
                if self._files.exists(path):
                    target = path.with_name(path.name + DELETED_SUFFIX)
                    self._files.rename(path, target)
                    renamed.append(target)
        return renamed

    def _segment_for(self, offset: int) -> int:
        """The index in ``_segments`` of the segment holding ``offset`` (-1: before all)."""
        return bisect.bisect_right(self._bases, offset) - 1

    # -- append

    @_guarded
    def append_as_leader(
        self,
        records: bytes,
        leader_epoch: int,
        producers: ProducerStateManager | None = None,
    ) -> LogAppendInfo:
        """Append a client's records (one produce to this partition): checked, offsets
        from the log end, ``leader_epoch`` stamped, as ``Log.appendAsLeader``. Raises
        ``KafkaApiError`` (CORRUPT_MESSAGE, INVALID_RECORD, INVALID_TIMESTAMP,
        MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, UNSUPPORTED_FOR_MESSAGE_FORMAT; a
        ``RecordValidationError`` for records refused) and then changed nothing.

        As in ``Log.append``, the records are validated first and the idempotent
        ``producers``' checks come last, once the segment to write to is chosen: a
        malformed batch is refused with its own error even when it repeats a batch
        already written, and a duplicate of a valid one (``duplicate``) writes nothing;
        INVALID_PRODUCER_EPOCH and OUT_OF_ORDER_SEQUENCE_NUMBER are raised from there.
        The caller records the written batches in ``producers``."""
        if leader_epoch < 0:
            raise ValueError(f"a leader appends with its leader epoch, not {leader_epoch}")
        validated = assign_offsets(
            records,
            next_offset=self.log_end_offset,
            leader_epoch=leader_epoch,
            max_message_bytes=self.config.max_message_bytes,
            timestamp_type=self.config.timestamp_type,
            now_ms=self._now_ms(),
            checks=RecordChecks(
                topic_partition=self.directory.name,
                compacted=self.config.compact,
                max_difference_ms=self.config.timestamp_difference_max_ms,
            ),
        )
        return self._append(validated, producers)

    @_guarded
    def append_as_follower(self, records: bytes) -> LogAppendInfo | None:
        """Append batches fetched from the leader, offsets and bytes as they are
        (``Log.appendAsFollower``); a torn tail is left out, and with no whole batch
        nothing is appended (``None``). Offsets must increase and not start below the log
        end: else UNKNOWN_SERVER_ERROR, as Kafka's ``OffsetsOutOfOrderException`` and
        ``UnexpectedAppendOffsetException`` are answered."""
        headers, valid_bytes = check_follower_batches(records, self.config.max_message_bytes)
        if not headers:
            return None
        last = -1
        max_timestamp, offset_of_max = NO_TIMESTAMP, -1
        for header in headers:
            if header.last_offset <= last:
                raise KafkaApiError(
                    ErrorCode.UNKNOWN_SERVER_ERROR,
                    f"Out of order offsets found in append to {self.directory.name}",
                )
            last = header.last_offset
            if header.partition_leader_epoch < 0:  # the cache's IllegalArgumentException
                raise KafkaApiError(
                    ErrorCode.UNKNOWN_SERVER_ERROR,
                    f"Received invalid partition leader epoch {header.partition_leader_epoch} "
                    f"in append to {self.directory.name}",
                )
            if header.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max = header.max_timestamp, header.last_offset
        first = headers[0].base_offset
        if first < self.log_end_offset:
            raise KafkaApiError(
                ErrorCode.UNKNOWN_SERVER_ERROR,
                f"Unexpected offset in append to {self.directory.name}: first offset {first} "
                f"is below the log end offset {self.log_end_offset}",
            )
        view = memoryview(records)[:valid_bytes]
        validated = ValidatedRecords(
            chunks=(view,),
            size=valid_bytes,
            batches=tuple(headers),
            first_offset=first,
            last_offset=last,
            max_timestamp=max_timestamp,
            offset_of_max_timestamp=offset_of_max,
            log_append_time=NO_TIMESTAMP,
            source_compression=headers[0].compression,
        )
        return self._append(validated)

    def _append(
        self, validated: ValidatedRecords, producers: ProducerStateManager | None = None
    ) -> LogAppendInfo:
        if validated.size > self.config.segment_bytes:
            raise KafkaApiError(
                ErrorCode.RECORD_LIST_TOO_LARGE,
                f"Message batch size is {validated.size} bytes in append to partition "
                f"{self.directory.name} which exceeds the maximum configured segment size "
                f"of {self.config.segment_bytes}.",
            )
        segment = self._maybe_roll(validated)
        for batch in validated.batches:  # Log.append: the cache ignores a known start
            self.leader_epoch_cache.assign(batch.partition_leader_epoch, batch.base_offset)
        info = LogAppendInfo(
            first_offset=validated.first_offset,
            last_offset=validated.last_offset,
            max_timestamp=validated.max_timestamp,
            offset_of_max_timestamp=validated.offset_of_max_timestamp,
            log_append_time=validated.log_append_time,
            log_start_offset=self.log_start_offset,
            batch_count=len(validated.batches),
            valid_bytes=validated.size,
        )
        if producers is not None:  # Log.analyzeAndValidateProducerState
            for batch in validated.batches:
                duplicate = producers.check(batch, self.directory.name)
                if duplicate is not None:
                    return replace(
                        info,
                        first_offset=duplicate.first_offset,
                        last_offset=duplicate.last_offset,
                        log_append_time=duplicate.timestamp,
                        duplicate=True,
                    )
        segment.append(
            validated.last_offset,
            validated.max_timestamp,
            validated.offset_of_max_timestamp,
            validated.chunks,
            validated.size,
        )
        self.log_end_offset = validated.last_offset + 1
        return info

    def _maybe_roll(self, validated: ValidatedRecords) -> LogSegment:
        """The segment to append to, a new one if the active one should roll
        (``Log.maybeRoll``)."""
        segment = self.active_segment
        if segment.should_roll(
            messages_size=validated.size,
            max_timestamp_in_messages=validated.max_timestamp,
            max_offset_in_messages=validated.last_offset,
            segment_bytes=self.config.segment_bytes,
            segment_ms=self.config.segment_ms,
            roll_jitter_ms=self.config.roll_jitter_ms,
        ):
            return self.roll(validated.first_offset)
        return segment

    @_guarded
    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at the log end (or ``expected_next_offset`` if
        larger), finishing the old one, and flush below it (``Log.roll``; Kafka schedules
        that flush, here it runs at once)."""
        new_offset = max(expected_next_offset or 0, self.log_end_offset)
        active = self.active_segment
        if active.base_offset == new_offset:
            if active.size:
                raise KafkaApiError(
                    ErrorCode.UNKNOWN_SERVER_ERROR,
                    f"Trying to roll a new log segment with start offset {new_offset} "
                    "while it already exists",
                )
            self._remove_segment(active)  # an empty active segment is replaced
        else:
            for suffix in _SEGMENT_SUFFIXES:
                self._files.delete(self.directory / f"{new_offset:020d}{suffix}")
            active.on_become_inactive()
        segment = self._new_segment(new_offset)
        self._add_segment(segment)
        self.flush(new_offset)
        return segment

    # -- read

    @_guarded
    def read(
        self,
        start_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        *,
        min_one_message: bool = True,
    ) -> FetchDataInfo:
        """Whole batches from the one holding ``start_offset``, up to ``max_bytes`` (the
        first batch whole even if larger, with ``min_one_message``) and below
        ``max_offset`` (the high watermark for a consumer; the log end when ``None``), as
        ``Log.read``. OFFSET_OUT_OF_RANGE outside [log start, log end]."""
        end = self.log_end_offset
        i = self._segment_for(start_offset)
        if start_offset > end or i < 0 or start_offset < self.log_start_offset:
            raise KafkaApiError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"Received request for offset {start_offset} for partition "
                f"{self.directory.name}, but we only have log segments in the range "
                f"{self.log_start_offset} to {end}.",
            )
        limit = end if max_offset is None else min(max_offset, end)
        if start_offset >= limit:
            return FetchDataInfo(start_offset, self._segments[i].base_offset, -1, b"")
        limit_segment = self._segment_for(limit)
        while i < len(self._segments):
            segment = self._segments[i]
            max_position: int | None = None
            if i == limit_segment:
                found = segment.translate_offset(limit)
                max_position = segment.size if found is None else found.position
            got = segment.read(
                start_offset, max_bytes, max_position, min_one_message=min_one_message
            )
            if got is not None:
                position, data = got
                return FetchDataInfo(start_offset, segment.base_offset, position, data)
            if i >= limit_segment:
                break
            i += 1
        return FetchDataInfo(start_offset, self.active_segment.base_offset, -1, b"")

    @_guarded
    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """The first record at or after ``timestamp`` (``Log.fetchOffsetByTimestamp`` for a
        timestamp, not the -1/-2 specials): looked for in the first segment whose largest
        timestamp reaches it (its last write time when it has none), and only there."""
        for segment in self._segments:
            if _largest_timestamp(segment) >= timestamp:
                return segment.find_offset_by_timestamp(timestamp, self.log_start_offset)
        return None

    def legacy_offsets_before(self, timestamp: int, max_num_offsets: int) -> list[int]:
        """ListOffsets v0 (``Log.legacyFetchOffsetsBefore``): each segment's first offset
        (at least the log start) paired with its last write time, and the log end with the
        time now when the active segment holds data; the ``max_num_offsets`` offsets from
        the latest pair (-1), the earliest (-2) or the last pair written at or before
        ``timestamp`` backwards, largest first. ``ValueError`` for a negative maximum
        (Kafka's array of negative size)."""
        if max_num_offsets < 0:
            raise ValueError(f"max_num_offsets {max_num_offsets} is negative")
        pairs = [
            (max(s.base_offset, self.log_start_offset), s.last_modified_ms) for s in self._segments
        ]
        if self.active_segment.size > 0:
            pairs.append((self.log_end_offset, self._now_ms()))
        if timestamp == LATEST_TIMESTAMP:
            start = len(pairs) - 1
        elif timestamp == EARLIEST_TIMESTAMP:
            start = 0
        else:
            start = len(pairs) - 1
            while start >= 0 and pairs[start][1] > timestamp:
                start -= 1
        count = min(max_num_offsets, start + 1)
        return sorted((pairs[start - j][0] for j in range(count)), reverse=True)

    def end_offset_for_epoch(self, leader_epoch: int) -> EpochEntry:
        """``(epoch, end offset)`` as OffsetForLeaderEpoch answers (``endOffsetFor``)."""
        return self.leader_epoch_cache.end_offset_for(leader_epoch)

    @_guarded
    def maybe_assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> None:
        """A new leader epoch starts at ``start_offset`` (``Partition.makeLeader`` calls
        it with the log end)."""
        self.leader_epoch_cache.assign(leader_epoch, start_offset)

    # -- truncation and deletion

    @_guarded
    def truncate_to(self, target_offset: int) -> bool:
        """Cut the log at ``target_offset`` (a follower's divergent tail; whole batches go,
        from the one holding the target), as ``Log.truncateTo``. At or past the log end
        only the epoch cache is truncated. Whether anything was cut."""
        if target_offset < 0:
            raise ValueError(f"cannot truncate to a negative offset ({target_offset})")
        if target_offset >= self.log_end_offset:
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            return False
        if self._segments[0].base_offset > target_offset:
            self.truncate_fully_and_start_at(target_offset)
            return True
        for segment in [s for s in self._segments if s.base_offset > target_offset]:
            self._remove_segment(segment)
        self.active_segment.truncate_to(target_offset)
        self.active_segment.resize_indexes(self.config.max_index_size)
        self.log_end_offset = target_offset
        self.log_start_offset = min(target_offset, self.log_start_offset)
        self.recovery_point = min(self.recovery_point, target_offset)
        self.leader_epoch_cache.truncate_from_end(target_offset)
        return True

    @_guarded
    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and start empty at ``new_offset`` (``Log.truncateFullyAndStartAt``:
        a follower far behind the leader's log start)."""
        if new_offset < 0:
            raise ValueError(f"cannot start a log at a negative offset ({new_offset})")
        for segment in list(self._segments):
            self._remove_segment(segment)
        self._add_segment(self._new_segment(new_offset))
        self.log_end_offset = new_offset
        self.leader_epoch_cache.clear_and_flush()
        self.recovery_point = min(new_offset, self.recovery_point)
        self.log_start_offset = new_offset

    @_guarded
    def maybe_increment_log_start_offset(
        self, new_log_start_offset: int, high_watermark: int | None = None
    ) -> bool:
        """Advance the log start (DeleteRecords, or a follower following its leader's)
        and delete the segments wholly below it (``maybeIncrementLogStartOffset`` then
        ``deleteOldSegments``). OFFSET_OUT_OF_RANGE above ``high_watermark`` (the log end
        when ``None``). Whether the start moved."""
        ceiling = self.log_end_offset if high_watermark is None else high_watermark
        if new_log_start_offset > ceiling:
            raise KafkaApiError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"Cannot increment the log start offset to {new_log_start_offset} of partition "
                f"{self.directory.name} since it is larger than the high watermark {ceiling}",
            )
        if new_log_start_offset <= self.log_start_offset:
            return False
        self.log_start_offset = new_log_start_offset
        self.leader_epoch_cache.truncate_from_start(new_log_start_offset)
        self.delete_old_segments()
        return True

    def delete_old_segments(self) -> int:
        """Delete the segments whose next segment starts at or below the log start (the
        active segment stays); how many went (``deleteLogStartOffsetBreachedSegments``)."""
        deleted = 0
        while len(self._segments) > 1 and self._segments[1].base_offset <= self.log_start_offset:
            self._remove_segment(self._segments[0])
            deleted += 1
        return deleted

    @_guarded
    def delete_retention_breached_segments(self, high_watermark: int) -> list[Path]:
        """Retention (``Log.deleteOldSegments`` as the log manager's retention check calls
        it, with ``cleanup.policy`` holding ``delete``): from the oldest, the segments
        whose largest timestamp (else last write) is more than ``retention.ms`` old, then
        those the log can lose and stay at or above ``retention.bytes``, then those below
        the log start. Only segments wholly below ``high_watermark`` go, and never an
        empty active segment; if every segment goes, a new one is rolled first. The log
        start moves to the first segment left. The files of the segments that went are
        renamed ``.deleted`` (Kafka's asynchronous delete) and returned: the caller
        removes them after ``file.delete.delay.ms``."""
        renamed: list[Path] = []
        if self.config.delete:
            if self.config.retention_ms >= 0:
                now = self._now_ms()
                renamed += self._delete_while(
                    high_watermark,
                    lambda s: now - _largest_timestamp(s) > self.config.retention_ms,
                )
            total = sum(s.size for s in self._segments)
            if 0 <= self.config.retention_bytes <= total:
                excess = total - self.config.retention_bytes

                def within_excess(segment: LogSegment) -> bool:
                    nonlocal excess
                    if excess - segment.size < 0:
                        return False
                    excess -= segment.size
                    return True

                renamed += self._delete_while(high_watermark, within_excess)
        deleted_below_start = self._delete_while(
            high_watermark,
            lambda s: (
                (i := self._segments.index(s) + 1) < len(self._segments)
                and self._segments[i].base_offset <= self.log_start_offset
            ),
        )
        return renamed + deleted_below_start

    def _delete_while(
        self, high_watermark: int, predicate: Callable[[LogSegment], bool]
    ) -> list[Path]:
        """``deletableSegments`` then ``deleteSegments``: the oldest segments for which
        ``predicate`` holds, each wholly below ``high_watermark`` (the last one not empty)."""
        deletable: list[LogSegment] = []
        for i, segment in enumerate(self._segments):
            last = i == len(self._segments) - 1
            upper = self.log_end_offset if last else self._segments[i + 1].base_offset
            if high_watermark < upper or (last and segment.size == 0) or not predicate(segment):
                break
            deletable.append(segment)
        if not deletable:
            return []
        if len(deletable) == len(self._segments):
            self.roll()
        renamed = self._rename_deleted(deletable)
        first = self._segments[0].base_offset
        if first > self.log_start_offset:
            self.log_start_offset = first
            self.leader_epoch_cache.truncate_from_start(first)
        return renamed

    # -- durability

    @_guarded
    def flush(self, offset: int | None = None) -> None:
        """Force the segments holding offsets from the recovery point up to ``offset``
        (the log end when ``None``) to disk; the recovery point moves there (``Log.flush``)."""
        target = self.log_end_offset if offset is None else offset
        if target <= self.recovery_point:
            return
        first = max(0, self._segment_for(self.recovery_point))
        for segment in self._segments[first:]:
            if segment.base_offset >= target:
                break
            segment.flush()
        self.recovery_point = target

    def close(self) -> None:
        """Flush everything and close the files (``Log.close`` after the log manager's
        flush at shutdown): the next open needs no recovery if the marker is written. A
        failed log only closes its files."""
        if self.failure is None:
            self.flush()
            for segment in self._segments:
                segment.close()
            return
        self.close_handlers()

    def close_handlers(self) -> None:
        """Close the files without flushing anything (``Log.closeHandlers``): the log's
        directory failed."""
        for segment in self._segments:
            segment.close_handlers()
