"""Pipelined batches: a session's requests written many per socket write.

As Kafka's ``KafkaZkClient.retryRequestsUntilConnected`` sends a batch, ``run_pipeline``
writes a batch's requests in order, many per socket write, with up to ``WINDOW`` awaiting
their replies, instead of one round trip each through aiozk's ``Session.send``. The server
runs a session's requests in the order they were sent, so every outcome is what it would
be one request after the other. The session it runs for is a ``PipelineHost`` (the
``ZooKeeperSession`` in ``cluster.store.zookeeper``); see docs/zookeeper-adapter.md,
"Pipelining".
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
from aiozk.states import States

from actors.runtime.tracer import Tracer
from cluster.store.zk_client import CALL_FRACTION, AiozkSession, check_serialized
from cluster.store.zk_translate import FOREIGN_ERRORS, translate
from protocol.errors import ConnectionLossError, SessionExpiredError, StoreError

WINDOW = 1024
"""Pipelined requests in flight on one connection. Enough server work (about 70 ms of a
local server's at ~67 us per fenced multi) to keep the server busy while this process
waits for a core on a loaded machine: with 256 (about 17 ms), refilled at half, a bulk
deletion's phase 1 took twice the wall for the same server CPU at load 10, and a
DeleteTopics of 1,000 topics sent its markers in four windows that reached the server
between the controller's writes (docs/benchmarks.md, row [11])."""


@dataclass(frozen=True, slots=True)
class Pipeline:
    """What a pipelined batch is made of: how each item is traced (``op``, its ``path``
    and extra ``fields``), becomes a request, and turns its reply into its outcome, and
    how it is run alone while the session is not connected."""

    op: str
    path: Callable[[Any], str]
    fields: Callable[[Any], dict[str, Any]]
    request: Callable[[Any], Any]
    finish: Callable[[Any, Any], Any]
    lone: Callable[[Any], Awaitable[Any]]


class PipelineHost(Protocol):
    """What a pipelined batch needs of the session it runs in."""

    @property
    def kemu_zk(self) -> AiozkSession:
        """The aiozk session whose connection carries the batch."""

    def kemu_alive(self) -> bool:
        """Whether the session is alive for its owner (connected or suspended)."""

    def kemu_cancellable(self) -> AbstractContextManager[None]:
        """A block the session cancels (and ends quietly) when it expires or is closed."""

    def kemu_server_expired(self, path: str) -> StoreError:
        """The server said the session expired: expire it and return the error."""

    def kemu_unusable_error(self) -> StoreError:
        """The error of a call on a session that expired or was closed."""

    @property
    def tracer(self) -> Tracer:
        """The tracer ``trace`` emits to (checked first: ``Tracer.enabled``)."""

    def trace(self, op: str, path: str, result: str, **fields: Any) -> None: ...


class _Pipelined:
    """One request of a pipelined batch: its item, then its reply's future and connection
    once sent, then its outcome."""

    __slots__ = ("conn", "future", "item", "outcome", "path")

    def __init__(self, item: Any, path: str) -> None:
        self.item = item
        self.path = path  # where it is traced (a multi: its first op's, the epoch check)
        self.outcome: Any = None
        self.future: asyncio.Future[Any] | None = None
        self.conn: Any = None


async def run_pipeline(host: PipelineHost, items: list[Any], how: Pipeline) -> list[Any]:
    """Send ``items`` in order, many per socket write, with up to ``WINDOW`` awaiting their
    replies, and return their outcomes in order. A request whose connection is lost or
    whose reply is late fails with ``ConnectionLossError`` (outcome unknown), as a lone
    call does. While the session is not connected the next request goes alone
    (``how.lone``, which waits for the connection, bounded): if the connection comes back
    pipelining resumes, if not every request left fails so at once (none was sent). Once
    the session expires or is closed, the rest fail with that error."""
    zk = host.kemu_zk
    # The items not sent yet; each becomes a ``_Pipelined`` only when it is sent, so the
    # entries of a batch of thousands die young, a window at a time, instead of living
    # (and being promoted through the cyclic collector's generations) for the whole batch.
    todo = deque(items)
    outcomes: list[Any] = []
    inflight: deque[_Pipelined] = deque()
    with host.kemu_cancellable():
        while todo or inflight:
            if todo and len(inflight) <= WINDOW // 2:
                if host.kemu_alive() and zk.state == States.CONNECTED:
                    _send(zk, todo, inflight, how)
                elif not inflight:
                    outcome = await how.lone(todo.popleft())
                    outcomes.append(outcome)
                    if isinstance(outcome, ConnectionLossError) and zk.state != States.CONNECTED:
                        while todo:  # not sent: the connection did not come back
                            lost = _entry(todo.popleft(), how)
                            lost.outcome = ConnectionLossError(f"{lost.path}: {outcome}")
                            outcomes.append(_traced_outcome(host, lost, how))
                    continue
            entry = inflight.popleft()
            if entry.outcome is None:
                await _await_reply(host, entry, inflight, how)
            outcomes.append(_traced_outcome(host, entry, how))
    # the session expired or was closed meanwhile
    for entry in (*inflight, *(_entry(item, how) for item in todo)):
        if entry.outcome is None:
            entry.outcome = host.kemu_unusable_error()
            _abandon(entry)
        outcomes.append(_traced_outcome(host, entry, how))
    return outcomes


def _entry(item: Any, how: Pipeline) -> _Pipelined:
    return _Pipelined(item, how.path(item))


def _send(zk: AiozkSession, todo: deque[Any], inflight: deque[_Pipelined], how: Pipeline) -> None:
    """Send the next of ``todo`` up to the window, in one write. A request that cannot be
    sent (a bad path or op, too big) is decided at once, in its place."""
    conn = zk.conn
    frames: list[tuple[int, Any, bytes]] = []
    sent: list[_Pipelined] = []
    path, request_of = how.path, how.request
    while todo and len(inflight) < WINDOW:
        item = todo.popleft()
        entry = _Pipelined(item, path(item))
        inflight.append(entry)
        try:
            request = request_of(item)
            zk.xid = zk.xid + 1 if zk.xid < 0x7FFFFFFF else 1  # as aiozk's Session.send
            payload = request.serialize(zk.xid)
            check_serialized(len(payload))
        except StoreError as err:
            entry.outcome = err
            continue
        frames.append((zk.xid, request, payload))
        sent.append(entry)
    for entry, future in zip(sent, conn.send_pipelined(frames), strict=True):
        entry.future = future
        entry.conn = conn
    zk.set_heartbeat()  # as aiozk's Session.send after a reply: no ping while busy


async def _await_reply(
    host: PipelineHost, entry: _Pipelined, inflight: deque[_Pipelined], how: Pipeline
) -> None:
    """Await one pipelined request's reply, bounded as a lone call is, and decide its
    outcome. A late reply decides every request in flight behind it too (the server
    answers in order): lost, without waiting again."""
    zk = host.kemu_zk
    future = entry.future
    assert future is not None  # undecided means sent
    try:
        if not future.done():  # (replies often come in faster than they are handled)
            with anyio.fail_after(zk.timeout * CALL_FRACTION):
                await future
        _, response = future.result()
    except TimeoutError:
        late = f"no answer from ZooKeeper within {zk.timeout * CALL_FRACTION:.1f} s"
        for each in (entry, *inflight):
            if each.outcome is None:
                each.outcome = ConnectionLossError(f"{each.path}: {late}")
                _abandon(each)
        return
    except FOREIGN_ERRORS as exc:
        error = translate(exc, entry.path)
        if isinstance(error, SessionExpiredError):
            error = host.kemu_server_expired(entry.path)
        else:
            zk.kemu_request_failed(entry.conn, exc)
        entry.outcome = error
        return
    try:
        entry.outcome = how.finish(entry.item, response)
    except StoreError as err:
        entry.outcome = err


def _abandon(entry: _Pipelined) -> None:
    """Stop caring for a sent request's reply, decided without it: whatever the
    connection later does with its future (a late reply, or the error it fails its
    pending requests with when it closes) is retrieved, not reported by asyncio as an
    exception never retrieved."""
    if entry.future is not None:
        entry.future.add_done_callback(_retrieve)


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _traced_outcome(host: PipelineHost, entry: _Pipelined, how: Pipeline) -> Any:
    outcome = entry.outcome
    assert outcome is not None
    tracer = host.tracer
    if not tracer.enabled:  # counted, not built (``Tracer.skip``)
        tracer.skip()
        return outcome
    result = type(outcome).__name__ if isinstance(outcome, StoreError) else "ok"
    host.trace(how.op, entry.path, result, **how.fields(entry.item))
    return outcome
