"""What every serving system provides: its container image, its container environment and its defaults."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from endpoint_config import EndpointSpec, InstanceType

from .images import ImagePin


@dataclass(frozen=True)
class ServingSystem:
    """One `system:` value of the config file.

    name: the config value. image: the pinned container image. legacy: retired upstream; kept as a pinned
    recipe and announced at synth with `replacement`. environment: the container's environment variables
    for one endpoint. download/startup timeouts: defaults when the config leaves them out.
    """

    name: str
    summary: str
    image: ImagePin
    environment: Callable[[EndpointSpec], dict[str, str]]
    default_download_timeout_s: int = 600
    default_startup_timeout_s: int = 600
    legacy: bool = False
    replacement: str | None = None
    extra: dict[str, str] = field(default_factory=dict)

    def image_uri(self, region: str, instance: InstanceType) -> str:
        return self.image.uri(region, gpu=instance.is_gpu)

    def download_timeout_s(self, ep: EndpointSpec) -> int:
        return ep.model_data_download_timeout_s or self.default_download_timeout_s

    def startup_timeout_s(self, ep: EndpointSpec) -> int:
        return ep.container_startup_health_check_timeout_s or self.default_startup_timeout_s
