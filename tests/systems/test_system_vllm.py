"""The vllm system (the AWS vLLM DLC of systems/images_current.py) and the compatibility checks every engine system
gets.

Container contract on a CPU stand-in (tests/systems/engine_stand_in.py): the environment the system renders goes
through the entrypoint's own rules to an argv, every flag is one the pinned vLLM accepts (systems/engine_tables
CLI_FLAGS, read from its wheel) with the value the options asked for, and the artifact the recipe built is what the
--model path serves (OpenAI chat through the `openai` SDK). Compatibility: refused where the sources say it cannot
run (architecture, precision, CUDA and driver, fit), accepted where it fits, at load (config.json of local and known
models) and at build (the real files), on tiny offline models of each architecture.
"""

from __future__ import annotations

import json
import re
import shutil

import pytest
from engine_configs import build, endpoint_yaml, load, refusals
from engine_stand_in import StandIn, flags_of, serving, vllm_argv

from artifact import BuildError
from endpoint_config import ConfigError
from systems.engine_tables import CLI_FLAGS
from systems.images_current import SGLANG_DLC, VLLM_ENGINE

ENGINE_ARCHS = ("llama", "qwen2", "qwen3", "mistral", "gemma2", "gemma3", "mixtral", "qwen3_moe", "gpt_oss")
ARCH_CLASSES = {
    "llama": "LlamaForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "mistral": "MistralForCausalLM",
    "gemma2": "Gemma2ForCausalLM",
    "gemma3": "Gemma3ForCausalLM",
    "mixtral": "MixtralForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
    "gpt_oss": "GptOssForCausalLM",
}
# gpt-oss on vllm needs the network for its chat vocabulary (systems/vllm harmony_isolation_problem): these configs
# open it, as the gpt-oss example does by streaming its weights.
OPEN = "    network: {network_isolation: false}\n"


# ---- the system -------------------------------------------------------------------------------------------------


def test_registered_with_its_image_ami_and_capabilities():
    from systems import REGISTRY, get_system
    from systems.engine_systems import INFERENCE_AMI_VERSION
    from systems.images_current import VLLM_DLC

    system = get_system("vllm")
    assert REGISTRY["vllm"] == "systems.vllm" and system.image is VLLM_DLC and system.gpu_only
    assert system.inference_ami_version == INFERENCE_AMI_VERSION == "al2023-ami-sagemaker-inference-gpu-4-1"
    assert system.streaming.supported and system.inference_components.supported and system.network_isolation
    assert system.weights_formats == ("safetensors",) and system.architectures == ("decoder",)
    # LoRA's options are there for the adapters capability (max adapters, max rank from vllm/config/lora.py)
    assert {"enable_lora", "max_loras", "max_lora_rank", "allow_runtime_lora_updating"} <= set(
        system.engine_options.model_fields
    )


FULL_ENGINE = {
    "max_model_len": 512,
    "max_num_seqs": 48,
    "gpu_memory_utilization": 0.85,
    "max_num_batched_tokens": 1024,
    "enable_prefix_caching": False,
    "kv_cache_dtype": "fp8",
    "tool_call_parser": "hermes",
    "enable_auto_tool_choice": True,
    "reasoning_parser": "qwen3",
    "enable_expert_parallel": True,
    "speculative": {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4},
    "enable_lora": True,
    "max_loras": 4,
    "max_lora_rank": 64,
    "allow_runtime_lora_updating": True,
}


