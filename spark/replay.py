"""``kemu trace replay``: replay recorded runs through the current controller code, in
this process or on Spark.

Each input run (a JSONL or Parquet trace, a chaos run directory, or every run of a chaos
campaign directory: ``spark.schema.resolve_inputs``) is replayed on its own: its trace is
read and every recorded controller incarnation replayed with ``actors.controller.replay``
(pure Python: the controller's parts fed the recorded events, answered from the recorded
store results, their outputs compared with the recorded ones). With ``--engine local``
(the default, ``replay_local``) the runs are replayed one after the other in this
process; with Spark (``replay_runs``) each run is one Spark task and the driver collects
one ``RunReplay`` per run. Either way the same report follows: ``replay.json`` under
``--out`` and one line per run on the terminal; under a run that diverged, a second line
when the run's ``summary.json`` names other code than the code replaying it
(``actors.runtime.code_identity``: "the runs were made by different code: X vs Y", as
``kemu trace diff`` says it), since a replay then diverges wherever the two differ. The
exit status is non-zero when any run diverges or cannot be replayed.

On Spark the tasks need the ``actors`` package importable on the executors (an installed
kemu, or ``--py-files`` with spark-submit).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from actors.controller.replay import (
    Divergence,
    RunReplay,
    leaf_difference,
    replay_events,
    replay_trace,
)
from actors.runtime.code_identity import code_identity, different_code, recorded_code
from protocol.trace import TraceEvent
from spark.engine import Engine, choose_engine
from spark.progress import Progress
from spark.schema import TraceInput, check_inputs, read_header, resolve_inputs
from spark.session import SparkError, spark_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "ReplayReport",
    "RunOutcome",
    "code_note",
    "replay_command",
    "replay_local",
    "replay_runs",
    "summary_line",
]

Patch = Callable[[], AbstractContextManager[object]]
"""Run around each task's replay (a context manager factory, pickled to the executors):
how a test replays with a deliberately changed controller."""


class RunOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """One run's replay, labelled as the input names it (``<scenario>/seed-<N>``)."""

    label: str
    replay: RunReplay

    @property
    def status(self) -> str:
        if self.replay.error is not None:
            return "error"
        return "match" if self.replay.match else "diverged"


class ReplayReport(msgspec.Struct, frozen=True, kw_only=True):
    runs: tuple[RunOutcome, ...]
    matched: int
    diverged: int
    errors: int

    @property
    def ok(self) -> bool:
        return self.diverged == 0 and self.errors == 0


# ------------------------------------------------------------------ the task (executors)


def _quiet_logs() -> None:
    """The controller logs through structlog: silence it in the executor's process."""
    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))


@contextlib.contextmanager
def _logs_quieted() -> Iterator[None]:
    """``_quiet_logs`` for the block only (the local engine replays in the caller's
    process, whose logging is put back afterwards)."""
    import structlog

    saved = structlog.get_config()
    _quiet_logs()
    try:
        yield
    finally:
        structlog.configure(**saved)


def _parquet_events(path: Path) -> Iterator[TraceEvent]:
    import pyarrow.parquet as pq

    table = pq.ParquetFile(path)
    for batch in table.iter_batches():
        for row in batch.to_pylist():
            fields = row.get("fields")
            yield TraceEvent(
                seq=row["seq"],
                ts=row["ts"],
                node=row["node"],
                actor=row["actor"] or "",
                kind=row["kind"],
                type=row["type"],
                corr=row["corr"],
                fields=json.loads(fields) if fields else {},
            )


def _replay_input(item: TraceInput) -> RunReplay:
    if item.format != "parquet":
        return replay_trace(item.path)
    header = read_header(item)
    try:
        results = replay_events(_parquet_events(item.path))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return RunReplay(
            trace=str(item.path),
            run=header.run,
            seed=header.seed,
            incarnations=(),
            match=False,
            error=str(exc),
        )
    return RunReplay(
        trace=str(item.path),
        run=header.run,
        seed=header.seed,
        incarnations=tuple(results),
        match=bool(results) and all(r.match for r in results),
        error=None if results else "no controller recording in this trace",
    )


def _replay_safely(item: TraceInput, patch: Patch | None) -> RunOutcome:
    """Never raises: one run that cannot be replayed must not fail the others' job."""
    try:
        with patch() if patch is not None else contextlib.nullcontext():
            replay = _replay_input(item)
    except Exception as exc:  # the task's own boundary: reported as this run's error
        replay = RunReplay(
            trace=str(item.path),
            run=item.run,
            seed=item.seed,
            incarnations=(),
            match=False,
            error=f"replay failed: {type(exc).__name__}: {exc}",
        )
    return RunOutcome(label=item.run, replay=replay)


def _task(patch: Patch | None) -> Callable[[Iterable[TraceInput]], Iterator[bytes]]:
    def replay_partition(items: Iterable[TraceInput]) -> Iterator[bytes]:
        _quiet_logs()
        for item in items:
            yield msgspec.json.encode(_replay_safely(item, patch))

    return replay_partition


