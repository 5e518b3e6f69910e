"""The SLO gate against failing endpoints (reliability probes, "Faults and data safety": F1, F3, F4): an endpoint
failing 3 requests in 4 misses even when `max_error_rate` is not given (a default budget), a hung endpoint is cut
at the gate's deadline and misses, and infinite or not-a-number values are refused when the config loads.

The failing endpoints are a stand-in: a small HTTP server speaking sagemaker-runtime's InvokeEndpoint (POST
/endpoints/<name>/invocations) that fails or hangs on purpose; the real local server cannot be made to."""

from __future__ import annotations

import http.server
import itertools
import json
import threading
import time
from pathlib import Path

import pytest
import yaml
from helpers import serve_in_thread

from deployment import load_config
from endpoint_config import ConfigError
from load_testing.gate import run_gate

# slow: gates against failing and hanging runtimes (make test-fast leaves them out)
pytestmark = pytest.mark.slow

WORKLOAD = {"requests": 8, "input_tokens": {"mean": 8}, "output_tokens": {"mean": 4}, "warmup_requests": 0}


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
    }.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)


def stand_in(behaviour: str):
    """A stand-in sagemaker-runtime: "fail-3-of-4" answers 500 to 3 requests in 4 and a reply to the 4th; "hang"
    accepts and never answers (until the fixture ends)."""
    counter = itertools.count()
    release = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if behaviour == "hang":
                release.wait(60)
                return
            if next(counter) % 4:
                body, status = json.dumps({"message": "stand-in failure"}).encode(), 500
            else:
                body, status = json.dumps([{"generated_text": "one two three four"}]).encode(), 200
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = serve_in_thread(server)
    return server, thread, release


@pytest.fixture
def endpoint(request):
    server, thread, release = stand_in(request.param)
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        release.set()
        server.shutdown()
        server.server_close()
        thread.join(10)


def config(tmp_path: Path, slo: dict) -> Path:
    path = tmp_path / "endpoints.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "endpoints": [
                    {
                        "name": "chat",
                        "system": "hf-fastload",
                        "model": "gpt2",
                        "instance_type": "ml.m5.xlarge",
                        "artifact_hash": "a" * 64,
                        "slo": slo,
                    }
                ]
            }
        )
    )
    return path


@pytest.mark.parametrize("endpoint", ["fail-3-of-4"], indirect=True)
def test_a_throughput_only_gate_misses_an_endpoint_failing_most_requests(endpoint, tmp_path, aws_env):
    """F1: the objectives name throughput only; the gate used to PASS with 'error rate 0.75' printed."""
    environment_plan = load_config(
        config(tmp_path, {"concurrency": 1, "min_output_tokens_per_s": 0.001, "workload": WORKLOAD})
    )
    gate = run_gate(
        environment_plan,
        environment_plan.plan("chat"),
        endpoint_url=endpoint,
        keep_in_s3=False,
        results_root=tmp_path / "r",
    )
    assert not gate.ok
    [miss] = gate.misses
    assert miss.startswith("error rate (default budget: slo.max_error_rate not given) at concurrency 1: 0.75, max 0.01")


@pytest.mark.parametrize("endpoint", ["hang"], indirect=True)
def test_a_hung_endpoint_is_cut_at_the_gates_deadline(endpoint, tmp_path, aws_env):
    """F3: a gate had no deadline (each request could take 120 s); now the whole run ends by slo.deadline_s."""
    workload = {**WORKLOAD, "warmup_requests": 1}
    environment_plan = load_config(
        config(tmp_path, {"concurrency": 1, "max_error_rate": 0, "deadline_s": 10, "workload": workload})
    )
    started = time.monotonic()
    gate = run_gate(
        environment_plan,
        environment_plan.plan("chat"),
        endpoint_url=endpoint,
        keep_in_s3=False,
        results_root=tmp_path / "r",
    )
    assert time.monotonic() - started < 30
    assert not gate.ok
    assert gate.misses[0].startswith("the load test did not finish within its deadline of 10 s (slo.deadline_s)")


@pytest.mark.parametrize(
    ("where", "value"),
    [
        ({"workload": {"input_tokens": {"mean": 8, "stddev": float("inf")}}}, "inf"),
        ({"max_error_rate": float("nan")}, "nan"),
        ({"p95_ttft_ms": float("inf")}, "inf"),
    ],
)
def test_infinite_and_not_a_number_values_are_refused_at_load(tmp_path, where, value):
    """F4: `input_tokens.stddev: .inf` was accepted and crashed the gate (OverflowError traceback)."""
    slo = {"concurrency": 1, "min_output_tokens_per_s": 1, **where}
    text = config(tmp_path, slo).read_text()
    assert f".{value}" in text  # YAML's own spelling, as a user writes it
    with pytest.raises(ConfigError, match="finite number"):
        load_config(tmp_path / "endpoints.yaml")
