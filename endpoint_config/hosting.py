"""The `hosting:` block of an endpoint: the model on the production variant (`mode: endpoint`, the default) or as a
SageMaker inference component on a variant that holds no model (`mode: inference-components`, which can scale to 0).

Each bound below names its source; the sources in full: docs/design/inference-components.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from .base import Strict

if TYPE_CHECKING:
    from facts.instances import InstanceType

    from .schema import EndpointSpec

HOSTING_MODES = ("endpoint", "inference-components")
INFERENCE_COMPONENTS = "inference-components"

# botocore: NumberOfCpuCoresRequired {"min": 0.25}; MinMemoryRequiredInMb {"min": 128}. No maximum is published: the
# instance's own size is the limit, which SageMaker checks when it places a copy.
MIN_CPU_CORES = 0.25
MIN_MEMORY_MB = 128
# An inference component name: InferenceComponentName {"max": 63}, pattern ^[a-zA-Z0-9](-*[a-zA-Z0-9])*$.
COMPONENT_NAME_MAX = 63
COMPONENT_NAME_SUFFIX = "-ic"


class InstanceScaling(Strict):
    """ProductionVariant ManagedInstanceScaling: SageMaker adds instances when a copy finds no room and removes idle
    ones. MinInstanceCount min 0 (0 lets the endpoint scale to zero, opt-in: it needs copy_scaling.min_copies 0 as
    well), MaxInstanceCount min 1 (botocore); the upper bound 100 is the config's, as for instance_count."""

    min_instances: int = Field(1, ge=0, le=100)
    max_instances: int = Field(1, ge=1, le=100)


class ComputeRequirements(Strict):
    """InferenceComponentComputeResourceRequirements, per model copy.

    accelerators: NumberOfAcceleratorDevicesRequired; default (None) the endpoint's tensor_parallel_degree, the GPUs
      the engine shards one copy over. cpu_cores: NumberOfCpuCoresRequired (min 0.25). min_memory_mb:
      MinMemoryRequiredInMb (min 128), host memory reserved for one copy."""

    accelerators: int | None = Field(None, ge=1, le=64)
    cpu_cores: float = Field(1.0, ge=MIN_CPU_CORES, le=512)
    min_memory_mb: int = Field(1024, ge=MIN_MEMORY_MB, le=4_194_304)


class CopyScaling(Strict):
    """Application Auto Scaling of the component's copies (sagemaker:inference-component:DesiredCopyCount): target
    tracking on SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution. min_copies 0 lets the component
    (and with instance_scaling.min_instances 0, the endpoint) scale to zero; the stack then adds the documented
    step scaling policy and NoCapacityInvocationFailures alarm that bring one copy back."""

    min_copies: int = Field(0, ge=0, le=100)
    max_copies: int = Field(ge=1, le=100)
    target_concurrency: float = Field(gt=0, le=1000, description="concurrent requests per copy")
    scale_in_cooldown_s: int = Field(300, ge=0, le=3600)
    scale_out_cooldown_s: int = Field(60, ge=0, le=3600)


class Hosting(Strict):
    """How the model is hosted. `mode: endpoint` (default): the model on the production variant, today's stacks.
    `mode: inference-components`: an endpoint config whose variant names no model, with an endpoint-level execution
    role, managed instance scaling and least-outstanding-requests routing; the model runs as one inference component
    with `compute` per copy, `copies` copies at deploy time and, with `copy_scaling`, copy autoscaling."""

    mode: Literal["endpoint", "inference-components"] = "endpoint"
    instance_scaling: InstanceScaling | None = None
    compute: ComputeRequirements | None = None
    # RuntimeConfig.CopyCount at deploy time. CloudFormation and botocore allow 0, but SageMaker refuses to create a
    # component with 0 copies ("Inference components copy count an integer larger than 0", measured in an account:
    # github.com/stdapi-ai/stdapi.ai issue 43, 2026-08-27): zero is reached by copy scaling afterwards.
    copies: int = Field(1, ge=1, le=100, description="RuntimeConfig.CopyCount at deploy time")
    copy_scaling: CopyScaling | None = None

    @property
    def uses_components(self) -> bool:
        return self.mode == INFERENCE_COMPONENTS

    @property
    def scales_to_zero(self) -> bool:
        """Copies may reach zero, so the stack wires the wake-up (step scaling policy + alarm)."""
        return self.uses_components and self.copy_scaling is not None and self.copy_scaling.min_copies == 0


