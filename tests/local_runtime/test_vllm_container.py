"""The vllm system's local container (local_runtime/vllm_container.py): its argv and environment as the AWS vLLM
container would get them, and its refusals, each naming what is wrong (the real engine from .venv-vllm where the
refusal comes from it). The whole path on the real engine: tests/local/test_vllm_scenario.py."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from local_runtime import LocalContainerError, container_host
from local_runtime.vllm_container import (
    LOCAL_ENGINE_VERSION,
    ROOT,
    ContainerError,
    VllmContainer,
    container_environment,
)

# slow: the vLLM server started (make test-fast leaves them out)
pytestmark = pytest.mark.slow

ENV = {"SM_VLLM_MAX_MODEL_LEN": "256", "SM_VLLM_SERVED_MODEL_NAME": "m", "SM_VLLM_ENFORCE_EAGER": "true"}


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    path = tmp_path / "artifact"
    path.mkdir()
    (path / "config.json").write_text("{}")
    return path


@pytest.fixture
def vllm_venv() -> Path:
    venv = ROOT / ".venv-vllm"
    assert (venv / ".installed").is_file(), f"{venv} is missing: run `make vllm-env`"
    return venv


def test_argv_is_the_entrypoints_with_the_artifact_for_opt_ml_model_on_a_local_port(tmp_path, model_dir):
    container = VllmContainer(ENV, model_dir, tmp_path)
    argv = container.argv()
    assert argv[:3] == [str(ROOT / ".venv-vllm" / "bin" / "python"), "-m", "vllm.entrypoints.openai.api_server"]
    assert argv[3:] == [
        "--port",
        "8080",
        "--model",
        str(model_dir),
        "--enforce-eager",
        "--max-model-len",
        "256",
        "--served-model-name",
        "m",
        "--port",
        str(container.port),
        "--host",
        "127.0.0.1",
    ]


def test_the_cpu_engine_runs_eager_after_the_plans_own_arguments(tmp_path, model_dir):
    """CPU_ARGS follow the entrypoint's argv (the plan's own flags kept as the DLC builds them) and come once."""
    plain = VllmContainer({"SM_VLLM_MAX_MODEL_LEN": "256"}, model_dir, tmp_path).argv()
    assert plain[3:] == ["--port", "8080", "--model", str(model_dir), "--max-model-len", "256", "--enforce-eager"] + [
        "--port",
        plain[-3],
        "--host",
        "127.0.0.1",
    ]
    assert VllmContainer(ENV, model_dir, tmp_path).argv().count("--enforce-eager") == 1


def test_environment_is_built_from_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "from-this-process")
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    env = container_environment(ENV, tmp_path)
    assert "AWS_SECRET_ACCESS_KEY" not in env and "PYTHONPATH" not in env
    assert env["HOME"] == str(tmp_path) and env["SM_VLLM_SERVED_MODEL_NAME"] == "m"
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "1" and env["HF_HUB_OFFLINE"] == "1"
    assert env["PATH"].startswith(str(ROOT / ".venv-vllm" / "bin"))
    assert os.environ["AWS_SECRET_ACCESS_KEY"] == "from-this-process"


def test_refuses_without_its_venv_naming_the_make_target(tmp_path, model_dir):
    with pytest.raises(ContainerError, match=r"does not exist: .* run `make vllm-env`"):
        VllmContainer(ENV, model_dir, tmp_path, venv=tmp_path / "no-venv").start()


def test_refuses_an_unbuilt_artifact(tmp_path, vllm_venv):
    with pytest.raises(ContainerError, match=r"no config.json; the artifact is not built"):
        VllmContainer(ENV, tmp_path / "empty", tmp_path, venv=vllm_venv).start()


def test_refuses_streamed_weights_locally(tmp_path):
    system = SimpleNamespace(name="vllm", streams_weights=lambda engine: True)
    plan = SimpleNamespace(name="e", spec=None, engine=None, system=system)
    with pytest.raises(LocalContainerError, match="stream_weights_from_s3: value True cannot run locally"):
        container_host(plan, tmp_path, tmp_path / "work")


def test_an_engine_that_exits_is_reported_with_its_log(tmp_path, model_dir, vllm_venv):
    """vLLM's own argument parser refuses the flag; the error quotes it from the log, the process is gone."""
    container = VllmContainer({"SM_VLLM_NO_SUCH_FLAG": "1"}, model_dir, tmp_path, venv=vllm_venv)
    container.start()
    with pytest.raises(ContainerError, match=r"(?s)exited with code \d+ before it answered GET /ping.*--no-such-flag"):
        container.wait_ready()
    assert container.process is not None and container.process.returncode not in (None, 0)


