"""A segment's offset and time indexes (Kafka's ``AbstractIndex``, ``OffsetIndex`` and
``TimeIndex``).

The files are Kafka's: ``.index`` entries are 8 bytes (offset relative to the segment's
base, int32; byte position in the ``.log``, int32), ``.timeindex`` entries 12 bytes
(timestamp, int64; relative offset, int32), big-endian, sorted. A new index file is
preallocated to ``segment.index.bytes`` rounded down to whole entries and trimmed to its
entries when its segment is rolled or closed, as Kafka does; the trailing zeros of an
index that was never trimmed (a crash) are what ``sanity_check`` rejects, which makes the
log rebuild it.

Kafka memory-maps the file; here the entries are also kept in two Python lists (searched
with ``bisect``) and each new entry is one ``pwrite`` at its slot.
"""

from __future__ import annotations

import bisect
import struct
from pathlib import Path

from actors.log.channel import FileChannel, LogFiles
from actors.log.records import NO_TIMESTAMP

__all__ = ["CorruptIndexError", "OffsetIndex", "TimeIndex"]

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_INT32_MAX = 2**31 - 1


class CorruptIndexError(Exception):
    """An index file that cannot be right (Kafka's ``CorruptIndexException``): the log
    rebuilds the segment's indexes from its ``.log``."""


