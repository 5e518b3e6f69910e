"""DJL Serving / LMI systems: djl-deepspeed, djl-accelerate, djl-fastertransformer, lmi-vllm, lmi-trtllm.

Each recipe runs on a tiny real model (GPT-J for the decoder systems, T5 for FasterTransformer) and its output
is checked file by file: serving.properties parsed and compared, weights loadable by transformers, manifest
hashes; the container environment of each system exactly; the handlers (model.py) on CPU through a test double
of DJL's `djl_python` Input/Output (the real module ships only inside the DJL containers, not on PyPI).
What needs a GPU (DeepSpeed kernels, vLLM, TensorRT-LLM, FasterTransformer) is not exercised here.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

# slow: every DJL system's artifact built (make test-fast leaves them out)
pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str):
    from helpers import run_cli as run

    return run(*args)


DJL_SYSTEMS = ("djl-deepspeed", "djl-accelerate", "djl-fastertransformer", "lmi-vllm", "lmi-trtllm")
WEIGHTS_S3 = "s3://bucket/artifacts/flan-t5/abc123/weights"


# ---- test double of djl_python (Input/Output), as the container's handlers use it ------------------------


class FakeInput:
    """Test double of djl_python.inputs.Input: properties (option.* without the prefix, model_dir) and a body."""

    def __init__(self, properties: dict[str, str], body: Any = None) -> None:
        self._properties, self._body = properties, body

    def get_properties(self) -> dict[str, str]:
        return self._properties

    def is_empty(self) -> bool:
        return self._body is None

    def get_as_bytes(self) -> bytes:  # the real one returns the body's bytes (a bytearray)
        return bytearray(
            self._body.encode()
            if isinstance(self._body, str)
            else self._body
            if isinstance(self._body, bytes)
            else json.dumps(self._body).encode()
        )

    def get_as_json(self) -> Any:
        return json.loads(self.get_as_bytes())


class FakeOutput:
    """Test double of djl_python.outputs.Output: status code, message, JSON content (add_as_json returns self)."""

    def __init__(self) -> None:
        self.code, self.message, self.content = 200, "OK", None

    def set_code(self, code: int) -> FakeOutput:
        self.code = code
        return self

    def set_message(self, message: str) -> FakeOutput:
        self.message = message
        return self

    def add_as_json(self, value: Any) -> FakeOutput:
        self.content = json.loads(json.dumps(value))  # must be JSON-serializable, as in DJL
        return self


def import_handler(path: Path, name: str) -> types.ModuleType:
    """Import an artifact's model.py with the djl_python double in place (fresh module: fresh global model)."""
    fake = types.ModuleType("djl_python")
    fake.Input, fake.Output = FakeInput, FakeOutput
    sys.modules["djl_python"] = fake
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---- fixtures ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def djl_config(tmp_path_factory: pytest.TempPathFactory, tiny_models: dict[str, Path], tiny_t5: Path) -> Path:
    gptj = tiny_models["gptj"]
    root = tmp_path_factory.mktemp("djl-config")

    def fake_checkpoint(model_type: str) -> Path:
        """A checkpoint directory with only what the FasterTransformer recipe reads before refusing it."""
        directory = root / model_type
        directory.mkdir()
        (directory / "config.json").write_text(json.dumps({"model_type": model_type}))
        (directory / "model.safetensors").write_bytes(len(b"{}").to_bytes(8, "little") + b"{}")  # empty header
        return directory

    def ep(name: str, system: str, model: Path, tp: int = 2, dtype: str = "fp32", **engine: Any) -> str:
        lines = [
            f"  - name: {name}",
            f"    system: {system}",
            f"    model: {model}",
            f"    dtype: {dtype}",
            "    instance_type: ml.g5.12xlarge",
            f"    tensor_parallel_degree: {tp}",
            "    max_shard_size: 300KB",
        ]
        if engine:
            lines.append(f"    engine: {json.dumps(engine)}")
        return "\n".join(lines)

    text = (
        "\n".join(
            [
                "endpoints:",
                ep("ds", "djl-deepspeed", gptj, max_model_len=512, max_batch_size=4),
                ep("ds-custom", "djl-deepspeed", gptj, custom_handler=True),
                ep("acc", "djl-accelerate", gptj, dtype="fp16"),
                ep("ft", "djl-fastertransformer", tiny_t5, tp=4),
                ep("vllm", "lmi-vllm", gptj, max_batch_size=32, max_model_len=512),
                ep("trt", "lmi-trtllm", gptj, max_model_len=512),
                # error cases (engine options a system does not implement are refused by the config already: BAD_ENGINE)
                ep("ft-gpt2", "djl-fastertransformer", tiny_models["gpt2"], tp=4),
                ep("ft-gptj", "djl-fastertransformer", gptj, tp=4),
                ep("ft-mt5", "djl-fastertransformer", fake_checkpoint("mt5"), tp=4),
                ep("ft-llama", "djl-fastertransformer", fake_checkpoint("llama"), tp=4),
            ]
        )
        + "\n"
    )
    path = root / "djl.yaml"
    path.write_text(text)
    return path


# Engine options each system's typed model refuses: (a configured endpoint of that system, the `engine:` it gets).
BAD_ENGINE = {
    "vllm-rb": ("vllm", {"rolling_batch": "lmi-dist"}),
    "acc-len": ("acc", {"max_model_len": 512}),
    "ds-entry": ("ds", {"entry_point": "djl_python.vllm"}),
    "ft-batch": ("ft", {"max_batch_size": 8}),
    "trt-rb": ("trt", {"rolling_batch": "trtllm"}),
}


