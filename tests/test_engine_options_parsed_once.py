"""An endpoint's `engine:` options are parsed once, where the plan is made, and read from there (issue 27).

The plan parses them (deployment/plan.py: ServingSystem.engine -> EndpointPlan.engine, which every pool shares), and
every hook of a serving system that reads them (environment, rules, profile, checkpoint_rules, chat.tool_calls,
adapters.sizing, streamed_weights.enabled, request_timeout.limit_s) and every build recipe is handed that instance,
typed as the system's own options class. The config load checks and parses them while it runs the system's rules
(systems/checks.py), and a build handed an endpoint without its plan does the same (model_build/cli.py); both go
through ServingSystem.checked_engine. Any other parse is a second reading of the raw mapping that can drift from the
first (vllm's LoRA defaults, lmi's shared keys): every module outside tests/ is read with `ast`, and each call that
parses the options is allowed only in the modules named here. Nor does any rule read a key of the raw mapping
(`ep.engine.get(...)`): it reads the parsed options' fields and properties (EngineOptions.context_limit,
.keeps_prefix_cache, vllm's .as_written).
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest
from helpers import ROOT
from hermetic import subprocess_env

# The calls that parse an endpoint's engine options, and the only modules that may make them.
ALLOWED = {
    # <an EngineOptions subclass>.parse / .model_validate, <system>.engine_options.parse, model_validate(<x>.engine):
    # the one implementation, EngineOptions.parse and engine_problems (an override of `parse` itself is allowed).
    "parse": {"systems/base.py"},
    # ServingSystem.engine: the plan's one parse.
    "engine": {"deployment/plan.py", "systems/base.py"},
    # ServingSystem.checked_engine: check, then parse (the config load; a build without its plan).
    "checked_engine": {"systems/checks.py", "model_build/cli.py"},
}


def engine_options_classes() -> set[str]:
    """The names of EngineOptions and of every subclass the registered systems define."""
    from systems import all_systems
    from systems.base import EngineOptions

    all_systems()  # imports every system's package, so its options classes exist
    found, todo = {EngineOptions.__name__}, [EngineOptions]
    while todo:
        for sub in todo.pop().__subclasses__():
            found.add(sub.__name__)
            todo.append(sub)
    return found


def _is_engine_attribute(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "engine"


def engine_parses(source: str, classes: set[str]) -> list[tuple[int, str]]:
    """(line, kind) of each call in `source` that parses engine options, kind a key of ALLOWED."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, function: str | None) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method, receiver = node.func.attr, node.func.value
            on_options = (isinstance(receiver, ast.Name) and receiver.id in classes) or (
                isinstance(receiver, ast.Attribute) and receiver.attr == "engine_options"
            )
            if method in ("parse", "model_validate") and on_options:
                found.append((node.lineno, "parse"))
            elif (
                method == "model_validate" and node.args and _is_engine_attribute(node.args[0]) and function != "parse"
            ):
                found.append((node.lineno, "parse"))  # a raw `engine:` mapping read by some other model
            elif method in ("engine", "checked_engine"):
                found.append((node.lineno, method))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(ast.parse(source), None)
    return found


def repository_modules() -> list[Path]:
    """Every tracked or new .py file outside tests/ (ignored outputs are not ours)."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "*.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env=subprocess_env(),
    ).stdout.split()
    return [ROOT / name for name in listed if not name.startswith("tests/")]


def test_engine_options_are_parsed_only_where_the_plan_and_the_checks_are_made():
    classes = engine_options_classes()
    modules = repository_modules()
    assert ROOT / "deployment" / "plan.py" in modules and ROOT / "systems" / "vllm" / "__init__.py" in modules
    outside = [
        f"{path.relative_to(ROOT).as_posix()}:{line}: {kind}"
        for path in modules
        for line, kind in engine_parses(path.read_text(), classes)
        if path.relative_to(ROOT).as_posix() not in ALLOWED[kind]
    ]
    assert outside == [], (
        "engine options parsed again outside the plan (take plan.engine, or the hook's `engine` argument): "
        + "; ".join(outside)
    )


def test_the_guard_sees_every_way_to_parse_them():
    """Each form the guard looks for, in a module of its own: each is found, and the definition of `parse` is not."""
    source = """
from systems.vllm import VllmEngineOptions

class Mine(VllmEngineOptions):
    @classmethod
    def parse(cls, ep):
        return cls.model_validate(ep.engine)

def hook(ep, system, plan):
    VllmEngineOptions.parse(ep)
    VllmEngineOptions.model_validate(ep.engine)
    system.engine_options.parse(ep)
    SomeModel.model_validate(ep.engine)
    system.engine(ep)
    system.checked_engine(ep)
    return plan.engine, yaml.parse(ep), ast.parse("x")
