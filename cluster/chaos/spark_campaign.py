"""A chaos campaign as a Spark job: ``kemu chaos campaign``.

Every (scenario, seed) pair is one Spark task. The driver ships each task as data — a
``CampaignTask`` encoded as JSON (the scenario file's text, the path it was given as,
the seed and the output directory) — never a pickled object of ours; the executor
parses the scenario from that text, runs it in deterministic mode (an in-process cluster
on the virtual clock, ``run_scenario``) into ``OUT/<scenario>/seed-<N>``, exports the
trace to ``trace.parquet`` beside ``trace.jsonl``, and answers the run's ``summary.json``
bytes, which the driver decodes with msgspec into a ``RunResult``. (Spark itself
pickles the task function — by module name — and the byte strings it carries; nothing
else crosses the network.) The run directory is the one ``kemu chaos run
--deterministic`` writes for the same scenario and seed, byte for byte but for the wall
time, whichever machine ran it: the virtual clock and the seeded RNG are the whole of a
run's time and randomness.

One task per run, so Spark spreads the runs over whatever executors it has and retries
a task whose executor was lost (``spark.task.maxFailures``). A run that cannot be done
(``KemuError``: a run directory that holds something else) is that run's ``error``
result, not the campaign's end; a task that keeps failing (an output directory the
executors cannot write) fails the job, and the command says so in one line.

The output directory must be one path every executor can write and the driver can read
(a shared file system mounted at the same path everywhere; ``file:`` paths only:
``run_scenario`` writes with the operating system's file calls).
"""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

import msgspec

from cluster.chaos.loader import parse_scenario
from cluster.chaos.runner import RunOptions, RunResult, reproduce_command, run_scenario
from cluster.logging import configure_logging
from cluster.trace_files import export_parquet
from protocol.errors import KemuError

if TYPE_CHECKING:
    from spark.progress import StageDisplay

__all__ = [
    "CampaignTask",
    "campaign_tasks",
    "check_master",
    "check_out_dir",
    "run_on_spark",
    "run_task",
]

PARQUET_TRACE: Final = "trace.parquet"
_NOT_WRITTEN: Final = re.compile(r"RunNotWritten: (.*)")
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
    log_level: str | None = None  # as kemu's --log-level (None: its defaults)
    log_json: bool = False  # --log-format json


def campaign_tasks(
    scenarios: Sequence[tuple[str, str]],
    seeds: Sequence[int],
    out: Path,
    *,
    log_level: str | None = None,
    log_json: bool = False,
) -> list[bytes]:
    """Every (scenario, seed) pair as an encoded ``CampaignTask``, in scenario then seed
    order; ``scenarios``: (file as given, its text)."""
    return [
        msgspec.json.encode(
            CampaignTask(
                source=source,
                text=text,
                seed=seed,
                out=str(out),
                log_level=log_level,
                log_json=log_json,
            )
        )
        for source, text in scenarios
        for seed in seeds
    ]


def run_task(encoded: bytes) -> bytes:
    """Run one task (on an executor); answers the run's ``summary.json`` bytes."""
    task = msgspec.json.decode(encoded, type=CampaignTask)
    # as `kemu chaos run` configures its process: the brokers write their log files
    configure_logging(level=task.log_level, json=task.log_json, broker_files=True)
    scenario = parse_scenario(task.text, source=task.source)
    out = Path(task.out)
    options = RunOptions(
        run_dir=out / scenario.name / f"seed-{task.seed}",
        seed=task.seed,
        deterministic=True,
        source=task.source,
        out=out,
    )
    try:
        result = run_scenario(scenario, options)
    except OSError as exc:  # this executor cannot write there: retry, or fail the job
        where = exc.filename or options.run_dir
        raise RunNotWritten(
            f"{socket.gethostname()} cannot write {where}: {exc.strerror or exc}"
        ) from None
    except KemuError as exc:  # the run could not be done: its result says why
        result = RunResult(
            scenario=scenario.name,
            source=task.source,
            seed=task.seed,
            mode="deterministic",
            status="error",
            error=str(exc),
            run_dir=str(options.run_dir),
            reproduce=reproduce_command(task.source, task.seed, True, out),
        )
        return msgspec.json.encode(result)
    export_parquet(options.run_dir / "trace.jsonl", options.run_dir / PARQUET_TRACE)
    return (options.run_dir / "summary.json").read_bytes()


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


def check_out_dir(out: Path) -> None:
    """The driver can make ``out`` and write in it; ``KemuError`` otherwise."""
    if "://" in str(out):
        raise KemuError(
            f"--out {out}: a path on a file system every executor mounts, not a URL"
            " (runs are written with the operating system's file calls)"
        )
    probe = out / f".kemu-probe.{os.getpid()}"
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise KemuError(f"--out {out}: cannot write there: {exc.strerror or exc}") from None


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
    the job's wall seconds (Spark's start-up left out). ``stages`` draws the job's
    stage (one task per run) while it runs. ``SparkError`` if the job fails
    (``spark.session.translated_errors``)."""
    from spark.session import spark_session

    tasks = campaign_tasks(scenarios, seeds, out.resolve(), log_level=log_level, log_json=log_json)
    with spark_session(master, app="kemu chaos campaign", config=conf) as session:
        started = time.perf_counter()
        context = session.sparkContext
        # A failed task is this command's one line, not the stack traces Spark logs (in
        # this JVM for a local master) at its error level.
        jvm = context._jvm  # log4j's levels are reachable only through the gateway
        if jvm is not None:
            log4j = jvm.org.apache.logging.log4j
            log4j.core.config.Configurator.setLevel("org.apache.spark", log4j.Level.FATAL)
        drawn = stages(context.statusTracker()) if stages is not None else nullcontext()
        try:
            with drawn:
                answers = context.parallelize(tasks, numSlices=len(tasks)).map(run_task).collect()
        except Exception as exc:  # Spark's own exception types live in pyspark
            found = _NOT_WRITTEN.search(str(exc))
            if found is None:
                raise
            raise KemuError(f"a run could not be written: {found.group(1)}") from None
        wall = time.perf_counter() - started
    return [msgspec.json.decode(answer, type=RunResult) for answer in answers], wall
