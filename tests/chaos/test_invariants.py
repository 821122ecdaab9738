"""The invariant rules catch planted violations in hand-made traces and end states, and
stay quiet on a healthy one."""

from __future__ import annotations

from typing import Any

from actors.invariants import (
    CacheView,
    FinalState,
    PartitionView,
    StoreView,
    TraceMonitor,
    acknowledged_creations,
    caches_converge,
    check_final,
    check_trace,
    controller_epochs_increase,
    deletions_complete,
    leader_epochs_increase,
    leader_in_isr,
    legal_transitions,
    no_orphan_log_dirs,
    no_orphan_znodes,
    no_stale_epoch_accepted,
    one_controller_per_epoch,
    refused_transitions,
    store_leadership,
)
from protocol.trace import TraceEvent
from tests.support.trace_builder import Trace


def healthy() -> Trace:
    t = Trace()
    t.elected("broker-0", 1)
    t.request("broker-0", "broker-1", 1, 1, states=[["t", 0, 0, 0, [0, 1], [0, 1]]])
    t.response("broker-1", "broker-0", 1)
    t.transition("partition", "NonExistentPartition", "NewPartition")
    t.transition("partition", "NewPartition", "OnlinePartition", leader_epoch=0)
    t.transition("replica", "NonExistentReplica", "NewReplica", replica=1)
    t.transition("replica", "NewReplica", "OnlineReplica", replica=1)
    t.at(5).elected("broker-1", 2)
    t.request("broker-1", "broker-2", 1, 2)
    t.response("broker-2", "broker-1", 1)
    t.transition("partition", "OnlinePartition", "OnlinePartition", leader_epoch=1)
    t.marked("t")
    t.add("event", "topic_deletion_completed", topic="t")
    return t


def test_a_healthy_trace_breaks_no_rule() -> None:
    """Elections in order, fresh epochs accepted, legal transitions, a timely deletion."""
    assert check_trace(healthy().events, deletion_bound=30, end=100) == []


def test_an_illegal_transition_is_reported_at_its_event() -> None:
    """A replica going Online -> ReplicaDeletionStarted skips OfflineReplica
    (ReplicaStateMachine's valid previous states)."""
    t = healthy()
    bad = t.transition("replica", "OnlineReplica", "ReplicaDeletionStarted", replica=1)
    violations = legal_transitions(t.events)
    assert [(v.rule, v.seq) for v in violations] == [("legal_transitions", bad.seq)]
    assert "illegal OnlineReplica -> ReplicaDeletionStarted" in violations[0].message
    assert len(check_trace(t.events, deletion_bound=30, end=100)) == 1


def test_a_refused_transition_is_a_notice_not_a_violation() -> None:
    """The state machine's own refusal (Kafka's logged IllegalStateException) is noted."""
    t = healthy()
    t.add("error", "invalid_transition", topic="t", partition=0, from_state="A", to_state="B")
    assert check_trace(t.events, deletion_bound=30, end=100) == []
    assert [v.rule for v in refused_transitions(t.events)] == ["refused_transition"]


def test_a_stale_controller_epoch_accepted_is_reported() -> None:
    """Broker 2 accepted epoch 2, then accepted a request carrying epoch 1."""
    t = healthy()
    t.request("broker-0", "broker-2", 7, 1)
    stale = t.response("broker-2", "broker-0", 7, "NONE")
    violations = no_stale_epoch_accepted(t.events)
    assert [(v.rule, v.seq) for v in violations] == [("no_stale_epoch_accepted", stale.seq)]
    assert "broker-2 accepted LeaderAndIsrRequest with controller epoch 1" in violations[0].message


def test_a_stale_request_refused_or_a_restarted_broker_is_fine() -> None:
    """Refusing the stale request is right; after a restart a broker starts afresh."""
    t = healthy()
    t.request("broker-0", "broker-2", 7, 1)
    t.response("broker-2", "broker-0", 7, "STALE_CONTROLLER_EPOCH")
    t.add("event", "node_started", node="broker-2")
    t.request("broker-0", "broker-2", 8, 1)
    t.response("broker-2", "broker-0", 8, "NONE")
    assert no_stale_epoch_accepted(t.events) == []


def test_two_controllers_acting_with_one_epoch_are_reported() -> None:
    """Requests carrying epoch 2 from two nodes: two active controllers in one epoch."""
    t = healthy()
    bad = t.request("broker-2", "broker-0", 3, 2)
    violations = one_controller_per_epoch(t.events)
    assert [(v.rule, v.seq) for v in violations] == [("one_controller_per_epoch", bad.seq)]


def test_controller_epochs_that_go_back_or_repeat_are_reported() -> None:
    """An election of epoch 2 twice, and of epoch 1 after 2."""
    t = healthy()
    twice = t.elected("broker-2", 2)
    back = t.elected("broker-0", 1)
    violations = controller_epochs_increase(t.events)
    assert [v.seq for v in violations] == [twice.seq, back.seq]


