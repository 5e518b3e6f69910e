"""The CDK Pipelines stack (stacks/pipeline_stack.py), synthesized once from config/examples/pipeline.yaml.

What is verified here by assertions on the synthesized templates only: CodePipeline/CodeBuild cannot run locally
(the emulator has neither), so stage order, step commands, roles and gates are checked as CloudFormation, and the
templates are checked by cfn-lint and cdk-nag. Nothing here runs a build, an approval or a smoke test.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
from helpers import DOCKER_HUB_SECRET, PIPELINE_CONFIG, ROOT, TOOLS, cdk_context, environment_plans_with

CONFIG = PIPELINE_CONFIG
PIPELINE = "llm-endpoints-pipeline"
DEV, PROD = "111111111111", "444455556666"


@pytest.fixture(scope="session")
def piped(pipeline_synth):
    """(outdir, pipeline stack, template, {stage name: {stack name: (template, account, path)}}), synthesized once
    per session in conftest.py (tests/stacks/test_iam_coverage.py reads the same synthesis)."""
    return pipeline_synth


def _resources(template, type_name):
    return {lid: r for lid, r in template["Resources"].items() if r["Type"] == type_name}


def _pipeline_stages(template):
    [pipeline] = _resources(template, "AWS::CodePipeline::Pipeline").values()
    return pipeline["Properties"]["Stages"]


def _stage(template, name):
    return next(s for s in _pipeline_stages(template) if s["Name"] == name)


def _flat(value) -> str:
    """A CloudFormation value as text: Fn::Join parts concatenated, other intrinsics as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(_flat(p) for p in parts)
    if isinstance(value, dict) and value == {"Ref": "AWS::Partition"}:
        return "aws"
    return json.dumps(value)


def _project_for(template, stage_name, action_name):
    action = next(a for a in _stage(template, stage_name)["Actions"] if a["Name"] == action_name)
    lid = action["Configuration"]["ProjectName"]["Ref"]
    return template["Resources"][lid]


def _buildspec(project) -> dict:
    return json.loads(_flat(project["Properties"]["Source"]["BuildSpec"]))


def _role_statements(template, role_lid):
    return [
        s
        for r in _resources(template, "AWS::IAM::Policy").values()
        if {"Ref": role_lid} in r["Properties"]["Roles"]
        for s in r["Properties"]["PolicyDocument"]["Statement"]
    ]


def _project_role_lid(project):
    return project["Properties"]["ServiceRole"]["Fn::GetAtt"][0]


def test_stage_order_dev_then_approval_then_prod(piped):
    _, _, template, _ = piped
    names = [s["Name"] for s in _pipeline_stages(template)]
    assert names == [
        "Source",
        "Build",
        "UpdatePipeline",
        "Assets",
        "dev-artifacts",
        "dev-endpoints",
        "dev-slo-gate",
        "prod-artifacts",
        "prod-endpoints",
        "prod-slo-gate",
    ]
    [source] = _stage(template, "Source")["Actions"]
    assert source["ActionTypeId"]["Provider"] == "CodeStarSourceConnection"
    assert source["Configuration"]["FullRepositoryId"] == "example-org/llm-sagemaker-endpoints"
    assert source["Configuration"]["BranchName"] == "main"
    assert source["Configuration"]["ConnectionArn"].startswith("arn:aws:codeconnections:us-east-1:111111111111:")


def test_manual_approval_runs_before_prod_deploys_only(piped):
    _, _, template, _ = piped
    approvals = [
        (stage["Name"], a)
        for stage in _pipeline_stages(template)
        for a in stage["Actions"]
        if a["ActionTypeId"]["Category"] == "Approval"
    ]
    assert [(name, a["Name"]) for name, a in approvals] == [("prod-artifacts", "Approve-prod")]
    prod = _stage(template, "prod-artifacts")["Actions"]
    approval_order = approvals[0][1]["RunOrder"]
    assert all(a["RunOrder"] > approval_order for a in prod if a["ActionTypeId"]["Category"] == "Deploy")


