"""Pre-flight checks before `cdk deploy`: `python -m model_build preflight --config PATH [--env ENV]`.

What a deploy needs and CloudFormation only finds out after minutes (or an hour of rollback):
  credentials   STS GetCallerIdentity works, and the account is the config's `account:` when one is set
  region        one is set (config, AWS_DEFAULT_REGION or the profile) and SageMaker runs there
  quota <type>  the instance type is offered for endpoints in the region (Service Quotas has a quota named
                "<type> for endpoint usage") and the account's quota covers what the config's endpoints on that
                type can run at once, max(instance_count, autoscaling.max_capacity) summed over them, and twice
                that: an endpoint update is blue/green, so the new fleet starts before the old one stops
  artifact <e>  the built artifact is published: s3://<artifact bucket>/models/<endpoint>/<hash>/manifest.json
                exists and carries the content hash of the local build (build/<endpoint>/manifest.json) or
                of the config's `artifact_hash` pin, which is what the stack deploys
  kept data     with no artifact stack deployed, the bucket and repository an earlier deploy kept (retain_data)
                still exist: creating them again fails, so the environment must adopt them (adopt_kept_data);
                and adopt_kept_data names data that exists
  instance <e>  an autoscaled endpoint whose instance type the config changes: SageMaker refuses that
                UpdateEndpoint while the variant is registered with Application Auto Scaling, so the deploy is
                refused with the steps that work

Each failure says what to change. Quotas are read with ListServiceQuotas (the applied values), and
ListAWSDefaultServiceQuotas for quotas that have no applied value. An environment with `emulator: true`
skips the quota checks (the local emulator has no SageMaker quotas).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model_build.smoke import Check, format_checks

BUILD_ROOT = Path("build")
QUOTA_SERVICE = "sagemaker"
QUOTA_NAME = "{instance_type} for endpoint usage"
# An endpoint update on SageMaker is blue/green by default: both fleets run while the new one starts.
UPDATE_FACTOR = 2

__all__ = ["Check", "Pending", "artifacts_pending", "format_checks", "run_preflight", "endpoint_quotas"]

# `make deploy` runs the preflight before the artifact stack exists: the artifact checks cannot pass yet.
ARTIFACTS_PENDING = "runs after the artifact stack is deployed and the artifacts are published"


class Pending(Check):
    """A check whose subject a later deploy step creates: reported as PEND, and not a failure (ok, skipped)."""

    @property
    def label(self) -> str:
        return "PEND"


def artifacts_pending(checks: list[Check], why: str = ARTIFACTS_PENDING) -> list[Check]:
    """The preflight before the artifact stack is deployed: its artifact checks that did not pass become
    Pending (`why`); passing ones (a redeploy) stay as they are. `make deploy` runs them for real after publish."""
    def waits(check: Check) -> bool:
        return check.name.startswith("artifact ") and not check.ok

    return [Pending(c.name, True, why, skipped=True) if waits(c) else c for c in checks]


@dataclass(frozen=True)
class Quota:
    name: str
    code: str
    value: float
    applied: bool  # False: the AWS default (no applied value was listed for the account)


def _aws_message(err: Exception) -> str:
    response = getattr(err, "response", None)
    if isinstance(response, dict):
        e = response.get("Error", {})
        return f"{e.get('Code', 'error')}: {e.get('Message', '')}".strip()
    return f"{type(err).__name__}: {err}"


def endpoint_quotas(client: Any) -> dict[str, Quota]:
    """Every SageMaker "<type> for endpoint usage" quota of the region, by name: applied values where the
    account has them, else the AWS defaults."""
    quotas: dict[str, Quota] = {}
    for operation, applied in (("list_aws_default_service_quotas", False), ("list_service_quotas", True)):
        for page in client.get_paginator(operation).paginate(ServiceCode=QUOTA_SERVICE):
            for q in page.get("Quotas", []):
                name = q.get("QuotaName", "")
                if name.endswith(" for endpoint usage") and "Value" in q:
                    quotas[name] = Quota(name, q.get("QuotaCode", ""), float(q["Value"]), applied)
    return quotas


def _needed_by_type(deployment: Any) -> dict[str, list[tuple[str, int]]]:
    by_type: dict[str, list[tuple[str, int]]] = {}
    for ep in deployment.endpoints:
        peak = max(ep.instance_count, ep.autoscaling.max_capacity if ep.autoscaling else 0)
        by_type.setdefault(ep.instance_type, []).append((ep.name, peak))
    return by_type


def quota_checks(deployment: Any, quotas: dict[str, Quota], region: str) -> list[Check]:
    checks = []
    for instance_type, users in sorted(_needed_by_type(deployment).items()):
        name = f"quota {instance_type}"
        quota_name = QUOTA_NAME.format(instance_type=instance_type)
        need = sum(n for _, n in users)
        who = ", ".join(f"{ep} ({n})" for ep, n in users)
        quota = quotas.get(quota_name)
        if quota is None:
            family = instance_type.split(".")[1]
            offered = sorted(q[: -len(" for endpoint usage")] for q in quotas if q.startswith(f"ml.{family}."))
            hint = f"; offered in that family: {', '.join(offered[:8])}" if offered else ""
            checks.append(
                Check(
                    name,
                    False,
                    (
                        f"{instance_type} is not offered for SageMaker endpoints in {region} (no quota {quota_name!r}); "
                        f"change instance_type of {who} or the environment's region{hint}"
                    ),
                )
            )
            continue
        value = int(quota.value)
        where = f"quota {quota_name!r} ({quota.code}) is {value} in {region}" + (
            "" if quota.applied else " (AWS default)"
        )
        ask = (
            f"request at least {need * UPDATE_FACTOR} in the Service Quotas console, or: aws service-quotas "
            f"request-service-quota-increase --service-code {QUOTA_SERVICE} --quota-code {quota.code} "
            f"--desired-value {need * UPDATE_FACTOR} --region {region}"
        )
        if value < need:
            checks.append(
                Check(
                    name,
                    False,
                    (
                        f"{where}, but the endpoints need {need} instances at peak (max(instance_count, "
                        f"autoscaling.max_capacity): {who}); the deploy would fail. Lower instance_count/max_capacity or {ask}"
                    ),
                )
            )
        elif value < need * UPDATE_FACTOR:
            checks.append(
                Check(
                    name,
                    False,
                    (
                        f"{where}: enough for {who} to run ({need}), but not for an update, which runs the old and the "
                        f"new fleet together ({need * UPDATE_FACTOR}); the next update would fail. {ask[0].upper()}{ask[1:]}"
                    ),
                )
            )
        else:
            checks.append(Check(name, True, f"{value} >= {need * UPDATE_FACTOR} ({who}, x{UPDATE_FACTOR} for updates)"))
    return checks


def _expected_hash(deployment: Any, ep: Any, build_root: Path) -> tuple[str | None, str]:
    """(content hash the stack deploys, where it came from) or (None, what to do)."""
    if ep.artifact_hash:
        return ep.artifact_hash, "the config's artifact_hash"
    path = build_root / ep.name / "manifest.json"
    if not path.is_file():
        return None, (
            f"no local build ({path} does not exist) and no artifact_hash pin: build it with `python -m "
            f"model_build build --config {deployment.config_path} --env {deployment.environment_name} "
            f"--endpoint {ep.name}`, or pin a published artifact with artifact_hash"
        )
    try:
        content_hash = json.loads(path.read_text()).get("content_hash")
    except (OSError, json.JSONDecodeError) as err:
        return None, f"{path} is not readable JSON ({err}); rebuild the endpoint"
    if not isinstance(content_hash, str) or len(content_hash) != 64:
        return None, f"{path} has no content_hash; rebuild the endpoint"
    return content_hash, str(path)


def artifact_checks(deployment: Any, s3: Any, account: str, region: str, build_root: Path) -> list[Check]:
    from botocore.exceptions import BotoCoreError, ClientError

    from endpoint_config import artifact_bucket_name, artifact_prefix

    bucket = artifact_bucket_name(deployment.project, deployment.environment_name, account, region)
    checks = []
    for ep in deployment.endpoints:
        name = f"artifact {ep.name}"
        want, source = _expected_hash(deployment, ep, build_root)
        if want is None:
            checks.append(Check(name, False, source))
            continue
        key = artifact_prefix(ep.name, want) + "manifest.json"
        publish = (
            f"python -m model_build publish --config {deployment.config_path} --env "
            f"{deployment.environment_name} --endpoint {ep.name}"
        )
        try:
            body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        except ClientError as err:
            code = err.response.get("Error", {}).get("Code", "")
            if code == "NoSuchBucket":
                msg = (
                    f"artifact bucket {bucket} does not exist: deploy the artifacts stack first (npx cdk deploy -c "
                    f"config={deployment.config_path} -c env={deployment.environment_name} "
                    f"{deployment.stack_name('artifacts')}), then `{publish}`"
                )
            elif code in ("NoSuchKey", "404", "NotFound"):
                msg = (
                    f"s3://{bucket}/{key} does not exist: the artifact {want[:12]}... (from {source}) is not "
                    f"published (or its publish did not finish); run `{publish}`"
                )
            else:
                msg = f"cannot read s3://{bucket}/{key}: {_aws_message(err)}"
            checks.append(Check(name, False, msg))
            continue
        except BotoCoreError as err:
            checks.append(Check(name, False, f"cannot read s3://{bucket}/{key}: {_aws_message(err)}"))
            continue
        try:
            published = json.loads(body).get("content_hash")
        except (ValueError, AttributeError):
            published = None
        if published != want:
            checks.append(
                Check(
                    name,
                    False,
                    (
                        f"s3://{bucket}/{key} holds content hash {str(published)[:12]}..., not {want[:12]}... (from {source}): "
                        f"the published manifest is damaged or was overwritten; run `{publish}` again"
                    ),
                )
            )
        else:
            checks.append(Check(name, True, f"s3://{bucket}/{key} matches {source}"))
    return checks


def _known_regions(session: Any) -> set[str]:
    regions: set[str] = set()
    for partition in session.get_available_partitions():
        regions.update(session.get_available_regions("sagemaker", partition_name=partition))
    return regions


def run_preflight(deployment: Any, session: Any = None, *, build_root: Path | str = BUILD_ROOT) -> list[Check]:
    """Every pre-flight check of a resolved config (`endpoint_config.Deployment`). Never raises for AWS errors:
    each is a failed check. Later checks that need the credentials or the region are left out when those fail."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    env, env_name = deployment.environment, deployment.environment_name
    session = session or boto3.session.Session(region_name=env.region)
    checks: list[Check] = []

    region = env.region or session.region_name
    if not region:
        checks.append(
            Check(
                "region",
                False,
                f"no AWS region: set `region:` on environment {env_name!r} in the "
                "config, or AWS_DEFAULT_REGION / a profile's region",
            )
        )
        return checks
    if region not in _known_regions(session):
        checks.append(
            Check(
                "region",
                False,
                f"{region} is not a SageMaker region known to botocore "
                f"{__import__('botocore').__version__}: fix the region (or upgrade botocore "
                "if the region is new)",
            )
        )
        return checks
    checks.append(Check("region", True, region + ("" if env.region else " (from the AWS CLI settings)")))

    try:
        identity = session.client("sts", region_name=region).get_caller_identity()
    except NoCredentialsError:
        checks.append(
            Check(
                "credentials",
                False,
                "no AWS credentials: configure a profile (AWS_PROFILE, aws sso "
                "login) or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY",
            )
        )
        return checks
    except (ClientError, BotoCoreError) as err:
        checks.append(
            Check(
                "credentials",
                False,
                f"the credentials do not work (sts get-caller-identity: "
                f"{_aws_message(err)}); refresh them (aws sso login, new keys)",
            )
        )
        return checks
    account = identity["Account"]
    if env.account and env.account != account:
        checks.append(
            Check(
                "credentials",
                False,
                (
                    f"environment {env_name!r} is account {env.account}, but the credentials are account {account} "
                    f"({identity.get('Arn')}); use credentials of {env.account}, or change `account:` in the config"
                ),
            )
        )
        return checks
    checks.append(Check("credentials", True, f"account {account} ({identity.get('Arn')})"))

    if env.emulator:
        for instance_type in sorted(_needed_by_type(deployment)):
            checks.append(
                Check(
                    f"quota {instance_type}",
                    True,
                    "not checked: the local emulator has no SageMaker quotas",
                    skipped=True,
                )
            )
    else:
        try:
            quotas = endpoint_quotas(session.client("service-quotas", region_name=region))
        except (ClientError, BotoCoreError) as err:
            checks.append(
                Check(
                    "quotas",
                    False,
                    (
                        f"cannot read the SageMaker quotas of {region} ({_aws_message(err)}): allow "
                        "servicequotas:ListServiceQuotas and servicequotas:ListAWSDefaultServiceQuotas, or check "
                        "'<instance type> for endpoint usage' in the Service Quotas console yourself"
                    ),
                )
            )
        else:
            checks += quota_checks(deployment, quotas, region)

    checks += kept_data_checks(deployment, session, account, region)
    checks += instance_change_checks(deployment, session, region)
    checks += artifact_checks(deployment, session.client("s3", region_name=region), account, region, Path(build_root))
    return checks


