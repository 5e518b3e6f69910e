"""The deepspeed-byoc and tensorrt-byoc containers on this machine: our own image's server (systems/byoc_server) with
the system's handler, on its CPU path.

The image is laid out by its Dockerfile (systems/<system>/container/Dockerfile): COPY lines put byoc_server/, the
request and chat contracts and the handler under /opt/program, and ENV lines set BYOC_HANDLER and the handler's
defaults. Here the same COPY lines are applied to a program folder under the work directory and the same ENV lines
read, so what runs is what the image holds. The image's `serve` puts nginx in front of `python -m byoc_server.main`
on a unix socket; here the app listens on a loopback port itself (`--port`, `--host`), without nginx (its
client_max_body_size is the app's own 6 MB cap as well: byoc_server/app.py).

The CPU path, each the handler's own (no code of ours in between): deepspeed-byoc's handler runs the plain
transformers model when no GPU is present (DS_KERNEL_INJECTION applies to CUDA only: its handler.py);
tensorrt-byoc's runs the same ONNX graph with TRT_BACKEND=onnxruntime (handler/engine.py: the CPU backend of the
same handler), set here over the image's `tensorrt`.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path
from typing import Any

from .process import ContainerError, SystemContainer, base_environment

ROOT = Path(__file__).resolve().parent.parent
PROGRAM_DIR = "/opt/program"


def dockerfile(system: str) -> Path:
    return ROOT / "systems" / system.replace("-", "_") / "container" / "Dockerfile"


def _logical_lines(text: str) -> list[str]:
    return [line.strip() for line in re.sub(r"\\\n", " ", text).splitlines() if line.strip()]


def program_copies(text: str) -> list[tuple[str, str]]:
    """The Dockerfile's `COPY <source> /opt/program/<target>` lines: (source in the repository, target under
    /opt/program)."""
    copies = []
    for line in _logical_lines(text):
        parts = line.split()
        if parts[0] == "COPY" and len(parts) == 3 and parts[2].startswith(PROGRAM_DIR + "/"):
            copies.append((parts[1], parts[2][len(PROGRAM_DIR) + 1 :]))
    return copies


def image_environment(text: str) -> dict[str, str]:
    """The Dockerfile's ENV lines (KEY=VALUE pairs; values here have no spaces), in order."""
    env: dict[str, str] = {}
    for line in _logical_lines(text):
        if line.startswith("ENV "):
            for pair in line[4:].split():
                key, _, value = pair.partition("=")
                env[key] = value
    return env


class ByocContainer(SystemContainer):
    """`python -m byoc_server.main` from a program folder laid out as the image's /opt/program, the model at the
    artifact directory (SM_MODEL_DIR, as SageMaker mounts /opt/ml/model)."""

    engine = "byoc_server"
    chat_path = "/v1/chat/completions"
    local_kind = "own-server"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.dockerfile_text = dockerfile(self.system).read_text()
        self.program = self.workdir / "program"

    def stage_program(self) -> None:
        """The image's /opt/program, from its Dockerfile's COPY lines (fresh on each start)."""
        shutil.rmtree(self.program, ignore_errors=True)
        for source, target in program_copies(self.dockerfile_text):
            src, dst = ROOT / source, self.program / target
            if source.endswith("/") or src.is_dir():
                shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dst)

    def environment(self, home: Path) -> dict[str, str]:
        image = {
            key: value
            for key, value in image_environment(self.dockerfile_text).items()
            if key not in ("PATH", "PYTHONPATH", "BYOC_PROGRAM_DIR", "DEBIAN_FRONTEND", "PIP_BREAK_SYSTEM_PACKAGES")
        }
        engine_cache = self.workdir / "engine-cache"  # TRT_ENGINE_CACHE_DIR: /opt/ml/engine-cache in the image
        engine_cache.mkdir(parents=True, exist_ok=True)
        return {
            **base_environment(home, f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"),
            **image,
            **self.container_env,
            **dict(self.local.environment),
            "PYTHONPATH": str(self.program),
            "BYOC_PROGRAM_DIR": str(self.program),
            "SM_MODEL_DIR": str(self.model_dir),
            "TRT_ENGINE_CACHE_DIR": str(engine_cache),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "byoc_server.main", "--port", str(self.port), "--host", "127.0.0.1"]

    def preflight(self) -> None:
        if not any(self.model_dir.iterdir()) if self.model_dir.is_dir() else True:
            raise ContainerError(f"{self.model_dir}: the artifact is not built (model_build build)")

    def start(self) -> None:
        self.stage_program()
        super().start()

    def check_ready(self) -> None:
        handler = image_environment(self.dockerfile_text).get("BYOC_HANDLER", "?")
        self.version_line = f"byoc_server with BYOC_HANDLER={handler} ({self.local.note})"

    def answered_by(self) -> str:
        return f"our own {self.system} server (systems/byoc_server) on its CPU path: {self.local.note}"
