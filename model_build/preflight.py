"""Pre-flight checks before `cdk deploy`: `python -m model_build preflight --config PATH [--env ENV]`.

Checks what CloudFormation only finds out after minutes: credentials, region, quota <type>, artifact <e>, kept data,
instance <e>, mode <e>; each failure says what to change. `emulator: true` skips the quota checks.
What each check asks AWS, and why: docs/design/cli.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from endpoint_runtime.smoke import Check, aws_message, format_checks
from model_build.replacement import stack_templates

if TYPE_CHECKING:
    from deployment import EndpointPlan, EnvironmentPlan

QUOTA_SERVICE = "sagemaker"
QUOTA_NAME = "{instance_type} for endpoint usage"

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


def _needed_by_type(environment_plan: EnvironmentPlan) -> dict[str, list[tuple[Any, Any]]]:
    """Each instance type's endpoints with their quota needs of it (EndpointPlan.quotas: instance_type's and every
    instance pool's)."""
    by_type: dict[str, list[tuple[Any, Any]]] = {}
    for plan in environment_plan.plans:
        for need in plan.quotas:
            by_type.setdefault(need.instance_type, []).append((plan, need))
    return by_type


def quota_checks(environment_plan: EnvironmentPlan, quotas: dict[str, Quota], region: str) -> list[Check]:
    checks = []
    for instance_type, needs in sorted(_needed_by_type(environment_plan).items()):
        plans = [plan for plan, _ in needs]
        name = f"quota {instance_type}"
        quota_name = QUOTA_NAME.format(instance_type=instance_type)
        need = sum(q.peak for _, q in needs)
        running = sum(q.steady for _, q in needs)
        who = "; ".join(f"{p.name}: {q.peak} ({q.basis})" for p, q in needs)
        quota = quotas.get(quota_name)
        if quota is None:
            # The instance type's facts, parsed where the config named it (instance_type or an instance pool).
            family = next(
                s.instance.family
                for p in plans
                for s in (p.spec, *(q.spec for q in p.pools))
                if s.instance_type == instance_type
            )
            offered = sorted(q[: -len(" for endpoint usage")] for q in quotas if q.startswith(f"ml.{family}."))
            hint = f"; offered in that family: {', '.join(offered[:8])}" if offered else ""
            primary = all(p.instance_type == instance_type for p in plans)
            key = "instance_type" if primary else "instance_type or instance_pools"
            checks.append(
                Check(
                    name,
                    False,
                    (
                        f"{instance_type} is not offered for SageMaker endpoints in {region} (no quota {quota_name!r}); "
                        f"change {key} of {', '.join(dict.fromkeys(p.name for p in plans))} or the environment's "
                        f"region{hint}"
                    ),
                )
            )
            continue
        value = int(quota.value)
        where = f"quota {quota_name!r} ({quota.code}) is {value} in {region}" + (
            "" if quota.applied else " (AWS default)"
        )
        fallback_only = not any(p.instance_type == instance_type for p in plans)

        def fails(what: str) -> str:
            # Only an instance pool's type: SageMaker falls back to it when the types before it have no capacity.
            return f"{what} would fail" + (" when it falls back to this instance pool" if fallback_only else "")

        ask = (
            f"request at least {need} in the Service Quotas console, or: aws service-quotas "
            f"request-service-quota-increase --service-code {QUOTA_SERVICE} --quota-code {quota.code} "
            f"--desired-value {need} --region {region}"
        )
        if value < running:
            checks.append(
                Check(
                    name,
                    False,
                    (
                        f"{where}, but the endpoints run up to {running} instances ({who}); {fails('the deploy')}. "
                        f"Lower instance_count/max_capacity or {ask}"
                    ),
                )
            )
        elif value < need:
            checks.append(
                Check(
                    name,
                    False,
                    (
                        f"{where}: enough to run ({running}), but not for an update, which needs {need} at its peak ({who}); "
                        f"{fails('the next update')} (deployment.rolling with rollback_maximum_batch_size needs fewer). "
                        f"{ask[0].upper()}{ask[1:]}"
                    ),
                )
            )
        else:
            checks.append(Check(name, True, f"{value} >= {need} at peak ({who})"))
    return checks


