"""Where the config and the serving systems meet: load a config file, resolve an environment, run every rule.

    endpoint_config   the schema and its own rules (imports none of ours)
    systems           the serving systems and their rules on a config (systems.checks)
    deployment        this module: the one place that uses both; stacks, model_build, workstation and the
                      CDK app load their configs here

`load_config` and `load_all_environments` behave as they did in endpoint_config: one ConfigError listing every
problem, the schema's first, then, for endpoints whose schema rules pass, the serving system's (what it serves,
on what hardware, how big a model fits) and the image's region.
"""

from __future__ import annotations

from pathlib import Path

from endpoint_config import DEFAULT_ENVIRONMENT, AppConfig, ConfigError, Deployment, EndpointSpec, loader, read_config
from endpoint_config.loader import environment_names, parse_config
from endpoint_config.schema import PipelineSpec
from endpoint_config.security import isolation_problems
from systems import get_system
from systems.checks import region_problems, system_problems


def endpoint_rules(ep: EndpointSpec, environment_name: str, region: str | None) -> list[str]:
    """The serving system's rules for one endpoint whose schema rules passed: what it serves and on what hardware
    (systems.checks), and its `engine:` options against the system's own typed model (ServingSystem.engine_options:
    every key it does not implement, or a value it does not allow, is an error naming endpoint, key, value and what
    the system allows); with a region, the pinned image must be published there."""
    system = get_system(ep.system)
    found = system_problems(ep) + system.engine_problems(ep)
    # network.network_isolation against a system whose engine reads S3 itself (endpoint_config/security.py).
    found += isolation_problems(ep, engine_reads_s3=system.staged_weights_environment is not None)
    if not found and region:
        found = [f"environment {environment_name!r}: {p}" for p in region_problems(ep, region)]
    return found


def resolve(config: AppConfig, path: Path, environment: str | None) -> Deployment:
    """Resolve one environment of a parsed file, checked by every rule."""
    return loader.resolve(config, path, environment, endpoint_rules=endpoint_rules)


def load_config(path: str | Path, environment: str | None = None) -> Deployment:
    """Load, validate and resolve `environment` (the only one, or the implicit default, when not given)."""
    return resolve(read_config(path), Path(path), environment)


def load_all_environments(path: str | Path) -> dict[str, Deployment]:
    """Every environment of a file, each resolved and checked (what the pipeline deploys)."""
    first = load_config(path, next(iter(environment_names(path)), None))
    names = list(first.app_config.environments) or [DEFAULT_ENVIRONMENT]
    return {name: resolve(first.app_config, Path(path), name) for name in names}


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
    "ConfigError", "Deployment", "check_pipeline", "endpoint_rules", "load_all_environments", "load_config",
    "parse_config", "pipeline_region_problems", "resolve",
]
