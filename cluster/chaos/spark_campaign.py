"""A chaos campaign as a Spark job: ``kemu chaos campaign``.

The driver ships each (scenario, seed) pair as data — a ``CampaignTask`` encoded as
JSON (the scenario file's text, the path it was given as, the seed and the output
directory) — never a pickled object of ours. The runs are dealt into a few Spark tasks
per executor core (``batches``: each task's own cost — Spark's scheduling, the Python
worker's set-up — is paid per batch, not per run). For each run of its batch the
executor parses the scenario from that text, runs it in deterministic mode (an
in-process cluster on the virtual clock, ``run_scenario``) into a staging directory
beside ``OUT/<scenario>/seed-<N>``, exports the trace to ``trace.parquet`` beside
``trace.jsonl``, renames the whole run into place, and answers the run's
``summary.json`` bytes, which the driver decodes with msgspec into a ``RunResult``.
(Spark itself pickles the task function — by module name — and the byte strings it
carries; nothing else crosses the network.) The run directory is the one ``kemu chaos
run --deterministic`` writes for the same scenario and seed, byte for byte but for the
wall time, whichever machine ran it: the virtual clock and the seeded RNG are the whole
of a run's time and randomness.

A task's runs are done in a process forked from Spark's Python worker (``run_batch``):
a run during which it dies (a signal, the kernel's OOM killer) or that fails outside
its own boundary is that run's ``error`` result and the task goes on, so a run that
kills its process on every try fails alone instead of failing the job. Spark retries a
task whose attempt failed (its executor or Python worker lost:
``spark.task.maxFailures``; the runs' process dies with its worker). A run goes into
place only whole, so the retried attempt writes each of its runs once and the dead
attempt leaves only its staging directory (``.seed-N.<campaign>.*.partial``), which the
driver removes once the job is over. A run that cannot be done (``KemuError``: a run directory
that holds something else) is that run's ``error`` result, not the campaign's end; a
task that keeps failing (an output directory the executors cannot write) fails the job,
and the command says so in one line.

The output directory must be one path every executor can write and the driver can read
(a shared file system mounted at the same path everywhere; a path or a ``file:`` URL:
``run_scenario`` writes with the operating system's file calls, so ``hdfs://`` or
``s3a://`` are refused).

Several campaigns may write into one output directory at once. Each has a token of its
own (``campaign_lock``), in the names of its staging directories, and holds the lock of
``OUT/.kemu-campaign.<token>.lock`` (``flock``) while its driver lives; a campaign that
ends removes its own staging directories and those whose driver is gone — its lock file
no longer held, or absent — never a live campaign's (``remove_staging``).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import functools
import gc
import importlib
import logging
import os
import re
import secrets
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, NoReturn
from urllib.parse import urlsplit

import msgspec

from actors.runtime.code_identity import code_identity
from cluster.chaos.loader import parse_scenario
from cluster.chaos.runner import (
    RunOptions,
    RunResult,
    refuse_foreign,
    reproduce_command,
    run_scenario,
)
from cluster.logging import configure_logging
from cluster.trace_files import export_parquet
from protocol.errors import KemuError

if TYPE_CHECKING:
    from spark.progress import StageDisplay

__all__ = [
    "CampaignTask",
    "batches",
    "campaign_lock",
    "campaign_tasks",
    "check_master",
    "check_out_dir",
    "out_dir",
    "remove_staging",
    "run_batch",
    "run_here",
    "run_on_spark",
    "run_task",
]

PARQUET_TRACE: Final = "trace.parquet"
PARTIAL: Final = ".partial"  # a run being written: .seed-N.<campaign>.<random>.partial
REPLACED: Final = ".replaced"  # a run being replaced by a new one of the same seed
LOCK_PREFIX: Final = ".kemu-campaign."  # OUT/.kemu-campaign.<campaign>.lock: a live driver's
LOCK_SUFFIX: Final = ".lock"
_URL: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:/")
_NOT_WRITTEN: Final = re.compile(r"RunNotWritten: (.*)")
TASKS_PER_CORE: Final = 4
"""Spark tasks per executor core: few enough that a task's own cost (Spark's scheduling,
the Python worker's task set-up: tens of milliseconds) is small beside its runs', enough
that an executor that frees up early takes another."""
MASTER_CONNECT_TIMEOUT: Final = 5.0
"""Seconds the driver waits for a standalone master's port before giving up."""


