"""Fixtures of the Lambda tests: a stand-in for SageMaker's runtime API on the wire, for the errors the moto
server cannot produce (endpoint not found, ModelError with OriginalStatusCode, throttling, slow answers)."""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from helpers import serve_in_thread


class FakeRuntime:
    """Answers POST /endpoints/<name>/invocations with queued (status, error_type, json_body, delay_s)."""

    def __init__(self):
        self.answers: list[tuple[int, str | None, dict, float]] = []
        self.requests: list[str] = []
        runtime = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                runtime.requests.append(self.path)
                status, error_type, body, delay = runtime.answers[0] if runtime.answers else (200, None, {}, 0)
                if len(runtime.answers) > 1:
                    runtime.answers.pop(0)
                time.sleep(delay)
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    if error_type:
                        self.send_header("x-amzn-ErrorType", error_type)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up (timeout tests)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        serve_in_thread(self.server)


@pytest.fixture(scope="module")
def runtime_server():
    server = FakeRuntime()
    yield server
    server.server.shutdown()
    server.server.server_close()


@pytest.fixture
def wire(runtime_server, monkeypatch):
    runtime_server.answers.clear()
    runtime_server.requests.clear()
    for k, v in {
        "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": runtime_server.url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
    }.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    return runtime_server
