"""An endpoint's built LoRA adapters as SageMaker hands them to the container: each adapter's model.tar.gz (the archive
`model_build publish` uploads as its component's ArtifactUrl, packed the same way) extracted into a folder named after
its adapter inference component. local_runtime.ContainerHost (process.py) then registers each folder through the container's
POST /adapters once the engine is ready, as SageMaker does when it creates the adapter components after the base.
Where SageMaker itself extracts the archive is not documented: the folder here is this module's choice."""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path
from typing import TYPE_CHECKING

from artifact.manifest import MANIFEST_NAME, Manifest, ManifestError
from artifact.tarball import TarballError, pack_tarball

if TYPE_CHECKING:
    from deployment import EndpointPlan


def extracted_adapters(plan: EndpointPlan, build_root: Path, workdir: Path) -> dict[str, Path]:
    """Adapter inference component -> the folder holding its extracted archive, for every adapter of `plan` (each must
    be built: model_build build). The archives are packed under workdir/archives/ and extracted under
    workdir/adapters/ (both replaced)."""
    from deployment.adapters import ADAPTER_ARCHIVE, adapter_build_dir

    from . import LocalContainerError

    folders = {}
    for adapter in plan.adapters:
        build_dir = adapter_build_dir(build_root, plan.name, adapter.name)
        try:
            manifest = Manifest.load(build_dir / MANIFEST_NAME, require_files=True)
        except (OSError, ManifestError) as err:
            raise LocalContainerError(f"adapter {adapter.name!r} of endpoint {plan.name!r}: {err}") from None
        archive = workdir / "archives" / adapter.component_name / ADAPTER_ARCHIVE
        folder = workdir / "adapters" / adapter.component_name
        for old in (archive.parent, folder):
            shutil.rmtree(old, ignore_errors=True)
        archive.parent.mkdir(parents=True)
        try:
            pack_tarball(build_dir, [e.path for e in manifest.files] + [MANIFEST_NAME], archive)
        except TarballError as err:
            raise LocalContainerError(f"adapter {adapter.name!r}: {err}") from None
        with tarfile.open(archive) as packed:
            packed.extractall(folder, filter="data")
        folders[adapter.component_name] = folder
    return folders


__all__ = ["extracted_adapters"]
