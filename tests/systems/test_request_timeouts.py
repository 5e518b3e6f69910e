"""Every serving system's container lets a request run as long as SageMaker does.

For each registered system, in each invocation mode its example endpoint can take (real-time; streamed at the front
door's longest stream where the system streams; asynchronous at SageMaker's default and at the longest
invocation_timeout_s), the limit the container applies with the environment the plan gives it (the system's
RequestTimeout, read as the container's code reads it) is at least the invocation timeout the endpoint allows
(EndpointPlan.invocation_timeout_s). The review's case: hf-fastload's fixed SAGEMAKER_MODEL_SERVER_TIMEOUT beside
an invocation_timeout_s of 1800 s.
"""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess

import pytest
from helpers import EXAMPLES, ROOT

from deployment import load_config
from deployment.plan import ASYNC_DEFAULT_INVOCATION_TIMEOUT_S, REAL_TIME_INVOCATION_TIMEOUT_S, EndpointPlan
from endpoint_config.invocation import INVOCATION_TIMEOUT_BOUNDS, Invocation
from endpoint_config.streaming import StreamingSpec
from systems import REGISTRY, get_system

LONGEST_STREAM_S = StreamingSpec.model_fields["timeout_s"].metadata[1].le  # 900


def example_plan(system: str) -> EndpointPlan:
    """The first endpoint of `system` in the example configs, planned in its file's first environment."""
    import yaml

    for path in EXAMPLES:
        raw = yaml.safe_load(path.read_text())
        if any(e["system"] == system for e in raw["endpoints"]):
            env = next(iter(raw.get("environments") or {}), None)
            environment_plan = load_config(path, env)
            return next(p for p in environment_plan.plans if p.system.name == system)
    raise AssertionError(f"no example config uses system {system!r}")


def modes(plan: EndpointPlan) -> dict[str, EndpointPlan]:
    spec = plan.spec
    out = {
        "real-time": dataclasses.replace(
            plan, spec=spec.model_copy(update={"invocation": Invocation(), "streaming": StreamingSpec()})
        )
    }
    if plan.system.streaming.supported:
        out["streamed"] = dataclasses.replace(
            plan,
            spec=spec.model_copy(
                update={
                    "invocation": Invocation(),
                    "streaming": StreamingSpec(enabled=True, timeout_s=LONGEST_STREAM_S),
                }
            ),
        )
    for timeout in (None, INVOCATION_TIMEOUT_BOUNDS[1]):
        out[f"async-{timeout or 'default'}"] = dataclasses.replace(
            plan,
            spec=spec.model_copy(
                update={
                    "invocation": Invocation(mode="async", invocation_timeout_s=timeout),
                    "streaming": StreamingSpec(),
                }
            ),
        )
    return out


@pytest.mark.parametrize("system", sorted(REGISTRY))
def test_the_container_lets_a_request_run_as_long_as_sagemaker_does(system):
    timeout = get_system(system).request_timeout
    assert timeout is not None, f"system {system!r} states no request_timeout (systems/base.py RequestTimeout)"
    for mode, plan in modes(example_plan(system)).items():
        environment = plan.container_environment("bucket")
        limit = timeout.limit_s(plan.spec, plan.engine, environment)
        assert limit >= plan.invocation_timeout_s, (system, mode, plan.invocation_timeout_s, limit, environment)


def test_the_invocation_timeout_of_each_mode():
    plans = modes(example_plan("lmi-vllm"))
    assert {mode: p.invocation_timeout_s for mode, p in plans.items()} == {
        "real-time": REAL_TIME_INVOCATION_TIMEOUT_S,
        "streamed": LONGEST_STREAM_S,
        "async-default": ASYNC_DEFAULT_INVOCATION_TIMEOUT_S,
        "async-3600": 3600,
    }


def test_hf_fastload_ties_the_model_server_timeout_to_the_invocation_and_the_load():
    """summarize-async (production.yaml): 1800 s generations. The model server's one clock also times the model
    load, so it is never below the startup timeout; the old fixed value is gone."""
    environment_plan = load_config(ROOT / "config/examples/production.yaml", "prod")
    plan = environment_plan.plan("summarize-async")
    env = plan.container_environment("bucket")
    assert (env["SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS"], env["SAGEMAKER_MODEL_SERVER_TIMEOUT"]) == ("1800", "30")
    real_time = dataclasses.replace(plan, spec=plan.spec.model_copy(update={"invocation": Invocation()}))
    env = real_time.container_environment("bucket")
    assert env["SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS"] == str(plan.startup_timeout_s)  # 600 > 60


def test_a_timeout_shorter_than_the_invocation_is_caught():
    """The check itself: each reader sees a too-short setting."""
    hf = get_system("hf-fastload").request_timeout
    plan = example_plan("hf-fastload")
    assert hf.limit_s(plan.spec, plan.engine, {"SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS": "600"}) == 600
    assert hf.limit_s(plan.spec, plan.engine, {"SAGEMAKER_MODEL_SERVER_TIMEOUT": "10"}) == 600  # MMS reads minutes
    djl, ds = get_system("djl-deepspeed").request_timeout, example_plan("djl-deepspeed")
    assert djl.limit_s(ds.spec, ds.engine, {}) == 120  # DJL's default predict_timeout
    lmi, lmi_plan = get_system("lmi-vllm").request_timeout, example_plan("lmi-vllm")
    async_mode = {"OPTION_ASYNC_MODE": "true", "OPTION_ROLLING_BATCH": "disable"}
    assert lmi.limit_s(lmi_plan.spec, lmi_plan.engine, async_mode) == math.inf


HF_VENV_PYTHON = ROOT / ".venv-hf-container" / "bin" / "python"


@pytest.mark.skipif(
    not HF_VENV_PYTHON.exists(), reason="the HF container venv is made by tests/systems/test_hf_container_compat.py"
)
def test_the_inference_toolkit_writes_the_timeout_multi_model_server_reads():
    """The real sagemaker-inference (the HF container's venv) turns the plan's environment into MMS's config: the
    seconds key is written, the minutes one agrees (MMS 1.1.11 prefers the seconds key, ConfigManager)."""
    environment_plan = load_config(ROOT / "config/examples/production.yaml", "prod")
    env = environment_plan.plan("summarize-async").container_environment("bucket")
    # model_server.py imports pkg_resources (setuptools, in the image; not in this venv) for resource_filename only:
    # a stand-in that resolves the package's own files the same way.
    code = (
        "import importlib.util, json, os, sys, types;"
        "sys.modules['pkg_resources'] = types.SimpleNamespace(resource_filename=lambda package, name: os.path.join("
        "os.path.dirname(importlib.util.find_spec(package).origin), name.lstrip('/')));"
        "os.environ.update(json.loads(sys.argv[1]));"
        "from sagemaker_inference import environment, model_server;"
        "print(model_server._generate_mms_config_properties(environment.Environment()))"
    )
    out = subprocess.run([str(HF_VENV_PYTHON), "-c", code, json.dumps(env)], capture_output=True, text=True, check=True)
    properties = dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)
    assert properties["default_response_timeout_seconds"] == "1800"
    assert int(properties["default_response_timeout"]) * 60 >= 1800
