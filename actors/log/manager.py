"""The log manager: a broker's partition logs as real directories on disk.

What Kafka 2.7's ``LogManager`` does, and the record operations of ``ReplicaManager``
that reach a ``Log`` (``actors.log.partition_log``):

* **Layout.** Each configured log directory (``log.dirs``) holds ``meta.properties``
  (written once the broker has registered, as ``KafkaServer.checkpointBrokerMetadata``
  after ``registerBroker``), the ``recovery-point-offset-checkpoint``,
  ``replication-offset-checkpoint`` and ``log-start-offset-checkpoint`` files (version line
  ``0``, a count line, then ``topic partition offset`` lines), ``.kafka_cleanshutdown``
  after a clean stop, and one ``<topic>-<partition>/`` directory per hosted log
  (docs/log-format.md). A log is created as an empty first segment
  (``00000000000000000000.log``, ``.index``, ``.timeindex``) and a
  ``leader-epoch-checkpoint`` (holding the new leader's epoch at offset 0; a follower's
  is empty, as Kafka's ``CheckpointFile`` creates it and nothing writes it before an
  epoch is assigned), written in one go without opening anything: a LeaderAndIsr of many
  partitions costs four small files each, a follower's four empty ones.
* **Records.** A log is opened (``Log``) the first time a request needs it, and the
  least recently used one is closed beyond ``max_open_logs`` (each open segment holds
  three files). Every Produce is one ``AppendToLogs`` (leader appends, with the
  idempotent producers' checks of ``actors.log.producer_state``; a follower's fetched
  batches), every Fetch one ``ReadFromLogs``, every ListOffsets or OffsetForLeaderEpoch
  one ``LookupOffsets``; each partition answers its own error. ``TruncateLog``,
  ``AdvanceLogStart`` and ``QueryLog`` serve followers. A topic's log configs come with
  ``LogConfigOverrides`` (else the broker's defaults).
* **Start-up and stop** (``loadLogs``, ``shutdown``): after a clean shutdown a log needs
  no recovery and is opened when first used; without the marker every log is opened and
  recovered at start-up (``Log`` cuts a torn tail). Loading writes nothing else: the
  markers go, ``meta.properties`` and the checkpoints are written once the broker has
  registered (``CheckpointBrokerMetadata``), so a broker that loses its id to another
  one leaves its log dirs as it found them (Kafka writes its checkpoints and markers in
  the shutdown that follows a failed start; kemu does not: the dirs were not used).
  A clean stop closes every open log (flushed: recovery point = log end), writes the
  checkpoints and the markers.
* **Checkpoints.** The recovery points and log start offsets are the logs' own, the
  high watermarks what the broker reports (``RecordHighWatermarks``). The offset
  checkpoints of a log directory are rewritten at once when a
  log leaves it (as ``asyncDelete`` does), and, for the logs that came, on a timer as
  Kafka does (``checkpoint_interval``, by default Kafka's 5 s of
  ``replica.high.watermark.checkpoint.interval.ms``; Kafka writes the recovery-point and
  log-start files every 60 s, here all three go together): a burst of creations costs
  one write per changed log directory per interval, not one per request. A clean stop
  writes what is still owed; a crash loses it, as in Kafka.
* **Creation** (``LogManager.getOrCreateLog``): an existing log is returned; else, with
  ``is_new`` false and some log directory offline, KAFKA_STORAGE_ERROR (the log may be in
  the failed directory); else the online directories are tried fewest-logs first (ties in
  the configured order). A directory whose ``mkdir`` fails goes offline and the next one is
  tried, as Kafka falls back; failing to write the new log's files takes that directory
  offline and answers KAFKA_STORAGE_ERROR.
* **Retention** (``LogManager.cleanupLogs``): every ``retention_check_interval``
  (``log.retention.check.interval.ms``), the first ``initial_task_delay`` after start-up,
  each open log whose policy does not hold ``compact`` deletes the segments its
  ``retention.ms`` / ``retention.bytes`` no longer keep, below the high watermark the
  broker reported (``Log.delete_retention_breached_segments``); a compacted log's
  retention is the cleaner's, between two cleans (``LogCleanerManager.deletableLogs``),
  so it never abandons a clean. The files are renamed ``.deleted`` and removed by the
  first check ``file.delete.delay.ms`` later; the listener (the broker) is told the
  moved log starts (``LogStartsAdvanced``). docs/log-format.md, "Retention".
* **Deletion** (``LogManager.asyncDelete``): the directory is renamed at once to
  ``<topic>-<partition>.<32 hex>-delete`` (the topic part cut so the name fits in 255
  characters), the log leaves the hosted set and its directory's checkpoints, and the
  renamed directory is queued. It is removed once the broker's
  ``log.segment.delete.delay.ms`` has passed since the rename (``LogManager.deleteLogs``
  waits ``currentDefaultConfig.fileDeleteDelayMs``: a topic's ``file.delete.delay.ms``
  override does not delay its deleted logs, only its retention's segment files), and never
  before ``initial_task_delay`` (Kafka's ``InitialTaskDelayMs``, 30 s) after start-up.
  ``-delete`` directories found at start-up are queued again, with the delay counted from
  start-up. A failed rename takes the directory offline and answers
  KAFKA_STORAGE_ERROR.
* **Offline directories.** A directory that fails an operation goes offline for the life
  of this actor: nothing more is written there, its queued deletions are dropped (start-up
  finds them again), its logs answer KAFKA_STORAGE_ERROR, the failure listener (the broker)
  is told with ``LogDirFailed``. When none is left online the broker halts, as Kafka's
  ``Exit.halt(1)``: the request at hand is answered, then the node crashes.
* **Start-up** (``on_start``): every log directory is created if missing and listed;
  ``<topic>-<partition>`` directories become hosted logs, ``-delete`` ones are queued; any
  other directory name (``lost+found`` …), or one log in two directories, stops the broker
  (``FatalNodeError``), as it stops Kafka. A directory that cannot be created or listed is
  offline; if all are, the broker does not start.

Where kemu differs from Kafka 2.7, on purpose:

* Kafka only looks at the head of its queue; here every due entry is removed whatever its
  place (the same times, as every entry waits the same delay).
* Kafka logs a failed removal and forgets it (the directory stays until the next start-up,
  and its log directory goes offline). Here the directory stays online and the entry moves
  to the end of the queue, retried after its delay again (at least ``delete_retry_backoff``).
* ``-future`` directories (log-directory moves) are never made here; one found at start-up
  is left alone.

Time and randomness are the node's: the clock decides when a deletion is due, the seeded
RNG draws the 32-hex ids. Every filesystem operation goes through the injected ``Disk`` and
is synchronous (see ``actors.log.disk``). Every directory operation is traced as
``kind="log_dir"`` with ``type`` the operation (``init``, ``load``, ``load_deleted``,
``create``, ``rename``, ``remove``, ``checkpoint``, ``write_meta``, ``offline``), ``dir``
the directory operated on, ``log_dir`` its log directory, ``topic``/``partition`` when one
log is concerned, and ``result``: ``ok`` or the exception's class name (with ``detail``).
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import itertools
import os
import random
import re
from collections import OrderedDict, deque
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Any, Final, TypeAlias, TypeVar, assert_never

import anyio
import anyio.lowlevel
import msgspec

from actors.log import cleaner
from actors.log.channel import LogFiles
from actors.log.cleaner import CLEANER_OFFSET_CHECKPOINT
from actors.log.disk import Disk
from actors.log.leader_epoch import LEADER_EPOCH_CHECKPOINT, format_epoch_checkpoint
from actors.log.partition_log import (
    Log,
    LogConfig,
    had_clean_shutdown,
    mark_clean_shutdown,
)
from actors.log.producer_state import ProducerStateManager
from actors.log.records import BatchHeader, TimestampType, batch_headers
from actors.runtime.actor import Actor, Context
from protocol.base import ActorRef, Message
from protocol.control import TopicPartition
from protocol.errors import (
    ErrorCode,
    FatalNodeError,
    InconsistentClusterIdError,
    KafkaApiError,
    KemuError,
    RecordValidationError,
)
from protocol.ids import BrokerId, TopicName
from protocol.log import (
    AdvanceLogStart,
    AppendOutcome,
    AppendRecords,
    AppendToLogs,
    CheckpointBrokerMetadata,
    CheckpointFlush,
    CleanCompactedLogs,
    CleanupLogs,
    DeleteLog,
    DeleteLogs,
    DescribedLog,
    DescribedLogDir,
    DescribeLogDirs,
    EpochEndOffsetQuery,
    GetLogDirStatus,
    GetOrCreateLog,
    GetOrCreateLogs,
    HostedLog,
    ListLogs,
    LogConfigOverrides,
    LogCreated,
    LogDefaultsChanged,
    LogDeleted,
    LogDeleteOutcome,
    LogDeletionSweep,
    LogDirFailed,
    LogDirInfo,
    LogDirsAllFailed,
    LogDirsDescribed,
    LogDirStatus,
    LogListing,
    LogOffsets,
    LogOutcome,
    LogQueried,
    LogsAppended,
    LogsConfigured,
    LogsCreated,
    LogsDeleted,
    LogsRead,
    LogStart,
    LogStartsAdvanced,
    LookupOffsets,
    OffsetFound,
    OffsetQuery,
    OffsetsBeforeQuery,
    OffsetsFound,
    OffsetTimestampQuery,
    PendingLogDeletion,
    QueryLog,
    ReadFromLogs,
    ReadOutcome,
    RecordHighWatermarks,
    TruncateLog,
)
from protocol.trace import TraceKind

__all__ = [
    "DEFAULT_CHECKPOINT_INTERVAL",
    "DEFAULT_DELETE_RETRY_BACKOFF",
    "DEFAULT_FILE_DELETE_DELAY",
    "DEFAULT_MAX_OPEN_LOGS",
    "DEFAULT_RETENTION_CHECK_INTERVAL",
    "INITIAL_TASK_DELAY",
    "LogDirKind",
    "LogManager",
    "checkpoint_file",
    "delete_dir_name",
    "log_config",
    "meta_properties",
    "next_log_dirs",
    "offsets_checkpoint",
    "open_logs_budget",
    "parse_log_dir_name",
    "parse_offsets_checkpoint",
]

DEFAULT_FILE_DELETE_DELAY: Final = 60.0
"""``log.segment.delete.delay.ms`` (the broker default of ``file.delete.delay.ms``), seconds."""
INITIAL_TASK_DELAY: Final = 30.0
"""Kafka's ``LogManager.InitialTaskDelayMs``: no deletion sweep before this after start-up."""
DEFAULT_DELETE_RETRY_BACKOFF: Final = 1.0
"""The least wait before a failed removal is tried again (a zero delay must not spin)."""
DEFAULT_CHECKPOINT_INTERVAL: Final = 5.0
"""Seconds between a log's creation and the rewrite of its dir's offset checkpoints
(Kafka's ``replica.high.watermark.checkpoint.interval.ms``)."""
DEFAULT_RETENTION_CHECK_INTERVAL: Final = 300.0
"""Kafka's ``log.retention.check.interval.ms``: seconds between retention checks."""
DEFAULT_CLEANER_BACKOFF: Final = 15.0
"""Kafka's ``log.cleaner.backoff.ms``: seconds between the log cleaner's rounds."""
DEFAULT_MAX_OPEN_LOGS: Final = 500
"""Partition logs kept open at once (each holds three files per segment): the least
recently used one is closed beyond that, and opened again when next needed."""
FILES_PER_OPEN_LOG: Final = 3
"""The files an open log holds: its active segment's ``.log``, ``.index``, ``.timeindex``."""
_FILES_KEPT_FOR_SOCKETS: Final = 0.25
"""The share of a process's file limit left to sockets and other files by ``open_logs_budget``."""


