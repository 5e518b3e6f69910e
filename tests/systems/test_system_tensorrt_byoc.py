"""tensorrt-byoc: the recipe's ONNX export and its verification, the handler on the ONNX Runtime backend, the
shared byoc_server over HTTP, the engine cache logic, and the TensorRT path (GPU only, skipped elsewhere)."""

from __future__ import annotations

import importlib.util
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from helpers import running

from model_build import BuildError
from systems.byoc_server.contract import GenerationParameters, RequestError

# slow: ONNX export and ONNX Runtime builds (make test-fast leaves them out)
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SMALL_PROFILE = {"min_batch": 1, "opt_batch": 2, "max_batch": 2, "max_sequence_length": 16}


# ------------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="session")
def trt_config(tmp_path_factory: pytest.TempPathFactory, tiny_models: dict[str, Path]) -> Path:
    root = tmp_path_factory.mktemp("trt-config")
    small = ", ".join(f"{k}: {v}" for k, v in SMALL_PROFILE.items())

    def endpoint(name: str, model: Path, extra: str = "") -> str:
        return (
            f"  - name: {name}\n    system: tensorrt-byoc\n    model: {model}\n"
            f"    instance_type: ml.g4dn.xlarge\n{extra}"
        )

    text = "endpoints:\n" + "".join(
        [
            endpoint("tiny-trt", tiny_models["gpt2"]),
            endpoint(
                "tiny-trt-small",
                tiny_models["gpt2"],
                f"    dtype: fp32\n    engine:\n      tensorrt_profile: {{{small}}}\n",
            ),
            endpoint("tiny-trt-gptj", tiny_models["gptj"]),
            endpoint(
                "tiny-trt-long",
                tiny_models["gpt2"],
                "    engine:\n      tensorrt_profile: {max_sequence_length: 4096}\n",
            ),
        ]
    )
    path = root / "endpoints.yaml"
    path.write_text(text)
    return path


@pytest.fixture(scope="session")
def trt_environment_plan(trt_config: Path):
    from deployment import load_config

    return load_config(trt_config)


@pytest.fixture(scope="session")
def trt_build(tmp_path_factory: pytest.TempPathFactory, trt_environment_plan):
    from model_build.cli import build_endpoint

    root = tmp_path_factory.mktemp("trt-builds")
    built: dict[str, tuple[Path, dict]] = {}

    def build(name: str) -> tuple[Path, dict]:
        if name not in built:
            out = root / name
            manifest = build_endpoint(trt_environment_plan.endpoint(name), out, progress=False)
            built[name] = (out, manifest)
        return built[name]

    return build


@pytest.fixture(scope="session")
def trt_artifact(trt_build) -> Path:
    return trt_build("tiny-trt")[0]


@pytest.fixture(scope="session")
def source_model(tiny_models: dict[str, Path]):
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(tiny_models["gpt2"]).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_models["gpt2"])
    return model, tokenizer


@pytest.fixture(scope="session")
def handler(trt_artifact: Path):
    from systems.tensorrt_byoc.handler.handler import TensorRTHandler

    h = TensorRTHandler(backend="onnxruntime")
    h.load(trt_artifact)
    return h


@pytest.fixture(scope="session")
def small_handler(trt_build):
    from systems.tensorrt_byoc.handler.handler import TensorRTHandler

    h = TensorRTHandler(backend="onnxruntime")
    h.load(trt_build("tiny-trt-small")[0])
    return h


