"""`make deploy` on a real account runs a converting recipe in the account (workstation/deploy.py
in_account_builds / build_in_account): which endpoints go there (unbuilt, a Hub model, a converting system, never on
the emulator), and the step itself: `model_build build --in-account` as a subprocess whose lines deploy echoes as they
come, stopping with one message when the build cannot give an artifact. Against the moto server (its CodeBuild runs
nothing and exports no variables: the stop is what a recipe project of an older version gives) and a Hub mirror on
127.0.0.1 that sizes the model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import ROOT, codebuild_job_world

from workstation import deploy

ACCOUNT = "123456789012"


def _config(tmp_path: Path, *, emulator: bool, model: str) -> Path:
    text = (ROOT / "config/local.yaml").read_text()
    if not emulator:
        text = text.replace("    emulator: true\n", "    emulator: false\n")
    text = text.replace("    model: build/tiny-models/gpt2 ", f"    model: {model} ")
    path = tmp_path / "recipe.yaml"
    path.write_text(text)
    return path


def test_only_unbuilt_converting_hub_models_on_a_real_account_build_there(tmp_path):
    from deployment import load_config

    config = _config(tmp_path, emulator=False, model="org/tiny-gpt2")
    environment_plan = load_config(config, None, build_root=tmp_path / "build")
    [plan] = environment_plan.plans
    assert plan.converts_hub_model and plan.artifact.problem is not None
    assert deploy.in_account_builds(environment_plan) == [plan.name]
    on_emulator = load_config(_config(tmp_path, emulator=True, model="org/tiny-gpt2"), None, build_root=tmp_path / "b")
    assert deploy.in_account_builds(on_emulator) == []
    # built already (a local build, or one fetched by an earlier deploy): nothing to build
    (tmp_path / "build" / plan.name).mkdir(parents=True)
    manifest = {"system": plan.system.name, "dtype": plan.spec.dtype, "files": [], "content_hash": "ab" * 32}
    (tmp_path / "build" / plan.name / "manifest.json").write_text(json.dumps(manifest))
    assert deploy.in_account_builds(load_config(config, None, build_root=tmp_path / "build")) == []


def test_the_step_echoes_the_build_s_lines_and_stops_with_its_message(moto_env, tiny_models, tmp_path, monkeypatch):

    from deployment import load_config
    from local_emulator.hub_mirror import HubMirror, add_repo

    add_repo(tmp_path / "hub", "org/tiny-gpt2", tiny_models["gpt2"])
    config = _config(tmp_path, emulator=False, model="org/tiny-gpt2")
    with HubMirror(tmp_path / "hub") as running:
        # deploy's steps inherit this environment: the subprocess asks the mirror, not the Hub
        for name, value in (
            ("HF_ENDPOINT", running.url),
            ("HF_HOME", str(tmp_path / "hf-home")),
            ("HF_HUB_OFFLINE", "0"),
        ):
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("HF_TOKEN", raising=False)
        environment_plan = load_config(config, None)
        bucket = environment_plan.artifact_bucket(ACCOUNT, "us-east-1")
        codebuild_job_world(
            environment_plan.stack_name("artifacts"),
            bucket,
            "RecipeBuildProject",
            "llm-endpoints-local-recipe-build",
            "BUILD_GENERAL1_LARGE",
        )
        echoed: list[str] = []
        with pytest.raises(deploy.DeployError) as err:
            deploy.build_in_account(environment_plan, ["tiny-gpt2"], echo=echoed.append)
    lines = "\n".join(echoed)
    assert "==> model_build build --in-account tiny-gpt2" in lines
    assert "[recipe] tiny-gpt2:" in lines and "BUILD_GENERAL1_LARGE" in lines  # sized, echoed as it came
    assert "[recipe] started CodeBuild build" in lines
    assert "exported variable RECIPE_CONTENT_HASH is none" in str(err.value)


def test_the_artifacts_stack_is_the_same_before_and_after_the_build_and_the_endpoint_stack_names_it(synth, tmp_path):
    """Why deploy may deploy the artifacts stack from the first synth (placeholders) and the endpoint stacks from the
    second: the artifacts stack reads no content hash, and a manifest fetched from the account (built_in_account, its
    files not here) plans like a local build."""
    from deployment import load_config

    config = "config/examples/hf-fastload.yaml"
    [plan] = load_config(ROOT / config, "dev").plans
    assert plan.converts_hub_model
    content_hash = "ab" * 32
    (tmp_path / "build" / plan.name).mkdir(parents=True)
    fetched = {
        "system": plan.system.name,
        "endpoint": plan.name,
        "dtype": plan.spec.dtype,
        "files": [{"path": "model.safetensors", "size": 2, "sha256": "0" * 64}],
        "content_hash": content_hash,
        "built_in_account": {"build": "p:1", "bucket": "b"},
    }
    (tmp_path / "build" / plan.name / "manifest.json").write_text(json.dumps(fetched))
    first = synth(config, "dev")  # placeholders (allow_unbuilt)
    second = synth(config, "dev", build_root=tmp_path / "build", allow_unbuilt=False)
    artifacts = next(n for n in first.templates if n.endswith("-artifacts"))
    assert first.templates[artifacts] == second.templates[artifacts]
    assert content_hash not in json.dumps(first.templates[plan.stack_name])
    assert f"models/{plan.name}/{content_hash}/" in json.dumps(second.templates[plan.stack_name])
