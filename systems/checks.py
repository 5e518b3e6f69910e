"""The config rules that need the serving system: what it serves and offers, on what hardware, how big a model fits.

Run by deployment.load_config on every endpoint whose schema rules passed; messages name the endpoint, the key, the
value and what is allowed. The model-size rule has three moments: at load, weights estimated from the parameter
count (`system_problems`); at synth, a warning for a model that could not be sized (`unsized_model_warning`); at
build, the weights actually read (`built_weights_problem`, raised by systems.recipe_common.load_source).
"""

from __future__ import annotations

from endpoint_config import BYTES_PER_PARAM, EndpointSpec, InstanceType
from endpoint_config.adapters import adapter_rank, local_adapter_config
from endpoint_config.models import model_facts
from endpoint_config.security import isolation_problems

from .base import Capability, LoraSizing, ServingSystem, engine_problems

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


def _gpus_phrase(ep: EndpointSpec) -> str:
    instance = ep.instance
    return (
        f"{WEIGHT_SHARE_OF_GPU_MEMORY:.0%} of the {instance.gpu_memory_gib:.1f} GiB of each {instance.accelerators.name} "
        f"on {ep.instance_type} x tensor_parallel_degree {ep.tensor_parallel_degree}"
    )


def _offered_by(others: dict[str, ServingSystem], capability: str) -> str:
    names = [name for name, system in others.items() if getattr(system, capability).supported]
    return ", ".join(names) or "none"


def system_problems(ep: EndpointSpec, system: ServingSystem, systems: dict[str, ServingSystem]) -> list[str]:
    """Every rule of `system` on `ep`. `systems`: the registry, to name the systems that offer what this one does
    not."""
    instance = ep.instance
    problems: list[str] = []

    def bad(key: str, message: str) -> None:
        problems.append(f"endpoint {ep.name!r}: {key}: {message}")

    def refused(key: str, value: str, capability: Capability, offered: str, who: str) -> None:
        bad(key, f"value {value} is not supported by system {ep.system!r}: {capability.note}; {who}: {offered}")

    if instance.non_gpu_accelerator is not None:
        # Neuron (Inferentia/Trainium) and Gaudi need their own SDKs and images; every system here is CUDA (or
        # CPU, which would leave the paid-for accelerators idle).
        bad(
            "instance_type",
            f"value {ep.instance_type!r} has {instance.non_gpu_accelerator} devices, not NVIDIA GPUs; system "
            f"{ep.system!r} runs on NVIDIA GPUs (CUDA){'' if system.gpu_only else ' or CPUs'} only "
            "(e.g. ml.g5.2xlarge)",
        )
    elif system.gpu_only and not instance.is_gpu:
        bad("instance_type", f"value {ep.instance_type!r} has no NVIDIA GPU; system {ep.system!r} needs one (e.g. ml.g5.2xlarge)")

    facts = model_facts(ep.model, ep.model_parameters)
    if facts is not None:
        kind = "encoder-decoder" if facts.encoder_decoder else "decoder"
        if kind not in system.architectures:
            served = " and ".join(system.architectures)
            bad("model", f"value {ep.model!r} is an {kind} model; system {ep.system!r} serves {served} models only")
        if instance.is_gpu:
            need = facts.parameters * BYTES_PER_PARAM[ep.dtype] / ep.tensor_parallel_degree
            usable = usable_bytes_per_gpu(instance)
            if need > usable:
                bad(
                    "instance_type",
                    f"model {ep.model!r} ({facts.parameters / 1e9:.2f} B parameters, {facts.source}) needs "
                    f"{need / GIB:.1f} GiB of weights per GPU in {ep.dtype} at tensor_parallel_degree "
                    f"{ep.tensor_parallel_degree}, more than {WEIGHT_SHARE_OF_GPU_MEMORY:.0%} of the "
                    f"{instance.gpu_memory_gib:.1f} GiB of each {instance.accelerators.name} on {ep.instance_type} "
                    f"({usable / GIB:.1f} GiB); raise tensor_parallel_degree, pick a larger GPU or a smaller dtype",
                )
    if ep.weights_format not in system.weights_formats:
        offered = ", ".join(name for name, s in systems.items() if ep.weights_format in s.weights_formats) or "none"
        bad("weights_format", f"value {ep.weights_format!r} is not offered by system {ep.system!r} (allowed: "
            f"{', '.join(system.weights_formats)}); systems that offer it: {offered}")
    if ep.streaming.enabled and not system.streaming.supported:
        refused("streaming.enabled", "true", system.streaming, _offered_by(systems, "streaming"), "systems that stream")
    if ep.hosting.uses_components and not system.inference_components.supported:
        refused("hosting.mode", repr(ep.hosting.mode), system.inference_components,
                _offered_by(systems, "inference_components"), "systems that run as inference components")
    if ep.adapters and not system.adapters.supported:
        refused("adapters", f"({len(ep.adapters)} adapters)", system.adapters, _offered_by(systems, "adapters"),
                "systems that serve LoRA adapters")
    problems += engine_problems(ep, system.engine_options, {name: s.engine_options for name, s in systems.items()})
    if ep.adapters and system.adapters.supported and not problems:
        problems += adapter_rank_problems(ep, system)
    # network.network_isolation against a system whose engine reads S3 itself (endpoint_config/security.py).
    problems += isolation_problems(ep, engine_reads_s3=system.staged_weights_environment is not None)
    problems += system.rules(ep, instance)
    return problems


def adapter_rank_problems(ep: EndpointSpec, system: ServingSystem) -> list[str]:
    """Local adapters whose adapter_config.json declares a rank above what the container is started with (the build
    checks every adapter, Hub ones included: model_build/adapters.py)."""
    sizing = system.lora_sizing(ep)
    assert sizing is not None  # ep has adapters
    problems = []
    for i, adapter in enumerate(ep.adapters):
        config = local_adapter_config(adapter.model)
        rank = adapter_rank(config) if config is not None else None
        if rank is not None and rank > sizing.max_rank:
            problems.append(rank_refusal(ep, i, rank, sizing))
    return problems


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


def unsized_model_warning(ep: EndpointSpec, built_bytes: int | None = None) -> str | None:
    """The synth warning for a GPU endpoint whose model could not be sized before a build, else None.

    `built_bytes`: the built artifact's size when its manifest is at hand -- the build has then read the real
    weights and checked them (built_weights_problem), so there is nothing to warn about.
    """
    if not ep.instance.is_gpu or built_bytes or model_facts(ep.model, ep.model_parameters) is not None:
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
    on instances without NVIDIA GPUs."""
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
