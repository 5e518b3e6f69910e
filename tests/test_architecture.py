"""The dependency direction between the top-level packages: one way, no circles.

Every .py file of our packages is parsed with `ast` (imports inside functions count: a lazy import is still a
dependency), the imports are reduced to top-level package -> top-level package, and the graph must have no cycle
and no edge the table below does not allow.

    request_contract                     the stdlib request contract every entry point ships (imports nothing)
    chat_contract                        the stdlib chat (OpenAI Chat Completions) contract beside it
    artifact, endpoint_config            import none of ours (the artifact format; the config schema)
    endpoint_runtime                     the code the Lambda functions ship (+ the request contract)
    systems                              the serving systems' registry: config schema + artifact
    deployment                           where config and systems meet: load a config, run the systems' rules
    local_runtime                        the systems' local containers (real engines) the local server forwards to
    stacks, model_build                  above the meeting point
    workstation, local_emulator, bench   the tools on top (local_emulator drives workstation, never the reverse)
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

from helpers import ROOT

# Our top-level packages (a directory of .py files, or one module), and each Lambda function's own folder.
PACKAGES = {
    "request_contract": ROOT / "request_contract.py",
    "chat_contract": ROOT / "chat_contract.py",
    "artifact": ROOT / "artifact",
    "endpoint_runtime": ROOT / "endpoint_runtime",
    "endpoint_config": ROOT / "endpoint_config",
    "systems": ROOT / "systems",
    "deployment": ROOT / "deployment",
    "stacks": ROOT / "stacks",
    "local_runtime": ROOT / "local_runtime",
    "model_build": ROOT / "model_build",
    "workstation": ROOT / "workstation",
    "local_emulator": ROOT / "local_emulator",
    "bench": ROOT / "bench",
    "lambda/invoke": ROOT / "lambda" / "invoke",
    "lambda/smoke": ROOT / "lambda" / "smoke",
    "lambda/stream": ROOT / "lambda" / "stream",
    "app": ROOT / "app.py",
}

# What each package may import of ours. Anything else is a step against the direction.
ALLOWED: dict[str, set[str]] = {
    "request_contract": set(),
    "chat_contract": {"request_contract"},
    "artifact": set(),
    # What the Lambda functions ship (stdlib + boto3), and the request and chat contracts (stdlib only), which the
    # invoke and stream functions share with the containers.
    "endpoint_runtime": {"request_contract", "chat_contract"},
    "endpoint_config": set(),
    "systems": {"request_contract", "chat_contract", "artifact", "endpoint_config"},
    "deployment": {"chat_contract", "artifact", "endpoint_config", "systems"},
    "stacks": {"request_contract", "artifact", "endpoint_runtime", "endpoint_config", "systems", "deployment"},
    "local_runtime": {"systems", "request_contract"},
    "model_build": {
        "request_contract",
        "chat_contract",
        "artifact",
        "endpoint_runtime",
        "endpoint_config",
        "systems",
        "deployment",
        "local_runtime",
    },
    "workstation": {"artifact", "endpoint_runtime", "endpoint_config", "deployment", "model_build"},
    "local_emulator": {"artifact", "endpoint_runtime", "endpoint_config", "deployment", "model_build", "workstation"},
    "bench": {
        "request_contract",
        "artifact",
        "endpoint_runtime",
        "endpoint_config",
        "systems",
        "deployment",
        "stacks",
        "model_build",
        "local_emulator",
    },
    # Each function's asset ships only the modules its handler imports (stacks/lambda_asset.py).
    "lambda/invoke": {"endpoint_runtime", "request_contract"},
    "lambda/smoke": {"endpoint_runtime", "request_contract"},
    "lambda/stream": {"endpoint_runtime"},
    "app": {"endpoint_config", "deployment", "stacks"},
}

# Imported names that are ours (Lambda folders are loaded by path, never imported by name).
OURS = {name for name in PACKAGES if "/" not in name}


def _repository_python_files() -> set[Path]:
    """The repository's .py files, tracked or new; ignored outputs (bench/raw/'s copied artifacts, build/) are not ours."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return {ROOT / name for name in listed}


REPOSITORY_FILES = _repository_python_files()


def _files(package: str) -> list[Path]:
    path = PACKAGES[package]
    return [path] if path.suffix == ".py" else sorted(p for p in path.rglob("*.py") if p in REPOSITORY_FILES)


def _imported(path: Path) -> set[str]:
    """Top-level names of every absolute import in the file, at any depth (functions, try blocks, ...)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def import_graph() -> dict[str, dict[str, list[str]]]:
    """package -> {imported package of ours: [files that import it]}, self-imports left out."""
    graph: dict[str, dict[str, list[str]]] = {}
    for package in PACKAGES:
        edges: dict[str, list[str]] = {}
        for path in _files(package):
            for name in _imported(path) & OURS - {package}:
                edges.setdefault(name, []).append(path.relative_to(ROOT).as_posix())
        graph[package] = edges
    return graph


def find_cycle(graph: dict[str, dict[str, list[str]]]) -> list[str] | None:
    """One cycle of the graph as [a, b, ..., a], or None."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, {})):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_every_package_is_in_the_table():
    assert set(ALLOWED) == set(PACKAGES)
    for package, path in PACKAGES.items():
        assert path.exists(), f"{package}: {path} does not exist"
    on_disk = {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()} | {
        p.stem for p in ROOT.glob("*_contract.py")
    }
    assert on_disk <= OURS, f"top-level packages missing from the architecture table: {sorted(on_disk - OURS)}"


def test_no_import_cycle_between_top_level_packages():
    graph = import_graph()
    cycle = find_cycle(graph)
    if cycle:
        where = [f"{a} -> {b} ({', '.join(graph[a][b])})" for a, b in zip(cycle, cycle[1:])]
        raise AssertionError("import cycle: " + " -> ".join(cycle) + "\n  " + "\n  ".join(where))


def test_imports_go_only_the_allowed_direction():
    wrong = [
        f"{package} imports {name} ({', '.join(files)}); allowed: {', '.join(sorted(ALLOWED[package])) or 'none of ours'}"
        for package, edges in import_graph().items()
        for name, files in sorted(edges.items())
        if name not in ALLOWED[package]
    ]
    assert wrong == [], "\n".join(wrong)


def test_the_cycle_finder_finds_one():
    graph = {"a": {"b": ["a.py"]}, "b": {"c": ["b.py"]}, "c": {"a": ["c.py"]}, "d": {}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b": []}, "b": {}}) is None


def test_the_registry_names_every_system_and_its_recipe():
    """systems.REGISTRY: every config `system:` value -> its package's SYSTEM, which names a recipe module with a
    build(); model_build finds recipes only through it (the recipe modules load torch: checked without importing)."""
    import importlib.util

    from systems import REGISTRY, get_system

    for name in REGISTRY:
        system = get_system(name)
        assert system.name == name
        assert system.recipe, f"system {name!r} names no recipe"
        spec = importlib.util.find_spec(system.recipe)
        assert spec is not None and spec.origin, f"system {name!r}: no module {system.recipe}"
        tree = ast.parse(Path(spec.origin).read_text())
        assert any(isinstance(n, ast.FunctionDef) and n.name == "build" for n in tree.body), (
            f"{system.recipe} has no build()"
        )
