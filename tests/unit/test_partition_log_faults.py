"""A partition log on a disk that fails (``FaultyLogFiles`` for its data files, a
``FaultyDisk`` for its checkpoint): the I/O error reaches the caller, the log refuses
everything after it with KAFKA_STORAGE_ERROR, and reopening the files once the disk is
healed recovers a consistent log.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from actors.log.channel import ChannelOp, FaultyLogFiles
from actors.log.disk import DiskOp, FaultyDisk
from actors.log.partition_log import Log, LogConfig
from protocol.errors import ErrorCode, KafkaApiError
from tests.support.record_batches import client_batch, decode_batches

T0 = 1_600_000_000_000


def open_log(directory: Path, files: FaultyLogFiles, **config: int) -> Log:
    return Log(directory, LogConfig(**config), files=files, now_ms=lambda: T0)  # type: ignore[arg-type]


def storage_error(call: object) -> ErrorCode:
    assert callable(call)
    with pytest.raises(KafkaApiError) as raised:
        call()
    return raised.value.code


def test_a_failed_append_takes_the_log_offline(tmp_path: Path) -> None:
    """An append whose write fails raises the OSError; every later operation of that log
    is KAFKA_STORAGE_ERROR; reopened on a healed disk it holds what was written before."""
    directory = tmp_path / "t-0"
    files = FaultyLogFiles()
    log = open_log(directory, files)
    log.append_as_leader(client_batch([b"a", b"b"]), leader_epoch=0)
    fault = files.fail(directory, [ChannelOp.APPEND], err=errno.ENOSPC)
    with pytest.raises(OSError, match="injected fault") as raised:
        log.append_as_leader(client_batch([b"c"]), leader_epoch=0)
    assert raised.value.errno == errno.ENOSPC
    assert log.failure is raised.value
    files.heal(fault)
    batch = client_batch([b"d"])
    assert storage_error(lambda: log.append_as_leader(batch, leader_epoch=0)) == (
        ErrorCode.KAFKA_STORAGE_ERROR
    )
    assert storage_error(lambda: log.read(0, 100)) == ErrorCode.KAFKA_STORAGE_ERROR
    assert storage_error(lambda: log.truncate_to(0)) == ErrorCode.KAFKA_STORAGE_ERROR
    log.close()

    reopened = open_log(directory, FaultyLogFiles())
    assert reopened.log_end_offset == 2
    assert reopened.append_as_leader(client_batch([b"e"]), leader_epoch=0).first_offset == 2
    got = decode_batches(reopened.read(0, 10**6).records)
    assert [b.values for b in got] == [[b"a", b"b"], [b"e"]]


def test_a_batch_written_before_its_index_failed_is_recovered(tmp_path: Path) -> None:
    """When the .log write succeeds and the index write after it fails, the append raises
    and the log goes offline; recovery at the next open keeps the whole batch that reached
    the file (written, though never acknowledged), as Kafka's would."""
    directory = tmp_path / "t-0"
    files = FaultyLogFiles()
    log = open_log(directory, files, index_interval_bytes=0)
    log.append_as_leader(client_batch([b"a"]), leader_epoch=0)
    files.fail(directory, [ChannelOp.WRITE_AT])
    with pytest.raises(OSError, match="injected fault"):
        log.append_as_leader(client_batch([b"b"]), leader_epoch=0)
    assert files.injected == [(ChannelOp.WRITE_AT, directory / "00000000000000000000.index")]
    log.close()

    reopened = open_log(directory, FaultyLogFiles(), index_interval_bytes=0)
    assert reopened.log_end_offset == 2
    assert [b.values for b in decode_batches(reopened.read(0, 10**6).records)] == [[b"a"], [b"b"]]


def test_a_failing_flush_at_roll_takes_the_log_offline(tmp_path: Path) -> None:
    """The flush a roll makes fails: the append raises, and the recovery point stays
    where it was."""
    directory = tmp_path / "t-0"
    files = FaultyLogFiles()
    log = open_log(directory, files, segment_bytes=200)
    log.append_as_leader(client_batch([b"x" * 80]), leader_epoch=0)
    files.fail(directory, [ChannelOp.FLUSH], times=1)
    with pytest.raises(OSError, match="injected fault"):
        log.append_as_leader(client_batch([b"y" * 80]), leader_epoch=0)
    assert log.recovery_point == 0
    assert log.failure is not None
    log.close()


def test_a_failing_epoch_checkpoint_write_takes_the_log_offline(tmp_path: Path) -> None:
    """The leader-epoch-checkpoint goes through the log manager's Disk: its FaultyDisk
    failing the write fails the append that brought a new epoch."""
    directory = tmp_path / "t-0"
    disk = FaultyDisk()
    log = open_log(directory, FaultyLogFiles(disk))
    log.append_as_leader(client_batch([b"a"]), leader_epoch=0)
    disk.fail(directory, [DiskOp.WRITE_FILE], err=errno.EROFS)
    log.append_as_leader(client_batch([b"b"]), leader_epoch=0)  # no new epoch, no write
    with pytest.raises(OSError, match="injected fault"):
        log.append_as_leader(client_batch([b"c"]), leader_epoch=1)
    assert disk.injected == [(DiskOp.WRITE_FILE, directory / "leader-epoch-checkpoint")]
    assert storage_error(lambda: log.flush()) == ErrorCode.KAFKA_STORAGE_ERROR
    log.close()
