"""Config rules that need to know the serving system: what it serves, on what hardware, how big a model fits.

Called by endpoint_config.load_config after the schema checks; messages follow the same form
(endpoint, key, value, what is allowed).
"""

from __future__ import annotations

from endpoint_config import BYTES_PER_PARAM, EndpointSpec, parse_instance_type
from endpoint_config.models import model_facts

from . import get_system

# Weights may take this share of each GPU's memory; the rest holds the KV cache, activations and the CUDA context.
WEIGHT_SHARE_OF_GPU_MEMORY = 0.8
GIB = 1024**3


def system_problems(ep: EndpointSpec) -> list[str]:
    system = get_system(ep.system)
    instance = parse_instance_type(ep.instance_type)
    problems: list[str] = []

    def bad(key: str, message: str) -> None:
        problems.append(f"endpoint {ep.name!r}: {key}: {message}")

    if system.gpu_only and not instance.is_gpu:
        bad("instance_type", f"value {ep.instance_type!r} has no NVIDIA GPU; system {ep.system!r} needs one (e.g. ml.g5.2xlarge)")
    if instance.accelerators is not None and instance.accelerators.kind == "neuron":
        bad("instance_type", f"value {ep.instance_type!r} has AWS Neuron accelerators; system {ep.system!r} runs on NVIDIA GPUs")

    facts = model_facts(ep.model, ep.model_parameters)
    if facts is not None:
        kind = "encoder-decoder" if facts.encoder_decoder else "decoder"
        if kind not in system.architectures:
            served = " and ".join(system.architectures)
            bad("model", f"value {ep.model!r} is an {kind} model; system {ep.system!r} serves {served} models only")
        if instance.is_gpu:
            need = facts.parameters * BYTES_PER_PARAM[ep.dtype] / ep.tensor_parallel_degree
            usable = instance.gpu_memory_gib * GIB * WEIGHT_SHARE_OF_GPU_MEMORY
            if need > usable:
                bad(
                    "instance_type",
                    f"model {ep.model!r} ({facts.parameters / 1e9:.2f} B parameters, {facts.source}) needs "
                    f"{need / GIB:.1f} GiB of weights per GPU in {ep.dtype} at tensor_parallel_degree "
                    f"{ep.tensor_parallel_degree}, more than {WEIGHT_SHARE_OF_GPU_MEMORY:.0%} of the "
                    f"{instance.gpu_memory_gib:.0f} GiB of each {instance.accelerators.name} on {ep.instance_type} "
                    f"({usable / GIB:.1f} GiB); raise tensor_parallel_degree, pick a larger GPU or a smaller dtype",
                )
    if ep.weights_format == "torch-save" and ep.system != "hf-fastload":
        bad("weights_format", f"value 'torch-save' is only offered by system 'hf-fastload', not {ep.system!r}")
    if ep.engine.tensorrt_profile is not None and ep.system != "tensorrt-byoc":
        bad("engine.tensorrt_profile", f"is only used by system 'tensorrt-byoc', not {ep.system!r}")
    return problems


def region_problems(ep: EndpointSpec, region: str) -> list[str]:
    """The pinned image must be published in the environment's region."""
    image = get_system(ep.system).image
    if image is None or region in image.available_regions:
        return []
    return [
        f"endpoint {ep.name!r}: system {ep.system!r}: its image {image.repository}:{image.gpu_tag} is not published "
        f"in region {region}; regions with it: {', '.join(image.available_regions)}"
    ]
