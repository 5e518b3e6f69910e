"""A component endpoint's config must not be replaced by a deploy (operations review R2): preflight compares the
deployed stack's template with the synthesized one over every create-only property of AWS::SageMaker::EndpointConfig
in cfn-lint's schema, and what those name (model_build/replacement.py), not 6 fields of DescribeEndpointConfig.

The templates are config/examples/production.yaml's assist-ic stack as synthesized; the deployed one is that template
with the change under test made to it. SageMaker and CloudFormation answers come from botocore's Stubber (moto has no
inference-component endpoints)."""

from __future__ import annotations

import copy
import json

import boto3
import pytest
from botocore.stub import Stubber
from helpers import EXAMPLE_CASES

from deployment import load_config
from model_build.preflight import update_checks
from model_build.replacement import TemplateDiff, create_only, from_cfn_lint, stack_templates

# slow: the production example synthesized and diffed (make test-fast leaves them out)
pytestmark = pytest.mark.slow

STACK = "llm-endpoints-prod-assist-ic"
CONFIG = "EndpointConfig"


@pytest.fixture(scope="module")
def production(synth):
    return synth("config/examples/production.yaml", "prod")


@pytest.fixture
def new(production) -> dict:
    return copy.deepcopy(production.templates[STACK])


def config_id(template: dict) -> str:
    [lid] = [lid for lid, r in template["Resources"].items() if r["Type"] == "AWS::SageMaker::EndpointConfig"]
    return lid


def props(template: dict, lid: str) -> dict:
    return template["Resources"][lid]["Properties"]


def test_the_create_only_snapshot_is_the_venvs_cfn_lint_for_every_synthesized_type(synth, pipeline_synth):
    """The class check: a resource type a template gains, or a create-only property cfn-lint's schema gains, fails
    here until `python -m model_build.replacement --write <templates>` is run again."""
    types: set[str] = set()
    for config, env in EXAMPLE_CASES:
        for template in synth(config, env).templates.values():
            types |= {r["Type"] for r in template["Resources"].values()}
    for stacks in pipeline_synth[3].values():
        for template, _, _ in stacks.values():
            types |= {r["Type"] for r in template["Resources"].values()}
    expected = from_cfn_lint(types)
    assert {k: v for k, v in create_only().items() if k in expected} == expected
    assert "/properties/EnableNetworkIsolation" in expected["AWS::SageMaker::EndpointConfig"]


def test_every_create_only_property_of_the_endpoint_config_is_compared(new):
    lid = config_id(new)
    pointers = create_only()["AWS::SageMaker::EndpointConfig"]
    assert len(pointers) >= 11  # KmsKeyId, AsyncInferenceConfig, ExecutionRoleArn, ... (cfn-lint 1.58)
    for pointer in pointers:
        old = copy.deepcopy(new)
        *parents, key = pointer.split("/")[2:]
        target = props(old, lid)
        for part in parents:
            target = target.setdefault(part, {})
        target[key] = {"deployed": "something else"}
        [replacement] = TemplateDiff(old, new).replacements("AWS::SageMaker::EndpointConfig")
        # the property itself, or a key inside it where both sides are objects (MetricsConfig/EnableDetailedObservability)
        name = pointer.removeprefix("/properties/")
        assert replacement.changes[0].startswith((f"{name}: ", f"{name}/")), pointer


def test_a_model_only_update_replaces_no_endpoint_config_and_a_replaced_role_does(new):
    lid = config_id(new)
    old = copy.deepcopy(new)
    [model] = [m for m, r in old["Resources"].items() if r["Type"] == "AWS::SageMaker::Model"]
    props(old, model)["PrimaryContainer"]["Image"] = "an older image"
    diff = TemplateDiff(old, new)
    assert diff.replaced(model) and diff.replacements("AWS::SageMaker::EndpointConfig") == []
    role = props(new, lid)["ExecutionRoleArn"]["Fn::GetAtt"][0]
    props(old, role)["Path"] = "/old/"
    [replacement] = TemplateDiff(old, new).replacements("AWS::SageMaker::EndpointConfig")
    assert replacement.changes == [
        f'ExecutionRoleArn: names {role}, which this deploy replaces (Path: "/old/" -> absent)'
    ]


def test_the_reviews_upgrade_case_is_refused_before_the_deploy(production, new, tmp_path):
    """The review's repro: deployed before the endpoint config carried EnableNetworkIsolation, with RANDOM routing.
    mode_problem's 6 fields passed it; the template comparison refuses it, naming both."""
    old = copy.deepcopy(new)
    lid = config_id(old)
    del props(old, lid)["EnableNetworkIsolation"]
    props(old, lid)["ProductionVariants"][0]["RoutingConfig"] = {"RoutingStrategy": "RANDOM"}
    (tmp_path / "new.json").write_text(json.dumps(new))
    deployed_variant = {
        k: v for k, v in props(old, lid)["ProductionVariants"][0].items() if k not in ("RoutingConfig",)
    } | {"RoutingConfig": {"RoutingStrategy": "RANDOM"}}
    sm, cfn = (
        boto3.client("sagemaker", region_name="us-east-1"),
        boto3.client("cloudformation", region_name="us-east-1"),
    )
    environment_plan = load_config("config/examples/production.yaml", "prod")
    plan = environment_plan.plan("assist-ic")

    class Session:
        def client(self, name, **_):
            return {"sagemaker": sm, "cloudformation": cfn}.get(name) or boto3.client(name, region_name="us-east-1")

    with Stubber(sm) as sm_stub, Stubber(cfn) as cfn_stub:
        for p in environment_plan.plans:
            if p.name != "assist-ic":  # the file's other endpoints: not deployed
                sm_stub.add_client_error("describe_endpoint", "ValidationException", "Could not find endpoint")
                continue
            sm_stub.add_response(
                "describe_endpoint",
                {
                    "EndpointName": plan.endpoint_name,
                    "EndpointArn": f"arn:aws:sagemaker:us-east-1:111122223333:endpoint/{plan.endpoint_name}",
                    "EndpointConfigName": "ec-deployed",
                    "EndpointStatus": "InService",
                    "CreationTime": 0,
                    "LastModifiedTime": 0,
                },
            )
            sm_stub.add_response(
                "describe_endpoint_config",
                {
                    "EndpointConfigName": "ec-deployed",
                    "EndpointConfigArn": "arn:aws:sagemaker:us-east-1:111122223333:endpoint-config/ec-deployed",
                    "CreationTime": 0,
                    "ProductionVariants": [deployed_variant],
                },
            )
            cfn_stub.add_response("get_template", {"TemplateBody": json.dumps(old)})
        checks = update_checks(environment_plan, Session(), "us-east-1", templates={STACK: tmp_path / "new.json"})
    [check] = [c for c in checks if c.name == "update assist-ic"]
    assert not check.ok
    assert "hosts inference components and this deploy replaces its endpoint config" in check.message
    assert "EnableNetworkIsolation: absent -> true" in check.message
    assert '"RANDOM"' in check.message and '"LEAST_OUTSTANDING_REQUESTS"' in check.message
    assert f"destroy stack {STACK} and deploy it again" in check.message


def test_stack_templates_reads_nested_stage_assemblies(pipeline_synth):
    outdir = pipeline_synth[0]
    found = stack_templates(outdir)
    assert "llm-endpoints-pipeline" in found
    assert any(name.startswith("llm-endpoints-prod-") for name in found)
    assert all(path.is_file() for path in found.values())