# ------------------------------------------------------------------------------------------------ recipe
def test_artifact_files(trt_build) -> None:
    import onnx

    artifact, manifest = trt_build("tiny-trt")
    files = {e["path"] for e in manifest["files"]}
    assert files == {
        "decoder.onnx",
        "decoder.json",
        "tensorrt_profile.json",
        "tokenizer.json",
        "vocab.json",
        "merges.txt",
        "tokenizer_config.json",
        "special_tokens_map.json",
    }
    assert not any(p.suffix in (".engine", ".plan", ".safetensors", ".bin") for p in artifact.iterdir())

    # the ONNX graph: fp32, the documented inputs/outputs with dynamic batch/sequence/past axes
    graph = onnx.load(str(artifact / "decoder.onnx")).graph
    dims = {
        v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in [*graph.input, *graph.output]
    }
    assert dims["input_ids"] == ["batch", "seq"]
    assert dims["attention_bias"] == ["batch", 1, "seq", "total"]
    assert dims["past_key_values"] == [2, 2, "batch", 4, "past", 16]
    assert dims["logits"] == ["batch", "seq", 785]
    assert dims["present_key_values"][2::2] == ["batch", "total"]
    assert {i.data_type for i in graph.initializer} == {onnx.TensorProto.FLOAT}

    info = json.loads((artifact / "decoder.json").read_text())
    assert info | {"serving_dtype": "fp16"} == info and info["onnx_dtype"] == "fp32"
    assert (info["num_layers"], info["num_heads"], info["head_dim"], info["vocab_size"]) == (2, 4, 16, 785)

    # the profile: the schema's reference defaults (batch 1-10, sequence up to 42) and every input's shapes
    profile = json.loads((artifact / "tensorrt_profile.json").read_text())
    assert {k: profile[k] for k in ("min_batch", "opt_batch", "max_batch", "max_sequence_length")} == {
        "min_batch": 1,
        "opt_batch": 1,
        "max_batch": 10,
        "max_sequence_length": 42,
    }
    assert profile["shapes"]["input_ids"]["max"] == [10, 42]
    assert profile["shapes"]["past_key_values"]["max"] == [2, 2, 10, 4, 42, 16]
    assert profile["shapes"]["attention_bias"]["max"] == [10, 1, 42, 43]

    assert manifest["system"] == "tensorrt-byoc" and manifest["dtype"] == "fp16"
    assert manifest["onnx"]["files"] == ["decoder.onnx"] and manifest["tensorrt_profile"] == profile
    assert len(manifest["content_hash"]) == 64
    from artifact.manifest import Manifest

    assert Manifest.load(artifact).verify(artifact, unlisted=True) == []


def test_tokenizer_json_matches_source(trt_artifact: Path, source_model) -> None:
    from tokenizers import Tokenizer

    _, source = source_model
    ours = Tokenizer.from_file(str(trt_artifact / "tokenizer.json"))
    for text in ("Hello, world!", "Numbers such as 2048 and 2024-05-01.", "  spaced   out  "):
        assert ours.encode(text, add_special_tokens=False).ids == source(text, add_special_tokens=False)["input_ids"]


def test_onnx_matches_pytorch_within_tolerance(trt_build) -> None:
    from systems.tensorrt_byoc.recipe import TOLERANCE

    check = trt_build("tiny-trt")[1]["verification"]
    assert check["passed"] and check["greedy_tokens_match"] and check["tokenizer_ids_match"]
    assert 0 <= check["max_abs_logit_diff"] <= TOLERANCE
    assert sorted({c["batch_size"] for c in check["cases"]}) == [1, 2, 4]  # left padding exercised
    print(f"ONNX Runtime vs PyTorch max abs logit diff: {check['max_abs_logit_diff']:.3g}")


def test_perturbed_onnx_weight_is_caught(trt_artifact: Path, source_model, tmp_path: Path) -> None:
    """The check can fail: 10 % on the embedding matrix (tied to the LM head) moves the logits well past it."""
    import onnx
    from onnx import numpy_helper

    from systems.tensorrt_byoc.recipe import TOLERANCE, verify

    bad = tmp_path / "bad"
    shutil.copytree(trt_artifact, bad)
    model = onnx.load(str(bad / "decoder.onnx"))
    for init in model.graph.initializer:
        if init.name == "transformer.wte.weight":
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) * 1.1, init.name))
            break
    else:
        pytest.fail("no transformer.wte.weight initializer in the graph")
    onnx.save(model, str(bad / "decoder.onnx"))
    result = verify(bad, *source_model)
    assert not result["passed"]
    assert result["max_abs_logit_diff"] > TOLERANCE


