"""The smoke check inside every endpoint stack (stacks/smoke_check.py), on the synthesized templates: what it waits
for, what re-runs it, what its role may do, and that nothing keeps CloudFormation from rolling the stack back when it
answers FAILED.

CloudFormation's documented behaviour this relies on (the emulator has no rollback to show it, docs/design/guards.md):
a custom resource that answers FAILED fails its resource ("Custom resource response objects": Status FAILED), a
failed resource fails the stack operation and CloudFormation rolls the stack back to its last stable state (User
Guide, "Choose how to handle failures when provisioning resources": the default is to roll back), and resources an
update replaced are deleted only in the cleanup after the update succeeded (UPDATE_COMPLETE_CLEANUP_IN_PROGRESS), so a
rollback finds the previous Model and EndpointConfig still there.
"""

from __future__ import annotations

import json
import re

import yaml
from helpers import ROOT, synthesize_endpoint_stack

SMOKE_HANDLER = "smoke_check/handler.handler"


def _smoke_check(template: dict) -> tuple[str, dict, dict]:
    resources = template["Resources"]
    [(fn_id, fn)] = [
        (k, r)
        for k, r in resources.items()
        if r["Type"] == "AWS::Lambda::Function" and r["Properties"]["Handler"] == SMOKE_HANDLER
    ]
    [check] = [
        r
        for r in resources.values()
        if r["Type"] == "AWS::CloudFormation::CustomResource"
        and r["Properties"]["ServiceToken"] == {"Fn::GetAtt": [fn_id, "Arn"]}
    ]
    return fn_id, fn, check


def _of_type(template: dict, kind: str) -> list[str]:
    return [k for k, r in template["Resources"].items() if r["Type"] == kind]


def _role_actions(template: dict, role_id: str) -> set[str]:
    found = set()
    for policy in template["Resources"].values():
        if policy["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in policy["Properties"]["Roles"]:
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                action = statement["Action"]
                found.update([action] if isinstance(action, str) else action)
    return found


def test_every_endpoint_stack_checks_its_endpoint_after_it_is_in_service(synth):
    local = synth("config/local.yaml", "local")
    template = local.templates["llm-endpoints-local-tiny-gpt2"]
    fn_id, fn, check = _smoke_check(template)
    [endpoint] = _of_type(template, "AWS::SageMaker::Endpoint")
    [config] = _of_type(template, "AWS::SageMaker::EndpointConfig")
    [model] = _of_type(template, "AWS::SageMaker::Model")
    props = check["Properties"]
    assert props["EndpointName"] == {"Fn::GetAtt": [endpoint, "EndpointName"]}
    assert props["EndpointConfigName"] == {"Fn::GetAtt": [config, "EndpointConfigName"]}
    assert props["ModelNames"] == [{"Fn::GetAtt": [model, "ModelName"]}]
    assert re.fullmatch(r"[0-9a-f]{64}", props["ArtifactHash"]) and not props.get("AdapterHashes")
    # CloudFormation waits for the endpoint to be InService before it creates what depends on it
    assert endpoint in check["DependsOn"]
    # an answer lost never holds the stack its default hour
    assert fn["Properties"]["Timeout"] < props["ServiceTimeout"] <= 3600
    # the same settings as the smoke function `model_build smoke` and the pipeline run
    env = fn["Properties"]["Environment"]["Variables"]
    assert {"PROMPT", "SMOKE_MAX_NEW_TOKENS", "LATENCY_BUDGET_MS", "ENDPOINT_NAME", "EMULATOR"} <= set(env)


def test_its_role_may_make_exactly_the_calls_it_makes_and_only_lambda_assumes_it(synth):
    template = synth("config/local.yaml", "local").templates["llm-endpoints-local-tiny-gpt2"]
    _, fn, _ = _smoke_check(template)
    role_id = fn["Properties"]["Role"]["Fn::GetAtt"][0]
    trust = template["Resources"][role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert [s["Principal"] for s in trust] == [{"Service": "lambda.amazonaws.com"}]
    # config/local.yaml's endpoint has a chat: block with SageMaker's OpenAI route: the chat check's bearer token
    assert _role_actions(template, role_id) == {
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "sagemaker:DescribeEndpoint",
        "sagemaker:InvokeEndpoint",
        "sagemaker:CallWithBearerToken",
    }
    assert not any(a.startswith("cloudformation:") for a in _role_actions(template, role_id))


def test_a_component_endpoint_waits_for_its_component_and_adapters():
    template = synthesize_endpoint_stack(ROOT / "config/examples/engine-components.yaml", "dev", "vllm-lora")
    fn_id, fn, check = _smoke_check(template)
    components = _of_type(template, "AWS::SageMaker::InferenceComponent")
    assert len(components) > 1 and set(components) <= set(check["DependsOn"])  # the base and each adapter
    props = check["Properties"]
    assert props["ComponentName"] == "dev-vllm-lora-ic" and set(props["AdapterHashes"]) == {"sql", "support"}
    role_id = fn["Properties"]["Role"]["Fn::GetAtt"][0]
    assert "sagemaker:DescribeInferenceComponent" in _role_actions(template, role_id)


def _variant(tmp_path, **changes) -> dict:
    spec = yaml.safe_load((ROOT / "config/local.yaml").read_text())
    spec["endpoints"][0] = {**spec["endpoints"][0], **changes}
    path = tmp_path / f"v{len(list(tmp_path.iterdir()))}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return _smoke_check(synthesize_endpoint_stack(path, "local", "tiny-gpt2"))[2]["Properties"]


def test_what_it_checks_changing_re_runs_it_and_nothing_else_does(tmp_path):
    """CloudFormation sends a custom resource Update only when its properties change: a new artifact (a new Model
    and EndpointConfig), other smoke settings; a synth of the same config gives the same properties."""
    base = _variant(tmp_path, artifact_hash="a" * 64)
    assert _variant(tmp_path, artifact_hash="a" * 64) == base
    assert _variant(tmp_path, artifact_hash="b" * 64)["ArtifactHash"] != base["ArtifactHash"]
    changed = _variant(tmp_path, artifact_hash="a" * 64, smoke_test={"prompt": "Another prompt"})
    assert changed["Settings"] != base["Settings"]


def test_nothing_keeps_cloudformation_from_rolling_the_stack_back(synth):
    """A FAILED smoke check rolls back only if the deploy lets CloudFormation roll back and the previous version is
    still there to return to."""
    template = synth("config/local.yaml", "local").templates["llm-endpoints-local-tiny-gpt2"]
    for kind in ("AWS::SageMaker::Model", "AWS::SageMaker::EndpointConfig"):
        for lid in _of_type(template, kind):
            assert template["Resources"][lid].get("UpdateReplacePolicy") == "Retain", lid
    # No deploy path turns rollback off (`cdk deploy --no-rollback`, CloudFormation's DisableRollback).
    for path in ("Makefile", "cdk.json", "workstation/deploy.py", "stacks/pipeline_stack.py"):
        text = (ROOT / path).read_text()
        assert "--no-rollback" not in text and "DisableRollback" not in text, path
    assert json.loads((ROOT / "cdk.json").read_text()).get("rollback", True) is not False