class RunNotWritten(Exception):
    """A task could not write its run directory (raised on the executor: Spark retries
    the task, and fails the job when every try did)."""


class CampaignTask(msgspec.Struct, frozen=True, kw_only=True):
    """One run of the campaign, as the driver ships it to an executor (JSON)."""

    source: str  # the scenario file as given on the command line
    text: str  # its contents: executors need not see the file
    seed: int
    out: str  # the campaign's output directory
    campaign: str  # the campaign's token, in its staging directories' names
    log_level: str | None = None  # as kemu's --log-level (None: its defaults)
    log_json: bool = False  # --log-format json


def campaign_tasks(
    scenarios: Sequence[tuple[str, str]],
    seeds: Sequence[int],
    out: Path,
    *,
    campaign: str,
    log_level: str | None = None,
    log_json: bool = False,
) -> list[bytes]:
    """Every (scenario, seed) pair as an encoded ``CampaignTask``, in scenario then seed
    order; ``scenarios``: (file as given, its text), ``campaign``: the campaign's token
    (``campaign_lock``)."""
    return [
        msgspec.json.encode(
            CampaignTask(
                source=source,
                text=text,
                seed=seed,
                out=str(out),
                campaign=campaign,
                log_level=log_level,
                log_json=log_json,
            )
        )
        for source, text in scenarios
        for seed in seeds
    ]


def run_task(encoded: bytes) -> bytes:
    """Run one task (``run_batch`` of it alone); answers the run's ``summary.json``
    bytes."""
    [(_, answer)] = run_batch([(0, encoded)])  # to its end: the child has exited
    return answer


def run_batch(batch: list[tuple[int, bytes]]) -> Iterator[tuple[int, bytes]]:
    """One Spark task: the runs of ``batch`` in turn, each answered with its index in the
    campaign and its ``summary.json`` bytes.

    The runs are done in a child process forked from the Python worker, one after the
    other (``run_here``), each answered through a pipe as it ends. A run whose process
    dies before it answered — killed by a signal (the kernel's OOM killer), exited — is
    that run's ``error`` result with the reason and the command that reproduces it, and
    a new child goes on with the batch's other runs; so is an exception outside the
    run's own boundary (what ``run_scenario`` does not turn into the run's result; the
    child goes on). A run that kills its process on every try thus fails alone, where
    Spark would retry the task and then fail the job. The child dies with the worker
    (``PR_SET_PDEATHSIG``): a worker killed from outside is a failed attempt Spark
    retries, as before. ``RunNotWritten`` from the child is raised here (Spark retries
    the task, on another executor if there is one)."""
    pending = deque(
        (index, msgspec.json.decode(encoded, type=CampaignTask)) for index, encoded in batch
    )
    while pending:
        yield from _child_runs(pending)


