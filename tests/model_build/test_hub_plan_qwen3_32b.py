"""The figure of docs/design/weights.md "Plan from metadata": a Qwen3-32B-shaped Hub repository (the real config,
17 sparse bf16 shards with real headers: 65.5 GB of weights on no disk; a 151,643-token BPE tokenizer made offline)
planned by `model_build build` for the vllm system through the Hub mirror. The workstation reads under 0.1 % of the
weights' bytes, writes only metadata, and the config loader then checks the model from that build."""

from __future__ import annotations

from pathlib import Path

import pytest
from hub_models import QWEN3_32B_SHARDS, lay_qwen3_32b, point_hub_at, qwen3_32b_tensors

from local_emulator.hub_mirror import HubMirror

REPO = "acme/Qwen3-32B-shape"  # in neither known-model table: everything known of it comes from the plan
ENGINE = "    engine: {max_model_len: 32768, max_num_seqs: 32}\n"


def endpoint_yaml(instance: str) -> str:
    return (
        f"endpoints:\n  - name: big\n    system: vllm\n    model: {REPO}\n    dtype: bf16\n"
        f"    instance_type: {instance}\n    volume_size_gb: null\n{ENGINE}"
    )


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory, tiny_chat_models: dict[str, Path]) -> Path:
    root = tmp_path_factory.mktemp("hub-32b")
    lay_qwen3_32b(root, REPO, tiny_chat_models["qwen3"])
    return root


def test_qwen3_32b_plans_from_under_a_thousandth_of_its_bytes(repo, tmp_path, monkeypatch, capsys):
    from deployment import load_config
    from endpoint_config import ConfigError
    from model_build.cli import build_endpoint

    folder = repo / REPO
    weights = sorted(folder.glob("*.safetensors"))
    assert len(weights) == QWEN3_32B_SHARDS
    weight_bytes = sum(p.stat().st_size for p in weights)
    parameters = sum(_count(shape) for _, shape in qwen3_32b_tensors())
    assert parameters == 32_762_123_264  # 32.76 B, as operations.md §5 computes from the config
    assert weight_bytes > 65.5e9
    assert sum(p.stat().st_blocks * 512 for p in weights) < 2 * 1024**2  # the mirror's copy costs no disk
    assert (folder / "tokenizer.json").stat().st_size > 4_000_000

    config = tmp_path / "big.yaml"
    config.write_text(endpoint_yaml("ml.g7e.2xlarge"))
    build_root = tmp_path / "build"
    home = tmp_path / "hf-home"
    with HubMirror(repo) as mirror:
        point_hub_at(monkeypatch, mirror.url, home)
        plan = load_config(config, build_root=build_root).plans[0]
        manifest = build_endpoint(plan.spec, build_root / "big", progress=False, engine=plan.engine)
        read = mirror.total_bytes()
        file_bytes = mirror.file_bytes(REPO)
        header_bytes = sum(n for key, n in mirror.bytes_served.items() if key.endswith(".safetensors"))
    ratio = read / weight_bytes
    on_disk = sum(p.stat().st_size for p in (build_root / "big").rglob("*") if p.is_file())
    with capsys.disabled():
        print(
            f"\nQwen3-32B-shaped plan: read {read:,} bytes ({file_bytes:,} of files, {header_bytes:,} of them "
            f"safetensors headers) for {weight_bytes:,} bytes of weights: {ratio:.4%}; build folder {on_disk:,} bytes"
        )
    assert ratio < 0.001
    assert manifest["model"]["parameter_count"] == parameters
    assert sum(f["size"] for f in manifest["files"] if f["path"].endswith(".safetensors")) == weight_bytes
    assert len(manifest["staging"]["files"]) == QWEN3_32B_SHARDS
    assert manifest["verification"]["parameters"] == f"{parameters:,} = config.json's Qwen3ForCausalLM"
    # No workstation disk beyond the metadata: the build holds the metadata files (twice: metadata/), nothing else.
    assert on_disk < 3 * (folder / "tokenizer.json").stat().st_size
    assert [p for p in [*build_root.rglob("*.safetensors"), *home.rglob("*.safetensors")]] == []

    # The loader now knows the model from its build, with the mirror gone: on a 48 GB GPU it is refused for fit
    # (before the plan nothing was known of it, and the same config loaded with a warning only).
    small = tmp_path / "small.yaml"
    small.write_text(endpoint_yaml("ml.g6e.xlarge"))
    load_config(small, build_root=tmp_path / "no-build")
    with pytest.raises(ConfigError) as refused:
        load_config(small, build_root=build_root)
    assert f"model {REPO!r} needs 61.0 GiB of weights (bf16, 2 bytes a parameter)" in str(refused.value)


def _count(shape: tuple[int, ...]) -> int:
    count = 1
    for dim in shape:
        count *= dim
    return count