def artifact_checks(environment_plan: EnvironmentPlan, s3: Any, account: str, region: str) -> list[Check]:
    from botocore.exceptions import BotoCoreError, ClientError

    bucket = environment_plan.artifact_bucket(account, region)
    checks = []
    # Each endpoint's artifact, then each of its LoRA adapters' (published by the same `publish` command).
    # A hub model (model_source:) has no artifact in the bucket: SageMaker reads the hub's prefix (its access is
    # HubAccessConfig's, checked by CreateModel).
    targets = [
        (f"artifact {plan.name}", plan.name, plan.artifact, plan.manifest_key)
        for plan in environment_plan.plans
        if not plan.artifact.from_hub
    ]
    targets += [
        (f"artifact {plan.name} adapter {a.name}", plan.name, a.artifact, a.manifest_key)
        for plan in environment_plan.plans
        for a in plan.adapters
    ]
    for name, endpoint, artifact, key in targets:
        if artifact.problem is not None:
            checks.append(Check(name, False, artifact.problem))
            continue
        want = artifact.content_hash
        source = "the config's artifact_hash" if artifact.source == "config" else "the local build"
        publish = (
            f"python -m model_build publish --config {environment_plan.config_path} --env "
            f"{environment_plan.environment_name} --endpoint {endpoint}"
        )
        try:
            body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        except ClientError as err:
            code = err.response.get("Error", {}).get("Code", "")
            if code == "NoSuchBucket":
                msg = (
                    f"artifact bucket {bucket} does not exist: deploy the artifacts stack first (npx cdk deploy -c "
                    f"config={environment_plan.config_path} -c env={environment_plan.environment_name} "
                    f"{environment_plan.stack_name('artifacts')}), then `{publish}`"
                )
            elif code in ("NoSuchKey", "404", "NotFound"):
                msg = (
                    f"s3://{bucket}/{key} does not exist: the artifact {want[:12]}... (from {source}) is not "
                    f"published (or its publish did not finish); run `{publish}`"
                )
            else:
                msg = f"cannot read s3://{bucket}/{key}: {aws_message(err)}"
            checks.append(Check(name, False, msg))
            continue
        except BotoCoreError as err:
            checks.append(Check(name, False, f"cannot read s3://{bucket}/{key}: {aws_message(err)}"))
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


def run_preflight(
    environment_plan: EnvironmentPlan, session: Any = None, *, assembly: Path | None = None, only_updates: bool = False
) -> list[Check]:
    """Every pre-flight check of a resolved config (`deployment.EnvironmentPlan`). Never raises for AWS errors:
    each is a failed check. Later checks that need the credentials or the region are left out when those fail.
    `assembly`: the synthesized cloud assembly about to be deployed; with it, the update checks compare each deployed
    stack's template with the synthesized one (what CloudFormation would replace). `only_updates`: region,
    credentials, the update checks and the Lambda concurrency check only (the pipeline's Preflight step, whose role
    may read no more)."""
    import boto3

    env = environment_plan.environment
    session = session or boto3.session.Session(region_name=env.region)
    checks: list[Check] = []
    region = _region_check(checks, environment_plan, session)
    if region is None:
        return checks
    account = _credentials_check(checks, environment_plan, session, region)
    if account is None:
        return checks

    templates = stack_templates(assembly) if assembly is not None else None
    if only_updates:
        checks += update_checks(environment_plan, session, region, templates)
        # The pipeline's Preflight step too (operations review F10: it returned before this check, so a pipeline
        # deploy met Lambda's refusal in CloudFormation). Its role may read exactly these calls
        # (stacks/artifact_store.py _preflight_role).
        if not env.emulator:
            checks += lambda_concurrency_checks(environment_plan, session, region)
        return checks
    checks += _quota_checks_of(environment_plan, session, region)
    if not env.emulator:  # moto's Lambda has no account's quotas to read
        checks += lambda_concurrency_checks(environment_plan, session, region)
    checks += kept_data_checks(environment_plan, session, account, region)
    checks += update_checks(environment_plan, session, region, templates)
    checks += artifact_checks(environment_plan, session.client("s3", region_name=region), account, region)
    return checks


