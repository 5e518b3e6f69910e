"""What the systems that run this repository's own container (deepspeed-byoc, tensorrt-byoc) share: the
container's server and contracts (systems/byoc_server behind nginx, request_contract.py, chat_contract.py), its
fixed request timeout, and what that server does not offer (streaming, chat, inference components)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from endpoint_config import EndpointSpec
from systems.base import Capability, E, OwnContainer, ServingSystem, byoc_request_timeout
from systems.chat import BYOC_NO_CHAT

# What every BYOC image copies in besides its system's own handler (each Dockerfile COPYs the same).
BYOC_SERVER_FILES = ("systems/byoc_server", "request_contract.py", "chat_contract.py")


def byoc_system(
    *,
    dockerfile: str,
    handler_files: tuple[str, ...],
    engine_options: type[E],
    environment: Callable[[EndpointSpec, E], dict[str, str]],
    **fields: Any,
) -> ServingSystem[E]:
    """A system served by byoc_server in its own image built from `dockerfile`, with `handler_files` (paths from
    the repository root) copied in after the server's; `fields` are the system's own ServingSystem fields (its
    options class and the hooks that read them named, so they are typed against them)."""
    return ServingSystem(
        engine_options=engine_options,
        environment=environment,
        request_timeout=byoc_request_timeout(),
        own_container=OwnContainer(dockerfile=dockerfile, include=(*BYOC_SERVER_FILES, *handler_files)),
        architectures=("decoder",),
        gpu_only=True,
        streaming=Capability.no(
            "our own container server (systems/byoc_server) answers /invocations with one whole reply"
        ),
        chat=BYOC_NO_CHAT,
        inference_components=Capability.no(
            "our own container has never run as an inference component (only a GPU account can show that it keeps "
            "to the GPUs and memory SageMaker gives it)"
        ),
        **fields,
    )


__all__ = ["BYOC_SERVER_FILES", "byoc_system"]
