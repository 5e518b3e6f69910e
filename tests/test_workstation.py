"""`make deploy` / `make destroy` against the local emulator: preflight, build, publish, deploy, smoke, destroy."""

from __future__ import annotations

import os
import subprocess

import boto3
import pytest
from conftest import ROOT

from local_emulator import moto_server
from local_emulator.inventory import leftovers

pytestmark = pytest.mark.emulator

GOOD_REPLY = [{"generated_text": " Paris."}]


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    emulator = moto_server.start(tmp_path_factory.mktemp("moto"))
    yield emulator
    emulator.stop()


def make(target: str, emulator: moto_server.Emulator) -> subprocess.CompletedProcess:
    env = {**os.environ, **emulator.client_env(), "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        ["make", "--no-print-directory", target, "CONFIG=config/local.yaml", "ENV=local"],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )


def test_make_deploy_then_destroy_on_the_emulator(emulator):
    emulator.set_invoke_results([GOOD_REPLY])  # moto never runs a model: the smoke test gets this answer
    deployed = make("deploy", emulator)
    assert deployed.returncode == 0, (deployed.stdout + deployed.stderr)[-5000:]
    out = deployed.stdout
    steps = [line for line in out.splitlines() if line.startswith("==> ")]
    assert [s.split()[1] for s in steps][:1] == ["preflight"]
    order = [s for s in ("==> cdk synth", "==> cdk deploy llm-endpoints-local-artifacts", "==> model_build publish tiny-gpt2",
                         "==> preflight: artifacts published", "==> cdk deploy llm-endpoints-local-tiny-gpt2",
                         "==> smoke test tiny-gpt2") if s in out]
    assert len(order) == 6 and [out.index(s) for s in order] == sorted(out.index(s) for s in order)
    assert "PASS  response" in out and "PASS  config" in out
    with emulator.activated():
        session = boto3.Session(region_name=emulator.region)
        assert len(leftovers(session, stack_prefix="llm-endpoints-")["sagemaker endpoints"]) == 1

    destroyed = make("destroy", emulator)
    assert destroyed.returncode == 0, (destroyed.stdout + destroyed.stderr)[-5000:]
    with emulator.activated():
        left = {k: v for k, v in leftovers(boto3.Session(region_name=emulator.region), stack_prefix="llm-endpoints-").items() if v}
    assert left == {}


def test_make_deploy_stops_at_the_first_failed_preflight_check(emulator, tmp_path):
    """Credentials of another account: the deploy stops before building or deploying anything."""
    config = tmp_path / "other-account.yaml"
    config.write_text((ROOT / "config" / "local.yaml").read_text().replace('account: "123456789012"', 'account: "111122223333"'))
    env = {**os.environ, **emulator.client_env(), "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(
        ["make", "--no-print-directory", "deploy", f"CONFIG={config}", "ENV=local"],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )
    assert result.returncode != 0
    assert "preflight failed" in result.stderr and "111122223333" in result.stderr
    assert "Traceback" not in result.stderr and "==> cdk" not in result.stdout
