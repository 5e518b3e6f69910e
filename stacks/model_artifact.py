"""Which published artifact an endpoint serves: its content hash, read from the build's manifest at synth.

The stack points the SageMaker model at `s3://<bucket>/models/<endpoint>/<content hash>/`. A rebuilt model has
a new hash, so the CfnModel's properties change and CloudFormation replaces the model and endpoint config.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from artifact.manifest import MANIFEST_NAME, Manifest, ManifestError
from endpoint_config import ConfigError, EndpointSpec

UNBUILT_HASH = "0" * 64


@dataclass(frozen=True)
class ArtifactRef:
    content_hash: str
    source: str  # "manifest", "config" or "unbuilt"
    total_bytes: int | None = None  # the artifact's size, when its manifest is at hand (sizes the timeouts)

    @property
    def is_placeholder(self) -> bool:
        return self.source == "unbuilt"


def resolve_artifact(spec: EndpointSpec, build_root: Path, *, allow_unbuilt: bool) -> ArtifactRef:
    """From the config's `artifact_hash`, else `<build_root>/<name>/manifest.json`, else a clear error.

    `allow_unbuilt` (context `-c allow_unbuilt=true`) synthesizes with a placeholder prefix, for reviewing a
    template before any build; the stack then carries a warning and must not be deployed.
    """
    if spec.artifact_hash:
        return ArtifactRef(spec.artifact_hash, "config")
    manifest_path = build_root / spec.name / MANIFEST_NAME
    if manifest_path.is_file():
        try:
            manifest = Manifest.load(manifest_path)
        except ManifestError as err:
            raise ConfigError(f"endpoint {spec.name!r}: {err}; rebuild it") from None
        for key, have, want in (("system", manifest.system, spec.system), ("dtype", manifest.dtype, spec.dtype)):
            if have != want:
                raise ConfigError(
                    f"endpoint {spec.name!r}: the built artifact in {manifest_path.parent} has {key} "
                    f"{have!r} but the config says {want!r}; rebuild with "
                    f"`python -m model_build build --config ... --endpoint {spec.name}`"
                )
        if len(manifest.content_hash) != 64:
            raise ConfigError(f"endpoint {spec.name!r}: {manifest_path} has no content_hash; rebuild it")
        return ArtifactRef(manifest.content_hash, "manifest", manifest.total_bytes)
    if allow_unbuilt:
        return ArtifactRef(UNBUILT_HASH, "unbuilt")
    raise ConfigError(
        f"endpoint {spec.name!r}: no built artifact ({manifest_path} does not exist). Build it with "
        f"`python -m model_build build --config CONFIG --endpoint {spec.name}`, pin a published one with "
        "`artifact_hash:`, or synthesize for review only with `-c allow_unbuilt=true`"
    )