def test_environment_reaches_vllm_as_the_flags_the_options_name(tmp_path, tiny_chat_models):
    """The rendered SM_VLLM_* environment, through the entrypoint's rules, gives vLLM exactly these flags; the
    artifact directory (SageMaker's /opt/ml/model) is the model."""
    plan = load(
        tmp_path,
        endpoint_yaml("full", "vllm", str(tiny_chat_models["qwen3_moe"]), "ml.g6e.12xlarge", tp=2, engine=FULL_ENGINE),
    ).plans[0]
    env = plan.container_environment("bucket")
    argv = vllm_argv(env, tiny_chat_models["qwen3_moe"])
    flags = flags_of(argv)
    assert set(flags) - CLI_FLAGS[VLLM_ENGINE] == set(), f"a flag {VLLM_ENGINE} does not have"
    assert flags == {
        "--port": "8080",
        "--model": str(tiny_chat_models["qwen3_moe"]),
        "--dtype": "bfloat16",
        "--enable-auto-tool-choice": True,
        "--enable-expert-parallel": True,
        "--enable-lora": True,
        "--gpu-memory-utilization": "0.85",
        "--kv-cache-dtype": "fp8",
        "--max-lora-rank": "64",
        "--max-loras": "4",
        "--max-model-len": "512",
        "--max-num-batched-tokens": "1024",
        "--max-num-seqs": "48",
        "--no-enable-prefix-caching": True,
        "--reasoning-parser": "qwen3",
        "--served-model-name": "full",
        "--speculative-config": '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4}',
        "--tensor-parallel-size": "2",
        "--tool-call-parser": "hermes",
    }
    assert env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "true"  # read by vLLM itself (vllm/envs.py), not a flag
    assert plan.network_isolation and plan.model_data("bucket").prefix == plan.artifact_prefix


@pytest.mark.parametrize("arch", ENGINE_ARCHS)
def test_each_architecture_builds_through_both_engine_systems(tmp_path, tiny_chat_models, arch):
    """The checkpoint copied unchanged and verified, for every system that claims the architecture."""
    source = tiny_chat_models[arch]
    for system in ("vllm", "sglang"):
        extra = OPEN if (arch, system) == ("gpt_oss", "vllm") else ""
        plan, manifest, out = build(
            tmp_path, endpoint_yaml(f"t-{system}", system, str(source), extra=extra), f"{arch}-{system}"
        )
        assert manifest["model"]["architecture"] == ARCH_CLASSES[arch] and manifest["system"] == system
        for name in ("model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json"):
            assert (out / name).read_bytes() == (source / name).read_bytes(), name
            if name != "model.safetensors":
                assert (out / "metadata" / name).read_bytes() == (source / name).read_bytes(), name
        assert not list((out / "metadata").glob("*.safetensors"))
        check = manifest["verification"]
        assert check["parameters"].startswith(f"{manifest['model']['parameter_count']:,} = config.json's")
        # The manifest holds the system's environment; the plan adds the served names of the environment's endpoint.
        served = plan.system.served_names_environment(plan.served_model_names)
        assert check["tokenizer"]["chat_template"]
        assert {**manifest["environment"], **served} == plan.container_environment("b")
    facts = manifest["model"]
    assert (facts["active_parameter_count"] < facts["parameter_count"]) == (arch in ("mixtral", "qwen3_moe", "gpt_oss"))


