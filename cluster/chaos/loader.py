"""Scenario files: YAML to ``Scenario`` values, with errors that name the file and line.

PyYAML's ``compose`` keeps every node's position, so the loader builds the plain data
msgspec converts *and* a table from each place in that data to the line it came from.
Every problem becomes one ``ScenarioError`` line, ``FILE:LINE: WHERE: WHAT``, e.g.
``scenarios/x.yaml:14: steps[2] (crash_broker).broker: no broker 7 (the cluster has 3)``.

The YAML shape (docs/chaos.md has the full reference): each step is a mapping with one
key naming its kind, whose value is the step's fields (or, for the common one-field
steps, that field alone: ``crash_broker: 2``, ``delete_topic: t1``, ``sleep: 5``), next
to the action options ``id``, ``at``, ``after`` and ``duration``. ``wait`` and ``expect``
name one condition the same way, next to ``within``.

``check_scenario`` runs the checks that need the whole scenario (broker ids within the
cluster, heals naming an earlier fault, known message types, valid broker configs); a
scenario built in Python goes through it too, without line numbers.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeAlias, cast

import msgspec
import yaml

from cluster.chaos.model import (
    ACTION_TYPES,
    CONDITION_TYPES,
    STEP_TYPES,
    Action,
    AddPartitions,
    BrokerRegistered,
    BrokerUnregistered,
    ClockSkew,
    CrashBroker,
    CreateTopic,
    DeleteTopic,
    DiskFailure,
    Expect,
    ExpireSession,
    Fault,
    Heal,
    NetworkPartition,
    PauseBroker,
    ReassignmentDone,
    ReassignPartitions,
    Scenario,
    StartBroker,
    Step,
    StopBroker,
    Wait,
    _AdminOp,
    _MessageRule,
    _ToolOp,
    kind_of,
)
from protocol.errors import ErrorCode, KemuError

__all__ = ["ScenarioError", "check_scenario", "load_scenario", "parse_scenario"]

Path_: TypeAlias = tuple[str | int, ...]  # a place in the data: keys and list indexes


class ScenarioError(KemuError):
    """A scenario that cannot be run. The message is one line: where, and what is wrong."""


# ----------------------------------------------------------------------------- YAML nodes


@dataclass(frozen=True)
class _Y:
    """A YAML value with the line it starts on (1-based). Mappings hold ``dict[str, _Y]``,
    sequences ``list[_Y]``, scalars the constructed value; ``raw`` is a scalar's text."""

    value: Any
    line: int
    raw: str | None = None


def _compose(text: str, source: str) -> _Y | None:
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        return None if node is None else _convert(node, loader, source)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ScenarioError(f"{source}{line}: not valid YAML: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{source}: not valid YAML: {exc}") from None
    finally:
        loader.dispose()


def _convert(node: yaml.Node, loader: yaml.SafeLoader, source: str) -> _Y:
    line = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[str | int, _Y] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node)
            where = key_node.start_mark.line + 1
            if not isinstance(key, str | int) or isinstance(key, bool):
                raise ScenarioError(f"{source}:{where}: mapping keys are names or numbers")
            if key in out:
                raise ScenarioError(f"{source}:{where}: duplicate key {key!r}")
            value = _convert(value_node, loader, source)
            if isinstance(value.value, dict | list):  # a block: name the line of its key
                value = _Y(value.value, where)
            out[key] = value
        return _Y(out, line)
    if isinstance(node, yaml.SequenceNode):
        return _Y([_convert(item, loader, source) for item in node.value], line)
    assert isinstance(node, yaml.ScalarNode)
    return _Y(loader.construct_object(node), line, raw=node.value)


# ----------------------------------------------------------------------------- normalising

ACTION_OPTIONS: Final = frozenset({"id", "at", "after", "duration"})
SHORTHAND: Final[Mapping[str, str]] = {
    "create_topic": "topic",
    "delete_topic": "topic",
    "start_broker": "broker",
    "crash_broker": "broker",
    "stop_broker": "broker",
    "pause_broker": "broker",
    "expire_session": "broker",
    "slow_store": "latency",
    "disk_failure": "broker",
    "heal": "fault",
    "sleep": "seconds",
    "partition": "groups",
    "topic_exists": "topic",
    "topic_ready": "topic",
    "topic_deleted": "topic",
    "marked_for_deletion": "topic",
    "broker_registered": "broker",
    "broker_unregistered": "broker",
    "event": "pattern",
    "preferred_election": "topic",
    "reassignment_done": "topic",
    "preferred_leaders": "topic",
    "consume": "topic",
    "verify": "topic",
}
"""The field a step or condition written as ``kind: VALUE`` sets."""