def test_endpoints_stage_holds_the_stack_deploys_only_built_before_and_gated_after(piped):
    _, _, template, _ = piped
    for env in ("dev", "prod"):
        actions = _stage(template, f"{env}-endpoints")["Actions"]
        order = {a["Name"]: a["RunOrder"] for a in actions}
        deploys = [o for n, o in order.items() if n.endswith(("Prepare", "Deploy"))]
        assert deploys, order
        assert "ModelBuild" not in order and "Preflight" not in order  # F4: their failure must not roll it back
        # F4: nothing but the stack deploys (each runs its stack's own smoke check); the SLO gate is the next stage
        assert set(order) == {n for n in order if n.endswith(("Prepare", "Deploy"))}, order
        # The model is built and published in the stage before, after the artifact stack (its bucket) deployed.
        artifacts = {a["Name"]: a for a in _stage(template, f"{env}-artifacts")["Actions"]}
        stack_deploys = [a["RunOrder"] for a in artifacts.values() if a["ActionTypeId"]["Provider"] == "CloudFormation"]
        assert (
            stack_deploys
            and max(stack_deploys) < artifacts["Preflight"]["RunOrder"] < artifacts["ModelBuild"]["RunOrder"]
        )


def test_synth_step_installs_only_the_deploy_set_and_synthesizes_in_the_venv(piped):
    """`npx cdk synth` in a clean CodeBuild shell ran the system python3 (no aws_cdk): the synth step goes through
    make, which puts the venv first on PATH (tests/stacks/test_buildspecs.py runs these commands in a clean shell)."""
    _, _, template, _ = piped
    spec = _buildspec(_project_for(template, "Build", "Synth"))
    assert spec["phases"]["install"]["commands"] == ["make venv-deploy cdk-cli"]
    assert spec["phases"]["build"]["commands"] == [f"make synth-pipeline CONFIG={CONFIG}"]
    assert spec["phases"]["install"]["runtime-versions"] == {"python": "3.12", "nodejs": "24"}
    assert spec["artifacts"]["base-directory"] == "cdk.out"
    assert any(s["Name"] == "UpdatePipeline" for s in _pipeline_stages(template)), "self-mutation is on"


def test_tests_gate_the_first_environment_before_its_approval(piped):
    _, _, template, _ = piped
    stage = _stage(template, "dev-artifacts")
    actions = {a["Name"]: a for a in stage["Actions"]}
    spec = _buildspec(_project_for(template, "dev-artifacts", "Tests"))
    assert spec["phases"]["build"]["commands"] == ["make test"]
    assert spec["phases"]["install"]["runtime-versions"] == {"python": "3.12", "nodejs": "24"}
    deploys = [a for name, a in actions.items() if name not in ("Tests",)]
    assert all(a["RunOrder"] > actions["Tests"]["RunOrder"] for a in deploys)


def test_every_curated_codebuild_image_pins_its_runtimes_and_the_cli_versions_are_the_tested_ones(piped):
    """standard:7.0 defaults to Node 18 and Python 3.11; CDK Pipelines' self-mutation installed `aws-cdk@2` and the
    asset projects `cdk-assets@latest` (CLI 3.x cannot read this aws-cdk-lib's assemblies)."""
    from stacks.pipeline_stack import CDK_ASSETS_VERSION, CDK_CLI_VERSION

    _, _, template, _ = piped
    projects = _resources(template, "AWS::CodeBuild::Project")
    assert len(projects) >= 6
    for lid, project in projects.items():
        environment = project["Properties"]["Environment"]
        spec = _buildspec(project)
        assert _flat(environment["Image"]) == "aws/codebuild/standard:8.0", lid
        assert spec["phases"]["install"]["runtime-versions"] == {"python": "3.12", "nodejs": "24"}, lid
        install = " ".join(spec["phases"]["install"].get("commands", []))
        if "npm install -g aws-cdk" in install:
            assert f"aws-cdk@{CDK_CLI_VERSION}" in install
        if "cdk-assets" in install:
            assert f"cdk-assets@{CDK_ASSETS_VERSION}" in install
    assert json.loads((ROOT / "package.json").read_text())["devDependencies"]["aws-cdk"] == CDK_CLI_VERSION


