"""The whole path for a gated Hub model on the emulator, with real parts only: `model_build build` plans a tiny Qwen3
from the Hub mirror (local_emulator/hub_mirror.py) writing no weights, then `model_build stage` uploads the build's
own files and runs the job's own code, which reads the Hub token from the moto server's Secrets Manager, streams
the weights from the mirror (its CDN redirect included) into S3 and writes manifest.json last. The objects are
byte-identical to the model's files and no weight byte lands under the workstation's build dir or Hub cache."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import pytest

from local_emulator.hub_mirror import HubMirror, add_repo
from model_build import stage

TOKEN = "hf_stage_token_0123"
REPO = "acme/gated-tiny-qwen3"
ACCOUNT = "123456789012"


@pytest.fixture
def gated_hub(tmp_path, tiny_chat_models, monkeypatch):
    sys_path = Path(__file__).resolve().parent.parent / "model_build"
    monkeypatch.syspath_prepend(str(sys_path))
    from hub_models import point_hub_at

    root = tmp_path / "hub"
    add_repo(root, REPO, tiny_chat_models["qwen3"])
    with HubMirror(root, token=TOKEN, gated=[REPO]) as mirror:
        point_hub_at(monkeypatch, mirror.url, tmp_path / "hf-home", token=TOKEN)
        yield mirror


def test_a_gated_hub_model_goes_from_the_mirror_to_s3_through_the_job(
    gated_hub, moto_env, tmp_path, tiny_chat_models, monkeypatch
):
    import boto3

    from deployment import load_config
    from model_build.cli import build_endpoint

    config = tmp_path / "hub.yaml"
    config.write_text(
        "project: llm-endpoints\nenvironments:\n  local:\n"
        f'    account: "{ACCOUNT}"\n    region: us-east-1\n    retain_data: false\n    emulator: true\n'
        f"endpoints:\n  - name: hubqwen\n    system: vllm\n    model: {REPO}\n    dtype: bf16\n"
        "    instance_type: ml.g6e.xlarge\n    hub_token_secret: hf/read-token\n"
    )
    environment_plan = load_config(config, None, build_root=tmp_path / "build")
    plan = environment_plan.plans[0]
    out = tmp_path / "build" / plan.name
    build_endpoint(plan.spec, out, progress=False, engine=plan.engine)
    assert not list(out.rglob("*.safetensors"))

    boto3.client("secretsmanager").create_secret(Name="hf/read-token", SecretString=TOKEN)
    bucket = environment_plan.artifact_bucket(ACCOUNT, "us-east-1")
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=bucket)
    # The job reads the token from Secrets Manager itself, not from this process's environment (which the job
    # inherits on the emulator): the plan needed HF_TOKEN, the staging does not.
    monkeypatch.delenv("HF_TOKEN")
    printed = io.StringIO()
    report = stage.stage_endpoint(environment_plan, plan, out, out=printed)

    manifest = json.loads((out / "manifest.json").read_text())
    for entry in manifest["files"]:
        body = s3.get_object(Bucket=bucket, Key=report.prefix + entry["path"])["Body"].read()
        assert hashlib.sha256(body).hexdigest() == entry["sha256"], entry["path"]
    source = (tiny_chat_models["qwen3"] / "model.safetensors").read_bytes()
    assert s3.get_object(Bucket=bucket, Key=report.prefix + "model.safetensors")["Body"].read() == source
    written = s3.get_object(Bucket=bucket, Key=report.prefix + "manifest.json")["Body"].read()
    assert written == (out / "manifest.json").read_bytes()
    text = printed.getvalue()
    assert "Hub token from secret hf/read-token" in text and TOKEN not in text
    assert gated_hub.bytes_served[f"{REPO}/model.safetensors"] >= len(source)
    # Nothing of the weights on the workstation: not in the build dir, not in the Hub cache.
    assert not list(out.rglob("*.safetensors")) and not list((tmp_path / "hf-home").rglob("*.safetensors"))
