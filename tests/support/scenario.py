"""A small multi-actor scenario with random delays, drops, duplicates and reorders, used by
the determinism tests: run it with a seed, get the trace bytes back.

Four nodes gossip counters to random peers (ask and tell), each write lands in the embedded
store, partitions come and go, and one node crashes mid-way. All randomness comes from the
node RNGs and the network RNG; all time from the virtual clock.
"""

from __future__ import annotations

import contextlib
import io
import random
import sys

import anyio
import msgspec

from actors.runtime.actor import Actor, Context, Node
from actors.runtime.clock import VirtualClock, run_virtual
from actors.runtime.tracer import Tracer
from actors.zk.store import StoreSession
from cluster.network import Delay, Drop, Duplicate, InProcessTransport, Match, Network, Reorder
from cluster.store.embedded import EmbeddedStore
from protocol.base import ActorRef, Message
from protocol.errors import AskTimeoutError, RemoteError
from protocol.trace import TraceEvent

NODES = 4
ROUNDS = 40


class GossipBump(Message, frozen=True, kw_only=True):
    origin: str
    value: int


class GossipAck(Message, frozen=True, kw_only=True):
    total: int


class Gossiper(Actor):
    def __init__(self, session: StoreSession) -> None:
        super().__init__("gossip")
        self.session = session
        self.total = 0

    async def receive(self, msg: Message, ctx: Context) -> Message | None:
        if isinstance(msg, GossipBump):
            self.total += msg.value
            path = f"/gossip/{self.node.node_id}"
            await self.session.set(path, str(self.total).encode())
            return GossipAck(total=self.total)
        return None


async def _talk(node: Node, peers: list[ActorRef], rounds: int) -> None:
    for _ in range(rounds):
        await node.clock.sleep(node.rng.uniform(0.0, 0.05))
        peer = node.rng.choice(peers)
        bump = GossipBump(origin=node.node_id, value=node.rng.randint(1, 9))
        if node.rng.random() < 0.5:
            node.tell(peer, bump)
            continue
        with contextlib.suppress(AskTimeoutError, RemoteError):  # lost asks are the point
            await node.ask(peer, bump, timeout=0.2)


async def run_scenario(seed: int) -> bytes:
    tracer = Tracer()
    out = io.BytesIO()
    encoder = msgspec.json.Encoder()

    def sink(event: TraceEvent) -> None:
        out.write(encoder.encode(event) + b"\n")

    tracer.add_sink(sink)
    clock = VirtualClock()
    network = Network(InProcessTransport(), tracer=tracer, rng=random.Random(seed), clock=clock)
    store = EmbeddedStore(tracer=tracer, clock=clock)
    setup = await store.open_session(name="setup")
    await setup.create("/gossip")
    names = [f"n{i}" for i in range(NODES)]
    async with anyio.create_task_group() as tg:
        await tg.start(network.run)
        network.add_rule(Delay(seconds=0.001, jitter=0.02))
        network.add_rule(Drop(probability=0.1, match=Match(types=frozenset({"GossipBump"}))))
        network.add_rule(Duplicate(probability=0.05))
        network.add_rule(Reorder(probability=0.1, window=2, max_hold=0.05))
        nodes: list[Node] = []
        for name in names:
            session = await store.open_session(name=name)
            await session.create(f"/gossip/{name}", b"0", ephemeral=True)
            node = Node(name, attach=network.attach, tracer=tracer, clock=clock, seed=seed)
            await tg.start(node.run, [Gossiper(session)])
            nodes.append(node)
        refs = [n.actor("gossip").ref for n in nodes]
        async with anyio.create_task_group() as talkers:
            for node in nodes:
                peers = [r for r in refs if r.node != node.node_id]
                talkers.start_soon(_talk, node, peers, ROUNDS)
            await clock.sleep(0.3)
            rule = network.partition(names[:2], names[2:])
            await clock.sleep(0.2)
            network.remove_rule(rule)
            await clock.sleep(0.2)
            nodes[-1].crash()
            await store.expire_session(NODES + 1)  # the crashed node's session (ids from 1)
        for node in nodes[:-1]:
            node.stop()
        tg.cancel_scope.cancel()
    for name in names:
        data_stat = await setup.exists(f"/gossip/{name}")
        tracer.emit("event", node="check", type="final", path=name, alive=data_stat is not None)
    await store.aclose()
    return out.getvalue()


def scenario_trace(seed: int) -> bytes:
    return run_virtual(lambda: run_scenario(seed))


if __name__ == "__main__":  # used by the cross-process determinism test
    sys.stdout.buffer.write(scenario_trace(int(sys.argv[1])))
