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
    "AdvanceLogStart",
    "AppendOutcome",
    "AppendRecords",
    "AppendToLogs",
    "CheckpointBrokerMetadata",
    "CheckpointFlush",
    "DeleteLog",
    "DeleteLogs",
    "EpochEndOffsetQuery",
    "GetLogDirStatus",
    "GetOrCreateLog",
    "GetOrCreateLogs",
    "HighWatermark",
    "HostedLog",
    "ListLogs",
    "LogConfigOverrides",
    "LogCreated",
    "LogDefaultsChanged",
    "LogDeleteOutcome",
    "LogDeleted",
    "LogDeletionSweep",
    "LogDirFailed",
    "LogDirInfo",
    "LogDirStatus",
    "LogDirsAllFailed",
    "LogListing",
    "LogOffsets",
    "LogOutcome",
    "LogQueried",
    "LogsAppended",
    "LogsConfigured",
    "LogsCreated",
    "LogsDeleted",
    "LogsRead",
    "LookupOffsets",
    "OffsetFound",
    "OffsetQuery",
    "OffsetTimestampQuery",
    "OffsetsBeforeQuery",
    "OffsetsFound",
    "PendingLogDeletion",
    "QueryLog",
    "ReadFromLogs",
    "ReadOutcome",
    "ReadRecords",
    "RecordHighWatermarks",
    "TruncateLog",
]


# ------------------------------------------------------------------- create and delete


class GetOrCreateLog(Message, frozen=True, kw_only=True, gc=False):
    """Return the partition's log, creating ``<topic>-<partition>/`` in the least-loaded
    online log directory if there is none. With ``is_new`` false (the replica should
    already exist on this broker) and some log directory offline, the log may be in that
    directory: KAFKA_STORAGE_ERROR rather than an empty new log. With ``leader_epoch``
    (this broker becomes the partition's leader, ``Partition.makeLeader``) that epoch
    starts at the log end offset in the log's leader epoch cache."""

    topic: TopicName
    partition: int
    is_new: bool = False
    leader_epoch: int | None = None

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class LogCreated(Message, frozen=True, kw_only=True):
    """The log exists in ``log_dir``; ``created`` says whether this request made it."""

    topic: TopicName
    partition: int
    log_dir: str
    created: bool
    log_start_offset: int = 0
    log_end_offset: int = 0
    high_watermark: int = 0
    """From ``replication-offset-checkpoint``, within [log start, log end]
    (``Partition.createLog``)."""


class DeleteLog(Message, frozen=True, kw_only=True, gc=False):
    """Delete the partition's log asynchronously: answered once its directory is renamed to
    ``<topic>-<partition>.<uuid>-delete``; removed from disk the broker's
    ``log.segment.delete.delay.ms`` later (``LogManager.deleteLogs``: not the topic's
    ``file.delete.delay.ms``)."""

    topic: TopicName
    partition: int

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


class DeleteLogs(Message, frozen=True, kw_only=True):
    """``DeleteLog`` for every partition of one StopReplica (Kafka's ``asyncDelete`` of a
    set), answered at once with ``LogsDeleted``: every log renamed, then one checkpoint
    write per log dir for the whole batch."""

    logs: tuple[DeleteLog, ...]


