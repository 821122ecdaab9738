"""Reading kemu traces into Spark: the explicit schema of docs/trace-schema.md.

A trace input is a JSONL trace, its Parquet export (``kemu trace export``), a chaos run
directory (``<scenario>/seed-<N>/`` holding ``trace.jsonl`` or ``trace.parquet``) or a
chaos campaign directory (every run directory under it). ``read_traces`` reads them all
into one DataFrame of events with a ``run`` column naming each input: ``<scenario>/seed-<N>``
for a run directory, the path as given for a lone file. Every input's header is checked
first: a trace written under another ``trace_schema`` is refused with one clear error.

``fields`` stays a JSON string (its keys vary by event type); ``parsed_fields`` parses
the keys a job needs into a struct, ``with_fields`` gives them as typed columns
(``f_<key>``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final
from urllib.parse import quote

import msgspec

from protocol.trace import TraceHeader, TraceSchemaError, decode_header

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = [
    "EVENT_COLUMNS",
    "RawEvent",
    "TraceInput",
    "TraceSchemaError",
    "check_inputs",
    "event_schema",
    "inputs_of",
    "parsed_fields",
    "raw_events",
    "read_header",
    "read_traces",
    "resolve_inputs",
    "with_fields",
]

EVENT_COLUMNS: Final = ("seq", "ts", "node", "actor", "kind", "type", "corr", "fields")
"""The event columns, in file order (docs/trace-schema.md, "Event")."""

_RUN_FILES: Final = ("trace.parquet", "trace.jsonl")
_SEED_DIR = re.compile(r"^seed-(\d+)$")
_URI_PATH_SAFE: Final = "/!'()*,;:$&+=@"
"""Characters java.net.URI leaves unescaped in a path (besides letters, digits, ``_.-~``)."""


class TraceInput(msgspec.Struct, frozen=True, kw_only=True):
    """One trace file to read: its ``run`` label, its path and format, and for a chaos
    run directory the scenario and seed it was found under."""

    run: str
    path: Path
    format: str  # "jsonl" or "parquet"
    scenario: str | None = None
    seed: int | None = None


def event_schema() -> StructType:
    """The Spark schema of one event line (``fields`` as its JSON text)."""
    from pyspark.sql.types import (
        DoubleType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    return StructType(
        [
            StructField("seq", LongType()),
            StructField("ts", DoubleType()),
            StructField("node", StringType()),
            StructField("actor", StringType()),
            StructField("kind", StringType()),
            StructField("type", StringType()),
            StructField("corr", LongType()),
            StructField("fields", StringType()),
        ]
    )


# ----------------------------------------------------------------------------- inputs


def _file_input(path: Path, run: str, scenario: str | None, seed: int | None) -> TraceInput:
    fmt = "parquet" if path.suffix == ".parquet" else "jsonl"
    return TraceInput(run=run, path=path, format=fmt, scenario=scenario, seed=seed)


def _run_dir_input(directory: Path) -> TraceInput | None:
    for name in _RUN_FILES:
        if (directory / name).is_file():
            match = _SEED_DIR.match(directory.name)
            if match is None:
                return _file_input(directory / name, str(directory), None, None)
            scenario = directory.parent.name
            return _file_input(
                directory / name, f"{scenario}/{directory.name}", scenario, int(match.group(1))
            )
    return None


def resolve_inputs(paths: Iterable[str | Path]) -> list[TraceInput]:
    """The trace files behind ``paths``: files as they are, a run directory's trace, every
    run directory of a scenario directory (``seed-<N>/``) or of a campaign directory
    (``<scenario>/seed-<N>/``), in path order."""
    out: list[TraceInput] = []
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            out.append(_file_input(path, str(raw), None, None))
            continue
        if not path.is_dir():
            raise TraceSchemaError(f"{raw}: no such trace file or directory")
        single = _run_dir_input(path)
        if single is not None:
            out.append(single)
            continue
        found = [
            run
            for candidate in sorted(
                p for p in (*path.glob("seed-*"), *path.glob("*/seed-*")) if p.is_dir()
            )
            if (run := _run_dir_input(candidate)) is not None
        ]
        if not found:
            raise TraceSchemaError(f"{raw}: no trace.jsonl or trace.parquet under it")
        out.extend(found)
    runs = [i.run for i in out]
    dupes = sorted({r for r in runs if runs.count(r) > 1})
    if dupes:
        raise TraceSchemaError(f"the same run given twice: {', '.join(dupes)}")
    return out


def inputs_of(items: Iterable[str | Path] | Iterable[TraceInput]) -> list[TraceInput]:
    """``TraceInput``s as they are, or those ``resolve_inputs`` makes of paths."""
    given = list(items)
    if given and all(isinstance(i, TraceInput) for i in given):
        return [i for i in given if isinstance(i, TraceInput)]
    return resolve_inputs(i for i in given if not isinstance(i, TraceInput))


def read_header(item: TraceInput) -> TraceHeader:
    """The trace's header (line 1 of a JSONL trace, the Parquet file's metadata), checked
    against the schema version this kemu reads."""
    name = str(item.path)
    try:
        if item.format == "parquet":
            import pyarrow.parquet as pq

            metadata = pq.read_schema(item.path).metadata or {}
            raw = metadata.get(b"kemu_trace_header", b"")
        else:
            with item.path.open("rb") as f:
                raw = f.readline()
    except (OSError, ValueError) as exc:
        raise TraceSchemaError(f"{name}: not a kemu trace ({exc})") from exc
    return decode_header(raw, name)


class RawEvent(msgspec.Struct):
    """One event line of a JSONL trace with ``fields`` left as its JSON text."""

    seq: int
    ts: float
    node: str
    actor: str
    kind: str
    type: str | None
    corr: int | None
    fields: msgspec.Raw


def raw_events(path: Path) -> Iterator[RawEvent]:
    """The events of a JSONL trace, its header checked, ``fields`` not decoded."""
    decode = msgspec.json.Decoder(RawEvent).decode
    with path.open("rb") as f:
        decode_header(f.readline(), str(path))
        for line in f:
            if line.strip():
                yield decode(line)


def check_inputs(inputs: Sequence[TraceInput]) -> None:
    """Refuse a trace file given twice, any trace whose header is not this kemu's schema,
    and a trace with no events, before any work."""
    paths = [i.path.resolve() for i in inputs]
    twice = sorted({str(p) for p in paths if paths.count(p) > 1})
    if twice:
        raise TraceSchemaError(f"the same trace given twice: {', '.join(twice)}")
    for item in inputs:
        read_header(item)
        if not _has_events(item):
            raise TraceSchemaError(f"{item.path}: no events after its header")


def _has_events(item: TraceInput) -> bool:
    if item.format == "parquet":
        import pyarrow.parquet as pq

        return bool(pq.ParquetFile(item.path).metadata.num_rows)
    with item.path.open("rb") as f:
        f.readline()  # the header
        return any(line.strip() for line in f)


# ----------------------------------------------------------------------------- reading


def _run_column(inputs: Sequence[TraceInput]) -> Column:
    from pyspark.sql import functions as F

    # Spark names a file by its URI in Hadoop's spelling (``file:/a/b``, illegal characters
    # %-escaped): both spellings are keys; an unmatched spelling keeps the URI as the label.
    pairs: list[Column] = []
    for item in inputs:
        path = quote(str(item.path.resolve()), safe=_URI_PATH_SAFE)
        for uri in (f"file:{path}", f"file://{path}"):
            pairs += [F.lit(uri), F.lit(item.run)]
    file_path = F.col("_metadata.file_path")
    return F.coalesce(F.element_at(F.create_map(*pairs), file_path), file_path)


def read_traces(
    spark: SparkSession, paths: Iterable[str | Path] | Sequence[TraceInput]
) -> DataFrame:
    """Every event of the given traces, with ``run`` first, then the event columns.

    ``paths`` are trace files, run directories or campaign directories (or the
    ``TraceInput``s ``resolve_inputs`` made of them). Headers are checked before any
    Spark work; a malformed event line fails the job that reads it."""
    inputs = inputs_of(paths)
    if not inputs:
        raise TraceSchemaError("no trace given")
    check_inputs(inputs)
    schema = event_schema()
    frames: list[DataFrame] = []
    jsonl = [i for i in inputs if i.format == "jsonl"]
    parquet = [i for i in inputs if i.format == "parquet"]
    if jsonl:
        df = (
            spark.read.schema(schema)
            .option("mode", "FAILFAST")
            .json([str(i.path.resolve()) for i in jsonl])
        )
        frames.append(
            df.where(df.seq.isNotNull()).select(_run_column(jsonl).alias("run"), *EVENT_COLUMNS)
        )
    if parquet:
        df = spark.read.schema(schema).parquet(*[str(i.path.resolve()) for i in parquet])
        frames.append(df.select(_run_column(parquet).alias("run"), *EVENT_COLUMNS))
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


def parsed_fields(types: Mapping[str, str]) -> Column:
    """The given keys of ``fields`` parsed into one struct, each as the given Spark SQL
    type (``"string"``, ``"long"``, ``"double"``, ``"boolean"``, ``"array<string>"``...);
    a missing key is null, and as ``"string"`` any value reads as text (a string's
    content, any other value's JSON). Parsing JSON is most of a job's cost: parse only
    the keys a job reads, after its cheap filters."""
    from pyspark.sql import functions as F

    schema = "struct<" + ", ".join(f"`{key}`: {kind}" for key, kind in types.items()) + ">"
    return F.from_json(F.col("fields"), schema)


def with_fields(df: DataFrame, types: Mapping[str, str]) -> DataFrame:
    """``df`` with the given keys of ``fields`` as columns ``f_<key>`` of the given types
    (``parsed_fields``), each row parsed once."""
    from pyspark.sql import functions as F

    parsed = df.withColumn("_fields", parsed_fields(types))
    columns = [F.col("_fields").getField(key).alias(f"f_{key}") for key in types]
    return parsed.select(*df.columns, *columns)
