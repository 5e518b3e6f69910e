"""`python -m model_build clean`: delete old content-addressed artifacts from the artifact bucket, and the SageMaker
Models and EndpointConfigs of this project that nothing uses. Dry run by default.

Every build publishes under models/<endpoint>/<content hash>/, so old artifacts accumulate. For each endpoint this keeps
what is pinned (the config's artifact_hash), built (the local build: what the next deploy publishes) and deployed
(every model the endpoint can run now: its endpoint config's, the pending config's during an update, and its
inference components'), what a kept Model names (the stack's current one), and what the stack's previous version needs
(operations review F8): the artifact of the newest Model the stack retained when an update replaced it (a rollback,
CloudFormation's or a manual one, deploys that version again) and any artifact the workstation's rollback snapshot
template names (cdk.out/<project>-<env>/rollback/*.previous.template, the file the printed rollback command uses). It
lists every other prefix under models/<endpoint>/ as removable.

The endpoint stacks keep a replaced Model and EndpointConfig (UpdateReplacePolicy Retain, stacks/sagemaker_resources.py
`retain_when_replaced`): after a rolled-back update the endpoint may still run them. Those carry the stack's tags
(RESOURCE_TAGS); one is removable when neither the endpoint (running or pending config, their models, its components'
models) nor the endpoint's stack (its current Model and EndpointConfig) names it. Anything it cannot read stops the
clean with nothing deleted, and so does a stack with a deploy in progress: something is removed only when SageMaker
and CloudFormation say what runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deployment import EndpointPlan, EnvironmentPlan

ROOT = Path(__file__).resolve().parent.parent

HASH = re.compile(r"^[0-9a-f]{64}$")
# The tags every resource of an endpoint stack carries (stacks/__init__.py add_endpoint_stacks and tag_environment);
# CloudFormation adds no stack tags of its own to an EndpointConfig (cfn-lint's AWS::SageMaker::EndpointConfig
# schema: tagging.cloudFormationSystemTags false), so these are what finds a kept one.
TAG_PROJECT, TAG_ENVIRONMENT, TAG_ENDPOINT = (
    "llm-endpoints:project",
    "llm-endpoints:environment",
    "llm-endpoints:endpoint",
)
MODEL, CONFIG = "model", "endpoint-config"


class CleanError(Exception):
    """The clean cannot tell what is in use; nothing was deleted. The message says what failed."""


@dataclass
class EndpointCleanup:
    endpoint: str
    keep: dict[str, list[str]] = field(default_factory=dict)  # hash -> why (pinned, built, deployed)
    remove: dict[str, int] = field(default_factory=dict)  # hash -> object count
    # (kind, name) of this endpoint's tagged Models and EndpointConfigs -> why kept; and those nothing uses
    keep_resources: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    remove_resources: list[tuple[str, str]] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"{self.endpoint}:"]
        out += [f"  keep    {h[:12]}  ({', '.join(why)})" for h, why in sorted(self.keep.items())]
        out += [f"  remove  {h[:12]}  ({n} objects)" for h, n in sorted(self.remove.items())]
        if not self.keep and not self.remove:
            out.append("  nothing published")
        out += [
            f"  keep    {kind} {name}  ({', '.join(why)})" for (kind, name), why in sorted(self.keep_resources.items())
        ]
        out += [
            f"  remove  {kind} {name}  (no endpoint or stack uses it)" for kind, name in sorted(self.remove_resources)
        ]
        return out


@dataclass
class InUse:
    """What an endpoint can run now: its endpoint configs (running and pending), their models and its components'
    models, and the content hashes of those models' artifacts."""

    configs: set[str] = field(default_factory=set)
    models: set[str] = field(default_factory=set)
    hashes: set[str] = field(default_factory=set)