def test_build_refuses_a_graph_that_fails_verification(trt_environment_plan, tmp_path: Path, monkeypatch) -> None:
    import onnx
    from onnx import numpy_helper

    from systems.tensorrt_byoc import recipe

    original = recipe.export_onnx

    def export_then_corrupt(model, out_dir):
        files = original(model, out_dir)
        graph = onnx.load(str(out_dir / recipe.GRAPH_FILE))
        init = next(i for i in graph.graph.initializer if i.name.endswith("mlp.c_fc.bias"))
        init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) + 1.0, init.name))
        onnx.save(graph, str(out_dir / recipe.GRAPH_FILE))
        return files

    monkeypatch.setattr(recipe, "export_onnx", export_then_corrupt)
    from model_build.cli import build_endpoint

    out = tmp_path / "out"
    with pytest.raises(
        BuildError, match=r"'tiny-trt': the exported ONNX graph does not reproduce .* max abs logit diff"
    ):
        build_endpoint(trt_environment_plan.endpoint("tiny-trt"), out, progress=False)
    assert not out.exists()  # nothing half-written


def test_refuses_non_gpt2(trt_environment_plan, tmp_path: Path) -> None:
    from systems.tensorrt_byoc.recipe import build

    plan = trt_environment_plan.plan("tiny-trt-gptj")
    with pytest.raises(
        BuildError, match=r"endpoint 'tiny-trt-gptj': model: .* model_type 'gptj' .* exports GPT-2 only"
    ):
        build(plan.spec, plan.engine, tmp_path / "x", progress=False)


def test_refuses_profile_beyond_positions(trt_environment_plan, tmp_path: Path) -> None:
    from systems.tensorrt_byoc.recipe import build

    plan = trt_environment_plan.plan("tiny-trt-long")
    with pytest.raises(
        BuildError, match=r"tensorrt_profile.max_sequence_length: value 4096 is above the model's n_positions 512"
    ):
        build(plan.spec, plan.engine, tmp_path / "x", progress=False)


def test_cli_reports_refusal(trt_config: Path) -> None:
    from helpers import run_cli

    result = run_cli("build", "--config", str(trt_config), "--endpoint", "tiny-trt-gptj", "--quiet")
    assert result.returncode == 2, result.stderr
    assert "exports GPT-2 only" in result.stderr and "Traceback" not in result.stderr


# ------------------------------------------------------------------------------------------------ handler
def test_greedy_is_deterministic_and_batched_like_single(handler) -> None:
    prompts = ["The quick brown fox", "Hello", "Once upon a time there was a small town"]
    params = GenerationParameters(max_new_tokens=8, min_new_tokens=8)
    batched = handler.generate(prompts, params)
    single = [handler.generate([p], params)[0] for p in prompts]
    assert batched == single == handler.generate(prompts, params)
    for prompt in prompts:
        ids = handler.encode([prompt], params)
        assert len(handler.generate_ids(ids, params)[0]) == 8


def test_sampling_parameters(handler) -> None:
    prompts = ["The children played on the beach"]
    greedy = handler.generate(prompts, GenerationParameters(max_new_tokens=10, min_new_tokens=10))
    sample = GenerationParameters(max_new_tokens=10, min_new_tokens=10, do_sample=True, temperature=1.5, seed=7)
    assert handler.generate(prompts, sample) == handler.generate(prompts, sample)  # seeded: reproducible
    others = {handler.generate(prompts, sample.model_copy(update={"seed": s}))[0] for s in range(6)}
    assert len(others) > 1
    top1 = sample.model_copy(update={"top_k": 1})
    assert handler.generate(prompts, top1) == greedy  # top_k 1 is greedy
    tiny_p = sample.model_copy(update={"top_p": 1e-6})
    assert handler.generate(prompts, tiny_p) == greedy  # top_p keeps only the most likely token
    penalised = GenerationParameters(max_new_tokens=10, min_new_tokens=10, repetition_penalty=5.0)
    ids = handler.generate_ids(handler.encode(prompts, penalised), penalised)[0]
    assert len(ids) == 10


def test_min_new_tokens_and_eos(handler) -> None:
    ids = handler.encode(["The quick brown fox"], GenerationParameters())
    eos = handler.info["eos_token_id"]
    for n in (1, 5):
        out = handler.generate_ids(ids, GenerationParameters(max_new_tokens=n, min_new_tokens=n))[0]
        assert len(out) == n and eos not in out


