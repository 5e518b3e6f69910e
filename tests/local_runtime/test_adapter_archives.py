"""local_runtime/adapters.py without an engine: each built LoRA adapter is packed as `model_build publish` packs it
(artifact/tarball.py) and extracted into a folder named after its adapter component, holding exactly the build's
files; an adapter with no finished build is a LocalContainerError naming the adapter, the endpoint and the command.
(tests/local/test_vllm_adapters.py hands these folders to the real vLLM engine.)"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml

from artifact.manifest import MANIFEST_NAME, Manifest
from deployment import load_config
from deployment.adapters import adapter_build_dir
from local_runtime import LocalContainerError
from local_runtime.adapters import extracted_adapters
from model_build.adapters import build_adapters
from model_build.tiny_adapters import make_tiny_adapter
from model_build.tiny_models import make_tiny_model

ENDPOINT = "lora"
ADAPTERS = ("sql", "support")


def _plan(tmp: Path, model: Path, adapters: dict[str, Path]):
    endpoint = {
        "name": ENDPOINT,
        "system": "vllm",
        "model": str(model),
        "dtype": "fp16",
        "instance_type": "ml.g4dn.xlarge",
        "engine": {"max_model_len": 512},
        "hosting": {"mode": "inference-components", "compute": {"accelerators": 1, "cpu_cores": 2}},
        "adapters": [{"name": name, "model": str(path)} for name, path in adapters.items()],
    }
    config = tmp / "lora.yaml"
    config.write_text(yaml.safe_dump({"endpoints": [endpoint]}, sort_keys=False))
    return load_config(config, build_root=tmp / "build").plan(ENDPOINT)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_each_built_adapter_is_extracted_whole_into_its_components_folder(tmp_path):
    model = make_tiny_model("qwen3_thinking", tmp_path / "qwen3_thinking")
    sources = {name: make_tiny_adapter(model, tmp_path / "peft" / name, seed=i) for i, name in enumerate(ADAPTERS, 1)}
    plan = _plan(tmp_path, model, sources)

    with pytest.raises(LocalContainerError) as err:  # nothing built yet
        extracted_adapters(plan, tmp_path / "build", tmp_path / "sagemaker")
    message = str(err.value)
    assert f"adapter 'sql' of endpoint '{ENDPOINT}'" in message and "python -m model_build build" in message

    build_adapters(plan, tmp_path / "build")
    folders = extracted_adapters(plan, tmp_path / "build", tmp_path / "sagemaker")
    assert sorted(folders) == sorted(adapter.component_name for adapter in plan.adapters)
    for adapter in plan.adapters:
        build_dir = adapter_build_dir(tmp_path / "build", plan.name, adapter.name)
        manifest = Manifest.load(build_dir / MANIFEST_NAME, require_files=True)
        folder = folders[adapter.component_name]
        assert folder.name == adapter.component_name
        extracted = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
        assert extracted == {e.path for e in manifest.files} | {MANIFEST_NAME}
        for entry in manifest.files:
            assert _sha256(folder / entry.path) == entry.sha256, entry.path
