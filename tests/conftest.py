"""Fixtures every area uses, each made once per session: synthesized configurations (`synth`), tiny models
and their builds, and the moto server (`emulator` per module, `moto_env` per test). Each area's own fixtures are in
its folder's conftest.py; plain helpers (paths, example configs, the CLI) are in helpers.py.

Synth costs ~5 s the first time in a process and ~0.2 s after, so every configuration is synthesized once per
session and its templates shared by all tests. Everything is written under pytest's tmp dir, never into the repo.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The Node that package.json installs (Node 20 is end-of-life), for jsii in this process and the CDK CLI in subprocesses.
os.environ["PATH"] = f"{ROOT / 'node_modules' / '.bin'}{os.pathsep}{os.environ.get('PATH', '')}"
os.environ.setdefault("CDK_DISABLE_CLI_TELEMETRY", "true")
# Synth must not depend on the machine's AWS settings.
for _var in ("CDK_DEFAULT_ACCOUNT", "CDK_DEFAULT_REGION"):
    os.environ.pop(_var, None)
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from helpers import Background, Synthesized, synthesize


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `late` run last, in their order: they collect what a `background` command did meanwhile."""
    items[:] = [i for i in items if i.get_closest_marker("late") is None] + [i for i in items if i.get_closest_marker("late")]


@pytest.fixture(scope="session")
def background(tmp_path_factory) -> Iterator[dict[str, Background]]:
    """Commands running in the background, by name (helpers.Background); any still running at the end is stopped."""
    running: dict[str, Background] = {}
    yield running
    for command in running.values():
        command.stop()

# ---------------------------------------------------------------------------------------------------- synth

@pytest.fixture(scope="session")
def synth(tmp_path_factory):
    """synth(config, env=None, build_root=None, allow_unbuilt=True) -> Synthesized, cached per session."""


    cache: dict[tuple, Synthesized] = {}

    def _synth(config: str, env: str | None = None, build_root: Path | None = None, allow_unbuilt: bool = True):
        key = (config, env, str(build_root), allow_unbuilt)
        if key not in cache:
            cache[key] = synthesize(config, env, tmp_path_factory.mktemp("cdkout"), build_root, allow_unbuilt)
        return cache[key]

    return _synth


@pytest.fixture(scope="session", autouse=True)
def _botocore_reads_each_service_model_once():
    """Every boto3/botocore Session makes its own data loader, which parses the service models' JSON again (the
    SageMaker model alone is several MB): the code under test makes a new session per call, so the suite parsed
    them some thousands of times. One loader per data path serves all sessions; nothing registered on botocore's
    `service-data-loaded` event changes the loaded data (botocore 1.44, boto3), so the answers are the same."""
    import botocore.loaders
    import botocore.session

    original = botocore.session.create_loader
    loaders: dict[str | None, botocore.loaders.Loader] = {}

    def shared_loader(search_path_string: str | None = None) -> botocore.loaders.Loader:
        if search_path_string not in loaders:
            loaders[search_path_string] = original(search_path_string)
        return loaders[search_path_string]

    botocore.session.create_loader = shared_loader
    yield
    botocore.session.create_loader = original


@pytest.fixture(scope="session", autouse=True)
def _sagemaker_tables_load_endpoints_once():
    """sagemaker.core.image_uris.retrieve builds a new botocore endpoint resolver, reading botocore's endpoints.json
    (~0.1 s), on every call; the image tests ask it hundreds of questions. One resolver serves them all: the
    answers are the same, only faster."""
    import functools

    try:
        from sagemaker.core import common_utils
    except ImportError:
        yield
        return
    original = common_utils._botocore_resolver
    common_utils._botocore_resolver = functools.cache(original)
    yield
    common_utils._botocore_resolver = original


# ---------------------------------------------------------------------------------------------------- tiny models and the emulator

# tests/model_build/conftest.py's config names tiny-gpt2 too, with the same settings.
GPT2_ENDPOINT = """endpoints:
  - name: tiny-gpt2
    system: hf-fastload
    model: {model}
    instance_type: ml.m5.xlarge
    dtype: fp16
    max_shard_size: 300KB
"""


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tiny GPT-2 and GPT-J source models (fp32 safetensors + GPT2Tokenizer files)."""
    from model_build.tiny_models import make_tiny_model

    root = tmp_path_factory.mktemp("tiny-models")
    return {arch: make_tiny_model(arch, root / arch) for arch in ("gpt2", "gptj")}


@pytest.fixture(scope="session")
def gpt2_artifact(tmp_path_factory: pytest.TempPathFactory, tiny_models: dict[str, Path]) -> Path:
    """The tiny GPT-2 built as hf-fastload in fp16, sharded (what the serving and handler tests load)."""
    from deployment import load_config
    from model_build.cli import build_endpoint

    root = tmp_path_factory.mktemp("gpt2-artifact")
    config = root / "endpoints.yaml"
    config.write_text(GPT2_ENDPOINT.format(model=tiny_models["gpt2"]))
    out = root / "tiny-gpt2"
    build_endpoint(load_config(config).endpoint("tiny-gpt2"), out, progress=False)
    return out


CHAT_ENDPOINT = """endpoints:
  - name: tiny-chat
    system: hf-fastload
    model: {model}
    instance_type: ml.m5.xlarge
    dtype: fp16
    max_shard_size: 300KB
"""


@pytest.fixture(scope="session")
def tiny_chat_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tiny chat models (model_build.tiny_models.CHAT_ARCHITECTURES), made on first use of each."""
    from model_build.tiny_models import make_tiny_model

    root = tmp_path_factory.mktemp("tiny-chat-models")

    class Models(dict):
        def __missing__(self, arch: str) -> Path:
            self[arch] = make_tiny_model(arch, root / arch)
            return self[arch]

    return Models()


@pytest.fixture(scope="session")
def chat_artifact(tmp_path_factory: pytest.TempPathFactory, tiny_chat_models: dict[str, Path]) -> Path:
    """The tiny Llama (hermes-style chat template, tool tokens) built as hf-fastload in fp16: the chat tests' model."""
    from deployment import load_config
    from model_build.cli import build_endpoint

    root = tmp_path_factory.mktemp("chat-artifact")
    config = root / "endpoints.yaml"
    config.write_text(CHAT_ENDPOINT.format(model=tiny_chat_models["llama"]))
    out = root / "tiny-chat"
    build_endpoint(load_config(config).endpoint("tiny-chat"), out, progress=False)
    return out


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
