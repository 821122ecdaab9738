"""Faults as data: rules the network applies to every message between two nodes.

A rule is a frozen value. Chaos scenarios build them in Python or load them from YAML
(``msgspec.convert(data, Rule)``: rules are tagged with their class name, field ``type``),
and the network traces each one it adds or removes. Messages between actors of the same
node never meet a rule.

How rules compose. ``decide`` walks the rules in the order they were added and settles the
fate of one message once, when it is posted:

* ``Partition`` and ``Drop`` end the walk when they hit: the message is dropped, later
  rules are not looked at (and draw nothing from the RNG). Drop wins over everything.
* ``Delay`` rules add up: every matching one adds ``seconds`` plus a uniform draw in
  ``[0, jitter]``.
* every ``Duplicate`` that fires adds one copy; copies share the original's fate.
* the first ``Reorder`` that fires holds the message back on its link until ``window``
  later messages have gone out on that link (or ``max_hold`` seconds have passed, so a quiet
  link does not keep it forever). A message that is also delayed is not held: its delay
  already lets later messages overtake it.

All randomness comes from the RNG passed in (the network's seeded one): one draw per rule
looked at whose probability is strictly between 0 and 1, and one per jittered delay, so a
seed fixes every decision.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import NamedTuple, TypeAlias, assert_never

import msgspec


def _names(values: Iterable[str | type] | str | type | None) -> frozenset[str] | None:
    if values is None:
        return None
    if isinstance(values, str | type):
        values = (values,)
    return frozenset(v if isinstance(v, str) else v.__name__ for v in values)


class Match(msgspec.Struct, frozen=True, kw_only=True):
    """Which messages a rule applies to; ``None`` means any. ``src`` and ``dst`` are node ids,
    ``types`` payload class names."""

    src: frozenset[str] | None = None
    dst: frozenset[str] | None = None
    types: frozenset[str] | None = None

    @classmethod
    def where(
        cls,
        *,
        src: Iterable[str] | str | None = None,
        dst: Iterable[str] | str | None = None,
        types: Iterable[str | type] | str | type | None = None,
    ) -> Match:
        """A filter from single names, iterables of names, or message classes."""
        return cls(src=_names(src), dst=_names(dst), types=_names(types))

    def matches(self, src: str, dst: str, type_name: str) -> bool:
        return (
            (self.src is None or src in self.src)
            and (self.dst is None or dst in self.dst)
            and (self.types is None or type_name in self.types)
        )


ANY = Match()


def _check_probability(p: float) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"probability must be within [0, 1], not {p}")


def _check_non_negative(name: str, value: float) -> None:
    if value < 0:
        raise ValueError(f"{name} must not be negative, not {value}")


class Drop(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Lose matching messages with the given probability."""

    probability: float = 1.0
    match: Match = ANY

    def __post_init__(self) -> None:
        _check_probability(self.probability)


class Delay(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Hold matching messages for ``seconds`` plus a uniform random part in ``[0, jitter]``."""

    seconds: float
    jitter: float = 0.0
    match: Match = ANY

    def __post_init__(self) -> None:
        _check_non_negative("seconds", self.seconds)
        _check_non_negative("jitter", self.jitter)


class Duplicate(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Deliver matching messages twice with the given probability."""

    probability: float = 1.0
    match: Match = ANY

    def __post_init__(self) -> None:
        _check_probability(self.probability)


class Reorder(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """With the given probability, let the next ``window`` messages on the same link
    overtake a matching message (released after ``max_hold`` seconds at the latest).

    The window counts messages rather than seconds on purpose: a time window would only be
    a jittered delay, whereas a count makes the overtaking happen whenever traffic follows.
    """

    probability: float = 1.0
    window: int = 1
    max_hold: float = 0.1
    match: Match = ANY

    def __post_init__(self) -> None:
        _check_probability(self.probability)
        if self.window < 1:
            raise ValueError(f"window must be at least 1, not {self.window}")
        _check_non_negative("max_hold", self.max_hold)


class Partition(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Nodes in different groups cannot talk, in either direction; nodes named in no group
    are unaffected."""

    groups: tuple[frozenset[str], ...]

    def __post_init__(self) -> None:
        if len(self.groups) < 2:
            raise ValueError("a partition needs at least two groups")
        seen: set[str] = set()
        for group in self.groups:
            if seen & group:
                raise ValueError(f"nodes {sorted(seen & group)} are in more than one group")
            seen |= group

    @classmethod
    def of(cls, *groups: Iterable[str]) -> Partition:
        return cls(groups=tuple(frozenset(g) for g in groups))

    def separates(self, src: str, dst: str) -> bool:
        src_group = dst_group = -1
        for i, group in enumerate(self.groups):
            if src in group:
                src_group = i
            if dst in group:
                dst_group = i
        return src_group >= 0 and dst_group >= 0 and src_group != dst_group


Rule: TypeAlias = Drop | Delay | Duplicate | Reorder | Partition
RULE_TYPES = (Drop, Delay, Duplicate, Reorder, Partition)


class Fate(NamedTuple):
    """What happens to one posted message: dropped by rule ``dropped_by`` (a partition if
    ``partitioned``), or sent as ``copies`` envelopes after ``delay`` seconds, held back for
    reordering when ``reorder`` is set."""

    dropped_by: int | None = None
    partitioned: bool = False
    delay: float = 0.0
    copies: int = 1
    reorder: Reorder | None = None


UNHARMED = Fate()


def _fires(probability: float, rng: random.Random) -> bool:
    """Draw from the RNG only when the outcome is uncertain, so certain rules cost nothing."""
    if probability >= 1.0:
        return True
    return probability > 0.0 and rng.random() < probability


def decide(
    rules: Iterable[tuple[int, Rule]],
    src: str,
    dst: str,
    type_name: str,
    rng: random.Random,
) -> Fate:
    """The fate of one message from node ``src`` to node ``dst`` under ``rules`` (id, rule)
    in insertion order. Pure apart from the draws on ``rng``."""
    delay = 0.0
    copies = 1
    reorder: Reorder | None = None
    for rule_id, rule in rules:
        if isinstance(rule, Partition):
            if rule.separates(src, dst):
                return Fate(dropped_by=rule_id, partitioned=True)
            continue
        if not rule.match.matches(src, dst, type_name):
            continue
        match rule:
            case Drop():
                if _fires(rule.probability, rng):
                    return Fate(dropped_by=rule_id)
            case Delay():
                delay += rule.seconds
                if rule.jitter > 0:
                    delay += rng.uniform(0.0, rule.jitter)
            case Duplicate():
                if _fires(rule.probability, rng):
                    copies += 1
            case Reorder():
                if reorder is None and _fires(rule.probability, rng):
                    reorder = rule
            case _:
                assert_never(rule)
    if delay > 0:
        reorder = None
    if delay == 0.0 and copies == 1 and reorder is None:
        return UNHARMED
    return Fate(delay=delay, copies=copies, reorder=reorder)
