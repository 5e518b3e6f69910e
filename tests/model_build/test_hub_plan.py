"""`model_build build` of a Hub model for a checkpoint system plans from metadata: real Hub mirror on 127.0.0.1
(local_emulator/hub_mirror.py), real huggingface_hub, real tiny models. The manifest equals a full local build's
(files, sha256, content hash), no weight byte is written, and each refusal says what to set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hub_models import point_hub_at

from artifact import BuildError
from artifact.manifest import Manifest
from local_emulator.hub_mirror import HubMirror, add_repo

TOKEN = "hf_plan_token"
REPO = "acme/tiny-qwen3"
LLAMA = "acme/tiny-llama"  # lmi-trtllm compiles no qwen3 (systems/lmi_trtllm MODEL_TYPES)
GATED = "acme/gated-qwen3"


def endpoint_yaml(name: str, model: str, extra: str = "", instance: str = "ml.g6e.xlarge", system: str = "vllm") -> str:
    return (
        f"  - name: {name}\n    system: {system}\n    model: {model}\n    dtype: bf16\n"
        f"    instance_type: {instance}\n{extra}"
    )


def plan_of(tmp_path: Path, text: str, build_root: Path | None = None):
    from deployment import load_config

    path = tmp_path / f"config-{len(list(tmp_path.glob('config-*')))}.yaml"
    path.write_text("endpoints:\n" + text)
    return load_config(path, build_root=build_root or tmp_path / "build").plans[0]


def build(tmp_path: Path, text: str, build_root: Path | None = None) -> tuple[dict, Path]:
    from model_build.cli import build_endpoint

    root = build_root or tmp_path / "build"
    plan = plan_of(tmp_path, text, root)
    out = root / plan.spec.name
    return build_endpoint(plan.spec, out, progress=False, engine=plan.engine), out


@pytest.fixture(scope="module")
def hub_root(tmp_path_factory: pytest.TempPathFactory, tiny_chat_models: dict[str, Path]) -> Path:
    root = tmp_path_factory.mktemp("hub")
    add_repo(root, REPO, tiny_chat_models["qwen3"])
    add_repo(root, GATED, tiny_chat_models["qwen3"])
    add_repo(root, LLAMA, tiny_chat_models["llama"])
    return root


@pytest.fixture
def mirror(hub_root: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    with HubMirror(hub_root, token=TOKEN, gated=[GATED]) as running:
        point_hub_at(monkeypatch, running.url, tmp_path / "hf-home")
        yield running


def weights_under(*folders: Path) -> list[Path]:
    return [p for folder in folders if folder.exists() for p in folder.rglob("*.safetensors")]


@pytest.mark.parametrize(
    ("system", "repo"), [("vllm", REPO), ("sglang", REPO), ("lmi-vllm", REPO), ("lmi-trtllm", LLAMA)]
)
def test_a_hub_plan_equals_a_full_local_build_and_writes_no_weights(mirror, tmp_path, tiny_chat_models, system, repo):
    source = tiny_chat_models["qwen3" if repo == REPO else "llama"]
    secret = "    hub_token_secret: hf/read-token\n"
    planned, out = build(tmp_path, endpoint_yaml("hub", repo, secret, system=system))
    local, _ = build(tmp_path, endpoint_yaml("local", str(source), system=system))
    assert planned["files"] == local["files"]
    assert planned["content_hash"] == local["content_hash"]
    commit = mirror.commit_of(repo)
    assert planned["model"]["commit"] == commit
    assert planned["staging"] == {
        "hub": {"endpoint": mirror.url, "repo_id": repo, "commit": commit},
        "files": ["model.safetensors"],
        "token_secret": "hf/read-token",
    }
    # The typed reader publish and the staging job use.
    manifest = Manifest.load(out)
    staging = manifest.staging
    assert staging is not None and manifest.commit == commit
    assert [f.path for f in staging.files] == ["model.safetensors"]
    assert staging.files[0].sha256 == next(f["sha256"] for f in local["files"] if f["path"] == "model.safetensors")
    assert manifest.staged_bytes == (source / "model.safetensors").stat().st_size
    assert sorted(f.path for f in manifest.built_files) == sorted(
        p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() and p.name != "manifest.json"
    )
    assert Manifest.load(tmp_path / "build" / "local").staging is None
    # Only metadata was written, and the weights' bytes read were the header's range alone.
    assert weights_under(out, tmp_path / "hf-home") == []
    assert sorted(p.name for p in out.iterdir() if p.is_file()) == sorted(
        ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "manifest.json"]
    )
    assert mirror.bytes_served[f"{repo}/model.safetensors"] <= 64 * 1024
    assert planned["verification"]["parameters"] == local["verification"]["parameters"]
    if system.startswith("lmi-"):  # the environment as before; config.json written as the image's transformers reads it
        assert planned["environment"] == local["environment"] == planned["serving"]["container_environment"]
        assert planned["environment"]["OPTION_MODEL_ID"] == "/opt/ml/model"
        config = json.loads((out / "config.json").read_text())
        assert config["torch_dtype"] == "bfloat16" and "dtype" not in config
        assert "config.json" in planned["verification"]["container_files"]


def test_a_revision_pins_the_same_commit(mirror, tmp_path):
    commit = mirror.commit_of(REPO)
    by_sha, _ = build(tmp_path, endpoint_yaml("pinned", REPO, f"    revision: {commit}\n"))
    by_branch, _ = build(tmp_path, endpoint_yaml("main", REPO, "    revision: main\n"))
    assert by_sha["model"]["commit"] == by_branch["model"]["commit"] == commit
    assert by_sha["content_hash"] == by_branch["content_hash"]


def test_a_gated_model_without_a_token_says_what_to_set(mirror, tmp_path, monkeypatch):
    with pytest.raises(BuildError) as refused:
        build(tmp_path, endpoint_yaml("gated", GATED))
    message = str(refused.value)
    assert f"model {GATED!r} is gated" in message
    assert "HF_TOKEN" in message and "hub_token_secret" in message
    assert not (tmp_path / "build" / "gated").exists()
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    built, _ = build(tmp_path, endpoint_yaml("gated", GATED))
    assert built["staging"]["hub"]["repo_id"] == GATED


def test_a_wrong_token_is_refused_as_such(mirror, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_not_the_token")
    with pytest.raises(BuildError, match=r"refused the token .*HF_TOKEN"):
        build(tmp_path, endpoint_yaml("wrong", REPO))


def test_an_unknown_model_or_revision_is_named(mirror, tmp_path):
    with pytest.raises(BuildError) as refused:
        build(tmp_path, endpoint_yaml("nothing", "acme/no-such-model"))
    assert "model 'acme/no-such-model' (revision 'main') is not on the Hugging Face Hub at" in str(refused.value)
    with pytest.raises(BuildError) as refused:
        build(tmp_path, endpoint_yaml("norev", REPO, "    revision: v9.9\n"))
    assert f"model {REPO!r} has no revision 'v9.9'" in str(refused.value)


def test_an_unreachable_hub_is_refused_without_a_traceback(tmp_path, monkeypatch):
    from local_emulator.moto_server import free_port

    point_hub_at(monkeypatch, f"http://127.0.0.1:{free_port()}", tmp_path / "hf-home")
    with pytest.raises(BuildError, match=r"cannot reach the Hugging Face Hub at http://127\.0\.0\.1:\d+ to plan"):
        build(tmp_path, endpoint_yaml("away", REPO))


def test_a_server_that_ignores_ranges_is_refused_before_it_sends_weights(mirror, tmp_path):
    mirror.ignore_range = True
    with pytest.raises(BuildError, match=r"model.safetensors: asked for bytes 0-65535, the server answered HTTP 200"):
        build(tmp_path, endpoint_yaml("norange", REPO))
    assert weights_under(tmp_path) == []


def test_hub_offline_mode_is_refused_with_what_to_unset(mirror, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(BuildError, match="HF_HUB_OFFLINE is set"):
        build(tmp_path, endpoint_yaml("offline", REPO))


def test_hub_token_secret_is_refused_for_a_local_directory(tmp_path, tiny_chat_models):
    from endpoint_config import ConfigError

    with pytest.raises(ConfigError) as refused:
        plan_of(tmp_path, endpoint_yaml("local", str(tiny_chat_models["qwen3"]), "    hub_token_secret: hf/x\n"))
    assert "hub_token_secret: value 'hf/x' is for a Hugging Face Hub model" in str(refused.value)


def test_the_cli_builds_a_hub_model_with_progress_and_says_what_it_planned(mirror, tmp_path, capsys):
    from model_build.cli import main

    config = tmp_path / "endpoints.yaml"
    config.write_text("endpoints:\n" + endpoint_yaml("cli", REPO))
    root = tmp_path / "build"
    assert main(["build", "--config", str(config), "--endpoint", "cli", "--build-root", str(root)]) == 0
    out, err = capsys.readouterr()
    assert f"plan {REPO}" in err  # the metadata reads' bar
    assert f"planned from the Hub's metadata at commit {mirror.commit_of(REPO)}: 1 weight files" in out
    assert main(["build", "--config", str(config), "--endpoint", "cli", "--build-root", str(root), "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_a_planned_model_is_checked_from_its_build_like_a_local_directory(mirror, tmp_path):
    """acme/tiny-qwen3 is in no known-model table: before its plan nothing is known of it; after, the config
    loader reads its facts from build/<endpoint>/ (config.json, the manifest), with no network."""
    from facts.models import model_facts, planning_with
    from systems.checkpoint_facts import checkpoint_of

    assert checkpoint_of(REPO) is None and model_facts(REPO) is None
    built, out = build(tmp_path, endpoint_yaml("facts", REPO))
    with planning_with(tmp_path / "build", [("facts", REPO, None)]):
        checkpoint = checkpoint_of(REPO)
        facts = model_facts(REPO)
    assert checkpoint is not None and checkpoint.facts.architecture == "Qwen3ForCausalLM"
    assert checkpoint.file_bytes == built["model"]["weight_bytes"]
    assert facts is not None and facts.parameters == built["model"]["parameter_count"]
    assert "planned into" in facts.source
    # Another revision's plan is not this one's.
    with planning_with(tmp_path / "build", [("facts", REPO, "v2")]):
        assert checkpoint_of(REPO) is None
    # The loader itself: the plan's timeouts are sized from the manifest, loaded with the mirror gone.
    mirror.stop()
    plan = plan_of(tmp_path, endpoint_yaml("facts", REPO))
    assert plan.artifact.source == "manifest"
    assert plan.artifact.total_bytes == sum(f["size"] for f in built["files"])  # the weights included
    # What the stacks read at synth, after the load: the model's positions from the planned config.json.
    positions = json.loads((out / "config.json").read_text())["max_position_embeddings"]
    assert plan.engine_context_length == positions
    unplanned = plan_of(tmp_path, endpoint_yaml("facts", REPO), build_root=tmp_path / "elsewhere")
    assert unplanned.engine_context_length is None


@pytest.mark.parametrize(
    ("staging", "expected"),
    [
        ({"hub": {"endpoint": "https://huggingface.co", "repo_id": "o/m", "commit": "main"}, "files": []}, "40-hex"),
        (
            {"hub": {"endpoint": "https://huggingface.co", "repo_id": "o/m", "commit": "a" * 40}, "files": ["b.bin"]},
            "staging.files must list paths of the manifest's files",
        ),
        ({"hub": {"repo_id": "o/m"}, "files": []}, "staging.hub must hold endpoint, repo_id and commit"),
    ],
)
def test_a_staging_block_that_does_not_hold_is_refused_by_the_reader(tmp_path, staging, expected):
    from artifact.manifest import ManifestError, content_hash

    files = [{"path": "a.safetensors", "size": 8, "sha256": "0" * 64}]
    document = {"files": files, "content_hash": content_hash(files), "staging": staging}
    (tmp_path / "manifest.json").write_text(json.dumps(document))
    with pytest.raises(ManifestError, match=expected):
        _ = Manifest.load(tmp_path).staging  # the property reads and checks the block


def test_the_cli_refuses_a_gated_model_in_one_message(mirror, tmp_path):
    """The real command line, HF_ENDPOINT in its environment as a user sets it: exit 2, the message, no traceback."""
    import subprocess
    import sys

    from helpers import ROOT
    from hermetic import python_path_env

    config = tmp_path / "endpoints.yaml"
    config.write_text("endpoints:\n" + endpoint_yaml("gated", GATED))
    env = python_path_env(HF_ENDPOINT=mirror.url, HF_HUB_OFFLINE="0", HF_HOME=str(tmp_path / "hf-home"))
    result = subprocess.run(
        [sys.executable, "-m", "model_build", "build", "--config", str(config), "--endpoint", "gated", "--quiet"]
        + ["--build-root", str(tmp_path / "build")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr
    assert f"model {GATED!r} is gated" in result.stderr and "HF_TOKEN" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "build" / "gated").exists()


def test_a_converting_recipe_checks_the_room_before_it_downloads_and_names_the_staged_path(
    mirror, tmp_path, monkeypatch, tiny_chat_models
):
    """hf-fastload converts the weights on this machine: before snapshot_download, the Hub's file sizes (metadata
    only) against the free space of the Hub cache's disk; the free space is the one value set here (no disk can be
    filled for a test), the sizes are the mirror's."""
    import artifact.source

    source = tiny_chat_models["qwen3"]
    weights = (source / "model.safetensors").stat().st_size
    monkeypatch.setattr(artifact.source, "free_bytes", lambda path: weights // 2)
    with pytest.raises(BuildError) as refused:
        build(tmp_path, endpoint_yaml("fastload", REPO, system="hf-fastload"))
    message = str(refused.value)
    files = sum(p.stat().st_size for p in source.iterdir() if p.is_file())
    assert f"model {REPO!r}: this system's recipe converts the weights on this machine, which needs " in message
    assert (
        f"{files:,} bytes of Hub files to download" in message
        and f"plus about {weights:,} bytes of artifact" in message
    )
    assert f"{weights // 2:,} bytes are free there" in message
    assert "vllm, sglang, lmi-vllm, lmi-trtllm" in message and "docs/design/staging.md" in message
    assert weights_under(tmp_path / "build", tmp_path / "hf-home") == []
    assert mirror.bytes_served.get(f"{REPO}/model.safetensors", 0) == 0  # nothing of the weights was read
    # With room, the download goes on; once the Hub cache holds that commit, nothing is left to need room for.
    monkeypatch.setattr(artifact.source, "free_bytes", lambda path: 10 * files)
    downloaded = artifact.source.resolve_model_source(REPO)
    assert (downloaded / "model.safetensors").read_bytes() == (source / "model.safetensors").read_bytes()
    monkeypatch.setattr(artifact.source, "free_bytes", lambda path: 0)
    artifact.source.check_room_for_download(REPO, None, list(artifact.source.DEFAULT_ALLOW_PATTERNS))
