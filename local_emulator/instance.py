"""What SageMaker does on the instance before the container starts: download the model data (the artifact's
uncompressed S3 prefix, ModelDataSource.S3DataSource S3Prefix/None) into the container's model folder.

The demo serves a staged artifact (a Hub model whose weights the staging job moved into S3; no weights on the
workstation) from such a download, into a temporary folder outside the repository that the demo removes at its end:
the instance's copy, not the workstation's (the weights never pass under build/ or the Hub cache). Each object is
checked against the manifest's size and sha256 as SageMaker's own download is not, so a bad staging shows here.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import boto3

from artifact.manifest import MANIFEST_NAME, Manifest
from deployment import EnvironmentPlan
from endpoint_config import artifact_prefix

from .moto_server import EMULATOR_ACCOUNT

CHUNK = 8 * 2**20


class InstanceDownloadError(Exception):
    pass


def download_artifact(
    environment_plan: EnvironmentPlan, endpoint: str, cleanup: ExitStack, *, echo: Callable[[str], None] = print
) -> Path:
    """Download endpoint's published artifact from the (emulated) artifact bucket into a temporary folder removed by
    `cleanup`; each file checked against the manifest. InstanceDownloadError naming the file otherwise."""
    plan = environment_plan.plan(endpoint)
    region = environment_plan.environment.region or "us-east-1"
    bucket = environment_plan.artifact_bucket(environment_plan.environment.account or EMULATOR_ACCOUNT, region)
    content_hash = plan.artifact.content_hash
    if not content_hash:
        raise InstanceDownloadError(f"endpoint {endpoint!r} has no built artifact to download")
    prefix = artifact_prefix(plan.name, content_hash)
    target = Path(tempfile.mkdtemp(prefix=f"demo-instance-{plan.name}-"))
    cleanup.callback(shutil.rmtree, target, True)
    s3 = boto3.client("s3", region_name=region)
    manifest_path = target / MANIFEST_NAME
    s3.download_file(bucket, prefix + MANIFEST_NAME, str(manifest_path))
    manifest = Manifest.load(manifest_path, require_files=True)
    total = sum(entry.size for entry in manifest.files)
    echo(
        f"==> the instance's download: s3://{bucket}/{prefix} ({len(manifest.files)} files, {total:,} bytes) -> {target}"
    )
    done, started, said = 0, time.monotonic(), time.monotonic()
    for entry in manifest.files:
        path = target / entry.path
        path.parent.mkdir(parents=True, exist_ok=True)
        body = s3.get_object(Bucket=bucket, Key=prefix + entry.path)["Body"]
        digest = hashlib.sha256()
        with path.open("wb") as out:
            while chunk := body.read(CHUNK):
                digest.update(chunk)
                out.write(chunk)
                done += len(chunk)
                if time.monotonic() - said > 5:
                    said = time.monotonic()
                    echo(f"    {done:,} of {total:,} bytes ({100 * done / max(total, 1):.0f} %)")
        if path.stat().st_size != entry.size or digest.hexdigest() != entry.sha256:
            raise InstanceDownloadError(
                f"s3://{bucket}/{prefix}{entry.path}: {path.stat().st_size} bytes, sha256 {digest.hexdigest()[:16]}...; "
                f"the manifest lists {entry.size} bytes, sha256 {entry.sha256[:16]}..."
            )
    echo(f"    {total:,} bytes in {time.monotonic() - started:.1f} s, every file matches the manifest")
    return target
