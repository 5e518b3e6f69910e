"""GPU generations: compute capability and native precisions of every GPU the instance table names, and the host
driver each CUDA toolkit needs (which precisions each pinned engine runs where: systems/precision.py).

Sources, by the short names used below:
  [CC]       NVIDIA, "CUDA GPU Compute Capability" (developer.nvidia.com/cuda-gpus; 12.0: RTX PRO 6000 and RTX PRO
             4500 Blackwell Server Edition; 10.3: B300; 10.0: B200; 9.0: H200, H100; 8.9: L4, L40S; 8.6: A10) and
             "Legacy CUDA GPU Compute Capability" (developer.nvidia.com/cuda-legacy-gpus; 7.0: V100).
  [TRT]      NVIDIA TensorRT 8.x Support Matrix, "Hardware and Precision" (8.6 A10, 8.0 A100, 7.5 T4, 7.0 V100;
             FP16/INT8 tensor cores per capability).
  [TE]       NVIDIA Transformer Engine "Datatype and hardware support matrix" (nvidia.github.io/TransformerEngine):
             "BF16 requires compute capability 8.0 or higher"; FP8 "requires compute capability 8.9 or higher";
             MXFP8 and NVFP4 on 10.0/10.3 (Blackwell data center); NVFP4 partial, MXFP8 no, on 12.0.
  [TRT-RTX]  NVIDIA TensorRT-RTX support matrix: 12.0 FP8 and FP4 GEMM yes; 8.9 FP8 yes, FP4 no; 8.6 BF16 yes, FP8
             no; 7.5 BF16 no.
  [CUDA-MV]  NVIDIA "CUDA Minor Version Compatibility": CUDA 13.x needs driver >= 580, CUDA 12.x >= 525.
  [AMI]      botocore 1.44.8 sagemaker model, ProductionVariant.InferenceAmiVersion documentation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

# Compute capability as major*10 + minor (vLLM's and SGLang's own spelling: 89 = 8.9).
Capability = int


@dataclass(frozen=True)
class GpuFacts:
    """One GPU model: its compute capability and the precisions its tensor cores run natively."""

    name: str  # as facts/instances.py names it
    capability: Capability
    architecture: str
    bf16: bool
    fp8: bool  # FP8 (E4M3/E5M2) tensor-core matmul
    fp4: bool  # FP4 (E2M1, the MXFP4 / NVFP4 block formats) tensor-core matmul
    source: str = field(compare=False)
    verified: bool = True  # False: the capability is inferred, not stated for this exact GPU by the source

    @property
    def capability_text(self) -> str:
        return f"{self.capability // 10}.{self.capability % 10}"


def _gpu(name: str, capability: Capability, architecture: str, source: str, *, verified: bool = True) -> GpuFacts:
    # BF16 from 8.0, FP8 from 8.9, FP4 on Blackwell (10.x, 12.x) [TE] [TRT-RTX] [VLLM].
    return GpuFacts(
        name,
        capability,
        architecture,
        bf16=capability >= 80,
        fp8=capability >= 89,
        fp4=capability >= 100,
        source=source,
        verified=verified,
    )


GPUS: dict[str, GpuFacts] = {
    f.name: f
    for f in (
        _gpu(
            "NVIDIA K80",
            37,
            "Kepler",
            "[CC] legacy table (Tesla K80 3.7); the row was not in the excerpt read",
            verified=False,
        ),
        _gpu("NVIDIA V100", 70, "Volta", "[CC] legacy table: 7.0 NVIDIA V100; [TRT] 7.0 V100"),
        _gpu("NVIDIA T4", 75, "Turing", "[TRT] 7.5 NVIDIA T4; [TRT-RTX] 7.5: BF16 no"),
        _gpu(
            "NVIDIA A10G",
            86,
            "Ampere",
            "NVIDIA does not list the A10G (AWS's A10 variant); [CC] 8.6 is the A10's: assumed",
            verified=False,
        ),
        _gpu("NVIDIA A100", 80, "Ampere", "[TRT] 8.0 NVIDIA A100/GA100"),
        _gpu("NVIDIA A100 80GB", 80, "Ampere", "[TRT] 8.0 NVIDIA A100/GA100 (same GA100 chip as the 40 GB part)"),
        _gpu("NVIDIA L4", 89, "Ada Lovelace", "[CC] 8.9 NVIDIA L4; [TE] FP8 from 8.9"),
        _gpu("NVIDIA L40S", 89, "Ada Lovelace", "[CC] 8.9 NVIDIA L40S; [TE] FP8 from 8.9"),
        _gpu("NVIDIA H100", 90, "Hopper", "[CC] 9.0 NVIDIA H100"),
        _gpu("NVIDIA H200", 90, "Hopper", "[CC] 9.0 NVIDIA H200"),
        _gpu("NVIDIA B200", 100, "Blackwell", "[CC] 10.0 NVIDIA B200; [TE] NVFP4/MXFP8 on 10.0"),
        _gpu("NVIDIA B300", 103, "Blackwell Ultra", "[CC] 10.3 NVIDIA B300; [TE] NVFP4/MXFP8 on 10.3"),
        _gpu(
            "NVIDIA RTX PRO 4500 Blackwell Server Edition",
            120,
            "Blackwell",
            "[CC] 12.0 NVIDIA RTX PRO 4500 Blackwell Server Edition; [TRT-RTX] 12.0 FP8 and FP4 GEMM",
        ),
        _gpu(
            "NVIDIA RTX PRO 6000 Blackwell Server Edition",
            120,
            "Blackwell",
            "[CC] 12.0 NVIDIA RTX PRO 6000 Blackwell Server Edition; [TRT-RTX] 12.0 FP8 and FP4 GEMM",
        ),
    )
}


# The CUDA toolkit of each pinned image: the oldest compute capability its binaries can target, and the minimum
# host driver. CUDA 13.0 dropped Volta (NVIDIA/cuDecomp#97: "CUDA 13.0 dropped support for Volta (SM70), but not
# Turing (SM75)"; unverified against the 13.0 release notes' "Deprecated Architectures", not read in full) and
# CUDA 12 builds start at Maxwell (the HF image's TORCH_CUDA_ARCH_LIST "5.0 7.0+PTX 7.5+PTX 8.0 8.6 9.0"). Blackwell
# needs a toolkit that knows it: CUDA >= 12.8 (vLLM csrc: "Recompile with CUDA >= 12.8 and CC >= 100"); a CUDA
# 12.4 image has no sm_100/sm_120 code (its arch list ends at 9.0; whether PTX JIT from compute_90 would run there
# is unverified, so the safe answer is no).
@dataclass(frozen=True)
class CudaFacts:
    min_driver: int  # NVIDIA driver major version [CUDA-MV]
    min_capability: Capability
    max_capability: Capability | None  # None: every current GPU


CUDA: dict[str, CudaFacts] = {
    "12.4": CudaFacts(min_driver=525, min_capability=50, max_capability=90),
    "13.0": CudaFacts(min_driver=580, min_capability=75, max_capability=None),
}

# ProductionVariant.InferenceAmiVersion -> NVIDIA driver major [AMI]. Without one, SageMaker's default GPU AMI
# has driver 470 on ml.g4dn/g5/p4d (SageMaker DG inference-gpu-drivers, as docs/engine-reference.md cites); the
# CUDA 12 images run there through the CUDA forward-compat libraries they ship, the CUDA 13 DLCs do not (the vLLM
# DLC docs: "the default SageMaker host AMI has incompatible NVIDIA drivers for CUDA 13.0 images").
AMI_DRIVERS: dict[str, int] = {
    "al2-ami-sagemaker-inference-gpu-2": 535,
    "al2-ami-sagemaker-inference-gpu-2-1": 535,
    "al2-ami-sagemaker-inference-gpu-3-1": 550,
    "al2023-ami-sagemaker-inference-gpu-4-1": 580,
}


def gpu_facts(name: str) -> GpuFacts:
    try:
        return GPUS[name]
    except KeyError:
        raise ValueError(f"GPU {name!r} has no recorded compute capability; known: {', '.join(sorted(GPUS))}") from None


def image_problems(gpu: str, cuda: str, ami: str | None) -> list[str]:
    """Why an image built on CUDA `cuda` cannot run on `gpu` with InferenceAmiVersion `ami` (None: the default AMI)."""
    facts, toolkit = gpu_facts(gpu), CUDA.get(cuda)
    if toolkit is None:
        return [f"CUDA {cuda} has no recorded driver and architecture range; known: {', '.join(sorted(CUDA))}"]
    found = []
    if facts.capability < toolkit.min_capability:
        found.append(
            f"{gpu} (compute capability {facts.capability_text}) is older than CUDA {cuda} supports "
            f"(from {toolkit.min_capability / 10:.1f})"
        )
    if toolkit.max_capability is not None and facts.capability > toolkit.max_capability:
        found.append(
            f"{gpu} ({facts.architecture}, {facts.capability_text}) needs an image built with CUDA >= 12.8; "
            f"this one has CUDA {cuda}"
        )
    if toolkit.min_driver >= 580:
        driver = AMI_DRIVERS.get(ami) if ami else None
        if driver is None or driver < toolkit.min_driver:
            needed = [a for a, d in AMI_DRIVERS.items() if d >= toolkit.min_driver]
            found.append(
                f"CUDA {cuda} needs NVIDIA driver >= {toolkit.min_driver}; InferenceAmiVersion "
                f"{ami or '(default)'} does not give it; allowed: {', '.join(needed)}"
            )
    return found


def families_where(accepts: Callable[[GpuFacts], bool]) -> list[str]:
    """The hosting instance families (ml.<family>.*) whose GPU `accepts`, for "what would work" in a refusal."""
    from .instances import _ACCELERATED, GPU

    return [
        f"ml.{name}"
        for name, family in _ACCELERATED.items()
        if family.accelerators is not None
        and family.accelerators.kind == GPU
        and accepts(gpu_facts(family.accelerators.name))
    ]
