"""Adding a serving system is its package plus one registry line: a throwaway system in a temporary package, registered
with one entry, is validated, planned and synthesized from a config, with no other file changed. And the facts about
systems have one home: endpoint_config names no system, and the instance type's name is parsed in one place."""

from __future__ import annotations

import ast
import re
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import ROOT, cdk_context

THROWAWAY = """
from systems.base import Capability, ChatCapability, EngineOptions, LocalRun, ServingSystem
from systems.images import HF_PYTORCH_INFERENCE


class Options(EngineOptions):
    greeting: str = "hello"


def environment(endpoint, engine):
    return {"GREETING": engine.greeting}


SYSTEM = ServingSystem(
    name="throwaway",
    summary="a system that exists only in this test",
    environment=environment,
    engine_options=Options,
    image=HF_PYTORCH_INFERENCE,
    streaming=Capability.yes("its container streams, by its own word"),
    inference_components=Capability.no("never tried"),
    tensor_parallel=Capability.no("one GPU in this test"),
    chat=ChatCapability.no("no chat template handling in this test"),
    local=LocalRun.stand_in("djl", "it exists only in this test"),
)
"""

CONFIG = """\
endpoints:
  - name: thrown
    system: throwaway
    model: gpt2
    instance_type: ml.g5.xlarge
    engine: {greeting: hi}
    streaming: {enabled: true}
"""


@pytest.fixture
def throwaway(tmp_path, monkeypatch):
    package = tmp_path / "pkgs" / "throwaway_system"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(THROWAWAY))
    monkeypatch.syspath_prepend(str(tmp_path / "pkgs"))
    import systems

    monkeypatch.setitem(systems.REGISTRY, "throwaway", "throwaway_system")  # the one registry line
    yield
    sys.modules.pop("throwaway_system", None)


def test_a_new_system_is_its_package_plus_one_registry_line(throwaway, tmp_path):
    import aws_cdk as cdk

    from deployment import load_config
    from endpoint_config import ConfigError
    from stacks import add_stacks

    config = tmp_path / "endpoints.yaml"
    config.write_text(CONFIG)
    environment_plan = load_config(config, build_root=tmp_path / "no-build")
    plan = environment_plan.plan("thrown")
    assert plan.system.name == "throwaway" and plan.engine.greeting == "hi"
    app = cdk.App(context=cdk_context(), outdir=str(tmp_path / "cdk.out"))
    stacks = add_stacks(app, environment_plan, allow_unbuilt=True)
    app.synth()
    template = stacks["llm-endpoints-default-thrown"]
    model = [
        r
        for r in app.synth().get_stack_by_name(template.stack_name).template["Resources"].values()
        if r["Type"] == "AWS::SageMaker::Model"
    ][0]
    assert model["Properties"]["PrimaryContainer"]["Environment"] == {"GREETING": "hi"}
    functions = [
        r
        for r in app.synth().get_stack_by_name(template.stack_name).template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
    ]
    assert any(f["Properties"]["Handler"] == "stream/run.sh" for f in functions)  # it streams, by its capability
    # Its own rules and options, and its refusals, come from its ServingSystem alone.
    config.write_text(CONFIG.replace("greeting: hi", "farewell: bye") + "    hosting: {mode: inference-components}\n")
    with pytest.raises(ConfigError) as err:
        load_config(config)
    assert "engine.farewell: value 'bye' is not supported by system 'throwaway'; remove the key" in str(err.value)
    assert "hosting.mode: value 'inference-components' is not supported by system 'throwaway': never tried" in str(
        err.value
    )


def test_an_unregistered_system_is_refused_with_the_registered_ones(tmp_path):
    from deployment import load_config
    from endpoint_config import ConfigError
    from systems import REGISTRY

    config = tmp_path / "endpoints.yaml"
    config.write_text(CONFIG.replace("throwaway", "nonesuch"))
    with pytest.raises(ConfigError) as err:
        load_config(config)
    assert f"system: value 'nonesuch' is not a serving system; allowed: {', '.join(REGISTRY)}" in str(err.value)


def _python_files(*folders: str) -> list[Path]:
    return [p for folder in folders for p in sorted((ROOT / folder).rglob("*.py"))]


def test_endpoint_config_names_no_serving_system():
    from systems import REGISTRY

    for path in _python_files("endpoint_config"):
        strings = {
            n.value
            for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
        }
        # As a word: not inside a URL or a longer name (docs.vllm.ai names a website, lmi-vllm another system).
        named = {
            name for name in REGISTRY for s in strings if re.search(rf"(?<![\w/.-]){re.escape(name)}(?![\w/-]|\.\w)", s)
        }
        assert not named, (
            f"{path.relative_to(ROOT)} names serving systems {sorted(named)}: their facts belong on their ServingSystem"
        )


def test_the_instance_types_name_is_parsed_in_the_schema_only():
    """parse_instance_type is called by EndpointSpec.instance only, and the one hand split is the schema's hint for a
    name that is no hosting type; everything else reads the parsed InstanceType (EndpointSpec.instance,
    EndpointPlan.instance)."""
    calls, splits = [], []
    for path in _python_files(
        "endpoint_config",
        "deployment",
        "systems",
        "stacks",
        "model_build",
        "load_testing",
        "local_runtime",
        "workstation",
        "bench",
    ):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", None)) == "parse_instance_type"
            ):
                calls.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", None) == "split"
                and "instance_type" in ast.unparse(node.func.value)
            ):
                splits.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert len(calls) == 1 and calls[0].startswith("endpoint_config/schema.py:"), calls
    assert len(splits) <= 1 and all(s.startswith("endpoint_config/schema.py:") for s in splits), splits
