"""The serving system's rules on `model_source:` (a JumpStart / private-hub model, endpoint_config/model_source.py):
only a system whose container serves a checkpoint's own files takes one (ServingSystem.plain_checkpoint), and not
with an engine that reads the weights from S3 itself (it would read the hub's prefix with the execution role, while
HubAccessConfig grants SageMaker's own download)."""

from __future__ import annotations

from endpoint_config import EndpointSpec

from .base import EngineOptions, ServingSystem


def model_source_problems(
    ep: EndpointSpec, system: ServingSystem, systems: dict[str, ServingSystem], engine: EngineOptions | None
) -> list[str]:
    if ep.model_source is None:
        return []
    where = f"endpoint {ep.name!r}: model_source"
    if not system.plain_checkpoint.supported:
        able = [name for name, s in systems.items() if s.plain_checkpoint.supported]
        return [
            f"{where}: not supported by system {system.name!r}: {system.plain_checkpoint.note}; systems that serve a "
            f"hub model's checkpoint as it is: {', '.join(able)}"
        ]
    if system.staged_weights_environment is not None or (engine is not None and system.streams_weights(engine)):
        option = system.streamed_weights.option if system.streamed_weights is not None else "its weight staging"
        return [
            f"{where}: not allowed with {option or 'streamed weights'}: the engine would read the hub's S3 prefix "
            "with the endpoint's execution role, while HubAccessConfig grants SageMaker's own download; remove one"
        ]
    return []


__all__ = ["model_source_problems"]
