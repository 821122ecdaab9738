"""``kemu demo``: a live smoke demo of the foundation.

Three broker nodes and a store node on one in-process network. The store node serves the
embedded store (``StoreServer``); each broker opens its own session through the network
(``RemoteStore``), registers ``/brokers/ids/<id>`` as an ephemeral node with Kafka 2.7's
JSON, and broker 0 watches the registrations. Then the network is partitioned and healed,
and broker 2 crashes: its heartbeats stop, the store expires its session after the
timeout, its ephemeral vanishes, and broker 0's watch reports it — ZooKeeper's behaviour,
not a scripted print. Everything is traced to a JSONL file.

It shows the runtime, the network and the store alone, with no controller; the whole
cluster's demo is ``scripts/demo.sh`` (``kemu up`` and ``kemu topics``).
"""

from __future__ import annotations

import contextlib
import random
from collections import Counter
from pathlib import Path

import anyio

from actors.runtime.actor import Actor, Context, Node
from actors.runtime.clock import Clock, RealClock, VirtualClock, run_real, run_virtual
from actors.runtime.tracer import Tracer
from cluster.network import InProcessTransport, Network
from cluster.store.embedded import EmbeddedStore
from cluster.store.remote import RemoteStore, StoreServer
from cluster.trace_files import JsonlTraceWriter
from protocol import zkdata
from protocol.base import Message
from protocol.control import Endpoint, SecurityProtocol
from protocol.errors import AskTimeoutError, NodeExistsError
from protocol.ids import BrokerId
from protocol.store import SessionEvent, StoreEvent, WatchEvent
from protocol.trace import TraceHeader

SESSION_TIMEOUT = 1.5
BASE_PORT = 9092


class DemoPing(Message, frozen=True, kw_only=True):
    sender: int


class DemoPong(Message, frozen=True, kw_only=True):
    responder: int


class _Printer:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.t0 = 0.0

    def start(self) -> None:
        self.t0 = self.clock.now()

    def __call__(self, who: str, text: str) -> None:
        print(f"[{self.clock.now() - self.t0:8.3f}s] {who:<9} {text}", flush=True)


class DemoBroker(Actor):
    """Registers itself in the store and answers pings; broker 0 also watches the others."""

    def __init__(self, broker_id: int, store: RemoteStore, say: _Printer) -> None:
        super().__init__("broker")
        self.broker_id = broker_id
        self.store = store
        self.say = say

    async def on_start(self) -> None:
        session = await self.store.open_session(timeout=SESSION_TIMEOUT, name=self.node.node_id)
        registration = zkdata.BrokerRegistration(
            endpoints=(
                Endpoint(
                    host="127.0.0.1",
                    port=BASE_PORT + self.broker_id,
                    listener="PLAINTEXT",
                    security_protocol=SecurityProtocol.PLAINTEXT,
                ),
            ),
            timestamp=self.clock.wall_ms(),
        )
        path = zkdata.broker_path(BrokerId(self.broker_id))
        if await session.exists(zkdata.BROKER_IDS_PATH) is None:
            with contextlib.suppress(NodeExistsError):  # another broker was first
                await session.create(zkdata.BROKER_IDS_PATH, make_parents=True)
        await session.create(path, registration.encode(), ephemeral=True)
        _, stat = await session.get(path)
        self.say(
            self.node.node_id,
            f"registered {path} (session {session.session_id}, broker epoch = czxid {stat.czxid})",
        )
        if self.broker_id == 0:
            self.start_soon(self._watch_brokers, session)

    async def _watch_brokers(self, session: object) -> None:
        """Re-read and re-arm the child watch on /brokers/ids after every event, as Kafka's
        controller does; print what it sees."""
        from actors.zk.store import StoreSession

        assert isinstance(session, StoreSession)
        while True:
            ids = await session.children(zkdata.BROKER_IDS_PATH, watch=True)
            self.say(self.node.node_id, f"watch: /brokers/ids children = [{', '.join(ids)}]")
            event: StoreEvent = await session.events.receive()
            while not isinstance(event, WatchEvent):
                assert isinstance(event, SessionEvent)
                event = await session.events.receive()

    async def receive(self, msg: Message, ctx: Context) -> Message | None:
        if isinstance(msg, DemoPing):
            return DemoPong(responder=self.broker_id)
        return None


