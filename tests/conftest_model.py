"""Shared fixtures for model_build tests: tiny models and their builds, each made once (session scope), and
the moto server (`emulator`, one per test module, and `moto_env`, which empties it and points boto3 at it).

Loaded as a plugin (`pytest_plugins = ["conftest_model"]` in the test modules) so every module shares one
instance of each session fixture. Everything is written under pytest's tmp dir, never into the repo.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tiny GPT-2 and GPT-J source models (fp32 safetensors + GPT2Tokenizer files)."""
    from model_build.tiny_models import make_tiny_model

    root = tmp_path_factory.mktemp("tiny-models")
    return {arch: make_tiny_model(arch, root / arch) for arch in ("gpt2", "gptj")}


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
        lines = [f"  - name: {name}", "    system: hf-fastload", f"    model: {model}", "    instance_type: ml.m5.xlarge"]
        return "\n".join(lines + [f"    {k}: {v}" for k, v in extra.items()])

    text = "\n".join([
        "endpoints:",
        endpoint("tiny-gpt2", tiny_models["gpt2"], dtype="fp16", max_shard_size="300KB"),
        endpoint("tiny-gptj", tiny_models["gptj"], dtype="fp32"),
        endpoint("tiny-gptj-pickle", tiny_models["gptj"], dtype="fp32", weights_format="torch-save"),
        endpoint("bad-tokenizer", bad_tokenizer, dtype="fp16"),
        endpoint("missing-model", root / "no" / "such-model", dtype="fp16"),
    ]) + "\n"  # fmt: skip
    path = root / "endpoints.yaml"
    path.write_text(text)
    return path


@pytest.fixture(scope="session")
def build_artifact(tmp_path_factory: pytest.TempPathFactory, model_config: Path) -> Callable[..., Path]:
    """build_artifact(endpoint_name, tag="") -> artifact dir; each (name, tag) is built once per session."""
    from deployment import load_config
    from model_build.cli import build_endpoint

    deployment = load_config(model_config)
    root = tmp_path_factory.mktemp("builds")
    built: dict[tuple[str, str], Path] = {}

    def build(name: str, tag: str = "") -> Path:
        if (name, tag) not in built:
            out = root / (tag or "main") / name
            build_endpoint(deployment.endpoint(name), out, progress=False)
            built[(name, tag)] = out
        return built[(name, tag)]

    return build


@pytest.fixture(scope="session")
def gpt2_artifact(build_artifact: Callable[..., Path]) -> Path:
    return build_artifact("tiny-gpt2")


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One moto server per test module (local_emulator.moto_server.Emulator)."""
    from local_emulator import moto_server

    emu = moto_server.start(tmp_path_factory.mktemp("moto"))
    yield emu
    emu.stop()


@pytest.fixture
def moto_env(emulator: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The module's moto server, emptied, with this process's AWS clients pointed at it."""
    emulator.reset()
    for k, v in emulator.client_env().items():
        monkeypatch.setenv(k, v)
    return emulator


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m model_build ARGS` in a subprocess, as a user runs it."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "model_build", *args],
        capture_output=True, text=True, cwd=cwd or REPO_ROOT, env=env, timeout=120,
    )  # fmt: skip
