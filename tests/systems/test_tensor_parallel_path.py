"""`tensor_parallel_degree` from the config to the container, for every registered system: a system that splits one
model copy over several GPUs hands the degree to its container (its environment, or the serving.properties its
build writes); one that cannot refuses a degree above 1 at config load, naming the systems that can. Without this,
a degree the container never reads passes the fit check (which divides the weights by it) and the model meets one
GPU on the real instance."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest
from helpers import ROOT
from hermetic import python_path_env

from endpoint_config import EndpointSpec
from systems import REGISTRY, all_systems, get_system
from systems.checks import system_problems

# ml.g5.12xlarge: 4 A10G GPUs (facts/instances.py), so degrees 1, 2 and 4 divide its GPUs.
INSTANCE = "ml.g5.12xlarge"
# Systems whose container spreads a copy over its GPUs without being told the degree: the reason is their
# capability's own note, checked below.
NO_VARIABLE = {"hf-fastload": "only sizes the fit check"}


def endpoint(system: str, degree: int) -> EndpointSpec:
    return EndpointSpec.model_validate(
        {
            "name": "tp",
            "system": system,
            "model": "openai-community/gpt2",
            "instance_type": INSTANCE,
            "tensor_parallel_degree": degree,
        }
    )


def what_the_container_reads(system_name: str, degree: int) -> dict[str, str]:
    """The system's container environment and, for a system whose build writes serving.properties, those."""
    system = get_system(system_name)
    ep = endpoint(system_name, degree)
    engine = system.engine(ep)
    read = dict(system.environment(ep, engine))
    serving_properties = getattr(importlib.import_module(REGISTRY[system_name]), "serving_properties", None)
    if serving_properties is not None:
        read.update({f"serving.properties {k}": v for k, v in serving_properties(ep, engine).items()})
    return read


@pytest.mark.parametrize("name", list(REGISTRY))
def test_a_system_that_splits_a_copy_hands_the_degree_to_its_container(name):
    system = get_system(name)
    if not system.tensor_parallel.supported:
        pytest.skip(f"{name} refuses a degree above 1 (the next test)")
    if name in NO_VARIABLE:
        assert NO_VARIABLE[name] in system.tensor_parallel.note
        assert what_the_container_reads(name, 1) == what_the_container_reads(name, 2)
        return
    at_1, at_2 = what_the_container_reads(name, 1), what_the_container_reads(name, 2)
    changed = {k: (at_1.get(k), at_2.get(k)) for k in at_1.keys() | at_2.keys() if at_1.get(k) != at_2.get(k)}
    assert changed, f"{name}: tensor_parallel_degree 2 reaches nothing its container reads ({system.tensor_parallel})"
    assert all(v == ("1", "2") for v in changed.values()), changed


@pytest.mark.parametrize("name", list(REGISTRY))
def test_a_system_that_cannot_refuses_a_degree_above_one(name):
    system = get_system(name)
    problems = system_problems(endpoint(name, 2), system, all_systems())
    refusal = [p for p in problems if p.startswith("endpoint 'tp': tensor_parallel_degree: value 2 (allowed: 1)")]
    if system.tensor_parallel.supported:
        assert refusal == [], refusal
    else:
        [message] = refusal
        assert f"is not supported by system {name!r}: {system.tensor_parallel.note}" in message
        assert "systems that split one model copy over several GPUs: " in message and "vllm" in message
        assert not [p for p in system_problems(endpoint(name, 1), system, all_systems()) if "tensor_parallel" in p]


def test_the_config_load_refuses_it_with_one_clear_error(tmp_path):
    """The user's path: `model_build build` on a config asking tensorrt-byoc for degree 2 exits non-zero, without a
    traceback, naming the key, the value and what is allowed; nothing is built."""
    config = tmp_path / "tp.yaml"
    config.write_text(
        "project: tpcheck\nendpoints:\n  - name: gpt2\n    system: tensorrt-byoc\n    model: openai-community/gpt2\n"
        f"    instance_type: {INSTANCE}\n    tensor_parallel_degree: 2\n"
    )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "model_build",
            "build",
            "--config",
            str(config),
            "--endpoint",
            "gpt2",
            "--build-root",
            str(tmp_path / "build"),
        ],
        cwd=ROOT,
        env=python_path_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode != 0
    assert "Traceback" not in run.stderr
    assert (
        "endpoint 'gpt2': tensor_parallel_degree: value 2 (allowed: 1) is not supported by system 'tensorrt-byoc'"
        in (run.stderr + run.stdout)
    )
    assert not (tmp_path / "build").exists()
