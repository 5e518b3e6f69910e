"""What we know about SageMaker hosting instance types: the valid types from botocore's SageMaker service model, and
per instance family the accelerators, their count and memory, and local NVMe, each entry with its source.

The short source names next to each family ([EC2-API], [EC2-UG], [NEURON]) are defined, with their commits and
URLs, in docs/design/instances.md.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field


@functools.cache
def hosting_instance_types() -> frozenset[str]:
    """Every instance type SageMaker accepts for a production variant, from botocore's service model."""
    import botocore.session  # here: importing botocore costs half a second, and most imports of the config never ask

    model = botocore.session.get_session().get_service_model("sagemaker")
    return frozenset(model.shape_for("ProductionVariantInstanceType").enum)


# Accelerator kinds. Only "gpu" (NVIDIA, CUDA) runs the serving systems here; the others are accelerators that
# need their own SDKs (AWS Neuron for Inferentia/Trainium, Habana SynapseAI for Gaudi), never CUDA.
GPU, NEURON, GAUDI = "gpu", "neuron", "gaudi"
ACCELERATOR_KINDS = {GPU: "NVIDIA GPU", NEURON: "AWS Neuron accelerator", GAUDI: "Habana Gaudi accelerator"}


@dataclass(frozen=True)
class Accelerators:
    """Accelerator facts of one instance family: `count_by_size` maps every size SageMaker offers to its devices."""

    kind: str  # GPU, NEURON or GAUDI
    name: str
    memory_mib: int  # per device
    count_by_size: dict[str, int]

    @property
    def memory_gib(self) -> float:
        return self.memory_mib / 1024


@dataclass(frozen=True)
class Family:
    """One instance family: its accelerators (None: CPU only, no accelerator) and whether it has local NVMe."""

    accelerators: Accelerators | None
    local_nvme: bool
    source: str = field(default="", compare=False)


def _gpu(name: str, memory_mib: int, counts: dict[str, int], *, nvme: bool, source: str) -> Family:
    return Family(Accelerators(GPU, name, memory_mib, counts), nvme, source)


def _one_each(*sizes: str) -> dict[str, int]:
    return dict.fromkeys(sizes, 1)


# The G families' sizes: one GPU up to 8xlarge (and 16xlarge), then 4 at 12xlarge and 24xlarge, 8 at 48xlarge.
_G4TO8 = {
    **_one_each("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge"),
    "12xlarge": 4,
    "24xlarge": 4,
    "48xlarge": 8,
}
# G7 and G7e: 1 GPU at 2xlarge-8xlarge, 2 at 12xlarge, 4 at 24xlarge, 8 at 48xlarge.
_G7 = {**_one_each("2xlarge", "4xlarge", "8xlarge"), "12xlarge": 2, "24xlarge": 4, "48xlarge": 8}

