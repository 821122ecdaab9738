"""The bars of Spark's stages (``cluster.cli.progress``), fed from the status tracker of
the shared session while a real job runs. The job's tasks each wait for the test to let
them finish (a byte on a socket), so the test knows how many tasks are done when it
reads the tracker; the tracker is updated by Spark's listener bus a moment after a task
ends, so each read waits, with a deadline, for the tracker to agree."""

from __future__ import annotations

import io
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pexpect
import pytest
from pyspark.sql import SparkSession
from rich.console import Console
from rich.progress import Progress

from cluster.cli.progress import (
    SparkStatusTracker,
    StageBars,
    StageRow,
    active_stages,
    spark_stage_progress,
    stage_name,
)
from tests.support.kemu_commands import REPO

pytestmark = [pytest.mark.spark, pytest.mark.slow]  # a Spark session: one JVM for the run

TASKS = 3
WAIT = 30.0  # seconds a task, or the tracker, may take at most
ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")  # colours and cursor moves


def shown(progress: Progress) -> str:
    """The bars as text, as they are drawn."""
    screen = io.StringIO()
    Console(file=screen, width=120, color_system=None).print(progress.get_renderable())
    return screen.getvalue()


class TerminalBuffer(io.StringIO):
    """What a terminal stderr would have been written (rich draws only on a terminal)."""

    def isatty(self) -> bool:
        return True


class GatedJob:
    """A ``count`` of ``TASKS`` partitions whose every task connects to the test and ends
    when it gets one byte back; run on a thread of its own."""

    def __init__(self, spark: SparkSession) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(WAIT)
        port = self._server.getsockname()[1]

        def gate(x: int) -> int:
            import socket

            with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as conn:
                conn.recv(1)
            return x

        rdd = spark.sparkContext.parallelize(range(TASKS), TASKS).map(gate)
        self.result: list[int] = []
        self._thread = threading.Thread(target=lambda: self.result.append(rdd.count()))
        self._thread.start()

    def release_next(self) -> None:
        """Wait for the next task to be running, and let it finish."""
        conn, _ = self._server.accept()
        with conn:
            conn.sendall(b"x")

    def wait_running(self) -> socket.socket:
        conn, _ = self._server.accept()
        return conn

    def finish(self) -> None:
        self._thread.join(WAIT)
        self._server.close()


def tracker_shows(
    tracker: SparkStatusTracker, agrees: Callable[[list[StageRow]], bool]
) -> list[StageRow]:
    deadline = time.monotonic() + WAIT
    while True:
        rows = active_stages(tracker)
        if agrees(rows):
            return rows
        assert time.monotonic() < deadline, f"the status tracker still says {rows}"
        time.sleep(0.02)


@contextmanager
def gated_job(spark: SparkSession) -> Iterator[GatedJob]:
    job = GatedJob(spark)
    try:
        yield job
    finally:
        job.finish()


def test_a_stage_is_named_by_its_call_and_the_file_of_its_call_site() -> None:
    assert stage_name("count at /srv/jobs/job.py:41") == "count at job.py:41"
    assert stage_name("collect at PythonRDD.scala:232") == "collect at PythonRD…"
    assert stage_name("showString at NativeMethodAccessorImpl.java:0") == "showString at Nativ…"


def test_one_bar_per_active_stage_counts_its_tasks_and_goes_when_it_ends(
    spark: SparkSession,
) -> None:
    """A stage gets its bar when the tracker first shows it, with its task count; the bar
    moves as its tasks complete, and goes once the stage is no longer active."""
    tracker = spark.sparkContext.statusTracker()
    progress = Progress(*StageBars.COLUMNS, auto_refresh=False)
    bars = StageBars(progress)
    with gated_job(spark) as job:
        first = job.wait_running()
        rows = tracker_shows(tracker, lambda rows: len(rows) == 1)
        (stage,) = rows
        assert (stage.done, stage.total, stage.failed) == (0, TASKS, 0)
        assert " at " in stage.name  # Spark's call site: "count at ...", "collect at ..."
        bars.show(rows)
        (task,) = progress.tasks
        assert task.description == f"stage {stage.stage_id}: {stage_name(stage.name)}"
        assert f"0/{TASKS} tasks, 0 failed" in shown(progress)

        with first:
            first.sendall(b"x")
        rows = tracker_shows(tracker, lambda rows: bool(rows) and rows[0].done == 1)
        bars.show(rows)
        assert (progress.tasks[0].completed, progress.tasks[0].total) == (1, TASKS)
        assert f"1/{TASKS} tasks, 0 failed" in shown(progress)

        for _ in range(TASKS - 1):
            job.release_next()
    assert job.result == [TASKS]
    bars.show(tracker_shows(tracker, lambda rows: not rows))
    assert progress.tasks == []