def test_artifact_serves_openai_chat_on_the_stand_in(tmp_path, tiny_chat_models):
    """Built as vllm, served from the argv the container would run: OpenAI chat with the `openai` SDK (the served
    name, streaming) and on /invocations; the project's {"inputs"} body is refused as vLLM refuses it."""
    import httpx
    import openai

    plan, _, out = build(
        tmp_path,
        endpoint_yaml("tiny-vllm", "vllm", str(tiny_chat_models["qwen3"]), engine={"max_model_len": 256}),
        "served",
    )
    flags = flags_of(vllm_argv(plan.container_environment("bucket"), out))
    with serving(StandIn(flags, "vllm-openai")) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused")
        reply = client.chat.completions.create(
            model="tiny-vllm", max_tokens=4, messages=[{"role": "user", "content": "Hello"}]
        )
        assert reply.choices[0].message.role == "assistant" and reply.usage.completion_tokens == 4
        chunks = list(
            client.chat.completions.create(
                model="tiny-vllm", max_tokens=4, stream=True, messages=[{"role": "user", "content": "Hello"}]
            )
        )
        assert "".join(c.choices[0].delta.content or "" for c in chunks) == reply.choices[0].message.content
        with pytest.raises(openai.NotFoundError, match="The model `other` does not exist"):
            client.chat.completions.create(model="other", messages=[{"role": "user", "content": "Hi"}])
        invoked = httpx.post(
            f"{url}/invocations", json={"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 4}
        )
        assert (
            invoked.status_code == 200
            and invoked.json()["choices"][0]["message"]["content"] == reply.choices[0].message.content
        )
        assert httpx.post(f"{url}/invocations", json={"inputs": "Hello", "parameters": {}}).status_code == 400
        too_long = httpx.post(f"{url}/invocations", json={"messages": [{"role": "user", "content": "x " * 300}]})
        assert too_long.status_code == 400 and "maximum context length is 256" in too_long.text


# ---- compatibility at load ----------------------------------------------------------------------------------------

REFUSED = [
    # architecture vs the pinned engine's registry
    (
        "hf-arch",
        endpoint_yaml("x", "hf-fastload", "openai/gpt-oss-20b", "ml.g6e.xlarge"),
        r"model: value 'openai/gpt-oss-20b' is a GptOssForCausalLM .*which transformers==4.51.3 in the image of system "
        r"'hf-fastload' does not serve .*transformers maps it from release 4.55.0 on; systems that serve it: lmi-vllm, vllm, sglang",
    ),
    # precision vs GPU generation, and MXFP4's activation dtype
    (
        "mxfp4-t4",
        endpoint_yaml("x", "vllm", "openai/gpt-oss-20b", "ml.g4dn.2xlarge", dtype="fp16"),
        rf"instance_type: value 'ml.g4dn.2xlarge': {VLLM_ENGINE} loads mxfp4 weights from compute capability 8.0; "
        r"NVIDIA T4 is 7.5; instance families that run it: ml.g5, ml.g6, ml.g6e, ml.g7, ml.g7e, ml.p4d",
    ),
    (
        "mxfp4-fp16",
        endpoint_yaml("x", "vllm", "openai/gpt-oss-20b", "ml.g6e.xlarge", dtype="fp16"),
        rf"dtype: value 'fp16': {VLLM_ENGINE} computes mxfp4 weights in bf16 only, not fp16; set dtype: bf16",
    ),
    (
        "bf16-t4",
        endpoint_yaml("x", "vllm", "meta-llama/Llama-3.1-8B-Instruct", "ml.g4dn.12xlarge", tp=4),
        r"bf16 needs compute capability 8.0 \(Ampere\) or newer; NVIDIA T4 is 7.5: use fp16",
    ),
    # the image's CUDA vs the GPU: CUDA 13 has no Volta, CUDA 12.4 no Blackwell
    (
        "cuda124-blackwell",
        endpoint_yaml("x", "hf-fastload", "Qwen/Qwen3-32B", "ml.g7e.2xlarge"),
        r"the image of system 'hf-fastload' \(2.6.0-transformers4.51.3-gpu-py312-cu124-ubuntu22.04\) cannot run there: "
        r"NVIDIA RTX PRO 6000 Blackwell Server Edition \(Blackwell, 12.0\) needs an image built with CUDA >= 12.8",
    ),
    (
        "cuda13-v100",
        endpoint_yaml("x", "sglang", "Qwen/Qwen3-32B", "ml.p3.16xlarge", dtype="fp16", tp=8),
        rf"the image of system 'sglang' \({SGLANG_DLC.gpu_tag}\) cannot run there: NVIDIA V100 "
        r"\(compute capability 7.0\) is older than CUDA 13.0 supports \(from 7.5\)",
    ),
    # weights that fit: bf16 bytes, every expert of a MoE, the KV cache vLLM reserves for max_model_len
    (
        "dense-too-big",
        endpoint_yaml("x", "vllm", "Qwen/Qwen3-32B", "ml.g6e.xlarge"),
        r"needs 61.0 GiB of weights \(bf16, 2 bytes a parameter\) per GPU at tensor_parallel_degree 1 \+ 10.0 GiB of KV "
        r"cache for one sequence of max_model_len 40960 .*more than the 41.1 GiB the engine fills of each 44.7 GiB NVIDIA "
        r"L40S",
    ),
    (
        "moe-all-experts",
        endpoint_yaml("x", "sglang", "Qwen/Qwen3-30B-A3B", "ml.g6e.xlarge"),
        r"56.9 GiB of weights \(bf16, 2 bytes a parameter; every one of its 30.5 B mixture-of-experts parameters, not "
        r"just the 3.4 B active per token\)",
    ),
    (
        "kv-cache",
        endpoint_yaml(
            "x", "vllm", "meta-llama/Llama-3.1-8B-Instruct", "ml.g6.xlarge", engine={"max_model_len": 131072}
        ),
        r"15.0 GiB of weights .* \+ 16.0 GiB of KV cache for one sequence of max_model_len 131072 .*lower max_model_len, "
        r"or store the KV cache in fp8",
    ),
    # options against the model
    (
        "beyond-positions",
        endpoint_yaml("x", "vllm", "Qwen/Qwen3-32B", "ml.g7e.2xlarge", engine={"max_model_len": 65536}),
        r"engine.max_model_len: value 65536 is beyond the 40960 positions of 'Qwen/Qwen3-32B'",
    ),
    (
        "runtime-awq",
        endpoint_yaml("x", "vllm", "Qwen/Qwen3-32B", "ml.g7e.2xlarge", engine={"quantization": "awq"}),
        r"engine.quantization: value 'awq' needs a checkpoint quantized with it, .*quantizing at load: fp8,",
    ),
    (
        "other-quant",
        endpoint_yaml("x", "vllm", "openai/gpt-oss-20b", "ml.g6e.xlarge", engine={"quantization": "fp8"}),
        r"engine.quantization: value 'fp8' differs from the checkpoint's own 'mxfp4'",
    ),
]


@pytest.mark.parametrize(("case", "endpoint", "expected"), REFUSED, ids=[c[0] for c in REFUSED])
def test_refused_at_load_with_what_would_work(tmp_path, case, endpoint, expected):
    assert re.search(expected, refusals(tmp_path, endpoint)), refusals(tmp_path, endpoint)


ACCEPTED = [
    endpoint_yaml("mxfp4-l40s", "vllm", "openai/gpt-oss-20b", "ml.g6e.xlarge", extra=OPEN),
    endpoint_yaml(
        "mxfp4-a10g", "vllm", "openai/gpt-oss-20b", "ml.g5.xlarge", engine={"max_model_len": 32768}, extra=OPEN
    ),
    endpoint_yaml("dense-tp4", "vllm", "Qwen/Qwen3-32B", "ml.g6e.12xlarge", tp=4),
    endpoint_yaml("dense-fp8-kv", "vllm", "Qwen/Qwen3-32B", "ml.g7e.2xlarge", engine={"kv_cache_dtype": "fp8"}),
    endpoint_yaml(
        "runtime-fp8", "vllm", "Qwen/Qwen3-32B", "ml.g6e.xlarge", engine={"quantization": "fp8", "max_model_len": 8192}
    ),
    endpoint_yaml("moe-g7e", "sglang", "Qwen/Qwen3-30B-A3B", "ml.g7e.2xlarge"),
    endpoint_yaml(
        "fp16-t4",
        "vllm",
        "meta-llama/Llama-3.1-8B-Instruct",
        "ml.g4dn.12xlarge",
        dtype="fp16",
        tp=4,
        engine={"max_model_len": 8192},
    ),
    endpoint_yaml("qwen3-hf", "hf-fastload", "Qwen/Qwen3-32B", "ml.g6e.12xlarge", tp=4),  # transformers 4.51: Qwen3
]


def test_accepted_where_it_fits(tmp_path):
    environment_plan = load(tmp_path, *ACCEPTED)
    assert all(plan.unsized_warning is None for plan in environment_plan.plans)


def test_load_checks_a_local_models_own_config(tmp_path, tiny_chat_models):
    """A local directory is checked from its config.json and safetensors headers before any build."""
    quantized = tmp_path / "gpt-oss-mxfp4"
    shutil.copytree(tiny_chat_models["gpt_oss"], quantized)
    config = json.loads((quantized / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "mxfp4"}
    (quantized / "config.json").write_text(json.dumps(config))
    text = refusals(tmp_path, endpoint_yaml("x", "vllm", str(quantized), "ml.g4dn.xlarge", dtype="fp16"))
    assert "loads mxfp4 weights from compute capability 8.0" in text and "in bf16 only, not fp16" in text
    load(tmp_path, endpoint_yaml("x", "vllm", str(quantized), "ml.g6e.xlarge", extra=OPEN))
    unknown = tmp_path / "unknown-arch"
    shutil.copytree(tiny_chat_models["llama"], unknown)
    config = json.loads((unknown / "config.json").read_text())
    (unknown / "config.json").write_text(json.dumps({**config, "architectures": ["NotARealForCausalLM"]}))
    assert re.search(
        rf"is a NotARealForCausalLM .*which {VLLM_ENGINE} in the image of system 'vllm' does not serve"
        r".*systems that serve it: none",
        refusals(tmp_path, endpoint_yaml("x", "vllm", str(unknown))),
    )


# ---- compatibility and verification at build, from the real files -------------------------------------------------


def test_build_refuses_what_the_real_files_say(tmp_path, tiny_chat_models):
    """A config.json the known table does not have is read at build: a declared MXFP4 checkpoint is copied as it
    is on a GPU that runs it, and refused with the reason on one that does not."""
    quantized = tmp_path / "gpt-oss-mxfp4"
    shutil.copytree(tiny_chat_models["gpt_oss"], quantized)
    config = json.loads((quantized / "config.json").read_text())
    (quantized / "config.json").write_text(json.dumps({**config, "quantization_config": {"quant_method": "mxfp4"}}))
    _, manifest, _ = build(tmp_path, endpoint_yaml("oss", "vllm", str(quantized), extra=OPEN), "oss")
    assert manifest["model"]["quantization"]["method"] == "mxfp4"
    assert manifest["verification"]["parameters"].startswith("not verified: mxfp4 packs elements and scales")
    from systems import all_systems, get_system
    from systems.checkpoint_facts import read_local_checkpoint
    from systems.checks import checkpoint_problems

    plan = load(tmp_path, endpoint_yaml("x", "vllm", "openai/gpt-oss-20b", "ml.g6e.xlarge", extra=OPEN)).plans[0]
    spec = plan.spec.model_copy(update={"instance_type": "ml.g4dn.xlarge", "dtype": "fp16", "model": str(quantized)})
    profile = get_system("vllm").profile
    assert profile is not None
    problems = checkpoint_problems(spec, profile(spec, plan.engine), read_local_checkpoint(quantized), all_systems())
    assert len(problems) == 2 and "compute capability 8.0" in problems[0] and "bf16 only" in problems[1]


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        # Refused at load now: the bounded header reader sees offsets past the file's end (facts/model_files.py).
        ("truncate", r"model.safetensors: tensor .* data_offsets is .*; allowed: offsets within the file's"),
        ("config", r"the safetensors hold 175,616 parameters, but config.json's Qwen3ForCausalLM has 224,768"),
        ("index", r"model.safetensors.index.json: 1 tensor\(s\) in the index but in no shard, e.g. 'model.extra'"),
        ("pickle", r"no \*.safetensors weights in .*\(it has pytorch_model.bin: pickled weights"),
        ("tokenizer", r"the tokenizer does not load or work"),
    ],
)
def test_build_refuses_a_damaged_checkpoint_and_writes_nothing(tmp_path, tiny_chat_models, damage, expected):
    source = tmp_path / "source"
    shutil.copytree(tiny_chat_models["qwen3"], source)
    weights = source / "model.safetensors"
    if damage == "truncate":
        weights.write_bytes(weights.read_bytes()[:-100])
    elif damage == "config":
        config = json.loads((source / "config.json").read_text())
        (source / "config.json").write_text(json.dumps({**config, "intermediate_size": 256}))
    elif damage == "index":
        names = {
            name: "model.safetensors"
            for name in json.loads(weights.read_bytes()[8 : 8 + int.from_bytes(weights.read_bytes()[:8], "little")])
            if name != "__metadata__"
        }
        (source / "model.safetensors.index.json").write_text(
            json.dumps({"weight_map": {**names, "model.extra": "model.safetensors"}})
        )
    elif damage == "pickle":
        weights.rename(source / "pytorch_model.bin")
    else:
        (source / "tokenizer.json").write_text("{}")
    with pytest.raises(ConfigError if damage == "truncate" else BuildError, match=expected):
        build(tmp_path, endpoint_yaml("broken", "vllm", str(source)), "broken")
    assert not (tmp_path / "build" / "broken").exists()


