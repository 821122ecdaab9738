"""Kafka's ``DelayedOperationPurgatory``, for the admin operations a broker answers late."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from actors.runtime.actor import Actor, Context, DeferredReply
from protocol.base import Message
from protocol.broker import (
    PurgatoryExpired,
)
from protocol.ids import TopicName


@dataclass
class _Parked:
    """An admin operation waiting until this broker's metadata cache shows each of its
    topics done: Kafka's DelayedCreatePartitions (every partition has a leader) or
    DelayedDeleteTopics (the topic is gone)."""

    reply: DeferredReply
    waiting: set[TopicName]  # the topics not done yet
    done: Callable[[TopicName], bool]  # is this topic done, as the cache now says?
    finish: Callable[[set[TopicName]], Message]  # timed-out topics -> the response


class DelayedOperationPurgatory:
    def __init__(self, owner: Actor) -> None:
        self._owner = owner
        self._parked: dict[int, _Parked] = {}
        self._next_op = 0

    def _complete_or_park(
        self,
        ctx: Context,
        timeout_ms: int,
        succeeded: Iterable[TopicName],
        done: Callable[[TopicName], bool],
        finish: Callable[[set[TopicName]], Message],
    ) -> Message | None:
        """Spec §4.2 step 5 and §6.1: answer now when nothing succeeded (validateOnly
        writes nothing, so it lands here) or ``timeout_ms <= 0`` (every succeeded topic
        then reported REQUEST_TIMED_OUT; the work goes on), or when every succeeded topic
        is already ``done``; otherwise park the request until ``done`` holds for each of
        them (``_poke``, on every UpdateMetadata) or the timeout passes (those still not
        done: REQUEST_TIMED_OUT)."""
        topics = set(succeeded)
        if not topics:
            return finish(set())
        if timeout_ms <= 0:
            return finish(topics)
        waiting = {t for t in topics if not done(t)}
        if not waiting:
            return finish(set())
        self._next_op += 1
        op = self._next_op
        self._parked[op] = _Parked(ctx.defer(), waiting, done, finish)
        self._owner.trace("event", "admin_request_parked", operation=op, topics=len(waiting))
        self._owner.start_soon(self._purgatory_timer, op, timeout_ms / 1000)
        return None

    async def _purgatory_timer(self, op: int, seconds: float) -> None:
        await self._owner.clock.sleep(seconds)
        self._owner.send_self(PurgatoryExpired(operation=op))

    def _poke(self, topics: set[TopicName]) -> None:
        for op in sorted(self._parked):
            parked = self._parked[op]
            waiting = parked.waiting
            # A set intersection walks the smaller side: an UpdateMetadata of a few topics
            # does not walk every topic a big request still waits for (nor the reverse).
            waiting -= {topic for topic in topics & waiting if parked.done(topic)}
            if not waiting:
                del self._parked[op]
                self._owner.trace("event", "admin_request_completed", operation=op)
                parked.reply.send(self._owner, parked.finish(set()))

    def _expire(self, op: int) -> None:
        parked = self._parked.pop(op, None)
        if parked is not None:
            self._owner.trace(
                "event", "admin_request_expired", operation=op, topics=len(parked.waiting)
            )
            parked.reply.send(self._owner, parked.finish(set(parked.waiting)))
