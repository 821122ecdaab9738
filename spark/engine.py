"""Which engine runs ``kemu trace analyze|diff|replay``: ``local`` (in this process, with
pandas: ``spark.pandas_analysis``, ``spark.replay.replay_local``) or ``spark`` (a Spark
session: ``spark.analyze``, ``spark.diff``, ``spark.replay.replay_runs``).

Both give the same documents (the tests compare them). ``choose_engine`` decides when the
command line names none: Spark when a Spark master or Spark settings are given or
spark-submit launched kemu; Spark when a run is too large for the local engine's memory
(``LOCAL_EVENT_LIMIT``) and pyspark is installed; the local engine otherwise.
docs/spark.md, "Engines", has the measurements behind the limit.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from typing import Final, Literal

from spark.progress import Progress
from spark.schema import TraceInput
from spark.session import launched_by_spark_submit

__all__ = ["ENGINES", "LOCAL_EVENT_LIMIT", "Engine", "choose_engine", "input_events"]

Engine = Literal["local", "spark"]
ENGINES: Final[tuple[Engine, ...]] = ("local", "spark")

LOCAL_EVENT_LIMIT: Final = 2_000_000
"""The most events in one run the local engine takes when no engine is named. It holds a
run's events in memory: 1.04 GB at 1M events, 10 GB at 10M (measured); Spark's whole
process tree stays within 2 GB at 10M events, so beyond 2M the local engine would need
more memory than Spark does (and Spark is faster there, 2x at 10M)."""

_MIN_LINE_BYTES: Final = 64
"""No event line of a JSONL trace is shorter: a file below ``limit * 64`` bytes holds
fewer than ``limit`` events, without counting its lines."""


def input_events(item: TraceInput, *, above: int) -> int:
    """The events of one trace (exact for Parquet, from its metadata; for JSONL the line
    count, read only when the file is large enough to hold more than ``above``)."""
    if item.format == "parquet":
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(item.path).metadata.num_rows)
    if item.path.stat().st_size <= above * _MIN_LINE_BYTES:
        return 0  # too small to matter: not counted
    lines = 0
    with item.path.open("rb") as f:
        while chunk := f.read(1 << 20):
            lines += chunk.count(b"\n")
    return max(lines - 1, 0)  # the header line


def _pyspark_installed() -> bool:
    return importlib.util.find_spec("pyspark") is not None


def choose_engine(
    engine: Engine | None,
    *,
    master: str | None,
    conf: Mapping[str, str] | None,
    inputs: Sequence[TraceInput],
    progress: Progress,
    limit: int | None = LOCAL_EVENT_LIMIT,
) -> Engine:
    """The engine to run: ``engine`` when named, else as the module docstring says.
    ``limit``: the local engine's run size, None for a command whose memory does not grow
    with the trace (replay streams its events)."""
    if engine is not None:
        return engine
    if master is not None or conf or launched_by_spark_submit():
        return "spark"
    if limit is None or not inputs:
        return "local"
    events, largest = max(
        ((input_events(i, above=limit), i) for i in inputs), key=lambda found: found[0]
    )
    if events <= limit:
        return "local"
    if _pyspark_installed():
        progress.note(
            f"{largest.run}: {events:,} events, more than the local engine's {limit:,}: "
            "running on Spark (--engine local to keep it in this process)"
        )
        return "spark"
    progress.note(
        f"{largest.run}: {events:,} events, more than the local engine's {limit:,}, and "
        "pyspark is not installed: running locally (about 1 GB per million events)"
    )
    return "local"
