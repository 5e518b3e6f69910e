"""`model_build stage` (model_build/stage.py) and publish's staged branch: sized or refused before anything moves; on
the emulator the build's own files, the spec, then the job's own code as a subprocess with its progress streamed;
on AWS StartBuild on the artifacts stack's project, sized, and its CloudWatch Logs lines followed (against the moto
server's CodeBuild, CloudFormation and Logs)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, codebuild_job_world
from stage_hub import COMMIT, REPO, MiB, file_entry, object_sha, random_bytes

from model_build import stage

ACCOUNT = "123456789012"


def _config(tmp_path: Path, *, emulator: bool) -> Path:
    text = (ROOT / "config/local.yaml").read_text()
    if not emulator:
        text = text.replace("    emulator: true\n", "    emulator: false\n")
    path = tmp_path / "stage.yaml"
    path.write_text(text)
    return path


def _build(build_root: Path, name: str, hub, staged: dict[str, bytes], own: dict[str, bytes]) -> Path:
    """A metadata-only build as h-plan's `model_build build` writes it: the small files, and a manifest listing every
    file with a staging section for the weights."""
    from artifact.manifest import content_hash

    build = build_root / name
    build.mkdir(parents=True)
    for path, data in own.items():
        (build / path).write_bytes(data)
    files = [file_entry(p, d) for p, d in sorted({**staged, **own}.items())]
    doc = {
        "schema_version": 1,
        "endpoint": name,
        "model": {"source": REPO, "commit": COMMIT},
        "files": files,
        "content_hash": content_hash(files),
        "staging": {
            "hub": {"endpoint": hub.url, "repo_id": REPO, "commit": COMMIT},
            "files": sorted(staged),
            "token_secret": None,
        },
    }
    (build / "manifest.json").write_text(json.dumps(doc, indent=2) + "\n")
    hub.files.update(staged)
    return build


@pytest.fixture
def emulator_env(moto_env, tmp_path):
    import boto3

    from deployment import load_config

    environment_plan = load_config(_config(tmp_path, emulator=True), None, build_root=tmp_path / "build")
    bucket = environment_plan.artifact_bucket(ACCOUNT, "us-east-1")
    boto3.client("s3").create_bucket(Bucket=bucket)
    return environment_plan, bucket


OWN = {"config.json": b'{"model_type": "gpt2"}\n'}


def _weights() -> dict[str, bytes]:
    return {"model.safetensors": random_bytes(11 * MiB, 5)}


# ---------------------------------------------------------------------------------------------- sizing


def test_a_qwen3_32b_checkpoint_is_sized():
    doc = {"files": [{"path": f"w{i}", "size": 4_100_000_000} for i in range(16)], "staging": {"files": []}}
    doc["staging"]["files"] = [f["path"] for f in doc["files"]]
    sized = stage.plan_staging(doc)
    # 65.6 GB at the assumed 25 MB/s: 2,624 s = 44 min, + 15 to start.
    assert (sized.files, sized.staged_bytes, sized.timeout_minutes) == (16, 65_600_000_000, 59)
    assert sized.memory_bytes < stage.SMALL_MEMORY
    assert "job timeout 59 min" in sized.describe()


def test_a_400_gb_model_fits_and_a_4_tb_one_is_refused():
    def doc(total: int, n: int) -> dict:
        files = [{"path": f"w{i}", "size": total // n} for i in range(n)]
        return {"files": files, "staging": {"files": [f["path"] for f in files]}}

    assert stage.plan_staging(doc(400 * 10**9, 80)).timeout_minutes == 15 + 267
    with pytest.raises(stage.StageError) as err:
        stage.plan_staging(doc(4 * 10**12, 800))
    message = str(err.value)
    assert "staging 4000.0 GB needs about 44 h at the assumed 25 MB/s, over CodeBuild's 2160-minute" in message
    assert "nothing was moved" in message and "python -m weights_staging" in message


def test_a_refused_size_moves_nothing(emulator_env, fake_hub, tmp_path):
    environment_plan, bucket = emulator_env
    plan = environment_plan.plans[0]
    build = _build(tmp_path / "build", plan.name, fake_hub, _weights(), OWN)
    doc = json.loads((build / "manifest.json").read_text())
    doc["files"][1]["size"] = 4 * 10**12  # the weights file, as the Hub would list a 4 TB checkpoint
    (build / "manifest.json").write_text(json.dumps(doc))
    import boto3

    with pytest.raises(stage.StageError, match="over CodeBuild's 2160-minute"):
        stage.stage_endpoint(environment_plan, plan, build, out=io.StringIO())
    assert boto3.client("s3").list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0
    assert fake_hub.seen == []


# ---------------------------------------------------------------------------------------------- the emulator


def test_stage_on_the_emulator_runs_the_job_and_streams_its_progress(emulator_env, fake_hub, tmp_path):
    import boto3

    environment_plan, bucket = emulator_env
    plan = environment_plan.plans[0]
    weights = _weights()
    build = _build(tmp_path / "build", plan.name, fake_hub, weights, OWN)
    out = io.StringIO()
    report = stage.stage_endpoint(environment_plan, plan, build, out=out)
    s3 = boto3.client("s3")
    prefix = report.prefix
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"])
    doc = json.loads((build / "manifest.json").read_text())
    assert keys == sorted(
        [prefix + "config.json", prefix + "model.safetensors", prefix + "manifest.json"]
        + [f"staging-specs/{plan.name}/{doc['content_hash']}.json"]
    )
    assert (
        object_sha(s3, prefix + "model.safetensors", bucket) == hashlib.sha256(weights["model.safetensors"]).hexdigest()
    )
    text = out.getvalue()
    assert f"[stage] {plan.name}: 1 file(s), 0.01 GB from the Hub; job timeout 16 min" in text
    assert "[staging] file 1/1 model.safetensors: 11.00 MiB from the Hub" in text
    assert "[staging] done in" in text
    # Again: the prefix is complete, nothing moves.
    again = io.StringIO()
    stage.stage_endpoint(environment_plan, plan, build, out=again)
    assert "is already complete" in again.getvalue()


def test_quiet_silences_progress(emulator_env, fake_hub, tmp_path):
    environment_plan, _ = emulator_env
    plan = environment_plan.plans[0]
    build = _build(tmp_path / "build", plan.name, fake_hub, _weights(), OWN)
    out = io.StringIO()
    stage.stage_endpoint(environment_plan, plan, build, out=out, quiet=True)
    assert out.getvalue() == ""


def test_a_failed_job_is_reported_with_its_last_lines(emulator_env, fake_hub, tmp_path):
    environment_plan, _ = emulator_env
    plan = environment_plan.plans[0]
    build = _build(tmp_path / "build", plan.name, fake_hub, _weights(), OWN)
    fake_hub.corrupt.add("model.safetensors")
    with pytest.raises(stage.StageError) as err:
        stage.stage_endpoint(environment_plan, plan, build, out=io.StringIO(), quiet=True)
    assert "the staging job exited 1" in str(err.value) and "sha256 mismatch" in str(err.value)


def test_the_cli_verb_and_publish_both_stage(emulator_env, fake_hub, tmp_path, moto_env):
    environment_plan, bucket = emulator_env
    plan = environment_plan.plans[0]
    _build(tmp_path / "build", plan.name, fake_hub, _weights(), OWN)
    env = {**os.environ, **moto_env.client_env(), "PYTHONPATH": str(ROOT)}
    common = [
        "--config",
        str(environment_plan.config_path),
        "--endpoint",
        plan.name,
        "--build-root",
        str(tmp_path / "build"),
    ]
    done = subprocess.run(
        [sys.executable, "-m", "model_build", "stage", *common], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "[staging] file 1/1 model.safetensors" in done.stdout and "staged s3://" in done.stdout
    published = subprocess.run(
        [sys.executable, "-m", "model_build", "publish", *common], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert published.returncode == 0, published.stderr
    assert "is already complete" in published.stdout


def test_a_build_without_staging_is_refused_by_the_verb(emulator_env, tmp_path):
    environment_plan, _ = emulator_env
    plan = environment_plan.plans[0]
    build = tmp_path / "build" / plan.name
    build.mkdir(parents=True)
    (build / "config.json").write_bytes(OWN["config.json"])
    from artifact.manifest import content_hash

    files = [file_entry("config.json", OWN["config.json"])]
    (build / "manifest.json").write_text(json.dumps({"files": files, "content_hash": content_hash(files)}))
    with pytest.raises(stage.StageError, match="has no staging section: nothing to fetch from the Hub"):
        stage.stage_endpoint(environment_plan, plan, build, out=io.StringIO())


# ---------------------------------------------------------------------------------------------- AWS (moto)


def test_on_aws_it_starts_the_stack_s_project_sized_and_follows_it(moto_env, fake_hub, tmp_path):
    """moto's CodeBuild completes a build at its first BatchGetBuilds and runs nothing, so this shows the calls up
    to the service (the build's own files and the spec uploaded, StartBuild on the stack's project with the spec,
    the destination and the sized timeout) and that no manifest.json is written from the workstation."""
    import boto3

    from deployment import load_config

    environment_plan = load_config(_config(tmp_path, emulator=False), None, build_root=tmp_path / "build")
    plan = environment_plan.plans[0]
    bucket = environment_plan.artifact_bucket(ACCOUNT, "us-east-1")
    stack_name = environment_plan.stack_name("artifacts")
    project = codebuild_job_world(
        stack_name, bucket, "WeightsStagingProject", "llm-endpoints-local-weights-staging", "BUILD_GENERAL1_SMALL"
    )
    build = _build(tmp_path / "build", plan.name, fake_hub, _weights(), OWN)
    out = io.StringIO()
    report = stage.stage_endpoint(environment_plan, plan, build, out=out)
    ids = boto3.client("codebuild").list_builds_for_project(projectName=project)["ids"]
    assert len(ids) == 1
    assert f"[stage] started CodeBuild build {ids[0]} (timeout 16 min)" in out.getvalue()
    keys = sorted(o["Key"] for o in boto3.client("s3").list_objects_v2(Bucket=bucket)["Contents"])
    assert report.prefix + "config.json" in keys and report.prefix + "manifest.json" not in keys
    assert any(k.startswith(f"staging-specs/{plan.name}/") for k in keys)
    assert fake_hub.seen == []  # the workstation read nothing from the Hub


def test_without_the_stack_output_it_says_what_to_deploy(moto_env):
    import boto3

    with pytest.raises(stage.StageError, match="cannot read stack nope-artifacts.*deploy the artifacts stack first"):
        stage.staging_project(boto3.session.Session(), "nope-artifacts")


def test_log_lines_are_followed_from_cloudwatch_logs(moto_env):
    import time

    import boto3

    logs = boto3.client("logs")
    logs.create_log_group(logGroupName="/aws/codebuild/p")
    logs.create_log_stream(logGroupName="/aws/codebuild/p", logStreamName="b1")
    now = int(time.time() * 1000)
    lines = [f"[staging] file 1/1 w: {i} MiB" for i in range(3)]
    logs.put_log_events(
        logGroupName="/aws/codebuild/p",
        logStreamName="b1",
        logEvents=[{"timestamp": now + i, "message": m} for i, m in enumerate(lines)],
    )
    said: list[str] = []
    tail: list[str] = []
    last: list[str] = []
    token, printed = stage._print_new_lines(logs, "/aws/codebuild/p", "b1", None, tail, last, said.append)
    assert said == lines and printed == 3 and last == [lines[-1]]
    logs.put_log_events(
        logGroupName="/aws/codebuild/p", logStreamName="b1", logEvents=[{"timestamp": now + 9, "message": "more"}]
    )
    token, printed = stage._print_new_lines(logs, "/aws/codebuild/p", "b1", token, tail, last, said.append)
    assert said[-1] == "more" and printed == 1
    assert stage._print_new_lines(logs, "/aws/codebuild/p", "nope", None, tail, last, said.append) == (None, 0)