def test_the_connection_source_may_use_the_connection_under_both_service_prefixes(piped):
    _, _, template, _ = piped
    granted = set()
    for policy in _resources(template, "AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            if "codeconnections:UseConnection" in actions:
                assert "codestar-connections:UseConnection" in actions
                resources = (
                    statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
                )
                granted |= {r.split(":")[2] for r in resources}
    assert granted == {"codestar-connections", "codeconnections"}


def test_model_build_step_builds_and_publishes_each_endpoint_with_the_configured_compute(piped):
    _, _, template, _ = piped
    for env, account in (("dev", DEV), ("prod", PROD)):
        project = _project_for(template, f"{env}-artifacts", "ModelBuild")
        environment = project["Properties"]["Environment"]
        assert environment["ComputeType"] == "BUILD_GENERAL1_2XLARGE"  # pipeline.build.compute: X2_LARGE
        assert environment["Type"] == "LINUX_CONTAINER" and environment.get("PrivilegedMode") is not True
        spec = _buildspec(project)
        install = " ".join(spec["phases"]["install"]["commands"])
        assert f"role_arn = arn:aws:iam::{account}:role/llm-endpoints-{env}-model-publisher" in install
        assert "credential_source = EcsContainer" in install
        [command] = spec["phases"]["build"]["commands"]
        where = f"--config {CONFIG} --env {env} --endpoint gptj-fastload"
        # hf-fastload converts the Hub model: the recipe runs (and publishes) in the account's recipe build project,
        # not on this step's compute; the step follows it (docs/design/staging.md "The pipeline")
        assert f"python -m model_build build --in-account {where}" in command
        assert "model_build publish" not in command and "--quiet" not in command
        # A published pinned artifact (its manifest.json) skips the rebuild.
        assert f"llm-endpoints-{env}-artifacts-{account}-us-east-1 models/gptj-fastload/5f0c3c7a" in command
        assert {"Name": "AWS_PROFILE", "Type": "PLAINTEXT", "Value": "publisher"} in environment["EnvironmentVariables"]


def test_build_and_gate_codebuild_roles_may_only_assume_their_target_role(piped):
    _, _, template, _ = piped
    for env, account in (("dev", DEV), ("prod", PROD)):
        for stage, action, target in (
            ("artifacts", "ModelBuild", "model-publisher"),
            ("slo-gate", "SloGate-gptj-fastload", "gptj-fastload-slo"),
        ):
            role_lid = _project_role_lid(_project_for(template, f"{env}-{stage}", action))
            statements = _role_statements(template, role_lid)
            own = [s for s in statements if "sts:AssumeRole" in json.dumps(s["Action"])]
            assert [(s["Action"], _flat(s["Resource"])) for s in own] == [
                ("sts:AssumeRole", f"arn:aws:iam::{account}:role/llm-endpoints-{env}-{target}")
            ]
            # Everything else is CodeBuild's own default grant: logs, reports, the pipeline's artifact bucket + key.
            for s in statements:
                if s in own:
                    continue
                actions = s["Action"] if isinstance(s["Action"], list) else [s["Action"]]
                assert all(a.split(":")[0] in {"logs", "codebuild", "s3", "kms"} for a in actions), s
                assert not any(a.startswith(("sagemaker:", "iam:", "cloudformation:")) for a in actions), s


def test_publisher_role_writes_only_models_prefix_of_its_bucket_and_trusts_one_pipeline_role(piped):
    _, _, _, stages = piped
    for env in ("dev", "prod"):
        template, _, _ = stages[f"{env}-artifacts"][f"llm-endpoints-{env}-artifacts"]
        roles = {
            lid: r for lid, r in _resources(template, "AWS::IAM::Role").items() if lid.startswith("ModelPublisherRole")
        }
        [(lid, role)] = roles.items()
        assert role["Properties"]["RoleName"] == f"llm-endpoints-{env}-model-publisher"
        [trust] = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert _flat(trust["Principal"]["AWS"]) == f"arn:aws:iam::{TOOLS}:root"
        assert _flat(trust["Condition"]["ArnEquals"]["aws:PrincipalArn"]) == (
            f"arn:aws:iam::{TOOLS}:role/llm-endpoints-{env}-model-build"
        )
        statements = _role_statements(template, lid)
        by_action = {json.dumps(s["Action"]): s for s in statements}
        # publish's own calls, and what it needs to start and follow the staging job for a Hub model's staged build
        # (exactly: tests/stacks/test_pipeline_staging.py)
        assert set(by_action) == {
            '"s3:ListBucket"',
            '["s3:AbortMultipartUpload", "s3:GetObject", "s3:PutObject"]',
            '"s3:PutObject"',
            '"cloudformation:DescribeStacks"',
            '["codebuild:BatchGetBuilds", "codebuild:ListBuildsForProject", "codebuild:StartBuild"]',
            '"logs:GetLogEvents"',
        }
        # the staging job's and the recipe build's specs (the config converts a Hub model: build --in-account)
        specs = by_action['"s3:PutObject"']["Resource"]
        assert sorted(r["Fn::Join"][1][1] for r in specs) == ["/recipe-specs/*", "/staging-specs/*"]
        assert all(r["Fn::Join"][1][0] == {"Fn::GetAtt": ["ArtifactBucket", "Arn"]} for r in specs)
        write = by_action['["s3:AbortMultipartUpload", "s3:GetObject", "s3:PutObject"]']
        assert write["Resource"] == {"Fn::Join": ["", [{"Fn::GetAtt": ["ArtifactBucket", "Arn"]}, "/models/*"]]}
        assert by_action['"s3:ListBucket"']["Resource"] == {"Fn::GetAtt": ["ArtifactBucket", "Arn"]}


def test_no_pipeline_smoke_roles_remain(piped):
    """The pipeline runs no smoke step (each deploy ran its stack's smoke check), so neither its CodeBuild role nor
    the endpoint stack's role for it exists: no role of the pipeline or an endpoint stack is named *-smoke or
    *-smoke-cb (least privilege: nothing may assume a role no step uses)."""
    _, _, template, stages = piped
    templates = [template] + [t for stacks in stages.values() for (t, _, _) in stacks.values()]
    names = [
        json.dumps(r["Properties"].get("RoleName"))
        for t in templates
        for r in _resources(t, "AWS::IAM::Role").values()
        if r["Properties"].get("RoleName") is not None
    ]
    assert names and not [n for n in names if n.rstrip('"').endswith(("-smoke", "-smoke-cb"))], names


def test_artifact_bucket_is_kms_encrypted_with_key_rotation(piped):
    _, _, template, _ = piped
    [key] = _resources(template, "AWS::KMS::Key").values()
    assert key["Properties"]["EnableKeyRotation"] is True
    [pipeline] = _resources(template, "AWS::CodePipeline::Pipeline").values()
    store = pipeline["Properties"]["ArtifactStore"]
    assert store["EncryptionKey"]["Type"] == "KMS"
    buckets = _resources(template, "AWS::S3::Bucket")
    [bucket] = buckets.values()
    [rule] = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
    for project in _resources(template, "AWS::CodeBuild::Project").values():
        assert "EncryptionKey" in project["Properties"]


def test_prod_is_deployed_cross_account_through_its_bootstrap_roles(piped):
    _, _, template, stages = piped
    for env, account in (("dev", DEV), ("prod", PROD)):
        for stage in (f"{env}-artifacts", f"{env}-endpoints"):
            assert {acct for _, acct, _ in stages[stage].values()} == {account}
            deploys = [
                a for a in _stage(template, stage)["Actions"] if a["ActionTypeId"]["Provider"] == "CloudFormation"
            ]
            assert deploys and all(
                f":iam::{account}:role/cdk-hnb659fds-deploy-role-{account}-us-east-1" in _flat(a["RoleArn"])
                for a in deploys
            )
    # The pipeline's key may be used by the prod account (cross-account keys).
    [key] = _resources(template, "AWS::KMS::Key").values()
    assert PROD in json.dumps(key["Properties"]["KeyPolicy"])


def test_synth_needs_no_docker(piped):
    _, _, template, _ = piped
    synth = _project_for(template, "Build", "Synth")
    assert synth["Properties"]["Environment"].get("PrivilegedMode") is not True


def test_cdk_nag_is_clean_on_pipeline_and_stage_stacks(piped):
    outdir, _, _, _ = piped
    report = json.loads((outdir / "validation-report.json").read_text())
    assert report.get("pluginReports"), "cdk-nag did not run"
    violations = [
        v
        for plugin in report["pluginReports"]
        for v in plugin.get("violations", [])
        if not v["ruleName"].startswith("Annotation::llm-endpoints:")
    ]
    assert violations == []


# ------------------------------------------------------------------------------------------ config errors (no synth)


def test_pipeline_flag_without_pipeline_section_is_a_config_error():
    import aws_cdk as cdk

    from endpoint_config import ConfigError
    from stacks.pipeline_stack import add_pipeline

    with pytest.raises(ConfigError, match=r"pipeline: required key is missing: -c pipeline=true"):
        add_pipeline(cdk.App(context=cdk_context()), "config/examples/hf-fastload.yaml")


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"endpoints.0.artifact_hash": None}, r"endpoint 'gptj-fastload': artifact_hash: required key is missing"),
        (
            {"pipeline.build": {"compute": "X2_LARGE", "gpu": True}},
            r"pipeline.build.compute: value 'X2_LARGE' is not offered on CodeBuild's GPU fleet; allowed with gpu: true: SMALL, LARGE",
        ),
        (
            {"environments.prod.region": "us-west-2"},
            r"environment 'prod': region: value 'us-west-2' differs from the pipeline's region 'us-east-1'",
        ),
    ],
)
def test_pipeline_config_problems_are_reported(changes, message):
    """The schema's pipeline rules fail when the file is read (load_config, cdk synth alike); the region rule, which
    needs the pipeline's resolved region, when the pipeline stack is synthesized (deployment.check_pipeline)."""
    from deployment import check_pipeline
    from endpoint_config import ConfigError

    with pytest.raises(ConfigError, match=message):
        environment_plans, spec = environment_plans_with(**changes)
        check_pipeline(CONFIG, environment_plans, spec, "us-east-1")


