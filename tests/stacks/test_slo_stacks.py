"""An endpoint's `slo:` in the templates (stacks/benchmark.py, stacks/pipeline_stack.py): the managed benchmark's
AWS::SageMaker::AIWorkloadConfig and outputs (config/examples/production.yaml's chat-vllm; cfn-lint checks the
resource against its registry schema in tests/config/test_examples.py), the region it is offered in, and the
pipeline's SLO gate step in its own stage after the endpoints, with its roles (config/examples/pipeline.yaml). What the roles allow is
run against the code in tests/stacks/test_iam_coverage.py."""

from __future__ import annotations

import json

import pytest
from helpers import ROOT, TOOLS

from deployment import load_config
from endpoint_config import ConfigError

PRODUCTION = "config/examples/production.yaml"


def _resources(template: dict, type_name: str) -> dict[str, dict]:
    return {lid: r for lid, r in template["Resources"].items() if r["Type"] == type_name}


def test_the_managed_benchmark_is_the_gate_workload_as_an_ai_workload_config(synth):
    templates = synth(PRODUCTION, "prod").templates
    plan = load_config(ROOT / PRODUCTION, "prod").plan("chat-vllm")
    template = templates["llm-endpoints-prod-chat-vllm"]
    [config] = _resources(template, "AWS::SageMaker::AIWorkloadConfig").values()
    props = config["Properties"]
    assert props["AIWorkloadConfigName"] == plan.managed_benchmark.workload_config_name
    assert json.loads(props["AIWorkloadConfigs"]["WorkloadSpec"]["Inline"]) == plan.managed_benchmark.document
    outputs = {
        k.split("ManagedBenchmark", 1)[-1][:-8]: v["Value"]
        for k, v in template["Outputs"].items()
        if k.startswith("ManagedBenchmark")
    }
    assert outputs["WorkloadConfigName"] == plan.managed_benchmark.workload_config_name
    assert set(outputs) == {"WorkloadConfigName", "RoleArn", "CallerPolicyArn"}
    # only the endpoint that asks for it; no pipeline here, so no gate role either
    for name in ("llm-endpoints-prod-summarize-async", "llm-endpoints-prod-assist-ic"):
        assert not _resources(templates[name], "AWS::SageMaker::AIWorkloadConfig")
    assert not [
        r
        for r in _resources(template, "AWS::IAM::Role").values()
        if r["Properties"].get("RoleName", "").endswith("-slo")
    ]


def test_a_region_without_the_resource_is_refused_at_synth_or_by_a_template_rule():
    """Known at synth: refused then. Environment-agnostic (no region until deploy): a template rule, which
    CloudFormation evaluates before it creates anything."""
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    from stacks.benchmark import ManagedBenchmark

    plan = load_config(ROOT / PRODUCTION, "prod").plan("chat-vllm")
    assert plan.managed_benchmark is not None
    offered = plan.managed_benchmark.offered_regions
    app = cdk.App()
    with pytest.raises(
        ConfigError,
        match=r"endpoint 'chat-vllm': slo.managed_benchmark: AWS::SageMaker::"
        r"AIWorkloadConfig is not offered in eu-west-3; regions with it: .*us-east-1",
    ):
        ManagedBenchmark._refuse_unoffered_region(cdk.Stack(app, "Paris", env={"region": "eu-west-3"}), plan, offered)
    ManagedBenchmark._refuse_unoffered_region(cdk.Stack(app, "Oregon", env={"region": "us-west-2"}), plan, offered)
    anywhere = cdk.Stack(app, "Anywhere")
    ManagedBenchmark._refuse_unoffered_region(anywhere, plan, offered)
    [assertion] = Template.from_stack(anywhere).to_json()["Rules"]["ManagedBenchmarkRegion"]["Assertions"]
    [(function, (regions, region))] = assertion["Assert"].items()
    assert function == "Fn::Contains" and region == {"Ref": "AWS::Region"} and "us-west-2" in regions