def _region_check(checks: list[Check], environment_plan: EnvironmentPlan, session: Any) -> str | None:
    """Appends the region check; the region, or None when there is none SageMaker knows."""
    env, env_name = environment_plan.environment, environment_plan.environment_name
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
        return None
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
        return None
    checks.append(Check("region", True, region + ("" if env.region else " (from the AWS CLI settings)")))
    return region


def _credentials_check(checks: list[Check], environment_plan: EnvironmentPlan, session: Any, region: str) -> str | None:
    """Appends the credentials check; the account, or None when the credentials fail or are another account's."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    env, env_name = environment_plan.environment, environment_plan.environment_name
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
        return None
    except (ClientError, BotoCoreError) as err:
        checks.append(
            Check(
                "credentials",
                False,
                f"the credentials do not work (sts get-caller-identity: "
                f"{aws_message(err)}); refresh them (aws sso login, new keys)",
            )
        )
        return None
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
        return None
    checks.append(Check("credentials", True, f"account {account} ({identity.get('Arn')})"))
    return account


def _quota_checks_of(environment_plan: EnvironmentPlan, session: Any, region: str) -> list[Check]:
    """The instance quota checks (skipped in the emulator, which has no quotas)."""
    from botocore.exceptions import BotoCoreError, ClientError

    if environment_plan.environment.emulator:
        return [
            Check(
                f"quota {instance_type}",
                True,
                "not checked: the local emulator has no SageMaker quotas",
                skipped=True,
            )
            for instance_type in sorted(_needed_by_type(environment_plan))
        ]
    try:
        quotas = endpoint_quotas(session.client("service-quotas", region_name=region))
    except (ClientError, BotoCoreError) as err:
        return [
            Check(
                "quotas",
                False,
                (
                    f"cannot read the SageMaker quotas of {region} ({aws_message(err)}): allow "
                    "servicequotas:ListServiceQuotas and servicequotas:ListAWSDefaultServiceQuotas, or check "
                    "'<instance type> for endpoint usage' in the Service Quotas console yourself"
                ),
            )
        ]
    return quota_checks(environment_plan, quotas, region)


# "You can reserve concurrency for as many functions as you like, as long as you leave at least 100 simultaneous
# executions unreserved for functions that aren't configured with a per-function limit" (botocore 1.44.8 lambda
# model, PutFunctionConcurrency); "New AWS accounts have reduced concurrency and memory quotas" (Lambda Developer
# Guide, Lambda quotas). CloudFormation then fails to create the function and the stack rolls back (review R4).
MIN_UNRESERVED_CONCURRENCY = 100


def reserved_concurrency(environment_plan: EnvironmentPlan) -> list[tuple[str, int]]:
    """(what, executions) for every function of the deployment that reserves concurrency: the invoke function's
    invoke_function.reserved_concurrency, the stream function's streaming.reserved_concurrency (the cap a public
    stream URL must have)."""
    wanted = []
    for plan in environment_plan.plans:
        spec = plan.spec
        if spec.invoke_function.reserved_concurrency:
            wanted.append((f"{spec.name} invoke_function", spec.invoke_function.reserved_concurrency))
        if spec.streaming.enabled and spec.streaming.reserved_concurrency:
            wanted.append((f"{spec.name} streaming", spec.streaming.reserved_concurrency))
    return wanted


def lambda_concurrency_checks(environment_plan: EnvironmentPlan, session: Any, region: str) -> list[Check]:
    """The account's unreserved Lambda concurrency after this deploy's reservations (less what this deployment's
    stacks reserve already, which an update keeps) must stay at MIN_UNRESERVED_CONCURRENCY or more."""
    from botocore.exceptions import BotoCoreError, ClientError

    wanted = reserved_concurrency(environment_plan)
    if not wanted:
        return []
    name = "lambda concurrency"
    client = session.client("lambda", region_name=region)
    try:
        limit = client.get_account_settings()["AccountLimit"]
        held = sum(_reserved_now(session, client, plan.stack_name, region) for plan in environment_plan.plans)
    except (ClientError, BotoCoreError) as err:
        return [
            Check(
                name,
                False,
                f"cannot read the account's Lambda concurrency in {region} ({aws_message(err)}): allow "
                "lambda:GetAccountSettings and lambda:GetFunctionConcurrency, or check 'Concurrent executions' in "
                "the Service Quotas console yourself",
            )
        ]
    total, unreserved = limit.get("ConcurrentExecutions", 0), limit.get("UnreservedConcurrentExecutions", 0)
    need = sum(n for _, n in wanted)
    left = unreserved + held - need
    who = ", ".join(f"{what} {n}" for what, n in wanted)
    if left < MIN_UNRESERVED_CONCURRENCY:
        return [
            Check(
                name,
                False,
                f"the account's Lambda concurrency in {region} is {total}, {unreserved} unreserved; this deploy "
                f"reserves {need} ({who}), which would leave {left}, below the {MIN_UNRESERVED_CONCURRENCY} Lambda "
                "keeps unreserved (PutFunctionConcurrency), so creating the function would fail and the stack roll "
                f"back. Lower those reserved_concurrency values to at most {max(0, unreserved + held - 100)} in all, "
                "use streaming.auth: iam (no reservation needed), or ask for more: AWS Lambda quota 'Concurrent "
                "executions' in the Service Quotas console (new accounts start with reduced concurrency)",
            )
        ]
    return [Check(name, True, f"{unreserved} unreserved of {total}; {need} reserved here ({who}) leaves {left}")]


def _reserved_now(session: Any, client: Any, stack_name: str, region: str) -> int:
    """What the stack's functions reserve today (0 when the stack does not exist)."""
    from botocore.exceptions import ClientError

    cfn = session.client("cloudformation", region_name=region)
    try:
        pages = cfn.get_paginator("list_stack_resources").paginate(StackName=stack_name)
        functions = [
            r["PhysicalResourceId"]
            for page in pages
            for r in page["StackResourceSummaries"]
            if r["ResourceType"] == "AWS::Lambda::Function" and r.get("PhysicalResourceId")
        ]
    except ClientError as err:
        if "does not exist" in str(err):
            return 0
        raise
    return sum(
        client.get_function_concurrency(FunctionName=f).get("ReservedConcurrentExecutions", 0) for f in functions
    )