def open_logs_budget(file_limit: int, brokers: int) -> int:
    """``max_open_logs`` for each of ``brokers`` brokers sharing one process whose limit of
    open files is ``file_limit``: Kafka keeps every log open, so the budget is what that
    limit allows, less a share for sockets, and never below ``DEFAULT_MAX_OPEN_LOGS``. A
    broker that reopens its logs in turn on every fetch (more logs than the budget) spends
    its time in opening and closing them."""
    usable = int(file_limit * (1 - _FILES_KEPT_FOR_SOCKETS))
    return max(DEFAULT_MAX_OPEN_LOGS, usable // (FILES_PER_OPEN_LOG * max(1, brokers)))


# Logs created (or recovered) between two yields to the event loop: a LeaderAndIsr of
# 300,000 partitions must not hold every other actor of the process for seconds.
_LOGS_PER_CHECKPOINT: Final = 1000
# Renamed logs removed between two yields (each removal is a directory tree: slower).
_REMOVALS_PER_CHECKPOINT: Final = 10
# Leader epochs whose new log files a log manager keeps made (``_new_leader_log_files``).
_KEPT_LEADER_FILES: Final = 64

MAX_DIR_NAME: Final = 255
DELETE_SUFFIX: Final = "-delete"
FUTURE_SUFFIX: Final = "-future"
SEGMENT_FILES: Final = (
    "00000000000000000000.log",
    "00000000000000000000.index",
    "00000000000000000000.timeindex",
)
RECOVERY_POINT_CHECKPOINT: Final = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT: Final = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT: Final = "log-start-offset-checkpoint"
META_PROPERTIES: Final = "meta.properties"

# Kafka's Log.DeleteDirPattern / FutureDirPattern (Java's \S is ASCII-only).
_DELETE_DIR = re.compile(r"^(\S+)-(\S+)\.(\S+)-delete$", re.ASCII)
_FUTURE_DIR = re.compile(r"^(\S+)-(\S+)\.(\S+)-future$", re.ASCII)

# Deadlines and the loop's time are sums of floats: compare with a microsecond of slack (the
# trace's resolution) so that a timer firing at its deadline always finds its entry due.
_TIME_SLACK: Final = 1e-6

_T = TypeVar("_T")


class _CleaningAborted(Exception):
    """Thrown into the cleaner's round at the clean it is in: the log is about to change
    other than by an append (Kafka's ``LogCleaningAbortedException``)."""


# ------------------------------------------------------------------- pure decisions


class LogDirKind(Enum):
    """What a directory inside a log directory is, by its name."""

    LIVE = "live"
    DELETED = "deleted"
    FUTURE = "future"


def parse_log_dir_name(name: str) -> tuple[TopicPartition, LogDirKind]:
    """Kafka's ``Log.parseTopicPartitionName``: ``<topic>-<p>``, ``<topic>-<p>.<id>-delete``
    or ``<topic>-<p>.<id>-future``; ``ValueError`` for any other name."""
    kind = LogDirKind.LIVE
    if name.endswith(DELETE_SUFFIX):
        if not _DELETE_DIR.match(name):
            raise ValueError(f"{name!r} is not <topic>-<partition>.<id>-delete")
        kind = LogDirKind.DELETED
    elif name.endswith(FUTURE_SUFFIX):
        if not _FUTURE_DIR.match(name):
            raise ValueError(f"{name!r} is not <topic>-<partition>.<id>-future")
        kind = LogDirKind.FUTURE
    base = name if kind is LogDirKind.LIVE else name[: name.rindex(".")]
    topic, dash, partition = base.rpartition("-")
    if not dash or not topic or not (partition.isascii() and partition.isdigit()):
        raise ValueError(f"{name!r} is not in the form of topic-partition")
    return TopicPartition(TopicName(topic), int(partition)), kind


_IDS_DRAWN: Final = 256
"""How many renamed logs' ids are read from the OS source at once."""

_UUID4_CLEARED: Final = ~(0xC000 << 48 | 0xF000 << 64)
_UUID4_SET: Final = 0x8000 << 48 | 0x4000 << 64


def _uuid4_hex(bits: int) -> str:
    """``uuid.UUID(int=bits, version=4).hex`` (the variant and version bits set), without
    building a ``UUID``: a bulk deletion names 10,000 renamed logs per broker."""
    return f"{bits & _UUID4_CLEARED | _UUID4_SET:032x}"


def delete_dir_name(tp: TopicPartition, unique_id: str) -> str:
    """Kafka's ``Log.logDeleteDirName``: ``<topic>-<p>.<id>-delete``, the topic cut short so
    that the whole name fits in 255 characters."""
    suffix = f"-{tp.partition}.{unique_id}{DELETE_SUFFIX}"
    return tp.topic[: min(len(tp.topic), MAX_DIR_NAME - len(suffix))] + suffix


def next_log_dirs(live: Sequence[Path], counts: Mapping[Path, int]) -> list[Path]:
    """Kafka's ``nextLogDirs``: the online log directories, fewest logs first; ties keep the
    configured order."""
    return sorted(live, key=lambda d: counts.get(d, 0))


def checkpoint_file(rows: Iterable[str]) -> bytes:
    """Kafka's ``CheckpointFile`` text: version ``0``, the number of rows, the rows."""
    body = list(rows)
    return "".join(f"{line}\n" for line in ("0", str(len(body)), *body)).encode()


def offsets_checkpoint(offsets: Iterable[tuple[TopicPartition, int]]) -> bytes:
    """An ``OffsetCheckpointFile``: ``topic partition offset`` rows, sorted."""
    return checkpoint_file(f"{tp.topic} {tp.partition} {offset}" for tp, offset in sorted(offsets))


class _CheckpointRows:
    """One log dir's rows of an offset checkpoint (``topic partition offset``): ``render``
    is ``offsets_checkpoint`` of them. A new log's row is only noted (O(1): a burst of
    creations costs nothing until the next checkpoint), and so is a removed log's (a bulk
    deletion removes 10,000 logs of a dir between two checkpoints: each taken out of the
    sorted lists at once would move half of them); the sorted rows are built on the next
    render and then kept sorted as offsets change, so that a rewrite does not sort every
    hosted log again."""

    __slots__ = ("_added", "_keys", "_offsets", "_removed", "_rows")

    def __init__(self) -> None:
        self._keys: list[tuple[str, int]] = []  # sorted, with _rows alike
        self._rows: list[str] = []
        self._offsets: dict[tuple[str, int], int] = {}  # every hosted row's offset
        self._added: dict[tuple[str, int], None] = {}  # not yet in _keys
        self._removed: set[tuple[str, int]] = set()  # still in _keys, no longer hosted

    def __len__(self) -> int:
        return len(self._offsets)

    def add(self, tp: TopicPartition, offset: int = 0) -> None:
        key = (tp.topic, tp.partition)
        self._offsets[key] = offset
        if self._removed and key in self._removed:  # its row is still in place: rewritten there
            self._removed.discard(key)
            self._rows[bisect.bisect_left(self._keys, key)] = _row(key, offset)
            return
        self._added[key] = None

    def get(self, tp: TopicPartition) -> int | None:
        return self._offsets.get((tp.topic, tp.partition))

    def set(self, tp: TopicPartition, offset: int) -> None:
        """The row of a hosted ``tp`` now says ``offset``."""
        key = (tp.topic, tp.partition)
        if self._offsets.get(key) == offset:
            return
        self._offsets[key] = offset
        if key in self._added:
            return
        index = bisect.bisect_left(self._keys, key)
        self._rows[index] = _row(key, offset)

    def remove(self, tp: TopicPartition) -> None:
        key = (tp.topic, tp.partition)
        del self._offsets[key]
        if self._added and key in self._added:
            del self._added[key]
        else:
            self._removed.add(key)

    def render(self) -> bytes:
        if self._removed:
            removed = self._removed
            kept = [i for i, key in enumerate(self._keys) if key not in removed]
            self._keys = [self._keys[i] for i in kept]
            self._rows = [self._rows[i] for i in kept]
            removed.clear()
        if self._added:
            keys = sorted([*self._keys, *self._added])
            self._added.clear()
            self._keys = keys
            offsets = self._offsets
            self._rows = [_row(key, offsets[key]) for key in keys]
        return f"0\n{len(self._rows)}\n{''.join(self._rows)}".encode()


class _LogDir:
    """One log directory's own state, the actor's: its path and name, the rows of its
    offset checkpoints, its logs' start offsets past their first segment and their clean
    points. A hosted log maps to its dir's record (``LogManager._logs``): a log's
    bookkeeping reads the record's attributes instead of a dict keyed by the dir's
    ``Path`` per kind of state (a bulk creation or deletion does it for 10,000 logs a
    broker)."""

    __slots__ = (
        "clean_points",
        "hw_rows",
        "name",
        "offline",
        "path",
        "prefix",
        "rows",
        "start_offsets",
    )

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = str(path)
        self.prefix = self.name + os.sep  # a log's directory is prefix + str(tp)
        self.offline = False  # as LogManager._offline (which holds the reason)
        # The recovery points and the high watermarks (as the broker reported them) of
        # the hosted logs: one row each, so that len(rows) is the dir's count of logs.
        self.rows = _CheckpointRows()
        self.hw_rows = _CheckpointRows()
        self.start_offsets: dict[TopicPartition, int] = {}
        # The offset each compacted log is clean below (LogCleanerManager's checkpoints).
        self.clean_points: dict[TopicPartition, int] = {}


def _row(key: tuple[str, int], offset: int) -> str:
    return f"{key[0]} {key[1]} {offset}\n"


def parse_offsets_checkpoint(data: bytes) -> dict[TopicPartition, int]:
    """Read an ``OffsetCheckpointFile``: ``ValueError`` for a wrong version, a malformed
    line or a count that does not match (Kafka's ``CheckpointFile`` IOException). An
    empty file holds no entries."""
    lines = data.decode().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        return {}
    if lines[0].strip() != "0" or len(lines) < 2:
        raise ValueError(f"unrecognised checkpoint version or header: {lines[:2]!r}")
    count = int(lines[1])
    rows = lines[2:]
    if count != len(rows):
        raise ValueError(f"expected {count} entries but found {len(rows)}")
    offsets: dict[TopicPartition, int] = {}
    for row in rows:
        topic, partition, offset = row.split()
        offsets[TopicPartition(TopicName(topic), int(partition))] = int(offset)
    return offsets


def log_config(configs: Mapping[str, str], default: LogConfig) -> LogConfig:
    """A log's ``LogConfig`` from topic config values as text (``LogConfig.fromProps``);
    the names not given keep ``default``'s values."""

    def number(name: str, current: int) -> int:
        value = configs.get(name)
        return current if value is None else int(value)

    policy = configs.get("cleanup.policy")
    policies = () if policy is None else tuple(p.strip() for p in policy.split(","))
    timestamp_type = default.timestamp_type
    if (kind := configs.get("message.timestamp.type")) is not None:
        timestamp_type = (
            TimestampType.LOG_APPEND_TIME if kind == "LogAppendTime" else TimestampType.CREATE_TIME
        )
    return LogConfig(
        segment_bytes=number("segment.bytes", default.segment_bytes),
        segment_ms=number("segment.ms", default.segment_ms),
        roll_jitter_ms=number("segment.jitter.ms", default.roll_jitter_ms),
        max_index_size=number("segment.index.bytes", default.max_index_size),
        index_interval_bytes=number("index.interval.bytes", default.index_interval_bytes),
        max_message_bytes=number("max.message.bytes", default.max_message_bytes),
        timestamp_type=timestamp_type,
        timestamp_difference_max_ms=number(
            "message.timestamp.difference.max.ms", default.timestamp_difference_max_ms
        ),
        retention_ms=number("retention.ms", default.retention_ms),
        retention_bytes=number("retention.bytes", default.retention_bytes),
        file_delete_delay_ms=number("file.delete.delay.ms", default.file_delete_delay_ms),
        delete=default.delete if policy is None else "delete" in policies,
        compact=default.compact if policy is None else "compact" in policies,
        delete_retention_ms=number("delete.retention.ms", default.delete_retention_ms),
        min_compaction_lag_ms=number("min.compaction.lag.ms", default.min_compaction_lag_ms),
        max_compaction_lag_ms=number("max.compaction.lag.ms", default.max_compaction_lag_ms),
        min_cleanable_ratio=float(
            configs.get("min.cleanable.dirty.ratio", default.min_cleanable_ratio)
        ),
    )


_DAYS: Final = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS: Final = (
    "Jan",
    "Feb",
    "Mar",
    "Apr",
    "May",
    "Jun",
    "Jul",
    "Aug",
    "Sep",
    "Oct",
    "Nov",
    "Dec",
)


def meta_properties(broker_id: int, cluster_id: str | None, wall_ms: int) -> bytes:
    """``meta.properties`` as Kafka's ``BrokerMetadataCheckpoint`` writes it through
    ``java.util.Properties.store`` (an empty comment, the date, then the keys in the order
    Java 11 stores them)."""
    t = datetime.fromtimestamp(wall_ms / 1000, tz=UTC)
    stamp = f"{_DAYS[t.weekday()]} {_MONTHS[t.month - 1]} {t:%d %H:%M:%S} UTC {t.year}"
    lines = ["#", f"#{stamp}", f"broker.id={broker_id}", "version=0"]
    if cluster_id is not None:
        lines.append(f"cluster.id={cluster_id}")
    return "".join(f"{line}\n" for line in lines).encode()


def _properties(data: bytes) -> dict[str, str]:
    """``key=value`` lines of a properties file (comments and blank lines skipped)."""
    out: dict[str, str] = {}
    for line in data.decode("latin-1").splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def check_meta_properties(
    found: Mapping[Path, bytes], *, broker_id: int, cluster_id: str | None
) -> None:
    """The checks ``KafkaServer.startup`` makes of the ``meta.properties`` its log dirs
    hold (``found``, by log dir; a dir without one is not in it) before it loads any log:
    the same broker and cluster in every dir (``InconsistentBrokerMetadataException``),
    the cluster id of the store (``InconsistentClusterIdException``), the configured
    broker id (``InconsistentBrokerIdException``). Raises ``FatalNodeError`` with Kafka's
    message: the broker does not start, and nothing is rewritten."""
    stored = {d: _properties(data) for d, data in found.items()}
    seen = {(p.get("broker.id"), p.get("cluster.id")) for p in stored.values()}
    if len(seen) > 1:
        listing = "; ".join(
            f"{d}: broker.id={p.get('broker.id')}, cluster.id={p.get('cluster.id')}"
            for d, p in sorted(stored.items())
        )
        raise FatalNodeError(
            "BrokerMetadata is not consistent across log.dirs. This could happen if multiple"
            " brokers shared a log directory (log.dirs) or partial data was manually copied"
            f" from another broker. Found: {listing}"
        )
    if not seen:
        return
    ((stored_broker, stored_cluster),) = seen
    if stored_cluster is not None and cluster_id is not None and stored_cluster != cluster_id:
        raise InconsistentClusterIdError(
            f"The Cluster ID {cluster_id} doesn't match stored clusterId Some({stored_cluster})"
            " in meta.properties. The broker is trying to join the wrong cluster. Configured"
            " zookeeper.connect may be wrong."
        )
    if stored_broker is not None and stored_broker != str(broker_id):
        raise FatalNodeError(
            f"Configured broker.id {broker_id} doesn't match stored broker.id"
            f" Some({stored_broker}) in meta.properties. If you moved your data, make sure"
            " your configured broker.id matches. If you intend to create a new broker, you"
            " should remove all data in your data directories (log.dirs)."
        )


_DeletedSegments: TypeAlias = tuple[float, TopicPartition, Path, tuple[Path, ...]]
"""Segment files retention renamed ``.deleted``: when they are due, their log and its log
dir, the files."""

# ------------------------------------------------------------------------ the actor

LogManagerMessage: TypeAlias = (
    GetOrCreateLog
    | DeleteLog
    | DeleteLogs
    | ListLogs
    | GetLogDirStatus
    | DescribeLogDirs
    | LogDeletionSweep
    | CleanupLogs
    | CleanCompactedLogs
    | LogDirsAllFailed
    | CheckpointFlush
    | CheckpointBrokerMetadata
    | GetOrCreateLogs
    | AppendToLogs
    | ReadFromLogs
    | LookupOffsets
    | TruncateLog
    | AdvanceLogStart
    | QueryLog
    | RecordHighWatermarks
    | LogConfigOverrides
    | LogDefaultsChanged
)
_HANDLED: Final = (
    AppendToLogs,
    ReadFromLogs,
    RecordHighWatermarks,
    LookupOffsets,
    CheckpointFlush,
    CheckpointBrokerMetadata,
    GetOrCreateLogs,
    GetOrCreateLog,
    DeleteLog,
    DeleteLogs,
    ListLogs,
    GetLogDirStatus,
    DescribeLogDirs,
    LogDeletionSweep,
    CleanupLogs,
    CleanCompactedLogs,
    LogDirsAllFailed,
    TruncateLog,
    AdvanceLogStart,
    QueryLog,
    LogConfigOverrides,
    LogDefaultsChanged,
)


class _PendingDelete(msgspec.Struct, gc=False):
    """A renamed log waiting for removal: the actor's own record, mutated only by it. Out
    of the cyclic garbage collector's sight (it holds no container: no cycle), as a
    bulk deletion queues 10,000 of them a broker."""

    tp: TopicPartition
    log_dir: Path
    name: str
    path: str
    """The renamed directory: the log dir's path, the separator and ``name``."""
    due: float
    delay: float
    """The broker's ``log.segment.delete.delay.ms`` when it was queued, in seconds (also
    the wait before a retry)."""
    attempts: int = 0
    files: tuple[str, ...] | None = None
    """The files the directory holds, when known (a log made and never opened since): its
    removal unlinks them without listing it (``Disk.rmtree``'s ``names``)."""


_Renamed: TypeAlias = tuple[TopicPartition, str, tuple[str, ...] | None]
"""A log renamed for deletion: its partition, its directory's new name and its files when
known (``_PendingDelete.files``)."""

_FRESH_LOG_FILES: Final = (*SEGMENT_FILES, LEADER_EPOCH_CHECKPOINT)
"""The files of a new log (``LogManager._new_log_files``' names)."""

_NOT_FRESH: Final = object()


def _all_batches(records: bytes) -> list[BatchHeader]:
    """The headers of the whole batches of ``records`` (none when they are corrupt: the
    append refuses them anyway)."""
    try:
        return list(batch_headers(records))
    except KafkaApiError:
        return []


def _producer_batches(records: bytes) -> list[BatchHeader]:
    """The batches of idempotent producers among ``records``."""
    return [h for h in _all_batches(records) if h.has_producer_id]


def _fresh_read(tp: TopicPartition, offset: int) -> ReadOutcome:
    """A read of an empty log (``Log.read``): nothing at 0, OFFSET_OUT_OF_RANGE elsewhere."""
    if offset == 0:
        return ReadOutcome(
            topic=tp.topic, partition=tp.partition, log_start_offset=0, log_end_offset=0
        )
    return ReadOutcome(
        topic=tp.topic,
        partition=tp.partition,
        error_code=ErrorCode.OFFSET_OUT_OF_RANGE,
        error_message=f"Received request for offset {offset} for partition {tp}, but we only "
        "have log segments in the range 0 to 0.",
    )


def _fresh_lookup(
    tp: TopicPartition, query: EpochEndOffsetQuery | OffsetTimestampQuery, epoch: int | None
) -> OffsetFound:
    """The lookups of an empty log whose epoch cache holds ``(epoch, 0)`` or nothing
    (``LeaderEpochFileCache.endOffsetFor``; no record for any timestamp)."""
    match query:
        case EpochEndOffsetQuery(leader_epoch=requested):
            if epoch is None or requested < 0 or requested > epoch:
                return OffsetFound(topic=tp.topic, partition=tp.partition)
            return OffsetFound(
                topic=tp.topic, partition=tp.partition, leader_epoch=requested, offset=0
            )
        case OffsetTimestampQuery():
            return OffsetFound(topic=tp.topic, partition=tp.partition)
        case _:
            assert_never(query)


def _appended(
    tp: TopicPartition, log: Log, first: int = -1, last: int = -1, append_time: int = -1
) -> AppendOutcome:
    """An append's answer: the offsets given (-1: nothing appended) and ``log``'s after it."""
    return AppendOutcome(
        topic=tp.topic,
        partition=tp.partition,
        first_offset=first,
        last_offset=last,
        log_append_time=append_time,
        log_start_offset=log.log_start_offset,
        log_end_offset=log.log_end_offset,
    )


def _read_state_file(path: Path) -> bytes | None:
    """A checkpoint file's bytes, None if there is none (read at start-up only)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _storage_error(message: str) -> KafkaApiError:
    return KafkaApiError(ErrorCode.KAFKA_STORAGE_ERROR, message)


class LogManager(Actor):
    """One broker's logs on disk. State is private to the actor's task: the hosted logs,
    the offline log directories, the deletion queue and the pending deletion timers.

    Timers are one-shot helper tasks started with ``start_soon`` (owned by the node's task
    group, so stopping or crashing the node ends them): each sleeps on the node's clock and
    then sends ``LogDeletionSweep`` (or ``CheckpointFlush``) to the actor. The deletion
    queue is bounded by the logs this broker deleted; at most one deletion timer is armed
    per distinct earliest deadline, and one checkpoint timer at a time.
    """

    def __init__(
        self,
        log_dirs: Sequence[Path],
        *,
        broker_id: BrokerId,
        cluster_id: str | None = None,
        disk: Disk | None = None,
        segment_delete_delay: float = DEFAULT_FILE_DELETE_DELAY,
        initial_task_delay: float = INITIAL_TASK_DELAY,
        delete_retry_backoff: float = DEFAULT_DELETE_RETRY_BACKOFF,
        checkpoint_interval: float = DEFAULT_CHECKPOINT_INTERVAL,
        retention_check_interval: float = DEFAULT_RETENTION_CHECK_INTERVAL,
        cleaner_backoff: float | None = DEFAULT_CLEANER_BACKOFF,
        failure_listener: ActorRef | None = None,
        log_config: LogConfig | None = None,
        max_open_logs: int = DEFAULT_MAX_OPEN_LOGS,
        name: str = "log_manager",
    ) -> None:
        """``log_dirs``: the broker's ``log.dirs``, in order. ``segment_delete_delay``: the
        broker's ``log.segment.delete.delay.ms`` in seconds, the wait of every deleted log
        and the default of a topic's ``file.delete.delay.ms`` (the wait of retention's
        segment files, from each log's ``LogConfig``). ``checkpoint_interval``:
        seconds from a creation to its checkpoint write (0: right after the request).
        ``failure_listener`` is told ``LogDirFailed`` when a log directory goes offline.
        ``log_config``: the broker's defaults of the topic log configs (a topic's
        ``LogConfigOverrides`` replace them); ``max_open_logs``: partition logs open at
        once. ``retention_check_interval``: seconds between retention checks (Kafka's
        ``log.retention.check.interval.ms``), the first ``initial_task_delay`` after
        start-up. ``cleaner_backoff``: seconds between the log cleaner's rounds (Kafka's
        ``log.cleaner.backoff.ms``; ``None``: ``log.cleaner.enable=false``, no cleaner)."""
        super().__init__(name)
        dirs = tuple(Path(d) for d in log_dirs)
        if not dirs:
            raise ValueError("a log manager needs at least one log dir")
        if len(set(dirs)) != len(dirs):
            raise ValueError(f"duplicate log dir in {', '.join(map(str, dirs))}")
        if min(segment_delete_delay, initial_task_delay, checkpoint_interval) < 0 or (
            delete_retry_backoff <= 0
        ):
            raise ValueError("delays must not be negative, the retry backoff must be positive")
        if retention_check_interval <= 0:
            raise ValueError(
                f"the retention check interval must be positive, not {retention_check_interval}"
            )
        if cleaner_backoff is not None and cleaner_backoff < 0:
            raise ValueError(f"the cleaner backoff must not be negative, not {cleaner_backoff}")
        if max_open_logs < 1:
            raise ValueError(f"max_open_logs must be at least 1, not {max_open_logs}")
        self.log_dirs = dirs
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.disk = disk or Disk()
        self.initial_task_delay = initial_task_delay
        self.delete_retry_backoff = delete_retry_backoff
        self.checkpoint_interval = checkpoint_interval
        self.retention_check_interval = retention_check_interval
        self.cleaner_backoff = cleaner_backoff
        # Each log dir's own state (its checkpoint rows, clean points), and each hosted
        # log's dir.
        self._dirs: dict[Path, _LogDir] = {d: _LogDir(d) for d in dirs}
        self._logs: dict[TopicPartition, _LogDir] = {}
        self._uncleanable: set[TopicPartition] = set()  # LogCleanerManager's, until a restart
        # The cleaner's round in progress, run a step per CleanCompactedLogs(resume=True),
        # and the log it is cleaning (whose truncation, deletion or close abandons it).
        self._clean_round: Generator[None, None, None] | None = None
        self._cleaning: TopicPartition | None = None
        self._clean_running = False
        self.failure_listener = failure_listener
        self._log_delete_delay = segment_delete_delay
        self.log_config = log_config or LogConfig(
            file_delete_delay_ms=round(segment_delete_delay * 1000)
        )
        self.max_open_logs = max_open_logs
        self._files = LogFiles(self.disk)
        self._topic_configs: dict[TopicName, LogConfig] = {}
        self._topic_overrides: dict[TopicName, dict[str, str]] = {}
        self._open: OrderedDict[TopicPartition, Log] = OrderedDict()  # least recent first
        self._clean: dict[Path, bool] = {}  # the clean-shutdown marker, as found at start
        self._closed_clean: set[TopicPartition] = set()  # closed by us since start-up
        self._drawn_ids: list[int] = []  # drawn from the OS source ahead (``_unique_id``)
        # Logs created empty by this incarnation and never opened since, with the leader
        # epoch their epoch checkpoint holds: reads, lookups and no-op truncations of an
        # empty log are answered without opening it (a LeaderAndIsr of 100,000 partitions
        # starts as many fetchers; opening every log would cost three files each).
        self._fresh: dict[TopicPartition, int | None] = {}
        # Idempotent producers per log, kept while the log closes and reopens; built from
        # the log's batches the first time it opens (kemu writes no .snapshot files).
        self._producers: dict[TopicPartition, ProducerStateManager] = {}
        self._dirty: set[_LogDir] = set()  # owing a checkpoint rewrite
        self._flush_armed = False  # a CheckpointFlush is queued or its timer is running
        self._online: list[Path] = list(dirs)  # in the configured order
        self._offline: dict[Path, str] = {}
        self._pending: deque[_PendingDelete] = deque()
        self._timers: dict[int, float] = {}
        self._timer_ids = itertools.count(1)
        # Segment files retention renamed .deleted: (due, log, files), removed at the first
        # retention check from ``due`` on (Kafka's delayed segment delete).
        self._deleted_segments: deque[_DeletedSegments] = deque()
        self._started_at = 0.0
        self._started = False
        self._committed = False  # start-up's writes done (CheckpointBrokerMetadata)
        self._halting = False
        # A new log's files, in the order written: the segment files, then the checkpoint,
        # empty as Kafka's CheckpointFile creates it (Files.createFile) and leaves it until
        # an epoch is assigned: a follower's new log keeps it so (a leader's holds its epoch).
        self._new_log_files: tuple[tuple[str, bytes], ...] = (
            *((file_name, b"") for file_name in SEGMENT_FILES),
            (LEADER_EPOCH_CHECKPOINT, b""),
        )
        self._leader_log_files: dict[int, tuple[tuple[str, bytes], ...]] = {}

    # -- read-only views (tests, metrics)

    @property
    def pending_deletions(self) -> int:
        """How many renamed logs wait for removal (the deletion queue's depth)."""
        return len(self._pending)

    @property
    def open_logs(self) -> int:
        """How many partition logs are open (at most ``max_open_logs``)."""
        return len(self._open)

    @property
    def offline_dirs(self) -> tuple[Path, ...]:
        return tuple(d for d in self.log_dirs if d in self._offline)

    # -- start-up

    async def on_start(self) -> None:
        """``LogManager.loadLogs``: per log dir, the clean-shutdown marker and the
        checkpoints are read, the logs found; after an unclean shutdown every log is
        opened (and recovered) now, else each is opened when first used. The
        ``meta.properties`` found are checked. Nothing is written yet: the markers are
        deleted, ``meta.properties`` and the checkpoints written once the broker has
        registered (``CheckpointBrokerMetadata``)."""
        self._started_at = self.clock.now()
        for log_dir in self.log_dirs:
            self._load_dir(log_dir)
        for log_dir in self._online_dirs():
            if self._clean.get(log_dir, True):
                continue
            record = self._dirs[log_dir]
            for i, tp in enumerate([tp for tp, d in self._logs.items() if d is record]):
                if i and i % _LOGS_PER_CHECKPOINT == 0:
                    await anyio.lowlevel.checkpoint()
                try:
                    self._log(tp)
                except KafkaApiError:
                    break  # the dir went offline
        if not self._online_dirs():
            raise FatalNodeError(
                "none of the specified log dirs can be created or opened: "
                + "; ".join(f"{d}: {self._offline[d]}" for d in self.log_dirs)
            )
        self._check_meta()
        self._started = True
        self._schedule_sweep()
        self.start_soon(self._retention_timer)
        if self.cleaner_backoff is not None:
            self.start_soon(self._cleaner_timer)

    def _commit_start_up(self) -> None:
        """The broker registered: delete the clean-shutdown markers, write
        ``meta.properties`` (``KafkaServer.checkpointBrokerMetadata``) and the checkpoints.
        Idempotent."""
        if self._committed:
            return
        self._committed = True
        for log_dir in self._online_dirs():
            try:
                mark_clean_shutdown(self._files, log_dir, present=False)
            except OSError as exc:
                self._mark_offline(log_dir, f"Error while deleting the marker in {log_dir}", exc)
        for log_dir in self._online_dirs():
            self._write_meta(log_dir)
        for log_dir in self._online_dirs():
            self._checkpoint(log_dir)

    async def on_stop(self) -> None:
        """A clean shutdown (``LogManager.shutdown``): every open log flushed and closed,
        the checkpoints still owed written, then the clean-shutdown marker of each log
        dir still online. A broker stopped before it registered writes nothing: its log
        dirs stay as it found them."""
        self._end_clean_round()
        while self._open:
            self._close_log(next(iter(self._open)))
        if not self._committed:
            return
        self._flush_checkpoints()
        for log_dir in self._online_dirs():
            try:
                mark_clean_shutdown(self._files, log_dir, present=True)
            except OSError as exc:
                self._trace_op("checkpoint", log_dir, log_dir=log_dir, error=exc)

    def on_exit(self) -> None:
        """The files of the logs still open (a crash skipped ``on_stop``) are closed
        without writing anything (``Log.closeHandlers``): a killed broker's process loses
        its descriptors, not its page cache, so what was written stays as it was."""
        self._end_clean_round()
        while self._open:
            _, log = self._open.popitem(last=False)
            log.close_handlers()

    def _load_dir(self, log_dir: Path) -> None:
        try:
            self.disk.mkdir(log_dir)
            names = [n for n in self.disk.listdir(log_dir) if self.disk.is_dir(log_dir / n)]
        except OSError as exc:
            self._trace_op("init", log_dir, log_dir=log_dir, error=exc)
            self._mark_offline(log_dir, "cannot create or read the log dir", exc)
            return
        self._trace_op("init", log_dir, log_dir=log_dir, entries=len(names))
        self._clean[log_dir] = had_clean_shutdown(self._files, log_dir)
        checkpoints: list[dict[TopicPartition, int]] = []
        for file_name in (
            RECOVERY_POINT_CHECKPOINT,
            REPLICATION_OFFSET_CHECKPOINT,
            LOG_START_OFFSET_CHECKPOINT,
            CLEANER_OFFSET_CHECKPOINT,
        ):
            try:
                data = _read_state_file(log_dir / file_name)
                checkpoints.append({} if data is None else parse_offsets_checkpoint(data))
            except (OSError, ValueError, UnicodeDecodeError) as exc:
                # Kafka logs the error and reads no entries (the next write replaces it;
                # with no clean points, the compacted logs are cleaned from their start).
                self._trace_op(
                    "load",
                    log_dir / file_name,
                    log_dir=log_dir,
                    result="bad_checkpoint",
                    detail=str(exc),
                )
                checkpoints.append({})
        recovery_points, high_watermarks, start_offsets, clean_points = checkpoints
        record = self._dirs[log_dir]
        record.clean_points = clean_points
        now = self.clock.now()
        for name in names:
            path = log_dir / name
            try:
                tp, kind = parse_log_dir_name(name)
            except ValueError:
                self._trace_op("load", path, log_dir=log_dir, result="invalid_name")
                raise FatalNodeError(
                    f"Found directory {path}, '{name}' is not in the form of topic-partition "
                    "or topic-partition.uniqueId-delete (if marked for deletion). Kafka's log "
                    "directories (and children) should only contain Kafka topic data."
                ) from None
            match kind:
                case LogDirKind.LIVE:
                    other = self._logs.get(tp)
                    if other is not None:
                        self._trace_op("load", path, log_dir=log_dir, tp=tp, result="duplicate")
                        raise FatalNodeError(
                            f"Duplicate log directories for {tp} are found in both "
                            f"{other.path / name} and {path}."
                        )
                    self._add_log(
                        tp,
                        record,
                        recovery_point=recovery_points.get(tp, 0),
                        high_watermark=high_watermarks.get(tp, 0),
                        log_start_offset=start_offsets.get(tp, 0),
                    )
                    self._trace_op("load", path, log_dir=log_dir, tp=tp)
                case LogDirKind.DELETED:
                    entry = self._enqueue(tp, record, name, now)
                    self._trace_op("load_deleted", path, log_dir=log_dir, tp=tp, due=entry.due)
                case LogDirKind.FUTURE:
                    self._trace_op("load", path, log_dir=log_dir, tp=tp, result="ignored_future")
                case _:
                    assert_never(kind)

    # -- messages

    async def receive(self, msg: Message, ctx: Context) -> Message | None:
        if not isinstance(msg, _HANDLED):
            raise KafkaApiError(
                ErrorCode.INVALID_REQUEST, f"{self.name} does not handle {type(msg).__name__}"
            )
        return await self._dispatch(msg)

    async def _dispatch(self, msg: LogManagerMessage) -> Message | None:
        match msg:
            case AppendToLogs(appends=appends):
                return LogsAppended(results=tuple(self._append(a) for a in appends))
            case ReadFromLogs():
                return self._read(msg)
            case LookupOffsets(queries=queries):
                return OffsetsFound(results=tuple(self._lookup(q) for q in queries))
            case RecordHighWatermarks(high_watermarks=marks):
                for mark in marks:
                    self._set_high_watermark(
                        TopicPartition(mark.topic, mark.partition), mark.high_watermark
                    )
                return None
            case TruncateLog():
                return self._truncate(msg)
            case AdvanceLogStart():
                return self._advance_log_start(msg)
            case QueryLog():
                return self._query(TopicPartition(msg.topic, msg.partition))
            case LogConfigOverrides(topic=topic, configs=configs):
                return self._configure(topic, dict(configs))
            case LogDefaultsChanged():
                return self._reconfigure_defaults(msg)
            case GetOrCreateLog():
                return self._get_or_create(
                    msg.topic_partition, is_new=msg.is_new, leader_epoch=msg.leader_epoch
                )
            case DeleteLog():
                return self._delete(msg.topic_partition)
            case DeleteLogs(logs=logs):
                return await self._delete_batch(logs)
            case ListLogs():
                return self._listing()
            case GetLogDirStatus():
                return self._dir_status()
            case DescribeLogDirs(partitions=partitions):
                return self._describe(partitions)
            case LogDeletionSweep(timer=timer):
                await self._sweep(timer)
                return None
            case CleanupLogs():
                self._cleanup_logs()
                return None
            case CleanCompactedLogs(resume=resume):
                self._step_cleaner(resume=resume)
                return None
            case LogDirsAllFailed(reason=reason):
                raise FatalNodeError(reason)
            case CheckpointFlush():
                self._flush_checkpoints()
                return None
            case CheckpointBrokerMetadata():
                self._commit_start_up()
                return self._dir_status()
            case GetOrCreateLogs(logs=logs):
                return await self._get_or_create_batch(logs)
            case _:
                assert_never(msg)

    # -- getOrCreateLog

    async def _get_or_create_batch(self, logs: tuple[GetOrCreateLog, ...]) -> LogsCreated:
        """Every log of one LeaderAndIsr; the event loop gets a turn every
        ``_LOGS_PER_CHECKPOINT`` logs (a yield only, so the virtual clock does not move
        and deterministic runs stay identical). Each log's outcome is built once, from
        the request's own names (no ``LogCreated`` in between: a bulk creation's broker
        answers for 3,000 logs)."""
        results: list[LogOutcome] = []
        append = results.append
        for i, request in enumerate(logs):
            if i and i % _LOGS_PER_CHECKPOINT == 0:
                await anyio.lowlevel.checkpoint()
            topic, partition = request.topic, request.partition
            try:
                log_dir, _, start, end, high_watermark = self._get_or_create_offsets(
                    TopicPartition(topic, partition),
                    is_new=request.is_new,
                    leader_epoch=request.leader_epoch,
                )
            except KafkaApiError as exc:
                append(LogOutcome(topic=topic, partition=partition, error_code=exc.code))
            else:
                append(
                    LogOutcome(
                        topic=topic,
                        partition=partition,
                        log_dir=log_dir.name,
                        log_start_offset=start,
                        log_end_offset=end,
                        high_watermark=high_watermark,
                    )
                )
        return LogsCreated(results=tuple(results))

    def _get_or_create(
        self, tp: TopicPartition, *, is_new: bool, leader_epoch: int | None = None
    ) -> LogCreated:
        """``LogManager.getOrCreateLog`` for one partition (``_get_or_create_offsets``)."""
        log_dir, created, start, end, high_watermark = self._get_or_create_offsets(
            tp, is_new=is_new, leader_epoch=leader_epoch
        )
        return LogCreated(
            topic=tp.topic,
            partition=tp.partition,
            log_dir=log_dir.name,
            created=created,
            log_start_offset=start,
            log_end_offset=end,
            high_watermark=high_watermark,
        )

    def _get_or_create_offsets(
        self, tp: TopicPartition, *, is_new: bool, leader_epoch: int | None
    ) -> tuple[_LogDir, bool, int, int, int]:
        """``LogManager.getOrCreateLog``, then, for a new leader, its epoch started at the
        log end (``Partition.makeLeader``): the log's dir, whether it was created now, its
        start and end offsets and high watermark. A log created just now is empty: its
        epoch goes straight into the checkpoint file it is created with, nothing is
        opened."""
        log_dir = self._logs.get(tp)
        if log_dir is None:
            return self._create_new(tp, is_new=is_new, leader_epoch=leader_epoch), True, 0, 0, 0
        if log_dir.offline:
            raise _storage_error(f"Log for partition {tp} is in offline log dir {log_dir.path}")
        if tp in self._fresh:
            if leader_epoch is not None and self._fresh[tp] != leader_epoch:
                self._write_fresh_epoch(tp, log_dir, leader_epoch)
            return log_dir, False, 0, 0, 0
        log = self._log(tp)
        if leader_epoch is not None:
            self._guard(
                tp,
                log,
                lambda: log.maybe_assign_epoch_start_offset(leader_epoch, log.log_end_offset),
            )
        start, end = log.log_start_offset, log.log_end_offset
        checkpointed = log_dir.hw_rows.get(tp) or 0
        return log_dir, False, start, end, min(max(checkpointed, start), end)

    def _create_new(self, tp: TopicPartition, *, is_new: bool, leader_epoch: int | None) -> _LogDir:
        """A new log for ``tp`` (hosted nowhere) in the online dir with the fewest logs."""
        if not is_new and self._offline:
            raise _storage_error(
                f"Can not create log for {tp} because log directories "
                f"{', '.join(map(str, self.offline_dirs))} are offline"
            )
        online = self._online
        tried = (
            online
            if len(online) == 1
            else next_log_dirs(online, {d: len(self._dirs[d].rows) for d in online})
        )
        name = str(tp)
        for candidate in tried:
            log_dir = self._dirs[candidate]
            path = log_dir.prefix + name
            try:
                self.disk.mkdir(path)
            except OSError as exc:
                self._trace_op("create", path, log_dir=candidate, tp=tp, error=exc, step="mkdir")
                self._mark_offline(
                    candidate, f"Error while creating log for {name} in dir {candidate}", exc
                )
                continue
            self._create_log(tp, log_dir, path, leader_epoch)
            return log_dir
        raise _storage_error(
            f"No log directories available. Tried {', '.join(map(str, tried)) or 'none'}"
        )

    def _create_log(
        self, tp: TopicPartition, log_dir: _LogDir, path: str, leader_epoch: int | None
    ) -> None:
        files = self._new_log_files
        if leader_epoch is not None:  # the empty log's epoch cache: (epoch, 0)
            files = self._new_leader_log_files(leader_epoch)
        try:
            self.disk.write_files(path, files)
        except OSError as exc:
            self._trace_op("create", path, log_dir=log_dir.path, tp=tp, error=exc, step="files")
            message = f"Error while creating log for {tp} in dir {log_dir.path}"
            self._mark_offline(log_dir.path, message, exc)
            raise _storage_error(message) from exc
        self._add_log(tp, log_dir)
        self._fresh[tp] = leader_epoch
        tracer = self.node.tracer
        if tracer.enabled:
            self._trace_op("create", path, log_dir=log_dir.path, tp=tp)
        else:  # numbered all the same, without the fields (a bulk creation makes 300,000)
            tracer.skip()
        self._checkpoint_soon(log_dir)

    def _new_leader_log_files(self, epoch: int) -> tuple[tuple[str, bytes], ...]:
        """A new leader's log files: its checkpoint holds ``(epoch, 0)``. Kept for the
        first ``_KEPT_LEADER_FILES`` epochs met (a bulk creation makes its leaders' logs
        with one or a few epochs: 1,000 leaders on a broker, one set of files)."""
        files = self._leader_log_files.get(epoch)
        if files is None:
            checkpoint = format_epoch_checkpoint([(epoch, 0)])
            files = (*self._new_log_files[:-1], (LEADER_EPOCH_CHECKPOINT, checkpoint))
            if len(self._leader_log_files) < _KEPT_LEADER_FILES:
                self._leader_log_files[epoch] = files
        return files

    def _write_fresh_epoch(self, tp: TopicPartition, log_dir: _LogDir, epoch: int) -> None:
        """A new leader epoch of a fresh empty log: its checkpoint is ``(epoch, 0)`` alone,
        as ``LeaderEpochFileCache.assign(epoch, 0)`` leaves it (the bytes a new leader's
        log is created with, formatted once per epoch: a controller failover moves
        thousands of leaderships of a broker's fresh logs to one or a few epochs)."""
        _, checkpoint = self._new_leader_log_files(epoch)[-1]
        try:  # the path as a string: pathlib's joins cost more than the write
            self.disk.write_file(
                f"{log_dir.prefix}{tp}{os.sep}{LEADER_EPOCH_CHECKPOINT}", checkpoint
            )
        except OSError as exc:
            message = (
                f"Error while writing the leader epoch checkpoint of {tp} in dir {log_dir.path}"
            )
            self._mark_offline(log_dir.path, message, exc)
            raise _storage_error(message) from exc
        self._fresh[tp] = epoch

    # -- open partition logs

    def _log(self, tp: TopicPartition) -> Log:
        """``tp``'s open log, opened (and recovered after an unclean shutdown) if it is
        not; the least recently used log is closed beyond ``max_open_logs``.
        UNKNOWN_TOPIC_OR_PARTITION if it is not hosted, KAFKA_STORAGE_ERROR if its dir is
        offline or fails now."""
        log = self._open.get(tp)
        if log is not None:
            self._open.move_to_end(tp)
            return log
        home = self._logs.get(tp)
        if home is None:
            raise KafkaApiError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No log for {tp} on this broker"
            )
        log_dir = home.path
        if home.offline:
            raise _storage_error(f"Log for partition {tp} is in offline log dir {log_dir}")
        clean = self._clean.get(log_dir, True) or tp in self._closed_clean
        fresh = tp in self._fresh
        fresh_epoch = self._fresh.pop(tp, None)
        try:
            log = Log(
                log_dir / str(tp),
                self._topic_configs.get(tp.topic, self.log_config),
                files=self._files,
                now_ms=self.clock.wall_ms,
                recovery_point=home.rows.get(tp) or 0,
                log_start_offset=home.start_offsets.get(tp, 0),
                had_clean_shutdown=clean,
            )
        except OSError as exc:
            self._trace_op("load", log_dir / str(tp), log_dir=log_dir, tp=tp, error=exc)
            message = f"Error while loading log dir {log_dir}"
            self._mark_offline(log_dir, message, exc)
            raise _storage_error(message) from exc
        if not clean:
            self._trace_op(
                "recover",
                log_dir / str(tp),
                log_dir=log_dir,
                tp=tp,
                segments=list(log.recovered_segments),
                log_end_offset=log.log_end_offset,
            )
        self._open[tp] = log
        if fresh_epoch is not None:  # loading an empty log cut its (epoch, 0): put it back
            self._guard(tp, log, lambda: log.maybe_assign_epoch_start_offset(fresh_epoch, 0))
        if tp not in self._producers and not fresh:
            self._producers[tp] = self._load_producers(tp, log)
        self._producers.setdefault(tp, ProducerStateManager())
        self._note_offsets(tp, home, log)
        while len(self._open) > self.max_open_logs:
            self._close_log(next(iter(self._open)))
        return log

    def _load_producers(self, tp: TopicPartition, log: Log) -> ProducerStateManager:
        """The producers' state read again from every batch of ``log`` (Kafka loads
        its latest snapshot and replays the batches after it)."""
        producers = ProducerStateManager()
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            data = self._guard(tp, log, lambda: log.read(offset, 1 << 20)).records  # noqa: B023
            headers = list(batch_headers(data))
            if not headers:
                break
            for header in headers:
                producers.update(header, header.base_offset, header.max_timestamp)
            offset = headers[-1].last_offset + 1
        return producers

    def _close_log(self, tp: TopicPartition) -> None:
        self._abort_cleaning(tp)
        log = self._open.pop(tp)
        log.close()
        self._closed_clean.add(tp)
        log_dir = self._logs.get(tp)
        if log_dir is not None:
            self._note_offsets(tp, log_dir, log)

    def _note_offsets(self, tp: TopicPartition, log_dir: _LogDir, log: Log) -> None:
        """Take ``log``'s recovery point and log start into its dir's checkpoint rows
        (written at the next checkpoint)."""
        rows = log_dir.rows
        starts = log_dir.start_offsets
        first_base = log.segments[0].base_offset
        changed = rows.get(tp) != log.recovery_point
        rows.set(tp, log.recovery_point)
        if log.log_start_offset > first_base:
            changed |= starts.get(tp) != log.log_start_offset
            starts[tp] = log.log_start_offset
        elif starts.pop(tp, None) is not None:
            changed = True
        if changed:
            self._checkpoint_soon(log_dir)

    def _set_high_watermark(self, tp: TopicPartition, high_watermark: int) -> None:
        log_dir = self._logs.get(tp)
        if log_dir is None or log_dir.offline:
            return
        rows = log_dir.hw_rows
        if rows.get(tp) != high_watermark:
            rows.set(tp, high_watermark)
            self._checkpoint_soon(log_dir)

    def _guard(self, tp: TopicPartition, log: Log, operation: Callable[[], _T]) -> _T:
        """Run ``operation`` on ``tp``'s open ``log``: an ``OSError`` takes its log dir
        offline (Kafka's ``LogDirFailureChannel``) and is KAFKA_STORAGE_ERROR."""
        try:
            result = operation()
        except OSError as exc:
            log_dir = self._logs[tp].path
            self._trace_op("io_error", log.directory, log_dir=log_dir, tp=tp, error=exc)
            message = f"Error while operating on the log of {tp} in dir {log_dir}"
            self._mark_offline(log_dir, message, exc)
            raise _storage_error(message) from exc
        self._note_offsets(tp, self._logs[tp], log)
        return result

    def _reconfigure_defaults(self, msg: LogDefaultsChanged) -> LogsConfigured:
        """``LogManager.reconfigureDefaultLogConfig`` and ``DynamicLogConfig.
        updateLogsConfig``: the broker's new defaults of the topic log configs, for every
        log (each topic's overrides applied again over them) and the broker's new
        ``log.segment.delete.delay.ms`` for deletions queued from now on."""
        self.log_config = log_config(dict(msg.configs), self.log_config)
        self._log_delete_delay = msg.segment_delete_delay_ms / 1000
        for topic, overrides in list(self._topic_overrides.items()):
            self._configure(topic, overrides)
        for tp, log in self._open.items():
            if tp.topic not in self._topic_overrides:
                log.config = self.log_config
        return LogsConfigured(topic=TopicName(""))

    def _configure(self, topic: TopicName, configs: Mapping[str, str]) -> LogsConfigured:
        """A topic's log configs, for its logs opened from now on and those open now."""
        self._topic_overrides[topic] = dict(configs)
        config = log_config(configs, self.log_config)
        if config.roll_jitter_ms > 0:  # Kafka draws each log's jitter; here each topic's
            config = dataclasses.replace(
                config, roll_jitter_ms=self.rng.randrange(config.roll_jitter_ms)
            )
        self._topic_configs[topic] = config
        for tp, log in self._open.items():
            if tp.topic == topic:
                log.config = config
        return LogsConfigured(topic=topic)

    # -- records (ReplicaManager.appendToLocalLog, readFromLocalLog and the offset lookups)

    def _append(self, request: AppendRecords) -> AppendOutcome:
        """One partition's append (``Log.append``): a leader's records validated, then
        checked against its producers (a duplicate answers the original offsets and
        writes nothing)."""
        tp = TopicPartition(request.topic, request.partition)
        try:
            log = self._log(tp)
            producers = self._producers[tp]
            headers = _producer_batches(request.records)
            epoch = request.leader_epoch
            if epoch is None:
                info = self._guard(tp, log, lambda: log.append_as_follower(request.records))
            else:
                info = self._guard(
                    tp, log, lambda: log.append_as_leader(request.records, epoch, producers)
                )
        except KafkaApiError as exc:
            return AppendOutcome(
                topic=tp.topic,
                partition=tp.partition,
                error_code=exc.code,
                error_message=exc.detail,
                record_errors=exc.record_errors if isinstance(exc, RecordValidationError) else (),
            )
        if info is None:  # a follower's fetch with no whole batch
            return _appended(tp, log)
        if headers and not info.duplicate:  # a duplicate wrote nothing
            first = info.first_offset
            for header in _all_batches(request.records):
                if header.has_producer_id:
                    # The batch's max timestamp as written (ProducerAppendInfo.append): a
                    # leader's one batch has the validated append's.
                    stamp = info.max_timestamp if epoch is not None else header.max_timestamp
                    producers.update(
                        header, first if epoch is not None else header.base_offset, stamp
                    )
                first += header.last_offset_delta + 1
        return _appended(tp, log, info.first_offset, info.last_offset, info.log_append_time)

    def _read(self, request: ReadFromLogs) -> LogsRead:
        """``ReplicaManager.readFromLocalLog``: partitions in order, ``max_bytes`` in all;
        the first batch found may pass the limits when ``min_one_message``."""
        remaining = request.max_bytes
        min_one = request.min_one_message
        results = []
        for read in request.reads:
            tp = TopicPartition(read.topic, read.partition)
            limit = max(0, min(read.max_bytes, remaining))
            if tp in self._fresh:
                results.append(_fresh_read(tp, read.offset))
                continue
            try:
                log = self._log(tp)
                start, end = log.log_start_offset, log.log_end_offset
                got = self._guard(
                    tp,
                    log,
                    lambda: log.read(  # noqa: B023 (called at once)
                        read.offset,  # noqa: B023
                        limit,  # noqa: B023
                        read.max_offset,  # noqa: B023
                        min_one_message=min_one,  # noqa: B023
                    ),
                )
            except KafkaApiError as exc:
                results.append(
                    ReadOutcome(
                        topic=tp.topic,
                        partition=tp.partition,
                        error_code=exc.code,
                        error_message=exc.detail,
                    )
                )
                continue
            if got.records:
                min_one = False
                remaining -= len(got.records)
            results.append(
                ReadOutcome(
                    topic=tp.topic,
                    partition=tp.partition,
                    records=got.records,
                    log_start_offset=start,
                    log_end_offset=end,
                )
            )
        return LogsRead(results=tuple(results))

    def _lookup(self, query: OffsetQuery) -> OffsetFound:
        tp = TopicPartition(query.topic, query.partition)
        if tp in self._fresh and not isinstance(query, OffsetsBeforeQuery):
            return _fresh_lookup(tp, query, self._fresh[tp])
        try:
            log = self._log(tp)
            match query:
                case OffsetsBeforeQuery(timestamp=timestamp, max_num_offsets=most):
                    if most < 0:  # Kafka's NegativeArraySizeException, answered as unknown
                        return OffsetFound(
                            topic=tp.topic,
                            partition=tp.partition,
                            error_code=ErrorCode.UNKNOWN_SERVER_ERROR,
                        )
                    return OffsetFound(
                        topic=tp.topic,
                        partition=tp.partition,
                        offsets=tuple(log.legacy_offsets_before(timestamp, most)),
                    )
                case EpochEndOffsetQuery(leader_epoch=epoch):
                    entry = log.end_offset_for_epoch(epoch)
                    return OffsetFound(
                        topic=tp.topic,
                        partition=tp.partition,
                        leader_epoch=entry[0],
                        offset=entry[1],
                    )
                case OffsetTimestampQuery(timestamp=timestamp):
                    found = self._guard(tp, log, lambda: log.fetch_offset_by_timestamp(timestamp))
                    if found is None:
                        return OffsetFound(topic=tp.topic, partition=tp.partition)
                    return OffsetFound(
                        topic=tp.topic,
                        partition=tp.partition,
                        timestamp=found.timestamp,
                        offset=found.offset,
                        leader_epoch=found.leader_epoch,
                    )
                case _:
                    assert_never(query)
        except KafkaApiError as exc:
            return OffsetFound(topic=tp.topic, partition=tp.partition, error_code=exc.code)

    def _query(self, tp: TopicPartition) -> LogQueried:
        """``QueryLog``: a fresh empty log answers without being opened."""
        if tp in self._fresh:
            return LogQueried(
                topic=tp.topic,
                partition=tp.partition,
                log_start_offset=0,
                log_end_offset=0,
                latest_epoch=self._fresh[tp],
            )
        log = self._log(tp)
        return LogQueried(
            topic=tp.topic,
            partition=tp.partition,
            log_start_offset=log.log_start_offset,
            log_end_offset=log.log_end_offset,
            latest_epoch=log.leader_epoch_cache.latest_epoch,
        )

    def _truncate(self, request: TruncateLog) -> LogOffsets:
        tp = TopicPartition(request.topic, request.partition)
        if tp in self._fresh and self._fresh[tp] is None and request.offset == 0:
            # Nothing to cut in an empty log without epochs (Log.truncateTo changes nothing).
            self._trace_op(
                "truncate",
                self._logs[tp].path / str(tp),
                log_dir=self._logs[tp].path,
                tp=tp,
                offset=request.offset,
                fully=request.fully,
            )
            return LogOffsets(
                topic=tp.topic, partition=tp.partition, log_start_offset=0, log_end_offset=0
            )
        log = self._log(tp)
        self._abort_cleaning(tp)
        if request.fully:
            self._guard(tp, log, lambda: log.truncate_fully_and_start_at(request.offset))
        else:
            self._guard(tp, log, lambda: log.truncate_to(request.offset))
        self._producers[tp] = self._load_producers(tp, log)  # Log.truncateTo reloads it
        home = self._logs[tp]
        point = home.clean_points.get(tp)
        if point is not None and point > request.offset:
            # LogCleanerManager.maybeTruncateCheckpoint
            home.clean_points[tp] = request.offset
            self._write_clean_points(home.path)
        self._trace_op(
            "truncate",
            log.directory,
            log_dir=self._logs[tp].path,
            tp=tp,
            offset=request.offset,
            fully=request.fully,
        )
        return self._offsets_of(tp, log)

    def _advance_log_start(self, request: AdvanceLogStart) -> LogOffsets:
        tp = TopicPartition(request.topic, request.partition)
        if tp in self._fresh and request.offset <= 0:
            return LogOffsets(
                topic=tp.topic, partition=tp.partition, log_start_offset=0, log_end_offset=0
            )
        log = self._log(tp)
        self._abort_cleaning(tp)
        self._guard(
            tp,
            log,
            lambda: log.maybe_increment_log_start_offset(request.offset, request.high_watermark),
        )
        return self._offsets_of(tp, log)

    @staticmethod
    def _offsets_of(tp: TopicPartition, log: Log) -> LogOffsets:
        return LogOffsets(
            topic=tp.topic,
            partition=tp.partition,
            log_start_offset=log.log_start_offset,
            log_end_offset=log.log_end_offset,
        )

    # -- asyncDelete

    def _delete(self, tp: TopicPartition) -> LogDeleted:
        renamed = self._rename_for_deletion(tp)
        if renamed is None:
            return LogDeleted(topic=tp.topic, partition=tp.partition)
        log_dir, name, cleaned, files = renamed
        if cleaned:
            self._write_clean_points(log_dir.path)
        self._queue_renamed({log_dir: [(tp, name, files)]})
        return LogDeleted(
            topic=tp.topic, partition=tp.partition, log_dir=log_dir.name, renamed_to=name
        )

    async def _delete_batch(self, logs: tuple[DeleteLog, ...]) -> LogsDeleted:
        """Kafka's ``asyncDelete`` of a set: every log renamed (a failure is that log's
        error), then each log dir touched checkpointed once (its cleaner checkpoint first,
        when a renamed log had a clean point) and its renamed logs queued, instead of a
        checkpoint rewrite per log. The event loop gets a turn every
        ``_LOGS_PER_CHECKPOINT`` logs, as in ``_get_or_create_batch``."""
        results: list[LogDeleteOutcome] = []
        append = results.append
        renamed: dict[_LogDir, list[_Renamed]] = {}
        cleaned: dict[_LogDir, None] = {}  # the dirs whose clean points lost a log
        for i, request in enumerate(logs):
            if i and i % _LOGS_PER_CHECKPOINT == 0:
                await anyio.lowlevel.checkpoint()
            topic, partition = request.topic, request.partition
            tp = TopicPartition(topic, partition)
            try:
                done = self._rename_for_deletion(tp)
            except KafkaApiError as exc:
                append(LogDeleteOutcome(topic=topic, partition=partition, error_code=exc.code))
                continue
            if done is None:
                append(LogDeleteOutcome(topic=topic, partition=partition))
                continue
            log_dir, name, dropped, files = done
            in_dir = renamed.get(log_dir)
            if in_dir is None:
                in_dir = renamed[log_dir] = []
            in_dir.append((tp, name, files))
            if dropped:
                cleaned[log_dir] = None
            append(
                LogDeleteOutcome(
                    topic=topic, partition=partition, log_dir=log_dir.name, renamed_to=name
                )
            )
        for log_dir in cleaned:  # LogCleanerManager.updateCheckpoints, once per dir
            self._write_clean_points(log_dir.path)
        self._queue_renamed(renamed)
        return LogsDeleted(results=tuple(results))

    def _rename_for_deletion(
        self, tp: TopicPartition
    ) -> tuple[_LogDir, str, bool, tuple[str, ...] | None] | None:
        """The first half of ``asyncDelete``: the log forgotten and its directory renamed
        ``<topic>-<p>.<uuid>-delete``; where, its new name and whether it had a clean
        point (its dir's cleaner checkpoint is the caller's to rewrite), or None when no
        log is hosted. A rename that fails takes its log dir offline and raises
        KAFKA_STORAGE_ERROR."""
        log_dir = self._logs.get(tp)
        if log_dir is None:
            if self._offline:
                raise _storage_error(
                    f"Failed to delete log for {tp} because it may be in one of the offline "
                    f"directories {', '.join(map(str, self.offline_dirs))}"
                )
            return None
        if log_dir.offline:
            raise _storage_error(f"Log for partition {tp} is in offline log dir {log_dir.path}")
        # (Each container looked at only when it holds something: a bulk deletion's logs
        # were never opened, and a lookup hashes the partition.)
        if self._open and tp in self._open:  # Log.renameDir keeps it open; here it is closed
            self._abort_cleaning(tp)
            self._open.pop(tp).close()
        if self._producers:
            self._producers.pop(tp, None)
        # A log made and never opened holds the files it was made with, and no other.
        files = None if self._fresh.pop(tp, _NOT_FRESH) is _NOT_FRESH else _FRESH_LOG_FILES
        # A topic is deleted whole: a new topic of the same name brings its own configs.
        if self._topic_configs:
            self._topic_configs.pop(tp.topic, None)
        if self._topic_overrides:
            self._topic_overrides.pop(tp.topic, None)
        if self._closed_clean:
            self._closed_clean.discard(tp)
        # A random UUID, as Kafka's: from the node's identity source, so that a broker run again on
        # the same log dirs (after a crash) does not draw the names its last run left behind.
        unique_id = _uuid4_hex(self._unique_id())
        name = delete_dir_name(tp, unique_id)
        # Plain strings: a bulk deletion renames thousands of logs (see Disk.rename).
        parent = log_dir.prefix
        src = parent + str(tp)
        try:
            self.disk.rename(src, parent + name)
        except OSError as exc:
            self._trace_op("rename", src, log_dir=log_dir.path, tp=tp, error=exc, to=name)
            message = f"Error while renaming dir for {tp} in log dir {log_dir.path}"
            self._mark_offline(log_dir.path, message, exc)
            raise _storage_error(message) from exc
        cleaned = self._remove_log(tp, log_dir)
        tracer = self.node.tracer
        if tracer.enabled:
            self._trace_op("rename", src, log_dir=log_dir.path, tp=tp, to=name)
        else:  # numbered all the same, without the fields (a bulk deletion renames 30,000)
            tracer.skip()
        return log_dir, name, cleaned, files

    def _unique_id(self) -> int:
        """128 random bits for a renamed log's id, from the node's identity source. The OS
        source (a run that is not deterministic) is read ``_IDS_DRAWN`` ids at a time: one
        read a log made the reads a tenth of a bulk deletion's renaming. A seeded source
        is drawn from once a log, as before, so that a deterministic run's names stay."""
        ids = self.node.ids
        if type(ids) is not random.SystemRandom:
            return ids.getrandbits(128)
        if not self._drawn_ids:
            raw = ids.getrandbits(128 * _IDS_DRAWN).to_bytes(16 * _IDS_DRAWN, "little")
            self._drawn_ids = [
                int.from_bytes(raw[i : i + 16], "little") for i in range(0, len(raw), 16)
            ]
        return self._drawn_ids.pop()

    def _queue_renamed(self, by_dir: dict[_LogDir, list[_Renamed]]) -> None:
        """The second half of ``asyncDelete``: the checkpoints of each log dir of
        ``by_dir`` (in the order of its first renamed log) rewritten once, then its
        renamed logs (``_Renamed``) queued for removal (a dir that
        went offline keeps its renamed logs, as at start-up)."""
        if not by_dir:
            return
        due, delay = self._deletion_due(self.clock.now())
        queue = self._pending.append
        for log_dir, logs in by_dir.items():
            path = log_dir.path
            self._dirty.discard(log_dir)  # rewritten right now
            if log_dir.offline or not self._checkpoint(path):
                continue
            prefix = log_dir.prefix
            for tp, name, files in logs:
                queue(_PendingDelete(tp, path, name, prefix + name, due, delay, files=files))
        self._schedule_sweep()

    def _deletion_due(self, now: float) -> tuple[float, float]:
        """When a log renamed at ``now`` is due for removal, and the delay: the broker's
        ``log.segment.delete.delay.ms`` from ``now`` whatever its topic's
        ``file.delete.delay.ms`` (``LogManager.deleteLogs`` reads
        ``currentDefaultConfig``, not the log's config), never before the initial task
        delay from start-up."""
        delay = self._log_delete_delay
        return max(now + delay, self._started_at + self.initial_task_delay), delay

    def _enqueue(
        self, tp: TopicPartition, log_dir: _LogDir, name: str, now: float
    ) -> _PendingDelete:
        """Queue a renamed log, due as ``_deletion_due`` says."""
        due, delay = self._deletion_due(now)
        entry = _PendingDelete(tp, log_dir.path, name, log_dir.prefix + name, due, delay)
        self._pending.append(entry)
        return entry

    # -- the delayed removal (Kafka's kafka-delete-logs task)

    async def _sweep(self, timer: int) -> None:
        """Remove the renamed logs that are due; the event loop gets a turn every
        ``_REMOVALS_PER_CHECKPOINT`` removals (a yield only, as in
        ``_get_or_create_batch``): removing the 30,000 logs of a bulk deletion takes
        seconds, which Kafka spends on its own kafka-delete-logs thread."""
        self._timers.pop(timer, None)
        now = self.clock.now()
        waiting: deque[_PendingDelete] = deque()
        failed: list[_PendingDelete] = []
        removed = 0
        for entry in self._pending:
            if entry.due > now + _TIME_SLACK:
                waiting.append(entry)
                continue
            removed += 1
            if removed % _REMOVALS_PER_CHECKPOINT == 0:
                await anyio.lowlevel.checkpoint()
            try:
                self.disk.rmtree(entry.path, entry.files)
            except FileNotFoundError as exc:  # removed behind our back: nothing left to do
                self._trace_op("remove", entry.path, log_dir=entry.log_dir, tp=entry.tp, error=exc)
            except OSError as exc:
                entry.attempts += 1
                entry.due = now + max(entry.delay, self.delete_retry_backoff)
                failed.append(entry)
                self._trace_op(
                    "remove",
                    entry.path,
                    log_dir=entry.log_dir,
                    tp=entry.tp,
                    error=exc,
                    attempts=entry.attempts,
                    retry_at=entry.due,
                )
            else:
                tracer = self.node.tracer
                if tracer.enabled:
                    self._trace_op("remove", entry.path, log_dir=entry.log_dir, tp=entry.tp)
                else:  # numbered all the same, without the fields (30,000 in a bulk deletion)
                    tracer.skip()
        waiting.extend(failed)
        self._pending = waiting
        self._schedule_sweep()

    def _schedule_sweep(self) -> None:
        """Arm a timer for the earliest deadline, unless one at or before it is armed."""
        if not self._pending:
            return
        due = min(entry.due for entry in self._pending)
        if any(at <= due + _TIME_SLACK for at in self._timers.values()):
            return
        timer = next(self._timer_ids)
        self._timers[timer] = due
        self.start_soon(self._alarm, timer, due - self.clock.now())

    async def _alarm(self, timer: int, delay: float) -> None:
        """A one-shot timer task: only feeds the actor's mailbox."""
        await self.clock.sleep(delay)
        self.send_self(LogDeletionSweep(timer=timer))

    # -- retention (LogManager.cleanupLogs, the kafka-log-retention task)

    async def _retention_timer(self) -> None:
        """The retention timer, a helper task: only feeds the actor's mailbox, first
        ``initial_task_delay`` after start-up, then every ``retention_check_interval``."""
        await self.clock.sleep(self.initial_task_delay)
        while True:
            self.send_self(CleanupLogs())
            await self.clock.sleep(self.retention_check_interval)

    def _cleanup_logs(self) -> None:
        """``LogManager.cleanupLogs``: remove the segment files retention renamed that are
        due, then ``Log.deleteOldSegments`` on every open log whose topic does not compact,
        below the high watermark the broker last reported for it (none reported: nothing
        goes). Logs closed by the open-log budget are checked when open at a later check."""
        now = self.clock.now()
        waiting: deque[_DeletedSegments] = deque()
        for entry in self._deleted_segments:
            due, tp, log_dir, paths = entry
            home = self._logs.get(tp)
            if home is None or home.path != log_dir or home.offline:
                continue  # the log was deleted whole (its directory renamed) or is offline
            if due > now + _TIME_SLACK:
                waiting.append(entry)
                continue
            try:
                for path in paths:
                    self._files.delete(path)
            except OSError as exc:
                self._trace_op(
                    "delete_segments", paths[0].parent, log_dir=log_dir, tp=tp, error=exc
                )
                continue
            self._trace_op(
                "delete_segments",
                paths[0].parent,
                log_dir=log_dir,
                tp=tp,
                files=[p.name for p in paths],
            )
        self._deleted_segments = waiting
        # LogCleanerManager.pauseCleaningForNonCompactedPartitions: a compacted log's
        # retention is the cleaner's (between two cleans, _clean_compacted_logs), and a log
        # being cleaned (its policy changed since) is left to the next check.
        self._retain_logs(
            lambda tp, log: (
                not log.config.compact and (self._clean_round is None or tp != self._cleaning)
            ),
            now,
        )

    def _retain_logs(self, chosen: Callable[[TopicPartition, Log], bool], now: float) -> None:
        """``Log.deleteOldSegments`` on the ``chosen`` open logs of online dirs, below
        the high watermark the broker last reported for each (none reported: nothing
        goes); the listener is told the log starts that moved."""
        moved: list[LogStart] = []
        for tp, log in list(self._open.items()):
            home = self._logs.get(tp)
            if home is None or home.offline or not chosen(tp, log):
                continue
            high_watermark = home.hw_rows.get(tp)
            if high_watermark is not None and self._retain(tp, home.path, log, high_watermark, now):
                moved.append(
                    LogStart(
                        topic=tp.topic,
                        partition=tp.partition,
                        log_start_offset=log.log_start_offset,
                    )
                )
        if moved and self.failure_listener is not None:
            self.tell(self.failure_listener, LogStartsAdvanced(starts=tuple(moved)))

    def _retain(
        self, tp: TopicPartition, log_dir: Path, log: Log, high_watermark: int, now: float
    ) -> bool:
        """One log's retention, the renamed files queued for removal; whether its log
        start moved. Never a log whose clean is in progress (the callers skip it)."""
        start = log.log_start_offset
        try:
            renamed = self._guard(
                tp, log, lambda: log.delete_retention_breached_segments(high_watermark)
            )
        except KafkaApiError:
            return False  # the log or its dir is offline
        if not renamed:
            return False
        self._deleted_segments.append(
            (now + log.config.file_delete_delay_ms / 1000, tp, log_dir, tuple(renamed))
        )
        self._trace_op(
            "retention",
            log.directory,
            log_dir=log_dir,
            tp=tp,
            files=[p.name for p in renamed],
            log_start_offset=log.log_start_offset,
            previous_log_start_offset=start,
        )
        return log.log_start_offset > start

    # -- compaction (LogCleaner's CleanerThread, LogCleanerManager)

    async def _cleaner_timer(self) -> None:
        """The cleaner's timer, a helper task: only feeds the actor's mailbox, every
        ``cleaner_backoff`` (Kafka's cleaner thread backs off that long when it finds
        nothing to clean)."""
        assert self.cleaner_backoff is not None
        while True:
            await self.clock.sleep(self.cleaner_backoff)
            self.send_self(CleanCompactedLogs())

    def _step_cleaner(self, *, resume: bool) -> None:
        """Run the next step of the cleaner's round (a new round on the timer's message
        when none is in progress), then ask for the one after it behind the messages
        already waiting: a round holds the actor for one step at a time, not for the
        whole clean of a large log (Kafka's cleaner has its own thread)."""
        if self._clean_round is None:
            if resume:
                return  # the round was abandoned
            self._clean_round = self._clean_compacted_logs()
        elif not resume:
            return  # the timer fired during a round: the round goes on
        self._clean_running = True
        try:
            next(self._clean_round)
        except StopIteration:
            self._clean_round = None
            return
        except BaseException:  # a failed round ends; the next timer starts another
            self._clean_round = None
            raise
        finally:
            self._clean_running = False
        self.send_self(CleanCompactedLogs(resume=True))

    def _abort_cleaning(self, tp: TopicPartition) -> None:
        """``LogCleanerManager.abortCleaning``: ``tp``'s log is about to change other than
        by an append (truncated, its start moved, deleted, closed, its dir offline): a
        clean of it in progress is abandoned at once (its ``.cleaned`` files deleted; the
        groups already swapped in stay), before the caller changes the log. As
        ``CleanerThread.cleanLog`` lets the ``LogCleaningAbortedException`` go, the round
        goes on: its next step retains the compacted logs, then cleans the next one."""
        if self._cleaning != tp or self._clean_round is None or self._clean_running:
            return  # (running: the round's own step failed, and ends it)
        self._clean_running = True
        try:
            self._clean_round.throw(_CleaningAborted())
        except StopIteration:
            self._clean_round = None
        except BaseException:
            self._clean_round = None
            raise
        finally:
            self._clean_running = False
        home = self._logs.get(tp)
        if home is not None:
            self._trace_op("clean", home.path / str(tp), log_dir=home.path, tp=tp, result="aborted")

    def _end_clean_round(self) -> None:
        """Abandon the round in progress, if any: the clean it is in closed, its
        ``.cleaned`` files deleted (where that fails, the log's next open deletes them).
        At once, not whenever the garbage collector would close the round."""
        round_, self._clean_round = self._clean_round, None
        if round_ is not None:
            round_.close()  # the round's own ``finally`` closes the clean

    def _clean_compacted_logs(self) -> Generator[None, None, None]:
        """One round of the cleaner, in steps: the filthiest compacted open log (the
        largest dirty ratio above its ``min.cleanable.dirty.ratio``,
        ``grabFilthiestCompactedLog``) is cleaned (``cleaner.cleaning``, a step per
        ``CLEAN_STEP_BYTES`` read), its clean point checkpointed, the compacted logs'
        retention run (``_retain_compacted_logs``), then the next one, each log once a
        round. Logs closed by the open-log budget are cleaned when open at a later
        round. As ``CleanerThread.cleanFilthiestLog``: a clean cut short by an I/O error
        (its log dir goes offline) or abandoned from outside (``_abort_cleaning``) still
        counts as an attempt, retention follows and the round goes on; a log whose
        records cannot be cleaned is marked uncleanable and ends the round without
        retention (``LogCleaningException``: the thread backs off), so the other
        compacted logs are retained by the next round."""
        done: set[TopicPartition] = set()
        while True:
            now_ms = self.clock.wall_ms()
            candidates: list[tuple[TopicPartition, _LogDir, cleaner.LogToClean]] = []
            for tp, log in self._open.items():
                record = self._logs.get(tp)
                if (
                    record is None
                    or record.offline
                    or tp in done
                    or tp in self._uncleanable
                    or not log.config.compact
                    or log.failure is not None
                ):
                    continue
                candidate = cleaner.log_to_clean(log, record.clean_points.get(tp), now_ms)
                if candidate.force_checkpoint:
                    record.clean_points[tp] = candidate.first_dirty_offset
                candidates.append((tp, record, candidate))
            chosen = cleaner.filthiest_log([c for _, _, c in candidates])
            if chosen is None:
                self._retain_compacted_logs()
                return
            tp, record = next((t, r) for t, r, c in candidates if c is chosen)
            home = record.path
            done.add(tp)
            log = chosen.log
            steps = cleaner.cleaning(chosen, cleaner.CLEAN_STEP_BYTES)
            self._cleaning = tp
            offline = aborted = False
            try:
                while True:
                    try:
                        self._guard(tp, log, lambda: next(steps))  # noqa: B023
                    except StopIteration as finished:
                        result: cleaner.CleanResult = finished.value
                        break
                    yield
            except KafkaApiError:
                offline = True
            except _CleaningAborted:
                aborted = True
            except (KemuError, ValueError) as exc:
                # LogCleaner's cleanFilthiestLog: a log that cannot be cleaned (records
                # that do not decompress or parse) is marked uncleanable and left as it
                # is until the broker restarts; its .cleaned files were removed. The
                # LogCleaningException skips the attempt's deletableLogs, and
                # tryCleanFilthiestLog backs off: the round ends without retention, which
                # the next round runs (the uncleanable log's never).
                self._uncleanable.add(tp)
                self._trace_op("clean", log.directory, log_dir=home, tp=tp, error=exc)
                return
            finally:
                self._cleaning = None
                # abandoned: its .cleaned files deleted (else by the log's next open)
                with contextlib.suppress(OSError):
                    steps.close()
            if aborted:
                # CleanerThread.cleanLog lets a LogCleaningAbortedException go too; the
                # abort's caller changes the log before the round's next step.
                yield
            if offline or aborted:
                # The log's dir went offline (an I/O error), or the clean was abandoned:
                # CleanerThread.cleanLog lets it go, and the attempt counts as a clean:
                # the compacted logs of the dirs still online are retained, then the
                # round goes on.
                self._retain_compacted_logs()
                yield
                continue
            record.clean_points[tp] = result.end_offset
            if result.deleted_files:
                self._deleted_segments.append(
                    (
                        self.clock.now() + log.config.file_delete_delay_ms / 1000,
                        tp,
                        home,
                        tuple(result.deleted_files),
                    )
                )
            self._trace_op(
                "clean",
                log.directory,
                log_dir=home,
                tp=tp,
                first_dirty_offset=chosen.first_dirty_offset,
                end_offset=result.end_offset,
                dirty_ratio=round(chosen.cleanable_ratio, 4),
                segments=result.segments,
                records_read=result.records_read,
                records_retained=result.records_retained,
                bytes_read=result.bytes_read,
                bytes_written=result.bytes_written,
            )
            # A checkpoint that cannot be written takes its dir offline; as doneCleaning's
            # updateCheckpoints, the round goes on (the logs of that dir no longer take
            # part in it).
            self._write_clean_points(home)
            self._retain_compacted_logs()
            yield

    def _retain_compacted_logs(self) -> None:
        """The cleaner's retention of the compacted logs, after each clean and when there
        is none to do (``CleanerThread.cleanFilthiestLog``, ``LogCleanerManager.
        deletableLogs``): ``Log.deleteOldSegments`` on every open log whose policy holds
        ``compact``, but those marked uncleanable; never while one of them is being
        cleaned, so retention never removes segments under a clean."""
        self._retain_logs(
            lambda tp, log: log.config.compact and tp not in self._uncleanable,
            self.clock.now(),
        )

    def _write_clean_points(self, log_dir: Path) -> bool:
        """Rewrite ``log_dir``'s ``cleaner-offset-checkpoint``; whether it is online."""
        if log_dir in self._offline:
            return False
        try:
            self.disk.write_file(
                log_dir / CLEANER_OFFSET_CHECKPOINT,
                offsets_checkpoint(self._dirs[log_dir].clean_points.items()),
            )
        except OSError as exc:
            return self._checkpoint_failed(log_dir, exc)
        return True

    # -- log directory files

    def _checkpoint(self, log_dir: Path) -> bool:
        """Rewrite the offset checkpoints of ``log_dir``; say whether it is still online.

        The recovery points and log starts are the logs' (open logs noted after each
        change), the high watermarks what the broker reported (``RecordHighWatermarks``);
        Kafka lists a log in ``log-start-offset-checkpoint`` only once its start offset
        passed its first segment's base offset.
        """
        record = self._dirs[log_dir]
        for tp, log in self._open.items():
            if self._logs.get(tp) is record:
                self._note_offsets(tp, record, log)
        hosted = record.rows
        try:
            self.disk.write_file(log_dir / RECOVERY_POINT_CHECKPOINT, hosted.render())
            self.disk.write_file(log_dir / REPLICATION_OFFSET_CHECKPOINT, record.hw_rows.render())
            self.disk.write_file(
                log_dir / LOG_START_OFFSET_CHECKPOINT,
                offsets_checkpoint(record.start_offsets.items()),
            )
        except OSError as exc:
            return self._checkpoint_failed(log_dir, exc)
        self._trace_op("checkpoint", log_dir, log_dir=log_dir, logs=len(hosted))
        return True

    def _checkpoint_failed(self, log_dir: Path, exc: OSError) -> bool:
        """A checkpoint file of ``log_dir`` could not be written (``LogManager.
        checkpointLogRecoveryOffsetsInDir`` and ``LogCleanerManager.updateCheckpoints``
        hand the error to the ``LogDirFailureChannel``): traced, the dir offline. False,
        for the writers to return: the dir is not online."""
        self._trace_op("checkpoint", log_dir, log_dir=log_dir, error=exc)
        self._mark_offline(log_dir, f"Disk error while writing checkpoints in {log_dir}", exc)
        return False

    def _check_meta(self) -> None:
        """``check_meta_properties`` over the online dirs' ``meta.properties``; a dir whose
        file cannot be read goes offline, as any other disk error at start-up."""
        found: dict[Path, bytes] = {}
        for log_dir in self._online_dirs():
            try:
                data = self.disk.read_file(log_dir / META_PROPERTIES)
            except OSError as exc:
                self._trace_op("read_meta", log_dir, log_dir=log_dir, error=exc)
                self._mark_offline(
                    log_dir, f"Error while reading meta.properties in {log_dir}", exc
                )
                continue
            if data is not None:
                found[log_dir] = data
        check_meta_properties(found, broker_id=self.broker_id, cluster_id=self.cluster_id)

    def _write_meta(self, log_dir: Path) -> None:
        data = meta_properties(self.broker_id, self.cluster_id, self.clock.wall_ms())
        try:
            self.disk.write_file(log_dir / META_PROPERTIES, data)
        except OSError as exc:
            self._trace_op("write_meta", log_dir, log_dir=log_dir, error=exc)
            self._mark_offline(log_dir, f"Error while writing meta.properties in {log_dir}", exc)
            return
        self._trace_op("write_meta", log_dir, log_dir=log_dir)

    # -- offline log directories

    def _online_dirs(self) -> list[Path]:
        return list(self._online)

    def _log_counts(self) -> dict[Path, int]:
        return {path: len(record.rows) for path, record in self._dirs.items()}

    def _add_log(
        self,
        tp: TopicPartition,
        log_dir: _LogDir,
        *,
        recovery_point: int = 0,
        high_watermark: int = 0,
        log_start_offset: int = 0,
    ) -> None:
        self._logs[tp] = log_dir
        log_dir.rows.add(tp, recovery_point)
        log_dir.hw_rows.add(tp, high_watermark)
        if log_start_offset > 0:
            log_dir.start_offsets[tp] = log_start_offset

    def _remove_log(self, tp: TopicPartition, log_dir: _LogDir) -> bool:
        """Forget ``tp``'s log, hosted in ``log_dir``; whether it had a clean point (the
        dir's cleaner checkpoint is then the caller's to rewrite)."""
        del self._logs[tp]
        log_dir.rows.remove(tp)
        log_dir.hw_rows.remove(tp)
        if log_dir.start_offsets:
            log_dir.start_offsets.pop(tp, None)
        return bool(log_dir.clean_points) and log_dir.clean_points.pop(tp, None) is not None

    def _checkpoint_soon(self, log_dir: _LogDir) -> None:
        """A creation rewrites its dir's checkpoints on the checkpoint timer, as Kafka's
        scheduled checkpoint tasks do, together with every other creation until then (with
        no interval: right after the messages already waiting)."""
        self._dirty.add(log_dir)
        if self._flush_armed:
            return
        self._flush_armed = True
        if self.checkpoint_interval > 0:
            self.start_soon(self._checkpoint_alarm, self.checkpoint_interval)
        else:
            self.send_self(CheckpointFlush())

    async def _checkpoint_alarm(self, delay: float) -> None:
        """The checkpoint timer, a one-shot helper task: only feeds the actor's mailbox."""
        await self.clock.sleep(delay)
        self.send_self(CheckpointFlush())

    def _flush_checkpoints(self) -> None:
        self._flush_armed = False
        dirty, self._dirty = sorted(d.path for d in self._dirty), set()
        for log_dir in dirty:
            if log_dir not in self._offline:
                self._checkpoint(log_dir)

    def _mark_offline(self, log_dir: Path, reason: str, exc: OSError) -> None:
        """Kafka's LogDirFailureChannel: the directory is offline until restart."""
        if log_dir in self._offline:
            return
        detail = f"{reason}: {exc}"
        self._offline[log_dir] = detail
        record = self._dirs[log_dir]
        record.offline = True
        self._online.remove(log_dir)
        abandoned = [entry.name for entry in self._pending if entry.log_dir == log_dir]
        self._pending = deque(entry for entry in self._pending if entry.log_dir != log_dir)
        # LogManager.handleLogDirFailure: its logs leave the open ones, their files closed
        # unflushed, so that nothing more is read from or written to the failed dir.
        for tp in [tp for tp in self._open if self._logs.get(tp) is record]:
            self._abort_cleaning(tp)
            self._open.pop(tp).close_handlers()
        self._trace_op(
            "offline",
            log_dir,
            log_dir=log_dir,
            result=type(exc).__name__,
            detail=detail,
            logs=sum(1 for d in self._logs.values() if d is record),
            abandoned=abandoned,
        )
        if self.failure_listener is not None:
            self.tell(
                self.failure_listener,
                LogDirFailed(log_dir=str(log_dir), reason=detail, last=not self._online_dirs()),
            )
        if self._started and not self._halting and not self._online_dirs():
            self._halting = True
            self.send_self(
                LogDirsAllFailed(
                    reason="Shutdown broker because all log dirs in "
                    f"{', '.join(map(str, self.log_dirs))} have failed"
                )
            )

    # -- listings

    def _listing(self) -> LogListing:
        return LogListing(
            logs=tuple(
                HostedLog(
                    topic=tp.topic,
                    partition=tp.partition,
                    log_dir=log_dir.name,
                    online=not log_dir.offline,
                )
                for tp, log_dir in sorted(self._logs.items())
            ),
            pending_deletion=tuple(
                PendingLogDeletion(
                    topic=entry.tp.topic,
                    partition=entry.tp.partition,
                    log_dir=str(entry.log_dir),
                    name=entry.name,
                    due=entry.due,
                    attempts=entry.attempts,
                )
                for entry in self._pending
            ),
        )

    def _dir_status(self) -> LogDirStatus:
        counts = self._log_counts()
        return LogDirStatus(
            dirs=tuple(
                LogDirInfo(
                    log_dir=str(d),
                    online=d not in self._offline,
                    log_count=counts[d],
                    error=self._offline.get(d),
                )
                for d in self.log_dirs
            )
        )

    def _describe(self, partitions: tuple[TopicPartition, ...] | None) -> LogDirsDescribed:
        """``ReplicaManager.describeLogDirs``' view of the logs: each online dir with its
        topics and the size and end of each log asked about (opened if it is closed, as
        Kafka keeps every log open); a dir offline, or failing as a log is opened, is
        reported offline."""
        wanted = None if partitions is None else set(partitions)
        by_dir: dict[Path, list[TopicPartition]] = {d: [] for d in self.log_dirs}
        for tp, home in sorted(self._logs.items()):
            by_dir[home.path].append(tp)
        described = []
        for log_dir, hosted in by_dir.items():
            logs = self._described_logs([tp for tp in hosted if wanted is None or tp in wanted])
            if logs is None or log_dir in self._offline:
                described.append(DescribedLogDir(log_dir=str(log_dir), online=False))
            else:
                topics = tuple(sorted({TopicName(tp.topic) for tp in hosted}))
                described.append(
                    DescribedLogDir(log_dir=str(log_dir), online=True, topics=topics, logs=logs)
                )
        return LogDirsDescribed(dirs=tuple(described))

    def _described_logs(self, tps: list[TopicPartition]) -> tuple[DescribedLog, ...] | None:
        """The size and end of each of ``tps`` (logs of one dir); None when the dir is
        offline (a log's open fails with KAFKA_STORAGE_ERROR)."""
        logs = []
        for tp in tps:
            try:
                log = self._log(tp)
            except KafkaApiError:
                return None
            logs.append(
                DescribedLog(
                    topic=TopicName(tp.topic),
                    partition=tp.partition,
                    size=sum(segment.size for segment in log.segments),
                    log_end_offset=log.log_end_offset,
                )
            )
        return tuple(logs)

    # -- tracing

    def _trace_op(
        self,
        op: str,
        path: Path | str,
        *,
        log_dir: Path,
        tp: TopicPartition | None = None,
        error: BaseException | None = None,
        result: str | None = None,
        **fields: Any,
    ) -> None:
        """One ``log_dir`` trace event for one directory operation."""
        if not self.tracer.enabled:  # numbered all the same, without building its fields
            self.trace(TraceKind.LOG_DIR, op)
            return
        where: dict[str, Any] = {"dir": str(path), "log_dir": self._dirs[log_dir].name}
        if tp is not None:
            where.update(topic=tp.topic, partition=tp.partition)
        if result is None:
            result = "ok" if error is None else type(error).__name__
        if error is not None:
            fields["detail"] = str(error)
        self.trace(TraceKind.LOG_DIR, op, **where, result=result, **fields)