def test_pipeline_rules_are_reported_by_load_config(tmp_path):
    import yaml

    from deployment import load_config
    from endpoint_config import ConfigError

    raw = yaml.safe_load((ROOT / CONFIG).read_text())
    raw["endpoints"][0].pop("artifact_hash")
    raw["pipeline"]["build"] = {"compute": "MEDIUM", "gpu": True}
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError) as err:
        load_config(path, "dev")
    message = str(err.value)
    assert message.startswith(f"{path}: invalid config:\n  - pipeline.build.compute: value 'MEDIUM' is not offered")
    assert "environment 'dev': endpoint 'gptj-fastload': artifact_hash: required key is missing" in message
    assert "environment 'prod': endpoint 'gptj-fastload': artifact_hash: required key is missing" in message


def test_gpu_build_uses_a_linux_gpu_image_and_its_compute(gpu_pipeline):
    from stacks.pipeline_stack import GPU_BUILD_IMAGE

    template = gpu_pipeline
    environment = _project_for(template, "dev-artifacts", "ModelBuild")["Properties"]["Environment"]
    assert (environment["Type"], environment["ComputeType"]) == ("LINUX_GPU_CONTAINER", "BUILD_GENERAL1_SMALL")
    image = _flat(environment["Image"])
    assert image.startswith("763104351884.dkr.ecr.") and image.endswith(f"/pytorch-inference:{GPU_BUILD_IMAGE.gpu_tag}")
    assert (
        "runtime-versions" not in _buildspec(_project_for(template, "dev-artifacts", "ModelBuild"))["phases"]["install"]
    )

    # The token: read by CodeBuild at build start, never in the template; the project role may read that secret.
    [variable] = [v for v in environment["EnvironmentVariables"] if v["Name"] == "HF_TOKEN"]
    assert variable == {"Name": "HF_TOKEN", "Type": "SECRETS_MANAGER", "Value": "hf/read-token:token"}
    role_lid = _project_for(template, "dev-artifacts", "ModelBuild")["Properties"]["ServiceRole"]["Fn::GetAtt"][0]
    reads = [
        s for s in _role_statements(template, role_lid) if "secretsmanager:GetSecretValue" in json.dumps(s["Action"])
    ]
    assert reads and all("hf/read-token" in json.dumps(s["Resource"]) for s in reads)

    # The own image: built by an asset project of the configured size and timeout, after a Docker Hub login.
    projects = _resources(template, "AWS::CodeBuild::Project")
    images = [p for lid, p in projects.items() if lid.startswith("PipelineAssetsDockerAsset")]
    assert images, "the deepspeed-byoc image is published by an asset project"
    for project in images:
        assert project["Properties"]["Environment"]["ComputeType"] == "BUILD_GENERAL1_2XLARGE"
        assert project["Properties"]["TimeoutInMinutes"] == 180
        assert project["Properties"]["Environment"]["PrivilegedMode"] is True
        login = json.loads(_buildspec(project)["phases"]["pre_build"]["commands"][1].split("'")[1])
        assert login["domainCredentials"] == {
            "https://index.docker.io/v1/": {"secretsManagerSecretId": DOCKER_HUB_SECRET}
        }
    # The CPU default stays on CodeBuild's curated image (see the main synth).