def _stack_exists(cfn: Any, name: str) -> bool:
    from botocore.exceptions import ClientError

    try:
        stacks = cfn.describe_stacks(StackName=name)["Stacks"]
    except ClientError:  # "Stack with id ... does not exist"
        return False
    return bool(stacks) and stacks[0]["StackStatus"] != "DELETE_COMPLETE"


def kept_data_checks(environment_plan: EnvironmentPlan, session: Any, account: str, region: str) -> list[Check]:
    """The artifact bucket and image repository against the artifact stack: kept outside any stack after a destroy
    (retain_data), they must be adopted (adopt_kept_data: true), or creating them again fails ("already exists")."""
    from botocore.exceptions import ClientError

    env, env_name = environment_plan.environment, environment_plan.environment_name
    stack = environment_plan.stack_name("artifacts")
    if _stack_exists(session.client("cloudformation", region_name=region), stack):
        return [Check("kept data", True, f"{stack} is deployed: its bucket and repository are in place")]
    bucket = environment_plan.artifact_bucket(account, region)
    repository = environment_plan.image_repository
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
    where = f"environment {env_name!r} in {environment_plan.config_path}"
    if kept and not env.adopt_kept_data:
        return [
            Check(
                "kept data",
                False,
                (
                    f"{' and '.join(kept)} were kept by an earlier deploy (retain_data: true) and belong to no stack, so "
                    f"creating {stack} again would fail (already exists): set `adopt_kept_data: true` on {where} to use "
                    "them as they are (docs/deploy.md, Clean-up), or delete them if their contents are no longer wanted"
                ),
            )
        ]
    if env.adopt_kept_data and len(kept) < 2:
        missing = [name for name in (f"bucket {bucket}", f"repository {repository}") if name not in kept]
        return [
            Check(
                "kept data",
                False,
                (
                    f"adopt_kept_data: true on {where}, but {' and '.join(missing)} do not exist: remove adopt_kept_data to "
                    "create them"
                ),
            )
        ]
    if kept:
        return [Check("kept data", True, f"adopting the kept {' and '.join(kept)}")]
    return [Check("kept data", True, "nothing kept from an earlier deploy: the artifact stack creates them")]