def not_found(err: Any) -> bool:
    """SageMaker's answer for a resource that does not exist: a ValidationException saying it "Could not find" it (the
    Describe* operations model no error of their own; botocore's sagemaker service model)."""
    error = getattr(err, "response", {}).get("Error", {})
    return (
        error.get("Code") in ("ValidationException", "ResourceNotFound")
        and "could not find" in error.get("Message", "").lower()
    )


def _describe(call: Any, what: str, **kwargs: Any) -> dict[str, Any] | None:
    """One Describe* call: its answer, None when the resource does not exist, CleanError on anything else."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return call(**kwargs)
    except ClientError as err:
        if not_found(err):
            return None
        raise CleanError(f"cannot tell what {what} runs ({err}); nothing was deleted") from None
    except BotoCoreError as err:
        raise CleanError(f"cannot tell what {what} runs ({err}); nothing was deleted") from None


def deployed_hashes(session: Any, endpoint_name: str, endpoint: str) -> set[str]:
    """Content hashes of the artifacts endpoint `endpoint_name` can run now (empty when it does not exist)."""
    return in_use(session, endpoint_name, endpoint).hashes


def in_use(session: Any, endpoint_name: str, endpoint: str) -> InUse:
    """What endpoint `endpoint_name` (config name `endpoint`) can run now (nothing when it does not exist)."""
    sm = session.client("sagemaker")
    described = _describe(sm.describe_endpoint, f"endpoint {endpoint_name}", EndpointName=endpoint_name)
    if described is None:
        return InUse()
    pending = (described.get("PendingDeploymentSummary") or {}).get("EndpointConfigName")
    configs: set[str] = {name for name in (described.get("EndpointConfigName"), pending) if name is not None}
    models: set[str] = set()
    hosts_components = False
    for config in sorted(configs):
        found = _describe(sm.describe_endpoint_config, f"endpoint config {config}", EndpointConfigName=config)
        if found is None:
            raise CleanError(_gone(endpoint_name, f"endpoint config {config}"))
        for variant in found.get("ProductionVariants", []):
            if variant.get("ModelName"):
                models.add(variant["ModelName"])
                # An instance pool may run its own model instead (InstancePool.ModelNameOverride, botocore's
                # sagemaker service model): kept while the config runs, as the variant's is.
                models |= {
                    p["ModelNameOverride"] for p in variant.get("InstancePools", []) if p.get("ModelNameOverride")
                }
            else:  # an inference-component endpoint: its components name their models
                hosts_components = True
    if hosts_components:
        models |= _component_models(sm, endpoint_name)
    hashes = set()
    for name in sorted(models):
        model = _describe(sm.describe_model, f"model {name}", ModelName=name)
        if model is None:
            raise CleanError(_gone(endpoint_name, f"model {name}"))
        hashes |= model_hashes(model, endpoint)
    return InUse(configs, models, hashes)


def model_hashes(model: dict[str, Any], endpoint: str) -> set[str]:
    """The content hashes of endpoint `endpoint`'s artifacts a DescribeModel answer names."""
    hashes = set()
    for container in [model.get("PrimaryContainer"), *model.get("Containers", [])]:
        if not container:
            continue
        uri = container.get("ModelDataUrl") or container.get("ModelDataSource", {}).get("S3DataSource", {}).get(
            "S3Uri", ""
        )
        found_hash = re.search(rf"/models/{re.escape(endpoint)}/([0-9a-f]{{64}})/", uri)
        if found_hash:
            hashes.add(found_hash.group(1))
    return hashes


def snapshot_hashes(snapshot_dir: Path | None, stack_name: str, endpoint: str) -> set[str]:
    """The hashes of endpoint `endpoint`'s artifacts the workstation's saved rollback template of `stack_name` names
    (model_build/rollback.py save: <stack>.previous.template); empty without one."""
    if snapshot_dir is None:
        return set()
    path = snapshot_dir / f"{stack_name}.previous.template"
    if not path.is_file():
        return set()
    return set(re.findall(rf"models/{re.escape(endpoint)}/([0-9a-f]{{64}})/", path.read_text(errors="replace")))