def _stack_exists(cfn: Any, name: str) -> bool:
    from botocore.exceptions import ClientError

    try:
        stacks = cfn.describe_stacks(StackName=name)["Stacks"]
    except ClientError:  # "Stack with id ... does not exist"
        return False
    return bool(stacks) and stacks[0]["StackStatus"] != "DELETE_COMPLETE"


def kept_data_checks(deployment: Any, session: Any, account: str, region: str) -> list[Check]:
    """The artifact bucket and image repository against the artifact stack: kept outside any stack after a destroy
    (retain_data), they must be adopted (adopt_kept_data: true), or creating them again fails ("already exists")."""
    from botocore.exceptions import ClientError

    from endpoint_config import artifact_bucket_name, image_repository_name

    env, env_name = deployment.environment, deployment.environment_name
    stack = deployment.stack_name("artifacts")
    if _stack_exists(session.client("cloudformation", region_name=region), stack):
        return [Check("kept data", True, f"{stack} is deployed: its bucket and repository are in place")]
    bucket = artifact_bucket_name(deployment.project, env_name, account, region)
    repository = image_repository_name(deployment.project, env_name)
    kept = []
    try:
        session.client("s3", region_name=region).head_bucket(Bucket=bucket)
        kept.append(f"bucket {bucket}")
    except ClientError:
        pass
    try:
        session.client("ecr", region_name=region).describe_repositories(repositoryNames=[repository])
        kept.append(f"repository {repository}")
    except ClientError:
        pass
    where = f"environment {env_name!r} in {deployment.config_path}"
    if kept and not env.adopt_kept_data:
        return [Check("kept data", False, (
            f"{' and '.join(kept)} were kept by an earlier deploy (retain_data: true) and belong to no stack, so "
            f"creating {stack} again would fail (already exists): set `adopt_kept_data: true` on {where} to use "
            "them as they are (README: Clean-up), or delete them if their contents are no longer wanted"
        ))]
    if env.adopt_kept_data and len(kept) < 2:
        missing = [name for name in (f"bucket {bucket}", f"repository {repository}") if name not in kept]
        return [Check("kept data", False, (
            f"adopt_kept_data: true on {where}, but {' and '.join(missing)} do not exist: remove adopt_kept_data to "
            "create them"
        ))]
    if kept:
        return [Check("kept data", True, f"adopting the kept {' and '.join(kept)}")]
    return [Check("kept data", True, "nothing kept from an earlier deploy: the artifact stack creates them")]


