"""byoc_server, the SageMaker container contract of our own images, over real HTTP on localhost.

The server is under test, so the model is a small fake Handler defined here: it echoes what it was given,
and fails on purpose for some prompts. Also: `python -m byoc_server.main` with the image's import layout,
and the `serve` script (uvicorn on a unix socket + nginx on a port) when nginx is installed.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers import BAD_BODIES, EMOJI_BODY, free_port, running, wait_for_ping

from systems.byoc_server.app import create_app
from systems.byoc_server.contract import RequestError
from systems.byoc_server.main import load_handler

REPO = Path(__file__).resolve().parents[2]
SERVER_DIR = REPO / "systems" / "byoc_server"
SECRET = "secret-detail-/opt/ml/model/weights"

FAKE_HANDLER_SOURCE = '''
from pathlib import Path


class FakeHandler:
    """Echoes prompts and max_new_tokens; loads instantly."""

    def load(self, model_dir):
        self.model_dir = Path(model_dir)

    def generate(self, prompts, parameters):
        return [f"{p}|{parameters.max_new_tokens}|{self.model_dir.name}" for p in prompts]
'''


class FakeHandler:
    """Loads when `gate` is set (so tests can see the loading state); echoes prompts and parameters."""

    def __init__(self, gate: threading.Event | None = None, fail_load: bool = False) -> None:
        self.gate = gate or threading.Event()
        if gate is None:
            self.gate.set()
        self.fail_load = fail_load
        self.model_dir: Path | None = None
        self.calls: list[tuple[list[str], object]] = []

    def load(self, model_dir: Path) -> None:
        assert self.gate.wait(30)
        if self.fail_load:
            raise OSError(f"no weights in {model_dir}")
        self.model_dir = model_dir

    def generate(self, prompts: list[str], parameters) -> list[str]:
        self.calls.append((prompts, parameters))
        if prompts[0] == "boom":
            raise RuntimeError(SECRET)
        if prompts[0] == "too long":
            raise RequestError("inputs tokens + parameters.max_new_tokens must be <= 16; got 20")
        if prompts[0] == "wrong count":
            return []
        return [f"{p}|{parameters.max_new_tokens}|{parameters.temperature}" for p in prompts]


@pytest.fixture(scope="module")
def handler() -> FakeHandler:
    return FakeHandler()


@pytest.fixture(scope="module")
def url(handler: FakeHandler, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    app = create_app(handler, tmp_path_factory.mktemp("model"), max_body_bytes=4096)
    with running(app) as base:
        yield base


@pytest.fixture(scope="module")
def url_6mb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The default 6 MB body cap (the `url` server's 4 KB would refuse 200 KB of nesting before the parser); its
    handler's generate fails the test, so a bad body that got past the checks shows."""
    handler = FakeHandler()
    handler.generate = lambda prompts, _: pytest.fail(f"a bad body reached the model: {prompts!r}")  # type: ignore
    with running(create_app(handler, tmp_path_factory.mktemp("model"))) as base:
        yield base


def post(url: str, body: object = None, **kwargs) -> httpx.Response:
    if body is not None:
        kwargs["json"] = body
    return httpx.post(f"{url}/invocations", timeout=10, **kwargs)


# ---- loading ------------------------------------------------------------------------------------------


def test_ping_is_503_while_loading_then_200(tmp_path: Path) -> None:
    gate = threading.Event()
    handler = FakeHandler(gate)
    with running(create_app(handler, tmp_path), ready=False) as base:
        assert wait_for_ping(base, None) == 503
        reply = httpx.get(f"{base}/ping")
        assert reply.status_code == 503 and reply.json() == {"error": "model is loading"}
        early = post(base, {"inputs": "Hello"})
        assert early.status_code == 503 and "loading" in early.json()["error"]
        gate.set()
        wait_for_ping(base, 200)
        assert post(base, {"inputs": "Hello"}).status_code == 200
    assert handler.model_dir == tmp_path


