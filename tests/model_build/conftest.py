"""Fixtures of the model_build tests: a config naming the tiny models in several build variants (and broken ones
for the error tests), and each variant built once per session."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def model_config(tmp_path_factory: pytest.TempPathFactory, tiny_models: dict[str, Path]) -> Path:
    """A config file naming the tiny models in several build variants, plus broken ones for error tests."""
    root = tmp_path_factory.mktemp("config")
    bad_tokenizer = root / "gpt2-bad-tokenizer"
    shutil.copytree(tiny_models["gpt2"], bad_tokenizer)
    tok_config = json.loads((bad_tokenizer / "tokenizer_config.json").read_text())
    tok_config["tokenizer_class"] = "TokenizersBackend"  # what transformers 5 writes; 4.49 lacks it
    (bad_tokenizer / "tokenizer_config.json").write_text(json.dumps(tok_config))

    def endpoint(name: str, model: Path | str, **extra: str) -> str:
        lines = [
            f"  - name: {name}",
            "    system: hf-fastload",
            f"    model: {model}",
            "    instance_type: ml.m5.xlarge",
        ]
        return "\n".join(lines + [f"    {k}: {v}" for k, v in extra.items()])

    text = (
        "\n".join(
            [
                "endpoints:",
                endpoint("tiny-gpt2", tiny_models["gpt2"], dtype="fp16", max_shard_size="300KB"),
                endpoint("tiny-gptj", tiny_models["gptj"], dtype="fp32"),
                endpoint("tiny-gptj-pickle", tiny_models["gptj"], dtype="fp32", weights_format="torch-save"),
                endpoint("bad-tokenizer", bad_tokenizer, dtype="fp16"),
                endpoint("missing-model", root / "no" / "such-model", dtype="fp16"),
            ]
        )
        + "\n"
    )
    path = root / "endpoints.yaml"
    path.write_text(text)
    return path


@pytest.fixture(scope="session")
def build_artifact(tmp_path_factory: pytest.TempPathFactory, model_config: Path) -> Callable[..., Path]:
    """build_artifact(endpoint_name, tag="") -> artifact dir; each (name, tag) is built once per session."""
    from deployment import load_config
    from model_build.cli import build_endpoint

    environment_plan = load_config(model_config)
    root = tmp_path_factory.mktemp("builds")
    built: dict[tuple[str, str], Path] = {}

    def build(name: str, tag: str = "") -> Path:
        if (name, tag) not in built:
            out = root / (tag or "main") / name
            build_endpoint(environment_plan.endpoint(name), out, progress=False)
            built[(name, tag)] = out
        return built[(name, tag)]

    return build
