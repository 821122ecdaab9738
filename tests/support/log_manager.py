"""A log manager on a node of its own, for the tests of ``actors.log.manager``: the node
(on a virtual clock unless told otherwise), a recorder as its failure listener, and a
``Harness`` of shortcuts a test body gets."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio

from actors.log.manager import DEFAULT_CHECKPOINT_INTERVAL, LogManager
from actors.runtime.actor import Actor, Context, Node
from actors.runtime.clock import Clock, VirtualClock, run_virtual
from actors.runtime.tracer import MemorySink, Tracer
from protocol.base import ActorRef, Message
from protocol.ids import BrokerId, TopicName
from protocol.log import (
    CheckpointBrokerMetadata,
    DeleteLog,
    GetLogDirStatus,
    GetOrCreateLog,
    ListLogs,
    LogCreated,
    LogDeleted,
    LogDirStatus,
    LogListing,
)
from protocol.trace import TraceEvent
from tests.support.wire import DirectWire

CLUSTER_ID = "Nk018hRAQFytWskYqtQduw"
DELETE_NAME = re.compile(r"^(?P<tp>.+)\.(?P<id>[0-9a-f]{32})-delete$")

Body = Callable[["Harness"], Awaitable[None]]


class Recorder(Actor):
    """Keeps every message it is told (the log manager's failure listener)."""

    def __init__(self) -> None:
        super().__init__("recorder")
        self.seen: list[Message] = []

    async def receive(self, msg: Message, ctx: Context) -> Message | None:
        self.seen.append(msg)
        return None


class Harness:
    """What a test body gets: the node, its log manager, the trace and a few shortcuts."""

    def __init__(self, node: Node, lm: LogManager, sink: MemorySink, recorder: Recorder) -> None:
        self.node = node
        self.lm = lm
        self.sink = sink
        self.recorder = recorder

    def now(self) -> float:
        return self.node.clock.now()

    async def sleep_until(self, t: float) -> None:
        await self.node.clock.sleep(t - self.now())

    async def create(
        self,
        topic: str,
        partition: int = 0,
        *,
        is_new: bool = True,
        leader_epoch: int | None = None,
    ) -> LogCreated:
        reply = await self.node.ask(
            self.lm.ref,
            GetOrCreateLog(
                topic=TopicName(topic),
                partition=partition,
                is_new=is_new,
                leader_epoch=leader_epoch,
            ),
        )
        assert isinstance(reply, LogCreated)
        return reply

    async def delete(self, topic: str, partition: int = 0) -> LogDeleted:
        reply = await self.node.ask(
            self.lm.ref, DeleteLog(topic=TopicName(topic), partition=partition)
        )
        assert isinstance(reply, LogDeleted)
        return reply

    async def listing(self) -> LogListing:
        reply = await self.node.ask(self.lm.ref, ListLogs())
        assert isinstance(reply, LogListing)
        return reply

    async def dir_status(self) -> LogDirStatus:
        reply = await self.node.ask(self.lm.ref, GetLogDirStatus())
        assert isinstance(reply, LogDirStatus)
        return reply

    def log_dir_events(self, op: str) -> list[TraceEvent]:
        return self.sink.of("log_dir", op)

    async def checkpointed(self, at: float = DEFAULT_CHECKPOINT_INTERVAL) -> None:
        """Wait (virtual time) for the checkpoint writes of the timer due at ``at``."""
        await self.sink.wait_for(
            lambda e: e.kind == "log_dir" and e.type == "checkpoint" and e.ts >= at, 600.0
        )

    async def removed(self, name: str, timeout: float = 600.0) -> TraceEvent:
        """Wait (virtual time) for the successful removal of the ``-delete`` dir ``name``."""
        return await self.sink.wait_for(
            lambda e: (
                e.kind == "log_dir"
                and e.type == "remove"
                and e.fields["result"] == "ok"
                and Path(e.fields["dir"]).name == name
            ),
            timeout,
        )


async def run_broker(
    dirs: Sequence[Path],
    body: Body,
    *,
    seed: int = 0,
    node_id: str = "broker-0",
    clock: Clock | None = None,
    **config: Any,
) -> None:
    """Start a node with a recorder and a log manager over ``dirs``, run ``body``, stop.
    The node runs on ``clock`` (by default a virtual one: a deterministic run)."""
    wire = DirectWire()
    sink = MemorySink()
    tracer = Tracer()
    tracer.add_sink(sink)
    node = Node(
        node_id, attach=wire.attach, clock=clock or VirtualClock(), tracer=tracer, seed=seed
    )
    recorder = Recorder()
    config.setdefault("failure_listener", ActorRef(node_id, recorder.name))
    lm = LogManager(dirs, broker_id=BrokerId(0), cluster_id=CLUSTER_ID, **config)
    async with anyio.create_task_group() as tg:
        await tg.start(node.run, [recorder, lm])
        await node.ask(lm.ref, CheckpointBrokerMetadata())  # as the broker, once registered
        await body(Harness(node, lm, sink, recorder))
        node.stop()


def log_dirs(tmp_path: Path, n: int = 3) -> list[Path]:
    return [tmp_path / f"data{i}" for i in range(n)]


def sim(fn: Callable[[], Awaitable[None]]) -> None:
    run_virtual(fn)
