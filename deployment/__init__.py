"""Where the config and the serving systems meet: load a config file, resolve an environment, run every rule, and
plan each endpoint once (deployment/plan.py). Stacks, model_build, workstation and the CDK app load configs here.

`load_config` raises one ConfigError listing every problem: the schema's first, then, for endpoints whose schema
rules pass, their serving system's (what it serves and offers, on what hardware, how big a model fits, its engine
options) and the image's region.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from endpoint_config import (
    DEFAULT_ENVIRONMENT,
    AppConfig,
    ConfigError,
    EndpointSpec,
    EnvironmentSpec,
    artifact_bucket_name,
    image_repository_name,
    loader,
    read_config,
)
from endpoint_config.adapters import component_name_problem
from endpoint_config.loader import ResolvedEnvironment, environment_names, parse_config
from endpoint_config.schema import PipelineSpec
from systems import REGISTRY, all_systems, get_system
from systems.checks import region_problems, system_problems

from .plan import BUILD_ROOT, EndpointPlan, plan_endpoint


@dataclass(frozen=True)
class Deployment:
    """One environment of one config file: overrides applied, every rule checked, each endpoint planned."""

    config_path: Path
    project: str
    environment_name: str
    environment: EnvironmentSpec
    plans: tuple[EndpointPlan, ...]
    app_config: AppConfig  # the whole file, for what spans environments (the pipeline)

    @property
    def endpoints(self) -> tuple[EndpointSpec, ...]:
        return tuple(plan.spec for plan in self.plans)

    def plan(self, name: str) -> EndpointPlan:
        for plan in self.plans:
            if plan.name == name:
                return plan
        raise ConfigError(
            f"{self.config_path}: no endpoint named {name!r}; defined: {', '.join(p.name for p in self.plans)}"
        )

    def endpoint(self, name: str) -> EndpointSpec:
        return self.plan(name).spec

    def endpoint_name(self, ep: EndpointSpec) -> str:
        """The SageMaker endpoint name of a config entry."""
        return self.plan(ep.name).endpoint_name

    def stack_name(self, suffix: str) -> str:
        return stack_name(self.project, self.environment_name, suffix)

    def artifact_bucket(self, account: str, region: str) -> str:
        """The environment's artifact bucket (account and region: CDK tokens at synth, real values in the CLI)."""
        return artifact_bucket_name(self.project, self.environment_name, account, region)

    @property
    def image_repository(self) -> str:
        return image_repository_name(self.project, self.environment_name)


def stack_name(project: str, environment_name: str, suffix: str) -> str:
    return f"{project}-{environment_name}-{suffix}"


def sagemaker_endpoint_name(environment_name: str, ep: EndpointSpec) -> str:
    """The SageMaker endpoint name: the config name, prefixed by the environment when one is named."""
    return ep.name if environment_name == DEFAULT_ENVIRONMENT else f"{environment_name}-{ep.name}"


def endpoint_rules(resolved: ResolvedEnvironment, ep: EndpointSpec) -> list[str]:
    """The serving system's rules for one endpoint whose schema rules passed (systems.checks), and with a region,
    that the pinned image is published there."""
    if ep.system not in REGISTRY:
        return [f"endpoint {ep.name!r}: system: value {ep.system!r} is not a serving system; allowed: {', '.join(REGISTRY)}"]
    system = get_system(ep.system)
    found = system_problems(ep, system, all_systems())
    # An adapter's inference component is named after the endpoint, whose name depends on the environment.
    endpoint_name = sagemaker_endpoint_name(resolved.name, ep)
    found += [f"endpoint {ep.name!r}: adapters[{i}].name: value {a.name!r}: {problem}" for i, a in enumerate(ep.adapters)
              if (problem := component_name_problem(endpoint_name, a.name))]
    region = resolved.spec.region
    if not found and region:
        found = [f"environment {resolved.name!r}: {p}" for p in region_problems(ep, system, region)]
    return found


def resolve(config: AppConfig, path: Path, environment: str | None, *, build_root: Path = BUILD_ROOT) -> Deployment:
    """Resolve one environment of a parsed file, checked by every rule, each endpoint planned; its artifacts are read
    from `build_root` (build/<endpoint>/manifest.json) where the config pins none."""
    resolved = loader.resolve(config, path, environment)
    problems = list(resolved.problems)
    for ep in resolved.checked:
        problems += [resolved.where(ep) + p for p in endpoint_rules(resolved, ep)]
    if problems:
        raise ConfigError(f"{path}: invalid config:\n  - " + "\n  - ".join(problems))
    plans = tuple(
        plan_endpoint(
            ep,
            get_system(ep.system),
            project=config.project,
            environment_name=resolved.name,
            endpoint_name=sagemaker_endpoint_name(resolved.name, ep),
            stack_name=stack_name(config.project, resolved.name, ep.name),
            emulator=resolved.spec.emulator,
            build_root=build_root,
        )
        for ep in resolved.endpoints
    )
    return Deployment(path, config.project, resolved.name, resolved.spec, plans, config)


def load_config(path: str | Path, environment: str | None = None, *, build_root: Path = BUILD_ROOT) -> Deployment:
    """Load, validate and resolve `environment` (the only one, or the implicit default, when not given)."""
    return resolve(read_config(path), Path(path), environment, build_root=build_root)


def load_all_environments(path: str | Path, *, build_root: Path = BUILD_ROOT) -> dict[str, Deployment]:
    """Every environment of a file, each resolved and checked (what the pipeline deploys)."""
    first = load_config(path, next(iter(environment_names(path)), None), build_root=build_root)
    names = list(first.app_config.environments) or [DEFAULT_ENVIRONMENT]
    return {name: resolve(first.app_config, Path(path), name, build_root=build_root) for name in names}


def pipeline_region_problems(deployments: dict[str, Deployment], pipeline: PipelineSpec, region: str) -> list[str]:
    """The pipeline's rule that needs resolved environments and the pipeline's resolved region (from the config or
    the CDK CLI's default): every stage deploys in that region. The pipeline's other rules are the schema's
    (endpoint_config.schema.pipeline_problems), run by load_config."""
    problems = []
    for env_name in pipeline.stages:
        env_region = deployments[env_name].environment.region
        if env_region and env_region != region:
            problems.append(
                f"environment {env_name!r}: region: value {env_region!r} differs from the pipeline's region {region!r}; "
                "cross-region stages are not supported (CDK would add a replication support stack and key that this "
                "project does not review): put the pipeline in the environments' region (pipeline.region), or give "
                "each region its own pipeline"
            )
    return problems


def check_pipeline(config_path: str | Path, deployments: dict[str, Deployment], pipeline: PipelineSpec, region: str) -> None:
    """Raise one ConfigError listing every pipeline_region_problems."""
    if problems := pipeline_region_problems(deployments, pipeline, region):
        raise ConfigError(f"{config_path}: invalid pipeline config:\n  - " + "\n  - ".join(problems))


__all__ = [
    "BUILD_ROOT", "ConfigError", "Deployment", "EndpointPlan", "check_pipeline", "load_all_environments",
    "load_config", "parse_config", "pipeline_region_problems", "resolve", "sagemaker_endpoint_name", "stack_name",
]  # fmt: skip
