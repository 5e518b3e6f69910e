"""`model_build build --in-account` (model_build/recipe_job.py): a converting recipe run by the artifacts stack's
recipe build project, its compute sized from the model's bytes or refused before anything starts, the config
uploaded as its spec, StartBuild with the sized compute and timeout and the endpoint's overrides, followed with
model_build/stage.py's follow_codebuild; refused clearly on the emulator and for endpoints it is not for."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from helpers import ROOT, codebuild_job_world

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
    # the systems it names are the registry's checkpoint systems, a new one included
    from systems import all_systems

    named = [n for n, s in all_systems().items() if s.plain_checkpoint.supported]
    assert "vllm" in named and f"({', '.join(named)}: planned from metadata" in message


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
    project = _recipe_world(environment_plan, bucket)
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


# ---------------------------------------------------------------------------------------------- the content hash


def test_the_exported_hash_is_read_from_batch_get_builds_as_botocore_s_model_shapes_it():
    """moto's CodeBuild keeps no exported variables; botocore's Stubber checks this answer against the codebuild
    model's BatchGetBuilds output shape (Build.exportedEnvironmentVariables: [{name, value}]) before the client
    returns it, so a misnamed field fails here."""
    import boto3
    from botocore.stub import Stubber

    client = boto3.client("codebuild", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    content_hash = "c0" * 32
    build = {
        "id": "p:1",
        "buildStatus": "SUCCEEDED",
        "exportedEnvironmentVariables": [
            {"name": "OTHER", "value": "x"},
            {"name": "RECIPE_CONTENT_HASH", "value": content_hash},
        ],
    }
    with Stubber(client) as stub:
        stub.add_response("batch_get_builds", {"builds": [build]}, {"ids": ["p:1"]})
        [answered] = client.batch_get_builds(ids=["p:1"])["builds"]
    assert recipe_job.exported_content_hash(answered) == content_hash
    with Stubber(client) as stub, pytest.raises(Exception, match="exportedVariables"):
        stub.add_response("batch_get_builds", {"builds": [{"id": "p:1", "exportedVariables": []}]})


@pytest.mark.parametrize(
    ("exported", "said"),
    [
        ([], "RECIPE_CONTENT_HASH is none (exported: none)"),
        ([{"name": "RECIPE_CONTENT_HASH", "value": ""}], "RECIPE_CONTENT_HASH is ''"),
        ([{"name": "RECIPE_CONTENT_HASH", "value": "ABC"}], "RECIPE_CONTENT_HASH is 'ABC'"),
    ],
)
def test_a_build_without_a_good_exported_hash_says_what_to_deploy(exported, said):
    with pytest.raises(RecipeJobError) as err:
        recipe_job.exported_content_hash(
            {"id": "p:7", "buildStatus": "SUCCEEDED", "exportedEnvironmentVariables": exported}
        )
    message = str(err.value)
    assert said in message and "CodeBuild build p:7" in message and "deploy the artifacts stack again" in message


def _recipe_world(environment_plan, bucket: str) -> str:
    """The artifacts stack's RecipeBuildProject output and its project, in the moto server."""
    return codebuild_job_world(
        environment_plan.stack_name("artifacts"),
        bucket,
        "RecipeBuildProject",
        "llm-endpoints-local-recipe-build",
        "BUILD_GENERAL1_LARGE",
    )


def _publish_as_the_recipe_build(bucket: str, plan, content_hash: str) -> dict:
    """What the project's `model_build publish` leaves in the bucket: the files, manifest.json last."""
    import hashlib

    import boto3

    s3 = boto3.client("s3")
    files = {"config.json": b'{"model_type": "gpt2"}', "model.safetensors": b"\0" * 64}
    prefix = f"models/{plan.name}/{content_hash}/"
    for name, body in files.items():
        s3.put_object(Bucket=bucket, Key=prefix + name, Body=body)
    manifest = {
        "schema_version": 1,
        "system": plan.system.name,
        "endpoint": plan.name,
        "dtype": plan.spec.dtype,
        "files": [{"path": n, "size": len(b), "sha256": hashlib.sha256(b).hexdigest()} for n, b in files.items()],
        "content_hash": content_hash,
    }
    s3.put_object(Bucket=bucket, Key=prefix + "manifest.json", Body=json.dumps(manifest).encode())
    return manifest