"""
    kinds = [kind for _, kind in engine_parses(source, engine_options_classes())]
    assert kinds == ["parse", "parse", "parse", "parse", "engine", "checked_engine"]


def test_every_plan_holds_its_systems_own_options(tmp_path):
    """The plan's parse is an instance of the system's options class, shared by every pool (what the hooks are typed
    for), in every environment of every example config."""
    from deployment import load_all_environments

    systems = set()
    for path in sorted((ROOT / "config" / "examples").glob("*.yaml")):
        for environment_plan in load_all_environments(path, build_root=tmp_path).values():
            for plan in environment_plan.plans:
                assert type(plan.engine) is plan.system.engine_options, (path.name, plan.name)
                assert all(pool.engine is plan.engine for pool in plan.pools), (path.name, plan.name)
                systems.add(plan.system.name)
    assert len(systems) >= 10  # every registered system has an example


def test_lmi_vllm_chat_with_a_lora_rank_loads(tmp_path):
    """What a second reading with another model did: lmi-vllm's tool-call check read `engine:` with its chat options
    class, which has no max_lora_rank, so an endpoint with chat, adapters and a rank failed to load with pydantic's
    traceback. Read from the plan's parse, it loads, and its replies carry parsed tool calls."""
    import yaml

    from deployment import load_config

    config = yaml.safe_load((ROOT / "config" / "examples" / "lmi-vllm-lora.yaml").read_text())
    endpoint = config["endpoints"][0]
    endpoint["chat"] = {}
    endpoint["engine"] = {**endpoint["engine"], "max_lora_rank": 16, "tool_call_parser": "hermes"}
    endpoint["adapters"] = [{"name": "sql", "model": "example-org/llama-3.1-8b-sql-lora"}]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    plan = load_config(path, "dev", build_root=tmp_path).plan(endpoint["name"])
    assert plan.engine.max_lora_rank == 16 and plan.chat_features.tool_calls


def raw_engine_reads(source: str) -> list[int]:
    """Lines of `source` that read a key of a raw `engine:` mapping (EndpointSpec.engine, a dict; the plan's and the
    hooks' `engine` is the parsed options, which none of these forms fits): `x.engine[key]`, `x.engine.get(key)`,
    `x.engine.items()` / `.keys()` / `.values()`, `key in x.engine`, `for key in x.engine`."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and _is_engine_attribute(node.value):
            found.add(node.lineno)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "items", "keys", "values")
            and _is_engine_attribute(node.func.value)
        ):
            found.add(node.lineno)
        elif isinstance(node, ast.Compare) and any(
            isinstance(op, ast.In | ast.NotIn) and _is_engine_attribute(right)
            for op, right in zip(node.ops, node.comparators, strict=True)
        ):
            found.add(node.lineno)
        elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension) and _is_engine_attribute(node.iter):
            found.add(getattr(node, "lineno", None) or node.iter.lineno)
    return sorted(found)


def test_no_rule_reads_the_raw_engine_mapping():
    """A rule reads the parsed options (the hook's `engine` argument, plan.engine), never a key of the raw `engine:`
    mapping: a raw read sees neither the defaults nor what the system's parse fills in (vllm's LoRA keys with
    adapters), and reads a key by a name no type checks. The one parse hands the mapping whole to the options model
    (ServingSystem.engine, EngineOptions.parse), which is not a read of a key."""
    found = [
        f"{path.relative_to(ROOT).as_posix()}:{line}"
        for path in repository_modules()
        for line in raw_engine_reads(path.read_text())
    ]
    assert found == [], "read the parsed options (the hook's `engine`, plan.engine), not `engine:`'s keys: " + (
        "; ".join(found)
    )


def test_the_raw_read_finder_sees_every_form():
    source = """
def rule(ep, engine, plan):
    a = ep.engine["max_model_len"]
    b = ep.engine.get("enable_prefix_caching")
    c = [k for k in ep.engine]
    if "max_lora_rank" in ep.engine:
        pass
    for key, value in ep.engine.items():
        pass
    for key in spec.engine:
        pass
    options = VllmOptions.model_validate(ep.engine)
    return engine.max_model_len, plan.engine.enable_lora, data["engine"], args.engine
"""
    assert raw_engine_reads(source) == [3, 4, 5, 6, 8, 10]


@pytest.mark.parametrize(
    ("engine", "source"),
    [({"max_lora_rank": 16}, "engine.max_lora_rank"), ({}, "vLLM's default max_lora_rank 16")],
    ids=["written", "default"],
)
def test_vllm_parse_fills_lora_in_and_the_rules_still_see_what_was_written(tmp_path, engine, source):
    """vllm's parse turns LoRA on for an endpoint's adapters (writing out the rank), and its rules read the parsed
    options, not the raw mapping: what the endpoint wrote stays readable (the rank's source in a refusal)."""
    import yaml

    from deployment import load_config

    config = yaml.safe_load((ROOT / "config" / "examples" / "engine-components.yaml").read_text())
    [endpoint] = [e for e in config["endpoints"] if e["name"] == "vllm-lora"]
    endpoint["engine"] = engine
    endpoint["adapters"] = [{"name": "sql", "model": "example-org/llama-3.1-8b-sql-lora"}]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    plan = load_config(path, "dev", build_root=tmp_path).plan("vllm-lora")
    assert (plan.engine.enable_lora, plan.engine.allow_runtime_lora_updating, plan.engine.max_lora_rank) == (
        True,
        True,
        16,
    )
    sizing = plan.system.lora_sizing(plan.spec, plan.engine)
    assert sizing is not None and sizing.rank_source == source
