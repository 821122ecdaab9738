"""``deletions_complete`` counts a broker that is down for any reason (crashed, halted,
stopped, paused, unregistered) as an active fault until it runs again, so a deletion that
Kafka rightly pauses for a dead replica is not called stuck, while a deletion that stays
stuck with every broker up is still caught."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.controller.topic_deletion import TopicDeletionManager
from actors.invariants import BrokerLiveness, DownReason, deletions_complete
from cluster.chaos import RunOptions, RunResult, load_scenario, run_scenario
from tests.support.trace_builder import Trace

SCENARIO = (
    Path(__file__).resolve().parents[2]
    / "scenarios"
    / ("halted-broker-restarted-late-during-deletion.yaml")
)


def run(seed: int, out: Path) -> RunResult:
    scenario = load_scenario(SCENARIO)
    return run_scenario(scenario, RunOptions(run_dir=out / f"seed-{seed}", seed=seed))


# ----------------------------------------------------------------------------- hand-made traces


def halted_and_restarted(restart_at: float) -> Trace:
    """A deletion marked at 10; broker-2 halts by itself at 11 (no chaos fault: its disk
    failed), its session expires at 17, and it starts again at ``restart_at``."""
    t = Trace()
    t.at(0).add("event", "node_started", node="broker-2")
    t.add("event", "broker_registered", node="broker-2", actor="broker", broker=2)
    t.at(10).marked("t")
    t.at(11).add("event", "node_crashed", node="broker-2")
    t.add("event", "broker_halted", node="broker-2")
    t.at(17).add(
        "store", "delete_ephemeral", node="store", path="/brokers/ids/2", result="ok", session=3
    )
    t.at(restart_at).add("event", "broker_registered", node="broker-2", actor="broker", broker=2)
    t.add("event", "node_started", node="broker-2")
    return t


def test_a_halted_broker_pauses_the_deletion_clock_until_it_runs_again() -> None:
    """A broker down without any fault (halted, not restarted for 100 s) stops the
    fault-free clock: the deletion completed right after the restart is in time."""
    t = halted_and_restarted(restart_at=111)
    t.at(112).add("event", "topic_deletion_completed", topic="t")
    assert deletions_complete(t.events, bound=60, end=300) == []


def test_a_deletion_still_stuck_after_the_broker_returns_is_reported() -> None:
    """Once the halted broker runs again the clock goes on: 1 s before the halt plus 59 s
    after the restart at 111 makes the deletion due at t=170."""
    t = halted_and_restarted(restart_at=111)
    assert deletions_complete(t.events, bound=60, end=169.5) == []
    late = deletions_complete(t.events, bound=60, end=171)
    assert [v.rule for v in late] == ["deletions_complete"]
    assert "due t=170.000s" in late[0].message


def test_an_unregistered_running_broker_counts_as_down_until_it_registers() -> None:
    """A broker whose registration znode went (its session expired) is dead to the
    controller though its node runs: down until it registers again."""
    t = Trace()
    t.at(0).add("event", "node_started", node="broker-1")
    mark = t.at(10).marked("t")
    t.at(20).add(
        "store", "delete_ephemeral", node="store", path="/brokers/ids/1", result="ok", session=2
    )
    t.at(200).add("event", "broker_reregistered", node="broker-1", actor="controller")
    late = deletions_complete(t.events, bound=60, end=300)
    # 10 s before the expiry, then 50 s after the re-registration at 200.
    assert [(v.rule, v.seq) for v in late] == [("deletions_complete", mark.seq)]
    assert "due t=250.000s" in late[0].message


def test_a_paused_broker_counts_as_down_until_resumed_or_crashed() -> None:
    """A paused broker is down until ``node_resumed``; a crash of a paused broker leaves
    it down (not running) though it is no longer paused."""
    liveness = BrokerLiveness()
    t = Trace()
    for event in (
        t.add("event", "node_started", node="broker-0"),
        t.add("event", "node_paused", node="broker-0"),
    ):
        liveness.observe(event)
    assert liveness.down == {"broker-0": frozenset({DownReason.PAUSED})}
    liveness.observe(t.add("event", "node_resumed", node="broker-0"))
    assert liveness.down == {}
    liveness.observe(t.add("event", "node_paused", node="broker-0"))
    liveness.observe(t.add("event", "node_crashed", node="broker-0"))
    assert liveness.down == {"broker-0": frozenset({DownReason.NOT_RUNNING})}
    liveness.observe(t.add("event", "node_started", node="broker-0"))
    assert not liveness.any_down()


def test_a_gracefully_stopped_broker_is_down_until_started_and_registered() -> None:
    """A stop closes the session (the znode goes); the broker is up again only once it
    both runs and is registered, whichever comes last."""
    liveness = BrokerLiveness()
    t = Trace()
    liveness.observe(t.add("event", "node_stopped", node="broker-3"))
    liveness.observe(
        t.add("store", "delete", node="store", path="/brokers/ids/3", result="ok", session=4)
    )
    assert liveness.down == {
        "broker-3": frozenset({DownReason.NOT_RUNNING, DownReason.UNREGISTERED})
    }
    liveness.observe(t.add("event", "broker_registered", node="broker-3", broker=3))
    assert liveness.down == {"broker-3": frozenset({DownReason.NOT_RUNNING})}
    liveness.observe(t.add("event", "node_started", node="broker-3"))
    assert liveness.down == {}
    # A failed delete, or another znode, changes nothing.
    liveness.observe(
        t.add("store", "delete", node="store", path="/brokers/ids/3", result="NoNodeError")
    )
    liveness.observe(t.add("store", "delete", node="store", path="/brokers/ids/3/x", result="ok"))
    assert liveness.down == {}


# ----------------------------------------------------------------------------- chaos runs


@pytest.mark.parametrize("seed", [1, 7, 23])
def test_a_deletion_paused_for_a_halted_broker_passes(seed: int, tmp_path: Path) -> None:
    """Broker 2 halts on a failed disk as the deletion starts, the disk is healed 10 s
    later and the broker started 90 s after that: the run passes (the deletion completes
    after the restart, and the 100 s it waited are not fault-free time)."""
    result = run(seed, tmp_path)
    assert [p.line() for p in result.problems] == []
    assert result.status == "passed"


def test_a_deletion_stuck_after_the_broker_returns_is_still_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A controller that never resumes a paused deletion when the broker hosting its
    replica comes back leaves it stuck with every broker up: ``deletions_complete``
    reports it 60 s of fault-free time after the restart, and at the end."""

    async def never_resume(self: TopicDeletionManager, topics: object) -> None:
        del self, topics

    monkeypatch.setattr(TopicDeletionManager, "resume_deletion_for_topics", never_resume)
    result = run(1, tmp_path)
    assert result.status == "failed"
    found = [v for v in result.violations if v.rule == "deletions_complete"]
    overdue = [v for v in found if "fault-free time later" in v.message]
    assert len(overdue) == 1
    # Broker 2 starts again at t=100.05 (after 0.05 s of steps, a 10 s sleep, a 90 s
    # sleep); the fault-free clock only runs from there.
    assert "due t=160.050s" in overdue[0].message
    assert "deletion of audit is still pending at the end" in [v.message for v in found]
