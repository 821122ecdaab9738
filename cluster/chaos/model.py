"""The scenario vocabulary: typed, frozen values for everything a chaos scenario says.

A ``Scenario`` is a cluster set-up and a list of steps. YAML files (``cluster.chaos.loader``)
and Python code build the same values; docs/chaos.md documents both. Steps are a closed
union tagged by ``kind`` (the YAML key naming the step):

* admin operations: ``create_topic``, ``delete_topic``, ``add_partitions`` (through the
  Kafka API of a broker, ``via: wire``, or the ``kafka-topics --zookeeper`` path on the
  store, ``via: store``), ``alter_configs`` (a topic's configs, by AlterConfigs or
  IncrementalAlterConfigs through the wire), ``reassign_partitions`` and ``preferred_election`` (the
  ``kafka-reassign-partitions`` / ``kafka-leader-election`` ZooKeeper paths, ``via:
  store``, or their AlterPartitionReassignments / ElectLeaders, ``via: wire``), and
  ``start_broker``;
* faults: ``crash_broker``, ``stop_broker``, ``kill_controller``, ``kill_coordinator``
  (of a consumer group), ``partition``, ``drop``,
  ``delay``, ``duplicate``, ``reorder``, ``expire_session``, ``slow_store``,
  ``disk_failure``, ``clock_skew``, ``pause_member`` (a consumer of a group); and
  ``heal``;
* workload: ``produce`` (records through a broker's Produce handling, every
  acknowledged one traced with its partition, offset and identity), ``consume`` (read
  every partition back up to its high watermark, tracing what was seen; or, with
  ``group``, run consumers as a group through the group coordinator) and ``verify``
  (the same once the replicas have caught up, with the replicas' logs compared);
* ``sleep`` (let simulated time pass), ``wait`` and ``expect`` (a condition with a
  deadline: a wait that times out stops the run, an expectation that fails is a violation).

Admin operations, faults and heals are *actions*: by default they run when reached; with
``at`` (seconds of trace time) or ``after`` (a sequence of trace-event patterns) they are
armed instead and run in the background when their trigger fires, and the next step
follows at once. A fault with ``duration`` heals itself that long after it was injected.

Brokers are named by id or by a selector resolved when the action runs: ``controller``
(the broker ``/controller`` names), ``any`` (a running broker drawn from the run's seeded
RNG), ``other`` (a running broker that is not the controller, drawn likewise).
"""

from __future__ import annotations

from typing import Any, Final, Literal, TypeAlias

import msgspec

from protocol.trace import TraceEvent

__all__ = [
    "ACTION_TYPES",
    "CONDITION_TYPES",
    "FAULT_TYPES",
    "SELECTORS",
    "STEP_TYPES",
    "WORKLOAD_TYPES",
    "Action",
    "AddPartitions",
    "AlterConfigs",
    "BrokerRegistered",
    "BrokerSel",
    "BrokerUnregistered",
    "ClockSkew",
    "ClusterReady",
    "ClusterSetup",
    "Condition",
    "Consume",
    "Converged",
    "CrashBroker",
    "CreateTopic",
    "DataRules",
    "DelayMessages",
    "DeleteTopic",
    "DiskFailure",
    "DropMessages",
    "DuplicateMessages",
    "EventSeen",
    "Expect",
    "ExpireSession",
    "Fault",
    "FinalPhase",
    "GroupSettled",
    "Heal",
    "KillController",
    "KillCoordinator",
    "MarkedForDeletion",
    "MetricAt",
    "NetworkPartition",
    "NoPendingDeletions",
    "Pattern",
    "PauseBroker",
    "PauseMember",
    "PreferredElection",
    "PreferredLeaders",
    "Produce",
    "ReassignPartitions",
    "ReassignmentDone",
    "ReorderMessages",
    "Scenario",
    "Sleep",
    "SlowStore",
    "StartBroker",
    "Step",
    "StopBroker",
    "TopicDeleted",
    "TopicExists",
    "TopicReady",
    "Verify",
    "Wait",
]

SELECTORS: Final = ("controller", "any", "other")
BrokerSel: TypeAlias = int | Literal["controller", "any", "other"]
"""A broker by id, or a selector resolved when the action runs."""

Via: TypeAlias = Literal["wire", "store"]