WHOLE: Final = frozenset({"event"})
"""Kinds whose value is always that one field (``event: {type: ...}`` is the pattern)."""


def _tag(cls: type) -> str:
    tag = cls.__struct_config__.tag  # type: ignore[attr-defined]
    assert isinstance(tag, str)
    return tag


_STEP_KINDS: Final = {_tag(t): t for t in STEP_TYPES}
_CONDITION_KINDS: Final = {_tag(t): t for t in CONDITION_TYPES}
_ACTION_KINDS: Final = frozenset(_tag(t) for t in ACTION_TYPES)
_FAULT_KINDS: Final = frozenset(_tag(t) for t in ACTION_TYPES if issubclass(t, Fault))


class _Normaliser:
    """Builds the data msgspec converts, recording where each part was written."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.lines: dict[Path_, int] = {}

    def fail(self, line: int, where: str, what: str) -> ScenarioError:
        return ScenarioError(f"{self.source}:{line}: {where}: {what}")

    def plain(self, y: _Y, path: Path_) -> Any:
        """``y`` as plain data, every part's line recorded under its path."""
        self.lines[path] = y.line
        if isinstance(y.value, dict):
            return {k: self.plain(v, (*path, k)) for k, v in y.value.items()}
        if isinstance(y.value, list):
            return [self.plain(v, (*path, i)) for i, v in enumerate(y.value)]
        return y.value

    def scenario(self, top: _Y) -> dict[str, Any]:
        if not isinstance(top.value, dict):
            raise self.fail(top.line, "scenario", "expected a mapping with name, cluster, steps")
        self.lines[()] = top.line
        out: dict[str, Any] = {}
        for key, y in top.value.items():
            if key == "steps":
                out[key] = self.steps(y)
            elif key == "cluster":
                out[key] = self.cluster(y)
            else:
                out[key] = self.plain(y, (key,))
        return out

    def cluster(self, y: _Y) -> Any:
        if not isinstance(y.value, dict):
            return self.plain(y, ("cluster",))
        self.lines[("cluster",)] = y.line
        out: dict[str, Any] = {}
        for key, value in y.value.items():
            path: Path_ = ("cluster", key)
            if key == "config" and isinstance(value.value, dict):
                # Broker configs are strings, as in server.properties: keep the YAML text
                # (``6000``, ``true``) rather than what YAML makes of it.
                self.lines[path] = value.line
                out[key] = {
                    name: self._config_value(v, (*path, name)) for name, v in value.value.items()
                }
            else:
                out[key] = self.plain(value, path)
        return out

    def _config_value(self, y: _Y, path: Path_) -> Any:
        self.lines[path] = y.line
        if y.raw is not None and y.value is not None:
            return y.raw
        return self.plain(y, path)

    def steps(self, y: _Y) -> list[Any]:
        if not isinstance(y.value, list):
            raise self.fail(y.line, "steps", "expected a list of steps")
        self.lines[("steps",)] = y.line
        return [self.step(item, i) for i, item in enumerate(y.value)]

    def step(self, y: _Y, index: int) -> dict[str, Any]:
        where = f"steps[{index}]"
        path: Path_ = ("steps", index)
        self.lines[path] = y.line
        if not isinstance(y.value, dict):
            raise self.fail(y.line, where, "a step is a mapping naming its kind, e.g. `sleep: 5`")
        kinds = [k for k in y.value if k not in ACTION_OPTIONS]
        if len(kinds) != 1:
            found = ", ".join(map(str, kinds)) if kinds else "none"
            raise self.fail(
                y.line,
                where,
                f"a step names exactly one kind (found: {found}); kinds: "
                + ", ".join(sorted(_STEP_KINDS)),
            )
        kind = kinds[0]
        if kind == "pause":
            raise self.fail(
                y.value[kind].line,
                where,
                "pause is not available yet: the actor runtime cannot freeze a node",
            )
        if kind not in _STEP_KINDS:
            raise self.fail(
                y.value[kind].line,
                where,
                f"unknown step {kind!r}; kinds: {', '.join(sorted(_STEP_KINDS))}",
            )
        out: dict[str, Any] = {"kind": kind}
        body = y.value[kind]
        if kind in ("wait", "expect"):
            out.update(self.waiting(body, path, f"{where} ({kind})"))
        else:
            out.update(self.body(body, kind, path, f"{where} ({kind})"))
        for option in sorted(ACTION_OPTIONS & y.value.keys()):
            if option in out:
                raise self.fail(y.value[option].line, where, f"{option} is given twice")
            if kind not in _ACTION_KINDS:
                raise self.fail(
                    y.value[option].line, where, f"{option} applies to actions, not to {kind}"
                )
            out[option] = self.option(y.value[option], option, (*path, option))
        if "after" in out and not isinstance(out["after"], list):
            out["after"] = [out["after"]]
        if kind not in _FAULT_KINDS and "duration" in out:
            raise self.fail(self.lines[(*path, "duration")], where, "duration applies to faults")
        return out

    def option(self, y: _Y, option: str, path: Path_) -> Any:
        if option == "after" and isinstance(y.value, dict):
            self.lines[path] = y.line
            return [self.plain(y, (*path, 0))]
        return self.plain(y, path)

    def body(self, y: _Y, kind: str, path: Path_, where: str) -> dict[str, Any]:
        """A step's or condition's fields: a mapping, a shorthand value, or nothing."""
        if kind in WHOLE:
            return {SHORTHAND[kind]: self.plain(y, (*path, SHORTHAND[kind]))}
        if isinstance(y.value, dict):
            return {k: self.plain(v, (*path, k)) for k, v in y.value.items()}
        if y.value is None or (y.value is True and kind not in SHORTHAND):
            return {}
        field = SHORTHAND.get(kind)
        if field is None:
            raise self.fail(y.line, where, f"expected a mapping of {kind}'s fields")
        return {field: self.plain(y, (*path, field))}

    def waiting(self, y: _Y, path: Path_, where: str) -> dict[str, Any]:
        """``wait``/``expect``: one condition (``converged``, or ``{topic_ready: t1,
        within: 10}``) and ``within``."""
        cond_path: Path_ = (*path, "condition")
        if isinstance(y.value, str):
            return {"condition": self.condition(y.value, _Y(None, y.line), cond_path, where)}
        if not isinstance(y.value, dict):
            raise self.fail(y.line, where, "expected a condition, e.g. `{topic_ready: t1}`")
        names = [k for k in y.value if k != "within"]
        if len(names) != 1:
            raise self.fail(
                y.line,
                where,
                "name exactly one condition; conditions: " + ", ".join(sorted(_CONDITION_KINDS)),
            )
        out: dict[str, Any] = {
            "condition": self.condition(names[0], y.value[names[0]], cond_path, where)
        }
        if "within" in y.value:
            out["within"] = self.plain(y.value["within"], (*path, "within"))
        return out

    def condition(self, name: str, body: _Y, path: Path_, where: str) -> dict[str, Any]:
        self.lines[path] = body.line
        if name not in _CONDITION_KINDS:
            raise self.fail(
                body.line,
                where,
                f"unknown condition {name!r}; conditions: {', '.join(sorted(_CONDITION_KINDS))}",
            )
        return {"kind": name, **self.body(body, name, path, f"{where}.{name}")}


