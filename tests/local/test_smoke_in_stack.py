"""The smoke test inside the endpoint stack, with the CDK CLI alone (no make, no workstation code): on the emulator, a
model whose smoke test fails never reports the deploy successful, a healthy one does, and the smoke check's log
group shows it ran (stacks/smoke_check.py, endpoint_runtime/smoke_check.py, local_emulator/server.py).

The emulator implements no stack rollback, so the failed stack ends CREATE_FAILED (what CloudFormation reports with
rollback disabled); that CloudFormation rolls a stack back when a custom resource answers FAILED is its documented
behaviour, checked on the template in tests/stacks/test_smoke_check_stack.py and written down in docs/design/guards.md.
"""

from __future__ import annotations

import subprocess
import sys

import boto3
import endpoint_answers
import pytest
import yaml
from helpers import ROOT, synthesize
from hermetic import subprocess_env

from local_emulator import moto_server
from local_emulator.inventory import function_runs

pytestmark = [pytest.mark.emulator, pytest.mark.e2e]

CDK = str(ROOT / "node_modules" / ".bin" / "cdk")
GOOD = [{"generated_text": " Paris, the capital."}]
WRONG = {"unexpected": "shape"}


def _config(model: str) -> dict:
    return {
        "project": "smk",
        "environments": {
            "emu": {
                "account": moto_server.EMULATOR_ACCOUNT,
                "region": moto_server.EMULATOR_REGION,
                "retain_data": False,
                "emulator": True,
            }
        },
        "endpoints": [
            {
                "name": "tiny",
                "system": "hf-fastload",
                "model": model,
                "dtype": "fp16",
                "instance_type": "ml.m5.xlarge",
                "instance_count": 1,
            }
        ],
    }


def _cdk(args: list[str], assembly, emulator) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CDK, *args, "--no-notices", "--app", str(assembly)],
        cwd=ROOT,
        env=subprocess_env(**emulator.client_env()),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_plain_cdk_deploy_fails_on_a_failed_smoke_test_and_succeeds_on_a_healthy_endpoint(tmp_path, tiny_models):
    from deployment import load_config
    from model_build.cli import build_endpoint

    config, build_root = tmp_path / "smk.yaml", tmp_path / "build"
    config.write_text(yaml.safe_dump(_config(str(tiny_models["gpt2"]))))
    build_endpoint(load_config(config, "emu").endpoint("tiny"), build_root / "tiny", progress=False)
    assembly = synthesize(config, "emu", tmp_path / "cdk.out", build_root=build_root, allow_unbuilt=False).outdir
    # What the endpoint answers the smoke check: a loopback server the emulator's functions reach through
    # AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME (the emulator runs no model).
    reply: dict[str, object] = {"body": WRONG}
    port = moto_server.free_port()
    answers = endpoint_answers.serve(
        {"AWS_ENDPOINT_URL": f"http://localhost:{port}", "AWS_REGION": moto_server.EMULATOR_REGION},
        lambda body: reply["body"],
    )
    emulator = moto_server.start(
        tmp_path / "moto",
        port=port,
        lambda_env={"AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": f"http://127.0.0.1:{answers.server_address[1]}"},
    )
    try:
        for args in (
            ["bootstrap", f"aws://{moto_server.EMULATOR_ACCOUNT}/{moto_server.EMULATOR_REGION}"],
            ["deploy", "smk-emu-artifacts", "--exclusively", "--require-approval", "never"],
        ):
            done = _cdk(args, assembly, emulator)
            assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        publish = subprocess.run(
            [sys.executable, "-m", "model_build", "publish", "--config", str(config), "--env", "emu"]
            + ["--build-root", str(build_root), "--endpoint", "tiny"],
            cwd=ROOT,
            env=subprocess_env(**emulator.client_env()),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert publish.returncode == 0, publish.stdout + publish.stderr

        deploy = ["deploy", "smk-emu-tiny", "--exclusively", "--require-approval", "never"]
        failed = _cdk(deploy, assembly, emulator)
        said = failed.stdout + failed.stderr
        assert failed.returncode != 0 and "smk-emu-tiny failed" in said, said[-3000:]
        assert "smoke test of endpoint" in said and "FAIL response" in said, said[-3000:]
        with emulator.activated():
            session = boto3.Session(region_name=emulator.region)
            cfn = session.client("cloudformation")
            assert cfn.describe_stacks(StackName="smk-emu-tiny")["Stacks"][0]["StackStatus"] == "CREATE_FAILED"
            [runs] = [
                r
                for r in function_runs(session.client("lambda"), session.client("logs"), prefix="smk-emu-tiny-")
                if "SmokeCheck" in r.name
            ]
            assert runs.runs == 1 and '"ok": false' in runs.last_line

        assert _cdk(["destroy", "smk-emu-tiny", "--force"], assembly, emulator).returncode == 0
        reply["body"] = GOOD
        healthy = _cdk(deploy, assembly, emulator)
        assert healthy.returncode == 0, (healthy.stdout + healthy.stderr)[-3000:]
        with emulator.activated():
            session = boto3.Session(region_name=emulator.region)
            stack = session.client("cloudformation").describe_stacks(StackName="smk-emu-tiny")["Stacks"][0]
            assert stack["StackStatus"] == "CREATE_COMPLETE"
            [runs] = [
                r
                for r in function_runs(session.client("lambda"), session.client("logs"), prefix="smk-emu-tiny-")
                if "SmokeCheck" in r.name
            ]
            assert runs.runs == 1 and '"request": "Create", "ok": true' in runs.last_line
    finally:
        emulator.stop()
        answers.shutdown()