@pytest.fixture(scope="session")
def djl_build(tmp_path_factory: pytest.TempPathFactory, djl_config: Path, tiny_t5: Path):
    from deployment import load_config
    from model_build.cli import build_endpoint

    environment_plan = load_config(djl_config)
    root = tmp_path_factory.mktemp("djl-builds")
    built: dict[str, Path] = {}

    def build(name: str) -> Path:
        if name not in built:
            plan = environment_plan.plan(name)
            build_endpoint(plan.spec, root / name, progress=False, engine=plan.engine)
            built[name] = root / name
        return built[name]

    def endpoint(name: str):
        if name == "ds-t5":  # the config loader refuses it already (systems/checks.py); the recipe must too
            return environment_plan.endpoint("ds").model_copy(
                update={"name": "ds-t5", "model": str(tiny_t5), "tensor_parallel_degree": 1}
            )
        if (
            name == "vllm-len"
        ):  # refused at load too (systems/checks.py unprofiled_engine_problems); the recipe must too
            vllm = environment_plan.endpoint("vllm")
            return vllm.model_copy(update={"name": name, "engine": {**vllm.engine, "max_model_len": 4096}})
        if name in BAD_ENGINE:  # likewise refused by the config (deployment.endpoint_rules); the recipe must too
            base, engine = BAD_ENGINE[name]
            return environment_plan.endpoint(base).model_copy(update={"name": name, "engine": dict(engine)})
        return environment_plan.endpoint(name)

    build.endpoint = endpoint  # type: ignore[attr-defined]
    build.plan = environment_plan.plan  # type: ignore[attr-defined]
    return build


def files_of(directory: Path) -> set[str]:
    return {p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file()}


def check_manifest(artifact: Path, system: str, endpoint: str, dtype: str) -> dict[str, Any]:
    from artifact.manifest import Manifest

    manifest = Manifest.load(artifact).document
    assert (manifest["system"], manifest["endpoint"], manifest["dtype"]) == (system, endpoint, dtype)
    assert Manifest.load(artifact).verify(artifact, unlisted=True) == []
    assert {e["path"] for e in manifest["files"]} == files_of(artifact) - {"manifest.json"}
    check = manifest["verification"]
    assert check["greedy_tokens_match"] and check["tokenizer_ids_match"]
    assert 0 <= check["max_abs_logit_diff"] <= check["tolerance"]
    return manifest


def check_decoder_weights(artifact: Path, dtype: str) -> None:
    import torch
    import transformers
    from safetensors import safe_open

    names = files_of(artifact)
    shards = sorted(n for n in names if n.startswith("model-") and n.endswith(".safetensors"))
    assert len(shards) >= 2 and "model.safetensors.index.json" in names
    assert {"config.json", "vocab.json", "merges.txt", "tokenizer_config.json"} <= names
    config = json.loads((artifact / "config.json").read_text())
    assert config["torch_dtype"] == {"fp32": "float32", "fp16": "float16"}[dtype] and "dtype" not in config
    with safe_open(str(artifact / shards[0]), "pt") as f:
        assert {str(f.get_slice(k).get_dtype()) for k in f.keys()} == {"F32" if dtype == "fp32" else "F16"}
    model = transformers.AutoModelForCausalLM.from_pretrained(artifact, dtype=torch.float32)
    tokenizer = transformers.AutoTokenizer.from_pretrained(artifact)
    assert type(model).__name__ == "GPTJForCausalLM"
    assert tokenizer("Hello world")["input_ids"]


# ---- system facts and container environments ------------------------------------------------------------


def test_system_facts() -> None:
    from systems import get_system
    from systems.images import DJL_DEEPSPEED_LEGACY, DJL_FASTERTRANSFORMER_LEGACY, DJL_LMI, DJL_TENSORRTLLM

    expected = {
        "djl-deepspeed": (DJL_DEEPSPEED_LEGACY, True, "lmi-vllm", ("decoder",), True),
        "djl-accelerate": (DJL_DEEPSPEED_LEGACY, False, None, ("decoder",), True),
        "djl-fastertransformer": (
            DJL_FASTERTRANSFORMER_LEGACY,
            True,
            "lmi-trtllm",
            ("encoder-decoder", "decoder"),
            False,
        ),
        "lmi-vllm": (DJL_LMI, False, None, ("decoder",), True),
        "lmi-trtllm": (DJL_TENSORRTLLM, False, None, ("decoder",), True),
    }
    for name, (image, legacy, replacement, arch, isolated) in expected.items():
        s = get_system(name)
        assert (s.image, s.legacy, s.replacement, s.architectures, s.network_isolation) == (
            image,
            legacy,
            replacement,
            arch,
            isolated,
        ), name
        assert s.gpu_only and s.summary and s.engine_notes
        assert 60 <= s.default_download_timeout_s <= 3600 and 60 <= s.default_startup_timeout_s <= 3600
        assert (s.staged_weights_environment is not None) == (name == "djl-fastertransformer")
        # The CUDA 12.8/13.0 LMI images need a driver-580 AMI; the older images run on SageMaker's default one.
        expected_ami = "al2023-ami-sagemaker-inference-gpu-4-1" if name.startswith("lmi-") else None
        assert s.inference_ami_version == expected_ami, name
    assert get_system("lmi-trtllm").default_startup_timeout_s == 1800  # engine compilation at start


def test_inference_ami_versions_are_sagemaker_values() -> None:
    """Every AMI a system names is one CreateEndpointConfig accepts (botocore's service model enum)."""
    import botocore.session

    from systems import REGISTRY as SYSTEM_NAMES
    from systems import get_system

    model = botocore.session.get_session().get_service_model("sagemaker")
    enum = model.shape_for("ProductionVariantInferenceAmiVersion").enum
    used = {get_system(name).inference_ami_version for name in SYSTEM_NAMES} - {None}
    assert used and used <= set(enum), (used, enum)
    # The reason for the choice, as the API documents the AMI: the driver that runs CUDA 12.8 and 13.0 natively.
    doc = model.shape_for("ProductionVariant").members["InferenceAmiVersion"].documentation
    after = doc.split("al2023-ami-sagemaker-inference-gpu-4-1", 1)[1][:300]
    assert "NVIDIA driver version: 580" in after and "CUDA version: 13.0" in after