# ----------------------------------------------------------------------------- loading

_AT_PATH = re.compile(r" - at `([^`]*)`$")
_KEY_IN = re.compile(r" - at `key` in `([^`]*)`$")
_PATH_PART = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+|\.\.\.)\]")
_UNKNOWN_FIELD = re.compile(r"unknown field `([^`]*)`")


def _parse_path(text: str) -> Path_:
    """``$.steps[2].broker`` -> ("steps", 2, "broker"); a dict value ``[...]`` stops it."""
    out: list[str | int] = []
    for name, index in _PATH_PART.findall(text.removeprefix("$")):
        if index == "...":
            break
        out.append(name if name else int(index))
    return tuple(out)


def describe(path: Path_, data: Any) -> str:
    """A place in the scenario as a reader finds it: ``steps[2] (crash_broker).broker``."""
    parts: list[str] = []
    node = data
    for part in path:
        if isinstance(part, int):
            parts.append(f"[{part}]")
        else:
            parts.append(f".{part}" if parts else part)
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            node = None
        if isinstance(part, int) and isinstance(node, dict) and "kind" in node:
            parts.append(f" ({node['kind']})")
    return "".join(parts) or "scenario"


def _line_of(lines: Mapping[Path_, int], path: Path_) -> int:
    while path not in lines and path:
        path = path[:-1]
    return lines.get(path, 1)