# ---- streamed weights (issue 20 item 5) -------------------------------------------------------------------------


def test_streamed_weights_environment_model_data_and_network(tmp_path, tiny_chat_models):
    """The engine reads the artifact's S3 prefix itself: SM_VLLM_MODEL (which the entrypoint passes as --model
    instead of /opt/ml/model) and the Run:ai load format; SageMaker downloads metadata/ only; no isolation."""
    plan = load(
        tmp_path,
        endpoint_yaml("streamed", "vllm", str(tiny_chat_models["llama"]), engine={"stream_weights_from_s3": True}),
    ).plans[0]
    env = plan.container_environment("bucket")
    flags = flags_of(vllm_argv(env, tmp_path / "metadata-only-is-not-used"))
    assert flags["--model"] == f"s3://bucket/{plan.artifact_prefix}" and flags["--load-format"] == "runai_streamer"
    assert set(flags) <= CLI_FLAGS[VLLM_ENGINE] and "SM_VLLM_STREAM_WEIGHTS_FROM_S3" not in env
    data = plan.model_data("bucket")
    assert data.prefix == f"{plan.artifact_prefix}metadata/" and data.readable_prefix == plan.artifact_root
    assert plan.network_isolation is False
    text = refusals(
        tmp_path,
        endpoint_yaml(
            "iso",
            "vllm",
            str(tiny_chat_models["llama"]),
            engine={"stream_weights_from_s3": True},
            extra="    network: {network_isolation: true}\n",
        ),
    )
    assert "network.network_isolation: value True is not allowed with engine.stream_weights_from_s3" in text
    text = refusals(
        tmp_path,
        endpoint_yaml(
            "fmt",
            "vllm",
            str(tiny_chat_models["llama"]),
            engine={"stream_weights_from_s3": True, "load_format": "safetensors"},
        ),
    )
    assert "stream_weights_from_s3 loads with load_format runai_streamer, not 'safetensors'" in text
    assert "stream_weights_from_s3: value True is not supported by system 'sglang'" in refusals(
        tmp_path, endpoint_yaml("sg", "sglang", str(tiny_chat_models["llama"]), engine={"stream_weights_from_s3": True})
    )


