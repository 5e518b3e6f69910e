"""Container images, pinned. Synth resolves them offline from this table; a test cross-checks every entry
against the image tables bundled in the `sagemaker` package (sagemaker.core.image_uris.retrieve)."""

from __future__ import annotations

from dataclasses import dataclass

# AWS Deep Learning Containers live in 763104351884 in most regions; these regions have their own account.
_DLC_ACCOUNT = "763104351884"
_DLC_ACCOUNT_BY_REGION = {
    "af-south-1": "626614931356", "ap-east-1": "871362719292", "ap-northeast-3": "364406365360",
    "ap-south-2": "772153158452", "ap-southeast-3": "907027046896", "ap-southeast-4": "457447274322",
    "ca-west-1": "204538143572", "cn-north-1": "727897471807", "cn-northwest-1": "727897471807",
    "eu-central-2": "380420809688", "eu-south-1": "692866216735", "eu-south-2": "503227376785",
    "il-central-1": "780543022126", "me-central-1": "914824155844", "me-south-1": "217643126080",
    "us-gov-east-1": "446045086412", "us-gov-west-1": "442386744353",
}  # fmt: skip


# Regions where the pinned DLCs are published (from the sagemaker package's tables).
DLC_REGIONS = (
    "af-south-1", "ap-east-1", "ap-northeast-1", "ap-northeast-2", "ap-northeast-3", "ap-south-1", "ap-south-2",
    "ap-southeast-1", "ap-southeast-2", "ap-southeast-3", "ap-southeast-4", "ca-central-1", "ca-west-1",
    "cn-north-1", "cn-northwest-1", "eu-central-1", "eu-central-2", "eu-north-1", "eu-south-1", "eu-south-2",
    "eu-west-1", "eu-west-2", "eu-west-3", "il-central-1", "me-central-1", "me-south-1", "sa-east-1",
    "us-east-1", "us-east-2", "us-gov-east-1", "us-gov-west-1", "us-west-1", "us-west-2",
)  # fmt: skip


@dataclass(frozen=True)
class ImagePin:
    """An AWS DLC image: repository plus the exact tag for GPU and (where offered) CPU instances."""

    repository: str
    gpu_tag: str
    cpu_tag: str | None = None
    # For the cross-check test: how sagemaker.core.image_uris.retrieve names this image.
    sdk_framework: str = ""
    sdk_version: str = ""
    sdk_base_framework_version: str | None = None
    # Regions the image is published in, when narrower than DLC_REGIONS (old images were not copied to newer regions).
    regions: tuple[str, ...] | None = None

    @property
    def available_regions(self) -> tuple[str, ...]:
        return self.regions or DLC_REGIONS

    def registry_account(self, region: str) -> str:
        return _DLC_ACCOUNT_BY_REGION.get(region, _DLC_ACCOUNT)

    def uri(self, region: str, *, gpu: bool) -> str:
        tag = self.gpu_tag if gpu else self.cpu_tag
        if tag is None:
            raise ValueError(f"image {self.repository} is offered for GPU instances only")
        if region not in self.available_regions:
            raise ValueError(
                f"image {self.repository}:{tag} is not published in region {region}; "
                f"it is in: {', '.join(self.available_regions)}"
            )
        domain = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
        return f"{self.registry_account(region)}.dkr.ecr.{region}.{domain}/{self.repository}:{tag}"

    def repository_arn(self, region: str) -> str:
        partition = "aws-cn" if region.startswith("cn-") else "aws-us-gov" if region.startswith("us-gov") else "aws"
        return f"arn:{partition}:ecr:{region}:{self.registry_account(region)}:repository/{self.repository}"


# Hugging Face PyTorch inference DLC: inference toolkit 2.6 with transformers 4.49 and torch 2.6.
HF_PYTORCH_INFERENCE = ImagePin(
    repository="huggingface-pytorch-inference",
    gpu_tag="2.6.0-transformers4.49.0-gpu-py312-cu124-ubuntu22.04",
    cpu_tag="2.6.0-transformers4.49.0-cpu-py312-ubuntu22.04",
    sdk_framework="huggingface",
    sdk_version="4.49.0",
    sdk_base_framework_version="pytorch2.6.0",
)
# The library versions inside that image: model_build writes only what they read.
HF_CONTAINER_TRANSFORMERS = "4.49.0"


# DJL Serving large-model-inference (LMI) images, repository djl-inference. Tags from the sagemaker package's
# djl-*.json tables. The DeepSpeed and FasterTransformer engines were dropped upstream (DeepSpeed after
# 0.27.0, FasterTransformer after 0.24.0): these are the last images that have them.
DJL_DEEPSPEED_LEGACY = ImagePin(
    repository="djl-inference", gpu_tag="0.27.0-deepspeed0.12.6-cu121", sdk_framework="djl-deepspeed", sdk_version="0.27.0"
)
DJL_FASTERTRANSFORMER_LEGACY = ImagePin(
    repository="djl-inference",
    gpu_tag="0.24.0-fastertransformer5.3.0-cu118",
    sdk_framework="djl-fastertransformer",
    sdk_version="0.24.0",
    regions=tuple(r for r in DLC_REGIONS if not r.startswith("us-gov-")),
)
# Today's LMI: vLLM (and LMI-Dist) behind rolling/continuous batching, and the TensorRT-LLM image.
DJL_LMI = ImagePin(repository="djl-inference", gpu_tag="0.38.0-lmi29.0.0-cu130", sdk_framework="djl-lmi", sdk_version="0.38.0")
DJL_TENSORRTLLM = ImagePin(
    repository="djl-inference", gpu_tag="0.33.0-tensorrtllm0.21.0-cu128", sdk_framework="djl-tensorrtllm", sdk_version="0.33.0"
)