def test_model_copies(djl_build) -> None:
    from facts.instances import parse_instance_type
    from systems import get_system
    from systems.djl_common import copies_per_instance

    g5_12 = parse_instance_type("ml.g5.12xlarge")
    ds, ft = djl_build.endpoint("ds"), djl_build.endpoint("ft")  # tp 2, tp 4
    assert get_system("djl-deepspeed").model_copies(ds, g5_12) == 2
    assert get_system("djl-fastertransformer").model_copies(ft, g5_12) == 1
    assert get_system("djl-deepspeed").model_copies(ds, parse_instance_type("ml.g5.48xlarge")) == 4
    assert get_system("djl-deepspeed").model_copies(ds, parse_instance_type("ml.m5.xlarge")) == 1  # no GPU
    assert copies_per_instance(ds) == get_system("djl-deepspeed").model_copies(
        ds, parse_instance_type(ds.instance_type)
    )


def test_container_environments(djl_build) -> None:
    from systems import get_system

    def environment(name: str) -> dict[str, str]:  # the system's own environment, from the plan's parsed options
        plan = djl_build.plan(name)
        return plan.system.environment(plan.spec, plan.engine)

    assert environment("ds") == {}
    assert environment("acc") == {}
    assert environment("ft") == {}
    async_mode = {"OPTION_ASYNC_MODE": "true", "OPTION_ROLLING_BATCH": "disable"}  # LMI async mode, both systems
    assert environment("vllm") == {
        "OPTION_MODEL_ID": "/opt/ml/model",
        **async_mode,
        "OPTION_ENTRYPOINT": "djl_python.lmi_vllm.vllm_async_service",
        "OPTION_TENSOR_PARALLEL_DEGREE": "2",
        "OPTION_DTYPE": "fp32",
        "OPTION_MAX_ROLLING_BATCH_SIZE": "32",
        "OPTION_MAX_MODEL_LEN": "512",
        "OPTION_MODEL_LOADING_TIMEOUT": "3600",
    }
    assert environment("trt") == {
        "OPTION_MODEL_ID": "/opt/ml/model",
        **async_mode,
        "OPTION_ENTRYPOINT": "djl_python.lmi_trtllm.trtllm_async_service",
        "OPTION_TENSOR_PARALLEL_DEGREE": "2",
        "OPTION_DTYPE": "fp32",
        "OPTION_MAX_SEQ_LEN": "512",  # the total: TensorRT-LLM's max_seq_len is prompt + output
        "OPTION_MAX_INPUT_LEN": "384",  # 3/4 of it for the prompt
        "OPTION_MODEL_LOADING_TIMEOUT": "3600",
    }
    # OPTION_MAX_OUTPUT_LEN is read by nothing in LMI 0.33 (TensorRT-LLM 0.21): it must not be written.
    assert not any("OUTPUT_LEN" in key for key in environment("trt"))
    # Unset engine options keep LMI's defaults: no variable at all.
    assert "OPTION_MAX_ROLLING_BATCH_SIZE" not in environment("trt")
    staged = get_system("djl-fastertransformer").staged_weights_environment
    assert staged(WEIGHTS_S3) == {"OPTION_MODEL_ID": WEIGHTS_S3 + "/"}
    assert staged(WEIGHTS_S3 + "/") == {"OPTION_MODEL_ID": WEIGHTS_S3 + "/"}
    with pytest.raises(ValueError, match="not an S3 URI"):
        staged("/opt/ml/model")


def test_properties_round_trip() -> None:
    from systems.djl_common import format_properties, parse_properties

    props = {"option.tensor_parallel_degree": "2", "engine": "DeepSpeed", "batch_size": "4", "option.x": True}
    text = format_properties(props)
    assert text.splitlines()[0] == "engine=DeepSpeed"
    assert parse_properties(text) == {k: ("true" if v is True else v) for k, v in props.items()}
    assert parse_properties("# c\n! c\n\nengine = Python\noption.a: b\n") == {"engine": "Python", "option.a": "b"}
    with pytest.raises(ValueError, match="one non-empty line"):
        format_properties({"engine": "a\nb"})
    with pytest.raises(ValueError, match="not a DJL key"):
        format_properties({"tensor_parallel_degree": "2"})


# ---- builds, file by file ---------------------------------------------------------------------------------


def test_djl_deepspeed_artifact(djl_build) -> None:
    from systems.djl_common import read_properties

    artifact = djl_build("ds")
    assert read_properties(artifact) == {
        "engine": "DeepSpeed",
        "option.entryPoint": "djl_python.deepspeed",
        "option.model_id": "/opt/ml/model",
        "option.task": "text-generation",
        "option.dtype": "fp32",
        "option.tensor_parallel_degree": "2",
        "option.rolling_batch": "disable",
        "option.model_loading_timeout": "3600",
        "option.max_tokens": "512",
        "batch_size": "4",
        "max_batch_delay": "100",
    }
    assert "model.py" not in files_of(artifact)
    check_decoder_weights(artifact, "fp32")
    manifest = check_manifest(artifact, "djl-deepspeed", "ds", "fp32")
    assert manifest["serving"]["model_copies_per_instance"] == 2
    assert manifest["target_container"]["image_tag_gpu"] == "0.27.0-deepspeed0.12.6-cu121"


def test_djl_deepspeed_custom_handler(djl_build) -> None:
    from systems.djl_common import read_properties

    artifact = djl_build("ds-custom")
    props = read_properties(artifact)
    assert props["option.entryPoint"] == "model.py" and props["engine"] == "DeepSpeed"
    source = REPO_ROOT / "systems/djl_common/handler/model.py"
    assert (artifact / "model.py").read_bytes() == source.read_bytes()
    contract = REPO_ROOT / "request_contract.py"  # model.py imports it as a sibling
    assert (artifact / "request_contract.py").read_bytes() == contract.read_bytes()
    check_manifest(artifact, "djl-deepspeed", "ds-custom", "fp32")

    handler = import_handler(artifact / "model.py", "djl_decoder_model")
    properties = {
        "model_dir": str(artifact),
        "model_id": str(artifact),
        "engine": "DeepSpeed",
        "dtype": "fp32",
        "tensor_parallel_degree": "2",
    }
    assert handler.handle(FakeInput(properties)) is None  # warm-up: loads, answers nothing
    out = handler.handle(FakeInput(properties, {"inputs": ["Hello", "The quick"], "parameters": {"max_new_tokens": 5}}))
    assert out.code == 200 and len(out.content) == 2 and all(isinstance(r["generated_text"], str) for r in out.content)
    bad = handler.handle(FakeInput(properties, {"inputs": "Hi", "parameters": {"temperature": 0}}))
    assert bad.code == 400 and bad.content == {
        "error": "parameters.temperature must be between 0.01 and 2, got 0 (for greedy decoding leave it out and set do_sample false)",
        "error_type": "validation",
    }


