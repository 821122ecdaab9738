"""The base of every value that crosses an actor boundary.

Every request, response, event and store payload is a frozen, keyword-only msgspec
``Struct`` tagged with its class name, so that a union of them can be decoded from a frame
without guessing, and nothing is ever unpickled.

The values a large cluster holds per partition or per replica (``TopicPartition``, the
control requests' partition states, the controller's ``Leadership`` and
``PartitionAndReplica``, a leader's ``LeaderIsr`` ...) are declared ``gc=False``: they hold
only immutable data, so they can never be part of a reference cycle, and the cyclic
garbage collector need not walk them. With 100,000 partitions on 100 brokers there are
millions of them, and walking them was a fifth of the process's CPU time.
"""

from __future__ import annotations

from typing import ClassVar

import msgspec


class Message(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Root of all typed messages. Subclasses are tagged with their class name.

    ``local_only``: a message an actor sends only to itself (a timer's tick, a halt): a
    node drops one that comes from another node, so that no peer can fire another
    node's timers or halt it."""

    local_only: ClassVar[bool] = False

    @classmethod
    def type_name(cls) -> str:
        return cls.__name__


class ActorRef(msgspec.Struct, frozen=True, order=True):
    """The address of an actor: the node it lives on and its name there."""

    node: str
    name: str

    def __str__(self) -> str:
        return f"{self.node}/{self.name}"


class ErrorReply(Message, frozen=True, kw_only=True):
    """The reply an ``ask`` gets when the handler raised: a Kafka error code and one line."""

    code: int
    message: str
