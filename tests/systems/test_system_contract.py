"""The contract every registered system keeps, in one place: a new system (its package plus one line in
systems/__init__.py REGISTRY) passes or fails here, each test parametrized over the registry, never over a list
written down in a test.

For each system: its example config loads and plans; its image (a pinned AWS image the SDK tables resolve, or its own
Dockerfile); its container environment (rendered, within CreateModel's limits, the served names in it where it checks
them); its bodies and chat; its request timeout against the invocation's; network isolation against where it reads
its weights; its weight formats and options model; its build recipe; how it runs locally (the container kind made
from its plan); its metric series; and its endpoint stack, synthesized once per system (the endpoint stack alone, no
artifact stack or cdk-nag: about 2 s; the whole examples are synthesized with cdk-nag in tests/config/test_examples.py).
Run it alone with `pytest tests/systems/test_system_contract.py`.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml
from helpers import ROOT, synthesize_endpoint_stack

from endpoint_config import EndpointSpec
from systems import REGISTRY, get_system
from systems.base import BODY_KINDS, EngineOptions, ServingSystem

SYSTEMS = list(REGISTRY)


def system_of(name: str) -> ServingSystem:
    return get_system(name)


def example_environment(system: ServingSystem) -> tuple[Path, str | None]:
    """The system's example config and the first environment it defines (None: a file without environments)."""
    path = system.example_config
    raw = yaml.safe_load(path.read_text())
    return path, next(iter(raw.get("environments") or {}), None)


@functools.cache
def example_plan(name: str) -> Any:
    """The first endpoint of system `name` in its example config, planned (once per system and session)."""
    from deployment import load_config

    path, env = example_environment(system_of(name))
    environment_plan = load_config(path, env, build_root=Path("/nonexistent/no-build"))
    plans = [plan for plan in environment_plan.plans if plan.system.name == name]
    assert plans, f"{path.relative_to(ROOT)} has no endpoint of system {name!r}"
    return plans[0]


@functools.cache
def endpoint_template(name: str) -> dict[str, Any]:
    """The system's example endpoint stack, synthesized once per system."""
    plan = example_plan(name)
    path, env = example_environment(system_of(name))
    return synthesize_endpoint_stack(path, env, plan.name)


@pytest.mark.parametrize("name", SYSTEMS)
def test_it_has_an_example_config_that_plans(name):
    system = system_of(name)
    assert system.name == name, f"REGISTRY key {name!r} and its ServingSystem.name {system.name!r} differ"
    assert system.example_config.is_file(), f"system {name!r}: no example config {system.example_config}"
    plan = example_plan(name)
    assert plan.system is system and plan.engine is not None


@pytest.mark.parametrize("name", SYSTEMS)
def test_its_container_image_is_pinned_or_built_here(name):
    system = system_of(name)
    if system.image is not None:
        from systems.images_current import facts_of

        assert system.image.gpu_tag and system.image.repository
        try:
            facts_of(system.image)  # the pin's recorded facts (engine, CUDA), where recorded
        except KeyError:
            pass
        assert example_plan(name).image_tag == system.image.gpu_tag
        # what the sagemaker SDK's image tables name, in every region the pin claims
        from sagemaker.core import image_uris

        extra = {"base_framework_version": b} if (b := system.image.sdk_base_framework_version) else {}
        for region in system.image.available_regions:
            expected = image_uris.retrieve(
                system.image.sdk_framework,
                region,
                version=system.image.table_version,  # a pin ahead of the SDK's table takes its newest's registries
                instance_type="ml.g5.xlarge",
                image_scope="inference",
                **extra,
            )
            assert system.image.uri(region, gpu=True) == system.image.from_table(expected), (name, region)
    else:
        assert system.own_container is not None
        assert (ROOT / system.own_container.dockerfile).is_file(), system.own_container.dockerfile


@pytest.mark.parametrize("name", SYSTEMS)
def test_its_environment_renders_within_createmodels_limits(name):
    from deployment.plan import container_environment_problems

    plan = example_plan(name)
    environment = plan.container_environment("bucket")
    assert environment and all(isinstance(k, str) and isinstance(v, str) for k, v in environment.items()), name
    assert container_environment_problems(plan) == []
    if plan.system.served_names_environment is not None:  # it checks the `model` field: each served name is set
        rendered = " ".join(environment.values())
        assert all(served in rendered for served in plan.served_model_names), (name, plan.served_model_names)


