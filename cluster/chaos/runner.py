"""Running one scenario with one seed.

``run_scenario`` starts the scenario's cluster (in-process, embedded store, no Kafka
listeners) on the virtual clock (deterministic mode) or the real one, carries out the
steps, then the final phase (heal everything, start every broker that is down, wait
for the cluster to converge), reads the end state, and checks the invariants over the
trace and the end state. Everything goes into the run directory:

* ``trace.jsonl``: the trace (docs/trace-schema.md, plus the chaos events of
  docs/chaos.md); in deterministic mode, the same scenario and seed give the same bytes;
* ``summary.json``: the outcome, counts, times, the code that made the run and the command
  that reproduces it;
* ``invariants.json``: every rule checked, with its violations, and the notices;
* ``timeline.txt``: the run for people: steps, faults, elections, deletions, violations;
* ``final_state.json``: what the end-state rules read;
* ``report.html``: the run drawn for people (``cluster.chaos.report``);
* ``logs/``: the brokers' log directories.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import random
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import anyio
import msgspec
from anyio.abc import TaskGroup, TaskStatus

from actors.broker.broker import broker_node_id
from actors.controller.recording import CONTROLLER_INPUTS
from actors.invariants import (
    CHAOS_NODE,
    FINAL_RULES,
    TRACE_RULES,
    AcknowledgedWritesKept,
    FinalState,
    TraceMonitor,
    Violation,
    check_final,
    refused_transitions,
)
from actors.runtime.actor import Node
from actors.runtime.clock import Clock, RealClock, VirtualClock, run_real, run_virtual
from actors.runtime.code_identity import CodeIdentity, code_identity
from actors.runtime.tracer import Tracer
from actors.zk import kafka_zk
from actors.zk.store import MetadataStore, StoreSession
from cluster.chaos.admin import AdminOp, run_admin
from cluster.chaos.conditions import condition_check, converged, read_final
from cluster.chaos.faults import RESTART_TIMEOUT, ActiveFault, inject
from cluster.chaos.group import ConsumerGroup
from cluster.chaos.harness import Harness, Recorder
from cluster.chaos.loader import real_mode_refusal
from cluster.chaos.model import (
    Action,
    AddPartitions,
    AlterConfigs,
    Condition,
    Consume,
    CreateTopic,
    DeleteTopic,
    Expect,
    Fault,
    Heal,
    PreferredElection,
    Produce,
    ReassignPartitions,
    Scenario,
    Sleep,
    StartBroker,
    Step,
    Verify,
    Wait,
    kind_of,
)
from cluster.chaos.real import LIVE_LAG, TAIL_POLL, LiveOrder, TraceTail, merge, run_chroot
from cluster.chaos.report import write_report
from cluster.chaos.timeline import condition_text, step_label, timeline
from cluster.chaos.workload import consume, produce, verify, verify_partition
from cluster.launch.cluster import Cluster, ClusterSpec
from cluster.launch.processes import ProcessCluster
from cluster.network import Network, TcpTransport
from cluster.trace_files import JsonlTraceWriter
from protocol.errors import KemuError, sole_error
from protocol.ids import TopicName
from protocol.trace import TraceEvent, TraceHeader, TraceKind

__all__ = ["CHECKED_RULES", "RunOptions", "RunResult", "reproduce_command", "run_scenario"]

Status = Literal["passed", "failed", "error"]

INVARIANTS_ACTOR: Final = "invariants"
"""The actor the live invariant checks record ``invariant_violated`` events under."""

CHECKED_RULES: Final = tuple(
    sorted({*TRACE_RULES, *FINAL_RULES, "deletions_complete", "acknowledged_creations"})
)
"""Every invariant a run checks, as its ``invariants.json`` lists them (docs/chaos.md,
"Invariants"): the trace and end-state rules, the deletion bound, and the creations
checked against both."""

FINAL_SETTLE: Final = 60.0
"""Seconds each produced partition gets to settle for the run's final reads."""

RUN_FILES: Final = (
    "trace.jsonl",
    "summary.json",
    "invariants.json",
    "timeline.txt",
    "final_state.json",
    "report.html",
)