def test_more_prompts_than_max_batch_run_in_chunks(small_handler) -> None:
    prompts = ["a", "The quick", "Hello, world!", "In the spring", "Paris"]
    params = GenerationParameters(max_new_tokens=4, min_new_tokens=4)
    assert small_handler.max_batch == 2
    assert small_handler.generate(prompts, params) == [small_handler.generate([p], params)[0] for p in prompts]
    with pytest.raises(RequestError, match="1-2 prompts"):
        small_handler.generate_ids([[1], [2], [3]], params)


def test_profile_limits(small_handler) -> None:
    long_prompt = "The quick brown fox jumps over the lazy dog."
    n = len(small_handler.encode([long_prompt], GenerationParameters(max_new_tokens=1))[0])
    assert 2 < n < 15
    over = 16 - n + 1
    with pytest.raises(
        RequestError,
        match=rf"inputs\[1\] has {n} tokens; with max_new_tokens {over} that is 17, above .*max_sequence_length 16",
    ):
        small_handler.generate(["Hi", long_prompt], GenerationParameters(max_new_tokens=over))
    with pytest.raises(RequestError, match="max_new_tokens: value 16 leaves no room .* max_sequence_length is 16"):
        small_handler.generate(["Hi"], GenerationParameters(max_new_tokens=16))
    with pytest.raises(RequestError, match="num_beams: value 2 .* allowed: 1"):
        small_handler.generate(["Hi"], GenerationParameters(num_beams=2))
    # exactly at the limit is served
    fits = 16 - n
    assert small_handler.generate([long_prompt], GenerationParameters(max_new_tokens=fits, min_new_tokens=fits))


def test_environment_must_match_the_artifact_profile(trt_artifact: Path, monkeypatch) -> None:
    from systems.tensorrt_byoc.handler.handler import TensorRTHandler

    monkeypatch.setenv("TRT_MAX_SEQUENCE_LENGTH", "64")
    with pytest.raises(ValueError, match="TRT_MAX_SEQUENCE_LENGTH=64 .* max_sequence_length=42"):
        TensorRTHandler(backend="onnxruntime").load(trt_artifact)


def test_backend_selection(trt_artifact: Path, monkeypatch) -> None:
    from systems.tensorrt_byoc.handler.engine import open_backend

    monkeypatch.setenv("TRT_BACKEND", "cuda-magic")
    with pytest.raises(ValueError, match="TRT_BACKEND='cuda-magic' .* allowed: tensorrt, onnxruntime"):
        open_backend(trt_artifact, {}, {})
    if importlib.util.find_spec("tensorrt") is None:
        monkeypatch.setenv("TRT_BACKEND", "tensorrt")
        with pytest.raises(RuntimeError, match="tensorrt Python package cannot be imported.*TRT_BACKEND=onnxruntime"):
            open_backend(trt_artifact, {}, {})


