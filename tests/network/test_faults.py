"""Fault rules as data and the pure function that settles a message's fate."""

from __future__ import annotations

import random

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cluster.network import (
    UNHARMED,
    Delay,
    Drop,
    Duplicate,
    Fate,
    Match,
    Partition,
    Reorder,
    Rule,
    decide,
)
from tests.support.network import NetTestPing


def _fate(
    rules: list[Rule], src: str = "a", dst: str = "b", rng: random.Random | None = None
) -> Fate:
    return decide(enumerate(rules, 1), src, dst, "NetTestPing", rng or random.Random(0))


def test_no_matching_rule_leaves_a_message_unharmed_and_draws_nothing() -> None:
    """Rules that do not match the message neither change it nor consume randomness."""
    rng = random.Random(7)
    state = rng.getstate()
    rules: list[Rule] = [
        Drop(probability=0.5, match=Match.where(types="Other")),
        Delay(seconds=1, jitter=1, match=Match.where(src="z")),
        Partition.of({"a", "b"}, {"c"}),
    ]
    assert _fate(rules, rng=rng) is UNHARMED
    assert rng.getstate() == state


def test_drop_wins_and_ends_the_walk() -> None:
    """A Drop that fires drops the message whatever came before, and later rules are not
    looked at (no randomness drawn for them)."""
    rng = random.Random(7)
    state = rng.getstate()
    fate = _fate([Delay(seconds=1), Drop(), Duplicate(probability=0.5)], rng=rng)
    assert fate.dropped_by == 2
    assert not fate.partitioned
    assert rng.getstate() == state  # certain rules never draw


def test_delays_add_and_copies_count() -> None:
    """Matching delays add up (with jitter within bounds); each Duplicate that fires adds a
    copy."""
    fate = _fate([Delay(seconds=0.1), Delay(seconds=0.2, jitter=0.05), Duplicate(), Duplicate()])
    assert 0.3 <= fate.delay <= 0.35
    assert fate.copies == 3
    assert fate.reorder is None


def test_first_reorder_wins_and_delay_overrides_holding() -> None:
    """The first Reorder that fires sets the window; a delayed message is not also held."""
    first, second = Reorder(window=2), Reorder(window=5)
    assert _fate([first, second]).reorder is first
    assert _fate([first, Delay(seconds=0.1)]).reorder is None


def test_partition_cuts_both_ways_and_spares_the_rest() -> None:
    """A partition drops between its groups in both directions only."""
    cut = Partition.of({"a"}, {"b", "c"})
    assert cut.separates("a", "b")
    assert cut.separates("c", "a")
    assert not cut.separates("b", "c")
    assert not cut.separates("a", "z")
    assert not cut.separates("z", "a")
    fate = _fate([cut], "b", "a")
    assert fate.partitioned
    assert fate.dropped_by == 1


@pytest.mark.parametrize(
    "build",
    [
        lambda: Drop(probability=1.5),
        lambda: Duplicate(probability=-0.1),
        lambda: Delay(seconds=-1),
        lambda: Delay(seconds=1, jitter=-1),
        lambda: Reorder(window=0),
        lambda: Partition.of({"a"}),
        lambda: Partition.of({"a", "b"}, {"b"}),
    ],
)
def test_invalid_rules_are_refused(build: object) -> None:
    """Out-of-range probabilities, negative times, empty windows and overlapping or single
    partition groups are rejected when the rule is built."""
    with pytest.raises(ValueError, match=r"."):
        build()  # type: ignore[operator]


def test_rules_load_from_plain_data() -> None:
    """Rules come from scenario files as tagged plain data (lists become sets)."""
    data = [
        {"type": "Drop", "probability": 0.5, "match": {"types": ["NetTestPing"]}},
        {"type": "Delay", "seconds": 0.2, "match": {"src": ["a"], "dst": ["b", "c"]}},
        {"type": "Partition", "groups": [["a"], ["b", "c"]]},
    ]
    rules = msgspec.convert(data, list[Rule])
    assert rules == [
        Drop(probability=0.5, match=Match.where(types=NetTestPing)),
        Delay(seconds=0.2, match=Match.where(src="a", dst=["b", "c"])),
        Partition.of({"a"}, {"b", "c"}),
    ]
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"type": "Drop", "probability": 2.0}, Rule)


def test_match_accepts_names_and_classes() -> None:
    """A filter is built from single names, iterables of names or message classes."""
    m = Match.where(src="a", dst=("b", "c"), types=[NetTestPing, "Other"])
    assert m == Match(
        src=frozenset({"a"}), dst=frozenset({"b", "c"}), types=frozenset({"NetTestPing", "Other"})
    )
    assert m.matches("a", "c", "Other")
    assert not m.matches("b", "c", "Other")
    assert Match().matches("x", "y", "Z")


@given(seed=st.integers(min_value=0, max_value=2**32), p=st.floats(0.0, 1.0))
def test_a_seed_fixes_every_decision(seed: int, p: float) -> None:
    """Two RNGs with the same seed settle the same fates for the same messages."""
    rules: list[Rule] = [
        Drop(probability=p / 2),
        Delay(seconds=0.01, jitter=0.02),
        Duplicate(probability=p),
        Reorder(probability=p, window=2),
    ]
    one, two = random.Random(seed), random.Random(seed)
    for _ in range(20):
        assert _fate(rules, rng=one) == _fate(rules, rng=two)


@given(seed=st.integers(min_value=0, max_value=2**32))
def test_probabilities_zero_and_one_are_certain(seed: int) -> None:
    """A probability of 0 never fires and 1 always does, whatever the RNG."""
    rng = random.Random(seed)
    assert _fate([Drop(probability=0.0), Duplicate(probability=0.0)], rng=rng) is UNHARMED
    assert _fate([Duplicate(probability=1.0)], rng=rng).copies == 2
    assert _fate([Drop(probability=1.0)], rng=rng).dropped_by == 1
