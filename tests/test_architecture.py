"""The dependency direction between the top-level packages: one way, no circles; and stacks read the plan.

Every .py file of our packages is parsed with `ast` (imports inside functions count: a lazy import is still a
dependency), the imports are reduced to top-level package -> top-level package, and the graph must have no cycle
and no edge the table below does not allow. Every top-level folder holding Python (and each Lambda function's
folder, and each top-level module) must be in the table.

    request_contract                     the stdlib request contract every entry point ships (imports nothing)
    chat_contract                        the stdlib chat (OpenAI Chat Completions) contract beside it
    weights_staging                      the staging job (stdlib + boto3), shipped alone: imports none of ours
    artifact, facts                      import none of ours (the artifact format; what is known of GPUs, instance
                                         types and model sizes, each with its source)
    endpoint_config                      the config schema (reads facts)
    endpoint_runtime                     the code the Lambda functions ship (+ the request contract)
    lambda/*                             each function's handler: endpoint_runtime (+ the contracts) or nothing
    systems                              the serving systems' registry: config schema + facts + artifact
    tools                                the engine-table generator (reads systems/)
    deployment                           where config and systems meet: load a config, plan each endpoint (and
                                         what the front doors read, in endpoint_runtime's and the contracts' names)
    local_runtime                        the local SageMaker runtime: the container-contract server, and the systems'
                                         local containers (real engines) it forwards to
    load_testing                         the load test, the SLO gate and the managed benchmark
    stacks, model_build                  above the meeting point (model_build's CLI registers load_testing's commands
                                         and serves through local_runtime)
    workstation, local_emulator, bench   the tools on top (local_emulator drives workstation, never the reverse)
    app                                  the CDK entry point: deployment + stacks

Stacks read the plan, not config modules: stacks/ and app.py reach endpoint_config only through the deployment
package (deployment/config_blocks.py, the plan's field types); the few imports left are named below as debt. And
they read the plan's named fields, not the config entry behind it: no `.spec` read in stacks/ or app.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import ROOT, repository_python_files

# Our top-level packages (a directory of .py files, or one module), and each Lambda function's own folder.
PACKAGES = {
    "request_contract": ROOT / "request_contract.py",
    "chat_contract": ROOT / "chat_contract.py",
    "artifact": ROOT / "artifact",
    "endpoint_runtime": ROOT / "endpoint_runtime",
    "facts": ROOT / "facts",
    "endpoint_config": ROOT / "endpoint_config",
    "systems": ROOT / "systems",
    "deployment": ROOT / "deployment",
    "stacks": ROOT / "stacks",
    "local_runtime": ROOT / "local_runtime",
    "load_testing": ROOT / "load_testing",
    "model_build": ROOT / "model_build",
    "tools": ROOT / "tools",
    "workstation": ROOT / "workstation",
    "local_emulator": ROOT / "local_emulator",
    "bench": ROOT / "bench",
    "weights_staging": ROOT / "weights_staging",
    "lambda/invoke": ROOT / "lambda" / "invoke",
    "lambda/smoke": ROOT / "lambda" / "smoke",
    "lambda/smoke_check": ROOT / "lambda" / "smoke_check",
    "lambda/stream": ROOT / "lambda" / "stream",
    "lambda/copy_count": ROOT / "lambda" / "copy_count",
    "lambda/artifact_check": ROOT / "lambda" / "artifact_check",
    "app": ROOT / "app.py",
}

# What each package may import of ours. Anything else is a step against the direction.
ALLOWED: dict[str, set[str]] = {
    "request_contract": set(),
    "chat_contract": {"request_contract"},
    # facts, the bottom room: the Hub reader parses a safetensors header with the same bounded parser as a file's.
    "artifact": {"facts"},
    # The staging job's whole code (stdlib + boto3), shipped alone as its CodeBuild asset: it imports nothing of ours.
    "weights_staging": set(),
    # What the Lambda functions ship (stdlib + boto3), and the request and chat contracts (stdlib only), which the
    # invoke and stream functions share with the containers.
    "endpoint_runtime": {"request_contract", "chat_contract"},
    "facts": set(),
    "endpoint_config": {"facts"},
    "systems": {"request_contract", "chat_contract", "artifact", "facts", "endpoint_config"},
    # The plan also states what the front doors read (EndpointPlan.front_door_environment: the request limits and the
    # body kind, in endpoint_runtime/bodies.py's and request_contract's names).
    "deployment": {
        "request_contract",
        "chat_contract",
        "artifact",
        "facts",
        "endpoint_runtime",
        "endpoint_config",
        "systems",
    },
    "stacks": {"request_contract", "artifact", "endpoint_runtime", "endpoint_config", "systems", "deployment"},
    "local_runtime": {"request_contract", "chat_contract", "artifact", "endpoint_runtime", "systems", "deployment"},
    "load_testing": {"artifact", "endpoint_runtime", "endpoint_config", "deployment"},
    "model_build": {
        "request_contract",
        "chat_contract",
        "artifact",
        "facts",
        "endpoint_runtime",
        "endpoint_config",
        "systems",
        "deployment",
        "local_runtime",
        "load_testing",
    },
    "tools": {"systems"},
    "workstation": {"artifact", "endpoint_runtime", "endpoint_config", "deployment", "model_build", "load_testing"},
    "local_emulator": {
        "facts",
        "artifact",
        "endpoint_runtime",
        "endpoint_config",
        "systems",  # demo_config.py: which engine options a tiny model drops or fits is each system's fact
        "deployment",
        "local_runtime",
        "model_build",
        "workstation",
    },
    "bench": {
        "request_contract",
        "artifact",
        "endpoint_runtime",
        "endpoint_config",
        "systems",
        "deployment",
        "stacks",
        "model_build",
        "local_runtime",
        "load_testing",
        "local_emulator",
        "weights_staging",
    },
    # Each function's asset ships only the modules its handler imports (stacks/lambda_asset.py).
    "lambda/invoke": {"endpoint_runtime", "request_contract"},
    "lambda/smoke": {"endpoint_runtime", "request_contract"},
    "lambda/smoke_check": {"endpoint_runtime", "request_contract"},
    "lambda/stream": {"endpoint_runtime"},
    "lambda/copy_count": set(),
    "lambda/artifact_check": {"endpoint_runtime"},
    "app": {"deployment", "stacks"},
}

# Imported names that are ours (Lambda folders are loaded by path, never imported by name; app.py is run, not imported).
OURS = {name for name in PACKAGES if "/" not in name}


REPOSITORY_FILES = {ROOT / name for name in repository_python_files()}


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
    """Every top-level folder holding Python of ours (tests/ aside), each Lambda function's folder, and each top-level
    module is a row: a new room cannot sit outside the guard."""
    assert set(ALLOWED) == set(PACKAGES)
    for package, path in PACKAGES.items():
        assert path.exists(), f"{package}: {path} does not exist"
    on_disk = set()
    for path in REPOSITORY_FILES:
        parts = path.relative_to(ROOT).parts
        if parts[0] == "tests":
            continue
        if len(parts) == 1:
            on_disk.add(path.stem)
        elif parts[0] == "lambda":
            on_disk.add("/".join(parts[:2]))
        else:
            on_disk.add(parts[0])
    assert on_disk <= set(PACKAGES), (
        f"top-level packages missing from the architecture table: {sorted(on_disk - set(PACKAGES))}"
    )


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


# Stacks read the plan, not config modules: an import of endpoint_config from stacks/ left as debt, named here.
# Nothing may be added; the test also fails when an entry is paid off and not removed. (Empty: the last entry,
# stacks/endpoint_alarms.py's endpoint_config.operations, now goes through deployment/config_blocks.py.)
STACKS_CONFIG_IMPORT_DEBT: set[tuple[str, str]] = set()


def config_imports(path: Path) -> set[str]:
    """The endpoint_config modules a file imports, by their dotted name (`import endpoint_config.x`, `from
    endpoint_config.x import y`, `from endpoint_config import x`), at any depth."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "endpoint_config")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] == "endpoint_config":
                found.add(node.module)
    return found