def test_djl_accelerate_artifact(djl_build) -> None:
    from systems.djl_common import read_properties

    artifact = djl_build("acc")
    assert read_properties(artifact) == {
        "engine": "Python",
        "option.entryPoint": "djl_python.huggingface",
        "option.model_id": "/opt/ml/model",
        "option.task": "text-generation",
        "option.dtype": "fp16",
        "option.tensor_parallel_degree": "2",
        "option.device_map": "auto",
        "option.rolling_batch": "disable",
        "option.model_loading_timeout": "3600",
    }
    check_decoder_weights(artifact, "fp16")
    check_manifest(artifact, "djl-accelerate", "acc", "fp16")


def check_lmi_checkpoint(artifact: Path, system: str, endpoint: str, source: Path) -> dict[str, Any]:
    """The LMI systems ship the checkpoint's own weights (the checkpoint build, so a Hub model plans from metadata:
    tests/model_build/test_hub_plan.py); only config.json (and a tokenizer the image cannot read) is rewritten."""
    from artifact.manifest import Manifest

    manifest = Manifest.load(artifact).document
    assert (manifest["system"], manifest["endpoint"], manifest["dtype"]) == (system, endpoint, "fp32")
    assert Manifest.load(artifact).verify(artifact, unlisted=True) == []
    assert "serving.properties" not in files_of(artifact)  # LMI is configured by the environment only
    for shard in source.glob("*.safetensors"):  # the weights unchanged
        assert (artifact / shard.name).read_bytes() == shard.read_bytes()
    config = json.loads((artifact / "config.json").read_text())
    assert config["torch_dtype"] == "float32" and "dtype" not in config
    assert manifest["serving"]["container_environment"] == manifest["environment"]
    assert "config.json" in manifest["verification"]["container_files"]
    return manifest


def test_lmi_vllm_artifact(djl_build, tiny_models) -> None:
    """Built in this process like the other DJL systems (`python -m model_build build` as a subprocess: the demo,
    tests/local/test_emulator_demo.py; its errors: tests/model_build/test_model_build_hf_fastload.py)."""
    manifest = check_lmi_checkpoint(djl_build("vllm"), "lmi-vllm", "vllm", tiny_models["gptj"])
    assert manifest["environment"]["OPTION_ASYNC_MODE"] == "true"
    assert manifest["target_container"]["image_tag_gpu"] == "0.36.0-lmi27.0.0-cu130"


def test_lmi_trtllm_artifact(djl_build, tiny_models) -> None:
    manifest = check_lmi_checkpoint(djl_build("trt"), "lmi-trtllm", "trt", tiny_models["gptj"])
    env = manifest["environment"]
    assert env["OPTION_ENTRYPOINT"] == "djl_python.lmi_trtllm.trtllm_async_service"
    assert (env["OPTION_MAX_SEQ_LEN"], env["OPTION_MAX_INPUT_LEN"]) == ("512", "384")


@pytest.mark.parametrize(("total", "prompt"), [(4096, 3072), (2048, 1536), (17, 12), (16, 12)])
def test_trtllm_length_options(total: int, prompt: int) -> None:
    from systems.lmi_trtllm import length_options

    assert length_options(total) == {"max_seq_len": str(total), "max_input_len": str(prompt)}


def test_fastertransformer_artifact(djl_build, tiny_t5: Path) -> None:
    import transformers

    from systems.djl_common import read_properties

    artifact = djl_build("ft")
    assert read_properties(artifact / "code") == {
        "engine": "FasterTransformer",
        "option.entryPoint": "model.py",
        "option.tensor_parallel_degree": "4",
        "option.dtype": "fp32",
        "option.model_loading_timeout": "3600",
    }
    assert files_of(artifact / "code") == {"serving.properties", "model.py", "request_contract.py"}
    source_files = {p.name for p in tiny_t5.iterdir() if p.is_file()}
    assert files_of(artifact / "weights") == source_files  # config, generation_config, safetensors, tokenizer
    # The tokenizer.json written by tokenizers 0.23 has pair-style BPE merges, which the image's tokenizers
    # 0.14 cannot read: it is rewritten (tests/systems/test_hf_container_compat.py loads it with 0.14.1); the rest is
    # the source byte for byte.
    for name in source_files - {"tokenizer.json"}:
        assert (artifact / "weights" / name).read_bytes() == (tiny_t5 / name).read_bytes()
    merges = json.loads((artifact / "weights" / "tokenizer.json").read_text())["model"]["merges"]
    assert merges and all(isinstance(m, str) and m.count(" ") == 1 for m in merges)
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(artifact / "weights")
    assert type(model).__name__ == "T5ForConditionalGeneration"
    manifest = check_manifest(artifact, "djl-fastertransformer", "ft", "fp32")
    assert manifest["parts"] == {"model_data": "code", "staged_weights": "weights"}
    assert manifest["weights_format"] == "safetensors" and manifest["model"]["encoder_decoder"] is True
    assert manifest["tokenizer_rewritten"] == ["tokenizer.json: BPE merges [a, b] -> 'a b'"]


def test_fastertransformer_accepts_decoder(djl_build) -> None:
    artifact = djl_build("ft-gpt2")
    assert "model.safetensors" in files_of(artifact / "weights")
    check_manifest(artifact, "djl-fastertransformer", "ft-gpt2", "fp32")


