"""hf-fastload builds: artifact layout, container-readable config, manifest integrity, verification, and the
CLI's error contract (exit 2, one message, no traceback, nothing left behind)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def test_gpt2_artifact_layout(gpt2_artifact: Path) -> None:
    from safetensors import safe_open

    names = {p.relative_to(gpt2_artifact).as_posix() for p in gpt2_artifact.rglob("*") if p.is_file()}
    shards = sorted(n for n in names if n.startswith("model-") and n.endswith(".safetensors"))
    assert len(shards) >= 2, f"max_shard_size 300KB should shard the model: {sorted(names)}"
    assert "model.safetensors.index.json" in names and "model.safetensors" not in names
    index = json.loads((gpt2_artifact / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"].values()) == set(shards)
    assert {"vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json"} <= names
    assert "tokenizer.json" not in names  # never re-serialized by tokenizers 0.23
    assert "code/requirements.txt" not in names  # the container already has everything

    handler_src = Path(__file__).resolve().parents[2] / "systems/hf_fastload/handler/inference.py"
    assert (gpt2_artifact / "code/inference.py").read_bytes() == handler_src.read_bytes()

    config = json.loads((gpt2_artifact / "config.json").read_text())
    assert config["torch_dtype"] == "float16" and "dtype" not in config  # the key transformers 4.49 reads
    for shard in shards:
        with safe_open(str(gpt2_artifact / shard), "pt") as f:
            assert f.metadata().get("format") == "pt"  # 4.x refuses safetensors without it
            assert {str(f.get_slice(k).get_dtype()) for k in f.keys()} == {"F16"}


def test_gpt2_manifest(gpt2_artifact: Path) -> None:
    import transformers

    from artifact.manifest import Manifest, content_hash

    manifest = Manifest.load(gpt2_artifact).document
    assert manifest["system"] == "hf-fastload" and manifest["endpoint"] == "tiny-gpt2"
    assert manifest["dtype"] == "fp16" and manifest["weights_format"] == "safetensors"
    assert manifest["compute_dtype"] == {"gpu": "fp16", "cpu": "fp32"}  # what the handler computes in
    assert manifest["model"]["architecture"] == "GPT2LMHeadModel"
    assert manifest["model"]["parameter_count"] > 10_000
    assert manifest["libraries"]["transformers"] == transformers.__version__
    assert manifest["target_container"]["transformers"] == "4.51.3"
    check = manifest["verification"]
    assert check["greedy_tokens_match"] is True and 0 <= check["max_abs_logit_diff"] <= check["tolerance"]
    assert check["prompt"]

    listed = {e["path"] for e in manifest["files"]}
    on_disk = {p.relative_to(gpt2_artifact).as_posix() for p in gpt2_artifact.rglob("*") if p.is_file()}
    assert listed == on_disk - {"manifest.json"}
    for entry in manifest["files"]:
        assert (gpt2_artifact / entry["path"]).stat().st_size == entry["size"]
    assert Manifest.load(gpt2_artifact).verify(gpt2_artifact, unlisted=True) == []  # re-hashes every file
    assert manifest["content_hash"] == content_hash(manifest["files"])


def test_manifest_compute_dtype_reads_old_manifests(tmp_path: Path) -> None:
    from artifact.manifest import Manifest

    old = {"content_hash": "0" * 64, "dtype": "fp16", "files": []}  # written before compute_dtype existed
    (tmp_path / "manifest.json").write_text(json.dumps(old))
    assert Manifest.load(tmp_path).compute_dtype == {"gpu": "fp16", "cpu": "fp16"}  # its handler computed as stored
    new = {**old, "dtype": "bf16", "compute_dtype": {"gpu": "bf16", "cpu": "fp32", "cpu_native_bf16": "bf16"}}
    (tmp_path / "manifest.json").write_text(json.dumps(new))
    assert Manifest.load(tmp_path).compute_dtype["cpu_native_bf16"] == "bf16"


def test_tampered_artifact_is_detected(gpt2_artifact: Path, tmp_path: Path) -> None:
    from artifact.manifest import Manifest

    copy = shutil.copytree(gpt2_artifact, tmp_path / "copy")
    shard = next(copy.glob("model-*.safetensors"))
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF
    shard.write_bytes(bytes(data))
    (copy / "extra.txt").write_text("x")
    problems = Manifest.load(copy).verify(copy, unlisted=True)
    assert any(p.startswith(f"{shard.name}: sha256 ") for p in problems)
    assert "extra.txt: not in the manifest" in problems


def test_content_hash_is_stable_across_builds(gpt2_artifact: Path, build_artifact: Callable[..., Path]) -> None:
    from artifact.manifest import Manifest

    again = Manifest.load(build_artifact("tiny-gpt2", tag="second")).document
    first = Manifest.load(gpt2_artifact).document
    assert again["files"] == first["files"]
    assert again["content_hash"] == first["content_hash"]


def test_gptj_fp32_build_verifies(build_artifact: Callable[..., Path]) -> None:
    from artifact.manifest import Manifest

    manifest = Manifest.load(build_artifact("tiny-gptj")).document
    assert manifest["model"]["architecture"] == "GPTJForCausalLM"
    assert manifest["dtype"] == "fp32"
    assert manifest["verification"]["max_abs_logit_diff"] <= 1e-4
    assert manifest["verification"]["greedy_tokens_match"] is True


def test_torch_save_opt_in(build_artifact: Callable[..., Path]) -> None:
    from artifact.manifest import Manifest
    from systems.hf_fastload.handler import inference as handler

    artifact = build_artifact("tiny-gptj-pickle")
    manifest = Manifest.load(artifact).document
    assert manifest["weights_format"] == "torch-save"
    assert (artifact / "model.pt").is_file() and not list(artifact.glob("*.safetensors"))
    loaded = handler.model_fn(str(artifact))  # follows the manifest to torch.load
    assert type(loaded["model"]).__name__ == "GPTJForCausalLM"
    reply = handler.predict_fn({"inputs": "Hello", "parameters": {"max_new_tokens": 3}}, loaded)
    assert isinstance(reply[0]["generated_text"], str)


def test_failed_verification_leaves_nothing(
    model_config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deployment import load_config
    from model_build import BuildError
    from model_build.cli import build_endpoint
    from systems.hf_fastload import recipe

    monkeypatch.setitem(recipe.TOLERANCE, "fp32", -1.0)  # no diff can pass
    out = tmp_path / "out" / "tiny-gptj"
    with pytest.raises(BuildError, match=r"max abs logit diff .* \(allowed <= -1\.0\)"):
        build_endpoint(load_config(model_config).endpoint("tiny-gptj"), out, progress=False)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [
        ("missing-model", ["model '", "no/such-model", "is not an existing directory", "allowed:"]),
        ("bad-tokenizer", ["tokenizer_class 'TokenizersBackend'", "4.51.3", "allowed:", "GPT2Tokenizer"]),
        ("no-such-endpoint", ["no endpoint named 'no-such-endpoint'", "defined: tiny-gpt2"]),
    ],
)
def test_cli_build_errors(model_config: Path, tmp_path: Path, endpoint: str, expected: list[str]) -> None:
    from helpers import run_cli

    out = tmp_path / "build" / endpoint
    result = run_cli("build", "--config", str(model_config), "--endpoint", endpoint, "--out", str(out), "--quiet")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    for text in expected:
        assert text in result.stderr
    assert not out.exists() and not (tmp_path / "build").exists()


def test_cli_config_error(tmp_path: Path) -> None:
    from helpers import run_cli

    config = tmp_path / "c.yaml"
    config.write_text(
        "endpoints:\n  - name: x\n    system: hf-fastload\n    modell: y\n    instance_type: ml.m5.xlarge\n"
    )
    result = run_cli("build", "--config", str(config), "--endpoint", "x", "--out", str(tmp_path / "o"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "unknown key (did you mean 'model'?)" in result.stderr


# Loading under the container's transformers 4.49 is proven with the real inference toolkit in
# tests/systems/test_hf_container_compat.py.
