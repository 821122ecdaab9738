"""A partition log against a simple in-memory model, under random sequences of appends
(plain and gzip batches), reads, truncations to batch boundaries, log start advances,
flushes, reopenings (clean, or recovering everything) and crashes (the files copied while
the log is open, then recovered from the recovery point), with tiny segments and indexes
so that every roll condition happens.

The model is a list of the batches the log should hold, each as the bytes it should store
(the client's batch with the leader's base offset and epoch written in).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.log.partition_log import Log, LogConfig
from protocol.errors import ErrorCode, KafkaApiError
from tests.support.record_batches import client_batch, set_field

CONFIG = LogConfig(segment_bytes=450, index_interval_bytes=90, max_index_size=40)
T0 = 1_600_000_000_000


@dataclass
class Stored:
    base: int
    last: int
    data: bytes


@dataclass
class Model:
    batches: list[Stored] = field(default_factory=list)
    log_start: int = 0
    log_end: int = 0
    epoch: int = 0

    def stream_from(self, offset: int) -> bytes:
        """What reading on from ``offset`` must return: the batches ending at or after it."""
        return b"".join(b.data for b in self.batches if b.last >= offset)


append = st.tuples(st.just("append"), st.integers(0, 19), st.sampled_from([0, 0, 1]), st.booleans())
read = st.tuples(st.just("read"), st.integers(0, 10**4), st.integers(1, 400), st.booleans())
truncate = st.tuples(st.just("truncate"), st.integers(0, 10**4), st.just(0), st.just(False))
advance = st.tuples(st.just("advance"), st.integers(0, 10**4), st.just(0), st.just(False))
reopen = st.tuples(st.just("reopen"), st.just(0), st.just(0), st.booleans())
crash = st.tuples(st.just("crash"), st.just(0), st.just(0), st.just(False))
flush = st.tuples(st.just("flush"), st.just(0), st.just(0), st.just(False))
operations = st.lists(
    st.one_of(append, append, read, truncate, advance, reopen, flush), max_size=40
)

Op = tuple[str, int, int, bool]


def pick(choices: list[int], n: int) -> int:
    return choices[n % len(choices)]


def append_one(log: Log, model: Model, n: int, *, codec: int) -> None:
    values = [f"v{model.log_end + i}".encode() * 12 for i in range(n)]
    stamps = [T0 + model.log_end + i for i in range(n)]
    batch = client_batch(values, timestamps=stamps, codec=codec)
    info = log.append_as_leader(batch, leader_epoch=model.epoch)
    assert (info.first_offset, info.last_offset) == (model.log_end, model.log_end + n - 1)
    stored = set_field(batch, "base_offset", model.log_end)
    stored = set_field(stored, "partition_leader_epoch", model.epoch)
    model.batches.append(Stored(model.log_end, model.log_end + n - 1, stored))
    model.log_end += n


def apply(log: Log, model: Model, op: Op) -> Log:
    kind, n, m, flag = op
    if kind == "append":  # n: 1 + n // 4 batches of 1 + n % 4 records
        model.epoch += int(flag)
        for _ in range(1 + n // 4):
            append_one(log, model, 1 + n % 4, codec=m)
    elif kind == "read":
        offset = model.log_start + n % (model.log_end - model.log_start + 2) - (1 if flag else 0)
        if offset < model.log_start or offset > model.log_end:
            with pytest.raises(KafkaApiError) as raised:
                log.read(offset, m)
            assert raised.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
            return log
        got = log.read(offset, m).records
        expected = model.stream_from(offset)
        assert expected.startswith(got)
        if expected:
            first = next(b for b in model.batches if b.last >= offset)
            assert len(got) >= len(first.data)
            assert len(got) <= max(m, len(first.data))
    elif kind == "truncate":
        target = pick(
            [b.base for b in model.batches if b.base >= model.log_start] + [model.log_end], n
        )
        log.truncate_to(target)
        model.batches = [b for b in model.batches if b.base < target]
        model.log_end = min(model.log_end, target)
    elif kind == "advance":
        start = model.log_start + n % (model.log_end - model.log_start + 1)
        log.maybe_increment_log_start_offset(start)
        model.log_start = max(model.log_start, start)
    elif kind == "flush":
        log.flush()
        assert log.recovery_point == model.log_end
    elif kind == "reopen":  # flag: clean (the marker), else everything is recovered
        start, point = log.log_start_offset, log.recovery_point
        log.close()
        log = Log(
            log.directory,
            CONFIG,
            now_ms=lambda: T0,
            recovery_point=point if flag else 0,
            log_start_offset=start,
            had_clean_shutdown=flag,
        )
    elif kind == "crash":  # the files as a killed broker leaves them: nothing closed
        copy = log.directory.with_name(f"{log.directory.name}-{len(model.batches)}-crash")
        shutil.copytree(log.directory, copy)
        start, point = log.log_start_offset, log.recovery_point
        log.close()
        log = Log(copy, CONFIG, now_ms=lambda: T0, recovery_point=point, log_start_offset=start)
    assert (log.log_start_offset, log.log_end_offset) == (model.log_start, model.log_end)
    return log


def read_all(log: Log, offset: int) -> bytes:
    """Everything from ``offset`` to the log end, read on as a consumer does."""
    out = b""
    while offset < log.log_end_offset:
        got = log.read(offset, 10**6).records
        assert got, f"an empty read at {offset}, below the log end {log.log_end_offset}"
        out += got
        offset = _next_offset(got)
    return out


def _next_offset(data: bytes) -> int:
    """The offset after the last batch of whole batches ``data``."""
    position = 0
    next_offset = 0
    while position < len(data):
        base = int.from_bytes(data[position : position + 8], "big", signed=True)
        length = int.from_bytes(data[position + 8 : position + 12], "big", signed=True)
        delta = int.from_bytes(data[position + 23 : position + 27], "big", signed=True)
        next_offset = base + delta + 1
        position += length + 12
    return next_offset


@settings(max_examples=100, deadline=None)
@given(operations)
def test_the_log_behaves_as_the_model(ops: list[Op]) -> None:
    """After any sequence of operations the log's offsets, and every byte it returns from
    its start on, are the model's; a reopened log (recovered or not) is the same log."""
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "t-0"
        log = Log(directory, CONFIG, now_ms=lambda: T0)
        model = Model()
        try:
            for op in ops:
                log = apply(log, model, op)
            assert read_all(log, model.log_start) == model.stream_from(model.log_start)
            for segment in log.segments:
                assert segment.size <= CONFIG.segment_bytes
        finally:
            log.close()
