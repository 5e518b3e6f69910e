"""Container images, pinned. Synth resolves them offline from this table; a test cross-checks every entry
against the image tables bundled in the `sagemaker` package (sagemaker.core.image_uris.retrieve)."""

from __future__ import annotations

import re
from dataclasses import dataclass

# AWS Deep Learning Containers live in 763104351884 in most regions; these regions have their own account.
_DLC_ACCOUNT = "763104351884"
_DLC_ACCOUNT_BY_REGION = {
    "af-south-1": "626614931356",
    "ap-east-1": "871362719292",
    "ap-northeast-3": "364406365360",
    "ap-south-2": "772153158452",
    "ap-southeast-3": "907027046896",
    "ap-southeast-4": "457447274322",
    "ca-west-1": "204538143572",
    "cn-north-1": "727897471807",
    "cn-northwest-1": "727897471807",
    "eu-central-2": "380420809688",
    "eu-south-1": "692866216735",
    "eu-south-2": "503227376785",
    "il-central-1": "780543022126",
    "me-central-1": "914824155844",
    "me-south-1": "217643126080",
    "us-gov-east-1": "446045086412",
    "us-gov-west-1": "442386744353",
}


# Regions where the pinned DLCs are published (from the sagemaker package's tables).
DLC_REGIONS = (
    "af-south-1",
    "ap-east-1",
    "ap-northeast-1",
    "ap-northeast-2",
    "ap-northeast-3",
    "ap-south-1",
    "ap-south-2",
    "ap-southeast-1",
    "ap-southeast-2",
    "ap-southeast-3",
    "ap-southeast-4",
    "ca-central-1",
    "ca-west-1",
    "cn-north-1",
    "cn-northwest-1",
    "eu-central-1",
    "eu-central-2",
    "eu-north-1",
    "eu-south-1",
    "eu-south-2",
    "eu-west-1",
    "eu-west-2",
    "eu-west-3",
    "il-central-1",
    "me-central-1",
    "me-south-1",
    "sa-east-1",
    "us-east-1",
    "us-east-2",
    "us-gov-east-1",
    "us-gov-west-1",
    "us-west-1",
    "us-west-2",
)


@dataclass(frozen=True)
class PythonStack:
    """The tokenizer-relevant Python libraries inside an image: what a model directory built here must be
    readable by. Requirements are written as the image's own build files (or the pinned transformers release's
    requirements) state them; `verified` is False where that could not be checked (the pin's comment says why).
    `transformers` None: the image has none, its handler reads tokenizer.json with `tokenizers` alone.
    tests/systems/test_container_tokenizers.py loads every system's built tokenizer under each stack's oldest and
    (where bounded) newest versions.
    """

    transformers: str | None
    tokenizers: str
    verified: bool = True

    @property
    def transformers_floor(self) -> tuple[int, ...] | None:
        """The oldest transformers the image may hold (what model_build must write for); None without one."""
        return None if self.transformers is None else _floor(self.transformers)

    @property
    def tokenizers_floor(self) -> tuple[int, ...]:
        return _floor(self.tokenizers)


def _floor(requirement: str) -> tuple[int, ...]:
    """The lowest version a requirement allows: "==4.49.0" -> (4, 49, 0), ">=0.14,<0.19" -> (0, 14)."""
    match = re.search(r"(?:==|>=|~=)\s*(\d+(?:\.\d+)*)", requirement)
    if match is None:
        raise ValueError(f"requirement {requirement!r} names no lower bound (==X or >=X)")
    return tuple(int(part) for part in match.group(1).split("."))


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
    # The transformers/tokenizers the image ships: model_build writes tokenizer files these can read.
    python_stack: PythonStack | None = None
    # Set when the pinned release is newer than the sagemaker table: the table's newest version, whose registries
    # (the account of each region) the pin takes for its own. The DLC release records name a tag, not its regions.
    sdk_table_version: str | None = None

    @property
    def table_version(self) -> str:
        """The version to ask the sagemaker table (sagemaker.core.image_uris.retrieve) for."""
        return self.sdk_table_version or self.sdk_version

    def from_table(self, table_uri: str) -> str:
        """The URI the table gives for table_version, with the pinned release in its tag ("0.30.0-gpu-..." ->
        "0.31.0-gpu-..."): what this pin's uri() must equal."""
        return table_uri.replace(f":{self.table_version}-", f":{self.sdk_version}-")

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


