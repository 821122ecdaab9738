"""The rule tests/conftest.py states: no test module imports another. What test modules
share lives in tests/support (importing a test module also brings its tests and fixtures
into the importer's namespace, where pytest may collect them a second time)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _imported_test_modules(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return [n for n in names if n.startswith("tests.") and n.split(".")[-1].startswith("test_")]


def test_no_test_module_imports_another() -> None:
    offenders = {
        str(path.relative_to(TESTS)): imported
        for path in sorted(TESTS.rglob("test_*.py"))
        if (imported := _imported_test_modules(path))
    }
    assert offenders == {}, "move what they share into tests/support"


def test_the_check_sees_an_import_of_a_test_module(tmp_path: Path) -> None:
    module = tmp_path / "test_example.py"
    module.write_text("from tests.unit.test_other import helper\nimport tests.support.x\n")
    assert _imported_test_modules(module) == ["tests.unit.test_other"]
