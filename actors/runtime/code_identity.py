"""Which kemu code a process runs: its identity, for a run's ``summary.json``.

Two runs of the same (scenario, seed) in deterministic mode give the same trace only if
they ran the same code. A virtualenv's editable install can point at another checkout, and
a checkout can change under a long session, so a trace that differs from a replay's may
come from different code rather than from nondeterminism. ``code_identity`` names the code
this process imported: kemu's version, a SHA-256 over the files of its four packages as
found on the import path (``actors``, ``cluster``, ``protocol``, ``spark``; their paths
and bytes, ``__pycache__`` and dotfiles left out), and the git commit when the packages sit
in a git checkout whose packages have no uncommitted change (git is not required), and the
runtime under kemu that a deterministic trace depends on as much as on kemu's own files:
the Python version (asyncio schedules every task) and the versions of
``TRACE_DEPENDENCIES``. It is computed once per process. The digest and the runtime, not
the commit, decide whether two identities name the same code (``different_code``): the
same files on the same runtime give the same identity wherever they are.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Final

import msgspec

__all__ = [
    "PACKAGES",
    "TRACE_DEPENDENCIES",
    "CodeIdentity",
    "code_identity",
    "different_code",
    "recorded_code",
    "source_digest",
]

PACKAGES: Final = ("actors", "cluster", "protocol", "spark")
"""kemu's packages: the source the digest covers."""

TRACE_DEPENDENCIES: Final = ("anyio", "msgspec")
"""The distributions a deterministic run's trace depends on beyond kemu's source: anyio
runs every actor's task group and memory stream (the order tasks run in), msgspec encodes
every message and trace line."""

GIT_TIMEOUT: Final = 10.0
"""Seconds each git command may take before the commit is left out."""

SHOWN_DIGITS: Final = 12
"""Hex digits of the digest and the commit a message shows."""


class CodeIdentity(msgspec.Struct, frozen=True, kw_only=True):
    """``source_sha256``: ``source_digest`` of the imported packages; ``commit``: the git
    commit they were checked out from, ``None`` when not a git checkout, git is missing
    or the packages have uncommitted changes; ``runtime``: the version of Python
    (``python``) and of each of ``TRACE_DEPENDENCIES`` (``None`` where not installed), ``None``
    in a summary written before the field existed."""

    version: str
    source_sha256: str
    commit: str | None = None
    runtime: dict[str, str | None] | None = None

    def label(self, runtime: tuple[str, ...] = ()) -> str:
        """One line for people: ``kemu 0.1.0 source 1a2b3c4d5e6f (commit 0123abcd4567)``,
        followed by ``with anyio 4.16.0`` for each name of ``runtime``."""
        where = f"commit {self.commit[:SHOWN_DIGITS]}" if self.commit else "no clean git commit"
        line = f"kemu {self.version} source {self.source_sha256[:SHOWN_DIGITS]} ({where})"
        known = self.runtime or {}
        return "".join([line, *(f" with {name} {known.get(name)}" for name in runtime)])

    def runtime_differences(self, other: CodeIdentity) -> tuple[str, ...]:
        """The names whose runtime versions differ, where both identities know theirs."""
        if self.runtime is None or other.runtime is None:
            return ()
        names = sorted(self.runtime.keys() | other.runtime.keys())
        return tuple(n for n in names if self.runtime.get(n) != other.runtime.get(n))

    def same_code(self, other: CodeIdentity) -> bool:
        same_source = (self.version, self.source_sha256) == (other.version, other.source_sha256)
        return same_source and not self.runtime_differences(other)


def different_code(a: CodeIdentity | None, b: CodeIdentity | None) -> str | None:
    """The sentence that says two runs were made by different code, or ``None`` when they
    were made by the same code or either identity is unknown (a summary from before the
    field existed)."""
    if a is None or b is None or a.same_code(b):
        return None
    runtime = a.runtime_differences(b)
    return f"the runs were made by different code: {a.label(runtime)} vs {b.label(runtime)}"


class _Recorded(msgspec.Struct):
    code: CodeIdentity | None = None


def recorded_code(summary: Path) -> CodeIdentity | None:
    """The identity a run's ``summary.json`` records, ``None`` if the file is missing,
    unreadable or names none."""
    try:
        return msgspec.json.decode(summary.read_bytes(), type=_Recorded).code
    except (OSError, msgspec.DecodeError):
        return None


def source_digest(directories: dict[str, Path]) -> str:
    """SHA-256 over the relative path and bytes of every file under each package's
    directory (``{package: directory}``), in package then path order."""
    digest = hashlib.sha256()
    for package in sorted(directories):
        root = directories[package]
        files = sorted(
            p.relative_to(root)
            for p in root.rglob("*")
            if p.is_file()
            and "__pycache__" not in p.parts
            and not any(part.startswith(".") for part in p.relative_to(root).parts)
        )
        for relative in files:
            digest.update(f"{package}/{relative.as_posix()}".encode() + b"\0")
            digest.update((root / relative).read_bytes() + b"\0")
    return digest.hexdigest()


@functools.cache
def code_identity() -> CodeIdentity:
    """This process's kemu code (computed on first use, then the same answer)."""
    directories = _package_directories()
    try:
        version = importlib.metadata.version("kemu")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return CodeIdentity(
        version=version,
        source_sha256=source_digest(directories),
        commit=_clean_commit(directories),
        runtime=_runtime(),
    )


def _runtime() -> dict[str, str | None]:
    """The versions of Python and of ``TRACE_DEPENDENCIES`` this process runs."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in TRACE_DEPENDENCIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _package_directories() -> dict[str, Path]:
    """Where each package is imported from (found without importing it)."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        spec = importlib.util.find_spec(package)
        locations = spec.submodule_search_locations if spec is not None else None
        if locations:
            found[package] = Path(next(iter(locations))).resolve()
    return found


def _clean_commit(directories: dict[str, Path]) -> str | None:
    """The commit of the git checkout holding every package, if none of them has an
    uncommitted change (untracked files included); ``None`` otherwise."""
    roots = {d.parent for d in directories.values()}
    if len(roots) != 1 or len(directories) != len(PACKAGES):
        return None
    root = roots.pop()
    top = _git(root, "rev-parse", "--show-toplevel", "HEAD")
    if top is None or len(top.split()) != 2 or Path(top.split()[0]).resolve() != root:
        return None
    status = _git(root, "status", "--porcelain", "--", *PACKAGES)
    return top.split()[1] if status == "" else None


def _git(root: Path, *args: str) -> str | None:
    """git's output in ``root``, or ``None`` if git is missing or fails."""
    git = shutil.which("git")
    if git is None:
        return None
    try:
        done = subprocess.run(  # noqa: S603 - git with fixed arguments, no shell
            [git, "-C", str(root), *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None