class RunResult(msgspec.Struct, kw_only=True):
    """The outcome of one run (``summary.json``)."""

    scenario: str
    source: str | None
    seed: int
    mode: Literal["deterministic", "real"]
    store: Literal["embedded", "zookeeper"] = "embedded"
    processes: bool = False  # one OS process per broker
    status: Status = "passed"
    violations: list[Violation] = msgspec.field(default_factory=list)
    failures: list[Violation] = msgspec.field(default_factory=list)
    notices: list[Violation] = msgspec.field(default_factory=list)
    error: str | None = None
    events: int = 0
    simulated_seconds: float = 0.0
    wall_seconds: float = 0.0
    run_dir: str = ""
    trace_sha256: str = ""
    code: CodeIdentity | None = None
    """The kemu code that made the run (``None`` in a summary written before it was named)."""
    reproduce: str = ""

    @property
    def problems(self) -> list[Violation]:
        return [*self.failures, *self.violations]


@dataclass(frozen=True)
class RunOptions:
    """``source``: the scenario file (for the command that reproduces the run);
    ``progress``: called with one line per step when given."""

    run_dir: Path
    seed: int = 0
    deterministic: bool = True
    source: str | None = None
    out: Path | None = None
    progress: Callable[[str], None] | None = field(default=None, compare=False)
    zookeeper: str | None = None
    """Run on this ZooKeeper (HOST:PORT[/chroot]; each run gets a fresh chroot below it),
    whatever the scenario's ``store`` says; a scenario with ``store: zookeeper`` needs it."""
    local_zookeeper: bool = False  # ``zookeeper`` is a throwaway local server
    processes: bool = False  # one OS process per broker, whatever the scenario's ``mode``
    named_dir: Path | None = None
    """Where the run directory will be once the run is over, when it is written elsewhere
    first and then moved there (``kemu chaos campaign``'s executors): the summary names
    it. ``None``: ``run_dir``."""


def reproduce_command(
    source: str | None,
    seed: int,
    deterministic: bool,
    out: Path | None,
    *,
    processes: bool = False,
    zookeeper: str | None = None,
) -> str:
    """``zookeeper``: the address to name ("" for a throwaway local server)."""
    parts = ["kemu", "chaos", "run", source or "SCENARIO.yaml", "--seed", str(seed)]
    if deterministic:
        parts.append("--deterministic")
    if processes:
        parts.append("--processes")
    if zookeeper is not None:
        parts += ["--zookeeper", zookeeper] if zookeeper else ["--zookeeper"]
    if out is not None:
        parts += ["--out", str(out)]
    return " ".join(parts)


def refuse_foreign(run_dir: Path) -> None:
    """``KemuError`` if ``run_dir`` is a non-empty directory that holds no chaos run."""
    if run_dir.is_dir() and not run_dir.is_symlink():
        names = {p.name for p in run_dir.iterdir()}
        if names and not names & set(RUN_FILES):
            raise KemuError(f"{run_dir} is not empty and holds no chaos run: not touching it")


def prepare_run_dir(run_dir: Path) -> None:
    """Empty ``run_dir`` for a new run; refuse a non-empty directory that is not a run's."""
    if run_dir.exists():
        refuse_foreign(run_dir)
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)


def run_scenario(scenario: Scenario, options: RunOptions) -> RunResult:
    """Run ``scenario`` once (see the module doc) and write the run directory."""
    scenario = real_setup(scenario, options)
    prepare_run_dir(options.run_dir)
    run = _Run(scenario, options)
    started = time.perf_counter()
    try:
        if options.deterministic:
            run_virtual(run.main)
        else:
            run_real(run.main, freezable=not run.processes)  # in one process: pause_broker
    except Exception as exc:  # the run's own boundary: report, never a traceback
        run.error(sole_error(exc))
    except BaseExceptionGroup as group:
        leaf = sole_error(group)
        if not isinstance(leaf, Exception):
            raise
        run.error(leaf)
    finally:
        run.close_trace()
    return run.finish(time.perf_counter() - started)


