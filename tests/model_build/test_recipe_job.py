"""`model_build build --in-account` (model_build/recipe_job.py): a converting recipe run by the artifacts stack's
recipe build project, its compute sized from the model's bytes or refused before anything starts, the config
uploaded as its spec, StartBuild with the sized compute and timeout and the endpoint's overrides, followed with
model_build/stage.py's follow_codebuild; refused clearly on the emulator and for endpoints it is not for."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from helpers import ROOT

from model_build import recipe_job
from model_build.recipe_job import GB, RecipeJobError, plan_recipe_build

ACCOUNT = "123456789012"


def _config(tmp_path: Path, *, emulator: bool = False, model: str = "gpt2", extra: str = "") -> Path:
    """config/local.yaml's hf-fastload endpoint (a converting recipe) with a Hub id for its model."""
    text = (ROOT / "config/local.yaml").read_text()
    if not emulator:
        text = text.replace("    emulator: true\n", "    emulator: false\n")
    text = text.replace("    model: build/tiny-models/gpt2 ", f"    model: {model}{extra} ")
    path = tmp_path / "recipe.yaml"
    path.write_text(text)
    return path


def _load(path: Path):
    from deployment import load_config

    environment_plan = load_config(path, None)
    return environment_plan, environment_plan.plans[0]


# ---------------------------------------------------------------------------------------------- sizing


def test_a_small_model_gets_large_compute_and_a_timeout_from_its_bytes():
    sized = plan_recipe_build(12 * GB)  # GPT-J 6B in fp16
    # disk: 12 + 2 x 12 (artifact, at most twice) + 20 (venv) = 56 GB <= LARGE's 128 GB
    assert (sized.compute_type, sized.disk_bytes) == ("BUILD_GENERAL1_LARGE", 56 * GB)
    # 12 + 2 x 24 = 60 GB moved at 25 MB/s = 40 min, + 30 min to start
    assert sized.timeout_minutes == 70
    assert "BUILD_GENERAL1_LARGE (128 GB)" in sized.describe()


def test_a_model_over_large_s_disk_gets_2xlarge():
    sized = plan_recipe_build(65 * GB)  # Qwen3-32B in bf16: 65 + 130 + 20 = 215 GB
    assert (sized.compute_type, sized.compute_disk) == ("BUILD_GENERAL1_2XLARGE", 824 * GB)
    # moved: 65 down + 130 written + 130 uploaded = 325 GB at 25 MB/s = 217 min, + 30 to start
    assert sized.timeout_minutes == 30 + 217


def test_a_model_over_the_largest_disk_is_refused_before_anything_starts():
    with pytest.raises(RecipeJobError) as err:
        plan_recipe_build(400 * GB, model="endpoint 'big'")
    message = str(err.value)
    assert "endpoint 'big': its recipe needs about 1220 GB of disk" in message and "402 GB of memory" in message
    assert "over CodeBuild BUILD_GENERAL1_2XLARGE's 824 GB" in message and "nothing was started" in message
    assert "checkpoint system" in message


def test_the_boundary_is_large_s_memory_before_its_disk():
    # LARGE's 16 GiB hold a model loaded whole up to 16 GiB - 2 GB; its disk ((128 - 20) / 3 = 36 GB) comes later
    largest = 16 * 1024**3 - 2 * GB
    assert plan_recipe_build(largest).compute_type == "BUILD_GENERAL1_LARGE"
    assert plan_recipe_build(largest + 1).compute_type == "BUILD_GENERAL1_2XLARGE"
    # 2XLARGE: memory binds first too: 144 GiB hold a 152 GB model (its disk, (824 - 20) / 3 = 268 GB)
    with pytest.raises(RecipeJobError, match="144 GiB of memory"):
        plan_recipe_build(153 * GB)
    assert plan_recipe_build(152 * GB).compute_type == "BUILD_GENERAL1_2XLARGE"


# ---------------------------------------------------------------------------------------------- refusals


def test_the_emulator_is_refused_with_the_local_command(tmp_path):
    environment_plan, plan = _load(_config(tmp_path, emulator=True))
    with pytest.raises(RecipeJobError, match="is the local emulator, which has no CodeBuild: build there without"):
        recipe_job.check_in_account(environment_plan, plan)


def test_a_checkpoint_system_is_told_it_stages(tmp_path):
    from deployment import load_config

    environment_plan = load_config(ROOT / "config/examples/vllm-qwen3-32b.yaml", "dev")
    with pytest.raises(RecipeJobError, match="serves the checkpoint's own files.*stages it in the account"):
        recipe_job.check_in_account(environment_plan, environment_plan.plans[0])


def test_a_local_model_is_refused(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    environment_plan, plan = _load(_config(tmp_path, model=str(model)))
    with pytest.raises(RecipeJobError, match="is a local directory, which the job in the account cannot read"):
        recipe_job.check_in_account(environment_plan, plan)


def test_the_cli_refuses_on_the_emulator_with_exit_1_and_no_traceback(tmp_path):
    import subprocess
    import sys

    from hermetic import subprocess_env

    config = _config(tmp_path, emulator=True)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "model_build",
            "build",
            "--in-account",
            "--config",
            str(config),
            "--endpoint",
            "tiny-gpt2",
        ],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "is the local emulator, which has no CodeBuild" in done.stdout + done.stderr


def test_the_variables_carry_the_token_as_a_secret_reference():
    variables = recipe_job.build_variables("s3://b/recipe-specs/e/h.yaml", "dev", "e", "hf/read-token")
    by_name = {v["name"]: v for v in variables}
    assert by_name["RECIPE_CONFIG"]["value"] == "s3://b/recipe-specs/e/h.yaml"
    assert (by_name["RECIPE_ENV"]["value"], by_name["RECIPE_ENDPOINT"]["value"]) == ("dev", "e")
    assert by_name["HF_TOKEN"] == {"name": "HF_TOKEN", "value": "hf/read-token", "type": "SECRETS_MANAGER"}
    assert "HF_TOKEN" not in {v["name"] for v in recipe_job.build_variables("s3://b/k", "dev", "e", None)}


