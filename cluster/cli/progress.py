"""Progress drawn with rich on stderr, cleared at the end: the line of commands that count
runs (``kemu chaos run``, ``scripts/chaos.sh``: runs done of the total, failures so far,
the rate and the time left), and the bars of a Spark job's active stages, read from
Spark's status tracker (``kemu trace analyze|diff|replay --engine spark``: tasks done of
the stage's tasks, failed tasks, the time left).

It is drawn only when stderr is a terminal and the user did not ask for quiet: a pipe, a
file or CI gets no progress noise at all. While it is drawn, the command's own lines on a
terminal stdout are printed above it, whole (``RunProgress.wrap``), and so are the lines
written to ``sys.stderr`` meanwhile (the brokers' log lines): none lands in the middle of
the progress line.

``python -m cluster.cli.progress --total N LOG...`` draws the line of runs that other
processes write to ``LOG`` files (``kemu chaos run``'s ``[i/n] NAME seed=S ... STATUS``
lines): the fan-out of ``scripts/chaos.sh``, whose kemu processes write to files. It ends
once N runs are done, or on SIGTERM / SIGINT (after one last look at the logs).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import Final, Protocol, TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text

__all__ = [
    "CountProgress",
    "RunProgress",
    "StageBars",
    "StageRow",
    "active_stages",
    "count_progress",
    "count_runs",
    "run_progress",
    "spark_stage_progress",
    "stage_name",
    "terminal_progress",
]

RUN_LINE: Final = re.compile(r"^\[\d+/\d+\] \S+ seed=\d+ \.\.\. (\S+)", re.MULTILINE)
"""A finished run of ``kemu chaos run``: its status is the word after the dots (a run
still under way has nothing there yet)."""
POLL: Final = 0.25  # seconds between two reads of the logs a watcher follows


class _RateColumn(ProgressColumn):
    """Runs (or another ``unit``) per second so far."""

    def __init__(self, unit: str = "runs") -> None:
        super().__init__()
        self._unit = unit

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"- {self._unit}/s" if not speed else f"{speed:,.1f} {self._unit}/s")


class _LinesAbove(io.TextIOWrapper):
    """A terminal stdout whose whole lines are printed above the progress line; a line
    written in pieces (and flushed between them) is printed once it is complete. (A
    ``TextIOWrapper`` for its ``TextIO`` type only: its own buffer is never written.)"""

    def __init__(self, console: Console, out: TextIO) -> None:
        super().__init__(io.BytesIO(), encoding="utf-8")
        self._console = console
        self._out = out
        self._partial = ""

    def write(self, text: str) -> int:
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            self._console.print(line, markup=False, highlight=False, emoji=False, soft_wrap=True)
        return len(text)

    def flush(self) -> None:
        """Whole lines are printed as written; a partial one waits for its end."""

    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._out.fileno()


class RunProgress:
    """What a command tells its progress line; does nothing when none is drawn."""

    def __init__(self, progress: Progress | None = None, task: TaskID | None = None) -> None:
        self._progress = progress
        self._task = task
        self.failed = 0

    @property
    def drawn(self) -> bool:
        return self._progress is not None

    def advance(self, *, failed: bool) -> None:
        """One run more is done (``failed`` if it did not pass)."""
        self.failed += failed
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, advance=1, failed=self.failed)

    def set(self, done: int, failed: int) -> None:
        """``done`` runs are done so far, ``failed`` of them failed."""
        self.failed = failed
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=done, failed=failed)

    def wrap(self, out: TextIO) -> TextIO:
        """``out``, or, when it is a terminal while the line is drawn, ``out`` whose whole
        lines are printed above the progress line."""
        if self._progress is None or not out.isatty():
            return out
        return _LinesAbove(self._progress.console, out)


@contextlib.contextmanager
def terminal_progress(
    *columns: str | ProgressColumn, quiet: bool = False, stream: TextIO | None = None
) -> Iterator[Progress | None]:
    """A rich ``Progress`` of ``columns`` drawn on ``stream`` (stderr) for the life of the
    context and cleared at its end, the lines written to ``sys.stderr`` meanwhile printed
    above it; None (nothing drawn) when ``quiet`` or ``stream`` is not a terminal."""
    stream = stream or sys.stderr
    if quiet or not stream.isatty():
        yield None
        return
    progress = Progress(
        *columns,
        console=Console(file=stream),
        transient=True,
        redirect_stdout=False,  # a command's own out: RunProgress.wrap
        redirect_stderr=True,  # log lines (written to sys.stderr as it is then) go above it
    )
    with progress:
        yield progress


@contextlib.contextmanager
def run_progress(
    total: int, *, label: str, quiet: bool = False, stream: TextIO | None = None
) -> Iterator[RunProgress]:
    """A progress line of ``total`` runs on ``stream`` (stderr) for the life of the context,
    cleared at its end; nothing when ``quiet`` or ``stream`` is not a terminal."""
    columns = (
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("runs, {task.fields[failed]} failed,"),
        _RateColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    with terminal_progress(*columns, quiet=quiet, stream=stream) as progress:
        if progress is None:
            yield RunProgress()
            return
        task = progress.add_task(label, total=total, failed=0)
        yield RunProgress(progress, task)


class CountProgress:
    """What a long bench row tells its progress line; does nothing when none is drawn."""

    def __init__(self, progress: Progress | None = None, task: TaskID | None = None) -> None:
        self._progress = progress
        self._task = task

    def advance(self, count: int = 1) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, advance=count)

    def set(self, done: int) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=done)


@contextlib.contextmanager
def count_progress(
    total: int, *, label: str, unit: str, quiet: bool = False, stream: TextIO | None = None
) -> Iterator[CountProgress]:
    """A progress line of ``total`` things (``unit``: "runs", "messages", ...) on
    ``stream`` (stderr): done of all, the rate, the time left; as ``run_progress``,
    nothing when ``quiet`` or ``stream`` is not a terminal."""
    columns = (
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(f"{unit},"),
        _RateColumn(unit),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    with terminal_progress(*columns, quiet=quiet, stream=stream) as progress:
        if progress is None:
            yield CountProgress()
            return
        yield CountProgress(progress, progress.add_task(label, total=total))


# -- Spark stages --------------------------------------------------------------------------


class SparkStageInfo(Protocol):
    """What ``StatusTracker.getStageInfo`` answers (pyspark's ``SparkStageInfo``)."""

    @property
    def stageId(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def numTasks(self) -> int: ...
    @property
    def numCompletedTasks(self) -> int: ...
    @property
    def numFailedTasks(self) -> int: ...


class SparkStatusTracker(Protocol):
    """The part of pyspark's ``StatusTracker`` (``SparkContext.statusTracker()``) read."""

    def getActiveStageIds(self) -> list[int]: ...
    def getStageInfo(self, stageId: int) -> SparkStageInfo | None: ...


@dataclasses.dataclass(frozen=True)
class StageRow:
    """One active stage: its id, Spark's name for it (``count at ...``), its tasks."""

    stage_id: int
    name: str
    done: int
    total: int
    failed: int


STAGE_POLL: Final = 0.2
"""Seconds between two reads of the status tracker, which answers only when asked
(Spark's own console progress bar reads it as often)."""
STAGE_NAME_WIDTH: Final = 20


def stage_name(name: str) -> str:
    """Spark's name of a stage, ``count at /path/to/job.py:41``, as its bar shows it:
    the call site's file name only, at most ``STAGE_NAME_WIDTH`` characters."""
    call, at, site = name.partition(" at ")
    short = f"{call}{at}{site.rsplit('/', 1)[-1]}"
    if len(short) <= STAGE_NAME_WIDTH:
        return short
    return short[: STAGE_NAME_WIDTH - 1] + "…"


def active_stages(tracker: SparkStatusTracker) -> list[StageRow]:
    """The stages running now, by id (a stage that ended between the two reads is left
    out)."""
    rows = []
    for stage_id in sorted(tracker.getActiveStageIds()):
        info = tracker.getStageInfo(stage_id)
        if info is not None:
            rows.append(
                StageRow(
                    stage_id=info.stageId,
                    name=info.name,
                    done=info.numCompletedTasks,
                    total=info.numTasks,
                    failed=info.numFailedTasks,
                )
            )
    return rows


class StageBars:
    """One bar per active stage on a rich ``Progress``: added when the stage is first
    seen, moved as its tasks complete, removed once it is no longer active."""

    COLUMNS: Final = (  # within 80 columns, the description at its longest
        TextColumn("{task.description}"),
        BarColumn(bar_width=15),
        MofNCompleteColumn(),
        TextColumn("tasks, {task.fields[failed]} failed, ETA"),
        TimeRemainingColumn(),
    )

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._shown: dict[int, TaskID] = {}

    def show(self, rows: Sequence[StageRow]) -> None:
        active = {row.stage_id for row in rows}
        for stage_id in [s for s in self._shown if s not in active]:
            self._progress.remove_task(self._shown.pop(stage_id))
        for row in rows:
            task = self._shown.get(row.stage_id)
            if task is None:
                description = f"stage {row.stage_id}: {stage_name(row.name)}"
                task = self._progress.add_task(description, total=row.total, failed=0)
                self._shown[row.stage_id] = task
            self._progress.update(task, total=row.total, completed=row.done, failed=row.failed)


@contextlib.contextmanager
def spark_stage_progress(
    tracker: SparkStatusTracker, *, quiet: bool = False, stream: TextIO | None = None
) -> Iterator[None]:
    """The active stages of ``tracker``'s Spark context drawn as bars on ``stream``
    (stderr) while the block runs, read every ``STAGE_POLL`` seconds by a thread of
    its own; nothing when ``quiet`` or ``stream`` is not a terminal
    (``spark.progress.StageDisplay``)."""
    with terminal_progress(*StageBars.COLUMNS, quiet=quiet, stream=stream) as progress:
        if progress is None:
            yield
            return
        bars = StageBars(progress)
        done = threading.Event()

        def follow() -> None:
            while not done.wait(STAGE_POLL):
                try:
                    rows = active_stages(tracker)
                except Exception:  # the session is stopping under us: nothing more to draw
                    return
                bars.show(rows)

        thread = threading.Thread(target=follow, name="kemu-spark-stages", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()


def count_runs(text: str) -> tuple[int, int]:
    """The runs done and failed in ``kemu chaos run`` output ``text``."""
    statuses = RUN_LINE.findall(text)
    return len(statuses), sum(status != "passed" for status in statuses)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:  # not written yet
        return ""


class _Stop:
    """Set by SIGTERM or SIGINT: draw the logs once more, then end."""

    requested = False

    @classmethod
    def handler(cls, signum: int, frame: FrameType | None) -> None:
        cls.requested = True


def watch(logs: Sequence[Path], total: int, *, label: str) -> None:
    """Draw the progress of the runs in ``logs`` until ``total`` are done, or until asked
    to stop (after one last look at the logs)."""
    with run_progress(total, label=label) as line:
        if not line.drawn:
            return
        while True:
            stopping = _Stop.requested
            done = failed = 0
            for log in logs:
                one_done, one_failed = count_runs(_read(log))
                done += one_done
                failed += one_failed
            line.set(done, failed)
            if done >= total or stopping:
                return
            time.sleep(POLL)  # after a signal, at most this long to the last look


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cluster.cli.progress",
        description="Draw the progress of the kemu chaos runs written to LOG files.",
    )
    parser.add_argument("--total", type=int, required=True, help="runs expected in all")
    parser.add_argument("--label", default="chaos", help="the line's first word")
    parser.add_argument("logs", nargs="+", type=Path, metavar="LOG")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _Stop.handler)
    signal.signal(signal.SIGINT, _Stop.handler)
    watch(args.logs, args.total, label=args.label)
    return 0


if __name__ == "__main__":
    sys.exit(main())
