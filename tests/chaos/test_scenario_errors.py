"""Scenario files with several mistakes: every one is reported at once, one line each with
its file and line, a name that is not known with the closest known one; and the JSON Schema
of the scenario format (``kemu chaos schema``) that every shipped scenario meets."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from cluster.chaos import ScenarioError, parse_scenario
from cluster.chaos.loader import scenario_data, scenario_schema
from cluster.chaos.model import STEP_TYPES, Scenario, kind_of
from cluster.cli.chaos import chaos_main
from cluster.cli.main import build_parser

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"

THREE_MISTAKES = """\
name: three
cluster: {brokers: 3}
steps:
  - create_topic: {topic: t1, partitions: 3}
  - wait: {topic_ready: t1, witihn: 10}
  - crash_brokr: 1
  - sleep: 1
  - create_topic:
      topic: t2
      replication_factr: 2
"""


def kemu(argv: list[str]) -> tuple[int, str]:
    args = build_parser().parse_args(argv)
    out = io.StringIO()
    return chaos_main(args, out=out), out.getvalue()


def test_three_mistakes_are_three_lines_with_their_lines_and_suggestions() -> None:
    """An unknown key of a wait, an unknown step kind and an unknown field of a step: all
    three, in the order of the file, each with the name that was meant."""
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(THREE_MISTAKES, source="three.yaml")
    assert caught.value.problems == (
        "three.yaml:5: steps[1] (wait): unknown key 'witihn' (did you mean 'within'?)",
        "three.yaml:6: steps[2]: unknown step 'crash_brokr' (did you mean 'crash_broker'?)",
        "three.yaml:10: steps[4] (create_topic).replication_factr: unknown field"
        " `replication_factr` (did you mean `replication_factor`?)",
    )
    assert str(caught.value) == "\n".join(caught.value.problems)


def test_chaos_check_prints_every_problem_of_every_file_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``kemu chaos check`` goes on past the first wrong file and the first wrong step."""
    three = tmp_path / "three.yaml"
    three.write_text(THREE_MISTAKES)
    other = tmp_path / "other.yaml"
    other.write_text(
        "name: other\nsteps:\n  - crash_broker: 1\n    id: down\n"
        "  - heal: dwn\n  - expect: {topic_redy: t1}\n  - drop: {types: [StopReplica]}\n"
    )
    status, printed = kemu(["chaos", "check", str(three), str(other)])
    err = capsys.readouterr().err.splitlines()
    assert (status, printed) == (2, "")
    assert [line.split(": ", 2)[1] for line in err] == [
        f"{three}:5",
        f"{three}:6",
        f"{three}:10",
        f"{other}:5",
        f"{other}:6",
        f"{other}:7",
    ]
    assert all(line.startswith("Error: ") for line in err)
    assert "no earlier fault has id 'dwn' (did you mean 'down'?)" in err[3]
    assert "unknown condition 'topic_redy' (did you mean 'topic_ready'?)" in err[4]
    assert "unknown message type 'StopReplica' (did you mean 'StopReplicaRequest'?)" in err[5]


def test_a_step_set_aside_does_not_make_later_heals_wrong() -> None:
    """A fault that is itself wrong is still the fault a later heal names: one problem."""
    text = "name: x\nsteps:\n  - crash_broker: {broker: one}\n    id: down\n  - heal: down\n"
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text, source="x.yaml")
    assert caught.value.problems == (
        "x.yaml:3: steps[0] (crash_broker).broker: Invalid enum value 'one'",
    )


def test_a_name_far_from_every_known_one_lists_them() -> None:
    """Without a close name, the known kinds are listed instead of a guess."""
    with pytest.raises(ScenarioError, match=r"unknown step 'zzz'; steps: add_partitions, "):
        parse_scenario("name: x\nsteps:\n  - zzz: 3\n", source="x.yaml")


# ----------------------------------------------------------------------------- the schema


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = root["$defs"][schema["$ref"].removeprefix("#/$defs/")]
    return schema


_TYPES = {
    "object": dict,
    "array": list,
    "string": str,
    "integer": int,
    "number": int | float,
    "boolean": bool,
    "null": type(None),
}
_ANNOTATIONS = {"title", "description", "default", "discriminator", "$schema", "$defs"}


def _problems(value: Any, schema: dict[str, Any], root: dict[str, Any], at: str) -> list[str]:
    """Where ``value`` breaks ``schema``: the keywords msgspec's schemas use, and a failure
    for any other (so that a schema this does not understand cannot pass unchecked)."""
    schema = _resolve(schema, root)
    unknown = set(schema) - _ANNOTATIONS - {
        "type", "properties", "required", "additionalProperties", "items", "anyOf", "enum",
    }  # fmt: skip
    assert not unknown, f"{at}: keywords not checked here: {unknown}"
    if "anyOf" in schema:
        if all(_problems(value, s, root, at) for s in schema["anyOf"]):
            return [f"{at}: matches none of anyOf"]
        return []
    if "enum" in schema and value not in schema["enum"]:
        return [f"{at}: {value!r} not in {schema['enum']}"]
    if "type" in schema:
        expected = _TYPES[schema["type"]]
        if not isinstance(value, expected) or (
            isinstance(value, bool) and schema["type"] in ("integer", "number")
        ):
            return [f"{at}: not {schema['type']}"]
    found: list[str] = []
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                found.append(f"{at}: {name} missing")
        for name, item in value.items():
            if name in properties:
                found += _problems(item, properties[name], root, f"{at}.{name}")
            elif schema.get("additionalProperties") is False:
                found.append(f"{at}: {name} not allowed")
            elif isinstance(schema.get("additionalProperties"), dict):
                found += _problems(item, schema["additionalProperties"], root, f"{at}.{name}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            found += _problems(item, schema["items"], root, f"{at}[{i}]")
    return found


def test_the_schema_is_json_schema_of_the_scenario_types() -> None:
    """``kemu chaos schema`` prints the schema: a draft 2020-12 document whose scenario has
    the top-level entries of the format and whose steps are every step kind."""
    status, printed = kemu(["chaos", "schema"])
    assert status == 0
    schema = json.loads(printed)
    assert schema == json.loads(json.dumps(scenario_schema()))
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    top = _resolve(schema, schema)
    assert top["type"] == "object"
    assert top["required"] == ["name"]
    assert set(top["properties"]) == {f.encode_name for f in msgspec.structs.fields(Scenario)}
    assert top["additionalProperties"] is False
    steps = top["properties"]["steps"]["items"]
    assert set(steps["discriminator"]["mapping"]) == {kind_of_type(t) for t in STEP_TYPES}
    assert _problems({"name": "x", "steps": [{"kind": "explode"}]}, schema, schema, "$")
    assert _problems({"name": "x", "colour": "red"}, schema, schema, "$")


def kind_of_type(cls: type) -> str:
    tag = cls.__struct_config__.tag  # type: ignore[attr-defined]
    assert isinstance(tag, str)
    return tag


@pytest.mark.parametrize(
    "path",
    sorted([*SCENARIOS.glob("*.yaml"), *SCENARIOS.glob("real/*.yaml")]),
    ids=lambda p: p.stem,
)
def test_every_shipped_scenario_meets_the_schema(path: Path) -> None:
    """Each scenario under scenarios/, its shorthand expanded (as JSON: keys are strings),
    meets the schema, and converts to the scenario's types."""
    data = scenario_data(path.read_text(), source=str(path))
    as_json = json.loads(msgspec.json.encode(data))
    schema = scenario_schema()
    assert _problems(as_json, schema, schema, "$") == []
    assert kind_of(msgspec.convert(data, Scenario).steps[0])