def test_model_dir_defaults_to_sm_model_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SM_MODEL_DIR", str(tmp_path))
    handler = FakeHandler()
    with running(create_app(handler)):
        pass
    assert handler.model_dir == tmp_path
    monkeypatch.delenv("SM_MODEL_DIR")
    assert create_app(FakeHandler()).state.model.model_dir == Path("/opt/ml/model")


def test_load_failure_is_500_on_ping_and_invocations(tmp_path: Path) -> None:
    with running(create_app(FakeHandler(fail_load=True), tmp_path), ready=False) as base:
        wait_for_ping(base, 500)
        error = httpx.get(f"{base}/ping").json()["error"]
        assert error.startswith(f"model failed to load from {tmp_path}: OSError: no weights in")
        assert post(base, {"inputs": "Hello"}).status_code == 503


# ---- good requests ------------------------------------------------------------------------------------


def test_ping(url: str) -> None:
    reply = httpx.get(f"{url}/ping")
    assert reply.status_code == 200 and reply.content == b""


def test_inputs_and_parameters_shape(url: str, handler: FakeHandler) -> None:
    reply = post(url, {"inputs": ["Hello", "World"], "parameters": {"max_new_tokens": 5, "temperature": 0.5}})
    assert reply.status_code == 200 and reply.headers["content-type"] == "application/json"
    assert reply.json() == [{"generated_text": "Hello|5|0.5"}, {"generated_text": "World|5|0.5"}]
    prompts, parameters = handler.calls[-1]
    assert prompts == ["Hello", "World"] and parameters.max_new_tokens == 5


def test_single_input_shape(url: str) -> None:
    reply = post(url, {"input": "Hello"})
    assert reply.status_code == 200
    assert reply.json() == [{"generated_text": "Hello|64|1.0"}]  # the contract's defaults


def test_json_with_charset_and_accept_any(url: str) -> None:
    reply = post(
        url, content=b'{"inputs": "Hi"}', headers={"content-type": "application/json; charset=utf-8", "accept": "*/*"}
    )
    assert reply.status_code == 200 and reply.json() == [{"generated_text": "Hi|64|1.0"}]


def test_return_full_text_puts_the_prompt_first(url: str) -> None:
    """request_contract's return_full_text: the server prefixes each continuation with its prompt."""
    reply = post(url, {"inputs": ["Hi", "Yo"], "parameters": {"return_full_text": True}})
    assert reply.status_code == 200 and reply.json() == [
        {"generated_text": "HiHi|64|1.0"},
        {"generated_text": "YoYo|64|1.0"},
    ]


def test_handler_may_refuse_with_400(url: str) -> None:
    reply = post(url, {"inputs": "too long"})
    assert reply.status_code == 400
    assert reply.json() == {
        "error": "inputs tokens + parameters.max_new_tokens must be <= 16; got 20",
        "error_type": "validation",
    }


# ---- errors -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"inputs": "Hi", "parameters": {"max_new_tokens": 0}},
            "parameters.max_new_tokens must be between 1 and 512, got 0",
        ),
        (
            {"inputs": "Hi", "parameters": {"temperature": 9}},
            "parameters.temperature must be between 0.01 and 2, got 9",
        ),
        (
            {"inputs": "Hi", "parameters": {"max_tokens": 3}},
            "unknown parameters ['max_tokens']; allowed parameters are ['do_sample', 'max_new_tokens'",
        ),
        ({"inputs": "Hi", "extra": 1}, "unknown request keys ['extra']; allowed keys are ['inputs', 'parameters']"),
        ({"parameters": {}}, "inputs is required"),
        ({"input": "Hi", "inputs": "Hi"}, "give either 'input' or 'inputs', not both"),
        ({"inputs": ""}, 'inputs must be a non-empty string, got ""'),
        ({"inputs": ["a"] * 9}, "inputs must be a list of 1 to 8 strings, got a list of 9"),
        (["Hi"], "request must be a JSON object with keys ['inputs', 'parameters'], got array"),
    ],
)
def test_bad_request_is_400_with_its_message(url: str, body: object, message: str) -> None:
    reply = post(url, body)
    assert reply.status_code == 400
    assert message in reply.json()["error"]


