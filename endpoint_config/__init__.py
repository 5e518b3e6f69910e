"""The one config file users write: schema, reading and per-environment overrides.

Loading a deployment with every rule (the serving systems' included) and its per-endpoint plans is
`deployment.load_config` / `deployment.load_all_environments`.
"""

from .loader import (
    DEFAULT_ENVIRONMENT,
    ConfigError,
    ResolvedEnvironment,
    artifact_bucket_name,
    artifact_prefix,
    artifact_root,
    image_repository_name,
    read_config,
)
from .schema import BYTES_PER_PARAM, AppConfig, Autoscaling, EndpointSpec, EnvironmentSpec

__all__ = [
    "AppConfig",
    "Autoscaling",
    "BYTES_PER_PARAM",
    "ConfigError",
    "DEFAULT_ENVIRONMENT",
    "EndpointSpec",
    "EnvironmentSpec",
    "ResolvedEnvironment",
    "artifact_bucket_name",
    "artifact_prefix",
    "artifact_root",
    "image_repository_name",
    "read_config",
]