def _child_runs(pending: deque[tuple[int, CampaignTask]]) -> Iterator[tuple[int, bytes]]:
    """Fork a child that does the runs of ``pending`` in turn; yield each answer as it
    comes, taking its run off ``pending``. When the child ends before it answered them
    all, the run it was doing is answered as that run's error and taken off; the others
    stay in ``pending``."""
    death = _death_signal()
    parent = os.getpid()
    read_end, write_end = os.pipe()
    for stream in (sys.stdout, sys.stderr):  # or the child would write their rest again
        with contextlib.suppress(Exception):
            stream.flush()
    gc.freeze()  # the child's collections leave the worker's objects (and pages) alone
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_end)
        _runner([task for _, task in pending], write_end, parent, death)
    gc.unfreeze()  # the worker's own garbage stays collectable (it forks once a task)
    os.close(write_end)
    started = _Said()  # the run the child is doing
    read_all = False
    try:
        with os.fdopen(read_end, "rb") as pipe:
            for line in pipe:
                said = msgspec.json.decode(line, type=_Said)
                if said.scenario is not None:
                    started = said
                    continue
                for module in said.modules:  # what the run imported, for the next child
                    with contextlib.suppress(Exception):
                        importlib.import_module(module)
                if said.not_written is not None:
                    raise RunNotWritten(said.not_written)
                index, task = pending.popleft()
                name, started = started.scenario, _Said()
                if said.summary is not None:
                    yield index, said.summary.encode()
                else:
                    why = f"the run's process failed outside the run: {said.failed}"
                    yield index, _error_result(task, name or Path(task.source).stem, why)
            read_all = True
    finally:
        if not read_all:  # this generator was closed, or raised: the child has no reader
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    if pending:  # the child died while doing the first of them
        index, task = pending.popleft()
        if started.staging is not None:  # what it left of the run
            shutil.rmtree(started.staging, ignore_errors=True)
        why = f"the run's process {_ended(status)} before it answered"
        yield index, _error_result(task, started.scenario or Path(task.source).stem, why)


class _Said(msgspec.Struct, frozen=True, omit_defaults=True):
    """A line the child writes to its parent. Before a run: the scenario's name and the
    staging directory (what the parent needs if the child dies). After it: its answer —
    the run's ``summary.json`` text, ``RunNotWritten``'s message (the child then ends),
    or the exception that ended the run outside its boundary — with the modules the run
    imported that the child had not: the parent imports them, so that a child forked
    later starts with them loaded (Spark's worker never does a run itself)."""

    scenario: str | None = None
    staging: str | None = None
    summary: str | None = None
    not_written: str | None = None
    failed: str | None = None
    modules: list[str] = msgspec.field(default_factory=list)


_PR_SET_PDEATHSIG: Final = 1  # linux/prctl.h


