"""The pipeline runs the preflight `make deploy` runs before each environment's endpoints (operations review R2: the
pipeline had no preflight): a `Preflight` step first in every <env>-endpoints stage, whose command runs
`model_build preflight --only-updates` against the stage's synthesized templates under a read-only role of the
environment's artifact stack.

The step's command runs here against the emulator with the endpoint stack deployed, through the profile its install
commands write, and every call it makes must be allowed by the role it assumes (the method and helpers of
tests/stacks/test_iam_coverage.py, imported). The endpoint is real-time here (moto has no inference components), so
the template comparison's GetTemplate is checked on the policy only."""

from __future__ import annotations

from pathlib import Path

import pytest
import test_iam_coverage as cov
from helpers import ROOT

from stacks.pipeline_stack import PREFLIGHT_ASSEMBLY_DIR

# The calls the preflight makes that the coverage module does not map yet. Sources: the Service Authorization
# Reference as cfn-lint 1.58 ships it (cfnlint/data/AdditionalSpecs/Policies.json): sagemaker DescribeEndpointConfig
# on resource type endpoint-config, cloudformation GetTemplate on stack, application-autoscaling
# DescribeScalableTargets on no resource type ("*").
EXTRA_ACTIONS = {
    ("sagemaker", "DescribeEndpointConfig"): ("sagemaker:DescribeEndpointConfig",),
    ("cloudformation", "GetTemplate"): ("cloudformation:GetTemplate",),
    ("application-autoscaling", "DescribeScalableTargets"): ("application-autoscaling:DescribeScalableTargets",),
}


def _resource_of(call, where):
    base = f"arn:{where.partition}:{{service}}:{where.region}:{where.account}"
    if call.operation == "DescribeEndpointConfig":
        return base.format(service="sagemaker") + f":endpoint-config/{call.params['EndpointConfigName'].lower()}"
    if call.service == "application-autoscaling":
        return "*"
    return original_resource_of(call, where)


original_resource_of = cov._resource_of


def real_time_as_sagemaker_answers(events) -> None:
    """moto answers DescribeEndpointConfig of a real-time config with an empty AsyncInferenceConfig; SageMaker leaves
    the key out (an asynchronous config always has its required OutputConfig, botocore's sagemaker model)."""

    def drop_empty(parsed: dict, **_) -> None:
        if parsed.get("AsyncInferenceConfig") == {}:
            del parsed["AsyncInferenceConfig"]

    events.register("after-call.sagemaker.DescribeEndpointConfig", drop_empty)


@pytest.fixture(scope="module")
def envs(pipeline_synth):
    return cov.envs.__wrapped__(pipeline_synth)


def test_the_preflight_runs_after_the_artifact_stack_and_before_the_build_and_the_endpoints(pipeline_synth):
    """In <env>-artifacts, after its stack and before the model build: a refusal stops the environment before anything
    is built or any endpoint stack changes, and fails a stage without rollback (operations review F4)."""
    _, _, template, _ = pipeline_synth
    [pipeline] = [r for r in template["Resources"].values() if r["Type"] == "AWS::CodePipeline::Pipeline"]
    names = [stage["Name"] for stage in pipeline["Properties"]["Stages"]]
    checked = 0
    for index, stage in enumerate(pipeline["Properties"]["Stages"]):
        if not stage["Name"].endswith("-artifacts"):
            continue
        order = {a["Name"]: a["RunOrder"] for a in stage["Actions"]}
        deploys = [a["RunOrder"] for a in stage["Actions"] if a["ActionTypeId"]["Category"] == "Deploy"]
        assert max(deploys) < order["Preflight"] < order["ModelBuild"], stage["Name"]
        assert names[index + 1] == stage["Name"].replace("-artifacts", "-endpoints") and "OnFailure" not in stage
        [action] = [a for a in stage["Actions"] if a["Name"] == "Preflight"]
        assert len(action["InputArtifacts"]) == 2  # the source and the synth output
        checked += 1
    assert checked == 2


@pytest.mark.parametrize("env_name", ["dev", "prod"])
def test_the_preflight_steps_calls_are_allowed_by_the_role_it_assumes(
    moto_env, envs, env_name, monkeypatch, tmp_path, pipeline_synth
):
    from model_build.cli import main

    for key, actions in EXTRA_ACTIONS.items():
        monkeypatch.setitem(cov.ACTIONS, key, actions)
    monkeypatch.setattr(cov, "_resource_of", _resource_of)
    env = envs[env_name]
    monkeypatch.chdir(ROOT)
    project, cb_role, cb_where = env.codebuild("Preflight")
    fix = cov.deploy_endpoint_stack(cov.account_session(env.where.account, env.where.region), env.endpoint_stack)
    with (
        cov.codebuild_step(project, tmp_path, monkeypatch) as spec,
        cov.recording(monkeypatch, fix, real_time_as_sagemaker_answers) as rec,
    ):
        [argv] = [a for c in spec["phases"]["build"]["commands"] for a in cov.model_build_commands(c, "preflight")]
        assert argv[argv.index("--assembly") + 1] == PREFLIGHT_ASSEMBLY_DIR and "--only-updates" in argv
        argv[argv.index("--assembly") + 1] = str(Path(pipeline_synth[0]))  # where CodeBuild puts the synth output
        assert main(argv) == 0, "the deployed endpoint may be updated: every check ran"
    cov._check_codebuild_role(env, rec, project, spec, cb_role, cb_where)
    [(target, calls)] = rec.by_assumed_role().items()
    target_ctx, target_lid = env.role_named(target)
    assert target_ctx is env.artifacts_stack  # deployed before the endpoint stacks it reads
    needs = cov.principal_needs(calls, target_ctx.where)
    assert {(c.service, c.operation) for c in calls} >= {
        ("sts", "GetCallerIdentity"),
        ("sagemaker", "DescribeEndpoint"),
        ("sagemaker", "DescribeEndpointConfig"),
        ("application-autoscaling", "DescribeScalableTargets"),  # the deployed type differs: the scaling check ran
    }
    policy = cov.role_policy(target_ctx, target_lid)
    assert cov.missing(policy, needs) == []
    # The template comparison of a component endpoint: GetTemplate of each endpoint stack.
    stack = env.endpoint_stack.stack_name
    get_template = cov.Call("cloudformation", "GetTemplate", {"StackName": stack})
    assert cov.missing(policy, cov.needs_of(get_template, target_ctx.where)) == []
