"""The recipe build in the artifacts stack (stacks/recipe_build.py): a CodeBuild project that runs a converting
system's `model_build build` + `publish` for one endpoint from an S3 asset of the code model_build needs, a role with
exactly those calls, trusted by CodeBuild for this project only; present only where an endpoint converts a Hub model,
never on the emulator; cdk-nag (at synth) and cfn-lint pass."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, cfn_lint_findings

CONFIG = "config/examples/hf-fastload.yaml"  # gptj-fastload: hf-fastload (fp16 reshard) of EleutherAI/gpt-j-6B


@pytest.fixture(scope="module")
def artifacts(synth):
    synthesized = synth(CONFIG, "dev")
    name = next(n for n in synthesized.templates if n.endswith("-artifacts"))
    return synthesized, name


def _project(template: dict) -> tuple[str, dict]:
    (found,) = [
        (k, v)
        for k, v in template["Resources"].items()
        if v["Type"] == "AWS::CodeBuild::Project" and v["Properties"]["Name"].endswith("-recipe-build")
    ]
    return found


def _statements(template: dict) -> tuple[dict, list[dict]]:
    _, project = _project(template)
    role_id = project["Properties"]["ServiceRole"]["Fn::GetAtt"][0]
    policies = [
        p
        for p in template["Resources"].values()
        if p["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in p["Properties"]["Roles"]
    ]
    return template["Resources"][role_id], [s for p in policies for s in p["Properties"]["PolicyDocument"]["Statement"]]


def _actions(statement: dict) -> list[str]:
    acts = statement["Action"]
    return sorted([acts] if isinstance(acts, str) else acts)


def _resource_text(statement: dict) -> str:
    return json.dumps(statement["Resource"])


def test_the_project_runs_build_then_publish_after_the_build_venv(artifacts):
    synthesized, name = artifacts
    template = synthesized.templates[name]
    _, project = _project(template)
    props = project["Properties"]
    assert props["Name"] == "llm-endpoints-dev-recipe-build"
    assert props["Environment"]["ComputeType"] == "BUILD_GENERAL1_LARGE"  # each StartBuild overrides it, sized
    spec = json.loads(props["Source"]["BuildSpec"])
    assert spec["phases"]["install"]["commands"] == ["make venv-build"]
    assert 'aws s3 cp "$RECIPE_CONFIG" /tmp/recipe/config.yaml' in spec["phases"]["pre_build"]["commands"][0]
    build, publish, export = spec["phases"]["build"]["commands"]
    where = '--config /tmp/recipe/config.yaml --env "$RECIPE_ENV" --endpoint "$RECIPE_ENDPOINT"'
    assert build.endswith(f".venv/bin/python -m model_build build {where}")
    assert publish == f".venv/bin/python -m model_build publish {where}"
    # the content hash, once published, for `model_build build --in-account` (BatchGetBuilds)
    assert spec["env"]["exported-variables"] == ["RECIPE_CONTENT_HASH"]
    assert export.endswith("&& export RECIPE_CONTENT_HASH")
    outputs = {k: v["Value"] for k, v in template["Outputs"].items()}
    assert outputs["RecipeBuildProject"] == props["Name"]


def test_the_buildspec_s_commands_parse_with_model_build_s_own_cli():
    """What the project runs is what model_build accepts: each command's arguments through its parser."""
    import shlex

    from model_build.cli import parser
    from stacks.recipe_build import buildspec

    commands = [c for c in buildspec()["phases"]["build"]["commands"] if "-m model_build" in c]
    assert len(commands) == 2
    for command in commands:
        command = command.split("&& ")[-1].replace('"$RECIPE_ENV"', "dev").replace('"$RECIPE_ENDPOINT"', "e")
        args = parser().parse_args(shlex.split(command)[3:])
        assert (args.config, args.env, args.endpoint) == ("/tmp/recipe/config.yaml", "dev", "e")


