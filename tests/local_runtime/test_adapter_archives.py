"""local_runtime/adapters.py without an engine: each built LoRA adapter is packed as `model_build publish` packs it
(artifact/tarball.py) and extracted into a folder named after its adapter component, holding exactly the build's
files; an adapter with no finished build is a LocalContainerError naming the adapter, the endpoint and the command.
(tests/local/test_vllm_adapters.py hands these folders to the real vLLM engine.)"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from tiny_lora_endpoint import ENDPOINT, tiny_lora_endpoint

from artifact.manifest import MANIFEST_NAME, Manifest
from deployment.adapters import adapter_build_dir
from local_runtime import LocalContainerError
from local_runtime.adapters import extracted_adapters
from model_build.adapters import build_adapters


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_each_built_adapter_is_extracted_whole_into_its_components_folder(tmp_path):
    _, plan = tiny_lora_endpoint(tmp_path)

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
