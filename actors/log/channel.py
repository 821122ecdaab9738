"""The files of a partition log: open channels on segment and index files, and the few
directory operations a ``Log`` needs.

``actors.log.disk.Disk`` is the log manager's seam (directories and checkpoint files).
A partition log also appends to, reads from, cuts and flushes open files, as Kafka's
``FileRecords`` and ``AbstractIndex`` do through a ``java.nio.channels.FileChannel``.
Those operations are here, one plain ``os`` call each, synchronous (see
``actors.log.disk`` for why there is no worker thread). ``LogFiles`` hands out channels
and passes directory and checkpoint operations to the ``Disk`` it wraps, so a
``FaultyDisk`` under it still breaks the checkpoint writes of a log.

``FaultyLogFiles`` is ``FaultyDisk``'s counterpart for the data files: its channels fail
chosen operations (an append, an index write, a flush...) under a chosen directory.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from actors.log.disk import Disk

__all__ = ["ChannelFault", "ChannelOp", "FaultyLogFiles", "FileChannel", "LogFiles"]

_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)


class FileChannel:
    """One open file, read and written at explicit positions (Kafka's ``FileChannel``
    as ``FileRecords`` uses it). ``size`` is the file's length as this channel last set
    it: appends go to ``size``, so an append is one ``pwritev`` whatever its pieces."""

    __slots__ = ("_fd", "path", "size")

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = os.open(path, _OPEN_FLAGS, 0o666)
        self.size = os.fstat(self._fd).st_size

    def append(self, chunks: Sequence[bytes | memoryview]) -> int:
        """Write ``chunks`` one after the other at the end; the position they start at."""
        position = self.size
        total = sum(len(c) for c in chunks)
        written = os.pwritev(self._fd, chunks, position)
        if written != total:  # a short write (a full disk): finish it or fail
            self._write_rest(b"".join(chunks)[written:], position + written)
        self.size = position + total
        return position

    def write_at(self, position: int, data: bytes) -> None:
        """Write ``data`` at ``position`` (an index entry), growing the file if needed."""
        view = memoryview(data)
        self._write_rest(view, position)
        self.size = max(self.size, position + len(data))

    def _write_rest(self, data: bytes | memoryview, position: int) -> None:
        view = memoryview(data)
        while view:
            written = os.pwrite(self._fd, view, position)
            view = view[written:]
            position += written

    def read(self, position: int, length: int) -> bytes:
        """Up to ``length`` bytes from ``position`` (fewer at the end of the file)."""
        if length <= 0:
            return b""
        return os.pread(self._fd, length, position)

    def truncate(self, size: int) -> None:
        """Set the file's length (cut it, or grow it with zeros: a preallocated index)."""
        os.ftruncate(self._fd, size)
        self.size = size

    def flush(self) -> None:
        """Force the file's content to disk (``FileChannel.force``)."""
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    @property
    def closed(self) -> bool:
        return self._fd < 0


class LogFiles:
    """What a ``Log`` does to its directory: channels on its files, deleting and listing
    files, and atomic checkpoint writes through the wrapped ``Disk``."""

    def __init__(self, disk: Disk | None = None) -> None:
        self.disk = disk or Disk()

    def open(self, path: Path) -> FileChannel:
        """Open ``path`` for reading and writing, creating it empty if missing."""
        return FileChannel(os.fspath(path))

    def exists(self, path: Path) -> bool:
        return os.path.exists(path)

    def delete(self, path: Path) -> None:
        """Remove a file; a missing one is fine (Kafka's ``Files.deleteIfExists``)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)

    def rename(self, src: Path, dst: Path) -> None:
        self.disk.rename(src, dst)

    def mkdir(self, path: Path) -> None:
        self.disk.mkdir(path)

    def listdir(self, path: Path) -> tuple[str, ...]:
        return self.disk.listdir(path)

    def read_file(self, path: Path) -> bytes | None:
        """A whole small file (a checkpoint), or ``None`` if it does not exist."""
        try:
            with open(path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def write_file(self, path: Path, data: bytes) -> None:
        """Replace a small file atomically and durably (``Disk.write_file``)."""
        self.disk.write_file(path, data)


class ChannelOp(StrEnum):
    """The file operations of a log that ``FaultyLogFiles`` can fail."""

    OPEN = "open"
    APPEND = "append"
    WRITE_AT = "write_at"
    READ = "read"
    TRUNCATE = "truncate"
    FLUSH = "flush"
    DELETE = "delete"


@dataclass(slots=True)
class ChannelFault:
    """``ops`` on files at or under ``where`` raise ``OSError(err)``; ``remaining``
    failures left (``None``: until healed)."""

    where: Path
    ops: frozenset[ChannelOp]
    err: int
    remaining: int | None


class FaultyLogFiles(LogFiles):
    """``LogFiles`` whose channel operations fail under chosen directories until healed.
    ``injected`` records every failure raised, in order, as ``(op, path)``."""

    def __init__(self, disk: Disk | None = None) -> None:
        super().__init__(disk)
        self._faults: list[ChannelFault] = []
        self.injected: list[tuple[ChannelOp, Path]] = []

    def fail(
        self,
        where: Path,
        ops: Iterable[ChannelOp] | None = None,
        *,
        times: int | None = None,
        err: int = errno.EIO,
    ) -> ChannelFault:
        """Make ``ops`` (all when ``None``) under ``where`` raise ``OSError(err)``,
        ``times`` times or until healed."""
        chosen = frozenset(ChannelOp) if ops is None else frozenset(ops)
        fault = ChannelFault(where, chosen, err, times)
        self._faults.append(fault)
        return fault

    def heal(self, fault: ChannelFault | None = None) -> None:
        if fault is None:
            self._faults.clear()
        else:
            self._faults.remove(fault)

    def check(self, op: ChannelOp, path: Path) -> None:
        for fault in self._faults:
            live = fault.remaining is None or fault.remaining > 0
            if (
                live
                and op in fault.ops
                and (path == fault.where or path.is_relative_to(fault.where))
            ):
                if fault.remaining is not None:
                    fault.remaining -= 1
                self.injected.append((op, path))
                raise OSError(fault.err, f"injected fault: {op} failed", str(path))

    def open(self, path: Path) -> FileChannel:
        self.check(ChannelOp.OPEN, path)
        return _FaultyChannel(path, self)

    def delete(self, path: Path) -> None:
        self.check(ChannelOp.DELETE, path)
        super().delete(path)


class _FaultyChannel(FileChannel):
    """A channel that asks its ``FaultyLogFiles`` before each operation."""

    __slots__ = ("_faults", "_where")

    def __init__(self, path: Path, faults: FaultyLogFiles) -> None:
        super().__init__(os.fspath(path))
        self._where = path
        self._faults = faults

    def append(self, chunks: Sequence[bytes | memoryview]) -> int:
        self._faults.check(ChannelOp.APPEND, self._where)
        return super().append(chunks)

    def write_at(self, position: int, data: bytes) -> None:
        self._faults.check(ChannelOp.WRITE_AT, self._where)
        super().write_at(position, data)

    def read(self, position: int, length: int) -> bytes:
        self._faults.check(ChannelOp.READ, self._where)
        return super().read(position, length)

    def truncate(self, size: int) -> None:
        self._faults.check(ChannelOp.TRUNCATE, self._where)
        super().truncate(size)

    def flush(self) -> None:
        self._faults.check(ChannelOp.FLUSH, self._where)
        super().flush()