# ------------------------------------------------------------------------------------------- the pipeline


def _flat(value) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(_flat(p) for p in parts)
    return {"AWS::Partition": "aws", "AWS::AccountId": "<account>", "AWS::Region": "<region>"}.get(
        value.get("Ref"), json.dumps(value)
    )


def test_the_slo_gate_step_runs_in_its_own_stage_after_the_endpoints_under_its_own_roles(pipeline_synth):
    _, _, template, stages = pipeline_synth
    [pipeline] = _resources(template, "AWS::CodePipeline::Pipeline").values()
    names = [s["Name"] for s in pipeline["Properties"]["Stages"]]
    for env, account in (("dev", TOOLS), ("prod", "444455556666")):
        # the stage right after the endpoints (each passed its stack's own smoke check in its deploy)
        assert names.index(f"{env}-slo-gate") == names.index(f"{env}-endpoints") + 1
        [stage] = [s for s in pipeline["Properties"]["Stages"] if s["Name"] == f"{env}-slo-gate"]
        actions = {a["Name"]: a for a in stage["Actions"]}
        assert list(actions) == ["SloGate-gptj-fastload"]
        project = template["Resources"][actions["SloGate-gptj-fastload"]["Configuration"]["ProjectName"]["Ref"]]
        spec = json.loads(_flat(project["Properties"]["Source"]["BuildSpec"]))
        assert spec["phases"]["build"]["commands"] == [
            f".venv/bin/python -m model_build slo-gate --config config/examples/pipeline.yaml --env {env} "
            "--endpoint gptj-fastload --quiet"
        ]
        assert spec["phases"]["install"]["commands"][0] == "make venv-deploy"
        # the step's role may assume the endpoint stack's gate role, nothing else of the environment
        role_lid = project["Properties"]["ServiceRole"]["Fn::GetAtt"][0]
        assumes = [
            (s["Action"], _flat(s["Resource"]))
            for r in _resources(template, "AWS::IAM::Policy").values()
            if {"Ref": role_lid} in r["Properties"]["Roles"]
            for s in r["Properties"]["PolicyDocument"]["Statement"]
            if "sts:AssumeRole" in json.dumps(s["Action"])
        ]
        assert assumes == [("sts:AssumeRole", f"arn:aws:iam::{account}:role/llm-endpoints-{env}-gptj-fastload-slo")]

        endpoint_template, _, _ = stages[f"{env}-endpoints"][f"llm-endpoints-{env}-gptj-fastload"]
        [(lid, role)] = [
            (k, r)
            for k, r in _resources(endpoint_template, "AWS::IAM::Role").items()
            if r["Properties"].get("RoleName") == f"llm-endpoints-{env}-gptj-fastload-slo"
        ]
        [trust] = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert _flat(trust["Condition"]["ArnEquals"]["aws:PrincipalArn"]) == (
            f"arn:aws:iam::{TOOLS}:role/llm-endpoints-{env}-gptj-fastload-slo-cb"
        )
        statements = [
            (s["Action"], _flat(s["Resource"]), s.get("Condition"))
            for r in _resources(endpoint_template, "AWS::IAM::Policy").values()
            if {"Ref": lid} in r["Properties"]["Roles"]
            for s in r["Properties"]["PolicyDocument"]["Statement"]
        ]
        bucket = f"arn:aws:s3:::llm-endpoints-{env}-artifacts-<account>-<region>"
        assert statements == [
            (
                "sagemaker:InvokeEndpoint",
                f"arn:aws:sagemaker:us-east-1:{account if env == 'prod' else TOOLS}:endpoint/{env}-gptj-fastload",
                None,
            ),
            ("s3:ListBucket", bucket, {"StringLike": {"s3:prefix": ["loadtest/gptj-fastload/*"]}}),
            (["s3:GetObject", "s3:PutObject"], f"{bucket}/loadtest/gptj-fastload/*", None),
        ]
