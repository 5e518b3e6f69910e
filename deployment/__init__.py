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
from endpoint_config.hosting import component_name
from endpoint_config.loader import ResolvedEnvironment, invalid_config, parse_config
from endpoint_config.schema import PipelineSpec, for_pool
from endpoint_config.security import arn_region_problems, config_arns
from endpoint_runtime.bodies import EndpointBody
from facts.models import UnreadableModel, planning_with
from systems import REGISTRY, ServingSystem, all_systems, get_system
from systems.checks import instance_types_holding, model_fit_problems, region_problems, system_problems

from . import plan as plan_module
from .plan import BUILD_ROOT, EndpointPlan, container_environment_problems, plan_endpoint, system_endpoint_body


@dataclass(frozen=True)
class EnvironmentPlan:
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


# The environment's artifact store stack is stack_name(project, environment, ARTIFACT_STACK_SUFFIX).
ARTIFACT_STACK_SUFFIX = "artifacts"


def sagemaker_endpoint_name(environment_name: str, ep: EndpointSpec) -> str:
    """The SageMaker endpoint name: the config name, prefixed by the environment when one is named."""
    return ep.name if environment_name == DEFAULT_ENVIRONMENT else f"{environment_name}-{ep.name}"


def resource_names(project: str, environment_name: str, ep: EndpointSpec) -> dict[str, str]:
    """The fixed names one endpoint's resources get in one environment, by kind: its stack, its SageMaker endpoint and,
    with hosting.mode inference-components, its component (the plan's stack_name, endpoint_name, component_name).
    The rest is named after these with a fixed suffix (the log group, alarms, scaling policies, the pipeline's roles)
    or by CloudFormation (models, endpoint configs, Lambda functions)."""
    endpoint = sagemaker_endpoint_name(environment_name, ep)
    names = {"stack": stack_name(project, environment_name, ep.name), "SageMaker endpoint": endpoint}
    if ep.hosting.uses_components:
        names["inference component"] = component_name(endpoint)
    return names


def name_collision_problems(config: AppConfig) -> list[str]:
    """Two entries of the file that would make the same stack, endpoint or component name, in any two of its
    environments (`prod` + `a-chat` and `prod-a` + `chat` both make `prod-a-chat`), or an endpoint stack named as an
    environment's artifact stack. All environments count: the pipeline deploys every one, and environments may share
    an account and region, where the second deploy would fail on (or take over) the first one's resource."""
    owners: dict[tuple[str, str], str] = {}
    problems: list[str] = []
    for env_name in list(config.environments) or [DEFAULT_ENVIRONMENT]:
        where = f"environment {env_name!r}, " if config.environments else ""
        claims = [("stack", stack_name(config.project, env_name, ARTIFACT_STACK_SUFFIX), f"{where}the artifact stack")]
        for ep in config.endpoints:
            claims += [
                (kind, name, f"{where}endpoint {ep.name!r}")
                for kind, name in resource_names(config.project, env_name, ep).items()
            ]
        for kind, name, who in claims:
            first = owners.setdefault((kind, name), who)
            if first != who:
                fix = (
                    "rename the endpoint"
                    if "artifact stack" in first + who
                    else "rename one of the endpoints or environments"
                )
                problems.append(
                    f"{first} and {who} both make the {kind} {name!r}; each stack, endpoint and component name must be "
                    f"unique across all environments of the file: {fix}"
                )
    return problems


def endpoint_rules(resolved: ResolvedEnvironment, ep: EndpointSpec) -> list[str]:
    """The serving system's rules for one endpoint whose schema rules passed (systems.checks), and with a region,
    that the pinned image is published there."""
    if ep.system not in REGISTRY:
        return [
            f"endpoint {ep.name!r}: system: value {ep.system!r} is not a serving system; allowed: {', '.join(REGISTRY)}"
        ]
    system = get_system(ep.system)
    try:
        found = system_problems(ep, system, all_systems())
    except UnreadableModel as err:  # a local model's files are corrupt: the rules that read them cannot run
        return [f"endpoint {ep.name!r}: model: value {ep.model!r}: {err}"]
    if not found:
        found = pool_rules(ep, system)
    # An adapter's inference component is named after the endpoint, whose name depends on the environment.
    endpoint_name = sagemaker_endpoint_name(resolved.name, ep)
    found += [
        f"endpoint {ep.name!r}: adapters[{i}].name: value {a.name!r}: {problem}"
        for i, a in enumerate(ep.adapters)
        if (problem := component_name_problem(endpoint_name, a.name))
    ]
    if resolved.spec.emulator and ep.instance_pools:
        # moto's CreateEndpointConfig refuses a variant without InstanceType ("Invalid Keys for ProductionVariant ...
        # expected it to contain one of ['InstanceType', 'ServerlessConfig']": moto/sagemaker/models.py
        # validate_production_variants), and InstancePools replaces InstanceType.
        found.append(
            f"endpoint {ep.name!r}: instance_pools: not supported in environment {resolved.name!r} (emulator: true): "
            "the local emulator (moto) refuses a production variant without InstanceType; give the environment "
            f"overrides: {{{ep.name}: {{instance_pools: []}}}}"
        )
    region = resolved.spec.region
    if not found and region:
        found = [f"environment {resolved.name!r}: {p}" for p in region_problems(ep, system, region)]
    return found


