"""The network's behaviour, identical over the in-process and the TCP transport."""

from __future__ import annotations

import random

import anyio
import anyio.lowlevel
import pytest

from actors.runtime.clock import RealClock
from actors.runtime.tracer import Tracer
from cluster.network import Delay, Drop, Duplicate, Match, Network, Reorder
from protocol.envelope import Envelope
from protocol.errors import NetworkError
from tests.support.network import (
    TRANSPORTS,
    Inbox,
    NetTestPing,
    NetTestPong,
    envelope,
    make_transport,
    ping,
    running,
)

pytestmark = [pytest.mark.asyncio, pytest.mark.parametrize("kind", TRANSPORTS)]


def pong(src: str, dst: str, seq: int) -> Envelope:
    return envelope(src, dst, NetTestPong(seq=seq))


class FlakyInbox(Inbox):
    """Raises on the first delivery, like a node whose mailbox is being torn down."""

    def __call__(self, env: Envelope) -> None:
        super().__call__(env)
        if len(self.received) == 1:
            raise RuntimeError("mailbox closed")


async def test_delivers_every_message_in_order_per_link(kind: str) -> None:
    """Messages on one link arrive in the order they were posted, and each is traced as one
    send and one deliver."""
    async with running(make_transport(kind), ["a", "b", "c"]) as c:
        for i in range(200):
            c.post(ping("a", "b", i))
            c.post(ping("c", "b", 1000 + i))
        await c.inboxes["b"].wait_for(400)
        assert c.inboxes["b"].seqs_from("a") == list(range(200))
        assert c.inboxes["b"].seqs_from("c") == list(range(1000, 1200))
        assert len(c.events("send")) == len(c.events("deliver")) == 400
        first = c.events("deliver")[0]
        assert first.node == "b"
        assert first.type == "NetTestPing"
        assert first.fields["src"] in {"a/actor", "c/actor"}
        assert first.fields["dst"] == "b/actor"


async def test_ask_keeps_its_correlation_id(kind: str) -> None:
    """An envelope arrives equal to the one posted: addresses, kind, corr and payload."""
    async with running(make_transport(kind), ["a", "b"]) as c:
        sent = envelope("a", "b", NetTestPing(seq=7, note="é ☃"), corr=42)
        c.post(sent)
        await c.inboxes["b"].wait_for(1)
        assert c.inboxes["b"].received == [sent]
        (event,) = c.events("deliver")
        assert event.corr == 42
        assert event.fields["env_kind"] == "ask"


async def test_messages_within_a_node_ignore_fault_rules(kind: str) -> None:
    """Actors of one node talk to each other even when every inter-node message is dropped,
    and those messages are still traced."""
    async with running(make_transport(kind), ["a", "b"]) as c:
        c.network.add_rule(Drop())
        c.network.partition({"a"}, {"b"})
        c.post(ping("a", "a", 1))
        c.post(ping("a", "b", 2))
        await c.inboxes["a"].wait_for(1)
        await c.wait_settled()
        assert c.inboxes["a"].seqs == [1]
        assert c.inboxes["b"].seqs == []
        assert [e.kind for e in c.events() if e.kind in {"send", "deliver", "drop"}] == [
            "send",
            "deliver",
            "send",
            "drop",
        ]


async def test_drop_rule_filters_by_type(kind: str) -> None:
    """A Drop rule limited to one payload type loses only messages of that type, traced
    with the id of the rule."""
    async with running(make_transport(kind), ["a", "b"]) as c:
        rule_id = c.network.add_rule(Drop(match=Match.where(types=NetTestPing)))
        c.post(ping("a", "b", 1))
        c.post(pong("a", "b", 2))
        await c.inboxes["b"].wait_for(1)
        await c.wait_settled()
        assert [type(e.payload) for e in c.inboxes["b"].received] == [NetTestPong]
        (drop,) = c.events("drop")
        assert drop.type == "NetTestPing"
        assert drop.fields["reason"] == "drop_rule"
        assert drop.fields["rule"] == rule_id


async def test_drop_rule_filters_by_source_and_destination(kind: str) -> None:
    """Drop rules limited to a source or a destination node leave other links alone."""
    async with running(make_transport(kind), ["a", "b", "c"]) as c:
        c.network.add_rule(Drop(match=Match.where(src="a", dst="b")))
        c.network.add_rule(Drop(match=Match(dst=frozenset({"c"}), src=frozenset({"b"}))))
        c.post(ping("a", "b", 1))  # dropped
        c.post(ping("b", "a", 2))
        c.post(ping("a", "c", 3))
        c.post(ping("b", "c", 4))  # dropped
        c.post(ping("c", "b", 5))
        await c.wait_settled()
        assert c.inboxes["a"].seqs == [2]
        assert c.inboxes["b"].seqs == [5]
        assert c.inboxes["c"].seqs == [3]
        assert sorted(e.fields["rule"] for e in c.events("drop")) == [1, 2]


