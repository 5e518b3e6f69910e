"""CDK stacks: the artifact store and one stack per endpoint, wired from one resolved config."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path

from aws_cdk import Aspects, Aws, Environment, Stack, Tags
from constructs import Construct

from deployment import EnvironmentPlan

from .artifact_store import ArtifactStoreStack
from .custom_resources import CustomResourceTimeouts
from .endpoint_alarms import EnvironmentDashboard, dashboard_endpoints
from .endpoint_network import BucketKeyRef
from .endpoint_stack import EndpointStack
from .llm_endpoint import VARIANT_NAME
from .nag import add_nag_checks
from .trusted_pipeline import TrustedPipeline


def stack_environment(environment_plan: EnvironmentPlan) -> Environment:
    """Account and region from the config, else from the CDK CLI's defaults (CDK_DEFAULT_ACCOUNT/REGION), else
    unset: environment-agnostic stacks, or inside a `Stage` the stage's environment."""
    env_spec = environment_plan.environment
    return Environment(
        account=env_spec.account or os.environ.get("CDK_DEFAULT_ACCOUNT"),
        region=env_spec.region or os.environ.get("CDK_DEFAULT_REGION"),
    )


def publish_command(environment_plan: EnvironmentPlan, endpoint: str) -> str:
    """The one command that publishes `endpoint`'s artifacts (model and adapters) for this environment, as the user
    runs it from where the CDK CLI ran app.py (the repository root): the config path relative to it when inside it,
    else as given. The artifact check names it, so a user who ran a plain `cdk deploy` first learns what to run."""
    path = Path(environment_plan.config_path)
    if path.is_absolute():
        try:
            path = path.relative_to(Path.cwd())
        except ValueError:
            pass  # outside the working directory: the path as given
    return (
        f"python -m model_build publish --config {shlex.quote(path.as_posix())} "
        f"--env {shlex.quote(environment_plan.environment_name)} --endpoint {shlex.quote(endpoint)}"
    )


def add_artifact_stack(
    scope: Construct,
    environment_plan: EnvironmentPlan,
    *,
    trusted_pipeline: TrustedPipeline | None = None,
    trusted_preflight: TrustedPipeline | None = None,
) -> ArtifactStoreStack:
    """The environment's artifact store stack, in `scope` (the App, or a `Stage` of the pipeline); with
    `trusted_pipeline`, also the model publisher role that pipeline role may assume."""
    # Construct ids equal the stack names, so `cdk deploy <stack name>` selects what `cdk list` shows.
    stack = ArtifactStoreStack(
        scope,
        environment_plan.stack_name("artifacts"),
        environment_plan=environment_plan,
        trusted_pipeline=trusted_pipeline,
        trusted_preflight=trusted_preflight,
        env=stack_environment(environment_plan),
        stack_name=environment_plan.stack_name("artifacts"),
        description=f"{environment_plan.project} ({environment_plan.environment_name}): model artifact bucket and image repository",
    )
    # The environment's one dashboard lives here: the stack exists once per environment and every deploy path (make
    # deploy, the pipeline's artifacts stage, the demo) deploys it first; endpoint names are known from the config,
    # so it needs no reference to the endpoint stacks. The region in the name keeps the same project and environment
    # name deployed in two regions apart.
    EnvironmentDashboard(
        stack,
        "Dashboard",
        dashboard_name=f"{environment_plan.project}-{environment_plan.environment_name}-endpoints-{Aws.REGION}",
        endpoints=dashboard_endpoints(environment_plan, VARIANT_NAME),
    )
    return stack


def add_endpoint_stacks(
    scope: Construct,
    environment_plan: EnvironmentPlan,
    *,
    allow_unbuilt: bool = False,
    artifacts: ArtifactStoreStack | None = None,
    trusted_gates: Mapping[str, TrustedPipeline] | None = None,
) -> dict[str, EndpointStack]:
    """One stack per endpoint, in `scope`; each depends on `artifacts` when it is given (same scope only).
    `trusted_gates` (endpoint name -> pipeline role): those endpoints' stacks also create their SLO gate role for that
    pipeline role."""
    env = stack_environment(environment_plan)
    bucket_key = BucketKeyRef.of(environment_plan)
    stacks: dict[str, EndpointStack] = {}
    for plan in environment_plan.plans:
        stack = EndpointStack(
            scope,
            plan.stack_name,
            plan=plan,
            image_repository=environment_plan.image_repository,
            bucket_key=bucket_key,
            allow_unbuilt=allow_unbuilt,
            trusted_gate=(trusted_gates or {}).get(plan.name),
            publish_command=publish_command(environment_plan, plan.name),
            env=env,
            stack_name=plan.stack_name,
            description=f"{plan.project} ({plan.environment_name}): SageMaker endpoint {plan.name} ({plan.system.name})",
        )
        if artifacts is not None:
            stack.add_stack_dependency(artifacts, "the model artifact is read from the artifact bucket")
        Tags.of(stack).add("llm-endpoints:endpoint", plan.name)
        stack.tags.set_tag("llm-endpoints:endpoint", plan.name)  # the stack's own (explicitStackTags): converge.py
        stacks[plan.stack_name] = stack
    return stacks


def tag_environment(scope: Construct, environment_plan: EnvironmentPlan) -> None:
    """The environment's tags on every resource under `scope` (the app, or a pipeline stage), and a bounded
    ServiceTimeout on CDK's own custom resources there (stacks/custom_resources.py)."""
    Tags.of(scope).add("llm-endpoints:project", environment_plan.project)
    Tags.of(scope).add("llm-endpoints:environment", environment_plan.environment_name)
    # The stacks themselves too: with @aws-cdk/core:explicitStackTags (cdk.json) Tags.of tags resources only, and
    # CloudFormation lists a stack's own tags in DescribeStacks, which is how `make deploy` and `make destroy` find
    # the environment's stacks the config no longer names (workstation/converge.py).
    for construct in scope.node.find_all():
        if isinstance(construct, Stack):
            construct.tags.set_tag("llm-endpoints:project", environment_plan.project)
            construct.tags.set_tag("llm-endpoints:environment", environment_plan.environment_name)
    Aspects.of(scope).add(CustomResourceTimeouts())


def add_stacks(app: Construct, environment_plan: EnvironmentPlan, *, allow_unbuilt: bool = False) -> dict[str, object]:
    """Add every stack of one environment to `app`; returns them by stack name.

    Account and region come from the config, else from the CDK CLI's defaults (CDK_DEFAULT_ACCOUNT/REGION),
    else the stacks are environment-agnostic.
    """
    artifacts = add_artifact_stack(app, environment_plan)
    stacks: dict[str, object] = {artifacts.stack_name: artifacts}
    stacks.update(add_endpoint_stacks(app, environment_plan, allow_unbuilt=allow_unbuilt, artifacts=artifacts))
    tag_environment(app, environment_plan)
    add_nag_checks(app)
    return stacks


__all__ = [
    "ArtifactStoreStack",
    "EndpointStack",
    "TrustedPipeline",
    "add_artifact_stack",
    "add_endpoint_stacks",
    "publish_command",
    "add_stacks",
    "stack_environment",
    "tag_environment",
]