def test_fastertransformer_model_types_match_the_handler() -> None:
    """handler/model.py is shipped alone, so it keeps its own copy of the model types: the two must agree."""
    from systems.djl_fastertransformer import MODEL_TYPES

    handler = import_handler(REPO_ROOT / "systems/djl_fastertransformer/handler/model.py", "djl_ft_types")
    assert handler.MODEL_TYPES == MODEL_TYPES == ("t5", "gpt2", "opt", "gpt_neox", "bloom")
    assert not {"mt5", "llama", "gptj"} & set(MODEL_TYPES)


# ---- the FasterTransformer model.py on CPU (transformers fallback) ---------------------------------------


@pytest.fixture(scope="module")
def ft_handler(djl_build):
    artifact = djl_build("ft")
    handler = import_handler(artifact / "code" / "model.py", "djl_ft_model")
    assert importlib.util.find_spec("fastertransformer") is None  # the CPU fallback is what runs here
    # As DJL passes them: option.* without the prefix; model_id is the local copy of the staged weights.
    properties = {
        "model_dir": str(artifact / "code"),
        "model_id": str(artifact / "weights"),
        "tensor_parallel_degree": "4",
        "dtype": "fp32",
    }
    return handler, properties


def test_ft_handler_warmup_and_generate(ft_handler) -> None:
    handler, properties = ft_handler
    assert handler.handle(FakeInput(properties)) is None  # warm-up call: loads the model once
    assert handler._model["engine"] == "transformers" and handler._model["encoder_decoder"]
    model_object = handler._model["model"]
    request = {
        "inputs": ["translate: hello", "The quick brown fox"],
        "parameters": {"max_new_tokens": 6, "num_beams": 2, "repetition_penalty": 1.2, "seed": 1},
    }
    out = handler.handle(FakeInput(properties, json.dumps(request).encode()))
    assert out.code == 200 and len(out.content["outputs"]) == 2
    assert all(isinstance(t, str) for t in out.content["outputs"])
    sampled = handler.handle(
        FakeInput(properties, {"inputs": "hello", "parameters": {"temperature": 0.7, "top_k": 5, "top_p": 0.9}})
    )
    assert sampled.code == 200 and len(sampled.content["outputs"]) == 1
    greedy1 = handler.handle(FakeInput(properties, {"inputs": "hello", "parameters": {"max_new_tokens": 4}}))
    greedy2 = handler.handle(FakeInput(properties, {"inputs": "hello", "parameters": {"max_new_tokens": 4}}))
    assert greedy1.content == greedy2.content  # defaults are greedy (FT's top_k=1)
    assert handler._model["model"] is model_object  # loaded once


@pytest.mark.parametrize(
    ("parameters", "expected"),
    [
        ({"max_new_tokens": 0}, "parameters.max_new_tokens must be between 1 and 512, got 0"),
        ({"max_new_tokens": 100000}, "parameters.max_new_tokens must be between 1 and 512, got 100000"),
        (
            {"temperature": 0},
            "parameters.temperature must be between 0.01 and 2, got 0 (for greedy decoding leave it out and set do_sample false)",
        ),
        ({"top_p": 1.5}, "parameters.top_p must be greater than 0 and at most 1, got 1.5"),
        ({"top_k": -1}, "parameters.top_k must be between 0 and 1000, got -1"),
        ({"num_beams": 9}, "parameters.num_beams must be between 1 and 8, got 9"),
        ({"num_beams": 2.5}, "parameters.num_beams must be an integer between 1 and 8, got 2.5 (number)"),
        (
            {"repetition_penalty": "high"},
            'parameters.repetition_penalty must be a number between 0.1 and 10, got "high"',
        ),
        (
            {"max_seq_len": 5},
            "unknown parameters ['max_seq_len']; allowed parameters are ['do_sample', 'max_new_tokens'",
        ),
    ],
)
def test_ft_handler_bad_parameters(ft_handler, parameters: dict, expected: str) -> None:
    handler, properties = ft_handler
    out = handler.handle(FakeInput(properties, {"inputs": "hello", "parameters": parameters}))
    assert out.code == 400 and expected in out.content["error"], out.content


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"{not json", "request body is not valid JSON"),
        ({"prompt": "x"}, "unknown request keys ['prompt']"),
        ({"inputs": ""}, "must be a non-empty string"),
        ({"inputs": ["a"] * 9}, "inputs must be a list of 1 to 8 strings, got a list of 9"),
        ({"inputs": "a", "stream": True}, "unknown request keys ['stream']"),
    ],
)
def test_ft_handler_bad_requests(ft_handler, body: Any, expected: str) -> None:
    handler, properties = ft_handler
    out = handler.handle(FakeInput(properties, body))
    assert out.code == 400 and expected in out.content["error"], out.content


# ---- the FasterTransformer model.py against the fastertransformer package's call shapes -----------------
# Stand-ins with the REAL signatures of the fastertransformer Python package in the DJL 0.24 image (DJL's fork of
# NVIDIA/FasterTransformer, python/fastertransformer/, read at rohithkrn/FasterTransformer commit 8622699, package
# version 0.23.0; the 0.24.0 wheel's own source is not public): __init__.py init_inference/SUPPORTED_MODEL_TYPES,
# t5model.py T5Model.generate/pipeline_generate, examples/pytorch/t5/utils/ft_decoding.py FTT5.forward,
# gptmodel.py GPTModel.generate/pipeline_generate, optmodel.py OPTModel.generate, gptneoxmodel.py
# GPTNeoXModel.generate, examples/pytorch/gpt/utils/gpt.py GPT.forward and gptneox/utils/gptneox.py
# GptNeoX.forward (the torch op's sampling arguments are Optional[Tensor]), gptjmodel.py GPTJModel.initialize.
# Only the GPU work is replaced: a keyword a model does not take fails here as it would in the image.


class _Tensor(float):
    """A value generate() made into a per-batch tensor (what the torch op accepts for sampling arguments)."""


def _check_tensors(**values: Any) -> None:
    for name, value in values.items():
        if value is not None and not isinstance(value, _Tensor):
            raise TypeError(f"{name}: expected Optional[Tensor] by the torch op, got {type(value).__name__}")


