"""tgi: Hugging Face Text Generation Inference 3.3.6 in its AWS image for SageMaker (the "huggingface-llm" DLC).

TGI is in maintenance mode: its README (huggingface/text-generation-inference@db931fcf) says "text-generation-
inference is now in maintenance mode. Going forward, we will accept pull requests for minor bug fixes, documentation
improvements and lightweight maintenance tasks" and recommends vLLM or SGLang going forward; prefer system `vllm` or
`sglang` for new endpoints. It is here for users whose endpoints already run it.

Sources, each at tag v3.3.6 (efb94e0d) of huggingface/text-generation-inference:
  [ENTRY]   sagemaker-entrypoint.sh, the image's entrypoint: it exits unless HF_MODEL_ID is set and exports it as
            MODEL_ID; SM_NUM_GPUS becomes NUM_SHARD, HF_MODEL_QUANTIZE QUANTIZE, HF_MODEL_REVISION REVISION,
            HF_MODEL_TRUST_REMOTE_CODE TRUST_REMOTE_CODE; then `text-generation-launcher --port 8080`.
  [LAUNCH]  launcher/src/main.rs: every argument is also read from its environment variable (clap `env`):
            MAX_INPUT_TOKENS, MAX_TOTAL_TOKENS, MAX_BATCH_PREFILL_TOKENS, MAX_CONCURRENT_REQUESTS, DTYPE (float16,
            bfloat16), QUANTIZE (the Quantization enum); "`max_input_tokens` must be < `max_total_tokens`".
  [SM]      router/src/sagemaker.rs: POST /invocations takes, untagged, a generate request {"inputs",
            "parameters", "stream"} (compat_generate: answered [{"generated_text"}], or with "stream": true
            server-sent events of {"token": {"text"}, "generated_text"}), an OpenAI chat request or an OpenAI
            completion request. router/src/server.rs: GET /ping, POST /v1/chat/completions, no request timeout.
  [TOK]     router/src/server.rs: the router loads the tokenizer with the image's Python transformers
            (py_resolve_tokenizer: AutoTokenizer.from_pretrained(MODEL_ID), saved again for its Rust tokenizers) and
            the chat template from the model's tokenizer_config.json or chat_template.json, not chat_template.jinja.
The image: sagemaker-core's image_uri_config/huggingface-llm.json, version 3.3.6: repository
huggingface-pytorch-tgi-inference, tag prefix 2.7.0-tgi3.3.6, gpu container cu124-ubuntu22.04, py311.
No torch import.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from endpoint_config import EndpointSpec
from facts.instances import InstanceType

from ..base import AdapterSupport, Capability, ChatCapability, ContainerBodies, EngineOptions, LocalRun, ServingSystem
from ..engine_systems import (
    DEFAULT_DOWNLOAD_TIMEOUT_S,
    DEFAULT_STARTUP_TIMEOUT_S,
    ENGINE_SERVER_REQUEST_TIMEOUT,
    PLAIN_CHECKPOINT,
    artifact_weight_bytes,
)
from ..images import ImagePin, PythonStack

# sagemaker.core.image_uris.retrieve("huggingface-llm", region, version="3.3.6") (huggingface-llm.json; the newest
# version it lists, in the DLC regions). The table does not state the image's Python stack. TGI 3.3.6's Dockerfile
# installs its server with `uv sync --frozen` from server/uv.lock, which pins transformers 4.51.0 and tokenizers
# 0.21.0 (server/pyproject.toml allows "transformers>=4.51.0", "tokenizers>=0.20.3"); that AWS's build of the image
# installs the same lock is unverified. Both the router ([TOK]) and the server read the tokenizer with them.
# No served-name environment: TGI's chat request `model` is "[UNUSED]" (router/src/lib.rs ChatRequest).
TGI_DLC = ImagePin(
    repository="huggingface-pytorch-tgi-inference",
    gpu_tag="2.7.0-tgi3.3.6-gpu-py311-cu124-ubuntu22.04",
    sdk_framework="huggingface-llm",
    sdk_version="3.3.6",
    python_stack=PythonStack(transformers="==4.51.0", tokenizers="==0.21.0", verified=False),
)
# [LAUNCH] enum Quantization, clap's kebab-case names.
Quantize = Literal[
    "awq",
    "compressed-tensors",
    "eetq",
    "exl2",
    "gptq",
    "marlin",
    "bitsandbytes",
    "bitsandbytes-nf4",
    "bitsandbytes-fp4",
    "fp8",
]
Tokens = Annotated[int, Field(ge=1, le=1_048_576)]
# [LAUNCH] enum Dtype: float16 and bfloat16 only.
TGI_DTYPE = {"fp16": "float16", "bf16": "bfloat16"}


class TgiEngineOptions(EngineOptions):
    """The `tgi` system's `engine:` options, each TGI's launcher argument of that name, rendered as its environment
    variable ([LAUNCH]); the quantization as HF_MODEL_QUANTIZE, which the entrypoint passes on as QUANTIZE ([ENTRY])."""

    HINTS: ClassVar[dict[str, str]] = {
        "max_model_len": "TGI's name for prompt + generated tokens is max_total_tokens",
        "max_batch_size": "TGI's name for concurrent requests is max_concurrent_requests",
        "tensor_parallel_size": "set tensor_parallel_degree (it renders SM_NUM_GPUS, TGI's NUM_SHARD)",
    }

    # Prompt + generated tokens: "Clients will send input sequences and ask to generate `max_new_tokens` on top"
    # ([LAUNCH] Args::max_total_tokens), so the shared length rules (systems/checks.py) read it as the context.
    CONTEXT_KEY: ClassVar[str] = "max_total_tokens"
    PROMPT_KEY: ClassVar[str | None] = "max_input_tokens"
    GPU_KEYS: ClassVar[tuple[str, ...]] = ("quantize",)

    max_input_tokens: Tokens | None = None
    max_total_tokens: Tokens | None = None
    max_batch_prefill_tokens: Tokens | None = None
    max_concurrent_requests: Annotated[int, Field(ge=1, le=65_536)] | None = None
    quantize: Quantize | None = None

    def conflicts(self) -> list[str]:
        if self.max_input_tokens is not None and self.max_total_tokens is not None:
            if self.max_input_tokens >= self.max_total_tokens:
                return [
                    f"engine.max_input_tokens: value {self.max_input_tokens} must be below engine.max_total_tokens "
                    f"({self.max_total_tokens}): TGI's launcher refuses it (launcher/src/main.rs)"
                ]
        return []


def container_environment(endpoint: EndpointSpec, engine: TgiEngineOptions) -> dict[str, str]:
    """HF_MODEL_ID=/opt/ml/model: the checkpoint's own files where SageMaker mounts the artifact (the entrypoint
    requires it and the launcher loads a local path as it is); SM_NUM_GPUS: the shards (tensor_parallel_degree);
    DTYPE; and each engine option as its launcher variable."""
    env = {
        "HF_MODEL_ID": "/opt/ml/model",
        "SM_NUM_GPUS": str(endpoint.tensor_parallel_degree),
        "DTYPE": TGI_DTYPE.get(endpoint.dtype, endpoint.dtype),
    }
    for key in ("max_input_tokens", "max_total_tokens", "max_batch_prefill_tokens", "max_concurrent_requests"):
        value = getattr(engine, key)
        if value is not None:
            env[key.upper()] = str(value)
    if engine.quantize is not None:
        env["HF_MODEL_QUANTIZE"] = engine.quantize
    return dict(sorted(env.items()))


def rules(endpoint: EndpointSpec, instance: InstanceType, engine: TgiEngineOptions) -> list[str]:
    if endpoint.dtype not in TGI_DTYPE:
        return [
            f"endpoint {endpoint.name!r}: dtype: value {endpoint.dtype!r} is not one of TGI's dtypes "
            f"(launcher/src/main.rs enum Dtype); allowed: {', '.join(TGI_DTYPE)}"
        ]
    return []


SYSTEM: ServingSystem[TgiEngineOptions] = ServingSystem(
    name="tgi",
    summary="Hugging Face TGI 3.3.6 in its AWS image (maintenance mode upstream: prefer vllm or sglang), the "
    "checkpoint as it is",
    recipe="systems.tgi.recipe",
    image=TGI_DLC,
    engine_options=TgiEngineOptions,
    environment=container_environment,
    rules=rules,
    # [SM]: the generate body answers [{"generated_text"}] as the generation contract reads; chat and completion as
    # OpenAI's; all three on /invocations. Its "inputs" is one string (lib.rs CompatGenerateRequest): one prompt a body.
    # GenerateParameters (lib.rs) has no min_new_tokens or num_beams field and no deny_unknown_fields, so serde
    # ignores them.
    bodies=ContainerBodies(
        frozenset({"generation", "openai-completion", "openai-chat"}),
        prompts_per_body=1,
        unread_parameters=frozenset({"min_new_tokens", "num_beams"}),
        # server.rs chat_completions: chat.completion.chunk events, then `data: [DONE]`
        chat_streams_sse=True,
    ),
    chat=ChatCapability.native(
        "TGI 3.3.6 answers OpenAI chat completions on /invocations (router/src/sagemaker.rs SagemakerRequest::Chat, "
        "router/src/server.rs chat_completions) with the model's chat template",
        constrained_decoding=False,
        tool_calls=None,
    ),
    streaming=Capability.yes(
        'TGI streams server-sent events on /invocations for "stream": true (router/src/server.rs compat_generate: '
        "generate_stream's tokens; chat completion chunks for a chat body)"
    ),
    tensor_parallel=Capability.yes("SM_NUM_GPUS, which the image's entrypoint passes on as NUM_SHARD"),
    inference_components=Capability.no(
        "no AWS or Hugging Face source read here establishes TGI's image as an inference component; use vllm or sglang"
    ),
    adapters=AdapterSupport.no(
        "TGI 3.3.6 has no SageMaker POST /adapters route (router/src/server.rs), so an adapter inference component "
        "could not be loaded; use system vllm for adapters"
    ),
    plain_checkpoint=PLAIN_CHECKPOINT,
    # [TOK]: a tokenizer transformers 5 saved (class TokenizersBackend, chat_template.jinja) is rewritten for the
    # image's transformers 4.51, and config.json with it.
    rewrite_metadata_for_image=True,
    gpu_only=True,
    network_isolation=True,
    default_download_timeout_s=DEFAULT_DOWNLOAD_TIMEOUT_S,
    default_startup_timeout_s=DEFAULT_STARTUP_TIMEOUT_S,
    # TGI's router (axum) sets no request timeout (router/src/server.rs): SageMaker's invocation timeout ends one.
    request_timeout=ENGINE_SERVER_REQUEST_TIMEOUT,
    estimate_weight_bytes=artifact_weight_bytes,
    local=LocalRun.stand_in(
        "tgi-router",
        "TGI's launcher and router (Rust, CUDA kernels) ship in the image only; the stand-in answers /invocations' "
        "three bodies, streams, length limits and validation errors as TGI 3.3.6's router does "
        "(local_runtime/tgi_router.py), decoding greedily",
    ),
    engine_notes="TGI's launcher, configured by its environment variables (HF_MODEL_ID, SM_NUM_GPUS, "
    "MAX_INPUT_TOKENS, MAX_TOTAL_TOKENS, ...). In maintenance mode upstream.",
)

__all__ = ["SYSTEM", "TGI_DLC", "TgiEngineOptions", "container_environment"]