async def test_delay_lets_later_messages_overtake(kind: str) -> None:
    """A delayed message arrives after undelayed ones posted later, and not before its
    delay has passed."""
    async with running(make_transport(kind), ["a", "b"]) as c:
        c.network.add_rule(Delay(seconds=0.05, match=Match.where(types=NetTestPong)))
        c.post(pong("a", "b", 0))
        c.post(ping("a", "b", 1))
        c.post(ping("a", "b", 2))
        await c.inboxes["b"].wait_for(3)
        assert c.inboxes["b"].seqs == [1, 2, 0]
        sent = c.events("send", "NetTestPong")[0]
        delivered = c.events("deliver", "NetTestPong")[0]
        assert sent.fields["delay"] == 0.05
        assert delivered.ts - sent.ts >= 0.05 - 1e-6


async def test_duplicate_delivers_twice(kind: str) -> None:
    """A Duplicate rule delivers a message twice; the copy is traced as a send of its own."""
    async with running(make_transport(kind), ["a", "b"]) as c:
        c.network.add_rule(Duplicate(probability=1.0))
        c.post(ping("a", "b", 1))
        c.post(ping("a", "b", 2))
        await c.inboxes["b"].wait_for(4)
        assert c.inboxes["b"].seqs == [1, 1, 2, 2]
        sends = c.events("send")
        assert [e.fields.get("duplicate") for e in sends] == [None, 1, None, 1]
        assert len(c.events("deliver")) == 4


async def test_reorder_lets_the_window_overtake(kind: str) -> None:
    """A held message goes out right after the next ``window`` messages on its link; other
    links are not held up by it."""
    async with running(make_transport(kind), ["a", "b", "c"]) as c:
        c.network.add_rule(Reorder(window=2, max_hold=30, match=Match.where(types=NetTestPong)))
        c.post(pong("a", "b", 0))
        c.post(ping("a", "c", 10))  # another link: does not count
        c.post(ping("a", "b", 1))
        c.post(ping("a", "b", 2))
        c.post(ping("a", "b", 3))
        await c.inboxes["b"].wait_for(4)
        await c.inboxes["c"].wait_for(1)
        assert c.inboxes["b"].seqs == [1, 2, 0, 3]
        assert c.events("send", "NetTestPong")[0].fields["hold"] == 2


async def test_reorder_releases_a_held_message_on_a_quiet_link(kind: str) -> None:
    """A held message is released after ``max_hold`` even if no later message follows."""
    async with running(make_transport(kind), ["a", "b"]) as c:
        c.network.add_rule(Reorder(window=5, max_hold=0.02))
        c.post(ping("a", "b", 1))
        await c.inboxes["b"].wait_for(1)
        assert c.network.waiting == 0


async def test_partition_cuts_both_ways_until_healed(kind: str) -> None:
    """Nodes in different groups cannot talk either way, nodes outside the partition can,
    and after ``heal`` everyone can."""
    async with running(make_transport(kind), ["a", "b", "c"]) as c:
        c.network.partition({"a"}, {"b"})
        c.post(ping("a", "b", 1))
        c.post(ping("b", "a", 2))
        c.post(ping("a", "c", 3))
        c.post(ping("c", "b", 4))
        await c.wait_settled()
        assert [e.fields["reason"] for e in c.events("drop")] == ["partition", "partition"]
        assert c.inboxes["c"].seqs == [3]
        assert c.inboxes["b"].seqs == [4]
        assert c.inboxes["a"].seqs == []
        c.network.heal()
        c.post(ping("a", "b", 5))
        c.post(ping("b", "a", 6))
        await c.inboxes["a"].wait_for(1)
        await c.inboxes["b"].wait_for(2)
        assert c.inboxes["b"].seqs == [4, 5]
        assert c.inboxes["a"].seqs == [6]
        assert [e.type for e in c.events("fault")] == ["add_rule", "heal"]
        assert c.events("fault")[0].fields["rule"] == {
            "type": "Partition",
            "groups": (["a"], ["b"]),
        }


async def test_rules_change_while_running(kind: str) -> None:
    """Rules added and removed at run time apply to messages posted afterwards, and each
    change is traced as a fault."""
    async with running(make_transport(kind), ["a", "b"]) as c:
        first = c.network.add_rule(Drop(match=Match.where(types="NetTestPing")))
        c.network.add_rule(Drop(match=Match.where(types="NetTestPong")))
        c.post(ping("a", "b", 1))
        c.post(pong("a", "b", 2))
        await c.wait_settled()
        c.network.remove_rule(first)
        c.post(ping("a", "b", 3))
        c.post(pong("a", "b", 4))
        await c.inboxes["b"].wait_for(1)
        await c.wait_settled()
        c.network.clear_rules()
        c.post(pong("a", "b", 5))
        await c.inboxes["b"].wait_for(2)
        assert c.inboxes["b"].seqs == [3, 5]
        assert [e.type for e in c.events("fault")] == [
            "add_rule",
            "add_rule",
            "remove_rule",
            "clear_rules",
        ]
        assert c.events("fault")[3].fields["rule_ids"] == [2]
        assert dict(c.network.rules) == {}
        with pytest.raises(KeyError):
            c.network.remove_rule(first)