class _Value(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """Base of the scenario values: unknown keys are errors, not silently ignored; encoded,
    a value shows only what differs from the defaults."""


# ----------------------------------------------------------------------------- patterns


class Pattern(_Value, frozen=True, kw_only=True):
    """Matches trace events: every given attribute must be equal, and every entry of
    ``fields`` must equal the event's field of that name (other fields are free).
    ``nth``: the pattern is met on its n-th matching event."""

    kind: str | None = None
    type: str | None = None
    node: str | None = None
    actor: str | None = None
    fields: dict[str, Any] = {}
    nth: int = 1

    def __post_init__(self) -> None:
        if self.nth < 1:
            raise ValueError(f"nth must be at least 1, not {self.nth}")

    def matches(self, event: TraceEvent) -> bool:
        if (
            (self.kind is not None and event.kind != self.kind)
            or (self.type is not None and event.type != self.type)
            or (self.node is not None and event.node != self.node)
            or (self.actor is not None and event.actor != self.actor)
        ):
            return False
        for name, wanted in self.fields.items():
            if name not in event.fields:
                return False
            if _plain(event.fields[name]) != wanted:
                return False
        return True


def _plain(value: Any) -> Any:
    """A trace field as YAML would write it (tuples as lists, enums as values)."""
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return _plain(msgspec.to_builtins(value))


# ----------------------------------------------------------------------------- steps


class _Step(_Value, frozen=True, kw_only=True, tag_field="kind"):
    """Base of every step."""


class Action(_Step, frozen=True, kw_only=True):
    """A step that does something; ``at`` or ``after`` arms it instead (see module doc)."""

    id: str | None = None
    at: float | None = None
    after: tuple[Pattern, ...] | None = None

    def __post_init__(self) -> None:
        if self.at is not None and self.after is not None:
            raise ValueError("a step has `at` or `after`, not both")
        if self.at is not None and self.at < 0:
            raise ValueError(f"at must not be negative, not {self.at}")
        if self.after is not None and not self.after:
            raise ValueError("after needs at least one pattern")

    @property
    def armed(self) -> bool:
        return self.at is not None or self.after is not None


class _AdminOp(Action, frozen=True, kw_only=True):
    """``via``: ``wire`` (a Kafka request to ``broker``, forwarded to the controller as a
    real client's would be) or ``store`` (kafka-topics' ``--zookeeper`` path).
    ``outcome``: what must come back, ``any`` (recorded only), ``ok``, ``error``, or a
    Kafka error name such as ``TOPIC_ALREADY_EXISTS`` (wire only). ``retries``: as an
    admin client does, send the request again (to ``broker``, resolved anew) up to that
    many times while the answer is NOT_CONTROLLER or no answer came (wire only)."""

    via: Via = "wire"
    broker: BrokerSel = "any"
    outcome: str = "any"
    timeout_ms: int = 30_000
    retries: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.retries < 0:
            raise ValueError(f"retries must not be negative, not {self.retries}")


class CreateTopic(_AdminOp, frozen=True, kw_only=True, tag="create_topic"):
    topic: str
    partitions: int = 1
    replication_factor: int = 1
    assignment: dict[int, tuple[int, ...]] | None = None
    configs: dict[str, str] = {}


class DeleteTopic(_AdminOp, frozen=True, kw_only=True, tag="delete_topic"):
    topic: str


class AddPartitions(_AdminOp, frozen=True, kw_only=True, tag="add_partitions"):
    """Raise ``topic``'s partition count to ``count`` (``--alter --partitions``)."""

    topic: str
    count: int


class AlterConfigs(_AdminOp, frozen=True, kw_only=True, tag="alter_configs"):
    """Change ``topic``'s configs through the wire (``kafka-configs --bootstrap-server
    --entity-type topics --alter``). ``incremental`` false: one AlterConfigs whose
    ``configs`` are the topic's whole new set of overrides (those it leaves out go back to
    the broker's defaults); true: one IncrementalAlterConfigs that SETs each of
    ``configs`` and DELETEs each of ``delete``. The resource's error is the outcome. A
    topic whose ``cleanup.policy`` holds ``compact`` afterwards has its replicas' logs
    compared as compacted logs from then on (``follower_logs_match``)."""

    topic: str
    configs: dict[str, str] = {}
    incremental: bool = False
    delete: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.via != "wire":
            raise ValueError("alter_configs goes through the wire only (via: wire)")
        if self.delete and not self.incremental:
            raise ValueError("delete needs incremental: true (AlterConfigs sets the whole set)")


class StartBroker(Action, frozen=True, kw_only=True, tag="start_broker"):
    """Start a stopped or crashed broker (this heals the fault that took it down). A
    crashed broker's old session must expire first: the step waits for it."""

    broker: int


# -- admin tools on the store or through the wire (reassignment, preferred election)


def _check_assignment(assignment: dict[int, tuple[int, ...]]) -> None:
    if not assignment:
        raise ValueError("assignment needs at least one partition")
    for partition, replicas in assignment.items():
        if partition < 0:
            raise ValueError(f"partition {partition} is negative")
        if not replicas:
            raise ValueError(f"partition {partition} has no replicas")
        if len(set(replicas)) != len(replicas):
            raise ValueError(f"partition {partition} lists a broker twice: {list(replicas)}")


class _ToolOp(Action, frozen=True, kw_only=True):
    """An admin tool with both of 2.7's paths. ``via: store`` (the default) runs it on the
    cluster's store, with a store session of its own, as its ``kemu`` command's ZooKeeper
    path does; ``via: wire`` sends the request its ``--bootstrap-server`` path sends
    (AlterPartitionReassignments, ElectLeaders) to ``broker``, which answers NOT_CONTROLLER
    unless its controller is the active one; ``retries`` and ``timeout_ms`` as for the
    topic operations (wire only). ``outcome``: ``any`` (recorded only), ``ok`` or
    ``error``."""

    via: Via = "store"
    broker: BrokerSel = "any"
    timeout_ms: int = 30_000
    retries: int = 0
    topic: str
    outcome: Literal["any", "ok", "error"] = "any"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.retries < 0:
            raise ValueError(f"retries must not be negative, not {self.retries}")


class ReassignPartitions(_ToolOp, frozen=True, kw_only=True, tag="reassign_partitions"):
    """``kemu reassign-partitions --execute``: on the store, check the partitions and
    brokers exist and no reassignment is pending, then write ``/admin/reassign_partitions``
    with the new replicas of ``topic``'s partitions (``assignment``: ``{partition:
    [brokers]}``); the controller carries the reassignment out and removes the znode.
    Through the wire, one AlterPartitionReassignments with those targets; the first
    partition's error is the outcome."""

    assignment: dict[int, tuple[int, ...]]

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_assignment(self.assignment)


class PreferredElection(_ToolOp, frozen=True, kw_only=True, tag="preferred_election"):
    """``kemu leader-election --election-type preferred``: on the store, write
    ``/admin/preferred_replica_election`` with ``partitions`` of ``topic`` (every
    partition it has when the step runs, when omitted); the controller moves each one's
    leadership to its first replica where it can and removes the znode. Through the wire,
    one ElectLeaders (preferred) for those partitions (when omitted, every partition the
    broker's metadata cache has for the topic), answered once the new leaders are known;
    a partition whose preferred replica already leads (ELECTION_NOT_NEEDED) is no error,
    as ``LeaderElectionCommand`` has it."""

    partitions: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.partitions is not None:
            if not self.partitions:
                raise ValueError("partitions needs at least one partition (omit it for all)")
            if any(p < 0 for p in self.partitions):
                raise ValueError(f"partitions must not be negative: {list(self.partitions)}")
            if len(set(self.partitions)) != len(self.partitions):
                raise ValueError(f"partitions lists one twice: {list(self.partitions)}")


class Fault(Action, frozen=True, kw_only=True):
    """Base of the faults. ``duration``: heal automatically that long after injection."""

    duration: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.duration is not None and self.duration <= 0:
            raise ValueError(f"duration must be positive, not {self.duration}")


class CrashBroker(Fault, frozen=True, kw_only=True, tag="crash_broker"):
    """No graceful step; the broker's store session expires after its timeout. Healed
    by starting the broker again."""

    broker: BrokerSel


class StopBroker(Fault, frozen=True, kw_only=True, tag="stop_broker"):
    """Graceful stop (its session closes, its znode goes at once). Healed by a start."""

    broker: BrokerSel


class PauseBroker(Fault, frozen=True, kw_only=True, tag="pause_broker"):
    """Freeze the broker as SIGSTOP freezes a process (in one process: every task of its
    node holds at its next await, ``actors.runtime.freeze``; with processes: SIGSTOP). It
    answers nothing and sends nothing; past its session timeout its store session
    expires. Healed by resuming it (SIGCONT): its held work runs, late."""

    broker: BrokerSel


class KillController(Fault, frozen=True, kw_only=True, tag="kill_controller"):
    """Crash whichever broker is the controller at that moment."""


class KillCoordinator(Fault, frozen=True, kw_only=True, tag="kill_coordinator"):
    """Crash the broker that coordinates the consumer group ``group`` at that moment
    (the one FindCoordinator names: the leader of the group's ``__consumer_offsets``
    partition); ``graceful``: stop it instead (a controlled shutdown, which moves its
    leaderships first). Healed by starting it again."""

    group: str
    graceful: bool = False


class NetworkPartition(Fault, frozen=True, kw_only=True, tag="partition"):
    """Nodes in different groups cannot exchange messages (controller requests, their
    answers, forwarded admin requests); their store sessions are untouched."""

    groups: tuple[tuple[BrokerSel, ...], ...]

    def __post_init__(self) -> None:
        super().__post_init__()
        if len(self.groups) < 2:
            raise ValueError("a partition needs at least two groups")
        if any(not group for group in self.groups):
            raise ValueError("a partition group cannot be empty")


class _MessageRule(Fault, frozen=True, kw_only=True):
    """Which inter-broker messages a rule hits: from ``src`` to ``dst`` brokers (every
    broker when omitted), of the message ``types`` (class names, e.g.
    ``StopReplicaRequest``; every type when omitted)."""

    src: tuple[BrokerSel, ...] | None = None
    dst: tuple[BrokerSel, ...] | None = None
    types: tuple[str, ...] | None = None


def _check_probability(p: float) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"probability must be within [0, 1], not {p}")


