"""The inputs and the export of ``kemu consumer-groups --reset-offsets`` that are text:
``--to-datetime`` (Kafka's ``Utils.getDateTime``), ``--by-duration`` (Java's
``Duration.parse``), ``--from-file`` (``ConsumerGroupService.parseResetPlan``) and
``--export`` (``exportOffsetsToCsv``).

Each parser raises ``OptionError`` with the message of the exception Kafka's tool meets
(2.7 meets it only when the reset runs, and prints it as a failed run; kemu refuses the
input before anything is asked of the cluster).
"""

from __future__ import annotations

import csv
import datetime
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from cluster.cli.jopt import OptionError, java_parse_int

__all__ = [
    "ResetPlan",
    "datetime_ms",
    "duration_ms",
    "export_csv",
    "java_split",
    "read_reset_plan",
]

ResetPlan = dict[str, dict[tuple[str, int], int]]
"""A ``--from-file`` plan: group -> (topic, partition) -> offset, in the file's order."""

_DATE: Final = re.compile(
    r"(\d+)-(\d+)-(\d+)T(\d+):(\d+):(\d+)\.(\d+)(Z|[+-]\d\d(?::?\d\d)?)", re.ASCII
)
_DURATION: Final = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?"
    r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE | re.ASCII,
)
_LONG: Final = re.compile(r"[+-]?[0-9]+", re.ASCII)


def java_split(text: str, separator: str) -> list[str]:
    """``String.split``: trailing empty strings removed."""
    parts = text.split(separator)
    while parts and not parts[-1]:
        parts.pop()
    return parts


def datetime_ms(text: str) -> int:
    """``Utils.getDateTime``: ``YYYY-MM-DDTHH:mm:SS.sss`` with an optional zone (``Z``,
    ``+hh``, ``+hhmm``, ``+hh:mm``; none is UTC) as epoch milliseconds. The milliseconds
    are a number (``SimpleDateFormat``'s ``SSS``); a field out of its range is refused
    where ``SimpleDateFormat`` would roll it over."""
    parts = java_split(text, "T")
    if len(parts) < 2:
        raise OptionError(
            "Error parsing timestamp. It does not contain a 'T' according to ISO8601 format"
        )
    if not parts[1]:
        raise OptionError("Error parsing timestamp. Time part after 'T' is null or empty")
    if not any(c in parts[1] for c in "+-Z"):
        text += "Z"
    found = _DATE.fullmatch(text)
    if found is None:
        raise OptionError(f'Unparseable date: "{text}"')
    year, month, day, hour, minute, second, millis = (int(g) for g in found.groups()[:7])
    zone = found.group(8)
    offset = 0
    if zone != "Z":
        digits = zone[1:].replace(":", "")
        offset = int(digits[:2]) * 60 + (int(digits[2:]) if len(digits) > 2 else 0)
        offset = -offset if zone[0] == "-" else offset
    try:
        moment = datetime.datetime(
            year, month, day, hour, minute, second, tzinfo=datetime.UTC
        ) - datetime.timedelta(minutes=offset)
    except ValueError:
        raise OptionError(f'Unparseable date: "{text}"') from None
    return int(moment.timestamp()) * 1000 + millis


def duration_ms(text: str) -> int:
    """``Duration.parse(text).toMillis()``: ``PnDTnHnMn.nS`` (each part optional, signed,
    at least one given; a ``T`` needs a time part after it)."""
    found = _DURATION.fullmatch(text)
    if found is None or (found.group(3) or "").upper() == "T":
        raise OptionError("Text cannot be parsed to a Duration")
    negative, days, _, hours, minutes, seconds, fraction = found.groups()
    if days is None and hours is None and minutes is None and seconds is None:
        raise OptionError("Text cannot be parsed to a Duration")
    total_ns = (
        (int(days or 0) * 86_400 + int(hours or 0) * 3_600 + int(minutes or 0) * 60) * 10**9
        + int(seconds or 0) * 10**9
        + (-1 if (seconds or "").startswith("-") else 1) * int((fraction or "").ljust(9, "0"))
    )
    if negative == "-":
        total_ns = -total_ns
    return total_ns // 10**6


def read_reset_plan(path: str, groups: Sequence[str]) -> ResetPlan:
    """``parseResetPlan`` of the file at ``path``: ``topic,partition,offset`` lines for the
    one ``--group`` given (when the first line reads so), else
    ``group,topic,partition,offset`` lines; a later line of a partition wins."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise OptionError(f"Cannot read the reset plan {path}: {reason}") from None
    lines = java_split(text, "\n")
    rows = [next(csv.reader([line]), []) for line in lines]
    single = len(groups) == 1 and bool(rows) and _row(rows[0], 3) is not None
    plan: ResetPlan = {}
    for number, row in enumerate(rows, start=1):
        parsed = _row(row, 3 if single else 4)
        if parsed is None:
            columns = "topic,partition,offset" if single else "group,topic,partition,offset"
            raise OptionError(f"{path}:{number}: expected {columns}, not {lines[number - 1]!r}")
        group = groups[0] if single else parsed[0]
        topic, partition, offset = parsed[-3], int(parsed[-2]), int(parsed[-1])
        plan.setdefault(group, {})[(topic, partition)] = offset
    return plan


def _row(row: list[str], width: int) -> list[str] | None:
    """``row`` if it has ``width`` columns ending in an int partition and a long offset."""
    if len(row) != width:
        return None
    partition, offset = row[-2], row[-1]
    if java_parse_int(partition) is None or not _LONG.fullmatch(offset):
        return None
    if not -(2**63) <= int(offset) < 2**63:
        return None
    return row


def export_csv(
    planned: Sequence[tuple[str, Sequence[tuple[str, int, int]]]], *, single: bool
) -> str:
    """``exportOffsetsToCsv``: one ``topic,partition,offset`` line per partition (with the
    group first unless one ``--group`` was given), fields quoted as Jackson's CSV writer
    quotes them."""
    out = []
    for group, offsets in planned:
        for topic, partition, offset in offsets:
            fields = [topic, str(partition), str(offset)]
            if not single:
                fields.insert(0, group)
            out.append(",".join(_quoted(f) for f in fields) + "\n")
    return "".join(out)


def _quoted(field: str) -> str:
    if any(c in field for c in ',"\n\r'):
        return '"' + field.replace('"', '""') + '"'
    return field
