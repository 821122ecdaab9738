"""Test payloads, a recording delivery callback and helpers to run networks in tests."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import msgspec

from actors.runtime.clock import Clock, RealClock
from actors.runtime.tracer import MemorySink, Tracer
from cluster.network import Endpoint, InProcessTransport, Network, TcpTransport, Transport
from protocol.base import ActorRef, Message
from protocol.envelope import Envelope, EnvelopeKind
from protocol.trace import TraceEvent

TRANSPORTS = ("inproc", "tcp")
WAIT = 5.0  # seconds a test waits for a condition before failing


class NetTestPing(Message, frozen=True, kw_only=True):
    seq: int
    note: str = ""


class NetTestPong(Message, frozen=True, kw_only=True):
    seq: int


class NetTestBulk(Message, frozen=True, kw_only=True):
    data: bytes


def make_transport(kind: str, **options: int | float) -> Transport:
    if kind == "inproc":
        return InProcessTransport()
    if kind == "tcp":
        return TcpTransport(**options)  # type: ignore[arg-type]
    raise ValueError(kind)


def envelope(
    src: str, dst: str, payload: Message, *, corr: int = 0, actor: str = "actor"
) -> Envelope:
    return Envelope(
        src=ActorRef(src, actor),
        dst=ActorRef(dst, actor),
        corr=corr,
        kind=EnvelopeKind.TELL if corr == 0 else EnvelopeKind.ASK,
        payload=payload,
    )


def ping(src: str, dst: str, seq: int, *, note: str = "") -> Envelope:
    return envelope(src, dst, NetTestPing(seq=seq, note=note))


def seqs(envelopes: Iterable[Envelope]) -> list[int]:
    return [e.payload.seq for e in envelopes if isinstance(e.payload, NetTestPing | NetTestPong)]


class Inbox:
    """A node's delivery callback that records what it gets; tests wait on it for up to
    ``deadline`` seconds (of the loop's clock: virtual seconds in a simulation)."""

    def __init__(self, deadline: float = WAIT) -> None:
        self.received: list[Envelope] = []
        self.deadline = deadline
        self._changed = anyio.Event()

    def __call__(self, env: Envelope) -> None:
        self.received.append(env)
        self._changed.set()

    @property
    def seqs(self) -> list[int]:
        """The ``seq`` of every ping and pong received, in arrival order."""
        return seqs(self.received)

    def seqs_from(self, node: str) -> list[int]:
        return seqs(e for e in self.received if e.src.node == node)

    async def wait_until(self, condition: Callable[[Inbox], bool]) -> None:
        with anyio.fail_after(self.deadline):
            while not condition(self):
                self._changed = anyio.Event()
                await self._changed.wait()

    async def wait_for(self, count: int) -> None:
        """Until at least ``count`` envelopes have arrived."""
        await self.wait_until(lambda inbox: len(inbox.received) >= count)


@dataclass
class Cluster:
    """A running network, its trace and the attached nodes; waits last up to ``deadline``."""

    network: Network
    sink: MemorySink
    deadline: float = WAIT
    endpoints: dict[str, Endpoint] = field(default_factory=dict)
    inboxes: dict[str, Inbox] = field(default_factory=dict)

    async def attach(self, node: str) -> Endpoint:
        inbox = Inbox(self.deadline)
        endpoint = await self.network.attach(node, inbox)
        self.endpoints[node], self.inboxes[node] = endpoint, inbox
        return endpoint

    def post(self, env: Envelope) -> None:
        self.endpoints[env.src.node].post(env)

    def events(self, kind: str | None = None, type: str | None = None) -> list[TraceEvent]:
        return self.sink.of(kind, type)

    async def wait_event(self, predicate: Callable[[TraceEvent], bool]) -> TraceEvent:
        """Until a traced event (past or future) matches."""
        return await self.sink.wait_for(predicate, self.deadline)

    async def wait_drop(self, reason: str) -> TraceEvent:
        return await self.wait_event(
            lambda e: e.kind == "drop" and e.fields.get("reason") == reason
        )

    async def wait_settled(self) -> None:
        """Until every traced send has its deliver or drop (nothing is still on its way)."""

        def balanced(_: TraceEvent) -> bool:
            sends = len(self.sink.of("send"))
            return sends == len(self.sink.of("deliver")) + len(self.sink.of("drop"))

        await self.sink.wait_for(balanced, self.deadline)


@asynccontextmanager
async def running(
    transport: Transport,
    nodes: Sequence[str] = (),
    *,
    seed: int = 0,
    clock: Clock | None = None,
    tracer: Tracer | None = None,
    name: str = "network",
    deadline: float = WAIT,
) -> AsyncIterator[Cluster]:
    """A network started in a task group of the test, with ``nodes`` attached; stopped by
    cancelling that group on the way out."""
    sink = MemorySink()
    if tracer is None:
        tracer = Tracer()
    tracer.add_sink(sink)
    network = Network(
        transport, tracer=tracer, rng=random.Random(seed), clock=clock or RealClock(), name=name
    )
    async with anyio.create_task_group() as tg:
        await tg.start(network.run)
        cluster = Cluster(network, sink, deadline)
        for node in nodes:
            await cluster.attach(node)
        yield cluster
        tg.cancel_scope.cancel()


def trace_lines(events: Sequence[TraceEvent]) -> list[bytes]:
    return [msgspec.json.encode(e) for e in events]