def _ftt5_forward(
    input_token,
    inputs_embeds,
    beam_size,
    max_seq_len,
    top_k,
    top_p,
    beam_search_diversity_rate=0.0,
    temperature=1.0,
    len_penalty=0.0,
    repetition_penalty=None,
    presence_penalty=None,
    min_length=0,
    random_seed=0,
    is_return_output_log_probs=False,
    is_return_cum_log_probs=False,
    is_return_cross_attentions=False,
    bad_words_list=None,
    stop_words_list=None,
):
    return [f"t5({prompt})" for prompt in input_token]  # T5Model.pipeline_generate decodes beam 0 per input


def _gpt_forward(
    start_ids,
    start_lengths,
    output_len,
    beam_width=1,
    top_k=None,
    top_p=None,
    beam_search_diversity_rate=None,
    temperature=None,
    len_penalty=None,
    repetition_penalty=None,
    presence_penalty=None,
    min_length=None,
    random_seed=None,
    bad_words_list=None,
    return_output_length=False,
    return_cum_log_probs=0,
):
    _check_tensors(
        top_k=top_k,
        top_p=top_p,
        temperature=temperature,
        len_penalty=len_penalty,
        repetition_penalty=repetition_penalty,
        min_length=min_length,
        random_seed=random_seed,
    )
    return [[f"gen({prompt})#beam{b}" for b in range(beam_width)] for prompt in start_ids]


def _gptneox_forward(
    start_ids,
    start_lengths,
    output_len,
    beam_width=1,
    top_k=None,
    top_p=None,
    beam_search_diversity_rate=None,
    temperature=None,
    len_penalty=None,
    repetition_penalty=None,
    random_seed=None,
    return_output_length=False,
    return_cum_log_probs=0,
):
    _check_tensors(
        top_k=top_k,
        top_p=top_p,
        temperature=temperature,
        len_penalty=len_penalty,
        repetition_penalty=repetition_penalty,
        random_seed=random_seed,
    )
    return [[f"gen({prompt})#beam{b}" for b in range(beam_width)] for prompt in start_ids]


class StandInT5Model:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def generate(self, input_tokens, **kwargs):
        default_args = dict(
            inputs_embeds=None,
            beam_width=1,
            max_seq_len=200,
            top_k=1,
            top_p=0.0,
            beam_search_diversity_rate=0.0,
            temperature=1.0,
            len_penalty=0.0,
            repetition_penalty=1.0,
            presence_penalty=None,
            min_length=0,
            random_seed=0,
            is_return_output_log_probs=False,
            is_return_cum_log_probs=False,
            is_return_cross_attentions=False,
            bad_words_list=None,
            stop_words_list=None,
        )
        default_args.update(kwargs)
        default_args["beam_size"] = default_args.pop("beam_width")
        self.calls.append(default_args)
        return _ftt5_forward(input_tokens, **default_args)

    def pipeline_generate(self, inputs, **kwargs):
        return self.generate(inputs, **kwargs)


