"""What we know about SageMaker hosting instance types.

The list of valid types comes from botocore's SageMaker service model (the same enum the API validates
against), so it tracks AWS without a hand-kept list. What the API model does not say -- how many GPUs an
instance has, how much memory each has, and whether it has local NVMe storage (which makes SageMaker refuse
VolumeSizeInGB) -- is kept here per instance family, from the EC2/SageMaker instance pages.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import botocore.session


@functools.cache
def hosting_instance_types() -> frozenset[str]:
    """Every instance type SageMaker accepts for a production variant, from botocore's service model."""
    model = botocore.session.get_session().get_service_model("sagemaker")
    return frozenset(model.shape_for("ProductionVariantInstanceType").enum)


@dataclass(frozen=True)
class Accelerators:
    """Accelerator facts of one instance family; `count_by_size` maps the size suffix to devices."""

    kind: str  # "gpu" or "neuron"
    name: str
    memory_gib: float  # per device
    count_by_size: dict[str, int]
    default_count: int = 1


# Families whose instances carry local NVMe instance storage. SageMaker refuses VolumeSizeInGB on them
# (the model and container live on the instance store instead).
_NVME_FAMILIES = frozenset(
    {
        "c5d", "c6id", "m5d", "m6id", "r5d", "r6id",
        "g4dn", "g5", "g6", "g6e", "g7e", "p3dn", "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200",
        "inf2", "trn1", "trn1n", "trn2",
    }
)  # fmt: skip

_EIGHT = {"48xlarge": 8}
_ACCELERATORS: dict[str, Accelerators] = {
    "g4dn": Accelerators("gpu", "NVIDIA T4", 16, {"12xlarge": 4, "metal": 8}),
    "g5": Accelerators("gpu", "NVIDIA A10G", 24, {"12xlarge": 4, "24xlarge": 4, **_EIGHT}),
    "g6": Accelerators("gpu", "NVIDIA L4", 24, {"12xlarge": 4, "24xlarge": 4, **_EIGHT}),
    "g6e": Accelerators("gpu", "NVIDIA L40S", 48, {"12xlarge": 4, "24xlarge": 4, **_EIGHT}),
    "p3": Accelerators("gpu", "NVIDIA V100", 16, {"8xlarge": 4, "16xlarge": 8}),
    "p3dn": Accelerators("gpu", "NVIDIA V100", 32, {}, default_count=8),
    "p4d": Accelerators("gpu", "NVIDIA A100", 40, {}, default_count=8),
    "p4de": Accelerators("gpu", "NVIDIA A100", 80, {}, default_count=8),
    "p5": Accelerators("gpu", "NVIDIA H100", 80, {}, default_count=8),
    "p5e": Accelerators("gpu", "NVIDIA H200", 141, {}, default_count=8),
    "p5en": Accelerators("gpu", "NVIDIA H200", 141, {}, default_count=8),
    "inf2": Accelerators("neuron", "AWS Inferentia2", 32, {"24xlarge": 6, "48xlarge": 12}),
    "trn1": Accelerators("neuron", "AWS Trainium", 32, {"32xlarge": 16}),
}


@dataclass(frozen=True)
class InstanceType:
    name: str  # e.g. "ml.g5.12xlarge"
    family: str  # "g5"
    size: str  # "12xlarge"
    accelerators: Accelerators | None

    @property
    def gpu_count(self) -> int:
        if self.accelerators is None or self.accelerators.kind != "gpu":
            return 0
        return self.accelerators.count_by_size.get(self.size, self.accelerators.default_count)

    @property
    def gpu_memory_gib(self) -> float:
        return self.accelerators.memory_gib if self.gpu_count else 0.0

    @property
    def has_local_nvme(self) -> bool:
        return self.family in _NVME_FAMILIES

    @property
    def is_gpu(self) -> bool:
        return self.gpu_count > 0


def parse_instance_type(name: str) -> InstanceType:
    """Split "ml.g5.12xlarge" into its family facts; the caller checks it is a hosting type first."""
    parts = name.split(".")
    if len(parts) != 3 or parts[0] != "ml":
        raise ValueError(f"instance type {name!r} is not of the form ml.<family>.<size>")
    family, size = parts[1], parts[2]
    return InstanceType(name=name, family=family, size=size, accelerators=_ACCELERATORS.get(family))