@pytest.mark.parametrize("name", SYSTEMS)
def test_its_bodies_and_chat_agree(name):
    system = system_of(name)
    assert system.bodies.accepts <= set(BODY_KINDS) and system.bodies.prompt_kind in system.bodies.accepts
    assert system.bodies.chat == system.chat.supported and system.chat.note
    assert system.streaming.note and system.inference_components.note and system.tensor_parallel.note


@pytest.mark.parametrize("name", SYSTEMS)
def test_its_container_lets_a_request_run_as_long_as_sagemaker_does(name):
    plan = example_plan(name)
    timeout = plan.system.request_timeout
    assert timeout is not None, f"system {name!r} states no request_timeout (systems/base.py RequestTimeout)"
    limit = timeout.limit_s(plan.spec, plan.engine, plan.container_environment("bucket"))
    assert limit >= plan.invocation_timeout_s
    assert 60 <= plan.system.default_download_timeout_s <= 3600 and 60 <= plan.system.default_startup_timeout_s <= 3600


@pytest.mark.parametrize("name", SYSTEMS)
def test_its_isolation_follows_where_it_reads_its_weights(name):
    plan = example_plan(name)
    system = plan.system
    assert system.network_isolation_default(plan.engine) == (
        system.network_isolation and not system.reads_weights_from_s3(plan.engine)
    )
    offered = get_args(EndpointSpec.model_fields["weights_format"].annotation)  # what a config can ask for
    assert system.weights_formats and set(system.weights_formats) <= set(offered), system.weights_formats


@pytest.mark.parametrize("name", SYSTEMS)
def test_its_options_model_parses_its_example_and_refuses_an_unknown_key(name):
    plan = example_plan(name)
    system = plan.system
    assert issubclass(system.engine_options, EngineOptions)
    assert isinstance(plan.engine, system.engine_options)
    assert system.engine_problems(plan.spec) == []
    wrong = plan.spec.model_copy(update={"engine": {**plan.spec.engine, "no_such_option": 1}})
    problems = system.engine_problems(wrong)
    assert problems and "no_such_option" in problems[0], problems


@pytest.mark.parametrize("name", SYSTEMS)
def test_its_build_recipe_is_a_module_with_build(name):
    """Found and read without importing it (recipes import torch)."""
    system = system_of(name)
    assert system.recipe is not None, f"system {name!r} has no build recipe"
    spec = importlib.util.find_spec(system.recipe)
    assert spec is not None and spec.origin is not None, system.recipe
    tree = ast.parse(Path(spec.origin).read_text())
    defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    imported = {
        alias.asname or alias.name for node in tree.body if isinstance(node, ast.ImportFrom) for alias in node.names
    }
    assert "build" in defined | imported, f"{system.recipe}: no build()"


@pytest.mark.parametrize("name", SYSTEMS)
def test_a_transformers_4_image_serving_the_checkpoints_own_files_gets_them_rewritten(name):
    """A container that serves the checkpoint's own files (plain_checkpoint) and reads them with a transformers 4.x
    (ImagePin.python_stack) cannot read what transformers 5 saves (tokenizer class TokenizersBackend, config.json's
    rope_parameters): its system opts in to the build's rewrite (rewrite_metadata_for_image). The slow
    tests/systems/test_container_tokenizers.py loads the result under the image's versions; this says it at once."""
    system = system_of(name)
    stack = system.image.python_stack if system.image is not None else None
    floor = stack.transformers_floor if stack is not None else None
    if system.plain_checkpoint.supported and floor is not None and floor[0] < 5:
        assert system.rewrite_metadata_for_image, (
            f"system {name!r}: its image reads the checkpoint with transformers {stack.transformers}; set "
            "rewrite_metadata_for_image=True"
        )


@pytest.mark.parametrize("name", SYSTEMS)
def test_it_runs_locally_as_its_local_run_says(name, tmp_path):
    from local_runtime import has_container_process, local_container
    from local_runtime.stand_in import DIALECTS

    plan = example_plan(name)
    local = plan.system.local
    assert local.kind in ("engine", "own-server", "stand-in", "handler")
    assert has_container_process(name) == (local.kind != "handler")
    if local.kind == "stand-in":
        assert local.dialect in DIALECTS and local.note, local
    if local.kind == "handler":
        assert local_container(plan, tmp_path, tmp_path / "work") is None
        return
    if plan.system.streams_weights(plan.engine):
        return  # refused locally (local_runtime.LocalContainerError), said so by its own test
    container = local_container(plan, tmp_path, tmp_path / "work")
    assert container is not None and getattr(container, "system", name) == name
    if local.kind == "stand-in":
        assert "stand-in" in container.answered_by() and local.note in container.answered_by()