async def test_messages_to_unknown_nodes_are_dropped_and_traced(kind: str) -> None:
    """A message to a node nobody attached is dropped with reason unknown_destination."""
    async with running(make_transport(kind), ["a"]) as c:
        c.post(ping("a", "nowhere", 1))
        drop = await c.wait_drop("unknown_destination")
        assert drop.node == "a"
        assert drop.fields["dst"] == "nowhere/actor"


async def test_detached_node_gets_nothing_more(kind: str) -> None:
    """After a node closes its endpoint, messages to it are dropped as unknown_destination
    and its own endpoint refuses to send."""
    async with running(make_transport(kind), ["a", "b"]) as c:
        c.post(ping("a", "b", 1))
        await c.inboxes["b"].wait_for(1)
        c.endpoints["b"].close()
        assert c.endpoints["b"].closed
        assert "b" not in c.network.nodes
        c.post(ping("a", "b", 2))
        await c.wait_drop("unknown_destination")
        c.endpoints["b"].post(ping("b", "a", 3))
        await c.wait_drop("source_detached")
        assert c.inboxes["b"].seqs == [1]
        assert c.inboxes["a"].seqs == []
        assert [e.node for e in c.events("event", "detach")] == ["b"]


async def test_a_detached_node_can_attach_again(kind: str) -> None:
    """A node that detached and attached again receives messages posted afterwards."""
    async with running(make_transport(kind), ["a", "b"]) as c:
        c.endpoints["b"].close()
        await c.attach("b")
        c.post(ping("a", "b", 1))
        await c.inboxes["b"].wait_for(1)


async def test_delayed_message_to_a_node_gone_meanwhile_is_dropped(kind: str) -> None:
    """A message delayed past its destination's detach is dropped, not delivered late."""
    async with running(make_transport(kind), ["a", "b"]) as c:
        c.network.add_rule(Delay(seconds=0.05))
        c.post(ping("a", "b", 1))
        c.endpoints["b"].close()
        await c.wait_drop("unknown_destination")
        assert c.inboxes["b"].seqs == []


async def test_stopping_the_network_drops_what_waits(kind: str) -> None:
    """Messages still delayed when the network stops are traced as dropped, and posting
    afterwards drops with reason network_stopped."""
    async with running(make_transport(kind), ["a", "b"]) as c:
        c.network.add_rule(Delay(seconds=60))
        c.post(ping("a", "b", 1))
        assert c.network.waiting == 1
    assert [e.fields["reason"] for e in c.events("drop")] == ["network_stopped"]
    c.endpoints["a"].post(ping("a", "b", 2))
    assert [e.fields["reason"] for e in c.events("drop")] == ["network_stopped"] * 2
    assert not c.network.running


async def test_a_failing_delivery_callback_is_contained(kind: str) -> None:
    """A delivery callback that raises is traced as an error; the sender is unaffected and
    later messages still arrive."""
    async with running(make_transport(kind), ["a", "b"]) as c:
        flaky = FlakyInbox()
        await c.network.attach("f", flaky)
        c.post(ping("a", "f", 1))
        await c.wait_event(lambda e: e.type == "deliver_failed")
        c.post(ping("a", "f", 2))
        c.post(ping("a", "b", 3))
        await flaky.wait_for(2)
        await c.inboxes["b"].wait_for(1)
        assert flaky.seqs == [1, 2]
        (error,) = c.events("error")
        assert error.node == "f"
        assert "mailbox closed" in error.fields["detail"]


async def test_attach_and_post_misuse_is_refused(kind: str) -> None:
    """Attaching a node twice and posting from another node's endpoint are errors."""
    async with running(make_transport(kind), ["a"]) as c:
        with pytest.raises(NetworkError):
            await c.network.attach("a", c.inboxes["a"])
        with pytest.raises(ValueError, match="cannot post from"):
            c.endpoints["a"].post(ping("b", "a", 1))
        with pytest.raises(TypeError, match="not a fault rule"):
            c.network.add_rule(Match())  # type: ignore[arg-type]


async def test_the_network_also_runs_as_a_context_manager(kind: str) -> None:
    """``async with network:`` runs it for the block and stops it on the way out."""
    network = Network(
        make_transport(kind), tracer=Tracer(), rng=random.Random(0), clock=RealClock()
    )
    inbox = Inbox()
    async with network:
        a = await network.attach("a", Inbox())
        await network.attach("b", inbox)
        a.post(ping("a", "b", 1))
        await inbox.wait_for(1)
        with pytest.raises(NetworkError):
            await network.__aenter__()
    assert not network.running
    assert a.closed


async def test_a_node_can_detach_while_being_cancelled(kind: str) -> None:
    """Closing an endpoint from the cleanup of a cancelled node needs no await and takes
    the node off the network at once."""
    async with running(make_transport(kind), ["a"]) as c:
        endpoint = await c.network.attach("b", Inbox())

        async def node() -> None:
            try:
                await anyio.sleep_forever()
            finally:
                endpoint.close()

        async with anyio.create_task_group() as tg:
            tg.start_soon(node)
            await anyio.lowlevel.checkpoint()
            tg.cancel_scope.cancel()
        assert "b" not in c.network.nodes
        c.post(ping("a", "b", 1))
        await c.wait_drop("unknown_destination")
