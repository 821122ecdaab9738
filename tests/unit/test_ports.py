"""Fixed ports picked for servers that bind them later (``cluster.launch.ports``)."""

from __future__ import annotations

import random
import socket
from pathlib import Path

import pytest

from cluster.launch.ports import (
    DEFAULT_EPHEMERAL,
    bindable,
    candidate_ports,
    ephemeral_range,
    free_ports,
)


def test_ports_are_distinct_bindable_and_outside_the_ephemeral_range() -> None:
    low, high = ephemeral_range()
    ports = free_ports(40)
    assert len(set(ports)) == 40
    assert all(not low <= port <= high for port in ports)
    assert all(bindable(port) for port in ports)


def test_runs_are_consecutive_free_and_do_not_overlap() -> None:
    firsts = free_ports(3, run=5)
    runs = [set(range(first, first + 5)) for first in firsts]
    assert len(set().union(*runs)) == 15
    assert all(bindable(port) for run in runs for port in run)


def test_a_port_someone_holds_is_never_picked() -> None:
    """The same random picks, with the first port they found held by a listener: it
    is skipped, and no pick lands in a run that contains it."""
    (first,) = free_ports(1, rng=random.Random(7))
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", first))
        held.listen()
        assert not bindable(first)
        assert first not in free_ports(1, rng=random.Random(7))
        (again,) = free_ports(1, rng=random.Random(7), run=3)
        assert first not in range(again, again + 3)


def test_the_range_file_is_read_and_a_missing_one_gives_linux_default(tmp_path: Path) -> None:
    ranges = tmp_path / "ip_local_port_range"
    ranges.write_text("40000\t50000\n")
    assert ephemeral_range(ranges) == (40000, 50000)
    assert ephemeral_range(tmp_path / "absent") == DEFAULT_EPHEMERAL
    ranges.write_text("garbage\n")
    assert ephemeral_range(ranges) == DEFAULT_EPHEMERAL


def test_candidates_leave_the_ephemeral_range_out() -> None:
    assert candidate_ports((32768, 60999)) == [range(10_000, 32768), range(61000, 65536)]
    assert candidate_ports((1024, 65535)) == [range(1024, 65536)]  # nothing left: all


def test_too_few_free_ports_is_a_clear_error() -> None:
    with pytest.raises(RuntimeError, match=r"no 2 free ports on 127\.0\.0\.1"):
        free_ports(2, run=70_000, tries=3)
