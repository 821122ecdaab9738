"""Messages of a broker's log manager (``actors.log.manager.LogManager``).

The broker asks its log manager to create a partition's log when a LeaderAndIsr makes it a
replica (Kafka's ``LogManager.getOrCreateLog``), to delete it when a StopReplica says
``deletePartition`` (``LogManager.asyncDelete``: rename to ``-delete`` now, remove later),
and what it hosts and which log directories are online. A failing disk or an offline log
directory answers ``ErrorReply`` with ``KAFKA_STORAGE_ERROR`` (56).

Paths are strings: the log directories as the broker was configured with them
(``log.dirs``), and directory names inside them.

``LogDeletionSweep`` and ``LogDirsAllFailed`` are the log manager's messages to itself
(timer and halt); they are here because every message is a ``protocol`` value.
"""

from __future__ import annotations

import msgspec

from protocol.base import Message
from protocol.control import TopicPartition
from protocol.errors import ErrorCode
from protocol.ids import TopicName

__all__ = [
    "CheckpointFlush",
    "DeleteLog",
    "GetLogDirStatus",
    "GetOrCreateLog",
    "GetOrCreateLogs",
    "HostedLog",
    "ListLogs",
    "LogCreated",
    "LogDeleted",
    "LogDeletionSweep",
    "LogDirFailed",
    "LogDirInfo",
    "LogDirStatus",
    "LogDirsAllFailed",
    "LogListing",
    "LogOutcome",
    "LogsCreated",
    "PendingLogDeletion",
]


# ------------------------------------------------------------------- create and delete


class GetOrCreateLog(Message, frozen=True, kw_only=True):
    """Return the partition's log, creating ``<topic>-<partition>/`` in the least-loaded
    online log directory if there is none. With ``is_new`` false (the replica should
    already exist on this broker) and some log directory offline, the log may be in that
    directory: KAFKA_STORAGE_ERROR rather than an empty new log."""

    topic: TopicName
    partition: int
    is_new: bool = False

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class LogCreated(Message, frozen=True, kw_only=True):
    """The log exists in ``log_dir``; ``created`` says whether this request made it."""

    topic: TopicName
    partition: int
    log_dir: str
    created: bool


class DeleteLog(Message, frozen=True, kw_only=True):
    """Delete the partition's log asynchronously: answered once its directory is renamed to
    ``<topic>-<partition>.<uuid>-delete``; removed from disk ``file.delete.delay.ms`` later."""

    topic: TopicName
    partition: int
    file_delete_delay_ms: int | None = None
    """The topic's ``file.delete.delay.ms`` override, if it has one (else the log manager's
    default, the broker's ``log.segment.delete.delay.ms``)."""

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class LogDeleted(Message, frozen=True, kw_only=True):
    """The log's directory was renamed to ``renamed_to`` in ``log_dir``. Both are ``None``
    when no log was hosted (a no-op, as Kafka's asyncDelete of an absent log)."""

    topic: TopicName
    partition: int
    log_dir: str | None = None
    renamed_to: str | None = None


# -------------------------------------------------------------------------- listings


class ListLogs(Message, frozen=True, kw_only=True):
    """What logs are hosted, and which renamed logs wait for removal."""


class HostedLog(msgspec.Struct, frozen=True, kw_only=True):
    """A hosted log; ``online`` is false once its log directory failed."""

    topic: TopicName
    partition: int
    log_dir: str
    online: bool

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class PendingLogDeletion(msgspec.Struct, frozen=True, kw_only=True):
    """A ``-delete`` directory queued for removal at ``due`` (the node's clock, seconds);
    ``attempts`` counts the removals that failed so far."""

    topic: TopicName
    partition: int
    log_dir: str
    name: str
    due: float
    attempts: int = 0


class LogListing(Message, frozen=True, kw_only=True):
    """Hosted logs sorted by topic and partition; pending deletions in queue order."""

    logs: tuple[HostedLog, ...] = ()
    pending_deletion: tuple[PendingLogDeletion, ...] = ()


class GetLogDirStatus(Message, frozen=True, kw_only=True):
    """Which log directories are online."""


class LogDirInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One configured log directory: online or not (with the failure), and its log count."""

    log_dir: str
    online: bool
    log_count: int
    error: str | None = None


class LogDirStatus(Message, frozen=True, kw_only=True):
    """Every configured log directory, in the configured order."""

    dirs: tuple[LogDirInfo, ...]

    @property
    def offline(self) -> tuple[str, ...]:
        return tuple(d.log_dir for d in self.dirs if not d.online)


# ---------------------------------------------------------------------- notifications


class LogDirFailed(Message, frozen=True, kw_only=True):
    """Told to the log manager's failure listener (the broker) when a log directory goes
    offline, as Kafka's LogDirFailureChannel wakes the ReplicaManager (which then writes a
    ``/log_dir_event_notification`` znode for the controller)."""

    log_dir: str
    reason: str


# ----------------------------------------------------------------- self-sent messages


class LogDeletionSweep(Message, frozen=True, kw_only=True):
    """A deletion timer fired (``timer`` identifies it): remove every renamed log now due."""

    timer: int


class GetOrCreateLogs(Message, frozen=True, kw_only=True):
    """``GetOrCreateLog`` for every partition of one LeaderAndIsr request, answered at once
    with ``LogsCreated``: one checkpoint write per log dir for the whole batch."""

    logs: tuple[GetOrCreateLog, ...]


class LogOutcome(msgspec.Struct, frozen=True, kw_only=True):
    topic: TopicName
    partition: int
    error_code: ErrorCode = ErrorCode.NONE
    log_dir: str | None = None


class LogsCreated(Message, frozen=True, kw_only=True):
    results: tuple[LogOutcome, ...]


class CheckpointFlush(Message, frozen=True, kw_only=True):
    """The log manager's own reminder: rewrite the checkpoints of the log dirs whose set
    of logs changed since the last flush (one write per dir for a burst of creations)."""


class LogDirsAllFailed(Message, frozen=True, kw_only=True):
    """Every log directory is offline: the broker halts (Kafka's ``Exit.halt(1)``)."""

    reason: str