def test_the_deadline_stops_the_engine_and_quotes_its_log(tmp_path, model_dir, vllm_venv):
    container = VllmContainer(ENV, model_dir, tmp_path, venv=vllm_venv, ready_timeout_s=3)
    container.start()
    started = time.monotonic()
    with pytest.raises(ContainerError, match=r"did not answer GET /ping within 3 s; the last lines of its log"):
        container.wait_ready()
    assert time.monotonic() - started < 60
    assert container.process is not None and container.process.returncode is not None
    with pytest.raises(ProcessLookupError):  # nothing of its process group is left
        os.killpg(container.process.pid, 0)


# An engine of another release, as `python -m vllm.entrypoints.openai.api_server ... --port N` would start it: it logs
# the version line vLLM logs and answers GET /ping on that port (a real loopback server, not vLLM).
OTHER_RELEASE_SERVER = """
import http.server, sys
port = int(sys.argv[len(sys.argv) - sys.argv[::-1].index("--port")])  # the last --port, as argparse keeps
print("INFO vLLM server version 9.9.9, serving model m", flush=True)
class Ping(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", port), Ping).serve_forever()
"""


def test_refuses_an_engine_of_another_release_than_requirements_vllm_pins(tmp_path, model_dir):
    """The version check reads the local pin (requirements-vllm.txt), which may lag the image's engine
    (docs/design/engine-upgrades.md): an engine that logs another version is stopped and named."""
    import sys

    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (tmp_path / "server.py").write_text(OTHER_RELEASE_SERVER)
    python = venv / "bin" / "python"
    python.write_text(f'#!/bin/sh\nshift 2\nexec {sys.executable} {tmp_path / "server.py"} "$@"\n')
    python.chmod(0o755)
    assert (ROOT / "requirements-vllm.txt").read_text().count(f"\nvllm-cpu=={LOCAL_ENGINE_VERSION}\n") == 1
    container = VllmContainer(ENV, model_dir, tmp_path, venv=venv, ready_timeout_s=30)
    container.start()
    with pytest.raises(
        ContainerError, match=rf"the engine says it is vLLM 9\.9\.9; requirements-vllm\.txt pins {LOCAL_ENGINE_VERSION}"
    ):
        container.wait_ready()
    assert container.process is not None and container.process.returncode is not None


def test_a_container_that_stopped_answering_is_a_500_naming_it(tmp_path, model_dir):
    """What the local server answers when the engine went away mid-run: its error, not an unhandled exception."""
    from local_runtime.vllm_container import ContainerHost

    container = VllmContainer(ENV, model_dir, tmp_path)  # never started: nothing listens on its port
    host = ContainerHost(container)
    host.model = container
    host.loaded.set()
    status, body, _ = asyncio.run(host.ainvoke(b"{}", "application/json", None))
    assert status == 500 and "the vLLM container did not answer (ConnectionRefusedError" in body
    assert str(container.log_path) in body
    assert asyncio.run(host.astream(b"{}", "application/json"))[0] == 500
    status, body, media = asyncio.run(host.achat(b"{}"))
    assert (status, media) == (500, "application/json") and '"type": "server_error"' in body