# Hugging Face PyTorch inference DLC with transformers 4.51.3 and torch 2.6 (huggingface.json 4.51.3 / pytorch2.6.0):
# the newest line whose inference toolkit is a release. aws/deep-learning-containers
# huggingface/pytorch/inference/docker/2.6/py3/cu124/Dockerfile.gpu at 6dbb542b45 (2026-02-24; the parent of
# a5db58a294, which moved the file to transformers 5.1.0): ARG TRANSFORMERS_VERSION=4.51.3,
# HUGGINGFACE_HUB_VERSION=0.30.0, ACCELERATE_VERSION=1.6.0, SAGEMAKER_HF_INFERENCE_VERSION=2.6.0, torch 2.6.0+cu124,
# Python 3.12.8, FROM nvidia/cuda:12.4.1-base-ubuntu22.04; tokenizers: transformers 4.51.3's METADATA requires
# tokenizers<0.22,>=0.21. Not the 5.5.3 image: its toolkit is an unreleased git commit (f0c3eb2, not readable here),
# because toolkit 2.6.0 -- the newest on PyPI -- imports `is_tf_available` from transformers.file_utils, which
# transformers 5 removed (systems/images_current.py says more). 4.51 adds Qwen3, Qwen3-MoE, Llama 4 and Gemma 3 to
# 4.49's architectures (systems/engine_tables TRANSFORMERS_FIRST_RELEASE), not gpt-oss (4.55).
HF_PYTORCH_INFERENCE = ImagePin(
    repository="huggingface-pytorch-inference",
    gpu_tag="2.6.0-transformers4.51.3-gpu-py312-cu124-ubuntu22.04",
    cpu_tag="2.6.0-transformers4.51.3-cpu-py312-ubuntu22.04",
    sdk_framework="huggingface",
    sdk_version="4.51.3",
    sdk_base_framework_version="pytorch2.6.0",
    python_stack=PythonStack(transformers="==4.51.3", tokenizers=">=0.21,<0.22"),
)
# The library versions inside that image: model_build writes only what they read.
HF_CONTAINER_TRANSFORMERS = "4.51.3"