class StandInGPTModel:
    DEFAULTS: dict[str, Any] = dict(
        top_k=1,
        top_p=0.0,
        temperature=1,
        repetition_penalty=1.0,
        random_seed=0,
        len_penalty=0,
        min_length=0,
        return_output_length=0,
        return_cum_log_probs=0,
    )
    TENSORIZED: tuple[str, ...] = (
        "top_k",
        "top_p",
        "temperature",
        "repetition_penalty",
        "random_seed",
        "len_penalty",
        "min_length",
    )
    forward = staticmethod(_gpt_forward)

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def generate(self, start_ids, start_lengths, batch_size, beam_width=1, output_len=32, **kwargs):
        default_args = dict(beam_width=beam_width, **self.DEFAULTS)
        default_args.update(kwargs)
        for key in self.TENSORIZED:
            default_args[key] = _Tensor(default_args[key])
        self.calls.append(dict(default_args, batch_size=batch_size, output_len=output_len))
        return self.forward(start_ids, start_lengths, output_len, **default_args)

    def pipeline_generate(
        self, inputs, batch_size=1, output_len=32, beam_width=1, skip_end_tokens=True, detokenize=True, **kwargs
    ):
        result = []
        for it in range(-(-len(inputs) // batch_size)):
            input_batch = inputs[it * batch_size : batch_size * (it + 1)]
            tokens_batch = self.generate(
                input_batch, [len(x) for x in input_batch], batch_size, beam_width, output_len, **kwargs
            )
            for _, tokens in zip(inputs, tokens_batch):  # the package pairs with `inputs`, not `input_batch`
                result.extend(tokens[beam_id] for beam_id in range(beam_width))
        return result


class StandInOPTModel(StandInGPTModel):
    DEFAULTS = dict(top_k=1, top_p=0.0, temperature=1, repetition_penalty=1, random_seed=0)
    TENSORIZED = ("top_k", "top_p", "temperature", "repetition_penalty", "random_seed")


class StandInGPTNeoXModel(StandInGPTModel):
    DEFAULTS = dict(
        top_k=1,
        top_p=0.0,
        temperature=1,
        repetition_penalty=1.0,
        random_seed=0,
        len_penalty=0,
        return_output_length=0,
        return_cum_log_probs=0,
    )
    TENSORIZED = ("top_k", "top_p", "temperature", "repetition_penalty", "len_penalty", "random_seed")
    forward = staticmethod(_gptneox_forward)


class StandInGPTJModel(StandInGPTModel):
    def __init__(self) -> None:
        raise NotImplementedError("Not supported under python mode")  # gptjmodel.py GPTJModel.initialize


STAND_INS = {
    "t5": StandInT5Model,
    "gpt2": StandInGPTModel,
    "gptj": StandInGPTJModel,
    "opt": StandInOPTModel,
    "gpt_neox": StandInGPTNeoXModel,
    "bloom": StandInGPTModel,
}


def fake_fastertransformer() -> types.ModuleType:
    """The package's module: init_inference with its real signature, dispatching on config.json's model_type."""
    import importlib.machinery

    module = types.ModuleType("fastertransformer")
    module.__spec__ = importlib.machinery.ModuleSpec("fastertransformer", loader=None)
    module.created = []

    def init_inference(
        model: str,
        tensor_parallel_degree: int,
        pipeline_parallel_degree: int,
        dtype: str = "fp32",
        use_triton=None,
        do_streaming=False,
        is_peft=False,
        **kwargs,
    ):
        model_type = json.loads((Path(model) / "config.json").read_text())["model_type"]
        if model_type not in STAND_INS:
            raise ValueError(f"{model_type} type not supported for model {model}")
        instance = STAND_INS[model_type]()
        module.created.append(instance)
        return instance

    module.init_inference = init_inference
    return module


@pytest.fixture
def ft_stand_in(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """handler(model_type) -> (fresh model.py module with the stand-in package loaded, properties, package)."""
    fake = fake_fastertransformer()
    monkeypatch.setitem(sys.modules, "fastertransformer", fake)

    def load(model_type: str):
        location = tmp_path / model_type
        location.mkdir()
        (location / "config.json").write_text(json.dumps({"model_type": model_type}))
        handler = import_handler(REPO_ROOT / "systems/djl_fastertransformer/handler/model.py", f"ft_{model_type}")
        properties = {"model_id": str(location), "tensor_parallel_degree": "4", "dtype": "fp16"}
        return handler, properties, fake

    return load


def test_stand_ins_refuse_the_wrong_call_shape() -> None:
    """The stand-ins can fail: each model type's keyword in the other's call raises, as the package would."""
    with pytest.raises(TypeError, match="output_len"):
        StandInT5Model().pipeline_generate(["a"], output_len=5)
    with pytest.raises(TypeError, match="max_seq_len"):
        StandInGPTModel().pipeline_generate(["a"], max_seq_len=5)
    with pytest.raises(TypeError, match="len_penalty: expected Optional"):
        StandInOPTModel().pipeline_generate(["a"], len_penalty=1.0)


REQUEST = {
    "inputs": ["first prompt", "second prompt"],
    "parameters": {
        "max_new_tokens": 6,
        "num_beams": 2,
        "temperature": 0.7,
        "top_k": 5,
        "top_p": 0.9,
        "repetition_penalty": 1.2,
        "seed": 3,
    },
}


def test_ft_handler_t5_call_shape(ft_stand_in) -> None:
    handler, properties, fake = ft_stand_in("t5")
    assert handler.handle(FakeInput(properties)) is None
    request = {**REQUEST, "parameters": {**REQUEST["parameters"], "min_new_tokens": 1}}
    out = handler.handle(FakeInput(properties, request))
    assert out.code == 200 and out.content == {"outputs": ["t5(first prompt)", "t5(second prompt)"]}
    (call,) = fake.created[0].calls
    assert (call["max_seq_len"], call["beam_size"], call["top_k"], call["min_length"], call["random_seed"]) == (
        6,
        2,
        5,
        1,
        3,
    )


@pytest.mark.parametrize("model_type", ["gpt2", "bloom", "gpt_neox"])
def test_ft_handler_decoder_call_shape(ft_stand_in, model_type: str) -> None:
    handler, properties, fake = ft_stand_in(model_type)
    handler.handle(FakeInput(properties))
    out = handler.handle(FakeInput(properties, REQUEST))
    # one text per input: each input's first beam, in input order
    assert out.code == 200 and out.content == {"outputs": ["gen(first prompt)#beam0", "gen(second prompt)#beam0"]}
    (call,) = fake.created[0].calls
    assert (call["batch_size"], call["output_len"], call["beam_width"]) == (2, 6, 2)


def test_ft_handler_opt_refuses_min_new_tokens(ft_stand_in) -> None:
    handler, properties, fake = ft_stand_in("opt")
    handler.handle(FakeInput(properties))
    bad = handler.handle(
        FakeInput(properties, {**REQUEST, "parameters": {**REQUEST["parameters"], "min_new_tokens": 1}})
    )
    assert bad.code == 400 and bad.content["error"] == (
        "parameters.min_new_tokens: not supported for model type 'opt' by FasterTransformer; allowed: "
        "max_new_tokens, num_beams, temperature, top_k, top_p, repetition_penalty, seed"
    )
    request = {"inputs": "one", "parameters": REQUEST["parameters"]}
    out = handler.handle(FakeInput(properties, request))
    assert out.code == 200 and out.content == {"outputs": ["gen(one)#beam0"]}


def test_ft_handler_refuses_unserved_model_type_at_start(ft_stand_in) -> None:
    handler, properties, fake = ft_stand_in("gptj")
    with pytest.raises(RuntimeError, match="model_type 'gptj' is not served by this handler; allowed: t5, gpt2"):
        handler.handle(FakeInput(properties))
    assert fake.created == []  # refused before the package was asked (it would raise NotImplementedError)


# ---- error cases -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("ds-t5", "endpoint 'ds-t5': model: value '{t5}' is an encoder-decoder model (model_type 't5'"),
        (
            "vllm-rb",
            "endpoint 'vllm-rb': engine.rolling_batch: value 'lmi-dist' is not supported by system 'lmi-vllm'; "
            "remove the key (LMI async mode: the engine batches continuously by itself (OPTION_ROLLING_BATCH=disable))",
        ),
        (
            "trt-rb",
            "endpoint 'trt-rb': engine.rolling_batch: value 'trtllm' is not supported by system 'lmi-trtllm'; remove the key",
        ),
        (
            "ft-gptj",
            "endpoint 'ft-gptj': model: value '{gptj}' has model_type 'gptj', which FasterTransformer in DJL 0.24 "
            "does not serve (the fastertransformer package serves GPT-J only in Triton mode",
        ),
        (
            "ft-mt5",
            "has model_type 'mt5', which FasterTransformer in DJL 0.24 does not serve (not in the fastertransformer",
        ),
        ("ft-llama", "allowed model types: t5, gpt2, opt, gpt_neox, bloom"),
        (
            "vllm-len",
            "endpoint 'vllm-len': engine.max_model_len: value 4096 is beyond the model's 512 positions; allowed: 16 to 512",
        ),
        ("acc-len", "endpoint 'acc-len': engine.max_model_len: value 512 is not supported by system 'djl-accelerate'"),
        (
            "ds-entry",
            "engine.entry_point: value 'djl_python.vllm' is not supported by system 'djl-deepspeed'; allowed: djl_python.deepspeed",
        ),
        (
            "ft-batch",
            "endpoint 'ft-batch': engine.max_batch_size: value 8 is not supported by system 'djl-fastertransformer'",
        ),
    ],
)
def test_build_errors(djl_build, tiny_t5: Path, tiny_models, tmp_path: Path, name: str, expected: str) -> None:
    from model_build import BuildError
    from model_build.cli import build_endpoint

    out = tmp_path / name
    with pytest.raises(BuildError) as info:
        build_endpoint(djl_build.endpoint(name), out, progress=False)
    assert expected.replace("{t5}", str(tiny_t5)).replace("{gptj}", str(tiny_models["gptj"])) in str(info.value)
    assert not out.exists() and list(tmp_path.iterdir()) == []  # nothing half-written


BAD_ENGINE_MESSAGES = {
    "vllm-rb": "endpoint 'vllm-rb': engine.rolling_batch: value 'lmi-dist' is not supported by system 'lmi-vllm'; "
    "remove the key (LMI async mode: the engine batches continuously by itself (OPTION_ROLLING_BATCH=disable))",
    "acc-len": "endpoint 'acc-len': engine.max_model_len: value 512 is not supported by system 'djl-accelerate'; "
    "remove the key",
    "ds-entry": "endpoint 'ds-entry': engine.entry_point: value 'djl_python.vllm' is not supported by system "
    "'djl-deepspeed'; allowed: djl_python.deepspeed (or leave it out)",
    "ft-batch": "endpoint 'ft-batch': engine.max_batch_size: value 8 is not supported by system "
    "'djl-fastertransformer'; remove the key",
    "trt-rb": "endpoint 'trt-rb': engine.rolling_batch: value 'trtllm' is not supported by system 'lmi-trtllm'; "
    "remove the key",
}


@pytest.mark.parametrize("name", sorted(BAD_ENGINE))
def test_config_refuses_engine_options_the_system_does_not_implement(
    djl_config: Path, tmp_path: Path, name: str
) -> None:
    """The config refuses them (one place: deployment.endpoint_rules against the system's typed model), with the
    same message the build gives."""
    import yaml

    from deployment import load_config
    from endpoint_config import ConfigError

    base, engine = BAD_ENGINE[name]
    (spec,) = [e for e in yaml.safe_load(djl_config.read_text())["endpoints"] if e["name"] == base]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"endpoints": [{**spec, "name": name, "engine": engine}]}))
    with pytest.raises(ConfigError) as info:
        load_config(bad)
    assert BAD_ENGINE_MESSAGES[name] in str(info.value)


