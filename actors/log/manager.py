"""The log manager: a broker's partition logs as real directories on disk.

What Kafka 2.7's ``LogManager`` does with directories, minus the records:

* **Layout.** Each configured log directory (``log.dirs``) holds ``meta.properties``
  (written at start-up, as ``KafkaServer`` does), the ``recovery-point-offset-checkpoint``,
  ``replication-offset-checkpoint`` and ``log-start-offset-checkpoint`` files (version line
  ``0``, a count line, then ``topic partition offset`` lines), and one ``<topic>-<partition>/``
  directory per hosted log with an empty first segment (``00000000000000000000.log``,
  ``.index``, ``.timeindex``) and a ``leader-epoch-checkpoint``.
* **Checkpoints.** The offset checkpoints of a log directory are rewritten at once when a
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
* **Deletion** (``LogManager.asyncDelete``): the directory is renamed at once to
  ``<topic>-<partition>.<32 hex>-delete`` (the topic part cut so the name fits in 255
  characters), the log leaves the hosted set and its directory's checkpoints, and the
  renamed directory is queued. It is removed once ``file.delete.delay.ms`` has passed since
  the rename, and never before ``initial_task_delay`` (Kafka's ``InitialTaskDelayMs``, 30 s)
  after start-up. ``-delete`` directories found at start-up are queued again, with the
  delay counted from start-up. A failed rename takes the directory offline and answers
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

* Kafka waits ``file.delete.delay.ms`` of the *broker* default for every log and only looks
  at the head of its queue. Here the delay may be resolved per topic (a callable, or topic
  overrides plus the broker default), and every due entry is removed whatever its place.
  With no overrides the timing is Kafka's.
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
import itertools
import os
import re
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Any, Final, TypeAlias, assert_never

from actors.log.disk import Disk
from actors.runtime.actor import Actor, Context
from protocol.base import ActorRef, Message
from protocol.control import TopicPartition
from protocol.errors import ErrorCode, FatalNodeError, KafkaApiError
from protocol.ids import BrokerId, TopicName
from protocol.log import (
    CheckpointFlush,
    DeleteLog,
    GetLogDirStatus,
    GetOrCreateLog,
    GetOrCreateLogs,
    HostedLog,
    ListLogs,
    LogCreated,
    LogDeleted,
    LogDeletionSweep,
    LogDirFailed,
    LogDirInfo,
    LogDirsAllFailed,
    LogDirStatus,
    LogListing,
    LogOutcome,
    LogsCreated,
    PendingLogDeletion,
)
from protocol.trace import TraceKind

__all__ = [
    "DEFAULT_CHECKPOINT_INTERVAL",
    "DEFAULT_DELETE_RETRY_BACKOFF",
    "DEFAULT_FILE_DELETE_DELAY",
    "INITIAL_TASK_DELAY",
    "DeleteDelay",
    "LogDirKind",
    "LogManager",
    "checkpoint_file",
    "delete_delay_resolver",
    "delete_dir_name",
    "meta_properties",
    "next_log_dirs",
    "offsets_checkpoint",
    "parse_log_dir_name",
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

MAX_DIR_NAME: Final = 255
DELETE_SUFFIX: Final = "-delete"
FUTURE_SUFFIX: Final = "-future"
SEGMENT_FILES: Final = (
    "00000000000000000000.log",
    "00000000000000000000.index",
    "00000000000000000000.timeindex",
)
LEADER_EPOCH_CHECKPOINT: Final = "leader-epoch-checkpoint"
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

DeleteDelay: TypeAlias = Callable[[str], float]
"""Seconds between renaming a topic's log to ``-delete`` and removing it."""


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
    """One log dir's offset-checkpoint rows (``topic partition 0``, every log being empty):
    ``render`` is ``offsets_checkpoint`` of them. A new log's row is only noted (O(1): a
    burst of creations costs nothing until the next checkpoint); the sorted rows are built
    on the next render and then kept sorted as logs go, so that each deletion's rewrite
    does not sort every hosted log again."""

    __slots__ = ("_added", "_keys", "_rows")

    def __init__(self) -> None:
        self._keys: list[tuple[str, int]] = []  # sorted, with _rows alike
        self._rows: list[str] = []
        self._added: dict[tuple[str, int], None] = {}  # not yet in _keys

    def __len__(self) -> int:
        return len(self._rows) + len(self._added)

    def add(self, tp: TopicPartition) -> None:
        self._added[(tp.topic, tp.partition)] = None

    def remove(self, tp: TopicPartition) -> None:
        key = (tp.topic, tp.partition)
        if key in self._added:
            del self._added[key]
            return
        index = bisect.bisect_left(self._keys, key)
        del self._keys[index]
        del self._rows[index]

    def render(self) -> bytes:
        if self._added:
            keys = sorted([*self._keys, *self._added])
            self._added.clear()
            self._keys = keys
            self._rows = [f"{topic} {partition} 0\n" for topic, partition in keys]
        return f"0\n{len(self._rows)}\n{''.join(self._rows)}".encode()


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
        raise FatalNodeError(
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


def delete_delay_resolver(
    config: DeleteDelay | Mapping[str, float] | None, default: float
) -> DeleteDelay:
    """A topic's ``file.delete.delay.ms`` in seconds: ``config`` itself when it is a
    callable (it applies its own default), else the topic's override, else ``default``."""
    if config is None:
        return lambda _topic: default
    if isinstance(config, Mapping):
        overrides = dict(config)
        return lambda topic: overrides.get(topic, default)
    return config


# ------------------------------------------------------------------------ the actor

LogManagerMessage: TypeAlias = (
    GetOrCreateLog
    | DeleteLog
    | ListLogs
    | GetLogDirStatus
    | LogDeletionSweep
    | LogDirsAllFailed
    | CheckpointFlush
    | GetOrCreateLogs
)
_HANDLED: Final = (
    CheckpointFlush,
    GetOrCreateLogs,
    GetOrCreateLog,
    DeleteLog,
    ListLogs,
    GetLogDirStatus,
    LogDeletionSweep,
    LogDirsAllFailed,
)


@dataclass(slots=True)
class _PendingDelete:
    """A renamed log waiting for removal: the actor's own record, mutated only by it."""

    tp: TopicPartition
    log_dir: Path
    name: str
    due: float
    delay: float
    """Its topic's ``file.delete.delay.ms``, in seconds (also the wait before a retry)."""
    attempts: int = 0

    @property
    def path(self) -> Path:
        return self.log_dir / self.name


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
        file_delete_delay: DeleteDelay | Mapping[str, float] | None = None,
        segment_delete_delay: float = DEFAULT_FILE_DELETE_DELAY,
        initial_task_delay: float = INITIAL_TASK_DELAY,
        delete_retry_backoff: float = DEFAULT_DELETE_RETRY_BACKOFF,
        checkpoint_interval: float = DEFAULT_CHECKPOINT_INTERVAL,
        failure_listener: ActorRef | None = None,
        name: str = "log_manager",
    ) -> None:
        """``log_dirs``: the broker's ``log.dirs``, in order. ``file_delete_delay``: per-topic
        delays (a callable, or overrides by topic name) over ``segment_delete_delay``, the
        broker's ``log.segment.delete.delay.ms``; all in seconds. ``checkpoint_interval``:
        seconds from a creation to its checkpoint write (0: right after the request).
        ``failure_listener`` is told ``LogDirFailed`` when a log directory goes offline."""
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
        self.log_dirs = dirs
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.disk = disk or Disk()
        self.initial_task_delay = initial_task_delay
        self.delete_retry_backoff = delete_retry_backoff
        self.checkpoint_interval = checkpoint_interval
        self.failure_listener = failure_listener
        self._delete_delay = delete_delay_resolver(file_delete_delay, segment_delete_delay)
        self._logs: dict[TopicPartition, Path] = {}
        self._counts: dict[Path, int] = dict.fromkeys(self.log_dirs, 0)
        self._rows: dict[Path, _CheckpointRows] = {d: _CheckpointRows() for d in self.log_dirs}
        self._dirty: set[Path] = set()
        self._flush_armed = False  # a CheckpointFlush is queued or its timer is running
        self._dir_names = {d: str(d) for d in dirs}
        self._online: list[Path] = list(dirs)  # in the configured order
        self._offline: dict[Path, str] = {}
        self._pending: deque[_PendingDelete] = deque()
        self._timers: dict[int, float] = {}
        self._timer_ids = itertools.count(1)
        self._started_at = 0.0
        self._started = False
        self._halting = False
        # A new log's files, in the order written: the segment files, then the checkpoint.
        self._new_log_files: tuple[tuple[str, bytes], ...] = (
            *((file_name, b"") for file_name in SEGMENT_FILES),
            (LEADER_EPOCH_CHECKPOINT, checkpoint_file(())),
        )

    # -- read-only views (tests, metrics)

    @property
    def pending_deletions(self) -> int:
        """How many renamed logs wait for removal (the deletion queue's depth)."""
        return len(self._pending)

    @property
    def offline_dirs(self) -> tuple[Path, ...]:
        return tuple(d for d in self.log_dirs if d in self._offline)

    # -- start-up

    async def on_start(self) -> None:
        self._started_at = self.clock.now()
        for log_dir in self.log_dirs:
            self._load_dir(log_dir)
        if not self._online_dirs():
            raise FatalNodeError(
                "none of the specified log dirs can be created or opened: "
                + "; ".join(f"{d}: {self._offline[d]}" for d in self.log_dirs)
            )
        self._check_meta()
        for log_dir in self._online_dirs():
            self._write_meta(log_dir)
        for log_dir in self._online_dirs():
            self._checkpoint(log_dir)
        self._started = True
        self._schedule_sweep()

    async def on_stop(self) -> None:
        """A clean shutdown writes the checkpoints still owed (Kafka does at shutdown)."""
        self._flush_checkpoints()

    def _load_dir(self, log_dir: Path) -> None:
        try:
            self.disk.mkdir(log_dir)
            names = [n for n in self.disk.listdir(log_dir) if self.disk.is_dir(log_dir / n)]
        except OSError as exc:
            self._trace_op("init", log_dir, log_dir=log_dir, error=exc)
            self._mark_offline(log_dir, "cannot create or read the log dir", exc)
            return
        self._trace_op("init", log_dir, log_dir=log_dir, entries=len(names))
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
                            f"{other / name} and {path}."
                        )
                    self._add_log(tp, log_dir)
                    self._trace_op("load", path, log_dir=log_dir, tp=tp)
                case LogDirKind.DELETED:
                    entry = self._enqueue(tp, log_dir, name, now)
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
        return self._dispatch(msg)

    def _dispatch(self, msg: LogManagerMessage) -> Message | None:
        match msg:
            case GetOrCreateLog():
                return self._get_or_create(msg.topic_partition, is_new=msg.is_new)
            case DeleteLog(file_delete_delay_ms=delay_ms):
                return self._delete(
                    msg.topic_partition, None if delay_ms is None else delay_ms / 1000
                )
            case ListLogs():
                return self._listing()
            case GetLogDirStatus():
                return self._dir_status()
            case LogDeletionSweep(timer=timer):
                self._sweep(timer)
                return None
            case LogDirsAllFailed(reason=reason):
                raise FatalNodeError(reason)
            case CheckpointFlush():
                self._flush_checkpoints()
                return None
            case GetOrCreateLogs(logs=logs):
                return self._get_or_create_batch(logs)
            case _:
                assert_never(msg)

    # -- getOrCreateLog

    def _get_or_create_batch(self, logs: tuple[GetOrCreateLog, ...]) -> LogsCreated:
        results = []
        for request in logs:
            tp = request.topic_partition
            try:
                log_dir, _ = self._get_or_create_dir(tp, is_new=request.is_new)
            except KafkaApiError as exc:
                results.append(
                    LogOutcome(topic=tp.topic, partition=tp.partition, error_code=exc.code)
                )
            else:
                results.append(
                    LogOutcome(
                        topic=tp.topic, partition=tp.partition, log_dir=self._dir_names[log_dir]
                    )
                )
        return LogsCreated(results=tuple(results))

    def _get_or_create(self, tp: TopicPartition, *, is_new: bool) -> LogCreated:
        log_dir, created = self._get_or_create_dir(tp, is_new=is_new)
        return LogCreated(
            topic=tp.topic,
            partition=tp.partition,
            log_dir=self._dir_names[log_dir],
            created=created,
        )

    def _get_or_create_dir(self, tp: TopicPartition, *, is_new: bool) -> tuple[Path, bool]:
        """The log dir of ``tp``'s log, and whether the log was created just now."""
        log_dir = self._logs.get(tp)
        if log_dir is not None:
            if log_dir in self._offline:
                raise _storage_error(f"Log for partition {tp} is in offline log dir {log_dir}")
            return log_dir, False
        if not is_new and self._offline:
            raise _storage_error(
                f"Can not create log for {tp} because log directories "
                f"{', '.join(map(str, self.offline_dirs))} are offline"
            )
        online = self._online
        tried = online if len(online) == 1 else next_log_dirs(online, self._counts)
        name = str(tp)
        for candidate in tried:
            path = f"{self._dir_names[candidate]}{os.sep}{name}"
            try:
                self.disk.mkdir(path)
            except OSError as exc:
                self._trace_op("create", path, log_dir=candidate, tp=tp, error=exc, step="mkdir")
                self._mark_offline(
                    candidate, f"Error while creating log for {name} in dir {candidate}", exc
                )
                continue
            self._create_log(tp, candidate, path)
            return candidate, True
        raise _storage_error(
            f"No log directories available. Tried {', '.join(map(str, tried)) or 'none'}"
        )

    def _create_log(self, tp: TopicPartition, log_dir: Path, path: str) -> None:
        try:
            self.disk.write_files(path, self._new_log_files)
        except OSError as exc:
            self._trace_op("create", path, log_dir=log_dir, tp=tp, error=exc, step="files")
            message = f"Error while creating log for {tp} in dir {log_dir}"
            self._mark_offline(log_dir, message, exc)
            raise _storage_error(message) from exc
        self._add_log(tp, log_dir)
        self._trace_op("create", path, log_dir=log_dir, tp=tp)
        self._checkpoint_soon(log_dir)

    # -- asyncDelete

    def _delete(self, tp: TopicPartition, delay: float | None = None) -> LogDeleted:
        log_dir = self._logs.get(tp)
        if log_dir is None:
            if self._offline:
                raise _storage_error(
                    f"Failed to delete log for {tp} because it may be in one of the offline "
                    f"directories {', '.join(map(str, self.offline_dirs))}"
                )
            return LogDeleted(topic=tp.topic, partition=tp.partition)
        if log_dir in self._offline:
            raise _storage_error(f"Log for partition {tp} is in offline log dir {log_dir}")
        unique_id = uuid.UUID(int=self.rng.getrandbits(128), version=4).hex
        name = delete_dir_name(tp, unique_id)
        src = log_dir / str(tp)
        try:
            self.disk.rename(src, log_dir / name)
        except OSError as exc:
            self._trace_op("rename", src, log_dir=log_dir, tp=tp, error=exc, to=name)
            message = f"Error while renaming dir for {tp} in log dir {log_dir}"
            self._mark_offline(log_dir, message, exc)
            raise _storage_error(message) from exc
        self._remove_log(tp)
        self._dirty.discard(log_dir)  # rewritten right now
        now = self.clock.now()
        self._trace_op("rename", src, log_dir=log_dir, tp=tp, to=name)
        if self._checkpoint(log_dir):
            self._enqueue(tp, log_dir, name, now, delay)
            self._schedule_sweep()
        return LogDeleted(
            topic=tp.topic, partition=tp.partition, log_dir=str(log_dir), renamed_to=name
        )

    def _enqueue(
        self, tp: TopicPartition, log_dir: Path, name: str, now: float, delay: float | None = None
    ) -> _PendingDelete:
        """Queue a renamed log; ``delay``: its topic's ``file.delete.delay.ms`` (seconds)
        when the request carried it, else the configured resolver's."""
        delay = self._delete_delay(tp.topic) if delay is None else delay
        due = max(now + delay, self._started_at + self.initial_task_delay)
        entry = _PendingDelete(tp=tp, log_dir=log_dir, name=name, due=due, delay=delay)
        self._pending.append(entry)
        return entry

    # -- the delayed removal (Kafka's kafka-delete-logs task)

    def _sweep(self, timer: int) -> None:
        self._timers.pop(timer, None)
        now = self.clock.now()
        waiting: deque[_PendingDelete] = deque()
        failed: list[_PendingDelete] = []
        for entry in self._pending:
            if entry.due > now + _TIME_SLACK:
                waiting.append(entry)
                continue
            try:
                self.disk.rmtree(entry.path)
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
                self._trace_op("remove", entry.path, log_dir=entry.log_dir, tp=entry.tp)
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

    # -- log directory files

    def _checkpoint(self, log_dir: Path) -> bool:
        """Rewrite the offset checkpoints of ``log_dir``; say whether it is still online.

        Every log is empty, so recovery point and high watermark are 0; Kafka lists a log
        in ``log-start-offset-checkpoint`` only once its start offset passed its first
        segment's base offset, which never happens here (no records), so that file is empty.
        """
        hosted = self._rows[log_dir]
        data = hosted.render()  # offsets_checkpoint((tp, 0) for every hosted tp)
        try:
            self.disk.write_file(log_dir / RECOVERY_POINT_CHECKPOINT, data)
            self.disk.write_file(log_dir / REPLICATION_OFFSET_CHECKPOINT, data)
            self.disk.write_file(log_dir / LOG_START_OFFSET_CHECKPOINT, offsets_checkpoint(()))
        except OSError as exc:
            self._trace_op("checkpoint", log_dir, log_dir=log_dir, error=exc)
            self._mark_offline(log_dir, f"Disk error while writing checkpoints in {log_dir}", exc)
            return False
        self._trace_op("checkpoint", log_dir, log_dir=log_dir, logs=len(hosted))
        return True

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
        return dict(self._counts)

    def _add_log(self, tp: TopicPartition, log_dir: Path) -> None:
        self._logs[tp] = log_dir
        self._counts[log_dir] = self._counts.get(log_dir, 0) + 1
        self._rows[log_dir].add(tp)

    def _remove_log(self, tp: TopicPartition) -> None:
        log_dir = self._logs.pop(tp)
        self._counts[log_dir] -= 1
        self._rows[log_dir].remove(tp)

    def _checkpoint_soon(self, log_dir: Path) -> None:
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
        dirty, self._dirty = sorted(self._dirty), set()
        for log_dir in dirty:
            if log_dir not in self._offline:
                self._checkpoint(log_dir)

    def _mark_offline(self, log_dir: Path, reason: str, exc: OSError) -> None:
        """Kafka's LogDirFailureChannel: the directory is offline until restart."""
        if log_dir in self._offline:
            return
        detail = f"{reason}: {exc}"
        self._offline[log_dir] = detail
        self._online.remove(log_dir)
        abandoned = [entry.name for entry in self._pending if entry.log_dir == log_dir]
        self._pending = deque(entry for entry in self._pending if entry.log_dir != log_dir)
        self._trace_op(
            "offline",
            log_dir,
            log_dir=log_dir,
            result=type(exc).__name__,
            detail=detail,
            logs=sum(1 for d in self._logs.values() if d == log_dir),
            abandoned=abandoned,
        )
        if self.failure_listener is not None:
            self.tell(self.failure_listener, LogDirFailed(log_dir=str(log_dir), reason=detail))
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
                    log_dir=str(log_dir),
                    online=log_dir not in self._offline,
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
        where: dict[str, Any] = {"dir": str(path), "log_dir": self._dir_names[log_dir]}
        if tp is not None:
            where.update(topic=tp.topic, partition=tp.partition)
        if result is None:
            result = "ok" if error is None else type(error).__name__
        if error is not None:
            fields["detail"] = str(error)
        self.trace(TraceKind.LOG_DIR, op, **where, result=result, **fields)