async def _demo(brokers: int, seed: int, clock: Clock, trace_path: Path) -> int:
    tracer = Tracer()
    say = _Printer(clock)
    header = TraceHeader(
        run="demo", seed=seed, clock="virtual" if isinstance(clock, VirtualClock) else "real"
    )
    with JsonlTraceWriter(trace_path, header) as writer:
        tracer.add_sink(writer)
        counts: Counter[str] = Counter()
        tracer.add_sink(lambda e: counts.update([e.kind]))
        network = Network(InProcessTransport(), tracer=tracer, rng=random.Random(seed), clock=clock)
        async with anyio.create_task_group() as tg:
            await tg.start(network.run)
            tracer.rebase()
            say.start()
            print(
                f"kemu demo: {brokers} broker nodes + a store node on an in-process network, "
                f"seed {seed}, {header.clock} clock"
            )
            store_node = Node("store", attach=network.attach, tracer=tracer, clock=clock, seed=seed)
            embedded = EmbeddedStore(tracer=tracer, clock=clock, node="store")
            server = StoreServer(embedded, tick=0.25)
            await tg.start(store_node.run, [server])
            say("store", "embedded store served by a StoreServer actor")

            nodes: list[Node] = []
            for i in range(brokers):
                node = Node(
                    f"broker-{i}", attach=network.attach, tracer=tracer, clock=clock, seed=seed
                )
                remote = RemoteStore(node, server.ref)
                await tg.start(node.run, [DemoBroker(i, remote, say)])
                nodes.append(node)
            refs = [n.actor("broker").ref for n in nodes]

            for ref in refs[1:]:
                reply = await nodes[0].ask(ref, DemoPing(sender=0), timeout=1.0)
                assert isinstance(reply, DemoPong)
                say("broker-0", f"ask {ref}: DemoPong from broker {reply.responder}")

            last = f"broker-{brokers - 1}"
            rest = {n.node_id for n in nodes[:-1]} | {"store"}
            rule = network.partition(rest, {last})
            say("network", f"partition {sorted(rest)} | [{last}]")
            try:
                await nodes[0].ask(refs[-1], DemoPing(sender=0), timeout=0.2)
            except AskTimeoutError as exc:
                say("broker-0", f"ask {refs[-1]}: {exc}")
            network.remove_rule(rule)
            say("network", "healed")
            reply = await nodes[0].ask(refs[-1], DemoPing(sender=0), timeout=1.0)
            say("broker-0", f"ask {refs[-1]}: DemoPong from {getattr(reply, 'responder', '?')}")

            say(last, "CRASH: no graceful step, its store session is left to expire")
            nodes[-1].crash()
            gone = zkdata.broker_path(BrokerId(brokers - 1))
            probe = await embedded.open_session(name="demo-probe")
            with anyio.fail_after(SESSION_TIMEOUT * 4 / clock.rate):
                while await probe.exists(gone, watch=True) is not None:
                    await probe.events.receive()
            say("store", f"{gone} is gone: session expired after {SESSION_TIMEOUT}s of silence")
            data, _ = await probe.get(zkdata.broker_path(BrokerId(0)))
            say("store", f"{zkdata.broker_path(BrokerId(0))} = {data.decode()}")
            await probe.close()
            # Give broker-0's watcher its turn to print the last change.
            await nodes[0].ask(refs[0], DemoPing(sender=0), timeout=1.0)

            for node in nodes[:-1]:
                node.stop()
            store_node.stop()
            tg.cancel_scope.cancel()
    summary = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    print(f"trace: {sum(counts.values())} events ({summary}) in {trace_path}")
    return 0


def run_demo(
    *, brokers: int = 3, seed: int = 1, virtual: bool = False, trace: str | None = None
) -> int:
    if brokers < 2:
        raise ValueError("the demo needs at least 2 brokers")
    trace_path = Path(trace or ".kemu/demo-trace.jsonl")
    if virtual:
        return run_virtual(lambda: _demo(brokers, seed, VirtualClock(), trace_path))
    return run_real(lambda: _demo(brokers, seed, RealClock(), trace_path))
