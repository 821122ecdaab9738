"""Scenario files: YAML to ``Scenario`` values, with errors that name the file and line.

PyYAML's ``compose`` keeps every node's position, so the loader builds the plain data
msgspec converts *and* a table from each place in that data to the line it came from.
Every problem becomes one line, ``FILE:LINE: WHERE: WHAT``, e.g.
``scenarios/x.yaml:14: steps[2] (crash_broker).broker: no broker 7 (the cluster has 3)``,
and a ``ScenarioError`` carries every problem of the file at once (in the order of their
lines): a step that is wrong is set aside and the others are still checked. A name that is
not known (a key, a step kind, a condition, a message type, a fault id) comes with the
known one it is closest to (``difflib.get_close_matches``), when there is one.

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

import difflib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeAlias, cast

import msgspec
import msgspec.inspect as mi
import yaml

from cluster.chaos.metrics import METRIC_NAMES
from cluster.chaos.model import (
    ACTION_TYPES,
    CONDITION_TYPES,
    STEP_TYPES,
    Action,
    AddPartitions,
    AlterConfigs,
    BrokerRegistered,
    BrokerUnregistered,
    ClockSkew,
    Consume,
    CrashBroker,
    CreateTopic,
    DeleteTopic,
    DiskFailure,
    Expect,
    ExpireSession,
    Fault,
    Heal,
    MetricAt,
    NetworkPartition,
    PauseBroker,
    PauseMember,
    PreferredElection,
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

__all__ = [
    "ScenarioError",
    "check_scenario",
    "did_you_mean",
    "load_scenario",
    "parse_scenario",
    "scenario_data",
    "scenario_schema",
]

Path_: TypeAlias = tuple[str | int, ...]  # a place in the data: keys and list indexes


class ScenarioError(KemuError):
    """A scenario that cannot be run: one line per problem (``problems``), each naming
    where it is and what is wrong; the message is those lines."""

    def __init__(self, *problems: str) -> None:
        super().__init__("\n".join(problems))
        self.problems: tuple[str, ...] = problems


def did_you_mean(name: object, known: Iterable[str], *, quote: str = "'") -> str:
    """`` (did you mean 'x'?)`` for the known name closest to ``name``, or nothing."""
    close = difflib.get_close_matches(str(name), sorted(known), n=1)
    return f" (did you mean {quote}{close[0]}{quote}?)" if close else ""


class _Bad(Exception):
    """One problem that sets aside the part it is in (``_Normaliser.fail``)."""

    def __init__(self, line: int, text: str) -> None:
        super().__init__(text)
        self.line = line
        self.text = text


# ----------------------------------------------------------------------------- YAML nodes


@dataclass(frozen=True)
class _Y:
    """A YAML value with the line it starts on (1-based). Mappings hold ``dict[str, _Y]``,
    sequences ``list[_Y]``, scalars the constructed value; ``raw`` is a scalar's text."""

    value: Any
    line: int
    raw: str | None = None