def parse_scenario(
    text: str, *, source: str = "<scenario>", cluster: Mapping[str, str] | None = None
) -> Scenario:
    """A scenario from YAML text; ``ScenarioError`` (``source:line: ...``) if it is not one.
    ``cluster``: set-up entries that override the file's (``kemu chaos run --processes``
    and ``--zookeeper`` set ``mode`` and ``store``), checked as if the file said them."""
    top = _compose(text, source)
    if top is None:
        raise ScenarioError(f"{source}:1: the file is empty")
    norm = _Normaliser(source)
    data = norm.scenario(top)
    if cluster:
        data["cluster"] = {**data.get("cluster", {}), **cluster}
    try:
        scenario = msgspec.convert(data, Scenario)
    except msgspec.ValidationError as exc:
        raise _validation_error(str(exc), data, norm.lines, source) from None
    for path, what in scenario_problems(scenario):
        raise ScenarioError(
            f"{source}:{_line_of(norm.lines, path)}: {describe(path, data)}: {what}"
        )
    return scenario


def _validation_error(
    message: str, data: Any, lines: Mapping[Path_, int], source: str
) -> ScenarioError:
    what, path = message, cast(Path_, ())
    if match := _KEY_IN.search(message):
        path = _parse_path(match.group(1))
        what = message[: match.start()] + " (a key)"
    elif match := _AT_PATH.search(message):
        path = _parse_path(match.group(1))
        what = message[: match.start()]
    if unknown := _UNKNOWN_FIELD.search(what):
        path = (*path, unknown.group(1))
        what = f"unknown field `{unknown.group(1)}`"
    return ScenarioError(f"{source}:{_line_of(lines, path)}: {describe(path, data)}: {what}")


def load_scenario(path: str | Path, *, cluster: Mapping[str, str] | None = None) -> Scenario:
    """A scenario file; ``ScenarioError`` if it cannot be read or is not a valid one
    (``cluster``: as in ``parse_scenario``)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ScenarioError(f"{p}: cannot read the scenario: {reason}") from None
    return parse_scenario(text, source=str(p), cluster=cluster)


# ----------------------------------------------------------------------------- whole scenarios


def check_scenario(scenario: Scenario) -> Scenario:
    """The whole-scenario checks for a scenario built in Python; returns it, or raises
    ``ScenarioError`` naming the first problem's place."""
    data = msgspec.to_builtins(scenario)
    for path, what in scenario_problems(scenario):
        raise ScenarioError(f"{scenario.name}: {describe(path, data)}: {what}")
    return scenario


def scenario_problems(scenario: Scenario) -> Iterator[tuple[Path_, str]]:
    """Every problem that needs more than one field to see, with its place."""
    from actors.admin import BrokerConfig, ConfigError

    setup = scenario.cluster
    count = setup.brokers
    for name, value in setup.config.items():
        try:
            BrokerConfig.from_overrides({name: value})
        except ConfigError as exc:
            yield ("cluster", "config", name), str(exc).split(". Known names")[0]
    try:
        BrokerConfig.from_overrides(dict(setup.config))
    except ConfigError as exc:
        yield ("cluster", "config"), str(exc).split(". Known names")[0]
    for broker in setup.racks:
        if not 0 <= broker < count:
            yield ("cluster", "racks"), f"no broker {broker} (the cluster has {count})"
    faults: set[str] = set()
    ids: set[str] = set()
    for i, step in enumerate(scenario.steps):
        here: Path_ = ("steps", i)
        for field, broker in _brokers_named(step):
            if not 0 <= broker < count:
                yield (*here, *field), f"no broker {broker} (the cluster has {count})"
        if isinstance(step, Action) and step.id is not None:
            if step.id in ids or step.id == "all":
                yield (*here, "id"), f"id {step.id!r} is already used"
            ids.add(step.id)
            if isinstance(step, Fault):
                faults.add(step.id)
        if isinstance(step, Heal) and step.fault != "all" and step.fault not in faults:
            yield (*here, "fault"), f"no earlier fault has id {step.fault!r}"
        if isinstance(step, _MessageRule) and step.types is not None:
            known = message_types()
            for j, name in enumerate(step.types):
                if name not in known:
                    yield (*here, "types", j), f"unknown message type {name!r}"
        if isinstance(step, NetworkPartition):
            seen: set[int | str] = set()
            for g, group in enumerate(step.groups):
                for member in group:
                    if member in seen:
                        yield (*here, "groups", g), f"{member!r} is in more than one group"
                    seen.add(member)
        if isinstance(step, _AdminOp):
            yield from ((here + p, w) for p, w in _outcome_problems(step))
        if isinstance(step, _ToolOp):
            yield from ((here + p, w) for p, w in _tool_problems(step))
        if (refused := real_mode_refusal(step, store=setup.store, mode=setup.mode)) is not None:
            yield here, refused