class LogDeleteOutcome(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One log of ``DeleteLogs``: its error, or where it was renamed (both ``None`` when no
    log was hosted, as ``LogDeleted``)."""

    topic: TopicName
    partition: int
    error_code: ErrorCode = ErrorCode.NONE
    log_dir: str | None = None
    renamed_to: str | None = None


class LogsDeleted(Message, frozen=True, kw_only=True):
    results: tuple[LogDeleteOutcome, ...]


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


class DescribeLogDirs(Message, frozen=True, kw_only=True):
    """Each configured log directory with the logs of ``partitions`` in it (None: every
    hosted log), for ``ReplicaManager.describeLogDirs``."""

    partitions: tuple[TopicPartition, ...] | None = None


class DescribedLog(msgspec.Struct, frozen=True, kw_only=True):
    """A log's size in bytes (its segments' ``.log`` files) and its log end offset."""

    topic: TopicName
    partition: int
    size: int
    log_end_offset: int


class DescribedLogDir(msgspec.Struct, frozen=True, kw_only=True):
    """One log directory: offline, or online with ``topics`` (every topic with a log in
    it, asked about or not: Kafka lists each) and the ``logs`` asked about."""

    log_dir: str
    online: bool
    topics: tuple[TopicName, ...] = ()
    logs: tuple[DescribedLog, ...] = ()


class LogDirsDescribed(Message, frozen=True, kw_only=True):
    """Every configured log directory, in the configured order."""

    dirs: tuple[DescribedLogDir, ...]


# ---------------------------------------------------------------------- notifications


class LogDirFailed(Message, frozen=True, kw_only=True):
    """Told to the log manager's failure listener (the broker) when a log directory goes
    offline, as Kafka's LogDirFailureChannel wakes the ReplicaManager (which then writes a
    ``/log_dir_event_notification`` znode for the controller)."""

    log_dir: str
    reason: str
    last: bool = False
    """No log directory is left online: the broker halts (``LogManager.handleLogDirFailure``
    exits before ``ReplicaManager.handleLogDirFailure`` notifies the controller)."""


# ----------------------------------------------------------------- self-sent messages


class LogDeletionSweep(Message, frozen=True, kw_only=True):
    """A deletion timer fired (``timer`` identifies it): remove every renamed log now due."""

    local_only = True

    timer: int


class GetOrCreateLogs(Message, frozen=True, kw_only=True):
    """``GetOrCreateLog`` for every partition of one LeaderAndIsr request, answered at once
    with ``LogsCreated``: one checkpoint write per log dir for the whole batch."""

    logs: tuple[GetOrCreateLog, ...]


class LogOutcome(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One log of ``GetOrCreateLogs``: its error, or its directory and offsets (the high
    watermark from ``replication-offset-checkpoint``, within [log start, log end])."""

    topic: TopicName
    partition: int
    error_code: ErrorCode = ErrorCode.NONE
    log_dir: str | None = None
    log_start_offset: int = 0
    log_end_offset: int = 0
    high_watermark: int = 0


class LogsCreated(Message, frozen=True, kw_only=True):
    results: tuple[LogOutcome, ...]


# --------------------------------------------------------------------------- records
#
# One Produce or Fetch is one round trip to the log manager: each message below carries
# every partition of the request. A partition's failure is its ``error_code`` (with
# ``error_message``); the others go on.


class LogConfigOverrides(Message, frozen=True, kw_only=True):
    """A topic's log configs (``segment.bytes``, ``segment.ms``, ``segment.jitter.ms``,
    ``segment.index.bytes``, ``index.interval.bytes``, ``max.message.bytes``,
    ``message.timestamp.type``) as Kafka's ``LogConfig`` reads them: the broker's
    defaults with the topic's overrides applied, as text. The topic's logs use them from
    now on (open ones too); answered with ``LogsConfigured``."""

    topic: TopicName
    configs: tuple[tuple[str, str], ...]


class LogDefaultsChanged(Message, frozen=True, kw_only=True):
    """The broker's dynamic configs changed (``DynamicLogConfig.reconfigure``): its new
    defaults of the topic log configs, as topic config names and text (what
    ``KafkaServer.copyKafkaConfigToLog`` makes of them), and its new
    ``log.segment.delete.delay.ms``. Answered with ``LogsConfigured`` (topic empty)."""

    configs: tuple[tuple[str, str], ...]
    segment_delete_delay_ms: int


class LogsConfigured(Message, frozen=True, kw_only=True):
    """The topic's configs are in force."""

    topic: TopicName


class AppendRecords(msgspec.Struct, frozen=True, kw_only=True):
    """Records for one partition's log: as its leader (``leader_epoch``: checked, given
    offsets from the log end, stamped with the epoch; ``Log.appendAsLeader``) or, with
    ``leader_epoch`` None, as a follower (the leader's batches as they are;
    ``Log.appendAsFollower``)."""

    topic: TopicName
    partition: int
    records: bytes
    leader_epoch: int | None