def test_streamed_example_template_grants_what_the_engine_reads(synth):
    """config/examples/vllm-gpt-oss-20b.yaml (shared synth): the model downloads metadata/, the container reaches S3,
    and its execution role reads the whole artifact prefix the engine streams from (the role SageMaker uses)."""
    synthesized = synth("config/examples/vllm-gpt-oss-20b.yaml", "dev")
    template = synthesized.templates["llm-endpoints-dev-gpt-oss-20b"]
    resources = template["Resources"].values()
    [model] = [r["Properties"] for r in resources if r["Type"] == "AWS::SageMaker::Model"]
    container = model["PrimaryContainer"]
    assert model["EnableNetworkIsolation"] is False
    assert json.dumps(container["ModelDataSource"]).endswith('/metadata/"]]}}}')
    assert container["Environment"]["SM_VLLM_LOAD_FORMAT"] == "runai_streamer"
    assert "models/gpt-oss-20b/" in json.dumps(container["Environment"]["SM_VLLM_MODEL"])
    policies = json.dumps([r["Properties"] for r in resources if r["Type"] == "AWS::IAM::Policy"])
    assert '"s3:GetObject"' in policies and "/models/gpt-oss-20b/*" in policies and '"s3:ListBucket"' in policies
    [variant] = [r["Properties"] for r in resources if r["Type"] == "AWS::SageMaker::EndpointConfig"][0][
        "ProductionVariants"
    ]
    assert variant["InferenceAmiVersion"] == "al2023-ami-sagemaker-inference-gpu-4-1"
