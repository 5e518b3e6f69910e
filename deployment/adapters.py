"""An endpoint's LoRA adapters, planned: each adapter's inference component name and which published artifact it
serves (endpoint_config/adapters.py says what an adapter inference component is).

Where adapters live:
  local build   <build root>/<endpoint>.adapters/<adapter>/   (manifest.json + adapter_config.json +
                adapter_model.safetensors), beside the base's <build root>/<endpoint>/ and never inside it: the base
                artifact's content hash covers every file under its directory
  S3            models/<endpoint>/adapters/<adapter>/<content hash>/model.tar.gz (+ manifest.json, written last), under
                the endpoint's artifact root, which its execution role already reads (ModelData.read_prefix): SageMaker
                downloads an adapter with the endpoint's role, as it does the base model
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from artifact.manifest import MANIFEST_NAME, Manifest, ManifestError
from endpoint_config import ConfigError, EndpointSpec, artifact_root
from endpoint_config.adapters import AdapterSpec, adapter_component_name

from .plan import UNBUILT_HASH, ArtifactRef

# SageMaker takes an adapter's artifacts as one tar.gz (InferenceComponentContainerSpecification.ArtifactUrl: "This path
# must point to a single gzip compressed tar archive (.tar.gz suffix)", botocore 1.44.8 sagemaker service model).
ADAPTER_ARCHIVE = "model.tar.gz"
ADAPTER_KIND = "lora-adapter"


def adapter_build_dir(build_root: Path, endpoint: str, adapter: str) -> Path:
    """Where `model_build build` writes one adapter's artifact."""
    return Path(build_root) / f"{endpoint}.adapters" / adapter


def adapter_root(endpoint: str, adapter: str) -> str:
    """Key prefix of every published artifact of one adapter."""
    return f"{artifact_root(endpoint)}adapters/{adapter}/"


@dataclass(frozen=True)
class AdapterPlan:
    """One adapter of an endpoint: its config entry, its inference component's name and its artifact (ArtifactRef,
    resolved as the base's is: the pin, the local build, or the unbuilt placeholder)."""

    spec: AdapterSpec
    endpoint: str  # the config name of the endpoint it adapts
    component_name: str
    artifact: ArtifactRef

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def pinned_hash(self) -> str | None:
        """The config's `artifact_hash` for the adapter: the one artifact it may deploy (None: its local build)."""
        return self.spec.artifact_hash

    @property
    def prefix(self) -> str:
        """Key prefix of the artifact this plan deploys (models/<endpoint>/adapters/<adapter>/<content hash>/)."""
        return f"{adapter_root(self.endpoint, self.name)}{self.artifact.content_hash}/"

    @property
    def manifest_key(self) -> str:
        return self.prefix + MANIFEST_NAME

    def artifact_url(self, bucket: str) -> str:
        """Specification.Container.ArtifactUrl: the adapter's tar.gz."""
        return f"s3://{bucket}/{self.prefix}{ADAPTER_ARCHIVE}"


def resolve_adapter_artifact(ep: EndpointSpec, adapter: AdapterSpec, build_root: Path) -> ArtifactRef:
    """From the adapter's `artifact_hash`, else its local build's manifest, else the unbuilt placeholder."""
    where = f"endpoint {ep.name!r}: adapter {adapter.name!r}"
    if adapter.artifact_hash:
        return ArtifactRef(adapter.artifact_hash, "config")
    manifest_path = adapter_build_dir(build_root, ep.name, adapter.name) / MANIFEST_NAME
    rebuild = f"build it with `python -m model_build build --config CONFIG --endpoint {ep.name}`"
    if not manifest_path.is_file():
        return ArtifactRef(
            UNBUILT_HASH,
            "unbuilt",
            problem=(
                f"{where}: no built adapter ({manifest_path} does not exist); {rebuild}, pin a published one with "
                "`artifact_hash:`, or synthesize for review only with `-c allow_unbuilt=true`"
            ),
        )
    try:
        manifest = Manifest.load(manifest_path)
    except ManifestError as err:
        return ArtifactRef(UNBUILT_HASH, "unusable", problem=f"{where}: {err}; {rebuild}")
    document = manifest.document
    for key, want in (
        ("kind", ADAPTER_KIND),
        ("endpoint", ep.name),
        ("adapter", adapter.name),
        ("model", adapter.model),
    ):
        if document.get(key) != want:
            return ArtifactRef(
                UNBUILT_HASH,
                "unusable",
                problem=(
                    f"{where}: the build in {manifest_path.parent} has {key} {document.get(key)!r}, the config says "
                    f"{want!r}; {rebuild}"
                ),
            )
    if len(manifest.content_hash) != 64:
        return ArtifactRef(UNBUILT_HASH, "unusable", problem=f"{where}: {manifest_path} has no content_hash; {rebuild}")
    return ArtifactRef(manifest.content_hash, "manifest", manifest.total_bytes)


def plan_adapters(ep: EndpointSpec, endpoint_name: str, build_root: Path) -> tuple[AdapterPlan, ...]:
    """Every adapter of `ep` (whose rules passed), in config order."""
    return tuple(
        AdapterPlan(
            adapter,
            ep.name,
            adapter_component_name(endpoint_name, adapter.name),
            resolve_adapter_artifact(ep, adapter, build_root),
        )
        for adapter in ep.adapters
    )


def deployable_adapters(adapters: tuple[AdapterPlan, ...], *, allow_unbuilt: bool = False) -> tuple[AdapterPlan, ...]:
    """The adapters to deploy; ConfigError naming the first without an artifact (an unbuilt one is a placeholder
    with `allow_unbuilt`, for reviewing a template)."""
    for adapter in adapters:
        if adapter.artifact.problem is not None and not (allow_unbuilt and adapter.artifact.is_placeholder):
            raise ConfigError(adapter.artifact.problem)
    return adapters


__all__ = [
    "ADAPTER_ARCHIVE",
    "ADAPTER_KIND",
    "AdapterPlan",
    "adapter_build_dir",
    "adapter_root",
    "deployable_adapters",
    "plan_adapters",
    "resolve_adapter_artifact",
]