def real_setup(scenario: Scenario, options: RunOptions) -> Scenario:
    """The scenario with the store and mode the options ask for; ``KemuError`` if it
    cannot run so (deterministic mode is in-process on the embedded store only; a fault
    the store or mode cannot do; ZooKeeper without an address)."""
    setup = scenario.cluster
    store = "zookeeper" if options.zookeeper is not None else setup.store
    mode = "processes" if options.processes else setup.mode
    if options.deterministic and (store, mode) != ("embedded", "in-process"):
        raise KemuError(
            f"scenario {scenario.name}: deterministic mode runs in one process on the embedded"
            f" store (this run: store {store}, mode {mode}); run it on the real clock"
        )
    if store == "zookeeper" and not options.zookeeper:
        raise KemuError(
            f"scenario {scenario.name}: store: zookeeper needs a ZooKeeper address"
            " (kemu chaos run --zookeeper [HOST:PORT])"
        )
    for index, step in enumerate(scenario.steps):
        refused = real_mode_refusal(step, store=store, mode=mode)
        if refused is not None:
            raise KemuError(f"scenario {scenario.name}: {step_label(index, step)}: {refused}")
    cluster = msgspec.structs.replace(setup, store=store, mode=mode)
    return msgspec.structs.replace(scenario, cluster=cluster)


