"""PySpark jobs over recorded traces (docs/spark.md): reading traces with their explicit
schema (``spark.schema``), a quiet session (``spark.session``), the analysis and the diff
of runs (``spark.analyze``, ``spark.diff``, ``spark.report``). pyspark itself is imported
only when a job runs, so importing this package needs no JVM."""

from spark.analyze import analyze, analyze_events
from spark.diff import Thresholds, ThresholdsError, diff, load_thresholds
from spark.progress import Progress
from spark.schema import TraceInput, TraceSchemaError, read_traces, resolve_inputs, with_fields
from spark.session import SparkError, spark_session

__all__ = [
    "Progress",
    "SparkError",
    "Thresholds",
    "ThresholdsError",
    "TraceInput",
    "TraceSchemaError",
    "analyze",
    "analyze_events",
    "diff",
    "load_thresholds",
    "read_traces",
    "resolve_inputs",
    "spark_session",
    "with_fields",
]