def _compose(text: str, source: str, problems: list[tuple[int, str]]) -> _Y | None:
    """The YAML document; a duplicate or unusable key goes to ``problems`` (and is left
    out), a file that is not YAML at all is a ``ScenarioError`` at once."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        return None if node is None else _convert(node, loader, problems)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ScenarioError(f"{source}{line}: not valid YAML: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{source}: not valid YAML: {exc}") from None
    finally:
        loader.dispose()


def _convert(node: yaml.Node, loader: yaml.SafeLoader, problems: list[tuple[int, str]]) -> _Y:
    line = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[str | int, _Y] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node)
            where = key_node.start_mark.line + 1
            if not isinstance(key, str | int) or isinstance(key, bool):
                problems.append((where, "mapping keys are names or numbers"))
                continue
            if key in out:
                problems.append((where, f"duplicate key {key!r}"))
                continue
            value = _convert(value_node, loader, problems)
            if isinstance(value.value, dict | list):  # a block: name the line of its key
                value = _Y(value.value, where)
            out[key] = value
        return _Y(out, line)
    if isinstance(node, yaml.SequenceNode):
        return _Y([_convert(item, loader, problems) for item in node.value], line)
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
    "pause_member": "group",
    "group_settled": "group",
    "kill_coordinator": "group",
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

    def __init__(self, problems: list[tuple[int, str]]) -> None:
        self.lines: dict[Path_, int] = {}
        self.problems = problems
        self.set_aside: set[str] = set()  # the ids of the steps set aside

    @staticmethod
    def fail(line: int, where: str, what: str) -> _Bad:
        """A problem that sets aside the step it is in (raise it)."""
        return _Bad(line, f"{where}: {what}")

    def report(self, line: int, where: str, what: str) -> None:
        """A problem that leaves the rest of its step to be checked."""
        self.problems.append((line, f"{where}: {what}"))

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
            self.report(top.line, "scenario", "expected a mapping with name, cluster, steps")
            return {}
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
        """The steps; one that is wrong is reported and stands as None."""
        self.lines[("steps",)] = y.line
        if not isinstance(y.value, list):
            self.report(y.line, "steps", "expected a list of steps")
            return []
        out: list[Any] = []
        for i, item in enumerate(y.value):
            try:
                out.append(self.step(item, i))
            except _Bad as bad:
                self.problems.append((bad.line, bad.text))
                out.append(None)
                if isinstance(item.value, dict) and "id" in item.value:
                    self.set_aside.add(str(item.value["id"].value))
        return out

    def step(self, y: _Y, index: int) -> dict[str, Any]:
        where = f"steps[{index}]"
        path: Path_ = ("steps", index)
        self.lines[path] = y.line
        if not isinstance(y.value, dict):
            raise self.fail(y.line, where, "a step is a mapping naming its kind, e.g. `sleep: 5`")
        kind = self._one_name(y, where, _STEP_KINDS.keys() | {"pause"}, ACTION_OPTIONS, "step")
        if kind == "pause":
            raise self.fail(
                y.value[kind].line,
                where,
                "pause is not available yet: the actor runtime cannot freeze a node",
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
        name = self._one_name(y, where, _CONDITION_KINDS.keys(), {"within"}, "condition")
        out: dict[str, Any] = {"condition": self.condition(name, y.value[name], cond_path, where)}
        if "within" in y.value:
            out["within"] = self.plain(y.value["within"], (*path, "within"))
        return out

    def condition(self, name: str, body: _Y, path: Path_, where: str) -> dict[str, Any]:
        self.lines[path] = body.line
        if name not in _CONDITION_KINDS:
            raise self.fail(body.line, where, _unknown("condition", name, _CONDITION_KINDS))
        return {"kind": name, **self.body(body, name, path, f"{where}.{name}")}

    def _one_name(
        self, y: _Y, where: str, kinds: Iterable[str], options: Iterable[str], what: str
    ) -> str:
        """The one key of mapping ``y`` that names its kind (a step's, or a condition's),
        among ``options``: with one known kind, every other key is reported as unknown;
        with none, a lone key is taken for a mistyped kind."""
        known, allowed = set(kinds), set(options)
        named = [k for k in y.value if k not in allowed]
        kinds_found = [k for k in named if k in known]
        if len(kinds_found) > 1:
            raise self.fail(
                y.line,
                where,
                f"a {what} names exactly one kind (found: {', '.join(map(str, kinds_found))})",
            )
        if not kinds_found and len(named) == 1:
            raise self.fail(y.value[named[0]].line, where, _unknown(what, named[0], known))
        if not kinds_found:
            found = ", ".join(map(str, named)) if named else "none"
            raise self.fail(
                y.line,
                where,
                f"a {what} names exactly one kind (found: {found}); kinds: "
                + ", ".join(sorted(known - {"pause"})),
            )
        for key in named:
            if key not in known:
                self.report(
                    y.value[key].line,
                    where,
                    f"unknown key {key!r}" + did_you_mean(key, allowed | known),
                )
        return str(kinds_found[0])


def _unknown(what: str, name: object, known: Iterable[str]) -> str:
    """``unknown step 'crash_brokr' (did you mean 'crash_broker'?)``; without a close
    name, the known ones are listed."""
    names = sorted(set(known) - {"pause"})
    hint = did_you_mean(name, names)
    return f"unknown {what} {name!r}" + (hint or f"; {what}s: {', '.join(names)}")


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
    """A scenario from YAML text; ``ScenarioError`` with every problem of it (each
    ``source:line: ...``) if it is not one. ``cluster``: set-up entries that override the
    file's (``kemu chaos run --processes`` and ``--zookeeper`` set ``mode`` and
    ``store``), checked as if the file said them."""
    problems: list[tuple[int, str]] = []
    data, norm = _normalise(text, source, problems)
    if cluster:
        data["cluster"] = {**data.get("cluster", {}), **cluster}

    def found(path: Path_, what: str) -> None:
        problems.append((_line_of(norm.lines, path), f"{describe(path, data)}: {what}"))

    for path, what in _unknown_fields(data, _SCENARIO_TYPE, ()):
        found(path, what)
    parts = _convert_parts(data, found)
    if parts is not None:  # the steps that are right checked together
        top, kept, failed_ids = parts
        scenario = msgspec.structs.replace(top, steps=tuple(step for _, step in kept))
        set_aside = norm.set_aside | failed_ids
        for path, what in scenario_problems(scenario, set_aside=set_aside):
            if path[:1] == ("steps",):  # the index among the steps kept
                path = ("steps", kept[cast(int, path[1])][0], *path[2:])
            found(path, what)
    if problems:
        ordered = sorted(problems, key=lambda problem: problem[0])  # stable: same line kept
        raise ScenarioError(*(f"{source}:{line}: {what}" for line, what in ordered))
    return scenario


def _normalise(
    text: str, source: str, problems: list[tuple[int, str]]
) -> tuple[dict[str, Any], _Normaliser]:
    top = _compose(text, source, problems)
    if top is None:
        raise ScenarioError(f"{source}:1: the file is empty")
    norm = _Normaliser(problems)
    return norm.scenario(top), norm


def scenario_data(text: str, *, source: str = "<scenario>") -> dict[str, Any]:
    """A scenario file's YAML with its shorthand expanded (each step ``{kind: ..., its
    fields}``): what ``scenario_schema`` describes and ``parse_scenario`` converts.
    ``ScenarioError`` if the YAML cannot be read that far."""
    problems: list[tuple[int, str]] = []
    data, _ = _normalise(text, source, problems)
    if problems:
        raise ScenarioError(*(f"{source}:{line}: {what}" for line, what in sorted(problems)))
    return data


def scenario_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12, msgspec's) of a scenario with its shorthand
    expanded (``scenario_data``), generated from the scenario's types."""
    schema: dict[str, Any] = msgspec.json.schema(Scenario)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "kemu chaos scenario (shorthand expanded)",
        **schema,
    }