def _failure_line(exc: Exception) -> str:
    """The Python error at the bottom of a Py4J/worker message, else its first line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    errors = [line for line in lines if _PY_ERROR.match(line)]
    if errors:
        return errors[-1]
    return lines[0] if lines else type(exc).__name__


_PY_ERROR = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception): ")


# ------------------------------------------------------------------ the job (driver)


def _report(outcomes: Iterable[RunOutcome], inputs: Sequence[TraceInput]) -> ReplayReport:
    """The report of the runs' outcomes, in input order."""
    order = {item.run: i for i, item in enumerate(inputs)}
    ordered = sorted(outcomes, key=lambda o: order.get(o.label, len(order)))
    statuses = [o.status for o in ordered]
    return ReplayReport(
        runs=tuple(ordered),
        matched=statuses.count("match"),
        diverged=statuses.count("diverged"),
        errors=statuses.count("error"),
    )


def replay_runs(
    spark: SparkSession, inputs: Sequence[TraceInput], *, patch: Patch | None = None
) -> ReplayReport:
    """Replay every input, one Spark task each; the report lists them in input order."""
    if not inputs:
        return _report((), inputs)
    rdd = spark.sparkContext.parallelize(list(inputs), numSlices=len(inputs))
    try:
        collected = rdd.mapPartitions(_task(patch)).collect()
    except Exception as exc:  # Py4J / task failures end here, translated once
        raise SparkError(f"the replay job failed: {_failure_line(exc)}") from exc
    return _report((msgspec.json.decode(raw, type=RunOutcome) for raw in collected), inputs)


def replay_local(inputs: Sequence[TraceInput], *, patch: Patch | None = None) -> ReplayReport:
    """Replay every input in this process, one after the other: ``replay_runs``' report
    without Spark (each outcome goes through the same JSON as a Spark task's, so the two
    reports are built from the same values)."""
    with _logs_quieted():
        outcomes = [
            msgspec.json.decode(msgspec.json.encode(_replay_safely(item, patch)), type=RunOutcome)
            for item in inputs
        ]
    return _report(outcomes, inputs)


def _short(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _where(d: Divergence) -> str:
    at = f"output {d.output}" + (f" (seq {d.output_seq})" if d.output_seq is not None else "")
    return f"event #{d.step} {d.event} (seq {d.event_seq}), {at}"


def summary_line(outcome: RunOutcome) -> str:
    """One line for the terminal: status, run, and for a divergence where it starts."""
    replay = outcome.replay
    if replay.error is not None:
        return f"ERROR     {outcome.label}: {replay.error}"
    events = sum(i.events for i in replay.incarnations)
    outputs = sum(i.outputs for i in replay.incarnations)
    count = f"{len(replay.incarnations)} controllers, {events} events, {outputs} outputs"
    first = replay.first_divergence
    if first is None:
        return f"MATCH     {outcome.label}: {count}"
    inc, d = first
    path, expected, got = leaf_difference(d.expected, d.got)
    if path and isinstance(d.expected, dict):
        kind = next(iter(d.expected.values()), "")
        what = f"{next(iter(d.expected), '')} {kind} {d.expected.get('path') or ''}".strip()
        return (
            f"DIVERGED  {outcome.label}: {inc.node} {_where(d)}: {what}: at {path} "
            f"expected {_short(expected)}, got {_short(got)}"
        )
    return (
        f"DIVERGED  {outcome.label}: {inc.node} {_where(d)}: "
        f"expected {_short(expected)}, got {_short(got)}"
    )


def code_note(item: TraceInput) -> str | None:
    """For a run that diverged: that it was recorded by other code than the code replaying
    it (the identity its run directory's ``summary.json`` names against this process's),
    as ``kemu trace diff`` says it of two runs; ``None`` when the code is the same or the
    recording names none (a trace of ``kemu up --trace``, a Parquet export)."""
    return different_code(recorded_code(item.path.with_name("summary.json")), code_identity())


def replay_command(
    paths: Sequence[str],
    *,
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    out: Path | None = None,
    echo: Callable[[str], None] = print,
    patch: Patch | None = None,
    progress: Progress | None = None,
    engine: Engine | None = None,
) -> int:
    """``kemu trace replay``: 0 when every run matches, 1 otherwise. Bad inputs raise a
    ``KemuError`` (one line) before any engine starts. ``engine``: None lets
    ``spark.engine.choose_engine`` decide (no size limit: a replay streams its events)."""
    progress = progress or Progress("replay", quiet=True)
    inputs = resolve_inputs(paths)
    check_inputs(inputs)  # a wrong schema version or a trace given twice fails here
    chosen = choose_engine(
        engine, master=master, conf=conf, inputs=inputs, progress=progress, limit=None
    )
    if chosen == "local":
        with progress.stage(f"replaying {len(inputs)} runs in this process"):
            report = replay_local(inputs, patch=patch)
    else:
        with contextlib.ExitStack() as stack:
            with progress.stage("starting Spark"):
                spark = stack.enter_context(
                    spark_session(master, app="kemu-trace-replay", config=conf)
                )
            stack.enter_context(progress.spark_stages(spark))
            with progress.stage(f"replaying {len(inputs)} runs, one task each"):
                report = replay_runs(spark, inputs, patch=patch)
    recorded = {item.run: item for item in inputs}
    for outcome in report.runs:
        echo(summary_line(outcome))
        if outcome.status == "diverged" and outcome.label in recorded:
            note = code_note(recorded[outcome.label])
            if note is not None:
                echo(f"  {note}")
    echo(
        f"{len(report.runs)} runs: {report.matched} match, {report.diverged} diverged, "
        f"{report.errors} could not be replayed"
    )
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        target = out / "replay.json"
        target.write_bytes(msgspec.json.format(msgspec.json.encode(report), indent=2) + b"\n")
        echo(f"report: {target}")
    return 0 if report.ok else 1