# DJL Serving large-model-inference (LMI) images, repository djl-inference. Tags from the sagemaker package's
# djl-*.json tables. The DeepSpeed and FasterTransformer engines were dropped upstream (DeepSpeed after
# 0.27.0, FasterTransformer after 0.24.0): these are the last images that have them.
# python_stack: deepjavalibrary/djl-serving branch 0.27.0-dlc, serving/docker/deepspeed.Dockerfile
# (ARG transformers_version=4.39.0; the vLLM 0.3.3 wheel installed after it requires transformers>=4.38.0 (its
# METADATA), so pip keeps 4.39.0; the lmi-dist 9.0.0 wheel's requirements could not be read (publish.djl.ai is not
# reachable here)); transformers 4.39.0's METADATA requires tokenizers<0.19,>=0.14 and huggingface-hub>=0.19.3, and
# the Dockerfile pins huggingface_hub==0.25.1, which tokenizers 0.14.x refuse (their METADATA: huggingface_hub<0.17 in
# 0.14.0, <0.18 in 0.14.1; pip: "ResolutionImpossible"), so the image holds a 0.15 release (0.15.2, the newest below
# 0.19: no release lies between them on PyPI).
DJL_DEEPSPEED_LEGACY = ImagePin(
    repository="djl-inference",
    gpu_tag="0.27.0-deepspeed0.12.6-cu121",
    sdk_framework="djl-deepspeed",
    sdk_version="0.27.0",
    python_stack=PythonStack(transformers="==4.39.0", tokenizers=">=0.15,<0.19"),
)
# python_stack: djl-serving branch 0.24.0-dlc, serving/docker/fastertransformer.Dockerfile
# (ARG transformers_version=4.34.0); transformers 4.34.0's METADATA requires tokenizers<0.15,>=0.14.
DJL_FASTERTRANSFORMER_LEGACY = ImagePin(
    repository="djl-inference",
    gpu_tag="0.24.0-fastertransformer5.3.0-cu118",
    sdk_framework="djl-fastertransformer",
    sdk_version="0.24.0",
    regions=tuple(r for r in DLC_REGIONS if not r.startswith("us-gov-")),
    python_stack=PythonStack(transformers="==4.34.0", tokenizers=">=0.14,<0.15"),
)
# Today's LMI with vLLM. Pinned to 0.36.0-lmi27.0.0-cu130, not the newer 0.38.0-lmi29.0.0-cu130 that the
# sagemaker package's djl-lmi.json also lists: that tag has no release note, no entry in
# aws/deep-learning-containers (docs/src/data/djl-inference/ stops at 0.36-lmi28.0.0-gpu.yml) and no source
# branch in deepjavalibrary/djl-serving (newest: 0.36.0-lmi27-dlc). lmi27 is documented in all three places
# (aws/deep-learning-containers docs/src/data/djl-inference/0.36-lmi27.0.0-gpu.yml: "LMI 27.0.0, vLLM 0.23.1",
# cu130; release commit f299bd471e), so every option written for it can be checked in its source.
# (0.36.0-lmi28.0.0-cu130 is documented too but is not in the sagemaker package's table.)
# python_stack: djl-serving 0.36.0-lmi27-dlc serving/docker/lmi-container-requirements.txt:
# "transformers >= 4.56.0, <= 5.9.0, != 5.0.*, ..., != 5.5.0"; the version pip picked is unverified, so the
# floor (4.56.0, whose METADATA requires tokenizers<=0.23.0,>=0.22.0) is what model_build writes for.
DJL_LMI = ImagePin(
    repository="djl-inference",
    gpu_tag="0.36.0-lmi27.0.0-cu130",
    sdk_framework="djl-lmi",
    sdk_version="0.36.0",
    python_stack=PythonStack(transformers=">=4.56.0,<=5.9.0", tokenizers=">=0.22.0,<=0.23.0"),
)
# python_stack: djl-serving 0.33.0-dlc serving/docker/tensorrt-llm.Dockerfile installs
# tensorrt_llm==0.21.0rc1 and takes transformers from its requirements; that pin could not be read here
# (the wheel lives on pypi.nvidia.com). Unverified: a 4.x release; the floor written for is tokenizers 0.20,
# the first release that reads the pair-style BPE merges tokenizers >= 0.20 writes (measured: 0.19.1 fails,
# 0.20.0 reads them), on the assumption that a 2025 TensorRT-LLM pins a transformers >= 4.45 (which requires
# tokenizers >= 0.20).
DJL_TENSORRTLLM = ImagePin(
    repository="djl-inference",
    gpu_tag="0.33.0-tensorrtllm0.21.0-cu128",
    sdk_framework="djl-tensorrtllm",
    sdk_version="0.33.0",
    python_stack=PythonStack(transformers=">=4.45", tokenizers=">=0.20", verified=False),
)


# Our own images: the versions their Dockerfiles pin (systems/*/container/Dockerfile; a test reads the Dockerfiles
# and compares). deepspeed-byoc: transformers==4.36.2 tokenizers==0.15.0. tensorrt-byoc: tokenizers==0.23.3 and no
# transformers (its handler loads tokenizer.json with tokenizers.Tokenizer).
DEEPSPEED_BYOC_STACK = PythonStack(transformers="==4.36.2", tokenizers="==0.15.0")
TENSORRT_BYOC_STACK = PythonStack(transformers=None, tokenizers="==0.23.3")
OWN_CONTAINER_STACKS = {
    "systems/deepspeed_byoc/container/Dockerfile": DEEPSPEED_BYOC_STACK,
    "systems/tensorrt_byoc/container/Dockerfile": TENSORRT_BYOC_STACK,
}