_SCENARIO_TYPE: Final = mi.type_info(Scenario)


def _convert_parts(
    data: dict[str, Any], found: Callable[[Path_, str], None]
) -> tuple[Scenario, list[tuple[int, Step]], set[str]] | None:
    """``data`` converted part by part (each step, each other entry), so that one wrong part
    does not hide the others: the scenario without its steps, the steps that are right
    (with their indexes) and the ids of those that are not; None if an entry other than
    the steps is wrong."""
    steps: list[tuple[int, Step]] = []
    failed_ids: set[str] = set()
    for i, step in enumerate(data.get("steps") or []):
        if step is None:  # set aside by the normaliser, already reported
            continue
        try:
            steps.append((i, msgspec.convert(step, Step)))
        except msgspec.ValidationError as exc:
            found(*_validation_problem(str(exc), ("steps", i)))
            if step.get("id") is not None:
                failed_ids.add(str(step["id"]))
    failed = False
    rest = {key: value for key, value in data.items() if key != "steps"}
    for info in msgspec.structs.fields(Scenario):
        if info.encode_name in rest and info.name != "steps":
            try:
                msgspec.convert(rest[info.encode_name], info.type)
            except msgspec.ValidationError as exc:
                found(*_validation_problem(str(exc), (info.encode_name,)))
                del rest[info.encode_name]
                failed = True
    try:
        top = msgspec.convert(rest, Scenario)
    except msgspec.ValidationError as exc:
        found(*_validation_problem(str(exc), ()))
        return None
    return None if failed else (top, steps, failed_ids)


def _unknown_fields(data: Any, t: mi.Type, path: Path_) -> Iterator[tuple[Path_, str]]:
    """Every key of ``data`` that its type (a scenario value, msgspec's view of it) has no
    field for, with the closest field name; each is removed from ``data`` once found."""
    if isinstance(t, mi.UnionType):
        structs = [u for u in t.types if isinstance(u, mi.StructType)]
        if isinstance(data, dict) and structs:
            tag_field = structs[0].tag_field
            if tag_field is not None:
                structs = [u for u in structs if u.tag == data.get(tag_field)]
            if len(structs) == 1:
                yield from _unknown_fields(data, structs[0], path)
        elif isinstance(data, list):
            for u in t.types:
                if isinstance(u, mi.ListType | mi.VarTupleType):
                    yield from _unknown_fields(data, u, path)
    elif isinstance(t, mi.StructType) and isinstance(data, dict):
        fields = {f.encode_name: f.type for f in t.fields}
        for key in list(data):
            if key == t.tag_field:
                continue
            if key in fields:
                yield from _unknown_fields(data[key], fields[key], (*path, key))
            else:
                del data[key]
                yield (*path, key), f"unknown field `{key}`" + did_you_mean(key, fields, quote="`")
    elif isinstance(t, mi.ListType | mi.VarTupleType) and isinstance(data, list):
        for i, item in enumerate(data):
            yield from _unknown_fields(item, t.item_type, (*path, i))
    elif isinstance(t, mi.DictType) and isinstance(data, dict):
        for key, value in data.items():
            yield from _unknown_fields(value, t.value_type, (*path, key))