def test_role_names_fit_iam_limit():
    from stacks.pipeline_stack import role_name

    assert role_name("llm-endpoints", "dev", "model-build") == "llm-endpoints-dev-model-build"
    long = role_name("p" * 20, "e" * 12, "x" * 40, "smoke-cb")
    assert len(long) <= 64 and long != role_name("p" * 20, "e" * 12, "x" * 39 + "y", "smoke-cb")


def _warnings(outdir) -> str:
    """The assembly's annotations (manifest.json and the stacks' *.metadata.json files)."""
    return "".join(p.read_text() for p in [outdir / "manifest.json", *sorted(outdir.glob("*.metadata.json"))])


def test_synth_warns_what_only_a_pipeline_run_would_show(piped, tmp_path):
    """An own image on Docker Hub without a login is rate-limited: said at synth, where the pipeline's reviewer reads."""
    import aws_cdk as cdk

    from stacks.pipeline_stack import PipelineStack
    from systems import get_system
    from systems.base import docker_hub_bases

    outdir = piped[0]
    assert "llm-endpoints:docker-hub-anonymous" not in _warnings(outdir)  # hf-fastload: no own image
    assert docker_hub_bases(get_system("deepspeed-byoc").own_container) == [
        "pytorch/pytorch:2.1.2-cuda12.1-cudnn8-devel"
    ]
    assert docker_hub_bases(get_system("tensorrt-byoc").own_container) == []  # nvcr.io

    environment_plans, spec = environment_plans_with(
        **{"endpoints.0.system": "deepspeed-byoc", "pipeline.stages": ["dev"], "pipeline.manual_approval_before": []}
    )
    app = cdk.App(context=cdk_context(), outdir=str(tmp_path))
    PipelineStack(
        app,
        "P",
        config_path=CONFIG,
        environment_plans=environment_plans,
        pipeline=spec,
        env={"account": TOOLS, "region": "us-east-1"},
    )
    app.synth()
    assert "builds from pytorch/pytorch:2.1.2-cuda12.1-cudnn8-devel on Docker Hub" in _warnings(tmp_path)