def test_invalid_json_is_400(url: str) -> None:
    reply = post(url, content=b'{"inputs": ', headers={"content-type": "application/json"})
    assert reply.status_code == 400 and reply.json()["error"].startswith("request body is not valid JSON: ")
    reply = post(url, content=b'"\xff"', headers={"content-type": "application/json"})
    assert reply.status_code == 400
    assert reply.json() == {
        "error": "request body is not valid UTF-8: invalid start byte at byte 1",
        "error_type": "validation",
    }


@pytest.mark.parametrize(("body", "needles"), [c[1:] for c in BAD_BODIES], ids=[c[0] for c in BAD_BODIES])
def test_bad_bodies_are_400_with_a_message_never_500(url_6mb: str, body: bytes, needles: list[str]) -> None:
    reply = post(url_6mb, content=body, headers={"content-type": "application/json"})
    assert reply.status_code == 400, reply.text
    for needle in needles:
        assert needle in reply.json()["error"], (needle, reply.json()["error"])


def test_a_surrogate_pair_is_one_character_and_passes(url: str) -> None:
    reply = post(url, content=EMOJI_BODY, headers={"content-type": "application/json"})
    assert reply.status_code == 200 and reply.json() == [{"generated_text": "smile \N{GRINNING FACE}|2|1.0"}]


def test_other_content_type_is_415(url: str) -> None:
    reply = post(url, content=b"Hello", headers={"content-type": "text/plain"})
    assert reply.status_code == 415
    assert reply.json() == {"error": "content type 'text/plain' is not supported; allowed: application/json"}


def test_accept_without_json_is_406(url: str) -> None:
    reply = post(url, {"inputs": "Hi"}, headers={"accept": "text/csv"})
    assert reply.status_code == 406
    assert reply.json() == {"error": "accept 'text/csv' is not supported; the reply is application/json"}


def test_body_over_the_cap_is_413(url: str) -> None:
    reply = post(url, {"inputs": "x" * 5000})
    assert reply.status_code == 413
    assert reply.json()["error"].startswith("request body has ") and reply.json()["error"].endswith("the limit is 4096")


def test_chunked_body_over_the_cap_is_413(url: str) -> None:
    def chunks() -> Iterator[bytes]:  # no content-length: the server counts as the body arrives
        yield b'{"inputs": "'
        for _ in range(10):
            yield b"x" * 1000
        yield b'"}'

    reply = post(url, content=chunks(), headers={"content-type": "application/json"})
    assert reply.status_code == 413
    assert reply.json() == {"error": "request body exceeds 4096 bytes; the limit is 4096"}


def test_handler_exception_is_500_without_details(url: str, caplog: pytest.LogCaptureFixture) -> None:
    reply = post(url, {"inputs": "boom"})
    assert reply.status_code == 500
    error = reply.json()["error"]
    assert re.fullmatch(r"generation failed \(RuntimeError\); see the container log, request id [0-9a-f]{12}", error)
    assert SECRET not in reply.text and "Traceback" not in reply.text
    assert SECRET in caplog.text  # the detail goes to the log (CloudWatch)


def test_handler_wrong_result_count_is_500(url: str) -> None:
    reply = post(url, {"inputs": "wrong count"})
    assert reply.status_code == 500 and reply.json()["error"].startswith("generation failed (TypeError)")


def test_unknown_path_and_method(url: str) -> None:
    assert httpx.get(f"{url}/invocations").status_code == 405
    assert httpx.get(f"{url}/docs").status_code == 404


# ---- main.py and serve --------------------------------------------------------------------------------


def test_load_handler_errors() -> None:
    with pytest.raises(ValueError, match=r"must look like package.module:ClassName"):
        load_handler("no_colon")
    with pytest.raises(ValueError, match=r"module 'no_such_module_xyz' not found"):
        load_handler("no_such_module_xyz:Handler")
    with pytest.raises(ValueError, match=r"module 'json' has no attribute 'Handler'"):
        load_handler("json:Handler")
    with pytest.raises(ValueError, match=r"JSONDecoder has no load\(\) method"):
        load_handler("json:JSONDecoder")