class AppendToLogs(Message, frozen=True, kw_only=True):
    """Every partition of one Produce (or one fetch answer of a follower), answered with
    ``LogsAppended`` in the same order."""

    appends: tuple[AppendRecords, ...]


class AppendOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """What one append did (Kafka's ``LogAppendInfo``): the offsets given (-1 when nothing
    was appended), the broker time under LogAppendTime (else -1), the log's start and end
    offsets after it. A refusal for what records hold (Kafka's
    ``RecordValidationException``) names each refused record: ``record_errors``, its
    index in the batch and why."""

    topic: TopicName
    partition: int
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    record_errors: tuple[tuple[int, str], ...] = ()
    first_offset: int = -1
    last_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1


class LogsAppended(Message, frozen=True, kw_only=True):
    results: tuple[AppendOutcome, ...]


class ReadRecords(msgspec.Struct, frozen=True, kw_only=True):
    """Whole batches of one partition from the one holding ``offset``, at most
    ``max_bytes`` (Fetch's ``partition_max_bytes``) and below ``max_offset`` (a
    consumer's high watermark; the log end when None)."""

    topic: TopicName
    partition: int
    offset: int
    max_bytes: int
    max_offset: int | None = None


class ReadFromLogs(Message, frozen=True, kw_only=True):
    """Every partition of one Fetch, read in order as ``ReplicaManager.readFromLocalLog``
    does: at most ``max_bytes`` in all, and, with ``min_one_message`` (Fetch v3+), the
    first batch found is returned whole even past the limits. Answered with
    ``LogsRead`` in the same order."""

    reads: tuple[ReadRecords, ...]
    max_bytes: int
    min_one_message: bool = True


class ReadOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """One partition's read: its batches (empty at the end of what may be read) and the
    log's start and end offsets at the time of the read."""

    topic: TopicName
    partition: int
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    records: bytes = b""
    log_start_offset: int = -1
    log_end_offset: int = -1


class LogsRead(Message, frozen=True, kw_only=True):
    results: tuple[ReadOutcome, ...]