class _Run:
    def __init__(self, scenario: Scenario, options: RunOptions) -> None:
        self.scenario = scenario
        self.options = options
        self.run_dir = options.run_dir
        self.log_root = (options.run_dir / "logs").resolve()
        header = TraceHeader(
            run=scenario.name,
            seed=options.seed,
            clock="virtual" if options.deterministic else "real",
        )
        self.writer = JsonlTraceWriter(options.run_dir / "trace.jsonl", header)
        self.processes = scenario.cluster.mode == "processes"
        self.monitor = self._monitor()
        self.merged: list[TraceEvent] | None = None
        self.renumbered: dict[int, int] = {}
        if self.processes:
            # Events from several processes, recorded as they are read: the trace rules
            # see them in time order, LIVE_LAG late; the trace file gets them merged in
            # time order at the end (``cluster.chaos.real``).
            self.recorder = Recorder(_ignore, self.log_root, renumber=True)
            self.live = LiveOrder(self._check_live)
            self.recorder.listen(self.live.push)
        else:
            self.recorder = Recorder(self.writer, self.log_root)
            self.recorder.listen(self._check_live)
        # Chaos traces record the controllers' inputs, for ``kemu trace replay``.
        self.tracer = Tracer(details={CONTROLLER_INPUTS})
        self.clock: Clock = VirtualClock() if options.deterministic else RealClock()
        self.zookeeper: str | None = None
        if scenario.cluster.store == "zookeeper":
            assert options.zookeeper
            self.zookeeper = run_chroot(options.zookeeper, scenario.name, options.seed)
        self.result = RunResult(
            scenario=scenario.name,
            source=options.source,
            seed=options.seed,
            mode="deterministic" if options.deterministic else "real",
            store=scenario.cluster.store,
            processes=self.processes,
            run_dir=str(options.named_dir or options.run_dir),
            code=code_identity(),
            reproduce=reproduce_command(
                options.source,
                options.seed,
                options.deterministic,
                options.out,
                processes=self.processes,
                zookeeper=_named_zookeeper(options) if self.zookeeper else None,
            ),
        )
        self.final: FinalState | None = None
        self.settled = False  # the final phase saw the cluster converge
        self.end = 0.0
        self.active: dict[str, ActiveFault] = {}
        self.pending: dict[int, Step] = {}  # armed steps not carried out yet
        self._origin = 0.0
        self._h: Harness | None = None
        self._background: TaskGroup | None = None
        self._groups_tg: TaskGroup | None = None
        self._groups: list[ConsumerGroup] = []  # started by consume steps with a group
        self._workloads = 0  # workload steps running now
        self._workloads_idle = anyio.Event()
        self._workloads_idle.set()

    def _monitor(self) -> TraceMonitor:
        return TraceMonitor(
            deletion_bound=self.scenario.deletion_bound,
            allowed_loss=self.scenario.data.allowed,
        )

    # ------------------------------------------------------------------ plumbing

    @property
    def h(self) -> Harness:
        assert self._h is not None
        return self._h

    def now(self) -> float:
        """Trace time: seconds since the run started."""
        return self.clock.now() - self._origin

    def fail(self, rule: str, message: str) -> None:
        """A scenario failure (not an invariant violation): traced, then recorded at the
        event that traced it."""
        self.h.emit(TraceKind.EVENT, "scenario_failure", rule=rule, message=message)
        seq = self.recorder.events[-1].seq if self.recorder.events else self.tracer.seq
        self.result.failures.append(
            Violation(rule=rule, message=message, seq=seq, ts=round(self.now(), 6))
        )
        self.say(f"FAILED {rule}: {message}")

    def _check_live(self, event: TraceEvent) -> None:
        """The trace rules, fed each event as it is recorded: a violation is traced
        (``invariant_violated``) and shown at once, where it happened."""
        for violation in self.monitor.observe(event):
            self.tracer.emit(
                TraceKind.EVENT,
                node=CHAOS_NODE,
                actor=INVARIANTS_ACTOR,
                type="invariant_violated",
                rule=violation.rule,
                message=violation.message,
                at_seq=violation.seq,
            )
            self.say(f"VIOLATION {violation.line()}")

    def error(self, exc: BaseException) -> None:
        self.result.error = f"{type(exc).__name__}: {exc}"

    def say(self, text: str) -> None:
        if self.options.progress is not None:
            self.options.progress(f"{self.now():9.3f}s  {text}")

    # ------------------------------------------------------------------ the run

    async def main(self) -> None:
        self._origin = self.clock.now()
        if self.processes:
            # Every broker process traces from this origin on CLOCK_MONOTONIC, which all
            # processes of the machine share (``cluster.chaos.real``).
            self.trace_origin = time.monotonic()
            self.tracer = Tracer(
                time_fn=time.monotonic, origin=self.trace_origin, details={CONTROLLER_INPUTS}
            )
        else:
            self.tracer.rebase()
        self.tracer.add_sink(self.recorder)
        scenario = self.scenario
        spec = ClusterSpec(
            brokers=scenario.cluster.brokers,
            base_port=0,
            log_dir=self.log_root,
            zookeeper=self.zookeeper,
            racks=dict(scenario.cluster.racks),
            config=dict(scenario.cluster.config),
            seed=self.options.seed,
            listeners=self.processes,
            log_dirs_per_broker=scenario.cluster.log_dirs,
        )
        if self.processes:
            await self._run_processes(spec)
        else:
            await self._run_in_process(spec)

    async def _run_in_process(self, spec: ClusterSpec) -> None:
        async with anyio.create_task_group() as tg:
            cluster = Cluster(spec, tracer=self.tracer, clock=self.clock)
            await tg.start(cluster.run)
            assert cluster.network is not None
            assert cluster.store is not None
            client = Node(
                "chaos",
                attach=cluster.network.attach,
                tracer=self.tracer,
                clock=self.clock,
                seed=self.options.seed,
            )
            await tg.start(client.run)
            session = await cluster.store.open_session(name="chaos")
            self._h = self._harness(cluster, client, session, cluster.store)
            cluster.network.add_observer(self.h.observe)
            await self._body()
            tg.cancel_scope.cancel()

    async def _run_processes(self, spec: ClusterSpec) -> None:
        """One OS process per broker (``cluster.launch.processes.ProcessCluster``): the run drives
        them as their launcher, reads their traces as they grow, talks to them over TCP
        from its own node, and reads the store through a session of its own."""
        trace_dir = self.run_dir / "processes"
        trace_dir.mkdir()
        cluster = ProcessCluster(spec, tracer=self.tracer, clock=self.clock)
        cluster.trace_dir = trace_dir
        cluster.trace_origin = self.trace_origin
        tail = TraceTail(trace_dir, self.recorder)
        ready = anyio.Event()
        stopped = anyio.Event()

        async def launch() -> None:
            async def on_ready() -> None:
                ready.set()

            try:
                await cluster.run(on_ready)
            finally:
                stopped.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(launch)
            await ready.wait()
            tg.start_soon(tail.run, self.clock)
            tg.start_soon(self._release_live)
            transport = TcpTransport(host=spec.host, secret=cluster.secret)
            for broker, port in cluster.network_ports.items():
                transport.add_peer(broker_node_id(broker), spec.host, port)
            network = Network(
                transport, tracer=self.tracer, rng=random.Random(spec.seed), clock=self.clock
            )
            await tg.start(network.run)
            client = Node(
                "chaos",
                attach=network.attach,
                tracer=self.tracer,
                clock=self.clock,
                seed=self.options.seed,
            )
            await tg.start(client.run)
            store: MetadataStore | None = cluster.embedded_store
            own_store = None
            if store is None:
                from cluster.store.zookeeper import ZooKeeperStore  # aiozk: only when used

                assert self.zookeeper is not None
                store = own_store = ZooKeeperStore(
                    self.zookeeper, tracer=self.tracer, clock=self.clock
                )
            try:
                session = await store.open_session(name="chaos")
                self._h = self._harness(cluster, client, session, store)
                await self._body(tail)
            finally:
                with anyio.CancelScope(shield=True):
                    if self._h is not None:
                        await self._h.aclose()
                    if own_store is not None:
                        await own_store.aclose()
                    cluster.stop()
                    await stopped.wait()
            tg.cancel_scope.cancel()

    def _harness(
        self,
        cluster: Cluster | ProcessCluster,
        client: Node,
        session: StoreSession,
        store: MetadataStore,
    ) -> Harness:
        return Harness(
            cluster,
            client=client,
            session=session,
            recorder=self.recorder,
            tracer=self.tracer,
            clock=self.clock,
            rng=random.Random(f"chaos:{self.options.seed}"),
            log_root=self.log_root,
            store=store,
        )

    async def _body(self, tail: TraceTail | None = None) -> None:
        """The steps, the final phase and the end state, on a running cluster."""
        scenario = self.scenario
        self.say(f"cluster of {scenario.cluster.brokers} brokers ready")
        if scenario.data.allowed:
            # The trace says which losses the scenario allows, so that the data rules
            # read from the trace alone (the Spark jobs) judge them as this run does.
            self.h.emit(
                TraceKind.EVENT,
                "data_rules",
                allow_loss=list(scenario.data.allow_loss),
                expect_loss=list(scenario.data.expect_loss),
            )
        with anyio.move_on_after(scenario.deadline) as deadline:
            async with anyio.create_task_group() as groups:
                self._groups_tg = groups
                await self._steps()
                await self._final_phase()
                groups.cancel_scope.cancel()  # members that run until the end stop here
        if deadline.cancelled_caught:
            self.fail("deadline", f"the run did not end within {scenario.deadline:g}s")
        self.final = await self._end_state()
        self.end = self.now()
        if tail is not None:
            tail.close()  # what the brokers traced up to now; their teardown is not read
        self.tracer.remove_sink(self.recorder)  # the teardown is not part of the run

    async def _steps(self) -> None:
        async with anyio.create_task_group() as background:
            self._background = background
            for index, step in enumerate(self.scenario.steps):
                try:
                    if isinstance(step, Action) and step.armed:
                        self.pending[index] = step
                        await background.start(self._armed, index, step)
                    elif isinstance(step, Produce) and step.background:
                        await background.start(self._in_background, index, step)
                    elif not await self._step(index, step):
                        break
                except KemuError as exc:
                    self.fail("step_error", f"{step_label(index, step)}: {exc}")
                    break
            while self._workloads:  # producers still running finish first
                await self._workloads_idle.wait()
            background.cancel_scope.cancel()
        self._background = None
        for index, step in sorted(self.pending.items()):
            self.fail("trigger", f"{step_label(index, step)} was armed but never triggered")

    async def _armed(
        self,
        index: int,
        step: Step,
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Wait for the step's trigger, then carry it out (in the background)."""
        assert isinstance(step, Action)
        trigger = None if step.after is None else self.recorder.arm(step.after)
        self.h.emit(TraceKind.EVENT, "step_armed", index=index, step=kind_of(step))
        self.say(f"armed {step_label(index, step)}")
        task_status.started()
        cause: dict[str, Any] = {}
        if trigger is not None:
            await trigger.fired.wait()
            assert trigger.event is not None
            cause = {"trigger_seq": trigger.event.seq}
        else:
            assert step.at is not None
            await self.clock.sleep(step.at - self.now())
        del self.pending[index]
        try:
            await self._step(index, step, **cause)
        except KemuError as exc:
            self.fail("step_error", f"{step_label(index, step)}: {exc}")

    async def _in_background(
        self,
        index: int,
        step: Step,
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """A ``background`` workload step, while the next steps go on (counted as
        running from before the next step starts)."""
        with self._working():
            task_status.started()
            try:
                await self._step(index, step)
            except KemuError as exc:
                self.fail("step_error", f"{step_label(index, step)}: {exc}")

    @contextlib.contextmanager
    def _working(self) -> Iterator[None]:
        """Count a workload step as running (the steps wait for none to be)."""
        self._workloads += 1
        if self._workloads == 1:
            self._workloads_idle = anyio.Event()
        try:
            yield
        finally:
            self._workloads -= 1
            if not self._workloads:
                self._workloads_idle.set()

    async def _step(self, index: int, step: Step, **cause: Any) -> bool:
        """Carry out one step; False if the run cannot go on (a wait timed out)."""
        if isinstance(step, Produce | Verify) or (isinstance(step, Consume) and not step.group):
            with self._working():
                return await self._do_step(index, step, **cause)
        return await self._do_step(index, step, **cause)

    async def _do_step(self, index: int, step: Step, **cause: Any) -> bool:
        h = self.h
        label = step_label(index, step)
        h.emit(TraceKind.EVENT, "step_started", index=index, step=kind_of(step), **cause)
        self.say(label)
        ok = True
        match step:
            case Produce():
                self._produce_outcome(label, step, await produce(h, step, _producer(index, step)))
            case Verify():
                unsettled = await verify(h, step, _producer(index, step))
                if unsettled:
                    self.fail(
                        "verify",
                        f"{label}: partitions {unsettled} did not settle within {step.within:g}s",
                    )
            case Consume(group=str()):
                self._start_group(step)
            case Consume():
                await consume(h, step, _producer(index, step))
            case Sleep(seconds=seconds):
                await self.clock.sleep(seconds)
            case Wait(condition=condition, within=within):
                ok = await h.until(condition_check(h, condition), within)
                if not ok:
                    self.fail(
                        "wait",
                        f"{label}: {condition_text(condition)} did not hold within {within:g}s",
                    )
            case Expect(condition=condition, within=within):
                if not await h.until(condition_check(h, condition), within):
                    self.fail(
                        "expectation",
                        f"{label}: {condition_text(condition)} did not hold within {within:g}s",
                    )
            case (
                CreateTopic()
                | DeleteTopic()
                | AddPartitions()
                | AlterConfigs()
                | ReassignPartitions()
                | PreferredElection()
            ):
                await self._admin(label, step)
            case StartBroker(broker=broker):
                await h.start_broker(broker, timeout=RESTART_TIMEOUT)
                for fault_id, fault in list(self.active.items()):
                    if fault.broker == broker:
                        self._healed(fault_id, "start_broker")
            case Heal(fault=which):
                await self.heal(which, "heal")
            case Fault():
                await self._inject(index, step)
        h.emit(TraceKind.EVENT, "step_finished", index=index, step=kind_of(step), ok=ok)
        return ok

    def _start_group(self, step: Consume) -> None:
        """Start the members of a ``consume`` step with a group; they run beside the
        next steps (``cluster.chaos.group``)."""
        assert self._groups_tg is not None
        first = sum(g.step.members for g in self._groups if g.group == step.group)
        group = ConsumerGroup(self.h, step, first)
        self._groups.append(group)
        self._groups_tg.start_soon(self._run_group, group)

    async def _run_group(self, group: ConsumerGroup) -> None:
        try:
            await group.run()
        except KemuError as exc:
            self.fail("step_error", f"consumer group {group.group}: {exc}")

    def _produce_outcome(self, label: str, step: Produce, outcomes: list[str]) -> None:
        """Every request's last answer must meet the step's ``outcome``."""
        wanted = step.outcome
        for error in outcomes:
            met = (
                wanted == "any"
                or (wanted == "ok" and error == "NONE")
                or (wanted == "error" and error != "NONE")
                or error == wanted
            )
            if not met:
                self.fail("produce_outcome", f"{label}: a request got {error}, expected {wanted}")
                return

    async def _admin(self, label: str, op: AdminOp) -> None:
        outcome = await run_admin(self.h, op)
        self.h.emit(
            TraceKind.EVENT,
            "admin_result",
            op=kind_of(op),
            topic=op.topic,
            via=op.via,
            broker=outcome.broker,
            error=outcome.error,
            detail=outcome.detail,
            attempts=outcome.attempts,
        )
        self.say(f"  -> {outcome.error} {outcome.detail}".rstrip())
        if not outcome.meets(op.outcome):
            self.fail("admin_outcome", f"{label}: {outcome.error}, expected {op.outcome}")

    async def _inject(self, index: int, fault: Fault) -> None:
        fault_id = fault.id or f"{kind_of(fault)}#{index}"
        active = await inject(self.h, fault, fault_id)
        self.h.emit(
            TraceKind.FAULT,
            "fault_injected",
            id=fault_id,
            fault=kind_of(fault),
            instant=active.instant,
            detail=active.description,
            nodes=list(active.nodes),
        )
        self.say(f"  fault {fault_id}: {active.description}")
        if active.instant:
            return
        self.active[fault_id] = active
        if fault.duration is not None and self._background is not None:
            self._background.start_soon(self._heal_later, fault_id, fault.duration)

    async def _heal_later(self, fault_id: str, duration: float) -> None:
        await self.clock.sleep(duration)
        if fault_id in self.active:
            await self.heal(fault_id, "duration")

    async def heal(self, which: str, how: str) -> None:
        ids = list(reversed(self.active)) if which == "all" else [which]
        for fault_id in ids:
            fault = self.active.get(fault_id)
            if fault is None:
                continue  # healed meanwhile (e.g. its broker was started)
            await fault.heal()
            self._healed(fault_id, how)

    def _healed(self, fault_id: str, how: str) -> None:
        fault = self.active.pop(fault_id)
        self.h.emit(TraceKind.FAULT, "fault_healed", id=fault_id, fault=fault.kind, how=how)
        self.say(f"  healed {fault_id} ({how})")

    async def _final_phase(self) -> None:
        final = self.scenario.final
        if not final.heal:
            return
        self.h.emit(TraceKind.EVENT, "final_phase_started", settle=final.settle)
        self.say("final phase: heal everything, start every broker, settle")
        try:
            await self.heal("all", "final")
            for broker in range(self.h.brokers):
                if not self.h.is_running(broker):
                    await self.h.start_broker(broker, timeout=RESTART_TIMEOUT)
        except KemuError as exc:
            self.fail("final_phase", str(exc))
            return
        settled = self.settled = await self.h.until(lambda: converged(self.h), final.settle)
        self.h.emit(TraceKind.EVENT, "final_phase_finished", converged=settled)
        self.say("converged" if settled else f"not converged after {final.settle:g}s")
        if settled:
            await self._final_reads()
            await self._settle_groups(final.settle)

    async def _end_state(self) -> FinalState:
        """The end state the end-state rules judge. A cluster that converged is still live:
        a follower that caught up late has its ISR expanded (AlterIsr, then UpdateMetadata
        to every broker) a moment later, and one read of the caches and the store, which
        is not atomic, can fall in between. So after a final phase that converged, the
        state is read again after each burst of activity until the rules hold, within
        ``FINAL_SETTLE``; the last read is judged, whatever it shows."""
        final = await read_final(self.h)
        if not self.settled or not check_final(final):
            return final
        reads = [final]

        async def holds() -> bool:
            reads.append(await read_final(self.h))
            return not check_final(reads[-1])

        await self.h.until(holds, FINAL_SETTLE)
        return reads[-1]

    async def _final_reads(self) -> None:
        """Every partition of every topic a ``produce`` step wrote to that still exists is
        verified once more on the settled cluster (``verify``'s reads), so that the data
        invariants judge the end; then the losses the scenario expects must have been seen."""
        topics = sorted({s.topic for s in self.scenario.steps if isinstance(s, Produce)})
        for topic in topics:
            assignment = await kafka_zk.get_topic_assignment(self.h.session, TopicName(topic))
            for partition in sorted(assignment or {}):
                if not await verify_partition(self.h, topic, partition, "final", FINAL_SETTLE):
                    self.fail(
                        "final_reads",
                        f"{topic}-{partition} did not settle within {FINAL_SETTLE:g}s",
                    )
        rule = self.monitor.rule("acknowledged_writes_kept")
        assert isinstance(rule, AcknowledgedWritesKept)
        causes = {loss.cause for loss in rule.losses}
        for cause in self.scenario.data.expect_loss:
            if cause not in causes:
                self.fail("expected_loss", f"no acknowledged write was lost of cause {cause}")

    async def _settle_groups(self, within: float) -> None:
        """Every group whose members run until the end must become Stable with every
        partition of its topics owned (``consumer_group_settled``, judged by the
        ``groups_settle`` rule)."""
        done: set[str] = set()
        for group in self._groups:
            if group.until_the_end and group.group not in done:
                done.add(group.group)
                settled = await group.settle(within)
                self.say(f"group {group.group} {'settled' if settled else 'did not settle'}")

    # ------------------------------------------------------------------ the outcome

    async def _release_live(self) -> None:
        """Hand the events of every process to the trace rules once ``LIVE_LAG`` old."""
        while True:
            self.live.release_until(time.monotonic() - self.trace_origin - LIVE_LAG)
            await self.clock.sleep(TAIL_POLL)

    def close_trace(self) -> None:
        """Write what is left of the trace and close the file. With broker processes,
        every event goes now, merged in time order (``cluster.chaos.real.merge``); the
        scenario failures are renumbered with them."""
        if self.processes:
            self.live.release_until(math.inf)
            merged, renumbered = merge(self.recorder.events)
            self.renumbered = renumbered
            for event in merged:
                self.writer(event)
            self.merged = merged
            self.result.failures = [
                msgspec.structs.replace(f, seq=renumbered.get(f.seq, f.seq))
                if f.seq is not None
                else f
                for f in self.result.failures
            ]
        self.writer.close()

    def finish(self, wall: float) -> RunResult:
        result = self.result
        events = self.recorder.events
        late = 0
        if self.processes and self.merged is not None:
            events = self.merged
            late = self.live.late
            if late:  # the rules saw another order than the trace's: check it again
                self.monitor = self._monitor()
                for event in events:
                    self.monitor.observe(event)
        result.events = len(events)
        result.simulated_seconds = round(self.end, 6)
        result.wall_seconds = round(wall, 3)
        if result.error is None:
            self.monitor.finish(self.end)
        result.violations = list(self.monitor.violations)  # found live, then at the end
        if self.processes and not late:  # numbered as recorded: as in the trace file
            result.violations = [_renumbered(v, self.renumbered) for v in result.violations]
        if result.error is None:
            if self.final is not None:
                result.violations += check_final(self.final, events)
                _write_json(self.run_dir / "final_state.json", self.final)
            result.notices = [*refused_transitions(events), *self.monitor.notices]
            if late:
                result.notices.append(
                    Violation(
                        rule="live_order",
                        message=f"{late} event(s) reached the run more than {LIVE_LAG:g}s"
                        " late: the trace rules were checked again on the merged trace",
                    )
                )
        if result.error is not None:
            result.status = "error"
        elif result.problems:
            result.status = "failed"
        result.trace_sha256 = hashlib.sha256(
            (self.run_dir / "trace.jsonl").read_bytes()
        ).hexdigest()
        _write_json(
            self.run_dir / "invariants.json",
            {
                "rules": {
                    rule: [v for v in result.violations if v.rule == rule] for rule in CHECKED_RULES
                },
                "failures": result.failures,
                "notices": result.notices,
            },
        )
        (self.run_dir / "timeline.txt").write_text(
            timeline(self.scenario, result, events), encoding="utf-8"
        )
        _write_json(self.run_dir / "summary.json", result)
        write_report(self.run_dir, self.scenario, result)
        return result


def _producer(index: int, step: Produce | Consume | Verify) -> str:
    """How a workload step names its records and reads: its id, else ``p<index>``."""
    return step.id if step.id is not None else f"p{index}"


def _renumbered(violation: Violation, renumbered: dict[int, int]) -> Violation:
    if violation.seq is None:
        return violation
    return msgspec.structs.replace(violation, seq=renumbered.get(violation.seq, violation.seq))


def _ignore(event: TraceEvent) -> None:
    """A recorder's writer when the trace file is written at the end."""


def _named_zookeeper(options: RunOptions) -> str:
    """The ``--zookeeper`` value that reproduces the run ("": a throwaway local one)."""
    return "" if options.local_zookeeper or options.zookeeper is None else options.zookeeper


def _write_json(path: Path, value: Any) -> None:
    path.write_bytes(msgspec.json.format(msgspec.json.encode(value), indent=2) + b"\n")


def _unmet(condition: Condition, within: float) -> str:
    return f"{condition_text(condition)} did not hold within {within:g}s"