class DropMessages(_MessageRule, frozen=True, kw_only=True, tag="drop"):
    probability: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_probability(self.probability)


class DelayMessages(_MessageRule, frozen=True, kw_only=True, tag="delay"):
    seconds: float
    jitter: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.seconds < 0 or self.jitter < 0:
            raise ValueError("seconds and jitter must not be negative")


class DuplicateMessages(_MessageRule, frozen=True, kw_only=True, tag="duplicate"):
    probability: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_probability(self.probability)


class ReorderMessages(_MessageRule, frozen=True, kw_only=True, tag="reorder"):
    probability: float = 1.0
    window: int = 1
    max_hold: float = 0.1

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_probability(self.probability)
        if self.window < 1:
            raise ValueError(f"window must be at least 1, not {self.window}")
        if self.max_hold < 0:
            raise ValueError(f"max_hold must not be negative, not {self.max_hold}")


class ExpireSession(Fault, frozen=True, kw_only=True, tag="expire_session"):
    """Expire the broker's store session now (as ZooKeeper does when it hears nothing
    for the session timeout). Instantaneous: the broker opens a new session by itself,
    so there is nothing to heal."""

    broker: BrokerSel


class SlowStore(Fault, frozen=True, kw_only=True, tag="slow_store"):
    """Every store call of every session waits ``latency`` seconds first."""

    latency: float

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.latency <= 0:
            raise ValueError(f"latency must be positive, not {self.latency}")