def test_the_bars_are_drawn_on_a_terminal_only_and_not_when_quiet(spark: SparkSession) -> None:
    """``spark_stage_progress`` follows the tracker on its own thread while the block
    runs: on a terminal the running stage's bar appears; on a pipe, or with ``quiet``,
    nothing is written."""
    tracker = spark.sparkContext.statusTracker()
    terminal, pipe, quiet = TerminalBuffer(), io.StringIO(), TerminalBuffer()
    with (
        spark_stage_progress(tracker, stream=terminal),
        spark_stage_progress(tracker, stream=pipe),
        spark_stage_progress(tracker, stream=quiet, quiet=True),
        gated_job(spark) as job,
    ):
        first = job.wait_running()
        deadline = time.monotonic() + WAIT
        while f"0/{TASKS} tasks" not in ESCAPES.sub("", terminal.getvalue()):
            assert time.monotonic() < deadline, "no bar drawn"
            time.sleep(0.02)
        assert "stage " in terminal.getvalue()
        with first:
            first.sendall(b"x")
        for _ in range(TASKS - 1):
            job.release_next()
    assert job.result == [TASKS]
    assert pipe.getvalue() == ""
    assert quiet.getvalue() == ""


@pytest.mark.timeout(300)
def test_kemu_trace_analyze_on_spark_draws_its_stages_in_a_terminal(
    campaign: Path, tmp_path: Path
) -> None:
    """``kemu trace analyze --engine spark`` in a pseudo-terminal: the bars of its Spark
    stages are drawn on stderr (a stage, its tasks done of all), its step lines above
    them, and the command ends as it would on a pipe."""
    command = ["-m", "cluster.cli", "trace", "analyze", "--engine", "spark", str(campaign)]
    child = pexpect.spawn(
        sys.executable,
        [*command, "--out", str(tmp_path)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "TERM": "xterm-256color"},
        dimensions=(40, 100),
        timeout=240,
        use_poll=True,  # select() fails on descriptors past 1023, as a long session has
    )
    child.expect(pexpect.EOF)
    child.close()
    drawn: object = child.before  # pexpect types it loosely: bytes, as spawned
    assert isinstance(drawn, bytes), drawn
    screen = ESCAPES.sub("", drawn.decode())
    assert child.exitstatus in (0, 1), screen[-2000:]
    assert re.search(r"stage \d+: \S.* \d+/\d+ tasks, \d+ failed, ETA", screen), screen[-2000:]
    assert "[kemu trace analyze] invariant checks and topic lifecycles done in" in screen
    assert "wrote " in screen


@pytest.mark.timeout(300)
def test_kemu_chaos_campaign_draws_its_stage_in_a_terminal_only(tmp_path: Path) -> None:
    """``kemu chaos campaign`` (one scenario, two seeds, local[1]) in a pseudo-terminal:
    the bar of its one stage counts the runs as tasks; on a pipe, or with ``--quiet``,
    stderr gets nothing of it, and the summary is the same."""
    scenario = str(REPO / "scenarios" / "create-delete-all-up.yaml")
    env = {**os.environ, "PYTHONPATH": str(REPO), "TERM": "xterm-256color"}

    def argv(out: str, *more: str) -> list[str]:
        return ["-m", "cluster.cli", "chaos", "campaign", scenario, "--seeds", "1..2",
                "--master", "local[1]", "--out", str(tmp_path / out), *more]  # fmt: skip

    def in_a_terminal(args: list[str]) -> str:
        child = pexpect.spawn(
            sys.executable, args, cwd=REPO, env=env, dimensions=(40, 100), timeout=240,
            use_poll=True,  # select() fails on descriptors past 1023
        )  # fmt: skip
        child.expect(pexpect.EOF)
        child.close()
        drawn: object = child.before
        assert isinstance(drawn, bytes), drawn
        screen = ESCAPES.sub("", drawn.decode())
        assert child.exitstatus == 0, screen[-2000:]
        assert "1 scenario(s), 2 run(s): 2 passed, 0 failed" in screen
        return screen

    bar = re.compile(r"stage \d+: collect at \S+ .*\d/2 tasks, 0 failed, ETA")
    assert bar.search(in_a_terminal(argv("tty"))), "no stage bar drawn"
    assert not bar.search(in_a_terminal(argv("quiet", "--quiet")))

    piped = subprocess.run(
        [sys.executable, *argv("pipe")], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=240, check=False,
    )  # fmt: skip
    assert piped.returncode == 0, piped.stderr[-2000:]
    assert "tasks," not in piped.stderr
    assert "\x1b" not in piped.stderr + piped.stdout
    assert "1 scenario(s), 2 run(s): 2 passed, 0 failed" in piped.stdout