def pool_rules(ep: EndpointSpec, system: ServingSystem) -> list[str]:
    """The system's rules on every instance pool, each pool checked as the endpoint on that instance type alone
    (EndpointSpec.pool_specs): the model must fit its GPUs at its tensor-parallel degree (a refusal names what
    would hold it), its image must run there, and so on."""
    problems = []
    for i, pool_spec in enumerate(ep.pool_specs()):
        found = system_problems(pool_spec, system, all_systems())
        unfit = model_fit_problems(pool_spec, system)
        if unfit:
            holders = instance_types_holding(pool_spec, system, all_systems())
            offer = f"; instance types that hold it: {', '.join(holders) if holders else 'none'}"
            found = [p for p in found if p not in unfit] + [p + offer for p in unfit]
        problems += [for_pool(ep, i, p) for p in found]
    return problems


def resolve(
    config: AppConfig, path: Path, environment: str | None, *, build_root: Path | None = None
) -> EnvironmentPlan:
    """Resolve one environment of a parsed file, checked by every rule, each endpoint planned; its artifacts are read
    from `build_root` (build/<endpoint>/manifest.json) where the config pins none. A Hub model planned there from
    its metadata (`model_build build`) is checked from that build's files, as a local directory is."""
    build_root = default_build_root() if build_root is None else build_root
    resolved = loader.resolve(config, path, environment)
    models = [(ep.name, ep.model, ep.revision) for ep in [*resolved.checked, *resolved.endpoints]]
    with planning_with(build_root, models):
        return _resolve_checked(config, path, resolved, build_root)


def _resolve_checked(config: AppConfig, path: Path, resolved: ResolvedEnvironment, build_root: Path) -> EnvironmentPlan:
    problems = list(resolved.problems) + name_collision_problems(config)
    for ep in resolved.checked:
        problems += [resolved.where(ep) + p for p in endpoint_rules(resolved, ep)]
    if problems:
        raise ConfigError(invalid_config(path, problems))
    plans = []
    for ep in resolved.endpoints:
        names = resource_names(config.project, resolved.name, ep)
        plans.append(
            plan_endpoint(
                ep,
                get_system(ep.system),
                project=config.project,
                environment_name=resolved.name,
                endpoint_name=names["SageMaker endpoint"],
                stack_name=names["stack"],
                emulator=resolved.spec.emulator,
                build_root=build_root,
            )
        )
    problems = [resolved.where(plan.spec) + p for plan in plans for p in container_environment_problems(plan)]
    problems += [resolved.where(plan.spec) + p for plan in plans if plan.sizing for p in plan.sizing.problems]
    if problems:
        raise ConfigError(f"{path}: invalid config:\n  - " + "\n  - ".join(problems))
    return EnvironmentPlan(path, config.project, resolved.name, resolved.spec, tuple(plans), config)


def default_build_root() -> Path:
    """plan.BUILD_ROOT, read when a plan is made rather than when this module was imported, so that one place
    (a test session, say) can point every default at another folder."""
    return plan_module.BUILD_ROOT


def load_config(path: str | Path, environment: str | None = None, *, build_root: Path | None = None) -> EnvironmentPlan:
    """Load, validate and resolve `environment` (the only one, or the implicit default, when not given)."""
    return resolve(read_config(path), Path(path), environment, build_root=build_root)


def load_all_environments(path: str | Path, *, build_root: Path | None = None) -> dict[str, EnvironmentPlan]:
    """Every environment of a file, each resolved and checked (what the pipeline deploys)."""
    config = read_config(path)
    names = list(config.environments) or [DEFAULT_ENVIRONMENT]
    return {name: resolve(config, Path(path), name, build_root=build_root) for name in names}


def pipeline_region_problems(
    environment_plans: dict[str, EnvironmentPlan], pipeline: PipelineSpec, region: str
) -> list[str]:
    """The pipeline's rules that need resolved environments and the pipeline's resolved region (from the config or
    the CDK CLI's default): every stage deploys in that region, and the pipeline's ARNs (its connection, its secrets)
    lie in it. The pipeline's other rules are the schema's
    (endpoint_config.schema.pipeline_problems), run by load_config."""
    problems = []
    for env_name in pipeline.stages:
        env_region = environment_plans[env_name].environment.region
        if env_region and env_region != region:
            problems.append(
                f"environment {env_name!r}: region: value {env_region!r} differs from the pipeline's region {region!r}; "
                "cross-region stages are not supported (CDK would add a replication support stack and key that this "
                "project does not review): put the pipeline in the environments' region (pipeline.region), or give "
                "each region its own pipeline"
            )
    pipeline_arns = [("pipeline.", key, arn) for key, arn in config_arns(pipeline.model_dump())]
    return problems + arn_region_problems(pipeline_arns, region, "the pipeline deploys to")


def check_pipeline(
    config_path: str | Path, environment_plans: dict[str, EnvironmentPlan], pipeline: PipelineSpec, region: str
) -> None:
    """Raise one ConfigError listing every pipeline_region_problems."""
    if problems := pipeline_region_problems(environment_plans, pipeline, region):
        raise ConfigError(f"{config_path}: invalid pipeline config:\n  - " + "\n  - ".join(problems))


def endpoint_body_of(system_name: str) -> EndpointBody:
    """How the container of the registered system `system_name` takes a prompt and answers (EndpointPlan.endpoint_body
    without a config: a load test of an endpoint by its name). ConfigError naming the known systems."""
    if system_name not in REGISTRY:
        raise ConfigError(f"system {system_name!r} is not one of the registered systems: {', '.join(REGISTRY)}")
    return system_endpoint_body(get_system(system_name))


__all__ = [
    "ARTIFACT_STACK_SUFFIX",
    "BUILD_ROOT",
    "ConfigError",
    "EnvironmentPlan",
    "EndpointPlan",
    "check_pipeline",
    "endpoint_body_of",
    "load_all_environments",
    "load_config",
    "name_collision_problems",
    "parse_config",
    "pipeline_region_problems",
    "resource_names",
    "resolve",
    "sagemaker_endpoint_name",
    "stack_name",
]