_ACCELERATED: dict[str, Family] = {
    # NVIDIA GPUs. Memory per GPU in MiB as the EC2 API reports it (24 GB A10G/L4 = 22888 MiB).
    "g4dn": _gpu(
        "NVIDIA T4",
        16384,
        {**_one_each("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge"), "12xlarge": 4},
        nvme=True,
        source="[EC2-API] g4dn.*: nvidia t4, 16384 MiB, 1 GPU (12xlarge: 4), local NVMe 125-900 GB",
    ),
    "g5": _gpu(
        "NVIDIA A10G",
        22888,
        _G4TO8,
        nvme=True,
        source="[EC2-API] g5.*: nvidia a10g, 22888 MiB, 1/4/8 GPUs, local NVMe 250-7600 GB",
    ),
    "g6": _gpu(
        "NVIDIA L4",
        22888,
        _G4TO8,
        nvme=True,
        source="[EC2-API] g6.*: nvidia l4, 22888 MiB, 1/4/8 GPUs, local NVMe 250-7520 GB",
    ),
    "g6e": _gpu(
        "NVIDIA L40S",
        45776,
        _G4TO8,
        nvme=True,
        source="[EC2-API] g6e.*: nvidia l40s, 45776 MiB, 1/4/8 GPUs, local NVMe 250-7600 GB",
    ),
    "g7": _gpu(
        "NVIDIA RTX PRO 4500 Blackwell Server Edition",
        32768,
        _G7,
        nvme=True,
        source="[EC2-API] g7.*: nvidia rtx-pro-4500, 32768 MiB, 1/2/4/8 GPUs, local NVMe 440-7600 GB",
    ),
    "g7e": _gpu(
        "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        98304,
        _G7,
        nvme=True,
        source="[EC2-API] g7e.*: nvidia rtx-pro-server-6000, 98304 MiB, 1/2/4/8 GPUs, local NVMe 1900-15200 GB",
    ),
    "p2": _gpu(
        "NVIDIA K80",
        12288,
        {"xlarge": 1, "8xlarge": 8, "16xlarge": 16},
        nvme=False,
        source="[EC2-API] p2.*: nvidia k80, 12288 MiB, 1/8/16 GPUs, no local NVMe; [EC2-UG] P2: EBS only",
    ),
    "p3": _gpu(
        "NVIDIA V100",
        16384,
        {"2xlarge": 1, "8xlarge": 4, "16xlarge": 8},
        nvme=False,
        source="[EC2-API] p3.*: nvidia v100, 16384 MiB, 1/4/8 GPUs, no local NVMe; [EC2-UG] P3: EBS only",
    ),
    "p4d": _gpu(
        "NVIDIA A100",
        40960,
        {"24xlarge": 8},
        nvme=True,
        source="[EC2-API] p4d.24xlarge: nvidia a100, 40960 MiB, 8 GPUs, local NVMe 8000 GB",
    ),
    "p4de": _gpu(
        "NVIDIA A100 80GB",
        81920,
        {"24xlarge": 8},
        nvme=True,
        source="[EC2-API] p4de.24xlarge: nvidia a100, 81920 MiB, 8 GPUs, local NVMe 8000 GB",
    ),
    "p5": _gpu(
        "NVIDIA H100",
        81920,
        {"4xlarge": 1, "48xlarge": 8},
        nvme=True,
        source="[EC2-API] p5.4xlarge: 1 x nvidia h100 81920 MiB, NVMe 3800 GB; p5.48xlarge: 8 x, NVMe 30400 GB",
    ),
    "p5e": _gpu(
        "NVIDIA H200",
        144384,
        {"48xlarge": 8},
        nvme=True,
        source="[EC2-API] p5e.48xlarge: nvidia h200, 144384 MiB, 8 GPUs, local NVMe 30400 GB",
    ),
    "p5en": _gpu(
        "NVIDIA H200",
        144384,
        {"48xlarge": 8},
        nvme=True,
        source="[EC2-API] p5en.48xlarge: nvidia h200, 144384 MiB, 8 GPUs, local NVMe 30400 GB",
    ),
    "p6-b200": _gpu(
        "NVIDIA B200",
        183359,
        {"48xlarge": 8},
        nvme=True,
        source="[EC2-API] p6-b200.48xlarge: nvidia b200, 183359 MiB, 8 GPUs, local NVMe 30400 GB",
    ),
    "p6-b300": _gpu(
        "NVIDIA B300",
        275040,
        {"48xlarge": 8},
        nvme=True,
        source="[EC2-API] p6-b300.48xlarge: nvidia b300, 275040 MiB, 8 GPUs, local NVMe 30400 GB",
    ),
    # AWS Neuron (Inferentia, Trainium): accelerators, not GPUs.
    "inf1": Family(
        Accelerators(NEURON, "AWS Inferentia", 8192, {"xlarge": 1, "2xlarge": 1, "6xlarge": 4, "24xlarge": 16}),
        False,
        "[EC2-API] inf1.*: 1/1/4/16 inferentia, no local NVMe; [NEURON] 8 GiB per chip",
    ),
    "inf2": Family(
        Accelerators(NEURON, "AWS Inferentia2", 32768, {"xlarge": 1, "8xlarge": 1, "24xlarge": 6, "48xlarge": 12}),
        False,
        "[EC2-API] inf2.*: 1/1/6/12 inferentia2, no local NVMe; [NEURON] 32 GiB per chip",
    ),
    "trn1": Family(
        Accelerators(NEURON, "AWS Trainium", 32768, {"2xlarge": 1, "32xlarge": 16}),
        True,
        "[EC2-API] trn1.*: 1/16 trainium, local NVMe 474/7600 GB; [NEURON] 32 GiB per chip",
    ),
    "trn1n": Family(
        Accelerators(NEURON, "AWS Trainium", 32768, {"32xlarge": 16}),
        True,
        "[EC2-API] trn1n.32xlarge: 16 trainium, local NVMe 7600 GB; [NEURON] 32 GiB per chip",
    ),
    "trn2": Family(
        Accelerators(NEURON, "AWS Trainium2", 98304, {"48xlarge": 16}),
        True,
        "[EC2-API] trn2.48xlarge: 16 trainium2, local NVMe 7600 GB; [NEURON] 96 GiB per chip",
    ),
    # Habana Gaudi: an accelerator, not an NVIDIA GPU.
    "dl1": Family(
        Accelerators(GAUDI, "Habana Gaudi HL-205", 32768, {"24xlarge": 8}),
        True,
        "[EC2-API] dl1.24xlarge: 8 habana gaudi-hl-205, 32768 MiB each, local NVMe 4000 GB",
    ),
}