# ------------------------------------------------------------------------------------------------ engine cache
def test_engine_cache_key_and_reuse(trt_artifact: Path, tmp_path: Path) -> None:
    """The cache logic without TensorRT: a second start with the same key loads, any key part changes it."""
    from systems.tensorrt_byoc.handler import engine

    info = json.loads((trt_artifact / "decoder.json").read_text())
    profile = json.loads((trt_artifact / "tensorrt_profile.json").read_text())
    shapes = engine.profile_shapes(profile, info)
    assert shapes == profile["shapes"]
    sha = engine.onnx_sha256(trt_artifact)
    manifest_sha = {e["path"]: e["sha256"] for e in json.loads((trt_artifact / "manifest.json").read_text())["files"]}
    assert sha == __import__("hashlib").sha256(f"decoder.onnx\0{manifest_sha['decoder.onnx']}\n".encode()).hexdigest()
    key = engine.engine_cache_key("Tesla T4 sm_75", "10.7.0", sha, shapes, "fp16")
    variants = [
        engine.engine_cache_key("NVIDIA A10G sm_86", "10.7.0", sha, shapes, "fp16"),
        engine.engine_cache_key("Tesla T4 sm_75", "10.8.0", sha, shapes, "fp16"),
        engine.engine_cache_key("Tesla T4 sm_75", "10.7.0", "0" * 64, shapes, "fp16"),
        engine.engine_cache_key(
            "Tesla T4 sm_75", "10.7.0", sha, engine.profile_shapes({**profile, "max_batch": 4}, info), "fp16"
        ),
        engine.engine_cache_key("Tesla T4 sm_75", "10.7.0", sha, shapes, "fp32"),
    ]
    assert len({key, *variants}) == 6

    builds: list[int] = []

    class FakeTRT(engine.TensorRTBackend):
        def __init__(self) -> None:  # only the cache part of the real __init__
            self.trt = type("trt", (), {"__version__": "10.7.0"})
            self.shapes = shapes
            self.engine_path = tmp_path / "cache" / f"decoder-{key[:24]}.engine"
            self.cache_hit = False

        def _build(self, model_dir: Path, precision: str) -> bytes:
            builds.append(1)
            return b"serialized-engine"

    first, second = FakeTRT(), FakeTRT()
    assert first._load_or_build(trt_artifact, "fp16", "Tesla T4 sm_75", key) == b"serialized-engine"
    assert second._load_or_build(trt_artifact, "fp16", "Tesla T4 sm_75", key) == b"serialized-engine"
    assert builds == [1] and not first.cache_hit and second.cache_hit
    meta = json.loads(first.engine_path.with_suffix(".json").read_text())
    assert meta["gpu"] == "Tesla T4 sm_75" and meta["key"] == key
    assert not list((tmp_path / "cache").glob("*.tmp-*"))


def _gpu_missing() -> str | None:
    if importlib.util.find_spec("tensorrt") is None:
        return "the tensorrt Python package is not installed (it comes with the tensorrt-byoc image)"
    try:
        from systems.tensorrt_byoc.handler.engine import _check, _cudart

        if _check(_cudart().cudaGetDeviceCount()) < 1:
            return "no CUDA GPU visible"
    except Exception as err:  # cuda-python missing or no driver
        return f"no usable CUDA runtime ({type(err).__name__}: {err})"
    return None


@pytest.mark.gpu
@pytest.mark.skipif(_gpu_missing() is not None, reason=f"TensorRT path needs a GPU: {_gpu_missing()}")
def test_tensorrt_engine_matches_onnxruntime(trt_artifact: Path, handler, tmp_path: Path, monkeypatch) -> None:
    """On a GPU: the engine builds from the artifact, its logits agree with ONNX Runtime within fp16 error,
    its greedy tokens match, and a second start reuses the cached engine."""
    from systems.tensorrt_byoc.handler.handler import TensorRTHandler

    monkeypatch.setenv("TRT_ENGINE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TRT_PRECISION", "fp16")
    trt = TensorRTHandler(backend="tensorrt")
    trt.load(trt_artifact)
    assert not trt.backend.cache_hit
    params = GenerationParameters(max_new_tokens=8, min_new_tokens=8)
    batch = handler.encode(["The quick brown fox", "Hello, world! How are you today?"], params)
    ours, theirs = [], []
    assert trt.generate_ids(batch, params, trace=ours) == handler.generate_ids(batch, params, trace=theirs)
    assert max(float(np.abs(a - b).max()) for a, b in zip(ours, theirs)) < 5e-2
    again = TensorRTHandler(backend="tensorrt")
    again.load(trt_artifact)
    assert again.backend.cache_hit


# ------------------------------------------------------------------------------------------------ HTTP
@pytest.fixture(scope="module")
def server_url(trt_artifact: Path) -> Iterator[str]:
    """The shared byoc_server app around the handler (ONNX Runtime backend), uvicorn on a localhost port."""
    from systems.byoc_server.app import create_app
    from systems.tensorrt_byoc.handler.handler import TensorRTHandler

    with running(create_app(TensorRTHandler(backend="onnxruntime"), trt_artifact), timeout=30) as url:
        yield url