class _Index:
    """What both indexes share: the file, its preallocated length, the entry count."""

    entry_size: int

    def __init__(self, path: Path, base_offset: int, max_index_size: int, files: LogFiles) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        newly_created = not files.exists(path)
        self._channel: FileChannel = files.open(path)
        self._keys: list[int] = []  # relative offsets (offset index) or timestamps (time index)
        self._values: list[int] = []  # positions (offset index) or relative offsets
        self._partial = False  # the file, as loaded, ended in a partial entry
        if newly_created:
            self._channel.truncate(self._rounded(max_index_size))
        else:
            self._load(self._used(self._channel.read(0, self._channel.size)))
        self.max_entries = self._channel.size // self.entry_size

    def _rounded(self, size: int) -> int:
        return size - size % self.entry_size

    def _used(self, data: bytes) -> bytes:
        """The entries of a file read whole: up to the zeros of its preallocated tail, if
        it was never trimmed (a crash), else all of it (a partial entry included, for
        ``sanity_check`` to find)."""
        used = len(data.rstrip(b"\0"))
        if len(data) % self.entry_size == 0:
            used = -(-used // self.entry_size) * self.entry_size
            return data[:used]
        return data

    def _load(self, data: bytes) -> None:
        raise NotImplementedError

    @property
    def entries(self) -> int:
        return len(self._keys)

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    @property
    def file_size(self) -> int:
        return self._channel.size

    def resize(self, size: int) -> None:
        """Make room for ``size`` bytes of entries (zeros after the last one)."""
        self._channel.truncate(max(self._rounded(size), self.entries * self.entry_size))
        self.max_entries = self._channel.size // self.entry_size

    def trim_to_valid_size(self) -> None:
        """Cut the preallocated tail (``AbstractIndex.trimToValidSize``)."""
        self.resize(self.entries * self.entry_size)

    def reset(self) -> None:
        """Drop every entry and preallocate again (``AbstractIndex.reset``)."""
        self._truncate_entries(0)

    def _truncate_entries(self, count: int) -> None:
        del self._keys[count:]
        del self._values[count:]
        self._channel.truncate(count * self.entry_size)  # zeros after, not stale entries
        self.resize(self.max_index_size)

    def _relative(self, offset: int) -> int:
        relative = offset - self.base_offset
        if not 0 <= relative <= _INT32_MAX:
            raise ValueError(f"offset {offset} does not fit the index of base {self.base_offset}")
        return relative

    def can_append_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= _INT32_MAX

    def flush(self) -> None:
        self._channel.flush()

    def close(self) -> None:
        """Trim and close (``AbstractIndex.close``)."""
        if not self._channel.closed:
            self.trim_to_valid_size()
            self._channel.close()

    def close_handler(self) -> None:
        """Close without trimming (a file about to be deleted)."""
        self._channel.close()


class OffsetIndex(_Index):
    """``<base>.index``: offset -> position of the batch it starts a scan at."""

    entry_size = _OFFSET_ENTRY.size

    def _load(self, data: bytes) -> None:
        self._partial = len(data) % self.entry_size != 0
        for relative, position in _OFFSET_ENTRY.iter_unpack(data[: self._rounded(len(data))]):
            self._keys.append(relative)
            self._values.append(position)

    @property
    def last_offset(self) -> int:
        return self.base_offset + (self._keys[-1] if self._keys else 0)

    def sanity_check(self, log_size: int) -> None:
        """Entries strictly increasing in offset and in position, each inside the log
        (stricter than ``OffsetIndex.sanityCheck``, which lets a crashed, zero-filled
        tail pass and relies on recovery to reset it)."""
        if self._partial:
            raise CorruptIndexError(f"index file {self.path} has a partial entry")
        previous_offset = previous_position = -1
        for relative, position in zip(self._keys, self._values, strict=True):
            if relative <= previous_offset or position <= previous_position or position >= log_size:
                raise CorruptIndexError(
                    f"corrupt index {self.path}: entry ({relative}, {position}) after "
                    f"({previous_offset}, {previous_position}), log size {log_size}"
                )
            previous_offset, previous_position = relative, position

    def append(self, offset: int, position: int) -> None:
        """Add ``offset`` -> ``position``; offsets only grow (``OffsetIndex.append``)."""
        relative = self._relative(offset)
        if self.is_full:
            raise ValueError(f"attempt to append to a full index {self.path}")
        if self._keys and relative <= self._keys[-1]:
            raise ValueError(
                f"attempt to append offset {offset} no larger than the last "
                f"({self.last_offset}) to {self.path}"
            )
        self._channel.write_at(
            self.entries * self.entry_size, _OFFSET_ENTRY.pack(relative, position)
        )
        self._keys.append(relative)
        self._values.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """The last entry at or below ``offset``, or ``(base, 0)`` (``OffsetIndex.lookup``)."""
        slot = bisect.bisect_right(self._keys, offset - self.base_offset) - 1
        if slot < 0:
            return self.base_offset, 0
        return self.base_offset + self._keys[slot], self._values[slot]

    def truncate_to(self, offset: int) -> None:
        """Drop the entries at or above ``offset`` (``OffsetIndex.truncateTo``)."""
        self._truncate_entries(bisect.bisect_left(self._keys, offset - self.base_offset))

    def entries_as_pairs(self) -> tuple[tuple[int, int], ...]:
        """Every entry as ``(offset, position)``: tests and tools."""
        return tuple(
            (self.base_offset + k, v) for k, v in zip(self._keys, self._values, strict=True)
        )


class TimeIndex(_Index):
    """``<base>.timeindex``: timestamp -> the offset of the batch where it was reached."""

    entry_size = _TIME_ENTRY.size

    def _load(self, data: bytes) -> None:
        self._partial = len(data) % self.entry_size != 0
        for timestamp, relative in _TIME_ENTRY.iter_unpack(data[: self._rounded(len(data))]):
            self._keys.append(timestamp)
            self._values.append(relative)

    @property
    def is_full(self) -> bool:
        """One slot is kept for the entry written at roll (``TimeIndex.isFull``)."""
        return self.entries >= self.max_entries - 1

    @property
    def last_entry(self) -> tuple[int, int]:
        """``(timestamp, offset)`` of the last entry, or ``(NO_TIMESTAMP, base)``."""
        if not self._keys:
            return NO_TIMESTAMP, self.base_offset
        return self._keys[-1], self.base_offset + self._values[-1]

    def sanity_check(self) -> None:
        """Timestamps and offsets never decrease, offsets are not below the base."""
        if self._partial:
            raise CorruptIndexError(f"time index file {self.path} has a partial entry")
        previous_timestamp, previous_offset = NO_TIMESTAMP, -1
        for timestamp, relative in zip(self._keys, self._values, strict=True):
            if timestamp <= previous_timestamp or relative < previous_offset or relative < 0:
                raise CorruptIndexError(
                    f"corrupt time index {self.path}: entry ({timestamp}, {relative}) after "
                    f"({previous_timestamp}, {previous_offset})"
                )
            previous_timestamp, previous_offset = timestamp, relative

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Add ``timestamp`` -> ``offset`` if the timestamp is larger than the last one
        (``TimeIndex.maybeAppend``)."""
        if not skip_full_check and self.is_full:
            raise ValueError(f"attempt to append to a full time index {self.path}")
        last_timestamp, last_offset = self.last_entry
        if self._keys and offset < last_offset:
            raise ValueError(f"time index offset {offset} below the last ({last_offset})")
        if timestamp <= last_timestamp:
            return
        if self.entries >= self.max_entries:  # the entry kept for the roll: make its room
            self.resize((self.entries + 1) * self.entry_size)
        relative = self._relative(offset)
        self._channel.write_at(
            self.entries * self.entry_size, _TIME_ENTRY.pack(timestamp, relative)
        )
        self._keys.append(timestamp)
        self._values.append(relative)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """The last entry whose timestamp is at or below ``timestamp``, else
        ``(NO_TIMESTAMP, base)`` (``TimeIndex.lookup``)."""
        slot = bisect.bisect_right(self._keys, timestamp) - 1
        if slot < 0:
            return NO_TIMESTAMP, self.base_offset
        return self._keys[slot], self.base_offset + self._values[slot]

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose offset is at or above ``offset`` (``TimeIndex.truncateTo``)."""
        relative = offset - self.base_offset
        keep = 0
        while keep < len(self._values) and self._values[keep] < relative:
            keep += 1
        self._truncate_entries(keep)

    def entries_as_pairs(self) -> tuple[tuple[int, int], ...]:
        """Every entry as ``(timestamp, offset)``: tests and tools."""
        return tuple(
            (k, self.base_offset + v) for k, v in zip(self._keys, self._values, strict=True)
        )