def previous_version_hashes(session: Any, cleanup: EndpointCleanup, running: InUse, endpoint: str) -> set[str]:
    """The artifact of the stack's previous version: what the newest of the endpoint's retained Models that does not
    run now names (UpdateReplacePolicy Retain keeps a replaced Model; the newest is the one the last update replaced,
    which a rollback deploys again)."""
    sm = session.client("sagemaker")
    retained = []
    for kind, name in [*cleanup.remove_resources, *cleanup.keep_resources]:
        if kind != MODEL or name in running.models:
            continue
        model = _describe(sm.describe_model, f"model {name}", ModelName=name)
        if model is not None and model_hashes(model, endpoint) - running.hashes:
            retained.append((str(model.get("CreationTime", "")), name, model_hashes(model, endpoint)))
    return max(retained)[2] if retained else set()


def _gone(endpoint_name: str, what: str) -> str:
    """SageMaker lets a Model or EndpointConfig be deleted while an endpoint runs it; the endpoint keeps serving, and
    may need the artifact again to replace or add an instance. Its artifact can then no longer be told from the
    others, so the clean stops rather than treat it as unused."""
    return (
        f"endpoint {endpoint_name} runs {what}, which no longer exists (deleted outside its stack), so which artifact "
        f"it serves cannot be told; deploy the endpoint again (its stack recreates what it runs) or pin its artifact "
        f"with artifact_hash, then clean; nothing was deleted"
    )


def _component_models(sm: Any, endpoint_name: str) -> set[str]:
    """The models the inference components on endpoint `endpoint_name` run."""
    pages = sm.get_paginator("list_inference_components").paginate(EndpointNameEquals=endpoint_name)
    try:
        components = [c["InferenceComponentName"] for page in pages for c in page.get("InferenceComponents", [])]
    except Exception as err:
        raise CleanError(
            f"cannot list the inference components of endpoint {endpoint_name} ({err}); nothing was deleted"
        ) from None
    models = set()
    for component in components:
        found = _describe(
            sm.describe_inference_component, f"inference component {component}", InferenceComponentName=component
        )
        if found is None:  # deleted between the listing and now: it runs nothing any more
            continue
        model = (found.get("Specification") or {}).get("ModelName")
        if model:
            models.add(model)
    return models


def plan(
    environment_plan: EnvironmentPlan,
    session: Any,
    bucket: str,
    endpoints: list[str] | None = None,
    *,
    snapshot_dir: Path | None = None,
) -> list[EndpointCleanup]:
    """What to keep and what to remove for each endpoint (`endpoints`: only these). `snapshot_dir`: where the
    workstation saved its rollback snapshots (default: cdk.out/<project>-<env>/rollback). Raises CleanError."""
    from botocore.exceptions import BotoCoreError, ClientError

    s3 = session.client("s3")
    cleanups = []
    running_of: dict[str, InUse] = {}
    if snapshot_dir is None:
        snapshot_dir = ROOT / "cdk.out" / f"{environment_plan.project}-{environment_plan.environment_name}" / "rollback"
    tagged: dict[tuple[str, str], dict[str, str]] | None = None
    for endpoint_plan in environment_plan.plans:
        spec = endpoint_plan.spec
        if endpoints and spec.name not in endpoints:
            continue
        cleanup = EndpointCleanup(spec.name)
        built = endpoint_plan.artifact.content_hash if endpoint_plan.artifact.source == "manifest" else None
        reasons: dict[str, set[str]] = {
            "pinned": {spec.artifact_hash} if spec.artifact_hash is not None else set(),
            "built": {built} if built is not None else set(),
        }
        running = running_of[spec.name] = in_use(session, endpoint_plan.endpoint_name, spec.name)
        reasons["deployed"] = running.hashes
        # The kept Models and EndpointConfigs before the artifacts: what they name is kept too.
        if tagged is None:
            tagged = tagged_resources(session, environment_plan.project)
        _plan_resources(cleanup, session, environment_plan, endpoint_plan, running, tagged)
        kept_models = set()
        for name in [n for k, n in cleanup.keep_resources if k == MODEL]:
            model = _describe(session.client("sagemaker").describe_model, f"model {name}", ModelName=name)
            if model is not None:
                kept_models |= model_hashes(model, spec.name)
        reasons["kept model"] = kept_models - running.hashes
        reasons["previous version"] = previous_version_hashes(session, cleanup, running, spec.name)
        reasons["rollback snapshot"] = snapshot_hashes(snapshot_dir, endpoint_plan.stack_name, spec.name)
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
            raise CleanError(
                f"cannot list s3://{bucket}/{endpoint_plan.artifact_root} ({err}); nothing was deleted"
            ) from None
        cleanup.remove = {h: n for h, n in counts.items() if h not in cleanup.keep}
        cleanups.append(cleanup)
    return cleanups


