"""The filesystem as a log manager sees it, and a disk that fails on purpose.

Every filesystem operation of ``actors.log.manager`` goes through a ``Disk``. The
operations are synchronous and small (a ``mkdir``, a checkpoint of a few lines, a rename,
removing a directory of empty segment files): they run on the log manager's own task with
no worker thread, so that a run on the virtual clock stays deterministic (a thread would
finish at a real-time moment the simulation cannot order). OS errors are not translated
here: the log manager meets them and turns them into storage errors.

``FaultyDisk`` wraps a disk and makes chosen operations under a chosen directory raise
``OSError``: chaos scenarios and tests use it to break one log directory of one broker.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path

__all__ = ["MUTATING_OPS", "Disk", "DiskFault", "DiskOp", "FaultyDisk"]


class DiskOp(StrEnum):
    """The operations a ``Disk`` offers, by name (also used in traces and fault rules)."""

    MKDIR = "mkdir"
    WRITE_FILE = "write_file"
    RENAME = "rename"
    RMTREE = "rmtree"
    LISTDIR = "listdir"
    IS_DIR = "is_dir"
    READ_FILE = "read_file"


MUTATING_OPS = frozenset({DiskOp.MKDIR, DiskOp.WRITE_FILE, DiskOp.RENAME, DiskOp.RMTREE})
"""What an unwritable (read-only) directory refuses."""


class Disk:
    """The real filesystem, one small synchronous call per operation."""

    def mkdir(self, path: Path | str) -> None:
        """Create ``path`` and its missing parents; an existing directory is fine. (This
        and ``write_files`` also take a plain string: a new log's path, made for every
        creation, costs ten times more as a ``Path``.)"""
        try:
            os.mkdir(path)  # the common case, without pathlib's overhead
        except FileExistsError:
            if not os.path.isdir(path):
                raise
        except FileNotFoundError:
            Path(path).mkdir(parents=True, exist_ok=True)

    def write_file(self, path: Path | str, data: bytes) -> None:
        """Replace ``path``'s content atomically and durably: write a ``.tmp`` sibling,
        flush it, rename it over (as Kafka's checkpoint files are written). An empty file
        is simply created (a new segment or index: nothing to tear). A string path too:
        a new leader's epoch checkpoint is written for every partition it leads."""
        _write(os.fspath(path), data)

    def write_files(self, directory: Path | str, files: Iterable[tuple[str, bytes]]) -> None:
        """The files of a new log, each ``(name, data)`` under ``directory`` (just made),
        in order, stopping at the first failure. They are written in place, not through a
        ``.tmp`` sibling: in a new directory there is no previous content to keep whole
        (Kafka creates a new log's files one by one too)."""
        prefix = os.fspath(directory) + os.sep
        for name, data in files:
            if data:
                _create(prefix + name, data)
                continue
            try:  # _create's common case, inline: a few of these per new log
                os.mknod(prefix + name, _EMPTY_FILE)
            except OSError:
                _create(prefix + name, data)

    def read_file(self, path: Path) -> bytes | None:
        """A small state file's content (``meta.properties``), or None if there is none."""
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None

    def rename(self, src: Path | str, dst: Path | str) -> None:
        """Rename ``src`` to ``dst`` (strings too: a bulk deletion renames thousands of
        logs, and a ``Path`` joined for each costs more than the rename itself)."""
        os.rename(src, dst)

    def rmtree(self, path: Path | str, names: Iterable[str] | None = None) -> None:
        """Remove the directory ``path`` and what it holds. A log directory holds only
        files: they are unlinked through a descriptor of the directory opened without
        following a symlink (as ``shutil.rmtree`` does, which costs twice as much), and a
        subdirectory found among them is left to ``shutil.rmtree``. A symlink at ``path``
        is refused (``OSError``), as ``shutil.rmtree`` refuses it. ``names``: the files
        ``path`` should hold (a log made and never opened since): they are unlinked
        without listing the directory, which is listed only if something is left."""
        fd = os.open(path, _DIR_FLAGS)
        try:
            if names is not None:
                for name in names:  # not there, or not a file: the listing below, if need be
                    with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                        os.unlink(name, dir_fd=fd)
                try:
                    os.rmdir(path)
                    return
                except OSError as exc:
                    if exc.errno != errno.ENOTEMPTY:
                        raise
            for name in os.listdir(fd):
                try:
                    os.unlink(name, dir_fd=fd)
                except IsADirectoryError:
                    shutil.rmtree(os.path.join(path, name))
        finally:
            os.close(fd)
        os.rmdir(path)

    def listdir(self, path: Path) -> tuple[str, ...]:
        """The names in ``path``, sorted (directory order is the filesystem's whim)."""
        return tuple(sorted(os.listdir(path)))

    def is_dir(self, path: Path) -> bool:
        return path.is_dir()


_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


_EMPTY_FILE = stat.S_IFREG | 0o666  # as os.open's mode, the umask applies alike


def _write(path: str, data: bytes) -> None:
    """``Disk.write_file`` on a string path, with plain ``os`` calls (``open(path, "wb")``
    and ``Path.write_bytes`` cost several times the system calls themselves).

    As Kafka 2.7's ``CheckpointFile.write`` and ``Utils.atomicMoveWithFallback``: the
    ``.tmp`` sibling is flushed to disk before it is renamed over the file, so that the
    file has the old content or the new, whole. Kafka 2.7 does not flush the directory
    after the rename (its ``atomicMoveWithFallback`` has no parent flush before 3.0), so a
    power loss can bring the old content back; neither does this."""
    if not data:
        _create(path, data)
        return
    tmp = path + ".tmp"
    _create(tmp, data, sync=True)
    os.replace(tmp, path)


def _create(path: str, data: bytes, *, sync: bool = False) -> None:
    """Write ``path`` in place (``sync``: flushed to disk before it is closed). An empty
    file is one ``mknod`` (no descriptor to open and close: a third of the cost); where
    that is refused (an existing file, a system that keeps ``mknod`` for root) it is opened
    and truncated instead."""
    if not data:
        try:
            os.mknod(path, _EMPTY_FILE)
            return
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.EPERM):
                raise
    fd = os.open(path, _CREATE_FLAGS, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


class DiskFault:
    """One fault rule: ``ops`` on any path at or under ``where`` raise ``OSError(err)``;
    ``remaining`` failures left (``None``: until healed)."""

    __slots__ = ("err", "ops", "remaining", "where")

    def __init__(
        self, where: Path, ops: frozenset[DiskOp], err: int, remaining: int | None
    ) -> None:
        self.where = where
        self.ops = ops
        self.err = err
        self.remaining = remaining

    def applies(self, op: DiskOp, path: Path) -> bool:
        if op not in self.ops or (self.remaining is not None and self.remaining <= 0):
            return False
        return path == self.where or path.is_relative_to(self.where)

    def __repr__(self) -> str:
        ops = ",".join(sorted(self.ops))
        left = "" if self.remaining is None else f", remaining={self.remaining}"
        return f"DiskFault({self.where}, {ops}, {errno.errorcode.get(self.err, self.err)}{left})"


class FaultyDisk(Disk):
    """A ``Disk`` whose operations fail under chosen directories until healed.

    Paths are compared as the log manager names them (its configured log directories
    joined with entry names), without resolving symlinks. ``injected`` records every
    failure raised, in order, as ``(op, path)``.
    """

    def __init__(self, inner: Disk | None = None) -> None:
        self._inner = inner or Disk()
        self._faults: list[DiskFault] = []
        self.injected: list[tuple[DiskOp, Path]] = []

    # -- rules

    def fail(
        self,
        where: Path,
        ops: Iterable[DiskOp] | None = None,
        *,
        times: int | None = None,
        err: int = errno.EIO,
    ) -> DiskFault:
        """Make ``ops`` (every operation when ``None``) under ``where`` raise
        ``OSError(err)``, ``times`` times or until healed."""
        if times is not None and times < 1:
            raise ValueError(f"times must be at least 1, not {times}")
        fault = DiskFault(where, frozenset(DiskOp) if ops is None else frozenset(ops), err, times)
        self._faults.append(fault)
        return fault

    def unwritable(self, where: Path) -> DiskFault:
        """Make ``where`` read-only: every mutating operation fails with ``EROFS``."""
        return self.fail(where, MUTATING_OPS, err=errno.EROFS)

    def heal(self, fault: DiskFault | None = None) -> None:
        """Remove one fault rule, or all of them."""
        if fault is None:
            self._faults.clear()
        else:
            self._faults.remove(fault)

    @property
    def faults(self) -> tuple[DiskFault, ...]:
        return tuple(self._faults)

    def _check(self, op: DiskOp, *paths: Path) -> None:
        for fault in self._faults:
            for path in paths:
                if fault.applies(op, path):
                    if fault.remaining is not None:
                        fault.remaining -= 1
                    self.injected.append((op, path))
                    raise OSError(fault.err, f"injected fault: {op} failed", str(path))

    # -- operations

    def mkdir(self, path: Path | str) -> None:
        self._check(DiskOp.MKDIR, Path(path))
        self._inner.mkdir(path)

    def write_file(self, path: Path | str, data: bytes) -> None:
        self._check(DiskOp.WRITE_FILE, Path(path))
        self._inner.write_file(path, data)

    def write_files(self, directory: Path | str, files: Iterable[tuple[str, bytes]]) -> None:
        for name, data in files:  # each file checked on its own, as the real disk stops
            self._check(DiskOp.WRITE_FILE, Path(directory) / name)
            self._inner.write_files(directory, ((name, data),))

    def read_file(self, path: Path) -> bytes | None:
        self._check(DiskOp.READ_FILE, path)
        return self._inner.read_file(path)

    def rename(self, src: Path | str, dst: Path | str) -> None:
        self._check(DiskOp.RENAME, Path(src), Path(dst))
        self._inner.rename(src, dst)

    def rmtree(self, path: Path | str, names: Iterable[str] | None = None) -> None:
        self._check(DiskOp.RMTREE, Path(path))
        self._inner.rmtree(path, names)

    def listdir(self, path: Path) -> tuple[str, ...]:
        self._check(DiskOp.LISTDIR, path)
        return self._inner.listdir(path)

    def is_dir(self, path: Path) -> bool:
        self._check(DiskOp.IS_DIR, path)
        return self._inner.is_dir(path)