# ------------------------------------------------------------------------------------------ no role acts on "*"
# Which actions have resource types: cfn-lint's copy of the Service Authorization Reference (cfnlint/data/
# AdditionalSpecs/Policies.json, cfn-lint 1.58: "Resources" per action, none for an action that takes none).
# The one exception, reviewed: the self-mutation project reads the bootstrap stack's status (DescribeStacks) and
# the bootstrap bucket (ListBucket) with its own credentials, which CDK Pipelines grants on "*" because the bootstrap
# names are per account (aws-cdk-lib pipelines codepipeline.ts, "needed to check the status of the bootstrap stack
# when doing `cdk deploy`"); the project already runs `cdk deploy` through the bootstrap deploy role.
STAR_EXCEPTIONS = {
    ("PipelineUpdatePipelineSelfMutationRole", "cloudformation:DescribeStacks"),
    ("PipelineUpdatePipelineSelfMutationRole", "s3:ListBucket"),
}


@functools.cache
def _policy_specs() -> dict:
    import importlib.util

    package = Path(importlib.util.find_spec("cfnlint").origin).parent  # located, not imported (slow to import)
    return json.loads((package / "data" / "AdditionalSpecs" / "Policies.json").read_text())


def _resource_types(action: str) -> list[str]:
    service, name = action.split(":")
    [entry] = [v for k, v in _policy_specs()[service]["Actions"].items() if k.lower() == name.lower()]
    return entry.get("Resources", [])


