"""A local container is a process on this machine that answers the SageMaker container contract (GET /ping, POST
/invocations) on a loopback port, started from the endpoint plan's container environment with the built artifact
where SageMaker mounts /opt/ml/model. This module holds what every such process shares: its lifecycle (start in a
session of its own, wait for /ping, stop the whole process group) and ContainerHost, which local_runtime/serve.py
forwards InvokeEndpoint, the response stream and SageMaker's OpenAI route to.

Each kind says which process it starts (argv), its environment and who answers (answered_by): the real engine
(vllm_container.py), our own server's CPU path (byoc_container.py) or a stand-in (stand_in.py).
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .invoke_rules import INVOKE_TIMEOUT_S
from .relay import Relay, Reply

LOG_TAIL_LINES = 25
# InvokeEndpoint's CustomAttributes header, forwarded to the container and back (botocore sagemaker-runtime model).
CUSTOM_ATTRIBUTES_HEADER = "X-Amzn-SageMaker-Custom-Attributes"
# The header SageMaker names an adapter inference component's adapter with (vllm_container.py says its source).
ADAPTER_HEADER = "X-Amzn-SageMaker-Adapter-Identifier"
# Measured here (2 shared cores): the vLLM engine is ready in 40-115 s for a tiny Qwen3, the transformers-based
# ones in 5-20 s; a busy machine takes longer.
DEFAULT_READY_TIMEOUT_S = 600.0


class ContainerError(Exception):
    """The container could not be started or did not become healthy; the message quotes its log's tail."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_process(process: subprocess.Popen, timeout_s: float) -> None:
    """End a child process: SIGTERM, up to `timeout_s` for it to exit, then SIGKILL (one owner's idiom, for the
    emulator, the demo's local server and the benchmarks' servers)."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def base_environment(home: Path, path: str) -> dict[str, str]:
    """What every container process gets besides its own variables: PATH, HOME, LANG. Nothing of this process's own
    environment (its credentials, its PYTHONPATH) reaches a container."""
    return {"PATH": path, "HOME": str(home), "LANG": "C.UTF-8"}


class ProcessContainer:
    """One container process. Subclasses set `engine` (its name in messages) and implement argv(), environment(home)
    and answered_by(); check_ready() may read the log once /ping answers (vLLM checks its version line)."""

    engine = "container"
    # The container path SageMaker's OpenAI route is forwarded to (None: the container has no OpenAI server; the
    # route's chat body goes to /invocations, as the container takes chat there).
    chat_path: str | None = "/v1/chat/completions"

    def __init__(self, model_dir: Path, workdir: Path, *, ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S) -> None:
        self.model_dir = Path(model_dir).resolve()
        self.workdir = Path(workdir)
        self.ready_timeout_s = ready_timeout_s
        self.port = free_port()
        self.log_path = self.workdir / f"{self.engine.lower().replace(' ', '-')}.log"
        self.process: subprocess.Popen | None = None
        self.ready_s: float | None = None
        # The line of the container's own log that says what it is (an engine's version line), for the reports.
        self.version_line: str | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def argv(self) -> list[str]:
        raise NotImplementedError

    def environment(self, home: Path) -> dict[str, str]:
        raise NotImplementedError

    def answered_by(self) -> str:
        raise NotImplementedError

    def check_ready(self) -> None:
        """Called once /ping answers 200; raise ContainerError (via self._failed) if the process is not what it
        should be."""

    def preflight(self) -> None:
        """Refuse to start, with ContainerError naming what is missing."""
        if not (self.model_dir / "config.json").is_file() and not any(self.model_dir.glob("*/config.json")):
            raise ContainerError(f"{self.model_dir}: no config.json; the artifact is not built (model_build build)")

    def start(self) -> None:
        self.preflight()
        home = self.workdir / "home"
        home.mkdir(parents=True, exist_ok=True)
        env = self.environment(home)
        with open(self.log_path, "wb") as log:
            # A session of its own: stop() ends the container's worker processes with it.
            self.process = subprocess.Popen(
                self.argv(),
                cwd=self.workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:]) or "(no log)"

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
                raise self._failed(f"the {self.engine} server exited with code {code} before it answered GET /ping")
            if self._status("GET", "/ping") == 200:
                break
            if time.monotonic() > deadline:
                self.stop()
                raise self._failed(
                    f"the {self.engine} server did not answer GET /ping within {self.ready_timeout_s:.0f} s"
                )
            time.sleep(0.5)
        self.ready_s = time.monotonic() - started
        self.check_ready()
        return self.ready_s

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

    def __enter__(self) -> ProcessContainer:
        self.start()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def call(
        self, path: str, body: bytes, headers: Mapping[str, str | None], timeout_s: float = 300
    ) -> tuple[int, str]:
        """POST to the container from a thread with no event loop (ContainerHost.load's, registering an adapter):
        (status, body text), over relay.py's connection as the doors' calls go."""
        import asyncio

        async def once() -> tuple[int, str]:
            relay = Relay(self.port)
            try:
                reply = await relay.post(path, body, headers, timeout_s)
                return reply.status, (await reply.read(timeout_s)).decode("utf-8", "replace")
            finally:
                relay.close()

        return asyncio.run(once())


class SystemContainer(ProcessContainer):
    """A container process serving a system whose local run (ServingSystem.local) is of this container's kind
    (`local_kind`), from the plan's container environment; another system is refused, naming the ones allowed."""

    local_kind = ""

    def __init__(
        self,
        system: str,
        container_env: Mapping[str, str],
        model_dir: Path,
        workdir: Path,
        *,
        ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S,
    ) -> None:
        super().__init__(model_dir, workdir, ready_timeout_s=ready_timeout_s)
        from systems import all_systems

        allowed = {name: each.local for name, each in all_systems().items() if each.local.kind == self.local_kind}
        if system not in allowed:
            raise ContainerError(
                f"system {system!r} has no {self.engine} container here; allowed: {', '.join(allowed)}"
            )
        self.system = system
        self.local = allowed[system]
        self.container_env = dict(container_env)


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


def _wanted_headers(getheader: Any) -> dict[str, str]:
    """The container's response headers SageMaker passes back: its Content-Type and custom attributes."""
    wanted = {"Content-Type": getheader("content-type"), CUSTOM_ATTRIBUTES_HEADER: getheader(CUSTOM_ATTRIBUTES_HEADER)}
    return {k: v for k, v in wanted.items() if v}


def _streaming_type(kind: str) -> bool:
    return kind.startswith("text/event-stream") or kind.startswith("application/jsonlines")


class ContainerHost:
    """local_runtime/serve.py's host for an endpoint whose container is a local process: starts it in load() (so
    /ping answers 503 meanwhile), and forwards InvokeEndpoint and the response stream to its POST /invocations and
    SageMaker's OpenAI route to its chat path, passing the container's status and body through: ainvoke, astream,
    achat, on the server's event loop over relay.py's kept-alive connections (the one way this runtime talks to a
    container; ProcessContainer.call for the calls made outside a request, such as registering an adapter)."""

    def __init__(self, container: ProcessContainer, adapters: Mapping[str, Path] | None = None) -> None:
        """adapters: adapter inference component -> its extracted files (local_runtime/adapters.py), registered once
        the container is ready (a container with load_adapter: vllm_container.py)."""
        self.container = container
        self.handed_adapters = dict(adapters or {})
        self.model: Any = None
        self.load_error: str | None = None
        self.loaded = threading.Event()
        self.capacity = 1
        self.adapters: dict[str, str] = {}  # adapter inference component -> the name the engine knows it by
        # The socket timeout of each call and of each read of a stream: SageMaker's invoke limit.
        self.timeout_s = INVOKE_TIMEOUT_S
        self._relays: dict[int, Relay] = {}  # event loop -> its kept-alive connections (relay.py)

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
            if container.version_line:
                print(f"container engine: {container.version_line}", flush=True)
            for component, folder in self.handed_adapters.items():
                try:
                    status, text = self.load_adapter(component, folder)
                except OSError as err:
                    raise ContainerError(f"POST /adapters for adapter component {component}: {err}") from None
                if status != 200:
                    raise ContainerError(f"POST /adapters for adapter component {component} answered {status}: {text}")
                print(f"container adapter component {component}: {text}", flush=True)
            self.model = self.container
        except ContainerError as err:
            self.load_error = str(err)
            print(f"container failed: {err}", flush=True)
        finally:
            self.loaded.set()

    def stop(self) -> None:
        self.container.stop()

    def load_adapter(self, component: str, src: Path) -> tuple[int, str]:
        """Hand an adapter inference component's extracted files to the container, by the component's name;
        InvokeEndpoint naming that component then reaches it (invoke's `component`)."""
        load = getattr(self.container, "load_adapter", None)
        if load is None:
            raise ContainerError(f"the {self.container.engine} container loads no LoRA adapters")
        status, text = load(component, src)
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
            f"the {self.container.engine} container did not answer ({type(err).__name__}: {err}); its process "
            f"{state}; log {self.container.log_path}"
        )

    def _headers(
        self, content_type: str | None, accept: str | None, adapter: str | None, custom_attributes: str | None
    ) -> dict[str, str | None]:
        """What SageMaker sends the container besides the body: Content-Type, Accept, the custom attributes
        ("forwarded verbatim", botocore's model) and an adapter component's name (ADAPTER_HEADER)."""
        return {
            "Content-Type": content_type,
            "Accept": accept,
            CUSTOM_ATTRIBUTES_HEADER: custom_attributes,
            ADAPTER_HEADER: self.adapters.get(adapter or ""),
        }

    # The three doors, on the server's event loop (local_runtime/serve.py): kept-alive connections, no worker thread
    # per call or per streamed chunk (relay.py says what that cost).

    def _relay(self) -> Relay:
        import asyncio

        loop = id(asyncio.get_running_loop())
        if loop not in self._relays:
            self._relays[loop] = Relay(self.container.port)
        return self._relays[loop]

    async def _post(self, path: str, body: bytes, headers: Mapping[str, str | None]) -> Reply:
        return await self._relay().post(path, body, headers, self.timeout_s)

    async def ainvoke(
        self,
        body: bytes,
        content_type: str | None,
        accept: str | None,
        component: str | None = None,
        custom_attributes: str | None = None,
    ) -> tuple[int, str, dict[str, str]]:
        """invoke, on the event loop."""
        if (problem := self._not_ready()) is not None:
            return 503, json.dumps({"error": problem}), {}
        try:
            reply = await self._post(
                "/invocations", body, self._headers(content_type, accept, component, custom_attributes)
            )
            text = (await reply.read(self.timeout_s)).decode("utf-8", "replace")
            return reply.status, text, _wanted_headers(reply.header)
        except OSError as err:
            return 500, json.dumps({"error": self._unreachable(err)}), {}

    async def astream(
        self,
        body: bytes,
        content_type: str | None,
        accept: str | None = None,
        component: str | None = None,
        custom_attributes: str | None = None,
    ) -> tuple[int, Any, dict[str, str]]:
        """stream, on the event loop: the reply's bytes as an async iterator."""
        if (problem := self._not_ready()) is not None:
            return 503, json.dumps({"error": problem}), {}
        try:
            reply = await self._post(
                "/invocations", body, self._headers(content_type, accept, component, custom_attributes)
            )
            if reply.status != 200:
                return reply.status, (await reply.read(self.timeout_s)).decode("utf-8", "replace"), {}
        except OSError as err:
            return 500, json.dumps({"error": self._unreachable(err)}), {}
        return 200, reply.chunks(self.timeout_s), _wanted_headers(reply.header)

    async def achat(self, body: bytes, component: str | None = None) -> tuple[int, Any, str]:
        """chat, on the event loop."""
        if (problem := self._not_ready()) is not None:
            return 503, json.dumps({"error": {"message": problem, "type": "service_unavailable"}}), "application/json"
        adapter = self.adapters.get(component or "")
        path = "/invocations" if adapter else (self.container.chat_path or "/invocations")
        try:
            reply = await self._post(path, body, {"Content-Type": "application/json", ADAPTER_HEADER: adapter})
            kind = reply.header("content-type") or "application/json"
            if reply.status == 200 and _streaming_type(kind):
                return 200, reply.chunks(self.timeout_s), kind
            return reply.status, (await reply.read(self.timeout_s)).decode("utf-8", "replace"), kind
        except OSError as err:
            error = {"error": {"message": self._unreachable(err), "type": "server_error"}}
            return 500, json.dumps(error), "application/json"
