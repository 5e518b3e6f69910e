"""What every serving system provides: its container image, its container environment and its defaults."""

from __future__ import annotations

import importlib
import math
import re
from dataclasses import dataclass
from types import ModuleType
from typing import Callable, Literal

from endpoint_config import EndpointSpec, InstanceType

from .images import ImagePin

# Sizing the default timeouts from the artifact: S3 -> instance at a conservative 100 MB/s, loading to GPU at
# 200 MB/s, plus a fixed allowance for the container's own start. Explicit config values always win.
_DOWNLOAD_BYTES_PER_S = 100e6
_LOAD_BYTES_PER_S = 200e6


# An image reference is [REGISTRY_HOST[:PORT]/]NAME[:TAG]; without a registry host it comes from the default registry,
# Docker Hub (the `docker pull` reference, docs.docker.com/reference/cli/docker/image/pull). A first path part with
# a "." or ":" (or "localhost") is a registry host.
def docker_hub_bases(own: OwnContainer) -> list[str]:
    """The base images of an own container's Dockerfile that come from Docker Hub."""
    from pathlib import Path

    dockerfile = Path(__file__).resolve().parent / own.context / own.dockerfile
    bases = re.findall(r"^FROM\s+(?:--platform=\S+\s+)?(\S+)", dockerfile.read_text(), re.MULTILINE)
    return [b for b in bases if not b.startswith("$") and b != "scratch" and not _has_registry(b)]


def _has_registry(image: str) -> bool:
    first, sep, _ = image.partition("/")
    return bool(sep) and ("." in first or ":" in first or first == "localhost")


@dataclass(frozen=True)
class OwnContainer:
    """A container we build from this repository (CDK DockerImageAsset).

    context: the Docker build context, relative to systems/ (so containers can share code in systems/);
    dockerfile: relative to the context.
    """

    dockerfile: str
    context: str = "."
    exclude: tuple[str, ...] = ("**/__pycache__", "**/tests", "*.md")


@dataclass(frozen=True)
class ServingSystem:
    """One `system:` value of the config file.

    name: the config value. recipe: the module that builds the system's artifact, `build(endpoint, out_dir,
    progress=True) -> manifest` (it imports torch and the converters, so only model_build loads it, through
    `load_recipe`); None: the system has no build step. image: the pinned AWS container image, or
    `own_container` for an image built from this repository. legacy: retired upstream; kept as a pinned recipe and announced at synth together with
    `replacement`. environment: the container's environment variables for one endpoint. architectures: the
    model kinds it serves. network_isolation: the container needs no network (its model data comes from S3
    through SageMaker). default download/startup timeouts: the floor when the config leaves them out; larger
    artifacts get more (see `download_timeout_s`).
    """

    name: str
    summary: str
    environment: Callable[[EndpointSpec], dict[str, str]]
    recipe: str | None = None
    image: ImagePin | None = None
    own_container: OwnContainer | None = None
    architectures: tuple[Literal["decoder", "encoder-decoder"], ...] = ("decoder",)
    gpu_only: bool = False
    default_download_timeout_s: int = 600
    default_startup_timeout_s: int = 600
    legacy: bool = False
    replacement: str | None = None
    network_isolation: bool = True
    # Systems whose engine downloads weights from S3 itself (the DJL `option.s3url`/`option.model_id=s3://`
    # recipes): the artifact's `code/` subfolder is the SageMaker model data, its `weights/` subfolder stays in
    # S3, and this function gives the container environment that points the engine at it. Such a container
    # needs network access (to S3), so network isolation is off for it.
    staged_weights_environment: Callable[[str], dict[str, str]] | None = None
    engine_notes: str = ""
    # The engine starts one model copy per `tensor_parallel_degree` GPUs (DJL/LMI): 4 GPUs at degree 2 = 2 copies.
    copies_fill_gpus: bool = False
    # ProductionVariant.InferenceAmiVersion for images whose CUDA needs a newer host driver than SageMaker's
    # default AMI (driver 470 / CUDA 11.4 on ml.g5 and ml.p4d, per docs.aws.amazon.com/sagemaker/latest/dg/
    # inference-gpu-drivers.html); values: botocore's ProductionVariantInferenceAmiVersion enum. None: default AMI.
    inference_ami_version: str | None = None

    def __post_init__(self) -> None:
        if (self.image is None) == (self.own_container is None):
            raise ValueError(f"system {self.name!r}: give exactly one of image= or own_container=")
        if self.staged_weights_environment is not None and self.network_isolation:
            raise ValueError(f"system {self.name!r}: an engine that reads its weights from S3 needs network access")

    def load_recipe(self) -> ModuleType:
        """Import the build recipe. LookupError when the system has none."""
        if self.recipe is None:
            raise LookupError(f"system {self.name!r} has no build recipe")
        return importlib.import_module(self.recipe)

    def model_copies(self, ep: EndpointSpec, instance: InstanceType) -> int:
        """How many copies of the model one instance serves."""
        if self.copies_fill_gpus and instance.is_gpu:
            return max(1, instance.gpu_count // ep.tensor_parallel_degree)
        return 1

    def image_uri(self, region: str, instance: InstanceType) -> str:
        if self.image is None:
            raise ValueError(f"system {self.name!r} builds its own image; the stack resolves it as an asset")
        return self.image.uri(region, gpu=instance.is_gpu)

    def download_timeout_s(self, ep: EndpointSpec, weight_bytes: float | None = None) -> int:
        if ep.model_data_download_timeout_s:
            return ep.model_data_download_timeout_s
        return _sized(self.default_download_timeout_s, weight_bytes, _DOWNLOAD_BYTES_PER_S)

    def startup_timeout_s(self, ep: EndpointSpec, weight_bytes: float | None = None) -> int:
        if ep.container_startup_health_check_timeout_s:
            return ep.container_startup_health_check_timeout_s
        return _sized(self.default_startup_timeout_s, weight_bytes, _LOAD_BYTES_PER_S)


def _sized(floor: int, weight_bytes: float | None, bytes_per_s: float) -> int:
    if not weight_bytes:
        return floor
    return int(min(3600, max(floor, 300 + math.ceil(weight_bytes / bytes_per_s))))
