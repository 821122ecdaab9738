"""The control plane's invariants as reusable checkers: rules over a trace, checked live as
a chaos run writes it or afterwards over a recorded one (``trace_rules``), and rules over
the end state of a run (``final_rules``). Chaos runs, tests and the Spark jobs share them;
docs/chaos.md lists them."""

from actors.invariants.base import CHAOS_NODE, TraceRule, Violation, violation_at
from actors.invariants.final_rules import (
    FINAL_RULES,
    CacheView,
    FinalState,
    PartitionView,
    StoreView,
    acknowledged_creations,
    caches_converge,
    check_final,
    no_orphan_log_dirs,
    no_orphan_znodes,
    pending_deletions,
    store_leadership,
)
from actors.invariants.groups import (
    GROUP_EVENTS,
    GroupOffsetsRise,
    GroupsSettle,
    OnePartitionOwner,
)
from actors.invariants.liveness import BrokerLiveness, DownReason
from actors.invariants.trace_rules import (
    DEFAULT_DELETION_BOUND,
    TRACE_RULES,
    AcknowledgedWritesKept,
    OrphanLogDirs,
    TraceMonitor,
    check_trace,
    controller_epochs_increase,
    deletions_complete,
    leader_epochs_increase,
    leader_in_isr,
    legal_transitions,
    no_stale_epoch_accepted,
    one_controller_per_epoch,
    refused_transitions,
)

__all__ = [
    "CHAOS_NODE",
    "DEFAULT_DELETION_BOUND",
    "FINAL_RULES",
    "GROUP_EVENTS",
    "TRACE_RULES",
    "AcknowledgedWritesKept",
    "BrokerLiveness",
    "CacheView",
    "DownReason",
    "FinalState",
    "GroupOffsetsRise",
    "GroupsSettle",
    "OnePartitionOwner",
    "OrphanLogDirs",
    "PartitionView",
    "StoreView",
    "TraceMonitor",
    "TraceRule",
    "Violation",
    "acknowledged_creations",
    "caches_converge",
    "check_final",
    "check_trace",
    "controller_epochs_increase",
    "deletions_complete",
    "leader_epochs_increase",
    "leader_in_isr",
    "legal_transitions",
    "no_orphan_log_dirs",
    "no_orphan_znodes",
    "no_stale_epoch_accepted",
    "one_controller_per_epoch",
    "pending_deletions",
    "refused_transitions",
    "store_leadership",
    "violation_at",
]