DISK_OPS: Final = ("mkdir", "write_file", "rename", "rmtree", "listdir", "is_dir")


class DiskFailure(Fault, frozen=True, kw_only=True, tag="disk_failure"):
    """The broker's log manager sees ``ops`` fail with EIO (every operation when
    omitted) under its log dir (``log_dir``: which of its ``log.dirs``, from 0), or only
    under the directory ``entry`` of it (e.g. ``t1-0``); ``readonly`` instead makes every
    mutating operation fail with EROFS. ``times``: fail that many times, then work again
    (else until healed)."""

    broker: BrokerSel
    ops: tuple[str, ...] | None = None
    entry: str | None = None
    readonly: bool = False
    times: int | None = None
    log_dir: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        unknown = sorted(set(self.ops or ()) - set(DISK_OPS))
        if unknown:
            raise ValueError(f"unknown disk ops {unknown} (known: {', '.join(DISK_OPS)})")
        if self.readonly and self.ops is not None:
            raise ValueError("readonly fails every mutating op: give it without ops")
        if self.times is not None and self.times < 1:
            raise ValueError(f"times must be at least 1, not {self.times}")
        if self.log_dir < 0:
            raise ValueError(f"log_dir must be at least 0, not {self.log_dir}")
        if self.entry is not None and ("/" in self.entry or self.entry in {"", ".", ".."}):
            raise ValueError(f"entry must be one directory name, not {self.entry!r}")


class ClockSkew(Fault, frozen=True, kw_only=True, tag="clock_skew"):
    """The broker's node clock reads ``skew`` seconds off and runs at ``rate`` (2.0:
    its timers fire twice as early). Reaches what reads the node's clock when it
    schedules (asks, log-manager timers, purgatory); components that captured the
    clock at start-up (store connection, controller channel) keep the true one."""

    broker: BrokerSel
    skew: float = 0.0
    rate: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.rate <= 0:
            raise ValueError(f"rate must be positive, not {self.rate}")