@functools.cache
def _death_signal() -> Callable[[], object] | None:
    """Linux's ``prctl(PR_SET_PDEATHSIG, SIGKILL)``, looked up in the parent (once): the
    child calls it so that it dies with the Python worker. None elsewhere."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # no prctl: not Linux
        return None
    return functools.partial(prctl, _PR_SET_PDEATHSIG, signal.SIGKILL)


def _runner(
    tasks: list[CampaignTask], write_end: int, parent: int, death: Callable[[], object] | None
) -> NoReturn:
    """The forked child: do ``tasks`` in turn, telling the parent on ``write_end``
    (``_Said`` lines), then exit, never returning into Spark's worker loop."""
    code = 1
    try:
        if death is not None:
            death()
            if os.getppid() != parent:  # the worker died before prctl took hold
                os._exit(code)
        loaded = set(sys.modules)
        with os.fdopen(write_end, "wb", buffering=0) as pipe:

            def tell(said: _Said) -> None:
                pipe.write(msgspec.json.encode(said) + b"\n")

            def started(scenario: str, staging: Path) -> None:
                tell(_Said(scenario=scenario, staging=str(staging)))

            for task in tasks:
                try:
                    answer = _Said(summary=run_here(task, started=started).decode())
                except RunNotWritten as exc:
                    tell(_Said(not_written=str(exc)))
                    break
                except Exception as exc:  # outside the run's boundary: the run's error
                    answer = _Said(failed=f"{type(exc).__name__}: {exc}")
                modules = [name for name in sys.modules if name not in loaded]
                loaded.update(modules)
                tell(msgspec.structs.replace(answer, modules=modules))
        code = 0
    finally:
        logging.shutdown()  # the brokers' log files, flushed as at a process's end
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _ended(status: int) -> str:
    """How a child process ended, from its ``waitpid`` status."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            return f"was killed by {signal.Signals(number).name}"
        except ValueError:
            return f"was killed by signal {number}"
    return f"exited with status {os.waitstatus_to_exitcode(status)}"


def _error_result(task: CampaignTask, scenario: str, error: str) -> bytes:
    """The ``summary.json`` bytes of a run of ``task`` that could not be done."""
    out = Path(task.out)
    result = RunResult(
        scenario=scenario,
        source=task.source,
        seed=task.seed,
        mode="deterministic",
        status="error",
        error=error,
        run_dir=str(out / scenario / f"seed-{task.seed}"),
        code=code_identity(),
        reproduce=reproduce_command(task.source, task.seed, True, out),
    )
    return msgspec.json.encode(result)


def run_here(task: CampaignTask, *, started: Callable[[str, Path], object] | None = None) -> bytes:
    """Run ``task`` in this process; answers the run's ``summary.json`` bytes.

    The run is written into a staging directory beside its run directory
    (``.seed-N.<campaign>.*.partial``), then renamed into place whole: a task attempt that dies
    midway (its executor lost, its Python worker killed) leaves no half-written run
    directory, and the attempt Spark runs again writes the run once. ``started`` is
    called with the scenario's name and the staging directory once it is made."""
    # as `kemu chaos run` configures its process: the brokers write their log files
    configure_logging(level=task.log_level, json=task.log_json, broker_files=True)
    scenario = parse_scenario(task.text, source=task.source)
    out = Path(task.out)
    run_dir = out / scenario.name / f"seed-{task.seed}"
    staging: Path | None = None
    try:
        refuse_foreign(run_dir)
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(
            tempfile.mkdtemp(
                prefix=f".{run_dir.name}.{task.campaign}.", suffix=PARTIAL, dir=run_dir.parent
            )
        )
        if started is not None:
            started(scenario.name, staging)
        options = RunOptions(
            run_dir=staging,
            named_dir=run_dir,
            seed=task.seed,
            deterministic=True,
            source=task.source,
            out=out,
        )
        run_scenario(scenario, options)
        export_parquet(staging / "trace.jsonl", staging / PARQUET_TRACE)
        summary = (staging / "summary.json").read_bytes()
        _move_into_place(staging, run_dir)
    except OSError as exc:  # this executor cannot write there: retry, or fail the job
        where = exc.filename or run_dir
        if PARTIAL in str(where):  # the staging directory: name the run's
            where = run_dir
        raise RunNotWritten(
            f"{socket.gethostname()} cannot write {where}: {exc.strerror or exc}"
        ) from None
    except KemuError as exc:  # the run could not be done: its result says why
        return _error_result(task, scenario.name, str(exc))
    finally:
        if staging is not None:  # still there: the run did not get into place
            shutil.rmtree(staging, ignore_errors=True)
    return summary


def _move_into_place(staging: Path, run_dir: Path) -> None:
    """Rename the finished run ``staging`` to ``run_dir``. A run already there (an earlier
    campaign's, another attempt's of the same task, or another campaign's of the same
    scenario and seed writing it now) is renamed aside first, then removed: ``run_dir`` is
    always a whole run, or absent for the instant between. When another writer's rename
    comes between the two (it moved the run aside itself, or got its own into place),
    this one tries again: the last rename is the run there."""
    aside = staging.with_suffix(REPLACED)
    while True:
        if _renamed(staging, run_dir):
            return
        try:
            run_dir.rename(aside)
        except FileNotFoundError:  # another writer moved it aside meanwhile
            continue
        try:
            if _renamed(staging, run_dir):
                return
        finally:
            shutil.rmtree(aside, ignore_errors=True)