def update_checks(
    environment_plan: EnvironmentPlan, session: Any, region: str, templates: dict[str, Path] | None = None
) -> list[Check]:
    """What an update of each deployed endpoint would change that SageMaker refuses (mode_problem) or refuses while
    the variant autoscales (instance_change_problem), and, given the synthesized `templates` (stack name -> file),
    any replacement of a component endpoint's config (component_config_problem). Endpoints not deployed yet have
    nothing to update."""
    from botocore.exceptions import ClientError

    from model_build.clean import not_found

    sm = session.client("sagemaker", region_name=region)
    scaling = session.client("application-autoscaling", region_name=region)
    checks = []
    for plan in environment_plan.plans:
        try:
            config_name = sm.describe_endpoint(EndpointName=plan.endpoint_name)["EndpointConfigName"]
            config = sm.describe_endpoint_config(EndpointConfigName=config_name)
        except ClientError as err:
            if not_found(err):
                continue  # not deployed yet: nothing to update
            # any other refusal (access denied, throttling) leaves the update unchecked: say so, never pass it
            error = err.response.get("Error", {})
            checks.append(
                Check(
                    f"update {plan.name}",
                    False,
                    f"cannot read the deployed endpoint {plan.endpoint_name} "
                    f"({error.get('Code')}: {error.get('Message')}), so whether SageMaker accepts this update "
                    "in place is unchecked; fix the credentials' sagemaker:DescribeEndpoint and "
                    "DescribeEndpointConfig, or retry",
                )
            )
            continue
        problem = mode_problem(plan, config)
        if problem is None:
            problem = instance_change_problem(plan, config, scaling)
        if problem is None and templates is not None and _hosts_components(config):
            problem = component_config_problem(plan, session, region, templates)
        if problem is not None:
            checks.append(Check(f"update {plan.name}", False, problem))
    return checks


def _hosts_components(deployed: dict[str, Any]) -> bool:
    variants = deployed.get("ProductionVariants", [])
    return bool(variants) and not any(v.get("ModelName") for v in variants)