def instance_change_checks(deployment: Any, session: Any, region: str) -> list[Check]:
    """An autoscaled endpoint whose deployed instance type differs from the config's: SageMaker refuses an
    UpdateEndpoint that changes the instance type of a variant registered with Application Auto Scaling
    ("If the update would change the instance type for any model that is a target for auto scaling, the update
    fails", https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-scaling-update.html). Removing the stack's
    scaling resources first deregisters the variant; a second deploy changes the type and registers it again."""
    from botocore.exceptions import ClientError

    sm = session.client("sagemaker", region_name=region)
    scaling = session.client("application-autoscaling", region_name=region)
    checks = []
    for ep in deployment.endpoints:
        name = deployment.endpoint_name(ep)
        try:
            config_name = sm.describe_endpoint(EndpointName=name)["EndpointConfigName"]
            variants = sm.describe_endpoint_config(EndpointConfigName=config_name)["ProductionVariants"]
        except ClientError:
            continue  # not deployed yet: nothing to update
        deployed = {v.get("InstanceType") for v in variants} - {None}
        if not deployed or deployed == {ep.instance_type}:
            continue
        registered = scaling.describe_scalable_targets(
            ServiceNamespace="sagemaker", ResourceIds=[f"endpoint/{name}/variant/{v['VariantName']}" for v in variants]
        )["ScalableTargets"]
        if not registered:
            checks.append(Check(f"instance {ep.name}", True, f"{', '.join(sorted(deployed))} -> {ep.instance_type}"))
            continue
        checks.append(Check(f"instance {ep.name}", False, (
            f"endpoint {name} runs {', '.join(sorted(deployed))} and is registered with Application Auto Scaling; "
            f"SageMaker refuses to change its instance type to {ep.instance_type} while it is. Deploy in two steps: "
            f"(1) set `autoscaling: null` for endpoint {ep.name!r} (keep instance_type {sorted(deployed)[0]}) and "
            f"deploy, which deregisters it; (2) set instance_type {ep.instance_type} and autoscaling back, and deploy"
        )))
    return checks
