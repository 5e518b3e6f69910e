"""CDK stacks: the artifact store and one stack per endpoint, wired from one resolved config."""

from __future__ import annotations

import os
from pathlib import Path

from aws_cdk import App, Environment, Tags

from endpoint_config import Deployment
from systems import get_system

from .artifact_store import ArtifactStoreStack
from .endpoint_stack import EndpointStack
from .model_artifact import resolve_artifact
from .nag import add_nag_checks


def add_stacks(app: App, deployment: Deployment, *, build_root: Path, allow_unbuilt: bool = False) -> dict[str, object]:
    """Add every stack of one environment to `app`; returns them by stack name.

    Account and region come from the config, else from the CDK CLI's defaults (CDK_DEFAULT_ACCOUNT/REGION),
    else the stacks are environment-agnostic.
    """
    env_spec = deployment.environment
    env = Environment(
        account=env_spec.account or os.environ.get("CDK_DEFAULT_ACCOUNT"),
        region=env_spec.region or os.environ.get("CDK_DEFAULT_REGION"),
    )
    stacks: dict[str, object] = {}
    # Construct ids equal the stack names, so `cdk deploy <stack name>` selects what `cdk list` shows.
    artifacts = ArtifactStoreStack(
        app,
        deployment.stack_name("artifacts"),
        deployment=deployment,
        env=env,
        stack_name=deployment.stack_name("artifacts"),
        description=f"{deployment.project} ({deployment.environment_name}): model artifact bucket and image repository",
    )
    stacks[artifacts.stack_name] = artifacts
    for spec in deployment.endpoints:
        construct_id = deployment.stack_name(spec.name)
        stack = EndpointStack(
            app,
            construct_id,
            deployment=deployment,
            spec=spec,
            system=get_system(spec.system),
            artifact=resolve_artifact(spec, build_root, allow_unbuilt=allow_unbuilt),
            env=env,
            stack_name=deployment.stack_name(spec.name),
            description=f"{deployment.project} ({deployment.environment_name}): SageMaker endpoint {spec.name} ({spec.system})",
        )
        stack.add_stack_dependency(artifacts, "the model artifact is read from the artifact bucket")
        Tags.of(stack).add("llm-endpoints:endpoint", spec.name)
        stacks[construct_id] = stack
    Tags.of(app).add("llm-endpoints:project", deployment.project)
    Tags.of(app).add("llm-endpoints:environment", deployment.environment_name)
    add_nag_checks(app)
    return stacks


__all__ = ["ArtifactStoreStack", "EndpointStack", "add_stacks"]