def _export_command_in_bash(tmp_path: Path, manifest: str | None) -> subprocess.CompletedProcess:
    """The buildspec's export command in bash, in a folder laid out as the build leaves its source directory
    (.venv/bin/python, artifact/, build/<endpoint>/manifest.json), then the variable as the build ends with it."""
    from stacks.recipe_build import buildspec

    export = buildspec()["phases"]["build"]["commands"][-1]
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").symlink_to(sys.executable)
    (tmp_path / "artifact").symlink_to(ROOT / "artifact")
    if manifest is not None:
        (tmp_path / "build" / "e").mkdir(parents=True)
        (tmp_path / "build" / "e" / "manifest.json").write_text(manifest)
    return subprocess.run(
        ["bash", "-c", f'{export} && echo "exported=$RECIPE_CONTENT_HASH"'],
        cwd=tmp_path,
        env={"RECIPE_ENDPOINT": "e", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_build_exports_the_published_manifest_s_content_hash(tmp_path):
    content_hash = "ab" * 32
    done = _export_command_in_bash(tmp_path, json.dumps({"files": [], "content_hash": content_hash}))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"exported={content_hash}"


def test_the_export_fails_the_build_when_there_is_no_manifest(tmp_path):
    done = _export_command_in_bash(tmp_path, None)
    assert done.returncode != 0 and "exported=" not in done.stdout
    assert "does not exist" in done.stderr


def test_the_code_asset_holds_what_model_build_needs_and_nothing_else(artifacts):
    from stacks.recipe_build import CODE

    synthesized, name = artifacts
    manifest = json.loads((synthesized.outdir / f"{name}.assets.json").read_text())
    sources = [f["source"]["path"] for f in manifest["files"].values() if f["source"].get("packaging") == "zip"]
    [code] = [synthesized.outdir / p for p in sources if (synthesized.outdir / p / "model_build").is_dir()]
    assert sorted(p.name for p in code.iterdir()) == sorted(CODE)
    assert not list(code.rglob("__pycache__")) and not list(code.rglob("*.pyc"))
    # every file git tracks under those names travels (the data files of systems/ and facts/ too)
    tracked = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *CODE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    shipped = sorted(str(p.relative_to(code)) for p in code.rglob("*") if p.is_file())
    assert shipped == sorted(tracked)
    # the install phase's target resolves from the asset alone (make -n: what it would run)
    dry = subprocess.run(["make", "-n", "venv-build"], cwd=code, capture_output=True, text=True)
    assert dry.returncode == 0 and "-r requirements-build.txt" in dry.stdout, dry.stderr
    size = sum(p.stat().st_size for p in code.rglob("*") if p.is_file())
    assert size < 20 * 1024**2, f"the code asset is {size:,} bytes"
    # model_build's packages, per tests/test_architecture.py: nothing it imports is left out
    from test_architecture import ALLOWED

    for package in ALLOWED["model_build"] | {"model_build"}:
        assert (code / package).exists() or (code / f"{package}.py").exists(), package


def test_the_role_has_exactly_build_and_publish_s_calls(artifacts):
    synthesized, name = artifacts
    template = synthesized.templates[name]
    _, statements = _statements(template)
    found = {(tuple(_actions(s)), _resource_text(s)) for s in statements}
    by_actions = {a: r for a, r in found}
    assert by_actions[("s3:ListBucket",)].count("Arn") >= 1
    models = by_actions[("s3:AbortMultipartUpload", "s3:GetObject", "s3:PutObject")]
    assert '"/models/*"' in models
    specs = by_actions[("s3:GetObject",)]
    assert '"/recipe-specs/*"' in specs
    assert (
        "cdk-" in by_actions[("s3:GetObject", "s3:GetObjectVersion")]
        or "Fn::Sub" in by_actions[("s3:GetObject", "s3:GetObjectVersion")]
    )
    assert ("logs:CreateLogStream", "logs:PutLogEvents") in by_actions
    allowed = {
        ("s3:ListBucket",),
        ("s3:AbortMultipartUpload", "s3:GetObject", "s3:PutObject"),
        ("s3:GetObject",),
        ("s3:GetObject", "s3:GetObjectVersion"),
        ("logs:CreateLogStream", "logs:PutLogEvents"),
    }
    # no token secret in this config: no Secrets Manager; a bucket key adds only KMS (grant_s3_use)
    extra = {a for a in by_actions if a not in allowed}
    assert all(all(x.startswith("kms:") for x in a) for a in extra), extra


def test_the_trust_is_codebuild_for_this_project_only(artifacts):
    synthesized, name = artifacts
    role, _ = _statements(synthesized.templates[name])
    (statement,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "codebuild.amazonaws.com"}
    assert statement["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    arn = json.dumps(statement["Condition"]["ArnLike"]["aws:SourceArn"])
    assert arn.endswith(':project/llm-endpoints-dev-recipe-build"]]}')


def test_a_token_secret_is_the_only_secret_the_role_reads():
    import aws_cdk as cdk
    from aws_cdk import aws_s3 as s3
    from helpers import cdk_context

    from stacks.recipe_build import RecipeBuild

    app = cdk.App(context=cdk_context())
    stack = cdk.Stack(app, "S")
    bucket = s3.Bucket(stack, "ArtifactBucket")
    RecipeBuild(stack, "R", project_name="p-dev-recipe-build", bucket=bucket, token_secrets=["hub/token"])
    template = app.synth().get_stack_by_name("S").template
    _, statements = _statements(template)
    (secrets,) = [s for s in statements if any(a.startswith("secretsmanager:") for a in _actions(s))]
    assert _actions(secrets) == ["secretsmanager:GetSecretValue"]
    assert ":secret:hub/token-??????" in _resource_text(secrets)


def test_no_recipe_project_without_a_converting_hub_model_nor_on_the_emulator(synth):
    """vllm-qwen3-32b stages its checkpoint (no recipe); config/local.yaml is the emulator (moto's CloudFormation
    has no CodeBuild) with a local tiny model."""
    for config, env in (("config/examples/vllm-qwen3-32b.yaml", "dev"), ("config/local.yaml", None)):
        synthesized = synth(config, env)
        name = next(n for n in synthesized.templates if n.endswith("-artifacts"))
        template = synthesized.templates[name]
        names = [
            r["Properties"]["Name"] for r in template["Resources"].values() if r["Type"] == "AWS::CodeBuild::Project"
        ]
        assert not any(n.endswith("-recipe-build") for n in names), config
        assert "RecipeBuildProject" not in template.get("Outputs", {})


def test_cfn_lint_passes_on_the_artifacts_template(artifacts, tmp_path):
    synthesized, name = artifacts
    path = tmp_path / f"{name}.template.json"
    path.write_text(json.dumps(synthesized.templates[name]))
    findings = [f for f in cfn_lint_findings([path]) if f["Rule"]["Id"] != "W3005"]
    assert findings == [], findings
