"""No code outside a system's own package branches on a system's name: every fact about a system lives in
systems/<name>/ (its ServingSystem's facets) and everything else iterates the registry (systems/__init__.py
all_systems()) and reads the facets, so a new system is its package plus one registry line.

Each production module outside systems/<package>/ and the registry is parsed with `ast`; a string literal equal to a
registered system's name is a finding where it is compared (==, !=, in, not in, alone or in a tuple/list/set),
used as a dict key, or passed to str.startswith/endswith. Literals in other places (a default value, a docstring, an
argument naming one system to run) are not branches.

EXEMPT names the few modules where such a literal names something else that happens to share the spelling, each
with why; an entry that no longer finds anything is itself a failure, so the list cannot go stale.
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

from helpers import ROOT

from systems import REGISTRY

# module -> why its literals are not system names.
EXEMPT: dict[str, str] = {
    "tools/generate_architectures.py": "keyed by the engine's PyPI project (systems/<name>/options.py ENGINE_PROJECT), "
    "whose wheels it downloads and reads; the engine, not the system",
    "bench/serving.py": "the benchmark's three subjects, chosen by name and launched each its own way "
    "(bench/README.md); a new system joins no benchmark by being registered",
}


def production_modules() -> list[Path]:
    """Every tracked .py file but the tests, the systems' own packages and the registry."""
    own = {module.split(".")[1] for module in REGISTRY.values() if module.startswith("systems.")}
    listed = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    keep = []
    for name in listed:
        parts = Path(name).parts
        if parts[0] == "tests" or name == "systems/__init__.py":
            continue
        if parts[0] == "systems" and len(parts) > 2 and parts[1] in own:
            continue
        keep.append(Path(name))
    return keep


def _names_in(node: ast.AST, names: set[str]) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [found for element in node.elts for found in _names_in(element, names)]
    return []


def name_branches(source: str, names: set[str]) -> list[tuple[int, str, str]]:
    """(line, how, name) for each system name compared, keyed or prefix-tested in `source`."""
    found: list[tuple[int, str, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                found += [(node.lineno, "compared", name) for name in _names_in(side, names)]
        elif isinstance(node, ast.Dict):
            for key in node.keys:
                if key is not None:
                    found += [(key.lineno, "dict key", name) for name in _names_in(key, names)]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("startswith", "endswith")
        ):
            for arg in node.args:
                found += [(node.lineno, node.func.attr, name) for name in _names_in(arg, names)]
        elif isinstance(node, ast.MatchValue):
            found += [(node.lineno, "match case", name) for name in _names_in(node.value, names)]
    return found


def test_the_finder_sees_each_kind_of_branch():
    """The finder itself: each form is found, and a literal merely passed along is not."""
    names = {"sglang", "vllm"}
    source = (
        'a = x == "sglang"\nb = x in ("vllm", "other")\nc = {"vllm": 1}\nd = x.startswith("sglang")\n'
        'match x:\n    case "vllm":\n        pass\nrun(system="vllm")\n'
    )
    assert [(line, how) for line, how, _ in name_branches(source, names)] == [
        (1, "compared"),
        (2, "compared"),
        (3, "dict key"),
        (4, "startswith"),
        (6, "match case"),
    ]


def test_no_module_outside_a_systems_package_branches_on_a_system_name():
    names = set(REGISTRY)
    findings = []
    exempt_hit: set[str] = set()
    for path in production_modules():
        hits = name_branches((ROOT / path).read_text(), names)
        if hits and str(path) in EXEMPT:
            exempt_hit.add(str(path))
            continue
        findings += [f"{path}:{line}: {name!r} {how}" for line, how, name in hits]
    assert not findings, (
        "system names branched on outside systems/<name>/ (make it a facet of the ServingSystem and read it): "
        + "; ".join(findings)
    )
    assert exempt_hit == set(EXEMPT), f"EXEMPT entries that find nothing any more: {sorted(set(EXEMPT) - exempt_hit)}"


def test_no_module_branches_on_a_stand_in_dialect_name():
    """The stand-in's servers (local_runtime/stand_in.py DIALECTS) likewise: their facts are the Dialect record's
    fields, read by every module, the systems' packages and the stand-in included (a system names its dialect as a
    call's argument, which is not a branch)."""
    from local_runtime.stand_in import DIALECTS

    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    findings = [
        f"{path}:{line}: {name!r} {how}"
        for path in tracked.stdout.split()
        if not path.startswith("tests/")
        for line, how, name in name_branches((ROOT / path).read_text(), set(DIALECTS))
    ]
    assert not findings, "dialect names branched on (make it a field of Dialect and read it): " + "; ".join(findings)