def copy_range(hosting: Hosting) -> tuple[int, int]:
    """The fewest and most copies the component runs: copy_scaling's range (its minimum may be 0), else `copies`."""
    scaling = hosting.copy_scaling
    return (scaling.min_copies, scaling.max_copies) if scaling is not None else (hosting.copies, hosting.copies)


def update_copy_range(hosting: Hosting) -> tuple[int, int]:
    """The copies a model update meets: the count the component runs when it is deployed again, which the stack keeps
    (stacks/inference_components.py KeptCopyCount), but never 0 (SageMaker refuses a component with no copy, and a
    deploy must start one to be checked): copy_range with its minimum raised to 1."""
    low, high = copy_range(hosting)
    return max(1, low), high


def component_name(endpoint_name: str) -> str:
    """The inference component's name: the endpoint's plus "-ic" (one component per endpoint, so it is unique where
    the endpoint name is). Fixed, because the invoke function, the scaling target and the alarm name it."""
    name = f"{endpoint_name}{COMPONENT_NAME_SUFFIX}"
    if len(name) > COMPONENT_NAME_MAX:
        raise ValueError(
            f"inference component name {name!r} is longer than SageMaker's {COMPONENT_NAME_MAX} characters"
        )
    return name


def accelerators_per_copy(ep: EndpointSpec, instance: InstanceType) -> int:
    """The GPUs one copy gets: the configured count, else the tensor parallel degree (0 on an instance without GPUs)."""
    if not instance.is_gpu:
        return 0
    compute = ep.hosting.compute
    return (
        compute.accelerators if compute is not None and compute.accelerators is not None else ep.tensor_parallel_degree
    )


def hosting_problems(ep: EndpointSpec, instance: InstanceType) -> list[str]:
    """The `hosting:` rules cfn-lint cannot check: they need the instance's GPUs and the rest of the endpoint (which
    systems run as components is ServingSystem.inference_components). One message per problem, naming endpoint, key, value and what is allowed. `instance` holds the
    facts of `ep.instance_type` (endpoint_problems runs this only when those are known)."""
    if not ep.hosting.uses_components:
        return _unused_component_keys(ep)
    problems = _scaling_problems(ep)
    # The placement check needs every other rule met.
    return problems + _accelerator_problems(ep, instance, check_placement=not problems)


def _problem(ep: EndpointSpec, key: str, message: str) -> str:
    return f"endpoint {ep.name!r}: {key}: {message}"


def _unused_component_keys(ep: EndpointSpec) -> list[str]:
    """hosting.mode endpoint: the keys only inference components use, set."""
    hosting = ep.hosting
    problems = [
        _problem(
            ep,
            f"hosting.{key}",
            "is only used with hosting.mode: inference-components; set that mode or remove the key",
        )
        for key in ("instance_scaling", "compute", "copy_scaling")
        if getattr(hosting, key) is not None
    ]
    if hosting.copies != 1:
        problems.append(
            _problem(
                ep,
                "hosting.copies",
                f"value {hosting.copies} is only used with hosting.mode: inference-components; remove the key",
            )
        )
    return problems


