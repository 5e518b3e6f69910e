"""An assertion that cannot fail is a defect (the developers' guide): `assert x or True`, `assert True`, `assert "..."`
pass whatever the code does. Each `assert` in the tests is read for a condition that is true whatever it evaluates:
a truthy constant, or an `or` with a truthy constant among its operands."""

from __future__ import annotations

import ast

from helpers import ROOT, repository_python_files


def _always_true(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return bool(node.value)
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
        return any(_always_true(value) for value in node.values)
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        return all(_always_true(value) for value in node.values)
    return False


def assertions_that_cannot_fail(source: str) -> list[int]:
    """Lines of the `assert` statements whose condition is true whatever it evaluates."""
    return [
        node.lineno for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Assert) and _always_true(node.test)
    ]


def test_every_assertion_in_the_tests_can_fail():
    found = {
        f"{path}:{line}"
        for path in repository_python_files()
        if path.startswith("tests/") and (ROOT / path).is_file()
        for line in assertions_that_cannot_fail((ROOT / path).read_text())
    }
    assert not found, f"assertions that pass whatever the code does: {sorted(found)}"


def test_the_finder_sees_each_form():
    source = "assert x or True\nassert True\nassert 'why'\nassert x and y\nassert x or y\nassert (x, 'msg') and 1\n"
    assert assertions_that_cannot_fail(source) == [1, 2, 3]