def test_stacks_read_the_plan_not_config_modules():
    """stacks/ and app.py take config blocks and limits from the deployment package (the plan and
    deployment/config_blocks.py), never from an endpoint_config module."""
    found = {
        (path.relative_to(ROOT).as_posix(), module)
        for path in _files("stacks") + _files("app")
        for module in config_imports(path)
    }
    wrong = sorted(found - STACKS_CONFIG_IMPORT_DEBT)
    assert wrong == [], "import these names through deployment (deployment/config_blocks.py):\n" + "\n".join(
        f"  {file}: {module}" for file, module in wrong
    )
    assert STACKS_CONFIG_IMPORT_DEBT <= found, f"debt paid off, remove it: {sorted(STACKS_CONFIG_IMPORT_DEBT - found)}"


def test_the_config_import_finder_sees_every_form(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        "import endpoint_config.schema\nfrom endpoint_config import ConfigError\nfrom endpoint_config.slo import Slo\n"
        "from deployment.config_blocks import Routing\nfrom . import endpoint_config\n"
        "def f():\n    from endpoint_config.chat import OpenAIRouteSpec\n"
    )
    assert config_imports(source) == {
        "endpoint_config.schema",
        "endpoint_config",
        "endpoint_config.slo",
        "endpoint_config.chat",
    }