def test_cli_error_exit_code(djl_config: Path, tmp_path: Path) -> None:
    import yaml

    (spec,) = [e for e in yaml.safe_load(djl_config.read_text())["endpoints"] if e["name"] == "vllm"]
    config = tmp_path / "bad.yaml"
    config.write_text(
        yaml.safe_dump({"endpoints": [{**spec, "name": "vllm-rb", "engine": {"rolling_batch": "lmi-dist"}}]})
    )
    result = run_cli("build", "--config", str(config), "--endpoint", "vllm-rb", "--out", str(tmp_path / "x"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "engine.rolling_batch: value 'lmi-dist' is not supported by system 'lmi-vllm'" in result.stderr
    assert not (tmp_path / "x").exists()


def test_config_refuses_t5_for_decoder_system(djl_config: Path, tiny_t5: Path, tmp_path: Path) -> None:
    from deployment import load_config
    from endpoint_config import ConfigError

    bad = tmp_path / "bad.yaml"
    bad.write_text(
        f"endpoints:\n  - {{name: t5-ds, system: djl-deepspeed, model: {tiny_t5}, instance_type: ml.g5.2xlarge}}\n"
    )
    with pytest.raises(ConfigError, match="encoder-decoder model; system 'djl-deepspeed' serves decoder models only"):
        load_config(bad)


def test_tensorrt_profile_refused() -> None:
    from endpoint_config import EndpointSpec
    from model_build import BuildError
    from model_build.cli import checked_engine

    ep = EndpointSpec(
        name="x",
        system="lmi-trtllm",
        model="m",
        instance_type="ml.g5.12xlarge",
        engine={"tensorrt_profile": {"max_batch": 4}},
    )
    with pytest.raises(
        BuildError,
        match=r"engine.tensorrt_profile: value \{'max_batch': 4\} is not supported by system "
        r"'lmi-trtllm'; remove the key \(systems that take it: tensorrt-byoc\)",
    ):
        checked_engine(ep)


# ---- example configs -------------------------------------------------------------------------------------


@pytest.mark.parametrize("system", DJL_SYSTEMS)
def test_example_config(system: str) -> None:
    from deployment import load_config
    from facts.instances import parse_instance_type
    from systems import get_system

    path = REPO_ROOT / "config" / "examples" / f"{system}.yaml"
    text = path.read_text()
    assert text.startswith("#") and "project: llm-endpoints" in text
    environment_plan = load_config(path, "dev")
    (ep,) = environment_plan.endpoints
    assert ep.system == system and ep.instance_type == "ml.g5.12xlarge" and ep.volume_size_gb is None
    s = get_system(system)
    copies = s.model_copies(ep, parse_instance_type(ep.instance_type))
    if system == "djl-fastertransformer":
        assert (ep.model, ep.tensor_parallel_degree, copies) == ("google/flan-t5-xxl", 4, 1)
        assert ep.model_data_download_timeout_s == 600 and ep.container_startup_health_check_timeout_s == 600
    else:
        assert ep.tensor_parallel_degree == 2 and copies == 2
    plan = environment_plan.plan(ep.name)
    s.environment(plan.spec, plan.engine)  # the environment of the reference endpoint builds
