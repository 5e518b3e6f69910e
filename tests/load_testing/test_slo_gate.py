"""The SLO gate (load_testing/gate.py) against the local container-contract server on the tiny GPT-2
artifact: a met objective passes, a missed one refuses with the numbers (`python -m model_build slo-gate`); results
kept per artifact hash, and a regression names the artifact whose result met the objectives. `make deploy` runs the
same gate after its smoke test: tests/local/test_emulator_demo.py (config/local.yaml has an slo:), and the
pipeline's gate step runs it in tests/stacks/test_iam_coverage.py and test_buildspecs.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from helpers import running

from deployment import load_config
from load_testing.gate import run_gate
from local_emulator.moto_server import free_port

ENDPOINT = "tiny-gpt2"
# A few short requests: the tiny model answers each in tens of ms.
WORKLOAD = {"requests": 3, "input_tokens": {"mean": 8}, "output_tokens": {"mean": 4}, "warmup_requests": 1}
MET = {"concurrency": 1, "min_output_tokens_per_s": 0.1, "max_error_rate": 0, "workload": WORKLOAD}
MISSED = {**MET, "min_output_tokens_per_s": 1e6}


@pytest.fixture(autouse=True)
def _no_full_collections(monkeypatch: pytest.MonkeyPatch) -> None:
    """The load test collects garbage before each level (load_testing/loadtest.py run: a pause measured as latency
    otherwise); in this process, which holds torch's heap, each collection costs most of a second and measures
    nothing the gate decides on."""
    import gc

    monkeypatch.setattr(gc, "collect", lambda generation=2: 0)


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


def _config(tmp_path: Path, model: Path, slo: dict, name: str = "endpoints.yaml", **extra) -> Path:
    endpoint = {
        "name": ENDPOINT,
        "system": "hf-fastload",
        "model": str(model),
        "instance_type": "ml.m5.xlarge",
        "dtype": "fp16",
        "max_shard_size": "300KB",
        "slo": slo,
        **extra,
    }
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"endpoints": [endpoint]}))
    return path


@pytest.fixture(scope="module")
def server(gpt2_artifact: Path):
    from local_runtime.serve import create_app

    with running(create_app(gpt2_artifact, endpoint_name=ENDPOINT)) as url:
        yield url


def test_a_met_slo_passes_and_a_missed_one_refuses_with_the_numbers(
    server, gpt2_artifact, tiny_models, tmp_path, aws_env, capsys
):
    """hf-fastload answers whole replies (InvokeEndpoint): throughput and errors are judged, kept under the built
    artifact's hash; the command exits 1 on a miss, naming the measured value and the limit."""
    from model_build.cli import main

    build_root = gpt2_artifact.parent  # the build's manifest names the artifact's content hash
    content_hash = json.loads((gpt2_artifact / "manifest.json").read_text())["content_hash"]
    results = tmp_path / "results"
    environment_plan = load_config(_config(tmp_path, tiny_models["gpt2"], MET), build_root=build_root)
    met = run_gate(
        environment_plan, environment_plan.plan(ENDPOINT), endpoint_url=server, results_root=results, keep_in_s3=False
    )
    assert met.ok, met.lines()
    [level] = met.result["levels"]
    assert (level["concurrency"], level["requests"], level["errors"]) == (1, 3, 0)
    assert met.result["target"]["stream"] is False and level["output_tokens_per_s"] > 0.1
    [kept] = met.kept
    assert Path(kept).parent == results / ENDPOINT / content_hash
    assert json.loads(Path(kept).read_text())["slo_misses"] == []
    assert "PASS  every objective met" in "\n".join(met.lines())

    missed_config = _config(tmp_path, tiny_models["gpt2"], MISSED, "missed.yaml")
    argv = [
        "slo-gate",
        "--config",
        str(missed_config),
        "--endpoint",
        ENDPOINT,
        "--build-root",
        str(build_root),
        "--endpoint-url",
        server,
        "--results",
        str(results),
        "--local-only",
        "--quiet",
    ]
    assert main(argv) == 1
    err = capsys.readouterr().err
    measured = json.loads(sorted((results / ENDPOINT / content_hash).glob("*.json"))[-1].read_text())
    tokens_per_s = measured["levels"][0]["output_tokens_per_s"]
    assert f"MISS  aggregate output tokens/s at concurrency 1: {tokens_per_s:.4g}, min 1e+06" in err
    # the earlier result met other objectives: nothing kept met these
    assert "no earlier result met these objectives" in err and f"artifact {content_hash[:12]}" in err


def test_a_regression_names_the_artifact_whose_result_met_the_objectives(server, tiny_models, tmp_path, aws_env):
    """Artifact A met the objectives; artifact B (here: an endpoint that no longer answers) misses them: the gate
    names A's hash and result, and the change between A and B."""
    results = tmp_path / "results"
    first, second = "a1" * 32, "b2" * 32
    environment_plan = load_config(_config(tmp_path, tiny_models["gpt2"], MET, artifact_hash=first))
    assert run_gate(
        environment_plan, environment_plan.plan(ENDPOINT), endpoint_url=server, results_root=results, keep_in_s3=False
    ).ok
    broken = load_config(_config(tmp_path, tiny_models["gpt2"], MET, "b.yaml", artifact_hash=second))
    gate = run_gate(
        broken,
        broken.plan(ENDPOINT),
        endpoint_url=f"http://127.0.0.1:{free_port()}",
        results_root=results,
        keep_in_s3=False,
    )
    assert gate.misses and gate.misses[0] == "error rate at concurrency 1: 1, max 0"
    assert gate.last_met is not None and gate.last_met.artifact_hash == first
    message = gate.message()
    assert f"regressed since artifact {first[:12]}" in message and "error rate 0" in message
    assert f"the change is between artifact {first[:12]} and {second[:12]}" in message
    assert [p.parent.name for p in sorted((results / ENDPOINT).glob("*/*.json"))] == [first, second]