def star_grants(template) -> list[tuple[str, str]]:
    """(role logical id, action) of every Allow on Resource "*" of an action that has a resource type."""
    found = []
    for policy in _resources(template, "AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            resources = statement.get("Resource")
            if statement["Effect"] != "Allow" or "*" not in (resources if isinstance(resources, list) else [resources]):
                continue
            for action in statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]:
                if "*" in action or _resource_types(action):  # a wildcard action is treated as naming resources
                    found += [(role["Ref"], action) for role in policy["Properties"]["Roles"]]
    return found


def test_no_pipeline_role_may_act_on_every_resource_of_an_action_that_names_resources(piped, gpu_pipeline):
    """CDK Pipelines granted its asset roles codebuild:StartBuild on "*": an asset build could start the model build
    project, whose role may assume the publisher role, with a buildspec override. The asset roles now start only their
    own asset projects; no other pipeline role acts on "*" but where the action has no resource type
    (ecr:GetAuthorizationToken of the GPU build) and the reviewed exception."""
    for template in (piped[2], gpu_pipeline):
        left = [
            (role, action)
            for role, action in star_grants(template)
            if not any(role.startswith(prefix) and action == a for prefix, a in STAR_EXCEPTIONS)
        ]
        assert left == []
    # Both asset kinds (files; the GPU pipeline's own image too) start exactly their own projects.
    for template in (piped[2], gpu_pipeline):
        roles = {lid for lid in _resources(template, "AWS::IAM::Role") if lid.startswith("PipelineAssets")}
        assert roles, "the pipeline publishes assets"
        for role in roles:
            projects = sorted(
                lid
                for lid, p in _resources(template, "AWS::CodeBuild::Project").items()
                if p["Properties"]["ServiceRole"] == {"Fn::GetAtt": [role, "Arn"]}
            )
            [policy] = [
                p
                for p in _resources(template, "AWS::IAM::Policy").values()
                if {"Ref": role} in p["Properties"]["Roles"]
            ]
            [builds] = [
                s for s in policy["Properties"]["PolicyDocument"]["Statement"] if "codebuild:StartBuild" in s["Action"]
            ]
            assert sorted(r["Fn::GetAtt"][0] for r in builds["Resource"]) == projects and projects, role
    kinds = {
        lid.removeprefix("PipelineAssets")[:4]
        for lid in _resources(gpu_pipeline, "AWS::IAM::Role")
        if lid.startswith("PipelineAssets")
    }
    assert kinds == {"File", "Dock"}


def test_the_star_check_reports_the_old_asset_grant(piped):
    """What CDK Pipelines wrote (aws-cdk-lib 2.273 asset-singleton-role.js) is reported by the check."""
    old = {
        "Resources": {
            "PipelineAssetsFileRoleDefaultPolicy": {
                "Type": "AWS::IAM::Policy",
                "Properties": {
                    "Roles": [{"Ref": "PipelineAssetsFileRole59943A77"}],
                    "PolicyDocument": {
                        "Statement": [
                            {
                                "Effect": "Allow",
                                "Action": ["codebuild:BatchGetBuilds", "codebuild:StartBuild", "codebuild:StopBuild"],
                                "Resource": "*",
                            },
                            {"Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"},
                        ]
                    },
                },
            }
        }
    }
    assert star_grants(old) == [
        ("PipelineAssetsFileRole59943A77", a)
        for a in ("codebuild:BatchGetBuilds", "codebuild:StartBuild", "codebuild:StopBuild")
    ]
