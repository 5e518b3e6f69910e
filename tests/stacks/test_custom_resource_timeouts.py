"""No custom resource can hold a stack for CloudFormation's default hour (operations review R3): every custom
resource of every synthesized template (each example in each environment, the pipeline and its stages' stacks) has a
ServiceTimeout above its function's timeout, and each of our handlers' AWS calls and answer fit inside that timeout
(botocore's defaults, 60 s connect + 60 s read and up to 5 attempts, did not)."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from helpers import EXAMPLE_CASES, ROOT

MAX_SERVICE_TIMEOUT_S = 3600  # AWS::CloudFormation::CustomResource ServiceTimeout: 1 to 3600


def _custom_resources(template: dict):
    for lid, resource in template.get("Resources", {}).items():
        kind = resource["Type"]
        if kind == "AWS::CloudFormation::CustomResource" or kind.startswith("Custom::"):
            yield lid, resource


def _function_of(template: dict, resource: dict) -> dict:
    token = resource["Properties"]["ServiceToken"]
    assert isinstance(token, dict) and "Fn::GetAtt" in token, f"service token not a function of this stack: {token}"
    function = template["Resources"][token["Fn::GetAtt"][0]]
    assert function["Type"] == "AWS::Lambda::Function"
    return function


def _handler_module(handler: str):
    """The module that defines the function's handler (lambda/<dir>/<file>.py may re-export endpoint_runtime's)."""
    path = ROOT / "lambda" / (handler.rsplit(".", 1)[0] + ".py")
    spec = importlib.util.spec_from_file_location(f"_handler_{path.parent.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return sys.modules.get(getattr(module, "handler").__module__, module)


def worst_case_s(module) -> float:
    """Every AWS call at its every attempt timing out on connect and read, standard mode's longest backoffs between
    attempts (min(2**(n-1), 20) s, raised by up to 5 s by x-amz-retry-after: botocore/retries/standard.py), and every
    answer PUT timing out."""
    config = module.client_config()
    attempts = config.retries["total_max_attempts"]
    assert config.retries["mode"] == "standard"
    per_call = attempts * (config.connect_timeout + config.read_timeout)
    per_call += sum(min(2 ** (n - 1), 20) + 5 for n in range(1, attempts))
    return module.AWS_CALLS_PER_EVENT * per_call + module.RESPONSE_TIMEOUT_S * module.RESPONSE_TRIES


@pytest.fixture(scope="module")
def templates(synth, pipeline_synth) -> dict[str, dict]:
    found = {}
    for config, env in EXAMPLE_CASES:
        for name, template in synth(config, env).templates.items():
            found[f"{config}/{env}/{name}"] = template
    _, _, pipeline, stages = pipeline_synth
    found["pipeline"] = pipeline
    for stage, stacks in stages.items():
        for name, (template, _, _) in stacks.items():
            found[f"pipeline/{stage}/{name}"] = template
    return found


def test_every_custom_resource_answers_before_its_service_timeout(templates):
    seen = set()
    for where, template in templates.items():
        for lid, resource in _custom_resources(template):
            props = resource["Properties"]
            function = _function_of(template, resource)
            timeout = function["Properties"]["Timeout"]
            assert "ServiceTimeout" in props, f"{where} {lid} ({resource['Type']}): no ServiceTimeout (default 1 h)"
            assert timeout < int(props["ServiceTimeout"]) <= MAX_SERVICE_TIMEOUT_S, (where, lid)
            seen.add((resource["Type"], function["Properties"]["Handler"], timeout))
    # The ones this project writes: their handlers' own waits fit the function's timeout.
    ours = {(kind, handler, timeout) for kind, handler, timeout in seen if "/" in handler}
    assert {kind for kind, _, _ in ours} == {"AWS::CloudFormation::CustomResource", "Custom::KeptCopyCount"}
    assert "Custom::S3AutoDeleteObjects" in {kind for kind, _, _ in seen}
    for kind, handler, timeout in ours:
        if handler == "smoke_check/handler.handler":
            continue  # bounded by its budgets instead: test_the_smoke_check_runs_within_its_timeout
        module = _handler_module(handler)
        assert worst_case_s(module) <= timeout, f"{kind} {handler}: {worst_case_s(module)} s > {timeout} s"
    assert "smoke_check/handler.handler" in {handler for _, handler, _ in ours}


def test_the_smoke_check_runs_within_its_timeout(templates):
    """The stack's smoke check waits at most its latency or wake budget (endpoint_runtime/smoke.py), and for a
    scale-up from zero stops LAMBDA_END_MARGIN_MS before the function's end: its timeout covers the longer budget
    and the invocation's own 60 s (stacks/functions.py smoke_timeout_s), within Lambda's 900 s."""
    from endpoint_runtime.smoke import LAMBDA_END_MARGIN_MS

    checked = 0
    for where, template in templates.items():
        for lid, resource in _custom_resources(template):
            function = _function_of(template, resource)
            if function["Properties"]["Handler"] != "smoke_check/handler.handler":
                continue
            env = function["Properties"]["Environment"]["Variables"]
            budget_ms = max(int(env["LATENCY_BUDGET_MS"]), int(env.get("WAKE_BUDGET_MS", 0)))
            timeout = function["Properties"]["Timeout"]
            assert min(budget_ms / 1000 + 60, 900) <= timeout <= 900, (where, lid, budget_ms, timeout)
            assert LAMBDA_END_MARGIN_MS / 1000 < timeout
            checked += 1
    assert checked
