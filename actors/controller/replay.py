"""Replaying a recorded trace through the current controller code.

A trace recorded with the tracer detail ``controller_inputs`` (see
``actors.controller.recording``) holds, for every controller *incarnation* (one
``KafkaController`` from its start to its node's stop or crash), its configuration and,
for every event it processed, the event, each store call it made with its outcome, each
wall-clock reading, each request it handed to the channel and each state transition.

``replay_events`` rebuilds each incarnation with the current code: the controller's parts
(``KafkaController._build``) on a node of its own, with no network, a replay store
session (``ReplaySession``: each call is answered with the next recorded call of the
event, matched by operation and path), a channel that starts no sender, and a clock
whose wall-clock readings are the recorded ones. The recorded events are fed to
``process`` in order, and what the controller does (store calls with their arguments,
clock readings, requests, transitions, in order) is compared with the recording, event
by event. The first difference is the incarnation's ``Divergence``; the replay of that
incarnation stops there (its later inputs no longer fit).

An event cut short in the recording (the node crashed, or the trace ended, while it ran)
is compared as far as it was recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream

from actors.controller import recording
from actors.controller.channel import ControllerChannelManager
from actors.controller.controller import ControllerConfig, KafkaController
from actors.runtime.actor import Node, Postman
from actors.runtime.clock import VirtualClock, run_virtual
from actors.runtime.tracer import MemorySink, Tracer, read_trace
from actors.zk.store import StoreSession, new_event_stream
from actors.zk.watch import ZkConnection
from protocol import zkdata
from protocol.envelope import Envelope
from protocol.errors import StoreError
from protocol.store import OpResult, Stat, StoreEvent, StoreOp
from protocol.trace import TraceEvent, TraceKind, TraceSchemaError

_OUTPUT_TYPES = frozenset({recording.STORE, recording.CLOCK, recording.REQUEST})
_END = "controller_event_end"
_FAILED = "controller_event_failed"


# ------------------------------------------------------------------ the recording


@dataclass(frozen=True, slots=True)
class Record:
    """One recorded output of an event (its ``seq`` in the trace) in comparable form."""

    seq: int
    value: dict[str, Any]
    fields: dict[str, Any]


@dataclass(slots=True)
class Step:
    """One processed event: the event, its records in order, and how it ended (``ok``, an
    exception's class name, or None when the recording stops inside it)."""

    index: int
    seq: int
    event: dict[str, Any]
    records: list[Record] = field(default_factory=list)
    outcome: str | None = None

    @property
    def name(self) -> str:
        return str(self.event.get("type"))


@dataclass(slots=True)
class Incarnation:
    node: str
    actor: str
    seq: int
    init: dict[str, Any]
    steps: list[Step] = field(default_factory=list)


def comparable(event: TraceEvent) -> dict[str, Any] | None:
    """What is compared of a traced output (None: not an output). Store results, errors
    and session ids are inputs: they are not compared."""
    fields = event.fields
    if event.kind == TraceKind.TRANSITION:
        return {"transition": event.type, **fields}
    if event.kind != TraceKind.EVENT:
        return None
    match event.type:
        case recording.STORE:
            return {"store": fields["op"], "path": fields["path"], "args": fields["args"]}
        case recording.CLOCK:
            return {"clock": "wall_ms"}
        case recording.REQUEST:
            return {
                "request": fields["request"],
                "broker": fields["broker"],
                "payload": fields["payload"],
            }
        case _:
            return None


def _as_json(value: Any) -> Any:
    """The value as it reads back from a JSON trace (tuples become lists, ...)."""
    return msgspec.json.decode(msgspec.json.encode(value))


def incarnations(events: Iterable[TraceEvent]) -> list[Incarnation]:
    """The recorded controller incarnations of a trace, in the order they started."""
    found: list[Incarnation] = []
    current: dict[tuple[str, str], Incarnation] = {}
    open_step: dict[tuple[str, str], Step] = {}
    for event in events:
        key = (event.node, event.actor)
        if event.kind == TraceKind.EVENT and event.type == recording.INIT:
            open_step.pop(key, None)
            inc = Incarnation(event.node, event.actor, event.seq, dict(event.fields))
            current[key] = inc
            found.append(inc)
            continue
        inc_or_none = current.get(key)
        if inc_or_none is None:
            continue
        inc = inc_or_none
        if event.kind == TraceKind.EVENT and event.type == recording.INPUT:
            step = Step(len(inc.steps), event.seq, dict(event.fields["event"]))
            inc.steps.append(step)
            open_step[key] = step
            continue
        step_or_none = open_step.get(key)
        if step_or_none is None:
            continue
        if event.kind == TraceKind.ERROR and event.type == _FAILED:
            step_or_none.outcome = str(event.fields.get("error"))
            continue
        if event.kind == TraceKind.EVENT and event.type == _END:
            if step_or_none.outcome is None:
                step_or_none.outcome = "ok"
            del open_step[key]
            continue
        value = comparable(event)
        if value is not None:
            step_or_none.records.append(Record(event.seq, value, dict(event.fields)))
    return found


# ------------------------------------------------------------------ divergence


class Divergence(msgspec.Struct, frozen=True, kw_only=True):
    """Where the replay first differs: the event (its index in the incarnation and the
    ``seq`` of its ``controller_input``), the output (its index within the event and, if
    recorded, its ``seq``), and the recorded output against the replayed one (None where
    one side has nothing)."""

    step: int
    event: str
    event_seq: int
    output: int
    output_seq: int | None
    expected: Any
    got: Any


def leaf_difference(expected: Any, got: Any, path: str = "") -> tuple[str, Any, Any]:
    """Where two recorded values first differ: the path to the first differing leaf
    (``args.ops[1].data``) and the two leaves there; ``("", expected, got)`` when they
    differ as a whole (another type, or one is missing)."""
    if isinstance(expected, dict) and isinstance(got, dict):
        for key in [*expected, *(k for k in got if k not in expected)]:
            if key not in expected or key not in got or expected[key] != got[key]:
                return leaf_difference(
                    expected.get(key), got.get(key), f"{path}.{key}" if path else str(key)
                )
    if isinstance(expected, list) and isinstance(got, list) and len(expected) == len(got):
        for i, (a, b) in enumerate(zip(expected, got, strict=True)):
            if a != b:
                return leaf_difference(a, b, f"{path}[{i}]")
    return path, expected, got


class IncarnationResult(msgspec.Struct, frozen=True, kw_only=True):
    node: str
    actor: str
    seq: int
    events: int
    """Events replayed (up to and including a divergent one)."""
    outputs: int
    """Recorded outputs compared."""
    match: bool
    divergence: Divergence | None = None
    cut: bool = False
    """The recording stops inside its last event (a crash, the end of the trace)."""


class RunReplay(msgspec.Struct, frozen=True, kw_only=True):
    """The replay of one trace: per incarnation, match or first divergence. ``error`` when
    the trace could not be replayed at all (unreadable, or nothing recorded)."""

    trace: str
    run: str
    seed: int | None
    incarnations: tuple[IncarnationResult, ...]
    match: bool
    error: str | None = None

    @property
    def first_divergence(self) -> tuple[IncarnationResult, Divergence] | None:
        for inc in self.incarnations:
            if inc.divergence is not None:
                return inc, inc.divergence
        return None


class _Diverged(BaseException):
    """Aborts an event's replay at a store call or clock reading the recording does not
    have there. A BaseException so that no ``except Exception`` of the controller takes it
    for a store failure."""

    def __init__(self, got: dict[str, Any]) -> None:
        super().__init__(got)
        self.got = got


class _Cut(BaseException):
    """The recording of a cut-short event has no more calls: stop replaying it."""


# ------------------------------------------------------------------ the replay doubles


class ReplaySession(StoreSession):
    """Answers each call with the next recorded store call of the current event, provided
    the operation and path are the same (arguments are compared afterwards, as outputs)."""

    def __init__(self) -> None:
        self._pending: list[Record] = []
        self._cut = False
        self._session_id = 0
        self._send, self._events = new_event_stream()

    def load(self, step: Step) -> None:
        self._pending = [r for r in step.records if "store" in r.value]
        self._pending.reverse()
        self._cut = step.outcome is None
        if self._pending and not self._session_id:
            self._session_id = int(self._pending[-1].fields.get("session") or 0)

    def _answer(self, op: str, path: str | None) -> Any:
        if not self._pending:
            if self._cut:
                raise _Cut
            raise _Diverged({"store": op, "path": path})
        record = self._pending[-1]
        if record.value["store"] != op or record.value["path"] != path:
            raise _Diverged({"store": op, "path": path})
        self._pending.pop()
        self._session_id = int(record.fields.get("session") or 0)
        error = record.fields.get("error")
        if error is not None:
            raise recording.decode_error(error)
        return recording.decode_result(op, record.fields.get("result"))

    @property
    def session_id(self) -> int:
        return self._session_id

    @property
    def timeout(self) -> float:
        return 18.0

    @property
    def events(self) -> MemoryObjectReceiveStream[StoreEvent]:
        return self._events

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        return str(self._answer("create", path))

    async def get(self, path: str, *, watch: bool = False) -> tuple[bytes, Stat]:
        result: tuple[bytes, Stat] = self._answer("get", path)
        return result

    async def set(self, path: str, data: bytes, *, version: int = -1) -> Stat:
        result: Stat = self._answer("set", path)
        return result

    async def delete(self, path: str, *, version: int = -1, recursive: bool = False) -> None:
        self._answer("delete", path)

    async def exists(self, path: str, *, watch: bool = False) -> Stat | None:
        result: Stat | None = self._answer("exists", path)
        return result

    async def children(self, path: str, *, watch: bool = False) -> tuple[str, ...]:
        result: tuple[str, ...] = self._answer("children", path)
        return result

    async def multi(self, ops: Sequence[StoreOp]) -> tuple[OpResult, ...]:
        result: tuple[OpResult, ...] = self._answer("multi", None)
        return result

    async def multi_each(
        self, batches: Sequence[Sequence[StoreOp]]
    ) -> list[tuple[OpResult, ...] | StoreError]:
        result: list[tuple[OpResult, ...] | StoreError] = self._answer("multi_each", None)
        return result

    async def get_each(
        self, reads: Sequence[tuple[str, bool]]
    ) -> list[tuple[bytes, Stat] | StoreError]:
        result: list[tuple[bytes, Stat] | StoreError] = self._answer("get_each", None)
        return result

    async def close(self) -> None:
        self._send.close()
        self._events.close()


class _ReplayClock(VirtualClock):
    """Virtual time; wall-clock readings are the recorded ones, in order."""

    def __init__(self, *, skew: float = 0.0, rate: float = 1.0) -> None:
        super().__init__(skew=skew, rate=rate)
        self._readings: list[int] = []
        self._cut = False

    def load(self, step: Step) -> None:
        self._readings = [int(r.fields["wall_ms"]) for r in step.records if "clock" in r.value]
        self._readings.reverse()
        self._cut = step.outcome is None

    def wall_ms(self) -> int:
        if not self._readings:
            if self._cut:
                raise _Cut
            raise _Diverged({"clock": "wall_ms"})
        return self._readings.pop()


class _ReplayChannel(ControllerChannelManager):
    """Records what it is handed (``record_requests``) and starts no sender."""

    def _start_sender(self, channel: Any) -> None:
        return None


class _ReplayController(KafkaController):
    """The controller's parts, built but not started: the replay calls ``process``."""

    async def on_start(self) -> None:
        self._build()

    def _new_channel(self) -> ControllerChannelManager:
        return _ReplayChannel(
            self.node,
            source=self.ref,
            emit=self._emit_event,
            request_timeout=self.config.controller_socket_timeout_ms / 1000,
            trace=self.trace,
            record_requests=True,
        )


class _Detached:
    """A node's network endpoint that goes nowhere (the replayed controller sends nothing:
    its channel only records)."""

    def post(self, envelope: Envelope) -> None:
        return None


async def _detached(node_id: str, deliver: Callable[[Envelope], None]) -> Postman:
    return _Detached()


def _callback(event: str, field_name: str) -> Callable[..., None]:
    def ignore(*args: Any) -> None:
        return None

    return ignore


# ------------------------------------------------------------------ the replay


def _first_difference(
    step: Step, got: list[dict[str, Any]]
) -> tuple[int, dict[str, Any] | None, dict[str, Any] | None] | None:
    expected = [r.value for r in step.records]
    limit = len(expected) if step.outcome is None else max(len(expected), len(got))
    for i in range(limit):
        want = expected[i] if i < len(expected) else None
        have = got[i] if i < len(got) else None
        if want != have and (want is None or _as_json(want) != have):
            return i, want, have
    return None


async def _replay_incarnation(inc: Incarnation) -> IncarnationResult:
    init = inc.init
    config = ControllerConfig(**init["config"])
    registration = msgspec.convert(init["registration"], zkdata.BrokerRegistration)
    tracer = Tracer(details={recording.CONTROLLER_INPUTS})
    sink = MemorySink()
    tracer.add_sink(sink)
    clock = _ReplayClock()
    session = ReplaySession()
    zk = ZkConnection(None, name=inc.node, session=session, clock=clock)
    controller = _ReplayController(
        config,
        zk,
        registration=registration,
        broker_epoch=int(init["broker_epoch"]),
        name=inc.actor,
    )
    node = Node(inc.node, attach=_detached, tracer=tracer, clock=clock)
    outputs = 0
    replayed = 0
    divergence: Divergence | None = None
    async with anyio.create_task_group() as tg:
        await tg.start(node.run)
        await node.spawn(controller)
        for step in inc.steps:
            replayed += 1
            session.load(step)
            clock.load(step)
            mark = len(sink.events)
            outcome = "ok"
            attempted: dict[str, Any] | None = None
            try:
                await controller.process(recording.decode_event(step.event, _callback))
            except _Diverged as exc:
                attempted = exc.got
            except _Cut:
                outcome = "cut"
            except Exception as exc:  # the event's error boundary, as the event manager's
                outcome = type(exc).__name__
            got = [
                v
                for v in (comparable(e) for e in sink.events[mark:] if e.node == inc.node)
                if v is not None
            ]
            got = _as_json(got)
            if attempted is not None:
                got.append(attempted)
            outputs += len(step.records)
            difference = _first_difference(step, got)
            if difference is None and attempted is None and step.outcome not in (None, outcome):
                difference = (len(got), {"outcome": step.outcome}, {"outcome": outcome})
            if difference is not None:
                index, want, have = difference
                divergence = Divergence(
                    step=step.index,
                    event=step.name,
                    event_seq=step.seq,
                    output=index,
                    output_seq=step.records[index].seq if index < len(step.records) else None,
                    expected=want,
                    got=have,
                )
                break
        tg.cancel_scope.cancel()
    await session.close()
    return IncarnationResult(
        node=inc.node,
        actor=inc.actor,
        seq=inc.seq,
        events=replayed,
        outputs=outputs,
        match=divergence is None,
        divergence=divergence,
        cut=bool(inc.steps) and inc.steps[-1].outcome is None,
    )


def replay_events(events: Iterable[TraceEvent]) -> list[IncarnationResult]:
    """Replay every recorded incarnation of a trace's events (runs its own event loop)."""
    found = incarnations(events)

    async def main() -> list[IncarnationResult]:
        return [await _replay_incarnation(inc) for inc in found]

    return run_virtual(main)


def replay_trace(path: Path) -> RunReplay:
    """Replay one JSONL trace file; never raises for a bad trace (``error`` says why)."""
    try:
        header, events = read_trace(path)
        results = replay_events(events)
    except (TraceSchemaError, OSError, ValueError, msgspec.DecodeError, KeyError, TypeError) as exc:
        return RunReplay(
            trace=str(path), run="", seed=None, incarnations=(), match=False, error=str(exc)
        )
    if not results:
        return RunReplay(
            trace=str(path),
            run=header.run,
            seed=header.seed,
            incarnations=(),
            match=False,
            error="no controller recording in this trace (record with controller_inputs)",
        )
    return RunReplay(
        trace=str(path),
        run=header.run,
        seed=header.seed,
        incarnations=tuple(results),
        match=all(r.match for r in results),
    )


__all__ = [
    "Divergence",
    "Incarnation",
    "IncarnationResult",
    "ReplaySession",
    "RunReplay",
    "Step",
    "incarnations",
    "leaf_difference",
    "replay_events",
    "replay_trace",
]
