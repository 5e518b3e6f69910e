"""`python -m model_build clean`: delete old content-addressed artifacts from the artifact bucket. Dry run by default.

Every build publishes under models/<endpoint>/<content hash>/, so old artifacts accumulate. For each endpoint of the
environment this keeps:
  pinned     the config's `artifact_hash`
  built      the local build's hash (build/<endpoint>/manifest.json): what the next deploy publishes
  deployed   the artifact the endpoint runs now: DescribeEndpoint -> its endpoint config -> its models' model data
             (during a blue/green update both fleets' models, since every production variant is read)
and lists every other prefix under models/<endpoint>/ as removable. `--delete` deletes those objects (the bucket is
versioned: S3 keeps the deleted versions as noncurrent for the lifecycle rule's 30 days, then expires them).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HASH = re.compile(r"^[0-9a-f]{64}$")


@dataclass
class EndpointPlan:
    endpoint: str
    keep: dict[str, list[str]] = field(default_factory=dict)  # hash -> why (pinned, built, deployed)
    remove: dict[str, int] = field(default_factory=dict)  # hash -> object count

    def lines(self) -> list[str]:
        out = [f"{self.endpoint}:"]
        out += [f"  keep    {h[:12]}  ({', '.join(why)})" for h, why in sorted(self.keep.items())]
        out += [f"  remove  {h[:12]}  ({n} objects)" for h, n in sorted(self.remove.items())]
        if not self.keep and not self.remove:
            out.append("  nothing published")
        return out


def _local_hash(build_root: Path, endpoint: str) -> str | None:
    manifest = build_root / endpoint / "manifest.json"
    if not manifest.is_file():
        return None
    return json.loads(manifest.read_text()).get("content_hash")


def deployed_hashes(session: Any, endpoint_name: str, endpoint: str) -> set[str]:
    """Content hashes of the artifacts the endpoint's models read now (empty when it is not deployed)."""
    from botocore.exceptions import ClientError

    sm = session.client("sagemaker")
    try:
        config = sm.describe_endpoint(EndpointName=endpoint_name)["EndpointConfigName"]
        variants = sm.describe_endpoint_config(EndpointConfigName=config)["ProductionVariants"]
    except ClientError:
        return set()
    hashes = set()
    for variant in variants:
        model = sm.describe_model(ModelName=variant["ModelName"])
        for container in [model.get("PrimaryContainer"), *model.get("Containers", [])]:
            if not container:
                continue
            uri = container.get("ModelDataUrl") or container.get("ModelDataSource", {}).get("S3DataSource", {}).get("S3Uri", "")
            found = re.search(rf"/models/{re.escape(endpoint)}/([0-9a-f]{{64}})/", uri)
            if found:
                hashes.add(found.group(1))
    return hashes


def plan(deployment: Any, session: Any, bucket: str, build_root: Path, endpoints: list[str] | None = None) -> list[EndpointPlan]:
    s3 = session.client("s3")
    plans = []
    for spec in deployment.endpoints:
        if endpoints and spec.name not in endpoints:
            continue
        p = EndpointPlan(spec.name)
        reasons = {
            "pinned": {spec.artifact_hash} - {None},
            "built": {_local_hash(build_root, spec.name)} - {None},
            "deployed": deployed_hashes(session, deployment.endpoint_name(spec), spec.name),
        }
        for why, hashes in reasons.items():
            for h in hashes:
                p.keep.setdefault(h, []).append(why)
        counts: dict[str, int] = {}
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"models/{spec.name}/"):
            for obj in page.get("Contents", []):
                parts = obj["Key"].split("/")
                if len(parts) > 3 and HASH.match(parts[2]):
                    counts[parts[2]] = counts.get(parts[2], 0) + 1
        p.remove = {h: n for h, n in counts.items() if h not in p.keep}
        plans.append(p)
    return plans


def delete(session: Any, bucket: str, plans: list[EndpointPlan]) -> int:
    """Delete the current objects of every removable prefix; returns how many."""
    s3 = session.client("s3")
    deleted = 0
    for p in plans:
        for h in p.remove:
            keys = [
                {"Key": obj["Key"]}
                for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"models/{p.endpoint}/{h}/")
                for obj in page.get("Contents", [])
            ]
            for start in range(0, len(keys), 1000):  # DeleteObjects takes at most 1000 keys
                s3.delete_objects(Bucket=bucket, Delete={"Objects": keys[start:start + 1000], "Quiet": True})
            deleted += len(keys)
    return deleted


__all__ = ["EndpointPlan", "delete", "deployed_hashes", "plan"]
