"""The one config file users write: schema, instance facts, reading and per-environment resolution.

Imports none of ours. Loading a deployment with every rule, the serving systems' included, is
`deployment.load_config` / `deployment.load_all_environments`.
"""

from .instances import InstanceType, hosting_instance_types, parse_instance_type
from .loader import (
    DEFAULT_ENVIRONMENT,
    ConfigError,
    Deployment,
    artifact_bucket_name,
    artifact_prefix,
    artifact_root,
    image_repository_name,
    read_config,
)
from .schema import BYTES_PER_PARAM, SYSTEM_NAMES, AppConfig, Autoscaling, EndpointSpec, EnvironmentSpec

__all__ = [
    "AppConfig", "Autoscaling", "BYTES_PER_PARAM", "ConfigError", "DEFAULT_ENVIRONMENT", "Deployment",
    "EndpointSpec", "EnvironmentSpec", "artifact_bucket_name", "artifact_prefix", "artifact_root", "image_repository_name", "InstanceType", "SYSTEM_NAMES", "hosting_instance_types",
    "parse_instance_type", "read_config",
]
