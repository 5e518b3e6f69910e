"""deepspeed-byoc: the recipe's artifact file by file, the handler on the tiny GPT-J (non-injected path on CPU),
the handler behind the real byoc_server over HTTP, and kernel injection on a GPU (marked gpu)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers import running

from deployment import load_config
from model_build import BuildError
from systems.byoc_server.contract import GenerationParameters, RequestError

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "config" / "examples" / "deepspeed-byoc.yaml"
DOCKERFILE = REPO / "systems" / "deepspeed_byoc" / "container" / "Dockerfile"
ENDPOINT = "tiny-deepspeed"


def _config(tmp_path: Path, model: Path, **extra: object) -> Path:
    lines = ["endpoints:", f"  - name: {ENDPOINT}", "    system: deepspeed-byoc", f"    model: {model}"]
    extra = {"instance_type": "ml.g5.2xlarge", **extra}
    lines += [f"    {key}: {json.dumps(value) if isinstance(value, dict) else value}" for key, value in extra.items()]
    path = tmp_path / f"config-{abs(hash(tuple(lines)))}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _endpoint(tmp_path: Path, model: Path, **extra: object):
    return load_config(_config(tmp_path, model, **extra)).endpoint(ENDPOINT)


@pytest.fixture(scope="session")
def artifact(tmp_path_factory: pytest.TempPathFactory, tiny_gptj: Path) -> Path:
    from model_build.cli import build_endpoint

    root = tmp_path_factory.mktemp("ds-build")
    endpoint = _endpoint(root, tiny_gptj, max_shard_size="300KB", engine={"max_batch_size": 4})
    build_endpoint(endpoint, root / ENDPOINT, progress=False)
    return root / ENDPOINT


@pytest.fixture(scope="session")
def handler(artifact: Path):
    import torch

    from systems.deepspeed_byoc.handler.handler import DeepSpeedHandler

    torch.set_num_threads(1)
    h = DeepSpeedHandler()
    h.load(artifact)  # deepspeed.json asks for kernel injection; without CUDA the plain model serves
    return h


def params(**kwargs: object) -> GenerationParameters:
    return GenerationParameters(**kwargs)


# ---- system facts, example config, image pins ---------------------------------------------------------


def test_system_facts_and_environment() -> None:
    from systems import get_system

    system = get_system("deepspeed-byoc")
    assert system.gpu_only and system.architectures == ("decoder",) and system.image is None
    assert (REPO / system.own_container.dockerfile) == DOCKERFILE and DOCKERFILE.is_file()
    plan = load_config(EXAMPLE, "dev").plan("gptj-ds-byoc")
    assert system.environment(plan.spec, plan.engine) == {
        "DS_KERNEL_INJECTION": "true",
        "DTYPE": "fp16",
        "TENSOR_PARALLEL_DEGREE": "1",
        "BYOC_PROCESSES": "1",
        "BYOC_HANDLER": "handler:DeepSpeedHandler",
        "MAX_BATCH_SIZE": "4",
    }


def test_example_config_validates_in_every_environment() -> None:
    for env in ("dev", "prod"):
        endpoint = load_config(EXAMPLE, env).endpoint("gptj-ds-byoc")
        assert endpoint.system == "deepspeed-byoc" and endpoint.dtype == "fp16"
    assert load_config(EXAMPLE, "prod").endpoint("gptj-ds-byoc").instance_count == 2


def test_cpu_instance_is_refused(tmp_path: Path, tiny_gptj: Path) -> None:
    from endpoint_config import ConfigError

    with pytest.raises(
        ConfigError, match=r"instance_type: value 'ml.m5.xlarge' has no NVIDIA GPU; system 'deepspeed-byoc'"
    ):
        _endpoint(tmp_path, tiny_gptj, instance_type="ml.m5.xlarge")


def test_dockerfile_pins_match_the_recipe() -> None:
    from systems.deepspeed_byoc import BASE_IMAGE, DEEPSPEED_VERSION, TRANSFORMERS_VERSION

    text = DOCKERFILE.read_text()
    assert re.search(rf"^FROM {re.escape(BASE_IMAGE)}$", text, re.M)
    assert f"deepspeed=={DEEPSPEED_VERSION}" in text and f"transformers=={TRANSFORMERS_VERSION}" in text
    assert 'ENTRYPOINT ["/opt/program/serve"]' in text and "BYOC_HANDLER=handler:DeepSpeedHandler" in text
    # What the COPY lines take is checked against the staged context (tests/systems/test_images.py).


# ---- recipe -------------------------------------------------------------------------------------------


def test_artifact_files(artifact: Path, tiny_gptj: Path) -> None:
    names = sorted(p.name for p in artifact.iterdir())
    shards = [n for n in names if n.endswith(".safetensors")]
    assert len(shards) >= 2 and all(re.fullmatch(r"model-\d{5}-of-\d{5}\.safetensors", n) for n in shards)
    assert sorted(set(names) - set(shards)) == [
        "config.json",
        "deepspeed.json",
        "generation_config.json",
        "manifest.json",
        "merges.txt",
        "model.safetensors.index.json",
        "special_tokens_map.json",
        "tokenizer_config.json",
        "vocab.json",
    ]


def test_weights_are_fp16_and_indexed(artifact: Path) -> None:
    from safetensors import safe_open

    index = json.loads((artifact / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"].values()) == {p.name for p in artifact.glob("*.safetensors")}
    for shard in artifact.glob("*.safetensors"):
        with safe_open(str(shard), "pt") as f:
            for key in f.keys():
                assert str(f.get_slice(key).get_dtype()) == "F16", (shard.name, key)


def test_config_is_for_transformers_4(artifact: Path) -> None:
    config = json.loads((artifact / "config.json").read_text())
    assert config["torch_dtype"] == "float16" and "dtype" not in config and config["model_type"] == "gptj"


def test_tokenizer_files_are_copied_verbatim(artifact: Path, tiny_gptj: Path) -> None:
    for name in ("vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json"):
        assert (artifact / name).read_bytes() == (tiny_gptj / name).read_bytes(), name


def test_engine_config(artifact: Path) -> None:
    assert json.loads((artifact / "deepspeed.json").read_text()) == {
        "dtype": "fp16",
        "max_out_tokens": 512,  # the tiny model's n_positions
        "replace_with_kernel_inject": True,
        "tensor_parallel": {"tp_size": 1},
    }


def test_manifest(artifact: Path) -> None:
    from artifact.manifest import Manifest
    from systems.deepspeed_byoc import DEEPSPEED_VERSION, TRANSFORMERS_VERSION

    manifest = Manifest.load(artifact).document
    assert manifest["system"] == "deepspeed-byoc" and manifest["endpoint"] == ENDPOINT and manifest["dtype"] == "fp16"
    assert manifest["model"]["model_type"] == "gptj" and manifest["model"]["architecture"] == "GPTJForCausalLM"
    assert manifest["engine"]["replace_with_kernel_inject"] is True
    target = manifest["target_container"]
    assert target["deepspeed"] == DEEPSPEED_VERSION and target["transformers"] == TRANSFORMERS_VERSION
    check = manifest["verification"]
    assert (
        check["greedy_tokens_match"]
        and check["tokenizer_ids_match"]
        and check["max_abs_logit_diff"] <= check["tolerance"]
    )
    assert re.fullmatch(r"[0-9a-f]{64}", manifest["content_hash"])
    assert Manifest.load(artifact).verify(artifact, unlisted=True) == []
    assert {f["path"] for f in manifest["files"]} == {p.name for p in artifact.iterdir()} - {"manifest.json"}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"dtype": "bf16"},
            "endpoint 'tiny-deepspeed': dtype: value 'bf16' is not served by system 'deepspeed-byoc'; allowed: fp16",
        ),
        (
            {"engine": {"rolling_batch": "vllm"}},
            "engine.rolling_batch: value 'vllm' is not offered by DeepSpeed kernel injection",
        ),
        (
            {"engine": {"entry_point": "djl_python.deepspeed"}},
            "engine.entry_point: value 'djl_python.deepspeed' is a DJL setting",
        ),
        (
            {"engine": {"max_model_len": 4096}},
            "engine.max_model_len: value 4096 exceeds the model's context of 512 tokens; allowed: 16 to 512",
        ),
        (
            {"instance_type": "ml.p4d.24xlarge", "tensor_parallel_degree": 8},
            "tensor_parallel_degree: value 8 does not divide the model's 4 attention heads; allowed: 1, 2, 4",
        ),
    ],
)
def test_recipe_refuses(tmp_path: Path, tiny_gptj: Path, extra: dict, message: str) -> None:
    from model_build.cli import build_endpoint

    # engine options the system refuses are refused by the config too (deployment.endpoint_rules): set them after it
    endpoint = _endpoint(tmp_path, tiny_gptj, **{k: v for k, v in extra.items() if k != "engine"})
    if "engine" in extra:
        endpoint = endpoint.model_copy(update={"engine": dict(extra["engine"])})
    with pytest.raises(BuildError) as err:
        build_endpoint(endpoint, tmp_path / "out", progress=False)
    assert message in str(err.value)
    assert not (tmp_path / "out").exists()  # refused before any work


def test_recipe_refuses_a_model_type_without_injection_policy(tmp_path: Path, tiny_gptj: Path) -> None:
    from model_build.cli import build_endpoint

    model = tmp_path / "model"
    model.mkdir()
    for source in tiny_gptj.iterdir():
        (model / source.name).write_bytes(source.read_bytes())
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "model_type": "mamba"}))
    with pytest.raises(
        BuildError, match=r"model_type 'mamba'; DeepSpeed 0.12.6 kernel injection .* serves model types gptj, gpt2"
    ):
        build_endpoint(_endpoint(tmp_path, model), tmp_path / "out", progress=False)


# ---- handler (non-injected path) ----------------------------------------------------------------------


def test_handler_loads_the_plain_model_on_cpu(handler) -> None:
    assert handler.kernel_injection is False and handler.tp_size == 1
    assert type(handler.model).__name__ == "GPTJForCausalLM" and str(handler.device) == "cpu"
    assert next(handler.model.parameters()).dtype.__repr__() == "torch.float16"
    assert handler.context_length == 512


def test_greedy_is_deterministic(handler) -> None:
    p = params(max_new_tokens=6, min_new_tokens=6)
    first = handler.generate(["The quick brown fox", "Hello"], p)
    assert len(first) == 2 and all(first)
    assert handler.generate(["The quick brown fox", "Hello"], p) == first
    assert handler.generate(["Hello"], p) == first[1:]  # left padding: a batch row equals the single prompt


def test_max_new_tokens_changes_the_length(handler, monkeypatch: pytest.MonkeyPatch) -> None:
    generated: list[int] = []
    real_generate = handler.model.generate

    def spy(**kwargs):
        output = real_generate(**kwargs)
        generated.append(output.shape[1] - kwargs["input_ids"].shape[1])
        return output

    monkeypatch.setattr(handler.model, "generate", spy)
    short = handler.generate(["The quick brown fox"], params(max_new_tokens=2, min_new_tokens=2))[0]
    long = handler.generate(["The quick brown fox"], params(max_new_tokens=12, min_new_tokens=12))[0]
    handler.generate(["The quick brown fox"], params(max_new_tokens=5))  # may stop early at EOS
    assert generated[:2] == [2, 12] and 1 <= generated[2] <= 5
    assert len(long) > len(short) and long.startswith(short)  # greedy: the longer run extends the shorter


def test_sampling_with_a_seed_is_reproducible(handler) -> None:
    p = params(max_new_tokens=8, min_new_tokens=8, do_sample=True, temperature=1.5, top_k=50, seed=7)
    assert handler.generate(["Once upon a time"], p) == handler.generate(["Once upon a time"], p)


def test_prompt_plus_new_tokens_beyond_the_context_is_a_request_error(handler) -> None:
    with pytest.raises(
        RequestError, match=r"must be <= 512 \(the model's context\); got \d+ inputs tokens \+ max_new_tokens 512"
    ):
        handler.generate(["Hello there"], params(max_new_tokens=512))


def test_environment_overrides(artifact: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from systems.deepspeed_byoc.handler.handler import DeepSpeedHandler, read_engine_config

    monkeypatch.setenv("DS_KERNEL_INJECTION", "false")
    assert read_engine_config(artifact)["kernel_injection"] is False
    monkeypatch.setenv("DS_KERNEL_INJECTION", "maybe")
    with pytest.raises(ValueError, match=r"DS_KERNEL_INJECTION='maybe' is not a boolean; allowed: true, false"):
        read_engine_config(artifact)
    monkeypatch.delenv("DS_KERNEL_INJECTION")
    monkeypatch.setenv("DTYPE", "int8")
    with pytest.raises(ValueError, match=r"dtype 'int8' .* allowed: fp16, bf16, fp32"):
        read_engine_config(artifact)
    monkeypatch.delenv("DTYPE")
    monkeypatch.setenv("TENSOR_PARALLEL_DEGREE", "2")
    with pytest.raises(RuntimeError, match=r"tensor parallel size 2 needs 2 CUDA GPUs"):
        DeepSpeedHandler().load(artifact)


# ---- the handler behind the real server ---------------------------------------------------------------


@pytest.fixture(scope="module")
def server_url(handler, artifact: Path) -> Iterator[str]:
    from systems.byoc_server.app import create_app

    class Preloaded:  # the session's handler is loaded already; the server's load() is then a no-op
        def load(self, model_dir: Path) -> None:
            assert Path(model_dir) == artifact

        def generate(self, prompts: list[str], parameters: GenerationParameters) -> list[str]:
            return handler.generate(prompts, parameters)

    with running(create_app(Preloaded(), artifact), timeout=30) as url:
        yield url


def test_http_both_request_shapes(server_url: str, handler) -> None:
    expected = handler.generate(["Hello"], params(max_new_tokens=5, min_new_tokens=5))
    reply = httpx.post(
        f"{server_url}/invocations",
        json={"inputs": ["Hello"], "parameters": {"max_new_tokens": 5, "min_new_tokens": 5}},
        timeout=30,
    )
    assert reply.status_code == 200 and reply.json() == [{"generated_text": expected[0]}]
    reply = httpx.post(f"{server_url}/invocations", json={"input": "Hello"}, timeout=30)
    assert reply.status_code == 200 and len(reply.json()) == 1
    assert reply.json()[0]["generated_text"] == handler.generate(["Hello"], params())[0]


def test_http_errors(server_url: str) -> None:
    url = f"{server_url}/invocations"
    too_long = httpx.post(url, json={"inputs": "Hello there", "parameters": {"max_new_tokens": 512}}, timeout=30)
    assert too_long.status_code == 400 and "must be <= 512 (the model's context)" in too_long.json()["error"]
    bad = httpx.post(url, json={"inputs": "Hi", "parameters": {"top_p": 2}}, timeout=30)
    assert (
        bad.status_code == 400 and bad.json()["error"] == "parameters.top_p must be greater than 0 and at most 1, got 2"
    )
    assert httpx.post(url, content=b"Hi", headers={"content-type": "text/plain"}).status_code == 415


# ---- GPU: kernel injection ----------------------------------------------------------------------------


@pytest.mark.gpu
def test_kernel_injection_on_gpu(artifact: Path) -> None:
    """DeepSpeed replaces the GPT-J blocks with its fused kernels and generates what the plain model does."""
    import importlib.util

    import torch

    if not torch.cuda.is_available():
        pytest.skip("kernel injection needs a CUDA GPU; torch.cuda.is_available() is False")
    if importlib.util.find_spec("deepspeed") is None:
        pytest.skip("deepspeed is not installed (it is in the deepspeed-byoc image, not in the build venv)")
    from systems.deepspeed_byoc.handler.handler import DeepSpeedHandler

    plain = DeepSpeedHandler()
    plain.load(artifact, kernel_injection=False)
    injected = DeepSpeedHandler()
    injected.load(artifact, kernel_injection=True)
    assert injected.kernel_injection is True
    modules = {type(m).__name__ for m in injected.model.modules()}
    assert any(name.startswith("DeepSpeed") for name in modules), modules
    p = params(max_new_tokens=8, min_new_tokens=8)
    assert injected.generate(["The quick brown fox"], p) == plain.generate(["The quick brown fox"], p)