def test_stacks_take_no_lambda_code():
    """Synth-time code lives outside the Lambda functions' modules: stacks/ imports endpoint_runtime only for its
    shared constants and the body contract (bodies), never a handler module (smoke, invoke, stream, ...)."""
    shared = {"endpoint_runtime", "endpoint_runtime.bodies"}
    wrong = []
    for path in _files("stacks"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = (
                    {node.module}
                    if node.module != "endpoint_runtime"
                    else {f"endpoint_runtime.{a.name}" for a in node.names}
                )
            elif isinstance(node, ast.Import):
                modules = {a.name for a in node.names}
            else:
                continue
            wrong += [
                f"{path.relative_to(ROOT).as_posix()}: {m}"
                for m in sorted(modules)
                if m.split(".")[0] == "endpoint_runtime" and m not in shared
            ]
    assert wrong == [], "stacks import Lambda code:\n" + "\n".join(wrong)


def spec_reads(path: Path) -> list[int]:
    """The lines where a file reads an attribute named `spec` of anything (`plan.spec`, `self.spec`, `x.spec.y`)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return sorted({node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == "spec"})


def test_stacks_read_named_plan_fields_not_the_config_through_the_plan():
    """The plan is the one door: stacks/ and app.py read what they render from EndpointPlan's named, typed fields and
    properties (plan.autoscaling, plan.log_retention_days, plan.capture_destination(...), ...), never the config entry
    behind it (`plan.spec`), nor any other object's `spec`: "spec" names a config-file block (a *Spec type), and a
    construct that takes one names its parameter after what the block is (StreamingFrontDoor(streaming=...))."""
    found = [
        f"  {path.relative_to(ROOT).as_posix()}:{line}"
        for path in _files("stacks") + _files("app")
        for line in spec_reads(path)
    ]
    assert found == [], (
        "read a named EndpointPlan field or property (deployment/plan.py, 'what the stacks render'), not `.spec`:\n"
        + "\n".join(found)
    )


def reads_through_spec(path: Path) -> list[int]:
    """Lines of `path` that reach through an object's config entry into one of its fields (`x.spec.y`)."""
    tree = ast.parse(path.read_text(), str(path))
    return sorted(
        {
            node.lineno
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and node.value.attr == "spec"
        }
    )


def test_no_room_above_the_plan_reaches_through_it_into_the_config():
    """Every room above deployment/ (the CLI, the load test, the workstation, the bench, ...) reads a value of the
    config through the plan's named field (plan.slo, plan.instance_type, adapter.pinned_hash), never as
    `plan.spec.<field>`; a recipe may still be handed the endpoint's whole entry (`plan.spec`), which is what it
    builds from. Inside deployment/ and endpoint_config/, where the plan is made, the config is read directly."""
    found = [
        f"  {path.relative_to(ROOT).as_posix()}:{line}"
        for package in PACKAGES
        if package not in ("deployment", "endpoint_config")
        for path in _files(package)
        for line in reads_through_spec(path)
    ]
    assert found == [], "read the plan's named field (deployment/plan.py), not `.spec.<field>`:\n" + "\n".join(found)


def test_the_spec_read_finder_sees_every_form(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        "spec = 1\ndef f(plan, spec):\n    a = plan.spec\n    b = plan.spec.autoscaling.min_capacity\n"
        "    c = getattr(plan, 'name')\n    return self.spec, spec, plan.spec_name\n"
    )
    assert spec_reads(source) == [3, 4, 6]
    assert reads_through_spec(source) == [4]


# The plans handed between rooms, by parameter name, and the deployment type each must be annotated with.
PLAN_PARAMETER_TYPES = {"plan": "EndpointPlan", "endpoint_plan": "EndpointPlan", "environment_plan": "EnvironmentPlan"}


def untyped_plan_parameters(source: str) -> list[tuple[int, str, str | None]]:
    """(line, parameter, annotation) of each function parameter named in PLAN_PARAMETER_TYPES whose annotation does
    not name its deployment type (missing, `Any`, `object`, another type)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        arguments = node.args
        for argument in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs):
            wanted = PLAN_PARAMETER_TYPES.get(argument.arg)
            if wanted is None:
                continue
            annotation = None if argument.annotation is None else ast.unparse(argument.annotation)
            names = set() if argument.annotation is None else _annotation_names(argument.annotation)
            if wanted not in names:
                found.append((argument.lineno, argument.arg, annotation))
    return found


def _annotation_names(annotation: ast.expr) -> set[str]:
    """The names an annotation uses, a string annotation ("EndpointPlan") parsed as well."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = ast.parse(annotation.value, mode="eval").body
    return {n.id for n in ast.walk(annotation) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(annotation) if isinstance(n, ast.Attribute)
    }


def test_plans_are_typed_at_every_seam():
    """Every function of ours (tests aside) that takes an endpoint's or an environment's plan says so in its
    signature (deployment.EndpointPlan / EnvironmentPlan, a TYPE_CHECKING import where a runtime one would cost
    time), so mypy checks what each room reads of the plan; `Any` or no annotation checks nothing."""
    found = [
        f"  {path.relative_to(ROOT).as_posix()}:{line}: {name}: {annotation}"
        for package in PACKAGES
        for path in _files(package)
        for line, name, annotation in untyped_plan_parameters(path.read_text())
    ]
    assert found == [], "annotate these with deployment's EndpointPlan / EnvironmentPlan:\n" + "\n".join(found)


def test_the_plan_parameter_finder_sees_every_form():
    source = (
        "def a(plan: Any, environment_plan): ...\n"
        "async def b(*, endpoint_plan: object, plan: 'EndpointPlan | None' = None): ...\n"
        "def c(plan: EndpointPlan, environment_plan: deployment.EnvironmentPlan, endpoint_plan: EnvironmentPlan): ...\n"
        "def d(self, plans: Any, spec: Any): ...\n"
    )
    assert untyped_plan_parameters(source) == [
        (1, "plan", "Any"),
        (1, "environment_plan", None),
        (2, "endpoint_plan", "object"),
        (3, "endpoint_plan", "EnvironmentPlan"),
    ]