def _renamed(staging: Path, run_dir: Path) -> bool:
    """Rename ``staging`` to ``run_dir``; False if a run is there (not empty)."""
    try:
        staging.rename(run_dir)
    except OSError as exc:
        if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
        return False
    return True


@contextlib.contextmanager
def campaign_lock(out: Path) -> Iterator[str]:
    """A token of this campaign's own, held while the block runs: ``OUT/.kemu-campaign.
    <token>.lock``, locked (``flock``, exclusive) by this process. The file gets that name
    only once it is locked, so a campaign that finds the name and can take its lock knows
    the driver that held it is gone (its process ended: the lock went with it). When the
    block ends, this campaign's staging directories and those of campaigns whose driver
    is gone are removed (``remove_staging``), then the lock file."""
    token = secrets.token_hex(8)
    out.mkdir(parents=True, exist_ok=True)
    lock = out / f"{LOCK_PREFIX}{token}{LOCK_SUFFIX}"
    fd, taking = tempfile.mkstemp(prefix=f"{LOCK_PREFIX}{token}.", suffix=".taking", dir=out)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, f"{socket.gethostname()} {os.getpid()}\n".encode())  # for a reader
        os.rename(taking, lock)
    except BaseException:
        os.close(fd)
        Path(taking).unlink(missing_ok=True)
        raise
    try:
        yield token
    finally:
        try:
            remove_staging(out, token)
        finally:
            lock.unlink(missing_ok=True)
            os.close(fd)


def remove_staging(out: Path, token: str) -> None:
    """Remove the staging directories under ``out`` (``OUT/<scenario>/.seed-N.<campaign>.
    *.partial`` or ``.replaced``: what task attempts that died midway left) of the campaign
    ``token`` and of every campaign whose driver is gone: its lock file absent, or its lock
    free (``flock`` taken without waiting). A live campaign's are left alone. Lock files
    of gone drivers are removed with them."""
    left: dict[str, list[Path]] = {}
    for path in out.glob("*/.seed-*"):
        parts = path.name.split(".")  # "", "seed-N", campaign, random, suffix
        if len(parts) == 5 and f".{parts[4]}" in (PARTIAL, REPLACED):
            left.setdefault(parts[2], []).append(path)
    for lock in out.glob(f"{LOCK_PREFIX}*{LOCK_SUFFIX}"):
        left.setdefault(lock.name.removeprefix(LOCK_PREFIX).removesuffix(LOCK_SUFFIX), [])
    for owner, paths in left.items():
        lock = out / f"{LOCK_PREFIX}{owner}{LOCK_SUFFIX}"
        if owner == token:
            _remove(paths)
            continue
        try:
            fd = os.open(lock, os.O_RDWR)
        except FileNotFoundError:  # its driver ended (and removed its lock)
            _remove(paths)
            continue
        except OSError:  # not ours to judge: its directories stay
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: its driver lives (or the file system has no locks)
            os.close(fd)
            continue
        try:  # held by us meanwhile: another campaign ending now leaves them to us
            _remove(paths)
            lock.unlink(missing_ok=True)
        finally:
            os.close(fd)


def _remove(paths: Iterable[Path]) -> None:
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)


def check_master(master: str | None) -> None:
    """A ``spark://HOST:PORT[,HOST:PORT...]`` master none of whose ports accepts a
    connection is refused before Spark starts (Spark itself would retry for a minute,
    then stop the context); ``KemuError``."""
    if master is None or not master.startswith("spark://"):
        return
    hosts = master.removeprefix("spark://").split(",")
    for host_port in hosts:
        parts = urlsplit(f"//{host_port}")
        try:
            port = parts.port or 7077
        except ValueError:
            raise KemuError(f"--master {master}: {host_port!r} is not HOST:PORT") from None
        try:
            with socket.create_connection(
                (parts.hostname or "", port), timeout=MASTER_CONNECT_TIMEOUT
            ):
                return
        except OSError:
            continue
    raise KemuError(f"cannot reach the Spark master at {master}: nothing accepts connections")