def _validation_problem(message: str, prefix: Path_) -> tuple[Path_, str]:
    """msgspec's message about a part at ``prefix`` as the place and what is wrong."""
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
    return (*prefix, *path), what


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
    ``ScenarioError`` naming every problem's place."""
    data = msgspec.to_builtins(scenario)
    problems = [
        f"{scenario.name}: {describe(path, data)}: {what}"
        for path, what in scenario_problems(scenario)
    ]
    if problems:
        raise ScenarioError(*problems)
    return scenario


def scenario_problems(
    scenario: Scenario, *, set_aside: Iterable[str] = ()
) -> Iterator[tuple[Path_, str]]:
    """Every problem that needs more than one field to see, with its place. ``set_aside``:
    the ids of steps that were wrong themselves (a heal naming one is not reported)."""
    from actors.admin import BrokerConfig, ConfigError

    setup = scenario.cluster
    count = setup.brokers
    each_valid = True
    for name, value in setup.config.items():
        try:
            BrokerConfig.from_overrides({name: value})
        except ConfigError as exc:
            each_valid = False
            yield ("cluster", "config", name), str(exc).split(". Known names")[0]
    try:
        if each_valid:  # then the ones that only go wrong together
            BrokerConfig.from_overrides(dict(setup.config))
    except ConfigError as exc:
        yield ("cluster", "config"), str(exc).split(". Known names")[0]
    for broker in setup.racks:
        if not 0 <= broker < count:
            yield ("cluster", "racks"), f"no broker {broker} (the cluster has {count})"
    faults: set[str] = set()
    ids: set[str] = set()
    groups: dict[str, int] = {}  # consumer groups started so far: their member counts
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
        if (
            isinstance(step, Heal)
            and step.fault != "all"
            and step.fault not in faults
            and step.fault not in set_aside
        ):
            yield (
                (*here, "fault"),
                f"no earlier fault has id {step.fault!r}"
                + did_you_mean(step.fault, faults | set(set_aside)),
            )
        if isinstance(step, _MessageRule) and step.types is not None:
            known = message_types()
            for j, name in enumerate(step.types):
                if name not in known:
                    yield (
                        (*here, "types", j),
                        f"unknown message type {name!r}" + did_you_mean(name, known),
                    )
        if isinstance(step, Wait | Expect) and isinstance(step.condition, MetricAt):
            name = step.condition.name
            if name not in METRIC_NAMES:
                yield (
                    (*here, "condition", "name"),
                    f"unknown metric {name!r}" + did_you_mean(name, METRIC_NAMES),
                )
        if isinstance(step, NetworkPartition):
            seen: set[int | str] = set()
            for g, group in enumerate(step.groups):
                for member in group:
                    if member in seen:
                        yield (*here, "groups", g), f"{member!r} is in more than one group"
                    seen.add(member)
        if isinstance(step, Consume) and step.group is not None:
            groups[step.group] = groups.get(step.group, 0) + step.members
        if isinstance(step, PauseMember):
            members = groups.get(step.group)
            if members is None:
                yield (
                    (*here, "group"),
                    f"no earlier consume step runs group {step.group!r}"
                    + did_you_mean(step.group, groups),
                )
            elif step.member >= members:
                yield (
                    (*here, "member"),
                    f"no member {step.member} (group {step.group} has {members})",
                )
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
        "pause_member",
        "kill_coordinator",
    }
)
"""The faults that cross processes (slow_store with the embedded store only), and
``pause_member``, which holds one of the run's own consumers."""


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
        | AddPartitions
        | AlterConfigs
        | ReassignPartitions
        | PreferredElection,
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
        if isinstance(cond, MetricAt) and cond.broker is not None:
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