class PauseMember(Fault, frozen=True, kw_only=True, tag="pause_member"):
    """Freeze member ``member`` (from 0) of the consumer group ``group`` started by a
    ``consume`` step, as a long GC pause freezes a consumer: it sends nothing (no
    heartbeat, fetch or commit) until healed; then it goes on where it stopped, with the
    generation it had (past its session timeout, the coordinator has removed it)."""

    group: str
    member: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.member < 0:
            raise ValueError(f"member must not be negative, not {self.member}")


# ----------------------------------------------------------------------------- workload

Acks: TypeAlias = Literal[0, 1, -1, "all"]


class Produce(Action, frozen=True, kw_only=True, tag="produce"):
    """Send ``count`` records to ``topic`` (to ``partition``, or round-robin over its
    partitions), ``batch`` records per Produce request, each to the partition's leader
    as the store names it, through that broker's own Produce handling (a
    ``ProduceRequestData`` asked of its ``broker`` actor, as its Kafka listener hands it
    one). ``rate``: records per second (None: the next request as soon as the previous
    one is answered). ``acks``: 0, 1, -1 or ``all``. Each record is identified by
    ``<id>-<n>`` (``id``: the step's, else ``p<step index>``), its key, padded to
    ``key_size`` bytes; its value is ``value_size`` bytes derived from the identity.
    ``retries``: a request answered with a retriable error (or none in time) is sent
    again, up to that many times, 100 ms later, to the leader of the moment.
    ``delivery_timeout_ms`` (Kafka's ``delivery.timeout.ms``): the batch is given up
    that long after it was made, on the run's clock, retries left or not, an unanswered
    request included; with it and no ``retries``, retries are unlimited (Kafka's
    default). Without either, a request is sent once. ``outcome``: what every
    request's last answer must be (``any``, ``ok``, ``error`` or a Kafka error name such
    as ``NOT_ENOUGH_REPLICAS``). ``background``: go on with
    the next step at once (the run waits for the producer before its final phase)."""

    topic: str
    count: int
    partition: int | None = None
    batch: int = 1
    rate: float | None = None
    acks: Acks = -1
    key_size: int = 0
    value_size: int = 16
    timeout_ms: int = 5_000
    retries: int | None = None
    delivery_timeout_ms: int | None = None
    outcome: str = "any"
    background: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.count < 1:
            raise ValueError(f"count must be at least 1, not {self.count}")
        if self.batch < 1:
            raise ValueError(f"batch must be at least 1, not {self.batch}")
        if self.partition is not None and self.partition < 0:
            raise ValueError(f"partition must not be negative, not {self.partition}")
        if self.rate is not None and self.rate <= 0:
            raise ValueError(f"rate must be positive, not {self.rate}")
        if self.key_size < 0 or self.value_size < 0:
            raise ValueError("key_size and value_size must not be negative")
        if self.timeout_ms < 1:
            raise ValueError(f"timeout_ms must be positive, not {self.timeout_ms}")
        if self.retries is not None and self.retries < 0:
            raise ValueError(f"retries must not be negative, not {self.retries}")
        if self.delivery_timeout_ms is not None and self.delivery_timeout_ms < self.timeout_ms:
            # KafkaProducer's ConfigException: a batch must outlive one request.
            raise ValueError(
                f"delivery_timeout_ms must be at least timeout_ms ({self.timeout_ms}), "
                f"not {self.delivery_timeout_ms}"
            )

    @property
    def max_retries(self) -> int | None:
        """The retries a batch may have (``None``: until its delivery timeout)."""
        if self.retries is not None:
            return self.retries
        return None if self.delivery_timeout_ms is not None else 0

    @property
    def required_acks(self) -> int:
        """``acks`` as the Produce request carries it (``all`` is -1)."""
        return -1 if self.acks == "all" else self.acks


class _Read(Action, frozen=True, kw_only=True):
    """Base of the steps that read partitions back: ``topic`` and its ``partitions``."""

    topic: str
    partitions: tuple[int, ...] | None = None