def _scaling_problems(ep: EndpointSpec) -> list[str]:
    """Inference components: the instance and copy ranges, the initial counts within them, and scale to zero."""
    hosting = ep.hosting
    problems: list[str] = []

    def bad(key: str, message: str) -> None:
        problems.append(_problem(ep, key, message))

    if ep.autoscaling is not None:
        bad(
            "autoscaling",
            "is not used with hosting.mode: inference-components (SageMaker scales the instances itself, "
            "hosting.instance_scaling, and copies scale by hosting.copy_scaling); remove autoscaling",
        )

    scaling = hosting.instance_scaling or InstanceScaling()
    if scaling.min_instances > scaling.max_instances:
        bad(
            "hosting.instance_scaling",
            f"min_instances {scaling.min_instances} is above max_instances {scaling.max_instances}",
        )
    elif not max(1, scaling.min_instances) <= ep.instance_count <= scaling.max_instances:
        bad(
            "instance_count",
            f"value {ep.instance_count} is outside hosting.instance_scaling's range "
            f"{max(1, scaling.min_instances)}-{scaling.max_instances}; the initial count must lie within it",
        )

    copy = hosting.copy_scaling
    if copy is not None:
        if copy.min_copies > copy.max_copies:
            bad("hosting.copy_scaling", f"min_copies {copy.min_copies} is above max_copies {copy.max_copies}")
        elif not max(1, copy.min_copies) <= hosting.copies <= copy.max_copies:
            bad(
                "hosting.copies",
                f"value {hosting.copies} is outside hosting.copy_scaling's range "
                f"{max(1, copy.min_copies)}-{copy.max_copies}; the deploy-time count must lie within it",
            )

    # Scale to zero needs both halves ("Scale an endpoint to zero instances": MinInstanceCount 0 and the component's
    # minimum capacity 0): copies at zero on instances kept running pay for idle GPUs, and instances allowed to
    # reach zero never do while copies stay.
    copies_reach_zero = copy is not None and copy.min_copies == 0
    if copies_reach_zero and scaling.min_instances > 0:
        bad(
            "hosting.copy_scaling.min_copies",
            f"value 0 needs hosting.instance_scaling.min_instances: 0 (got {scaling.min_instances}): with no copy the "
            "endpoint serves nothing, yet its instances keep running; set min_instances: 0, or min_copies: 1 or more",
        )
    if scaling.min_instances == 0 and not copies_reach_zero:
        bad(
            "hosting.instance_scaling.min_instances",
            "value 0 needs hosting.copy_scaling with min_copies: 0: instances only reach zero when the component's "
            "copies do; add copy_scaling with min_copies: 0, or set min_instances: 1 or more",
        )
    return problems


def _accelerator_problems(ep: EndpointSpec, instance: InstanceType, *, check_placement: bool) -> list[str]:
    """Inference components: a copy's GPUs against the instance's and tensor_parallel_degree, and (check_placement)
    whether copy_scaling.max_copies fit on hosting.instance_scaling.max_instances."""
    compute = ep.hosting.compute
    if not instance.is_gpu:
        if compute is not None and compute.accelerators is not None:
            return [
                _problem(
                    ep,
                    "hosting.compute.accelerators",
                    f"value {compute.accelerators} needs a GPU instance; {ep.instance_type} has none (remove the key)",
                )
            ]
        return []
    gpus = accelerators_per_copy(ep, instance)
    if gpus > instance.gpu_count:
        return [
            _problem(
                ep,
                "hosting.compute.accelerators",
                f"value {gpus} is more than the {instance.gpu_count} GPUs of {ep.instance_type}; allowed: 1-{instance.gpu_count}",
            )
        ]
    if gpus != ep.tensor_parallel_degree:
        # The engine shards one copy over tensor_parallel_degree GPUs (OPTION_TENSOR_PARALLEL_DEGREE): fewer GPUs
        # and it cannot start, more and they sit idle.
        return [
            _problem(
                ep,
                "hosting.compute.accelerators",
                f"value {gpus} differs from tensor_parallel_degree {ep.tensor_parallel_degree}, the GPUs one copy's "
                f"engine shards over; allowed: {ep.tensor_parallel_degree} (or leave it out)",
            )
        ]
    copy = ep.hosting.copy_scaling
    if copy is None or not check_placement:
        return []
    scaling = ep.hosting.instance_scaling or InstanceScaling()
    per_instance = instance.gpu_count // gpus
    room = per_instance * scaling.max_instances
    if copy.max_copies <= room:
        return []
    return [
        _problem(
            ep,
            "hosting.copy_scaling.max_copies",
            f"value {copy.max_copies} cannot be placed: {scaling.max_instances} instance(s) of "
            f"{ep.instance_type} hold {per_instance} copies of {gpus} GPU(s) each ({room} in all); allowed: "
            f"1-{room}, or raise hosting.instance_scaling.max_instances",
        )
    ]


__all__ = [
    "ComputeRequirements",
    "CopyScaling",
    "HOSTING_MODES",
    "Hosting",
    "INFERENCE_COMPONENTS",
    "InstanceScaling",
    "accelerators_per_copy",
    "component_name",
    "copy_range",
    "hosting_problems",
    "update_copy_range",
]