def out_dir(given: str) -> Path:
    """``--out`` as the path the runs are written at: a path, or a ``file:`` URL (the
    path it names). Any other URL (``hdfs://``, ``s3a://``) is ``KemuError``: runs are
    written with the operating system's file calls, not through Hadoop's FileSystem."""
    parts = urlsplit(given)
    if parts.scheme == "file" and parts.netloc in ("", "localhost"):
        return Path(parts.path)
    if _URL.match(given):
        raise KemuError(
            f"--out {given}: runs are written with the operating system's file calls: give a"
            " path every executor mounts at the same place (or a file: URL), not a"
            f" {parts.scheme or 'URL'}: URL"
        )
    return Path(given)


def check_out_dir(out: Path) -> None:
    """The driver can make ``out`` and write in it; ``KemuError`` otherwise."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        # a name of its own: drivers on other hosts may probe the same directory at once
        with tempfile.NamedTemporaryFile(prefix=".kemu-probe.", dir=out):
            pass
    except OSError as exc:
        raise KemuError(f"--out {out}: cannot write there: {exc.strerror or exc}") from None


def batches(tasks: Sequence[bytes], count: int) -> list[list[tuple[int, bytes]]]:
    """``tasks`` dealt out in turn into ``count`` batches of (index, task): each batch
    draws runs from the whole scenario list, so the batches hold alike mixes of long and
    short scenarios and end at about the same time."""
    count = max(1, min(count, len(tasks)))
    return [[(i, tasks[i]) for i in range(k, len(tasks), count)] for k in range(count)]


def run_on_spark(
    scenarios: Sequence[tuple[str, str]],
    seeds: Sequence[int],
    out: Path,
    *,
    master: str | None,
    conf: Mapping[str, str] | None = None,
    log_level: str | None = None,
    log_json: bool = False,
    stages: StageDisplay | None = None,
) -> tuple[list[RunResult], float]:
    """Run the campaign as one Spark job; the results in scenario then seed order, and
    the job's wall seconds (Spark's start-up left out). The runs are dealt into
    ``TASKS_PER_CORE`` tasks per executor core (``batches``); ``stages`` draws the
    job's stage while it runs. Once the session is over, what task attempts that died
    left is removed (``campaign_lock``, ``remove_staging``), whether the job succeeded or not.
    ``SparkError`` if the job fails (``spark.session.translated_errors``)."""
    from spark.session import spark_session

    out = out.resolve()
    with campaign_lock(out) as token:
        tasks = campaign_tasks(
            scenarios, seeds, out, campaign=token, log_level=log_level, log_json=log_json
        )
        with spark_session(master, app="kemu chaos campaign", config=conf) as session:
            started = time.perf_counter()
            context = session.sparkContext
            # A failed task is this command's one line, not the stack traces Spark logs (in
            # this JVM for a local master) at its error level.
            jvm = context._jvm  # log4j's levels are reachable only through the gateway
            if jvm is not None:
                log4j = jvm.org.apache.logging.log4j
                log4j.core.config.Configurator.setLevel("org.apache.spark", log4j.Level.FATAL)
            dealt = batches(tasks, context.defaultParallelism * TASKS_PER_CORE)
            drawn = stages(context.statusTracker()) if stages else contextlib.nullcontext()
            try:
                with drawn:
                    answers = (
                        context.parallelize(dealt, numSlices=len(dealt))
                        .flatMap(run_batch)
                        .collect()
                    )
            except Exception as exc:  # Spark's own exception types live in pyspark
                found = _NOT_WRITTEN.search(str(exc))
                if found is None:
                    raise
                raise KemuError(f"a run could not be written: {found.group(1)}") from None
            wall = time.perf_counter() - started
    return [msgspec.json.decode(answer, type=RunResult) for _, answer in sorted(answers)], wall