class Consume(_Read, frozen=True, kw_only=True, tag="consume"):
    """Without ``group``: read ``topic``'s partitions (``partitions``, else all) from
    their leaders as a consumer does (Fetch, from the log start up to the high watermark)
    and trace what was seen (``records_read``).

    With ``group``: start ``members`` consumers of that group, subscribed to ``topics``
    (else ``topic``), and go on with the next step at once. Each member talks to the
    group coordinator with the requests a Kafka consumer sends (FindCoordinator,
    JoinGroup, SyncGroup, Heartbeat every ``heartbeat_interval_ms``, OffsetCommit every
    ``commit_interval`` seconds, LeaveGroup), the leader assigning partitions as Kafka's
    RangeAssignor does, and fetches its partitions from their leaders. The members run
    for ``stop_after`` seconds then leave, or (without it) until the end of the run, where
    the group must be Stable with every partition of its topics owned."""

    topic: str = ""
    group: str | None = None
    topics: tuple[str, ...] | None = None
    members: int = 1
    commit_interval: float = 1.0
    session_timeout_ms: int = 10_000
    heartbeat_interval_ms: int = 3_000
    rebalance_timeout_ms: int = 30_000
    stop_after: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.group is None:
            if not self.topic:
                raise ValueError("consume needs a topic (or a group and its topics)")
            grouped = ("topics", "stop_after")
            given = [name for name in grouped if getattr(self, name) is not None]
            if given or self.members != 1:
                raise ValueError(f"{', '.join(given) or 'members'} needs a group")
            return
        if not self.group:
            raise ValueError("group must not be empty")
        if self.partitions is not None:
            raise ValueError("a group's members are assigned partitions: give no partitions")
        if self.topic and self.topics is not None:
            raise ValueError("give topic or topics, not both")
        if not self.subscription:
            raise ValueError("a group needs topics to subscribe to")
        if len(set(self.subscription)) != len(self.subscription):
            raise ValueError(f"topics lists one twice: {list(self.subscription)}")
        if not 1 <= self.members <= 100:
            raise ValueError(f"members must be within [1, 100], not {self.members}")
        if self.commit_interval <= 0:
            raise ValueError(f"commit_interval must be positive, not {self.commit_interval}")
        if self.stop_after is not None and self.stop_after <= 0:
            raise ValueError(f"stop_after must be positive, not {self.stop_after}")
        if not 0 < self.heartbeat_interval_ms < self.session_timeout_ms:
            raise ValueError("heartbeat_interval_ms must be positive and below session_timeout_ms")
        if self.rebalance_timeout_ms < 1:
            raise ValueError(
                f"rebalance_timeout_ms must be positive, not {self.rebalance_timeout_ms}"
            )

    @property
    def subscription(self) -> tuple[str, ...]:
        """The topics a group subscribes to."""
        if self.topics is not None:
            return self.topics
        return (self.topic,) if self.topic else ()


class Verify(_Read, frozen=True, kw_only=True, tag="verify"):
    """``consume`` once each partition has settled (its ISR replicas caught up with the
    leader and the high watermark at the log end, waited for up to ``within`` seconds):
    every acknowledged write must then be read back, and each replica's log is read and
    compared with the leader's (``replica_logs_read``)."""

    within: float = 30.0


WORKLOAD_TYPES: Final = ("produce", "consume", "verify")


class Heal(Action, frozen=True, kw_only=True, tag="heal"):
    """End the fault with this ``id`` (``all``: every active fault, newest first)."""

    fault: str = "all"


class Sleep(_Step, frozen=True, kw_only=True, tag="sleep"):
    seconds: float

    def __post_init__(self) -> None:
        if self.seconds < 0:
            raise ValueError(f"seconds must not be negative, not {self.seconds}")


# ----------------------------------------------------------------------------- conditions


class _Condition(_Value, frozen=True, kw_only=True, tag_field="kind"):
    """Base of the conditions ``wait`` and ``expect`` poll."""


class TopicExists(_Condition, frozen=True, kw_only=True, tag="topic_exists"):
    """``/brokers/topics/<topic>`` exists."""

    topic: str


class TopicReady(_Condition, frozen=True, kw_only=True, tag="topic_ready"):
    """The topic exists, every partition's state has a leader, and every running
    broker's metadata cache shows all its partitions with leaders."""

    topic: str


class TopicDeleted(_Condition, frozen=True, kw_only=True, tag="topic_deleted"):
    """No topic znode, no deletion marker, in no running broker's cache, and no live
    (not ``-delete``) log directory of it on a running broker."""

    topic: str


class MarkedForDeletion(_Condition, frozen=True, kw_only=True, tag="marked_for_deletion"):
    topic: str


