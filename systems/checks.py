"""Config rules that need to know the serving system: what it serves, on what hardware, how big a model fits.

Called by deployment.load_config after the schema checks; messages follow the same form
(endpoint, key, value, what is allowed). The model-size rule has three moments:
  config: weights estimated from the parameter count (local safetensors headers, the known-model table or
          `model_parameters`) against the GPUs' memory -- `system_problems`;
  synth:  a model that could not be sized gets a warning annotation on its stack -- `unsized_model_warning`;
  build:  the weights actually read are checked before anything is written -- `built_weights_problem`
          (systems.recipe_common.load_source raises it as a BuildError).
"""

from __future__ import annotations

from endpoint_config import BYTES_PER_PARAM, EndpointSpec, InstanceType, parse_instance_type
from endpoint_config.models import model_facts

from . import get_system

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
    instance = parse_instance_type(ep.instance_type)
    if not instance.is_gpu:
        return None
    return int(usable_bytes_per_gpu(instance) * ep.tensor_parallel_degree)


def _gpus_phrase(ep: EndpointSpec, instance: InstanceType) -> str:
    return (
        f"{WEIGHT_SHARE_OF_GPU_MEMORY:.0%} of the {instance.gpu_memory_gib:.1f} GiB of each {instance.accelerators.name} "
        f"on {ep.instance_type} x tensor_parallel_degree {ep.tensor_parallel_degree}"
    )


def system_problems(ep: EndpointSpec) -> list[str]:
    system = get_system(ep.system)
    instance = parse_instance_type(ep.instance_type)
    problems: list[str] = []

    def bad(key: str, message: str) -> None:
        problems.append(f"endpoint {ep.name!r}: {key}: {message}")

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
    if ep.weights_format == "torch-save" and ep.system != "hf-fastload":
        bad("weights_format", f"value 'torch-save' is only offered by system 'hf-fastload', not {ep.system!r}")
    return problems


def unsized_model_warning(ep: EndpointSpec, built_bytes: int | None = None) -> str | None:
    """The synth warning for a GPU endpoint whose model could not be sized before a build, else None.

    `built_bytes`: the built artifact's size when its manifest is at hand -- the build has then read the real
    weights and checked them (built_weights_problem), so there is nothing to warn about.
    """
    instance = parse_instance_type(ep.instance_type)
    if not instance.is_gpu or built_bytes or model_facts(ep.model, ep.model_parameters) is not None:
        return None
    return (
        f"endpoint {ep.name!r}: model {ep.model!r} could not be sized (not a local directory with safetensors "
        "weights, not in the known-model table, no model_parameters), so nothing checked that its weights fit "
        f"{_gpus_phrase(ep, instance)}; set model_parameters: <parameter count> in the config, or build it first "
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
    instance = parse_instance_type(ep.instance_type)
    basis = f" ({_gpus_phrase(ep, instance)})" if instance.is_gpu and limit_bytes is None else ""
    return (
        f"endpoint {ep.name!r}: model {ep.model!r}: the weights read at build are {weight_bytes:,} bytes "
        f"({parameter_count:,} parameters in {ep.dtype}), more than the fit limit of {limit:,} bytes on "
        f"{ep.instance_type} at tensor_parallel_degree {ep.tensor_parallel_degree}{basis}; nothing was written; "
        "raise tensor_parallel_degree, pick a larger GPU or a smaller dtype"
    )


def region_problems(ep: EndpointSpec, region: str) -> list[str]:
    """The pinned image must be published in the environment's region."""
    image = get_system(ep.system).image
    if image is None or region in image.available_regions:
        return []
    return [
        f"endpoint {ep.name!r}: system {ep.system!r}: its image {image.repository}:{image.gpu_tag} is not published "
        f"in region {region}; regions with it: {', '.join(image.available_regions)}"
    ]