def component_config_problem(plan: EndpointPlan, session: Any, region: str, templates: dict[str, Path]) -> str | None:
    """Why deploying the synthesized template over the deployed one would replace the endpoint config of this
    component endpoint (every create-only property of AWS::SageMaker::EndpointConfig in cfn-lint's schema, and what
    they name: model_build/replacement.py), or None. mode_problem explains why that is refused."""
    from botocore.exceptions import BotoCoreError, ClientError

    from model_build.replacement import TemplateDiff

    path = templates.get(plan.stack_name)
    if path is None:
        return f"the synthesized assembly has no stack {plan.stack_name}: cannot tell what its deploy would replace"
    try:
        body = session.client("cloudformation", region_name=region).get_template(
            StackName=plan.stack_name, TemplateStage="Original"
        )["TemplateBody"]
    except (ClientError, BotoCoreError) as err:
        if "does not exist" in str(err):
            return None  # the endpoint exists without this stack: nothing of the stack's to replace
        return (
            f"cannot read the deployed template of stack {plan.stack_name} ({aws_message(err)}), so whether this "
            "deploy replaces the component endpoint's config is unchecked; allow cloudformation:GetTemplate, or retry"
        )
    deployed = body if isinstance(body, dict) else json.loads(body)
    replaced = TemplateDiff(deployed, json.loads(path.read_text())).replacements("AWS::SageMaker::EndpointConfig")
    if not replaced:
        return None
    what = "; ".join(change for r in replaced for change in r.changes)
    return (
        f"endpoint {plan.endpoint_name} hosts inference components and this deploy replaces its endpoint config "
        f"({what}); updating the endpoint config of a component endpoint is not documented by AWS and refused by the "
        f"AWS SDK (unverified in an account): destroy stack {plan.stack_name} and deploy it again (the endpoint is "
        "unavailable in between), or deploy the new setting under a new endpoint name and move the clients"
    )


def mode_problem(plan: EndpointPlan, deployed: dict[str, Any]) -> str | None:
    """Why updating the deployed endpoint config `deployed` to the plan cannot work in place, or None.

    - real-time <-> async: "The AsyncInferenceConfig parameter cannot be removed from this endpoint" (SageMaker's
      ValidationException quoted in aws/sagemaker-python-sdk PR #3124); adding it to a real-time endpoint is the same
      kind of change of the endpoint's type (async-inference.html: an endpoint with AsyncInferenceConfig "can only
      receive asynchronous invocations").
    - model on the variant <-> inference components: the two endpoint configs differ in kind (a variant with a model
      vs one without and an ExecutionRoleArn); no AWS source documents UpdateEndpoint between them.
    - an inference-component endpoint whose endpoint config changes (instance type, count, scaling range, routing,
      AMI, volume): the AWS SDK refuses that path ("Currently update_endpoint is supported for single model
      endpoints", sagemaker-serve model_builder.py) and no AWS page documents it: unverified, refused until an
      account shows it works. A new model alone updates the component, not the endpoint config, and is allowed."""
    redeploy = (
        f"destroy stack {plan.stack_name} and deploy it again (the endpoint is unavailable in between), or deploy the "
        "new setting under a new endpoint name and move the clients"
    )
    deployed_async = "AsyncInferenceConfig" in deployed
    if deployed_async != plan.is_async:
        was, now = ("asynchronous", "real-time") if deployed_async else ("real-time", "asynchronous")
        return (
            f"endpoint {plan.endpoint_name} is deployed {was}; SageMaker cannot update it to {now} "
            f"(invocation.mode) in place: {redeploy}"
        )
    variants = deployed.get("ProductionVariants", [])
    deployed_components = bool(variants) and not any(v.get("ModelName") for v in variants)
    if deployed_components != (plan.component_name is not None):
        was, now = ("inference-components", "endpoint") if deployed_components else ("endpoint", "inference-components")
        return (
            f"endpoint {plan.endpoint_name} is deployed with hosting.mode {was}; changing it to {now} in place is "
            f"not an update SageMaker documents: {redeploy}"
        )
    if deployed_components and variants:
        spec, variant = plan.spec, variants[0]
        scaling = variant.get("ManagedInstanceScaling") or {}
        wanted = spec.hosting.instance_scaling
        changes = [
            (key, have, want)
            for key, have, want in (
                ("instance_type", variant.get("InstanceType"), spec.instance_type),
                ("instance_count", variant.get("InitialInstanceCount"), spec.instance_count),
                (
                    "hosting.instance_scaling.min_instances",
                    scaling.get("MinInstanceCount"),
                    wanted.min_instances if wanted else 1,
                ),
                (
                    "hosting.instance_scaling.max_instances",
                    scaling.get("MaxInstanceCount"),
                    wanted.max_instances if wanted else 1,
                ),
                ("volume_size_gb", variant.get("VolumeSizeInGB"), spec.volume_size_gb),
                ("inference AMI", variant.get("InferenceAmiVersion"), plan.inference_ami_version),
            )
            if have != want
        ]
        if changes:
            what = ", ".join(f"{key} {have!r} -> {want!r}" for key, have, want in changes)
            return (
                f"endpoint {plan.endpoint_name} hosts inference components and this deploy changes its endpoint "
                f"config ({what}); updating the endpoint config of a component endpoint is not documented by AWS "
                f"and refused by the AWS SDK (unverified in an account): {redeploy}"
            )
    return None


