"""The `hosting:` block (endpoint_config/hosting.py): defaults, and every mistake with a message naming the endpoint,
the key, the value and what is allowed. Checked at the model level (EndpointSpec + endpoint_problems), a few through
load_config for the file-level message."""

from __future__ import annotations

import textwrap

import pytest
from helpers import ROOT

from deployment import load_config
from endpoint_config import ConfigError, EndpointSpec
from endpoint_config.hosting import Hosting, component_name
from endpoint_config.schema import endpoint_problems

SCALE_TO_ZERO = {
    "mode": "inference-components",
    "instance_scaling": {"min_instances": 0, "max_instances": 2},
    "compute": {"accelerators": 1, "cpu_cores": 4, "min_memory_mb": 32768},
    "copy_scaling": {"min_copies": 0, "max_copies": 4, "target_concurrency": 4},
}


def endpoint(hosting=None, **changes) -> EndpointSpec:
    """An lmi-vllm endpoint on ml.g5.12xlarge (4 GPUs), as production.yaml's assist-ic."""
    fields = dict(
        name="assist",
        system="lmi-vllm",
        model="EleutherAI/gpt-j-6B",
        instance_type="ml.g5.12xlarge",
        routing="least-outstanding-requests",
        hosting=SCALE_TO_ZERO if hosting is None else hosting,
    )
    return EndpointSpec.model_validate({**fields, **changes})


def with_hosting(**changes) -> dict:
    return {**SCALE_TO_ZERO, **changes}


def test_default_is_the_model_on_the_variant():
    ep = EndpointSpec.model_validate(dict(name="x", system="lmi-vllm", model="m", instance_type="ml.g5.2xlarge"))
    assert ep.hosting == Hosting() and ep.hosting.mode == "endpoint" and not ep.hosting.uses_components
    assert endpoint_problems(ep) == []


def test_the_example_scales_to_zero_and_its_rules_pass():
    ep = load_config(ROOT / "config/examples/production.yaml", "prod").endpoint("assist-ic")
    assert ep.hosting.uses_components and ep.hosting.scales_to_zero
    assert ep.hosting.copies == 1 and ep.hosting.instance_scaling.min_instances == 0
    assert component_name("prod-assist-ic") == "prod-assist-ic-ic"
    assert endpoint_problems(endpoint()) == []


# (system, the one expected message): each system says whether it runs as an inference component, and why not.
REFUSED_BY_SYSTEM = [
    (
        "hf-fastload",
        "endpoint 'assist': hosting.mode: value 'inference-components' is not supported by system 'hf-fastload': its "
        "Hugging Face PyTorch inference image is not documented for inference components (no AWS or Hugging Face "
        "source found); systems that run as inference components: {components}",
    ),
    (
        "tensorrt-byoc",
        "endpoint 'assist': hosting.mode: value 'inference-components' is not supported by system 'tensorrt-byoc': our "
        "own container has never run as an inference component (only a GPU account can show that it keeps to the GPUs "
        "and memory SageMaker gives it); systems that run as inference components: {components}",
    ),
]


@pytest.mark.parametrize(("system", "expected"), REFUSED_BY_SYSTEM, ids=[c[0] for c in REFUSED_BY_SYSTEM])
def test_a_system_that_does_not_run_as_a_component_is_refused(system, expected):
    from systems import all_systems, get_system
    from systems.checks import system_problems

    ep = endpoint(system=system)
    assert endpoint_problems(ep) == []  # the schema's rules pass: the refusal is the system's
    systems = all_systems()
    components = ", ".join(name for name, each in systems.items() if each.inference_components.supported)
    assert components  # the list the refusal names: every registered system that states it runs as a component
    assert expected.format(components=components) in system_problems(ep, get_system(system), systems)


