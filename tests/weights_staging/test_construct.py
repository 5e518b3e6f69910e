"""The staging job's place in the artifacts stack (stacks/weights_staging.py): a CodeBuild project on SMALL compute
running the job's own code from an S3 asset, a role with exactly the job's calls on the bucket's models/* and spec
prefixes, trusted by CodeBuild for this project only; left out on the emulator (moto's CloudFormation has no
CodeBuild); cdk-nag (at synth) and cfn-lint pass."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import ROOT, cfn_lint_findings

CONFIG = "config/examples/vllm-qwen3-32b.yaml"


@pytest.fixture(scope="module")
def artifacts(synth):
    synthesized = synth(CONFIG, "dev")
    name = next(n for n in synthesized.templates if n.endswith("-artifacts"))
    return synthesized, name


def _resources(template: dict, type_name: str) -> dict[str, dict]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == type_name}


def _role_and_policy(template: dict) -> tuple[dict, list[dict]]:
    (project,) = _resources(template, "AWS::CodeBuild::Project").values()
    role_id = project["Properties"]["ServiceRole"]["Fn::GetAtt"][0]
    role = template["Resources"][role_id]
    policies = [
        p for p in _resources(template, "AWS::IAM::Policy").values() if {"Ref": role_id} in p["Properties"]["Roles"]
    ]
    statements = [s for p in policies for s in p["Properties"]["PolicyDocument"]["Statement"]]
    return role, statements


def _actions(statement: dict) -> list[str]:
    acts = statement["Action"]
    return sorted([acts] if isinstance(acts, str) else acts)


def test_the_project_runs_the_job_on_small_compute(artifacts):
    synthesized, name = artifacts
    template = synthesized.templates[name]
    (project,) = _resources(template, "AWS::CodeBuild::Project").values()
    props = project["Properties"]
    assert props["Environment"]["ComputeType"] == "BUILD_GENERAL1_SMALL"
    assert props["Name"] == "llm-endpoints-dev-weights-staging"
    spec = json.loads(props["Source"]["BuildSpec"])
    assert "python -u -m weights_staging" in spec["phases"]["build"]["commands"][-1]
    assert props["Source"]["Type"] == "S3" and props["Artifacts"]["Type"] == "NO_ARTIFACTS"
    # the project's own group (the stack also owns the auto-delete function's: stacks/artifact_store.py)
    group_id = props["LogsConfig"]["CloudWatchLogs"]["GroupName"]["Ref"]
    group = _resources(template, "AWS::Logs::LogGroup")[group_id]
    assert group["Properties"]["LogGroupName"] == f"/aws/codebuild/{props['Name']}"
    outputs = {k: v["Value"] for k, v in template["Outputs"].items()}
    assert props["Name"] in outputs.values()


def test_the_code_asset_holds_the_job_package_only(artifacts):
    synthesized, name = artifacts
    manifest = json.loads((synthesized.outdir / f"{name}.assets.json").read_text())
    sources = [f["source"]["path"] for f in manifest["files"].values() if f["source"].get("packaging") == "zip"]
    staged = [synthesized.outdir / p for p in sources if (synthesized.outdir / p / "job.py").is_file()]
    assert len(staged) == 1
    names = sorted(p.name for p in staged[0].iterdir())
    assert names == ["__init__.py", "__main__.py", "job.py"]


def test_the_job_runs_from_its_package_alone(tmp_path):
    """What the buildspec does: the asset's files copied into a folder named weights_staging, run with -m from its
    parent, nothing else of ours on the path (the package imports none of ours)."""
    import shutil

    shutil.copytree(
        ROOT / "weights_staging", tmp_path / "weights_staging", ignore=shutil.ignore_patterns("__pycache__")
    )
    done = subprocess.run(
        [sys.executable, "-E", "-s", "-m", "weights_staging", "--help"], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "--spec" in done.stdout and "--destination" in done.stdout


def test_the_role_may_do_exactly_what_the_job_calls(artifacts):
    synthesized, name = artifacts
    template = synthesized.templates[name]
    _, statements = _role_and_policy(template)
    by_actions = {tuple(_actions(s)): s["Resource"] for s in statements}
    text = json.dumps([[list(k), v] for k, v in by_actions.items()])
    assert set(by_actions) == {
        ("s3:GetObject",),
        ("s3:AbortMultipartUpload", "s3:PutObject"),
        ("s3:ListBucket", "s3:ListBucketMultipartUploads"),
        ("logs:CreateLogStream", "logs:PutLogEvents"),
        ("s3:GetObject", "s3:GetObjectVersion"),
    }, text
    reads = json.dumps(by_actions[("s3:GetObject",)])
    assert "/staging-specs/*" in reads and "/models/*" in reads
    writes = json.dumps(by_actions[("s3:AbortMultipartUpload", "s3:PutObject")])
    assert "/models/*" in writes and "staging-specs" not in writes
    listing = by_actions[("s3:ListBucket", "s3:ListBucketMultipartUploads")]
    assert listing == {"Fn::GetAtt": ["ArtifactBucket", "Arn"]}
    assert "secretsmanager" not in text  # the config names no Hub token secret
    assert not any(s.get("Effect") != "Allow" for s in statements)
    assert not any(
        "*" == r
        for s in statements
        for r in ([s["Resource"]] if isinstance(s["Resource"], (str, dict)) else s["Resource"])
    )


def test_only_codebuild_for_this_project_may_assume_the_role(artifacts):
    synthesized, name = artifacts
    template = synthesized.templates[name]
    role, _ = _role_and_policy(template)
    (statement,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "codebuild.amazonaws.com"}
    assert statement["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    arn = json.dumps(statement["Condition"]["ArnLike"]["aws:SourceArn"])
    assert ":codebuild:" in arn and arn.endswith(':project/llm-endpoints-dev-weights-staging"]]}')


def test_token_secrets_are_the_only_secrets_the_role_reads():
    """The construct alone in a stack: each secret named by name gets Secrets Manager's six-character suffix, an ARN
    is used as given, and nothing else of Secrets Manager is allowed."""
    import aws_cdk as cdk
    from aws_cdk import aws_s3 as s3
    from helpers import cdk_context

    from stacks.weights_staging import WeightsStaging

    app = cdk.App(context=cdk_context())
    stack = cdk.Stack(app, "S")
    bucket = s3.Bucket(stack, "ArtifactBucket")
    arn = "arn:aws:secretsmanager:us-east-1:111122223333:secret:hub-AbCdEf"
    WeightsStaging(stack, "W", project_name="p-dev-weights-staging", bucket=bucket, token_secrets=["hub/token", arn])
    template = app.synth().get_stack_by_name("S").template
    _, statements = _role_and_policy(template)
    (secrets,) = [s for s in statements if any(a.startswith("secretsmanager:") for a in _actions(s))]
    assert _actions(secrets) == ["secretsmanager:GetSecretValue"]
    resolved = json.dumps(secrets["Resource"])
    assert ":secret:hub/token-??????" in resolved and arn in resolved


def test_the_emulator_has_no_staging_project(synth):
    """Off on the emulator (moto 5.2.5's CloudFormation has no AWS::CodeBuild:: type): there `model_build
    stage` runs the job's code as a subprocess."""
    synthesized = synth("config/local.yaml")
    name = next(n for n in synthesized.templates if n.endswith("-artifacts"))
    template = synthesized.templates[name]
    assert _resources(template, "AWS::CodeBuild::Project") == {}
    assert "WeightsStagingProject" not in template.get("Outputs", {})


def test_cfn_lint_passes_on_the_artifacts_template(artifacts, tmp_path):
    synthesized, name = artifacts
    path = tmp_path / f"{name}.template.json"
    path.write_text(json.dumps(synthesized.templates[name]))
    findings = [f for f in cfn_lint_findings([path]) if f["Rule"]["Id"] != "W3005"]
    assert findings == [], findings


def test_a_config_naming_a_hub_token_secret_synthesizes_with_cdk_nag(tmp_path):
    """The whole app (cdk-nag included: an unacknowledged finding raises) for a config whose endpoint names
    hub_token_secret: the role reads that secret, by name with Secrets Manager's suffix, and no other."""
    from helpers import synthesize

    text = (
        (ROOT / CONFIG)
        .read_text()
        .replace("    model: Qwen/Qwen3-32B\n", "    model: Qwen/Qwen3-32B\n    hub_token_secret: hf/read-token\n")
    )
    config = tmp_path / "gated.yaml"
    config.write_text(text)
    synthesized = synthesize(config, "dev", tmp_path / "out")
    name = next(n for n in synthesized.templates if n.endswith("-artifacts"))
    _, statements = _role_and_policy(synthesized.templates[name])
    (secrets,) = [s for s in statements if any(a.startswith("secretsmanager:") for a in _actions(s))]
    assert _actions(secrets) == ["secretsmanager:GetSecretValue"]
    assert json.dumps(secrets["Resource"]).count(":secret:hf/read-token-??????") == 1