class EpochEndOffsetQuery(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """OffsetForLeaderEpoch for one partition: where ``leader_epoch`` ends in its log."""

    topic: TopicName
    partition: int
    leader_epoch: int


class OffsetTimestampQuery(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """ListOffsets by timestamp for one partition: the first record at or after it."""

    topic: TopicName
    partition: int
    timestamp: int


class OffsetsBeforeQuery(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """ListOffsets v0 for one partition: up to ``max_num_offsets`` segment start offsets
    written before ``timestamp`` (-1 latest, -2 earliest; ``Log.legacyFetchOffsetsBefore``)."""

    topic: TopicName
    partition: int
    timestamp: int
    max_num_offsets: int


OffsetQuery = EpochEndOffsetQuery | OffsetTimestampQuery | OffsetsBeforeQuery
"""One lookup of ``LookupOffsets``."""


class LookupOffsets(Message, frozen=True, kw_only=True):
    """The epoch-cache, time-index and segment lookups of one OffsetForLeaderEpoch or
    ListOffsets request, answered with ``OffsetsFound`` in the same order."""

    queries: tuple[OffsetQuery, ...]


class OffsetFound(msgspec.Struct, frozen=True, kw_only=True):
    """One lookup: for an epoch, the largest epoch at or below it and where it ends
    (``LeaderEpochFileCache.endOffsetFor``: -1, -1 when unknown); for a timestamp, the
    first record's ``(timestamp, offset)`` (-1, -1 when there is none) and the leader
    epoch it was written in; for offsets before a time, ``offsets``, largest first."""

    topic: TopicName
    partition: int
    error_code: ErrorCode = ErrorCode.NONE
    leader_epoch: int = -1
    offset: int = -1
    timestamp: int = -1
    offsets: tuple[int, ...] = ()


class OffsetsFound(Message, frozen=True, kw_only=True):
    results: tuple[OffsetFound, ...]


class TruncateLog(Message, frozen=True, kw_only=True):
    """A follower's log cut at ``offset`` (``Log.truncateTo``), or, with ``fully``,
    emptied to start at ``offset`` (``Log.truncateFullyAndStartAt``). Answered with
    ``LogOffsets``."""

    topic: TopicName
    partition: int
    offset: int
    fully: bool = False


class AdvanceLogStart(Message, frozen=True, kw_only=True):
    """Move the log start up to ``offset`` (DeleteRecords below ``high_watermark``, or a
    follower adopting its leader's; ``Log.maybeIncrementLogStartOffset``). Answered with
    ``LogOffsets``."""

    topic: TopicName
    partition: int
    offset: int
    high_watermark: int | None = None


class LogOffsets(Message, frozen=True, kw_only=True):
    """A log's start and end offsets after a change."""

    topic: TopicName
    partition: int
    log_start_offset: int
    log_end_offset: int


class QueryLog(Message, frozen=True, kw_only=True):
    """What a follower's fetcher reads of its local log, changing nothing (``Log.
    logStartOffset``, ``logEndOffset``, ``latestEpoch``). Answered with ``LogQueried``."""

    topic: TopicName
    partition: int


class LogQueried(Message, frozen=True, kw_only=True):
    """A log's start and end offsets and the latest epoch of its epoch cache (None: the
    cache is empty)."""

    topic: TopicName
    partition: int
    log_start_offset: int
    log_end_offset: int
    latest_epoch: int | None


class HighWatermark(msgspec.Struct, frozen=True, kw_only=True):
    topic: TopicName
    partition: int
    high_watermark: int


class RecordHighWatermarks(Message, frozen=True, kw_only=True):
    """Told by the broker when its partitions' high watermarks moved: what the log
    manager writes to ``replication-offset-checkpoint`` at its next checkpoint (Kafka's
    ``ReplicaManager.checkpointHighWatermarks``)."""

    high_watermarks: tuple[HighWatermark, ...]


class CheckpointBrokerMetadata(Message, frozen=True, kw_only=True):
    """The broker is registered (``KafkaServer.startup`` calls ``checkpointBrokerMetadata``
    after ``registerBroker``): the log manager now writes to its log dirs what start-up
    owes them (``meta.properties``, the offset checkpoints, the clean-shutdown markers
    deleted). Until then a broker that fails to start, one whose id another broker
    registered first, leaves its log dirs as it found them. Answered with the
    ``LogDirStatus``."""

    local_only = True


class CleanupLogs(Message, frozen=True, kw_only=True):
    """The log manager's retention timer fired (``LogManager.cleanupLogs``, every
    ``log.retention.check.interval.ms``): delete the segments retention no longer keeps."""

    local_only = True


class CleanCompactedLogs(Message, frozen=True, kw_only=True):
    """The log manager's cleaner timer fired (Kafka's ``CleanerThread``, every
    ``log.cleaner.backoff.ms``): compact the filthiest compacted logs. ``resume``: the
    manager's own message to run the next step of the round in progress (a round runs
    in steps, each its own message, so that the messages that came meanwhile go first);
    a timer's message while a round is in progress is dropped."""

    local_only = True

    resume: bool = False


class LogStart(msgspec.Struct, frozen=True, kw_only=True):
    topic: TopicName
    partition: int
    log_start_offset: int


class LogStartsAdvanced(Message, frozen=True, kw_only=True):
    """Told to the log manager's listener (the broker) after a retention check moved log
    start offsets, as Kafka's ``Log`` moves the start its ``Partition`` reads: ListOffsets
    earliest and the Fetch responses follow at once."""

    local_only = True

    starts: tuple[LogStart, ...]


class CheckpointFlush(Message, frozen=True, kw_only=True):
    """The log manager's own reminder: rewrite the checkpoints of the log dirs whose set
    of logs changed since the last flush (one write per dir for a burst of creations)."""

    local_only = True


class LogDirsAllFailed(Message, frozen=True, kw_only=True):
    """Every log directory is offline: the broker halts (Kafka's ``Exit.halt(1)``)."""

    local_only = True

    reason: str
