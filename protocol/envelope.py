"""What the network carries: a typed message with its addresses and correlation id."""

from __future__ import annotations

from enum import StrEnum

import msgspec

from protocol.base import ActorRef, Message


class EnvelopeKind(StrEnum):
    TELL = "tell"  # one-way
    ASK = "ask"  # a request; the receiver's handler return value goes back as a REPLY
    REPLY = "reply"  # the answer to the ASK with the same ``corr``


class Envelope(msgspec.Struct, frozen=True, kw_only=True):
    src: ActorRef
    dst: ActorRef
    corr: int  # correlation id, unique per sending node; 0 for tells
    kind: EnvelopeKind
    payload: Message

    @property
    def type_name(self) -> str:
        return type(self.payload).__name__