@pytest.mark.parametrize("name", SYSTEMS)
def test_the_clients_users_already_use_are_driven_against_it_or_it_says_why(name):
    """docs/clients.md has its cells, stored by the client suite that drove its local container (tests/real_clients.py:
    tests/clients/ or, for the real engine, its scenario), or the reason none drives it."""
    import real_clients

    why = real_clients.not_driven(get_system(name))
    assert why is not None or name in real_clients.stored(), (
        f"{name}: the client suite drives its container but tests/clients/found/{name}.json is missing: "
        "run make clients-table"
    )
    block = real_clients.generated_block(real_clients.DOC.read_text())
    assert f"### `{name}`" in block


@pytest.mark.parametrize("name", SYSTEMS)
def test_an_engines_own_openai_server_streams_chat_as_server_sent_events(name):
    """ContainerBodies.chat_streams_sse holds for every system whose chat is an engine's own OpenAI server (the demo
    and docs read that one facet)."""
    system = system_of(name)
    if system.chat.engine_server:
        assert system.bodies.chat_streams_sse, name


@pytest.mark.parametrize("name", SYSTEMS)
def test_its_scenario_config_runs_end_to_end(name):
    """A system with a tiny scenario config (config/scenarios/<name>.yaml: `make demo CONFIG=...`) has that whole
    chain run by make test: tests/local/test_scenario_<name>.py through system_scenario.run_scenario, or, for the
    real vLLM engine, tests/local/test_vllm_scenario.py. (One file each: --dist loadfile spreads them over workers.)"""
    root = Path(__file__).resolve().parents[2]
    if not (root / "config" / "scenarios" / f"{name}.yaml").is_file():
        return
    runner = root / "tests" / "local" / f"test_scenario_{name.replace('-', '_')}.py"
    if runner.is_file():
        assert f'run_scenario("{name}"' in runner.read_text(), runner
    else:
        own = root / "tests" / "local" / f"test_{name.replace('-', '_')}_scenario.py"
        assert own.is_file(), f"config/scenarios/{name}.yaml has no end-to-end test: add {runner.relative_to(root)}"


@pytest.mark.parametrize("name", SYSTEMS)
def test_its_metric_series_make_queries_or_it_states_none(name):
    from stacks.engine_metrics import engine_queries

    series = system_of(name).metrics
    if series is None:
        with pytest.raises(ValueError, match=f"system {name!r} has no engine metrics here"):
            engine_queries(name, "e", None)
        return
    assert series.source and all(vars(series).values())
    queries = engine_queries(name, "e", None)
    assert series.queue in queries.queue_depth and series.kv_cache in queries.kv_cache_percent


@pytest.mark.parametrize("name", SYSTEMS)
def test_its_endpoint_stack_synthesizes_with_its_image_and_environment(name):
    plan = example_plan(name)
    resources = endpoint_template(name)["Resources"].values()
    models = [r["Properties"] for r in resources if r["Type"] == "AWS::SageMaker::Model"]
    assert models, f"system {name!r}: no AWS::SageMaker::Model in its endpoint stack"
    container = models[0].get("PrimaryContainer") or models[0]["Containers"][0]
    environment = container.get("Environment") or {}
    for key, value in plan.container_environment("bucket").items():
        if "bucket" not in value:  # values naming the bucket are a CloudFormation reference in the template
            assert environment.get(key) == value, (name, key)
    assert bool(models[0].get("EnableNetworkIsolation", False)) == plan.network_isolation


@pytest.mark.parametrize("name", SYSTEMS)
def test_the_keys_its_options_name_for_the_demo_are_its_own_options(name):
    """GPU_KEYS, LORA_KEYS and PROMPT_KEY (systems/base.py EngineOptions: what `make demo` drops or fits for its tiny
    model) name fields of the system's options: a renamed or misspelt key would be kept silently."""
    options = get_system(name).engine_options
    named = [*options.GPU_KEYS, *options.LORA_KEYS, *([options.PROMPT_KEY] if options.PROMPT_KEY else [])]
    assert [key for key in named if key not in options.model_fields] == []