def test_leader_outside_the_isr_in_a_request_is_reported() -> None:
    """A LeaderAndIsr whose leader 2 is not in ISR [0, 1]."""
    t = healthy()
    bad = t.request("broker-1", "broker-0", 9, 2, states=[["t", 1, 2, 3, [0, 1], [0, 1, 2]]])
    violations = leader_in_isr(t.events)
    assert [v.seq for v in violations] == [bad.seq]
    assert "leader 2 is not in the ISR" in violations[0].message


def test_a_leader_epoch_going_down_is_reported_unless_recreated() -> None:
    """Epoch 1 then 0 is a regression; after NonExistentPartition it starts again."""
    t = healthy()
    bad = t.transition("partition", "OnlinePartition", "OnlinePartition", leader_epoch=0)
    assert [v.seq for v in leader_epochs_increase(t.events)] == [bad.seq]
    ok = healthy()
    ok.transition("partition", "OnlinePartition", "OfflinePartition", leader_epoch=1)
    ok.transition("partition", "OfflinePartition", "NonExistentPartition")
    ok.transition("partition", "NonExistentPartition", "NewPartition")
    ok.transition("partition", "NewPartition", "OnlinePartition", leader_epoch=0)
    assert leader_epochs_increase(ok.events) == []


def test_an_alter_isr_without_its_leader_or_a_falling_high_watermark_is_reported() -> None:
    """isr_altered writing ISR [2] for leader 1 breaks alter_isr_keeps_shape; a high
    watermark falling from 7 to 6 in one epoch on one broker breaks high_watermarks_rise,
    a lower one in a later epoch does not."""
    t = healthy()

    def altered(isr: list[int]) -> TraceEvent:
        return t.add(
            "event", "isr_altered", topic="t", partition=0, leader=1, leader_epoch=3, to_isr=isr
        )

    def moved(epoch: int, start: int, to: int) -> TraceEvent:
        fields: dict[str, Any] = {"from": start, "to": to}
        return t.add(
            "event",
            "high_watermark_moved",
            node="broker-1",
            topic="t",
            partition=0,
            leader_epoch=epoch,
            **fields,
        )

    altered([1])
    bad_isr = altered([2])
    moved(3, 0, 7)
    moved(4, 2, 3)
    bad_mark = moved(3, 5, 6)
    found = check_trace(t.events, deletion_bound=30, end=100)
    assert [(v.rule, v.seq) for v in found] == [
        ("alter_isr_keeps_shape", bad_isr.seq),
        ("high_watermarks_rise", bad_mark.seq),
    ]


def test_a_deletion_is_due_a_bound_of_fault_free_time_after_its_marking() -> None:
    """Marked at 10 while a fault is active (healed at 50): due at 50 + 30 = 80."""
    t = Trace()
    t.at(5).fault("fault_injected", "b2")
    t.at(8).fault("fault_injected", "session", instant=True)  # instantaneous: no time taken
    mark = t.at(10).marked("t")
    t.at(50).fault("fault_healed", "b2")
    assert deletions_complete(t.events, bound=30, end=79) == []  # not due yet
    late = deletions_complete(t.events, bound=30, end=81)
    assert [(v.rule, v.seq) for v in late] == [("deletions_complete", mark.seq)]
    assert "due t=80.000s" in late[0].message
    t.at(90).add("event", "topic_deletion_completed", topic="t")
    done_late = deletions_complete(t.events, bound=30, end=100)
    assert len(done_late) == 1
    # Found live, at the first event after the bound passed (the completion at 90).
    assert "due t=80.000s" in done_late[0].message
    in_time = Trace()
    in_time.at(10).marked("t")
    in_time.at(20).add("event", "topic_deletion_ignored", topics=["t"])
    assert deletions_complete(in_time.events, bound=30, end=100) == []


def test_the_live_monitor_reports_each_violation_at_the_event_that_shows_it() -> None:
    """Fed event by event, the monitor answers an illegal transition with that very
    event, and an overdue deletion with the first event after its bound, long before
    the deletion completes or the trace ends."""
    monitor = TraceMonitor(deletion_bound=30)
    t = Trace()
    assert monitor.observe(t.at(1).elected("broker-0", 1)) == []
    mark = t.at(2).marked("t")
    assert monitor.observe(mark) == []
    illegal = t.at(3).transition("partition", "NonExistentPartition", "OnlinePartition")
    assert [(v.rule, v.seq) for v in monitor.observe(illegal)] == [
        ("legal_transitions", illegal.seq)
    ]
    assert monitor.observe(t.at(32).elected("broker-1", 2)) == []  # 30 s: not yet overdue
    overdue = monitor.observe(t.at(33).elected("broker-2", 3))
    assert [(v.rule, v.seq) for v in overdue] == [("deletions_complete", mark.seq)]
    assert "due t=32.000s" in overdue[0].message
    assert monitor.observe(t.at(40).add("event", "topic_deletion_completed", topic="t")) == []
    assert monitor.finish(50) == []
    assert [v.rule for v in monitor.violations] == ["legal_transitions", "deletions_complete"]
    assert monitor.violations == check_trace(t.events, deletion_bound=30, end=50)


def state(leader: int, isr: tuple[int, ...], replicas: tuple[int, ...]) -> PartitionView:
    return PartitionView(leader=leader, leader_epoch=0, isr=isr, replicas=replicas)