def instance_change_problem(plan: EndpointPlan, deployed: dict[str, Any], scaling: Any) -> str | None:
    """An autoscaled endpoint whose deployed instance type differs from the config's: SageMaker refuses an
    UpdateEndpoint that changes the instance type of a variant registered with Application Auto Scaling
    ("If the update would change the instance type for any model that is a target for auto scaling, the update
    fails", https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-scaling-update.html). Removing the stack's
    scaling resources first deregisters the variant; a second deploy changes the type and registers it again.
    With instance pools the variant's types are its InstancePools in priority order: whether SageMaker refuses a
    change of the pools of a scaled variant as it does a change of InstanceType is not documented (unverified), so
    it is treated alike."""
    variants = deployed.get("ProductionVariants", [])
    deployed_types = [_variant_types(v) for v in variants]
    wanted = (plan.instance_type, *(p.instance_type for p in plan.pools))
    if not any(deployed_types) or all(t == wanted for t in deployed_types):
        return None
    types = {", then ".join(t) for t in deployed_types if t}
    registered = scaling.describe_scalable_targets(
        ServiceNamespace="sagemaker",
        ResourceIds=[f"endpoint/{plan.endpoint_name}/variant/{v['VariantName']}" for v in variants],
    )["ScalableTargets"]
    if not registered:
        return None
    if len(wanted) == 1 and all(len(t) == 1 for t in deployed_types if t):
        return (
            f"endpoint {plan.endpoint_name} runs {', '.join(sorted(types))} and is registered with Application Auto "
            f"Scaling; SageMaker refuses to change its instance type to {plan.instance_type} while it is. Deploy "
            f"in two steps: (1) set `autoscaling: null` for endpoint {plan.name!r} (keep instance_type "
            f"{sorted(types)[0]}) and deploy, which deregisters it; (2) set instance_type {plan.instance_type} and "
            "autoscaling back, and deploy"
        )
    return (
        f"endpoint {plan.endpoint_name} runs instance types {'; '.join(sorted(types))} (in priority order) and is "
        f"registered with Application Auto Scaling; this deploy changes them to {', then '.join(wanted)}, which "
        "SageMaker refuses for an instance type of a scaled variant (for instance pools: unverified, treated alike). "
        f"Deploy in two steps: (1) set `autoscaling: null` for endpoint {plan.name!r} (keep instance_type and "
        "instance_pools as deployed) and deploy, which deregisters it; (2) set the new instance_type and "
        "instance_pools and autoscaling back, and deploy"
    )


def _variant_types(variant: dict[str, Any]) -> tuple[str, ...]:
    """A deployed variant's instance types: its InstancePools in priority order, else its InstanceType."""
    pools = sorted(variant.get("InstancePools") or [], key=lambda p: p.get("Priority", 0))
    if pools:
        return tuple(p["InstanceType"] for p in pools)
    return (variant["InstanceType"],) if variant.get("InstanceType") else ()
