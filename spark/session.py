"""A quiet Spark session for kemu's trace jobs.

``spark_session`` starts (or joins) a session that prints no banner and no progress bars,
serves no UI, binds to loopback unless a cluster master is named, logs only errors (through
the packaged ``conf/log4j2.properties``) and uses a ``spark.local.dir`` of its own, removed
afterwards. The master is ``local[*]`` unless one is given or the process was launched by
``spark-submit`` (which then decides: it sets ``PYSPARK_GATEWAY_PORT``). docs/spark.md,
"Running", says what each choice is for.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from protocol.errors import KemuError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "CONF_DIR",
    "SparkError",
    "launched_by_spark_submit",
    "local_cores",
    "session_settings",
    "spark_session",
    "translated_errors",
]

CONF_DIR = Path(__file__).with_name("conf")
"""Holds the log4j2.properties that keeps the JVM quiet (errors only)."""


class SparkError(KemuError):
    """A Spark job or session failed; the message is the one line that says why."""


def launched_by_spark_submit() -> bool:
    """True when spark-submit started this Python process (it passes the gateway port)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _local_master(master: str | None) -> bool:
    return master is None or master.startswith("local")


LOCAL_SHUFFLE_PARTITIONS_PER_CORE = 4
"""Shuffle partitions a core for a local session (``spark.sql.shuffle.partitions``)."""


def local_cores(master: str | None) -> int | None:
    """The cores a ``local``, ``local[N]``, ``local[N,F]`` or ``local[*]`` master uses;
    None for any other master (a cluster's, or ``local-cluster``)."""
    if master == "local":
        return 1
    if master is None or not master.startswith("local[") or not master.endswith("]"):
        return None
    threads = master[len("local[") : -1].split(",")[0]
    if threads == "*":
        return os.cpu_count() or 1
    return int(threads) if threads.isdigit() and int(threads) > 0 else None


def session_settings(
    master: str | None,
    scratch: Path,
    config: Mapping[str, str] | None = None,
    *,
    loopback: bool,
) -> dict[str, str]:
    """The settings of a session started for ``master``: kemu's, then ``config`` over them.

    A local master gets four shuffle partitions a core instead of Spark's 200: adaptive
    execution coalesces the 200 after each shuffle anyway, but each map task still writes
    (and each reduce reads) 200 pieces, which cost ~5% of the CPU of an analyze + diff of
    a 1M-event pair on two cores (docs/spark.md, "Performance and limits").
    """
    settings: dict[str, str] = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.local.dir": str(scratch),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
    }
    cores = local_cores(master) if loopback else None
    if cores is not None:
        partitions = LOCAL_SHUFFLE_PARTITIONS_PER_CORE * cores
        settings["spark.sql.shuffle.partitions"] = str(partitions)
    if loopback:
        settings["spark.driver.host"] = "127.0.0.1"
        settings["spark.driver.bindAddress"] = "127.0.0.1"
    settings.update(config or {})
    return settings


@contextmanager
def spark_session(
    master: str | None = None,
    *,
    app: str = "kemu",
    local_dir: Path | None = None,
    config: Mapping[str, str] | None = None,
) -> Iterator[SparkSession]:
    """A Spark session for the block, stopped (and its scratch directory removed) after.

    ``master``: a Spark master URL; None means ``local[*]``, or whatever spark-submit was
    told when it launched us. ``local_dir``: where the session's scratch directory is made
    (the system temp directory by default). ``config``: extra Spark settings, for a
    session started here (a session already active is joined as it is).
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:  # the optional extra is missing
        raise SparkError(
            f"pyspark is not installed ({exc}); install kemu with the spark extra: "
            "pip install -e '.[spark]'"
        ) from exc
    active = SparkSession.getActiveSession()
    if active is not None:  # joined, not ours: whoever started it stops it
        with translated_errors():
            yield active
        return
    submitted = launched_by_spark_submit()
    if master is None and not submitted:
        master = "local[*]"
    loopback = _local_master(master) and not submitted
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_CONF_DIR", str(CONF_DIR))
    if loopback:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    scratch = Path(tempfile.mkdtemp(prefix="kemu-spark-", dir=local_dir))
    builder = SparkSession.builder.appName(app)
    if master is not None:
        builder = builder.master(master)
    settings = session_settings(master, scratch, config, loopback=loopback)
    for key, value in settings.items():
        builder = builder.config(key, value)
    try:
        session = builder.getOrCreate()
    except Exception as exc:  # Py4J / Java gateway errors end here, translated once
        shutil.rmtree(scratch, ignore_errors=True)
        raise SparkError(f"could not start Spark ({master or 'spark-submit'}): {exc}") from exc
    session.sparkContext.setLogLevel("ERROR")
    try:
        with translated_errors():
            yield session
    finally:
        session.stop()
        shutil.rmtree(scratch, ignore_errors=True)


@contextmanager
def translated_errors() -> Iterator[None]:
    """Spark's and Py4J's exceptions raised in the block become one ``SparkError`` whose
    message is their first line."""
    from py4j.protocol import Py4JError  # type: ignore[import-untyped]
    from pyspark.errors import PySparkException

    try:
        yield
    except (PySparkException, Py4JError) as exc:
        first = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        raise SparkError(f"Spark job failed: {first.strip()}") from exc
