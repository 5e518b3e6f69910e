"""F3 and F5 of the 2026-11-27 reliability probe, on the real gate against the local server and the tiny GPT-2
built as hf-fastload (a system that does not stream):
- F5: such a system had no latency objective at all (TTFT and ITL need a stream), so a slow endpoint passed any
  gate; `p95_e2e_ms` (request sent -> reply complete) is judged on every system;
- F3: each gate request could wait the load test's 120 s; it now waits at most the endpoint's own invocation
  timeout (deployment.plan EndpointPlan.invocation_timeout_s: 60 s for a real-time endpoint, SageMaker's limit),
  recorded in the kept result."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from helpers import running

from deployment import load_config
from load_testing.gate import run_gate

ENDPOINT = "tiny-gpt2"
WORKLOAD = {"requests": 3, "input_tokens": {"mean": 8}, "output_tokens": {"mean": 4}, "warmup_requests": 1}


@pytest.fixture(autouse=True)
def _no_full_collections(monkeypatch: pytest.MonkeyPatch) -> None:
    """As tests/load_testing/test_slo_gate.py: the load test's gc.collect() costs most of a second in a process
    holding torch's heap and measures nothing the gate decides on."""
    import gc

    monkeypatch.setattr(gc, "collect", lambda generation=2: 0)


@pytest.fixture(autouse=True)
def _aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials and a region for the runtime client (the local server checks no signature)."""
    for k, v in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
    }.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)


@pytest.fixture(scope="module")
def server(gpt2_artifact: Path):
    from local_runtime.serve import create_app

    with running(create_app(gpt2_artifact, endpoint_name=ENDPOINT)) as url:
        yield url


def _environment_plan(tmp_path: Path, model: Path, slo: dict, build_root: Path):
    endpoint = {
        "name": ENDPOINT,
        "system": "hf-fastload",
        "model": str(model),
        "instance_type": "ml.m5.xlarge",
        "dtype": "fp16",
        "max_shard_size": "300KB",
        "slo": slo,
    }
    path = tmp_path / f"endpoints-{len(list(tmp_path.iterdir()))}.yaml"
    path.write_text(yaml.safe_dump({"endpoints": [endpoint]}))
    return load_config(path, build_root=build_root)


def test_end_to_end_latency_is_judged_on_a_system_that_does_not_stream(
    server, gpt2_artifact, tiny_models, tmp_path
) -> None:
    build_root = gpt2_artifact.parent
    slo = {"concurrency": 1, "max_error_rate": 0, "workload": WORKLOAD}
    met = _environment_plan(tmp_path, tiny_models["gpt2"], {**slo, "p95_e2e_ms": 60_000}, build_root)
    gate = run_gate(met, met.plan(ENDPOINT), endpoint_url=server, results_root=tmp_path / "r", keep_in_s3=False)
    assert gate.ok and gate.result["target"]["stream"] is False, gate.lines()
    assert gate.result["workload"]["request_timeout_s"] == met.plan(ENDPOINT).invocation_timeout_s == 60

    missed = _environment_plan(tmp_path, tiny_models["gpt2"], {**slo, "p95_e2e_ms": 0.001}, build_root)
    gate = run_gate(missed, missed.plan(ENDPOINT), endpoint_url=server, results_root=tmp_path / "r", keep_in_s3=False)
    assert not gate.ok
    [miss] = gate.misses
    p95 = gate.result["levels"][0]["e2e_ms"]["p95"]
    assert miss == f"p95 end-to-end latency at concurrency 1: {p95:.4g} ms, max 0.001 ms"