# Families without any accelerator. [EC2-API] lists no GPU, Neuron or Gaudi devices for any size of these, and
# local NVMe instance storage exactly for the ones whose name carries the `d` capability letter ([EC2-UG]
# naming convention: "d - instance store volumes"): c5d, c6gd, m5d, m6gd, r5d, r6gd, r7gd.
_CPU_ONLY_NVME = ("c5d", "c6gd", "m5d", "m6gd", "r5d", "r6gd", "r7gd")
_CPU_ONLY_EBS = (
    "c4",
    "c5",
    "c6g",
    "c6gn",
    "c6i",
    "c6in",
    "c7g",
    "c7i",
    "c8g",
    "m4",
    "m5",
    "m6g",
    "m6i",
    "m7i",
    "m8g",
    "r5",
    "r6g",
    "r6i",
    "r7i",
    "r8g",
    "t2",
)
_CPU_ONLY: dict[str, Family] = {
    **{f: Family(None, True, "[EC2-API] no accelerator; local NVMe instance store") for f in _CPU_ONLY_NVME},
    **{f: Family(None, False, "[EC2-API] no accelerator; EBS only") for f in _CPU_ONLY_EBS},
}

FAMILIES: dict[str, Family] = {**_ACCELERATED, **_CPU_ONLY}

# Hosting families whose facts no primary source consulted here states: refused by the config, with the reason.
REFUSED_FAMILIES: dict[str, str] = {
    "p6e-gb200": (
        "its accelerator facts (GPUs per instance, memory per GPU, local NVMe) are not stated by the AWS sources "
        "consulted here (the EC2 DescribeInstanceTypes data does not list it), so a model cannot be sized "
        "or placed on it; use ml.p6-b200.48xlarge or ml.p5en.48xlarge"
    ),
}


@dataclass(frozen=True)
class InstanceType:
    name: str  # e.g. "ml.g5.12xlarge"
    family: str  # "g5"
    size: str  # "12xlarge"
    facts: Family | None  # None: the family is unknown or refused (see `unknown_reason`)

    @property
    def accelerators(self) -> Accelerators | None:
        return self.facts.accelerators if self.facts is not None else None

    @property
    def unknown_reason(self) -> str | None:
        """Why this type cannot be used (its facts are not known), or None when they are complete."""
        if self.family in REFUSED_FAMILIES:
            return REFUSED_FAMILIES[self.family]
        if self.facts is None:
            return (
                f"instance family {self.family!r} has no recorded facts (accelerators, their memory, local NVMe), so "
                "a model cannot be sized or placed on it; families with facts: " + ", ".join(sorted(FAMILIES))
            )
        acc = self.facts.accelerators
        if acc is not None and self.size not in acc.count_by_size:
            return (
                f"the number of {acc.name} devices of size {self.size!r} is not recorded; sizes with facts: "
                + ", ".join(acc.count_by_size)
            )
        return None

    @property
    def accelerator_count(self) -> int:
        acc = self.accelerators
        return acc.count_by_size.get(self.size, 0) if acc is not None else 0

    @property
    def gpu_count(self) -> int:
        """NVIDIA GPUs only: Neuron and Gaudi devices do not count (no CUDA system runs on them)."""
        acc = self.accelerators
        return self.accelerator_count if acc is not None and acc.kind == GPU else 0

    @property
    def gpu_memory_gib(self) -> float:
        acc = self.accelerators
        return acc.memory_gib if acc is not None and self.gpu_count else 0.0

    @property
    def has_local_nvme(self) -> bool:
        return self.facts is not None and self.facts.local_nvme

    @property
    def is_gpu(self) -> bool:
        return self.gpu_count > 0

    @property
    def non_gpu_accelerator(self) -> str | None:
        """'AWS Inferentia2 (AWS Neuron accelerator)' on instances whose accelerators are not NVIDIA GPUs, else None."""
        acc = self.accelerators
        if acc is None or acc.kind == GPU:
            return None
        return f"{acc.name} ({ACCELERATOR_KINDS[acc.kind]})"


@functools.cache
def parse_instance_type(name: str) -> InstanceType:
    """Split "ml.g5.12xlarge" into its family facts; the caller checks it is a hosting type first."""
    parts = name.split(".")
    if len(parts) != 3 or parts[0] != "ml":
        raise ValueError(f"instance type {name!r} is not of the form ml.<family>.<size>")
    family, size = parts[1], parts[2]
    facts = None if family in REFUSED_FAMILIES else FAMILIES.get(family)
    return InstanceType(name=name, family=family, size=size, facts=facts)
