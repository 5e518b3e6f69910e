"""The pipeline's model build of a Hub model for a checkpoint system (Qwen3-32B on vllm, issue 32): synthesized with
the default build compute, its ModelBuild step plans from metadata and `model_build publish` starts and follows the
staging job (model_build/stage.py), under the publisher role, which may make exactly those calls. Assertions on the
synthesized templates (CodePipeline/CodeBuild cannot run here); cdk-nag runs in the synth."""

from __future__ import annotations

import json

import pytest
from helpers import PIPELINE_CONFIG, TOOLS, cdk_context, environment_plans_with
from test_pipeline_stack import _buildspec, _flat, _project_for, _resources, _role_statements

DEV = "111111111111"
QWEN3_32B = {
    "name": "qwen3-32b",
    "system": "vllm",
    "model": "Qwen/Qwen3-32B",
    "dtype": "bf16",
    "instance_type": "ml.g7e.2xlarge",
    "volume_size_gb": None,
    "artifact_hash": "0" * 64,
    "engine": {"max_model_len": 32768},
}


@pytest.fixture(scope="module")
def staged_pipeline(tmp_path_factory):
    import aws_cdk as cdk

    from stacks.nag import add_nag_checks
    from stacks.pipeline_stack import PipelineStack

    environment_plans, spec = environment_plans_with(
        **{
            "endpoints": [QWEN3_32B],
            "environments.dev.overrides": None,
            "environments.prod.overrides": None,
            "pipeline.build": None,  # the defaults: LARGE compute, 240 minutes
            "pipeline.stages": ["dev"],
            "pipeline.manual_approval_before": [],
        }
    )
    outdir = tmp_path_factory.mktemp("staged-pipeline")
    app = cdk.App(context=cdk_context(), outdir=str(outdir))
    PipelineStack(
        app,
        "P",
        config_path=PIPELINE_CONFIG,
        environment_plans=environment_plans,
        pipeline=spec,
        env={"account": TOOLS, "region": "us-east-1"},
    )
    add_nag_checks(app)
    assembly = app.synth()  # raises on any unacknowledged cdk-nag finding
    [artifacts] = assembly.get_nested_assembly("assembly-dev-artifacts").stacks
    return json.loads((outdir / "P.template.json").read_text()), artifacts.template, spec


def test_the_model_build_of_a_hub_checkpoint_plans_and_stages_on_the_default_compute(staged_pipeline):
    template, _, spec = staged_pipeline
    assert spec.build.compute == "LARGE"
    project = _project_for(template, "dev-artifacts", "ModelBuild")  # its own stage since h-f4
    assert project["Properties"]["Environment"]["ComputeType"] == "BUILD_GENERAL1_LARGE"
    [command] = _buildspec(project)["phases"]["build"]["commands"]
    where = f"--config {PIPELINE_CONFIG} --env dev --endpoint qwen3-32b"
    # build: a vllm Hub model plans from its metadata (no weight byte on the build's disk); publish of that staged
    # manifest runs `model_build stage`: uploads the metadata and the spec, starts the job, prints its log lines.
    assert f"python -m model_build build {where} --quiet && .venv/bin/python -m model_build publish {where}" in command
    assert "model_build stage" not in command  # publish branches to it (model_build/publish.py)
    variables = project["Properties"]["Environment"]["EnvironmentVariables"]
    assert {"Name": "AWS_PROFILE", "Type": "PLAINTEXT", "Value": "publisher"} in variables


def test_the_publisher_role_may_start_and_follow_only_its_staging_job(staged_pipeline):
    _, artifacts, _ = staged_pipeline
    [(lid, _role)] = [
        (lid, r) for lid, r in _resources(artifacts, "AWS::IAM::Role").items() if lid.startswith("ModelPublisherRole")
    ]
    granted = {}
    for statement in _role_statements(artifacts, lid):
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        for action in actions:
            granted.setdefault(action, set()).update(_flat(r) for r in resources)
    [project_lid] = _resources(artifacts, "AWS::CodeBuild::Project")
    project_name = _resources(artifacts, "AWS::CodeBuild::Project")[project_lid]["Properties"]["Name"]
    assert project_name == "llm-endpoints-dev-weights-staging"
    project_arn = f'arn:aws:codebuild:{{"Ref": "AWS::Region"}}:{{"Ref": "AWS::AccountId"}}:project/{project_name}'
    # the staging project's own group (the stack also owns the auto-delete function's)
    [log_group] = [
        lid for lid, g in _resources(artifacts, "AWS::Logs::LogGroup").items() if lid.startswith("WeightsStaging")
    ]
    bucket = '{"Fn::GetAtt": ["ArtifactBucket", "Arn"]}'
    stack = (
        'arn:aws:cloudformation:{"Ref": "AWS::Region"}:{"Ref": "AWS::AccountId"}:stack/llm-endpoints-dev-artifacts/*'
    )
    expected = {
        # publish's own uploads (ArtifactStoreStack.grant_publish): the metadata files, models/* only
        "s3:ListBucket": {bucket},
        "s3:GetObject": {f"{bucket}/models/*"},
        "s3:AbortMultipartUpload": {f"{bucket}/models/*"},
        # ... and the spec beside them, for the job
        "s3:PutObject": {f"{bucket}/models/*", f"{bucket}/staging-specs/*"},
        # the project's name (the artifacts stack's WeightsStagingProject output)
        "cloudformation:DescribeStacks": {stack},
        # a build already staging this destination, or a new one; its status and log stream
        "codebuild:ListBuildsForProject": {project_arn},
        "codebuild:BatchGetBuilds": {project_arn},
        "codebuild:StartBuild": {project_arn},
        # the job's lines as they come
        "logs:GetLogEvents": {json.dumps({"Fn::GetAtt": [log_group, "Arn"]})},
    }
    kms = {a for a in granted if a.startswith("kms:")}  # the bucket key's S3-scoped use, when the bucket has one
    assert {a: r for a, r in granted.items() if a not in kms} == expected