class NoPendingDeletions(_Condition, frozen=True, kw_only=True, tag="no_pending_deletions"):
    """``/admin/delete_topics`` has no children."""


class ClusterReady(_Condition, frozen=True, kw_only=True, tag="cluster_ready"):
    """Every running broker is registered and they agree on a running controller and on
    the set of running brokers."""


class BrokerRegistered(_Condition, frozen=True, kw_only=True, tag="broker_registered"):
    broker: int


class BrokerUnregistered(_Condition, frozen=True, kw_only=True, tag="broker_unregistered"):
    broker: int


class Converged(_Condition, frozen=True, kw_only=True, tag="converged"):
    """The end-state invariants hold now: no orphan znodes or log directories, no
    ``-delete`` directories, no pending deletion, caches equal to the store."""


class EventSeen(_Condition, frozen=True, kw_only=True, tag="event"):
    """A trace event matching ``pattern`` (its ``nth`` match) has been recorded in this run
    (before the step began, or since)."""

    pattern: Pattern


class ReassignmentDone(_Condition, frozen=True, kw_only=True, tag="reassignment_done"):
    """``topic`` exists, none of its partitions is in ``/admin/reassign_partitions``, its
    assignment has no replica being added or removed, every running broker's cache shows
    the same replicas, and each partition of ``assignment`` (when given) has exactly those
    replicas, in that order."""

    topic: str
    assignment: dict[int, tuple[int, ...]] | None = None

    def __post_init__(self) -> None:
        if self.assignment is not None:
            _check_assignment(self.assignment)


class PreferredLeaders(_Condition, frozen=True, kw_only=True, tag="preferred_leaders"):
    """``topic`` exists and every partition is led by its first (preferred) replica, in
    its state znode and in every running broker's metadata cache."""

    topic: str


class GroupSettled(_Condition, frozen=True, kw_only=True, tag="group_settled"):
    """The coordinator of consumer group ``group`` (the broker FindCoordinator names)
    describes it Stable, with ``members`` members when given, and every partition of the
    topics its members subscribe to owned by exactly one of them."""

    group: str
    members: int | None = None


class MetricAt(_Condition, frozen=True, kw_only=True, tag="metric"):
    """A metric under Kafka's name (docs/metrics.md) is ``equals``, or between
    ``at_least`` and ``at_most`` (inclusive; either may be left out): on broker ``broker``,
    or summed over the running brokers when it is None. A meter or timer reads as its
    count. Read from the actors (the broker's ``ReplicaManager``, its controller), so in
    deterministic mode too; a broker that is down or does not answer fails it."""

    name: str
    broker: int | None = None
    equals: int | None = None
    at_least: int | None = None
    at_most: int | None = None

    def __post_init__(self) -> None:
        if self.equals is None and self.at_least is None and self.at_most is None:
            raise ValueError("give equals, at_least or at_most")
        if self.equals is not None and (self.at_least is not None or self.at_most is not None):
            raise ValueError("equals does not go with at_least or at_most")
        if self.at_least is not None and self.at_most is not None and self.at_least > self.at_most:
            raise ValueError(f"at_least {self.at_least} is above at_most {self.at_most}")

    def holds(self, value: int) -> bool:
        if self.equals is not None:
            return value == self.equals
        low = self.at_least if self.at_least is not None else value
        high = self.at_most if self.at_most is not None else value
        return low <= value <= high


Condition: TypeAlias = (
    TopicExists
    | TopicReady
    | TopicDeleted
    | MarkedForDeletion
    | NoPendingDeletions
    | ClusterReady
    | BrokerRegistered
    | BrokerUnregistered
    | Converged
    | EventSeen
    | ReassignmentDone
    | PreferredLeaders
    | GroupSettled
    | MetricAt
)
CONDITION_TYPES: Final[tuple[type[_Condition], ...]] = (
    TopicExists,
    TopicReady,
    TopicDeleted,
    MarkedForDeletion,
    NoPendingDeletions,
    ClusterReady,
    BrokerRegistered,
    BrokerUnregistered,
    Converged,
    EventSeen,
    ReassignmentDone,
    PreferredLeaders,
    GroupSettled,
    MetricAt,
)


class Wait(_Step, frozen=True, kw_only=True, tag="wait"):
    """Poll ``condition`` until it holds; the run stops as failed after ``within``."""

    condition: Condition
    within: float = 30.0


class Expect(_Step, frozen=True, kw_only=True, tag="expect"):
    """``condition`` must hold within ``within`` seconds (0: right now); if not, it is
    reported as a violation and the run goes on."""

    condition: Condition
    within: float = 0.0