def test_a_build_in_the_account_lands_its_manifest_here_and_a_second_run_reuses_it(moto_env, tmp_path):
    """Against the moto server: the build is started and followed; its exported hash (added to BatchGetBuilds'
    answer as CodeBuild does: moto keeps neither exported variables nor the overrides) names the published manifest, fetched into the build folder with the
    config.json it lists and marked built_in_account; the plan then resolves it; publish checks the bucket and sends
    nothing; a second run of the same config reuses the build instead of starting one."""
    import boto3

    from deployment import load_config
    from model_build.publish import publish_endpoint

    config = _config(tmp_path)
    environment_plan, plan = _load(config)
    bucket = environment_plan.artifact_bucket(ACCOUNT, "us-east-1")
    project = _recipe_world(environment_plan, bucket)
    content_hash = "5e" * 32
    manifest = _publish_as_the_recipe_build(bucket, plan, content_hash)
    session = boto3.session.Session()
    started: list[dict] = []
    session.events.register("provide-client-params.codebuild.StartBuild", lambda params, **_: started.append(params))

    def as_codebuild_answers(parsed, **_):
        """What CodeBuild's BatchGetBuilds holds and moto's does not: the StartBuild overrides in the build's
        environment (moto ignores them) and the buildspec's exported variable."""
        for build in parsed.get("builds", []):
            overrides = started[-1]["environmentVariablesOverride"] if started else []
            build.setdefault("environment", {})["environmentVariables"] = overrides
            if build.get("buildStatus") == "SUCCEEDED":
                build["exportedEnvironmentVariables"] = [{"name": "RECIPE_CONTENT_HASH", "value": content_hash}]

    session.events.register("after-call.codebuild.BatchGetBuilds", as_codebuild_answers)
    build_dir = tmp_path / "build" / plan.name
    (build_dir).mkdir(parents=True)
    (build_dir / "stale.bin").write_bytes(b"an older build's file")
    out = io.StringIO()
    done = recipe_job.build_and_fetch(environment_plan, plan, build_dir, session=session, out=out, source_bytes=GB)
    assert (done.content_hash, done.reused, len(started)) == (content_hash, False, 1)
    assert sorted(p.name for p in build_dir.iterdir()) == ["config.json", "manifest.json"]  # replaced whole
    fetched = json.loads((build_dir / "manifest.json").read_text())
    assert fetched["built_in_account"] == {"build": done.build_id, "bucket": bucket}
    assert fetched["files"] == manifest["files"]
    replanned = load_config(config, None, build_root=tmp_path / "build").plan(plan.name)
    assert (replanned.artifact.source, replanned.artifact.content_hash) == ("manifest", content_hash)

    report = publish_endpoint(environment_plan, replanned, build_dir, session=session)
    assert (report.uploaded_files, report.skipped_files, report.content_hash) == (0, 3, content_hash)

    again = recipe_job.build_and_fetch(environment_plan, plan, build_dir, session=session, out=out, source_bytes=GB)
    assert (again.reused, again.build_id, len(started)) == (True, done.build_id, 1)
    assert f"build {done.build_id} of this config already published {content_hash[:12]}: reused" in out.getvalue()
    assert boto3.client("codebuild").list_builds_for_project(projectName=project)["ids"] == [done.build_id]


def test_publish_of_a_build_in_the_account_whose_artifact_is_gone_says_what_to_run(moto_env, tmp_path):
    import boto3

    from deployment import load_config
    from model_build.publish import PublishError, publish_endpoint

    config = _config(tmp_path)
    environment_plan, plan = _load(config)
    bucket = environment_plan.artifact_bucket(ACCOUNT, "us-east-1")
    _recipe_world(environment_plan, bucket)
    content_hash = "7a" * 32
    _publish_as_the_recipe_build(bucket, plan, content_hash)
    build_dir = tmp_path / "build" / plan.name
    recipe_job.fetch_published(boto3.client("s3"), bucket, plan.name, content_hash, "p:1", build_dir)
    boto3.client("s3").delete_object(Bucket=bucket, Key=f"models/{plan.name}/{content_hash}/manifest.json")
    replanned = load_config(config, None, build_root=tmp_path / "build").plan(plan.name)
    with pytest.raises(PublishError) as err:
        publish_endpoint(environment_plan, replanned, build_dir)
    message = str(err.value)
    assert "was built in the account by CodeBuild build p:1" in message and "is not there" in message
    assert f"python -m model_build build --in-account --config {config}" in message


def test_a_damaged_published_file_is_refused_and_nothing_is_written(moto_env, tmp_path):
    import boto3

    environment_plan, plan = _load(_config(tmp_path))
    bucket = environment_plan.artifact_bucket(ACCOUNT, "us-east-1")
    _recipe_world(environment_plan, bucket)
    content_hash = "9b" * 32
    _publish_as_the_recipe_build(bucket, plan, content_hash)
    s3 = boto3.client("s3")
    s3.put_object(Bucket=bucket, Key=f"models/{plan.name}/{content_hash}/config.json", Body=b"{}")
    build_dir = tmp_path / "build" / plan.name
    with pytest.raises(RecipeJobError, match="config.json differs from its manifest entry"):
        recipe_job.fetch_published(s3, bucket, plan.name, content_hash, "p:1", build_dir)
    assert not build_dir.exists() and not list((tmp_path / "build").iterdir())


def test_the_cli_says_when_the_build_exported_no_hash_with_no_traceback(moto_env, tiny_models, tmp_path):
    """moto's build succeeds and exports nothing, as a recipe project of an older version would; the model is sized
    from a Hub mirror on 127.0.0.1 serving the tiny GPT-2."""
    import subprocess
    import sys

    from hermetic import subprocess_env

    from local_emulator.hub_mirror import HubMirror, add_repo

    add_repo(tmp_path / "hub", "org/tiny-gpt2", tiny_models["gpt2"])
    config = _config(tmp_path, model="org/tiny-gpt2")
    with HubMirror(tmp_path / "hub") as running:
        hub = {"HF_ENDPOINT": running.url, "HF_HOME": str(tmp_path / "hf-home"), "HF_HUB_OFFLINE": "0"}
        environment_plan, _ = _load(config)
        _recipe_world(environment_plan, environment_plan.artifact_bucket(ACCOUNT, "us-east-1"))
        command = ["build", "--in-account", "--config", str(config), "--endpoint", "tiny-gpt2"]
        done = subprocess.run(
            [sys.executable, "-m", "model_build", *command],
            cwd=ROOT,
            env=subprocess_env(**moto_env.client_env(), **hub),
            capture_output=True,
            text=True,
            timeout=180,
        )
    text = done.stdout + done.stderr
    assert done.returncode != 0 and "Traceback" not in text, text
    assert "[recipe] started CodeBuild build" in text
    assert "exported variable RECIPE_CONTENT_HASH is none" in text and "deploy the artifacts stack again" in text
    assert (
        not (ROOT / "build" / "tiny-gpt2" / "manifest.json").exists()
        or "built_in_account" not in (ROOT / "build" / "tiny-gpt2" / "manifest.json").read_text()
    )
