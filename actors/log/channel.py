"""The files of a partition log: open channels on segment and index files, and the few
directory operations a ``Log`` needs.

``actors.log.disk.Disk`` is the log manager's seam (directories and checkpoint files).
A partition log also appends to, reads from, cuts and flushes open files, as Kafka's
``FileRecords`` and ``AbstractIndex`` do through a ``java.nio.channels.FileChannel``.
Those operations are here, one plain ``os`` call each, synchronous (see
``actors.log.disk`` for why there is no worker thread). ``LogFiles`` hands out channels
and passes directory and checkpoint operations to the ``Disk`` it wraps, so a
``FaultyDisk`` under it still breaks the checkpoint writes of a log.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path

from actors.log.disk import Disk

__all__ = ["FileChannel", "LogFiles"]

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
