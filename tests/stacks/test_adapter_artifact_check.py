"""Each LoRA adapter's artifact passes the published-artifact check before its component is created (operations
review R6): the adapter components of config/examples/lmi-vllm-lora.yaml depend on a check of their own manifest
(the same handler as the base model's, endpoint_runtime/artifact_check.py), which may read only that manifest.
Built adapters are faked (helpers.write_fake_manifest) so the checks carry real content hashes."""

from __future__ import annotations

import json

import pytest
import yaml
from helpers import ROOT, write_fake_manifest

CONFIG, ENV, STACK = "config/examples/lmi-vllm-lora.yaml", "dev", "llm-endpoints-dev-llama-lora"
ADAPTER_HASHES = {"sql": "5" * 64, "support": "6" * 64}


@pytest.fixture(scope="module")
def built(synth, tmp_path_factory):
    root = tmp_path_factory.mktemp("lora-build")
    write_fake_manifest(root, "llama-lora", "lmi-vllm", "bf16")
    spec = yaml.safe_load((ROOT / CONFIG).read_text())["endpoints"][0]
    for adapter in spec["adapters"]:
        name = adapter["name"]
        directory = root / "llama-lora.adapters" / name
        directory.mkdir(parents=True)
        (directory / "manifest.json").write_text(
            json.dumps(
                {
                    "kind": "lora-adapter",
                    "endpoint": "llama-lora",
                    "adapter": name,
                    "model": adapter["model"],
                    "content_hash": ADAPTER_HASHES[name],
                }
            )
        )
    return synth(CONFIG, ENV, build_root=root, allow_unbuilt=False)


def test_every_adapter_component_waits_for_its_own_manifest(built):
    resources = built.templates[STACK]["Resources"]
    checks = {
        lid: r
        for lid, r in resources.items()
        if r["Type"] == "AWS::CloudFormation::CustomResource" and "ManifestKey" in r["Properties"]
    }
    by_key = {c["Properties"]["ManifestKey"]: lid for lid, c in checks.items()}
    components = [r for r in resources.values() if r["Type"] == "AWS::SageMaker::InferenceComponent"]
    adapters = {
        r["Properties"]["InferenceComponentName"]: r
        for r in components
        if "BaseInferenceComponentName" in r["Properties"]["Specification"]
    }
    assert len(adapters) == len(ADAPTER_HASHES)
    readable = json.dumps(
        [
            s
            for p in resources.values()
            if p["Type"] == "AWS::IAM::Policy"
            for s in p["Properties"]["PolicyDocument"]["Statement"]
            if s["Action"] == "s3:GetObject"
        ]
    )
    for name, content_hash in ADAPTER_HASHES.items():
        key = f"models/llama-lora/adapters/{name}/{content_hash}/manifest.json"
        assert key in by_key, f"no artifact check of adapter {name}"
        assert checks[by_key[key]]["Properties"]["ContentHash"] == content_hash
        assert by_key[key] in adapters[f"dev-llama-lora-{name}"]["DependsOn"]
        assert key.removesuffix("manifest.json") + "*" in readable  # the check's function may read that artifact