def _plan_resources(
    cleanup: EndpointCleanup,
    session: Any,
    environment_plan: EnvironmentPlan,
    endpoint_plan: EndpointPlan,
    running: InUse,
    tagged: dict[tuple[str, str], dict[str, str]],
) -> None:
    """Sort the endpoint's tagged Models and EndpointConfigs into kept (what runs, what its stack names) and
    removable."""
    mine = {
        TAG_PROJECT: environment_plan.project,
        TAG_ENVIRONMENT: environment_plan.environment_name,
        TAG_ENDPOINT: endpoint_plan.name,
    }
    candidates = sorted(key for key, tags in tagged.items() if all(tags.get(k) == v for k, v in mine.items()))
    if not candidates:
        return
    uses = {(CONFIG, n.casefold()): "runs now" for n in running.configs}
    uses.update({(MODEL, n.casefold()): "runs now" for n in running.models})
    for key in stack_resources(session, endpoint_plan.stack_name):
        uses.setdefault(key, "the stack's current one")
    for kind, name in candidates:
        why = uses.get((kind, name.casefold()))
        if why:
            cleanup.keep_resources[(kind, name)] = [why]
        else:
            cleanup.remove_resources.append((kind, name))


def stack_resources(session: Any, stack_name: str) -> set[tuple[str, str]]:
    """(kind, name in lower case) of the Models and EndpointConfigs stack `stack_name` has now; empty when the stack
    does not exist. CleanError while a deploy runs (what the stack names is changing) or when it cannot be read."""
    from botocore.exceptions import BotoCoreError, ClientError

    cfn = session.client("cloudformation")
    try:
        stacks = cfn.describe_stacks(StackName=stack_name)["Stacks"]
        status = stacks[0]["StackStatus"] if stacks else ""
        problem = unsettled_stack_problem(stack_name, status)
        if problem:
            raise CleanError(problem)
        pages = cfn.get_paginator("list_stack_resources").paginate(StackName=stack_name)
        summaries = [r for page in pages for r in page["StackResourceSummaries"]]
    except ClientError as err:
        # CloudFormation's answer for a stack that does not exist: ValidationError "Stack with id X does not exist".
        if err.response.get("Error", {}).get("Code") == "ValidationError" and "does not exist" in str(err):
            return set()
        raise CleanError(f"cannot tell what stack {stack_name} deployed ({err}); nothing was deleted") from None
    except BotoCoreError as err:
        raise CleanError(f"cannot tell what stack {stack_name} deployed ({err}); nothing was deleted") from None
    kinds = {"AWS::SageMaker::Model": MODEL, "AWS::SageMaker::EndpointConfig": CONFIG}
    # The physical id of a SageMaker resource is its ARN, which names it in lower case.
    return {
        (kinds[r["ResourceType"]], r["PhysicalResourceId"].rsplit("/", 1)[-1].casefold())
        for r in summaries
        if r["ResourceType"] in kinds and r.get("PhysicalResourceId")
    }


