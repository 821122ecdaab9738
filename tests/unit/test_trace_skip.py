"""Tracing with no sink listening skips building events but still counts them: an actor's
``trace`` and the controller's state-change log number events exactly as if every one had
been emitted, so a sink attached later sees the same sequence numbers."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest
import structlog

from actors.controller import state_change_log
from actors.controller.state_change_log import StateChangeLogger
from actors.runtime.actor import Actor, Context, Node
from actors.runtime.clock import VirtualClock, run_virtual
from actors.runtime.tracer import MemorySink, Tracer
from protocol.base import Message
from protocol.control import TopicPartition
from protocol.ids import TopicName
from tests.support.wire import DirectWire


class Quiet(Actor):
    async def receive(self, msg: Message, ctx: Context) -> Message | None:
        return None


def test_an_actor_traces_nothing_unheard_but_keeps_the_numbering() -> None:
    """Three events with no sink are counted; the first one a sink hears has the number
    it would have had with a sink from the start, and its fields in full."""

    async def body() -> None:
        tracer = Tracer()
        node = Node("n1", attach=DirectWire().attach, clock=VirtualClock(), tracer=tracer)
        actor = Quiet("quiet")
        async with anyio.create_task_group() as tg:
            await tg.start(node.run, [actor])
            before = tracer.seq
            for i in range(3):
                actor.trace("event", "unheard", i=i)
            assert tracer.seq == before + 3
            sink = MemorySink()
            tracer.add_sink(sink)
            actor.trace("event", "heard", i=3)
            (event,) = sink.of("event", "heard")
            assert (event.seq, event.node, event.actor, event.fields) == (
                before + 4,
                "n1",
                "quiet",
                {"i": 3},
            )
            node.stop()

    run_virtual(body)


def test_a_state_change_log_builds_no_event_while_nobody_listens() -> None:
    """With its tracer silent a transition only counts its event; once a sink listens it
    hands ``trace`` every field, numbered after the counted ones."""
    tracer = Tracer()
    calls: list[tuple[str, str, dict[str, Any]]] = []

    def trace(kind: str, type_: str, **fields: Any) -> None:
        calls.append((kind, type_, fields))
        tracer.emit(kind, node="n", type=type_, **fields)

    log = StateChangeLogger(1, trace, tracer=tracer)
    tp = TopicPartition(topic=TopicName("t"), partition=0)
    log.transition("partition", tp, None, "NewPartition", "OnlinePartition", controller_epoch=1)
    assert (calls, tracer.seq) == ([], 1)
    sink = MemorySink()
    tracer.add_sink(sink)
    log.transition("replica", tp, 2, "NewReplica", "OnlineReplica", controller_epoch=1, leader=2)
    assert calls == [
        (
            "transition",
            "replica",
            {
                "topic": "t",
                "partition": 0,
                "replica": 2,
                "from_state": "NewReplica",
                "to_state": "OnlineReplica",
                "leader": 2,
                "leader_epoch": None,
                "controller_epoch": 1,
            },
        )
    ]
    assert [e.seq for e in sink] == [2]


def test_a_state_change_log_without_trace_counts_nothing() -> None:
    """No ``trace`` function means no event at all, listened to or not, as before."""
    tracer = Tracer()
    log = StateChangeLogger(1, None, tracer=tracer)
    tp = TopicPartition(topic=TopicName("t"), partition=0)
    log.transition("partition", tp, None, "NewPartition", "OnlinePartition", controller_epoch=1)
    assert tracer.seq == 0


def test_a_state_change_log_records_a_transition_only_while_traced_or_logged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``records`` tells a state machine whether to look up a transition's leader: not
    while its tracer is silent and the level is above INFO (here WARNING, `kemu up`'s
    default, set for this test: an earlier test of the session may have configured
    logging at INFO for a broker's files), yes once a sink listens, and yes with a
    ``trace`` but no tracer known."""
    at_warning = structlog.make_filtering_bound_logger(logging.WARNING)
    quiet = structlog.wrap_logger(structlog.PrintLogger(), wrapper_class=at_warning)
    monkeypatch.setattr(state_change_log, "log", quiet)
    tracer = Tracer()
    log = StateChangeLogger(1, lambda *a, **f: None, tracer=tracer)
    assert not log.records("OfflineReplica")
    assert not log.records("OnlinePartition")
    tracer.add_sink(MemorySink())
    assert log.records("OfflineReplica")
    assert StateChangeLogger(1, lambda *a, **f: None).records("OfflineReplica")
    assert not StateChangeLogger(1, None, tracer=Tracer()).records("OfflineReplica")


def test_skipped_transitions_are_counted_as_one_by_one_transitions_would_be() -> None:
    """``skip_transitions(n)`` (a state machine's batch that ``records`` said is silent)
    numbers events as ``n`` silent ``transition`` calls do: a sink attached afterwards
    sees the next number; with no ``trace`` nothing is counted."""
    tp = TopicPartition(topic=TopicName("t"), partition=0)
    one_by_one, batched = Tracer(), Tracer()
    singles = StateChangeLogger(1, lambda *a, **f: None, tracer=one_by_one)
    for _ in range(5):
        singles.transition(
            "replica", tp, 1, "OfflineReplica", "ReplicaDeletionStarted", controller_epoch=1
        )
    StateChangeLogger(1, lambda *a, **f: None, tracer=batched).skip_transitions(5)
    assert one_by_one.seq == batched.seq == 5
    silent = Tracer()
    StateChangeLogger(1, None, tracer=silent).skip_transitions(5)
    assert silent.seq == 0