# --- real mode: what a store or a mode cannot do -----------------------------------------

PROCESSES_FAULTS: Final = frozenset(
    {
        "crash_broker",
        "kill_controller",
        "stop_broker",
        "pause_broker",
        "expire_session",
        "slow_store",
    }
)
"""The faults that cross processes (slow_store with the embedded store only)."""


def real_mode_refusal(step: Step, *, store: str, mode: str) -> str | None:
    """Why ``step`` cannot run with this store and mode (None if it can)."""
    if not isinstance(step, Fault):
        return None
    kind = kind_of(step)
    if mode == "processes" and kind not in PROCESSES_FAULTS:
        return (
            f"{kind} is not available with mode: processes (it acts inside a broker's"
            f" process; faults across processes: {', '.join(sorted(PROCESSES_FAULTS))})"
        )
    if store == "zookeeper" and kind == "slow_store":
        return "slow_store is not available with store: zookeeper (it slows the embedded store)"
    if store == "zookeeper" and mode != "processes" and kind == "pause_broker":
        return (
            "pause_broker in one process needs the embedded store"
            " (on ZooKeeper, run it with mode: processes: a SIGSTOP)"
        )
    return None


# --- end of real mode -------------------------------------------------------------------


def _tool_problems(step: _ToolOp) -> Iterator[tuple[Path_, str]]:
    """A reassignment's or election's topic must be a legal name (Topic.java's rules)."""
    from actors.admin.topics import validate_topic_name
    from protocol.errors import KafkaApiError

    try:
        validate_topic_name(step.topic)
    except KafkaApiError as exc:
        yield ("topic",), str(exc)


def _outcome_problems(step: _AdminOp) -> Iterator[tuple[Path_, str]]:
    if step.outcome in ("any", "ok", "error"):
        return
    if step.via == "store":
        yield ("outcome",), "with via: store, outcome is any, ok or error"
    elif step.outcome not in ErrorCode.__members__:
        yield ("outcome",), f"outcome is any, ok, error or a Kafka error name, not {step.outcome!r}"


def _brokers_named(step: Step) -> Iterator[tuple[Path_, int]]:
    """Every broker id (not selector) a step names, with the field naming it."""
    if isinstance(
        step,
        StartBroker
        | CrashBroker
        | StopBroker
        | PauseBroker
        | ExpireSession
        | DiskFailure
        | ClockSkew
        | CreateTopic
        | DeleteTopic
        | AddPartitions,
    ) and isinstance(step.broker, int):
        yield ("broker",), step.broker
    if isinstance(step, CreateTopic | ReassignPartitions) and step.assignment:
        for partition, replicas in step.assignment.items():
            for broker in replicas:
                yield ("assignment", partition), broker
    if isinstance(step, NetworkPartition):
        for g, group in enumerate(step.groups):
            for member in group:
                if isinstance(member, int):
                    yield ("groups", g), member
    if isinstance(step, _MessageRule):
        for name in ("src", "dst"):
            for member in getattr(step, name) or ():
                if isinstance(member, int):
                    yield (name,), member
    if isinstance(step, Wait | Expect):
        cond = step.condition
        if isinstance(cond, BrokerRegistered | BrokerUnregistered):
            yield ("condition", "broker"), cond.broker
        if isinstance(cond, ReassignmentDone) and cond.assignment:
            for partition, replicas in cond.assignment.items():
                for broker in replicas:
                    yield ("condition", "assignment", partition), broker


_message_types: set[str] | None = None


def message_types() -> set[str]:
    """The class names of every typed message (what ``types`` of a rule may name)."""
    global _message_types
    if _message_types is None:
        import protocol
        import protocol.broker
        import protocol.control
        import protocol.kafka_api
        import protocol.log  # noqa: F401
        from protocol.base import Message

        found: set[str] = set()
        todo: list[type[Message]] = [Message]
        while todo:
            cls = todo.pop()
            for sub in cls.__subclasses__():
                found.add(sub.__name__)
                todo.append(sub)
        _message_types = found
    return _message_types