def unsettled_stack_problem(stack_name: str, status: str) -> str | None:
    """Why what stack `stack_name` names cannot be trusted in status `status`, or None when it has settled.

    Only a *_COMPLETE status is settled (the StackStatus enum of botocore's cloudformation service model). While a
    deploy runs (*_IN_PROGRESS) what the stack names changes; after a failure (*_FAILED: UPDATE_ROLLBACK_FAILED above
    all) its recorded resources may name the new Model and EndpointConfig while the endpoint runs the old ones, and
    the old config is the one ContinueUpdateRollback needs: deleting it would strand the stack. Any other or unknown
    status is refused as well."""
    if status.endswith("_COMPLETE"):
        return None
    if status.endswith("_IN_PROGRESS"):
        why = "a deploy is running; run the clean after it ends"
    elif status.endswith("_FAILED"):
        why = (
            "what it names may not be what the endpoint runs, and a rollback may still need the old resources; "
            "settle it first (aws cloudformation continue-update-rollback / delete-stack, or a deploy that succeeds)"
        )
    else:
        why = "not a settled status"
    return f"stack {stack_name} is {status or 'in no status'}: {why}; nothing was deleted"


def tagged_resources(session: Any, project: str) -> dict[tuple[str, str], dict[str, str]]:
    """(kind, name) -> tags of every Model and EndpointConfig in the account and region tagged with `project`
    (ListModels / ListEndpointConfigs, then ListTags of each). CleanError when any call fails."""
    from botocore.exceptions import BotoCoreError, ClientError

    sm = session.client("sagemaker")
    found: dict[tuple[str, str], dict[str, str]] = {}
    listings = (
        (MODEL, "list_models", "Models", "ModelName", "ModelArn"),
        (CONFIG, "list_endpoint_configs", "EndpointConfigs", "EndpointConfigName", "EndpointConfigArn"),
    )
    try:
        for kind, operation, key, name_key, arn_key in listings:
            for page in sm.get_paginator(operation).paginate():
                for item in page.get(key, []):
                    tags = {
                        t["Key"]: t["Value"]
                        for tag_page in sm.get_paginator("list_tags").paginate(ResourceArn=item[arn_key])
                        for t in tag_page.get("Tags", [])
                    }
                    if tags.get(TAG_PROJECT) == project:
                        found[(kind, item[name_key])] = tags
    except (ClientError, BotoCoreError) as err:
        raise CleanError(
            f"cannot list this project's SageMaker models and endpoint configs ({err}); nothing was deleted"
        ) from None
    return found


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
                batch = keys[start : start + 1000]
                answer = s3.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})
                errors = answer.get("Errors", [])
                failed += [f"{e.get('Key')}: {e.get('Code')} {e.get('Message', '')}".strip() for e in errors]
                deleted += len(batch) - len(errors)
    return deleted, failed


def delete_resources(session: Any, cleanups: list[EndpointCleanup]) -> tuple[int, list[str]]:
    """Delete every removable EndpointConfig, then every removable Model: (deleted, one line per refusal). One
    deleted meanwhile counts as deleted."""
    sm = session.client("sagemaker")
    deleted, failed = 0, []
    calls = {
        CONFIG: lambda name: sm.delete_endpoint_config(EndpointConfigName=name),
        MODEL: lambda name: sm.delete_model(ModelName=name),
    }
    for kind in (CONFIG, MODEL):  # a config names models: it goes first
        for cleanup in cleanups:
            for name in [n for k, n in cleanup.remove_resources if k == kind]:
                try:
                    calls[kind](name)
                    deleted += 1
                except Exception as err:  # every refusal is reported, none stops the others
                    if not_found(err):
                        deleted += 1
                    else:
                        failed.append(f"{kind} {name}: {err}")
    return deleted, failed


__all__ = [
    "CleanError",
    "EndpointCleanup",
    "InUse",
    "delete",
    "delete_resources",
    "deployed_hashes",
    "in_use",
    "plan",
    "stack_resources",
    "tagged_resources",
    "unsettled_stack_problem",
]
