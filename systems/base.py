"""What every serving system provides: its container image, its container environment and its defaults."""

from __future__ import annotations

import importlib
import math
import re
import types
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, ClassVar, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict

from endpoint_config import EndpointSpec, InstanceType

from .images import ImagePin

# Sizing the default timeouts from the artifact: S3 -> instance at a conservative 100 MB/s, loading to GPU at
# 200 MB/s, plus a fixed allowance for the container's own start. Explicit config values always win.
_DOWNLOAD_BYTES_PER_S = 100e6
REPO_ROOT = Path(__file__).resolve().parent.parent
_LOAD_BYTES_PER_S = 200e6


# An image reference is [REGISTRY_HOST[:PORT]/]NAME[:TAG]; without a registry host it comes from the default registry,
# Docker Hub (the `docker pull` reference, docs.docker.com/reference/cli/docker/image/pull). A first path part with
# a "." or ":" (or "localhost") is a registry host.
def docker_hub_bases(own: OwnContainer) -> list[str]:
    """The base images of an own container's Dockerfile that come from Docker Hub."""
    dockerfile = REPO_ROOT / own.dockerfile
    bases = re.findall(r"^FROM\s+(?:--platform=\S+\s+)?(\S+)", dockerfile.read_text(), re.MULTILINE)
    return [b for b in bases if not b.startswith("$") and b != "scratch" and not _has_registry(b)]


def _has_registry(image: str) -> bool:
    first, sep, _ = image.partition("/")
    return bool(sep) and ("." in first or ":" in first or first == "localhost")


class SystemEngineOptions(BaseModel):
    """The `engine:` options one serving system accepts: each system subclasses this with exactly the keys it
    implements (and Literal types for the values it allows), like djl-serving's properties_manager has one
    properties class per engine. The config schema keeps the union of all keys (endpoint_config.EngineOptions);
    `engine_problems` checks an endpoint's options against its system's model and `engine_options` reads them.

    Class-level refusal texts: REFUSALS maps a key to the whole message after "engine.<key>: " (formatted with
    value and system) when a system words it its own way; HINTS adds a reason to the default "remove the key".
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    REFUSALS: ClassVar[dict[str, str]] = {"tensorrt_profile": "is only used by system 'tensorrt-byoc', not {system!r}"}
    HINTS: ClassVar[dict[str, str]] = {}

    def conflicts(self) -> list[str]:
        """Rules between the accepted keys: the message after "endpoint '<name>': "."""
        return []

    @classmethod
    def accepts(cls, key: str, value: Any) -> bool:
        field = cls.model_fields.get(key)
        if field is None:
            return False
        allowed = _allowed_values(field.annotation)
        return allowed is None or value in allowed

    @classmethod
    def read(cls, ep: EndpointSpec) -> SystemEngineOptions:
        """The endpoint's options as this typed model. Keys the system refuses are left out: the config and the
        build refuse them (`engine_problems`); what reads options for synth (container environment, properties)
        reads only what the system implements."""
        return cls.model_validate({k: v for k, v in given_engine_options(ep).items() if cls.accepts(k, v)})


# The order the keys are checked in (the first refusal is the one a build reports).
_CHECK_ORDER = ("rolling_batch", "entry_point", "custom_handler", "max_batch_size", "max_model_len", "tensorrt_profile")


def _allowed_values(annotation: Any) -> tuple[Any, ...] | None:
    """The values a Literal field allows (None among them dropped); None: not a Literal."""
    if get_origin(annotation) is Literal:
        return tuple(a for a in get_args(annotation) if a is not None)
    if get_origin(annotation) in (Union, types.UnionType):
        found = [v for a in get_args(annotation) if (v := _allowed_values(a)) is not None]
        return tuple(x for v in found for x in v) if found else None
    return None


def given_engine_options(ep: EndpointSpec) -> dict[str, Any]:
    """The `engine:` keys the endpoint sets (defaults left out: `custom_handler: false` is everybody's)."""
    fields = type(ep.engine).model_fields
    return {k: v for k, v in ep.engine.model_dump().items() if v != fields[k].default}


def engine_problems(ep: EndpointSpec, options: type[SystemEngineOptions]) -> list[str]:
    """Every `engine:` key of `ep` that `options` (its system's model) does not accept, as
    "endpoint '<name>': engine.<key>: value <value> is not supported by system '<system>'; <allowed>"."""
    given = given_engine_options(ep)
    problems: list[str] = []
    for key in sorted(given, key=lambda k: _CHECK_ORDER.index(k) if k in _CHECK_ORDER else len(_CHECK_ORDER)):
        value = given[key]
        if options.accepts(key, value):
            continue
        field = options.model_fields.get(key)
        allowed_values = _allowed_values(field.annotation) if field is not None else None
        if key in options.REFUSALS:
            tail = options.REFUSALS[key].format(value=value, system=ep.system)
        else:
            if field is None:
                allowed = "remove the key" + (f" ({options.HINTS[key]})" if key in options.HINTS else "")
            else:
                allowed = f"allowed: {', '.join(map(str, allowed_values))} (or leave it out)"
            tail = f"value {value!r} is not supported by system {ep.system!r}; {allowed}"
        problems.append(f"endpoint {ep.name!r}: engine.{key}: {tail}")
    if not problems:
        problems = [f"endpoint {ep.name!r}: {p}" for p in options.model_validate(given).conflicts()]
    return problems


@dataclass(frozen=True)
class OwnContainer:
    """A container we build from this repository (CDK DockerImageAsset). The build context is the repository root
    holding only `include` (paths from the root; a directory with all it holds), so an image can take the shared
    server in systems/ and the top-level request contract. dockerfile: its path from the root."""

    dockerfile: str
    include: tuple[str, ...]
    # Left out even inside an included directory.
    never: tuple[str, ...] = ("**/__pycache__", "**/tests", "*.md")

    @property
    def exclude(self) -> list[str]:
        """CDK's glob exclude patterns for the context: everything but `include` (and the Dockerfile), later
        patterns overriding earlier ones, as aws-cdk-lib's GlobIgnoreStrategy reads them."""
        kept: list[str] = []
        for path in (*self.include, self.dockerfile):
            parts = path.strip("/").split("/")
            kept += [f"!{'/'.join(parts[:i])}" for i in range(1, len(parts) + 1)] + [f"!{path.strip('/')}/**"]
        return ["*", ".*", *dict.fromkeys(kept), *self.never]  # ".*": "*" does not match dot files


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
    # The `engine:` options this system accepts (its own typed model); the default accepts none.
    engine_options: type[SystemEngineOptions] = SystemEngineOptions

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

    def engine_problems(self, ep: EndpointSpec) -> list[str]:
        """The endpoint's `engine:` keys this system does not accept (messages name endpoint, key, value, what
        is allowed)."""
        return engine_problems(ep, self.engine_options)

    def engine(self, ep: EndpointSpec) -> Any:
        """The endpoint's engine options as this system's typed model (see SystemEngineOptions.read)."""
        return self.engine_options.read(ep)

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
