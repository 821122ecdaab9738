"""The leader epoch cache of a partition log (Kafka's ``LeaderEpochFileCache`` over its
``LeaderEpochCheckpointFile``).

Each entry is a leader epoch and the first offset written in it, epochs and offsets both
increasing. The whole cache is written to ``leader-epoch-checkpoint`` on every change, in
the checkpoint format (a version line ``0``, a count line, then ``<epoch> <startOffset>``
lines), atomically: a ``.tmp`` sibling flushed and renamed over the file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from actors.log.channel import LogFiles

__all__ = [
    "LEADER_EPOCH_CHECKPOINT",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "CheckpointError",
    "EpochEntry",
    "LeaderEpochFileCache",
    "format_epoch_checkpoint",
    "parse_epoch_checkpoint",
]

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
_VERSION = 0

EpochEntry = tuple[int, int]
"""``(epoch, start offset)`` (Kafka's ``EpochEntry``)."""


class CheckpointError(OSError):
    """A checkpoint file Kafka would refuse to read (its ``IOException``: wrong version,
    a malformed line, a count that does not match). An ``OSError``, as a failing disk:
    the log manager takes the log directory offline for either, as Kafka's
    ``LogDirFailureChannel`` does."""


def format_epoch_checkpoint(entries: Iterable[EpochEntry]) -> bytes:
    """The file's bytes (``CheckpointFile.write``)."""
    rows = [f"{epoch} {offset}" for epoch, offset in entries]
    return "".join(f"{line}\n" for line in (str(_VERSION), str(len(rows)), *rows)).encode()


def parse_epoch_checkpoint(data: bytes, path: Path) -> list[EpochEntry]:
    """The entries of a ``leader-epoch-checkpoint`` (``CheckpointReadBuffer.read``): an
    empty file has none; anything malformed raises ``CheckpointError``."""
    if not data:
        return []
    try:
        lines = data.decode().split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if int(lines[0]) != _VERSION:
            raise CheckpointError(f"Unrecognized version of the checkpoint file {path}: {lines[0]}")
        count = int(lines[1])
        entries: list[EpochEntry] = []
        for line in lines[2:]:
            fields = line.split()
            if len(fields) != 2:
                raise CheckpointError(f"Malformed line in checkpoint file {path}: '{line}'")
            entries.append((int(fields[0]), int(fields[1])))
    except (UnicodeDecodeError, ValueError, IndexError) as exc:
        raise CheckpointError(f"Malformed checkpoint file {path}: {exc}") from None
    if len(entries) != count:
        raise CheckpointError(
            f"Expected {count} entries in checkpoint file {path}, but found only {len(entries)}"
        )
    return entries


class LeaderEpochFileCache:
    """Epochs and their start offsets, in order; every change is written at once.
    ``log_end_offset`` is read when a lookup concerns the latest epoch."""

    def __init__(self, path: Path, files: LogFiles, log_end_offset: Callable[[], int]) -> None:
        """Load ``path`` (a missing file is an empty cache, created empty as Kafka does)."""
        self.path = path
        self._files = files
        self._log_end_offset = log_end_offset
        data = files.read_file(path)
        if data is None:
            files.write_file(path, b"")
            data = b""
        self._entries: list[EpochEntry] = parse_epoch_checkpoint(data, path)

    # -- views

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return tuple(self._entries)

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1][0] if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def end_offset_for(self, requested_epoch: int) -> EpochEntry:
        """``(epoch, end offset)`` for an OffsetForLeaderEpoch of ``requested_epoch``
        (``LeaderEpochFileCache.endOffsetFor``): the log end for the latest epoch, the
        next epoch's start offset for an older one (with the largest epoch at or below
        the requested one, or the requested one itself below the first), and
        ``(-1, -1)`` for an undefined or a newer epoch, or an empty cache."""
        undefined = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return undefined
        if self._entries[-1][0] == requested_epoch:
            return requested_epoch, self._log_end_offset()
        higher = next((e for e in self._entries if e[0] > requested_epoch), None)
        if higher is None:
            return undefined
        floor = [e for e in self._entries if e[0] <= requested_epoch]
        return (floor[-1][0] if floor else requested_epoch), higher[1]

    # -- changes

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (``LeaderEpochFileCache.assign``):
        nothing if it is the latest epoch already starting no later; else the entries it
        contradicts (an epoch not older, or a start not earlier) are dropped first."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        if self._entries:
            last_epoch, last_offset = self._entries[-1]
            if epoch == last_epoch and start_offset >= last_offset:
                return
        while self._entries and (
            self._entries[-1][0] >= epoch or self._entries[-1][1] >= start_offset
        ):
            self._entries.pop()
        self._entries.append((epoch, start_offset))
        self._flush()

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop the entries starting at or after ``end_offset`` (``truncateFromEnd``)."""
        if end_offset >= 0 and self._entries and self._entries[-1][1] >= end_offset:
            while self._entries and self._entries[-1][1] >= end_offset:
                self._entries.pop()
            self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop the entries starting at or before ``start_offset``, the last of them kept
        with its start moved to ``start_offset`` (``truncateFromStart``)."""
        if start_offset < 0:
            return
        removed = 0
        while removed < len(self._entries) and self._entries[removed][1] <= start_offset:
            removed += 1
        if removed:
            epoch = self._entries[removed - 1][0]
            kept = [(epoch, start_offset)]
            if self._entries[:removed] == kept:
                return  # the one entry already starts there: the file says so already
            self._entries[:removed] = kept
            self._flush()

    def clear_and_flush(self) -> None:
        self._entries.clear()
        self._flush()

    def _flush(self) -> None:
        self._files.write_file(self.path, format_epoch_checkpoint(self._entries))
