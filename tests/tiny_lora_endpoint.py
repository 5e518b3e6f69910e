"""The endpoint the LoRA adapter tests share: a tiny Qwen3 and two tiny PEFT adapters of it, made offline, served by
the vllm system as inference components (what adapters need), each adapter as its own component."""

from __future__ import annotations

from pathlib import Path

import yaml

from deployment import EndpointPlan, load_config
from model_build.tiny_adapters import make_tiny_adapter
from model_build.tiny_models import make_tiny_model

ENDPOINT = "lora"
ADAPTERS = ("sql", "support")


def tiny_lora_endpoint(tmp: Path) -> tuple[Path, EndpointPlan]:
    """The tiny base model (made under `tmp`) and the plan of ENDPOINT with ADAPTERS (config under `tmp`, builds
    under tmp/build); nothing is built yet."""
    model = make_tiny_model("qwen3_thinking", tmp / "qwen3_thinking")
    adapters = {name: make_tiny_adapter(model, tmp / "peft" / name, seed=i) for i, name in enumerate(ADAPTERS, 1)}
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
    return model, load_config(config, build_root=tmp / "build").plan(ENDPOINT)