def settled() -> FinalState:
    views = {0: state(0, (0, 1), (0, 1)), 1: state(1, (1, 2), (1, 2))}
    store = StoreView(
        controller=0,
        brokers=(0, 1, 2),
        topics={"t": {0: (0, 1), 1: (1, 2)}},
        partition_nodes={"t": (0, 1)},
        states={"t": views},
        configs=("t",),
        deletions=(),
    )
    cache = CacheView(controller=0, brokers=(0, 1, 2), topics={"t": dict(views)})
    return FinalState(
        store=store,
        running=(0, 1, 2),
        caches={0: cache, 1: cache, 2: cache},
        log_dirs={0: ("t-0",), 1: ("t-0", "t-1"), 2: ("t-1",)},
    )


def test_a_settled_end_state_breaks_no_rule() -> None:
    """Store, caches and disks agree."""
    assert check_final(settled()) == []


def test_orphan_znodes_are_reported() -> None:
    """A partition znode outside the assignment, a missing state, a config of no topic."""
    final = settled()
    store = final.store
    broken = FinalState(
        store=StoreView(
            controller=0,
            brokers=store.brokers,
            topics={"t": {0: (0, 1), 1: (1, 2), 2: (0, 2)}},
            partition_nodes={"t": (0, 1, 5), "gone": (0,)},
            states=store.states,
            configs=("t", "old"),
            deletions=(),
        ),
        running=final.running,
        caches=final.caches,
        log_dirs=final.log_dirs,
    )
    messages = [v.message for v in no_orphan_znodes(broken)]
    assert messages == [
        "partition znode gone-0 is orphaned",
        "partition znode t-5 is orphaned",
        "t-2 has no state znode",
        "/config/topics/old belongs to no topic",
    ]


def test_orphan_missing_and_delete_log_dirs_are_reported() -> None:
    """A log of a deleted topic, a replica without its log, a -delete dir left behind."""
    final = settled()
    broken = FinalState(
        store=final.store,
        running=(0, 1, 2),
        caches=final.caches,
        log_dirs={
            0: ("t-0", "old-0", "old-1.0123456789abcdef0123456789abcdef-delete"),
            1: ("t-0",),
            2: ("t-1",),
        },
    )
    messages = [v.message for v in no_orphan_log_dirs(broken)]
    assert messages == [
        "broker 0: log old-0 is orphaned",
        "broker 0: old-1.0123456789abcdef0123456789abcdef-delete is still on disk",
        "broker 1: no log for replica t-1",
    ]


def test_a_cache_that_differs_from_the_store_is_reported() -> None:
    """A stale leader, a topic the store no longer has, another controller, a dead broker."""
    final = settled()
    stale = CacheView(
        controller=2,
        brokers=(0, 1),
        topics={"t": {0: state(1, (0, 1), (0, 1)), 1: state(1, (1, 2), (1, 2))}, "x": {}},
    )
    broken = FinalState(
        store=final.store,
        running=final.running,
        caches={0: final.caches[0], 1: stale, 2: None},
        log_dirs=final.log_dirs,
    )
    messages = [v.message for v in caches_converge(broken)]
    assert messages[0] == "broker 1's cache names controller 2, not 0"
    assert messages[1].startswith("broker 1's cache has brokers [0, 1]")
    assert messages[2].startswith("broker 1's cache: t-0 is PartitionView(leader=1")
    assert messages[3] == "broker 1's cache: topic x not in the store"
    assert messages[4] == "broker 2's cache could not be read"
    assert len(messages) == 5


def test_leader_outside_the_isr_in_the_store_is_reported() -> None:
    """The end state's partition states obey leader ∈ ISR ⊆ replicas too."""
    final = settled()
    bad = StoreView(
        controller=0,
        brokers=(0, 1, 2),
        topics=final.store.topics,
        partition_nodes=final.store.partition_nodes,
        states={"t": {0: state(2, (0, 1), (0, 1)), 1: state(1, (1, 3), (1, 2))}},
        configs=("t",),
        deletions=("t",),
    )
    broken = FinalState(
        store=bad, running=final.running, caches=final.caches, log_dirs=final.log_dirs
    )
    rules = [v.rule for v in store_leadership(broken)]
    assert rules == ["leader_in_isr", "leader_in_isr"]
    assert "deletions_complete" in {v.rule for v in check_final(broken)}


def test_an_acknowledged_creation_must_exist_unless_deleted_later() -> None:
    """``u`` was acknowledged and never deleted, yet it does not exist; ``v`` was deleted."""
    t = Trace()
    acked = t.add("event", "admin_result", node="chaos", op="create_topic", topic="u", error="NONE")
    t.add("event", "admin_result", node="chaos", op="create_topic", topic="v", error="NONE")
    t.add("event", "admin_result", node="chaos", op="create_topic", topic="w", error="INVALID")
    t.marked("v")
    violations = acknowledged_creations(t.events, settled())
    assert [(v.rule, v.seq) for v in violations] == [("acknowledged_creations", acked.seq)]
