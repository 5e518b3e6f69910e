"""Which published artifact an endpoint serves: its content hash, read from the build's manifest at synth.

The stack points the SageMaker model at `s3://<bucket>/models/<endpoint>/<content hash>/`. A rebuilt model has
a new hash, so the CfnModel's properties change and CloudFormation replaces the model and endpoint config.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

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
    manifest_path = build_root / spec.name / "manifest.json"
    if manifest_path.is_file():
        try:
            manifest = json.loads(manifest_path.read_text())
        except json.JSONDecodeError as err:
            raise ConfigError(f"endpoint {spec.name!r}: {manifest_path} is not valid JSON ({err}); rebuild it") from None
        for key, want in (("system", spec.system), ("dtype", spec.dtype)):
            if manifest.get(key) != want:
                raise ConfigError(
                    f"endpoint {spec.name!r}: the built artifact in {manifest_path.parent} has {key} "
                    f"{manifest.get(key)!r} but the config says {want!r}; rebuild with "
                    f"`python -m model_build build --config ... --endpoint {spec.name}`"
                )
        content_hash = manifest.get("content_hash", "")
        if len(content_hash) != 64:
            raise ConfigError(f"endpoint {spec.name!r}: {manifest_path} has no content_hash; rebuild it")
        total = sum(int(f.get("size", 0)) for f in manifest.get("files", [])) or None
        return ArtifactRef(content_hash, "manifest", total)
    if allow_unbuilt:
        return ArtifactRef(UNBUILT_HASH, "unbuilt")
    raise ConfigError(
        f"endpoint {spec.name!r}: no built artifact ({manifest_path} does not exist). Build it with "
        f"`python -m model_build build --config CONFIG --endpoint {spec.name}`, pin a published one with "
        "`artifact_hash:`, or synthesize for review only with `-c allow_unbuilt=true`"
    )