GPTJ = {
    "name": "gptj",
    "system": "hf-fastload",  # converts the Hub model (fp16 reshard): its recipe runs in the account
    "model": "EleutherAI/gpt-j-6B",
    "dtype": "fp16",
    "instance_type": "ml.g5.2xlarge",
    "volume_size_gb": None,
    "artifact_hash": "1" * 64,
}


@pytest.fixture(scope="module")
def converting_pipeline(tmp_path_factory):
    import aws_cdk as cdk

    from stacks.nag import add_nag_checks
    from stacks.pipeline_stack import PipelineStack

    environment_plans, spec = environment_plans_with(
        **{
            "endpoints": [QWEN3_32B, GPTJ],
            "environments.dev.overrides": None,
            "environments.prod.overrides": None,
            "pipeline.build": None,
            "pipeline.stages": ["dev"],
            "pipeline.manual_approval_before": [],
        }
    )
    outdir = tmp_path_factory.mktemp("converting-pipeline")
    app = cdk.App(context=cdk_context(), outdir=str(outdir))
    PipelineStack(
        app,
        "P",
        config_path=PIPELINE_CONFIG,
        environment_plans=environment_plans,
        pipeline=spec,
        env={"account": TOOLS, "region": "us-east-1"},
    )
    add_nag_checks(app)
    assembly = app.synth()  # raises on any unacknowledged cdk-nag finding
    [artifacts] = assembly.get_nested_assembly("assembly-dev-artifacts").stacks
    return json.loads((outdir / "P.template.json").read_text()), artifacts.template


def test_a_converting_recipe_is_built_in_the_account_and_a_checkpoint_here(converting_pipeline):
    template, _ = converting_pipeline
    [gptj, qwen] = sorted(
        _buildspec(_project_for(template, "dev-artifacts", "ModelBuild"))["phases"]["build"]["commands"],
        key=lambda c: "--endpoint qwen3-32b" in c,
    )
    assert f"python -m model_build build --in-account --config {PIPELINE_CONFIG} --env dev --endpoint gptj" in gptj
    assert "model_build publish" not in gptj  # the recipe project publishes, in the account
    assert "model_build publish" in qwen and "--in-account" not in qwen


def test_the_publisher_role_may_start_and_follow_exactly_both_jobs(converting_pipeline):
    _, artifacts = converting_pipeline
    [(lid, _role)] = [
        (lid, r) for lid, r in _resources(artifacts, "AWS::IAM::Role").items() if lid.startswith("ModelPublisherRole")
    ]
    granted: dict[str, set[str]] = {}
    for statement in _role_statements(artifacts, lid):
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        for action in actions:
            granted.setdefault(action, set()).update(_flat(r) for r in resources)
    names = {p["Properties"]["Name"] for p in _resources(artifacts, "AWS::CodeBuild::Project").values()}
    assert names == {"llm-endpoints-dev-weights-staging", "llm-endpoints-dev-recipe-build"}
    projects = {
        f'arn:aws:codebuild:{{"Ref": "AWS::Region"}}:{{"Ref": "AWS::AccountId"}}:project/{name}' for name in names
    }
    groups = {
        json.dumps({"Fn::GetAtt": [lid, "Arn"]})
        for lid in _resources(artifacts, "AWS::Logs::LogGroup")
        if lid.startswith(("WeightsStaging", "RecipeBuild"))
    }
    assert len(groups) == 2
    bucket = '{"Fn::GetAtt": ["ArtifactBucket", "Arn"]}'
    stack = (
        'arn:aws:cloudformation:{"Ref": "AWS::Region"}:{"Ref": "AWS::AccountId"}:stack/llm-endpoints-dev-artifacts/*'
    )
    expected = {
        "s3:ListBucket": {bucket},
        "s3:GetObject": {f"{bucket}/models/*"},  # HeadObject, and the fetch of the published manifest
        "s3:AbortMultipartUpload": {f"{bucket}/models/*"},
        # each job's spec beside the uploads: the staging spec, the recipe's config
        "s3:PutObject": {f"{bucket}/models/*", f"{bucket}/staging-specs/*", f"{bucket}/recipe-specs/*"},
        "cloudformation:DescribeStacks": {stack},
        "codebuild:ListBuildsForProject": projects,
        "codebuild:BatchGetBuilds": projects,  # status, log stream and the recipe's exported content hash
        "codebuild:StartBuild": projects,
        "logs:GetLogEvents": groups,
    }
    kms = {a for a in granted if a.startswith("kms:")}
    assert {a: r for a, r in granted.items() if a not in kms} == expected