@pytest.fixture(scope="module")
def program_dir() -> Iterator[Path]:
    """The image's /opt/program layout: byoc_server/ and the handler module side by side. World-readable
    (nginx workers run as another user), hence not under pytest's 0700 tmp dir."""
    root = Path(tempfile.mkdtemp(prefix="byoc-test-"))
    root.chmod(0o755)
    shutil.copytree(SERVER_DIR, root / "byoc_server", ignore=shutil.ignore_patterns("__pycache__"))
    for contract in ("request_contract.py", "chat_contract.py"):  # beside byoc_server/, as the images hold them
        shutil.copyfile(SERVER_DIR.parent.parent / contract, root / contract)
    (root / "fake_handler.py").write_text(FAKE_HANDLER_SOURCE)
    (root / "model").mkdir()
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _child_env(program_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RANK", "SM_MODEL_DIR")}
    return {**env, "PYTHONPATH": str(program_dir), "SM_MODEL_DIR": str(program_dir / "model"), **extra}


def _stop(proc: subprocess.Popen) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the group this test started
        raise


def test_main_runs_the_handler_in_the_image_layout(program_dir: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "byoc_server.main",
            "--handler",
            "fake_handler:FakeHandler",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=program_dir,
        env=_child_env(program_dir),
        start_new_session=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for_ping(base, 200)
        assert post(base, {"input": "Hello"}).json() == [{"generated_text": "Hello|64|model"}]
    finally:
        # uvicorn shuts down gracefully, then re-raises SIGTERM (recent releases): both mean a clean stop
        assert _stop(proc) in (0, -signal.SIGTERM)


def test_main_refuses_a_bad_handler(program_dir: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "byoc_server.main", "--handler", "fake_handler:Missing"],
        cwd=program_dir,
        env=_child_env(program_dir),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "error: --handler 'fake_handler:Missing': module 'fake_handler' has no attribute 'Missing'" in result.stderr


@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed (apt-get install nginx-light)")
def test_serve_runs_app_behind_nginx_and_stops_on_sigterm(program_dir: Path) -> None:
    """The `serve` entrypoint: uvicorn on a unix socket, nginx.conf on a port (8080 in the image), SIGTERM stops both."""
    port = free_port()
    runtime = Path(tempfile.mkdtemp(prefix="byoc-run-"))
    runtime.chmod(0o777)
    try:
        conf = (SERVER_DIR / "nginx.conf").read_text()
        assert (
            "listen 8080 deferred;" in conf
            and "client_max_body_size 6m;" in conf
            and "proxy_read_timeout 3600s;" in conf
        )
        conf = conf.replace("listen 8080", f"listen 127.0.0.1:{port}").replace("/tmp/", f"{runtime}/")
        (runtime / "nginx.conf").write_text(conf)
        env = _child_env(
            program_dir,
            BYOC_PROGRAM_DIR=str(program_dir),
            BYOC_HANDLER="fake_handler:FakeHandler",
            BYOC_NGINX_CONF=str(runtime / "nginx.conf"),
            BYOC_SOCKET=str(runtime / "byoc_server.sock"),
            LOG_LEVEL="warning",
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        )
        proc = subprocess.Popen(["bash", str(SERVER_DIR / "serve"), "serve"], env=env, start_new_session=True)
        try:
            base = f"http://127.0.0.1:{port}"
            wait_for_ping(base, 200)
            reply = post(base, {"inputs": ["a", "b"], "parameters": {"max_new_tokens": 3}})
            assert reply.json() == [{"generated_text": "a|3|model"}, {"generated_text": "b|3|model"}]
            assert httpx.get(f"{base}/other").status_code == 404  # nginx answers only the contract's paths
            big = post(base, content=b"x" * (7 * 1024 * 1024), headers={"content-type": "application/json"})
            assert big.status_code == 413  # nginx's client_max_body_size
            nginx_pid = int((runtime / "nginx.pid").read_text())
        finally:
            status = _stop(proc)
        assert status == 0
        with pytest.raises(ProcessLookupError):
            os.kill(nginx_pid, 0)
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{port}/ping", timeout=2)
    finally:
        shutil.rmtree(runtime, ignore_errors=True)