def test_http_both_request_shapes(server_url: str, handler) -> None:
    reference = httpx.post(f"{server_url}/invocations", json={"input": "The quick brown fox"}, timeout=30)
    assert reference.status_code == 200, reference.text
    default = handler.generate(["The quick brown fox"], GenerationParameters())
    assert reference.json() == [{"generated_text": default[0]}]

    params = {"max_new_tokens": 5, "min_new_tokens": 5, "do_sample": True, "top_k": 20, "seed": 3}
    hf = httpx.post(
        f"{server_url}/invocations", json={"inputs": ["Hello", "In the spring"], "parameters": params}, timeout=30
    )
    assert hf.status_code == 200, hf.text
    expected = handler.generate(["Hello", "In the spring"], GenerationParameters(**params))
    assert hf.json() == [{"generated_text": t} for t in expected]


def test_http_profile_limit_is_400(server_url: str) -> None:
    reply = httpx.post(
        f"{server_url}/invocations", json={"inputs": "Hello there", "parameters": {"max_new_tokens": 41}}, timeout=30
    )
    assert reply.status_code == 400
    assert "max_sequence_length 42" in reply.json()["error"]


# ------------------------------------------------------------------------------------------------ system facts
def test_system_facts_and_container(trt_environment_plan) -> None:
    from systems import get_system

    system = get_system("tensorrt-byoc")
    assert system.gpu_only and system.architectures == ("decoder",) and system.image is None
    assert system.default_startup_timeout_s >= 900
    small = trt_environment_plan.plan("tiny-trt-small")
    env = system.environment(small.spec, small.engine)
    assert env["TRT_BACKEND"] == "tensorrt" and env["TRT_ENGINE_CACHE_DIR"]
    assert (env["TRT_MAX_BATCH"], env["TRT_MAX_SEQUENCE_LENGTH"], env["TRT_PRECISION"]) == ("2", "16", "fp32")
    assert system.startup_timeout_s(trt_environment_plan.endpoint("tiny-trt")) >= 900

    dockerfile = (REPO / system.own_container.dockerfile).read_text()
    base = next(line.split()[1] for line in dockerfile.splitlines() if line.startswith("FROM "))
    assert base.startswith("nvcr.io/nvidia/tensorrt:") and base.split(":")[1][:2].isdigit() and "latest" not in base
    assert "BYOC_HANDLER=tensorrt_handler.handler:TensorRTHandler" in dockerfile


def test_gpu_only_and_example_config(tiny_models: dict[str, Path], tmp_path: Path) -> None:
    from deployment import load_config
    from endpoint_config import ConfigError

    path = tmp_path / "cpu.yaml"
    path.write_text(
        f"endpoints:\n  - name: cpu\n    system: tensorrt-byoc\n    model: {tiny_models['gpt2']}\n    instance_type: ml.m5.xlarge\n"
    )
    with pytest.raises(ConfigError, match="has no NVIDIA GPU; system 'tensorrt-byoc' needs one"):
        load_config(path)
    example = REPO / "config" / "examples" / "tensorrt-byoc.yaml"
    for env in ("dev", "prod"):
        plan = load_config(example, env).plan("gpt2-tensorrt")
        assert plan.spec.model == "openai-community/gpt2" and plan.engine.tensorrt_profile.max_batch == 10
        assert plan.engine.tensorrt_profile.max_sequence_length == 42


def test_default_length_fits_the_profile(small_handler) -> None:
    """Without max_new_tokens (the reference request shape) the default is cut to the room the profile leaves."""
    params = GenerationParameters()  # max_new_tokens not given: the contract default 64 > max_sequence_length 16
    ids = small_handler.encode(["Hello, world!", "a"], params)
    fitted = small_handler.fit_default_length(ids, params)
    assert fitted.max_new_tokens == 16 - max(len(r) for r in ids)
    assert len(small_handler.generate(["Hello, world!", "a"], params)) == 2
    with pytest.raises(RequestError, match="min_new_tokens: value 15 does not fit"):
        small_handler.generate(["Hello, world!"], GenerationParameters(min_new_tokens=15))
    with pytest.raises(
        RequestError, match=r"has \d+ tokens, which leaves no room to generate.*max_sequence_length is 16"
    ):
        small_handler.generate(["The quick brown fox jumps over the lazy dog. " * 3], params)