Step: TypeAlias = (
    Produce
    | Verify
    | Consume
    | CreateTopic
    | DeleteTopic
    | AddPartitions
    | AlterConfigs
    | ReassignPartitions
    | PreferredElection
    | StartBroker
    | CrashBroker
    | StopBroker
    | PauseBroker
    | KillController
    | KillCoordinator
    | NetworkPartition
    | DropMessages
    | DelayMessages
    | DuplicateMessages
    | ReorderMessages
    | ExpireSession
    | SlowStore
    | DiskFailure
    | ClockSkew
    | PauseMember
    | Heal
    | Sleep
    | Wait
    | Expect
)
FAULT_TYPES: Final[tuple[type[Fault], ...]] = (
    CrashBroker,
    StopBroker,
    PauseBroker,
    KillController,
    KillCoordinator,
    NetworkPartition,
    DropMessages,
    DelayMessages,
    DuplicateMessages,
    ReorderMessages,
    ExpireSession,
    SlowStore,
    DiskFailure,
    ClockSkew,
    PauseMember,
)
ACTION_TYPES: Final[tuple[type[Action], ...]] = (
    CreateTopic,
    DeleteTopic,
    AddPartitions,
    AlterConfigs,
    ReassignPartitions,
    PreferredElection,
    StartBroker,
    Produce,
    Consume,
    Verify,
    Heal,
    *FAULT_TYPES,
)
STEP_TYPES: Final[tuple[type[_Step], ...]] = (*ACTION_TYPES, Sleep, Wait, Expect)


def kind_of(value: _Step | _Condition) -> str:
    """The YAML key of a step or condition."""
    tag = type(value).__struct_config__.tag
    assert isinstance(tag, str)
    return tag


# ----------------------------------------------------------------------------- scenario


class ClusterSetup(_Value, frozen=True, kw_only=True):
    """``store``: ``embedded`` or ``zookeeper``; ``mode``: ``in-process`` or
    ``processes``. The runner does the embedded, in-process cluster today.
    ``log_dirs``: each broker's ``log.dirs`` count (``broker-<id>``, then
    ``broker-<id>.1`` ...): a disk failure in one of several leaves the broker up, its
    partitions there offline (in-process only)."""

    brokers: int = 3
    racks: dict[int, str] = {}
    store: Literal["embedded", "zookeeper"] = "embedded"
    mode: Literal["in-process", "processes"] = "in-process"
    config: dict[str, str] = {}
    log_dirs: int = 1

    def __post_init__(self) -> None:
        if not 1 <= self.brokers <= 100:
            raise ValueError(f"brokers must be within [1, 100], not {self.brokers}")
        if not 1 <= self.log_dirs <= 4:
            raise ValueError(f"log_dirs must be within [1, 4], not {self.log_dirs}")
        if self.log_dirs > 1 and self.mode == "processes":
            raise ValueError("several log_dirs per broker are in-process only")


class FinalPhase(_Value, frozen=True, kw_only=True):
    """After the last step: ``heal`` every active fault and start every broker that is
    down, then wait up to ``settle`` seconds for the cluster to converge before the
    end-state invariants are checked."""

    heal: bool = True
    settle: float = 120.0


LossCause: TypeAlias = Literal["acks_1", "unclean"]


class DataRules(_Value, frozen=True, kw_only=True):
    """What the scenario declares of its data. ``allow_loss``: the causes for which an
    acknowledged write may be lost (``acks_1``: written with acks=1, lost with a leader
    that had not replicated it; ``unclean``: lost after an unclean leader election of its
    partition); each loss is then reported as a notice naming what was lost (and the
    election), not as a violation. ``expect_loss``: causes that must have lost at least one
    write by the end (each is allowed too)."""

    allow_loss: tuple[LossCause, ...] = ()
    expect_loss: tuple[LossCause, ...] = ()

    @property
    def allowed(self) -> frozenset[str]:
        return frozenset((*self.allow_loss, *self.expect_loss))


class Scenario(_Value, frozen=True, kw_only=True):
    """``deletion_bound``: seconds of fault-free time within which a topic marked for
    deletion must be deleted. ``deadline``: the whole run's bound, in seconds."""

    name: str
    description: str = ""
    cluster: ClusterSetup = ClusterSetup()
    steps: tuple[Step, ...] = ()
    deletion_bound: float = 60.0
    deadline: float = 900.0
    final: FinalPhase = FinalPhase()
    data: DataRules = DataRules()