# ---------------------------------------------------------------------------------------------- AWS (moto)


def test_on_aws_it_uploads_the_config_and_starts_the_stack_s_project_sized(moto_env, tmp_path):
    """moto's CodeBuild completes a build at its first BatchGetBuilds and runs nothing: this shows the calls up to
    the service (the config uploaded under recipe-specs/, StartBuild on the RecipeBuildProject output's project
    with the sized compute, timeout and the endpoint's variables) and that it is followed to its end."""
    import boto3

    config = _config(tmp_path)
    environment_plan, plan = _load(config)
    bucket = environment_plan.artifact_bucket(ACCOUNT, "us-east-1")
    boto3.client("s3").create_bucket(Bucket=bucket)
    project = "llm-endpoints-local-recipe-build"
    boto3.client("codebuild").create_project(
        name=project,
        source={"type": "S3", "location": f"{bucket}/code.zip"},
        artifacts={"type": "NO_ARTIFACTS"},
        environment={
            "type": "LINUX_CONTAINER",
            "image": "aws/codebuild/standard:8.0",
            "computeType": "BUILD_GENERAL1_LARGE",
        },
        serviceRole=f"arn:aws:iam::{ACCOUNT}:role/recipe",
    )
    template = {
        "Resources": {"Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
        "Outputs": {"RecipeBuildProject": {"Value": project}},
    }
    boto3.client("cloudformation").create_stack(
        StackName=environment_plan.stack_name("artifacts"), TemplateBody=json.dumps(template)
    )
    out = io.StringIO()
    # moto ignores StartBuild's overrides: the request itself is read from botocore's provide-client-params event
    session = boto3.session.Session()
    started: list[dict] = []
    session.events.register("provide-client-params.codebuild.StartBuild", lambda params, **_: started.append(params))
    build_id = recipe_job.build_in_account(environment_plan, plan, session=session, out=out, source_bytes=50 * GB)
    [request] = started
    assert request["computeTypeOverride"] == "BUILD_GENERAL1_2XLARGE"
    assert request["timeoutInMinutesOverride"] == 30 + 167
    variables = {v["name"]: v["value"] for v in request["environmentVariablesOverride"]}
    assert (variables["RECIPE_ENV"], variables["RECIPE_ENDPOINT"]) == ("local", "tiny-gpt2")
    codebuild = boto3.client("codebuild")
    assert codebuild.list_builds_for_project(projectName=project)["ids"] == [build_id]
    text = out.getvalue()
    assert "BUILD_GENERAL1_2XLARGE (824 GB)" in text  # 50 + 100 + 20 GB of disk; 250 GB moved: 167 min
    assert f"[recipe] started CodeBuild build {build_id} (timeout {30 + 167} min)" in text
    [build] = codebuild.batch_get_builds(ids=[build_id])["builds"]
    assert build["buildStatus"] == "SUCCEEDED"
    keys = [o["Key"] for o in boto3.client("s3").list_objects_v2(Bucket=bucket)["Contents"]]
    [key] = keys
    assert key.startswith(f"recipe-specs/{plan.name}/") and key.endswith(".yaml")
    body = boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
    assert body == config.read_bytes()
    assert f"s3://{bucket}/{key}" in text and variables["RECIPE_CONFIG"] == f"s3://{bucket}/{key}"


def test_without_the_stack_output_it_says_what_to_deploy(moto_env, tmp_path):
    import boto3

    environment_plan, plan = _load(_config(tmp_path))
    boto3.client("s3").create_bucket(Bucket=environment_plan.artifact_bucket(ACCOUNT, "us-east-1"))
    template = {"Resources": {"Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"}}}  # an older stack
    boto3.client("cloudformation").create_stack(
        StackName=environment_plan.stack_name("artifacts"), TemplateBody=json.dumps(template)
    )
    with pytest.raises(RecipeJobError, match="has no RecipeBuildProject output: deploy the artifacts stack"):
        recipe_job.build_in_account(environment_plan, plan, out=io.StringIO(), source_bytes=GB)


def test_the_source_s_bytes_come_from_the_hub_s_metadata_alone(tiny_models, tmp_path, monkeypatch):
    """A Hub mirror on 127.0.0.1 (local_emulator/hub_mirror.py) serving the tiny GPT-2 as org/tiny-gpt2: the sum is
    the sizes of the files the recipe's download takes (artifact/source.py's allow patterns), and nothing is
    downloaded into the Hub cache."""
    from fnmatch import fnmatch

    from hub_models import point_hub_at

    from artifact.source import DEFAULT_ALLOW_PATTERNS
    from local_emulator.hub_mirror import HubMirror, add_repo

    root = tmp_path / "hub"
    add_repo(root, "org/tiny-gpt2", tiny_models["gpt2"])
    expected = sum(
        p.stat().st_size
        for p in tiny_models["gpt2"].rglob("*")
        if p.is_file() and any(fnmatch(p.name, pattern) for pattern in DEFAULT_ALLOW_PATTERNS)
    )
    with HubMirror(root) as running:
        point_hub_at(monkeypatch, running.url, tmp_path / "hf-home")
        _, plan = _load(_config(tmp_path, model="org/tiny-gpt2"))
        assert recipe_job.source_bytes_from_hub(plan) == expected > 0
    assert not list((tmp_path / "hf-home").rglob("*.safetensors"))
