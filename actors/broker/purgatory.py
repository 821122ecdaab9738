"""The admin requests a broker answers late: Kafka's ``DelayedOperationPurgatory``.

A CreateTopics or CreatePartitions request is answered once this broker's metadata cache
shows every new partition with a leader (Kafka's ``DelayedCreatePartitions``), a
DeleteTopics request once its topics have left the cache (``DelayedDeleteTopics``), an
ElectLeaders request once the cache shows each elected leader (``DelayedElectLeader``, its
topics are those of the elected partitions), or at its timeout, whichever comes first. The
purgatory is a component of the ``Broker`` actor, not an actor: the broker checks its
operations on every UpdateMetadata (``check_and_complete``, as
``AdminManager.tryCompleteDelayedTopicOperations``) and expires them when their timer's
``PurgatoryExpired`` reaches its mailbox (``expire``).
The timers only enqueue; the broker's task is the only one to touch the operations.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from actors.runtime.actor import Actor, Context, DeferredReply
from protocol.base import Message
from protocol.broker import PurgatoryExpired
from protocol.ids import TopicName


@dataclass
class DelayedTopicOperation:
    """An admin operation waiting until the broker's metadata cache shows each of its
    topics done: Kafka's ``DelayedCreatePartitions`` (every partition has a leader) or
    ``DelayedDeleteTopics`` (the topic is gone)."""

    reply: DeferredReply
    waiting: set[TopicName]  # the topics not done yet
    done: Callable[[TopicName], bool]  # is this topic done, as the cache now says?
    finish: Callable[[set[TopicName]], Message]  # timed-out topics -> the response


class DelayedOperationPurgatory:
    """The delayed admin operations of the actor ``owner`` (the broker), which answers
    them and whose mailbox their timers feed."""

    def __init__(self, owner: Actor) -> None:
        self._owner = owner
        self._delayed: dict[int, DelayedTopicOperation] = {}
        self._next_op = 0

    @property
    def delayed(self) -> int:
        """How many operations wait (Kafka's ``DelayedOperationPurgatory.numDelayed``)."""
        return len(self._delayed)

    def try_complete_else_watch(
        self,
        ctx: Context,
        timeout_ms: int,
        succeeded: Iterable[TopicName],
        done: Callable[[TopicName], bool],
        finish: Callable[[set[TopicName]], Message],
    ) -> Message | None:
        """Answer now when nothing succeeded (validateOnly writes nothing, so it lands
        here) or ``timeout_ms <= 0`` (every succeeded topic then reported
        REQUEST_TIMED_OUT; the work goes on), or when every succeeded topic is already
        ``done``, as ``AdminManager.createTopics`` and ``deleteTopics`` do; otherwise
        delay the request until ``done`` holds for each of them (``check_and_complete``,
        on every UpdateMetadata) or the timeout passes (those still not done:
        REQUEST_TIMED_OUT). None means the answer comes later."""
        topics = set(succeeded)
        if not topics:
            return finish(set())
        if timeout_ms <= 0:
            return finish(topics)
        if all(done(t) for t in topics):
            return finish(set())
        self.watch(ctx.defer(), timeout_ms, topics, done, finish)
        return None

    def watch(
        self,
        reply: DeferredReply,
        timeout_ms: int,
        topics: Iterable[TopicName],
        done: Callable[[TopicName], bool],
        finish: Callable[[set[TopicName]], Message],
    ) -> None:
        """Answer ``reply`` with ``finish`` once ``done`` holds for each of ``topics``
        (checked now, then on every UpdateMetadata), or with the topics still not done
        when ``timeout_ms`` passes: Kafka's ``tryCompleteElseWatch``."""
        waiting = {t for t in topics if not done(t)}
        if not waiting:
            reply.send(self._owner, finish(set()))
            return
        self._next_op += 1
        op = self._next_op
        self._delayed[op] = DelayedTopicOperation(reply, waiting, done, finish)
        self._owner.trace("event", "admin_request_parked", operation=op, topics=len(waiting))
        self._owner.start_soon(self._timer, op, max(0, timeout_ms) / 1000)

    async def _timer(self, op: int, seconds: float) -> None:
        await self._owner.clock.sleep(seconds)
        self._owner.send_self(PurgatoryExpired(operation=op))

    def check_and_complete(self, topics: set[TopicName]) -> None:
        """``topics`` changed in the metadata cache: answer each operation done with them."""
        for op in sorted(self._delayed):
            delayed = self._delayed[op]
            waiting = delayed.waiting
            # A set intersection walks the smaller side: an UpdateMetadata of a few topics
            # does not walk every topic a big request still waits for (nor the reverse).
            waiting -= {topic for topic in topics & waiting if delayed.done(topic)}
            if not waiting:
                del self._delayed[op]
                self._owner.trace("event", "admin_request_completed", operation=op)
                delayed.reply.send(self._owner, delayed.finish(set()))

    def expire(self, op: int) -> None:
        """Operation ``op``'s timeout passed: answer it, its topics not done timed out."""
        delayed = self._delayed.pop(op, None)
        if delayed is not None:
            self._owner.trace(
                "event", "admin_request_expired", operation=op, topics=len(delayed.waiting)
            )
            delayed.reply.send(self._owner, delayed.finish(set(delayed.waiting)))
