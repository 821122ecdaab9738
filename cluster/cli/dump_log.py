"""``kemu dump-log``: Kafka 2.7's ``kafka-dump-log.sh`` (``kafka.tools.DumpLogSegments``)
for the files of a partition log.

``--files`` names one or more files (comma-separated): a segment ``.log`` prints one line
per batch (``printBatchLevel``), and with ``--deep-iteration`` one ``| offset: ...`` line
per record, with ``--print-data-log`` (which implies it) the record's key (when it has
one) and payload as text; bytes after the last whole batch are reported as "Found N
invalid bytes at the end of F". An ``.index`` prints ``offset: O position: P`` per entry
and a ``.timeindex`` ``timestamp: T offset: O``, each stopping where an entry after the
first names the base offset again (an unused, zeroed entry), as ``DumpLogSegments`` does.
Batches are read by the log's own reader (``actors.log.records``), records by
``cluster.kafka.records``. Any other file is refused in one line.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final, TextIO

import anyio

from actors.log.records import CompressionType, TimestampType
from cluster.cli.args import UsageError
from cluster.cli.client_tools import ToolError, run_tool, usage_text
from cluster.cli.jopt import Option, parse
from cluster.kafka.records import RecordsError, batch_records, batch_valid, read_batches

__all__ = ["main"]

SPECS: Final = (
    Option(
        "files",
        "REQUIRED: The comma separated list of data and index log files to be dumped.",
        "file1, file2, ...",
    ),
    Option("deep-iteration", "if set, uses deep instead of shallow iteration."),
    Option(
        "print-data-log",
        "if set, printing the messages content when dumping data logs (implies --deep-iteration).",
    ),
    Option("help", "Print usage information."),
)
USAGE: Final = usage_text(
    "This tool helps to parse a log file and dump its contents to the console, useful for"
    " debugging a seemingly corrupt log segment.",
    SPECS,
)
_INDEX_ENTRY = struct.Struct(">ii")
_TIME_INDEX_ENTRY = struct.Struct(">qi")
_TIMESTAMP_TYPES: Final = {
    TimestampType.CREATE_TIME: "CreateTime",
    TimestampType.LOG_APPEND_TIME: "LogAppendTime",
}


def _base_offset(path: Path) -> int:
    try:
        return int(path.stem)
    except ValueError:
        raise ToolError(f"{path.name} is not named after a base offset") from None


def _text(value: bytes) -> str:
    return value.decode(errors="replace")


def dump_log(path: Path, data: bytes, *, deep: bool, contents: bool, out: TextIO) -> None:
    out.write(f"Starting offset: {_base_offset(path)}\n")
    valid = 0
    try:
        for batch in read_batches(data):
            last_sequence = (
                -1
                if batch.base_sequence < 0
                else (batch.base_sequence + batch.last_offset_delta) % (2**31)
            )
            codec = (
                CompressionType(batch.compression).name
                if batch.compression in {int(c) for c in CompressionType}
                else str(batch.compression)
            )
            out.write(
                f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset}"
                f" count: {batch.records_count} baseSequence: {batch.base_sequence}"
                f" lastSequence: {last_sequence} producerId: {batch.producer_id}"
                f" producerEpoch: {batch.producer_epoch}"
                f" partitionLeaderEpoch: {batch.partition_leader_epoch}"
                f" isTransactional: {str(batch.is_transactional).lower()}"
                f" isControl: {str(batch.is_control).lower()} position: {batch.position}"
                f" {_TIMESTAMP_TYPES[batch.timestamp_type]}: {batch.max_timestamp}"
                f" size: {batch.size} magic: {batch.magic} compresscodec: {codec}"
                f" crc: {batch.crc} isvalid: {str(batch_valid(data, batch)).lower()}\n"
            )
            if deep:
                kind = _TIMESTAMP_TYPES[batch.timestamp_type]
                for record in batch_records(data, batch):
                    keysize = -1 if record.key is None else len(record.key)
                    valuesize = -1 if record.value is None else len(record.value)
                    line = (
                        f"| offset: {record.offset} {kind}: {record.timestamp_ms}"
                        f" keysize: {keysize} valuesize: {valuesize}"
                        f" sequence: {record.sequence}"
                        f" headerKeys: [{','.join(name for name, _ in record.headers)}]"
                    )
                    if contents:
                        if record.key is not None:
                            line += f" key: {_text(record.key)}"
                        payload = "" if record.value is None else _text(record.value)
                        line += f" payload: {payload}"
                    out.write(line + "\n")
            valid = batch.position + batch.size
    except RecordsError as exc:
        raise ToolError(f"{path}: {exc}") from None
    if valid < len(data):
        out.write(f"Found {len(data) - valid} invalid bytes at the end of {path.name}\n")


def dump_index(path: Path, data: bytes, out: TextIO) -> None:
    base = _base_offset(path)
    for i in range(len(data) // _INDEX_ENTRY.size):
        relative, position = _INDEX_ENTRY.unpack_from(data, i * _INDEX_ENTRY.size)
        if i > 0 and relative == 0:  # the first unused entry (``OffsetIndex.entry``)
            break
        out.write(f"offset: {base + relative} position: {position}\n")


def dump_time_index(path: Path, data: bytes, out: TextIO) -> None:
    base = _base_offset(path)
    for i in range(len(data) // _TIME_INDEX_ENTRY.size):
        timestamp, relative = _TIME_INDEX_ENTRY.unpack_from(data, i * _TIME_INDEX_ENTRY.size)
        if i > 0 and relative == 0:
            break
        out.write(f"timestamp: {timestamp} offset: {base + relative}\n")


async def dump(argv: Sequence[str], *, out: TextIO) -> int:
    opts = parse(argv, SPECS)
    if opts.has("help"):
        raise UsageError("")
    files = opts.value("files")
    if not files:
        raise UsageError('Missing required argument "[files]"')
    contents = opts.has("print-data-log")
    deep = contents or opts.has("deep-iteration")
    for name in files.split(","):
        path = Path(name)
        if path.suffix not in {".log", ".index", ".timeindex"}:
            raise ToolError(f"Ignoring unknown file {path}")
        try:
            data = await anyio.Path(path).read_bytes()
        except OSError as exc:
            raise ToolError(f"cannot read {path}: {exc.strerror or exc}") from None
        out.write(f"Dumping {path}\n")
        if path.suffix == ".log":
            dump_log(path, data, deep=deep, contents=contents, out=out)
        elif path.suffix == ".index":
            dump_index(path, data, out)
        else:
            dump_time_index(path, data, out)
    return 0


def main(argv: Sequence[str], *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``kemu dump-log ARGS``: run it and return the exit status."""
    output, error = out or sys.stdout, err or sys.stderr
    return run_tool(lambda: dump(argv, out=output), usage=USAGE, err=error, out=output)