# (description, endpoint changes, the one expected message)
BAD = [
    (
        "variant autoscaling beside copy scaling",
        dict(autoscaling={"min_capacity": 1, "max_capacity": 2, "target_value": 4}),
        "endpoint 'assist': autoscaling: is not used with hosting.mode: inference-components (SageMaker scales the "
        "instances itself, hosting.instance_scaling, and copies scale by hosting.copy_scaling); remove autoscaling",
    ),
    (
        "instance scaling upside down",
        dict(
            hosting=with_hosting(
                instance_scaling={"min_instances": 3, "max_instances": 2},
                copy_scaling={"min_copies": 1, "max_copies": 4, "target_concurrency": 4},
            )
        ),
        "endpoint 'assist': hosting.instance_scaling: min_instances 3 is above max_instances 2",
    ),
    (
        "initial instances beyond managed scaling",
        dict(instance_count=3),
        "endpoint 'assist': instance_count: value 3 is outside hosting.instance_scaling's range 1-2; the initial count "
        "must lie within it",
    ),
    (
        "deploy-time copies beyond copy scaling",
        dict(hosting=with_hosting(copies=5)),
        "endpoint 'assist': hosting.copies: value 5 is outside hosting.copy_scaling's range 1-4; the deploy-time count "
        "must lie within it",
    ),
    (
        "copies to zero on instances kept running",
        dict(hosting=with_hosting(instance_scaling={"min_instances": 1, "max_instances": 2})),
        "endpoint 'assist': hosting.copy_scaling.min_copies: value 0 needs hosting.instance_scaling.min_instances: 0 "
        "(got 1): with no copy the endpoint serves nothing, yet its instances keep running; set min_instances: 0, or "
        "min_copies: 1 or more",
    ),
    (
        "instances to zero while copies never go",
        dict(hosting=with_hosting(copy_scaling=None)),
        "endpoint 'assist': hosting.instance_scaling.min_instances: value 0 needs hosting.copy_scaling with "
        "min_copies: 0: instances only reach zero when the component's copies do; add copy_scaling with min_copies: 0, "
        "or set min_instances: 1 or more",
    ),
    (
        "more GPUs per copy than the instance has",
        dict(tensor_parallel_degree=4, hosting=with_hosting(compute={"accelerators": 8})),
        "endpoint 'assist': hosting.compute.accelerators: value 8 is more than the 4 GPUs of ml.g5.12xlarge; allowed: "
        "1-4",
    ),
    (
        "GPUs per copy unlike the engine's tensor parallel degree",
        dict(tensor_parallel_degree=2, hosting=with_hosting(compute={"accelerators": 1})),
        "endpoint 'assist': hosting.compute.accelerators: value 1 differs from tensor_parallel_degree 2, the GPUs one "
        "copy's engine shards over; allowed: 2 (or leave it out)",
    ),
    (
        "more copies than the fleet holds",
        dict(
            tensor_parallel_degree=2,
            hosting=with_hosting(
                compute=None, copy_scaling={"min_copies": 0, "max_copies": 5, "target_concurrency": 4}
            ),
        ),
        "endpoint 'assist': hosting.copy_scaling.max_copies: value 5 cannot be placed: 2 instance(s) of ml.g5.12xlarge "
        "hold 2 copies of 2 GPU(s) each (4 in all); allowed: 1-4, or raise hosting.instance_scaling.max_instances",
    ),
    (
        "components' keys without the mode",
        dict(hosting={"copy_scaling": {"max_copies": 2, "target_concurrency": 4}}),
        "endpoint 'assist': hosting.copy_scaling: is only used with hosting.mode: inference-components; set that mode "
        "or remove the key",
    ),
]


@pytest.mark.parametrize(("description", "changes", "expected"), BAD, ids=[c[0] for c in BAD])
def test_bad_hosting_is_refused_with_one_message(description, changes, expected):
    assert endpoint_problems(endpoint(**changes)) == [expected]


def test_bounds_and_unknown_keys_are_file_errors(tmp_path):
    """pydantic's bounds (CopyCount >= 1 at create, MinInstanceCount >= 0) and strict keys, through load_config."""
    path = tmp_path / "endpoints.yaml"
    path.write_text(
        textwrap.dedent("""\
        endpoints:
          - name: assist
            system: lmi-vllm
            model: EleutherAI/gpt-j-6B
            instance_type: ml.g5.12xlarge
            hosting:
              mode: inference-components
              copies: 0
              instance_scaling: {min_instances: -1, max_instances: 2}
              compute: {gpus: 1}
        """)
    )
    with pytest.raises(ConfigError) as err:
        load_config(path)
    text = str(err.value)
    assert "endpoint 'assist'" in text and "hosting.copies" in text and "hosting.instance_scaling.min_instances" in text
    assert "greater than or equal to 1" in text and "greater than or equal to 0" in text
    assert "hosting.compute.gpus" in text


def test_a_mode_that_does_not_exist(tmp_path):
    with pytest.raises(Exception, match="serverless"):
        endpoint(hosting={"mode": "serverless"})
