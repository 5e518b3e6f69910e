"""`python -m model_build clean`: delete old content-addressed artifacts from the artifact bucket. Dry run by default.

Every build publishes under models/<endpoint>/<content hash>/, so old artifacts accumulate. For each endpoint this keeps
what is pinned (the config's artifact_hash), built (the local build: what the next deploy publishes) and deployed
(every model the endpoint can run now: its endpoint config's, the pending config's during an update, and its
inference components'), and lists every other prefix under models/<endpoint>/ as removable. Anything it cannot read
stops the clean with nothing deleted: an artifact is removed only when SageMaker says what runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

HASH = re.compile(r"^[0-9a-f]{64}$")


class CleanError(Exception):
    """The clean cannot tell what is in use; nothing was deleted. The message says what failed."""


@dataclass
class EndpointCleanup:
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


def _absent(err: Any) -> bool:
    """SageMaker's answer for a resource that does not exist: a ValidationException saying it "Could not find" it (the
    Describe* operations model no error of their own; botocore's sagemaker service model)."""
    error = getattr(err, "response", {}).get("Error", {})
    return error.get("Code") in ("ValidationException", "ResourceNotFound") and "could not find" in error.get("Message", "").lower()


def _describe(call: Any, what: str, **kwargs: Any) -> dict[str, Any] | None:
    """One Describe* call: its answer, None when the resource does not exist, CleanError on anything else."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return call(**kwargs)
    except ClientError as err:
        if _absent(err):
            return None
        raise CleanError(f"cannot tell what {what} runs ({err}); nothing was deleted") from None
    except BotoCoreError as err:
        raise CleanError(f"cannot tell what {what} runs ({err}); nothing was deleted") from None


def deployed_hashes(session: Any, endpoint_name: str, endpoint: str) -> set[str]:
    """Content hashes of the artifacts endpoint `endpoint_name` can run now (empty when it does not exist)."""
    sm = session.client("sagemaker")
    described = _describe(sm.describe_endpoint, f"endpoint {endpoint_name}", EndpointName=endpoint_name)
    if described is None:
        return set()
    configs = {described.get("EndpointConfigName")} | {(described.get("PendingDeploymentSummary") or {}).get("EndpointConfigName")}
    models: set[str] = set()
    hosts_components = False
    for config in sorted(configs - {None}):
        found = _describe(sm.describe_endpoint_config, f"endpoint config {config}", EndpointConfigName=config)
        for variant in (found or {}).get("ProductionVariants", []):
            if variant.get("ModelName"):
                models.add(variant["ModelName"])
            else:  # an inference-component endpoint: its components name their models
                hosts_components = True
    if hosts_components:
        models |= _component_models(sm, endpoint_name)
    hashes = set()
    for name in sorted(models):
        model = _describe(sm.describe_model, f"model {name}", ModelName=name) or {}
        for container in [model.get("PrimaryContainer"), *model.get("Containers", [])]:
            if not container:
                continue
            uri = container.get("ModelDataUrl") or container.get("ModelDataSource", {}).get("S3DataSource", {}).get("S3Uri", "")
            found_hash = re.search(rf"/models/{re.escape(endpoint)}/([0-9a-f]{{64}})/", uri)
            if found_hash:
                hashes.add(found_hash.group(1))
    return hashes


def _component_models(sm: Any, endpoint_name: str) -> set[str]:
    """The models the inference components on endpoint `endpoint_name` run."""
    pages = sm.get_paginator("list_inference_components").paginate(EndpointNameEquals=endpoint_name)
    try:
        components = [c["InferenceComponentName"] for page in pages for c in page.get("InferenceComponents", [])]
    except Exception as err:
        raise CleanError(f"cannot list the inference components of endpoint {endpoint_name} ({err}); nothing was deleted") from None
    models = set()
    for component in components:
        found = _describe(sm.describe_inference_component, f"inference component {component}", InferenceComponentName=component)
        model = ((found or {}).get("Specification") or {}).get("ModelName")
        if model:
            models.add(model)
    return models


def plan(deployment: Any, session: Any, bucket: str, endpoints: list[str] | None = None) -> list[EndpointCleanup]:
    """What to keep and what to remove for each endpoint (`endpoints`: only these). Raises CleanError."""
    from botocore.exceptions import BotoCoreError, ClientError

    s3 = session.client("s3")
    cleanups = []
    for endpoint_plan in deployment.plans:
        spec = endpoint_plan.spec
        if endpoints and spec.name not in endpoints:
            continue
        cleanup = EndpointCleanup(spec.name)
        built = endpoint_plan.artifact.content_hash if endpoint_plan.artifact.source == "manifest" else None
        reasons = {
            "pinned": {spec.artifact_hash} - {None},
            "built": {built} - {None},
            "deployed": deployed_hashes(session, endpoint_plan.endpoint_name, spec.name),
        }
        for why, hashes in reasons.items():
            for h in hashes:
                cleanup.keep.setdefault(h, []).append(why)
        counts: dict[str, int] = {}
        try:
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=endpoint_plan.artifact_root):
                for obj in page.get("Contents", []):
                    parts = obj["Key"].split("/")
                    if len(parts) > 3 and HASH.match(parts[2]):
                        counts[parts[2]] = counts.get(parts[2], 0) + 1
        except (ClientError, BotoCoreError) as err:
            raise CleanError(f"cannot list s3://{bucket}/{endpoint_plan.artifact_root} ({err}); nothing was deleted") from None
        cleanup.remove = {h: n for h, n in counts.items() if h not in cleanup.keep}
        cleanups.append(cleanup)
    return cleanups


def delete(session: Any, bucket: str, cleanups: list[EndpointCleanup]) -> tuple[int, list[str]]:
    """Delete the current objects of every removable prefix: (objects deleted, one line per key S3 refused)."""
    s3 = session.client("s3")
    deleted, failed = 0, []
    for cleanup in cleanups:
        for h in cleanup.remove:
            prefix = f"models/{cleanup.endpoint}/{h}/"
            keys = [
                {"Key": obj["Key"]}
                for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
                for obj in page.get("Contents", [])
            ]
            for start in range(0, len(keys), 1000):  # DeleteObjects takes at most 1000 keys
                batch = keys[start:start + 1000]
                answer = s3.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})
                errors = answer.get("Errors", [])
                failed += [f"{e.get('Key')}: {e.get('Code')} {e.get('Message', '')}".strip() for e in errors]
                deleted += len(batch) - len(errors)
    return deleted, failed


__all__ = ["CleanError", "EndpointCleanup", "delete", "deployed_hashes", "plan"]
